//! Jump hosts (`-J`, `ProxyJump`) and keepalives on a half-open link, against real OpenSSH servers
//! that each test starts for itself (the helpers of `ssh_transport`), and one run of the real
//! binary through a jump host to the bed.
//!
//! Why real sshd: a jump is an SSH `direct-tcpip` channel that the jump host's sshd must
//! accept, and the second handshake runs inside it; the point of the tests is that each hop's
//! host key is checked and only keys are offered, which only a real server can show. A
//! half-open link is made with a small TCP relay that stops passing bytes without closing
//! anything, as a dead NAT entry or a pulled cable does.

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pxagent::ssh::{Session, Target};

use crate::ssh_transport::{Options, Sshd, args, connect, connect_err, pub_key, run};
use crate::support::bed;

/// A server that may act as a jump host.
fn jump_host() -> Sshd {
    Sshd::start(Options {
        allow_forwarding: true,
        ..Options::default()
    })
}

/// The known_hosts line of `sshd` (`[127.0.0.1]:PORT key`).
fn known_line(sshd: &Sshd) -> String {
    format!(
        "[127.0.0.1]:{} {}\n",
        sshd.port,
        pub_key(&sshd.path("host_ed25519.pub"))
    )
}

/// `hop` reached through `jumps` (each with its own key), every host key in one known_hosts
/// file written to `hop`'s directory; `trusted` says which servers' keys are in it.
fn through(hop: &Sshd, jumps: &[&Sshd], trusted: &[&Sshd]) -> Target {
    let kh = hop.path("known_hosts.all");
    let lines: String = trusted.iter().map(|s| known_line(s)).collect();
    fs::write(&kh, lines).unwrap();
    let mut t = hop.target();
    t.known_hosts = kh.clone();
    t.jumps = jumps
        .iter()
        .map(|j| {
            let mut jt = j.target();
            jt.known_hosts = kh.clone();
            jt
        })
        .collect();
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jump_host_tunnels_to_the_target() {
    let jump = jump_host();
    let target = Sshd::start(Options::default());
    let t = through(&target, &[&jump], &[&jump, &target]);
    let s = connect(&t).await;
    let out = run(&s, &["printf", "%s", "through the jump"]).await;
    assert_eq!(out.stdout_text(), "through the jump");
    assert!(out.success());
    s.close().await;
    // The jump host authenticated its own key and opened the forward; the target saw the
    // login arrive from the jump host (loopback here) with the target's own key.
    let jlog = jump.wait_log("Disconnected from user");
    assert!(jlog.contains("Accepted publickey"), "{jlog}");
    let tlog = target.wait_log("Disconnected from user");
    assert_eq!(tlog.matches("Accepted publickey").count(), 1, "{tlog}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jump_hosts_in_a_chain() {
    let first = jump_host();
    let second = jump_host();
    let target = Sshd::start(Options::default());
    let t = through(&target, &[&first, &second], &[&first, &second, &target]);
    let s = connect(&t).await;
    let out = run(&s, &["id", "-un"]).await;
    assert_eq!(out.stdout_text().trim(), crate::ssh_transport::USER);
    s.close().await;
    for hop in [&first, &second] {
        let log = hop.wait_log("Disconnected from user");
        assert!(log.contains("Accepted publickey"), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jump_hosts_unknown_key_is_refused_before_the_target_is_reached() {
    let jump = jump_host();
    let target = Sshd::start(Options::default());
    // Only the target's key is on record: the jump host's must not be taken on trust.
    let t = through(&target, &[&jump], &[&target]);
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("via jump host"), "{msg}");
    assert!(msg.contains(&format!("[127.0.0.1]:{}", jump.port)), "{msg}");
    assert!(msg.contains("is not in"), "{msg}");
    // Refused inside the handshake: the jump host saw no login, the target no connection.
    let jlog = jump.log();
    assert!(!jlog.contains("Accepted publickey"), "{jlog}");
    assert!(
        !target.log().contains("Connection from"),
        "{}",
        target.log()
    );

    // A changed key on the target behind a good jump host is refused as well.
    let other = Sshd::start(Options::default());
    let mut t = through(&target, &[&jump], &[&jump]);
    let line = format!(
        "[127.0.0.1]:{} {}\n",
        target.port,
        pub_key(&other.path("host_ed25519.pub"))
    );
    let mut kh = fs::read_to_string(&t.known_hosts).unwrap();
    kh.push_str(&line);
    fs::write(&t.known_hosts, kh).unwrap();
    t.jumps[0].known_hosts = t.known_hosts.clone();
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 6, "{err}");
    assert!(err.to_string().contains("HAS CHANGED"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jump_host_that_forbids_forwarding_is_a_clear_error() {
    let jump = Sshd::start(Options::default()); // AllowTcpForwarding no
    let target = Sshd::start(Options::default());
    let t = through(&target, &[&jump], &[&jump, &target]);
    let err = connect_err(Session::connect(&t).await);
    assert_eq!(err.exit_code(), 7, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("refused to open a tunnel"), "{msg}");
    assert!(msg.contains("AllowTcpForwarding"), "{msg}");
}

/// A TCP relay to `upstream` that can stop passing bytes in both directions while keeping
/// both connections open: a half-open link as far as either end can tell.
struct Relay {
    port: u16,
    frozen: Arc<AtomicBool>,
}

impl Relay {
    fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let f = frozen.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect(("127.0.0.1", upstream)).unwrap();
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let f = f.clone();
                    std::thread::spawn(move || pump(from, to, &f));
                }
            }
        });
        Relay { port, frozen }
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, frozen: &AtomicBool) {
    from.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = [0u8; 16384];
    loop {
        if frozen.load(Ordering::SeqCst) {
            // Hold everything: nothing read, nothing closed.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_open_link_fails_through_keepalives_with_the_real_times() {
    let sshd = Sshd::start(Options::default());
    let relay = Relay::start(sshd.port);
    let mut t = sshd.trusted_target();
    // The relay's port is not in known_hosts: record the server's key under it.
    fs::write(
        &t.known_hosts,
        format!(
            "[127.0.0.1]:{} {}\n",
            relay.port,
            pub_key(&sshd.path("host_ed25519.pub"))
        ),
    )
    .unwrap();
    t.port = relay.port;
    t.command_timeout = None;
    t.keepalive = Duration::from_secs(1);
    let s = connect(&t).await;
    assert!(run(&s, &["true"]).await.success());
    let task = {
        let s = s.clone();
        tokio::spawn(async move { s.exec(&args(&["sleep", "40"])).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    relay.frozen.store(true, Ordering::SeqCst);
    // Without keepalives this would wait for the command (40 s) or TCP's own timeout.
    let result = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("a silent link must be noticed by the keepalives, not hang")
        .unwrap();
    let err = result.expect_err("a dead link is not success");
    assert_eq!(err.exit_code(), 7, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("no answer from the host for 3s") && msg.contains("keepalives sent 1s apart"),
        "{msg}"
    );
    assert!(msg.contains("may or may not have completed"), "{msg}");
    assert!(s.is_closed());
}

#[test]
fn the_cli_reaches_the_bed_through_a_proxy_jump_in_ssh_config() {
    let b = bed();
    let jump = jump_host();
    let home = crate::support::Home::new();
    let ssh = home.path().join(".ssh");
    fs::create_dir_all(&ssh).unwrap();
    // One known_hosts file with the bed's key and the jump host's.
    let mut kh = fs::read_to_string(&b.known_hosts).unwrap();
    kh.push_str(&known_line(&jump));
    fs::write(ssh.join("known_hosts"), kh).unwrap();
    fs::write(
        ssh.join("config"),
        format!(
            "Host bedjump\n  HostName 127.0.0.1\n  Port {jp}\n  User {ju}\n  IdentityFile {jk}\n\
             Host thebed\n  HostName {bh}\n  Port {bp}\n  User {bu}\n  IdentityFile {bk}\n  \
             ProxyJump bedjump\n\
             Host 127.0.0.1\n  IdentityFile {jk}\n",
            jp = jump.port,
            ju = crate::ssh_transport::USER,
            jk = jump.path("id_client").display(),
            bh = b.host,
            bp = b.port,
            bu = b.user,
            bk = b.identity,
        ),
    )
    .unwrap();
    let r = home
        .px()
        .args(["-H", "thebed", "-o", "json", "version"])
        .run();
    assert_eq!(r.code, 0, "{} / {}\n{}", r.stdout, r.stderr, jump.log());
    assert_eq!(r.json()["ok"], true, "{} / {}", r.stdout, r.stderr);
    let jlog = jump.wait_log("Disconnected from user");
    assert!(
        jlog.contains("Accepted publickey"),
        "the jump host was not used:\n{jlog}"
    );

    // -J none beats the ProxyJump (a direct connection still works), and a dead jump host
    // is a connection error that names it.
    let r = home
        .px()
        .args(["-H", "thebed", "-J", "none", "-o", "json", "version"])
        .run();
    assert_eq!(r.code, 0, "{} / {}", r.stdout, r.stderr);
    // -J on the command line: by the config's alias, by user@host:port (its key from the
    // config's block for that host), and a chain of two hops (the jump host twice, the second
    // reached through the first): one login on the jump host per hop.
    let accepted = || jump.log().matches("Accepted publickey").count();
    let mut seen = accepted();
    for (spec, hops) in [
        ("bedjump".to_string(), 1),
        (
            format!("{}@127.0.0.1:{}", crate::ssh_transport::USER, jump.port),
            1,
        ),
        ("bedjump,bedjump".to_string(), 2),
    ] {
        let r = home
            .px()
            .args(["-H", "thebed", "-J", &spec, "-o", "json", "version"])
            .run();
        assert_eq!(
            r.code,
            0,
            "-J {spec}: {} / {}\n{}",
            r.stdout,
            r.stderr,
            jump.log()
        );
        let now = accepted();
        assert_eq!(now - seen, hops, "-J {spec}: logins on the jump host");
        seen = now;
    }
    let dead = crate::ssh_transport::free_port();
    let r = home
        .px()
        .args([
            "-H",
            "thebed",
            "-J",
            &format!("u@127.0.0.1:{dead}"),
            "version",
        ])
        .run();
    assert_eq!(r.code, 7, "{} / {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("via jump host u@127.0.0.1"),
        "{} / {}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn proxy_command_is_refused_and_never_run() {
    let home = crate::support::Home::new();
    let ssh = home.path().join(".ssh");
    fs::create_dir_all(&ssh).unwrap();
    let marker = home.path().join("ran");
    fs::write(
        ssh.join("config"),
        format!(
            "Host pve\n  HostName 192.0.2.10\n  ProxyCommand /usr/bin/touch {}\n",
            marker.display()
        ),
    )
    .unwrap();
    let r = home.px().args(["-H", "pve", "version"]).run();
    assert_eq!(r.code, 2, "{} / {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("ProxyCommand"),
        "{} / {}",
        r.stdout,
        r.stderr
    );
    assert!(r.stderr.contains("config:3"), "{} / {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("ProxyJump"),
        "{} / {}",
        r.stdout,
        r.stderr
    );
    assert!(!marker.exists(), "the ProxyCommand ran");

    // Root is refused on a jump host as on the target, before anything is sent.
    let r = home
        .px()
        .args(["-H", "u@192.0.2.10", "-J", "root@192.0.2.1", "version"])
        .run();
    assert_eq!(r.code, 2, "{} / {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("never logs in as root"),
        "{} / {}",
        r.stdout,
        r.stderr
    );
    let r = home
        .px()
        .args(["-H", "u@192.0.2.10", "-J", "a b", "version"])
        .run();
    assert_eq!(r.code, 2, "{} / {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("invalid jump host"),
        "{} / {}",
        r.stdout,
        r.stderr
    );
}
