//! The gate's side of the host audit chain: each record is handed to the root-side helper
//! (`sudo -n pxagent-helper audit-append`, the record on stdin), which appends it, hash-chained
//! and MAC'd, to the root-owned `/var/log/pxagent/gate.jsonl` the account cannot change
//! (`helper/src/chain.rs`). The head it answers goes into the gate's syslog record, so a remote
//! syslog keeps the heads and a chain wiped or cut on the host is noticed there.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{Options, PATH};

/// How long the helper may take to append one record.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Append `audit` to the host chain when the gate keeps one (`--host-chain`), and note the
/// chain's new `chain_seq` and `chain_head` in it. `Err` says why it could not.
pub fn append(opts: &Options, audit: &mut Value) -> Result<(), String> {
    if !opts.host_chain {
        return Ok(());
    }
    let mut child = Command::new(&opts.sudo)
        .args(["-n", crate::catalog::pve::HELPER_PATH, "audit-append"])
        .env_clear()
        .env("PATH", PATH)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", opts.sudo.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(audit.to_string().as_bytes());
    }
    let deadline = std::time::Instant::now() + TIMEOUT;
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the helper did not answer within 10 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(crate::base::text::printable(
            String::from_utf8_lossy(&out.stderr).trim(),
        ));
    }
    let answer: Value = serde_json::from_slice(&out.stdout)
        .map_err(|_| "the helper's answer is not JSON".to_string())?;
    match (answer["seq"].as_u64(), answer["head"].as_str()) {
        (Some(seq), Some(head)) if head.len() == 64 => {
            audit["chain_seq"] = json!(seq);
            audit["chain_head"] = json!(head);
            Ok(())
        }
        _ => Err("the helper's answer names no seq and head".into()),
    }
}
