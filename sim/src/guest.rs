//! Commands inside guests: the QEMU guest-agent endpoints `…/qemu/{vmid}/agent/exec`,
//! `exec-status`, `file-write`, `file-read` (pvesh, any node: the node in the path must be the
//! VM's, like every `proxyto => 'node'` call) and `pct exec` (local node only). The commands
//! really run, in [`crate::sandbox`].
//!
//! Sources: qemu-server e6352be67f70 (FORMATS §0) `src/PVE/API2/Qemu/Agent.pm` (parameters,
//! limits, the file-read loop, the decoding of `out-data`) and `src/PVE/QemuServer/Agent.pm`
//! (`assert_agent_available`, `check_agent_error`, `qemu_exec`, `qemu_exec_status`);
//! qemu `qga/commands.c` / `qga/commands-posix.c` (the agent's own answers and messages);
//! pve-container 94f558522ef6 `src/PVE/CLI/pct.pm` `exec`; lxc `src/lxc/tools/lxc_attach.c`.
//!
//! How errors print: every agent failure is a `die` in the API handler, so pvesh prints it on
//! stderr and exits 255 [INFER exit code, like the other pre-fork errors, FORMATS §1.2]. An error
//! the agent itself returns comes back as `Agent error: <desc>` (`check_agent_error`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Map, Value, json};

use crate::args::{self, Ty, p};
use crate::sandbox::{self, ExecRecord, IoFailure, RunSpec, Sandbox};
use crate::state::{Guest, Kind, SandboxLimits, State, Store};
use crate::{Ctx, Env, Failure, Output, b64, faults, ops};

/// `$MAX_READ_SIZE` of file-read: 16 MiB, also the maximum of `count` [SRC Agent.pm].
pub const MAX_READ_SIZE: u64 = 16 * 1024 * 1024;
/// file-read reads in chunks of 1 MiB (`$read_size`) [SRC Agent.pm].
pub const READ_CHUNK: usize = 1024 * 1024;
/// file-write `content` maxLength: 60 KiB, "smaller than our 64k POST limit" [SRC Agent.pm].
pub const FILE_WRITE_MAX: usize = 60 * 1024;
/// exec `input-data` maxLength: 64 KiB [SRC Agent.pm].
pub const INPUT_DATA_MAX: usize = 64 * 1024;

const VMID: Ty = Ty::Int(Some(100), Some(999_999_999));

fn agent_error(desc: &str) -> Failure {
    Failure::die(format!("Agent error: {desc}"))
}

/// A command the agent was started without (`--allow-rpcs` leaves it out): QEMU's
/// `"Command %s has been disabled%s%s"` with qga's reason `the command is not allowed`
/// [SRC qemu qapi/qmp-dispatch.c `qmp_dispatch`, qga/main.c `ga_disable_not_allowed`; REAL
/// `tests/fixtures/pve/qm_guest_exec_disabled_rhel.txt`].
fn allowed(st: &State, vmid: u32, command: &str) -> Result<(), Failure> {
    if st.qga_no_exec.contains(&vmid) {
        return Err(agent_error(&format!(
            "Command {command} has been disabled: the command is not allowed"
        )));
    }
    Ok(())
}

fn sandbox_failure(e: impl std::fmt::Display) -> Failure {
    Failure::die(format!("pve-sim: sandbox: {e}"))
}

/// `assert_agent_available` [SRC QemuServer/Agent.pm], in its order: the `agent` key must exist
/// (even `agent: 0` passes, the check is `defined`), the VM must run here, and the agent must
/// answer `guest-ping` — it does not when disabled (no device), when the VM is paused, or when
/// the guest runs none ([`State::qga_down`]).
pub(crate) fn available<'a>(st: &'a State, node: &str, vmid: u32) -> Result<&'a Guest, Failure> {
    let g = ops::load(st, node, Kind::Qemu, vmid)?;
    if !g.config.contains_key("agent") {
        return Err(Failure::die("No QEMU guest agent configured"));
    }
    if !g.running {
        return Err(Failure::die(format!("VM {vmid} is not running")));
    }
    if !g.agent() || g.paused || st.qga_down.contains(&vmid) {
        return Err(Failure::die("QEMU guest agent is not running"));
    }
    Ok(g)
}

fn base(ctx: &Ctx) -> Result<&Path, Failure> {
    ctx.guests
        .as_deref()
        .ok_or_else(|| sandbox_failure("guest commands need the pve-sim binary (no sandbox here)"))
}

/// `POST …/agent/exec --command A [--command B …] [--input-data DATA]` → `{"pid":N}`.
/// `input-data` is raw text (PVE base64-encodes it for the agent) and becomes the command's
/// stdin; without it stdin is `/dev/null`. The command starts in the background and this call
/// returns at once, like the agent; a program that cannot be started is the agent's error
/// `Guest agent command failed, error was 'Failed to execute child process “P” (ERR)'`
/// [SRC qga/commands.c `qmp_guest_exec` QERR_QGA_COMMAND_FAILED + GLib gspawn.c message].
pub fn exec(
    st: &mut State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    command: &[String],
    input: Option<&str>,
) -> Result<Value, Failure> {
    let boot = available(st, node, vmid)?.started_at;
    allowed(st, vmid, "guest-exec")?;
    let Some(program) = command.first() else {
        return Err(agent_error("Parameter 'path' is missing"));
    };
    let sb = sandbox::prepare(base(ctx)?, vmid).map_err(sandbox_failure)?;
    // The agent's pid: unique per call (the real one is the guest's pid of the process).
    let pid = 1000 + st.next_seq();
    let (json_p, _, _) = sandbox::record_paths(&sb.exec_dir(), pid);
    let rec = ExecRecord {
        boot,
        exited: false,
        exitcode: None,
        signal: None,
        out_truncated: false,
        err_truncated: false,
    };
    sandbox::write_atomic(&json_p, &serde_json::to_vec(&rec).unwrap_or_default())
        .map_err(sandbox_failure)?;
    let spec = RunSpec {
        sandbox: sb,
        pid,
        out_limit: st.sandbox.out_limit,
        timeout: st.sandbox.timeout,
        stdin: input.is_some(),
    };
    match spawn_runner(&spec, command, input) {
        Ok(None) => Ok(json!({ "pid": pid })),
        Ok(Some(errno)) => {
            let _ = std::fs::remove_file(&json_p);
            Err(agent_error(&format!(
                "Guest agent command failed, error was 'Failed to execute child process “{program}” ({})'",
                sandbox::strerror(errno)
            )))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&json_p);
            Err(sandbox_failure(e))
        }
    }
}

/// Start `pve-sim guest-run …` detached (own process group, no tie to our stdio) and wait only
/// for its spawn verdict: `Ok(None)` started, `Ok(Some(errno))` the program could not start.
fn spawn_runner(
    spec: &RunSpec,
    argv: &[String],
    input: Option<&str>,
) -> Result<Option<i32>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut child = Command::new(exe)
        .args(spec.to_args(argv))
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("guest runner: {e}"))?;
    if let (Some(data), Some(mut w)) = (input, child.stdin.take()) {
        w.write_all(data.as_bytes())
            .map_err(|e| format!("guest runner stdin: {e}"))?;
    }
    let mut line = String::new();
    let out = child.stdout.take().ok_or("guest runner: no stdout")?;
    BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("guest runner: {e}"))?;
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["ok"] => Ok(None),
        ["err", n] => Ok(Some(n.parse().unwrap_or(5))),
        _ => {
            let _ = child.wait();
            Err("guest runner died before starting the command".into())
        }
    }
}

/// `GET …/agent/exec-status --pid N`: `{"exited":0}` while the command runs; once it ended
/// `{"exited":1,"exitcode":N}` (or `"signal":N`), plus `out-data`/`err-data` when non-empty
/// (decoded by PVE: one character per byte, see [`b64::latin1`]), each with its
/// `out-truncated`/`err-truncated`, 0 or 1 [SRC qga/commands.c `qmp_guest_exec_status` as fixed
/// by "qga: Fix truncated output handling in guest-exec status reporting" (QEMU 10.1, 2025-08,
/// backported to stable): the flag is present whenever the stream has data; Agent.pm turns the
/// booleans into 0/1]. Agents before that fix set the flag's *presence* from the truncation but
/// never its value, so a truncated stream showed `out-truncated: 0` and a complete one none:
/// pxagent reads a stream at the agent's 16 MiB cap as truncated whatever the flag says. Like the agent, the finished process is
/// forgotten once reported: asking again, for an unknown pid, or after the VM restarted, is
/// `Agent error: PID N does not exist` [SRC qemu commit "qga: Improve guest-exec-status error
/// message" (QEMU 8.2); older agents say `Invalid parameter 'pid'`].
pub fn exec_status(
    st: &State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    pid: i64,
) -> Result<Value, Failure> {
    let g = available(st, node, vmid)?;
    allowed(st, vmid, "guest-exec-status")?;
    let gone = || agent_error(&format!("PID {pid} does not exist"));
    let Ok(pid_u) = u64::try_from(pid) else {
        return Err(gone());
    };
    let exec_dir = base(ctx)?.join(vmid.to_string()).join("exec");
    let (json_p, out_p, err_p) = sandbox::record_paths(&exec_dir, pid_u);
    let Some(rec) = std::fs::read(&json_p)
        .ok()
        .and_then(|b| serde_json::from_slice::<ExecRecord>(&b).ok())
    else {
        return Err(gone());
    };
    let forget = || {
        for p in [&json_p, &out_p, &err_p] {
            let _ = std::fs::remove_file(p);
        }
    };
    if rec.boot != g.started_at {
        forget();
        return Err(gone());
    }
    if !rec.exited {
        return Ok(json!({"exited": 0}));
    }
    let mut m = Map::new();
    m.insert("exited".into(), json!(1));
    if let Some(c) = rec.exitcode {
        m.insert("exitcode".into(), json!(c));
    }
    if let Some(s) = rec.signal {
        m.insert("signal".into(), json!(s));
    }
    for (p, data_key, trunc_key, truncated) in [
        (&out_p, "out-data", "out-truncated", rec.out_truncated),
        (&err_p, "err-data", "err-truncated", rec.err_truncated),
    ] {
        let data = std::fs::read(p).unwrap_or_default();
        if !data.is_empty() {
            m.insert(data_key.into(), json!(b64::latin1(&data)));
            m.insert(trunc_key.into(), json!(i32::from(truncated)));
        }
    }
    forget();
    Ok(Value::Object(m))
}

fn io_failure(e: IoFailure, file: &str, mode: &str, verb: &str) -> Failure {
    match e {
        // guest-file-open / -read / -write errors [SRC qga/commands-posix.c, qga/commands.c].
        IoFailure::Open(n) => agent_error(&format!(
            "failed to open file '{file}' (mode: '{mode}'): {}",
            sandbox::strerror(n)
        )),
        IoFailure::Io(n) => {
            agent_error(&format!("failed to {verb} file: {}", sandbox::strerror(n)))
        }
        IoFailure::Setup(e) => sandbox_failure(e),
    }
}

/// `POST …/agent/file-write --file PATH --content DATA [--encode 0|1]` → null (prints nothing).
/// `encode` (default 1): PVE base64-encodes `content` for the agent, so the file gets the bytes
/// of the argument; with `--encode 0` `content` must already be base64 (the way to write bytes an
/// argv cannot carry, e.g. NUL). `content` is at most 61440 characters either way
/// ([`FILE_WRITE_MAX`]). Mode `wb`: created (0666) or truncated, parents must exist. The agent
/// opens before it decodes, so bad base64 still leaves an empty file.
pub fn file_write(
    st: &State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    file: &str,
    content: &str,
    encode: bool,
) -> Result<(), Failure> {
    available(st, node, vmid)?;
    allowed(st, vmid, "guest-file-open")?;
    let sb = sandbox::prepare(base(ctx)?, vmid).map_err(sandbox_failure)?;
    let data = if encode {
        Ok(content.as_bytes().to_vec())
    } else {
        b64::decode(content)
    };
    let write = |d: &[u8]| {
        sb.write_file(file, d)
            .map_err(|e| io_failure(e, file, "wb", "write to"))
    };
    match data {
        Ok(d) => write(&d),
        Err(m) => {
            write(&[])?;
            Err(agent_error(&m))
        }
    }
}

/// `GET …/agent/file-read --file PATH [--count N] [--offset N] [--decode 0|1]` →
/// `{"bytes-read":N,"content":"…"}` plus `"truncated":1` when the read stopped before the end.
/// PVE reads in 1 MiB chunks up to `count` (default and maximum 16 MiB); `truncated` is set when
/// no chunk came back short, so a file of exactly `count` bytes is "truncated" too, and without
/// `--count` a warning goes to stderr. `decode` (default 1): content as one character per byte
/// ([`b64::latin1`]); `--decode 0`: the concatenated base64 of each chunk (each padded).
pub fn file_read(
    st: &State,
    ctx: &Ctx,
    node: &str,
    vmid: u32,
    req: &FileRead<'_>,
) -> Result<(Value, Vec<String>), Failure> {
    available(st, node, vmid)?;
    allowed(st, vmid, "guest-file-open")?;
    let sb = sandbox::prepare(base(ctx)?, vmid).map_err(sandbox_failure)?;
    let count = req.count.unwrap_or(MAX_READ_SIZE);
    let data = sb
        .read_file(req.file, req.offset, count)
        .map_err(|e| io_failure(e, req.file, "r", "read"))?;
    let eof = (data.len() as u64) < count;
    let content = if req.decode {
        b64::latin1(&data)
    } else if data.is_empty() {
        String::new()
    } else {
        data.chunks(READ_CHUNK).map(b64::encode).collect()
    };
    let mut v = json!({"content": content, "bytes-read": data.len()});
    let mut warnings = Vec::new();
    if !eof {
        if req.count.is_none() {
            warnings.push(format!(
                "agent file-read: reached maximum read size: {MAX_READ_SIZE} bytes. output might be truncated."
            ));
        }
        v["truncated"] = json!(1);
    }
    Ok((v, warnings))
}

/// Parameters of [`file_read`].
#[derive(Debug, Clone, Copy)]
pub struct FileRead<'a> {
    /// Guest path.
    pub file: &'a str,
    /// `--count`.
    pub count: Option<u64>,
    /// `--offset`.
    pub offset: u64,
    /// `--decode` (default 1).
    pub decode: bool,
}

const PCT_EXEC_USAGE: &str = "pct exec <vmid> [<extra-args>] [OPTIONS]";

/// `pct exec VMID [--keep-env 0|1] -- ARGV…`: runs the command in the container's sandbox in
/// the foreground, stdin/stdout/stderr passed through, and exits with the command's code
/// (128+signal when killed) like `lxc-attach` [SRC lxc_attach.c]. Checks in `pct.pm` order
/// [SRC]: config on this node (else the usual exit-2 `Configuration file … does not exist`),
/// running (`container 'N' not running!`), a command (`missing command at … line 246.`).
/// A program that cannot start is lxc-attach's `lxc-attach: VMID: ../src/lxc/attach.c:
/// lxc_attach_run_command: 1845 No such file or directory - Failed to exec "P"` and exit 127
/// (ENOENT), 126 (EACCES, ENOEXEC), else the exec's -1 as 255 [SRC lxc e7b855a51b81
/// src/lxc/attach.c `lxc_attach_run_command`, log.h `SYSERROR`, log.c `log_append_stderr`,
/// tools/lxc_attach.c `exit(wexit)`; REAL line `pct_exec_missing_program_lxc_attach.txt`]. `--keep-env` is
/// accepted; the sandbox environment is always the minimal one.
pub fn pct_exec(args: &[String], env: &Env, now: i64, fx: &faults::Effects) -> Output {
    let (before, after) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &args[args.len()..]),
    };
    let parsed = match args::parse(before, &[p("keep-env", Ty::Bool)]) {
        Ok(p) => p,
        Err(e) => return args::param_error(&e, PCT_EXEC_USAGE),
    };
    let Some(id) = parsed.pos.first() else {
        return Output::err(&format!("400 not enough arguments\n{PCT_EXEC_USAGE}"), 255);
    };
    let vmid: u32 = match args::check(VMID, id) {
        Ok(v) => v.parse().unwrap_or(0),
        Err(m) => return args::param_error(&vec![("vmid".into(), m)], PCT_EXEC_USAGE),
    };
    let argv: Vec<String> = parsed.pos[1..].iter().chain(after).cloned().collect();
    let store = Store::new(&env.state_path);
    let checked = store.transact(now, |st| -> Result<SandboxLimits, Failure> {
        ops::settle_ha(st, now);
        let local = st.local_node.clone();
        let g = ops::load(st, &local, Kind::Lxc, vmid)?;
        if !g.running {
            return Err(Failure::die(format!("container '{vmid}' not running!")));
        }
        if argv.is_empty() {
            return Err(Failure::die(
                "missing command at /usr/share/perl5/PVE/CLI/pct.pm line 246.",
            ));
        }
        Ok(st.sandbox)
    });
    let limits = match checked {
        Ok(Ok(l)) => l,
        Ok(Err(f)) => return f.into(),
        Err(e) => return Output::err(&format!("pve-sim: state file: {e}"), 255),
    };
    if let Some(msg) = &fx.fail {
        return Output::err(msg, 255);
    }
    let sb: Sandbox = match sandbox::prepare(&sandbox::base_dir(&env.state_path), vmid) {
        Ok(s) => s,
        Err(e) => return sandbox_failure(e).into(),
    };
    let _ = std::io::stdout().flush();
    match sandbox::run_foreground(&sb, &argv, limits.timeout) {
        Ok(status) => {
            let code = match sandbox::status_parts(status) {
                (Some(c), _) => c,
                (None, Some(sig)) => 128 + sig,
                (None, None) => 255,
            };
            Output {
                code,
                ..Output::default()
            }
        }
        Err(e) => {
            let n = e.raw_os_error().unwrap_or(5);
            let code = match n {
                2 => 127,
                8 | 13 => 126,
                _ => 255,
            };
            Output::err(
                &format!(
                    "lxc-attach: {vmid}: ../src/lxc/attach.c: lxc_attach_run_command: 1845 {} - Failed to exec \"{}\"",
                    sandbox::strerror(n),
                    argv[0]
                ),
                code,
            )
        }
    }
}
