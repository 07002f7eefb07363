//! The PVE simulator: one multi-call program that answers as `qm`, `pct`, `pvesh`, `pvesm`,
//! `vzdump`, `qmrestore`, `pveam`, `ha-manager` and `pvecm` (chosen by `argv[0]`'s basename, or by
//! the first argument when called as `pve-sim TOOL …`), keeps a small cluster's state in one
//! root-owned file, and prints the formats recorded in `tests/fixtures/pve` (FORMATS.md there is
//! the reference every printer cites). It is the project's only test double (ARCHITECTURE.md,
//! "Tests and the simulator").
//!
//! Flow of one call: identity check (non-root is refused like pmxcfs refuses it) → fault rules
//! (`faults`, evaluated and slept on *before* the state lock) → the tool, run inside one exclusive
//! read-modify-write of the state (`state::Store::transact`) → [`Output`]; a `pvesh get` runs
//! first under a shared lock beside other reads, as PVE answers reads without its cluster lock
//! (`state::Store::peek`), and again under the exclusive one only if it changed the state (a
//! finished task reaped). A task can start
//! late (the `delay-task` fault), be held running for a while, with its guest locked, and
//! stopped ([`running`], the `hold` fault); a call that meets another task's lock waits for it
//! outside the state lock ([`locks`]).
//!
//! Commands inside guests (guest-agent exec and files, `pct exec`) really run, in a sandbox of
//! their own ([`sandbox`], [`guest`]); `pct exec` checks under the state lock and runs the
//! command after releasing it, with the caller's stdio.

pub mod access;
pub mod admin;
pub mod api;
pub mod args;
pub mod b64;
pub mod backup;
pub mod backup_jobs;
pub mod cloudinit;
pub mod faults;
pub mod firewall;
pub mod guest;
pub mod guest_tools;
pub mod ha;
pub mod hostinfo;
pub mod locks;
pub mod migrate;
pub mod network;
pub mod observe;
pub mod ops;
pub mod provision;
pub mod pvesh;
pub mod qm;
pub mod running;
pub mod sandbox;
pub mod settings;
pub mod startup;
pub mod state;
pub mod storage_cfg;
pub mod storage_ops;
pub mod task;
pub mod timefmt;
pub mod tools;

use std::cell::Cell;
use std::path::PathBuf;

use state::{State, Store};

/// The tools this binary impersonates.
pub const TOOLS: &[&str] = &[
    "qm",
    "pct",
    "pvesh",
    "pvesm",
    "vzdump",
    "qmrestore",
    "pveam",
    "ha-manager",
    "pvecm",
    "ifreload",
];

/// Default fault-rule file (overridable by `PVE_SIM_FAULTS`, see [`faults`]).
pub const DEFAULT_FAULTS_PATH: &str = "/var/lib/pve-sim/faults.json";

/// What a call prints and how it exits.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Output {
    /// Bytes for stdout.
    pub stdout: String,
    /// Bytes for stderr.
    pub stderr: String,
    /// Exit status.
    pub code: i32,
}

impl Output {
    /// Exit 0 with `stdout`.
    pub fn ok(stdout: impl Into<String>) -> Self {
        Output {
            stdout: stdout.into(),
            ..Output::default()
        }
    }
    /// An error: `msg` (newline added if missing) on stderr and exit `code`.
    pub fn err(msg: &str, code: i32) -> Self {
        let mut stderr = msg.to_string();
        if !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        Output {
            stderr,
            code,
            ..Output::default()
        }
    }
}

impl From<Failure> for Output {
    fn from(f: Failure) -> Self {
        Output::err(&f.msg, f.code)
    }
}

/// An error raised before any task exists (a Perl `die` outside `fork_worker`, FORMATS §1.2):
/// the message goes to stderr and the exit is 2 for ENOENT-style checks, else 255.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Message, may span lines.
    pub msg: String,
    /// Exit status.
    pub code: i32,
}

impl Failure {
    /// Exit-255 failure.
    pub fn die(msg: impl Into<String>) -> Self {
        Failure {
            msg: msg.into(),
            code: 255,
        }
    }
    /// Exit-2 failure (errno still ENOENT from a failed stat).
    pub fn enoent(msg: impl Into<String>) -> Self {
        Failure {
            msg: msg.into(),
            code: 2,
        }
    }
}

/// Process-level inputs of a call.
#[derive(Debug, Clone)]
pub struct Env {
    /// Effective uid (`None` if it could not be read: treated as non-root).
    pub euid: Option<u32>,
    /// State file.
    pub state_path: PathBuf,
    /// Fault-rule file.
    pub faults_path: PathBuf,
    /// Fixed clock for tests; `None` = the real clock.
    pub now: Option<i64>,
}

impl Env {
    /// The real identity, `PVE_SIM_STATE` / `PVE_SIM_FAULTS` (or the defaults) and the clock.
    /// There is deliberately no variable that changes the identity check.
    pub fn from_process() -> Self {
        Env {
            euid: access::real_euid(),
            state_path: std::env::var_os("PVE_SIM_STATE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(state::DEFAULT_STATE_PATH)),
            faults_path: std::env::var_os("PVE_SIM_FAULTS")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_FAULTS_PATH)),
            now: None,
        }
    }
}

/// Per-call context handed to the tools.
#[derive(Debug)]
pub struct Ctx {
    /// Current time.
    pub now: i64,
    /// A `fail` fault aimed at this call.
    pub fail: Option<String>,
    /// Set when a task consumed [`Ctx::fail`]; otherwise the call fails as a whole.
    pub fail_used: Cell<bool>,
    /// Base directory of the guest sandboxes (`<state dir>/guests`); `None` in-process, where
    /// guest commands are refused.
    pub guests: Option<PathBuf>,
    /// Running tasks, locks and stop requests met by this call ([`running`]).
    pub tasks: running::CallTasks,
    /// The call only reads (`pvesh get`): it runs under a shared lock, beside other reads, and
    /// again under the exclusive one only if it changed the world after all (a finished task
    /// reaped). Real PVE answers reads without its cluster lock.
    pub reads: bool,
}

impl Ctx {
    /// A context without faults.
    pub fn new(now: i64) -> Self {
        Ctx {
            now,
            fail: None,
            fail_used: Cell::new(false),
            guests: None,
            tasks: running::CallTasks::default(),
            reads: false,
        }
    }
    /// Take the fail fault for a task (once: a job that applies it itself takes it first).
    pub fn task_fail(&self) -> Option<String> {
        if self.fail_used.get() {
            return None;
        }
        let f = self.fail.clone();
        if f.is_some() {
            self.fail_used.set(true);
        }
        f
    }
}

/// Run one call: `argv[0]` picks the tool (see the crate doc).
pub fn run(argv: &[String], env: &Env) -> Output {
    let base = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_default();
    let (tool, args): (String, &[String]) = if TOOLS.contains(&base.as_str()) {
        (base, argv.get(1..).unwrap_or_default())
    } else {
        match argv.get(1) {
            Some(t) => (t.clone(), &argv[2..]),
            None => return Output::err(admin::USAGE, 255),
        }
    };
    if tool == "guest-tool" {
        // A program of the simulated guests ([`guest_tools`]), run as the sandbox account like
        // the guest command it stands for.
        return guest_tools::run(args);
    }
    if tool == "guest-io" {
        // The sandbox's file helper, run *as the sandbox account* (so not behind the root
        // check): plain file I/O with the caller's own identity, nothing more.
        return sandbox::guest_io(args);
    }
    if let Err(refusal) = access::check(env.euid) {
        return refusal;
    }
    let now = env.now.unwrap_or_else(timefmt::now);
    if tool == "guest-run" {
        return sandbox::runner(args);
    }
    if tool == "detached-worker" {
        return detached_worker(args, env, now);
    }
    if !TOOLS.contains(&tool.as_str()) {
        return admin::run(&tool, args, env, now);
    }

    let joined = std::iter::once(tool.as_str())
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let effects = match faults::take(&env.faults_path, &joined) {
        Ok(e) => e,
        Err(e) => return Output::err(&format!("pve-sim: fault file: {e}"), 255),
    };
    if effects.pmxcfs_down {
        return Output::err(faults::PMXCFS_DOWN, faults::PMXCFS_DOWN_EXIT);
    }
    if effects.hang_secs > 0 {
        // Sleep before taking the state lock, so a hung call never blocks the others.
        std::thread::sleep(std::time::Duration::from_secs(effects.hang_secs));
    }
    // A real tool's start-up, outside the state lock ([`startup`]).
    startup::pay(env);
    if tool == "pct" && args.first().map(String::as_str) == Some("exec") {
        let mut out = guest::pct_exec(&args[1..], env, now, &effects);
        let w: String = effects.warn.iter().map(|m| format!("{m}\n")).collect();
        out.stderr.insert_str(0, &w);
        return out;
    }
    let mut ctx = Ctx {
        now,
        fail: effects.fail.clone(),
        fail_used: Cell::new(false),
        guests: Some(sandbox::base_dir(&env.state_path)),
        tasks: running::CallTasks {
            fixed_clock: env.now.is_some(),
            detach: effects.detach.then(|| {
                std::iter::once(tool.clone())
                    .chain(args.iter().cloned())
                    .collect()
            }),
            ..running::CallTasks::default()
        },
        reads: tool == "pvesh" && args.first().map(String::as_str) == Some("get"),
    };
    let store = Store::new(&env.state_path);
    let result = running::call(
        &store,
        &mut ctx,
        effects.hold_secs,
        effects.delay_secs,
        |st: &mut State, ctx| dispatch(&tool, args, st, ctx),
    );
    let mut out = match result {
        Ok(o) => o,
        Err(e) => Output::err(&format!("pve-sim: state file: {e}"), 255),
    };
    if let Some(msg) = &effects.fail
        && !ctx.fail_used.get()
    {
        // A read (or a call that failed before its task) fails as a whole.
        out = Output::err(msg, 255);
    }
    if !effects.warn.is_empty() {
        let mut w: String = effects.warn.iter().map(|m| format!("{m}\n")).collect();
        w.push_str(&out.stderr);
        out.stderr = w;
    }
    out
}

/// `pve-sim detached-worker UPID SECS TOOL ARGS…`: the worker of a held task whose tool a
/// signal ended (a `detach` fault, [`running::detached_worker`]). Root only, like the tools.
fn detached_worker(args: &[String], env: &Env, now: i64) -> Output {
    let (Some(upid), Some(secs), Some(tool)) = (
        args.first(),
        args.get(1).and_then(|s| s.parse::<u64>().ok()),
        args.get(2).filter(|t| TOOLS.contains(&t.as_str())),
    ) else {
        return Output::err("usage: pve-sim detached-worker UPID SECS TOOL ARGS...", 255);
    };
    let rest = &args[3..];
    let mut ctx = Ctx {
        now,
        fail: None,
        fail_used: Cell::new(false),
        guests: Some(sandbox::base_dir(&env.state_path)),
        tasks: running::CallTasks {
            fixed_clock: env.now.is_some(),
            ..running::CallTasks::default()
        },
        reads: false,
    };
    let store = Store::new(&env.state_path);
    match running::detached_worker(&store, &mut ctx, upid, secs, |st: &mut State, ctx| {
        dispatch(tool, rest, st, ctx)
    }) {
        Ok(o) => o,
        Err(e) => Output::err(&format!("pve-sim: state file: {e}"), 255),
    }
}

fn dispatch(tool: &str, args: &[String], st: &mut State, ctx: &Ctx) -> Output {
    // HA requests due by now have been carried out by the (simulated) LRM.
    ops::settle_ha(st, ctx.now);
    match tool {
        "pvesh" => pvesh::run(st, ctx, args),
        "qm" => qm::run(st, ctx, state::Kind::Qemu, args),
        "pct" => qm::run(st, ctx, state::Kind::Lxc, args),
        "vzdump" => backup::vzdump(st, ctx, args),
        "qmrestore" => backup::qmrestore(st, ctx, args),
        "pvesm" => tools::pvesm(st, ctx, args),
        "pveam" => tools::pveam(st, ctx, args),
        "ha-manager" => tools::ha_manager(st, ctx, args),
        "pvecm" => tools::pvecm(st, ctx, args),
        "ifreload" => network::ifreload(st, args),
        _ => Output::err(admin::USAGE, 255),
    }
}
