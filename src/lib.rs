//! pxagent: manage Proxmox VE hosts and clusters through a key-only SSH account whose
//! sudoers allows exactly the command lines of pxagent's operation catalog.
//!
//! The binary (`src/main.rs`) is a thin wrapper around [`run`]; everything testable lives
//! here so tests can call it in-process.

pub mod catalog;
pub mod cli;
pub mod config;
pub mod error;
pub mod invocation;
pub mod output;
pub mod preflight;
pub mod pve;
pub mod remote;
pub mod settings;
pub mod ssh;
pub mod ssh_config;
pub mod sudoers;
pub mod views;

use std::ffi::OsString;

use clap::ArgMatches;
use serde_json::{Value, json};

pub use error::{Error, Result};
use invocation::Invocation;
use output::{Format, Output};

/// Run pxagent with these arguments (program name first) and return the exit code.
pub fn run(args: Vec<OsString>) -> u8 {
    let format = prescan_format(&args);
    let matches = match cli::command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return clap_error(e, format),
    };
    let out = Output {
        format: matches
            .get_one::<String>("output")
            .and_then(|s| Format::parse(s))
            .unwrap_or(Format::Table),
        host: matches.get_one::<String>("host").cloned(),
    };
    let (op_name, result) = dispatch(&matches, &out);
    match result {
        Ok(code) => code,
        Err((err, data)) => {
            out.failure(&op_name, &err, data);
            err.exit_code()
        }
    }
}

/// An error plus optional data for the JSON error document.
type Failure = (Error, Option<Value>);

fn dispatch(m: &ArgMatches, out: &Output) -> (String, std::result::Result<u8, Failure>) {
    let Some((top, sub)) = m.subcommand() else {
        return (
            "pxagent".into(),
            Err((Error::usage("no command given"), None)),
        );
    };
    match top {
        "catalog" => (
            "catalog".into(),
            commands::catalog(out).map_err(|e| (e, None)),
        ),
        "preflight" => ("preflight".into(), commands::preflight(m, sub, out)),
        "status" => (
            "status".into(),
            commands::status(m, out).map_err(|e| (e, None)),
        ),
        "sudoers" => match sub.subcommand() {
            Some(("render", r)) => (
                "sudoers.render".into(),
                commands::sudoers_render(m, r, out).map_err(|e| (e, None)),
            ),
            Some(("lint", l)) => ("sudoers.lint".into(), commands::sudoers_lint(l, out)),
            _ => (
                "sudoers".into(),
                Err((
                    Error::usage("expected `sudoers render` or `sudoers lint`"),
                    None,
                )),
            ),
        },
        _ => {
            // A catalog op: find its path (one or two words).
            let (path, leaf): (Vec<&str>, &ArgMatches) = match sub.subcommand() {
                Some((second, leaf)) => (vec![top, second], leaf),
                None => (vec![top], sub),
            };
            let op_id = catalog::ops_at(&path)
                .first()
                .map(|o| o.id.to_string())
                .unwrap_or_else(|| path.join("."));
            let result = Invocation::from_matches(&path, leaf)
                .and_then(|inv| commands::run_op(m, &inv, out));
            (op_id, result.map_err(|e| (e, None)))
        }
    }
}

/// Before clap has parsed anything, find out whether the caller wants JSON, so even a
/// usage error comes back as one JSON document.
fn prescan_format(args: &[OsString]) -> Format {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    for (i, w) in words.iter().enumerate() {
        let value = match w.as_str() {
            "-o" | "--output" => words.get(i + 1).map(String::as_str),
            _ => w.strip_prefix("--output=").or_else(|| w.strip_prefix("-o")),
        };
        if let Some(f) = value.and_then(Format::parse) {
            return f;
        }
    }
    std::env::var("PXAGENT_OUTPUT")
        .ok()
        .and_then(|v| Format::parse(&v))
        .unwrap_or(Format::Table)
}

fn clap_error(e: clap::Error, format: Format) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            output::write_raw(&e.render().to_string());
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `pxagent` or `pxagent vm` alone: show help on stderr, it is a usage error.
            eprint!("{}", e.render());
            2
        }
        _ => {
            let msg = e.render().to_string();
            let first = msg
                .lines()
                .next()
                .unwrap_or("invalid usage")
                .trim_start_matches("error: ")
                .to_string();
            let err = Error::usage(first);
            match format {
                Format::Json => Output { format, host: None }.failure("pxagent", &err, None),
                Format::Table => eprint!("{msg}"),
            }
            err.exit_code()
        }
    }
}

mod commands {
    //! The commands' bodies: each turns matches into a result printed through `Output`.

    use super::*;
    use crate::catalog::{OPS, Profile};
    use crate::sudoers::lint::{self, Severity};
    use crate::sudoers::ranges::Ranges;
    use crate::sudoers::render::{self, RenderOptions};

    pub fn catalog(out: &Output) -> Result<u8> {
        let ops: Vec<Value> = OPS
            .iter()
            .map(|op| {
                let samples = catalog::example_values(op);
                json!({
                    "id": op.id,
                    "usage": op.usage(),
                    "about": op.about,
                    "risk": op.risk.name(),
                    "profiles": op.profiles().iter().map(|p| p.name()).collect::<Vec<_>>(),
                    "example_argv": op.argv(&samples),
                    "sudoers_rule": op.sudoers_rule(None),
                    "phrase": op.confirm.map(|c| c.phrase),
                    "mcp_tool": op.tool_name(),
                })
            })
            .collect();
        out.success("catalog", json!(ops), |data| {
            let mut text = String::new();
            for o in data.as_array().into_iter().flatten() {
                let s = |k: &str| o[k].as_str().unwrap_or("").to_string();
                let words: Vec<String> = o["example_argv"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(invocation::quote_word)
                    .collect();
                let profiles: Vec<&str> = o["profiles"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                text.push_str(&format!(
                    "{}  [{}; {}]  {}\n",
                    s("id"),
                    s("risk"),
                    profiles.join(","),
                    s("about")
                ));
                text.push_str(&format!("  usage:   pxagent {}\n", s("usage")));
                text.push_str(&format!("  remote:  sudo -n {}\n", words.join(" ")));
                text.push_str(&format!("  sudoers: {}\n", s("sudoers_rule")));
                if let Some(p) = o["phrase"].as_str() {
                    text.push_str(&format!("  confirm: {p}\n"));
                }
            }
            text
        });
        Ok(0)
    }

    pub fn sudoers_render(m: &ArgMatches, r: &ArgMatches, out: &Output) -> Result<u8> {
        let user = m
            .get_one::<String>("user")
            .map(String::as_str)
            .unwrap_or("zen-agent");
        let mut opts = RenderOptions::new(user)?;
        if let Some(p) = r.get_one::<String>("profile") {
            opts.profile = Profile::parse(p)?;
        }
        if let Some(v) = r.get_one::<String>("vmids") {
            opts.vmids = Some(Ranges::parse("--vmids", v)?);
        }
        if let Some(v) = r.get_one::<String>("ctids") {
            opts.ctids = Some(Ranges::parse("--ctids", v)?);
        }
        let text = render::render(&opts);
        match out.format {
            Format::Json => out.success(
                "sudoers.render",
                json!({"user": opts.user, "profile": opts.profile.name(), "sudoers": text}),
                |_| String::new(),
            ),
            Format::Table => output::write_raw(&text),
        }
        Ok(0)
    }

    pub fn sudoers_lint(l: &ArgMatches, out: &Output) -> std::result::Result<u8, Failure> {
        let file = l
            .get_one::<String>("file")
            .map(String::as_str)
            .unwrap_or("-");
        let text = if file == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| {
                (
                    Error::ReadFile {
                        path: "-".into(),
                        source: e,
                    },
                    None,
                )
            })?;
            s
        } else {
            std::fs::read_to_string(file).map_err(|e| {
                (
                    Error::ReadFile {
                        path: file.into(),
                        source: e,
                    },
                    None,
                )
            })?
        };
        let findings = lint::lint(&text);
        let errors = findings
            .iter()
            .filter(|f| matches!(f.severity, Severity::Error))
            .count();
        let data = json!({"file": file, "errors": errors, "findings": findings});
        let human = |findings: &[lint::Finding]| {
            let mut s = String::new();
            for f in findings {
                let sev = serde_json::to_value(f.severity)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                s.push_str(&format!(
                    "{file}:{}: {sev} [{}] {}\n    {}\n    why: {}\n    fix: {}\n",
                    f.line,
                    f.code,
                    f.source.lines().next().unwrap_or(""),
                    f.source.lines().skip(1).collect::<Vec<_>>().join(" "),
                    f.why,
                    f.fix
                ));
            }
            s.push_str(&format!(
                "{} finding(s), {errors} error(s)\n",
                findings.len()
            ));
            s.replace("\n    \n", "\n")
        };
        if errors > 0 {
            if out.format == Format::Table {
                output::write_raw(&human(&findings));
            }
            return Err((
                Error::Findings(format!("{errors} error-severity finding(s) in {file}")),
                Some(data),
            ));
        }
        out.success("sudoers.lint", data, |_| human(&findings));
        Ok(0)
    }

    /// A current-thread runtime: one invocation is one connection; concurrency comes from
    /// channels, not threads.
    pub fn runtime() -> Result<tokio::runtime::Runtime> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Internal(format!("cannot start the async runtime: {e}")))
    }

    /// The soft blacklist: a confirm op runs only with its exact phrase. Nothing has been
    /// sent when this refuses (exit 4).
    fn confirm_gate(m: &ArgMatches, inv: &Invocation) -> Result<()> {
        let Some(expected) = inv.phrase() else {
            return Ok(());
        };
        match m.get_one::<String>("confirm") {
            Some(given) if *given == expected => Ok(()),
            Some(given) => Err(Error::ConfirmationRequired {
                message: format!(
                    "the confirmation `{}` does not match: `{}` needs exactly `{expected}`",
                    crate::catalog::kind::printable(given),
                    inv.display()
                ),
                phrase: expected,
                hint: None,
            }),
            None => Err(inv
                .refusal()
                .unwrap_or_else(|| Error::Internal("confirm op without refusal text".into()))),
        }
    }

    /// Connect to the host the flags and config name; returns the output with the host set.
    fn connect_target(m: &ArgMatches, out: &Output) -> Result<(crate::ssh::Target, Output)> {
        let cfg = crate::config::load(m.get_one::<String>("config").map(std::path::Path::new))?;
        let target = crate::settings::target(m, &cfg)?;
        let out = Output {
            host: Some(target.display()),
            ..out.clone()
        };
        Ok((target, out))
    }

    async fn open(target: &crate::ssh::Target) -> Result<crate::remote::Remote> {
        let session = crate::ssh::Session::connect(target).await?;
        if let Some(note) = session.recorded_host_key() {
            eprintln!("pxagent: {note}");
        }
        Ok(crate::remote::Remote {
            session,
            target: target.display(),
        })
    }

    pub fn preflight(
        m: &ArgMatches,
        sub: &ArgMatches,
        out: &Output,
    ) -> std::result::Result<u8, Failure> {
        let profile = Profile::parse(
            sub.get_one::<String>("profile")
                .map(String::as_str)
                .unwrap_or("full"),
        )
        .map_err(|e| (e, None))?;
        let (target, out) = connect_target(m, out).map_err(|e| (e, None))?;
        let user = target.user.clone();
        let checks = runtime().map_err(|e| (e, None))?.block_on(async {
            match open(&target).await {
                Ok(remote) => {
                    let c = crate::preflight::run(&remote, profile, &user).await;
                    remote.session.close().await;
                    c
                }
                Err(e) => vec![crate::preflight::Check {
                    name: "ssh",
                    status: crate::preflight::Status::Fail,
                    remedy: match e.exit_code() {
                        6 => "check the key, the account and known_hosts (see the message)".into(),
                        _ => "check the host, port and that sshd runs".into(),
                    },
                    detail: e.to_string(),
                }],
            }
        });
        let data = json!({"profile": profile.name(), "checks": checks});
        let human = |checks: &[crate::preflight::Check]| {
            let mut s = String::new();
            for c in checks {
                let tag = match c.status {
                    crate::preflight::Status::Pass => "PASS",
                    crate::preflight::Status::Warn => "WARN",
                    crate::preflight::Status::Fail => "FAIL",
                };
                s.push_str(&format!("{tag}  {:<16} {}\n", c.name, c.detail));
                if !c.remedy.is_empty() && c.status != crate::preflight::Status::Pass {
                    s.push_str(&format!("      {:<16} fix: {}\n", "", c.remedy));
                }
            }
            s
        };
        if crate::preflight::failed(&checks) {
            let n = checks
                .iter()
                .filter(|c| c.status == crate::preflight::Status::Fail)
                .count();
            if out.format == Format::Table {
                output::write_raw(&human(&checks));
            }
            return Err((
                Error::Preflight(format!("preflight: {n} check(s) failed")),
                Some(data),
            ));
        }
        out.success("preflight", data, |_| human(&checks));
        Ok(0)
    }

    pub fn status(m: &ArgMatches, out: &Output) -> Result<u8> {
        let (target, out) = connect_target(m, out)?;
        let (version, cluster, resources) = runtime()?.block_on(async {
            let remote = open(&target).await?;
            // Gathered concurrently over the one connection.
            let (v, c, r) = tokio::join!(
                remote.read_op("pve.version", &[]),
                remote.read_op("cluster.status", &[]),
                remote.read_op("cluster.resources", &[]),
            );
            remote.session.close().await;
            Ok::<_, Error>((v?, c?, r?))
        })?;
        let resources = crate::views::normalize(catalog::View::Resources(None), &resources, None)?;
        let list = resources.as_array().cloned().unwrap_or_default();
        let of = |t: &str| {
            list.iter()
                .filter(|r| r["type"] == t)
                .cloned()
                .collect::<Vec<_>>()
        };
        let mut guests = serde_json::Map::new();
        for g in list
            .iter()
            .filter(|r| r["type"] == "qemu" || r["type"] == "lxc")
        {
            let key = format!(
                "{}_{}",
                if g["type"] == "qemu" { "vm" } else { "ct" },
                g["status"].as_str().unwrap_or("unknown")
            );
            let n = guests.get(&key).and_then(Value::as_u64).unwrap_or(0);
            guests.insert(key, json!(n + 1));
        }
        let cluster_entry = cluster
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["type"] == "cluster")
            .cloned();
        let data = json!({
            "version": version,
            "cluster": cluster_entry,
            "nodes": of("node"),
            "storages": of("storage"),
            "guests": guests,
        });
        out.success("status", data, |d| {
            let mut s = format!(
                "Proxmox VE {}",
                d["version"]["version"].as_str().unwrap_or("?")
            );
            if let Some(c) = d["cluster"].as_object() {
                s.push_str(&format!(
                    ", cluster {} ({} nodes, {})",
                    c.get("name").and_then(Value::as_str).unwrap_or("?"),
                    c.get("nodes").map(|v| v.to_string()).unwrap_or_default(),
                    if c.get("quorate").and_then(Value::as_u64) == Some(1) {
                        "quorate"
                    } else {
                        "NOT quorate"
                    }
                ));
            }
            s.push_str("\n\nNodes\n");
            s.push_str(&crate::views::human(
                catalog::View::Resources(None),
                &d["nodes"],
            ));
            s.push_str("\n\nStorages\n");
            s.push_str(&crate::views::human(
                catalog::View::Resources(None),
                &d["storages"],
            ));
            s.push_str("\n\nGuests\n");
            let g = d["guests"].as_object().cloned().unwrap_or_default();
            s.push_str(
                &g.iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
            s
        });
        Ok(0)
    }

    pub fn run_op(m: &ArgMatches, inv: &Invocation, out: &Output) -> Result<u8> {
        if m.get_flag("dry_run") {
            let data = inv.dry_run();
            out.success(inv.op.id, data, |d| {
                let mut s = format!("{} (risk: {})\n", inv.op.id, inv.op.risk.name());
                s.push_str(&format!(
                    "  remote:   {}\n",
                    d["command"].as_str().unwrap_or("")
                ));
                s.push_str(&format!(
                    "  sudoers:  {}\n",
                    d["sudoers_rule"].as_str().unwrap_or("")
                ));
                let profiles: Vec<&str> = d["profiles"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                s.push_str(&format!(
                    "  profiles: {}\n",
                    if profiles.is_empty() {
                        "none (opt-in)".into()
                    } else {
                        profiles.join(", ")
                    }
                ));
                if let Some(p) = d["phrase"].as_str() {
                    s.push_str(&format!("  confirm:  needs the phrase `{p}`\n"));
                }
                if let Some(n) = d["node"].as_str() {
                    s.push_str(&format!("  node:     {n}\n"));
                }
                s.push_str("  dry run: nothing was sent\n");
                s
            });
            return Ok(0);
        }
        confirm_gate(m, inv)?;
        let (target, out) = connect_target(m, out)?;
        let outcome = runtime()?.block_on(async {
            let remote = open(&target).await?;
            let result = remote.run(inv).await;
            remote.session.close().await;
            result
        })?;
        let data = crate::views::normalize(inv.op.view, &outcome.data, inv.keep_type)?;
        let data = match outcome.upid {
            Some(upid) => json!({"upid": upid, "node": outcome.node, "task": data}),
            None => data,
        };
        out.success_with_warnings(inv.op.id, data, &outcome.warnings, |d| match inv.op.view {
            catalog::View::Task => format!(
                "{}: {} (task {})",
                inv.display(),
                d["task"]["exitstatus"].as_str().unwrap_or("done"),
                d["upid"].as_str().unwrap_or("")
            ),
            view => crate::views::human(view, d),
        });
        Ok(0)
    }
}
