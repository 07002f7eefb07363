//! In-process tests of the guest flows over the replay transport: actions with nothing
//! to do (`changed: false`, what they send, where the phrase and the policy come in), guests
//! given by name, backups of either kind of guest with the archive in the result, and bare
//! values. Answers are the simulator's recordings in `tests/fixtures/replay/` (each with its
//! `.source`); the helpers are the parent module's.

use serde_json::Value;

use super::*;

const STATUS_RUNNING: &str = "replay/pvesh_get_qemu_status_current_running_sim.json";
const STATUS_STOPPED: &str = "replay/pvesh_get_qemu_status_current_stopped_sim.json";
const STATUS_PAUSED: &str = "replay/pvesh_get_qemu_status_current_paused_sim.json";

fn status_of(vmid: u32, node: &str) -> Vec<String> {
    words(&format!(
        "sudo -n /usr/bin/pvesh get /nodes/{node}/qemu/{vmid}/status/current --output-format json"
    ))
}

fn action(vmid: u32, node: &str, what: &str) -> Vec<String> {
    words(&format!(
        "sudo -n /usr/bin/pvesh create /nodes/{node}/qemu/{vmid}/status/{what} --output-format json"
    ))
}

#[tokio::test]
async fn start_of_a_running_vm_reads_its_status_and_changes_nothing() {
    // `vm start 100` twice ends with exit 0 and `changed: false`.
    // VM 100 `web` runs on pve1: the node lookup, the status read, nothing else.
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), sim_guests_answer())
        .expect(&status_of(100, "pve1"), Answer::ok(fixture(STATUS_RUNNING)));
    let start = invocation("vm.start", &[("vmid", "100")]);
    let run = execute(&Policy::default(), host, &start, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["changed"], false);
    assert_eq!(run.data()["status"], "running");
    assert_eq!(run.data()["node"], "pve1");
    assert_eq!(run.data()["vmid"], 100);
    assert_eq!(run.sent().len(), 2);
    assert_eq!(run.trail.upid, None);
    assert_eq!(
        run.trail.argv,
        run.sent()[1],
        "the audit names what ran: the read"
    );
    let text = super::super::human(&start, run.data());
    assert!(text.contains("already running"), "{text}");
}

#[tokio::test]
async fn stop_of_a_stopped_vm_needs_no_phrase_but_the_policy_still_decides() {
    // VM 102 `build` is stopped on pve1.
    let stop = invocation("vm.stop", &[("vmid", "102"), ("node", "pve1")]);
    for given in [None, Some("yes stop 102")] {
        let host =
            Replay::new("pve").expect(&status_of(102, "pve1"), Answer::ok(fixture(STATUS_STOPPED)));
        let run = execute(&Policy::default(), host, &stop, given).await;
        assert_eq!(run.code(), 0, "{given:?}: {}", run.err());
        assert_eq!(run.data()["changed"], false);
        assert_eq!(run.data()["message"], "VM 102 is already stopped");
        assert_eq!(
            run.trail.phrase, None,
            "no phrase was needed, none is recorded"
        );
    }
    // A refusal stays a refusal, and comes before any read.
    for yaml in [
        "read_only: true\n",
        "ops:\n  vm.stop: {action: deny, reason: no}\n",
    ] {
        let run = execute(&policy(yaml), Replay::new("pve"), &stop, None).await;
        assert_eq!(run.code(), 3, "{yaml}");
        assert_eq!(run.host.count(), 0, "{yaml}");
    }
    // A phrase the policy demands is not needed for a no-op either.
    let host =
        Replay::new("pve").expect(&status_of(102, "pve1"), Answer::ok(fixture(STATUS_STOPPED)));
    let shutdown = invocation("vm.shutdown", &[("vmid", "102"), ("node", "pve1")]);
    let run = execute(
        &policy("ops:\n  vm.shutdown: confirm\n"),
        host,
        &shutdown,
        None,
    )
    .await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["changed"], false);
}

#[tokio::test]
async fn paused_is_told_apart_from_running_by_qmpstatus() {
    // VM 100 paused: `status` says running, `qmpstatus` paused (FORMATS.md §2.8).
    let suspend = invocation("vm.suspend", &[("vmid", "100"), ("node", "pve1")]);
    let host =
        Replay::new("pve").expect(&status_of(100, "pve1"), Answer::ok(fixture(STATUS_PAUSED)));
    let run = execute(&Policy::default(), host, &suspend, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["changed"], false);
    assert_eq!(run.data()["status"], "paused");

    // Resuming a running VM has nothing to do; resuming a paused one runs.
    let resume = invocation("vm.resume", &[("vmid", "100"), ("node", "pve1")]);
    let host =
        Replay::new("pve").expect(&status_of(100, "pve1"), Answer::ok(fixture(STATUS_RUNNING)));
    let run = execute(&Policy::default(), host, &resume, None).await;
    assert_eq!(run.data()["changed"], false);

    let upid = "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstop:100:root@pam:";
    let host = Replay::new("pve")
        .expect(&status_of(100, "pve1"), Answer::ok(fixture(STATUS_PAUSED)))
        .expect(
            &action(100, "pve1", "resume"),
            Answer::ok(fixture("replay/pvesh_create_stop_sim.stdout")),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_status_stop_ok_sim.json")),
        );
    let run = execute(&Policy::default(), host, &resume, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["changed"], true);

    // A paused VM is not `running` to `vm start` either: the start is sent (Proxmox answers).
    let host = Replay::new("pve")
        .expect(&status_of(100, "pve1"), Answer::ok(fixture(STATUS_PAUSED)))
        .expect(
            &action(100, "pve1", "start"),
            Answer::fail(255, "VM 100 already running\n"),
        );
    let start = invocation("vm.start", &[("vmid", "100"), ("node", "pve1")]);
    let run = execute(&Policy::default(), host, &start, None).await;
    assert_eq!(run.code(), 1, "{}", run.err());
}

#[tokio::test]
async fn container_start_of_a_running_container_changes_nothing() {
    let host = Replay::new("pve").expect(
        &words(
            "sudo -n /usr/bin/pvesh get /nodes/pve1/lxc/200/status/current --output-format json",
        ),
        Answer::ok(fixture(
            "replay/pvesh_get_lxc_status_current_running_sim.json",
        )),
    );
    let start = invocation("ct.start", &[("vmid", "200"), ("node", "pve1")]);
    let run = execute(&Policy::default(), host, &start, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["changed"], false);
    assert_eq!(run.data()["message"], "container 200 is already running");
}

/// What [`Engine::named`] made of `name` for `op` over the simulator's guest list, and what
/// was sent.
async fn named(op: &str, name: &str, guests: Answer) -> (Result<Invocation>, Arc<Replay>) {
    let host = Arc::new(Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), guests));
    let connector = Fixed(Remote::over(host.clone(), "zen-agent@pve:22".into(), None));
    let none = Policy::default();
    let engine = Engine {
        policy: &none,
        connector: &connector,
        interactive: false,
        taint: None,
    };
    let raw: BTreeMap<&'static str, String> = [("vmid", name.to_string())].into();
    let n = crate::catalog::invocation::Named::from_raw(catalog::find(op).unwrap(), &raw)
        .unwrap()
        .expect("a name");
    let r = engine.named(&n).await;
    (r, host)
}

#[tokio::test]
async fn a_guest_name_is_its_vmid_and_node_from_one_read() {
    // `vm status web` is VM 100.
    let (inv, host) = named("vm.status", "web", sim_guests_answer()).await;
    let inv = inv.unwrap();
    assert_eq!(inv.vmid(), Some(100));
    assert_eq!(inv.values["node"], "pve1");
    assert!(!inv.needs_node(), "no second lookup");
    assert_eq!(host.count(), 1);
    assert_eq!(
        inv.argv(),
        words("/usr/bin/pvesh get /nodes/pve1/qemu/100/status/current --output-format json"),
        "the host sees the numeric VMID"
    );
    // Backups take either kind: `dns` is container 200.
    let (inv, _) = named("backup.create", "dns", sim_guests_answer()).await;
    assert_eq!(inv.unwrap().vmid(), Some(200));
}

#[tokio::test]
async fn unknown_wrong_kind_and_ambiguous_names_are_exit_2() {
    let (r, _) = named("vm.status", "nosuch", sim_guests_answer()).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    assert!(msg.contains("no VM is named 'nosuch'"), "{msg}");
    assert!(msg.contains("web (100)") && !msg.contains("dns"), "{msg}");

    let (r, _) = named("vm.start", "dns", sim_guests_answer()).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string()
            .contains("dns is a container: use `pxagent ct start dns`"),
        "{e}"
    );

    // A second guest named `web` (VM 105 on pve2) makes the name ambiguous.
    let mut guests: Value =
        serde_json::from_str(&fixture("replay/pvesh_get_cluster_resources_vm_sim.json")).unwrap();
    let mut twin = guests[0].clone();
    twin["vmid"] = 105.into();
    twin["id"] = "qemu/105".into();
    twin["node"] = "pve2".into();
    guests.as_array_mut().unwrap().push(twin);
    let (r, _) = named("vm.status", "web", Answer::ok(one_line(&guests))).await;
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string()
            .contains("2 VMs are named 'web': 100 on pve1, 105 on pve2"),
        "{e}"
    );
}

#[test]
fn only_an_existing_guest_may_be_named() {
    let raw = |v: &str| -> BTreeMap<&'static str, String> { [("vmid", v.to_string())].into() };
    let is_named = |op: &str, v: &str| {
        crate::catalog::invocation::Named::from_raw(catalog::find(op).unwrap(), &raw(v))
            .unwrap()
            .is_some()
    };
    assert!(is_named("vm.status", "web"));
    assert!(!is_named("vm.status", "100"), "digits are a VMID");
    assert!(
        !is_named("vm.status", "web;id"),
        "not a guest name: the VMID error applies"
    );
    assert!(is_named("backup.list", "web"), "a --vmid filter");
    // A restore's --vmid is the id of the guest to make.
    let mut restore = raw("web");
    restore.insert(
        "archive",
        "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst".into(),
    );
    assert!(
        crate::catalog::invocation::Named::from_raw(&catalog::ops::BACKUP_RESTORE, &restore)
            .unwrap()
            .is_none()
    );
    // The other values are checked before anything is sent.
    let mut bad = raw("web");
    bad.insert("node", "a;b".into());
    let e =
        crate::catalog::invocation::Named::from_raw(&catalog::ops::VM_STATUS, &bad).unwrap_err();
    assert_eq!(e.exit_code(), 2);
}

#[tokio::test]
async fn backup_of_a_container_names_its_archive() {
    // `backup create 200` backs the container up (it once failed with "200 is
    // a container"), and the result carries the archive's volume id from the task log.
    let upid = "UPID:pve1:000F4278:0735B5FC:6B0F96FB:vzdump:200:root@pam:";
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), sim_guests_answer())
        .expect(
            &words("sudo -n /usr/bin/pvesh create /nodes/pve1/vzdump --vmid 200 --storage local --compress zstd --output-format json"),
            Answer::ok(fixture("replay/pvesh_create_vzdump_lxc_200_sim.stdout")),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_status_vzdump_200_ok_sim.json")),
        );
    let backup = invocation("backup.create", &[("vmid", "200")]);
    let run = execute(&Policy::default(), host, &backup, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(
        run.data()["archive"],
        "local:backup/vzdump-lxc-200-2026_12_02-03_56_43.tar"
    );
    assert_eq!(run.data()["changed"], true);
    let text = super::super::human(&backup, run.data());
    assert!(
        text.ends_with("\nlocal:backup/vzdump-lxc-200-2026_12_02-03_56_43.tar"),
        "{text}"
    );
}

#[tokio::test]
async fn backup_proxied_to_another_node_names_its_archive_too() {
    // VM 101 is on pve2: pvesh proxies and prints the log and the UPID as one JSON string.
    let upid = "UPID:pve2:000F4271:062E09FB:6B0F96FB:vzdump:101:root@pam:";
    let host = Replay::new("pve")
        .expect(
            &words("sudo -n /usr/bin/pvesh create /nodes/pve2/vzdump --vmid 101 --storage local --compress zstd --output-format json"),
            Answer::ok(fixture("replay/pvesh_create_vzdump_qemu_101_sim.stdout")),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve2/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_status_vzdump_101_ok_sim.json")),
        );
    let backup = invocation("backup.create", &[("vmid", "101"), ("node", "pve2")]);
    let run = execute(&Policy::default(), host, &backup, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(
        run.data()["archive"],
        "local:backup/vzdump-qemu-101-2026_12_02-03_56_43.vma"
    );
}

#[test]
fn archive_lines_of_real_vzdump_logs() {
    // The REAL captures (pve/vzdump_*.txt) and the PBS line of FORMATS.md §3.10.
    for (file, want) in [
        (
            "pve/vzdump_lxc_stop_gzip_pve7.txt",
            "local:backup/vzdump-lxc-100-2022_05_26-00_16_48.tar.gz",
        ),
        (
            "pve/vzdump_qemu_snapshot_local_zstd_fragment_pve9.txt",
            "local:backup/vzdump-qemu-",
        ),
    ] {
        let found = fixture(file)
            .lines()
            .find_map(|l| super::super::archive_volid(l, "local"))
            .unwrap_or_else(|| panic!("{file}: no archive line"));
        assert!(found.starts_with(want), "{file}: {found}");
    }
    assert_eq!(
        super::super::archive_volid(
            "INFO: creating Proxmox Backup Server archive 'vm/100/2026-01-16T16:26:33Z'",
            "pbs"
        )
        .as_deref(),
        Some("pbs:backup/vm/100/2026-01-16T16:26:33Z")
    );
    assert_eq!(
        super::super::archive_volid("INFO: status = running", "local"),
        None
    );
}

#[tokio::test]
async fn nextid_is_a_json_number() {
    // pvesh prints the next id as a JSON string (the simulator's `"105"`, FORMATS.md §2.13).
    let host = Replay::new("pve").expect(
        &words("sudo -n /usr/bin/pvesh get /cluster/nextid --output-format json"),
        Answer::ok("\"105\"\n"),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("cluster.nextid", &[]),
        None,
    )
    .await;
    assert_eq!(*run.data(), serde_json::json!(105));
}
