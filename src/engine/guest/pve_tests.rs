//! The exec flows over Proxmox's recorded answers (and the guest agent's
//! exec-status truncation flags): a program missing in a container is the guest's
//! exit 127, the guest agent's real refusals get their own hints, and a stream the agent cut is
//! reported as truncated whichever agent version cut it.

use crate::base::testing::{fixture, words};
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::catalog;
use crate::remote::Remote;
use crate::remote::replay::{Answer, Replay};

fn request(op: &str, vmid: &str, node: Option<&str>, argv: &[&str]) -> GuestRequest {
    GuestRequest {
        op: catalog::find(op).unwrap(),
        vmid: vmid.into(),
        node: node.map(String::from),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
        push: vec![],
        pull: vec![],
        force: false,
        mkdir: false,
        timeout: DEFAULT_TIMEOUT,
    }
}

fn remote(host: &Arc<Replay>) -> Remote {
    Remote::over(host.clone(), "zen-agent@pve:22".into(), None)
}

/// `ct exec 200 -- /nonexistent` is the guest's exit 127, reported like any
/// guest exit code (the command ran: exit 0 of pxagent, `exitcode` 127), not "sudo is not
/// installed". lxc-attach's line is the real capture's, with this container and program.
#[tokio::test]
async fn a_program_missing_in_a_container_is_the_guests_127() {
    let stderr = fixture("pve/pct_exec_missing_program_lxc_attach.txt")
        .replace("102", "200")
        .replace("\"pihole\"", "\"/nonexistent\"");
    let host = Arc::new(Replay::new("pve").expect(
        &words("sudo -n /usr/sbin/pct exec 200 -- /nonexistent"),
        Answer::fail(127, stderr.clone()),
    ));
    let c = request("ct.exec", "200", None, &["/nonexistent"])
        .check()
        .unwrap();
    let target = CtTarget {
        vmid: "200".into(),
        node: "pve1".into(),
    };
    let doc = ct_flow(&remote(&host), c, &target, &mut Trail::default())
        .await
        .unwrap();
    assert_eq!(doc["exitcode"], 127);
    assert_eq!(doc["stderr"], stderr);
    host.finish().unwrap();
}

/// sudo itself missing on the host is still exit 9 (the shell's own line, exit 127).
#[tokio::test]
async fn sudo_missing_is_still_exit_9() {
    let host = Arc::new(Replay::new("pve").expect(
        &words("sudo -n /usr/sbin/pct exec 200 -- true"),
        Answer::fail(127, "sh: 1: sudo: not found\n"),
    ));
    let c = request("ct.exec", "200", None, &["true"]).check().unwrap();
    let target = CtTarget {
        vmid: "200".into(),
        node: "pve1".into(),
    };
    let e = ct_flow(&remote(&host), c, &target, &mut Trail::default())
        .await
        .unwrap_err();
    assert_eq!((e.exit_code(), e.kind()), (9, "sudo_refused"), "{e}");
}

async fn vm_exec_failing_with(stderr: &str, vmid: &str) -> Error {
    let host = Arc::new(Replay::new("pve").expect(
        &words(&format!(
            "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu/{vmid}/agent/exec --command uname --output-format json"
        )),
        Answer::fail(255, stderr.to_string()),
    ));
    let c = request("vm.exec", vmid, Some("pve1"), &["uname"])
        .check()
        .unwrap();
    let e = vm_flow(&remote(&host), c, DEFAULT_TIMEOUT, &mut Trail::default())
        .await
        .unwrap_err();
    host.finish().unwrap();
    e
}

/// A guest agent started without guest-exec (RHEL's default) is exit 1 with
/// the way to allow it; the other refusals are told apart by their real texts only.
#[tokio::test]
async fn the_guest_agents_refusals_have_their_own_hints() {
    let e = vm_exec_failing_with(&fixture("pve/qm_guest_exec_disabled_rhel.txt"), "100").await;
    assert_eq!((e.exit_code(), e.kind()), (1, "remote_failed"), "{e}");
    let msg = e.to_string();
    for needle in [
        "--allow-rpcs",
        "FILTER_RPC_ARGS",
        "/etc/sysconfig/qemu-ga",
        "guest-exec-status",
        "Command guest-exec has been disabled",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    let e = vm_exec_failing_with("No QEMU guest agent configured\n", "102").await;
    assert!(e.to_string().contains("`agent: 1`"), "{e}");
    let e = vm_exec_failing_with("QEMU guest agent is not running\n", "110").await;
    assert!(e.to_string().contains("installed and running"), "{e}");
    assert_eq!(e.kind(), "remote_failed");
    let e = vm_exec_failing_with("VM 104 is not running\n", "104").await;
    assert_eq!((e.exit_code(), e.kind()), (1, "wrong_state"), "{e}");
    assert!(e.to_string().contains("pxagent vm start 104"), "{e}");
    // The broad fallback is gone: another "not running" text is not taken for the VM's.
    let e = vm_exec_failing_with("Agent error: service 'x' not running\n", "100").await;
    assert!(!e.to_string().contains("start it first"), "{e}");
}

/// `out-truncated` as fixed agents send it (with every stream that has
/// data, 0 or 1) and as older ones did (present only for a cut stream, with the value 0).
#[test]
fn truncation_is_read_from_both_agent_versions() {
    let full = "x".repeat(16 * 1024 * 1024);
    for (st, out_cut, err_cut) in [
        // QEMU ≥ 10.1: flags with each stream.
        (
            json!({"exited":1,"exitcode":0,"out-data":"hi\n","out-truncated":0,"err-data":"e","err-truncated":0}),
            false,
            false,
        ),
        (
            json!({"exited":1,"exitcode":0,"out-data":full,"out-truncated":1}),
            true,
            false,
        ),
        // Older agents: no flag for a complete stream, `0` for a cut one.
        (
            json!({"exited":1,"exitcode":0,"out-data":"hi\n"}),
            false,
            false,
        ),
        (
            json!({"exited":1,"exitcode":0,"out-data":full,"out-truncated":0,"err-data":full,"err-truncated":0}),
            true,
            true,
        ),
    ] {
        let doc = status_doc(&st);
        assert_eq!(
            (
                doc["out_truncated"].as_bool(),
                doc["err_truncated"].as_bool()
            ),
            (Some(out_cut), Some(err_cut)),
            "{}",
            st.to_string().chars().take(120).collect::<String>()
        );
    }
}
