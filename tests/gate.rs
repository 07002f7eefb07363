//! The host gate on the gated bed: what a plain `ssh` can no longer do, pxagent's operations
//! through the gate, the host policy over the client's, signed approvals, host rate limits, the
//! host audit, and `setup render` / `setup revoke` applied for real.
//!
//! The gated bed shares the simulator with the ordinary one; every test holds the host lock.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::*;

fn gated_run(home: &Home, args: &[&str]) -> Run {
    home.px().gated().args(args).run()
}

/// The gated bed with host policy `policy` (back to the old one when the swap drops) and
/// container 200 started through the gate, as each container test there begins. Hold the host
/// lock first.
fn gated_ct_200(g: &Gated, policy: &str) -> (PolicySwap, Home) {
    let swap = g.policy(policy);
    let home = Home::new();
    let r = gated_run(&home, &["ct", "start", "200"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    (swap, home)
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

/// Marking a storage as a mount point takes it offline, so the gate judges the line
/// as the disable it is: a host policy that denies `storage.disable` refuses it, past an entry
/// that allows `storage.set`, and one that wants `storage.disable` confirmed wants its phrase.
/// (The storage does not exist: should anything get through, Proxmox refuses it.)
#[test]
fn the_gate_judges_a_mount_point_mark_as_a_disable() {
    let _g = lock();
    let g = gated();
    let line =
        "sudo -n /usr/bin/pvesh set /storage/gmissing --is_mountpoint yes --output-format json";
    {
        let _p = g.policy("ops:\n  storage.disable: deny\n  storage.set: allow\n");
        let (code, _, err) = g.ssh(Some(line));
        assert_eq!(code, 125, "{err}");
        assert!(err.contains("policy_refused"), "{err}");
        let home = Home::new();
        let r = gated_run(
            &home,
            &[
                "storage",
                "set",
                "gmissing",
                "--is-mountpoint",
                "yes",
                "--confirm",
                "yes disable gmissing",
                "-o",
                "json",
            ],
        );
        assert_eq!(r.code, 3, "{}", r.stdout);
    }
    let _p = g.policy("ops:\n  storage.disable: confirm\n");
    let (code, _, err) = g.ssh(Some(line));
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("confirmation_required"), "{err}");
    assert!(err.contains("yes disable gmissing"), "{err}");
}

/// The gate admits an NFS storage only on a server its host policy names, and none
/// while the host policy names no server at all (sudo's rule names the render's servers too).
#[test]
fn the_gate_admits_nfs_storages_only_on_the_admins_servers() {
    let _g = lock();
    let g = gated();
    let line = |server: &str| {
        let mut v = std::collections::BTreeMap::new();
        v.insert("storage", "gnfs".to_string());
        v.insert("server", server.to_string());
        v.insert("export", "/export/pve".to_string());
        let argv = pxagent::catalog::ops::STORAGE_ADD_NFS.argv(&v);
        let mut words = vec!["sudo".to_string(), "-n".to_string()];
        words.extend(argv);
        pxagent::base::text::quote_argv(&words)
    };
    {
        let _p = g.policy("ops: {}\n");
        let (code, _, err) = g.ssh(Some(&line("nas")));
        assert_eq!(code, 125, "{err}");
        assert!(
            err.contains("policy_refused") && err.contains("names no NFS servers"),
            "{err}"
        );
    }
    let _p = g.policy("nfs_servers: [nas]\nops: {}\n");
    for server in ["192.0.2.30", "evil.example.org"] {
        let (code, _, err) = g.ssh(Some(&line(server)));
        assert_eq!(code, 125, "{server}: {err}");
        assert!(err.contains("not one the admin named"), "{err}");
    }
    // The client says the same, with its exit code, when the agent goes through pxagent.
    let home = Home::new();
    let r = gated_run(
        &home,
        &[
            "storage",
            "add-nfs",
            "gnfs",
            "--server",
            "evil.example.org",
            "--export",
            "/export/pve",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "policy_refused");
}

/// The gate reads the storage configuration itself and refuses a directory storage
/// inside or above another storage's path, whatever the client did (the line sent by hand).
#[test]
fn the_gate_keeps_directory_storages_apart() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops: {}\n");
    let home = Home::new();
    let id = fresh("gapart");
    let base = format!("/mnt/{id}");
    let r = gated_run(
        &home,
        &[
            "storage",
            "add-dir",
            &id,
            "--path",
            &base,
            "--content",
            "iso",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = |sid: &str, path: &str| {
        let mut v = std::collections::BTreeMap::new();
        v.insert("storage", sid.to_string());
        v.insert("path", path.to_string());
        v.insert("content", "iso".to_string());
        let argv = pxagent::catalog::ops::STORAGE_ADD_DIR.argv(&v);
        let mut words = vec!["sudo".to_string(), "-n".to_string()];
        words.extend(argv);
        pxagent::base::text::quote_argv(&words)
    };
    for path in [format!("{base}/inner"), base.clone()] {
        let (code, _, err) = g.ssh(Some(&line(&fresh("gapart"), &path)));
        assert_eq!(code, 125, "{path}: {err}");
        assert!(
            err.contains("not_allowed") && err.contains(&format!("overlaps storage {id}")),
            "{err}"
        );
    }
    // Apart from every storage, the same line runs.
    let other = fresh("gapart");
    let (code, _, err) = g.ssh(Some(&line(&other, &format!("/mnt/{other}"))));
    assert_eq!(code, 0, "{other}: {err}");
    for sid in [&id, &other] {
        let phrase = format!("yes remove {sid}");
        let r = gated_run(&home, &["storage", "remove", sid, "--confirm", &phrase]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
}

/// With a host policy that names its NFS servers, the gate reads the storage
/// configuration and refuses a restore, an import or a backup that would trust an NFS storage
/// on another server (the admin's hand-added share of the simulator's `/export/hostile`).
#[test]
fn the_gate_trusts_no_storage_on_an_unnamed_server() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("nfs_servers: [nas]\nops: {}\n");
    let sid = fresh("ghostile");
    crate::support::add_hostile_share(&sid, "backup,import");
    let line = |op: &pxagent::catalog::Op, values: &[(&'static str, String)]| {
        let v: std::collections::BTreeMap<&'static str, String> = values.iter().cloned().collect();
        let mut words = vec!["sudo".to_string(), "-n".to_string()];
        words.extend(op.argv(&v));
        pxagent::base::text::quote_argv(&words)
    };
    let node = ("node", "pve1".to_string());
    for l in [
        line(
            &pxagent::catalog::ops::BACKUP_RESTORE,
            &[
                (
                    "archive",
                    format!("{sid}:backup/vzdump-qemu-950-2026_01_01-00_00_00.vma.zst"),
                ),
                ("vmid", "950".into()),
                node.clone(),
            ],
        ),
        line(
            &pxagent::catalog::ops::BACKUP_CREATE,
            &[
                ("vmid", "100".into()),
                ("storage", sid.clone()),
                node.clone(),
            ],
        ),
    ] {
        let (code, _, err) = g.ssh(Some(&l));
        assert_eq!(code, 125, "{l}: {err}");
        assert!(
            err.contains("policy_refused")
                && err.contains(&format!("storage {sid} is an NFS storage on 198.51.100.66")),
            "{err}"
        );
    }
    assert!(
        sim_get("/cluster/resources", &[])
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["vmid"] != 950)
    );
    sim(&["pvesh", "delete", &format!("/storage/{sid}")]);
}

/// Through the gate, `skill --from-host` also leaves out what the host policy
/// denies outright.
#[test]
fn the_skill_from_a_gated_host_leaves_out_what_its_policy_denies() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  vm.destroy: deny\n  \"ct.*\": deny\n");
    let home = Home::new();
    let r = gated_run(&home, &["skill", "--from-host"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("[`vm.start`]"), "{}", r.stdout);
    assert!(!r.stdout.contains("[`vm.destroy`]"), "{}", r.stdout);
    assert!(!r.stdout.contains("[`ct.start`]"), "{}", r.stdout);
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
    let runs: Vec<_> = running.into_iter().map(|r| r.wait()).collect();
    let codes: Vec<i32> = runs.iter().map(|r| r.code).collect();
    let ok = codes.iter().filter(|c| **c == 0).count();
    let limited = codes.iter().filter(|c| **c == 8).count();
    assert_eq!((ok, limited), (5, 7), "{codes:?}");
    // The host's refusal says how long to wait, as a field.
    for r in runs.iter().filter(|r| r.code == 8) {
        let e = &r.json()["error"];
        assert_eq!(
            (e["kind"].as_str(), e["source"].as_str()),
            (Some("rate_limited"), Some("host")),
            "{e}"
        );
        let wait = e["retry_after"].as_u64().unwrap_or_else(|| panic!("{e}"));
        assert!((1..=60).contains(&wait), "{e}");
    }
}

/// Issue 25, item 5: 21 identical changes within 2 minutes, each from its own client state,
/// get exactly 20 through the gate (the default `runaway` cap); the budget caps every change of
/// the account, and reads go on past both.
#[test]
fn the_host_caps_identical_calls_and_the_change_budget_across_clients() {
    let _g = lock();
    let _s = sim_reset();
    let g = gated();
    let _p = g.policy("ops: {}\n");
    let note = fresh("loop");
    // One after another: at once, each would be pinned to the config all of them read, and
    // all but the first would be conflicts (tests/conflicts.rs).
    let runs: Vec<Run> = (0..21)
        .map(|_| {
            Home::new()
                .px()
                .gated()
                .args(["vm", "set", "100", "--description", &note, "-o", "json"])
                .run()
        })
        .collect();
    let codes: Vec<i32> = runs.iter().map(|r| r.code).collect();
    assert_eq!(
        (
            codes.iter().filter(|c| **c == 0).count(),
            codes.iter().filter(|c| **c == 8).count()
        ),
        (20, 1),
        "{codes:?}"
    );
    let r = runs.iter().find(|r| r.code == 8).unwrap();
    let e = &r.json()["error"];
    assert_eq!(
        (e["kind"].as_str(), e["source"].as_str()),
        (Some("runaway"), Some("host")),
        "{e}"
    );
    let wait = e["retry_after"].as_u64().unwrap_or_else(|| panic!("{e}"));
    assert!((1..=120).contains(&wait), "{e}");
    // Another call (other arguments) and a read of the same guest still pass.
    let home = Home::new();
    let r = gated_run(
        &home,
        &[
            "vm",
            "set",
            "100",
            "--description",
            &fresh("other"),
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = gated_run(&home, &["vm", "config", "100", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);

    // A budget of 2 changes an hour: the third change is refused, reads go on.
    let _b = g.policy("budget: {changes: 2, window: 1h}\n");
    let caps = std::path::Path::new(&std::env::var("PXAGENT_GATED_TESTBED_GATE_STATE").unwrap())
        .join("caps.json");
    let _ = std::fs::remove_file(&caps);
    for i in 0..2 {
        let r = gated_run(
            &home,
            &[
                "vm",
                "set",
                "100",
                "--description",
                &fresh(&format!("b{i}")),
                "-o",
                "json",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let r = gated_run(&home, &["vm", "snapshot", "100", &fresh("s"), "-o", "json"]);
    assert_eq!(r.code, 8, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["error"]["kind"], "budget", "{}", r.stdout);
    let r = gated_run(&home, &["vm", "status", "100", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let _ = std::fs::remove_file(&caps);
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

    /// `ssh` as the account with its own key to its own sshd (a throwaway host key: any is
    /// accepted), running `line`.
    fn login_cmd(&self, line: &str) -> Command {
        ssh_command(
            &format!("{}@127.0.0.1", self.user),
            self.port,
            &self.p("agent"),
            None,
            Some(line.as_ref()),
        )
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

/// sshd passes no client signal to a forced command, so the gate runs sudo as its child and
/// ends it when the client goes away: a catalog line that hangs on the host (a simulated
/// `pvesh` stuck for 30 s) is gone, with its sudo, within moments of the client's end, and
/// the host's record says so. Before, it ran on as root for as long as it hung.
#[test]
fn a_command_whose_client_went_away_is_ended_by_the_gate() {
    let _g = lock();
    let g = gated();
    clear_faults();
    fault(r#"{"match":"get /version","action":"hang","seconds":30,"times":1}"#);
    let at = g.log_len();
    let line = "sudo -n /usr/bin/pvesh get /version --output-format json";
    let mut client = g
        .ssh_cmd(line)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client_pid = client.id();
    let on_host = || -> Vec<u32> {
        pids_with("/usr/bin/pvesh\0get\0/version")
            .into_iter()
            .filter(|p| *p != client_pid)
            .collect()
    };
    let started = std::time::Instant::now();
    while on_host().len() < 2 && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let before = on_host();
    assert!(before.len() >= 2, "sudo and pvesh never ran: {before:?}");
    let _ = client.kill();
    let _ = client.wait();
    let cut = std::time::Instant::now();
    while !on_host().is_empty() && cut.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = on_host();
    let gone_after = cut.elapsed();
    clear_faults();
    assert!(left.is_empty(), "still running on the host: {left:?}");
    assert!(
        gone_after < std::time::Duration::from_secs(5),
        "ended only after {gone_after:?}"
    );
    let records = g.log_since(at);
    assert!(
        records.iter().any(|r| r["decision"] == "ended"
            && r["op"] == "pve.version"
            && r["status"] == "signal 15"),
        "{records:#?}"
    );
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

/// `scripts/test.sh` brings the gated bed up with `testbed.sh up --ct-exec 200-299`, so the range
/// reaches its sudoers render and container exec works there, through the gate and under the host's
/// allowlist like a VM's.
#[test]
fn container_exec_on_a_bed_rendered_with_ct_exec_passes_the_gate_and_its_allowlist() {
    let _g = lock();
    let g = gated();
    let (_p, home) = gated_ct_200(&g, "ops:\n  ct.exec:\n    commands: [[echo, \"...\"]]\n");
    let run = |args: &[&str]| gated_run(&home, args);
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
    let (_p, home) = gated_ct_200(
        &g,
        "ops:\n  ct.exec:\n    commands: [[/usr/bin/uname]]\n    push: ['/srv/**']\n    pull: ['/srv/**']\n",
    );
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
    let (_p, _home) = gated_ct_200(
        &g,
        &format!(
            "ops:\n  ct.exec:\n    commands: [[/usr/bin/uname]]\n    push: ['/srv/**']\n    pull: ['/srv/**']\n    limits: [{{counter: {counter}, window: hour, max: 2}}]\n"
        ),
    );
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

/// The gate's raw log lines written since `offset`: each must be one whole JSON record. Waits
/// (up to 5 s) for `expect` of them: the listener writes a record after the gate sent it.
fn raw_records_since(g: &Gated, offset: u64, expect: usize) -> Vec<(String, Value)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut text = std::fs::read(&g.log).unwrap_or_default();
    while text[offset as usize..]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        < expect
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
        text = std::fs::read(&g.log).unwrap_or_default();
    }
    String::from_utf8(text[offset as usize..].to_vec())
        .expect("the gate's log is UTF-8")
        .lines()
        .map(|l| {
            let (_, json) = l
                .split_once("]: ")
                .unwrap_or_else(|| panic!("not a record: {l}"));
            let v = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
            (json.to_string(), v)
        })
        .collect()
}

/// A record is always one valid JSON object that starts with who asked, for what and what
/// became of it, however much a client pads its request; long values are cut on their own
/// with their length and hash; line separators are escaped and a line that is not UTF-8 is
/// recorded escaped.
#[test]
fn host_audit_records_stay_whole_however_the_request_is_padded() {
    use std::os::unix::ffi::OsStrExt;
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  ct.exec:\n    commands: [[/usr/bin/uname]]\n");
    // Under the guest argv's own limit (32 KiB), so the line is read as the op it is.
    let pad = "A".repeat(30_000);
    let at = g.log_len();
    let (code, _, err) = g.ssh(Some(&format!(
        "sudo -n /usr/sbin/pct exec 200 -- /bin/sh -c {pad}"
    )));
    assert_eq!(code, 125, "{err}");
    let env = pxagent::base::gate_protocol::Envelope {
        client: "v".repeat(50_000),
        argv: Some(
            [
                "sudo",
                "-n",
                "/usr/sbin/pct",
                "exec",
                "200",
                "--",
                "/bin/sh",
                "-c",
                "x",
            ]
            .map(String::from)
            .to_vec(),
        ),
        ..Default::default()
    }
    .to_command();
    let (code, _, err) = g.ssh(Some(&env.join(" ")));
    assert_eq!(code, 125, "{err}");
    let (code, _, _) = g.ssh(Some("no\u{2028}such\u{85}op"));
    assert_eq!(code, 125);
    let (code, _, _) = g.ssh_os(Some(std::ffi::OsStr::from_bytes(b"sudo -n \xff\xfe/x")));
    assert_eq!(code, 125);
    let recs = raw_records_since(&g, at, 4);
    assert_eq!(recs.len(), 4, "{recs:?}");
    let who = format!(r#"{{"account":"{}","#, g.user);
    for (text, _) in &recs {
        assert!(text.len() <= 8000, "{} bytes", text.len());
        assert!(text.starts_with(&who), "{}", &text[..200.min(text.len())]);
        assert!(
            !text.contains('\u{2028}') && !text.contains('\u{85}'),
            "{text}"
        );
    }
    let (text, padded) = &recs[0];
    assert!(
        text.starts_with(&format!(
            r#"{who}"op":"ct.exec","decision":"refused","kind":"policy_refused","reason":"#
        )),
        "{}",
        &text[..300]
    );
    let cut = &padded["argv"][8];
    assert_eq!(cut["bytes"], 30_000, "{cut}");
    assert_eq!(cut["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(padded["argv"][6], "/bin/sh");
    assert_eq!(recs[1].1["client_version"]["bytes"], 50_000);
    assert_eq!(recs[1].1["op"], "ct.exec");
    assert_eq!(recs[2].1["command"], "no\u{2028}such\u{85}op");
    assert!(recs[2].0.contains(r"no\u2028such\u0085op"), "{}", recs[2].0);
    assert_eq!(recs[3].1["command"], r"sudo -n \xff\xfe/x");
    assert_eq!(recs[3].1["command_not_utf8"], true);
    assert_eq!(recs[3].1["kind"], "bad_request");
}

/// The longest line a host can be sent reaches the gate and is recorded; one byte more never
/// starts the gate (the kernel refuses the variable), and the client refuses to send such a
/// line at all, before connecting.
#[test]
fn the_gate_and_the_client_agree_on_the_longest_command_line() {
    let _g = lock();
    let g = gated();
    let max = pxagent::base::text::MAX_COMMAND_LINE;
    let head = "sudo -n /usr/sbin/pct exec 200 -- /bin/sh -c ";
    let line = |n: usize| format!("{head}{}", "B".repeat(n - head.len()));
    let at = g.log_len();
    let (code, _, err) = g.ssh(Some(&line(max)));
    assert_eq!(code, 125, "{err}");
    assert_eq!(
        raw_records_since(&g, at, 1).len(),
        1,
        "the longest line is recorded"
    );
    let at = g.log_len();
    let (code, _, _) = g.ssh(Some(&line(max + 1)));
    assert_ne!(code, 0);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        raw_records_since(&g, at, 0).is_empty(),
        "the gate never started"
    );
    // The client: a VM's stdin (at most 64 KiB) whose quoted line would be over the limit
    // is refused before it is sent: alternating `'` and `$` need a quoted chunk each, three
    // bytes per character.
    let home = Home::new();
    home.write("stdin.txt", "'$".repeat(32_000).as_bytes());
    let sudo_at = sudo_log_len();
    let r = gated_run(
        &home,
        &[
            "vm",
            "exec",
            "100",
            "--stdin",
            "stdin.txt",
            "--",
            "/bin/true",
        ],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("nothing was sent"), "{}", r.stderr);
    assert!(
        !sudo_commands_since(sudo_at)
            .iter()
            .any(|c| c.contains("agent/exec")),
        "no exec reached the host"
    );
}

/// An approval names the account and the host's machine id besides its name: one signed for
/// another account, or for another host of the same name, is refused; and its nonce is the
/// host's, so one used by any account of this host (a record in the shared, root-owned
/// store) is refused as replayed here.
#[test]
fn approvals_hold_for_one_account_on_one_host_once() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  vm.snapshot: approve\n");
    let home = Home::new();
    // The id the bed's gate reads: /etc/machine-id, or the bed's own where the machine has none.
    let machine_id = std::env::var("PXAGENT_GATED_TESTBED_MACHINE_ID")
        .expect("PXAGENT_GATED_TESTBED_MACHINE_ID (scripts/testbed.sh env --gate)");
    assert_eq!(machine_id.len(), 32, "{machine_id:?}");
    let nonces = PathBuf::from(std::env::var("PXAGENT_GATED_TESTBED_GATE_NONCES").unwrap());
    let snap = fresh("m");
    let args = ["vm", "snapshot", "100", snap.as_str(), "-o", "json"];
    let r = gated_run(&home, &args);
    assert_eq!(r.code, 4, "{}", r.stdout);
    let st = statement(&r);
    assert!(st.starts_with("pxagent-approval/2\nhost: "), "{st}");
    assert!(
        st.contains(&format!("\nmachine-id: {machine_id}\n")),
        "{st}"
    );
    assert!(st.contains(&format!("\naccount: {}\n", g.user)), "{st}");
    let signed = |text: &str, name: &str| -> String {
        home.write(name, text.as_bytes());
        let ap = home
            .px()
            .args(["approve", "--ttl", "5m", "--key"])
            .arg_path(&g.approver_key)
            .args([name])
            .run();
        assert_eq!(ap.code, 0, "{}", ap.stderr);
        assert!(
            ap.stderr.contains(" as account ") && ap.stderr.contains("machine id"),
            "the approver is told where it will run: {}",
            ap.stderr
        );
        home.write(&format!("{name}.ap"), ap.stdout.as_bytes());
        format!("{name}.ap")
    };
    let with = |ap: &str| {
        let mut a = args.to_vec();
        a.extend(["--approval", ap]);
        gated_run(&home, &a)
    };
    for (changed, reason) in [
        (
            st.replace(&format!("account: {}", g.user), "account: zen-other"),
            "wrong_account",
        ),
        (st.replace(&machine_id, &"0".repeat(32)), "wrong_host"),
    ] {
        let r = with(&signed(&changed, "changed.txt"));
        assert_eq!(r.code, 4, "{}", r.stdout);
        assert_eq!(r.json()["error"]["reason"], reason, "{}", r.stdout);
    }
    // The store is the host's: root-owned and sticky, shared by every gated account.
    let meta = std::fs::symlink_metadata(&nonces).unwrap();
    assert_eq!(meta.uid(), 0);
    assert_eq!(meta.permissions().mode() & 0o7777, 0o1777);
    // A nonce another account of this host used (its record, owned by that account) is
    // used here too.
    let nonce = st
        .lines()
        .find_map(|l| l.strip_prefix("nonce: "))
        .unwrap()
        .to_string();
    let record = nonces.join(&nonce);
    std::fs::write(&record, "0\n").unwrap();
    std::os::unix::fs::chown(&record, Some(65534), Some(65534)).unwrap();
    let r = with(&signed(&st, "st.txt"));
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert_eq!(r.json()["error"]["reason"], "replayed", "{}", r.stdout);
    let _ = std::fs::remove_file(&record);
    // A fresh one runs once, and its record is the account's, in the host's store.
    let r = gated_run(&home, &args);
    let st = statement(&r);
    let ap = signed(&st, "fresh.txt");
    let r = with(&ap);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let nonce = st.lines().find_map(|l| l.strip_prefix("nonce: ")).unwrap();
    let uid = Command::new("id")
        .args(["-u", &g.user])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<u32>()
                .unwrap()
        })
        .unwrap();
    assert_eq!(std::fs::metadata(nonces.join(nonce)).unwrap().uid(), uid);
    let r = with(&ap);
    assert_eq!(r.json()["error"]["reason"], "replayed", "{}", r.stdout);
}

/// The host policy may be a symlink, but the gate then trusts it only when the file it leads
/// to and every directory above that are root's alone: a link into a directory others can
/// write refuses everything.
#[test]
fn a_policy_symlink_into_a_writable_directory_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops: {}\n");
    let open = std::env::temp_dir().join(fresh("pxagent-open-"));
    let deep = open.join("deeper");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let target = deep.join("policy.yaml");
    std::fs::write(&target, "ops: {}\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_file(&g.policy).unwrap();
    std::os::unix::fs::symlink(&target, &g.policy).unwrap();
    let line = "sudo -n /usr/bin/pvesh get /version --output-format json";
    let (code, _, err) = g.ssh(Some(line));
    assert_eq!(code, 125, "{err}");
    assert!(err.contains("policy_unavailable"), "{err}");
    assert!(
        err.contains("resolves to") && err.contains(&open.display().to_string()),
        "{err}"
    );
    // The same link into root's own directories is trusted.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, out, err) = g.ssh(Some(line));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"version\""), "{out}");
    std::fs::remove_file(&g.policy).unwrap();
    std::fs::remove_dir_all(&open).unwrap();
}

/// `protect` covers a guest's tasks: stopping a task whose UPID names a protected guest is
/// refused like any change to it; another guest's task still passes the policy.
#[test]
fn stopping_a_protected_guests_task_is_refused() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("protect: [100]\n");
    let line = |vmid: &str| {
        format!(
            "sudo -n /usr/bin/pvesh delete /nodes/pve1/tasks/UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:vzdump:{vmid}:root@pam: --output-format json"
        )
    };
    let at = g.log_len();
    let (code, _, err) = g.ssh(Some(&line("100")));
    assert_eq!(code, 125, "{err}");
    assert!(
        err.contains("policy_refused") && err.contains("guest 100 (the task is its) is protected"),
        "{err}"
    );
    let (code, _, err) = g.ssh(Some(&line("101")));
    assert_ne!(code, 125, "another guest's task passes the gate: {err}");
    let recs = raw_records_since(&g, at, 2);
    assert_eq!(recs[0].1["op"], "task.stop");
    assert_eq!(recs[0].1["decision"], "refused");
    assert_eq!(recs[1].1["decision"], "allowed");
    // The client says the same, from the host.
    let home = Home::new();
    let r = gated_run(
        &home,
        &[
            "task",
            "stop",
            "UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:vzdump:100:root@pam:",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["error"]["source"], "host", "{}", r.stdout);
}
