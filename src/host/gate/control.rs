//! The control directory: the approvers' signed requests the gate keeps (freezes and thaws
//! of [`super::freeze`], grants and revocations of [`super::grants`]), one JSON record per
//! statement, `<kind>-<nonce>.json`, in a root-owned sticky directory every gated account's
//! gate writes (`--control-dir`, default `/var/lib/pxagent/.control`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::approval::{self, Subject};
use super::{Options, RequestFacts};
use crate::base::gate_protocol::{Envelope, Refusal, RefusalKind};

/// The longest record file read.
const MAX_RECORD: u64 = 64 * 1024;

/// What the gate keeps of an approver's signed request (a freeze, thaw, grant, revocation).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Record {
    /// The statement signed.
    pub statement: String,
    /// Its armored signature.
    pub signature: String,
    /// The approver's key fingerprint and comment.
    pub approver: String,
    /// The account whose gate recorded it.
    pub account: String,
    /// When (Unix seconds).
    pub at: u64,
}

/// `<kind>-<id>.json` with a 32-hex id and a kind the control directory keeps (`freeze`,
/// `thaw`, `grant`, `revoke`): the kind and the id.
pub(super) fn record_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".json")?;
    let (kind, id) = stem.split_once('-')?;
    (matches!(kind, "freeze" | "thaw" | "grant" | "revoke") && crate::approval::valid_nonce(id))
        .then_some((kind, id))
}

pub(super) fn read_record(path: &Path) -> Option<Record> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path).ok()?, MAX_RECORD),
        &mut bytes,
    )
    .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The approver's signature over `subject` (without one, the refusal carries the statement
/// to sign), recorded in the control directory as a `kind` record: the approver and the
/// record's id (the statement's nonce).
pub(super) fn signed_record(
    opts: &Options,
    ctx: &RequestFacts,
    env: &Envelope,
    subject: &Subject,
    kind: &str,
    audit: &mut Value,
) -> Result<(String, String), Box<Refusal>> {
    crate::approval::shared_dir(&opts.control_dir, "control directory")
        .map_err(|m| Box::new(Refusal::new(RefusalKind::PolicyUnavailable, m)))?;
    let accepted = approval::check(
        opts,
        ctx,
        &ctx.state_dir(opts),
        subject,
        env.approval.as_deref(),
        &format!("an approver's signed {kind}"),
    )?;
    audit["approver"] = json!(accepted.approver);
    let id = accepted.statement.nonce.clone();
    Ok((write_record(opts, ctx, kind, accepted)?, id))
}

/// Record an approver's signed request in the control directory as `<kind>-<nonce>.json`
/// (created once, never overwritten); returns the approver.
fn write_record(
    opts: &Options,
    ctx: &RequestFacts,
    kind: &str,
    accepted: approval::Accepted,
) -> Result<String, Box<Refusal>> {
    let record = Record {
        statement: accepted.statement.text(),
        signature: accepted.signature,
        approver: accepted.approver,
        account: ctx.account.clone(),
        at: ctx.now,
    };
    let path = opts
        .control_dir
        .join(format!("{kind}-{}.json", accepted.statement.nonce));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&path)
        .and_then(|mut f| {
            f.write_all(
                serde_json::to_string(&record)
                    .unwrap_or_default()
                    .as_bytes(),
            )?;
            f.sync_all()
        });
    if let Err(e) = written {
        return Err(Box::new(Refusal::new(
            RefusalKind::PolicyUnavailable,
            format!(
                "the signed {kind} holds, but the gate cannot record it in {} ({e}); nothing changed",
                path.display()
            ),
        )));
    }
    Ok(record.approver)
}
