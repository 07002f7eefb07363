//! Live tests of actions against the sandbox host: lifecycle, snapshots, backups, restore, create,
//! downloads; the soft blacklist; dry-run; task failures; HA waiting. Like `live.rs`, these FAIL
//! (never skip) without the bed's `PXAGENT_*` variables.
//!
//! Every test that changes the simulator holds the one host [`lock`] and works on its own
//! guests where it can, so the order of tests does not matter. Each runs pxagent in its own
//! [`Home`] (its own audit log and config).

use std::process::Command as Proc;

use serde_json::Value;

use crate::support::{
    Home, SIM, assert_not_sent, backups, bed_env, bin, clear_faults, fault, guest, isolate, lock,
    sim_get, status_of, sudo_log_len,
};

#[test]
fn start_snapshot_backup_restore_destroy_end_to_end() {
    let _g = lock();
    let home = Home::new();
    let px = |a: &[&str]| home.on_bed(a);

    // start (VM 102 lives on pve1 and starts stopped) — or it is already running from an earlier run
    if status_of(102) != "running" {
        let r = px(&["vm", "start", "102", "-o", "json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.json()["data"]["task"]["exitstatus"], "OK");
        assert!(
            r.json()["data"]["upid"]
                .as_str()
                .unwrap()
                .contains(":qmstart:102:")
        );
    }
    assert_eq!(status_of(102), "running");

    // snapshot with a description
    let snap = format!("e2e{}", std::process::id());
    let r = px(&[
        "vm",
        "snapshot",
        "102",
        &snap,
        "--description",
        "before the e2e test",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let snaps = sim_get("/nodes/pve1/qemu/102/snapshot", &[]);
    let s = snaps
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == snap.as_str())
        .expect("snapshot taken");
    assert_eq!(s["description"], "before the e2e test");

    // backup create
    let before: Vec<String> = backups("pve1", 102);
    let r = px(&[
        "backup",
        "create",
        "102",
        "--storage",
        "local",
        "--mode",
        "snapshot",
        "--compress",
        "zstd",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let after = backups("pve1", 102);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    let archive = after.iter().find(|a| !before.contains(a)).unwrap().clone();
    assert!(
        archive.starts_with("local:backup/vzdump-qemu-102-") && archive.ends_with(".vma.zst"),
        "{archive}"
    );
    // it shows in backup list
    let list = px(&["backup", "list", "--vmid", "102", "-o", "json"]).json();
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["volid"] == archive.as_str())
    );

    // restore to a new VMID
    let next: u64 = px(&["cluster", "nextid", "-o", "json"]).json()["data"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| px(&["cluster", "nextid", "-o", "json"]).json()["data"].as_u64())
        .unwrap();
    let r = px(&[
        "backup",
        "restore",
        &archive,
        "--vmid",
        &next.to_string(),
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let restored = guest(next).expect("restored guest exists");
    assert_eq!(restored["type"], "qemu");
    let config = sim_get(&format!("/nodes/pve1/qemu/{next}/config"), &[]);
    assert_eq!(
        config["name"],
        sim_get("/nodes/pve1/qemu/102/config", &[])["name"]
    );

    // restoring over an existing VMID is refused before anything is sent
    let log_before = sudo_log_len();
    let r = px(&["backup", "restore", &archive, "--vmid", "100"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("already exists") && r.stderr.contains("--force"),
        "{}",
        r.stderr
    );
    let r = px(&["backup", "restore", &archive, "--vmid", "100", "--force"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("yes overwrite 100"), "{}", r.stderr);
    assert_not_sent(log_before, &["--archive"]);

    // destroy: refused without the phrase (only the reads made before asking reach sudo),
    // done with it
    let id = next.to_string();
    let log_before = sudo_log_len();
    let r = px(&["vm", "destroy", &id, "-o", "json"]);
    assert_eq!(r.code, 4);
    assert_eq!(r.json()["error"]["kind"], "confirmation_required");
    assert_eq!(r.json()["error"]["phrase"], format!("yes destroy {id}"));
    assert_not_sent(log_before, &[&format!("delete /nodes/pve1/qemu/{id}")]);
    assert!(guest(next).is_some());
    let r = px(&[
        "vm",
        "destroy",
        &id,
        "--purge",
        "--confirm",
        &format!("yes destroy {id}"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(guest(next).is_none(), "destroyed");

    // clean up: the snapshot (a confirm op) and VM 102 back to stopped
    let r = px(&[
        "vm",
        "delsnapshot",
        "102",
        &snap,
        "--confirm",
        &format!("yes delsnapshot 102 {snap}"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = px(&["vm", "shutdown", "102", "--shutdown-timeout", "30"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(status_of(102), "stopped");
}

#[test]
fn every_confirm_op_refuses_without_its_phrase_and_sends_nothing() {
    let _g = lock();
    let home = Home::new();
    let cases: &[&[&str]] = &[
        &["vm", "stop", "100"],
        &["vm", "destroy", "103"],
        &["vm", "rollback", "102", "base"],
        &["vm", "delsnapshot", "102", "base"],
        &["vm", "snapshot", "100", "withram", "--vmstate"],
        &["ct", "stop", "200"],
        &["ct", "destroy", "201"],
        &["ct", "rollback", "200", "base"],
        &["ct", "delsnapshot", "200", "base"],
        &["backup", "prune", "100", "--keep-last", "1"],
        &[
            "backup",
            "remove",
            "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst",
        ],
        &["storage", "remove", "local-lvm"],
        &[
            "backup",
            "restore",
            "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst",
            "--vmid",
            "100",
            "--force",
        ],
    ];
    // A rollback is asked for only when the snapshot is there: CT 200 gets one.
    let snap = Proc::new(SIM)
        .args([
            "pvesh",
            "create",
            "/nodes/pve1/lxc/200/snapshot",
            "--snapname",
            "base",
        ])
        .output()
        .unwrap();
    assert!(
        snap.status.success(),
        "{}",
        String::from_utf8_lossy(&snap.stderr)
    );
    let state_before = Proc::new(SIM).arg("dump").output().unwrap().stdout;
    let log_before = sudo_log_len();
    for args in cases {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let r = home.on_bed(&a);
        assert_eq!(r.code, 4, "{args:?}: {}", r.stdout);
        let e = r.json()["error"].clone();
        assert_eq!(e["kind"], "confirmation_required", "{args:?}");
        let phrase = e["phrase"].as_str().unwrap().to_string();
        assert!(phrase.starts_with("yes "), "{phrase}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains(&format!("Reply `{phrase}`")),
            "{e}"
        );
        // a wrong phrase, and another target's phrase, are refused too
        let mut w = a.clone();
        w.extend(["--confirm", "yes"]);
        assert_eq!(home.on_bed(&w).code, 4, "{args:?}");
        let other = phrase
            .replace(" 100", " 101")
            .replace(" 200", " 201")
            .replace(" 102", " 103")
            .replace("local-lvm", "local");
        if other != phrase {
            let mut w = a.clone();
            w.extend(["--confirm", &other]);
            assert_eq!(home.on_bed(&w).code, 4, "{args:?} accepted {other}");
        }
    }
    assert_not_sent(
        log_before,
        &[
            "status/stop",
            "delete /",
            "/rollback",
            "prunebackups",
            "pvesm",
            "--force",
            "--vmstate",
        ],
    );
    assert_eq!(
        Proc::new(SIM).arg("dump").output().unwrap().stdout,
        state_before,
        "a refused op changed the host"
    );
    // vm stop carries the gentler hint
    let r = home.on_bed(&["vm", "stop", "100", "-o", "json"]);
    assert!(
        r.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("vm shutdown 100")
    );
    let gone = Proc::new(SIM)
        .args(["pvesh", "delete", "/nodes/pve1/lxc/200/snapshot/base"])
        .output()
        .unwrap();
    assert!(
        gone.status.success(),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
}

#[test]
fn dry_run_sends_nothing() {
    let _g = lock();
    let home = Home::new();
    let log_before = sudo_log_len();
    for args in [
        &["vm", "start", "103", "--dry-run"][..],
        &["vm", "destroy", "100", "--dry-run", "-o", "json"][..],
        &["backup", "create", "100", "--dry-run"][..],
        &[
            "vm",
            "create",
            "--name",
            "x",
            "--iso",
            "local:iso/debian-13.2.0-amd64-netinst.iso",
            "--dry-run",
        ][..],
    ] {
        let r = home.on_bed(args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    }
    assert_not_sent(
        log_before,
        &[
            "status/start",
            "delete /",
            "vzdump",
            "create /nodes/pve1/qemu ",
        ],
    );
    let r = home.on_bed(&["vm", "destroy", "100", "--dry-run", "-o", "json"]);
    let d = r.json()["data"].clone();
    assert_eq!(d["risk"], "confirm");
    assert_eq!(d["phrase"], "yes destroy 100");
}

#[test]
fn a_failing_task_is_exit_1_with_its_log_tail() {
    let _g = lock();
    let home = Home::new();
    clear_faults();
    fault(
        r#"{"match":"qemu/103/status/start","action":"fail","message":"start failed: QEMU exited with code 1","times":1}"#,
    );
    let r = home.on_bed(&["vm", "start", "103", "-o", "json"]);
    clear_faults();
    assert_eq!(r.code, 1, "{}", r.stdout);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("start failed: QEMU exited with code 1"),
        "{msg}"
    );
    assert!(msg.contains("UPID:pve3:"), "{msg}");
    assert_eq!(status_of(103), "stopped");
}

#[test]
fn a_guest_on_another_node_is_started_and_stopped_from_pve1() {
    let _g = lock();
    let home = Home::new();
    assert_eq!(guest(103).unwrap()["node"], "pve3");
    let r = home.on_bed(&["vm", "start", "103"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(status_of(103), "running");
    let r = home.on_bed(&["vm", "stop", "103", "--confirm", "yes stop 103"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(status_of(103), "stopped");
}

#[test]
fn an_ha_managed_guest_is_waited_for() {
    let _g = lock();
    let home = Home::new();
    let ha = sim_get("/nodes/pve2/qemu/104/status/current", &[]);
    assert_eq!(
        ha["ha"]["managed"], 1,
        "the simulator's VM 104 is HA-managed"
    );
    if status_of(104) == "running" {
        assert_eq!(home.on_bed(&["vm", "shutdown", "104"]).code, 0);
    }
    let r = home.on_bed(&["vm", "start", "104", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.json()["data"]["upid"]
            .as_str()
            .unwrap()
            .contains(":hastart:")
    );
    // pxagent returned only once HA had actually started it
    assert_eq!(status_of(104), "running");
    let r = home.on_bed(&["vm", "shutdown", "104"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(status_of(104), "stopped");
}

#[test]
fn create_and_clone_vms_and_containers() {
    let _g = lock();
    let home = Home::new();
    let px = |a: &[&str]| home.on_bed(a);
    // create with the next free VMID
    let r = px(&[
        "vm",
        "create",
        "--name",
        "fresh",
        "--iso",
        "local:iso/debian-13.2.0-amd64-netinst.iso",
        "--disk-size",
        "8",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let upid = r.json()["data"]["upid"].as_str().unwrap().to_string();
    let id: u64 = upid.split(':').nth(6).unwrap().parse().unwrap();
    let config = sim_get(&format!("/nodes/pve1/qemu/{id}/config"), &[]);
    assert_eq!(config["name"], "fresh");
    assert_eq!(config["cores"], 2);
    // an obviously too large disk is refused before anything is sent
    let log_before = sudo_log_len();
    let r = px(&[
        "vm",
        "create",
        "--name",
        "huge",
        "--iso",
        "local:iso/debian-13.2.0-amd64-netinst.iso",
        "--disk-size",
        "65000",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("free"), "{}", r.stderr);
    assert_not_sent(log_before, &["--name huge"]);
    // clone it (full: it is not a template)
    let clone_id = (id + 1).to_string();
    let r = px(&[
        "vm",
        "clone",
        &id.to_string(),
        &clone_id,
        "--name",
        "fresh-copy",
        "--full",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        sim_get(&format!("/nodes/pve1/qemu/{clone_id}/config"), &[])["name"],
        "fresh-copy"
    );
    // a container from a template, always unprivileged
    let r = px(&[
        "ct",
        "create",
        "--hostname",
        "box",
        "--template",
        "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
        "-o",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ct: u64 = r.json()["data"]["upid"]
        .as_str()
        .unwrap()
        .split(':')
        .nth(6)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        sim_get(&format!("/nodes/pve1/lxc/{ct}/config"), &[])["unprivileged"],
        1
    );
    // clean up
    for (kind, gid) in [("vm", id), ("vm", id + 1), ("ct", ct)] {
        let g = gid.to_string();
        let r = px(&[
            kind,
            "destroy",
            &g,
            "--confirm",
            &format!("yes destroy {g}"),
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
}

#[test]
fn iso_and_template_downloads() {
    let _g = lock();
    let home = Home::new();
    let px = |a: &[&str]| home.on_bed(a);
    let name = format!("e2e-{}.iso", std::process::id());
    let url = format!("https://example.org/images/{name}");
    let r = px(&["iso", "download", &url]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let has_iso = |file: &str| {
        let isos = px(&["iso", "list", "-o", "json"]).json()["data"].clone();
        let found = isos
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["volid"] == format!("local:iso/{file}"));
        assert!(found, "no local:iso/{file} in {isos}");
    };
    has_iso(&name);
    // A URL with a query (a signed mirror link): the file name comes from its path, and real sudo
    // admits the line.
    let signed = format!("q-{name}");
    let r = px(&[
        "iso",
        "download",
        &format!("https://example.org/get/{signed}?token=a1%2Fb2&expires=1767225600"),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    has_iso(&signed);
    // URLs with credentials, fragments or other schemes never leave the client
    for bad in [
        "https://user:pw@example.org/x.iso",
        "ftp://example.org/x.iso",
        "https://example.org/x.iso#x",
        "https://example.org/x.iso?x=1;id",
    ] {
        assert_eq!(px(&["iso", "download", bad]).code, 2, "{bad}");
    }
    // a checksum mismatch is a failed task
    let r = px(&[
        "iso",
        "download",
        "https://example.org/other.iso",
        "--checksum",
        &format!("sha256:{}", "0".repeat(64)),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("checksum mismatch"), "{}", r.stderr);
    // templates
    let list = px(&["template", "list", "-o", "json"]).json()["data"].clone();
    let t = list.as_array().unwrap()[0]["template"]
        .as_str()
        .unwrap()
        .to_string();
    let r = px(&["template", "download", &t]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let content = px(&[
        "storage",
        "content",
        "local",
        "--content",
        "vztmpl",
        "-o",
        "json",
    ])
    .json()["data"]
        .clone();
    assert!(
        content
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["volid"] == format!("local:vztmpl/{t}")),
        "{content}"
    );
}

#[test]
fn a_terminal_user_types_the_phrase_at_the_prompt() {
    let _g = lock();
    let home = Home::new();
    if status_of(100) != "running" {
        assert_eq!(home.on_bed(&["vm", "start", "100"]).code, 0);
    }
    // `script` gives pxagent a pseudo-terminal; the phrase is typed on its stdin.
    let bin = bin();
    let run_in_pty = |typed: &str, command: &str| {
        let mut c = Proc::new("script");
        isolate(&mut c, home.path()).env("TERM", "dumb");
        bed_env(&mut c).args(["-qefc", command, "/dev/null"]);
        let mut child = c
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        std::thread::sleep(std::time::Duration::from_millis(800));
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(typed.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, screen) = run_in_pty("yes stop 999\n", &format!("{} vm stop 100", bin.display()));
    assert_eq!(code, Some(4), "{screen}");
    assert!(
        screen.contains("Type `yes stop 100` to proceed"),
        "{screen}"
    );
    assert_eq!(status_of(100), "running");
    let (code, screen) = run_in_pty("yes stop 100\n", &format!("{} vm stop 100", bin.display()));
    assert_eq!(code, Some(0), "{screen}");
    assert_eq!(status_of(100), "stopped");
    assert_eq!(home.on_bed(&["vm", "start", "100"]).code, 0);
}

/// A config file with a policy, in the temp HOME's XDG config dir.
fn write_policy(home: &Home, policy: &str) {
    let cfg = home.config_dir().join("pxagent");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.yaml"), format!("policy:\n{policy}")).unwrap();
}

#[test]
fn local_policy_denies_protects_and_demands_confirmation() {
    let _g = lock();
    let home = Home::new();
    write_policy(
        &home,
        "  ops:\n    vm.reboot: {action: deny, reason: \"reboots go through the change board\"}\n    vm.suspend: confirm\n  protect: [101, keep]\n",
    );
    let log_before = sudo_log_len();
    let r = home.on_bed(&["vm", "reboot", "100", "-o", "json"]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "policy_refused");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("change board")
    );
    // a protected guest, by id
    let r = home.on_bed(&["vm", "shutdown", "101"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("protected"), "{}", r.stderr);
    assert_not_sent(log_before, &["status/reboot", "qemu/101/status/shutdown"]);
    // policy-made confirmation (of a suspend of running VM 100: a resume would be a no-op,
    // which needs no phrase)
    let r = home.on_bed(&["vm", "suspend", "100", "-o", "json"]);
    assert_eq!(r.code, 4);
    assert_eq!(r.json()["error"]["phrase"], "yes vm suspend 100");
    // reads stay allowed for protected guests
    assert_eq!(home.on_bed(&["vm", "status", "101"]).code, 0);
    // read_only refuses every change
    write_policy(&home, "  read_only: true\n");
    let r = home.on_bed(&["vm", "start", "103"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("read_only"), "{}", r.stderr);
    // an unknown op id in the policy is a config error naming it
    write_policy(&home, "  ops:\n    vm.detroy: deny\n");
    let r = home.on_bed(&["vm", "status", "100"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("vm.detroy"), "{}", r.stderr);
}

#[test]
fn the_audit_trail_records_everything_and_detects_tampering() {
    let _g = lock();
    let home = Home::new();
    let px = |a: &[&str]| home.on_bed(a);
    assert_eq!(px(&["vm", "status", "100"]).code, 0); // allowed
    assert_eq!(px(&["vm", "destroy", "103"]).code, 4); // refused
    assert_eq!(px(&["vm", "destroy", "100", "--dry-run"]).code, 0); // dry_run
    assert_eq!(px(&["vm", "start", "99"]).code, 2); // failed (bad input)
    assert_eq!(px(&["vm", "status", "4242"]).code, 1); // allowed, remote failure
    let r = px(&["audit", "show", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let recs = r.json()["data"].as_array().unwrap().clone();
    let decisions: Vec<&str> = recs
        .iter()
        .map(|r| r["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        vec!["allowed", "refused", "dry_run", "failed", "allowed"]
    );
    assert_eq!(recs[0]["op"], "vm.status");
    assert_eq!(recs[0]["argv"][0], "sudo");
    assert_eq!(recs[1]["exit_code"], 4);
    assert_eq!(recs[1]["phrase"], Value::Null);
    assert!(recs.iter().all(|r| r["via"] == "cli"));
    let r = px(&["audit", "verify"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // edit one line: verify fails naming it
    let path = home.audit_log();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"refused\"", "\"allowed\"", 1)).unwrap();
    let r = px(&["audit", "verify", "-o", "json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 3"),
        "{}",
        r.stdout
    );
}

#[test]
fn twenty_concurrent_invocations_leave_twenty_intact_lines() {
    let _g = lock();
    let home = Home::new();
    let children: Vec<_> = (0..20)
        .map(|_| {
            home.px()
                .args(["-H", "127.0.0.1", "storage", "remove", "local"])
                .spawn()
        })
        .collect();
    for c in children {
        assert_eq!(c.wait().code, 4);
    }
    let text = std::fs::read_to_string(home.audit_log()).unwrap();
    assert_eq!(text.lines().count(), 20);
    let r = home.on_bed(&["audit", "verify", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.json()["data"]["lines"], 20);
}

#[test]
fn no_wait_returns_the_upid_and_a_follower_finishes_the_task() {
    let _g = lock();
    let home = Home::new();
    if status_of(102) == "running" {
        assert_eq!(home.on_bed(&["vm", "shutdown", "102"]).code, 0);
    }
    // Slow the start down so the task is still ahead when pxagent returns.
    clear_faults();
    fault(r#"{"match":"qemu/102/status/start","action":"hang","seconds":3,"times":1}"#);
    let r = home.on_bed(&["vm", "start", "102", "--no-wait", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let upid = r.json()["data"]["upid"].as_str().unwrap().to_string();
    assert!(upid.contains(":qmstart:102:"), "{upid}");
    // The follower runs the task to its end.
    let mut running = false;
    for _ in 0..100 {
        if status_of(102) == "running" {
            running = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    clear_faults();
    assert!(running, "the follower did not finish the start");
    // Both processes wrote their audit record (the follower after the task ended).
    let mut lines = 0;
    for _ in 0..50 {
        let recs = home.on_bed(&["audit", "show", "-o", "json"]).json()["data"].clone();
        lines = recs
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["op"] == "vm.start")
            .count();
        if lines >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        lines >= 2,
        "expected the caller's and the follower's audit records"
    );
    assert_eq!(home.on_bed(&["vm", "shutdown", "102"]).code, 0);
}
