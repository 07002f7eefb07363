//! The commands' bodies: each turns parsed matches into a result printed through
//! [`Output`]. `lib.rs` dispatches; this file does the work.

use clap::ArgMatches;
use serde_json::{Value, json};

use crate::catalog;
use crate::error::{Error, Result};
use crate::invocation::{self, Invocation};
use crate::output::{self, Format, Output};

/// An error plus optional data for the JSON error document.
pub type Failure = (Error, Option<Value>);

pub use crate::engine::Trail;

use crate::catalog::{OPS, Profile};
use crate::host::sudoers::lint::{self, Severity};
use crate::host::sudoers::ranges::Ranges;
use crate::host::sudoers::render::{self, RenderOptions};

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
    if let Some(v) = r.get_one::<String>("ct_exec") {
        opts.ct_exec = Some(Ranges::parse("--ct-exec", v)?);
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

/// A spinner on stderr while an action's task runs, only at a terminal (never for agents,
/// never in JSON mode's stdout).
fn spinner(inv: &Invocation) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if inv.op.risk == catalog::Risk::Read || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_message(format!("{}: waiting for the Proxmox task", inv.display()));
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(pb)
}

/// Connect to the host the flags and config name; returns the output with the host set.
fn connect_target(m: &ArgMatches, out: &Output) -> Result<(crate::ssh::Target, Output)> {
    let cfg = load_config(m)?;
    connect_target_with(m, out, &cfg)
}

fn load_config(m: &ArgMatches) -> Result<crate::config::Config> {
    crate::config::load(m.get_one::<String>("config").map(std::path::Path::new))
}

fn connect_target_with(
    m: &ArgMatches,
    out: &Output,
    cfg: &crate::config::Config,
) -> Result<(crate::ssh::Target, Output)> {
    let target = crate::cli::settings::target(m, cfg)?;
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
    Ok(crate::remote::Remote::new(
        session,
        target.display(),
        target.command_timeout,
    ))
}

pub fn preflight(
    m: &ArgMatches,
    sub: &ArgMatches,
    out: &Output,
    trail: &mut Trail,
) -> std::result::Result<u8, Failure> {
    trail.audited = true;
    let profile = Profile::parse(
        sub.get_one::<String>("profile")
            .map(String::as_str)
            .unwrap_or("full"),
    )
    .map_err(|e| (e, None))?;
    let (target, out) = connect_target(m, out).map_err(|e| (e, None))?;
    let user = target.user.clone();
    trail.host = Some(target.display());
    trail.account = Some(user.clone());
    let checks = runtime().map_err(|e| (e, None))?.block_on(async {
        match open(&target).await {
            Ok(remote) => {
                let c = crate::host::preflight::run(&remote, profile, &user).await;
                remote.session.close().await;
                c
            }
            Err(e) => vec![crate::host::preflight::Check {
                name: "ssh",
                status: crate::host::preflight::Status::Fail,
                remedy: match e.exit_code() {
                    6 => "check the key, the account and known_hosts (see the message)".into(),
                    _ => "check the host, port and that sshd runs".into(),
                },
                detail: e.to_string(),
            }],
        }
    });
    let data = json!({"profile": profile.name(), "checks": checks});
    let human = |checks: &[crate::host::preflight::Check]| {
        let mut s = String::new();
        for c in checks {
            let tag = match c.status {
                crate::host::preflight::Status::Pass => "PASS",
                crate::host::preflight::Status::Warn => "WARN",
                crate::host::preflight::Status::Fail => "FAIL",
            };
            s.push_str(&format!("{tag}  {:<16} {}\n", c.name, c.detail));
            if !c.remedy.is_empty() && c.status != crate::host::preflight::Status::Pass {
                s.push_str(&format!("      {:<16} fix: {}\n", "", c.remedy));
            }
        }
        s
    };
    if crate::host::preflight::failed(&checks) {
        let n = checks
            .iter()
            .filter(|c| c.status == crate::host::preflight::Status::Fail)
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

pub fn status(m: &ArgMatches, out: &Output, trail: &mut Trail) -> Result<u8> {
    trail.audited = true;
    let (target, out) = connect_target(m, out)?;
    trail.host = Some(target.display());
    trail.account = Some(target.user.clone());
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

pub fn run_op(m: &ArgMatches, inv: &Invocation, out: &Output, trail: &mut Trail) -> Result<u8> {
    trail.argv = inv.remote_argv();
    let cfg = load_config(m)?;
    let policy =
        crate::policy::Policy::effective(m.get_one::<String>("policy").map(String::as_str), &cfg)?;
    if m.get_flag("dry_run") {
        trail.dry_run = true;
        // Without a connection, tags are unknown: tag protection is checked at run time.
        let verdict = policy.check(inv, Some(&[])).map(|d| match d {
            crate::policy::Decision::Allow => "allowed".to_string(),
            crate::policy::Decision::Confirm(c) => {
                format!("needs the phrase `{}` ({})", c.phrase, c.rule)
            }
        });
        let mut data = inv.dry_run();
        data["policy"] = match verdict {
            Ok(v) => json!(v),
            Err(e) => json!(format!("refused: {e}")),
        };
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
            if let Some(n) = d["vmid"].as_str() {
                s.push_str(&format!("  vmid:     {n}\n"));
            }
            if let Some(p) = d["policy"].as_str() {
                s.push_str(&format!("  policy:   {p}\n"));
            }
            s.push_str("  dry run: nothing was sent\n");
            s
        });
        return Ok(0);
    }
    let (target, out) = connect_target_with(m, out, &cfg)?;
    trail.host = Some(target.display());
    trail.account = Some(target.user.clone());
    let given = m.get_one::<String>("confirm").map(String::as_str);
    if m.get_flag("no_wait") && inv.op.view == catalog::View::Task {
        return no_wait(inv, &policy, target, given, &out, trail);
    }
    let connector = crate::engine::OnceConnector::new(target);
    let engine = crate::engine::Engine {
        policy: &policy,
        connector: &connector,
        interactive: true,
    };
    let spinner = spinner(inv);
    let mut show = |line: &str| {
        if let Some(pb) = &spinner {
            pb.set_message(format!("{}: {line}", inv.display()));
        }
    };
    let done = runtime()?.block_on(async {
        let r = engine.execute(inv, given, trail, &mut show).await;
        connector.close().await;
        r
    });
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let done = done?;
    out.success_with_warnings(inv.op.id, done.data, &done.warnings, |d| {
        crate::engine::human(inv, d)
    });
    Ok(0)
}

/// The arguments pxagent was started with (for `--no-wait`'s follower).
pub static ARGS: std::sync::OnceLock<Vec<std::ffi::OsString>> = std::sync::OnceLock::new();

/// `--no-wait`: pvesh runs a task synchronously and prints its UPID only at the end, and
/// closing its channel would hang the task up. So the decision (policy, phrase) is made
/// here, a detached pxagent (its own process group, no terminal) runs the op to its end and
/// writes its own audit record, and this process returns as soon as the task shows up in
/// the node's task list.
fn no_wait(
    inv: &Invocation,
    policy: &crate::policy::Policy,
    target: crate::ssh::Target,
    given: Option<&str>,
    out: &Output,
    trail: &mut Trail,
) -> Result<u8> {
    use std::process::{Command, Stdio};
    let connector = crate::engine::OnceConnector::new(target);
    let engine = crate::engine::Engine {
        policy,
        connector: &connector,
        interactive: true,
    };
    runtime()?.block_on(async {
        engine.decide(inv, given, trail).await?;
        let remote = crate::engine::Connector::remote(&connector).await?;
        let prepared = remote.prepare(inv).await?;
        let node = prepared.values.get("node").cloned().unwrap_or_default();
        let vmid = prepared.values.get("vmid").cloned();
        let mut filter: Vec<(&'static str, &str)> = vec![("node", &node)];
        if let Some(v) = &vmid {
            filter.push(("vmid", v));
        }
        let upids = |list: &Value| -> Vec<String> {
            list.as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.get("upid").and_then(Value::as_str).map(String::from))
                .collect()
        };
        let before = upids(&remote.read_op("task.list", &filter).await?);

        // The follower: the same command line without --no-wait, with the accepted phrase.
        let args = ARGS.get().cloned().unwrap_or_default();
        let exe = std::env::current_exe().map_err(|e| Error::Internal(format!("cannot find my own binary: {e}")))?;
        let mut cmd = Command::new(exe);
        cmd.args(follower_args(&args));
        if given.is_none()
            && let Some(p) = &trail.phrase
        {
            cmd.args(["--confirm", p]);
        }
        cmd.args(["-o", "json"]);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::Internal(format!("cannot start the follower: {e}")))?;

        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().map_err(|e| Error::Internal(e.to_string()))? {
                // The follower finished before the task showed up: relay its answer.
                let mut text = String::new();
                if let Some(mut so) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut so, &mut text);
                }
                let doc: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
                if doc["ok"] == true {
                    let upid = doc["data"]["upid"].as_str().map(String::from);
                    trail.upid = upid.clone();
                    return Ok(json!({"upid": upid, "node": node, "following": false, "task": doc["data"]["task"]}));
                }
                let msg = doc["error"]["message"].as_str().unwrap_or("the follower failed").to_string();
                return Err(error_for_code(status.code().unwrap_or(10) as u8, msg));
            }
            let now = upids(&remote.read_op("task.list", &filter).await?);
            if let Some(upid) = now.into_iter().find(|u| !before.contains(u)) {
                trail.upid = Some(upid.clone());
                return Ok(json!({"upid": upid, "node": node, "following": true, "follower_pid": child.id()}));
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::Remote(format!(
                    "no task for `{}` appeared within 60 s; the follower (pid {}) is still trying: see `pxagent task list` and `pxagent audit show`",
                    inv.display(),
                    child.id()
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    })
    .map(|data| {
        out.success(inv.op.id, data, |d| {
            format!(
                "{}: started task {}{}",
                inv.display(),
                d["upid"].as_str().unwrap_or("?"),
                if d["following"] == true { " (not waiting; `pxagent task status UPID` follows it)" } else { "" }
            )
        });
        0
    })
}

/// The follower's arguments: ours without `--no-wait` and without any output format (it
/// always answers in JSON, to this process).
fn follower_args(args: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in args.iter().skip(1) {
        if skip_next {
            skip_next = false;
            continue;
        }
        let s = a.to_string_lossy();
        if s == "--no-wait" || s.starts_with("--output=") || (s.starts_with("-o") && s.len() > 2) {
            continue;
        }
        if s == "-o" || s == "--output" {
            skip_next = true;
            continue;
        }
        out.push(a.clone());
    }
    out
}

/// An error of the class that `code` stands for (to relay another pxagent's failure).
fn error_for_code(code: u8, msg: String) -> Error {
    match code {
        1 => Error::Remote(msg),
        2 => Error::Usage(msg),
        3 => Error::Policy(msg),
        4 => Error::ConfirmationRequired {
            message: msg,
            phrase: String::new(),
            hint: None,
        },
        5 => Error::Preflight(msg),
        6 => Error::Auth(msg),
        7 => Error::Connection(msg),
        8 => Error::RateLimited(msg),
        9 => Error::SudoRefused(msg),
        _ => Error::Internal(msg),
    }
}

/// `pxagent audit show [--since WHEN]`.
pub fn audit_show(a: &ArgMatches, out: &Output) -> Result<u8> {
    let path = crate::audit::default_path()
        .ok_or_else(|| Error::usage("no HOME or XDG_STATE_HOME: there is no audit log"))?;
    let since = match a.get_one::<String>("since") {
        Some(s) => Some(crate::audit::parse_since(s, std::time::SystemTime::now())?),
        None => None,
    };
    let records = crate::audit::read(&path, since)?;
    out.success("audit.show", json!(records), |d| {
        let rows: Vec<Vec<String>> = d
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let s = |k: &str| match &r[k] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    v => v.to_string(),
                };
                vec![
                    s("seq"),
                    s("time"),
                    s("via"),
                    s("op"),
                    s("decision"),
                    s("exit_code"),
                    s("host"),
                    s("error"),
                ]
            })
            .collect();
        output::table(
            &[
                "SEQ", "TIME", "VIA", "OP", "DECISION", "EXIT", "HOST", "ERROR",
            ],
            &rows,
        )
    });
    Ok(0)
}

/// `pxagent audit verify`: exit 1 naming the first broken line.
pub fn audit_verify(out: &Output) -> std::result::Result<u8, Failure> {
    let path = crate::audit::default_path().ok_or_else(|| {
        (
            Error::usage("no HOME or XDG_STATE_HOME: there is no audit log"),
            None,
        )
    })?;
    let v = crate::audit::verify(&path).map_err(|e| (e, None))?;
    let data = json!({"path": path, "lines": v.lines, "head": v.head, "first_broken": v.first_broken.as_ref().map(|(n, why)| json!({"line": n, "why": why}))});
    if let Some((n, why)) = &v.first_broken {
        return Err((
            Error::Findings(format!("audit log {} line {n}: {why}", path.display())),
            Some(data),
        ));
    }
    out.success("audit.verify", data, |_| {
        if v.lines == 0 {
            format!("no audit log yet at {}", path.display())
        } else {
            format!(
                "{}: {} line(s), chain intact; head {}",
                path.display(),
                v.lines,
                v.head
            )
        }
    });
    Ok(0)
}
