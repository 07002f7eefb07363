//! Live tests of the SSH transport (`pxagent::ssh`), its security rules among them, against a real
//! OpenSSH `sshd` that each test starts for itself on 127.0.0.1.
//!
//! Why real sshd: host-key checking, "no password attempt", remote quoting, signals on timeout
//! and a lost connection are all about what actually crosses the wire, which a fake server
//! would only restate. Each test gets its own temp dir (host key, client key, config, log),
//! its own port in 2300-2399, and kills its sshd — and only the processes descended from it —
//! on drop.
//!
//! Requirements: root (sshd must switch users), `/usr/sbin/sshd` (openssh-server), `ssh-keygen`,
//! `ssh-agent`, `ssh-add`, `pgrep`, `useradd`. A missing sshd fails loudly; nothing skips.
//! Logins use the throwaway account `pxa-ssh-test` (shell /bin/sh, password field `*` so that
//! key login works with `UsePAM no`), created idempotently on first use and left in place for
//! the next run: it has no password and no key outside these tests' temp dirs.
//! These tests run beside the bed's (their sshd, ports and account are their own), so only the
//! one-time account setup holds the host lock.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use pxagent::Error;
use pxagent::ssh::{Captured, HostKeyPolicy, Session, Target};

use crate::support::{Agent, lock};

pub(crate) const USER: &str = "pxa-ssh-test";
const SSHD: &str = "/usr/sbin/sshd";

fn sh(cmd: &str, args: &[&str]) -> std::process::Output {
    Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"))
}

fn must(cmd: &str, args: &[&str]) -> String {
    let out = sh(cmd, args);
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Checks the prerequisites and creates the login account once per test binary, holding the
/// host lock (sudo_rules adds and removes its own account meanwhile).
fn prerequisites() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _host = lock();
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: these tests need a real OpenSSH server. Install openssh-server \
             (the README's test script does) — they must not be skipped"
        );
        assert_eq!(
            must("id", &["-u"]).trim(),
            "0",
            "the SSH transport tests run sshd and need root"
        );
        if !sh("id", &["-u", USER]).status.success() {
            must("useradd", &["-m", "-s", "/bin/sh", USER]);
        }
        // A locked account (`!`) cannot log in even with a key when UsePAM is off; `*` means
        // "no valid password" without locking.
        must("usermod", &["-p", "*", USER]);
        // sshd refuses to start without its privilege separation directory.
        fs::create_dir_all("/run/sshd").unwrap();
    });
}

/// A free port in 2300-2399 (other test beds use 2222).
pub(crate) fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(2300);
    loop {
        let port = NEXT.fetch_add(1, Ordering::SeqCst);
        assert!(port < 2400, "no free port left in 2300-2399");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn keygen(path: &Path, passphrase: &str, comment: &str) {
    must(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            comment,
            "-f",
            path.to_str().unwrap(),
        ],
    );
}

fn fingerprint_of(pub_path: &Path) -> String {
    // `256 SHA256:… comment (ED25519)`
    must("ssh-keygen", &["-lf", pub_path.to_str().unwrap()])
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string()
}

/// `type base64` of a `.pub` file.
pub(crate) fn pub_key(pub_path: &Path) -> String {
    let text = fs::read_to_string(pub_path).unwrap();
    let mut f = text.split_whitespace();
    format!("{} {}", f.next().unwrap(), f.next().unwrap())
}

#[derive(Default)]
pub(crate) struct Options {
    /// Offer password and keyboard-interactive authentication too.
    pub(crate) offer_passwords: bool,
    /// Allow TCP forwarding (`direct-tcpip`), for a jump host (tests/jump.rs).
    pub(crate) allow_forwarding: bool,
}

pub(crate) struct Sshd {
    child: Option<Child>,
    dir: tempfile::TempDir,
    pub(crate) port: u16,
}

impl Sshd {
    pub(crate) fn start(opts: Options) -> Sshd {
        prerequisites();
        let dir = tempfile::tempdir().unwrap();
        // The login account reads authorized_keys from here (StrictModes is off).
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let d = dir.path();
        keygen(&d.join("host_ed25519"), "", "pxa-test-host");
        keygen(&d.join("id_client"), "", "pxa-test-client");
        fs::copy(d.join("id_client.pub"), d.join("authorized_keys")).unwrap();
        fs::set_permissions(d.join("authorized_keys"), fs::Permissions::from_mode(0o644)).unwrap();
        let port = free_port();
        let yn = |b: bool| if b { "yes" } else { "no" };
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_ed25519\n\
             PidFile {d}/sshd.pid\nUsePAM no\nStrictModes no\n\
             AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\n\
             PasswordAuthentication {pw}\nKbdInteractiveAuthentication {pw}\n\
             PermitRootLogin no\nAllowUsers {USER}\nLogLevel VERBOSE\nMaxSessions 10\n\
             MaxAuthTries 6\nX11Forwarding no\nAllowTcpForwarding {fwd}\nPrintMotd no\n\
             Subsystem sftp internal-sftp\n",
            d = d.display(),
            pw = yn(opts.offer_passwords),
            fwd = yn(opts.allow_forwarding),
        );
        fs::write(d.join("sshd_config"), config).unwrap();
        let log = fs::File::create(d.join("sshd.log")).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start sshd");
        let mut sshd = Sshd {
            child: Some(child),
            dir,
            port,
        };
        sshd.wait_listening();
        sshd
    }

    /// Waits for "Server listening" in the log rather than probing the port, so that the log
    /// holds only the test's own connections.
    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.log().contains("Server listening on 127.0.0.1") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("sshd exited with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not start:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }

    /// A target for the test account with the authorized client key and this server's own
    /// known_hosts file (initially absent), agent off.
    pub(crate) fn target(&self) -> Target {
        let mut t = Target::new("127.0.0.1", self.port, USER);
        t.identities = vec![self.path("id_client")];
        t.use_agent = false;
        t.agent_socket = None;
        t.known_hosts = self.path("known_hosts");
        t.host_key_policy = HostKeyPolicy::Strict;
        t.connect_timeout = Duration::from_secs(10);
        t.command_timeout = Some(Duration::from_secs(30));
        t.keepalive = Duration::from_secs(5);
        t
    }

    /// Writes a known_hosts file that trusts this server, and returns the target.
    pub(crate) fn trusted_target(&self) -> Target {
        let line = format!(
            "[127.0.0.1]:{} {}\n",
            self.port,
            pub_key(&self.path("host_ed25519.pub"))
        );
        fs::write(self.path("known_hosts"), line).unwrap();
        self.target()
    }

    fn host_fingerprint(&self) -> String {
        fingerprint_of(&self.path("host_ed25519.pub"))
    }

    /// Waits until sshd has logged the end of the test's connections, so absence checks on
    /// the log are meaningful.
    pub(crate) fn wait_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log();
            if log.contains(needle) || Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills this sshd and every process descended from it (per-connection sshd processes and
    /// the commands they run), found by walking parent PIDs in /proc — never by name.
    pub(crate) fn kill_tree(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Top-down in one `kill`: the sshd processes die before the commands under them, so
        // no shell survives long enough to report an exit status for a killed child.
        let mut pids = vec![child.id()];
        pids.extend(descendants(child.id()));
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let mut args = vec!["-KILL"];
        args.extend(list.iter().map(String::as_str));
        let _ = sh("kill", &args);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill_tree();
    }
}

/// All descendants of `root`, parents before children.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may contain spaces and parentheses.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![root];
    while let Some(p) = queue.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            out.push(c);
            queue.push(c);
        }
    }
    out
}

/// Whether a process of the test account with this exact command line is running.
fn remote_process_running(pattern: &str) -> bool {
    sh("pgrep", &["-u", USER, "-f", pattern]).status.success()
}

pub(crate) fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

pub(crate) async fn connect(t: &Target) -> Session {
    Session::connect(t)
        .await
        .unwrap_or_else(|e| panic!("connect failed: {e}"))
}

pub(crate) async fn run(s: &Session, a: &[&str]) -> Captured {
    s.exec(&args(a))
        .await
        .unwrap_or_else(|e| panic!("exec {a:?} failed: {e}"))
}

pub(crate) fn connect_err(r: pxagent::Result<Session>) -> Error {
    match r {
        Ok(s) => panic!("connected although it should not: {s:?}"),
        Err(e) => e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_round_trip_status_and_streams() {
    let sshd = Sshd::start(Options::default());
    let s = connect(&sshd.trusted_target()).await;
    assert!(
        s.host_key().contains(&sshd.host_fingerprint()),
        "{}",
        s.host_key()
    );
    assert_eq!(s.server_auth_methods(), Some(vec!["publickey".to_string()]));
    assert!(s.recorded_host_key().is_none());

    let ok = run(&s, &["true"]).await;
    assert_eq!(ok, Captured::default());
    let out = run(
        &s,
        &[
            "/bin/sh",
            "-c",
            "echo out; echo err >&2; printf 'no newline'; exit 3",
        ],
    )
    .await;
    assert_eq!(out.stdout, b"out\nno newline");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.exit_status, 3);
    assert!(!out.success());

    // A command killed by a signal is not a success (`exec` so that the killed shell is the
    // session's own process, which sshd then reports with exit-signal).
    let err = s
        .exec(&args(&[
            "exec",
            "/bin/sh",
            "-c",
            "echo dying >&2; kill -KILL $$",
        ]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Remote(_)), "{err:?}");
    assert!(err.to_string().contains("KILL"), "{err}");
    assert!(err.to_string().contains("dying"), "{err}");
    assert_eq!(run(&s, &["echo", "again"]).await.stdout, b"again\n");

    // NUL bytes are refused locally, and the session is still fine afterwards.
    let err = s.exec(&args(&["echo", "a\0b"])).await.unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    s.clone().close().await;
    let log = sshd.wait_log("Disconnected from user");
    assert!(
        log.contains(&format!("Accepted publickey for {USER}")),
        "{log}"
    );
}

/// A large input streams to the command a chunk at a time: exactly its bytes arrive (the
/// remote `sha256sum` says so), each chunk is told as sent, and a local read error is the
/// error, with no EOF sent: the command does not take what came so far for the whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_input_arrives_whole_or_not_at_all() {
    let sshd = Sshd::start(Options::default());
    let s = connect(&sshd.trusted_target()).await;
    let data: Vec<u8> = (0..20_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let mut sent_total = 0u64;
    let mut chunks = 0;
    let mut sent = |n: u64| {
        sent_total += n;
        chunks += 1;
    };
    let out = s
        .exec_from_reader(
            &args(&["sha256sum"]),
            &mut data.as_slice(),
            &mut sent,
            4096,
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.output.exit_status, 0, "{:?}", out.output.stderr_text());
    let want: String = {
        use sha2::Digest;
        sha2::Sha256::digest(&data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert!(
        out.output.stdout_text().starts_with(&want),
        "{}",
        out.output.stdout_text()
    );
    assert_eq!(sent_total, data.len() as u64);
    assert!(chunks > 10, "{chunks} chunks");

    /// Yields `good` bytes, then fails.
    struct Failing(usize);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("disk gone"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(b'x');
            self.0 -= n;
            Ok(n)
        }
    }
    let marker = format!("/tmp/pxa-stream-eof-{}", std::process::id());
    let _ = fs::remove_file(&marker);
    // The command records EOF only if it gets one.
    let script = format!("cat >/dev/null && touch {marker}");
    let err = s
        .exec_from_reader(
            &args(&["/bin/sh", "-c", &script]),
            &mut Failing(1_000_000),
            &mut |_| {},
            4096,
            Some(Duration::from_secs(20)),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("disk gone"), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!Path::new(&marker).exists(), "the command saw an EOF");
    assert_eq!(run(&s, &["echo", "still"]).await.stdout, b"still\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_arrive_literally() {
    let sshd = Sshd::start(Options::default());
    let s = connect(&sshd.trusted_target()).await;
    let tricky = [
        "plain",
        "with space",
        "  leading and trailing  ",
        "it's",
        "\"double\"",
        "$(touch /tmp/pxa-injected)",
        "`touch /tmp/pxa-injected`",
        "a;b",
        "a && b",
        "a | b",
        "*",
        "line1\nline2",
        "",
        "~",
        "#hash",
        "back\\slash",
        "$HOME",
        "{a,b}",
        "!bang",
        "tab\there",
        "ünïcödé",
        "--",
        "-n",
        "> /tmp/pxa-redirected",
    ];
    let mut argv = vec!["/usr/bin/printf", "%s\\0"];
    argv.extend(tricky);
    let out = run(&s, &argv).await;
    let expected: Vec<u8> = tricky.iter().flat_map(|a| a.bytes().chain([0])).collect();
    assert_eq!(
        out.stdout,
        expected,
        "got {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stderr.is_empty(), "{}", out.stderr_text());
    assert!(!Path::new("/tmp/pxa-injected").exists());
    assert!(!Path::new("/tmp/pxa-redirected").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_is_refused_with_fingerprint() {
    let sshd = Sshd::start(Options::default());
    let t = sshd.target();
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&sshd.host_fingerprint()), "{msg}");
    assert!(msg.contains("--accept-new"), "{msg}");
    assert!(
        msg.contains(&format!(
            "ssh-keyscan -p {} -t ed25519 127.0.0.1 >>",
            sshd.port
        )),
        "{msg}"
    );
    assert!(msg.contains("out of band"), "{msg}");
    assert!(!t.known_hosts.exists(), "Strict must not write known_hosts");
    let log = sshd.wait_log("Connection closed");
    assert!(!log.contains(USER), "an auth request was sent:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_new_records_then_strict_and_hashed_work() {
    let sshd = Sshd::start(Options::default());
    let mut t = sshd.target();
    t.known_hosts = sshd.path("new/dir/known_hosts");
    t.host_key_policy = HostKeyPolicy::AcceptNew;
    let s = connect(&t).await;
    let note = s.recorded_host_key().expect("a note about the new key");
    assert!(note.contains(&sshd.host_fingerprint()), "{note}");
    assert_eq!(run(&s, &["echo", "hi"]).await.stdout, b"hi\n");
    s.close().await;

    let text = fs::read_to_string(&t.known_hosts).unwrap();
    assert_eq!(
        text,
        format!(
            "[127.0.0.1]:{} {}\n",
            sshd.port,
            pub_key(&sshd.path("host_ed25519.pub"))
        )
    );
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&t.known_hosts), 0o600);
    assert_eq!(mode(t.known_hosts.parent().unwrap()), 0o700);
    // OpenSSH itself finds the entry.
    must(
        "ssh-keygen",
        &[
            "-F",
            &format!("[127.0.0.1]:{}", sshd.port),
            "-f",
            t.known_hosts.to_str().unwrap(),
        ],
    );

    // Now known: Strict connects, and AcceptNew does not add a second line.
    t.host_key_policy = HostKeyPolicy::Strict;
    connect(&t).await.close().await;
    t.host_key_policy = HostKeyPolicy::AcceptNew;
    let s = connect(&t).await;
    assert!(s.recorded_host_key().is_none());
    s.close().await;
    assert_eq!(fs::read_to_string(&t.known_hosts).unwrap(), text);

    // Hashed by the real ssh-keygen: still recognised.
    must("ssh-keygen", &["-H", "-f", t.known_hosts.to_str().unwrap()]);
    let hashed = fs::read_to_string(&t.known_hosts).unwrap();
    assert!(hashed.starts_with("|1|"), "{hashed}");
    t.host_key_policy = HostKeyPolicy::Strict;
    let s = connect(&t).await;
    assert_eq!(run(&s, &["echo", "hashed"]).await.stdout, b"hashed\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_host_key_is_refused_before_any_auth_even_with_accept_new() {
    let sshd = Sshd::start(Options::default());
    keygen(&sshd.path("other_host"), "", "impostor");
    let stored = format!(
        "# a comment line, so the entry is on line 3\n\n[127.0.0.1]:{} {}\n",
        sshd.port,
        pub_key(&sshd.path("other_host.pub"))
    );
    let mut t = sshd.target();
    fs::write(&t.known_hosts, &stored).unwrap();
    t.host_key_policy = HostKeyPolicy::AcceptNew;
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("CHANGED"), "{msg}");
    assert!(msg.contains(&sshd.host_fingerprint()), "{msg}");
    assert!(
        msg.contains(&fingerprint_of(&sshd.path("other_host.pub"))),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{}:3", t.known_hosts.display())),
        "{msg}"
    );
    assert_eq!(fs::read_to_string(&t.known_hosts).unwrap(), stored);

    let log = sshd.wait_log("Connection closed");
    for needle in [USER, "Accepted", "Failed", "userauth", "publickey"] {
        assert!(
            !log.contains(needle),
            "found {needle:?} in the sshd log:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_readable_key_is_refused_without_connecting() {
    let sshd = Sshd::start(Options::default());
    let t = sshd.trusted_target();
    fs::set_permissions(&t.identities[0], fs::Permissions::from_mode(0o644)).unwrap();
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    assert!(
        err.to_string().contains("UNPROTECTED PRIVATE KEY FILE"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!sshd.log().contains("Connection from"), "{}", sshd.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offered_passwords_are_reported_but_never_tried() {
    let sshd = Sshd::start(Options {
        offer_passwords: true,
        ..Options::default()
    });
    let t = sshd.trusted_target();
    let s = connect(&t).await;
    let methods = s.server_auth_methods().unwrap();
    assert!(methods.iter().any(|m| m == "password"), "{methods:?}");
    assert!(
        methods.iter().any(|m| m == "keyboard-interactive"),
        "{methods:?}"
    );
    assert!(methods.iter().any(|m| m == "publickey"), "{methods:?}");
    s.close().await;

    // A key the server does not accept: the client gives up instead of falling back.
    let mut t = t;
    keygen(&sshd.path("id_stranger"), "", "stranger");
    t.identities = vec![sshd.path("id_stranger"), sshd.path("id_missing")];
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(USER) && msg.contains("127.0.0.1"), "{msg}");
    assert!(msg.contains("id_stranger"), "{msg}");
    assert!(
        msg.contains("not found") && msg.contains("id_missing"),
        "{msg}"
    );
    assert!(
        msg.contains(&fingerprint_of(&sshd.path("id_stranger.pub"))),
        "{msg}"
    );

    let log = sshd.wait_log("Disconnected from authenticating user");
    assert!(
        log.contains(&format!("Failed publickey for {USER}")),
        "the log should show the key attempt:\n{log}"
    );
    for needle in ["password for", "keyboard-interactive", "Postponed keyboard"] {
        assert!(!log.contains(needle), "found {needle:?}:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_keys_authenticate() {
    let sshd = Sshd::start(Options::default());
    let agent = Agent::start(sshd.dir.path());
    agent.add(&sshd.path("id_client"));
    let mut t = sshd.trusted_target();
    t.identities = Vec::new();
    t.use_agent = true;
    t.agent_socket = Some(agent.socket.clone());
    let s = connect(&t).await;
    assert_eq!(
        run(&s, &["id", "-un"]).await.stdout,
        format!("{USER}\n").as_bytes()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passphrase_protected_key_needs_the_agent() {
    let sshd = Sshd::start(Options::default());
    let locked = sshd.path("id_locked");
    keygen(&locked, "correct horse", "locked");
    let mut auth = fs::OpenOptions::new()
        .append(true)
        .open(sshd.path("authorized_keys"))
        .unwrap();
    auth.write_all(
        fs::read_to_string(sshd.path("id_locked.pub"))
            .unwrap()
            .as_bytes(),
    )
    .unwrap();

    let mut t = sshd.trusted_target();
    t.identities = vec![locked.clone()];
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("passphrase"), "{msg}");
    assert!(msg.contains("ssh-add"), "{msg}");

    // The same key, unlocked into an agent that also holds an unrelated key: with
    // IdentitiesOnly the agent's matching key is used (found through the encrypted file's
    // public half).
    let unlocked = sshd.path("id_unlocked");
    fs::copy(&locked, &unlocked).unwrap();
    must(
        "ssh-keygen",
        &[
            "-q",
            "-p",
            "-P",
            "correct horse",
            "-N",
            "",
            "-f",
            unlocked.to_str().unwrap(),
        ],
    );
    let agent = Agent::start(sshd.dir.path());
    keygen(&sshd.path("id_unrelated"), "", "unrelated");
    agent.add(&sshd.path("id_unrelated"));
    agent.add(&unlocked);
    t.use_agent = true;
    t.identities_only = true;
    t.agent_socket = Some(agent.socket.clone());
    let s = connect(&t).await;
    assert!(run(&s, &["true"]).await.success());
    s.close().await;
    let log = sshd.wait_log("Disconnected from user");
    assert!(
        !log.contains("Failed publickey"),
        "the unrelated key was offered:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_timeout_stops_the_remote_process() {
    let sshd = Sshd::start(Options::default());
    let mut t = sshd.trusted_target();
    t.command_timeout = Some(Duration::from_secs(2));
    let s = connect(&t).await;
    let err = s.exec(&args(&["sleep", "37"])).await.unwrap_err();
    assert_eq!(err.exit_code(), 7, "{err}");
    assert!(err.to_string().contains("timed out after 2s"), "{err}");

    let deadline = Instant::now() + Duration::from_secs(5);
    while remote_process_running("^sleep 37$") {
        assert!(
            Instant::now() < deadline,
            "the remote `sleep 37` is still running after the timeout"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The connection itself survives a timed-out command.
    assert_eq!(
        run(&s, &["echo", "still here"]).await.stdout,
        b"still here\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sshd_killed_mid_command_is_a_lost_connection() {
    let mut sshd = Sshd::start(Options::default());
    let mut t = sshd.trusted_target();
    t.command_timeout = None;
    let s = connect(&t).await;
    let task = {
        let s = s.clone();
        tokio::spawn(async move { s.exec(&args(&["sleep", "41"])).await })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !remote_process_running("^sleep 41$") {
        assert!(Instant::now() < deadline, "the remote sleep never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sshd.kill_tree();
    let result = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("exec did not notice the lost connection")
        .unwrap();
    let err = result.expect_err("a killed server must not look like success");
    assert_eq!(err.exit_code(), 7, "{err}");
    assert!(err.to_string().contains("lost"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_commands_share_one_connection() {
    let sshd = Sshd::start(Options::default());
    let s = connect(&sshd.trusted_target()).await;
    let cmds: Vec<Vec<String>> = (0..20)
        .map(|i| {
            args(&[
                "/bin/sh",
                "-c",
                "sleep 0.3; printf %s \"$1\"",
                "sh",
                &i.to_string(),
            ])
        })
        .collect();
    let results = s.exec_many(cmds).await;
    assert_eq!(results.len(), 20);
    for (i, r) in results.into_iter().enumerate() {
        let out = r.unwrap_or_else(|e| panic!("command {i} failed: {e}\n{}", sshd.log()));
        assert_eq!(out.stdout_text(), i.to_string());
        assert!(out.success());
    }
    s.close().await;
    let log = sshd.wait_log("Disconnected from user");
    assert_eq!(
        log.matches("Accepted publickey").count(),
        1,
        "one connection only:\n{log}"
    );
    // sshd may still log "no more sessions" while it cleans up finished channels; the
    // transport retries those opens, which is why every command above succeeded.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_port_is_a_connection_error() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut t = Target::new("127.0.0.1", port, USER);
    t.identities = Vec::new();
    t.use_agent = false;
    t.known_hosts = dir.path().join("known_hosts");
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 7, "{err}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_server_hits_the_connect_timeout() {
    // A listener that accepts and then never speaks SSH.
    let port = free_port();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let hold = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(sock);
    });
    let dir = tempfile::tempdir().unwrap();
    let mut t = Target::new("127.0.0.1", port, USER);
    t.identities = Vec::new();
    t.use_agent = false;
    t.known_hosts = dir.path().join("known_hosts");
    t.connect_timeout = Duration::from_secs(1);
    let started = Instant::now();
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 7, "{err}");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
    hold.abort();
}
