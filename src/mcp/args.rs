//! A tool call's arguments and failures: JSON arguments become the raw strings the CLI
//! parses, then an [`Invocation`] validated by the kinds; failures become the text and JSON
//! the model reads. Uses the catalog, the invocation and the error types.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::*;
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, Area, Kind, Op, Risk, Select};

/// Turn a tool call's JSON arguments into the raw strings the CLI would have parsed, plus
/// the `confirm` phrase. Integers become decimal strings (numeric strings are accepted as
/// they are; so are integral numbers written as `100.0` or `1e2`, which JSON Schema counts as
/// integers); `true` becomes a present switch (`"1"`) and `false` an absent one; `null`
/// means absent. Anything else that does not fit is [`Error::Usage`], whose message quotes
/// the value cut to [`crate::base::text::ECHO_MAX`] bytes. `pxagent batch` parses its lines
/// with this same function.
pub fn raw_values(
    op: &'static Op,
    args: &Map<String, Value>,
    takes_confirm: bool,
) -> Result<(BTreeMap<&'static str, String>, Option<String>)> {
    let tool = op.tool_name();
    let mut raw = BTreeMap::new();
    let mut confirm = None;
    for (key, value) in args {
        if key == "confirm" && takes_confirm {
            match value {
                Value::String(s) => confirm = Some(s.clone()),
                Value::Null => {}
                _ => return Err(Error::usage(format!("{tool}: `confirm` must be a string"))),
            }
            continue;
        }
        let Some(p) = op.param(key).filter(|p| p.given()) else {
            let mut names: Vec<&str> = op
                .params
                .iter()
                .filter(|p| p.given())
                .map(|p| p.name)
                .collect();
            if takes_confirm {
                names.push("confirm");
            }
            return Err(Error::usage(format!(
                "{tool} takes no argument '{}'; it takes: {}",
                crate::base::text::printable(key),
                names.join(", ")
            )));
        };
        let bad = |what: &str| {
            Error::usage(format!(
                "{tool}: `{}` must be {what}, not {}",
                p.name,
                crate::base::text::printable(&value.to_string())
            ))
        };
        match (p.kind, value) {
            (_, Value::Null) => {}
            (Kind::Flag, Value::Bool(true)) => {
                raw.insert(p.name, "1".to_string());
            }
            (Kind::Flag, Value::Bool(false)) => {}
            (Kind::Flag, _) => return Err(bad("true or false")),
            (Kind::GuestArgv, Value::Array(words)) => {
                if !words.iter().all(Value::is_string) {
                    return Err(bad("an array of strings (the program, then its arguments)"));
                }
                raw.insert(p.name, Value::Array(words.clone()).to_string());
            }
            (Kind::GuestArgv, _) => {
                return Err(bad("an array of strings (the program, then its arguments)"));
            }
            (kind, Value::Number(n)) if integer_range(kind).is_some() => match integral(n) {
                Some(n) => {
                    raw.insert(p.name, n.to_string());
                }
                None => return Err(bad(&p.kind.describe())),
            },
            (_, Value::String(s)) => {
                raw.insert(p.name, s.clone());
            }
            (kind, _) if integer_range(kind).is_some() => return Err(bad("an integer")),
            _ => return Err(bad("a string")),
        }
    }
    Ok((raw, confirm))
}

/// A JSON number's value as a whole number: an integer, or a float with no fraction
/// (`100.0`, `1e2`) small enough to be exact (below 2^53).
pub fn integral(n: &serde_json::Number) -> Option<u64> {
    if let Some(u) = n.as_u64() {
        return Some(u);
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&f)).then_some(f as u64)
}

/// Validate a tool call into the invocation of exactly this op. Errors are
/// [`Error::Usage`] (they become MCP *invalid params*).
pub fn invocation(
    op: &'static Op,
    args: &Map<String, Value>,
    takes_confirm: bool,
) -> Result<(Invocation, Option<String>)> {
    let tool = op.tool_name();
    // `approval` travels to the host's gate beside the command line; any op may
    // need one, reads too, as the host policy may mark any op `approve`.
    let mut args = args.clone();
    let approval = match args.remove("approval") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(Error::usage(format!(
                "{tool}: `approval` must be a string (the signature the human's approver printed)"
            )));
        }
    };
    let (raw, confirm) = raw_values(op, &args, takes_confirm)?;
    // Values that select another variant belong to that variant's tool (a container archive
    // to `backup_restore_ct`), so a call can never run a sibling op in disguise.
    if let Ok(chosen) = catalog::select(op.cli, &raw)
        && chosen != op
        && chosen.select.len() >= op.select.len()
    {
        return Err(Error::usage(format!(
            "these arguments are for {}: call that tool instead of {tool}",
            chosen.tool_name()
        )));
    }
    if !op.selected(&raw) {
        let needs: Vec<String> = op
            .select
            .iter()
            .map(|s| match s {
                Select::Flag(f) => format!("`{f}: true`"),
                Select::Contains(p, needle, _) => format!("a `{p}` containing '{needle}'"),
            })
            .collect();
        return Err(Error::usage(format!(
            "{tool} needs {}",
            needs.join(" and ")
        )));
    }
    let mut inv = Invocation::new(op, raw)?;
    inv.attach.approval = approval;
    Ok((inv, confirm))
}

/// The text a model reads for a failed call: what happened, and what to do next.
pub fn failure_text(err: &Error, inv: &Invocation) -> String {
    let tool = inv.op.tool_name();
    match err {
        Error::Host(r) if r.approval_request.is_some() => {
            let a = r
                .approval_request
                .as_ref()
                .map(|a| a.statement.as_str())
                .unwrap_or("");
            format!(
                "{err}\n\nNothing ran. Only a human approver can sign this; you cannot. Show the user this statement and ask them to sign it (`pxagent approve --key KEY FILE`, or `ssh-keygen -Y sign -n pxagent-approval -f KEY FILE`) and give you the signature; then call {tool} again with the same arguments plus \"approval\": \"<the signature text>\".\n\n{a}"
            )
        }
        Error::ConfirmationRequired {
            message,
            phrase,
            hint,
            ..
        } => {
            let mut s = format!(
                "{message}\n\nNothing was sent. The phrase must come from the human user, never from you: ask the user to reply `{phrase}`; if they do, call {tool} again with the same arguments plus \"confirm\": \"{phrase}\"."
            );
            if let Some(h) = hint {
                s.push_str(&format!("\nHint: {h}."));
            }
            s
        }
        Error::ConfirmationMismatch { message, .. } => format!(
            "{message}\n\nNothing was sent. The phrase must be exactly what the human user typed, never one you made, corrected or completed: ask the user again and pass their reply unchanged as \"confirm\" to {tool}."
        ),
        Error::Policy(m) => format!(
            "{m}. Nothing was sent. This is the local policy of this pxagent installation: do not retry; tell the user if they need it."
        ),
        Error::RateLimited { message: m, .. } => format!(
            "{m}. Wait until the window resets before calling {tool} again, or tell the user the limit was reached."
        ),
        Error::Connection(m) if inv.op.risk == Risk::Read => format!(
            "{m}. The next call opens a new connection; if this keeps happening the host is unreachable: tell the user."
        ),
        Error::Connection(m) => format!(
            "{m}. `{}` may or may not have happened: do NOT repeat it blindly. Check first with {}.",
            inv.display(),
            check_with(inv)
        ),
        Error::OutcomeUnknown(m) => format!(
            "{m}\n\nThe outcome of `{}` is unknown: do NOT repeat it. Find out first with {} (or the user runs `pxagent reconcile`), and tell the user.",
            inv.display(),
            check_with(inv)
        ),
        Error::Auth(m) => format!(
            "{m}. pxagent could not log in to the host; the user has to fix the key or known_hosts."
        ),
        Error::SudoRefused(m) => format!(
            "{m}. The host's sudoers does not allow this command; the admin should run `pxagent preflight`."
        ),
        Error::Remote(m) => format!("{m}\n\nThe operation ran on the host and failed."),
        Error::NotFound(m) => format!(
            "{m}\n\nThe operation ran on the host and failed: what it names does not exist there. Check the id or name with the list tools before calling {tool} again."
        ),
        Error::Locked(m) => format!(
            "{m}\n\nThe operation ran on the host and failed: another task holds the guest. Wait for that task to end (task_list) and call {tool} again; do not unlock it yourself."
        ),
        Error::WrongState(m) => format!(
            "{m}\n\nThe operation ran on the host and failed: the guest is not in the state it needs. Check its status and change it first if the user wants that."
        ),
        Error::Usage(m) => format!("{m}. Nothing was changed."),
        e => e.to_string(),
    }
}

/// The read tools that tell whether an uncertain action happened.
pub(super) fn check_with(inv: &Invocation) -> String {
    match (inv.op.area, inv.vmid()) {
        (Area::Vm, Some(id)) => format!("vm_status (vmid {id}) and task_list"),
        (Area::Ct, Some(id)) => format!("ct_status (vmid {id}) and task_list"),
        (_, Some(id)) => format!("task_list (vmid {id})"),
        _ => "task_list".to_string(),
    }
}

/// The `-o json` failure document, as structured content of an error result. When the host
/// wants a signed approval, `approval_request` at its top is the text to relay to the human
/// approver (the statement to sign, and how).
pub(super) fn failure_doc(err: &Error, op: &str, host: &str) -> Value {
    let mut doc = json!({"ok": false, "op": op, "host": host, "error": err.to_json()});
    if let Error::Host(r) = err
        && let Some(a) = &r.approval_request
    {
        doc["approval_request"] = json!(approval_text(a));
    }
    doc
}

/// What the human approver is asked: save the statement to a file exactly as it is, sign it,
/// and give the signature back.
pub(super) fn approval_text(a: &crate::base::gate_protocol::ApprovalRequest) -> String {
    format!(
        "The host asks a human approver to sign this request (valid until {}). Save the statement below to a file exactly as it is, sign it with `{}`, and give back the signature; it is then passed as `approval`.\n\n{}",
        a.expires,
        a.sign_with
            .first()
            .map(String::as_str)
            .unwrap_or("pxagent approve --key KEY FILE"),
        a.statement
    )
}
