//! `qm` and `pct`: the guest CLIs, acting only on guests of the local node (FORMATS §7: `qm` has no
//! proxy). Task commands block, print the task log on stdout, print **no** UPID, and exit 0 on
//! success or 255 with the TASK ERROR text on stderr (FORMATS §1.3, REAL
//! `qm_snapshot_failure_thinpool_pve9.txt`).

use serde_json::Value;

use crate::args::{self, Param, Parsed, Ty, p};
use crate::ops::{self, Power, TaskRun};
use crate::state::{Guest, Kind, State};
use crate::{Ctx, Failure, Output, api, timefmt};

const VMID: Ty = Ty::Int(Some(100), Some(999_999_999));

fn tool(kind: Kind) -> &'static str {
    match kind {
        Kind::Qemu => "qm",
        Kind::Lxc => "pct",
    }
}

/// `(command, positional names, options)` of the simulated subcommands.
fn command(kind: Kind, cmd: &str) -> Option<(&'static [&'static str], Vec<Param>)> {
    let qm = kind == Kind::Qemu;
    Some(match cmd {
        "list" => (&[], vec![p("full", Ty::Bool)]),
        "status" => (&["vmid"], vec![p("verbose", Ty::Bool)]),
        "config" => (
            &["vmid"],
            vec![p("current", Ty::Bool), p("snapshot", Ty::ConfigId)],
        ),
        "start" => (&["vmid"], {
            let mut v = vec![p("skiplock", Ty::Bool)];
            if qm {
                v.push(p("timeout", Ty::Int(Some(0), Some(86_400))));
            } else {
                v.push(p("debug", Ty::Bool));
            }
            v
        }),
        "shutdown" => (
            &["vmid"],
            vec![
                p("timeout", Ty::Int(Some(0), None)),
                p("forceStop", Ty::Bool),
                p("keepActive", Ty::Bool),
                p("skiplock", Ty::Bool),
            ],
        ),
        "stop" => (
            &["vmid"],
            vec![
                p("timeout", Ty::Int(Some(0), None)),
                p("skiplock", Ty::Bool),
                p("keepActive", Ty::Bool),
                p("overrule-shutdown", Ty::Bool),
            ],
        ),
        "reboot" => (&["vmid"], vec![p("timeout", Ty::Int(Some(0), None))]),
        "suspend" if qm => (
            &["vmid"],
            vec![
                p("skiplock", Ty::Bool),
                p("todisk", Ty::Bool),
                p("statestorage", Ty::Str),
            ],
        ),
        "resume" if qm => (
            &["vmid"],
            vec![p("skiplock", Ty::Bool), p("nocheck", Ty::Bool)],
        ),
        "snapshot" => (&["vmid", "snapname"], {
            let mut v = vec![p("description", Ty::Str)];
            if qm {
                v.push(p("vmstate", Ty::Bool));
            }
            v
        }),
        "listsnapshot" => (&["vmid"], vec![]),
        "unlock" => (&["vmid"], vec![]),
        "rollback" => (&["vmid", "snapname"], vec![p("start", Ty::Bool)]),
        "delsnapshot" => (&["vmid", "snapname"], vec![p("force", Ty::Bool)]),
        "destroy" => (&["vmid"], {
            let mut v = vec![
                p("purge", Ty::Bool),
                p("destroy-unreferenced-disks", Ty::Bool),
                p("skiplock", Ty::Bool),
            ];
            if !qm {
                v.push(p("force", Ty::Bool));
            }
            v
        }),
        _ => return None,
    })
}

fn usage_line(kind: Kind, cmd: &str, pos: &[&str]) -> String {
    let mut s = format!("{} {cmd}", tool(kind));
    for a in pos {
        s.push_str(&format!(" <{a}>"));
    }
    s.push_str(" [OPTIONS]");
    s
}

/// Entry point for `qm …` (kind qemu) and `pct …` (kind lxc).
pub fn run(st: &mut State, ctx: &Ctx, kind: Kind, argv: &[String]) -> Output {
    let t = tool(kind);
    let Some(cmd) = argv.first() else {
        return Output::err(
            &format!("ERROR: no command specified\nUSAGE: {t} <COMMAND> [ARGS] [OPTIONS]"),
            255,
        );
    };
    let Some((pos_names, schema)) = command(kind, cmd) else {
        return Output::err(
            &format!("unknown command '{t} {cmd}'\nUSAGE: {t} <COMMAND> [ARGS] [OPTIONS]"),
            255,
        );
    };
    let usage = usage_line(kind, cmd, pos_names);
    let parsed = match args::parse(&argv[1..], &schema) {
        Ok(p) => p,
        Err(e) => return args::param_error(&e, &usage),
    };
    if parsed.pos.len() < pos_names.len() {
        return Output::err(&format!("400 not enough arguments\n{usage}"), 255);
    }
    if parsed.pos.len() > pos_names.len() {
        return Output::err(&format!("400 too many arguments\n{usage}"), 255);
    }
    let mut errors = args::ParamErrors::new();
    let mut vmid = 0;
    if let Some(v) = parsed
        .pos
        .first()
        .filter(|_| pos_names.first() == Some(&"vmid"))
    {
        match args::check(VMID, v) {
            Ok(v) => vmid = v.parse().unwrap_or(0),
            Err(m) => errors.push(("vmid".into(), m)),
        }
    }
    if pos_names.get(1) == Some(&"snapname")
        && let Err(m) = args::check(Ty::ConfigId, &parsed.pos[1])
    {
        errors.push(("snapname".into(), m));
    }
    if !errors.is_empty() {
        return args::param_error(&errors, &usage);
    }
    let local = st.local_node.clone();
    let snap = parsed.pos.get(1).cloned().unwrap_or_default();
    let task = |r: Result<TaskRun, Failure>| -> Output {
        match r {
            Ok(t) => cli_task_output(&t),
            Err(f) => f.into(),
        }
    };
    match cmd.as_str() {
        "list" => Output::ok(match kind {
            Kind::Qemu => qm_list(st, &local, parsed.flag("full")),
            Kind::Lxc => pct_list(st, &local),
        }),
        "status" => match ops::load(st, &local, kind, vmid) {
            Ok(g) => Output::ok(status_text(g, ctx.now, parsed.flag("verbose"))),
            Err(f) => f.into(),
        },
        "config" => match ops::load(st, &local, kind, vmid) {
            Ok(g) => Output::ok(config_text(g, &parsed)),
            Err(f) => f.into(),
        },
        "listsnapshot" => match ops::load(st, &local, kind, vmid) {
            Ok(g) => Output::ok(snapshot_tree(g)),
            Err(f) => f.into(),
        },
        "snapshot" => task(ops::snapshot(
            st,
            ctx,
            &local,
            kind,
            vmid,
            &ops::NewSnapshot {
                name: &snap,
                description: parsed.get("description"),
                vmstate: parsed.flag("vmstate"),
            },
        )),
        "rollback" => task(ops::rollback(
            st,
            ctx,
            &local,
            kind,
            vmid,
            &snap,
            parsed.flag("start"),
        )),
        "delsnapshot" => task(ops::delsnapshot(st, ctx, &local, kind, vmid, &snap)),
        "unlock" => match unlock(st, ctx, &local, kind, vmid) {
            Ok(()) => Output::default(),
            Err(f) => f.into(),
        },
        "destroy" => task(ops::destroy(
            st,
            ctx,
            &local,
            kind,
            vmid,
            parsed.flag("purge"),
        )),
        verb => match Power::parse(verb) {
            Some(a) => task(ops::power(st, ctx, &local, kind, vmid, a)),
            None => Output::err("unreachable", 255),
        },
    }
}

/// `qm unlock VMID` / `pct unlock VMID`: remove the config's `lock:` (a backup that was killed
/// leaves one). qm deletes it whether or not there is one; pct uses `remove_lock`, which dies
/// with `no lock found trying to remove any lock` [SRC qemu-server `src/PVE/CLI/qm.pm`,
/// pve-container `src/PVE/CLI/pct.pm`, pve-guest-common `AbstractConfig.pm` `remove_lock`].
/// Both print nothing.
fn unlock(st: &mut State, ctx: &Ctx, node: &str, kind: Kind, vmid: u32) -> Result<(), Failure> {
    ops::load(st, node, kind, vmid)?;
    crate::locks::flock(st, ctx, kind, vmid, true).map_err(Failure::die)?;
    let g = st
        .guests
        .get_mut(&vmid)
        .ok_or_else(|| Failure::die("guest vanished"))?;
    if g.config.remove("lock").is_none() && kind == Kind::Lxc {
        return Err(Failure::die("no lock found trying to remove any lock"));
    }
    Ok(())
}

/// Task output of the CLIs (`$upid_exit`): log on stdout, no UPID, error on stderr + exit 255.
pub fn cli_task_output(t: &TaskRun) -> Output {
    Output {
        stdout: t.log.iter().map(|l| format!("{l}\n")).collect(),
        stderr: t
            .error
            .as_ref()
            .map(|e| format!("{e}\n"))
            .unwrap_or_default(),
        code: if t.error.is_some() { 255 } else { 0 },
    }
}

/// Perl's default number stringification for a MiB value (`2048`, or `1953.125`).
fn perl_num(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// `qm list [--full 1]` (FORMATS §3.1; REAL `qm_list_pve9_trailing_spaces.txt`,
/// `qm_list_pve9.1_long_name.txt`): printf layout with trailing padding, no output at all when
/// the node has no VMs.
pub fn qm_list(st: &State, node: &str, full: bool) -> String {
    let vms: Vec<&Guest> = st
        .guests
        .values()
        .filter(|g| g.node == node && g.kind == Kind::Qemu)
        .collect();
    if vms.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "{:>10} {:<20} {:<10} {:<10} {:>12} {:<10}\n",
        "VMID", "NAME", "STATUS", "MEM(MB)", "BOOTDISK(GB)", "PID"
    );
    for g in vms {
        let status = match (g.running, g.paused && full) {
            (false, _) => "stopped",
            (true, true) => "paused",
            (true, false) => "running",
        };
        s.push_str(&format!(
            "{:>10} {:<20} {:<10} {:<10} {:>12.2} {:<10}\n",
            g.vmid,
            g.name(),
            status,
            perl_num(g.maxmem() as f64 / 1_048_576.0),
            g.maxdisk as f64 / 1_073_741_824.0,
            if g.running { g.pid.unwrap_or(0) } else { 0 }
        ));
    }
    s
}

/// `pct list` (FORMATS §3.2; REAL `pct_list_pve9.txt`): `"%-10s %-10s %-12s %-20s\n"`, blank lock,
/// nothing when there are no containers.
pub fn pct_list(st: &State, node: &str) -> String {
    let cts: Vec<&Guest> = st
        .guests
        .values()
        .filter(|g| g.node == node && g.kind == Kind::Lxc)
        .collect();
    if cts.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "{:<10} {:<10} {:<12} {:<20}\n",
        "VMID", "Status", "Lock", "Name"
    );
    for g in cts {
        let lock = g.config.get("lock").and_then(Value::as_str).unwrap_or("");
        let status = if g.running { "running" } else { "stopped" };
        s.push_str(&format!(
            "{:<10} {:<10} {:<12} {:<20}\n",
            g.vmid,
            status,
            lock,
            g.name()
        ));
    }
    s
}

/// `qm status` / `pct status` (FORMATS §3.3; REAL line in the qm transcript): `status: <s>`, the
/// QMP status for qm; `--verbose` prints the status hash sorted, nested hashes tab-indented.
pub fn status_text(g: &Guest, now: i64, verbose: bool) -> String {
    let v = api::status_current(g, now);
    if verbose {
        let mut s = String::new();
        verbose_lines(&v, 0, &mut s);
        return s;
    }
    let status = match (g.kind, g.running, g.paused) {
        (_, false, _) => "stopped",
        (Kind::Qemu, true, true) => "paused",
        _ => "running",
    };
    format!("status: {status}\n")
}

fn verbose_lines(v: &Value, depth: usize, out: &mut String) {
    let Value::Object(m) = v else { return };
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for k in keys {
        let ind = "\t".repeat(depth);
        match &m[k.as_str()] {
            Value::Object(_) => {
                out.push_str(&format!("{ind}{k}:\n"));
                verbose_lines(&m[k.as_str()], depth + 1, out);
            }
            Value::String(s) => out.push_str(&format!("{ind}{k}: {s}\n")),
            Value::Null => out.push_str(&format!("{ind}{k}: \n")),
            other => out.push_str(&format!("{ind}{k}: {other}\n")),
        }
    }
}

/// `qm config` / `pct config`: `key: value` lines, sorted (the config file's main section) [INFER].
fn config_text(g: &Guest, o: &Parsed) -> String {
    let cfg = match o
        .get("snapshot")
        .and_then(|n| g.snapshots.iter().find(|s| s.name == n))
    {
        Some(s) => s.config.clone(),
        None => g.config.clone(),
    };
    cfg.iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}: {s}\n"),
            other => format!("{k}: {other}\n"),
        })
        .collect()
}

/// `qm listsnapshot` / `pct listsnapshot` (FORMATS §3.6; REAL `qm_listsnapshot_nested_pve9.txt`):
/// `printf("%s %-${len}s %-23s %s\n", prefix, name, time, first_line(description) || 'no-description')`
/// with prefix `` `-> `` indented one space per level and `len = max(0, 30 - length(prefix))`;
/// children sorted by snaptime, `current` ("You are here!", no time) last under its parent.
pub fn snapshot_tree(g: &Guest) -> String {
    struct Item {
        name: String,
        parent: Option<String>,
        time: Option<i64>,
        desc: String,
    }
    let mut items: Vec<Item> = g
        .snapshots
        .iter()
        .map(|s| Item {
            name: s.name.clone(),
            parent: s.parent.clone(),
            time: Some(s.snaptime),
            desc: s.description.clone(),
        })
        .collect();
    items.push(Item {
        name: "current".into(),
        parent: g.parent(),
        time: None,
        desc: "You are here!".into(),
    });
    let exists = |n: &str| items.iter().any(|i| i.name == n);
    let roots: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].parent.as_deref().is_none_or(|p| !exists(p)))
        .collect();
    fn order(items: &[Item], ids: &mut [usize]) {
        // By snaptime; current (no time) last.
        ids.sort_by_key(|&i| (items[i].time.is_none(), items[i].time.unwrap_or(0)));
    }
    fn walk(items: &[Item], i: usize, depth: usize, out: &mut String) {
        let prefix = format!("{}`->", " ".repeat(depth));
        let len = 30usize.saturating_sub(prefix.len());
        let it = &items[i];
        let time = it.time.map(timefmt::iso).unwrap_or_default();
        let desc = it
            .desc
            .lines()
            .next()
            .filter(|l| !l.is_empty())
            .unwrap_or("no-description");
        out.push_str(&format!("{prefix} {:<len$} {time:<23} {desc}\n", it.name));
        let mut kids: Vec<usize> = (0..items.len())
            .filter(|&k| items[k].parent.as_deref() == Some(it.name.as_str()))
            .collect();
        order(items, &mut kids);
        for k in kids {
            walk(items, k, depth + 1, out);
        }
    }
    let mut roots = roots;
    order(&items, &mut roots);
    let mut out = String::new();
    for r in roots {
        walk(&items, r, 0, &mut out);
    }
    out
}
