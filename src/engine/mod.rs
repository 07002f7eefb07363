//! One op from decision to result, the same for every front end (the CLI, the MCP server).
//!
//! Order matters and is fixed here: local policy (exit 3), then the confirmation phrase
//! (exit 4) — neither sends anything — then what the host must tell (node, next VMID,
//! prechecks; reads only), then the op itself, then its task. Front ends differ only in how
//! they connect (one connection per CLI run, one kept open by the MCP server), whether a
//! human can be asked at a terminal, and how they print.

use std::future::Future;

use serde_json::{Value, json};

use crate::catalog::{self, Risk};
use crate::error::{Error, Result};
use crate::invocation::Invocation;
use crate::policy::{Decision, Policy};
use crate::remote::Remote;

/// Gives the engine a connected host when it first needs one.
pub trait Connector {
    /// A connected host (opened on first use, then reused).
    fn remote(&self) -> impl Future<Output = Result<Remote>> + Send;
}

/// What an op produced, ready to print.
#[derive(Debug, Clone)]
pub struct Done {
    /// The typed result (`-o json`'s `data`).
    pub data: Value,
    /// stderr lines of a successful command.
    pub warnings: Vec<String>,
}

/// What one invocation did, gathered while it runs, for its audit record.
#[derive(Debug, Default)]
pub struct Trail {
    /// Whether this invocation is audited (it was meant for a host).
    pub audited: bool,
    /// `user@host:port`.
    pub host: Option<String>,
    /// The agent account.
    pub account: Option<String>,
    /// The remote argv of the op.
    pub argv: Vec<String>,
    /// The confirmation phrase that was accepted.
    pub phrase: Option<String>,
    /// The task the op ran.
    pub upid: Option<String>,
    /// Only reported (dry run).
    pub dry_run: bool,
}

impl Trail {
    /// Append this invocation's record to the audit log. A failure to write is a warning on
    /// stderr; it never changes the outcome of what already happened.
    pub fn record(
        &self,
        op: &str,
        via: crate::audit::Via,
        err: Option<&Error>,
        code: u8,
        took: std::time::Duration,
    ) {
        use crate::audit::{NewRecord, Verdict};
        let Some(path) = crate::audit::default_path() else {
            eprintln!(
                "pxagent: warning: no HOME or XDG_STATE_HOME, so this invocation was not audited"
            );
            return;
        };
        let decision = match err {
            _ if self.dry_run => Verdict::DryRun,
            Some(Error::Policy(_) | Error::ConfirmationRequired { .. } | Error::RateLimited(_)) => {
                Verdict::Refused
            }
            Some(Error::Usage(_) | Error::ReadFile { .. } | Error::Internal(_)) => Verdict::Failed,
            _ if self.phrase.is_some() => Verdict::Confirmed,
            _ => Verdict::Allowed,
        };
        let mut rec = NewRecord::new(op, via, decision);
        rec.host = self.host.clone();
        rec.account = self.account.clone();
        rec.argv = self.argv.clone();
        rec.phrase = self.phrase.clone();
        rec.exit_code = code;
        rec.duration_ms = took.as_millis() as u64;
        rec.upid = self.upid.clone();
        // A wrong phrase's message quotes what was typed: keep only the error's kind.
        rec.error = err.map(|e| match e {
            Error::ConfirmationRequired { .. } => e.kind().to_string(),
            _ => e.to_string(),
        });
        if let Err(e) = crate::audit::append(&path, rec) {
            eprintln!(
                "pxagent: warning: could not write the audit log {}: {e}",
                path.display()
            );
        }
    }
}

/// How a front end runs ops.
pub struct Engine<'a, C: Connector> {
    /// Local policy.
    pub policy: &'a Policy,
    /// Where the host comes from.
    pub connector: &'a C,
    /// Whether a human at a terminal may be asked for a phrase.
    pub interactive: bool,
}

impl<C: Connector> Engine<'_, C> {
    /// Decide whether `inv` may run: local policy (exit 3), then the confirmation phrase
    /// (exit 4). Sends nothing, except one read of the guest's tags when the policy protects
    /// tags. Records the accepted phrase in `trail`.
    pub async fn decide(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
    ) -> Result<()> {
        trail.argv = inv.remote_argv();
        let tags = if self.policy.needs_guest_tags()
            && inv.op.risk != Risk::Read
            && inv.vmid().is_some()
        {
            Some(guest_tags(&self.connector.remote().await?, inv).await?)
        } else {
            None
        };
        let decision = self.policy.check(inv, tags.as_deref())?;
        let policy_confirm = matches!(decision, Decision::Confirm(_));
        trail.phrase = if self.interactive {
            crate::confirm::gate(inv, given, policy_confirm)?
        } else {
            crate::confirm::gate_with(inv, given, policy_confirm, false, |_| {
                Err(Error::Internal("no terminal to ask".into()))
            })?
        };
        // Quota is taken only once policy and confirmation have said yes (issue 6): a
        // refused call never uses up a limit.
        crate::limits::admit(inv.op, self.policy)?;
        Ok(())
    }

    /// Run one op. `given` is a confirmation phrase passed along (`--confirm`, MCP
    /// `confirm`); `progress` receives each line the task prints while it runs.
    pub async fn execute(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Done> {
        self.decide(inv, given, trail).await?;
        let remote = self.connector.remote().await?;
        let prepared = remote.prepare(inv).await?;
        trail.argv = prepared.remote_argv();
        let outcome = remote.send_with_progress(&prepared, progress).await?;
        trail.upid = outcome.upid.clone();
        let data = crate::views::normalize(inv.op.view, &outcome.data, inv.keep_type)?;
        let data = match outcome.upid {
            Some(upid) => json!({"upid": upid, "node": outcome.node, "task": data}),
            None => data,
        };
        Ok(Done {
            data,
            warnings: outcome.warnings,
        })
    }
}

/// The human summary of a result.
pub fn human(inv: &Invocation, data: &Value) -> String {
    match inv.op.view {
        catalog::View::Task => format!(
            "{}: {} (task {})",
            inv.display(),
            data["task"]["exitstatus"].as_str().unwrap_or("done"),
            data["upid"].as_str().unwrap_or("")
        ),
        catalog::View::Done => format!("{}: done", inv.display()),
        view => crate::views::human(view, data),
    }
}

/// The tags of the guest an invocation targets (empty when it has none or does not exist).
async fn guest_tags(remote: &Remote, inv: &Invocation) -> Result<Vec<String>> {
    let vmid = inv.vmid().unwrap_or(0);
    let resources = remote.read_op("cluster.resources", &[]).await?;
    Ok(resources
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r.get("vmid").and_then(Value::as_u64) == Some(vmid))
        .and_then(|r| r.get("tags").and_then(Value::as_str))
        .map(crate::policy::parse_tags)
        .unwrap_or_default())
}

/// A connector that opens one connection on first use and keeps it for the invocation.
pub struct OnceConnector {
    target: crate::ssh::Target,
    cell: tokio::sync::OnceCell<Remote>,
}

impl OnceConnector {
    /// A connector for this target; nothing is opened yet.
    pub fn new(target: crate::ssh::Target) -> OnceConnector {
        OnceConnector {
            target,
            cell: tokio::sync::OnceCell::new(),
        }
    }

    /// Close the connection if one was opened.
    pub async fn close(&self) {
        if let Some(r) = self.cell.get() {
            r.session.clone().close().await;
        }
    }
}

impl Connector for OnceConnector {
    async fn remote(&self) -> Result<Remote> {
        self.cell
            .get_or_try_init(|| async {
                let session = crate::ssh::Session::connect(&self.target).await?;
                if let Some(note) = session.recorded_host_key() {
                    eprintln!("pxagent: {note}");
                }
                Ok::<_, Error>(Remote::new(
                    session,
                    self.target.display(),
                    self.target.command_timeout,
                ))
            })
            .await
            .cloned()
    }
}
