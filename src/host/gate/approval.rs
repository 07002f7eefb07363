//! The gate's side of signed approvals: issue the statement a human must sign when the host
//! policy says `approve`, and check the approval that comes back ([`crate::approval`] does
//! the statement, signature and nonce work).
//!
//! The gate issues each statement (its host name and machine id, the account, the op, every
//! parameter value, a nonce, an expiry) in its refusal and remembers it in its state directory, so a bare signature from
//! `ssh-keygen -Y sign` can be matched without the client carrying the statement back; an
//! approval that carries its statement (`pxagent approve --ttl`) is checked as it is. Either
//! way, the signature must be by a key in the approvers file over a statement for exactly
//! this request, unexpired, and its nonce is used once on this host: the record of used
//! nonces is the host's, shared by every gated account.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Options, RequestFacts, trusted_file};
use crate::approval::{
    self, Approvers, DEFAULT_TTL, NonceStore, Pending, Place, Rejection, Requested, Statement,
};
use crate::base::gate_protocol::{ApprovalRequest, FileState, Refusal, RefusalKind};
use crate::catalog::invocation::Invocation;

/// What an approval is asked for: a catalog operation with its values, or one of the gate's
/// own requests (a freeze, a thaw) under a name no catalog op has.
pub(super) struct Subject {
    /// The statement's `op`.
    pub op: String,
    /// Its parameters.
    pub args: BTreeMap<String, String>,
    /// The request as people read it (`vm destroy 100`, `freeze`).
    pub display: String,
}

impl Subject {
    /// A catalog operation with its values.
    pub fn of(inv: &Invocation) -> Subject {
        Subject {
            op: inv.op.id.to_string(),
            args: inv
                .values
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            display: inv.display(),
        }
    }
}

/// An approval that held.
pub(super) struct Accepted {
    /// The approver: key fingerprint and comment.
    pub approver: String,
    /// The statement signed.
    pub statement: Statement,
    /// The armored signature.
    pub signature: String,
}

/// Check the approval for `subject`. `rule` names the policy rule that asks for it (for
/// messages).
pub(super) fn check(
    opts: &Options,
    ctx: &RequestFacts,
    state: &Path,
    subject: &Subject,
    text: Option<&str>,
    rule: &str,
) -> Result<Accepted, Box<Refusal>> {
    let unavailable = |m: String| Box::new(Refusal::new(RefusalKind::PolicyUnavailable, m));
    trusted_file(&opts.approvers, ctx.uid).map_err(unavailable)?;
    let approvers = Approvers::load(&opts.approvers).map_err(|e| {
        unavailable(format!(
            "the approvers file cannot be used ({e}), so no approval can be checked; fix {} (as root)",
            opts.approvers.display()
        ))
    })?;
    let args = &subject.args;
    let machine_id = ctx.machine_id.as_deref().map_err(|why| {
        unavailable(format!(
            "{why}: every approval names the host's machine id to tell this host from another of the same name, so no approval can be issued or checked; create it as root: systemd-machine-id-setup (or dbus-uuidgen --ensure=/etc/machine-id)"
        ))
    })?;
    let place = Place {
        host: &ctx.host,
        machine_id,
        account: &ctx.account,
    };
    let req = Requested {
        place,
        op: &subject.op,
        args,
    };
    let store = |dir: &str| state.join(dir);
    let pending =
        Pending::open(&store("pending")).map_err(|e| unavailable(state_problem(state, &e)))?;
    let ask = |kind: RefusalKind, message: String, reason: Option<&str>| -> Box<Refusal> {
        let mut r = Refusal::new(kind, message);
        r.reason = reason.map(str::to_string);
        match Statement::new(place, &subject.op, args.clone(), DEFAULT_TTL, ctx.now) {
            Ok(st) => match pending.remember(&st, &ctx.client, ctx.now) {
                Ok(()) => {
                    r.approval_request = Some(ApprovalRequest {
                        statement: st.text(),
                        expires: crate::base::time::format_rfc3339(st.expires),
                        sign_with: vec![
                            "pxagent approve --key ~/.ssh/id_ed25519 FILE".to_string(),
                            format!(
                                "ssh-keygen -Y sign -n {} -f ~/.ssh/id_ed25519 FILE",
                                approval::NAMESPACE
                            ),
                        ],
                    });
                }
                Err(e) => r
                    .message
                    .push_str(&format!(" (no statement was issued: {e})")),
            },
            Err(e) => r
                .message
                .push_str(&format!(" (no statement could be issued: {e})")),
        }
        Box::new(r)
    };
    let Some(text) = text else {
        return Err(ask(
            RefusalKind::ApprovalRequired,
            format!(
                "the host policy wants a human's signed approval for `{}` ({rule}); nothing ran. Save the statement in approval_request to a file, have an approver sign it (`pxagent approve --key KEY FILE`, or `ssh-keygen -Y sign -n {} -f KEY FILE`), then send the same request again with the signature (`--approval SIGFILE`; MCP: `approval`)",
                subject.display,
                approval::NAMESPACE
            ),
            None,
        ));
    };
    let nonces = NonceStore::open_shared(&opts.nonce_dir).map_err(unavailable)?;
    let invalid = |rej: &Rejection| {
        ask(
            RefusalKind::ApprovalInvalid,
            format!(
                "the approval for `{}` does not hold: {rej}; nothing ran. A fresh statement is in approval_request",
                subject.display
            ),
            Some(rej.code()),
        )
    };
    let parsed =
        approval::parse_approval(text).map_err(|why| invalid(&Rejection::Malformed(why)))?;
    let statements: Vec<String> = match parsed.statement {
        Some(st) => vec![st],
        None => pending.candidates(&req, ctx.now),
    };
    if statements.is_empty() {
        return Err(invalid(&Rejection::Malformed(
            "it is a bare signature, and this gate has no unexpired statement for exactly this request (was it signed for other parameters, or has it expired?)".into(),
        )));
    }
    let mut first_rejection = None;
    for st in &statements {
        match approval::check(&approvers, &nonces, &req, st, &parsed.signature, ctx.now) {
            Ok(v) => {
                pending.mark_used(&v.statement.nonce);
                return Ok(Accepted {
                    approver: format!("{} {}", v.fingerprint, v.comment)
                        .trim()
                        .to_string(),
                    statement: v.statement,
                    signature: parsed.signature.clone(),
                });
            }
            Err(rej) => {
                first_rejection.get_or_insert(rej);
            }
        }
    }
    Err(invalid(&first_rejection.unwrap_or_else(|| {
        Rejection::Malformed("no statement matched".into())
    })))
}

fn state_problem(state: &Path, e: &str) -> String {
    format!(
        "the gate's state directory {} is not usable ({e}); create it as root: install -d -o ACCOUNT -m 0700 {}",
        state.display(),
        state.display()
    )
}

/// The approvers file as the preflight sees it.
pub(super) fn describe(path: &Path, uid: u32) -> FileState {
    let shown = path.display().to_string();
    let state = |ok: bool, detail: String| FileState {
        path: shown.clone(),
        ok,
        detail,
    };
    if !path.exists() {
        return state(
            true,
            "absent: no approvals can be given (an `approve` rule then refuses)".into(),
        );
    }
    if let Err(e) = trusted_file(path, uid) {
        return state(false, e);
    }
    match Approvers::load(path) {
        Ok(a) => state(true, format!("{} key(s)", a.len())),
        Err(e) => state(false, e),
    }
}
