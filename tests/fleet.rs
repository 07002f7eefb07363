//! Fleets on the bed: `--hosts a,b,dead` where `a` and `b` are two config names for the bed and
//! `dead` a closed port — both good results and the dead host's error, labelled with their hosts,
//! exit non-zero; groups and `--all-hosts` for reads, never for changes; a batch on several hosts
//! labels each line with its host.

use serde_json::Value;

use crate::support::*;

/// A home whose config names the bed twice (`a`, `b`) and a closed port (`dead`), with the
/// group `edge` of all three.
fn fleet_home() -> (Home, String) {
    let b = bed();
    let home = Home::new();
    let cfg = home.path().join("fleet.yaml");
    let entry = |addr: &str, port: &str| {
        format!(
            "{{address: '{addr}', port: {port}, user: {}, identity: '{}', known_hosts: '{}'}}",
            b.user, b.identity, b.known_hosts
        )
    };
    // Port 1 on loopback: nothing listens there (the bed's network is loopback only).
    std::fs::write(
        &cfg,
        format!(
            "hosts:\n  a: {}\n  b: {}\n  dead: {}\ngroups:\n  edge: [a, b, dead]\n",
            entry(&b.host, &b.port),
            entry(&b.host, &b.port),
            entry(&b.host, "1"),
        ),
    )
    .unwrap();
    let path = cfg.to_str().unwrap().to_string();
    (home, path)
}

#[test]
fn status_on_two_good_hosts_and_a_dead_one() {
    let _g = lock();
    clear_faults();
    let (home, cfg) = fleet_home();
    let r = home
        .px()
        .args([
            "--config", &cfg, "--hosts", "a,b,dead", "status", "-o", "json",
        ])
        .run();
    assert_ne!(r.code, 0, "one host failed");
    assert_eq!(r.code, 7, "the only failure is a connection failure");
    let doc = r.json();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["op"], "status");
    let hosts = doc["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3);
    for (h, name) in hosts[..2].iter().zip(["a", "b"]) {
        assert_eq!(h["host"], name);
        assert_eq!(h["ok"], true, "{h}");
        assert!(h["data"]["version"]["version"].is_string(), "{h}");
        assert!(!h["data"]["nodes"].as_array().unwrap().is_empty(), "{h}");
    }
    assert_eq!(hosts[2]["host"], "dead");
    assert_eq!(hosts[2]["ok"], false);
    assert_eq!(hosts[2]["error"]["kind"], "connection_failed");
    // People get one block per host and a summary.
    let r = home
        .px()
        .args(["--config", &cfg, "--hosts", "@edge", "status"])
        .run();
    assert_eq!(r.code, 7);
    assert!(r.stdout.contains("== a ("), "{}", r.stdout);
    assert!(r.stdout.contains("== dead ("), "{}", r.stdout);
    assert!(
        r.stdout
            .trim_end()
            .ends_with("2 of 3 hosts ok; failed: dead (connection_failed)"),
        "{}",
        r.stdout
    );
    // Every host's run is audited on its own.
    let audit = std::fs::read_to_string(home.audit_log()).unwrap();
    assert_eq!(audit.lines().count(), 6, "{audit}");
}

#[test]
fn reads_run_on_a_group_and_changes_only_on_hosts_listed_by_name() {
    let _g = lock();
    clear_faults();
    let (home, cfg) = fleet_home();
    let r = home
        .px()
        .args(["--config", &cfg, "--all-hosts", "vm", "list", "-o", "json"])
        .run();
    assert_eq!(r.code, 7);
    let doc = r.json();
    assert_eq!(doc["hosts"][0]["ok"], true);
    assert!(doc["hosts"][0]["data"].as_array().unwrap().len() >= 3);
    // A change through a group is refused before anything is sent.
    let at = sudo_log_len();
    let r = home
        .px()
        .args([
            "--config", &cfg, "--hosts", "@edge", "vm", "start", "100", "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("listed by name")
    );
    // One phrase never confirms several hosts.
    let r = home
        .px()
        .args([
            "--config",
            &cfg,
            "--hosts",
            "a,b",
            "vm",
            "stop",
            "100",
            "--confirm",
            "yes stop 100",
        ])
        .run();
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert_not_sent(at, &["status/start", "status/stop", "qm start", "qm stop"]);
    // Without a terminal each listed host refuses on its own: confirmation per host.
    let r = home
        .px()
        .args([
            "--config", &cfg, "--hosts", "a,b", "vm", "stop", "100", "-o", "json",
        ])
        .run();
    assert_eq!(r.code, 4, "{}", r.stdout);
    let doc = r.json();
    for h in doc["hosts"].as_array().unwrap() {
        assert_eq!(h["error"]["phrase"], "yes stop 100", "{h}");
    }
    assert_not_sent(at, &["status/stop", "qm stop"]);
}

#[test]
fn a_batch_on_several_hosts_labels_every_line() {
    let _g = lock();
    clear_faults();
    let (home, cfg) = fleet_home();
    let r = home
        .px()
        .args(["--config", &cfg, "--hosts", "a,b,dead", "batch"])
        .stdin("{\"id\": 1, \"op\": \"pve.version\"}\n{\"id\": 2, \"op\": \"vm.status\", \"args\": {\"vmid\": 100}}\n")
        .run();
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6, "{}", r.stdout);
    for host in ["a", "b"] {
        let mine: Vec<&Value> = lines.iter().filter(|l| l["host"] == host).collect();
        assert_eq!(mine.len(), 2, "{}", r.stdout);
        assert_eq!(mine[0]["id"], 1, "input order per host");
        assert!(mine.iter().all(|l| l["ok"] == true), "{}", r.stdout);
    }
    let dead: Vec<&Value> = lines.iter().filter(|l| l["host"] == "dead").collect();
    assert!(
        dead.iter()
            .all(|l| l["error"]["kind"] == "connection_failed")
    );
    assert_eq!(r.code, 7);
}

/// `--hosts @inventory.yml:GROUP`: an Ansible inventory with nested groups (`pve` holds `plain`
/// and `more`), host and group vars mapped to pxagent's settings; the fleet reaches exactly the
/// hosts of the group (`a`, `b`: the bed), never `c` of another group (a closed port).
#[test]
fn a_fleet_from_an_ansible_inventory_reaches_exactly_its_group() {
    let _g = lock();
    clear_faults();
    let b = bed();
    let home = Home::new();
    let inv = home.path().join("inventory.yml");
    std::fs::write(
        &inv,
        format!(
            "all:
  vars:
    ansible_user: {user}
    ansible_ssh_private_key_file: '{key}'
  children:
    pve:
      vars:
        ansible_port: {port}
      children:
        plain:
          hosts:
            a:
              ansible_host: {host}
        more:
          hosts:
            b:
              ansible_host: {host}
    elsewhere:
      hosts:
        c:
          ansible_host: {host}
          ansible_port: 1
",
            user = b.user,
            key = b.identity,
            port = b.port,
            host = b.host
        ),
    )
    .unwrap();
    let sel = format!("@{}:pve", inv.display());
    let r = home
        .px()
        .args([
            "--known-hosts",
            &b.known_hosts,
            "--hosts",
            &sel,
            "status",
            "-o",
            "json",
        ])
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let doc = r.json();
    let hosts: Vec<&str> = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["a", "b"]);
    assert!(
        doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["ok"] == true)
    );
    // A group the inventory lacks is named as such; nothing is contacted.
    let r = home
        .px()
        .args(["--hosts", &format!("@{}:west", inv.display()), "status"])
        .run();
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no group 'west'"), "{}", r.stderr);
}
