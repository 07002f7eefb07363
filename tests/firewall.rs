//! Firewalls on the beds, plain and gated: a guest's rule and an IP set entry added and
//! removed, its firewall switched on and off; a node or cluster rule needs its phrase, and one
//! that would drop the SSH connection pxagent comes over is refused by the client and, for a
//! line sent past the client, by the gate — unless a policy says `allow_ssh_lockout: true`.
//! Real sudo admits the catalog's firewall lines and refuses their neighbours.
//!
//! Every test holds the host [`lock`] and leaves the simulator as it found it (`pve-sim reset`).

use std::process::Command;

use serde_json::Value;

use crate::support::{Home, gated, lock, px_on, sim, sim_reset};

/// What PVE's API answers on the host itself (root's pvesh, the simulator on the bed).
fn pvesh_get(path: &str) -> Value {
    let out = Command::new("/usr/bin/pvesh")
        .args(["get", path, "--output-format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_guest_rule_and_an_ipset_entry_are_added_and_removed() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    for (gated_bed, area, id, path) in [
        (false, "vm", "100", "/nodes/pve1/qemu/100"),
        (true, "ct", "200", "/nodes/pve1/lxc/200"),
    ] {
        let ok = |args: &[&str]| {
            let r = px_on(&home, gated_bed, args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
            r
        };
        ok(&[
            area,
            "firewall",
            "add",
            id,
            "--direction",
            "in",
            "--action",
            "ACCEPT",
            "--proto",
            "tcp",
            "--dport",
            "443",
            "--source",
            "+admins",
            "--comment",
            "admins to https",
        ]);
        ok(&[
            area,
            "firewall",
            "add",
            id,
            "--direction",
            "in",
            "--action",
            "DROP",
            "--source",
            "198.51.100.0/24",
        ]);
        let rules = ok(&[area, "firewall", "rules", id, "-o", "json"]).data();
        let rules = rules.as_array().unwrap();
        assert_eq!(rules.len(), 2, "{rules:?}");
        // The newest first, enabled, as PVE numbers them.
        assert_eq!(rules[0]["action"], "DROP");
        assert_eq!(rules[0]["pos"], 0);
        assert_eq!(rules[0]["enable"], 1);
        assert_eq!(rules[1]["source"], "+admins");
        assert_eq!(rules[1]["dport"], "443");
        ok(&[area, "firewall", "remove", id, "0"]);
        let rules = ok(&[area, "firewall", "rules", id, "-o", "json"]).data();
        assert_eq!(rules.as_array().unwrap().len(), 1);
        assert_eq!(rules[0]["action"], "ACCEPT");

        ok(&[area, "firewall", "enable", id]);
        assert_eq!(pvesh_get(&format!("{path}/firewall/options"))["enable"], 1);
        ok(&[area, "firewall", "disable", id]);
        assert_eq!(pvesh_get(&format!("{path}/firewall/options"))["enable"], 0);

        ok(&[
            area,
            "firewall",
            "ipset",
            "create",
            id,
            "web",
            "--comment",
            "web clients",
        ]);
        ok(&[area, "firewall", "ipset", "add", id, "web", "192.0.2.7"]);
        ok(&[
            area,
            "firewall",
            "ipset",
            "add",
            id,
            "web",
            "2001:db8::7",
            "--comment",
            "v6",
        ]);
        let set = ok(&[area, "firewall", "ipset", "list", id, "web", "-o", "json"]).data();
        let cidrs: Vec<&str> = set
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["cidr"].as_str().unwrap())
            .collect();
        assert_eq!(cidrs, ["2001:db8::7", "192.0.2.7"]);
        ok(&[area, "firewall", "ipset", "remove", id, "web", "192.0.2.7"]);
        let set = ok(&[area, "firewall", "ipset", "list", id, "web", "-o", "json"]).data();
        assert_eq!(set.as_array().unwrap().len(), 1, "{set}");
        // PVE's own refusals come back as they are: a set that is not there, an entry twice.
        let r = px_on(
            &home,
            gated_bed,
            &[area, "firewall", "ipset", "add", id, "nope", "192.0.2.8"],
        );
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains("no such IPSet 'nope'"), "{}", r.stderr);
        let r = px_on(
            &home,
            gated_bed,
            &[area, "firewall", "ipset", "add", id, "web", "2001:db8::7"],
        );
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    }
    // What the client refuses before anything is sent (exit 2): a network written with its
    // host bits, a service name, a range backwards, a network as an IP set entry, a macro.
    for bad in [
        &[
            "vm",
            "firewall",
            "add",
            "100",
            "--direction",
            "in",
            "--action",
            "DROP",
            "--source",
            "192.0.2.7/24",
        ][..],
        &[
            "vm",
            "firewall",
            "add",
            "100",
            "--direction",
            "in",
            "--action",
            "DROP",
            "--proto",
            "tcp",
            "--dport",
            "ssh",
        ],
        &[
            "vm",
            "firewall",
            "add",
            "100",
            "--direction",
            "in",
            "--action",
            "DROP",
            "--proto",
            "tcp",
            "--dport",
            "90:80",
        ],
        &[
            "vm",
            "firewall",
            "add",
            "100",
            "--direction",
            "in",
            "--action",
            "DROP",
            "--source",
            "10.0.0.1,fd00::1",
        ],
        &[
            "vm",
            "firewall",
            "add",
            "100",
            "--direction",
            "in",
            "--action",
            "SSH(ACCEPT)",
        ],
        &[
            "vm",
            "firewall",
            "add",
            "100",
            "--direction",
            "group",
            "--action",
            "mygroup",
        ],
        &[
            "vm",
            "firewall",
            "ipset",
            "add",
            "100",
            "admins",
            "10.0.0.0/24",
        ],
    ] {
        let r = px_on(&home, false, bad);
        assert_eq!(r.code, 2, "{bad:?}: {}", r.stderr);
    }
    // Nothing of those was sent: VM 100 keeps its one rule.
    assert_eq!(
        pvesh_get("/nodes/pve1/qemu/100/firewall/rules")
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_node_rule_that_would_drop_pxagents_own_ssh_is_refused() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    let node_rules = || {
        pvesh_get("/nodes/pve1/firewall/rules")
            .as_array()
            .unwrap()
            .len()
    };
    let phrase = "yes firewall on pve1";
    for gated_bed in [false, true] {
        let port = if gated_bed { "2223" } else { "2222" };
        // Every inbound DROP or REJECT that may match TCP to this port from 127.0.0.1.
        for rule in [
            &["--direction", "in", "--action", "DROP"][..],
            &["--direction", "in", "--action", "REJECT", "--proto", "tcp"],
            &[
                "--direction",
                "in",
                "--action",
                "DROP",
                "--proto",
                "tcp",
                "--dport",
                port,
            ],
            &[
                "--direction",
                "in",
                "--action",
                "DROP",
                "--proto",
                "tcp",
                "--dport",
                "1:65535",
            ],
            &[
                "--direction",
                "in",
                "--action",
                "DROP",
                "--source",
                "127.0.0.0/8",
            ],
            &[
                "--direction",
                "in",
                "--action",
                "DROP",
                "--dest",
                "127.0.0.1",
            ],
        ] {
            let mut args = vec!["node", "firewall", "add", "pve1"];
            args.extend_from_slice(rule);
            args.extend(["--confirm", phrase, "-o", "json"]);
            let r = px_on(&home, gated_bed, &args);
            assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
            let e = &r.json()["error"];
            assert_eq!(e["kind"], "policy_refused", "{e}");
            let m = e["message"].as_str().unwrap();
            assert!(
                m.contains("matches the SSH connection pxagent uses")
                    && m.contains(&format!("port {port}"))
                    && m.contains("allow_ssh_lockout"),
                "{m}"
            );
        }
        assert_eq!(node_rules(), 0, "nothing was sent");
        // Rules that spare it pass, with the phrase; without it, exit 4 and nothing sent.
        let spare = [
            "node",
            "firewall",
            "add",
            "pve1",
            "--direction",
            "in",
            "--action",
            "DROP",
            "--proto",
            "tcp",
            "--dport",
            "80,443",
        ];
        let r = px_on(&home, gated_bed, &spare);
        assert_eq!(r.code, 4, "{}", r.stderr);
        assert_eq!(node_rules(), 0);
        for rule in [
            &spare[4..],
            &[
                "--direction",
                "in",
                "--action",
                "DROP",
                "--source",
                "198.51.100.0/24",
            ][..],
            &["--direction", "in", "--action", "DROP", "--proto", "udp"],
            &["--direction", "out", "--action", "REJECT"],
            &[
                "--direction",
                "in",
                "--action",
                "ACCEPT",
                "--proto",
                "tcp",
                "--dport",
                port,
            ],
        ] {
            let mut args = vec!["node", "firewall", "add", "pve1"];
            args.extend_from_slice(rule);
            args.extend(["--confirm", phrase]);
            let r = px_on(&home, gated_bed, &args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        }
        assert_eq!(node_rules(), 5);
        let r = px_on(
            &home,
            gated_bed,
            &[
                "node",
                "firewall",
                "remove",
                "pve1",
                "0",
                "--confirm",
                "yes remove rule 0 on pve1",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(node_rules(), 4);
        // The cluster's rules: the same check.
        let r = px_on(
            &home,
            gated_bed,
            &[
                "cluster",
                "firewall",
                "add",
                "--direction",
                "in",
                "--action",
                "REJECT",
                "--proto",
                "tcp",
                "--dport",
                port,
                "--confirm",
                "yes firewall on the cluster",
            ],
        );
        assert_eq!(r.code, 3, "{}", r.stderr);
        sim(&["reset"]);
    }
    // A client policy that allows it lets the client send it (the plain bed has no gate).
    let policy = home.write("lockout.yaml", b"allow_ssh_lockout: true\n");
    let r = home
        .px()
        .bed()
        .args([
            "--policy",
            &policy,
            "node",
            "firewall",
            "add",
            "pve1",
            "--direction",
            "in",
            "--action",
            "DROP",
            "--confirm",
            phrase,
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(node_rules(), 1);
}

/// The gate judges the line itself, whatever the client did: a lockout rule sent straight
/// to the gated account is refused with `policy_refused`, and admitted once the host policy
/// says `allow_ssh_lockout: true`.
#[test]
fn the_gate_refuses_a_lockout_rule_sent_past_the_client() {
    let _g = lock();
    let _r = sim_reset();
    let g = gated();
    let line = |op: &pxagent::catalog::Op, pairs: &[(&'static str, &str)]| {
        let v: std::collections::BTreeMap<&'static str, String> =
            pairs.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let mut words = vec!["sudo".to_string(), "-n".to_string()];
        words.extend(op.argv(&v));
        pxagent::base::text::quote_argv(&words)
    };
    let lockout = line(
        &pxagent::catalog::ops::NODE_FIREWALL_ADD,
        &[
            ("node", "pve1"),
            ("direction", "in"),
            ("action", "DROP"),
            ("proto", "tcp"),
            ("dport", "2223"),
        ],
    );
    let cluster = line(
        &pxagent::catalog::ops::CLUSTER_FIREWALL_ADD,
        &[("direction", "in"), ("action", "REJECT")],
    );
    {
        let _p = g.policy("ops: {}\n");
        for l in [&lockout, &cluster] {
            let (code, _, err) = g.ssh(Some(l));
            assert_eq!(code, 125, "{err}");
            assert!(
                err.contains("policy_refused") && err.contains("port 2223"),
                "{err}"
            );
        }
        assert_eq!(
            pvesh_get("/nodes/pve1/firewall/rules"),
            Value::Array(vec![])
        );
        // Another port is no lockout.
        let other = line(
            &pxagent::catalog::ops::NODE_FIREWALL_ADD,
            &[
                ("node", "pve1"),
                ("direction", "in"),
                ("action", "DROP"),
                ("proto", "tcp"),
                ("dport", "2222"),
            ],
        );
        let (code, _, err) = g.ssh(Some(&other));
        assert_eq!(code, 0, "{err}");
    }
    let _p = g.policy("allow_ssh_lockout: true\nops: {}\n");
    let (code, _, err) = g.ssh(Some(&lockout));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        pvesh_get("/nodes/pve1/firewall/rules")
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// The firewall lines under real sudo: the catalog's admitted; refused — a macro, an
/// interface, a log level, a security group, a position, a disabled rule's shape, options
/// after a line's fixed end, a guest's firewall options other than `enable`, a node's or the
/// cluster's options, cluster IP sets, aliases and groups, a network as an IP set's entry.
#[test]
fn sudo_admits_the_firewall_lines_and_refuses_their_neighbours() {
    use crate::sudo_rules::{Installed, allowed, render, w};
    let _g = lock();
    let _installed = Installed::new(&render("full", &[]));
    const PVESH: &str = "/usr/bin/pvesh";
    let json = ["--output-format", "json"];
    let line = |path: &str, verb: &str, rest: &[&str]| {
        let mut v = w(&[PVESH, verb, path]);
        v.extend(w(rest));
        v.extend(w(&json));
        v
    };
    let rule = |path: &str, extra: &[&str]| {
        let mut r = vec!["--type", "in", "--action", "DROP", "--enable", "1"];
        r.extend_from_slice(extra);
        line(path, "create", &r)
    };
    let guest = "/nodes/pve1/qemu/100/firewall";
    for ok in [
        rule(&format!("{guest}/rules"), &[]),
        rule(
            &format!("{guest}/rules"),
            &[
                "--proto",
                "tcp",
                "--dport",
                "22,80:90",
                "--source",
                "+admins",
                "--dest",
                "10.0.0.0/8",
                "--comment",
                "lab",
            ],
        ),
        rule(
            "/nodes/pve1/firewall/rules",
            &["--proto", "udp", "--sport", "53"],
        ),
        rule(
            "/cluster/firewall/rules",
            &["--source", "192.0.2.0/24,192.0.2.9"],
        ),
        line(&format!("{guest}/rules/3"), "delete", &[]),
        line("/nodes/pve1/firewall/rules/0", "delete", &[]),
        line("/cluster/firewall/rules/12", "delete", &[]),
        line(&format!("{guest}/options"), "set", &["--enable", "1"]),
        line(
            "/nodes/pve1/lxc/200/firewall/options",
            "set",
            &["--enable", "0"],
        ),
        line(&format!("{guest}/ipset"), "create", &["--name", "web"]),
        line(
            &format!("{guest}/ipset/web"),
            "create",
            &["--cidr", "192.0.2.7"],
        ),
        line(&format!("{guest}/ipset/web/2001:db8::7"), "delete", &[]),
        line(&format!("{guest}/ipset/web"), "get", &[]),
        line("/cluster/firewall/rules", "get", &[]),
    ] {
        assert!(allowed(&ok), "{ok:?}");
    }
    for bad in [
        rule(&format!("{guest}/rules"), &["--macro", "SSH"]),
        rule(&format!("{guest}/rules"), &["--iface", "net0"]),
        rule("/nodes/pve1/firewall/rules", &["--log", "info"]),
        rule("/nodes/pve1/firewall/rules", &["--pos", "5"]),
        rule(
            "/nodes/pve1/firewall/rules",
            &["--icmp-type", "echo-request"],
        ),
        line(
            "/cluster/firewall/rules",
            "create",
            &["--type", "group", "--action", "mygroup", "--enable", "1"],
        ),
        line(
            "/cluster/firewall/rules",
            "create",
            &["--type", "in", "--action", "DROP", "--enable", "0"],
        ),
        line(
            "/cluster/firewall/rules",
            "create",
            &["--type", "forward", "--action", "DROP", "--enable", "1"],
        ),
        rule("/nodes/pve1/firewall/rules", &["--dport", "ssh"]),
        rule(
            "/nodes/pve1/firewall/rules",
            &["--source", "1.2.3.4-1.2.3.9"],
        ),
        rule("/nodes/pve1/firewall/rules", &["--source", "myalias"]),
        // Options after the fixed end of a line.
        {
            let mut v = rule("/nodes/pve1/firewall/rules", &[]);
            v.extend(w(&["--macro", "SSH"]));
            v
        },
        // A rule changed in place, options other than `enable`, the hosts' own switches.
        line(
            "/nodes/pve1/firewall/rules/0",
            "set",
            &["--action", "ACCEPT"],
        ),
        line(
            &format!("{guest}/options"),
            "set",
            &["--policy_in", "ACCEPT"],
        ),
        line(
            &format!("{guest}/options"),
            "set",
            &["--enable", "1", "--dhcp", "1"],
        ),
        line("/nodes/pve1/firewall/options", "set", &["--enable", "1"]),
        line("/cluster/firewall/options", "set", &["--enable", "1"]),
        line("/cluster/firewall/options", "set", &["--policy_in", "DROP"]),
        // The cluster's IP sets, aliases and security groups.
        line(
            "/cluster/firewall/ipset/admins",
            "create",
            &["--cidr", "0.0.0.0/0"],
        ),
        line(
            "/cluster/firewall/aliases",
            "create",
            &["--name", "x", "--cidr", "0.0.0.0/0"],
        ),
        line("/cluster/firewall/groups", "create", &["--group", "g"]),
        // A network, or more than an address, as an IP set's entry; an entry's nomatch.
        line(
            &format!("{guest}/ipset/web"),
            "create",
            &["--cidr", "10.0.0.0/8"],
        ),
        line(
            &format!("{guest}/ipset/web"),
            "create",
            &["--cidr", "192.0.2.7", "--nomatch", "1"],
        ),
        line(&format!("{guest}/ipset/web/10.0.0.0/8"), "delete", &[]),
        line(&format!("{guest}/ipset/web"), "delete", &[]),
    ] {
        assert!(!allowed(&bad), "{bad:?}");
    }
}
