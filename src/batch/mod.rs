//! `pxagent batch`: many operations over one connection. JSON Lines on stdin, one
//! request per line — `{"id": <any JSON>, "op": "vm.status", "args": {"vmid": 101}}`, where
//! `args` are the op's MCP tool arguments (the MCP server's own parser, [`request::parse`]) —
//! and one result line per request on stdout, in input order:
//! `{"id": …, "ok": true, "op": …, "data": …}` or `{"id": …, "ok": false, "op": …, "line": N,
//! "error": {…}}` (the CLI's error object), each written as soon as it and every line before
//! it are done.
//!
//! Every request goes through the same engine as a CLI call or an MCP tool call
//! ([`Engine::run`]): policy, the confirmation phrase (`confirm` in `args`, never asked at a
//! terminal), the rate limits and one audit record (`via: batch`) each. Up to
//! [`MAX_IN_FLIGHT`] run at once over the one connection (the SSH session caps channels at the
//! same number), with one exception that keeps a batch meaningful: requests for the same guest
//! keep their input order when one of them changes it (a change waits for every earlier
//! request on that guest, and later ones wait for it; reads of a guest run side by side).
//! A line that is not JSON, names no known op or has arguments that do not fit gets an error
//! result carrying its line number (`id` null if it could not be read) and the batch goes on;
//! blank lines are skipped. `--stop-on-error` runs one request at a time and stops reading at
//! the first failure. The exit code: [`request::exit_code`].
//!
//! The front end (the CLI) hands in the policy, a connector and the lines; this module knows
//! neither clap nor where the lines come from. It may use the engine, the MCP argument parser,
//! the audit trail and the output module (the only stdout writer).
//!
//! Layer: batch. May import: `audit`, `base`, `catalog`, `engine`, `mcp`, `output`, `policy`,
//! `remote`, `ssh`.

pub mod request;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::audit::Via;
use crate::base::error::{Error, Result};
use crate::catalog::Risk;
use crate::engine::{Connector, Engine, Trail};
use crate::policy::Policy;

/// At most this many requests of one batch run at once (stay at or below 8
/// channels per connection).
pub const MAX_IN_FLIGHT: usize = 8;

/// How a batch runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Run one request at a time and stop at the first failure.
    pub stop_on_error: bool,
    /// Report what each request would send; connect to nothing.
    pub dry_run: bool,
    /// How long a guest command may run (`--timeout`, else [`crate::engine::guest::DEFAULT_TIMEOUT`]).
    pub exec_timeout: Duration,
    /// The host's label in every result line (fleets: `--hosts`); `None` for one host.
    pub label: Option<String>,
    /// `user@host:port` and the account, for the audit records.
    pub host: Option<String>,
    /// The account, for the audit records.
    pub account: Option<String>,
    /// Why changes may not run here (a batch over a group of hosts): each change line gets
    /// this policy refusal instead of running. `None`: changes run.
    pub refuse_changes: Option<String>,
    /// Write an audit record per request (always, outside tests of this module).
    pub audit: bool,
    /// Why a phrase in a line cannot confirm here (a batch over several hosts: a phrase
    /// confirms one host): confirm ops get a confirmation refusal. `None`: phrases count.
    pub refuse_phrases: Option<String>,
    /// Set to true (a signal): the requests in flight are dropped — which ends their
    /// commands on the host — and waited for, and the batch returns at once.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// The batch's taint (policy `taint: after_exec`), shared by its requests.
    pub taint: std::sync::Arc<crate::policy::Taint>,
}

/// One line of input: its text, or why it could not be read.
pub type Line = std::result::Result<String, Error>;

/// Feed `input`'s lines into a channel from a thread of its own (a blocking reader, so an
/// agent can write one line and wait for its result).
pub fn read_lines(mut input: impl std::io::BufRead + Send + 'static) -> mpsc::Receiver<Line> {
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT * 2);
    std::thread::spawn(move || {
        while let Some(line) = request::read_line(&mut input) {
            let line = line.map_err(|source| Error::ReadFile {
                path: "-".into(),
                source,
            });
            let stop = line.is_err();
            let item = line.and_then(|l| l);
            if tx.blocking_send(item).is_err() || stop {
                return;
            }
        }
    });
    rx
}

/// Feed lines already read into a channel (a fleet runs the same input on every host).
pub fn lines_from(lines: Arc<Vec<Line>>) -> mpsc::Receiver<Line> {
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT * 2);
    tokio::spawn(async move {
        for l in lines.iter() {
            let item = match l {
                Ok(t) => Ok(t.clone()),
                Err(e) => Err(Error::usage(e.to_string())),
            };
            if tx.send(item).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// What one request's task hands back: its position in the input, its result line and exit
/// code.
struct Finished {
    index: usize,
    doc: Value,
    code: u8,
}

/// Run a batch: read requests from `lines`, run them through the engine over `connector`,
/// hand each result line to `write` in input order (the CLI writes it to stdout), and return
/// the batch's exit code.
pub async fn run<C>(
    policy: Arc<Policy>,
    connector: Arc<C>,
    mut lines: mpsc::Receiver<Line>,
    opts: Options,
    write: &mut (dyn FnMut(&str) + Send),
) -> u8
where
    C: Connector + Send + Sync + 'static,
{
    let limit = if opts.stop_on_error { 1 } else { MAX_IN_FLIGHT };
    let opts = Arc::new(opts);
    let mut set: tokio::task::JoinSet<Finished> = tokio::task::JoinSet::new();
    let mut done: BTreeMap<usize, (Value, u8)> = BTreeMap::new();
    let mut order = GuestOrder::default();
    let mut failures: Vec<u8> = Vec::new();
    let (mut next_in, mut next_out, mut line_no) = (0usize, 0usize, 0usize);
    let mut reading = true;
    let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();
    let mut stop = opts.stop.clone();
    loop {
        let line = tokio::select! {
            biased;
            // Only while something may still come: with no request left and nothing more to
            // read, `else` ends the loop.
            Ok(()) = async { stop.as_mut().expect("guarded").wait_for(|s| *s).await.map(|_| ()) }, if stop.is_some() && (reading || !set.is_empty()) => {
                // Aborted tasks are dropped before join_next returns them: once the set is
                // empty, every request's channel has begun to end its command.
                set.abort_all();
                while set.join_next().await.is_some() {}
                return Error::Connection(String::new()).exit_code();
            }
            Some(joined) = set.join_next(), if !set.is_empty() => {
                let (index, doc, code) = match joined {
                    Ok(f) => (f.index, f.doc, f.code),
                    Err(e) => {
                        // A bug (a panic): the request still gets its line, exit 10.
                        let index = tasks.get(&e.id()).copied().unwrap_or(usize::MAX);
                        let err = Error::Internal(format!("request {} failed: {e}", index + 1));
                        let mut doc = request::failure(&Value::Null, None, 0, &err);
                        label(&mut doc, &opts);
                        (index, doc, 10)
                    }
                };
                done.insert(index, (doc, code));
                None
            }
            line = lines.recv(), if reading && set.len() < limit => match line {
                None => {
                    reading = false;
                    None
                }
                Some(l) => Some(l),
            },
            else => break,
        };
        if let Some(line) = line {
            line_no += 1;
            let parsed = match line {
                Ok(t) if t.trim().is_empty() => continue,
                Ok(t) => request::parse(line_no, &t, &policy),
                Err(e) => Err(request::Invalid {
                    line: line_no,
                    id: Value::Null,
                    op: None,
                    error: Box::new(Error::usage(format!("line {line_no}: {e}"))),
                }),
            };
            let index = next_in;
            next_in += 1;
            match parsed {
                Ok(req) => {
                    let waits = order.admit(&req);
                    let (policy, connector, opts) =
                        (policy.clone(), connector.clone(), opts.clone());
                    let handle = set.spawn(async move {
                        let _done = waits.done;
                        for mut w in waits.before {
                            let _ = w.changed().await;
                        }
                        let (doc, code) = one(&policy, &*connector, req, &opts).await;
                        Finished { index, doc, code }
                    });
                    tasks.insert(handle.id(), index);
                }
                // A line that is no request: its result is ready now.
                Err(bad) => {
                    audit_invalid(&bad, &opts);
                    done.insert(index, (bad_doc(&bad, &opts), bad.error.exit_code()));
                }
            }
        }
        // Write what is ready, in input order.
        while let Some((doc, code)) = done.remove(&next_out) {
            write(&doc.to_string());
            next_out += 1;
            if code != 0 {
                failures.push(code);
                if opts.stop_on_error && reading {
                    reading = false;
                    crate::output::note(format_args!(
                        "--stop-on-error: stopped after the first failure (request {next_out}); the rest of the input was not read"
                    ));
                }
            }
        }
    }
    request::exit_code(&failures)
}

/// Run one request through the engine and audit it; its result line and exit code.
async fn one<C: Connector>(
    policy: &Policy,
    connector: &C,
    req: request::BatchRequest,
    opts: &Options,
) -> (Value, u8) {
    let started = Instant::now();
    let mut trail = Trail {
        audited: opts.audit,
        host: opts.host.clone(),
        account: opts.account.clone(),
        ..Trail::default()
    };
    let engine = Engine {
        policy,
        connector,
        interactive: false,
        taint: Some(&opts.taint),
    };
    let result = if let Some(why) = refusal(&req, opts) {
        trail.argv = req.inv.remote_argv();
        Err(why)
    } else if opts.dry_run {
        dry_run(policy, &req, opts, &mut trail)
    } else {
        engine
            .run(
                &req.inv,
                req.confirm.as_deref(),
                &mut trail,
                &mut |_| {},
                opts.exec_timeout,
            )
            .await
            .map(|d| (d.data, d.warnings))
    };
    let code = result.as_ref().map_or_else(Error::exit_code, |_| 0);
    if trail.audited {
        trail.record(
            req.op.id,
            Via::Batch,
            result.as_ref().err(),
            code,
            started.elapsed(),
        );
    }
    let mut doc = match result {
        Ok((data, warnings)) => request::success(&req.id, req.op, data, &warnings),
        Err(e) => request::failure(&req.id, Some(req.op), req.line, &e),
    };
    label(&mut doc, opts);
    (doc, code)
}

/// A fleet's refusal of this request, if any (changes over a group; phrases over several
/// hosts).
fn refusal(req: &request::BatchRequest, opts: &Options) -> Option<Error> {
    if req.op.risk != Risk::Read
        && let Some(why) = &opts.refuse_changes
    {
        return Some(Error::Policy(format!(
            "line {}: `{}` changes something, and {why}",
            req.line,
            req.inv.display()
        )));
    }
    let needs_phrase = req.inv.phrase().is_some() || req.confirm.is_some();
    if needs_phrase && let Some(why) = &opts.refuse_phrases {
        let phrase = req.inv.phrase().unwrap_or_default();
        return Some(Error::ConfirmationRequired {
            message: format!(
                "line {}: `{}` needs its phrase, and {why}",
                req.line,
                req.inv.display()
            ),
            phrase,
            hint: Some("run this line with -H HOST, once per host".into()),
            scope: None,
        });
    }
    None
}

/// `--dry-run`: what the request would send, and the policy's verdict (nothing is sent).
fn dry_run(
    policy: &Policy,
    req: &request::BatchRequest,
    opts: &Options,
    trail: &mut Trail,
) -> Result<(Value, Vec<String>)> {
    let data = if req.op.runs_guest_command() {
        crate::engine::dry_run_exec(
            policy,
            &crate::engine::guest_request(&req.inv, opts.exec_timeout),
            trail,
        )?
    } else {
        crate::engine::dry_run(policy, &req.inv, trail)?
    };
    Ok((data, Vec::new()))
}

/// The result line of a line that was no request (also audited: it was meant for a host).
fn bad_doc(bad: &request::Invalid, opts: &Options) -> Value {
    let mut doc = request::failure(&bad.id, bad.op, bad.line, &bad.error);
    label(&mut doc, opts);
    doc
}

fn audit_invalid(bad: &request::Invalid, opts: &Options) {
    if !opts.audit {
        return;
    }
    let trail = Trail {
        audited: true,
        host: opts.host.clone(),
        account: opts.account.clone(),
        ..Trail::default()
    };
    let name = bad.op.map_or("batch", |o| o.id);
    trail.record(name, Via::Batch, Some(&*bad.error), 2, Duration::ZERO);
}

fn label(doc: &mut Value, opts: &Options) {
    if let (Some(l), Value::Object(m)) = (&opts.label, doc) {
        m.insert("host".into(), Value::String(l.clone()));
    }
}

/// The order of requests on the same guest (see the module docs): for each VMID, the last
/// change and the reads since.
#[derive(Default)]
struct GuestOrder {
    guests: HashMap<u64, Chain>,
}

#[derive(Default)]
struct Chain {
    last_change: Option<watch::Receiver<()>>,
    reads: Vec<watch::Receiver<()>>,
}

/// What a request waits for before it starts, and the signal it gives when it is done
/// (dropping the sender wakes every waiter).
struct Waits {
    before: Vec<watch::Receiver<()>>,
    done: Option<watch::Sender<()>>,
}

impl GuestOrder {
    fn admit(&mut self, req: &request::BatchRequest) -> Waits {
        let Some(vmid) = req.inv.vmid() else {
            return Waits {
                before: Vec::new(),
                done: None,
            };
        };
        let chain = self.guests.entry(vmid).or_default();
        let (tx, rx) = watch::channel(());
        let mut before: Vec<watch::Receiver<()>> = chain.last_change.iter().cloned().collect();
        if req.op.risk == Risk::Read {
            chain.reads.push(rx);
        } else {
            before.append(&mut chain.reads);
            chain.last_change = Some(rx);
        }
        Waits {
            before,
            done: Some(tx),
        }
    }
}

#[cfg(test)]
mod tests;
