//! The host gate on the gated bed (issue 11): what a plain `ssh` can no longer do, pxagent's
//! operations through the gate, the host policy over the client's, signed approvals, host rate
//! limits, the host audit, and `setup render` / `setup revoke` applied for real.
//!
//! The gated bed shares the simulator with the ordinary one; every test holds the host lock.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::*;

/// A snapshot name no earlier run used.
fn fresh(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        % 1_000_000_000;
    format!("{prefix}{n}")
}

fn gated_run(home: &Home, args: &[&str]) -> Run {
    home.px().gated().args(args).run()
}

#[test]
fn only_catalog_lines_pass_the_gate() {
    let _g = lock();
    let g = gated();
    let at = g.log_len();
    let (code, out, _) = g.ssh(Some(
        "sudo -n /usr/bin/pvesh get /version --output-format json",
    ));
    assert_eq!(code, 0, "a person's plain catalog line keeps working");
    assert!(out.contains("\"version\""), "{out}");
    for (line, why) in [
        (Some("id"), "not_allowed"),
        (
            Some("sudo -n /usr/bin/pvesh get /version --output-format json; id"),
            "not_allowed",
        ),
        (Some("sudo -n /bin/sh -c id"), "not_allowed"),
        (
            Some("sudo -n /usr/sbin/qm set 100 --hookscript local:snippets/x.pl"),
            "not_allowed",
        ),
        (None, "not_allowed"),
        (Some("pxagent-gate/1 e30"), "bad_request"),
    ] {
        let (code, out, err) = g.ssh(line);
        assert_eq!(code, 125, "{line:?}: {out} {err}");
        assert!(out.is_empty(), "{line:?} printed {out}");
        assert!(
            err.contains(&format!("pxagent-gate/1 refused {{\"kind\":\"{why}\"")),
            "{line:?}: {err}"
        );
    }
    // sftp is a subsystem: with the gate as forced command it gets no file access.
    let sftp = Command::new("sftp")
        .args(["-F", "/dev/null", "-b", "-", "-P"])
        .arg(&g.env[1].1)
        .args(["-i", &g.env[3].1])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", g.env[4].1))
        .args(["-o", "BatchMode=yes"])
        .arg(format!("{}@{}", g.user, g.env[0].1))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!sftp.status.success(), "sftp got in");
    let records = g.log_since(at);
    assert!(
        records
            .iter()
            .any(|r| r["decision"] == "allowed" && r["op"] == "pve.version"),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["decision"] == "refused" && r["argv"] == serde_json::json!(["id"])),
        "{records:?}"
    );
}

#[test]
fn pxagent_works_unchanged_through_the_gate() {
    let _g = lock();
    let home = Home::new();
    let r = gated_run(&home, &["vm", "list", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.data().as_array().is_some_and(|a| !a.is_empty()));
    let r = gated_run(&home, &["vm", "status", "100", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let snap = fresh("g");
    let r = gated_run(&home, &["vm", "snapshot", "100", &snap, "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = gated_run(&home, &["preflight", "-o", "json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let checks = r.data()["checks"].as_array().unwrap().clone();
    for name in [
        "gate",
        "host-policy",
        "approvers",
        "account",
        "sudo-rules",
        "audit",
    ] {
        let c = checks.iter().find(|c| c["name"] == name).unwrap();
        assert_eq!(c["status"], "pass", "{c}");
    }
}

#[test]
fn the_host_policy_wins_over_the_client_policy() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  vm.start: {action: deny, reason: \"the host says no\"}\n");
    let home = Home::new();
    home.write("allow.yaml", b"ops:\n  \"*\": allow\n");
    // VM 9000 (a template) is never running, so the start is sent (a start of a running VM
    // would be a no-op that sends only reads).
    let r = gated_run(
        &home,
        &[
            "--policy",
            "allow.yaml",
            "vm",
            "start",
            "9000",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["source"], "host", "{e}");
    assert_eq!(e["kind"], "policy_refused", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("the host says no"),
        "{e}"
    );
    // The same line by hand is refused as well.
    let (code, _, err) = g.ssh(Some(
        "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/100/status/start --output-format json",
    ));
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("policy_refused"), "{err}");
    // An unreadable or unsafe host policy refuses everything (fail closed).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&g.policy, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = gated_run(&home, &["vm", "list", "-o", "json"]);
    std::fs::set_permissions(&g.policy, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "policy_unavailable");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("writable by its group")
    );
}

/// The statement the gate asked to sign, from a refused run's JSON.
fn statement(r: &Run) -> String {
    r.json()["error"]["approval_request"]["statement"]
        .as_str()
        .unwrap_or_else(|| panic!("no approval_request: {}", r.stdout))
        .to_string()
}

fn ssh_keygen_sign(key: &Path, file: &Path) -> PathBuf {
    let sig = file.with_extension("txt.sig");
    let _ = std::fs::remove_file(&sig);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", "pxagent-approval", "-f"])
        .arg(key)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sig
}

#[test]
fn approve_ops_need_a_listed_signature_once() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  vm.snapshot: approve\n");
    let home = Home::new();
    let snap = fresh("a");
    let args = ["vm", "snapshot", "100", snap.as_str(), "-o", "json"];

    // No approval: exit 4, the statement to sign, nothing ran.
    let r = gated_run(&home, &args);
    assert_eq!(r.code, 4, "{}", r.stdout);
    let e = &r.json()["error"];
    assert_eq!(e["kind"], "approval_required");
    assert_eq!(e["source"], "host");
    let st = statement(&r);
    assert!(
        st.contains("op: vm.snapshot") && st.contains(&format!("arg snapshot: \"{snap}\"")),
        "{st}"
    );

    // Signed by `pxagent approve` with the listed key: runs once.
    let st_file = home.path().join("st.txt");
    std::fs::write(&st_file, &st).unwrap();
    let ap = home
        .px()
        .args(["approve", "--key"])
        .arg_path(&g.approver_key)
        .args(["st.txt"])
        .run();
    assert_eq!(ap.code, 0, "{}", ap.stderr);
    home.write("ap.txt", ap.stdout.as_bytes());
    let mut with = args.to_vec();
    with.extend(["--approval", "ap.txt"]);
    let r = gated_run(&home, &with);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // Replayed: exit 4, replayed.
    let r = gated_run(&home, &with);
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert_eq!(r.json()["error"]["reason"], "replayed", "{}", r.stdout);

    // Signed by ssh-keygen -Y sign: an equally valid approval.
    let snap2 = fresh("b");
    let args2 = ["vm", "snapshot", "100", snap2.as_str(), "-o", "json"];
    let r = gated_run(&home, &args2);
    std::fs::write(&st_file, statement(&r)).unwrap();
    let sig = ssh_keygen_sign(&g.approver_key, &st_file);
    let mut with2 = args2.to_vec();
    let sig_s = sig.display().to_string();
    with2.extend(["--approval", sig_s.as_str()]);
    let r = gated_run(&home, &with2);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);

    // The same signature for another parameter (another snapshot name): refused.
    let snap3 = fresh("c");
    let r = gated_run(
        &home,
        &[
            "vm",
            "snapshot",
            "100",
            &snap3,
            "-o",
            "json",
            "--approval",
            &sig_s,
        ],
    );
    assert_eq!(r.code, 4, "{}", r.stdout);
    // A statement re-dated by `approve --ttl` carries itself: bound to its own parameters.
    let r = gated_run(&home, &["vm", "snapshot", "100", &snap3, "-o", "json"]);
    std::fs::write(&st_file, statement(&r)).unwrap();
    let ap = home
        .px()
        .args(["approve", "--ttl", "5m", "--key"])
        .arg_path(&g.approver_key)
        .args(["st.txt"])
        .run();
    assert_eq!(ap.code, 0, "{}", ap.stderr);
    home.write("ttl.txt", ap.stdout.as_bytes());
    let snap4 = fresh("d");
    let r = gated_run(
        &home,
        &[
            "vm",
            "snapshot",
            "100",
            &snap4,
            "-o",
            "json",
            "--approval",
            "ttl.txt",
        ],
    );
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert_eq!(r.json()["error"]["reason"], "wrong_args", "{}", r.stdout);

    // An unlisted key: refused, naming it.
    let other = home.path().join("other");
    let kg = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(kg.status.success());
    let r = gated_run(&home, &["vm", "snapshot", "100", &snap4, "-o", "json"]);
    std::fs::write(&st_file, statement(&r)).unwrap();
    let sig = ssh_keygen_sign(&other, &st_file);
    let r = gated_run(
        &home,
        &[
            "vm",
            "snapshot",
            "100",
            &snap4,
            "-o",
            "json",
            "--approval",
            &sig.display().to_string(),
        ],
    );
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert_eq!(r.json()["error"]["reason"], "unlisted_key", "{}", r.stdout);

    // The host audit names the approver of the runs that happened.
    let log = std::fs::read_to_string(&g.log).unwrap();
    assert!(
        log.contains("\"approver\":\"SHA256:"),
        "no approver in the gate's log"
    );
}

#[test]
fn host_limits_hold_across_separate_client_states() {
    let _g = lock();
    let g = gated();
    // Not across a minute boundary: the window is a UTC minute.
    let sec = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60;
    if sec > 45 {
        std::thread::sleep(std::time::Duration::from_secs(61 - sec));
    }
    let counter = fresh("t");
    let _p = g.policy(&format!(
        "ops:\n  vm.status:\n    limits: [{{counter: {counter}, window: minute, max: 5}}]\n"
    ));
    let homes: Vec<Home> = (0..12).map(|_| Home::new()).collect();
    let running: Vec<Running> = homes
        .iter()
        .map(|h| {
            h.px()
                .gated()
                .args(["vm", "status", "100", "-o", "json"])
                .spawn()
        })
        .collect();
    let codes: Vec<i32> = running.into_iter().map(|r| r.wait().code).collect();
    let ok = codes.iter().filter(|c| **c == 0).count();
    let limited = codes.iter().filter(|c| **c == 8).count();
    assert_eq!((ok, limited), (5, 7), "{codes:?}");
}

/// An account made for real by `setup render` (readonly profile, the gated bed's gate binary,
/// its own sshd on `port` with a config in `dir`), and removed again on drop, also when the
/// test failed. `revoke` applies `setup revoke` to it.
struct SetupAccount {
    dir: PathBuf,
    user: &'static str,
    port: &'static str,
    _cleanup: Cleanup,
}

impl SetupAccount {
    /// Render and apply the setup script; `extra` goes to `setup render`, `policy` becomes the
    /// host policy. Asserts that the account then works through the gate.
    fn apply(
        g: &Gated,
        user: &'static str,
        port: &'static str,
        extra: &[&str],
        policy: &str,
    ) -> SetupAccount {
        // Root-owned and traversable by the new account: the gate checks both.
        let dir = PathBuf::from(format!("/var/lib/pxagent-testbed/setup-{user}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let a = SetupAccount {
            _cleanup: Cleanup {
                dir: dir.clone(),
                user,
            },
            dir,
            user,
            port,
        };
        let sh = |args: &[&str]| {
            let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        for key in ["host_key", "agent"] {
            sh(&[
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &a.p(key),
            ]);
        }
        std::fs::write(
            a.dir.join("sshd_config"),
            format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {}\nPidFile {}\nUsePAM yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin no\n",
                a.p("host_key"),
                a.p("sshd.pid")
            ),
        )
        .unwrap();
        std::fs::write(a.dir.join("policy.yaml"), policy).unwrap();
        let gate_bin = g
            .policy
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("bin/pxagent");
        let socket = g.log.with_file_name("gate-log.sock");
        let render = px()
            .args([
                "setup",
                "render",
                "--user",
                user,
                "--pubkey",
                &a.p("agent.pub"),
                "--from",
                "127.0.0.0/8",
            ])
            .args(["--profile", "readonly", "--policy", &a.p("policy.yaml")])
            .args(extra)
            .args(["--gate-bin", &gate_bin.display().to_string()])
            .args([
                "--policy-path",
                &a.p("host-policy.yaml"),
                "--approvers-path",
                &a.p("approvers"),
            ])
            .args(["--log-socket", &socket.display().to_string()])
            .args(a.sshd_args())
            .run();
        assert_eq!(render.code, 0, "{}", render.stderr);
        std::fs::write(a.dir.join("setup.sh"), &render.stdout).unwrap();
        let check = Command::new("bash")
            .arg("-n")
            .arg(a.dir.join("setup.sh"))
            .output()
            .unwrap();
        assert!(check.status.success());
        // sshd must run for the script's reload; start it first with the config as it is.
        sh(&[
            "/usr/sbin/sshd",
            "-f",
            &a.p("sshd_config"),
            "-E",
            &a.p("sshd.log"),
        ]);
        a.run_script("setup.sh");
        std::thread::sleep(std::time::Duration::from_millis(500));
        let ok = a.login("sudo -n /usr/bin/pvesh get /version --output-format json");
        assert!(
            ok.status.success(),
            "the set-up account does not work: {} {}",
            String::from_utf8_lossy(&ok.stdout),
            String::from_utf8_lossy(&ok.stderr)
        );
        let v: Value = serde_json::from_slice(&ok.stdout).unwrap();
        assert!(v["version"].is_string());
        a
    }

    fn p(&self, x: &str) -> String {
        self.dir.join(x).display().to_string()
    }

    fn sshd_args(&self) -> [String; 4] {
        [
            "--sshd-config".into(),
            self.p("sshd_config"),
            "--sshd-pid-file".into(),
            self.p("sshd.pid"),
        ]
    }

    /// `bash dir/NAME`; asserts success, returns its stdout.
    fn run_script(&self, name: &str) -> String {
        let out = Command::new("bash")
            .arg(self.dir.join(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn login_cmd(&self, line: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args([
            "-F",
            "/dev/null",
            "-T",
            "-i",
            &self.p("agent"),
            "-p",
            self.port,
        ])
        .args([
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
        ])
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "LogLevel=ERROR",
        ])
        .arg(format!("{}@127.0.0.1", self.user))
        .arg(line)
        .stdin(std::process::Stdio::null());
        c
    }

    fn login(&self, line: &str) -> std::process::Output {
        self.login_cmd(line).output().unwrap()
    }

    /// Render `setup revoke` for the account and run it; returns its stdout.
    fn revoke(&self) -> String {
        let revoke = px()
            .args(["setup", "revoke", "--user", self.user])
            .args(self.sshd_args())
            .run();
        assert_eq!(revoke.code, 0, "{}", revoke.stderr);
        std::fs::write(self.dir.join("revoke.sh"), &revoke.stdout).unwrap();
        self.run_script("revoke.sh")
    }
}

#[test]
fn setup_render_applied_gives_a_gated_account_and_revoke_ends_it() {
    let _g = lock();
    let g = gated();
    let a = SetupAccount::apply(&g, "zen-setup", "2224", &[], "ops: {}\n");
    let refused = a.login("id");
    assert_eq!(refused.status.code(), Some(125), "the gate is not in front");
    a.revoke();
    let after = a.login("sudo -n /usr/bin/pvesh get /version --output-format json");
    assert_eq!(
        after.status.code(),
        Some(255),
        "login still works after revoke"
    );
}

/// The pids of the processes whose command line contains `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmd).contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// A command the account runs through sudo (`sudo` keeps the account as its real uid only, the
/// simulated `pct` runs as root, the command in the container as another account) is ended by
/// `setup revoke` with the account's own processes: it never gets to write its file. Killing
/// by effective uid alone left all three running while the script said there were none.
#[test]
fn revoke_ends_what_the_account_runs_under_sudo() {
    let _g = lock();
    let g = gated();
    let home = Home::new();
    let r = gated_run(&home, &["ct", "start", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let a = SetupAccount::apply(
        &g,
        "zen-revoke",
        "2225",
        &["--ct-exec", "200-299"],
        "ops:\n  ct.exec:\n    commands: [[sh, \"...\"]]\n",
    );
    let proof = fresh("revoke-proof-");
    let file = PathBuf::from("/var/lib/pve-sim/guests/200/root/tmp").join(&proof);
    let _ = std::fs::remove_file(&file);
    // The file is written in the container's /tmp (the command's cwd is the container's /).
    let mut session = a
        .login_cmd(&format!(
            "sudo -n /usr/sbin/pct exec 200 -- sh -c 'sleep 6; echo survived > tmp/{proof}'"
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // sudo, pct and sh, each naming the proof in its command line (ssh itself is ours).
    let sudo_pid = loop {
        let running: Vec<u32> = pids_with(&proof)
            .into_iter()
            .filter(|p| *p != session.id())
            .collect();
        if running.len() >= 3 {
            break running;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command did not start: {running:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = a.revoke();
    let left: Vec<u32> = pids_with(&proof)
        .into_iter()
        .filter(|p| *p != session.id())
        .collect();
    // Whatever survived is ended here by pid, so a failed run leaves nothing behind.
    for p in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "revoke left {left:?} of {sudo_pid:?} running; it said:\n{out}"
    );
    assert!(
        out.contains("verified: no processes of zen-revoke"),
        "{out}"
    );
    let _ = session.wait();
    std::thread::sleep(std::time::Duration::from_secs(7));
    let survived = file.exists();
    let _ = std::fs::remove_file(&file);
    assert!(
        !survived,
        "the command outlived the revoke and wrote {}",
        file.display()
    );
}

/// Removes what a setup test made, by name and pid file, also when it failed.
struct Cleanup {
    dir: PathBuf,
    user: &'static str,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("sshd.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", self.user])
            .status();
        let _ = Command::new("userdel").args(["-r", self.user]).output();
        for f in [
            format!("/etc/sudoers.d/{}", self.user),
            format!("/etc/pxagent/keys/{}", self.user),
        ] {
            let _ = std::fs::remove_file(f);
        }
        let _ = std::fs::remove_dir_all(format!("/var/lib/pxagent/{}", self.user));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn host_exec_allowlists_cover_commands_and_file_transfers() {
    let _g = lock();
    let g = gated();
    let _p = g.policy(
        "ops:\n  vm.exec:\n    commands: [[sort, \"...\"]]\n    push: [\"/tmp/*\"]\n    pull: [\"/tmp/*\"]\n",
    );
    let home = Home::new();
    home.write("in.txt", b"b\na\n");
    let run = |args: &[&str]| gated_run(&home, args);
    let r = run(&[
        "-o",
        "json",
        "vm",
        "exec",
        "100",
        "--push",
        "in.txt:/tmp/gate-in.txt",
        "--pull",
        "/tmp/gate-out.txt:out.txt",
        "--",
        "sort",
        "-o",
        "/tmp/gate-out.txt",
        "/tmp/gate-in.txt",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(home.read("out.txt"), b"a\nb\n");
    // A command outside the host's allowlist, and a push outside its paths: exit 3 from the host.
    let r = run(&["-o", "json", "vm", "exec", "100", "--", "id"]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(r.json()["error"]["source"], "host");
    let r = run(&[
        "-o",
        "json",
        "vm",
        "exec",
        "100",
        "--push",
        "in.txt:/etc/cron.d/x",
        "--",
        "sort",
        "/tmp/gate-in.txt",
    ]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert!(r.stdout.contains("/etc/cron.d/x"), "{}", r.stdout);
    // The same file write by hand is refused as well.
    let (code, _, err) = g.ssh(Some(
        "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/100/agent/file-write --file /etc/cron.d/x --content hi --encode 0 --output-format json",
    ));
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("policy_refused"), "{err}");
}

/// Issue 12 item 25: `scripts/test.sh` brings the gated bed up with `testbed.sh up --ct-exec
/// 200-299`, so the range reaches its sudoers render and container exec works there, through
/// the gate and under the host's allowlist like a VM's.
#[test]
fn container_exec_on_a_bed_rendered_with_ct_exec_passes_the_gate_and_its_allowlist() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  ct.exec:\n    commands: [[echo, \"...\"]]\n");
    let home = Home::new();
    let run = |args: &[&str]| gated_run(&home, args);
    let r = run(&["ct", "start", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&[
        "-o",
        "json",
        "ct",
        "exec",
        "200",
        "--",
        "echo",
        "from-the-gated-bed",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let d = r.data();
    assert_eq!(d["exitcode"], 0, "{d}");
    assert_eq!(d["stdout"], "from-the-gated-bed\n", "{d}");
    // Outside the host's allowlist: exit 3 from the host, nothing ran.
    let r = run(&["-o", "json", "ct", "exec", "200", "--", "id"]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(r.json()["error"]["source"], "host");
}

/// A guest path never leaves its glob: `..`, `.` and empty segments are refused in every
/// transfer (the raw lines an agent could send by hand, and the client's own `--pull`), where
/// `/srv/**` used to admit `/srv/../etc/hostname` as text.
#[test]
fn guest_paths_with_dot_segments_never_pass_a_transfer_glob() {
    let _g = lock();
    let g = gated();
    let _p = g.policy(
        "ops:\n  ct.exec:\n    commands: [[/usr/bin/uname]]\n    push: ['/srv/**']\n    pull: ['/srv/**']\n",
    );
    let home = Home::new();
    let r = gated_run(&home, &["ct", "start", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for line in [
        "sudo -n /usr/sbin/pct exec 200 -- /bin/cat /srv/../etc/hostname",
        "sudo -n /usr/sbin/pct exec 200 -- /usr/bin/tee /srv/../tmp/x",
        "sudo -n /usr/sbin/pct exec 200 -- /usr/bin/sha256sum /srv/a/../../etc/shadow",
        "sudo -n /usr/sbin/pct exec 200 -- /bin/cat /srv/./x",
        "sudo -n /usr/sbin/pct exec 200 -- /bin/cat /srv//x",
    ] {
        let (code, _, err) = g.ssh(Some(line));
        assert_eq!(code, 125, "{line}: {err}");
        assert!(err.contains("policy_refused"), "{line}: {err}");
    }
    // The client refuses such paths at its edge, before anything is sent.
    for pull in [
        "/srv/../etc/hostname:out.txt",
        "/srv/./x:out.txt",
        "/srv//x:out.txt",
    ] {
        let r = gated_run(
            &home,
            &[
                "-o",
                "json",
                "ct",
                "exec",
                "200",
                "--pull",
                pull,
                "--",
                "/usr/bin/uname",
            ],
        );
        assert_eq!(r.code, 2, "{pull}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("invalid guest path"), "{}", r.stdout);
    }
}

/// Every request that reaches a guest counts against the limits of the op it belongs to: a
/// transfer step (`cat`, `tee`, `sha256sum` in a container) no longer runs past a full limit.
#[test]
fn transfer_steps_count_against_the_host_limits_of_their_op() {
    let _g = lock();
    let g = gated();
    let counter = fresh("x");
    let _p = g.policy(&format!(
        "ops:\n  ct.exec:\n    commands: [[/usr/bin/uname]]\n    push: ['/srv/**']\n    pull: ['/srv/**']\n    limits: [{{counter: {counter}, window: hour, max: 2}}]\n"
    ));
    let home = Home::new();
    let r = gated_run(&home, &["ct", "start", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let uname = "sudo -n /usr/sbin/pct exec 200 -- /usr/bin/uname";
    for _ in 0..2 {
        let (code, _, err) = g.ssh(Some(uname));
        assert_ne!(code, 125, "{err}");
    }
    for line in [
        uname,
        "sudo -n /usr/sbin/pct exec 200 -- /bin/cat /srv/x",
        "sudo -n /usr/sbin/pct exec 200 -- /usr/bin/tee /srv/x",
        "sudo -n /usr/sbin/pct exec 200 -- /usr/bin/sha256sum /srv/x",
    ] {
        let (code, _, err) = g.ssh(Some(line));
        assert_eq!(code, 125, "{line}: {err}");
        assert!(err.contains("rate_limited"), "{line}: {err}");
    }
}
