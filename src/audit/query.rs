//! The read side of the audit trail for people: `audit show`'s filters
//! (`--op GLOB`, `--host GLOB`, `--decision`, `--vmid`, `--since`, `--until`) and each record's
//! *target* — which guest, snapshot, archive, storage or task it was about.
//!
//! The target is read back from the record's remote argv with the catalog's own inverse
//! ([`crate::catalog::inverse::parse_argv`]: the op that builds exactly that line, and its
//! values), so it needs nothing new in the records. A record may also carry its values itself
//! (`target`, or an `args`/`params` object, as a later record format may): those win.
//!
//! Records are read as plain JSON objects, not as [`crate::audit::Record`], so that records
//! with fields or values this version does not know (new decisions, phases of a two-phase
//! record) are still shown and filtered; the chain itself is `audit verify`'s business.

use std::path::Path;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use crate::base::error::{Error, Result};
use crate::catalog::{self, Kind, Op};

/// The filters as typed (strings), before [`Filter::parse`] checks them.
#[derive(Debug, Clone, Default)]
pub struct FilterArgs {
    /// `--since WHEN`.
    pub since: Option<String>,
    /// `--until WHEN`.
    pub until: Option<String>,
    /// `--op GLOB`.
    pub op: Option<String>,
    /// `--host GLOB`.
    pub host: Option<String>,
    /// `--decision D`.
    pub decision: Option<String>,
    /// `--vmid N`.
    pub vmid: Option<String>,
}

/// Which records `audit show` lists; every given filter must hold.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    since: Option<SystemTime>,
    until: Option<SystemTime>,
    op: Option<Glob>,
    host: Option<Glob>,
    decision: Option<String>,
    vmid: Option<u64>,
}

impl Filter {
    /// Check the typed filters (exit 2 naming the bad one). Ages count back from `now`.
    pub fn parse(a: FilterArgs, now: SystemTime) -> Result<Filter> {
        let when = |flag: &str, v: &Option<String>| -> Result<Option<SystemTime>> {
            v.as_deref()
                .map(|s| {
                    crate::base::time::parse_since(s, now).map_err(|_| {
                        Error::usage(format!(
                            "{flag} {s:?}: expected an RFC 3339 time such as 2026-11-30T06:00:00Z, a date such as 2026-11-30, or an age such as 30m, 1h, 2d"
                        ))
                    })
                })
                .transpose()
        };
        let vmid = a
            .vmid
            .as_deref()
            .map(|v| {
                Kind::Vmid
                    .parse("--vmid", v)
                    .map(|v| v.parse::<u64>().unwrap_or(0))
            })
            .transpose()?;
        Ok(Filter {
            since: when("--since", &a.since)?,
            until: when("--until", &a.until)?,
            op: a.op.as_deref().map(Glob::new),
            host: a.host.as_deref().map(Glob::new),
            decision: a.decision,
            vmid,
        })
    }

    /// Whether `rec` (one audit record, with its [`target`]) passes every filter.
    pub fn admits(&self, rec: &Value, target: &Map<String, Value>) -> bool {
        let field = |k: &str| rec.get(k).and_then(Value::as_str).unwrap_or("");
        if let Some(g) = &self.op
            && !g.matches(field("op"))
        {
            return false;
        }
        if let Some(g) = &self.host
            && !g.matches(field("host"))
        {
            return false;
        }
        if let Some(d) = &self.decision
            && field("decision") != d
        {
            return false;
        }
        if let Some(id) = self.vmid
            && !target.values().any(|v| v.as_u64() == Some(id))
        {
            return false;
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(t) = crate::base::time::parse_time(field("time")) else {
                return false;
            };
            if self.since.is_some_and(|s| t < s) || self.until.is_some_and(|u| t >= u) {
                return false;
            }
        }
        true
    }
}

/// A shell-style glob over the whole text: `*` any run, `?` one character.
#[derive(Debug, Clone)]
struct Glob(Vec<char>);

impl Glob {
    fn new(s: &str) -> Glob {
        Glob(s.chars().collect())
    }

    fn matches(&self, text: &str) -> bool {
        fn go(p: &[char], t: &[char]) -> bool {
            match p.split_first() {
                None => t.is_empty(),
                Some(('*', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
                Some(('?', rest)) => !t.is_empty() && go(rest, &t[1..]),
                Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
            }
        }
        let t: Vec<char> = text.chars().collect();
        go(&self.0, &t)
    }
}

/// The values that say what a record was about, by parameter name (`vmid`, `snapshot`,
/// `archive`, `storage`, `upid`, `newid` …): from the record's own values when it has them,
/// else read back from its argv. Empty when neither says (a command that is no op).
pub fn target(rec: &Value) -> Map<String, Value> {
    let op = rec
        .get("op")
        .and_then(Value::as_str)
        .and_then(catalog::find);
    let given = ["target", "args", "params"]
        .iter()
        .find_map(|k| rec.get(*k).and_then(Value::as_object));
    if let (Some(op), Some(values)) = (op, given) {
        let raw = values
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), String::from),
                )
            })
            .collect::<Vec<_>>();
        return pick(op, raw.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    }
    let argv: Vec<String> = rec
        .get("argv")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(String::from))
        .collect();
    // `sudo -n /usr/bin/pvesh …`: the tool's line starts at its absolute path.
    let Some(start) = argv.iter().position(|w| w.starts_with('/')) else {
        return Map::new();
    };
    match catalog::inverse::parse_argv(&argv[start..]) {
        Ok(found) => {
            let chosen = found
                .iter()
                .find(|(o, _)| op.is_some_and(|op| op == *o))
                .or(found.first());
            match chosen {
                Some((o, values)) => pick(o, values.iter().map(|(k, v)| (*k, v.as_str()))),
                None => Map::new(),
            }
        }
        Err(_) => Map::new(),
    }
}

/// The values of `op` that name what it acts on: guests, snapshots, archives, volumes, tasks,
/// and the positional ones (a storage, a node); VMIDs as numbers.
fn pick<'a>(op: &Op, values: impl Iterator<Item = (&'a str, &'a str)>) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, v) in values {
        let Some(p) = op.param(name) else { continue };
        let names_target = matches!(
            p.kind,
            Kind::Vmid
                | Kind::SnapName
                | Kind::Archive
                | Kind::Upid
                | Kind::IsoVolume
                | Kind::TemplateVolume
                | Kind::TemplateName
        ) || p.how == catalog::How::Positional;
        if !names_target || p.kind == Kind::GuestArgv {
            continue;
        }
        let value = match p.kind {
            Kind::Vmid => v
                .parse::<u64>()
                .map(|n| json!(n))
                .unwrap_or_else(|_| json!(v)),
            _ => json!(v),
        };
        out.insert(name.to_string(), value);
    }
    out
}

/// The target as one short text: `100`, `100 snapshot pre-upgrade`, `archive local:…`.
pub fn describe(target: &Map<String, Value>) -> String {
    let mut entries: Vec<(&String, &Value)> = target.iter().collect();
    // The guest first: it is what people scan for.
    entries.sort_by_key(|(k, _)| *k != "vmid");
    entries
        .into_iter()
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| v.to_string(), String::from);
            if k == "vmid" { v } else { format!("{k} {v}") }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The records of the log at `path` as operations (a two-phase op's `started` record and its
/// completion as one, [`crate::audit::operations`]) that pass `filter`, oldest first, each
/// with its `target` (added when the record has none). A missing log has none.
pub fn read(path: &Path, filter: &Filter) -> Result<Vec<Value>> {
    let records = crate::audit::operations(crate::audit::read(path, None)?);
    let values = records
        .iter()
        .map(serde_json::to_value)
        .collect::<std::result::Result<Vec<Value>, _>>()
        .map_err(|e| Error::Internal(format!("an audit record does not serialize: {e}")))?;
    Ok(select(values, filter))
}

/// The records that pass `filter`, each with its `target`.
pub fn select(records: Vec<Value>, filter: &Filter) -> Vec<Value> {
    let mut out = Vec::new();
    for mut rec in records {
        let t = target(&rec);
        if !filter.admits(&rec, &t) {
            continue;
        }
        if let Some(obj) = rec.as_object_mut() {
            obj.entry("target").or_insert(Value::Object(t));
        }
        out.push(rec);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(op: &str, argv: &[&str], decision: &str, time: &str) -> Value {
        json!({"seq":1,"time":time,"host":"zen-agent@192.0.2.10:22","op":op,"argv":argv,"decision":decision,"exit_code":0})
    }

    #[test]
    fn targets_come_back_from_the_argv() {
        let start = rec(
            "vm.start",
            &[
                "sudo",
                "-n",
                "/usr/bin/pvesh",
                "create",
                "/nodes/pve1/qemu/100/status/start",
                "--output-format",
                "json",
            ],
            "allowed",
            "2026-11-30T06:00:00.000Z",
        );
        let t = target(&start);
        assert_eq!(describe(&t), "100", "{t:?}");
        let snap = rec(
            "vm.snapshot",
            &[
                "sudo",
                "-n",
                "/usr/bin/pvesh",
                "create",
                "/nodes/pve1/qemu/101/snapshot",
                "--snapname",
                "pre-up",
                "--output-format",
                "json",
            ],
            "allowed",
            "2026-11-30T06:00:00.000Z",
        );
        assert_eq!(describe(&target(&snap)), "101 snapshot pre-up");
        // A record that carries its values wins over its argv (a later record format).
        let mut given = rec("vm.destroy", &[], "refused", "2026-11-30T06:00:00.000Z");
        given["args"] = json!({"vmid": "150"});
        assert_eq!(target(&given)["vmid"], 150);
        assert!(target(&rec("status", &[], "allowed", "x")).is_empty());
    }

    #[test]
    fn filters_combine() {
        let now = crate::base::time::parse_time("2026-11-30T12:00:00Z").unwrap();
        let f = |a: FilterArgs| Filter::parse(a, now).unwrap();
        let start = rec(
            "vm.start",
            &[
                "sudo",
                "-n",
                "/usr/bin/pvesh",
                "create",
                "/nodes/pve1/qemu/100/status/start",
                "--output-format",
                "json",
            ],
            "allowed",
            "2026-11-30T11:30:00.000Z",
        );
        let t = target(&start);
        let ok = |filter: &Filter| filter.admits(&start, &t);
        assert!(ok(&f(FilterArgs {
            op: Some("vm.*".into()),
            ..Default::default()
        })));
        assert!(!ok(&f(FilterArgs {
            op: Some("ct.*".into()),
            ..Default::default()
        })));
        assert!(ok(&f(FilterArgs {
            vmid: Some("100".into()),
            ..Default::default()
        })));
        assert!(!ok(&f(FilterArgs {
            vmid: Some("101".into()),
            ..Default::default()
        })));
        assert!(ok(&f(FilterArgs {
            decision: Some("allowed".into()),
            host: Some("*192.0.2.10*".into()),
            ..Default::default()
        })));
        assert!(ok(&f(FilterArgs {
            since: Some("1h".into()),
            until: Some("10m".into()),
            ..Default::default()
        })));
        assert!(!ok(&f(FilterArgs {
            until: Some("2026-11-30T11:00:00Z".into()),
            ..Default::default()
        })));
        let bad = Filter::parse(
            FilterArgs {
                until: Some("soon".into()),
                ..Default::default()
            },
            now,
        )
        .unwrap_err();
        assert!(bad.to_string().starts_with("--until \"soon\""), "{bad}");
        assert_eq!(
            Filter::parse(
                FilterArgs {
                    vmid: Some("99".into()),
                    ..Default::default()
                },
                now
            )
            .unwrap_err()
            .exit_code(),
            2
        );
    }

    #[test]
    fn globs() {
        assert!(Glob::new("*.snapshot").matches("vm.snapshot"));
        assert!(Glob::new("vm.?tart").matches("vm.start"));
        assert!(!Glob::new("vm.start").matches("vm.start-x"));
    }
}
