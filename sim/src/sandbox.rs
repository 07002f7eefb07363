//! The sandbox that guest commands really run in [sim-only]: there is no guest, so a command sent
//! through the QEMU guest agent or `pct exec` runs on this host, as an unprivileged account, in a
//! per-guest directory, so tests see real exit codes, output and files.
//!
//! Rules (all [sim-only]; the real agent runs the command as root inside the guest):
//! * Account: `pve-sim-guest`, created on first use with
//!   `useradd --system --no-create-home --shell /usr/sbin/nologin pve-sim-guest` (under a lock).
//!   Commands and guest file I/O run with its uid/gid and no supplementary groups.
//! * Directories: `<dir of the state file>/guests/<vmid>/` (root, 0711) holds `root/` (the guest's
//!   `/`: owned by the account, 0700, with `tmp/`, `root/`, `home/` created on first use) and
//!   `exec/` (root, 0700: the agent's process table, see [`ExecRecord`]). The state directory
//!   gets mode 0711 (search only) so the account can reach `guests/`; every other ancestor must
//!   already be searchable by it (`/var/lib` is; a test's temp dir must be made so).
//! * Paths: a guest path for `file-read`/`file-write` is normalised lexically (`..` stops at
//!   `/`) and looked up under `root/`. For a command, no chroot: it runs with cwd = `root/`
//!   (the agent's cwd is `/`), `HOME=root/root`, `PATH=/usr/bin:/bin` and nothing else in its
//!   environment, argv exec'd directly (no shell); the program and every argument that is
//!   `/tmp`, `/root`, `/home` or starts with one of them plus `/` is rewritten to the same path
//!   under `root/`, so `sort -o /tmp/out.txt /tmp/in.txt` reads and writes the files
//!   `file-write`/`file-read` see. Other absolute paths (`/etc/os-release`, `/usr/bin/env`) are
//!   the host's, read as the unprivileged account.
//! * Programs: the guest has the machine's essential tools and the programs of
//!   [`crate::guest_tools`] (`systemctl`), which the simulator answers itself, so a guest command
//!   behaves the same on a machine without systemd.
//! * Time limit: a command still running after the limit (`pve-sim sandbox timeout=S`, default
//!   300 s) is killed with its process group (SIGKILL).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::Output;

/// The unprivileged account guest commands run as.
pub const ACCOUNT: &str = "pve-sim-guest";
/// `PATH` of a guest command.
pub const GUEST_PATH: &str = "/usr/bin:/bin";
/// Guest directories whose paths are rewritten in a command's argv.
pub const MAPPED_DIRS: [&str; 3] = ["/tmp", "/root", "/home"];

/// uid/gid of [`ACCOUNT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    /// uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
}

fn lookup_account(passwd: &str) -> Option<Account> {
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[0] == ACCOUNT).then_some(())?;
        Some(Account {
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
        })
    })
}

fn find_account() -> Option<Account> {
    lookup_account(&fs::read_to_string("/etc/passwd").ok()?)
}

/// [`ACCOUNT`], created first if missing (serialised by a lock in `base`).
pub fn account(base: &Path) -> Result<Account, String> {
    if let Some(a) = find_account() {
        return Ok(a);
    }
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(base.join(".account.lock"))
        .map_err(|e| format!("account lock: {e}"))?;
    lock.lock().map_err(|e| format!("account lock: {e}"))?;
    if let Some(a) = find_account() {
        return Ok(a);
    }
    let useradd = ["/usr/sbin/useradd", "/sbin/useradd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("useradd");
    // The lock only covers this state directory: another one (a parallel test) may be adding
    // the account at the same time, so a failed useradd is retried until the account shows up.
    let mut last = String::new();
    for _ in 0..50 {
        let out = Command::new(useradd)
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                ACCOUNT,
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{useradd}: {e}"))?;
        if let Some(a) = find_account() {
            return Ok(a);
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
        thread::sleep(Duration::from_millis(100));
    }
    Err(format!("useradd {ACCOUNT} failed: {last}"))
}

/// `<dir of the state file>/guests`.
pub fn base_dir(state_path: &Path) -> PathBuf {
    match state_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.join("guests"),
        _ => PathBuf::from("guests"),
    }
}

/// One guest's sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// `guests/<vmid>`.
    pub dir: PathBuf,
    /// `guests/<vmid>/root`: the guest's `/`.
    pub root: PathBuf,
    /// Who runs the guest's commands.
    pub account: Account,
}

fn mkdir(path: &Path, mode: u32) -> io::Result<()> {
    match DirBuilder::new().mode(mode).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Independent of the umask, and repaired if someone loosened it.
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

fn searchable_by(meta: &fs::Metadata, a: Account) -> bool {
    let mode = meta.mode();
    mode & 0o001 != 0
        || (meta.uid() == a.uid && mode & 0o100 != 0)
        || (meta.gid() == a.gid && mode & 0o010 != 0)
}

/// Create (or check) the sandbox of guest `vmid` under `base` (see the module doc).
pub fn prepare(base: &Path, vmid: u32) -> Result<Sandbox, String> {
    let err = |what: &Path, e: io::Error| format!("{}: {e}", what.display());
    if let Some(state_dir) = base.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !state_dir.exists() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(state_dir)
                .map_err(|e| err(state_dir, e))?;
        }
        let meta = fs::metadata(state_dir).map_err(|e| err(state_dir, e))?;
        if meta.mode() & 0o001 == 0 {
            // Search permission only: state.json and faults.json stay 0600.
            let mode = (meta.mode() & 0o7777) | 0o011;
            fs::set_permissions(state_dir, fs::Permissions::from_mode(mode))
                .map_err(|e| err(state_dir, e))?;
        }
    }
    mkdir(base, 0o711).map_err(|e| err(base, e))?;
    let account = account(base)?;
    let dir = base.join(vmid.to_string());
    mkdir(&dir, 0o711).map_err(|e| err(&dir, e))?;
    let exec = dir.join("exec");
    mkdir(&exec, 0o700).map_err(|e| err(&exec, e))?;
    let root = dir.join("root");
    let fresh = !root.exists();
    mkdir(&root, 0o700).map_err(|e| err(&root, e))?;
    std::os::unix::fs::chown(&root, Some(account.uid), Some(account.gid))
        .map_err(|e| err(&root, e))?;
    if fresh {
        for sub in MAPPED_DIRS {
            let p = root.join(&sub[1..]);
            mkdir(&p, 0o755).map_err(|e| err(&p, e))?;
            std::os::unix::fs::chown(&p, Some(account.uid), Some(account.gid))
                .map_err(|e| err(&p, e))?;
        }
    }
    let canon = fs::canonicalize(&root).map_err(|e| err(&root, e))?;
    for anc in canon.ancestors().skip(1) {
        let meta = fs::metadata(anc).map_err(|e| err(anc, e))?;
        if !searchable_by(&meta, account) {
            return Err(format!(
                "'{}' (mode {:04o}) is not searchable by {ACCOUNT}; give it o+x",
                anc.display(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(Sandbox { dir, root, account })
}

impl Sandbox {
    /// The sandbox at `dir` for `account` (already prepared).
    pub fn at(dir: PathBuf, account: Account) -> Self {
        Sandbox {
            root: dir.join("root"),
            dir,
            account,
        }
    }

    /// `guests/<vmid>/exec`: the agent's process table.
    pub fn exec_dir(&self) -> PathBuf {
        self.dir.join("exec")
    }

    /// Host path of guest path `guest` (relative paths start at `/`, like the agent's cwd).
    pub fn map(&self, guest: &str) -> PathBuf {
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for c in Path::new(guest).components() {
            match c {
                Component::Normal(p) => parts.push(p),
                Component::ParentDir => {
                    parts.pop();
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        let mut p = self.root.clone();
        p.extend(parts);
        p
    }

    /// One argv word with the [`MAPPED_DIRS`] rule applied.
    pub fn rewrite(&self, arg: &str) -> String {
        let mapped = MAPPED_DIRS
            .iter()
            .any(|d| arg == *d || arg.strip_prefix(d).is_some_and(|r| r.starts_with('/')));
        if mapped {
            self.map(arg).to_string_lossy().into_owned()
        } else {
            arg.to_string()
        }
    }

    /// The command for guest argv `argv` (non-empty), as the module doc describes; stdio is
    /// left to the caller.
    pub fn command(&self, argv: &[String]) -> Command {
        // A program every simulated guest has is the simulator's, never the machine's own
        // ([`crate::guest_tools`]).
        let mut c = match crate::guest_tools::simulated(&argv[0]) {
            Some(name) => {
                let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("pve-sim"));
                let mut c = Command::new(exe);
                c.args(["guest-tool", name]);
                c
            }
            None => Command::new(self.rewrite(&argv[0])),
        };
        c.args(argv[1..].iter().map(|a| self.rewrite(a)))
            .env_clear()
            .env("PATH", GUEST_PATH)
            .env("HOME", self.root.join("root"))
            .current_dir(&self.root)
            .uid(self.account.uid)
            .gid(self.account.gid)
            .process_group(0);
        c
    }

    /// Run `pve-sim guest-io …` as the account (so guest file I/O cannot follow a symlink the
    /// guest planted to a host file it may not read).
    fn io_helper(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, IoFailure> {
        let exe = std::env::current_exe().map_err(IoFailure::Setup)?;
        let mut cmd = Command::new(exe);
        cmd.arg("guest-io")
            .args(args)
            .env_clear()
            .current_dir(&self.root)
            .uid(self.account.uid)
            .gid(self.account.gid)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(IoFailure::Setup)?;
        let feeder = match (input, child.stdin.take()) {
            (Some(data), Some(mut w)) => {
                let data = data.to_vec();
                Some(thread::spawn(move || {
                    let _ = w.write_all(&data);
                }))
            }
            _ => None,
        };
        let out = child.wait_with_output().map_err(IoFailure::Setup)?;
        if let Some(f) = feeder {
            let _ = f.join();
        }
        if out.status.success() {
            return Ok(out.stdout);
        }
        let msg = String::from_utf8_lossy(&out.stderr);
        let mut words = msg.split_whitespace();
        match (words.next(), words.next().and_then(|n| n.parse().ok())) {
            (Some("open"), Some(n)) => Err(IoFailure::Open(n)),
            (Some("io"), Some(n)) => Err(IoFailure::Io(n)),
            _ => Err(IoFailure::Setup(io::Error::other(format!(
                "guest-io: {}",
                msg.trim()
            )))),
        }
    }

    /// Read up to `count` bytes at `offset` of guest file `guest`.
    pub fn read_file(&self, guest: &str, offset: u64, count: u64) -> Result<Vec<u8>, IoFailure> {
        let host = self.map(guest);
        self.io_helper(
            &[
                "read",
                &host.to_string_lossy(),
                &offset.to_string(),
                &count.to_string(),
            ],
            None,
        )
    }

    /// Create or truncate guest file `guest` and write `data` (mode `wb`).
    pub fn write_file(&self, guest: &str, data: &[u8]) -> Result<(), IoFailure> {
        let host = self.map(guest);
        self.io_helper(&["write", &host.to_string_lossy()], Some(data))
            .map(|_| ())
    }
}

/// Why a guest file operation failed.
#[derive(Debug)]
pub enum IoFailure {
    /// open(2) failed with this errno.
    Open(i32),
    /// read(2)/write(2) failed with this errno.
    Io(i32),
    /// The helper could not run.
    Setup(io::Error),
}

/// `strerror(errno)`, as GLib's `g_strerror` and QEMU's `error_setg_errno` print it.
pub fn strerror(errno: i32) -> String {
    let s = io::Error::from_raw_os_error(errno).to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(5) // EIO
}

/// `pve-sim guest-io read PATH OFFSET COUNT` | `guest-io write PATH` (stdin): the file half of
/// the agent, run as the sandbox account by [`Sandbox`]. Writes the data to stdout itself (it
/// may be binary); failures are `open ERRNO` / `io ERRNO` on stderr, exit 1. It needs no
/// privilege and grants none: it is plain file I/O with the caller's own identity.
pub fn guest_io(args: &[String]) -> Output {
    let fail = |what: &str, e: &io::Error| Output::err(&format!("{what} {}", errno(e)), 1);
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["read", path, offset, count] => {
            let (Ok(offset), Ok(count)) = (offset.parse::<u64>(), count.parse::<u64>()) else {
                return Output::err("usage", 2);
            };
            let mut f = match File::open(path) {
                Ok(f) => f,
                Err(e) => return fail("open", &e),
            };
            if offset > 0
                && let Err(e) = f.seek(SeekFrom::Start(offset))
            {
                return fail("io", &e);
            }
            let mut data = Vec::new();
            if let Err(e) = f.take(count).read_to_end(&mut data) {
                return fail("io", &e);
            }
            let mut out = io::stdout().lock();
            if let Err(e) = out.write_all(&data).and_then(|()| out.flush()) {
                return fail("io", &e);
            }
            Output::default()
        }
        ["write", path] => {
            // guest-file-open mode `wb`: O_WRONLY|O_CREAT|O_TRUNC, a new file gets 0666 whatever
            // the umask, an existing one keeps its mode [SRC qemu qga/commands-posix.c
            // `guest_file_open`, DEFAULT_NEW_FILE_MODE].
            let existed = Path::new(path).exists();
            let mut f = match OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o666)
                .open(path)
            {
                Ok(f) => f,
                Err(e) => return fail("open", &e),
            };
            if !existed {
                let _ = f.set_permissions(fs::Permissions::from_mode(0o666));
            }
            let mut data = Vec::new();
            if let Err(e) = io::stdin().read_to_end(&mut data) {
                return fail("io", &e);
            }
            if let Err(e) = f.write_all(&data) {
                return fail("io", &e);
            }
            Output::default()
        }
        _ => Output::err(
            "usage: pve-sim guest-io read PATH OFFSET COUNT | write PATH",
            2,
        ),
    }
}

/// The agent's entry for one `guest-exec` process (`exec/<pid>.json`, with the captured output
/// in `<pid>.out` / `<pid>.err`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ExecRecord {
    /// The guest's `started_at` when the command started: after a restart the agent has
    /// forgotten the process.
    pub boot: Option<i64>,
    /// Finished (process reaped and both pipes closed).
    pub exited: bool,
    /// Exit code after a normal exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exitcode: Option<i32>,
    /// Terminating signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// More stdout came than was kept.
    #[serde(default)]
    pub out_truncated: bool,
    /// More stderr came than was kept.
    #[serde(default)]
    pub err_truncated: bool,
}

/// Write `bytes` to `path` atomically (temp file + rename), mode 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp.{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
    }
    fs::rename(&tmp, path)
}

/// Paths of the record of `pid`: `(json, out, err)`.
pub fn record_paths(exec_dir: &Path, pid: u64) -> (PathBuf, PathBuf, PathBuf) {
    (
        exec_dir.join(format!("{pid}.json")),
        exec_dir.join(format!("{pid}.out")),
        exec_dir.join(format!("{pid}.err")),
    )
}

/// Keep the first `limit` bytes of a pipe and drain the rest, noting the loss (the agent keeps
/// at most GUEST_EXEC_MAX_OUTPUT per stream, reads on and sets `truncated` [SRC qemu
/// qga/commands.c `guest_exec_output_watch`]).
fn capture(mut r: impl Read + Send + 'static, limit: usize) -> JoinHandle<(Vec<u8>, bool)> {
    thread::spawn(move || {
        let (mut kept, mut truncated) = (Vec::new(), false);
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = limit.saturating_sub(kept.len());
                    if n > room {
                        truncated = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        (kept, truncated)
    })
}

/// SIGKILL the process group `pgid` (the command was started with `process_group(0)`).
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
}

/// Wait for `child` and for `done()`, killing the group at `timeout`; after the kill, waits at
/// most 5 s more for `done()`.
fn wait_limited(child: &mut Child, timeout: Duration, done: impl Fn() -> bool) -> ExitStatus {
    let start = Instant::now();
    let mut status = None;
    let mut killed_at: Option<Instant> = None;
    loop {
        if status.is_none() {
            match child.try_wait() {
                Ok(Some(s)) => status = Some(s),
                Ok(None) => {}
                Err(_) => {
                    if let Ok(s) = child.wait() {
                        status = Some(s);
                    }
                }
            }
        }
        if let Some(s) = status
            && (done() || killed_at.is_some_and(|k| k.elapsed() > Duration::from_secs(5)))
        {
            return s;
        }
        if killed_at.is_none() && start.elapsed() >= timeout {
            kill_group(child);
            killed_at = Some(Instant::now());
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Exit code / signal of a status.
pub fn status_parts(s: ExitStatus) -> (Option<i32>, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => (Some(c), None),
        (None, Some(sig)) => (None, Some(sig)),
        (None, None) => (None, None),
    }
}

/// What [`runner`] needs besides the argv.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The guest's sandbox.
    pub sandbox: Sandbox,
    /// The agent pid (record name).
    pub pid: u64,
    /// Bytes kept per stream.
    pub out_limit: u64,
    /// Seconds before the kill.
    pub timeout: u64,
    /// Whether stdin data follows on the runner's own stdin.
    pub stdin: bool,
}

impl RunSpec {
    /// The runner's argv after the program: `guest-run DIR PID UID GID LIMIT TIMEOUT STDIN -- ARGV…`.
    pub fn to_args(&self, argv: &[String]) -> Vec<String> {
        let mut v = vec![
            "guest-run".to_string(),
            self.sandbox.dir.to_string_lossy().into_owned(),
            self.pid.to_string(),
            self.sandbox.account.uid.to_string(),
            self.sandbox.account.gid.to_string(),
            self.out_limit.to_string(),
            self.timeout.to_string(),
            u8::from(self.stdin).to_string(),
            "--".to_string(),
        ];
        v.extend(argv.iter().cloned());
        v
    }

    fn parse(args: &[String]) -> Option<(RunSpec, Vec<String>)> {
        let sep = args.iter().position(|a| a == "--")?;
        let [dir, pid, uid, gid, limit, timeout, stdin] = &args[..sep] else {
            return None;
        };
        let account = Account {
            uid: uid.parse().ok()?,
            gid: gid.parse().ok()?,
        };
        let argv = args[sep + 1..].to_vec();
        (!argv.is_empty()).then_some(())?;
        Some((
            RunSpec {
                sandbox: Sandbox::at(PathBuf::from(dir), account),
                pid: pid.parse().ok()?,
                out_limit: limit.parse().ok()?,
                timeout: timeout.parse().ok()?,
                stdin: stdin == "1",
            },
            argv,
        ))
    }
}

/// `pve-sim guest-run …` (root, started detached by the `exec` handler): the agent's side of one
/// `guest-exec`. Spawns the command, tells the handler on stdout `ok` or `err ERRNO` (spawn
/// failed: the agent answers the exec call itself with the error), then captures the output,
/// waits (with the time limit) and writes the final [`ExecRecord`].
pub fn runner(args: &[String]) -> Output {
    let Some((spec, argv)) = RunSpec::parse(args) else {
        return Output::err(
            "usage: pve-sim guest-run DIR PID UID GID LIMIT TIMEOUT 0|1 -- ARGV",
            2,
        );
    };
    let mut input = Vec::new();
    if spec.stdin {
        let _ = io::stdin().read_to_end(&mut input);
    }
    let mut cmd = spec.sandbox.command(&argv);
    cmd.stdin(if spec.stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            println!("err {}", errno(&e));
            return Output::default();
        }
    };
    {
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "ok").and_then(|()| out.flush());
    }
    let feeder = child.stdin.take().map(|mut w| {
        thread::spawn(move || {
            let _ = w.write_all(&input);
        })
    });
    let limit = usize::try_from(spec.out_limit).unwrap_or(usize::MAX);
    let out_h = capture(child.stdout.take().expect("piped"), limit);
    let err_h = capture(child.stderr.take().expect("piped"), limit);
    let status = wait_limited(&mut child, Duration::from_secs(spec.timeout), || {
        out_h.is_finished() && err_h.is_finished()
    });
    let take = |h: JoinHandle<(Vec<u8>, bool)>| {
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            (Vec::new(), true)
        }
    };
    let (out, out_truncated) = take(out_h);
    let (err, err_truncated) = take(err_h);
    if let Some(f) = feeder.filter(|f| f.is_finished()) {
        let _ = f.join();
    }
    let (json, out_p, err_p) = record_paths(&spec.sandbox.exec_dir(), spec.pid);
    let boot = fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice::<ExecRecord>(&b).ok())
        .and_then(|r| r.boot);
    let (exitcode, signal) = status_parts(status);
    let rec = ExecRecord {
        boot,
        exited: true,
        exitcode,
        signal,
        out_truncated,
        err_truncated,
    };
    let _ = write_atomic(&out_p, &out);
    let _ = write_atomic(&err_p, &err);
    if json.exists() {
        // Not if exec-status already dropped the process (the guest was restarted meanwhile).
        let _ = write_atomic(&json, &serde_json::to_vec(&rec).unwrap_or_default());
    }
    Output::default()
}

/// Run `argv` in the sandbox in the foreground with the caller's stdio (`pct exec`): returns the
/// exit status, or the spawn error.
pub fn run_foreground(sb: &Sandbox, argv: &[String], timeout: u64) -> io::Result<ExitStatus> {
    let mut child = sb.command(argv).spawn()?;
    Ok(wait_limited(
        &mut child,
        Duration::from_secs(timeout),
        || true,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_rewrites_guest_paths() {
        let sb = Sandbox::at(PathBuf::from("/s/guests/100"), Account { uid: 1, gid: 1 });
        assert_eq!(
            sb.map("/tmp/in.txt"),
            Path::new("/s/guests/100/root/tmp/in.txt")
        );
        assert_eq!(
            sb.map("/../../etc/x"),
            Path::new("/s/guests/100/root/etc/x")
        );
        assert_eq!(sb.map("a/./b/../c"), Path::new("/s/guests/100/root/a/c"));
        assert_eq!(sb.rewrite("/tmp/out.txt"), "/s/guests/100/root/tmp/out.txt");
        assert_eq!(sb.rewrite("/root"), "/s/guests/100/root/root");
        assert_eq!(sb.rewrite("/tmpx"), "/tmpx");
        assert_eq!(sb.rewrite("/etc/os-release"), "/etc/os-release");
        assert_eq!(sb.rewrite("-o/tmp/x"), "-o/tmp/x");
    }

    #[test]
    fn account_lines_and_errno_texts() {
        let pw = "root:x:0:0::/root:/bin/bash\npve-sim-guest:x:996:993::/home/pve-sim-guest:/usr/sbin/nologin\n";
        assert_eq!(lookup_account(pw), Some(Account { uid: 996, gid: 993 }));
        assert_eq!(lookup_account("root:x:0:0::/root:/bin/bash"), None);
        assert_eq!(strerror(2), "No such file or directory");
        assert_eq!(strerror(21), "Is a directory");
    }

    #[test]
    fn runner_args_round_trip() {
        let spec = RunSpec {
            sandbox: Sandbox::at(PathBuf::from("/g/100"), Account { uid: 5, gid: 6 }),
            pid: 1042,
            out_limit: 99,
            timeout: 7,
            stdin: true,
        };
        let args = spec.to_args(&["sort".into(), "--".into()]);
        let (back, argv) = RunSpec::parse(&args[1..]).unwrap();
        assert_eq!(argv, ["sort", "--"]);
        assert_eq!(
            (back.pid, back.out_limit, back.timeout, back.stdin),
            (1042, 99, 7, true)
        );
        assert_eq!(back.sandbox.account, Account { uid: 5, gid: 6 });
    }
}
