//! HA on the beds, plain and gated: `ha add` is refused without its phrase and done with it,
//! an HA rule of each kind is added, listed and removed, PVE's refusals pass through, and
//! `ha remove` takes the guest out of the manager and out of its rules. Real sudo admits the
//! catalog's HA lines and refuses their neighbours (states, groups, migrate and relocate,
//! `set`, arming, node maintenance).
//!
//! Every test holds the host [`lock`] and leaves the simulator as it found it (`pve-sim reset`).

use serde_json::Value;

use crate::support::{Home, lock, px_on, sim, sim_reset};

/// The HA services `ha status` shows: `(sid, node)`.
fn services(home: &Home, gated_bed: bool) -> Vec<String> {
    let r = px_on(home, gated_bed, &["ha", "status", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "service")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

fn rules(home: &Home, gated_bed: bool) -> Vec<Value> {
    let r = px_on(home, gated_bed, &["ha", "rule", "list", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()["data"].as_array().unwrap().clone()
}

#[test]
fn ha_add_needs_its_phrase_and_rules_are_added_and_removed() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    for gated_bed in [false, true] {
        let before = services(&home, gated_bed);
        assert_eq!(before, ["service:vm:104"], "the bed's one HA guest");
        // Without the phrase: exit 4, the phrase named, nothing sent.
        let r = px_on(&home, gated_bed, &["ha", "add", "101", "-o", "json"]);
        assert_eq!(r.code, 4, "{}", r.stderr);
        let e = &r.json()["error"];
        assert_eq!(e["kind"], "confirmation_required", "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("yes ha add 101"),
            "{e}"
        );
        assert_eq!(services(&home, gated_bed), before);
        // With it: a VM and a container (pvesh finds which from the bare VMID).
        for (id, extra) in [
            ("101", &["--state", "stopped", "--max-restart", "2"][..]),
            ("200", &[][..]),
        ] {
            let phrase = format!("yes ha add {id}");
            let mut args = vec!["ha", "add", id];
            args.extend_from_slice(extra);
            args.extend(["--confirm", phrase.as_str()]);
            let r = px_on(&home, gated_bed, &args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        }
        let now = services(&home, gated_bed);
        for sid in ["service:vm:101", "service:ct:200", "service:vm:104"] {
            assert!(now.iter().any(|s| s == sid), "{sid} in {now:?}");
        }
        // Twice: PVE's refusal, passed through.
        let r = px_on(
            &home,
            gated_bed,
            &["ha", "add", "101", "--confirm", "yes ha add 101"],
        );
        assert_ne!(r.code, 0);
        assert!(
            r.stderr.contains("resource ID 'vm:101' already defined"),
            "{}",
            r.stderr
        );

        // A node-affinity rule and a resource-affinity rule.
        let r = px_on(
            &home,
            gated_bed,
            &[
                "ha",
                "rule",
                "node-affinity",
                "prefer-pve1",
                "--resources",
                "vm:101,ct:200",
                "--nodes",
                "pve1:2,pve2",
                "--strict",
                "--comment",
                "lab",
            ],
        );
        assert_eq!(r.code, 4, "{}", r.stderr);
        assert!(rules(&home, gated_bed).is_empty());
        let r = px_on(
            &home,
            gated_bed,
            &[
                "ha",
                "rule",
                "node-affinity",
                "prefer-pve1",
                "--resources",
                "vm:101,ct:200",
                "--nodes",
                "pve1:2,pve2",
                "--strict",
                "--comment",
                "lab",
                "--confirm",
                "yes ha rule prefer-pve1",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let r = px_on(
            &home,
            gated_bed,
            &[
                "ha",
                "rule",
                "resource-affinity",
                "apart",
                "--resources",
                "vm:101,vm:104",
                "--affinity",
                "negative",
                "--confirm",
                "yes ha rule apart",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let listed = rules(&home, gated_bed);
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert_eq!(listed[0]["rule"], "prefer-pve1");
        assert_eq!(listed[0]["type"], "node-affinity");
        assert_eq!(listed[0]["resources"], "ct:200,vm:101");
        assert_eq!(listed[0]["nodes"], "pve1:2,pve2");
        assert_eq!(listed[0]["strict"], 1);
        assert_eq!(listed[0]["comment"], "lab");
        assert_eq!(listed[1]["rule"], "apart");
        assert_eq!(listed[1]["affinity"], "negative");
        // PVE refuses what it cannot keep: a guest outside HA, an unknown node, a guest
        // already in a node-affinity rule, a resource-affinity rule of one guest.
        for (args, says) in [
            (
                &[
                    "resource-affinity",
                    "r1",
                    "--resources",
                    "vm:101,vm:102",
                    "--affinity",
                    "positive",
                ][..],
                "cannot use unmanaged resource(s) vm:102.",
            ),
            (
                &[
                    "node-affinity",
                    "r1",
                    "--resources",
                    "vm:104",
                    "--nodes",
                    "pve9",
                ],
                "cannot use non-existent node(s) pve9.",
            ),
            (
                &[
                    "node-affinity",
                    "r1",
                    "--resources",
                    "vm:101",
                    "--nodes",
                    "pve2",
                ],
                "resource 'vm:101' is already used in another node affinity rule",
            ),
            (
                &[
                    "resource-affinity",
                    "r1",
                    "--resources",
                    "vm:104",
                    "--affinity",
                    "positive",
                ],
                "rule is ineffective as there are less than two resources",
            ),
        ] {
            let mut a = vec!["ha", "rule"];
            a.extend_from_slice(args);
            a.extend(["--confirm", "yes ha rule r1"]);
            let r = px_on(&home, gated_bed, &a);
            assert_ne!(r.code, 0, "{a:?}");
            assert!(r.stderr.contains(says), "{a:?}: {}", r.stderr);
        }
        assert_eq!(rules(&home, gated_bed).len(), 2);
        // Client-side refusals: exit 2, nothing sent.
        for args in [
            &["ha", "add", "102", "--state", "disabled"][..],
            &["ha", "add", "102", "--max-restart", "100"],
            &[
                "ha",
                "rule",
                "node-affinity",
                "r2",
                "--resources",
                "vm:101,vm:101",
                "--nodes",
                "pve1",
            ],
            &[
                "ha",
                "rule",
                "node-affinity",
                "r2",
                "--resources",
                "101",
                "--nodes",
                "pve1",
            ],
            &[
                "ha",
                "rule",
                "node-affinity",
                "r2",
                "--resources",
                "vm:101",
                "--nodes",
                "pve1,pve1:3",
            ],
            &[
                "ha",
                "rule",
                "node-affinity",
                "2r",
                "--resources",
                "vm:101",
                "--nodes",
                "pve1",
            ],
            &[
                "ha",
                "rule",
                "resource-affinity",
                "r2",
                "--resources",
                "vm:101,vm:104",
                "--affinity",
                "both",
            ],
        ] {
            let r = px_on(&home, gated_bed, args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        }
        // Removing: the rule by its phrase; then the guests, which leave their rules (PVE's
        // purge deletes a rule only once no resource is left in it).
        let r = px_on(&home, gated_bed, &["ha", "rule", "remove", "prefer-pve1"]);
        assert_eq!(r.code, 4, "{}", r.stderr);
        let r = px_on(
            &home,
            gated_bed,
            &[
                "ha",
                "rule",
                "remove",
                "prefer-pve1",
                "--confirm",
                "yes remove ha rule prefer-pve1",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(rules(&home, gated_bed).len(), 1);
        let r = px_on(&home, gated_bed, &["ha", "remove", "101"]);
        assert_eq!(r.code, 4, "{}", r.stderr);
        for id in ["101", "200"] {
            let phrase = format!("yes ha remove {id}");
            let r = px_on(
                &home,
                gated_bed,
                &["ha", "remove", id, "--confirm", &phrase],
            );
            assert_eq!(r.code, 0, "{}", r.stderr);
        }
        let left = rules(&home, gated_bed);
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0]["rule"], "apart");
        assert_eq!(left[0]["resources"], "vm:104");
        let r = px_on(
            &home,
            gated_bed,
            &[
                "ha",
                "rule",
                "remove",
                "apart",
                "--confirm",
                "yes remove ha rule apart",
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(rules(&home, gated_bed).is_empty());
        assert_eq!(services(&home, gated_bed), before);
        let r = px_on(
            &home,
            gated_bed,
            &["ha", "remove", "101", "--confirm", "yes ha remove 101"],
        );
        assert_ne!(r.code, 0);
        assert!(
            r.stderr
                .contains("cannot delete service 'vm:101', not HA managed!"),
            "{}",
            r.stderr
        );
        sim(&["reset"]);
    }
}

#[test]
fn sudo_admits_the_ha_lines_and_refuses_their_neighbours() {
    use crate::sudo_rules::{Installed, allowed, render, w};
    let _g = lock();
    let _installed = Installed::new(&render("full", &[]));
    const PVESH: &str = "/usr/bin/pvesh";
    let line = |verb: &str, path: &str, rest: &[&str]| {
        let mut v = w(&[PVESH, verb, path]);
        v.extend(w(rest));
        v.extend(w(&["--output-format", "json"]));
        v
    };
    let node_rule = |rest: &[&str]| {
        let mut r = vec![
            "--type",
            "node-affinity",
            "--rule",
            "r1",
            "--resources",
            "vm:100,ct:200",
            "--nodes",
            "pve1:2,pve2",
        ];
        r.extend_from_slice(rest);
        line("create", "/cluster/ha/rules", &r)
    };
    for ok in [
        line("create", "/cluster/ha/resources", &["--sid", "100"]),
        line(
            "create",
            "/cluster/ha/resources",
            &["--sid", "100", "--state", "stopped", "--max_restart", "3"],
        ),
        line("delete", "/cluster/ha/resources/100", &[]),
        line("get", "/cluster/ha/rules", &[]),
        node_rule(&[]),
        node_rule(&["--strict", "1", "--comment", "lab"]),
        line(
            "create",
            "/cluster/ha/rules",
            &[
                "--type",
                "resource-affinity",
                "--rule",
                "apart",
                "--resources",
                "vm:100,vm:101",
                "--affinity",
                "negative",
            ],
        ),
        line("delete", "/cluster/ha/rules/apart", &[]),
    ] {
        assert!(allowed(&ok), "{ok:?}");
    }
    let maintenance = w(&[
        "/usr/sbin/ha-manager",
        "crm-command",
        "node-maintenance",
        "enable",
        "pve1",
    ]);
    for bad in [
        // States that stop HA's care, groups, the options pxagent does not offer.
        line(
            "create",
            "/cluster/ha/resources",
            &["--sid", "100", "--state", "disabled"],
        ),
        line(
            "create",
            "/cluster/ha/resources",
            &["--sid", "100", "--state", "ignored"],
        ),
        line(
            "create",
            "/cluster/ha/resources",
            &["--sid", "100", "--group", "g1"],
        ),
        line(
            "create",
            "/cluster/ha/resources",
            &["--sid", "100", "--max_relocate", "9"],
        ),
        line(
            "create",
            "/cluster/ha/resources",
            &["--sid", "100", "--failback", "0"],
        ),
        line("create", "/cluster/ha/resources", &["--sid", "vm:100"]),
        line("delete", "/cluster/ha/resources/100", &["--purge", "0"]),
        // Requests and changes in place.
        line("set", "/cluster/ha/resources/100", &["--state", "stopped"]),
        line(
            "create",
            "/cluster/ha/resources/100/migrate",
            &["--node", "pve2"],
        ),
        line(
            "create",
            "/cluster/ha/resources/100/relocate",
            &["--node", "pve2"],
        ),
        line("set", "/cluster/ha/rules/r1", &["--disable", "1"]),
        line(
            "create",
            "/cluster/ha/groups",
            &["--group", "g1", "--nodes", "pve1"],
        ),
        // Arming and disarming HA, node maintenance.
        line(
            "create",
            "/cluster/ha/status/disarm-ha",
            &["--resource-mode", "ignore"],
        ),
        line("create", "/cluster/ha/status/arm-ha", &[]),
        maintenance,
        w(&[
            "/usr/sbin/ha-manager",
            "set",
            "vm:100",
            "--state",
            "started",
        ]),
        // Options after a line's fixed end, a disabled rule, one type's option on the other.
        node_rule(&["--disable", "1"]),
        {
            let mut v = node_rule(&[]);
            v.extend(w(&["--disable", "1"]));
            v
        },
        line(
            "create",
            "/cluster/ha/rules",
            &[
                "--type",
                "node-affinity",
                "--rule",
                "r1",
                "--resources",
                "vm:100",
                "--nodes",
                "pve1",
                "--affinity",
                "negative",
            ],
        ),
        line(
            "create",
            "/cluster/ha/rules",
            &[
                "--type",
                "resource-affinity",
                "--rule",
                "r1",
                "--resources",
                "vm:100,vm:101",
                "--affinity",
                "negative",
                "--strict",
                "1",
            ],
        ),
    ] {
        assert!(!allowed(&bad), "{bad:?}");
    }
}
