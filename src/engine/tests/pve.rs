//! Engine flows over Proxmox's own error texts and answer shapes (pmxcfs down, proxied tasks and
//! the error kinds `not_found`, `locked`, `wrong_state`): each answer is a recorded output in
//! `tests/fixtures/` (real captures in `pve/`, simulator recordings in `replay/`, each with its
//! `.source`), and each test asserts the exit code, `error.kind` and what reached the host.

use super::*;

fn answer(stdout: &str, stderr: &str, code: u32) -> Answer {
    Answer::Exit(crate::ssh::Captured {
        stdout: stdout.as_bytes().to_vec(),
        stderr: stderr.as_bytes().to_vec(),
        exit_status: code,
    })
}

/// A snapshot asked for while a backup holds VM 100 is a clear `locked`
/// error, exit 1, after the task status said why.
#[tokio::test]
async fn a_change_during_a_backup_is_locked() {
    let upid = "UPID:pve1:000F4271:0735B46B:6B0F9F3C:qmsnapshot:100:root@pam:";
    let host = Replay::new("pve")
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/100/snapshot --snapname pre-upgrade --output-format json",
            ),
            // pvesh exits 0; the worker's TASK ERROR is on stderr.
            answer(
                &fixture("replay/pvesh_create_snapshot_locked_by_backup_sim.stdout"),
                &fixture("replay/pvesh_create_snapshot_locked_by_backup_sim.stderr"),
                0,
            ),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture(
                "replay/pvesh_get_task_status_snapshot_locked_sim.json",
            )),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/log --limit 5000 --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_log_snapshot_locked_sim.json")),
        );
    let snap = invocation(
        "vm.snapshot",
        &[
            ("vmid", "100"),
            ("snapshot", "pre-upgrade"),
            ("node", "pve1"),
        ],
    );
    let run = execute(&Policy::default(), host, &snap, None).await;
    assert_eq!(
        (run.code(), run.err().kind()),
        (1, "locked"),
        "{}",
        run.err()
    );
    let msg = run.err().to_string();
    assert!(
        msg.starts_with(&format!("task {upid} failed: VM is locked (backup)")),
        "{msg}"
    );
    assert!(msg.contains("pxagent task list"), "{msg}");
}

/// A snapshot that does not exist is `not_found` (the text comes from the task): here it was
/// listed when pxagent looked before asking, and gone when Proxmox deleted it (a race).
#[tokio::test]
async fn deleting_a_missing_snapshot_is_not_found() {
    let upid = "UPID:pve1:000F4271:0735B4CF:6B0F9F4E:qmdelsnapshot:100:root@pam:";
    let host = Replay::new("pve")
        .expect(
            &words("sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/100/snapshot --output-format json"),
            // The shape of qm_listsnapshot's API answer (FORMATS.md): the snapshot, then `current`.
            Answer::ok(
                r#"[{"name":"nosuch","snaptime":1790000000,"description":""},{"name":"current","description":"You are here!","running":1,"parent":"nosuch"}]"#,
            ),
        )
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh delete /nodes/pve1/qemu/100/snapshot/nosuch --output-format json",
            ),
            answer(
                &fixture("replay/pvesh_delete_snapshot_missing_sim.stdout"),
                &fixture("replay/pvesh_delete_snapshot_missing_sim.stderr"),
                0,
            ),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture(
                "replay/pvesh_get_task_status_delsnapshot_missing_sim.json",
            )),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/log --limit 5000 --output-format json"
            )),
            Answer::ok(fixture(
                "replay/pvesh_get_task_log_delsnapshot_missing_sim.json",
            )),
        );
    let del = invocation(
        "vm.delsnapshot",
        &[("vmid", "100"), ("snapshot", "nosuch"), ("node", "pve1")],
    );
    let run = execute(
        &Policy::default(),
        host,
        &del,
        Some("yes delsnapshot 100 nosuch"),
    )
    .await;
    assert_eq!(
        (run.code(), run.err().kind()),
        (1, "not_found"),
        "{}",
        run.err()
    );
}

/// A guest no node has is `not_found` after the one lookup, nothing else sent.
#[tokio::test]
async fn an_unknown_guest_is_not_found_after_one_read() {
    let host = Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer());
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.start", &[("vmid", "999")]),
        None,
    )
    .await;
    assert_eq!(
        (run.code(), run.err().kind()),
        (1, "not_found"),
        "{}",
        run.err()
    );
    assert_eq!(run.sent().len(), 1);
}

/// Shutting down a stopped VM is `wrong_state` (a pre-fork `die`: no task).
#[tokio::test]
async fn shutting_down_a_stopped_vm_is_wrong_state() {
    // The status read says running (the VM stops in between, say by its own shutdown); the
    // action then meets PVE's `not running`.
    let host = Replay::new("pve")
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/102/status/current --output-format json",
            ),
            Answer::ok(fixture(
                "replay/pvesh_get_qemu_status_current_running_sim.json",
            )),
        )
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/102/status/shutdown --output-format json",
            ),
            Answer::fail(
                255,
                fixture("replay/pvesh_create_shutdown_not_running_sim.stderr"),
            ),
        );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.shutdown", &[("vmid", "102"), ("node", "pve1")]),
        None,
    )
    .await;
    assert_eq!(
        (run.code(), run.err().kind()),
        (1, "wrong_state"),
        "{}",
        run.err()
    );
    assert!(run.err().to_string().contains("VM 102 not running"));
}

/// A task on another node comes back the way pvesh forwards it, the
/// remote's lines run together in one JSON string with the UPID at its end; the UPID is
/// found and the task followed on its node.
#[tokio::test]
async fn a_proxied_task_is_followed_on_its_node() {
    let upid = "UPID:pve2:000F426A:062E0806:6B0F9F4C:qmsnapshot:101:root@pam:";
    let host = Replay::new("pve")
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh create /nodes/pve2/qemu/101/snapshot --snapname pre-upgrade --output-format json",
            ),
            Answer::ok(fixture("replay/pvesh_create_snapshot_proxied_pve2_sim.stdout")),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve2/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture(
                "replay/pvesh_get_task_status_snapshot_proxied_ok_sim.json",
            )),
        );
    let snap = invocation(
        "vm.snapshot",
        &[
            ("vmid", "101"),
            ("snapshot", "pre-upgrade"),
            ("node", "pve2"),
        ],
    );
    let run = execute(&Policy::default(), host, &snap, None).await;
    assert_eq!(run.code(), 0);
    assert_eq!(run.data()["upid"], upid);
    assert_eq!(run.data()["task"]["exitstatus"], "OK");
}

/// A proxied failure: pvesh puts the remote's last stderr line behind `proxy handler failed:`;
/// the class is the remote text's.
#[tokio::test]
async fn a_proxied_failure_keeps_the_remote_class() {
    let host = Replay::new("pve").expect(
        &words(
            "sudo -n /usr/bin/pvesh get /nodes/pve2/qemu/100/status/current --output-format json",
        ),
        Answer::fail(
            255,
            "proxy handler failed: Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist\n",
        ),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.status", &[("vmid", "100"), ("node", "pve2")]),
        None,
    )
    .await;
    assert_eq!(
        (run.code(), run.err().kind()),
        (1, "not_found"),
        "{}",
        run.err()
    );
}

/// With pmxcfs down, a command run as root is a host fault (exit 1) that names the
/// pve-cluster service, not a sudo problem.
#[tokio::test]
async fn pmxcfs_down_is_exit_1_naming_pve_cluster() {
    let host = Replay::new("pve").expect(
        &words("sudo -n /usr/bin/pvesh get /cluster/status --output-format json"),
        Answer::fail(111, fixture("pve/pmxcfs_down_root_connection_refused.txt")),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("cluster.status", &[]),
        None,
    )
    .await;
    assert_eq!(
        (run.code(), run.err().kind()),
        (1, "remote_failed"),
        "{}",
        run.err()
    );
    assert!(
        run.err()
            .to_string()
            .contains("systemctl status pve-cluster"),
        "{}",
        run.err()
    );
}
