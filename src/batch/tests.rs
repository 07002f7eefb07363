//! In-process tests of a whole batch over a [`Replay`] (with a delay per command, so requests
//! really overlap): input order of the results under concurrency, one guest-map read for many
//! lookups, refusals that send nothing, bad lines that do not stop the batch, the order of
//! requests on one guest, `--stop-on-error`, and the exit code. Answers are the recorded
//! outputs in `tests/fixtures/` that the engine tests use.

use crate::base::testing::{fixture, words};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::remote::Remote;
use crate::remote::replay::{Answer, Replay};
use crate::remote::transport::{BoxFuture, Transport};
use crate::ssh::Captured;

const MAP: &str = "sudo -n /usr/bin/pvesh get /cluster/resources --type vm --output-format json";

/// The guests of the real capture (VM 100 on node2; 101, 102, 200 on node1).
fn map_answer() -> Answer {
    let body: Value = serde_json::from_str(&fixture(
        "pve/https_api_cluster_resources_pve7.4-8.0_capture.json",
    ))
    .unwrap();
    let guests: Vec<Value> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| matches!(r["type"].as_str(), Some("qemu" | "lxc")))
        .cloned()
        .collect();
    Answer::ok(format!("{}\n", Value::Array(guests)))
}

fn node_of(vmid: u64) -> &'static str {
    if vmid == 100 { "node2" } else { "node1" }
}

fn status(vmid: u64) -> Vec<String> {
    words(&format!(
        "sudo -n /usr/bin/pvesh get /nodes/{}/qemu/{vmid}/status/current --output-format json",
        node_of(vmid)
    ))
}

fn running() -> Answer {
    Answer::ok(fixture(
        "replay/pvesh_get_qemu_status_current_running_sim.json",
    ))
}

/// A replay whose answers take `delay(argv)`: later requests may finish first. It counts the
/// most commands it had running at once.
#[derive(Debug)]
struct Delayed {
    host: Arc<Replay>,
    delay: fn(&[String]) -> Duration,
    running: Arc<(AtomicUsize, AtomicUsize)>,
}

impl Transport for Delayed {
    fn exec_streaming<'a>(
        &'a self,
        argv: &'a [String],
        on_stdout: &'a mut (dyn FnMut(&[u8]) + Send),
    ) -> BoxFuture<'a, crate::base::error::Result<Captured>> {
        Box::pin(async move {
            let (now, most) = &*self.running;
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep((self.delay)(argv)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            self.host.exec_streaming(argv, on_stdout).await
        })
    }
    fn exec_with_stdin<'a>(
        &'a self,
        argv: &'a [String],
        input: &'a [u8],
    ) -> BoxFuture<'a, crate::base::error::Result<Captured>> {
        self.host.exec_with_stdin(argv, input)
    }
    fn exec_many(
        &self,
        cmds: Vec<Vec<String>>,
    ) -> BoxFuture<'_, Vec<crate::base::error::Result<Captured>>> {
        self.host.exec_many(cmds)
    }
    fn close(&self) -> BoxFuture<'_, ()> {
        self.host.close()
    }
    fn is_closed(&self) -> bool {
        self.host.is_closed()
    }
    fn host_key(&self) -> &str {
        self.host.host_key()
    }
    fn server_auth_methods(&self) -> Option<Vec<String>> {
        self.host.server_auth_methods()
    }
    fn recorded_host_key(&self) -> Option<&str> {
        self.host.recorded_host_key()
    }
}

struct Fixed(Remote);

impl Connector for Fixed {
    async fn remote(&self) -> crate::base::error::Result<Remote> {
        Ok(self.0.clone())
    }
}

fn options() -> Options {
    Options {
        stop: None,
        stop_on_error: false,
        dry_run: false,
        exec_timeout: Duration::from_secs(5),
        label: None,
        host: None,
        account: None,
        refuse_changes: None,
        audit: false,
        refuse_phrases: None,
        taint: Default::default(),
    }
}

/// What a batch wrote and returned.
struct Ran {
    lines: Vec<Value>,
    code: u8,
    host: Arc<Replay>,
    /// The most commands that ran at once.
    most: usize,
}

async fn batch(host: Replay, delay: fn(&[String]) -> Duration, input: &str, opts: Options) -> Ran {
    let host = Arc::new(host);
    let running = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let remote = Remote::new(
        Delayed {
            host: host.clone(),
            delay,
            running: running.clone(),
        },
        "zen-agent@pve:22".into(),
        None,
    );
    let lines: Vec<Line> = input.lines().map(|l| Ok(l.to_string())).collect();
    let mut out = Vec::new();
    let code = run(
        Arc::new(Policy::default()),
        Arc::new(Fixed(remote)),
        lines_from(Arc::new(lines)),
        opts,
        &mut |l| out.push(serde_json::from_str(l).unwrap()),
    )
    .await;
    if let Err(problems) = host.finish() {
        panic!("the host saw something else than expected:\n{problems}");
    }
    Ran {
        lines: out,
        code,
        host,
        most: running.1.load(Ordering::SeqCst),
    }
}

/// VM 100's answers are slow, the others fast: with requests overlapping, results come back
/// out of order and must be written in input order.
fn slow_100(argv: &[String]) -> Duration {
    let slow = argv.iter().any(|a| a.contains("/qemu/100/"));
    Duration::from_millis(if slow { 30 } else { 2 })
}

#[tokio::test]
async fn fifty_requests_fifty_results_in_input_order_with_one_map_read() {
    let ids = [100u64, 101, 102, 200];
    let mut host = Replay::new("pve").expect(&words(MAP), map_answer());
    let mut input = String::new();
    for i in 0..50 {
        let id = ids[i % 4];
        host = host.expect(&status(id), running());
        input.push_str(&format!(
            "{{\"id\": {i}, \"op\": \"vm.status\", \"args\": {{\"vmid\": {id}}}}}\n"
        ));
    }
    let ran = batch(host, slow_100, &input, options()).await;
    assert_eq!(ran.code, 0);
    assert_eq!(ran.lines.len(), 50);
    for (i, l) in ran.lines.iter().enumerate() {
        assert_eq!(l["id"], i, "{l}");
        assert_eq!(l["ok"], true, "{l}");
        assert_eq!(l["op"], "vm.status");
        assert_eq!(l["data"]["status"], "running");
    }
    assert_eq!(ran.host.count(), 51, "one guest-map read and 50 statuses");
    assert_eq!(ran.most, MAX_IN_FLIGHT, "eight at a time, never more");
}

#[tokio::test]
async fn an_unconfirmed_destroy_is_refused_and_sends_nothing_while_the_rest_runs() {
    // VM 101 runs: the destroy is checked before its phrase is asked for, and
    // Proxmox would refuse it, so it ends as wrong_state with nothing but reads sent.
    let host = Replay::new("pve")
        .expect(&words(MAP), map_answer())
        .expect(&status(101), running())
        .expect(&status(101), running());
    let input = r#"{"id":"d","op":"vm.destroy","args":{"vmid":101}}
{"id":"s","op":"vm.status","args":{"vmid":101}}"#;
    let ran = batch(host, slow_100, input, options()).await;
    assert_eq!(ran.lines[0]["ok"], false);
    assert_eq!(ran.lines[0]["id"], "d");
    assert_eq!(ran.lines[0]["line"], 1);
    assert_eq!(ran.lines[0]["error"]["kind"], "wrong_state");
    assert_eq!(ran.lines[1]["ok"], true);
    assert_eq!(ran.code, 1);
    assert!(
        ran.host
            .sent_argv()
            .iter()
            .all(|a| !a.iter().any(|w| w.contains("delete") || w == "destroy")),
        "{:?}",
        ran.host.sent_argv()
    );
}

#[tokio::test]
async fn a_garbage_line_is_an_error_line_and_the_batch_goes_on() {
    let host = Replay::new("pve")
        .expect(&words(MAP), map_answer())
        .expect(&status(102), running());
    let input = "this is not json\n\n{\"op\":\"vm.nope\",\"id\":3}\n{\"id\":4,\"op\":\"vm.status\",\"args\":{\"vmid\":102}}\n";
    let ran = batch(host, slow_100, input, options()).await;
    assert_eq!(ran.lines.len(), 3, "the blank line is skipped");
    assert_eq!(ran.lines[0]["ok"], false);
    assert_eq!(ran.lines[0]["id"], Value::Null);
    assert_eq!(ran.lines[0]["line"], 1);
    assert_eq!(ran.lines[0]["error"]["kind"], "invalid_input");
    assert_eq!(ran.lines[1]["id"], 3);
    assert_eq!(ran.lines[1]["line"], 3);
    assert!(
        ran.lines[1]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown op 'vm.nope'")
    );
    assert_eq!(ran.lines[2]["ok"], true);
    assert_eq!(ran.code, 2);
}

#[tokio::test]
async fn a_change_keeps_its_place_among_the_requests_for_its_guest() {
    // Line 1 stops VM 100 (slow); line 2 reads VM 100's status and must wait for it, while
    // line 3 (another guest) runs at once.
    let upid = "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstop:100:root@pam:";
    let stop =
        "sudo -n /usr/bin/pvesh create /nodes/node2/qemu/100/status/stop --output-format json";
    let task =
        format!("sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json");
    let host = Replay::new("pve")
        .expect(&words(MAP), map_answer())
        // The map says VM 100 runs: the stop needs no status read of its own.
        .expect(
            &words(stop),
            Answer::ok(fixture("replay/pvesh_create_stop_sim.stdout")),
        )
        .expect(
            &words(&task),
            Answer::ok(fixture("replay/pvesh_get_task_status_stop_ok_sim.json")),
        )
        .expect(&status(101), running())
        // The stop forgot VM 100's map entry: it is looked up again.
        .expect(&words(MAP), map_answer())
        .expect(&status(100), running());
    let input = r#"{"id":1,"op":"vm.stop","args":{"vmid":100,"confirm":"yes stop 100"}}
{"id":2,"op":"vm.status","args":{"vmid":100}}
{"id":3,"op":"vm.status","args":{"vmid":101}}"#;
    let ran = batch(host, slow_100, input, options()).await;
    assert_eq!(ran.code, 0, "{:?}", ran.lines);
    let sent = ran.host.sent_argv();
    let at = |argv: &[String]| sent.iter().position(|s| s == argv).unwrap();
    let last = |argv: &[String]| sent.iter().rposition(|s| s == argv).unwrap();
    assert!(at(&status(101)) < at(&words(stop)) + 2, "{sent:?}");
    assert!(last(&status(100)) > at(&words(&task)), "{sent:?}");
}

#[tokio::test]
async fn stop_on_error_runs_nothing_after_the_first_failure() {
    let host = Replay::new("pve")
        .expect(&words(MAP), map_answer())
        .expect(&status(101), running());
    let input = r#"{"id":1,"op":"vm.status","args":{"vmid":101}}
{"id":2,"op":"vm.status","args":{"vmid":99}}
{"id":3,"op":"vm.status","args":{"vmid":102}}"#;
    let mut opts = options();
    opts.stop_on_error = true;
    let ran = batch(host, slow_100, input, opts).await;
    assert_eq!(ran.lines.len(), 2);
    assert_eq!(ran.lines[1]["ok"], false);
    assert_eq!(ran.code, 2);
    assert_eq!(ran.host.count(), 2, "line 3 never ran");
    assert_eq!(ran.most, 1, "one at a time");
}

#[tokio::test]
async fn a_dry_run_sends_nothing_and_fleet_labels_and_refusals_apply() {
    let input = r#"{"id":1,"op":"vm.start","args":{"vmid":101}}
{"id":2,"op":"vm.destroy","args":{"vmid":101,"confirm":"yes destroy 101"}}"#;
    let mut opts = options();
    opts.dry_run = true;
    opts.label = Some("edge1".into());
    opts.refuse_phrases = Some("one phrase confirms one host".into());
    let ran = batch(Replay::new("pve"), slow_100, input, opts).await;
    assert_eq!(ran.lines[0]["host"], "edge1");
    assert_eq!(ran.lines[0]["data"]["dry_run"], true);
    assert_eq!(ran.lines[1]["error"]["kind"], "confirmation_required");
    assert_eq!(ran.code, 4);
    let mut opts = options();
    opts.refuse_changes = Some("the hosts were not listed by name".into());
    let ran = batch(Replay::new("pve"), slow_100, input, opts).await;
    assert_eq!(ran.lines[0]["error"]["kind"], "policy_refused");
    assert_eq!(ran.code, 3);
    assert_eq!(ran.host.count(), 0);
}
