//! Live tests against the sandbox host: real sshd, real sudo with the rendered sudoers, the PVE
//! simulator. `scripts/test.sh` brings the bed up and exports its `PXAGENT_*` variables; without
//! them every test here FAILS with a message (never skips).
//!
//! Tests that change the host (sudoers, faults, sshd) hold the one host [`lock`] so they never
//! overlap, and put back what they changed. The helpers are in `support`.

use std::process::Command as Proc;

use pxagent::views::snake_keys;
use serde_json::Value;

use crate::support::{
    Agent, Home, SudoersSwap, bed, clear_faults, fault, lock, on_bed, px, sim_get,
};

#[test]
fn preflight_passes_on_the_sandbox() {
    let _g = lock();
    let r = on_bed(&["preflight", "-o", "json"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let checks = r.json()["data"]["checks"].as_array().unwrap().clone();
    for name in [
        "ssh",
        "ssh-auth-methods",
        "account",
        "sudo-version",
        "sudo-rules",
        "over-broad",
        "audit",
        "pve-version",
    ] {
        let c = checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no check {name}"));
        assert_eq!(c["status"], "pass", "{c}");
    }
}

#[test]
fn every_read_op_returns_what_the_simulator_holds() {
    let _g = lock();
    let data = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let r = on_bed(&a);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        r.json()["data"].clone()
    };
    // `version` shows both sides: the host's part is what pvesh says.
    assert_eq!(data(&["version"])["server"], sim_get("/version", &[]));
    assert_eq!(
        data(&["cluster", "status"]),
        sim_get("/cluster/status", &[])
    );

    let resources = sim_get("/cluster/resources", &[]);
    let ids = |v: &Value, t: Option<&str>| -> Vec<String> {
        let mut ids: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| t.is_none_or(|t| r["type"] == t))
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(
        ids(&data(&["cluster", "resources"]), None),
        ids(&resources, None)
    );
    assert_eq!(
        ids(&data(&["vm", "list"]), None),
        ids(&resources, Some("qemu"))
    );
    assert_eq!(
        ids(&data(&["ct", "list"]), None),
        ids(&resources, Some("lxc"))
    );
    assert_eq!(
        ids(&data(&["cluster", "resources", "--type", "ct"]), None),
        ids(&resources, Some("lxc"))
    );
    assert_eq!(
        ids(&data(&["cluster", "resources", "--type", "storage"]), None),
        ids(&resources, Some("storage"))
    );

    let nodes: Vec<String> = data(&["node", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(nodes, vec!["pve1", "pve2", "pve3"]);
    // What the host holds, its field names in pxagent's one case style (`boot-info` → `boot_info`).
    let before = snake_keys(sim_get("/nodes/pve2/status", &[]));
    let got = data(&["node", "status", "pve2"]);
    let after = snake_keys(sim_get("/nodes/pve2/status", &[]));
    assert!(got == before || got == after, "node status pve2: {got}");
    let storages: Vec<String> = data(&["storage", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["storage"].as_str().unwrap().to_string())
        .collect();
    let mut sim_storages: Vec<String> = sim_get("/nodes/pve1/storage", &[])
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["storage"].as_str().unwrap().to_string())
        .collect();
    sim_storages.sort();
    assert_eq!(storages, sim_storages);

    // Every guest's status, config and snapshots, wherever it lives.
    for r in resources
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "qemu" || r["type"] == "lxc")
    {
        let (kind, cli) = if r["type"] == "qemu" {
            ("qemu", "vm")
        } else {
            ("lxc", "ct")
        };
        let vmid = r["vmid"].to_string();
        let node = r["node"].as_str().unwrap();
        for (sub, path) in [("status", "status/current"), ("config", "config")] {
            // The simulator's counters (uptime, I/O) move every second: pxagent's read must
            // equal the simulator's state just before or just after it.
            // Status field names come in pxagent's one case style; a config keeps PVE's.
            let path = format!("/nodes/{node}/{kind}/{vmid}/{path}");
            let host = |p: &str| match sub {
                "status" => snake_keys(sim_get(p, &[])),
                _ => sim_get(p, &[]),
            };
            let before = host(&path);
            let got = data(&[cli, sub, &vmid]);
            let after = host(&path);
            assert!(
                got == before || got == after,
                "{cli} {sub} {vmid}: {got}\nnot {before}\nnor {after}"
            );
        }
        let snaps: Vec<String> = data(&[cli, "snapshots", &vmid])
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect();
        let sim_snaps = sim_get(&format!("/nodes/{node}/{kind}/{vmid}/snapshot"), &[]);
        assert_eq!(
            snaps.len(),
            sim_snaps.as_array().unwrap().len(),
            "{cli} snapshots {vmid}"
        );
        assert!(snaps.contains(&"current".to_string()));
    }

    // Tasks: status and log of one the simulator holds.
    let tasks = sim_get("/nodes/pve1/tasks", &[]);
    let upid = tasks[0]["upid"]
        .as_str()
        .expect("the simulator has finished tasks")
        .to_string();
    let st = data(&["task", "status", &upid]);
    assert_eq!(
        st,
        sim_get(&format!("/nodes/pve1/tasks/{upid}/status"), &[])
    );
    let log = data(&["task", "log", &upid, "--limit", "100"]);
    assert!(log.as_array().is_some_and(|l| !l.is_empty()));
}

#[test]
fn a_guest_on_another_node_works_from_any_node() {
    let _g = lock();
    let r = on_bed(&["vm", "status", "101", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["data"]["name"], "db");
    assert_eq!(
        r.json()["data"],
        snake_keys(sim_get("/nodes/pve2/qemu/101/status/current", &[]))
    );
    // Human output too.
    let r = on_bed(&["vm", "status", "101"]);
    assert!(
        r.stdout.contains("name") && r.stdout.contains("db"),
        "{}",
        r.stdout
    );
}

#[test]
fn wrong_guest_kind_and_unknown_guest() {
    let _g = lock();
    let r = on_bed(&["vm", "status", "200"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is a container") && r.stderr.contains("pxagent ct status"),
        "{}",
        r.stderr
    );
    let r = on_bed(&["vm", "status", "4242", "-o", "json"]);
    assert_eq!(r.code, 1);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no guest with id 4242")
    );
}

#[test]
fn status_summarises_the_cluster() {
    let _g = lock();
    let r = on_bed(&["status", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let d = r.json()["data"].clone();
    assert_eq!(d["version"]["version"], sim_get("/version", &[])["version"]);
    assert_eq!(d["nodes"].as_array().unwrap().len(), 3);
    let guests = d["guests"].as_object().unwrap();
    let total: u64 = guests.values().map(|v| v.as_u64().unwrap()).sum();
    let sim_guests = sim_get("/cluster/resources", &["--type", "vm"])
        .as_array()
        .unwrap()
        .len() as u64;
    assert_eq!(total, sim_guests);
    let human = on_bed(&["status"]);
    assert!(human.stdout.starts_with("Proxmox VE "), "{}", human.stdout);
}

#[test]
fn sudoers_removed_preflight_names_missing_rules_and_ops_exit_9() {
    let _g = lock();
    let _swap = SudoersSwap::install(None);
    let r = on_bed(&["preflight"]);
    assert_eq!(r.code, 5, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAIL  sudo-rules"), "{}", r.stdout);
    assert!(
        r.stdout.contains("fix: install pxagent's rules"),
        "{}",
        r.stdout
    );
    let r = on_bed(&["vm", "list", "-o", "json"]);
    assert_eq!(r.code, 9, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "sudo_refused");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pxagent preflight")
    );
}

/// The op ids a skill document names (`[`vm.start`]` at the end of each op's line).
fn skill_ops(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("- `"))
        .filter_map(|l| {
            l.rsplit_once("[`")
                .map(|(_, id)| id.trim_end_matches("`]").to_string())
        })
        .collect()
}

/// Render the sudoers file of `profile` for `user` and install it until the swap drops.
fn install_render(user: &str, profile: &str) -> SudoersSwap {
    let text = on_bed(&["sudoers", "render", "--user", user, "--profile", profile]).stdout;
    SudoersSwap::install(Some(&text))
}

/// `skill --from-host` names exactly what the account's sudoers admits (an operator
/// render here: no phrase ops), where the plain skill names the whole profile.
#[test]
fn the_skill_from_the_host_names_what_its_sudoers_admits() {
    let _g = lock();
    let b = bed();
    let _swap = install_render(&b.user, "operator");
    let r = on_bed(&["skill", "--from-host"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("---\nname: pxagent\n"), "{}", r.stdout);
    assert!(r.stdout.contains("--from-host"), "{}", r.stdout);
    let mut named = skill_ops(&r.stdout);
    named.sort();
    let mut want: Vec<String> = pxagent::catalog::OPS
        .iter()
        .filter(|op| !op.is_step() && pxagent::catalog::Profile::Operator.allows_op(op))
        .filter(|op| !op.names_a_server())
        .map(|op| op.id.to_string())
        .collect();
    want.sort();
    assert_eq!(named, want);
    assert!(!named.iter().any(|id| id == "vm.destroy"));
    let full = skill_ops(&on_bed(&["skill"]).stdout);
    assert!(full.iter().any(|id| id == "vm.destroy"));
}

#[test]
fn missing_rules_are_named() {
    let _g = lock();
    let b = bed();
    // Operator rules installed, full profile expected: the confirm ops are missing.
    let _swap = install_render(&b.user, "operator");
    let r = on_bed(&["preflight", "--profile", "full", "-o", "json"]);
    assert_eq!(r.code, 5);
    let checks = r.json()["data"]["checks"].clone();
    let rules = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sudo-rules")
        .unwrap()
        .clone();
    assert_eq!(rules["status"], "fail");
    assert!(
        rules["detail"].as_str().unwrap().contains("vm.destroy"),
        "{rules}"
    );
    assert!(
        !rules["detail"].as_str().unwrap().contains("vm.start"),
        "{rules}"
    );
    assert_eq!(on_bed(&["preflight", "--profile", "operator"]).code, 0);
}

#[test]
fn a_wildcard_rule_fails_the_preflight_as_over_broad() {
    let _g = lock();
    let b = bed();
    let mut text = on_bed(&["sudoers", "render", "--user", &b.user]).stdout;
    text.push_str(&format!("{} ALL=(root) NOPASSWD: /usr/sbin/qm *\n", b.user));
    let _swap = SudoersSwap::install(Some(&text));
    let r = on_bed(&["preflight", "-o", "json"]);
    assert_eq!(r.code, 5);
    let checks = r.json()["data"]["checks"].clone();
    let broad = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "over-broad")
        .unwrap()
        .clone();
    assert_eq!(broad["status"], "fail");
    assert!(
        broad["detail"].as_str().unwrap().contains("/usr/sbin/qm *"),
        "{broad}"
    );
}

#[test]
fn io_logging_off_fails_the_preflight() {
    let _g = lock();
    let b = bed();
    let text: String = on_bed(&["sudoers", "render", "--user", &b.user])
        .stdout
        .lines()
        .filter(|l| !l.contains("log_input, log_output"))
        .map(|l| format!("{l}\n"))
        .collect();
    let _swap = SudoersSwap::install(Some(&text));
    let r = on_bed(&["preflight"]);
    assert_eq!(r.code, 5);
    assert!(r.stdout.contains("FAIL  audit"), "{}", r.stdout);
    assert!(r.stdout.contains("log_input"), "{}", r.stdout);
}

#[test]
fn a_hanging_command_hits_the_timeout_and_does_not_linger() {
    let _g = lock();
    clear_faults();
    // A command no other test (or benchmark) sends, so nothing else consumes the fault.
    fault(r#"{"match":"get /nodes/pve3/status","action":"hang","seconds":30,"times":1}"#);
    let r = on_bed(&["--timeout", "2", "node", "status", "pve3", "-o", "json"]);
    clear_faults();
    assert_eq!(r.code, 7, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "connection_failed");
    // The remote process is gone soon after (bounded wait, no timing assertion).
    let mut gone = false;
    for _ in 0..50 {
        let p = Proc::new("pgrep")
            .args(["-f", "pvesh get /nodes/pve3/status"])
            .output()
            .unwrap();
        if !p.status.success() {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(gone, "the hung remote command is still running");
}

#[test]
fn sshd_killed_mid_command_is_a_lost_connection() {
    let _g = lock();
    let b = bed();
    clear_faults();
    fault(r#"{"match":"get /nodes/pve2/status","action":"hang","seconds":20,"times":1}"#);
    let child = px()
        .args([
            "-H",
            &b.host,
            "-p",
            &b.port,
            "-u",
            &b.user,
            "-i",
            &b.identity,
            "--known-hosts",
            &b.known_hosts,
            "node",
            "status",
            "pve2",
            "-o",
            "json",
        ])
        .spawn();
    // Once the session runs the read, kill its sshd processes.
    let killed = crate::support::cut_sessions_when_running(
        "pvesh get /nodes/pve2/status",
        &b.user,
        std::time::Duration::ZERO,
    );
    let out = child.wait();
    clear_faults();
    assert!(killed, "never saw the remote command start");
    assert_eq!(out.code, 7, "{}", out.stdout);
}

#[test]
fn unknown_host_is_refused_then_accepted_with_accept_new() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let kh = dir.path().join("known_hosts");
    let khs = kh.to_str().unwrap();
    let r = on_bed(&["--known-hosts", khs, "version"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(r.stderr.contains("SHA256:"), "{}", r.stderr);
    let r = on_bed(&["--known-hosts", khs, "--accept-new", "version"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        std::fs::read_to_string(&kh)
            .unwrap()
            .contains("[127.0.0.1]:")
    );
    assert_eq!(on_bed(&["--known-hosts", khs, "version"]).code, 0);
}

#[test]
fn a_changed_host_key_is_always_refused() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other");
    let st = Proc::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(st.success());
    let b = bed();
    let pubkey = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let kh = dir.path().join("known_hosts");
    let mut parts = pubkey.split_whitespace();
    std::fs::write(
        &kh,
        format!(
            "[{}]:{} {} {}\n",
            b.host,
            b.port,
            parts.next().unwrap(),
            parts.next().unwrap()
        ),
    )
    .unwrap();
    for extra in [&[][..], &["--accept-new"][..]] {
        let mut args = vec!["--known-hosts", kh.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push("version");
        let r = on_bed(&args);
        assert_eq!(r.code, 6, "{extra:?}: {}", r.stderr);
        assert!(r.stderr.contains(kh.to_str().unwrap()), "{}", r.stderr);
    }
}

#[test]
fn a_key_readable_by_others_is_refused() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id");
    std::fs::copy(bed().identity, &key).unwrap();
    Proc::new("chmod").arg("0644").arg(&key).status().unwrap();
    let r = on_bed(&["-i", key.to_str().unwrap(), "version"]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(
        r.stderr.to_lowercase().contains("unprotected"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_ssh_config_alias_works_like_ssh() {
    let _g = lock();
    let b = bed();
    let home = Home::new();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(
        home.path().join(".ssh/config"),
        format!("Host sandbox\n    HostName {}\n    Port {}\n    User {}\n    IdentityFile {}\n    UserKnownHostsFile {}\n", b.host, b.port, b.user, b.identity, b.known_hosts),
    )
    .unwrap();
    let out = home
        .px()
        .args(["-H", "sandbox", "version", "-o", "json"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["host"], format!("{}@{}:{}", b.user, b.host, b.port));
}

#[test]
fn a_named_host_from_the_config_file() {
    let _g = lock();
    let b = bed();
    let dir = Home::new();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!("default_host: lab\nhosts:\n  lab:\n    address: {}\n    port: {}\n    user: {}\n    identity: {}\n    known_hosts: {}\n", b.host, b.port, b.user, b.identity, b.known_hosts),
    )
    .unwrap();
    let out = dir
        .px()
        .args(["--config", cfg.to_str().unwrap(), "version"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    // A malformed config names file and line.
    std::fs::write(&cfg, "hosts:\n  lab:\n    address: x\n    port: lots\n").unwrap();
    let r = on_bed(&["--config", cfg.to_str().unwrap(), "version"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains(&format!("{}:4:", cfg.display())),
        "{}",
        r.stderr
    );
}

#[test]
fn ssh_agent_authentication_works() {
    let _g = lock();
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::start(dir.path());
    agent.add(std::path::Path::new(&bed().identity));
    let b = bed();
    let out = px()
        .env("SSH_AUTH_SOCK", &agent.socket)
        .args([
            "-H",
            &b.host,
            "-p",
            &b.port,
            "-u",
            &b.user,
            "--known-hosts",
            &b.known_hosts,
            "version",
        ])
        .run();
    drop(agent);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn a_warning_on_success_is_shown_but_not_a_failure() {
    let _g = lock();
    clear_faults();
    fault(
        r#"{"match":"get /nodes/pve1/status","action":"warn","message":"storage 'nas' is not online","times":2}"#,
    );
    let r = on_bed(&["node", "status", "pve1", "-o", "json"]);
    let h = on_bed(&["node", "status", "pve1"]);
    clear_faults();
    assert_eq!(r.code, 0);
    assert_eq!(r.json()["warnings"][0], "storage 'nas' is not online");
    assert_eq!(h.code, 0);
    assert!(
        h.stderr.contains("warning: storage 'nas' is not online"),
        "{}",
        h.stderr
    );
}

#[test]
fn root_is_never_the_login() {
    let r = on_bed(&["-u", "root", "version"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("never logs in as root"));
}

#[test]
fn nothing_is_sent_for_invalid_input_or_dry_run() {
    let _g = lock();
    // The connection is never opened: a bogus port would make it fail with 7.
    for args in [
        &["-p", "1", "vm", "start", "99"][..],
        &["-p", "1", "vm", "destroy", "100", "--dry-run"][..],
    ] {
        let r = on_bed(args);
        assert_ne!(r.code, 7, "{args:?} tried to connect: {}", r.stderr);
    }
    // An op with nothing to check on the host asks before connecting.
    let r = on_bed(&["-p", "1", "storage", "remove", "local"]);
    assert_eq!(
        r.code, 4,
        "confirmation is checked before connecting: {}",
        r.stderr
    );
}

#[test]
fn logs_grow_with_v_and_never_touch_stdout() {
    let quiet = on_bed(&["vm", "list", "-o", "json"]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert_eq!(quiet.stderr, "", "nothing on stderr by default");

    let one = on_bed(&["-v", "vm", "list", "-o", "json"]);
    assert_eq!(
        one.json()["ok"],
        true,
        "logs never reach stdout: {}",
        one.stdout
    );
    assert!(one.stderr.contains("op=vm.list"), "{}", one.stderr);
    assert!(one.stderr.contains("exit=0"), "{}", one.stderr);
    assert!(!one.stderr.contains("remote command"), "{}", one.stderr);

    let two = on_bed(&["-vv", "vm", "list", "-o", "json"]);
    assert_eq!(two.json()["ok"], true, "{}", two.stdout);
    for needle in [
        "connecting",
        "fingerprint=SHA256:",
        "method=\"publickey\"",
        "sudo -n /usr/bin/pvesh get /cluster/resources",
        "exit_status=0",
    ] {
        assert!(
            two.stderr.contains(needle),
            "no {needle:?} in\n{}",
            two.stderr
        );
    }
    assert!(
        !two.stderr.contains("russh"),
        "russh's own log only at -vvv"
    );

    let three = on_bed(&["-vvv", "vm", "list", "-o", "json"]);
    assert_eq!(three.json()["ok"], true, "{}", three.stdout);
    assert!(
        three.stderr.contains("russh::client::kex"),
        "russh's key exchange at -vvv:\n{}",
        three.stderr
    );
    // The key itself never appears: not the private key file's content, not its base64 body.
    let key = std::fs::read_to_string(&bed().identity).unwrap();
    let body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!three.stderr.contains(line), "a key line was logged");
    }
    assert!(!body.is_empty());

    // PXAGENT_LOG wins over -v; a bad one is reported, not silently ignored.
    let filtered = px()
        .bed()
        .env("PXAGENT_LOG", "pxagent::ssh=debug")
        .args(["vm", "list", "-o", "json"])
        .run();
    assert!(
        filtered.stderr.contains("authenticated"),
        "{}",
        filtered.stderr
    );
    assert!(
        !filtered.stderr.contains("op=vm.list"),
        "{}",
        filtered.stderr
    );
    let bad = px()
        .bed()
        .env("PXAGENT_LOG", "pxagent=loud")
        .args(["vm", "list", "-o", "json"])
        .run();
    assert_eq!(bad.code, 0);
    assert!(bad.stderr.contains("not a log filter"), "{}", bad.stderr);
}

#[test]
fn node_version_reads_one_node() {
    // A read op that is nothing but one catalog row and the simulator's route.
    let r = on_bed(&["node", "version", "pve2", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.data()["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("9.")),
        "{}",
        r.stdout
    );
    let r = on_bed(&["node", "version", "pve2", "--dry-run", "-o", "json"]);
    assert_eq!(
        r.data()["command"],
        "sudo -n /usr/bin/pvesh get /nodes/pve2/version --output-format json"
    );
}
