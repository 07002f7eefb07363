//! The gate's decision: does this approval let this request run, now?
//!
//! Checks run in a fixed order and the first failure is the answer: the statement must parse,
//! the signature must decode, be made for [`NAMESPACE`], by a listed key, and verify over the
//! statement; the statement must name this host, op and exactly these parameters; it must
//! not have expired nor last longer than [`MAX_TTL`] (plus [`CLOCK_SKEW`]); and its nonce must
//! be new. The nonce is consumed last, so a refused approval is not used up, while a
//! replayed one is refused even when everything else is right. Each [`Rejection`] says which
//! check failed and what the human should do; its [`Rejection::code`] is stable for programs.

use std::collections::BTreeMap;

use super::nonces::NonceStore;
use super::rejection::Rejection;
use super::sshsig::{self, Approver, Approvers};
use super::statement::{Place, Statement};
use super::{CLOCK_SKEW, MAX_TTL, NAMESPACE};
use crate::base::time::format_rfc3339;

/// What the agent asked the gate to run.
#[derive(Debug, Clone, Copy)]
pub struct Requested<'a> {
    /// This host and account.
    pub place: Place<'a>,
    /// The catalog op id.
    pub op: &'a str,
    /// Every parameter of the op by name.
    pub args: &'a BTreeMap<String, String>,
}

/// An approval that let a request run: who signed it, and what they signed.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The approver's key, `SHA256:…`.
    pub fingerprint: String,
    /// The approver's comment in the approvers file.
    pub comment: String,
    /// The statement that was signed.
    pub statement: Statement,
}

/// Decide whether the approval (`statement_text` signed by `signature_armored`) lets `req` run
/// at `now` (Unix seconds). On success its nonce is consumed in `nonces`.
pub fn check(
    approvers: &Approvers,
    nonces: &NonceStore,
    req: &Requested,
    statement_text: &str,
    signature_armored: &str,
    now: u64,
) -> Result<Verified, Rejection> {
    let (st, approver) = verify(approvers, statement_text, signature_armored)?;
    if st.host != req.place.host || st.machine_id != req.place.machine_id {
        return Err(Rejection::WrongHost {
            statement: format!("{} (machine id {})", st.host, st.machine_id),
            request: format!("{} (machine id {})", req.place.host, req.place.machine_id),
        });
    }
    if st.account != req.place.account {
        return Err(Rejection::WrongAccount {
            statement: st.account,
            request: req.place.account.to_string(),
        });
    }
    if st.op != req.op {
        return Err(Rejection::WrongOp {
            statement: st.op,
            request: req.op.to_string(),
        });
    }
    let differences = arg_differences(&st.args, req.args);
    if !differences.is_empty() {
        return Err(Rejection::WrongArgs { differences });
    }
    if st.expires <= now {
        return Err(Rejection::Expired {
            expired: format_rfc3339(st.expires),
        });
    }
    if st.expires > now + MAX_TTL.as_secs() + CLOCK_SKEW.as_secs() {
        return Err(Rejection::TooLong {
            expires: format_rfc3339(st.expires),
        });
    }
    nonces.consume(&st.nonce, st.expires, now)?;
    Ok(Verified {
        fingerprint: approver.fingerprint,
        comment: approver.comment,
        statement: st,
    })
}

/// The first checks of every approval, also used for the signed records the gate keeps (a
/// thaw lifts a freeze only while its signature holds): the statement parses, the signature
/// decodes, is made for [`NAMESPACE`] by a listed key, verifies over the statement, and is not
/// weak. Nothing about place, op, time or nonce.
pub fn verify(
    approvers: &Approvers,
    statement_text: &str,
    signature_armored: &str,
) -> Result<(Statement, Approver), Rejection> {
    let st = Statement::parse(statement_text)
        .map_err(|why| Rejection::Malformed(format!("statement: {why}")))?;
    let sig = sshsig::decode(signature_armored).map_err(Rejection::Malformed)?;
    if sig.namespace() != NAMESPACE {
        return Err(Rejection::WrongNamespace(crate::base::text::printable(
            sig.namespace(),
        )));
    }
    let approver = approvers
        .find(sig.public_key())
        .ok_or_else(|| Rejection::UnlistedKey {
            fingerprint: sshsig::fingerprint(sig.public_key()),
        })?;
    // The signed bytes are the canonical text, or that text without its final newline (a
    // statement saved by an editor that drops it, then signed with ssh-keygen): both are the
    // same statement.
    let canonical = st.text();
    let without_newline = canonical.trim_end_matches('\n');
    if !approver.verifies(canonical.as_bytes(), &sig)
        && !approver.verifies(without_newline.as_bytes(), &sig)
    {
        return Err(Rejection::BadSignature(format!(
            "the signature by {} does not match the statement",
            approver.fingerprint
        )));
    }
    if let Some(why) = sshsig::weak_signature(&sig) {
        return Err(Rejection::BadSignature(why.to_string()));
    }
    Ok((st, approver.clone()))
}

/// Every way `approved` and `requested` differ, by parameter name.
fn arg_differences(
    approved: &BTreeMap<String, String>,
    requested: &BTreeMap<String, String>,
) -> Vec<String> {
    let q = |v: &str| serde_json::Value::String(v.to_string()).to_string();
    let mut names: Vec<&String> = approved.keys().chain(requested.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| match (approved.get(name), requested.get(name)) {
            (Some(a), Some(r)) if a == r => None,
            (Some(a), Some(r)) => Some(format!("{name}: approved {}, requested {}", q(a), q(r))),
            (Some(a), None) => Some(format!("{name}: approved {}, not in the request", q(a))),
            (None, Some(r)) => Some(format!("{name}: requested {}, not in the approval", q(r))),
            (None, None) => None,
        })
        .collect()
}
