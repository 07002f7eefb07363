//! `pxagent freeze --reason TEXT` and `pxagent thaw`: an approver's kill switch for a gated
//! host, sent through its gate as a `control` envelope. The gate answers the first request
//! with the statement to sign; with `--key` it is checked (it must be exactly the freeze or
//! thaw asked for, so a host can never get another statement signed this way) and signed here,
//! then sent again. Without `--key` the refusal, statement included, is the answer (exit 4).

use std::path::Path;

use serde_json::Value;

use super::open;
use crate::approval::{self, Approval, Statement};
use crate::base::error::{Error, Result};
use crate::base::gate_protocol::{Control, Envelope, Refusal, RefusalKind};
use crate::base::runtime::runtime;
use crate::config::context::Context;
use crate::engine::Trail;
use crate::output::Output;
use crate::remote::Remote;

/// What the user asked.
pub struct Request<'a> {
    /// `freeze` or `thaw`.
    pub action: &'static str,
    /// A freeze's reason.
    pub reason: Option<&'a str>,
    /// The approver's private key.
    pub key: Option<&'a Path>,
    /// A signature made elsewhere.
    pub approval: Option<&'a Path>,
    /// A grant's scope, or the grant to revoke.
    pub grant: Option<&'a Control>,
}

/// Freeze or thaw the host and print its freeze state.
pub fn control(ctx: &Context, req: Request, out: &mut Output, trail: &mut Trail) -> Result<u8> {
    let key = req.key.map(approval::load_private_key).transpose()?;
    let given = req.approval.map(super::op::read_approval).transpose()?;
    let target = super::resolve(ctx, out, trail)?;
    let data = runtime()?.block_on(async {
        let remote = open(ctx, &target).await?;
        let r = exchange(&remote, &req, key.as_ref(), given).await;
        remote.session.close().await;
        r
    })?;
    let name = match req.action {
        "grants" => "grant.list",
        "revoke" => "grant.revoke",
        other => other,
    };
    out.success(name, data, human);
    Ok(0)
}

/// Send the request; with a key, sign the statement the gate asks for and send it again.
async fn exchange(
    remote: &Remote,
    req: &Request<'_>,
    key: Option<&approval::PrivateKey>,
    given: Option<String>,
) -> Result<Value> {
    let first = send(remote, req, given).await?;
    let refusal = match first {
        Ok(v) => return Ok(v),
        Err(r) => r,
    };
    let asks = matches!(
        refusal.kind,
        RefusalKind::ApprovalRequired | RefusalKind::ApprovalInvalid
    );
    let (Some(key), true, Some(asked)) = (key, asks, refusal.approval_request.as_ref()) else {
        return Err(Error::Host(refusal));
    };
    let st = Statement::parse(&asked.statement).map_err(|why| {
        Error::Remote(format!(
            "the gate asked to sign a statement that does not parse: {why}"
        ))
    })?;
    expected(req, &st)?;
    super::approve::show(&st, crate::base::time::now_secs());
    let signature = approval::sign(key, &st.text())?;
    let signed = Approval {
        statement: None,
        signature,
    };
    send(remote, req, Some(signed.to_text()))
        .await?
        .map_err(Error::Host)
}

/// The statement must be the request the user made: the op, and its freeze reason, grant
/// scope or revoked grant. Anything else is never signed.
fn expected(req: &Request, st: &Statement) -> Result<()> {
    let op = format!("host.{}", req.action);
    let arg = |k: &str| st.args.get(k).map(String::as_str);
    let g = req.grant.cloned().unwrap_or_default();
    let reason_ok = match req.action {
        "freeze" => arg("reason") == req.reason && st.args.len() == 1,
        "grant" => {
            arg("ops") == g.ops.as_deref()
                && arg("storages") == g.storages.as_deref()
                && arg("vmids").is_some() == g.vmids.is_some()
                && arg("max").map(str::to_string) == g.max.map(|m| m.to_string())
                && arg("until").and_then(crate::base::time::parse_rfc3339) == g.until
                && st.args.len() <= 5
        }
        "revoke" => arg("grant") == g.id.as_deref() && st.args.len() == 1,
        _ => st.args.keys().all(|k| k == "lifts") && st.args.len() == 1,
    };
    if st.op != op || !reason_ok {
        return Err(Error::Remote(format!(
            "the host asked to sign `{}` with {:?}, not the {} you asked for: nothing was signed",
            crate::base::text::printable(&st.op),
            st.args,
            req.action
        )));
    }
    Ok(())
}

/// One `control` envelope: the gate's answer, or its refusal.
async fn send(
    remote: &Remote,
    req: &Request<'_>,
    approval: Option<String>,
) -> Result<std::result::Result<Value, Box<Refusal>>> {
    let cmd = Envelope {
        client: format!("pxagent {}", crate::VERSION),
        control: Some(match req.grant {
            Some(g) => Control {
                action: req.action.to_string(),
                ..g.clone()
            },
            None => Control {
                action: req.action.to_string(),
                reason: req.reason.map(str::to_string),
                ..Default::default()
            },
        }),
        approval,
        ..Default::default()
    }
    .to_command();
    let o = remote.session.exec(&cmd).await?;
    if let Some(r) = Refusal::from_output(o.exit_status, &o.stderr_text()) {
        return Ok(Err(Box::new(r)));
    }
    if o.exit_status != 0 {
        return Err(Error::Usage(format!(
            "`{}` needs the pxagent gate in front of the account, and this one has none (the host answered exit {}: {}); as root, freeze with a file instead: echo REASON > /etc/pxagent/freeze",
            req.action,
            o.exit_status,
            crate::base::text::printable(o.stderr_text().trim())
        )));
    }
    serde_json::from_slice(&o.stdout)
        .map(Ok)
        .map_err(|e| Error::Remote(format!("the gate's answer is not JSON: {e}")))
}

/// The freeze state, or the grants, for people.
fn human(d: &Value) -> String {
    if let Some(list) = d["grants"].as_array() {
        let mut s = match d["action"].as_str() {
            Some("grant") => format!(
                "granted: {} (signed by {})\n",
                d["id"].as_str().unwrap_or("?"),
                d["approver"].as_str().unwrap_or("?")
            ),
            Some("revoke") => format!("revoked: {}\n", d["id"].as_str().unwrap_or("?")),
            _ => String::new(),
        };
        if list.is_empty() {
            s.push_str("no grant of this account is in force");
        }
        let joined = |v: &Value| {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        for g in list {
            let t = |k: &str| g[k].as_str().unwrap_or("any").to_string();
            s.push_str(&format!(
                "{}  ops {}  vmids {}  storages {}  until {}{}  by {}\n",
                t("id"),
                joined(&g["ops"]).unwrap_or_default(),
                t("vmids"),
                joined(&g["storages"]).unwrap_or_else(|| "any".into()),
                t("until"),
                g["max"]
                    .as_u64()
                    .map(|m| format!("  max {m}"))
                    .unwrap_or_default(),
                t("approver"),
            ));
        }
        return s.trim_end().to_string();
    }
    let mut s = match d["action"].as_str() {
        Some("freeze") => format!(
            "frozen: signed by {}",
            d["approver"].as_str().unwrap_or("?")
        ),
        _ => match d["thawed"].as_array() {
            Some(t) if !t.is_empty() => format!("thawed {} freeze(s)", t.len()),
            _ => d["note"].as_str().unwrap_or("nothing to thaw").to_string(),
        },
    };
    match d["frozen"].as_object() {
        Some(f) => s.push_str(&format!(
            "\nthe host is frozen by {}: {} (only reads run until {})",
            f.get("by").and_then(Value::as_str).unwrap_or("?"),
            f.get("reason").and_then(Value::as_str).unwrap_or("?"),
            f.get("lift").and_then(Value::as_str).unwrap_or("?"),
        )),
        None => s.push_str("\nthe host is not frozen: changes run"),
    }
    s
}
