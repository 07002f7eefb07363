//! The wire protocol between pxagent and its host gate, version 1. Both sides use
//! this file, so they cannot drift.
//!
//! What reaches the gate is the SSH command line (`SSH_ORIGINAL_COMMAND`), one of:
//!
//! - **a plain catalog line**, exactly as pxagent sends it today: `sudo -n /abs/tool args…`,
//!   each word quoted by [`crate::base::text::quote_argv`] (so `ssh host 'sudo -n
//!   /usr/bin/pvesh get /version --output-format json'` keeps working for people). The line
//!   must be in that canonical quoting: re-quoting its words must give back the same bytes.
//! - **an envelope**: `pxagent-gate/1 <base64url of a JSON object>` (no padding), for what a
//!   command line cannot carry: the client's version, a confirmation phrase, a signed
//!   approval; or a `hello` that asks the gate to describe itself (the preflight). Unknown
//!   fields are refused, so a later version adds a new protocol name instead.
//!
//! A refusal is one stderr line, `pxagent-gate/1 refused <JSON of Refusal>`, and exit status
//! [`REFUSED_EXIT`]; nothing ran. The client maps the refusal's kind to its own exit codes
//! (3 policy or a frozen host, 4 confirmation or approval, 8 rate limit, runaway or budget, 9 not a catalog operation, 2 a bad
//! envelope) and reports `"source": "host"`. Anything else on stderr/stdout is sudo's or the
//! tool's, passed through untouched (the gate `exec`s sudo).

use base64ct::{Base64UrlUnpadded, Encoding};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol name, first word of an envelope and of a refusal line.
pub const PROTOCOL: &str = "pxagent-gate/1";

/// The exit status of a refused request (sudo and the PVE tools use 1, 2, 255; 125 is what
/// `env`/`timeout` use for "the wrapper itself failed").
pub const REFUSED_EXIT: u32 = 125;

/// The largest command line the gate reads: the largest sshd can hand it at all
/// ([`crate::base::text::MAX_COMMAND_LINE`], the kernel's limit on `SSH_ORIGINAL_COMMAND`), which the
/// client also refuses to exceed. A longer line never starts the gate, so it leaves no gate
/// record (sshd's log has the session); the check here only matters when the gate is started
/// some other way.
pub const MAX_LINE: usize = crate::base::text::MAX_COMMAND_LINE;

/// What the client puts in an envelope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The client's version (`pxagent 0.1.0`), for the gate's log and version errors.
    pub client: String,
    /// Ask the gate to describe itself ([`Hello`]) instead of running anything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hello: bool,
    /// The command line, `sudo -n /abs/tool args…`, as words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The confirmation phrase the client's user typed (for a host policy `confirm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
    /// A signed approval: an armored SSH signature, optionally preceded by the statement it
    /// signs (for a host policy `approve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// One of the gate's own requests instead of a command line (an approver's freeze or
    /// thaw of the host), answered on stdout as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<Control>,
}

/// A request to the gate itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Control {
    /// `freeze` or `thaw`.
    pub action: String,
    /// Why (a freeze's reason: one line, shown to everyone refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A grant's ops: op ids or globs over them, comma-separated (`vm.start,vm.snapshot*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops: Option<String>,
    /// A grant's guests: VMID ranges (`100-199,250`); absent: any guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmids: Option<String>,
    /// A grant's storages, comma-separated; absent: any storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storages: Option<String>,
    /// When a grant ends (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    /// How many requests a grant admits at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// The grant a revocation ends (its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A request as the gate reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRequest {
    /// A plain catalog line: the words after `sudo -n`.
    Plain(Vec<String>),
    /// An envelope.
    Envelope(Box<Envelope>),
}

impl Envelope {
    /// The command line that carries this envelope: two words, both safe unquoted.
    pub fn to_command(&self) -> Vec<String> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        vec![
            PROTOCOL.to_string(),
            Base64UrlUnpadded::encode_string(&json),
        ]
    }
}

/// Read the command line the gate was started for. `Err` is the refusal to send.
pub fn parse_command(line: Option<&str>) -> Result<GateRequest, Box<Refusal>> {
    let Some(line) = line else {
        return Err(Box::new(Refusal::new(
            RefusalKind::NotAllowed,
            "no command: this account has no shell, only pxagent's catalog operations (interactive logins and subsystems such as sftp are refused)",
        )));
    };
    if line.len() > MAX_LINE {
        return Err(Box::new(Refusal::new(
            RefusalKind::BadRequest,
            format!(
                "the command line is {} bytes, more than the {MAX_LINE} the gate reads",
                line.len()
            ),
        )));
    }
    if let Some(rest) = line.strip_prefix(PROTOCOL) {
        let payload = rest.strip_prefix(' ').ok_or_else(|| {
            Refusal::new(
                RefusalKind::BadRequest,
                format!("an envelope is `{PROTOCOL} <base64url JSON>`"),
            )
        })?;
        let bytes = Base64UrlUnpadded::decode_vec(payload).map_err(|_| {
            Refusal::new(
                RefusalKind::BadRequest,
                "the envelope is not base64url without padding",
            )
        })?;
        let env: Envelope = serde_json::from_slice(&bytes).map_err(|e| {
            Refusal::new(
                RefusalKind::BadRequest,
                format!("the envelope does not parse: {e}"),
            )
        })?;
        let asks = [env.hello, env.argv.is_some(), env.control.is_some()];
        if asks.iter().filter(|a| **a).count() != 1 {
            return Err(Box::new(Refusal::new(
                RefusalKind::BadRequest,
                "an envelope carries exactly one of `hello`, `argv` and `control`",
            )));
        }
        return Ok(GateRequest::Envelope(Box::new(env)));
    }
    if let Some(other) = line.strip_prefix("pxagent-gate/") {
        let version = other.split(' ').next().unwrap_or_default();
        return Err(Box::new(Refusal::new(
            RefusalKind::Unsupported,
            format!(
                "the client speaks pxagent-gate/{} but this gate speaks {PROTOCOL} only: install the same pxagent version on both sides",
                crate::base::text::printable(version)
            ),
        )));
    }
    let words = shlex::split(line).ok_or_else(|| {
        Refusal::new(
            RefusalKind::NotAllowed,
            "the command line does not split into words",
        )
    })?;
    if words.is_empty() {
        return Err(Box::new(Refusal::new(
            RefusalKind::NotAllowed,
            "an empty command: this account has no shell, only pxagent's catalog operations",
        )));
    }
    if crate::base::text::quote_argv(&words) != line {
        return Err(Box::new(Refusal::new(
            RefusalKind::NotAllowed,
            "the command line is not in pxagent's canonical form (one command, words quoted only where needed); extra text, comments, chaining and redirections are refused",
        )));
    }
    Ok(GateRequest::Plain(words))
}

/// Why the gate refused; what the client shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalKind {
    /// Not one catalog operation (or no command, or a subsystem).
    NotAllowed,
    /// The envelope is malformed.
    BadRequest,
    /// The client speaks another protocol version.
    Unsupported,
    /// The host policy refuses the operation.
    PolicyRefused,
    /// The host policy cannot be read or trusted: everything is refused.
    PolicyUnavailable,
    /// The host policy wants the confirmation phrase.
    ConfirmationRequired,
    /// The host policy wants a signed approval and none came.
    ApprovalRequired,
    /// The approval that came does not hold (malformed, expired, replayed, foreign key, other
    /// operation or parameters).
    ApprovalInvalid,
    /// A host rate limit is full.
    RateLimited,
    /// The same call (op and arguments) came more often than the host policy's `runaway` cap
    /// allows in its window: an agent in a loop.
    Runaway,
    /// The account's change budget (host policy `budget`) for the window is used up.
    Budget,
    /// The host audit record could not be written: nothing runs unaudited.
    AuditUnavailable,
    /// The host is frozen (its kill switch: root's freeze file, or an approver's signed
    /// freeze): no change, confirm or exec operation runs; reads go on.
    Frozen,
}

impl RefusalKind {
    /// The snake_case name (as in JSON).
    pub fn name(self) -> &'static str {
        match self {
            RefusalKind::NotAllowed => "not_allowed",
            RefusalKind::BadRequest => "bad_request",
            RefusalKind::Unsupported => "unsupported",
            RefusalKind::PolicyRefused => "policy_refused",
            RefusalKind::PolicyUnavailable => "policy_unavailable",
            RefusalKind::ConfirmationRequired => "confirmation_required",
            RefusalKind::ApprovalRequired => "approval_required",
            RefusalKind::ApprovalInvalid => "approval_invalid",
            RefusalKind::RateLimited => "rate_limited",
            RefusalKind::Runaway => "runaway",
            RefusalKind::Budget => "budget",
            RefusalKind::AuditUnavailable => "audit_unavailable",
            RefusalKind::Frozen => "frozen",
        }
    }
}

/// The statement a human must sign, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The exact statement text (sign these bytes).
    pub statement: String,
    /// When it stops being signable (RFC 3339 UTC).
    pub expires: String,
    /// The two ways to sign it.
    pub sign_with: Vec<String>,
}

/// A refusal, as the gate writes it and the client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// What class of refusal.
    pub kind: RefusalKind,
    /// One or two sentences for the user: what was refused, why, what to do.
    pub message: String,
    /// The op the request was read as, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// For `confirmation_required`: the phrase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phrase: Option<String>,
    /// For `approval_required` (and an invalid approval): what to sign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_request: Option<ApprovalRequest>,
    /// For `approval_invalid`: which check failed (`expired`, `replayed`, `unlisted_key` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `rate_limited`, `runaway` and `budget`: seconds until a call fits again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The gate's version.
    #[serde(default)]
    pub gate: String,
}

impl Refusal {
    /// A refusal of this kind with this message.
    pub fn new(kind: RefusalKind, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
            op: None,
            phrase: None,
            approval_request: None,
            reason: None,
            retry_after: None,
            gate: crate::VERSION.to_string(),
        }
    }

    /// The stderr line the gate writes.
    pub fn to_line(&self) -> String {
        format!(
            "{PROTOCOL} refused {}",
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        )
    }

    /// Find the gate's refusal in a command's stderr (the client side). Only the gate writes
    /// such a line, and only with [`REFUSED_EXIT`].
    pub fn from_output(exit_status: u32, stderr: &str) -> Option<Refusal> {
        if exit_status != REFUSED_EXIT {
            return None;
        }
        let prefix = format!("{PROTOCOL} refused ");
        stderr
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|json| serde_json::from_str(json).ok())
    }
}

/// The key of [`Hello::extra`] that lists the op ids the host policy denies outright.
pub const HELLO_POLICY_DENIES: &str = "policy_denies";

/// The key of [`Hello::extra`] that says the host is frozen: its reason, who froze it, since
/// when and what lifts it (absent when the host is not frozen).
pub const HELLO_FROZEN: &str = "frozen";

/// What the gate tells about itself (answer to a `hello` envelope, on stdout as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol the gate speaks.
    pub protocol: String,
    /// The gate's pxagent version.
    pub gate: String,
    /// The host name statements are bound to (`uname -n`).
    pub host: String,
    /// The account the gate runs as, and its uid.
    pub account: String,
    /// Its uid.
    pub uid: u32,
    /// The host policy: path, whether it is usable, and why not.
    pub policy: FileState,
    /// The approvers file: path, whether it is usable, how many keys.
    pub approvers: FileState,
    /// `sudo -V` as the account sees it (the preflight's sudo checks).
    pub sudo_version: CommandResult,
    /// `sudo -n -l` as the account sees it (the preflight's rule checks).
    pub sudo_list: CommandResult,
    /// The PVE tools the catalog uses and whether each is an executable file.
    pub tools: Vec<(String, bool)>,
    /// Anything else a later gate wants to say.
    #[serde(default, flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// The state of one of the gate's files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileState {
    /// Its path.
    pub path: String,
    /// Whether the gate can use it.
    pub ok: bool,
    /// What the gate found (`12 rules`, `missing`, `writable by group`…).
    pub detail: String,
}

/// The output of one command the gate ran for the hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResult {
    /// Exit status (`None`: it could not be started or was killed).
    pub exit_status: Option<i32>,
    /// stdout.
    pub stdout: String,
    /// stderr.
    pub stderr: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_must_be_canonical() {
        let ok = "sudo -n /usr/bin/pvesh get /version --output-format json";
        assert_eq!(
            parse_command(Some(ok)).unwrap(),
            GateRequest::Plain(ok.split(' ').map(String::from).collect())
        );
        let quoted = "sudo -n /usr/sbin/pct exec 200 -- sh -c 'echo a; id'";
        assert!(matches!(parse_command(Some(quoted)), Ok(GateRequest::Plain(w)) if w.len() == 9));
        for bad in [
            "sudo -n /usr/bin/pvesh get /version --output-format json; id",
            "sudo -n /usr/bin/pvesh get /version --output-format json # x",
            "sudo  -n /usr/bin/pvesh get /version",
            "sudo -n \"/usr/bin/pvesh\" get /version",
            "sudo -n /usr/bin/pvesh get /version\nid",
            "sudo -n /usr/bin/pvesh get /version &",
            "sudo -n /usr/bin/pvesh get 'unterminated",
            "",
        ] {
            let e = parse_command(Some(bad)).unwrap_err();
            assert_eq!(e.kind, RefusalKind::NotAllowed, "{bad:?}");
        }
        assert_eq!(
            parse_command(None).unwrap_err().kind,
            RefusalKind::NotAllowed
        );
    }

    #[test]
    fn envelopes_round_trip_and_are_strict() {
        let env = Envelope {
            client: "pxagent 9.9.9".into(),
            argv: Some(vec!["sudo".into(), "-n".into(), "/usr/sbin/qm".into()]),
            approval: Some("-----BEGIN SSH SIGNATURE-----\nx\n".into()),
            ..Envelope::default()
        };
        let cmd = env.to_command();
        assert_eq!(
            crate::base::text::quote_argv(&cmd),
            cmd.join(" "),
            "no quoting needed"
        );
        match parse_command(Some(&cmd.join(" "))).unwrap() {
            GateRequest::Envelope(back) => assert_eq!(*back, env),
            other => panic!("{other:?}"),
        }
        let enc = |v: &str| {
            format!(
                "{PROTOCOL} {}",
                Base64UrlUnpadded::encode_string(v.as_bytes())
            )
        };
        for (bad, kind) in [
            (
                enc(r#"{"client":"x","argv":["a"],"shell":"sh"}"#),
                RefusalKind::BadRequest,
            ),
            (enc(r#"{"client":"x"}"#), RefusalKind::BadRequest),
            (
                enc(r#"{"client":"x","hello":true,"argv":["a"]}"#),
                RefusalKind::BadRequest,
            ),
            (format!("{PROTOCOL} !!!"), RefusalKind::BadRequest),
            (PROTOCOL.to_string(), RefusalKind::BadRequest),
            ("pxagent-gate/2 e30".to_string(), RefusalKind::Unsupported),
        ] {
            assert_eq!(parse_command(Some(&bad)).unwrap_err().kind, kind, "{bad}");
        }
    }

    #[test]
    fn refusals_are_found_only_with_their_exit_status() {
        let mut r = Refusal::new(RefusalKind::ApprovalRequired, "sign it");
        r.op = Some("vm.destroy".into());
        let stderr = format!("some noise\n{}\n", r.to_line());
        assert_eq!(Refusal::from_output(REFUSED_EXIT, &stderr), Some(r));
        assert_eq!(Refusal::from_output(1, &stderr), None);
        assert_eq!(Refusal::from_output(REFUSED_EXIT, "other\n"), None);
    }
}
