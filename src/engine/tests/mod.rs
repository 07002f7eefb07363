//! In-process tests of one op's whole flow — policy, confirmation, node lookup, send,
//! classify, task, normalize — over a [`Replay`] transport instead of sshd, sudo and the
//! simulator. Every answer is a recorded output read from `tests/fixtures/` (real captures in
//! `pve/` and `sudo/`; what no real capture covers was recorded from the simulator into
//! `replay/`, each with its `.source` note); the comment on each answer names its file. The
//! tests assert the exit code ([`Error::exit_code`]) and the exact argv that reached the host.

use crate::base::testing::{fixture, words};
use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Connector, Done, Engine, Trail};
use crate::base::error::{Error, Result};
use crate::catalog;
use crate::catalog::invocation::Invocation;
use crate::policy::{Policy, PolicyConfig};
use crate::remote::Remote;
use crate::remote::replay::{Answer, Replay};

/// Hands the engine a [`Remote`] over the test's replay.
struct Fixed(Remote);

impl Connector for Fixed {
    async fn remote(&self) -> Result<Remote> {
        Ok(self.0.clone())
    }
}

/// The `data` of a captured HTTPS API body, printed as `pvesh --output-format json` prints
/// it: the inner value, on one line.
fn api_data(name: &str) -> Value {
    let body: Value = serde_json::from_str(&fixture(name)).unwrap();
    body["data"].clone()
}

fn one_line(v: &Value) -> String {
    format!("{}\n", serde_json::to_string(v).unwrap())
}

/// The output lines of the `n`th command (from 0) in a `$ command` / output / `RC=` transcript.
fn transcript_block(name: &str, n: usize) -> String {
    let text = fixture(name);
    let block = text.split("\n$ ").nth(n + 1).unwrap();
    block
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("RC="))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A sudo capture without the `rc=` line its recorder appended.
fn sudo_stderr(name: &str) -> String {
    fixture(name)
        .lines()
        .filter(|l| !l.starts_with("rc="))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn policy(yaml: &str) -> Policy {
    let cfg: PolicyConfig = yaml_serde::from_str(yaml).unwrap();
    Policy::from_config(cfg, "test policy").unwrap()
}

fn invocation(op: &str, values: &[(&'static str, &str)]) -> Invocation {
    let raw: BTreeMap<&'static str, String> =
        values.iter().map(|(k, v)| (*k, v.to_string())).collect();
    Invocation::new(catalog::find(op).unwrap(), raw).unwrap()
}

/// What one run through [`Engine::execute`] did.
struct Run {
    result: Result<Done>,
    trail: Trail,
    progress: Vec<String>,
    host: Arc<Replay>,
}

impl Run {
    fn sent(&self) -> Vec<Vec<String>> {
        self.host.sent_argv()
    }

    fn code(&self) -> u8 {
        match &self.result {
            Ok(_) => 0,
            Err(e) => e.exit_code(),
        }
    }

    fn err(&self) -> &Error {
        self.result.as_ref().expect_err("the op should have failed")
    }

    fn data(&self) -> &Value {
        match &self.result {
            Ok(done) => &done.data,
            Err(e) => panic!("the op failed: {e}"),
        }
    }
}

/// Run `inv` the way the CLI does (no terminal), over `host`, and check that the host was
/// sent exactly what its script expected.
async fn execute(policy: &Policy, host: Replay, inv: &Invocation, given: Option<&str>) -> Run {
    let host = Arc::new(host);
    let connector = Fixed(Remote::over(host.clone(), "zen-agent@pve:22".into(), None));
    let engine = Engine {
        policy,
        connector: &connector,
        interactive: false,
        taint: None,
    };
    let mut trail = Trail::default();
    let mut progress = Vec::new();
    let result = engine
        .execute(inv, given, &mut trail, &mut |l| {
            progress.push(l.to_string())
        })
        .await;
    if let Err(problems) = host.finish() {
        panic!("the host saw something else than expected:\n{problems}");
    }
    Run {
        result,
        trail,
        progress,
        host,
    }
}

const CLUSTER_RESOURCES_GUESTS: &str =
    "sudo -n /usr/bin/pvesh get /cluster/resources --type vm --output-format json";

/// `vm status 100` on pve1, VM 100's node in the simulator's guest list.
const VM100_STATUS: &str =
    "sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/100/status/current --output-format json";

/// `/cluster/resources --type vm` as the simulator prints it for its fresh cluster
/// (replay/pvesh_get_cluster_resources_vm_sim.json): VMs 100 `web` … and containers 200
/// `dns` …, which the real capture lacks.
fn sim_guests_answer() -> Answer {
    Answer::ok(fixture("replay/pvesh_get_cluster_resources_vm_sim.json"))
}

/// `/cluster/resources --type vm` from the real capture
/// (pve/https_api_cluster_resources_pve7.4-8.0_capture.json, taken without `type`): its guest
/// entries, which is what `--type vm` keeps.
fn guests_answer() -> Answer {
    let all = api_data("pve/https_api_cluster_resources_pve7.4-8.0_capture.json");
    let guests: Vec<Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| matches!(r["type"].as_str(), Some("qemu" | "lxc")))
        .cloned()
        .collect();
    Answer::ok(one_line(&Value::Array(guests)))
}

#[tokio::test]
async fn policy_refusal_sends_nothing() {
    let read_only = policy("read_only: true\n");
    let run = execute(
        &read_only,
        Replay::new("pve"),
        &invocation("vm.start", &[("vmid", "100")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 3, "{}", run.err());
    assert_eq!(run.host.count(), 0);

    let denied = policy("ops:\n  vm.destroy: {action: deny, reason: use the GUI}\n");
    let run = execute(
        &denied,
        Replay::new("pve"),
        &invocation("vm.destroy", &[("vmid", "100")]),
        Some("yes destroy 100"),
    )
    .await;
    assert_eq!(run.code(), 3);
    assert!(
        run.err().to_string().contains("use the GUI"),
        "{}",
        run.err()
    );
    assert_eq!(run.host.count(), 0);
}

#[tokio::test]
async fn protected_tag_reads_the_tags_and_sends_nothing_else() {
    // VM 102 carries the tag `go-proxmox+cloud-init` in the real capture.
    // The tags come from the connection's guest map, the read that also finds the node.
    let protect = policy("protect: [go-proxmox+cloud-init]\n");
    let host = Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer());
    let run = execute(
        &protect,
        host,
        &invocation("vm.start", &[("vmid", "102")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 3, "{}", run.err());
    assert_eq!(run.host.count(), 1, "only the read of the tags");
}

#[tokio::test]
async fn exec_status_reads_the_guests_tags_like_the_other_exec_ops() {
    // A regression: `vm exec-status` was once judged as if its guest had no tags.
    let protect = policy("protect: [go-proxmox+cloud-init]\n");
    // The tags come from the connection's guest map.
    let host = Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer());
    let run = execute(
        &protect,
        host,
        &invocation("vm.exec-status", &[("vmid", "102"), ("pid", "4242")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 3, "{}", run.err());
    assert!(
        run.err().to_string().contains("protected tag"),
        "{}",
        run.err()
    );
    assert_eq!(run.host.count(), 1, "only the read of the tags");
}

#[tokio::test]
async fn a_change_whose_audit_record_cannot_be_written_is_not_sent() {
    // The started record comes first; a torn audit log refuses the op (exit 10).
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    std::fs::write(&log, b"{\"seq\":1,\"time\":").unwrap();
    let host = Arc::new(Replay::new("pve"));
    let connector = Fixed(Remote::over(host.clone(), "zen-agent@pve:22".into(), None));
    let none = Policy::default();
    let engine = Engine {
        policy: &none,
        connector: &connector,
        interactive: false,
        taint: None,
    };
    let mut trail = Trail {
        audited: true,
        log: Some(log),
        ..Trail::default()
    };
    let snap = invocation(
        "vm.snapshot",
        &[("vmid", "100"), ("snapshot", "s1"), ("node", "pve1")],
    );
    let r = engine.execute(&snap, None, &mut trail, &mut |_| {}).await;
    let e = r.expect_err("refused");
    assert_eq!(e.exit_code(), 10, "{e}");
    assert!(e.to_string().contains("audit new-chain"), "{e}");
    assert_eq!(host.count(), 0, "nothing was sent");
}

#[tokio::test]
async fn confirmation_missing_or_wrong_sends_nothing() {
    let none = Policy::default();
    let destroy = invocation("vm.destroy", &[("vmid", "100"), ("node", "pve1")]);
    // A wrong phrase is its own kind, refused before anything is read.
    for given in ["yes destroy 101", "yes destroy 100 "] {
        let run = execute(&none, Replay::new("pve"), &destroy, Some(given)).await;
        assert_eq!(run.code(), 4, "{given:?}");
        let Error::ConfirmationMismatch { phrase, .. } = run.err() else {
            panic!("{given:?}: {}", run.err());
        };
        assert_eq!(phrase, "yes destroy 100");
        let json = run.err().to_json();
        assert_eq!(json["kind"], "confirmation_mismatch", "{json}");
        assert_eq!(json["phrase_from"], "user", "{json}");
        assert!(
            json["instruction"].as_str().unwrap().contains("human user"),
            "{json}"
        );
        assert_eq!(run.host.count(), 0, "{given:?}");
    }
    // No phrase: the guest is checked before the phrase is asked for; VM 100 runs, so
    // Proxmox would refuse the destroy, and no phrase is asked for at all (only reads sent).
    let host = Replay::new("pve").expect(
        &words(VM100_STATUS),
        Answer::ok(fixture(
            "replay/pvesh_get_qemu_status_current_running_sim.json",
        )),
    );
    let run = execute(&none, host, &destroy, None).await;
    assert_eq!(run.code(), 1, "{}", run.err());
    assert_eq!(run.err().kind(), "wrong_state");
    assert!(
        run.err().to_string().contains("is running"),
        "{}",
        run.err()
    );
    assert!(
        run.sent().iter().all(|argv| argv[3] == "get"),
        "{:?}",
        run.sent()
    );
    // An op that may be a no-op (`vm stop`) refuses a wrong phrase before reading anything.
    let stop = invocation("vm.stop", &[("vmid", "100")]);
    for given in ["yes stop 101", "yes stop 100 "] {
        let run = execute(&none, Replay::new("pve"), &stop, Some(given)).await;
        assert_eq!(run.code(), 4, "{given:?}");
        assert_eq!(run.host.count(), 0, "{given:?}");
    }
}

#[tokio::test]
async fn stop_of_a_running_vm_without_phrase_only_reads_its_status() {
    // Whether `vm stop` has anything to do is read first: the node lookup's guest map
    // says VM 100 runs, so no status/current is needed; the phrase is asked for and no
    // action is sent.
    let host = Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), sim_guests_answer());
    let stop = invocation("vm.stop", &[("vmid", "100")]);
    let run = execute(&Policy::default(), host, &stop, None).await;
    assert_eq!(run.code(), 4, "{}", run.err());
    assert!(
        run.sent().iter().all(|argv| argv[3] == "get"),
        "{:?}",
        run.sent()
    );
}

#[tokio::test]
async fn confirmed_op_is_sent_and_its_task_followed() {
    let upid = "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstop:100:root@pam:";
    let host = Replay::new("pve")
        .expect(
            &words(VM100_STATUS),
            Answer::ok(fixture(
                "replay/pvesh_get_qemu_status_current_running_sim.json",
            )),
        )
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/100/status/stop --output-format json",
            ),
            Answer::ok(fixture("replay/pvesh_create_stop_sim.stdout")),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_status_stop_ok_sim.json")),
        );
    let stop = invocation("vm.stop", &[("vmid", "100"), ("node", "pve1")]);
    let run = execute(&Policy::default(), host, &stop, Some("yes stop 100")).await;
    assert_eq!(run.code(), 0);
    assert_eq!(run.data()["upid"], upid);
    assert_eq!(run.data()["node"], "pve1");
    assert_eq!(run.data()["task"]["exitstatus"], "OK");
    assert_eq!(run.trail.phrase.as_deref(), Some("yes stop 100"));
    assert_eq!(run.trail.upid.as_deref(), Some(upid));
    assert_eq!(run.trail.argv, run.sent()[1]);
    assert_eq!(run.data()["changed"], true);
    assert_eq!(run.progress, [format!("\"{upid}\"")]);
}

#[tokio::test]
async fn guest_node_is_looked_up_in_cluster_resources() {
    // VM 100 runs on node2 in the real capture, so its status is asked of node2.
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer())
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh get /nodes/node2/qemu/100/status/current --output-format json",
            ),
            Answer::ok(fixture(
                "replay/pvesh_get_qemu_status_current_running_sim.json",
            )),
        );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.status", &[("vmid", "100")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 0);
    assert_eq!(run.sent().len(), 2);
    assert_eq!(run.trail.argv, run.sent()[1]);
    assert_eq!(run.data()["status"], "running");
    assert_eq!(run.data()["vmid"], 100);
}

#[tokio::test]
async fn guest_of_the_other_kind_is_a_usage_error_after_one_read() {
    // The real capture has no containers; VM 101 is a qemu template, so `ct status 101`
    // must point at `vm` and send nothing but the lookup.
    let host = Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer());
    let run = execute(
        &Policy::default(),
        host,
        &invocation("ct.status", &[("vmid", "101")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 2, "{}", run.err());
    assert!(
        run.err().to_string().contains("pxagent vm status"),
        "{}",
        run.err()
    );
}

#[tokio::test]
async fn failed_task_is_exit_1_with_the_log_tail() {
    let upid = "UPID:pve1:000F426A:0735B406:6B0EB392:qmsnapshot:100:root@pam:";
    let stdout = fixture("replay/pvesh_create_snapshot_failed_thinpool_sim.stdout");
    let stderr = fixture("replay/pvesh_create_snapshot_failed_thinpool_sim.stderr");
    let host = Replay::new("pve")
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/100/snapshot --snapname before-upgrade --output-format json",
            ),
            // pvesh exits 0 although the task failed.
            Answer::Exit(crate::ssh::Captured {
                stdout: stdout.into_bytes(),
                stderr: stderr.into_bytes(),
                exit_status: 0,
            }),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(fixture(
                "replay/pvesh_get_task_status_snapshot_failed_sim.json",
            )),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/log --limit 5000 --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_log_snapshot_failed_sim.json")),
        );
    let snap = invocation(
        "vm.snapshot",
        &[
            ("vmid", "100"),
            ("snapshot", "before-upgrade"),
            ("node", "pve1"),
        ],
    );
    let run = execute(&Policy::default(), host, &snap, None).await;
    assert_eq!(run.code(), 1, "{}", run.err());
    let msg = run.err().to_string();
    assert!(
        msg.starts_with(&format!("task {upid} failed: lvcreate snapshot")),
        "{msg}"
    );
    assert!(
        msg.contains("\nTASK ERROR: lvcreate snapshot 'pve/snap_vm-113-disk-1_known-good-20260914-231024' error: Cannot create new thin volume"),
        "{msg}"
    );
    assert_eq!(run.sent().len(), 3);
}

#[tokio::test]
async fn sudo_refusal_is_exit_9() {
    // sudo/08_exec_denied_command.txt: no rule for the command.
    let host = Replay::new("pve").expect(
        &words(
            "sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/100/status/current --output-format json",
        ),
        Answer::fail(1, sudo_stderr("sudo/08_exec_denied_command.txt")),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.status", &[("vmid", "100"), ("node", "pve1")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 9, "{}", run.err());
    assert!(
        run.err().to_string().contains("no sudoers rule"),
        "{}",
        run.err()
    );
}

#[tokio::test]
async fn proxmox_tool_without_root_is_exit_9() {
    // The first block of the transcript: pvesh run as a user without root, exit 255.
    let name = "pve/pvesh_cluster_status_json_standalone_pve9.1_and_nonroot_error.transcript.txt";
    let host = Replay::new("pve").expect(
        &words("sudo -n /usr/bin/pvesh get /cluster/status --output-format json"),
        Answer::fail(255, transcript_block(name, 0)),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("cluster.status", &[]),
        None,
    )
    .await;
    assert_eq!(run.code(), 9, "{}", run.err());
    assert!(
        run.err().to_string().contains("without root"),
        "{}",
        run.err()
    );
}

#[tokio::test]
async fn a_change_lost_after_sending_is_outcome_unknown_and_nothing_follows() {
    // VM 102 is stopped on pve1: the start is sent, and the connection dies under it.
    let host = Replay::new("pve")
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/qemu/102/status/current --output-format json",
            ),
            Answer::ok(fixture(
                "replay/pvesh_get_qemu_status_current_stopped_sim.json",
            )),
        )
        .expect(
            &words(
                "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/102/status/start --output-format json",
            ),
            Answer::Lost,
        );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.start", &[("vmid", "102"), ("node", "pve1")]),
        None,
    )
    .await;
    // Sent, and its result never came: neither a failure nor a success (exit 11).
    assert_eq!(run.code(), 11, "{}", run.err());
    assert_eq!(run.err().kind(), "outcome_unknown");
    assert!(
        run.err()
            .to_string()
            .contains("may or may not have happened"),
        "{}",
        run.err()
    );
    assert_eq!(
        run.host.count(),
        2,
        "the status read, the start, and no task status after a lost connection"
    );
}

#[tokio::test]
async fn a_read_whose_connection_is_lost_is_exit_7() {
    let host = Replay::new("pve").expect(
        &words("sudo -n /usr/bin/pvesh get /nodes --output-format json"),
        Answer::Lost,
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("node.list", &[]),
        None,
    )
    .await;
    assert_eq!(run.code(), 7, "{}", run.err());
    assert_eq!(run.err().kind(), "connection_failed");
}

#[tokio::test]
async fn reads_are_normalized_into_their_view() {
    // The real /nodes capture (pve/https_api_nodes_pve7.4-8.0_capture.json), 4 nodes.
    let nodes = api_data("pve/https_api_nodes_pve7.4-8.0_capture.json");
    let host = Replay::new("pve").expect(
        &words("sudo -n /usr/bin/pvesh get /nodes --output-format json"),
        Answer::ok(one_line(&nodes)),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("node.list", &[]),
        None,
    )
    .await;
    let list = run.data().as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|n| n["node"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "sorted by node");
    assert_eq!(list.len(), nodes.as_array().unwrap().len());
    assert_eq!(
        *run.data(),
        crate::views::normalize(catalog::View::Nodes, &nodes, None).unwrap()
    );

    // `vm list` over the real /cluster/resources guests: qemu only, by VMID.
    let host = Replay::new("pve").expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer());
    let run = execute(&Policy::default(), host, &invocation("vm.list", &[]), None).await;
    let ids: Vec<u64> = run
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["vmid"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [100, 101, 102, 200]);
    assert_eq!(run.data()[0]["name"], "server1");
    assert_eq!(run.data()[0]["node"], "node2");
}

/// A task's status while it runs: the stopped status of the same task without `exitstatus`
/// and with `"status":"running"` (FORMATS.md §2.12: `exitstatus` is present only once stopped).
fn running_status(stopped: &str) -> String {
    let mut v: Value = serde_json::from_str(stopped).unwrap();
    v.as_object_mut().unwrap().remove("exitstatus");
    v["status"] = Value::from("running");
    one_line(&v)
}

#[tokio::test]
async fn task_wait_follows_a_task_to_its_end() {
    let ok = fixture("replay/pvesh_get_task_status_stop_ok_sim.json");
    let upid = "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstop:100:root@pam:";
    let status = words(&format!(
        "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
    ));
    let host = Replay::new("pve")
        .expect(&status, Answer::ok(running_status(&ok)))
        .expect(&status, Answer::ok(running_status(&ok)))
        .expect(&status, Answer::ok(ok.clone()));
    // The node comes from the UPID: no lookup.
    let wait = invocation("task.wait", &[("upid", upid)]);
    let run = execute(&Policy::default(), host, &wait, None).await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["exitstatus"], "OK");
    assert_eq!(run.sent().len(), 3);
    assert_eq!(super::human(&wait, run.data()), format!("task {upid}: OK"));

    // A task that failed is exit 1 with its log's tail, like an action's own task.
    let failed = fixture("replay/pvesh_get_task_status_snapshot_failed_sim.json");
    let upid = "UPID:pve1:000F426A:0735B406:6B0EB392:qmsnapshot:100:root@pam:";
    let host = Replay::new("pve")
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
            )),
            Answer::ok(failed),
        )
        .expect(
            &words(&format!(
                "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/log --limit 5000 --output-format json"
            )),
            Answer::ok(fixture("replay/pvesh_get_task_log_snapshot_failed_sim.json")),
        );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("task.wait", &[("upid", upid)]),
        None,
    )
    .await;
    assert_eq!(run.code(), 1, "{}", run.err());
    assert!(
        run.err().to_string().contains("lvcreate snapshot"),
        "{}",
        run.err()
    );
}

#[tokio::test]
async fn task_wait_gives_up_at_the_timeout_with_exit_7() {
    let ok = fixture("replay/pvesh_get_task_status_stop_ok_sim.json");
    let upid = "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstop:100:root@pam:";
    let status = words(&format!(
        "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
    ));
    let host = Arc::new(
        Replay::new("pve")
            .expect(&status, Answer::ok(running_status(&ok)))
            .expect(&status, Answer::ok(running_status(&ok))),
    );
    let connector = Fixed(Remote::over(
        host.clone(),
        "zen-agent@pve:22".into(),
        Some(std::time::Duration::from_secs(2)),
    ));
    let engine = Engine {
        policy: &Policy::default(),
        connector: &connector,
        interactive: false,
        taint: None,
    };
    let started = std::time::Instant::now();
    let err = engine
        .execute(
            &invocation("task.wait", &[("upid", upid)]),
            None,
            &mut Trail::default(),
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(err.exit_code(), 7, "{err}");
    assert!(err.to_string().contains("still running after 2s"), "{err}");
    assert!(err.to_string().contains("task stop"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    host.finish().unwrap();
}

#[tokio::test]
async fn task_stop_deletes_the_task_on_its_own_node() {
    // `pvesh delete /nodes/N/tasks/UPID` returns null: pvesh prints nothing (FORMATS.md §1.6).
    let upid = "UPID:pve2:000F4271:0735BBD7:6B0EB3A6:vzdump:101:root@pam:";
    let host = Replay::new("pve").expect(
        &words(&format!(
            "sudo -n /usr/bin/pvesh delete /nodes/pve2/tasks/{upid} --output-format json"
        )),
        Answer::ok(""),
    );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("task.stop", &[("upid", upid)]),
        None,
    )
    .await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.data()["done"], true);
}

#[tokio::test]
async fn a_guest_that_moved_is_followed_to_its_new_node() {
    // The map says VM 101 is on node1; Proxmox says its config is not there (it migrated):
    // the engine reads the map once more and sends the op again where the guest is now.
    let Answer::Exit(out) = guests_answer() else {
        unreachable!()
    };
    let mut guests: Value = serde_json::from_slice(&out.stdout).unwrap();
    for g in guests.as_array_mut().unwrap() {
        if g["vmid"] == 101 {
            g["node"] = "node3".into();
        }
    }
    let moved = one_line(&guests);
    let host = Replay::new("pve")
        .expect(&words(CLUSTER_RESOURCES_GUESTS), guests_answer())
        .expect(
            &words("sudo -n /usr/bin/pvesh get /nodes/node1/qemu/101/status/current --output-format json"),
            Answer::fail(2, "Configuration file 'nodes/node1/qemu-server/101.conf' does not exist\n"),
        )
        .expect(&words(CLUSTER_RESOURCES_GUESTS), Answer::ok(moved))
        .expect(
            &words("sudo -n /usr/bin/pvesh get /nodes/node3/qemu/101/status/current --output-format json"),
            Answer::ok(fixture("replay/pvesh_get_qemu_status_current_running_sim.json")),
        );
    let run = execute(
        &Policy::default(),
        host,
        &invocation("vm.status", &[("vmid", "101")]),
        None,
    )
    .await;
    assert_eq!(run.code(), 0, "{}", run.err());
    assert_eq!(run.trail.argv, run.sent()[3]);
}

mod guests;
mod newops;
mod pve;
