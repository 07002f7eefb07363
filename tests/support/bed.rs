//! The sandbox host (`scripts/testbed.sh`): real sshd on 127.0.0.1, a real account with the
//! sudoers file pxagent rendered, the PVE simulator at the PVE paths. Its coordinates come from
//! the `PXAGENT_*` variables `scripts/testbed.sh env` prints; without them a test that needs
//! the bed fails with what to run.
//!
//! Tests that change the host (the sudoers file, faults and knobs of the simulator, its guests,
//! sshd sessions, accounts) hold [`lock`] for their whole run, so they never overlap, and put
//! back what they changed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::run::px;

/// The simulator's multi-call binary: as root it reads and changes what the host holds.
pub const SIM: &str = "/usr/local/lib/pve-sim/pve-sim";

static HOST: Mutex<()> = Mutex::new(());

/// Hold the host for a test that changes it (or needs it unchanged); released on drop. A test
/// that failed while holding it does not block the others.
pub fn lock() -> MutexGuard<'static, ()> {
    HOST.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the bed is and who logs in there.
pub struct Bed {
    /// `PXAGENT_HOST`.
    pub host: String,
    /// `PXAGENT_PORT`.
    pub port: String,
    /// `PXAGENT_USER`, the agent account.
    pub user: String,
    /// `PXAGENT_IDENTITY`, the account's private key.
    pub identity: String,
    /// `PXAGENT_KNOWN_HOSTS`, which trusts the bed's host key.
    pub known_hosts: String,
    /// The account's installed sudoers file: `PXAGENT_TESTBED_SUDOERS`, else
    /// `/etc/sudoers.d/<user>`.
    pub sudoers: String,
}

/// The bed from the environment; panics with what to run when it is not there (tests that
/// need it never skip).
pub fn bed() -> Bed {
    let get = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: these tests need the sandbox host; run scripts/test.sh (or `eval \"$(scripts/testbed.sh env)\"` after `scripts/testbed.sh up`)")
        })
    };
    let user = get("PXAGENT_USER");
    Bed {
        host: get("PXAGENT_HOST"),
        port: get("PXAGENT_PORT"),
        identity: get("PXAGENT_IDENTITY"),
        known_hosts: get("PXAGENT_KNOWN_HOSTS"),
        sudoers: std::env::var("PXAGENT_TESTBED_SUDOERS")
            .unwrap_or_else(|_| format!("/etc/sudoers.d/{user}")),
        user,
    }
}

/// Run the simulator with `args` as root; asserts success, returns its stdout.
pub fn sim(args: &[&str]) -> String {
    let out = Command::new(SIM).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "pve-sim {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Resets the simulator when dropped, however the test that holds it ends.
pub struct SimReset;

impl Drop for SimReset {
    fn drop(&mut self) {
        let _ = Command::new(SIM).arg("reset").status();
    }
}

/// Reset the simulator now, and again when the guard drops.
pub fn sim_reset() -> SimReset {
    sim(&["reset"]);
    SimReset
}

/// pxagent with `args` on the plain bed, or on the gated one.
pub fn px_on(home: &super::Home, gated_bed: bool, args: &[&str]) -> super::Run {
    let px = home.px();
    let px = if gated_bed { px.gated() } else { px.bed() };
    px.args(args).run()
}

/// Add, as root (as `pvesm add` by hand would), NFS storage `sid` on the server 198.51.100.66,
/// which no test policy names, exporting the simulator's hostile share (`/export/hostile`:
/// sim/README.md) with `content`.
pub fn add_hostile_share(sid: &str, content: &str) {
    sim(&[
        "pvesh",
        "create",
        "/storage",
        "--storage",
        sid,
        "--type",
        "nfs",
        "--server",
        "198.51.100.66",
        "--export",
        "/export/hostile",
        "--content",
        content,
    ]);
}

/// `pvesh get PATH EXTRA… --output-format json` asked of the simulator directly: what the host
/// holds, to compare pxagent's answers with.
pub fn sim_get(path: &str, extra: &[&str]) -> Value {
    let out = Command::new(SIM)
        .args(["pvesh", "get", path])
        .args(extra)
        .args(["--output-format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sim {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The cluster resource of guest `vmid`, if the simulator has it.
pub fn guest(vmid: u64) -> Option<Value> {
    sim_get("/cluster/resources", &["--type", "vm"])
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["vmid"] == vmid)
        .cloned()
}

/// Guest `vmid`'s status (`running`, `stopped`), or `absent`.
pub fn status_of(vmid: u64) -> String {
    guest(vmid)
        .map(|g| g["status"].as_str().unwrap().to_string())
        .unwrap_or_else(|| "absent".into())
}

/// Add a fault rule (JSON, see `pve-sim fault`) to the simulator.
pub fn fault(rule: &str) {
    assert!(
        Command::new(SIM)
            .args(["fault", "add", rule])
            .status()
            .unwrap()
            .success()
    );
}

/// Remove every fault rule.
pub fn clear_faults() {
    let _ = Command::new(SIM).args(["fault", "clear"]).status();
}

fn sudo_log() -> String {
    format!("/var/log/sudo-{}.log", bed().user)
}

/// Where sudo's JSON event log for the bed's account ends now.
pub fn sudo_log_len() -> u64 {
    std::fs::metadata(sudo_log()).map(|m| m.len()).unwrap_or(0)
}

/// The commands sudo logged (allowed or denied) since `offset`: proof of what reached the
/// host. Other processes may use the bed meanwhile, so callers look for their own commands.
pub fn sudo_commands_since(offset: u64) -> Vec<String> {
    let bytes = std::fs::read(sudo_log()).unwrap_or_default();
    let tail = String::from_utf8_lossy(&bytes[(offset as usize).min(bytes.len())..]).into_owned();
    tail.lines()
        .filter_map(|l| l.trim().strip_prefix("\"SUDO_COMMAND="))
        .map(|c| c.trim_end_matches([',', '"']).to_string())
        .collect()
}

/// Assert that none of the commands sudo saw since `offset` contains any of `markers`.
pub fn assert_not_sent(offset: u64, markers: &[&str]) {
    for c in sudo_commands_since(offset) {
        for m in markers {
            assert!(!c.contains(m), "a refused op reached sudo: {c}");
        }
    }
}

/// Replaces the bed's sudoers file for the duration of a test and puts the original back on
/// drop. Hold [`lock`] longer than the swap (declare the guard first).
pub struct SudoersSwap {
    path: String,
    saved: Vec<u8>,
}

impl SudoersSwap {
    /// Install `text` the safe way (temp name, `visudo -cf`, 0440, rename), or with `None`
    /// remove the file.
    pub fn install(text: Option<&str>) -> SudoersSwap {
        let path = bed().sudoers;
        let saved = std::fs::read(&path).expect("the bed's sudoers file");
        match text {
            None => std::fs::remove_file(&path).unwrap(),
            Some(t) => {
                let tmp = format!("{path}.new");
                std::fs::write(&tmp, t).unwrap();
                let ok = Command::new("visudo").args(["-cf", &tmp]).output().unwrap();
                assert!(
                    ok.status.success(),
                    "{}",
                    String::from_utf8_lossy(&ok.stderr)
                );
                Command::new("chmod").args(["0440", &tmp]).status().unwrap();
                std::fs::rename(&tmp, &path).unwrap();
            }
        }
        SudoersSwap { path, saved }
    }

    /// Install pxagent's own render for the bed's account: `sudoers render --user U --profile
    /// full EXTRA…`.
    pub fn render(extra: &[&str]) -> SudoersSwap {
        let b = bed();
        let mut args = vec!["sudoers", "render", "--user", &b.user, "--profile", "full"];
        args.extend_from_slice(extra);
        let r = px().args(&args).run();
        assert_eq!(r.code, 0, "{}", r.stderr);
        SudoersSwap::install(Some(&r.stdout))
    }
}

impl Drop for SudoersSwap {
    /// Atomically, so sudo never sees a half-written or too-open file.
    fn drop(&mut self) {
        let tmp = format!("{}.new", self.path);
        std::fs::write(&tmp, &self.saved).unwrap();
        let _ = Command::new("chmod").args(["0440", &tmp]).status();
        let _ = std::fs::rename(&tmp, &self.path);
    }
}

/// The host lock and the bed's sudoers rendered with container exec for 200-299 (the full
/// profile plus `--ct-exec 200-299`). The swap comes first in the tuple because tuple fields drop
/// in order: the original sudoers file must be back before the lock goes to the next test.
pub fn ct_exec_bed() -> (SudoersSwap, MutexGuard<'static, ()>) {
    let g = lock();
    let swap = SudoersSwap::render(&["--ct-exec", "200-299"]);
    (swap, g)
}

/// A plain OpenSSH client logging in as `login` (`user@host`) on `port` with the key
/// `identity` and nothing of the caller's ssh setup: no config file, no agent, no tty, no
/// prompt, stdin closed. The host key is checked against `known_hosts`; `None` accepts any
/// host key, records none and keeps ssh's own warnings quiet (a throwaway sshd's). `line` is
/// the remote command line (none: an interactive login attempt).
pub fn ssh_command(
    login: &str,
    port: &str,
    identity: &str,
    known_hosts: Option<&str>,
    line: Option<&std::ffi::OsStr>,
) -> Command {
    let mut cmd = Command::new("ssh");
    cmd.args(["-F", "/dev/null", "-T", "-i", identity, "-p", port]);
    match known_hosts {
        Some(file) => cmd.args(["-o", &format!("UserKnownHostsFile={file}")]),
        None => cmd.args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
        ]),
    };
    cmd.args([
        "-o",
        "BatchMode=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "IdentityAgent=none",
    ])
    .arg(login)
    .stdin(Stdio::null());
    if let Some(l) = line {
        cmd.arg(l);
    }
    cmd
}

/// An `ssh-agent -D` child with its own socket, killed by PID on drop.
pub struct Agent {
    child: Child,
    /// The agent's socket (give it as `SSH_AUTH_SOCK` to one child at a time).
    pub socket: PathBuf,
}

impl Agent {
    /// Start an agent whose socket is `dir/agent.sock`.
    pub fn start(dir: &Path) -> Agent {
        let socket = dir.join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start ssh-agent");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "ssh-agent did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Agent { child, socket }
    }

    /// `ssh-add` with the socket given to that one child process, so the test process's
    /// environment is never changed.
    pub fn add(&self, key: &Path) {
        let out = Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gated bed (`scripts/testbed.sh up --gate`): the same simulator behind a second sshd and
/// account whose key's forced command is `pxagent gate`. `scripts/test.sh` exports its `PXAGENT_*`
/// variables prefixed `PXAGENT_GATED_`.
pub struct Gated {
    /// Connection variables, as `PXAGENT_*` names and values.
    pub env: Vec<(&'static str, String)>,
    /// The host policy the gate reads (root-owned; tests rewrite it).
    pub policy: PathBuf,
    /// A listed approver's private key.
    pub approver_key: PathBuf,
    /// What the gate's syslog listener received, one record per line.
    pub log: PathBuf,
    /// The account.
    pub user: String,
}

/// The gated bed from the environment; panics with what to run when it is not there.
pub fn gated() -> Gated {
    let get = |k: &str| {
        std::env::var(format!("PXAGENT_GATED_{k}")).unwrap_or_else(|_| {
            panic!("PXAGENT_GATED_{k} is not set: these tests need the gated bed; run scripts/test.sh (it brings up `scripts/testbed.sh up --gate --port 2223 --user zen-gate` and exports its env with the PXAGENT_GATED_ prefix)")
        })
    };
    let mut env = Vec::new();
    for k in ["HOST", "PORT", "USER", "IDENTITY", "KNOWN_HOSTS"] {
        let name: &'static str = match k {
            "HOST" => "PXAGENT_HOST",
            "PORT" => "PXAGENT_PORT",
            "USER" => "PXAGENT_USER",
            "IDENTITY" => "PXAGENT_IDENTITY",
            _ => "PXAGENT_KNOWN_HOSTS",
        };
        env.push((name, get(k)));
    }
    Gated {
        user: get("USER"),
        policy: get("TESTBED_GATE_POLICY").into(),
        approver_key: get("TESTBED_APPROVER_KEY").into(),
        log: get("TESTBED_GATE_LOG").into(),
        env,
    }
}

impl Gated {
    /// `ssh` as the agent with the bed's key and known_hosts, the given remote command line
    /// (none: an interactive login attempt). Returns (exit code, stdout, stderr).
    pub fn ssh(&self, line: Option<&str>) -> (i32, String, String) {
        self.ssh_os(line.map(std::ffi::OsStr::new))
    }

    /// An OpenSSH client running `line` on the gated bed, not yet started (stdout and stderr
    /// are the test's unless the caller redirects them).
    pub fn ssh_cmd(&self, line: &str) -> Command {
        self.ssh_command(Some(std::ffi::OsStr::new(line)))
    }

    /// [`ssh_command`] with the gated bed's login, key and known_hosts.
    fn ssh_command(&self, line: Option<&std::ffi::OsStr>) -> Command {
        let get = |n: &str| {
            self.env
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        ssh_command(
            &format!("{}@{}", get("PXAGENT_USER"), get("PXAGENT_HOST")),
            &get("PXAGENT_PORT"),
            &get("PXAGENT_IDENTITY"),
            Some(&get("PXAGENT_KNOWN_HOSTS")),
            line,
        )
    }

    /// [`Gated::ssh`] with a command line that need not be UTF-8.
    pub fn ssh_os(&self, line: Option<&std::ffi::OsStr>) -> (i32, String, String) {
        let out = self.ssh_command(line).output().expect("ssh");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Replace the host policy (root-owned, 0644, like the real one); the previous text comes
    /// back when the guard drops.
    pub fn policy(&self, yaml: &str) -> PolicySwap {
        let old = std::fs::read_to_string(&self.policy).unwrap_or_default();
        write_root_file(&self.policy, yaml);
        PolicySwap {
            path: self.policy.clone(),
            old,
        }
    }

    /// The gate's audit records written since `offset` bytes of its log.
    pub fn log_since(&self, offset: u64) -> Vec<Value> {
        let text = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(&text[offset.min(text.len() as u64) as usize..])
            .lines()
            .filter_map(|l| l.split_once("]: ").map(|(_, j)| j.to_string()))
            .filter_map(|j| serde_json::from_str(&j).ok())
            .collect()
    }

    /// The current length of the gate's log.
    pub fn log_len(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }
}

fn write_root_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Puts the host policy back on drop.
pub struct PolicySwap {
    path: PathBuf,
    old: String,
}

impl Drop for PolicySwap {
    fn drop(&mut self) {
        write_root_file(&self.path, &self.old);
    }
}

/// The bed's sshd log (`PXAGENT_TESTBED_SSHD_LOG`, LogLevel VERBOSE).
fn sshd_log() -> String {
    std::env::var("PXAGENT_TESTBED_SSHD_LOG").unwrap_or_else(|_| {
        panic!("PXAGENT_TESTBED_SSHD_LOG is not set: run scripts/test.sh (or eval \"$(scripts/testbed.sh env)\")")
    })
}

/// Once a remote command whose line contains `marker` runs (within 5 s), wait `settle`, then
/// cut `user`'s connections: kill that account's sshd session processes (the privileged monitor
/// and the session child, matched by the account's name, never broadly; OpenSSH 9.8+, Debian 13,
/// names them `sshd-session: …`). Whether it saw the command and killed them.
pub fn cut_sessions_when_running(marker: &str, user: &str, settle: Duration) -> bool {
    let pattern = format!("^sshd(-session)?: {user}( |@)");
    for _ in 0..100 {
        let running = Command::new("pgrep")
            .args(["-f", marker])
            .output()
            .unwrap()
            .status
            .success();
        if running {
            std::thread::sleep(settle);
            return Command::new("pkill")
                .args(["-KILL", "-f", &pattern])
                .status()
                .unwrap()
                .success();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Where the bed's sshd log ends now.
pub fn sshd_log_len() -> u64 {
    std::fs::metadata(sshd_log()).map(|m| m.len()).unwrap_or(0)
}

/// The sshd log's lines since `offset`.
pub fn sshd_lines_since(offset: u64) -> Vec<String> {
    let bytes = std::fs::read(sshd_log()).unwrap_or_default();
    String::from_utf8_lossy(&bytes[(offset as usize).min(bytes.len())..])
        .lines()
        .map(String::from)
        .collect()
}

/// What sshd logged since `offset`, by client port: the connections it accepted (with the
/// key's fingerprint) and how many sessions — one per remote command — each ran. Other tests
/// may use the bed meanwhile; the ports tell the connections apart.
pub fn sshd_connections_since(offset: u64) -> Vec<SshdConnection> {
    let mut conns: Vec<SshdConnection> = Vec::new();
    let port_of = |line: &str| -> Option<u16> {
        let rest = line.split(" port ").nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    for line in sshd_lines_since(offset) {
        let Some(port) = port_of(&line) else {
            continue;
        };
        if line.starts_with("Accepted publickey for ") {
            let key = line.rsplit(' ').next().unwrap_or("").to_string();
            conns.push(SshdConnection {
                port,
                key,
                sessions: 0,
            });
        } else if line.starts_with("Starting session: ") {
            match conns.iter_mut().find(|c| c.port == port) {
                Some(c) => c.sessions += 1,
                // A connection accepted before `offset`.
                None => conns.push(SshdConnection {
                    port,
                    key: String::new(),
                    sessions: 1,
                }),
            }
        }
    }
    conns
}

/// One client connection in the bed's sshd log.
#[derive(Debug, Clone)]
pub struct SshdConnection {
    /// The client's port.
    pub port: u16,
    /// The fingerprint of the key it logged in with (empty: accepted before the offset).
    pub key: String,
    /// Sessions (remote commands) it started.
    pub sessions: usize,
}
