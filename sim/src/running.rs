//! Tasks that stay running for a while, the locks they hold, and stopping them.
//!
//! Real PVE tools block until their task ends (FORMATS §1.3); the simulator's tasks normally end
//! within the call. A `hold` fault rule (`{"match":"vzdump 100","action":"hold","seconds":20}`,
//! see [`crate::faults`]) makes the task of a matching call stay **running** for that long, so
//! tests can watch what Proxmox does meanwhile:
//!
//! * the call blocks like the real CLI (stdout comes at the end, as the simulator prints all at
//!   once); the task is in `pvesh get /nodes/N/tasks --source active|all` with
//!   `"status":"RUNNING"` and no `endtime` (pve-manager 14a22df35955 `PVE/API2/Tasks.pm`
//!   `node_tasks`: active tasks get `status => 'RUNNING'`), and `…/tasks/{upid}/status` says
//!   `"status":"running"` without `exitstatus` (`read_task_status`);
//! * the guest's config lock is held while it runs ([`lock_for`]): `lock: backup` for vzdump
//!   (PVE::VZDump `lock_vm` → `set_lock`), `snapshot` (AbstractConfig `__snapshot_prepare`),
//!   `snapshot-delete`, `rollback`, `disk` on a container clone's source (pve-container
//!   `API2/LXC.pm` `clone_vm`), `create` on a restore target that exists; a VM clone instead
//!   holds the source's *flock* `/var/lock/qemu-server/lock-N.conf` for the whole clone
//!   (qemu-server e6352be67f70 `API2/Qemu.pm` `clone_vm`: `lock_config_full`/`_shared` inside
//!   the worker), so others time out on it ([`crate::locks`]). The lock shows in the guest's
//!   config, `/cluster/resources`, `…/status/current` and `pct list`, and refuses other
//!   changes with `VM is locked (backup)` (AbstractConfig `check_lock`);
//! * `pvesh delete /nodes/{node}/tasks/{upid}` stops it the way PVE does (`Tasks.pm`
//!   `stop_task` → RESTEnvironment `check_worker($upid, 1)` → SIGTERM to the worker's process
//!   group, waiting up to 5 s): the task ends with the worker's own interrupt message
//!   ([`interrupted`]: `interrupted by signal` for vzdump, `received interrupt` for most
//!   others), the state change it was making is dropped (a stopped backup leaves no archive: it
//!   wrote to a temporary file that vzdump's cleanup removes, `PVE/VZDump.pm`; a stopped snapshot
//!   is cleaned up by `snapshot_create`), and the lock is released. A finished task stops
//!   silently (`check_worker` returns 0); an unknown one is `upid: no such task`.
//!
//! A `delay-task` fault rule (`{"match":"vzdump 100","action":"delay-task","seconds":10}`)
//! makes a call's task start late, as on a slow host where the tool takes that long before
//! `fork_worker` (the worker's entry in the active task list and its UPID, whose start time
//! is the fork's, come only then: pve-common `RESTEnvironment.pm` `fork_worker`). The call
//! blocks meanwhile, outside the state lock and holding no guest lock; a call that starts no
//! task is not delayed.
//!
//! How: the call runs on a copy of the state first. If it recorded a task and a delay applies,
//! the copy is dropped, the process sleeps outside the state lock, and the call runs again
//! with the clock moved on (on the state as it is by then, as the tool would have found it
//! at the fork). If it recorded a task and a hold applies, the copy is dropped and only a
//! running entry (and the lock) is committed; the process then waits outside the state lock,
//! polling for a stop request, and finally re-runs the call on the state as it is by then,
//! under the task's original UPID ([`crate::task::Worker`]) — or, when stopped, records the
//! interrupted task. A running entry whose holding process died (killed, like a worker killed
//! with SIGKILL) ends as `unexpected status` and keeps its config lock, as in PVE (`qm unlock`
//! removes it); its flock is gone with the process. SIGTERM (or INT, QUIT) to a process whose
//! task is held ends that task as a stop request does, as the CLI passes the signal on to its
//! worker ([`hold`]).
//!
//! Builds on [`crate::state`] and [`crate::task`] (which hold a running entry's data: [`Running`],
//! [`Held`], [`How`]); neither of them imports this module.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::state::{State, Store, Task};
use crate::task::{Held, How, Running, Worker, me};
use crate::{Ctx, Failure, Output};

/// How often a waiting process looks at the state again.
const POLL: Duration = Duration::from_millis(100);
/// `kill_process_group` waits this long for a stopped worker before SIGKILL [SRC pve-common
/// f665029eac78 `src/PVE/RESTEnvironment.pm`].
const STOP_WAIT: Duration = Duration::from_secs(5);
/// `lock_config`'s flock timeout (AbstractConfig `lock_config` → `lock_config_full($vmid, 10, …)`).
pub const FLOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// vzdump's `lockwait` default: 180 minutes (PVE::VZDump::Common `$confdesc`).
pub const VZDUMP_LOCKWAIT: Duration = Duration::from_secs(180 * 60);

/// A lock another running task holds, which made this call wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The UPID of the task holding it.
    pub upid: String,
    /// Which lock.
    pub what: Wait,
}

/// The locks a call may have to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A guest's flock (10 s, then `can't lock file … - got timeout`).
    Flock,
    /// vzdump's node-wide lock `/var/run/vzdump.lock` (one backup job at a time per node).
    VzdumpGlobal,
}

/// Re-running a held call after its hold: the task keeps its identity; `stopped` when a stop
/// was requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The worker identity the task started with.
    pub worker: Worker,
    /// It was stopped.
    pub stopped: bool,
}

/// How one call relates to running tasks (part of [`Ctx`]).
#[derive(Debug, Default)]
pub struct CallTasks {
    /// For the next task the call records: reuse this identity / record it as interrupted.
    pub resume: RefCell<Option<Resume>>,
    /// A lock held by another running task stopped the call; it is retried once that is over.
    pub blocked: RefCell<Option<Blocked>>,
    /// This is a retry after waiting for that lock: which, and whether the wait ran out.
    pub waited: Option<(Wait, bool)>,
    /// A stop request: after the call, wait until this task has ended.
    pub await_end: RefCell<Option<String>>,
    /// The clock is fixed (tests): waiting advances it by the time waited instead of reading it.
    pub fixed_clock: bool,
    /// A held task's worker outlives this tool on a signal (`detach` fault): the tool's argv,
    /// for the worker process that takes the task over.
    pub detach: Option<Vec<String>>,
}

/// The time after waiting `waited` (real clock, or a fixed one moved on).
fn later(ctx: &Ctx, waited: Duration) -> i64 {
    if ctx.tasks.fixed_clock {
        ctx.now + i64::try_from(waited.as_secs()).unwrap_or(0)
    } else {
        crate::timefmt::now().max(ctx.now)
    }
}

/// The lock a running task of type `kind` holds on the guest in its id field (see the module
/// doc for the sources). `None`: it holds none the simulator models.
pub fn lock_for(kind: &str, guest_running: bool) -> Option<How> {
    let config = |l: &str| Some(How::Config(l.to_string()));
    match kind {
        "vzdump" => config("backup"),
        "qmsnapshot" | "vzsnapshot" => config("snapshot"),
        "qmdelsnapshot" | "vzdelsnapshot" => config("snapshot-delete"),
        "qmrollback" | "vzrollback" => config("rollback"),
        "qmrestore" | "vzrestore" => config("create"),
        "vzclone" => config("disk"),
        // Exclusive when the source runs, shared otherwise (`clone_vm` `$lock_source_vm`).
        "qmclone" => Some(How::Flock {
            exclusive: guest_running,
        }),
        _ => None,
    }
}

/// How a task of type `kind` ends when stopped: the log it had written (from the full log
/// `full` it would have written) and its error. Sources: pve-common `RESTEnvironment.pm`
/// `fork_worker` (the worker's own handler: `die "received interrupt\n"`); pve-manager
/// `PVE/API2/VZDump.pm` (`die "interrupted by signal\n"`) and `PVE/VZDump.pm`
/// (`exec_backup_task` logs `ERROR: Backup of VM N failed - …` and `Failed at …`, then rethrows
/// an interrupt, so no `Backup job finished` line follows); pve-guest-common
/// `AbstractConfig.pm` `snapshot_create` (`snapshot create failed: starting cleanup`, then
/// `die "$err\n"`, whose doubled newline `fork_worker` folds into a trailing space);
/// qemu-server `API2/Qemu.pm` `clone_vm` (`die "clone failed: $err"`).
pub fn interrupted(kind: &str, full: &[String], now: i64) -> (Vec<String>, String) {
    match kind {
        "vzdump" => {
            let cut = full
                .iter()
                .position(|l| l.starts_with("INFO: creating vzdump archive"))
                .map_or(full.len().min(2), |i| i + 1);
            let mut log = full[..cut].to_vec();
            let vmid = full
                .iter()
                .find_map(|l| l.strip_prefix("INFO: Starting Backup of VM "))
                .and_then(|r| r.split(' ').next())
                .unwrap_or("");
            log.push(format!(
                "ERROR: Backup of VM {vmid} failed - interrupted by signal"
            ));
            log.push(format!("INFO: Failed at {}", crate::timefmt::iso(now)));
            (log, "interrupted by signal".into())
        }
        "qmsnapshot" | "vzsnapshot" => {
            let mut log: Vec<String> = full.iter().take(1).cloned().collect();
            log.push("snapshot create failed: starting cleanup".into());
            (log, "received interrupt ".into())
        }
        "qmclone" | "vzclone" => (
            full.iter().take(1).cloned().collect(),
            "clone failed: interrupted by signal".into(),
        ),
        _ => (
            full.iter().take(1).cloned().collect(),
            "received interrupt".into(),
        ),
    }
}

/// Running tasks whose holder died end like a killed worker: the log has no `TASK …` line, so
/// the status reads `unexpected status` (pve-common `UPID.pm` `read_status`); a config lock stays
/// (nothing removed it), the flock went with the process.
pub fn reap(st: &mut State, now: i64) {
    for t in &mut st.tasks {
        if t.running.as_ref().is_some_and(|r| !r.alive()) {
            t.running = None;
            t.endtime = now;
            t.exitstatus = "unexpected status".into();
        }
    }
}

/// The running task `upid`, if it runs.
pub fn running<'a>(st: &'a State, upid: &str) -> Option<&'a Task> {
    st.tasks
        .iter()
        .find(|t| t.upid == upid && t.running.as_ref().is_some_and(Running::alive))
}

/// `pvesh delete /nodes/{node}/tasks/{upid}` (pve-manager `Tasks.pm` `stop_task` [SRC]): a UPID
/// PVE cannot parse is the parameter error `unable to parse worker upid`, one without a log on
/// this node `no such task`; a running task is asked to stop (the caller then waits for its
/// end, [`CallTasks::await_end`]), a finished one is left alone. Returns `null` either way.
pub fn stop(st: &mut State, ctx: &Ctx, node: &str, upid: &str) -> Result<(), Failure> {
    let param = |m: &str| Failure::die(format!("400 Parameter verification failed.\nupid: {m}\n"));
    if crate::task::parse_upid(upid).is_none() {
        return Err(param("unable to parse worker upid"));
    }
    let t = st
        .tasks
        .iter_mut()
        .find(|t| t.upid == upid && t.node == node)
        .ok_or_else(|| param("no such task"))?;
    if let Some(r) = t.running.as_mut().filter(|r| r.alive()) {
        r.stop = true;
        *ctx.tasks.await_end.borrow_mut() = Some(upid.to_string());
    }
    Ok(())
}

/// What the first pass of a call ended with.
enum Pass {
    Done(Output),
    Blocked(Blocked),
    Held(String),
    /// It starts a task, which a `delay-task` fault makes start later: nothing was committed.
    Delayed,
}

/// Run one call of a tool (`run` is the dispatch) against the store, with delayed starts,
/// holds, lock waits and stop requests handled as the module doc says. `hold_secs` is the
/// `hold` fault's, `delay_secs` the `delay-task` fault's.
pub fn call(
    store: &Store,
    ctx: &mut Ctx,
    hold_secs: u64,
    delay_secs: u64,
    run: impl Fn(&mut State, &Ctx) -> Output,
) -> std::io::Result<Output> {
    let mut waits = String::new();
    let mut delay = Duration::from_secs(delay_secs);
    if ctx.reads {
        // Beside other reads first; under the exclusive lock below if it changed anything,
        // met a lock or has to wait for a task.
        ctx.fail_used.set(false);
        let read = store.peek(|st| {
            reap(st, ctx.now);
            let out = run(st, ctx);
            let quiet =
                ctx.tasks.blocked.borrow().is_none() && ctx.tasks.await_end.borrow().is_none();
            quiet.then_some(out)
        })?;
        if let Some(Some(out)) = read {
            return Ok(out);
        }
        ctx.tasks.blocked.borrow_mut().take();
        ctx.tasks.await_end.borrow_mut().take();
    }
    loop {
        // Each pass starts afresh: the fault, once more, and no lock met yet.
        ctx.fail_used.set(false);
        let pass = store.transact(ctx.now, |st| {
            reap(st, ctx.now);
            let mut work = st.clone();
            let out = run(&mut work, ctx);
            if let Some(b) = ctx.tasks.blocked.borrow_mut().take() {
                return Pass::Blocked(b);
            }
            let new = work
                .tasks
                .iter()
                .rev()
                .find(|t| !st.tasks.iter().any(|o| o.upid == t.upid))
                .cloned();
            match new {
                Some(_) if !delay.is_zero() => Pass::Delayed,
                Some(task) if hold_secs > 0 => {
                    let upid = task.upid.clone();
                    begin(st, &work, task);
                    Pass::Held(upid)
                }
                _ => {
                    *st = work;
                    Pass::Done(out)
                }
            }
        })?;
        match pass {
            Pass::Done(mut out) => {
                if let Some(upid) = ctx.tasks.await_end.borrow_mut().take() {
                    wait_end(store, &upid, STOP_WAIT);
                }
                out.stderr.insert_str(0, &waits);
                return Ok(out);
            }
            Pass::Blocked(b) => {
                let limit = match b.what {
                    Wait::Flock => FLOCK_TIMEOUT,
                    Wait::VzdumpGlobal => VZDUMP_LOCKWAIT,
                };
                let started = Instant::now();
                let freed = wait_end(store, &b.upid, limit);
                if b.what == Wait::Flock {
                    // lock_file_full prints this before it blocks, and ` OK` once it got the lock.
                    waits.push_str("trying to acquire lock...\n");
                    if freed {
                        waits.push_str(" OK\n");
                    }
                }
                ctx.tasks.waited = Some((b.what, !freed));
                ctx.now = later(ctx, started.elapsed());
            }
            Pass::Delayed => {
                let started = Instant::now();
                std::thread::sleep(delay);
                ctx.now = later(ctx, started.elapsed());
                delay = Duration::ZERO;
            }
            Pass::Held(upid) => {
                let mut out = hold(store, ctx, &upid, hold_secs, &run)?;
                out.stderr.insert_str(0, &waits);
                return Ok(out);
            }
        }
    }
}

/// Commit the running entry of `task` (recorded by the first pass on `work`) into `st`, which
/// is still the state from before the call, and take its lock.
fn begin(st: &mut State, work: &State, mut task: Task) {
    st.seq = st.seq.max(work.seq);
    let vmid: Option<u32> = task.id.parse().ok();
    let guest = vmid.and_then(|v| st.guests.get(&v));
    let how = lock_for(&task.kind, guest.is_some_and(|g| g.running));
    let lock = match (how, vmid) {
        (Some(How::Config(l)), Some(v)) => st.guests.get_mut(&v).and_then(|g| {
            if g.config.contains_key("lock") {
                return None;
            }
            g.config.insert("lock".into(), serde_json::json!(l));
            Some(Held {
                vmid: v,
                how: How::Config(l),
            })
        }),
        (Some(how @ How::Flock { .. }), Some(v)) if guest.is_some() => Some(Held { vmid: v, how }),
        _ => None,
    };
    let (holder, holder_start) = me();
    // What the worker has printed so far: its first line.
    task.log.truncate(1);
    task.exitstatus = String::new();
    task.endtime = 0;
    task.running = Some(Running {
        holder,
        holder_start,
        lock,
        stop: false,
    });
    st.tasks.push(task);
}

/// Wait (outside the state lock) until task `upid` no longer runs, at most `limit`; true when
/// it ended.
fn wait_end(store: &Store, upid: &str, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        let runs = store
            .transact(crate::timefmt::now(), |st| running(st, upid).is_some())
            .unwrap_or(false);
        if !runs {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// Keep task `upid` running for `secs` or until a stop request, then end it: re-run the call on
/// the state as it is now, under the task's identity, or record it as interrupted.
fn hold(
    store: &Store,
    ctx: &mut Ctx,
    upid: &str,
    secs: u64,
    run: &impl Fn(&mut State, &Ctx) -> Output,
) -> std::io::Result<Output> {
    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    // SIGTERM, SIGINT or SIGQUIT to the tool while its worker runs: the CLI passes TERM on to
    // the worker's process group (pve-common `RESTEnvironment.pm` `$tee_worker`, the
    // synchronous `fork_worker` of every CLI call), so the task ends interrupted as a stop
    // request ends it. Before the fork (a `hang` or `delay-task` wait) the signals keep their
    // default action, and the call dies having started nothing.
    let signalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGQUIT,
    ] {
        let _ = signal_hook::flag::register(sig, signalled.clone());
    }
    let stopped = loop {
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
        let stop = store.transact(ctx.now, |st| {
            st.tasks
                .iter()
                .find(|t| t.upid == upid)
                .and_then(|t| t.running.as_ref())
                .map(|r| r.stop)
        })?;
        match stop {
            Some(true) => break true,
            Some(false) if signalled.load(std::sync::atomic::Ordering::SeqCst) => {
                if let Some(argv) = &ctx.tasks.detach {
                    let left = until.saturating_duration_since(Instant::now());
                    detach(store, upid, left, argv);
                }
                break true;
            }
            None => {
                return Ok(Output::err(
                    "pve-sim: the running task vanished (reset?)",
                    255,
                ));
            }
            Some(false) if Instant::now() >= until => break false,
            Some(false) => {}
        }
    };
    ctx.now = later(ctx, started.elapsed());
    // Another task's lock met on the way out fails at once instead of waiting again.
    ctx.tasks.waited = Some((Wait::Flock, true));
    ctx.fail_used.set(false);
    store.transact(ctx.now, |st| {
        let Some(pos) = st.tasks.iter().position(|t| t.upid == upid) else {
            return Output::err("pve-sim: the running task vanished (reset?)", 255);
        };
        let task = st.tasks.remove(pos);
        if let Some(Held {
            vmid,
            how: How::Config(l),
        }) = task.running.as_ref().and_then(|r| r.lock.clone())
            && let Some(g) = st.guests.get_mut(&vmid)
            && g.config.get("lock").and_then(|v| v.as_str()) == Some(l.as_str())
        {
            g.config.remove("lock");
        }
        *ctx.tasks.resume.borrow_mut() = Some(Resume {
            worker: Worker {
                pid: task.pid,
                pstart: task.pstart,
                starttime: task.starttime,
            },
            stopped,
        });
        let out = run(st, ctx);
        ctx.tasks.blocked.borrow_mut().take();
        out
    })
}

/// The tool got a signal while its task was held, and a `detach` fault says its worker
/// outlives it: start a process of our own (`pve-sim detached-worker UPID SECS TOOL ARGS…`) in
/// its own process group, wait until it holds the task (the running entry names it), and end
/// this one as a signal would (exit 143). Without the handover the task ends interrupted.
fn detach(store: &Store, upid: &str, left: Duration, argv: &[String]) {
    use std::os::unix::process::CommandExt;
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let Ok(child) = std::process::Command::new(exe)
        .arg("detached-worker")
        .arg(upid)
        .arg(left.as_secs().max(1).to_string())
        .args(argv)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return;
    };
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let held = store
            .transact(crate::timefmt::now(), |st| {
                running(st, upid)
                    .and_then(|t| t.running.as_ref())
                    .map(|r| r.holder)
            })
            .ok()
            .flatten();
        if held == Some(child.id()) {
            std::process::exit(143);
        }
        std::thread::sleep(POLL);
    }
}

/// `pve-sim detached-worker UPID SECS TOOL ARGS…` ([`detach`]): take over held task `upid`
/// (its running entry names this process) and hold it for `secs` more or until it is stopped,
/// then end it as the tool would have.
pub fn detached_worker(
    store: &Store,
    ctx: &mut Ctx,
    upid: &str,
    secs: u64,
    run: impl Fn(&mut State, &Ctx) -> Output,
) -> std::io::Result<Output> {
    let (holder, holder_start) = me();
    let taken = store.transact(ctx.now, |st| {
        match st
            .tasks
            .iter_mut()
            .find(|t| t.upid == upid)
            .and_then(|t| t.running.as_mut())
        {
            Some(r) => {
                r.holder = holder;
                r.holder_start = holder_start;
                true
            }
            None => false,
        }
    })?;
    if !taken {
        return Ok(Output::err("pve-sim: no such running task", 255));
    }
    hold(store, ctx, upid, secs, &run)
}

/// The lock another running task holds on guest `vmid` that this call must wait for, if any:
/// a config lock is not a wait (it is [`crate::locks::check_lock`]'s refusal).
pub fn flock_holder(st: &State, vmid: u32, exclusive: bool) -> Option<&Task> {
    st.tasks.iter().find(|t| {
        t.running.as_ref().is_some_and(|r| {
            r.alive()
                && r.lock.as_ref().is_some_and(|h| {
                    h.vmid == vmid && matches!(h.how, How::Flock { exclusive: e } if e || exclusive)
                })
        })
    })
}

/// The running vzdump task on `node`, if any (its job holds `/var/run/vzdump.lock`).
pub fn vzdump_running<'a>(st: &'a State, node: &str) -> Option<&'a Task> {
    st.tasks.iter().find(|t| {
        t.node == node && t.kind == "vzdump" && t.running.as_ref().is_some_and(Running::alive)
    })
}
