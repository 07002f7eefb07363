//! Guest operations shared by `pvesh create|delete`, `qm` and `pct`: the pre-fork checks (errors
//! with no task, FORMATS §1.2/§1.3), the task body (log lines, TASK ERROR), and the state change.
//!
//! Every operation returns either a [`Failure`] (raised before `fork_worker`: no UPID) or a
//! [`TaskRun`] (a recorded task, possibly failed). The front ends decide how to print them.
//!
//! Builds on [`crate::state`], [`crate::task`], [`crate::locks`] and [`crate::running`]; the
//! front ends (`qm`, `pvesh`, …) and the operations in their own modules build on it.

use serde_json::{Value, json};

use crate::state::{Guest, HA_DELAY, Ha, Kind, Snapshot, State};
use crate::{Ctx, Failure, locks, running, task};

/// A finished task as the front ends need it.
#[derive(Debug, Clone)]
pub struct TaskRun {
    /// Its UPID.
    pub upid: String,
    /// What the worker printed (stdout of the CLI).
    pub log: Vec<String>,
    /// The TASK ERROR message, if it failed.
    pub error: Option<String>,
}

/// Run a task body on `node` and record it. A `fail` fault replaces the body's outcome with a
/// TASK ERROR before anything changes. A task that was held running ends under its own UPID;
/// one that was stopped meanwhile ends interrupted, without its state change
/// ([`running::interrupted`]: the body runs on a scratch copy only for the log it would write).
pub fn run_task(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: &str,
    id: &str,
    body: impl FnOnce(&mut State, &mut Vec<String>) -> Result<(), String>,
) -> TaskRun {
    let resume = ctx.tasks.resume.borrow_mut().take();
    let mut log = Vec::new();
    let result = if resume.as_ref().is_some_and(|r| r.stopped) {
        let mut scratch = st.clone();
        let mut full = Vec::new();
        let _ = body(&mut scratch, &mut full);
        let (cut, msg) = running::interrupted(kind, &full, ctx.now);
        log = cut;
        Err(msg)
    } else {
        match ctx.task_fail() {
            Some(msg) => Err(msg),
            None => body(st, &mut log),
        }
    };
    let error = result.err().map(|e| task::fold(&e));
    let upid = st.record_task(
        node,
        kind,
        id,
        ctx.now,
        ctx.now,
        log.clone(),
        error.as_deref(),
        resume.map(|r| r.worker),
    );
    TaskRun { upid, log, error }
}

/// `Configuration file 'nodes/<node>/<dir>/<vmid>.conf' does not exist` (FORMATS §1.2).
pub fn conf_missing(node: &str, kind: Kind, vmid: u32) -> String {
    format!(
        "Configuration file 'nodes/{node}/{}/{vmid}.conf' does not exist",
        kind.conf_dir()
    )
}

/// Look a guest up on `node` or fail like `load_config` (exit 2).
pub fn load<'a>(st: &'a State, node: &str, kind: Kind, vmid: u32) -> Result<&'a Guest, Failure> {
    st.guest_on(node, kind, vmid)
        .ok_or_else(|| Failure::enoent(conf_missing(node, kind, vmid)))
}

/// The power actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// start
    Start,
    /// shutdown (ACPI / agent)
    Shutdown,
    /// stop (hard)
    Stop,
    /// reboot
    Reboot,
    /// suspend (qemu: pause)
    Suspend,
    /// resume
    Resume,
}

impl Power {
    /// From the API path segment / CLI verb.
    pub fn parse(s: &str) -> Option<Power> {
        Some(match s {
            "start" => Power::Start,
            "shutdown" => Power::Shutdown,
            "stop" => Power::Stop,
            "reboot" => Power::Reboot,
            "suspend" => Power::Suspend,
            "resume" => Power::Resume,
            _ => return None,
        })
    }
    /// The verb.
    pub fn name(self) -> &'static str {
        match self {
            Power::Start => "start",
            Power::Shutdown => "shutdown",
            Power::Stop => "stop",
            Power::Reboot => "reboot",
            Power::Suspend => "suspend",
            Power::Resume => "resume",
        }
    }
}

fn new_pid(st: &mut State) -> u32 {
    let s = st.next_seq();
    10_000 + u32::try_from(s * 37 % 3_000_000).unwrap_or(0)
}

pub(crate) fn set_running(st: &mut State, vmid: u32, now: i64) {
    let pid = new_pid(st);
    if let Some(g) = st.guests.get_mut(&vmid) {
        g.running = true;
        g.paused = false;
        g.started_at = Some(now);
        g.pid = Some(pid);
    }
}

pub(crate) fn set_stopped(g: &mut Guest) {
    g.running = false;
    g.paused = false;
    g.started_at = None;
    g.pid = None;
}

/// start/shutdown/stop/reboot/suspend/resume of `vmid` on `node` (FORMATS §1.3, §3.8).
///
/// * qemu start: every check is inside the task (`VM 100 already running`, a missing config,
///   templates), as qemu-server's `vm_start` does not load the config before forking;
/// * qemu others: a missing config is `check_running`'s pre-fork
///   `unable to find configuration file for VM N on node 'X'` [SRC qemu-server, exit 2 INFER];
///   a stopped guest is the pre-fork `VM N not running`; a paused one cannot shut down;
/// * lxc: missing config and `CT N already running` / `CT N not running` are all pre-fork.
pub fn power(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    action: Power,
) -> Result<TaskRun, Failure> {
    let ttype = format!("{}{}", kind.task_prefix(), action.name());
    let id = vmid.to_string();
    let noun = kind.noun();
    if let Some(t) = ha_request(st, ctx, node, kind, vmid, action)? {
        return Ok(t);
    }
    if kind == Kind::Qemu && action == Power::Start {
        let node_s = node.to_string();
        return Ok(run_task(st, ctx, node, &ttype, &id, |st, _log| {
            let g = st
                .guest_on(&node_s, kind, vmid)
                .ok_or_else(|| conf_missing(&node_s, kind, vmid))?;
            if g.is_template() {
                return Err("you can't start a vm if it's a template".into());
            }
            locks::flock(st, ctx, kind, vmid, true)?;
            let lock = g.config.get("lock").and_then(Value::as_str).unwrap_or("");
            // `vm_start` under `lock_config` [SRC qemu-server QemuServer.pm]: during a backup of
            // a running VM it only resumes it; otherwise any lock but `suspended` refuses.
            if lock == "backup" && g.running {
                return Ok(());
            }
            if lock != "suspended" {
                locks::check_lock(g)?;
            }
            if g.running {
                return Err(format!("VM {vmid} already running"));
            }
            set_running(st, vmid, ctx.now);
            Ok(())
        }));
    }
    let g = match kind {
        Kind::Qemu => st.guest_on(node, kind, vmid).ok_or_else(|| {
            Failure::enoent(format!(
                "unable to find configuration file for VM {vmid} on node '{node}'"
            ))
        })?,
        Kind::Lxc => load(st, node, kind, vmid)?,
    };
    match action {
        Power::Start => {
            if g.running {
                return Err(Failure::die(format!("CT {vmid} already running")));
            }
            if g.is_template() {
                return Err(Failure::die("cannot start a template"));
            }
        }
        _ => {
            if !g.running {
                return Err(Failure::die(format!("{noun} {vmid} not running")));
            }
            if g.paused && matches!(action, Power::Shutdown | Power::Reboot) {
                return Err(Failure::die("VM is paused - cannot shutdown"));
            }
        }
    }
    Ok(run_task(st, ctx, node, &ttype, &id, |st, _log| {
        // Every worker takes `lock_config` and checks the config lock first [SRC qemu-server
        // QemuServer.pm `vm_stop`/`vm_reboot`, RunState.pm; pve-container API2/LXC/Status.pm];
        // qemu's suspend and resume go on during a backup (`check_lock … if !($skiplock ||
        // has_lock($conf, 'backup'))`).
        locks::flock(st, ctx, kind, vmid, true)?;
        let g = st.guests.get(&vmid).ok_or("guest vanished")?;
        let backup = g.config.get("lock").and_then(Value::as_str) == Some("backup");
        if !(backup && kind == Kind::Qemu && matches!(action, Power::Suspend | Power::Resume)) {
            locks::check_lock(g)?;
        }
        match action {
            Power::Start | Power::Reboot => set_running(st, vmid, ctx.now),
            Power::Shutdown | Power::Stop => {
                if let Some(g) = st.guests.get_mut(&vmid) {
                    set_stopped(g);
                }
            }
            Power::Suspend | Power::Resume => {
                if let Some(g) = st.guests.get_mut(&vmid) {
                    g.paused = action == Power::Suspend;
                }
            }
        }
        Ok(())
    }))
}

/// HA-managed guests: start/stop/shutdown only *request* a state (`ha-manager set … --state
/// started` / `crm-command stop`): a `hastart`/`hastop` task that prints
/// `Requesting HA start for VM 104` and returns at once, with no running check (qemu-server
/// API2/Qemu.pm `vm_start`/`vm_stop`/`vm_shutdown`, pve-container API2/LXC/Status.pm [SRC];
/// FORMATS §1.3). The guest follows [`HA_DELAY`] seconds later ([`settle_ha`]).
fn ha_request(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    action: Power,
) -> Result<Option<TaskRun>, Failure> {
    let Some(g) = st.guest_on(node, kind, vmid) else {
        return Ok(None);
    };
    if g.ha.is_none() {
        return Ok(None);
    }
    let (ttype, verb, request) = match action {
        Power::Start => ("hastart", "start", "started"),
        Power::Stop | Power::Shutdown => ("hastop", "stop", "stopped"),
        _ => return Ok(None),
    };
    let noun = kind.noun();
    Ok(Some(run_task(
        st,
        ctx,
        node,
        ttype,
        &vmid.to_string(),
        |st, log| {
            log.push(format!("Requesting HA {verb} for {noun} {vmid}"));
            let g = st.guests.get_mut(&vmid).ok_or("guest vanished")?;
            let wanted_running = request == "started";
            let due = (g.running != wanted_running).then_some(ctx.now + HA_DELAY);
            let max_restart = g.ha.as_ref().and_then(|h| h.max_restart);
            g.ha = Some(Ha {
                request: request.into(),
                due,
                max_restart,
            });
            Ok(())
        },
    )))
}

/// Carry out HA requests whose time has come (run at the start of every call, so every read
/// sees the state the cluster would be in by now).
pub fn settle_ha(st: &mut State, now: i64) {
    let due: Vec<(u32, bool, i64)> = st
        .guests
        .values()
        .filter_map(|g| {
            let ha = g.ha.as_ref()?;
            let t = ha.due.filter(|t| *t <= now)?;
            Some((g.vmid, ha.request == "started", t))
        })
        .collect();
    for (vmid, start, t) in due {
        if start {
            set_running(st, vmid, t);
        } else if let Some(g) = st.guests.get_mut(&vmid) {
            set_stopped(g);
        }
        if let Some(ha) = st.guests.get_mut(&vmid).and_then(|g| g.ha.as_mut()) {
            ha.due = None;
        }
    }
}

fn lv_name(volid: &str) -> &str {
    volid.split_once(':').map_or(volid, |(_, v)| v)
}

/// The parameters of a new snapshot (`--snapname`, `--description`, `--vmstate`).
#[derive(Debug, Clone, Copy)]
pub struct NewSnapshot<'a> {
    /// Snapshot name (already a valid `pve-configid`).
    pub name: &'a str,
    /// Free text.
    pub description: Option<&'a str>,
    /// Save RAM (qemu, running guests only).
    pub vmstate: bool,
}

/// Create snapshot `name` (FORMATS §3.7): pre-fork checks for reserved and used names and
/// templates; the task prints the freeze/thaw, vmstate and per-disk lines of the REAL captures
/// `qm_snapshot_vmstate_pve9.txt` and `qm_status_snapshot_…_pve9.transcript.txt`.
pub fn snapshot(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    req: &NewSnapshot,
) -> Result<TaskRun, Failure> {
    let (name, vmstate) = (req.name, req.vmstate);
    let g = load(st, node, kind, vmid)?;
    if name == "current"
        || (kind == Kind::Qemu && name.eq_ignore_ascii_case("pending"))
        || (kind == Kind::Lxc && name == "vzdump")
    {
        return Err(Failure::die(format!(
            "unable to use snapshot name '{name}' (reserved name)"
        )));
    }
    if g.is_template() {
        return Err(Failure::die("you can't take a snapshot if it's a template"));
    }
    if g.snapshots.iter().any(|s| s.name == name) {
        return Err(Failure::die(format!("snapshot name '{name}' already used")));
    }
    let ttype = format!("{}snapshot", kind.task_prefix());
    let name = name.to_string();
    let description = req.description.unwrap_or_default().to_string();
    Ok(run_task(
        st,
        ctx,
        node,
        &ttype,
        &vmid.to_string(),
        |st, log| {
            // `__snapshot_prepare` under `lock_config` [SRC AbstractConfig.pm].
            locks::guard(st, ctx, kind, vmid)?;
            let g = st.guests.get_mut(&vmid).ok_or("guest vanished")?;
            let save_state = kind == Kind::Qemu && vmstate && g.running;
            let freeze = kind == Kind::Qemu && g.running && !save_state && g.agent();
            if save_state {
                log.push("saving VM state and RAM using storage 'local-lvm'".into());
                let gib = g.maxmem() as f64 * 0.45 / (1024.0 * 1024.0 * 1024.0);
                log.push(format!(
                    "completed saving the VM state in 2s, saved {gib:.2} GiB"
                ));
            }
            if freeze {
                log.push("freeze guest filesystem".into());
            }
            for (key, volid) in g.disks() {
                if kind == Kind::Qemu {
                    log.push(format!("snapshotting 'drive-{key}' ({volid})"));
                }
                log.push(format!(
                    "  Logical volume \"snap_{}_{name}\" created.",
                    lv_name(&volid)
                ));
            }
            if freeze {
                log.push("thaw guest filesystem".into());
            }
            let mut config = g.config.clone();
            config.remove("parent");
            g.snapshots.push(Snapshot {
                name: name.clone(),
                parent: g.parent(),
                description,
                snaptime: ctx.now,
                vmstate: save_state,
                config,
            });
            g.config.insert("parent".into(), json!(name));
            Ok(())
        },
    ))
}

/// Roll back to snapshot `name` (FORMATS §3.7): the unknown-snapshot error is raised inside the
/// task (`snapshot_rollback` runs in the worker). The guest gets the snapshot's config; it runs
/// afterwards only if RAM state was saved (or `--start 1` on qemu).
pub fn rollback(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    name: &str,
    start: bool,
) -> Result<TaskRun, Failure> {
    load(st, node, kind, vmid)?;
    let ttype = format!("{}rollback", kind.task_prefix());
    Ok(run_task(
        st,
        ctx,
        node,
        &ttype,
        &vmid.to_string(),
        |st, log| {
            locks::flock(st, ctx, kind, vmid, true)?;
            let g = st.guests.get_mut(&vmid).ok_or("guest vanished")?;
            let snap = g
                .snapshots
                .iter()
                .find(|s| s.name == name)
                .cloned()
                .ok_or_else(|| format!("snapshot '{name}' does not exist"))?;
            if g.is_template() {
                return Err("you can't rollback if vm is a template".into());
            }
            // `snapshot_rollback`'s prepare step checks the lock after the snapshot [SRC].
            locks::check_lock(g)?;
            for (_, volid) in g.disks() {
                let lv = lv_name(&volid);
                log.push(format!("  Logical volume \"{lv}\" successfully removed."));
                log.push(format!("  Logical volume \"{lv}\" created."));
            }
            set_stopped(g);
            let mut config = snap.config.clone();
            config.insert("parent".into(), json!(snap.name));
            g.config = config;
            if snap.vmstate || (start && kind == Kind::Qemu) {
                set_running(st, vmid, ctx.now);
            }
            Ok(())
        },
    ))
}

/// Delete snapshot `name` (FORMATS §3.7); unknown names fail inside the task. Children move up to
/// the deleted snapshot's parent.
pub fn delsnapshot(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    name: &str,
) -> Result<TaskRun, Failure> {
    load(st, node, kind, vmid)?;
    let ttype = format!("{}delsnapshot", kind.task_prefix());
    Ok(run_task(
        st,
        ctx,
        node,
        &ttype,
        &vmid.to_string(),
        |st, log| {
            if !st
                .guests
                .get(&vmid)
                .is_some_and(|g| g.snapshots.iter().any(|s| s.name == name))
            {
                return Err(format!("snapshot '{name}' does not exist"));
            }
            // `snapshot_delete`: `set_lock($vmid, 'snapshot-delete')` after the lookup [SRC].
            locks::guard(st, ctx, kind, vmid)?;
            let g = st.guests.get_mut(&vmid).ok_or("guest vanished")?;
            let pos = g
                .snapshots
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| format!("snapshot '{name}' does not exist"))?;
            let snap = g.snapshots.remove(pos);
            for (_, volid) in disks_of_snapshot(&snap) {
                log.push(format!(
                    "  Logical volume \"snap_{}_{name}\" successfully removed.",
                    lv_name(&volid)
                ));
            }
            for s in &mut g.snapshots {
                if s.parent.as_deref() == Some(name) {
                    s.parent.clone_from(&snap.parent);
                }
            }
            if g.parent().as_deref() == Some(name) {
                match &snap.parent {
                    Some(p) => g.config.insert("parent".into(), Value::String(p.clone())),
                    None => g.config.remove("parent"),
                };
            }
            Ok(())
        },
    ))
}

fn disks_of_snapshot(s: &Snapshot) -> Vec<(String, String)> {
    crate::state::disks_of(&s.config)
}

/// Destroy a guest (FORMATS §3.9): pre-fork `unable to remove VM N - used in HA resources and
/// purge parameter not set.` for HA guests without `--purge`, then `VM N is running - destroy
/// failed` (CT: same texts with `CT` [INFER]); the task removes snapshot and disk volumes and, with `--purge`, prints
/// `purging VM N from related configurations..`.
pub fn destroy(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    kind: Kind,
    vmid: u32,
    purge: bool,
) -> Result<TaskRun, Failure> {
    let g = load(st, node, kind, vmid)?;
    let ha_managed = g.ha.is_some();
    if ha_managed && !purge {
        return Err(Failure::die(format!(
            "unable to remove {} {vmid} - used in HA resources and purge parameter not set.",
            kind.noun()
        )));
    }
    if g.running {
        return Err(Failure::die(format!(
            "{} {vmid} is running - destroy failed",
            kind.noun()
        )));
    }
    // `check_protection($conf, "can't remove VM $vmid")` [SRC pve-guest-common
    // AbstractConfig.pm check_protection: "$err_prefix - protection mode enabled"].
    if g.config.get("protection").is_some_and(|p| p == 1) {
        return Err(Failure::die(format!(
            "can't remove {} {vmid} - protection mode enabled",
            kind.noun()
        )));
    }
    let ttype = format!("{}destroy", kind.task_prefix());
    Ok(run_task(
        st,
        ctx,
        node,
        &ttype,
        &vmid.to_string(),
        |st, log| {
            // The worker's `lock_config` → `destroy_vm` → `check_lock` [SRC qemu-server].
            locks::guard(st, ctx, kind, vmid)?;
            let g = st.guests.remove(&vmid).ok_or("guest vanished")?;
            for s in &g.snapshots {
                for (_, volid) in disks_of_snapshot(s) {
                    log.push(format!(
                        "  Logical volume \"snap_{}_{}\" successfully removed.",
                        lv_name(&volid),
                        s.name
                    ));
                }
            }
            for (_, volid) in g.disks() {
                log.push(format!(
                    "  Logical volume \"{}\" successfully removed.",
                    lv_name(&volid)
                ));
            }
            if purge {
                log.push(format!(
                    "purging {} {vmid} from related configurations..",
                    kind.noun()
                ));
                if ha_managed {
                    log.push(format!(
                        "NOTE: removed {} {vmid} from HA resource configuration.",
                        kind.noun()
                    ));
                }
            }
            // The guest's disks are gone, and with them its files and agent [sim-only].
            st.qga_down.remove(&vmid);
            if let Some(base) = &ctx.guests {
                let _ = std::fs::remove_dir_all(base.join(vmid.to_string()));
            }
            Ok(())
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    #[test]
    fn power_cycle_and_errors() {
        let mut st = initial(NOW);
        let ctx = Ctx::new(NOW);
        // start of a running VM fails inside the task
        let t = power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Start).unwrap();
        assert_eq!(t.error.as_deref(), Some("VM 100 already running"));
        assert!(t.upid.contains(":qmstart:100:root@pam:"));
        // shutdown of a stopped VM is a pre-fork error
        let f = power(&mut st, &ctx, "pve1", Kind::Qemu, 102, Power::Shutdown).unwrap_err();
        assert_eq!((f.msg.as_str(), f.code), ("VM 102 not running", 255));
        // suspend keeps status running, qmpstatus paused
        power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Suspend).unwrap();
        assert!(st.guests[&100].running && st.guests[&100].paused);
        let f = power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Shutdown).unwrap_err();
        assert_eq!(f.msg, "VM is paused - cannot shutdown");
        power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Resume).unwrap();
        let t = power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Shutdown).unwrap();
        assert!(t.error.is_none());
        assert!(!st.guests[&100].running);
        let t = power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Start).unwrap();
        assert!(t.error.is_none() && st.guests[&100].running);
        // CT already running is pre-fork
        let f = power(&mut st, &ctx, "pve1", Kind::Lxc, 200, Power::Start).unwrap_err();
        assert_eq!(f.msg, "CT 200 already running");
        // wrong node
        let f = power(&mut st, &ctx, "pve1", Kind::Lxc, 201, Power::Start).unwrap_err();
        assert_eq!(
            (f.msg.as_str(), f.code),
            (
                "Configuration file 'nodes/pve1/lxc/201.conf' does not exist",
                2
            )
        );
        // template
        let t = power(&mut st, &ctx, "pve1", Kind::Qemu, 9000, Power::Start).unwrap();
        assert_eq!(
            t.error.as_deref(),
            Some("you can't start a vm if it's a template")
        );
    }

    #[test]
    fn snapshot_rollback_delete_destroy() {
        let mut st = initial(NOW);
        let ctx = Ctx::new(NOW);
        let t = snapshot(
            &mut st,
            &ctx,
            "pve1",
            Kind::Qemu,
            100,
            &NewSnapshot {
                name: "live",
                description: Some("with ram"),
                vmstate: true,
            },
        )
        .unwrap();
        assert_eq!(
            t.log[0],
            "saving VM state and RAM using storage 'local-lvm'"
        );
        assert!(
            t.log
                .contains(&"snapshotting 'drive-scsi0' (local-lvm:vm-100-disk-0)".to_string())
        );
        let f = snapshot(
            &mut st,
            &ctx,
            "pve1",
            Kind::Qemu,
            100,
            &NewSnapshot {
                name: "live",
                description: None,
                vmstate: false,
            },
        )
        .unwrap_err();
        assert_eq!(f.msg, "snapshot name 'live' already used");
        let f = snapshot(
            &mut st,
            &ctx,
            "pve1",
            Kind::Qemu,
            100,
            &NewSnapshot {
                name: "Pending",
                description: None,
                vmstate: false,
            },
        )
        .unwrap_err();
        assert_eq!(
            f.msg,
            "unable to use snapshot name 'Pending' (reserved name)"
        );
        let t = snapshot(
            &mut st,
            &ctx,
            "pve1",
            Kind::Qemu,
            100,
            &NewSnapshot {
                name: "cold",
                description: None,
                vmstate: false,
            },
        )
        .unwrap();
        assert_eq!(
            t.log.first().map(String::as_str),
            Some("freeze guest filesystem")
        );
        assert_eq!(st.guests[&100].parent().as_deref(), Some("cold"));
        // Stop, then roll back to the RAM snapshot: running again.
        power(&mut st, &ctx, "pve1", Kind::Qemu, 100, Power::Stop).unwrap();
        let t = rollback(&mut st, &ctx, "pve1", Kind::Qemu, 100, "live", false).unwrap();
        assert!(t.error.is_none());
        assert!(st.guests[&100].running);
        assert_eq!(st.guests[&100].parent().as_deref(), Some("live"));
        let t = rollback(&mut st, &ctx, "pve1", Kind::Qemu, 100, "nope", false).unwrap();
        assert_eq!(t.error.as_deref(), Some("snapshot 'nope' does not exist"));
        // Rollback to a disk-only snapshot leaves the VM stopped.
        rollback(&mut st, &ctx, "pve1", Kind::Qemu, 102, "base", false).unwrap();
        assert!(!st.guests[&102].running);
        assert_eq!(st.guests[&102].parent().as_deref(), Some("base"));
        // Deleting "base" re-parents "pre-upgrade" and the current state.
        delsnapshot(&mut st, &ctx, "pve1", Kind::Qemu, 102, "base").unwrap();
        assert_eq!(st.guests[&102].snapshots[0].parent, None);
        assert_eq!(st.guests[&102].parent(), None);
        let t = delsnapshot(&mut st, &ctx, "pve1", Kind::Qemu, 102, "base").unwrap();
        assert_eq!(t.error.as_deref(), Some("snapshot 'base' does not exist"));
        // Destroy.
        let f = destroy(&mut st, &ctx, "pve1", Kind::Qemu, 100, false).unwrap_err();
        assert_eq!(f.msg, "VM 100 is running - destroy failed");
        let t = destroy(&mut st, &ctx, "pve1", Kind::Qemu, 102, true).unwrap();
        assert_eq!(
            t.log.last().map(String::as_str),
            Some("purging VM 102 from related configurations..")
        );
        assert!(!st.guests.contains_key(&102));
    }

    #[test]
    fn fail_fault_turns_the_task_into_an_error() {
        let mut st = initial(NOW);
        let mut ctx = Ctx::new(NOW);
        ctx.fail = Some("injected".into());
        let t = power(&mut st, &ctx, "pve1", Kind::Qemu, 102, Power::Start).unwrap();
        assert_eq!(t.error.as_deref(), Some("injected"));
        assert!(!st.guests[&102].running);
        assert!(ctx.fail_used.get());
        assert_eq!(st.tasks.last().unwrap().exitstatus, "injected");
        assert_eq!(
            st.tasks.last().unwrap().log.last().unwrap(),
            "TASK ERROR: injected"
        );
    }
}
