//! The one error type of the library, and the one place that maps errors to exit codes.
//!
//! Exit codes are a fixed interface: agents branch on them, so every failure
//! must land in exactly one class, and "nothing was sent" classes (2, 3, 4, 8) must only be
//! used before anything reached the host.

use std::path::PathBuf;

/// Everything that can go wrong in pxagent, grouped by the exit code it maps to.
/// What every refusal for a missing phrase tells an agent (the JSON `instruction`, beside
/// `phrase_from: "user"`; the human text at no terminal): the phrase is the human's.
pub const PHRASE_INSTRUCTION: &str = "Nothing was sent. The phrase must come from the human user, never from you: show them what this does and ask them to reply with the phrase; if they do, run the same request again passing their reply unchanged (--confirm, or MCP \"confirm\"). Never type, guess or reuse a phrase yourself.";

/// What a refusal for a wrong phrase tells an agent: ask the human again.
pub const MISMATCH_INSTRUCTION: &str = "Nothing was sent. The phrase given is not the exact phrase: it must be exactly what the human user typed. Ask them again and pass their reply unchanged; never correct or complete a phrase yourself.";

/// What a destructive operation takes with its target and what it leaves (the
/// human is told before typing the phrase), each item one short phrase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// What goes with the target (`disk scsi0 local-lvm:vm-100-disk-0, 32 GiB`).
    pub goes: Vec<String>,
    /// What stays (`its backups`).
    pub stays: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the user, an agent or a config file; nothing was sent.
    #[error("{0}")]
    Usage(String),

    /// A file the user named could not be read; nothing was sent.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        /// The file that could not be read.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },

    /// A check found problems (e.g. `sudoers lint` found error-severity findings).
    #[error("{0}")]
    Findings(String),

    /// Local policy refused the operation; nothing was sent.
    #[error("{0}")]
    Policy(String),

    /// A soft-blacklisted operation needs the exact confirmation phrase; nothing was sent.
    #[error("{message}")]
    ConfirmationRequired {
        /// What the user (or the agent's human) is told.
        message: String,
        /// The exact phrase that would confirm this operation.
        phrase: String,
        /// An extra hint, e.g. "try `vm shutdown` first".
        hint: Option<String>,
        /// What goes with the target and what stays, where pxagent read it before asking.
        scope: Option<Box<Scope>>,
    },

    /// A confirmation phrase was given and it is not the operation's exact phrase; nothing
    /// was sent (a wrong phrase is not a missing one).
    #[error("{message}")]
    ConfirmationMismatch {
        /// What went wrong (never quoting more than a printable form of what was given).
        message: String,
        /// The exact phrase that would confirm this operation.
        phrase: String,
    },

    /// The remote operation ran and failed (non-zero exit, task ended not OK).
    #[error("{0}")]
    Remote(String),

    /// The remote operation failed because what it names does not exist on the host: a guest,
    /// snapshot, storage, archive or task (classified from Proxmox's own texts,
    /// [`crate::remote::classify`]).
    #[error("{0}")]
    NotFound(String),

    /// The remote operation failed because the guest is locked: by a running backup, snapshot,
    /// clone … (`VM is locked (backup)`) or a held config lock (`can't lock file … - got
    /// timeout`). Retry once that task has ended.
    #[error("{0}")]
    Locked(String),

    /// The remote operation failed because the guest is not in the state it needs (`VM 100 not
    /// running`, `VM 100 already running`, a template …).
    #[error("{0}")]
    WrongState(String),

    /// The guest's configuration changed since pxagent (or the caller) read it: Proxmox
    /// refused the change because the `digest` sent is no longer the config's. Nothing changed.
    #[error("{0}")]
    Conflict(String),

    /// What the operation would make is already there (an ISO image of that name): pxagent
    /// never overwrites it.
    #[error("{0}")]
    Exists(String),

    /// The storage has no room for it: the write would leave its file system fuller than the
    /// limit (`iso upload --max-used`, the host's `--iso-max-used`). Nothing was written.
    #[error("{0}")]
    NoRoom(String),

    /// The preflight found at least one failing check.
    #[error("{0}")]
    Preflight(String),

    /// `pxagent health` found a problem (a warning or a critical finding).
    #[error("{0}")]
    Unhealthy(String),

    /// Host key or authentication failure.
    #[error("{0}")]
    Auth(String),

    /// Connection failed, timed out, or was lost.
    #[error("{0}")]
    Connection(String),

    /// A change was sent and its result never arrived (the connection was lost, or timed out,
    /// after sending): it may or may not have happened. Never retried; `pxagent reconcile`
    /// finds out.
    #[error("{0}")]
    OutcomeUnknown(String),

    /// A rate limit was reached; nothing was sent. `retry_after`: seconds until the window
    /// that is full resets (JSON `retry_after`), when known.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after: Option<u64>,
    },

    /// sudo on the host refused the command.
    #[error("{0}")]
    SudoRefused(String),

    /// The host gate refused the request; nothing ran on the host.
    #[error("the host refused: {}", .0.message)]
    Host(Box<super::gate_protocol::Refusal>),

    /// A bug in pxagent.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Shorthand used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of the class that `code` stands for: relays another pxagent's failure (a
    /// `--no-wait` follower) with its exit code intact.
    pub fn from_exit_code(code: u8, msg: String) -> Error {
        match code {
            1 => Error::Remote(msg),
            2 => Error::Usage(msg),
            3 => Error::Policy(msg),
            4 => Error::ConfirmationRequired {
                message: msg,
                phrase: String::new(),
                hint: None,
                scope: None,
            },
            5 => Error::Preflight(msg),
            6 => Error::Auth(msg),
            7 => Error::Connection(msg),
            8 => Error::RateLimited {
                message: msg,
                retry_after: None,
            },
            9 => Error::SudoRefused(msg),
            11 => Error::OutcomeUnknown(msg),
            _ => Error::Internal(msg),
        }
    }

    /// The process exit code for this error (listed in docs/reference.md); the only mapping.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Remote(_)
            | Error::NotFound(_)
            | Error::Locked(_)
            | Error::WrongState(_)
            | Error::Conflict(_)
            | Error::Exists(_)
            | Error::NoRoom(_)
            | Error::Findings(_) => 1,
            Error::Usage(_) | Error::ReadFile { .. } => 2,
            Error::Policy(_) => 3,
            Error::ConfirmationRequired { .. } | Error::ConfirmationMismatch { .. } => 4,
            Error::Preflight(_) | Error::Unhealthy(_) => 5,
            Error::Auth(_) => 6,
            Error::Connection(_) => 7,
            Error::OutcomeUnknown(_) => 11,
            Error::RateLimited { .. } => 8,
            Error::SudoRefused(_) => 9,
            Error::Internal(_) => 10,
            Error::Host(r) => {
                use super::gate_protocol::RefusalKind;
                match r.kind {
                    RefusalKind::BadRequest => 2,
                    RefusalKind::PolicyRefused
                    | RefusalKind::PolicyUnavailable
                    | RefusalKind::Frozen => 3,
                    RefusalKind::ConfirmationRequired
                    | RefusalKind::ApprovalRequired
                    | RefusalKind::ApprovalInvalid => 4,
                    RefusalKind::RateLimited | RefusalKind::Runaway | RefusalKind::Budget => 8,
                    RefusalKind::NotAllowed
                    | RefusalKind::Unsupported
                    | RefusalKind::AuditUnavailable => 9,
                }
            }
        }
    }

    /// A stable machine-readable name for `error.kind` in JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Remote(_) => "remote_failed",
            Error::NotFound(_) => "not_found",
            Error::Locked(_) => "locked",
            Error::WrongState(_) => "wrong_state",
            Error::Conflict(_) => "conflict",
            Error::Exists(_) => "exists",
            Error::NoRoom(_) => "no_room",
            Error::Findings(_) => "findings",
            Error::Usage(_) | Error::ReadFile { .. } => "invalid_input",
            Error::Policy(_) => "policy_refused",
            Error::ConfirmationRequired { .. } => "confirmation_required",
            Error::ConfirmationMismatch { .. } => "confirmation_mismatch",
            Error::Preflight(_) => "preflight_failed",
            Error::Unhealthy(_) => "unhealthy",
            Error::Auth(_) => "auth_failed",
            Error::Connection(_) => "connection_failed",
            Error::OutcomeUnknown(_) => "outcome_unknown",
            Error::RateLimited { .. } => "rate_limited",
            Error::SudoRefused(_) => "sudo_refused",
            Error::Internal(_) => "internal",
            Error::Host(r) => r.kind.name(),
        }
    }

    /// The `error` object of a JSON answer (CLI and MCP): kind, message, exit code, and what
    /// the class carries (the phrase, the approval request, the refusing side).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let mut e = json!({"kind": self.kind(), "message": self.to_string(), "exit_code": self.exit_code()});
        match self {
            Error::ConfirmationRequired {
                phrase,
                hint,
                scope,
                ..
            } => {
                e["phrase"] = json!(phrase);
                e["hint"] = json!(hint);
                if let Some(sc) = scope {
                    e["goes"] = json!(sc.goes);
                    e["stays"] = json!(sc.stays);
                }
                e["phrase_from"] = json!("user");
                e["instruction"] = json!(PHRASE_INSTRUCTION);
            }
            Error::RateLimited {
                retry_after: Some(s),
                ..
            } => {
                e["retry_after"] = json!(s);
            }
            Error::ConfirmationMismatch { phrase, .. } => {
                e["phrase"] = json!(phrase);
                e["phrase_from"] = json!("user");
                e["instruction"] = json!(MISMATCH_INSTRUCTION);
            }
            Error::Host(r) => {
                e["source"] = json!("host");
                if let Some(p) = &r.phrase {
                    e["phrase"] = json!(p);
                    e["phrase_from"] = json!("user");
                    e["instruction"] = json!(PHRASE_INSTRUCTION);
                }
                if let Some(a) = &r.approval_request {
                    e["approval_request"] = json!(a);
                }
                if let Some(why) = &r.reason {
                    e["reason"] = json!(why);
                }
                if let Some(s) = r.retry_after {
                    e["retry_after"] = json!(s);
                }
                if !r.gate.is_empty() {
                    e["gate"] = json!(r.gate);
                }
            }
            _ => {}
        }
        e
    }

    /// Convenience constructor for [`Error::Usage`].
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }
}

/// The exit code of many operations reported together (a batch's requests, a fleet's hosts),
/// from the codes of those that failed: 0 when none failed; 2 when any input was
/// invalid; when every failure has one class that says nothing ran or the host could not be
/// used — 3 policy, 4 confirmation, 8 rate limit, 6 authentication, 7 connection, 9 sudo —
/// that code; otherwise 1 (some operation ran and failed, or the failures differ).
pub fn overall_exit_code(failures: &[u8]) -> u8 {
    if failures.is_empty() {
        return 0;
    }
    if failures.contains(&2) {
        return 2;
    }
    // A change whose outcome is unknown must not hide among failures: nothing may retry it.
    if failures.contains(&11) {
        return 11;
    }
    match failures[0] {
        c @ (3 | 4 | 6 | 7 | 8 | 9) if failures.iter().all(|f| *f == c) => c,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_its_documented_code() {
        let cases: Vec<(Error, u8, &str)> = vec![
            (Error::Remote("x".into()), 1, "remote_failed"),
            (Error::NotFound("x".into()), 1, "not_found"),
            (Error::Locked("x".into()), 1, "locked"),
            (Error::WrongState("x".into()), 1, "wrong_state"),
            (Error::Conflict("x".into()), 1, "conflict"),
            (Error::OutcomeUnknown("x".into()), 11, "outcome_unknown"),
            (Error::Findings("x".into()), 1, "findings"),
            (Error::usage("x"), 2, "invalid_input"),
            (Error::Policy("x".into()), 3, "policy_refused"),
            (
                Error::ConfirmationRequired {
                    message: "m".into(),
                    phrase: "p".into(),
                    hint: None,
                    scope: None,
                },
                4,
                "confirmation_required",
            ),
            (Error::Preflight("x".into()), 5, "preflight_failed"),
            (Error::Auth("x".into()), 6, "auth_failed"),
            (Error::Connection("x".into()), 7, "connection_failed"),
            (
                Error::RateLimited {
                    message: "x".into(),
                    retry_after: Some(3),
                },
                8,
                "rate_limited",
            ),
            (Error::SudoRefused("x".into()), 9, "sudo_refused"),
            (Error::Internal("x".into()), 10, "internal"),
        ];
        for (err, code, kind) in cases {
            assert_eq!(err.exit_code(), code, "{err:?}");
            assert_eq!(err.kind(), kind, "{err:?}");
        }
    }
}
