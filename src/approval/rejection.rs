//! Why an approval does not let a request run: one [`Rejection`] per failed check, with what
//! the human should do and a stable [`Rejection::code`] for programs. The checks
//! ([`super::check`]) and the nonce store ([`super::nonces`]) both answer with it.
//!
//! Layer: approval. Imports only the base layer's calendar and the namespace and lifetime limits of [`super`].

use std::fmt;

use super::{MAX_TTL, NAMESPACE};
use crate::base::time::describe_duration;

/// Why an approval does not let a request run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The statement or the approval text is not in its one valid form.
    Malformed(String),
    /// A listed key's signature that does not verify over the statement (or is too weak).
    BadSignature(String),
    /// A signature made for another purpose (its namespace).
    WrongNamespace(String),
    /// A signature by a key that is not in the approvers file.
    UnlistedKey {
        /// The signing key's `SHA256:…` fingerprint.
        fingerprint: String,
    },
    /// The statement's expiry has passed.
    Expired {
        /// When it expired (RFC 3339).
        expired: String,
    },
    /// The statement would stay valid longer than approvals may.
    TooLong {
        /// Its expiry (RFC 3339).
        expires: String,
    },
    /// The statement names another account.
    WrongAccount {
        /// The account in the statement.
        statement: String,
        /// The account the request came in as.
        request: String,
    },
    /// The statement names another host (by name or by machine id).
    WrongHost {
        /// The host in the statement.
        statement: String,
        /// This host.
        request: String,
    },
    /// The statement names another operation.
    WrongOp {
        /// The op in the statement.
        statement: String,
        /// The op requested.
        request: String,
    },
    /// The statement's parameters are not exactly the request's.
    WrongArgs {
        /// Each difference, e.g. `vmid: approved "100", requested "101"`.
        differences: Vec<String>,
    },
    /// The nonce was used before: an approval is good for one operation.
    Replayed {
        /// The nonce.
        nonce: String,
    },
    /// The nonce could not be recorded, so the approval cannot be known to be unused.
    StoreFailed(String),
}

impl Rejection {
    /// A stable snake_case name for programs (the gate's JSON, the audit).
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Malformed(_) => "malformed",
            Rejection::BadSignature(_) => "bad_signature",
            Rejection::WrongNamespace(_) => "wrong_namespace",
            Rejection::UnlistedKey { .. } => "unlisted_key",
            Rejection::Expired { .. } => "expired",
            Rejection::TooLong { .. } => "too_long",
            Rejection::WrongHost { .. } => "wrong_host",
            Rejection::WrongAccount { .. } => "wrong_account",
            Rejection::WrongOp { .. } => "wrong_op",
            Rejection::WrongArgs { .. } => "wrong_args",
            Rejection::Replayed { .. } => "replayed",
            Rejection::StoreFailed(_) => "store_failed",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fresh = "ask for the operation again and sign the fresh statement the host issues";
        match self {
            Rejection::Malformed(why) => write!(
                f,
                "approval malformed: {why}; sign the host's statement unchanged (`pxagent approve --key KEY STATEMENT`, or `ssh-keygen -Y sign -n {NAMESPACE} -f KEY statement.txt`) and pass the output whole"
            ),
            Rejection::BadSignature(why) => write!(
                f,
                "approval signature invalid: {why}; the statement was changed after signing or the signature is for another statement: {fresh}"
            ),
            Rejection::WrongNamespace(ns) => write!(
                f,
                "approval signed for namespace `{ns}`, not `{NAMESPACE}`: sign again with `-n {NAMESPACE}`"
            ),
            Rejection::UnlistedKey { fingerprint } => write!(
                f,
                "approval signed by key {fingerprint}, which is not in this host's approvers file: sign with a listed key, or have the host's admin add this one to /etc/pxagent/approvers"
            ),
            Rejection::Expired { expired } => {
                write!(f, "approval expired at {expired}: {fresh}")
            }
            Rejection::TooLong { expires } => write!(
                f,
                "approval valid until {expires}, longer than the {} an approval may last: {fresh} (a `--ttl` of at most {})",
                describe_duration(MAX_TTL),
                describe_duration(MAX_TTL)
            ),
            Rejection::WrongHost { statement, request } => write!(
                f,
                "approval is for host `{statement}`, but this host is `{request}`: sign the statement this host issued"
            ),
            Rejection::WrongAccount { statement, request } => write!(
                f,
                "approval is for account `{statement}`, but this request came in as `{request}`: an approval holds for the one account it names; sign the statement issued to this account"
            ),
            Rejection::WrongOp { statement, request } => write!(
                f,
                "approval is for op `{statement}`, but the request is `{request}`: {fresh}"
            ),
            Rejection::WrongArgs { differences } => write!(
                f,
                "approval's parameters differ from the request's ({}): {fresh}",
                differences.join("; ")
            ),
            Rejection::Replayed { nonce } => write!(
                f,
                "approval already used (nonce {nonce}); each approval allows one operation: {fresh}"
            ),
            Rejection::StoreFailed(why) => write!(
                f,
                "approval not accepted: its nonce could not be recorded ({why}), so it cannot be known to be unused; tell the host's admin"
            ),
        }
    }
}

impl std::error::Error for Rejection {}
