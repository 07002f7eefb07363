//! Backup jobs on the beds, plain and gated: a job by VMIDs and one by pool created, listed,
//! shown and removed (phrase); PVE's refusals pass through; what pxagent does not send is
//! refused before anything is sent. Real sudo admits the catalog's job lines and refuses
//! their neighbours (`--script`, `--dumpdir`, `--tmpdir`, `--remove 0`, `--all`, changes in
//! place, options after a line's end).
//!
//! Every test holds the host [`lock`] and leaves the simulator as it found it (`pve-sim reset`).

use serde_json::Value;

use crate::support::{Home, lock, px_on, sim_reset};

fn jobs(home: &Home, gated_bed: bool) -> Vec<Value> {
    let r = px_on(home, gated_bed, &["backup", "job", "list", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.json()["data"].as_array().unwrap().clone()
}

#[test]
fn a_backup_job_is_created_listed_shown_and_removed() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    for gated_bed in [false, true] {
        assert!(jobs(&home, gated_bed).is_empty());
        let ok = |args: &[&str]| {
            let r = px_on(&home, gated_bed, args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        };
        ok(&[
            "backup",
            "job",
            "create",
            "nightly",
            "--schedule",
            "mon..fri 21:30",
            "--vmids",
            "100,200",
            "--storage",
            "local",
            "--mode",
            "snapshot",
            "--prune-backups",
            "keep-last=3,keep-daily=7",
            "--notes-template",
            "{{guestname}} on {{node}}",
            "--comment",
            "lab",
        ]);
        ok(&[
            "backup",
            "job",
            "create",
            "weekly",
            "--schedule",
            "sat 02:00",
            "--pool",
            "prod",
            "--disabled",
        ]);
        let listed = jobs(&home, gated_bed);
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert_eq!(listed[0]["id"], "nightly");
        assert_eq!(listed[0]["schedule"], "mon..fri 21:30");
        assert_eq!(listed[0]["vmid"], "100,200");
        assert_eq!(listed[0]["compress"], "zstd");
        assert_eq!(listed[0]["enabled"], 1);
        // pxagent's JSON writes PVE's `-` in keys as `_`.
        assert!(listed[0]["next_run"].as_i64().is_some(), "{listed:?}");
        assert_eq!(listed[1]["pool"], "prod");
        assert_eq!(listed[1]["enabled"], 0);
        let r = px_on(
            &home,
            gated_bed,
            &["backup", "job", "show", "nightly", "-o", "json"],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let job = &r.json()["data"];
        assert_eq!(job["prune_backups"]["keep_last"], 3, "{job}");
        assert_eq!(job["prune_backups"]["keep_daily"], 7, "{job}");
        assert_eq!(job["notes_template"], "{{guestname}} on {{node}}");
        assert_eq!(job["storage"], "local");
        // PVE's refusals, passed through.
        for (args, says) in [
            (
                &[
                    "backup",
                    "job",
                    "create",
                    "nightly",
                    "--schedule",
                    "daily",
                    "--vmids",
                    "101",
                ][..],
                "Job 'nightly' already exists",
            ),
            (
                &[
                    "backup",
                    "job",
                    "create",
                    "j2",
                    "--schedule",
                    "daily",
                    "--pool",
                    "nope",
                ],
                "pool 'nope' does not exist",
            ),
            (
                &[
                    "backup",
                    "job",
                    "create",
                    "j2",
                    "--schedule",
                    "daily",
                    "--pool",
                    "prod",
                    "--vmids",
                    "101",
                ],
                "option conflicts with option 'vmid'",
            ),
            (&["backup", "job", "show", "nope"], "No such job 'nope'"),
        ] {
            let r = px_on(&home, gated_bed, args);
            assert_ne!(r.code, 0, "{args:?}");
            assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        }
        // Refused before anything is sent: exit 2.
        for args in [
            &["backup", "job", "create", "j3", "--schedule", "daily"][..],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "*/15",
                "--vmids",
                "100",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "25:00",
                "--vmids",
                "100",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "02:00 sat",
                "--vmids",
                "100",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "daily",
                "--vmids",
                "100,100",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "daily",
                "--vmids",
                "100",
                "--prune-backups",
                "keep-last=3,keep-last=4",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "daily",
                "--vmids",
                "100",
                "--prune-backups",
                "keep-all=1",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "daily",
                "--vmids",
                "100",
                "--notes-template",
                "a$b",
            ],
            &[
                "backup",
                "job",
                "create",
                "j3",
                "--schedule",
                "daily",
                "--vmids",
                "100",
                "--script",
                "/x",
            ],
        ] {
            let r = px_on(&home, gated_bed, args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        }
        assert_eq!(jobs(&home, gated_bed).len(), 2);
        // Removing needs the phrase.
        let r = px_on(&home, gated_bed, &["backup", "job", "remove", "nightly"]);
        assert_eq!(r.code, 4, "{}", r.stderr);
        for id in ["nightly", "weekly"] {
            let phrase = format!("yes remove job {id}");
            ok(&["backup", "job", "remove", id, "--confirm", &phrase]);
        }
        assert!(jobs(&home, gated_bed).is_empty());
        let r = px_on(
            &home,
            gated_bed,
            &[
                "backup",
                "job",
                "remove",
                "nightly",
                "--confirm",
                "yes remove job nightly",
            ],
        );
        assert_ne!(r.code, 0);
        assert!(r.stderr.contains("No such job 'nightly'"), "{}", r.stderr);
    }
}

#[test]
fn sudo_admits_the_job_lines_and_refuses_their_neighbours() {
    use crate::sudo_rules::{Installed, allowed, render, w};
    let _g = lock();
    let _installed = Installed::new(&render("full", &[]));
    let line = |verb: &str, path: &str, rest: &[&str]| {
        let mut v = w(&["/usr/bin/pvesh", verb, path]);
        v.extend(w(rest));
        v.extend(w(&["--output-format", "json"]));
        v
    };
    let create = |head: &[&str], rest: &[&str]| {
        let mut r = vec!["--id", "nightly", "--schedule", "sat 02:00"];
        r.extend_from_slice(head);
        r.extend(["--storage", "local"]);
        r.extend_from_slice(rest);
        line("create", "/cluster/backup", &r)
    };
    for ok in [
        create(&["--vmid", "100,200"], &[]),
        create(
            &["--pool", "prod"],
            &["--mode", "stop", "--compress", "zstd"],
        ),
        create(
            &["--vmid", "100"],
            &[
                "--compress",
                "0",
                "--prune-backups",
                "keep-last=3,keep-daily=7",
                "--notes-template",
                "{{guestname}}",
                "--comment",
                "lab",
                "--enabled",
                "0",
            ],
        ),
        line("get", "/cluster/backup", &[]),
        line("get", "/cluster/backup/nightly", &[]),
        line("delete", "/cluster/backup/nightly", &[]),
    ] {
        assert!(allowed(&ok), "{ok:?}");
    }
    for bad in [
        create(&["--vmid", "100"], &["--script", "/root/hook.sh"]),
        create(&["--vmid", "100"], &["--dumpdir", "/tmp"]),
        create(&["--vmid", "100"], &["--tmpdir", "/tmp"]),
        create(&["--vmid", "100"], &["--remove", "0"]),
        create(&["--all", "1"], &[]),
        create(&["--vmid", "100"], &["--exclude", "101"]),
        create(&["--vmid", "100"], &["--mailto", "root"]),
        create(&["--vmid", "100"], &["--prune-backups", "keep-all=1"]),
        create(
            &["--vmid", "100"],
            &["--compress", "zstd", "--bwlimit", "0"],
        ),
        line(
            "create",
            "/cluster/backup",
            &[
                "--id",
                "j",
                "--schedule",
                "*/5",
                "--vmid",
                "100",
                "--storage",
                "local",
            ],
        ),
        line(
            "set",
            "/cluster/backup/nightly",
            &["--script", "/root/hook.sh"],
        ),
        line("set", "/cluster/backup/nightly", &["--enabled", "1"]),
        {
            let mut v = create(&["--vmid", "100"], &[]);
            v.extend(w(&["--script", "/x"]));
            v
        },
    ] {
        assert!(!allowed(&bad), "{bad:?}");
    }
}
