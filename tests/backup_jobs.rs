//! Backup jobs on the beds, plain and gated: a job by VMIDs and one by pool created, listed,
//! shown, run now on each of its guests' nodes and removed (phrase); PVE's refusals pass
//! through; what pxagent does not send is refused before anything is sent. Real sudo admits the catalog's job lines and refuses
//! their neighbours (`--script`, `--dumpdir`, `--tmpdir`, `--remove 0`, `--all`, changes in
//! place, options after a line's end).
//!
//! Every test holds the host [`lock`] and leaves the simulator as it found it (`pve-sim reset`).

use serde_json::{Value, json};

use crate::support::{
    Home, backups, lock, px_on, sim, sim_reset, sudo_commands_since, sudo_log_len,
};

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

/// `backup job run`: one vzdump per node that holds the job's guests, each line naming exactly
/// those guests with the job's id and settings; a VMID no node holds is named in the result and
/// never sent; a pool job takes the pool's members. The sudo log is the proof of what ran.
#[test]
fn a_backup_job_runs_now_on_each_of_its_guests_nodes() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    for gated_bed in [false, true] {
        let id = if gated_bed { "gated" } else { "plain" };
        let ok = |args: &[&str]| {
            let r = px_on(&home, gated_bed, args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
            r
        };
        ok(&[
            "backup",
            "job",
            "create",
            id,
            "--schedule",
            "sat 02:00",
            "--vmids",
            "100,101,200,999",
            "--mode",
            "snapshot",
            "--prune-backups",
            "keep-last=3",
        ]);
        let guests = [("pve1", 100), ("pve2", 101), ("pve1", 200)];
        let before: Vec<usize> = guests.iter().map(|(n, v)| backups(n, *v).len()).collect();
        let sent = if gated_bed {
            None
        } else {
            Some(sudo_log_len())
        };
        let r = ok(&["backup", "job", "run", id, "-o", "json"]);
        let d = &r.json()["data"];
        assert_eq!(d["changed"], true, "{d}");
        assert_eq!(d["job"], id);
        assert_eq!(d["missing"], json!([999]), "{d}");
        let runs = d["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{d}");
        for (run, (node, vmids)) in runs
            .iter()
            .zip([("pve1", json!([100, 200])), ("pve2", json!([101]))])
        {
            assert_eq!(run["node"], node, "{d}");
            assert_eq!(run["vmids"], vmids, "{d}");
            assert_eq!(run["exitstatus"], "OK", "{d}");
            assert!(
                run["upid"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("UPID:{node}:")),
                "{d}"
            );
        }
        // Each guest has one backup more, on its own node.
        let after: Vec<usize> = guests.iter().map(|(n, v)| backups(n, *v).len()).collect();
        let more: Vec<usize> = before.iter().map(|b| b + 1).collect();
        assert_eq!(after, more);
        if let Some(sent) = sent {
            let mut lines: Vec<String> = sudo_commands_since(sent)
                .into_iter()
                .filter(|c| c.contains("/vzdump"))
                .collect();
            lines.sort();
            let tail = "--storage local --mode snapshot --compress zstd --prune-backups keep-last=3 --output-format json";
            assert_eq!(
                lines,
                [("pve1", "100,200"), ("pve2", "101")].map(|(node, vmids)| format!(
                    "/usr/bin/pvesh create /nodes/{node}/vzdump --job-id {id} --vmid {vmids} {tail}"
                ))
            );
        }
        // A pool job: the pool's members, wherever they are.
        let pool = format!("{id}-pool");
        ok(&[
            "backup",
            "job",
            "create",
            &pool,
            "--schedule",
            "daily",
            "--pool",
            "prod",
        ]);
        let r = ok(&["backup", "job", "run", &pool, "-o", "json"]);
        let d = &r.json()["data"];
        assert_eq!(d["runs"][0]["node"], "pve1", "{d}");
        assert_eq!(d["runs"][0]["vmids"], json!([100, 200]), "{d}");
        assert_eq!(d["runs"].as_array().unwrap().len(), 1, "{d}");
        // People read what ran where.
        let r = ok(&["backup", "job", "run", id]);
        assert!(
            r.stdout.contains(
                "ran on 2 nodes to local: 100,200 on pve1 (OK), 101 on pve2 (OK); no node holds 999"
            ),
            "{}",
            r.stdout
        );
        // A job that does not exist is PVE's answer; --no-wait cannot follow several tasks.
        let r = px_on(&home, gated_bed, &["backup", "job", "run", "nope"]);
        assert_ne!(r.code, 0);
        assert!(r.stderr.contains("No such job 'nope'"), "{}", r.stderr);
        let r = px_on(&home, gated_bed, &["backup", "job", "run", id, "--no-wait"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        for job in [id, pool.as_str()] {
            let phrase = format!("yes remove job {job}");
            ok(&["backup", "job", "remove", job, "--confirm", &phrase]);
        }
    }
}

/// A job with a setting no line carries (made on the host as PVE's GUI would, here by the
/// simulator as root) is refused after the job's read, before any backup: exit 1, and sudo saw
/// no vzdump.
#[test]
fn a_job_with_settings_pxagent_cannot_pass_is_refused_before_any_backup() {
    let _g = lock();
    let _r = sim_reset();
    let home = Home::new();
    for (job, extra) in [
        ("slow", ["--bwlimit", "100"]),
        ("hooked", ["--script", "/root/hook.pl"]),
        ("dumped", ["--dumpdir", "/tmp"]),
    ] {
        let mut args = vec![
            "pvesh",
            "create",
            "/cluster/backup",
            "--id",
            job,
            "--schedule",
            "daily",
            "--vmid",
            "100",
            "--storage",
            "local",
        ];
        args.extend(extra);
        sim(&args);
        let sent = sudo_log_len();
        let r = px_on(&home, false, &["backup", "job", "run", job]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("backup job {job} sets `{}`", &extra[0][2..])),
            "{}",
            r.stderr
        );
        assert!(
            !sudo_commands_since(sent)
                .iter()
                .any(|c| c.contains("/vzdump")),
            "a refused run reached sudo"
        );
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
    // One node's run of job `nightly`: its guests there, then the job's settings.
    let run = |rest: &[&str]| {
        let mut r = vec![
            "--job-id",
            "nightly",
            "--vmid",
            "100,200",
            "--storage",
            "local",
        ];
        r.extend_from_slice(rest);
        line("create", "/nodes/pve1/vzdump", &r)
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
        run(&["--mode", "stop", "--compress", "0"]),
        run(&[
            "--prune-backups",
            "keep-last=3,keep-weekly=2",
            "--notes-template",
            "{{guestname}} on {{node}}",
        ]),
        line("get", "/cluster/backup", &[]),
        line("get", "/cluster/backup/nightly", &[]),
        line("delete", "/cluster/backup/nightly", &[]),
    ] {
        assert!(allowed(&ok), "{ok:?}");
    }
    for bad in [
        run(&["--script", "/root/hook.sh"]),
        run(&["--dumpdir", "/tmp"]),
        run(&["--tmpdir", "/tmp"]),
        run(&["--remove", "0"]),
        run(&["--stdout", "1"]),
        run(&["--mode", "stop", "--exclude", "101"]),
        run(&["--bwlimit", "0"]),
        line(
            "create",
            "/nodes/pve1/vzdump",
            &["--job-id", "nightly", "--all", "1", "--storage", "local"],
        ),
        line(
            "create",
            "/nodes/pve1/vzdump",
            &[
                "--job-id",
                "nightly",
                "--pool",
                "prod",
                "--storage",
                "local",
            ],
        ),
        line(
            "create",
            "/nodes/pve1/vzdump",
            &[
                "--job-id",
                "nightly",
                "--vmid",
                "100",
                "--storage",
                "local",
                "--node",
                "pve2",
            ],
        ),
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
