//! A catalog op from the command line: dry run, a run through the engine (with a spinner at
//! a terminal), or `--no-wait`; its guest given by VMID or by name, its list filtered.

use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::base::runtime::runtime;
use crate::catalog::invocation::{Invocation, Named};
use crate::cli::settings::Settings;
use crate::config::context::Context;
use crate::engine::{Engine, OnceConnector, Trail};
use crate::output::Output;
use crate::views::Filter;

/// Run one catalog op: a dry run, `--no-wait`, or to its end through the engine; `filter`
/// keeps the entries of a list that match.
pub fn run_op(
    s: &Settings,
    ctx: &Context,
    inv: &Invocation,
    filter: &Filter,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    if s.dry_run {
        return dry_run(ctx, inv, out, trail);
    }
    let target = super::resolve(ctx, out, trail)?;
    let connector = ctx.connector(target);
    run_connected(&runtime()?, s, ctx, inv, filter, &connector, out, trail)
}

/// [`run_op`] for an op whose guest was given by name: one read of the cluster's guests
/// (the one the node lookup makes) finds the VMID and the node, then the op runs on that
/// connection. A dry run connects for that read too: what it reports (the command line,
/// the phrase) names the real VMID.
pub fn run_named(
    s: &Settings,
    ctx: &Context,
    named: &Named,
    filter: &Filter,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    let target = super::resolve(ctx, out, trail)?;
    let connector = ctx.connector(target);
    // One runtime for the lookup and the op: the connection lives in it.
    let rt = runtime()?;
    let inv = rt.block_on(async {
        let r = ctx.engine(&connector, !s.no_input).named(named).await;
        if r.is_err() || s.dry_run {
            connector.close().await;
        }
        r
    })?;
    if s.dry_run {
        return dry_run(ctx, &inv, out, trail);
    }
    run_connected(&rt, s, ctx, &inv, filter, &connector, out, trail)
}

/// A dry run of one op: what would be sent, nothing is.
fn dry_run(ctx: &Context, inv: &Invocation, out: &mut Output, trail: &mut Trail) -> Result<u8> {
    let data = crate::engine::dry_run(&ctx.policy, inv, trail)?;
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
        if let Some(n) = d["unless"].as_str() {
            s.push_str(&format!("  unless:   {n}\n"));
        }
        for c in d["prechecks"].as_array().into_iter().flatten() {
            s.push_str(&format!("  checks:   {}\n", c.as_str().unwrap_or("")));
        }
        // Every step the real run takes after the op, each with its command line.
        for t in d["then"].as_array().into_iter().flatten() {
            s.push_str(&format!(
                "  then:     {}\n",
                t["then"].as_str().unwrap_or("")
            ));
            if let Some(argv) = t["argv"].as_array() {
                let words: Vec<String> = argv
                    .iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect();
                s.push_str(&format!(
                    "            {}\n",
                    crate::base::text::quote_argv(&words)
                ));
            }
        }
        if let Some(f) = d["fans_out"].as_str() {
            s.push_str(&format!("  per node: {f}\n"));
        }
        if let Some(p) = d["policy"].as_str() {
            s.push_str(&format!("  policy:   {p}\n"));
        }
        s.push_str("  dry run: nothing was sent\n");
        s
    });
    Ok(0)
}

/// Run one op to its end (or, with `--no-wait`, until its task shows) over `connector`,
/// whose connection lives in `rt`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_connected(
    rt: &tokio::runtime::Runtime,
    s: &Settings,
    ctx: &Context,
    inv: &Invocation,
    filter: &Filter,
    connector: &OnceConnector,
    out: &mut Output,
    trail: &mut Trail,
) -> Result<u8> {
    let mut inv = inv.clone();
    if let Some(path) = &s.approval {
        inv.attach.approval = Some(read_approval(path)?);
    }
    let inv = &inv;
    let given = s.confirm.as_deref();
    let engine = ctx.engine(connector, !s.no_input);
    // A job's run starts a task per node: `start` says why --no-wait cannot follow it.
    if s.no_wait && (inv.op.runs_task() || inv.op.fans_out.is_some()) {
        return no_wait(rt, s, &engine, connector, inv, given, out, trail);
    }
    // The spinner starts once the op is sent (after any confirmation prompt), and
    // so does the watch for signals: one then still leaves the op's audit record. An op that
    // sends a file shows a bar of the bytes sent instead, at a terminal and never in JSON mode.
    let uploads = inv.op.uploads().is_some();
    let spinner: std::sync::OnceLock<indicatif::ProgressBar> = std::sync::OnceLock::new();
    let mut show = |line: &str| {
        if let Some(pb) = spinner.get() {
            // A task log line is host text: escaped before it reaches the terminal.
            pb.set_message(format!(
                "{}: {}",
                inv.display(),
                crate::output::escape::cell(line)
            ));
        }
    };
    let bar_wanted = uploads
        && out.format != crate::output::Format::Json
        && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut sent = |done: u64, total: u64| {
        if bar_wanted {
            spinner
                .get_or_init(|| upload_bar(inv, total))
                .set_position(done);
        }
    };
    let armed = trail.sending();
    let done = rt.block_on(async {
        let work = async {
            match uploads {
                true => engine.upload(inv, given, trail, &mut sent).await,
                false => engine.execute(inv, given, trail, &mut show).await,
            }
        };
        let r = crate::base::signals::interruptible(work, &armed, || {
            if !uploads && let Some(pb) = self::spinner(inv) {
                let _ = spinner.set(pb);
            }
        })
        .await;
        connector.close().await;
        r
    });
    if let Some(s) = spinner.get() {
        s.finish_and_clear();
    }
    let done = match done {
        Ok(r) => r?,
        Err(sig) => return Err(trail.interrupt(sig.name(), &inv.display())),
    };
    let data = filter.apply(done.data);
    out.success_with_warnings(inv.op.id, data, &done.warnings, |d| {
        crate::engine::human(inv, d)
    });
    Ok(0)
}

/// The bar of an op that sends a file (`iso upload`): the bytes sent of `total`, on stderr.
fn upload_bar(inv: &Invocation, total: u64) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(total);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(inv.display());
    pb
}

/// A spinner on stderr while an action's task runs, only at a terminal (never for agents,
/// never in JSON mode's stdout).
fn spinner(inv: &Invocation) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if inv.op.risk == crate::catalog::Risk::Read || !std::io::stderr().is_terminal() {
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

/// `--no-wait`: the engine decides here and hands the op to a follower — this same command
/// line without `--no-wait`, with the accepted phrase, answering in JSON — a detached pxagent
/// (its own process group, no terminal) that runs the op to its end and writes its own audit
/// record.
#[allow(clippy::too_many_arguments)]
fn no_wait(
    rt: &tokio::runtime::Runtime,
    s: &Settings,
    engine: &Engine<'_, OnceConnector>,
    connector: &OnceConnector,
    inv: &Invocation,
    given: Option<&str>,
    out: &Output,
    trail: &mut Trail,
) -> Result<u8> {
    use std::process::{Command, Stdio};
    let mut spawn = |phrase: Option<&str>| -> Result<std::process::Child> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::Internal(format!("cannot find my own binary: {e}")))?;
        let mut cmd = Command::new(exe);
        cmd.args(follower_args(&s.argv));
        if let Some(p) = phrase {
            cmd.args(["--confirm", p]);
        }
        cmd.args(["-o", "json"]);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::Internal(format!("cannot start the follower: {e}")))
    };
    let armed = trail.sending();
    let data = rt.block_on(async {
        let r = crate::base::signals::interruptible(
            engine.start(inv, given, trail, &mut spawn),
            &armed,
            || {},
        )
        .await;
        connector.close().await;
        r
    });
    let data = match data {
        Ok(r) => r?,
        Err(sig) => return Err(trail.interrupt(sig.name(), &inv.display())),
    };
    // A bare value: only the UPID on stdout, so `UPID=$(pxagent --no-wait …)`
    // works; the sentence goes to stderr. A no-op has no task: nothing on stdout.
    out.success(inv.op.id, data, |d| {
        let sentence = if d["changed"] == false {
            crate::engine::human(inv, d)
        } else {
            format!(
                "{}: started task {}{}",
                inv.display(),
                d["upid"].as_str().unwrap_or("?"),
                if d["following"] == true {
                    " (not waiting; `pxagent task status UPID` follows it)"
                } else {
                    ""
                }
            )
        };
        crate::output::note(sentence);
        d["upid"].as_str().unwrap_or("").to_string()
    });
    Ok(0)
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

/// Read an approval file (`-`: stdin). Its content is checked by the host gate; here only its
/// size, so a wrong file fails before anything is sent.
pub(super) fn read_approval(path: &std::path::Path) -> Result<String> {
    let text = if path.as_os_str() == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t).map_err(|source| {
            Error::ReadFile {
                path: path.to_path_buf(),
                source,
            }
        })?;
        t
    } else {
        std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_path_buf(),
            source,
        })?
    };
    if text.len() > 16 * 1024 || !text.contains("-----BEGIN SSH SIGNATURE-----") {
        return Err(Error::usage(format!(
            "{} is not an approval: expected the armored SSH signature that `pxagent approve` or `ssh-keygen -Y sign` printed",
            path.display()
        )));
    }
    Ok(text)
}
