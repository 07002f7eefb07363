//! A tool call's arguments and failures: JSON arguments become the raw strings the CLI
//! parses, then an [`Invocation`] validated by the kinds; failures become the text and JSON
//! the model reads. Uses the catalog, the invocation and the error types.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::*;
use crate::catalog::{self, Area, Kind, Op, Risk, Select};
use crate::error::{Error, Result};
use crate::invocation::Invocation;

/// Turn a tool call's JSON arguments into the raw strings the CLI would have parsed, plus
/// the `confirm` phrase. Integers become decimal strings (numeric strings are accepted as
/// they are); `true` becomes a present switch (`"1"`) and `false` an absent one; `null`
/// means absent. Anything else that does not fit is [`Error::Usage`].
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
        let Some(p) = op.param(key) else {
            let mut names: Vec<&str> = op.params.iter().map(|p| p.name).collect();
            if takes_confirm {
                names.push("confirm");
            }
            return Err(Error::usage(format!(
                "{tool} takes no argument '{}'; it takes: {}",
                catalog::kind::printable(key),
                names.join(", ")
            )));
        };
        let bad = |what: &str| {
            Error::usage(format!(
                "{tool}: `{}` must be {what}, not {}",
                p.name,
                catalog::kind::printable(&value.to_string())
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
            (kind, Value::Number(n)) if integer_range(kind).is_some() => match n.as_u64() {
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

/// Validate a tool call into the invocation of exactly this op. Errors are
/// [`Error::Usage`] (they become MCP *invalid params*).
pub fn invocation(
    op: &'static Op,
    args: &Map<String, Value>,
    takes_confirm: bool,
) -> Result<(Invocation, Option<String>)> {
    let tool = op.tool_name();
    // `approval` travels to the host's gate beside the command line (issue 11).
    let mut args = args.clone();
    let approval = match args.remove("approval") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if op.risk != Risk::Read => Some(s),
        Some(Value::String(_)) => {
            return Err(Error::usage(format!(
                "{tool} takes no `approval` (it only reads)"
            )));
        }
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
        } => {
            let mut s = format!(
                "{message}\n\nNothing was sent. The phrase must come from the human user, never from you: ask the user to reply `{phrase}`; if they do, call {tool} again with the same arguments plus \"confirm\": \"{phrase}\"."
            );
            if let Some(h) = hint {
                s.push_str(&format!("\nHint: {h}."));
            }
            s
        }
        Error::Policy(m) => format!(
            "{m}. Nothing was sent. This is the local policy of this pxagent installation: do not retry; tell the user if they need it."
        ),
        Error::RateLimited(m) => format!(
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

/// The `-o json` failure document, as structured content of an error result.
pub(super) fn failure_doc(err: &Error, op: &str, host: &str) -> Value {
    json!({"ok": false, "op": op, "host": host, "error": err.to_json()})
}
