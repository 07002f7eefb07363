//! Fleets: one command over several hosts — `--hosts a,b,c`, Ansible inventories (`--hosts
//! @inventory.yml:GROUP`, read into config hosts and groups by [`crate::config::inventory`]), groups from the
//! config (`groups: {edge: [a, b, c]}`, `--hosts @edge`) and `--all-hosts` — for reads,
//! `status` and `batch`, and for changes on hosts listed by name.
//!
//! Decisions:
//! - Hosts are contacted concurrently, at most `--parallel N` at once (default
//!   [`DEFAULT_PARALLEL`]), each over its own connection; every result is labelled with the
//!   host as given, and one host's failure (unreachable, authentication, refusal) never hides
//!   the others' results. Exit 0 only when every host succeeded, otherwise
//!   [`crate::base::error::overall_exit_code`] of the failures.
//! - **Changes act on several hosts only when they are listed by name** (`--hosts a,b`, never a
//!   group or `--all-hosts`: a group grows, and a change must never reach a host nobody
//!   named), one host after another, **each with its own confirmation or approval**: at a
//!   terminal the phrase is asked per host; a phrase given with `--confirm` (or an approval
//!   file) is for one host and is refused with several.
//! - JSON: `{"ok": <all ok>, "op": …, "hosts": [{"host": "a", "target": "user@h:p", "ok":
//!   true, "data": …}, {"host": "dead", "ok": false, "error": {…}}]}`; people get one block
//!   per host and a summary line.
//!
//! This module resolves the selection and runs futures side by side; the CLI decides what
//! each host runs. It uses the config, the context's host resolution and the output module.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::config::Config;

/// Hosts contacted at once when `--parallel` is not given.
pub const DEFAULT_PARALLEL: usize = 8;
/// The most hosts contacted at once.
pub const MAX_PARALLEL: usize = 64;

/// The hosts of one fleet command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    /// The hosts, as given (config names or `user@host[:port]`), without repeats, in order.
    pub hosts: Vec<String>,
    /// Whether every host was listed by name (no `@group`, no `--all-hosts`): only then may a
    /// change act on several hosts.
    pub named: bool,
}

/// The hosts `--hosts LIST` (`a,b,@group`) or `--all-hosts` name; `None` when neither is
/// given (one host, as before).
pub fn select(list: Option<&str>, all: bool, cfg: &Config) -> Result<Option<Fleet>> {
    let mut hosts: Vec<String> = Vec::new();
    let mut named = true;
    let add = |h: &str, hosts: &mut Vec<String>| {
        if !hosts.iter().any(|x| x == h) {
            hosts.push(h.to_string());
        }
    };
    match (list, all) {
        (None, false) => return Ok(None),
        (Some(_), true) => {
            return Err(Error::usage(
                "give either --hosts LIST or --all-hosts, not both",
            ));
        }
        (None, true) => {
            if cfg.hosts.is_empty() {
                return Err(Error::usage(
                    "--all-hosts: the config names no hosts (`hosts:` in config.yaml)",
                ));
            }
            named = false;
            for h in cfg.hosts.keys() {
                add(h, &mut hosts);
            }
        }
        (Some(list), false) => {
            for item in list.split(',').map(str::trim) {
                if item.is_empty() {
                    return Err(Error::usage(format!(
                        "--hosts '{}': an empty host name (expected a,b,c or @group)",
                        crate::base::text::printable(list)
                    )));
                }
                if let Some(group) = item.strip_prefix('@') {
                    named = false;
                    let members = cfg.groups.get(group).ok_or_else(|| {
                        Error::usage(format!(
                            "--hosts: no group '{}' in the config{}",
                            crate::base::text::printable(group),
                            if cfg.groups.is_empty() {
                                " (it has no `groups:`)".to_string()
                            } else {
                                format!(
                                    " (groups: {})",
                                    cfg.groups.keys().cloned().collect::<Vec<_>>().join(", ")
                                )
                            }
                        ))
                    })?;
                    for m in members {
                        add(m, &mut hosts);
                    }
                } else {
                    if !cfg.hosts.contains_key(item) {
                        crate::ssh::split_host(item)?;
                    }
                    add(item, &mut hosts);
                }
            }
        }
    }
    Ok(Some(Fleet { hosts, named }))
}

/// Parse `--parallel N` (1 to [`MAX_PARALLEL`]).
pub fn parse_parallel(text: &str) -> Result<usize> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_PARALLEL).contains(n))
        .ok_or_else(|| {
            Error::usage(format!(
                "invalid --parallel '{}': expected a number of hosts from 1 to {MAX_PARALLEL}",
                crate::base::text::printable(text)
            ))
        })
}

/// A boxed future of one host's work.
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Run `work` (one future per host, built by `start` when a slot is free) with at most
/// `parallel` running at once; the results come back in the order of `hosts`.
pub async fn each<'a, T>(
    hosts: &'a [String],
    parallel: usize,
    start: impl Fn(&'a str) -> HostFuture<'a, T>,
) -> Vec<T> {
    let parallel = parallel.max(1);
    let mut running: Vec<(usize, HostFuture<'a, T>)> = Vec::new();
    let mut results: Vec<Option<T>> = hosts.iter().map(|_| None).collect();
    let mut next = 0;
    loop {
        while running.len() < parallel && next < hosts.len() {
            running.push((next, start(&hosts[next])));
            next += 1;
        }
        if running.is_empty() {
            break;
        }
        std::future::poll_fn(|cx| {
            let mut finished = false;
            running.retain_mut(|(i, f)| match f.as_mut().poll(cx) {
                Poll::Ready(v) => {
                    results[*i] = Some(v);
                    finished = true;
                    false
                }
                Poll::Pending => true,
            });
            if finished {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
    results.into_iter().flatten().collect()
}

/// What one host of a fleet command gave.
#[derive(Debug)]
pub struct HostResult {
    /// The host as given.
    pub host: String,
    /// `user@host:port`, when it could be resolved.
    pub target: Option<String>,
    /// The data and warnings, or the error.
    pub result: Result<(Value, Vec<String>)>,
}

/// The JSON document of a fleet command (see the module docs).
pub fn document(op: &str, results: &[HostResult]) -> Value {
    let hosts = entries(results, |r| json!({"host": r.host, "target": r.target}));
    json!({"ok": results.iter().all(|r| r.result.is_ok()), "op": op, "hosts": hosts})
}

/// One JSON entry per result: `head` (its name fields), then `ok` and `data` (with any
/// `warnings`) or `error`. A fleet's hosts and `--all-nodes`' nodes.
pub fn entries(results: &[HostResult], head: impl Fn(&HostResult) -> Value) -> Vec<Value> {
    results
        .iter()
        .map(|r| {
            let mut h = head(r);
            match &r.result {
                Ok((data, warnings)) => {
                    h["ok"] = json!(true);
                    h["data"] = data.clone();
                    if !warnings.is_empty() {
                        h["warnings"] = json!(warnings);
                    }
                }
                Err(e) => {
                    h["ok"] = json!(false);
                    h["error"] = e.to_json();
                }
            }
            h
        })
        .collect()
}

/// The text for people: one block per host (its heading, then what it gave or its error),
/// then a summary line.
pub fn human(results: &[HostResult], render: impl Fn(&Value) -> String) -> String {
    human_of(results, render, "hosts")
}

/// [`human`] for results of `what` (`hosts`, or `--all-nodes`' `nodes`).
pub fn human_of(results: &[HostResult], render: impl Fn(&Value) -> String, what: &str) -> String {
    let mut out = String::new();
    for r in results {
        out.push_str(&format!("== {}", r.host));
        if let Some(t) = r.target.as_ref().filter(|t| **t != r.host) {
            out.push_str(&format!(" ({t})"));
        }
        out.push('\n');
        match &r.result {
            Ok((data, warnings)) => {
                for w in warnings {
                    out.push_str(&format!("warning: {w}\n"));
                }
                let text = render(data);
                out.push_str(text.trim_end_matches('\n'));
                out.push('\n');
            }
            Err(e) => out.push_str(&format!("error: {e}\n")),
        }
        out.push('\n');
    }
    out.push_str(&summary_of(results, what));
    out
}

/// `2 of 3 hosts ok; failed: dead (connection_failed)`.
pub fn summary(results: &[HostResult]) -> String {
    summary_of(results, "hosts")
}

/// [`summary`] for results of `what`.
fn summary_of(results: &[HostResult], what: &str) -> String {
    let ok = results.iter().filter(|r| r.result.is_ok()).count();
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| {
            r.result
                .as_ref()
                .err()
                .map(|e| format!("{} ({})", r.host, e.kind()))
        })
        .collect();
    let mut s = format!("{ok} of {} {what} ok", results.len());
    if !failed.is_empty() {
        s.push_str(&format!("; failed: {}", failed.join(", ")));
    }
    s
}

/// The exit code of a fleet command: 0 when every host succeeded, else
/// [`crate::base::error::overall_exit_code`] of the hosts' failures.
pub fn exit_code(results: &[HostResult]) -> u8 {
    let failures: Vec<u8> = results
        .iter()
        .filter_map(|r| r.result.as_ref().err().map(Error::exit_code))
        .collect();
    crate::base::error::overall_exit_code(&failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        crate::config::parse(
            "hosts:\n  a: {address: 127.0.0.1}\n  b: {address: 127.0.0.2}\ngroups:\n  edge: [a, b, zen-agent@10.0.0.3:2222]\n",
            std::path::Path::new("/c.yaml"),
        )
        .unwrap()
    }

    #[test]
    fn lists_groups_and_all_hosts() {
        let c = cfg();
        assert_eq!(select(None, false, &c).unwrap(), None);
        let f = select(Some("a, b,a"), false, &c).unwrap().unwrap();
        assert_eq!(f.hosts, ["a", "b"]);
        assert!(f.named);
        let f = select(Some("@edge,a"), false, &c).unwrap().unwrap();
        assert_eq!(f.hosts, ["a", "b", "zen-agent@10.0.0.3:2222"]);
        assert!(!f.named, "a group is not a list of names");
        let f = select(None, true, &c).unwrap().unwrap();
        assert_eq!(f.hosts, ["a", "b"]);
        assert!(!f.named);
        for (list, needle) in [
            ("a,,b", "empty host"),
            ("@nope", "no group 'nope'"),
            ("a;id", "invalid host"),
        ] {
            let e = select(Some(list), false, &c).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(needle), "{list}: {e}");
        }
        assert!(select(Some("a"), true, &c).is_err());
        assert!(select(None, true, &Config::default()).is_err());
        assert_eq!(parse_parallel("8").unwrap(), 8);
        assert!(parse_parallel("0").is_err() && parse_parallel("x").is_err());
    }

    #[test]
    fn bad_groups_are_config_errors() {
        let p = std::path::Path::new("/c.yaml");
        for (text, needle) in [
            ("groups: {edge: []}\n", "lists no hosts"),
            ("groups: {'a b': [x]}\n", "group name"),
            ("groups: {edge: ['-oProxyCommand=x']}\n", "invalid host"),
            ("persist: forever\n", "persist"),
        ] {
            let e = crate::config::parse(text, p).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[tokio::test]
    async fn hosts_run_side_by_side_and_come_back_in_order() {
        let hosts: Vec<String> = ["slow", "fast", "mid"].map(String::from).to_vec();
        let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let out = each(&hosts, 2, |h| {
            let (started, most) = (started.clone(), most.clone());
            Box::pin(async move {
                use std::sync::atomic::Ordering::SeqCst;
                let n = started.fetch_add(1, SeqCst) + 1;
                most.fetch_max(n, SeqCst);
                let ms = match h {
                    "slow" => 40,
                    "mid" => 10,
                    _ => 1,
                };
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                started.fetch_sub(1, SeqCst);
                h.to_uppercase()
            })
        })
        .await;
        assert_eq!(out, ["SLOW", "FAST", "MID"]);
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn the_document_and_the_summary() {
        let results = vec![
            HostResult {
                host: "a".into(),
                target: Some("zen-agent@127.0.0.1:22".into()),
                result: Ok((json!({"v": 1}), vec![])),
            },
            HostResult {
                host: "dead".into(),
                target: None,
                result: Err(Error::Connection("refused".into())),
            },
        ];
        let doc = document("status", &results);
        assert_eq!(doc["ok"], false);
        assert_eq!(doc["hosts"][0]["data"]["v"], 1);
        assert_eq!(doc["hosts"][1]["error"]["kind"], "connection_failed");
        assert_eq!(exit_code(&results), 7);
        let text = human(&results, |d| d.to_string());
        assert!(
            text.starts_with("== a (zen-agent@127.0.0.1:22)\n{\"v\":1}\n"),
            "{text}"
        );
        assert!(text.contains("== dead\nerror: refused"), "{text}");
        assert!(text.ends_with("1 of 2 hosts ok; failed: dead (connection_failed)"));
    }
}
