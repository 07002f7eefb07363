//! `pxagent batch` on the bed: 50 requests give 50 results in input order over one connection, and
//! — the fewest host commands — a batch of 50 `vm status` sends at most 51 commands (one guest-map
//! read, then the statuses), as sudo's own log and sshd's show; an unconfirmed `vm destroy` line is
//! refused without anything reaching the host; a garbage line is an error line and a non-zero exit;
//! every request is audited.

use serde_json::Value;

use crate::support::*;

/// The bed's VMs (qemu guests), by VMID.
fn vms() -> Vec<u64> {
    sim_get("/cluster/resources", &["--type", "vm"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["type"] == "qemu")
        .map(|g| g["vmid"].as_u64().unwrap())
        .collect()
}

fn result_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn fifty_status_requests_are_fifty_ordered_results_in_at_most_51_host_commands() {
    let _g = lock();
    clear_faults();
    let ids = vms();
    assert!(ids.len() >= 3, "the simulator has VMs: {ids:?}");
    let mut input = String::new();
    for i in 0..50 {
        let id = ids[i % ids.len()];
        input.push_str(&format!(
            "{{\"id\": \"r{i}\", \"op\": \"vm.status\", \"args\": {{\"vmid\": {id}}}}}\n"
        ));
    }
    // sshd's offset first, sudo's a little later: every command of a connection that started
    // before the first offset has reached sudo's log before the second (see below).
    let sshd_at = sshd_log_len();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sudo_at = sudo_log_len();
    let home = Home::new();
    let r = home.px().bed().args(["batch"]).stdin(input).run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let lines = result_lines(&r.stdout);
    assert_eq!(lines.len(), 50);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["id"], format!("r{i}"), "input order: {l}");
        assert_eq!(l["ok"], true, "{l}");
        assert_eq!(l["data"]["vmid"], ids[i % ids.len()], "{l}");
    }
    // One connection ran the batch; it is the one with at least 50 sessions (commands).
    let conns = sshd_connections_since(sshd_at);
    let ours: Vec<&SshdConnection> = conns.iter().filter(|c| c.sessions >= 50).collect();
    assert_eq!(ours.len(), 1, "one connection for the batch: {conns:?}");
    assert!(
        ours[0].sessions <= 51,
        "the batch sent {} commands: {conns:?}",
        ours[0].sessions
    );
    // sudo saw those, plus whatever other tests' connections ran meanwhile (sshd counts
    // them): no more.
    let others: usize = conns
        .iter()
        .filter(|c| c.port != ours[0].port)
        .map(|c| c.sessions)
        .sum();
    let sudo = sudo_commands_since(sudo_at);
    assert!(
        sudo.len() <= 51 + others,
        "sudo logged {} commands ({others} from other connections): {sudo:#?}",
        sudo.len()
    );
    let statuses = sudo
        .iter()
        .filter(|c| c.contains("/status/current"))
        .count();
    assert!(statuses >= 50, "{sudo:#?}");
    // Each request is one audit record, `via: batch`.
    let audit = std::fs::read_to_string(home.audit_log()).unwrap();
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 50);
    assert!(
        records
            .iter()
            .all(|r| r["via"] == "batch" && r["op"] == "vm.status")
    );
}

#[test]
fn an_unconfirmed_destroy_line_is_refused_and_nothing_runs() {
    let _g = lock();
    clear_faults();
    // A stopped VM: a running one is refused before any phrase is asked.
    let id = sim_get("/cluster/resources", &["--type", "vm"])
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["type"] == "qemu" && g["status"] == "stopped" && g["hastate"].is_null())
        .map(|g| g["vmid"].as_u64().unwrap())
        .expect("a stopped VM on the bed");
    let at = sudo_log_len();
    let input = format!(
        "{{\"id\": 1, \"op\": \"vm.destroy\", \"args\": {{\"vmid\": {id}}}}}\n{{\"id\": 2, \"op\": \"vm.destroy\", \"args\": {{\"vmid\": {id}, \"confirm\": \"yes destroy 1{id}\"}}}}\n"
    );
    let r = px().bed().args(["batch"]).stdin(input).run();
    let lines = result_lines(&r.stdout);
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    // No phrase, then a wrong one: two kinds, one owner of the phrase.
    for (l, kind) in lines
        .iter()
        .zip(["confirmation_required", "confirmation_mismatch"])
    {
        assert_eq!(l["ok"], false, "{l}");
        assert_eq!(l["error"]["kind"], kind, "{l}");
        assert_eq!(l["error"]["phrase"], format!("yes destroy {id}"), "{l}");
        assert_eq!(l["error"]["phrase_from"], "user", "{l}");
        assert!(
            l["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("yes destroy {id}")),
            "{l}"
        );
    }
    assert_eq!(lines[0]["line"], 1);
    assert_eq!(lines[1]["line"], 2);
    assert_eq!(r.code, 4, "every failure was a confirmation refusal");
    assert_not_sent(at, &["delete", "destroy"]);
    assert_ne!(status_of(id), "absent");
}

#[test]
fn a_garbage_line_is_an_error_line_and_the_exit_is_not_zero() {
    let _g = lock();
    clear_faults();
    let id = vms()[0];
    let input = format!(
        "{{\"id\": \"a\", \"op\": \"vm.status\", \"args\": {{\"vmid\": {id}}}}}\nthis is }} not json\n{{\"id\": \"c\", \"op\": \"pve.version\"}}\n"
    );
    let r = px().bed().args(["batch"]).stdin(input).run();
    let lines = result_lines(&r.stdout);
    assert_eq!(lines.len(), 3, "{}", r.stderr);
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[1]["ok"], false);
    assert_eq!(lines[1]["id"], Value::Null);
    assert_eq!(lines[1]["line"], 2);
    assert_eq!(lines[1]["error"]["kind"], "invalid_input");
    assert_eq!(lines[2]["ok"], true, "the batch went on");
    assert_eq!(r.code, 2);
    // --stop-on-error: nothing after the bad line.
    let r = px()
        .bed()
        .args(["batch", "--stop-on-error"])
        .stdin("garbage\n{\"op\": \"pve.version\"}\n")
        .run();
    assert_eq!(result_lines(&r.stdout).len(), 1, "{}", r.stdout);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--stop-on-error"), "{}", r.stderr);
}
