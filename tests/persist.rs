//! Persistent connections on the bed: with `--persist 30s`, ten successive `pxagent vm list` calls
//! open ONE SSH connection (the bed's sshd log shows one login with the test's own key, running all
//! ten commands); `persist status` shows the holder, `persist stop` ends it; a holder is never a
//! way around the caller's checks — a host key no longer in the caller's known_hosts is refused,
//! and so is a socket open to others.
//!
//! To tell its connections from other tests' in sshd's log, each test logs in with a key of its
//! own, added to the bed account's authorized_keys for the test (holding the host lock) and
//! removed afterwards.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// A key of the test's own in the bed account's authorized_keys, removed on drop; a runtime
/// directory for the holder's socket; and the holder stopped (by PID if it does not answer).
struct Own {
    home: Home,
    key: PathBuf,
    fingerprint: String,
    authorized_keys: PathBuf,
    saved: Vec<u8>,
}

impl Own {
    fn new() -> Own {
        let home = Home::new();
        let key = home.path().join("id_persist");
        let out = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "pxagent-persist-test",
                "-f",
            ])
            .arg(&key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let fp = Command::new("ssh-keygen")
            .arg("-lf")
            .arg(&key)
            .output()
            .unwrap();
        let fingerprint = String::from_utf8_lossy(&fp.stdout)
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string();
        let b = bed();
        let passwd = Command::new("getent")
            .args(["passwd", &b.user])
            .output()
            .unwrap();
        let home_dir = String::from_utf8_lossy(&passwd.stdout)
            .split(':')
            .nth(5)
            .unwrap()
            .to_string();
        let authorized_keys = Path::new(&home_dir).join(".ssh/authorized_keys");
        let saved = std::fs::read(&authorized_keys).unwrap();
        let mut with = saved.clone();
        if !with.ends_with(b"\n") {
            with.push(b'\n');
        }
        with.extend(std::fs::read(key.with_extension("pub")).unwrap());
        std::fs::write(&authorized_keys, with).unwrap();
        let run = home.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        Own {
            home,
            key,
            fingerprint,
            authorized_keys,
            saved,
        }
    }

    /// pxagent on the bed with the test's key and runtime directory.
    fn px(&self) -> Px {
        self.home
            .px()
            .bed()
            .env("PXAGENT_IDENTITY", &self.key)
            .env("XDG_RUNTIME_DIR", self.home.path().join("run"))
    }

    fn holders(&self) -> serde_json::Value {
        let r = self.px().args(["persist", "status", "-o", "json"]).run();
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.json()["data"].clone()
    }
}

impl Drop for Own {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.authorized_keys, &self.saved);
        let r = self.px().args(["persist", "status", "-o", "json"]).run();
        let pids: Vec<u64> = serde_json::from_str::<serde_json::Value>(&r.stdout)
            .ok()
            .and_then(|d| d["data"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|h| h["pid"].as_u64())
            .collect();
        let _ = self.px().args(["persist", "stop"]).run();
        for pid in pids {
            let _ = Command::new("kill")
                .arg(pid.to_string())
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

#[test]
fn ten_calls_with_persist_open_one_ssh_connection() {
    let _g = lock();
    clear_faults();
    let own = Own::new();
    let at = sshd_log_len();
    for i in 0..10 {
        let r = own
            .px()
            .args(["--persist", "30s", "vm", "list", "-o", "json"])
            .run();
        assert_eq!(r.code, 0, "call {i}: {}\n{}", r.stdout, r.stderr);
        assert!(r.json()["data"].as_array().unwrap().len() >= 3);
    }
    let ours: Vec<SshdConnection> = sshd_connections_since(at)
        .into_iter()
        .filter(|c| c.key == own.fingerprint)
        .collect();
    assert_eq!(ours.len(), 1, "one SSH login for ten calls: {ours:?}");
    assert_eq!(
        ours[0].sessions, 10,
        "all ten commands went over it: {ours:?}"
    );
    let holders = own.holders();
    let list = holders.as_array().unwrap();
    assert_eq!(list.len(), 1, "{holders}");
    assert_eq!(list[0]["running"], true);
    assert_eq!(list[0]["commands"], 10);
    assert_eq!(list[0]["idle_secs"], 30);
    assert_eq!(list[0]["auth_key"], own.fingerprint);
    // Every call is still audited by the calling process.
    let audit = std::fs::read_to_string(own.home.audit_log()).unwrap();
    assert_eq!(audit.lines().count(), 10);
    // The guest map is shared too: statuses after a `vm list` need no map read of their own.
    let holder_port = ours[0].port;
    let sshd_at = sshd_log_len();
    for _ in 0..3 {
        let r = own
            .px()
            .args(["--persist", "30s", "vm", "status", "100"])
            .run();
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let ours: Vec<SshdConnection> = sshd_connections_since(sshd_at)
        .into_iter()
        .filter(|c| c.key == own.fingerprint || c.port == holder_port)
        .collect();
    assert_eq!(ours.len(), 1, "still the one connection: {ours:?}");
    // Three statuses; at most one map read if the map the holder keeps grew too old meanwhile
    // (without the shared map: three).
    assert!(ours[0].sessions <= 4, "{ours:?}");
    // persist stop ends it; the socket goes.
    let r = own.px().args(["persist", "stop"]).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(own.holders().as_array().unwrap().len(), 0);
}

/// `persist: 30s` in the config does what `--persist 30s` does: three calls, one connection.
#[test]
fn persist_in_the_config_starts_and_reuses_a_holder() {
    let _g = lock();
    clear_faults();
    let own = Own::new();
    let config = own.home.path().join("persist.yaml");
    std::fs::write(&config, "persist: 30s\n").unwrap();
    let at = sshd_log_len();
    for i in 0..3 {
        let r = own
            .px()
            .args(["--config"])
            .arg_path(&config)
            .args(["vm", "list", "-o", "json"])
            .run();
        assert_eq!(r.code, 0, "call {i}: {}\n{}", r.stdout, r.stderr);
    }
    let ours: Vec<SshdConnection> = sshd_connections_since(at)
        .into_iter()
        .filter(|c| c.key == own.fingerprint)
        .collect();
    assert_eq!(ours.len(), 1, "one SSH login for three calls: {ours:?}");
    let holders = own.holders();
    let list = holders.as_array().unwrap();
    assert_eq!(list.len(), 1, "{holders}");
    assert_eq!(list[0]["idle_secs"], 30);
    assert_eq!(list[0]["commands"], 3);
}

#[test]
fn a_holder_is_no_way_around_the_callers_own_checks() {
    let _g = lock();
    clear_faults();
    let own = Own::new();
    let r = own.px().args(["--persist", "30s", "version"]).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A caller whose known_hosts no longer trusts the host key (same file path, so the same
    // holder) is refused by its own check, before anything is sent.
    let kh = own.home.path().join("known_hosts");
    std::fs::copy(bed().known_hosts, &kh).unwrap();
    let r = own
        .px()
        .env("PXAGENT_KNOWN_HOSTS", &kh)
        .args(["--persist", "30s", "version"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::write(&kh, "").unwrap();
    let at = sudo_log_len();
    let r = own
        .px()
        .env("PXAGENT_KNOWN_HOSTS", &kh)
        .args(["--persist", "30s", "vm", "start", "100"])
        .run();
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("not in"), "{}", r.stderr);
    assert_not_sent(at, &["status/start"]);
    // A socket open to others is refused, never used.
    let sockets: Vec<PathBuf> = std::fs::read_dir(own.home.path().join("run/pxagent"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    assert_eq!(sockets.len(), 2, "{sockets:?}");
    for s in &sockets {
        std::fs::set_permissions(s, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let r = own.px().args(["--persist", "30s", "version"]).run();
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("others could use it"), "{}", r.stderr);
    for s in &sockets {
        std::fs::set_permissions(s, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // A holder exits by itself once idle (another known_hosts file: another holder).
    let kh2 = own.home.path().join("known_hosts2");
    std::fs::copy(bed().known_hosts, &kh2).unwrap();
    let r = own
        .px()
        .env("PXAGENT_KNOWN_HOSTS", &kh2)
        .args(["--persist", "1s", "version"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let running: Vec<String> = own
        .holders()
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["idle_secs"] == 1)
        .map(|h| h.to_string())
        .collect();
    assert!(running.is_empty(), "{running:?}");
}
