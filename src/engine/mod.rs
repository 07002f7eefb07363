//! One op from decision to result, the same for every front end (the CLI, the MCP server).
//!
//! Order matters and is fixed here: local policy (exit 3), then the confirmation phrase
//! (exit 4) — neither sends anything — then what the host must tell (node, next VMID,
//! prechecks; reads only), then the op itself, then its task. An action that may have
//! nothing to do ([`catalog::Already`]: a start of a running guest) reads the guest's status
//! between the policy and the phrase, and ends there with `changed: false` when it is so: a
//! no-op needs no phrase and takes no rate-limit quota. Front ends differ only in how
//! they connect (one connection per CLI run, one kept open by the MCP server), whether a
//! human can be asked at a terminal, and how they print.
//!
//! Every flow is here: ordinary ops ([`Engine::execute`]), commands inside guests and their
//! status ([`Engine::exec`], and `execute` for exec-status ops), dry runs
//! ([`dry_run`], [`dry_run_exec`]: no connection needed) and `--no-wait` ([`Engine::start`]).
//! The engine may use the policy, the confirmation gate, the limits, the remote layer and the
//! views; it knows neither clap nor rmcp.
//!
//! Layer: engine. May import: `approval`, `audit`, `base`, `catalog`, `output`, `persist`,
//! `policy`, `remote`, `ssh`, `views`.

use std::future::Future;

use serde_json::{Value, json};

use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, Risk, ops};
use crate::policy::{Ask, Decision, GuestTags, Policy};
use crate::remote::Remote;

pub mod guest;
pub mod health;
mod job;
pub mod network;
mod then;
mod trail;
mod undo;
pub mod upload;

pub use trail::{Begun, Trail};

/// Gives the engine a connected host when it first needs one.
pub trait Connector {
    /// A connected host (opened on first use, then reused).
    fn remote(&self) -> impl Future<Output = Result<Remote>> + Send;

    /// A **new** connection to the same host, never a shared or persistent one: the proof
    /// that the host is still reachable after a change ([`crate::catalog::Op::confirms_with`]).
    /// Connectors that cannot open one refuse.
    fn fresh(&self) -> impl Future<Output = Result<Remote>> + Send {
        async {
            Err(Error::Internal(
                "this connector cannot open a second connection".into(),
            ))
        }
    }
}

/// What an op produced, ready to print.
#[derive(Debug, Clone)]
pub struct Done {
    /// The typed result (`-o json`'s `data`).
    pub data: Value,
    /// stderr lines of a successful command.
    pub warnings: Vec<String>,
}

/// A guest call as a person types it (`vm exec 100 -- cat /etc/hostname`: the argv as words,
/// not as the JSON the line carries).
fn guest_call(inv: &Invocation) -> String {
    let argv = inv
        .op
        .params
        .iter()
        .find(|p| p.kind == catalog::Kind::GuestArgv)
        .and_then(|p| inv.values.get(p.name))
        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok());
    match (argv, inv.vmid()) {
        (Some(argv), Some(vmid)) => format!(
            "{} {vmid} -- {}",
            inv.op.cli.join(" "),
            crate::base::text::quote_argv(&argv)
        ),
        _ => inv.display(),
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
    /// The session's taint (policy `taint: after_exec`; MCP and batch): marked when a guest's
    /// output comes back, and then its next change needs a phrase. `None`: one op per run.
    pub taint: Option<&'a crate::policy::Taint>,
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
        let policy_confirm = self.judge(inv, trail).await?;
        self.confirm(inv, given, policy_confirm, trail)
    }

    /// The local policy's part of [`Engine::decide`] (exit 3); whether and why the policy asks
    /// for a phrase.
    async fn judge(&self, inv: &Invocation, trail: &mut Trail) -> Result<Ask> {
        trail.argv = inv.remote_argv();
        let tags = if self.policy.wants_tags(inv) {
            Some(guest_tags(&self.connector.remote().await?).await?)
        } else {
            None
        };
        let decision = self.policy.check(inv, tags.as_ref())?;
        self.policy.check_destinations(inv, None)?;
        if inv.op.prechecks.contains(&catalog::Precheck::KeepsSsh) {
            let remote = self.connector.remote().await?;
            self.policy.check_ssh_path(inv, &remote.ssh_path())?;
        }
        if self.policy.wants_storage_config(inv) {
            // Only a policy that names its NFS servers pays this read.
            let remote = self.connector.remote().await?;
            let config = remote.read_op(&ops::STORAGE_CONFIG, &[]).await?;
            self.policy.check_storage_trust(inv, &config)?;
        }
        Ok(match decision {
            Decision::Confirm(_) => Ask::Policy,
            // A change after a guest's output came back in this session: its phrase must come
            // from the human, not from what the guest printed.
            _ => match self.taint.and_then(crate::policy::Taint::by) {
                Some(by) if self.policy.taint_holds(inv.op) => Ask::Tainted(by),
                _ => Ask::No,
            },
        })
    }

    /// The confirmation's part of [`Engine::decide`] (exit 4), then the rate limit (exit 8).
    fn confirm(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        policy_confirm: Ask,
        trail: &mut Trail,
    ) -> Result<()> {
        trail.phrase = self.phrase(inv, given, &policy_confirm)?;
        if let (Ask::Tainted(_), Some(t)) = (&policy_confirm, self.taint) {
            t.clear();
        }
        // Quota is taken only once policy and confirmation have said yes: a
        // refused call never uses up a limit.
        crate::policy::limits::admit(inv.op, self.policy)?;
        Ok(())
    }

    /// The phrase's part of [`Engine::confirm`] (exit 4): the phrase that was accepted, if `inv`
    /// needs one (asked at a terminal when there is a human to ask).
    fn phrase(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        policy_confirm: &Ask,
    ) -> Result<Option<String>> {
        if self.interactive {
            crate::policy::confirm::gate(inv, given, policy_confirm)
        } else {
            crate::policy::confirm::gate_with(inv, given, policy_confirm, false, |_| {
                Err(Error::Internal("no terminal to ask".into()))
            })
        }
    }

    /// [`Engine::decide`] for an op that may have nothing to do ([`catalog::Already`]), or
    /// that looks at its target before asking ([`catalog::Precheck::before_asking`]): the
    /// policy first (a refusal stays a refusal), then the reads (after the node lookup), and
    /// only when the action is to run, the phrase and the rate limit. A no-op needs no phrase
    /// and counts against no limit, since nothing happens; a phrase that was given must
    /// still be the right one (checked before the reads). Returns the invocation with its
    /// node resolved, or the `changed: false` result.
    async fn admit(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
    ) -> Result<Admit> {
        let asks_after_looking = inv.op.prechecks.iter().any(|c| c.before_asking());
        if inv.op.already.is_none() && !asks_after_looking {
            self.decide(inv, given, trail).await?;
            return Ok(Admit::Run {
                inv: inv.clone(),
                by_map: false,
            });
        }
        let policy_confirm = self.judge(inv, trail).await?;
        // A wrong phrase is refused before anything is read (exit 4, nothing sent).
        if given.is_some() {
            crate::policy::confirm::gate_with(inv, given, &policy_confirm, false, |_| {
                Err(Error::Internal("no terminal to ask".into()))
            })?;
        }
        let remote = self.connector.remote().await?;
        let mut inv = inv.clone();
        if inv.needs_node() {
            let node = remote.resolve_node(&inv).await?;
            inv.values.insert("node", node);
        }
        let Some(already) = inv.op.already else {
            // Check before asking: a human is never asked for a phrase for what
            // cannot run, and is told what goes with the target.
            inv.attach.scope = remote.before_asking(&inv).await?;
            self.confirm(&inv, given, policy_confirm, trail)?;
            return Ok(Admit::Run { inv, by_map: false });
        };
        // The guest map the node lookup just used says the action is needed (a stopped
        // guest to start): no status read. Should the map be stale, Proxmox refuses the
        // action, and [`Engine::already_after_all`] tells that from a failure.
        if let Some(vmid) = inv.vmid()
            && remote
                .mapped_status(vmid)
                .is_some_and(|s| already.needed_by(&s))
        {
            self.confirm(&inv, given, policy_confirm, trail)?;
            return Ok(Admit::Run { inv, by_map: true });
        }
        let (there, read) = already_there(&remote, &inv, already).await?;
        if !there {
            self.confirm(&inv, given, policy_confirm, trail)?;
            return Ok(Admit::Run { inv, by_map: false });
        }
        // What ran was the status read: that is what the audit record shows.
        trail.argv = read;
        Ok(Admit::Unchanged(unchanged(&inv, already)))
    }

    /// After an action admitted on the guest map's word ([`Admit::Run`] `by_map`) failed
    /// with `err`: when Proxmox answered (not a refusal by sudo or the gate, not a lost
    /// connection), one status read tells whether the guest was already where the action
    /// would take it (the map was stale: `VM 100 already running`, `CT 100 not running`).
    /// Then the result is the `changed: false` one the status read would have given first;
    /// otherwise the failure stands.
    async fn already_after_all(&self, inv: &Invocation, err: &Error) -> Option<Value> {
        let already = inv.op.already?;
        if !matches!(err, Error::Remote(_) | Error::WrongState(_)) {
            return None;
        }
        let remote = self.connector.remote().await.ok()?;
        let (there, _) = already_there(&remote, inv, already).await.ok()?;
        there.then(|| {
            let mut done = unchanged(inv, already);
            done["refused"] = json!(err.to_string());
            done
        })
    }

    /// The invocation for an op whose guest was given by name (`vm status web`):
    /// one read of the cluster's guests, the same the node lookup makes, gives its VMID and
    /// its node, so the op then needs no lookup of its own. The name is resolved before the
    /// policy decides (the policy judges the VMID), so even a refused call makes this read.
    pub async fn named(&self, named: &crate::catalog::invocation::Named) -> Result<Invocation> {
        let remote = self.connector.remote().await?;
        let guest = remote.guest_named(named.op, &named.name).await?;
        named.resolve(&guest)
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
        self.execute_watched(inv, given, trail, progress, None)
            .await
    }

    /// [`Engine::execute`] for a front end that may have to stop what the op started (MCP
    /// cancellation): just before the op's command is sent, `started` gets the prepared
    /// invocation (node and VMID known) and, for an op that runs a task, the UPIDs the node's
    /// task list holds then — one read more, so that a task that appears later is known to
    /// be this op's.
    pub async fn execute_watched(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
        started: Option<&std::sync::Mutex<Started>>,
    ) -> Result<Done> {
        if inv.op.uploads().is_some() {
            return self.upload(inv, given, trail, &mut |_, _| {}).await;
        }
        if inv.op.confirms_with.is_some() {
            return self.armed_change(inv, given, trail).await;
        }
        if inv.op.fans_out.is_some() && !inv.values.contains_key("node") {
            // The job's run as a whole; each of its lines (node known) comes back here.
            return self.job_run(inv, given, trail, progress).await;
        }
        if inv.op.risk == Risk::Exec && !inv.op.runs_guest_command() {
            // Reading a guest process's status: policy and limits, no phrase, no task.
            trail.argv = inv.remote_argv();
            let data = crate::engine::guest::exec_status(self, inv).await?;
            return Ok(Done {
                data,
                warnings: Vec::new(),
            });
        }
        let (inv, by_map) = match self.admit(inv, given, trail).await? {
            Admit::Run { inv, by_map } => (inv, by_map),
            Admit::Unchanged(unchanged) => {
                return Ok(Done {
                    data: unchanged,
                    warnings: Vec::new(),
                });
            }
        };
        let inv = &inv;
        // Before the config is read and the digest pinned: a snapshot changes the config.
        trail.snapshot = self.snapshot_before(inv, trail, progress).await?;
        let remote = self.connector.remote().await?;
        let mut prepared = remote.prepare(inv).await?;
        prepared.attach.confirmed = trail.phrase.clone().or_else(|| given.map(str::to_string));
        trail.argv = prepared.remote_argv();
        // Follow-up steps are judged now, before anything is sent.
        let steps = then::planned(self.policy, &prepared)?;
        if let Some(slot) = started {
            let before = if inv.op.runs_task() {
                task_upids(
                    &remote
                        .read_op(&ops::TASK_LIST, &task_filter(&prepared))
                        .await?,
                )
            } else {
                Vec::new()
            };
            *slot.lock().expect("started lock") = Started {
                sent: Some(prepared.clone()),
                before,
                sent_at: Some(std::time::Instant::now()),
            };
        }
        trail.begin(inv.op)?;
        let record = trail.begun.as_ref().map(|b| b.seq);
        // The task's log lines, for a value the result carries (`backup create`'s archive).
        let mut log = Vec::new();
        let mut keep = |line: &str| {
            trail.saw(line);
            if inv.op.yields.is_some() {
                log.push(line.to_string());
            }
            progress(line)
        };
        let outcome = match remote.send_with_progress(&prepared, &mut keep).await {
            // The guest was not where the connection's guest map said: once more, on the
            // node it is on now (nothing ran the first time).
            Err(e) => match remote.relocate(inv, &prepared, &e).await {
                Ok(Some(mut moved)) => {
                    moved.attach.confirmed = prepared.attach.confirmed.clone();
                    let out = remote
                        .send_with_progress(&moved, &mut keep)
                        .await
                        .map_err(|e| outcome_unknown(&moved, e, record))?;
                    prepared = moved;
                    out
                }
                _ => {
                    if by_map && let Some(data) = self.already_after_all(&prepared, &e).await {
                        return Ok(Done {
                            data,
                            warnings: Vec::new(),
                        });
                    }
                    return Err(outcome_unknown(&prepared, e, record));
                }
            },
            Ok(outcome) => outcome,
        };
        trail.argv = prepared.remote_argv();
        trail.upid = outcome.upid.clone();
        trail.undo = undo::undo_step(&prepared);
        let data = crate::views::normalize(inv.op.view, &outcome.data, inv.keep_type)?;
        let data = crate::views::keep_local(inv.op.view, inv.op.local, &inv.values, data);
        let mut data = match outcome.upid {
            Some(upid) => crate::views::value(&crate::views::TaskResult {
                upid: Some(upid),
                node: outcome.node,
                task: Some(data),
                ..Default::default()
            }),
            None => data,
        };
        if let Some(obj) = data.as_object_mut().filter(|_| inv.op.risk != Risk::Read) {
            obj.insert("changed".into(), json!(true));
            if let Some(y) = inv.op.yields {
                obj.insert(yield_key(y).into(), yielded(y, &prepared, &log));
            }
        }
        if !steps.is_empty() {
            let node = prepared.values.get("node").cloned().unwrap_or_default();
            let done = self
                .follow_up(&prepared, &node, &steps, trail, progress)
                .await?;
            data["then"] = json!(done);
        }
        Ok(Done {
            data,
            warnings: outcome.warnings,
        })
    }
    /// Run any op of the catalog as the front ends without file sync do (the MCP server,
    /// `pxagent batch`): ordinary ops through [`Engine::execute`], a command inside a guest
    /// through [`crate::engine::guest::run`] with its `command` and `input_data` values and no file
    /// transfers (they would read or write files of the machine pxagent runs on), waiting at
    /// most `exec_timeout`; a guest process's status through [`crate::engine::guest::exec_status`].
    pub async fn run(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
        progress: &mut (dyn FnMut(&str) + Send),
        exec_timeout: std::time::Duration,
    ) -> Result<Done> {
        if inv.op.risk != Risk::Exec {
            return self.execute(inv, given, trail, progress).await;
        }
        let data = if inv.op.runs_guest_command() {
            crate::engine::guest::run(self, &guest_request(inv, exec_timeout), given, trail).await?
        } else {
            crate::engine::guest::exec_status(self, inv).await?
        };
        // What the guest printed (a command's output, a file's content) is now in the
        // session: with `taint: after_exec` the next change needs a phrase.
        if let Some(t) = self
            .taint
            .filter(|_| inv.op.runs_guest_command() || inv.op.read_only())
        {
            t.mark(guest_call(inv));
        }
        Ok(Done {
            data,
            warnings: Vec::new(),
        })
    }

    /// Run one command inside a guest with its file sync (`vm exec`, `ct exec`): local checks,
    /// policy and the argv allowlist, confirmation and the rate limit first, then the host.
    /// Returns the result document (`data` in JSON).
    pub async fn exec(
        &self,
        req: &crate::engine::guest::GuestRequest,
        given: Option<&str>,
        trail: &mut Trail,
    ) -> Result<Value> {
        crate::engine::guest::run(self, req, given, trail).await
    }

    /// `--no-wait`: decide here (policy, phrase, limits), then hand the op to a follower that
    /// runs it to its end, and return as soon as its task shows up in the node's task list.
    ///
    /// pvesh runs a task synchronously and prints its UPID only at the end, and closing its
    /// channel would hang the task up; so the follower (started by `spawn`, given the phrase
    /// that was accepted) holds the channel, and writes its own audit record. If it ends
    /// before the task is seen, its own answer (one `-o json` document on its stdout) is
    /// relayed.
    pub async fn start(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
        spawn: &mut dyn FnMut(Option<&str>) -> Result<std::process::Child>,
    ) -> Result<Value> {
        if inv.op.fans_out.is_some() {
            return Err(Error::usage(format!(
                "`{}` runs one task per node, which --no-wait cannot follow: run it without --no-wait",
                inv.op.cli.join(" ")
            )));
        }
        if inv.op.then.iter().any(|t| t.wanted(inv)) {
            return Err(Error::usage(format!(
                "`{}` has steps after it (a disk grown, cloud-init set) that --no-wait cannot run: run it without --no-wait",
                inv.op.cli.join(" ")
            )));
        }
        let inv = match self.admit(inv, given, trail).await? {
            Admit::Run { inv, .. } => inv,
            Admit::Unchanged(unchanged) => return Ok(unchanged),
        };
        let inv = &inv;
        let remote = self.connector.remote().await?;
        let prepared = remote.prepare(inv).await?;
        let node = prepared.values.get("node").cloned().unwrap_or_default();
        let vmid = prepared.values.get("vmid").cloned();
        let mut filter: Vec<(&'static str, &str)> = vec![("node", &node)];
        if let Some(v) = &vmid {
            filter.push(("vmid", v));
        }
        let upids = |list: &Value| -> Vec<String> {
            list.as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.get("upid").and_then(Value::as_str).map(String::from))
                .collect()
        };
        let before = upids(&remote.read_op(&ops::TASK_LIST, &filter).await?);
        trail.argv = prepared.remote_argv();
        trail.begin(inv.op)?;
        let phrase = if given.is_none() {
            trail.phrase.clone()
        } else {
            None
        };
        let mut child = spawn(phrase.as_deref())?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = child
                .try_wait()
                .map_err(|e| Error::Internal(e.to_string()))?
            {
                // The follower finished before the task showed up: relay its answer.
                let mut text = String::new();
                if let Some(mut so) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut so, &mut text);
                }
                let doc: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
                if doc["ok"] == true {
                    let upid = doc["data"]["upid"].as_str().map(String::from);
                    trail.upid = upid.clone();
                    return Ok(
                        json!({"upid": upid, "node": node, "following": false, "changed": true, "task": doc["data"]["task"]}),
                    );
                }
                let msg = doc["error"]["message"]
                    .as_str()
                    .unwrap_or("the follower failed")
                    .to_string();
                return Err(Error::from_exit_code(
                    status.code().unwrap_or(10) as u8,
                    msg,
                ));
            }
            let now = upids(&remote.read_op(&ops::TASK_LIST, &filter).await?);
            if let Some(upid) = now.into_iter().find(|u| !before.contains(u)) {
                trail.upid = Some(upid.clone());
                return Ok(
                    json!({"upid": upid, "node": node, "following": true, "changed": true, "follower_pid": child.id()}),
                );
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::Remote(format!(
                    "no task for `{}` appeared within 60 s; the follower (pid {}) is still trying: see `pxagent task list` and `pxagent audit show`",
                    inv.display(),
                    child.id()
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    }
}

/// What a dry run of `inv` reports: the remote command, its sudoers rule, risk and
/// profiles, and the local policy's verdict (a guest's tags are unknown without a
/// connection, so tag protection is checked at run time). Sends nothing. An op the policy
/// refuses is refused here too, with the same message and exit 3.
pub fn dry_run(policy: &Policy, inv: &Invocation, trail: &mut Trail) -> Result<Value> {
    trail.dry_run = true;
    // A file to send is read here already: the command line carries its size and digest.
    let staged;
    let inv = match inv.op.uploads() {
        Some(_) => {
            staged = upload::stage(inv)?.0;
            &staged
        }
        None => inv,
    };
    trail.argv = inv.remote_argv();
    policy.check_destinations(inv, None)?;
    let verdict = dry_verdict(policy, inv)?;
    let mut data = inv.dry_run();
    data["approval_statement"] = json!(crate::approval::preview::preview(inv));
    data["policy"] = json!(verdict);
    if inv.op.then.iter().any(|t| t.wanted(inv)) {
        data["then"] = then::dry_run(inv);
    }
    if let Some(read) = inv.op.fans_out {
        data["fans_out"] = json!(format!(
            "the job is read first (`{}`), then this line is sent once per node that holds its guests, with the job's settings in place of <node>, <vmids>, <storage> …",
            read.cli.join(" ")
        ));
    }
    Ok(data)
}

/// The local policy's verdict as a dry run reports it; a refusal is the error itself (exit 3,
/// the same message as a real run). A dry run reads nothing from the host, so a protected tag
/// cannot be checked: the verdict says so rather than claim the op is allowed (it is refused,
/// exit 3, if the guest carries one).
fn dry_verdict(policy: &Policy, inv: &Invocation) -> Result<String> {
    let verdict = match policy.check(inv, Some(&GuestTags::default()))? {
        Decision::Allow => "allowed".to_string(),
        Decision::Confirm(c) => format!("needs the phrase `{}` ({})", c.phrase, c.rule),
        Decision::Approve { rule, .. } => format!("needs a signed approval ({rule})"),
    };
    Ok(if policy.wants_tags(inv) {
        format!(
            "{verdict}, unless the guest carries a protected tag (tags are read from the host only when it runs)"
        )
    } else {
        verdict
    })
}

/// The guest command of an exec op's invocation (its `command` and `input_data` values),
/// without file transfers, waiting at most `timeout`.
pub fn guest_request(
    inv: &Invocation,
    timeout: std::time::Duration,
) -> crate::engine::guest::GuestRequest {
    let value = |k: &str| inv.values.get(k).cloned();
    crate::engine::guest::GuestRequest {
        op: inv.op,
        vmid: value("vmid").unwrap_or_default(),
        node: value("node"),
        argv: catalog::kind::guest_argv(&value("command").unwrap_or_default()),
        stdin: value("input_data").map(String::into_bytes),
        push: Vec::new(),
        pull: Vec::new(),
        force: false,
        mkdir: false,
        timeout,
    }
}

/// What a dry run of a guest command reports: the first remote command, the policy's and
/// the allowlist's verdict, and the rate limits. Local checks still apply (exit 2), and so do
/// the policy's refusals (exit 3).
pub fn dry_run_exec(
    policy: &Policy,
    req: &crate::engine::guest::GuestRequest,
    trail: &mut Trail,
) -> Result<Value> {
    trail.dry_run = true;
    let (inv, argv) = crate::engine::guest::check_request(req)?;
    trail.set_argv(&inv);
    // A refusal is a refusal in a dry run too (exit 3, the same message).
    let verdict = dry_verdict(policy, &inv)?;
    policy.check_command(&inv, &argv)?;
    crate::engine::guest::check_transfers(policy, req, &inv)?;
    trail.transfers = req.transfers();
    let mut data = inv.dry_run();
    data["policy"] = json!(verdict);
    data["transfers"] = json!(trail.transfers);
    data["limits"] = json!(policy.limits_for(inv.op));
    Ok(data)
}

/// The human summary of a result.
pub fn human(inv: &Invocation, data: &Value) -> String {
    if data["changed"] == false {
        return format!(
            "{}: {}; nothing to do",
            inv.display(),
            data["message"].as_str().unwrap_or("nothing to do")
        );
    }
    // What it made, alone on the last line (a script takes it with `tail -1`).
    if let Some(y) = inv.op.yields
        && let Some(v) = match &data[yield_key(y)] {
            Value::String(s) => Some(crate::base::text::printable(s).to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
        && data["then"].is_null()
    {
        return format!(
            "{}: {} (task {})\n{v}",
            inv.display(),
            data["task"]["exitstatus"].as_str().unwrap_or("done"),
            data["upid"].as_str().unwrap_or("")
        );
    }
    match inv.op.view {
        catalog::View::Task => {
            let mut s = format!(
                "{}: {} (task {})",
                inv.display(),
                data["task"]["exitstatus"].as_str().unwrap_or("done"),
                data["upid"].as_str().unwrap_or("")
            );
            // Its follow-up steps, one line each.
            for step in data["then"].as_array().into_iter().flatten() {
                let what = step["command"]
                    .as_str()
                    .or(step["op"].as_str())
                    .unwrap_or("");
                let how = match step["message"].as_str() {
                    Some(m) => format!("nothing to do, {m}"),
                    None => step["result"]["task"]["exitstatus"]
                        .as_str()
                        .unwrap_or("done")
                        .to_string(),
                };
                s.push_str(&format!(
                    "\nthen {}: {how}",
                    crate::base::text::printable(what)
                ));
            }
            // What it made, last (the guest a create with follow-up steps made).
            if let Some(n) = inv.op.yields.and_then(|y| data[yield_key(y)].as_u64()) {
                s.push_str(&format!("\n{n}"));
            }
            s
        }
        catalog::View::Done => format!("{}: done", inv.display()),
        catalog::View::Upload => upload::human(data),
        catalog::View::Applied | catalog::View::JobRun => {
            data["message"].as_str().unwrap_or("done").to_string()
        }
        catalog::View::Wait => format!(
            "task {}: {}",
            data["upid"].as_str().unwrap_or(""),
            data["exitstatus"].as_str().unwrap_or("ended")
        ),
        view => crate::views::human(view, data),
    }
}

/// The key of a [`catalog::Yield`] in the result.
fn yield_key(y: catalog::Yield) -> &'static str {
    match y {
        catalog::Yield::Archive(_) => "archive",
        catalog::Yield::Guest(_) => "vmid",
        catalog::Yield::Snapshot(_) => "snapshot",
        catalog::Yield::Volume(..) => "volid",
    }
}

/// The value a [`catalog::Yield`] names, from the task's log lines (`None` when the log does
/// not say). pvesh prints the log as it runs, or — proxied to another node — as one JSON
/// string holding it (FORMATS.md §1.6); both are searched.
fn yielded(y: catalog::Yield, inv: &Invocation, log: &[String]) -> Value {
    let lines = log.iter().flat_map(|l| {
        let decoded = serde_json::from_str::<String>(l).unwrap_or_else(|_| l.clone());
        decoded.lines().map(String::from).collect::<Vec<_>>()
    });
    let value = |p: &str| inv.values.get(p).cloned();
    match y {
        catalog::Yield::Archive(storage) => {
            json!(value(storage).and_then(|storage| {
                lines.into_iter().find_map(|l| archive_volid(&l, &storage))
            }))
        }
        catalog::Yield::Guest(p) => match value(p).and_then(|v| v.parse::<u64>().ok()) {
            Some(n) => json!(n),
            None => Value::Null,
        },
        catalog::Yield::Snapshot(p) => json!(value(p)),
        catalog::Yield::Volume(dir, name) => json!(
            value("storage")
                .zip(value(name))
                .map(|(storage, name)| format!("{storage}:{dir}/{name}"))
        ),
    }
}

/// The volume id of the archive a vzdump log line names (FORMATS.md §3.10): a file vzdump
/// writes into the storage's dump directory is `<storage>:backup/<file>`, a Proxmox Backup
/// Server snapshot `<storage>:backup/<type>/<id>/<time>`.
fn archive_volid(line: &str, storage: &str) -> Option<String> {
    let quoted = |prefix: &str| -> Option<String> {
        let rest = &line[line.find(prefix)? + prefix.len()..];
        Some(rest[..rest.find('\'')?].to_string())
    };
    if let Some(path) = quoted("creating vzdump archive '") {
        let file = path.rsplit('/').next()?;
        return file
            .starts_with("vzdump-")
            .then(|| format!("{storage}:backup/{file}"));
    }
    quoted("creating Proxmox Backup Server archive '")
        .map(|snap| format!("{storage}:backup/{snap}"))
}

/// The tags of the cluster's guests, for a policy that protects tags: from the connection's
/// guest map (the read that also finds guests' nodes; see [`crate::remote::guests`] for when
/// it is read again).
pub(crate) async fn guest_tags(remote: &Remote) -> Result<GuestTags> {
    let guests = remote.guest_map().await?;
    Ok(GuestTags::from_resources(&Value::Array((*guests).clone())))
}

/// What a running op has sent, for a front end that may have to stop it (see
/// [`Engine::execute_watched`]).
#[derive(Debug, Default, Clone)]
pub struct Started {
    /// The prepared invocation, once its command is about to be sent (`None`: nothing that
    /// changes state has been sent yet).
    pub sent: Option<Invocation>,
    /// The UPIDs in the node's task list just before the command of an op that runs a task.
    pub before: Vec<String>,
    /// When the command was about to be sent: its task, on a slow host, appears a while after.
    pub sent_at: Option<std::time::Instant>,
}

/// The filter of the task list a prepared invocation's task shows up in: its node, and its
/// guest when it has one.
pub fn task_filter(prepared: &Invocation) -> Vec<(&'static str, &str)> {
    let mut filter = vec![(
        "node",
        prepared
            .values
            .get("node")
            .map(String::as_str)
            .unwrap_or(""),
    )];
    if let Some(v) = prepared.values.get("vmid") {
        filter.push(("vmid", v.as_str()));
    }
    filter
}

/// The UPIDs of a task list.
pub fn task_upids(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("upid").and_then(Value::as_str).map(String::from))
        .collect()
}

/// A connector that opens one connection on first use and keeps it for the invocation (a
/// CLI run, a batch). A failed connect is remembered: every later request gets the same
/// error at once instead of trying (and maybe timing out) again.
pub struct OnceConnector {
    target: crate::ssh::Target,
    persist: Option<std::time::Duration>,
    cell: tokio::sync::OnceCell<Remote>,
    failed: std::sync::Mutex<Option<(u8, String)>>,
}

impl OnceConnector {
    /// A connector for this target; nothing is opened yet.
    pub fn new(target: crate::ssh::Target) -> OnceConnector {
        OnceConnector {
            target,
            persist: None,
            cell: tokio::sync::OnceCell::new(),
            failed: std::sync::Mutex::new(None),
        }
    }

    /// Go through a persistent connection kept this long after the last call
    /// ([`crate::persist`]); `None`: a connection of this process.
    pub fn persist(mut self, idle: Option<std::time::Duration>) -> OnceConnector {
        self.persist = idle;
        self
    }

    /// Close the connection if one was opened (a persistent one stays for the next caller).
    pub async fn close(&self) {
        if let Some(r) = self.cell.get() {
            r.session.clone().close().await;
        }
    }
}

impl Connector for OnceConnector {
    async fn fresh(&self) -> Result<Remote> {
        let session = crate::ssh::Session::connect(&self.target).await?;
        Ok(Remote::new(
            session,
            self.target.display(),
            self.target.command_timeout,
        ))
    }

    async fn remote(&self) -> Result<Remote> {
        if let Some((code, msg)) = self
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            return Err(Error::from_exit_code(code, msg));
        }
        let r = self
            .cell
            .get_or_try_init(|| crate::persist::connect(&self.target, self.persist))
            .await
            .cloned();
        if let Err(e) = &r {
            *self.failed.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((e.exit_code(), e.to_string()));
        }
        r
    }
}

#[cfg(test)]
mod tests;

/// What [`Engine::admit`] decided.
enum Admit {
    /// Run the action. `by_map`: the guest map said it is needed, and no status read was
    /// made (see [`Engine::already_after_all`]).
    Run { inv: Invocation, by_map: bool },
    /// Nothing to do: the `changed: false` result.
    Unchanged(Value),
}

/// `already`'s status read of `inv`'s guest on its node: whether the guest is already
/// `already.is`, and the line the read sent (for the audit record).
async fn already_there(
    remote: &Remote,
    inv: &Invocation,
    already: catalog::Already,
) -> Result<(bool, Vec<String>)> {
    let value = |k: &str| inv.values.get(k).map_or("", String::as_str);
    let values = [("vmid", value("vmid")), ("node", value("node"))];
    let status = remote.read_op(already.read, &values).await?;
    let read = Invocation::new(
        already.read,
        values.iter().map(|(k, v)| (*k, v.to_string())).collect(),
    )?
    .remote_argv();
    let now = status.get(already.field).and_then(Value::as_str);
    Ok((now == Some(already.is), read))
}

/// The result of an action that had nothing to do: the guest is already `already.is`.
fn unchanged(inv: &Invocation, already: catalog::Already) -> Value {
    let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
    let noun = catalog::guest_noun(inv.op.area.guest_types()[0]);
    json!({
        "changed": false,
        "vmid": inv.vmid(),
        "node": inv.values.get("node").cloned().unwrap_or_default(),
        "status": already.is,
        "message": format!("{noun} {vmid} is already {}", already.is),
    })
}

/// A change whose connection was lost after it was sent (`record`: its `started` audit
/// record): the host may or may not have done it, so its result is neither a failure nor a
/// success but exit 11, `outcome_unknown`, which nothing retries. A read stays a lost
/// connection (exit 7), and so does a change whose channel never opened (nothing ran).
fn outcome_unknown(inv: &Invocation, e: Error, record: Option<u64>) -> Error {
    match e {
        Error::Connection(m)
            if inv.op.risk != catalog::Risk::Read && !m.contains(crate::ssh::NOTHING_RAN) =>
        {
            Error::OutcomeUnknown(format!(
                "{m}. `{}` was sent and its result never arrived: it may or may not have happened. \
                 Nothing retries it; {}",
                inv.display(),
                match record {
                    Some(seq) => format!(
                        "`pxagent reconcile {seq}` finds out what happened on the host and records it"
                    ),
                    None => "check the guest and the node's task list (`pxagent task list`)".into(),
                }
            ))
        }
        other => other,
    }
}
