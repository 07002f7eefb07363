//! Running invocations on a host: resolve the node, send `sudo -n …`, classify the answer.
//!
//! Everything that crosses the wire for an op goes through [`Remote::run`]. The transport
//! ([`crate::ssh`]) only moves bytes; this module knows what sudo's and Proxmox's answers
//! mean, and which answers must never be taken for success:
//! a refusal by sudo (exit 9), a Proxmox tool run without root (exit 9, a setup problem),
//! a task that ended not OK although pvesh exited 0 (exit 1). The texts are sorted in
//! [`classify`], which also gives a remote failure its precise kind (`not_found`, `locked`,
//! `wrong_state`).
//!
//! The host is reached through the [`Transport`] trait ([`transport`]): an SSH
//! [`crate::ssh::Session`] in production, a [`replay::Replay`] of recorded outputs in tests.
//! This module may use the catalog, invocations and views; the transport below it knows none
//! of them. Logs: `pxagent::remote` at DEBUG (node lookups, task results).
//!
//! Layer: remote. May import: `audit`, `base`, `catalog`, `ssh`, `views`.

pub mod classify;
pub mod guests;
pub mod memo;
pub mod replay;
pub mod transport;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::base::gate_protocol::{Refusal as GateRefusal, RefusalKind};
use crate::catalog::invocation::GuestRef;
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, NodeFrom, Op, ops};
use crate::ssh::Captured;

pub use classify::classify;
pub use guests::vmid_of;
pub use transport::{BoxFuture, Transport};

/// What a successful op produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The parsed result: pvesh's JSON for reads, the task's status for actions.
    pub data: Value,
    /// Lines on stderr of a command that succeeded (warnings, not failures).
    pub warnings: Vec<String>,
    /// The task's UPID, for actions.
    pub upid: Option<String>,
    /// The node the op ran against.
    pub node: Option<String>,
}

/// The message for a guest of a kind `op` does not take (`200 is a container: use
/// `pxagent ct status 200``); `what` is how the user named it.
fn wrong_kind(op: &Op, what: &str, kind: &str) -> String {
    let (noun, other) = match kind {
        "lxc" => ("a container", "ct"),
        _ => ("a VM", "vm"),
    };
    let rest: Vec<&str> = op.cli[1..].to_vec();
    format!(
        "{what} is {noun}: use `pxagent {other} {} {what}`",
        rest.join(" ")
    )
}

/// A connected host.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The connection (one per invocation; shared by concurrent commands). Named `session`
    /// because it is the SSH session outside tests.
    pub session: Arc<dyn Transport>,
    /// `user@host:port`, for messages.
    pub target: String,
    /// How long to wait for an HA-managed guest to reach its requested state.
    pub settle_timeout: std::time::Duration,
    /// How long `task wait` follows a task (`--timeout`); `None` until it ends.
    pub wait_limit: Option<std::time::Duration>,
    /// This connection's guest map (node lookups, tags, names), shared by clones.
    guests: Arc<guests::GuestMap>,
}

impl Remote {
    /// Wrap a session (or any transport); HA guests get 120 s to settle unless `timeout`
    /// says otherwise.
    pub fn new(
        session: impl Transport + 'static,
        target: String,
        timeout: Option<std::time::Duration>,
    ) -> Remote {
        Remote::over(Arc::new(session), target, timeout)
    }

    /// [`Remote::new`] over a shared transport (a test keeps its own handle on a replay).
    pub fn over(
        session: Arc<dyn Transport>,
        target: String,
        timeout: Option<std::time::Duration>,
    ) -> Remote {
        let settle_timeout = timeout.unwrap_or(std::time::Duration::from_secs(120));
        Remote {
            session,
            target,
            settle_timeout,
            wait_limit: timeout,
            guests: Arc::new(guests::GuestMap::default()),
        }
    }

    /// The SSH connection this remote uses, as the host sees it where it is known
    /// ([`catalog::firewall::SshPath`]): a direct connection's addresses, else only the port.
    pub fn ssh_path(&self) -> catalog::firewall::SshPath {
        use catalog::firewall::{SshPath, unmap};
        match self.session.addresses() {
            Some((local, peer)) => SshPath {
                client: Some(unmap(local.ip())),
                server: Some(unmap(peer.ip())),
                port: peer.port(),
            },
            None => SshPath {
                client: None,
                server: None,
                port: self
                    .target
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(22),
            },
        }
    }

    /// Run one invocation: resolve what the host must tell, execute, classify, parse.
    pub async fn run(&self, inv: &Invocation) -> Result<Outcome> {
        let inv = self.prepare(inv).await?;
        self.send(&inv).await
    }

    /// Fill in what the host must tell (node, next free VMID) and run the op's prechecks.
    /// Reads only; nothing that changes state has been sent when this fails.
    pub async fn prepare(&self, inv: &Invocation) -> Result<Invocation> {
        let mut inv = inv.clone();
        if inv.needs_node() {
            let node = self.resolve_node(&inv).await?;
            inv.values.insert("node", node);
        }
        for p in inv
            .op
            .params
            .iter()
            .filter(|p| p.how == catalog::How::NextId)
        {
            if !inv.values.contains_key(p.name) {
                let next = self.read_op(&ops::CLUSTER_NEXTID, &[]).await?;
                let id = as_u64(&next)
                    .ok_or_else(|| Error::Remote(format!("/cluster/nextid returned {next}")))?;
                let v = p.kind.parse(p.name, &id.to_string())?;
                inv.values.insert(p.name, v);
            }
        }
        for check in inv.op.prechecks {
            if let catalog::Precheck::PinDigest(param) = check {
                self.pin_digest(&mut inv, param).await?;
            }
        }
        // Those checked before the phrase was asked for are the engine's (`before_asking`).
        for check in inv.op.prechecks.iter().filter(|c| !c.before_asking()) {
            self.precheck(&inv, *check).await?;
        }
        Ok(inv)
    }

    /// [`catalog::Precheck::PinDigest`]: unless the caller gave a digest, read the guest's
    /// config (kept for a conflict's report) and send its digest with the change.
    async fn pin_digest(&self, inv: &mut Invocation, param: &'static str) -> Result<()> {
        // The caller's digest stands for the config it read: nothing to read here.
        if inv.values.contains_key(param) {
            return Ok(());
        }
        let config = self.guest_read(inv, GuestRead::Config).await?;
        {
            let digest = config
                .get("digest")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    Error::Remote(format!(
                        "the config of guest {} has no digest, so the change cannot be pinned to it",
                        inv.values.get("vmid").map(String::as_str).unwrap_or("?")
                    ))
                })?;
            let digest = catalog::Kind::Digest.parse(param, digest).map_err(|_| {
                Error::Remote(format!(
                    "the config's digest {} is not 40 hex digits",
                    crate::base::text::printable(digest)
                ))
            })?;
            inv.values.insert(param, digest);
        }
        inv.attach.read_config = Some(config);
        Ok(())
    }

    /// A conflict's report: what the config holds now, against what was read before the change
    /// (each key that differs), or, for a digest the caller gave, the current values of the
    /// keys the change would have set.
    async fn explain_conflict(&self, inv: &Invocation, message: String) -> Error {
        let Ok(now) = self.guest_read(inv, GuestRead::Config).await else {
            return Error::Conflict(message);
        };
        let shown = |v: Option<&Value>| match v {
            None => "(unset)".to_string(),
            Some(Value::String(s)) => crate::base::text::printable(s),
            Some(other) => other.to_string(),
        };
        let changed: Vec<String> = match &inv.attach.read_config {
            Some(before) => {
                let mut keys: Vec<&String> = before
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                    .chain(now.as_object().into_iter().flatten().map(|(k, _)| k))
                    .filter(|k| *k != "digest")
                    .collect();
                keys.sort();
                keys.dedup();
                keys.into_iter()
                    .filter(|k| before.get(k.as_str()) != now.get(k.as_str()))
                    .map(|k| {
                        format!(
                            "{k}: {} -> {}",
                            shown(before.get(k.as_str())),
                            shown(now.get(k.as_str()))
                        )
                    })
                    .collect()
            }
            None => inv
                .op
                .params
                .iter()
                .filter(|p| inv.values.contains_key(p.name) && now.get(p.name).is_some())
                .map(|p| format!("{} is now {}", p.name, shown(now.get(p.name))))
                .collect(),
        };
        let vmid = inv.values.get("vmid").map(String::as_str).unwrap_or("?");
        let area = inv.op.cli[0];
        Error::Conflict(format!(
            "{message}; someone changed the configuration of guest {vmid} since it was read, so nothing was changed{}; read it again (`pxagent {area} config {vmid}`) and decide whether your change still holds",
            if changed.is_empty() {
                String::new()
            } else {
                format!(" (what changed: {})", changed.join(", "))
            }
        ))
    }

    /// The checks an op makes before its phrase is asked for ([`catalog::Precheck::before_asking`]):
    /// reads only, on `inv` with its node resolved. A guest that cannot be destroyed
    /// now, or a snapshot that is not there, is refused here (nothing sent, no phrase asked);
    /// for a destroy, what goes with the guest and what stays.
    pub async fn before_asking(
        &self,
        inv: &Invocation,
    ) -> Result<Option<crate::base::error::Scope>> {
        let mut scope = None;
        for check in inv.op.prechecks.iter().filter(|c| c.before_asking()) {
            match check {
                catalog::Precheck::Destroyable => scope = Some(self.destroyable(inv).await?),
                catalog::Precheck::Connected(param) => {
                    let want = inv.values.get(param).cloned().unwrap_or_default();
                    let here = self.local_node().await?;
                    if want != here {
                        return Err(Error::usage(format!(
                            "pxagent is connected to {here}, not {want}: {} acts on the node it runs on (the revert is the host's own); connect to {want} (-H)",
                            inv.op.id
                        )));
                    }
                }
                catalog::Precheck::SnapshotExists(param) => {
                    self.snapshot_exists(inv, param).await?
                }
                _ => {}
            }
        }
        Ok(scope)
    }

    /// One of the guest's reads (its status, config or snapshots) on `inv`'s VMID and node:
    /// what a check before asking makes, and what [`Remote::settle`] polls.
    /// The config of `inv`'s guest (`vm config` or `ct config` by the op's area, on its node).
    pub async fn guest_config(&self, inv: &Invocation) -> Result<Value> {
        self.guest_read(inv, GuestRead::Config).await
    }

    async fn guest_read(&self, inv: &Invocation, what: GuestRead) -> Result<Value> {
        let vm = inv.op.area != catalog::Area::Ct;
        let op = match (what, vm) {
            (GuestRead::Status, true) => &ops::VM_STATUS,
            (GuestRead::Status, false) => &ops::CT_STATUS,
            (GuestRead::Config, true) => &ops::VM_CONFIG,
            (GuestRead::Config, false) => &ops::CT_CONFIG,
            (GuestRead::Snapshots, true) => &ops::VM_SNAPSHOTS,
            (GuestRead::Snapshots, false) => &ops::CT_SNAPSHOTS,
        };
        let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
        let node = inv.values.get("node").cloned().unwrap_or_default();
        self.read_op(op, &[("vmid", &vmid), ("node", &node)]).await
    }

    /// [`catalog::Precheck::Destroyable`]: not running, not protected, not an HA resource
    /// unless `purge` is given (Proxmox refuses each: `VM N is running - destroy failed`, its
    /// protection check, `used in HA resources and purge parameter not set`); then what goes.
    async fn destroyable(&self, inv: &Invocation) -> Result<crate::base::error::Scope> {
        let noun = catalog::guest_noun(inv.op.area.guest_types()[0]);
        let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
        let area = inv.op.cli[0];
        let status = self.guest_read(inv, GuestRead::Status).await?;
        if status.get("status").and_then(Value::as_str) == Some("running") {
            return Err(Error::WrongState(format!(
                "{noun} {vmid} is running, and Proxmox destroys only a stopped guest: nothing was sent and no phrase is needed yet; shut it down first (`pxagent {area} shutdown {vmid}`), then destroy it"
            )));
        }
        let config = self.guest_read(inv, GuestRead::Config).await?;
        if config.get("protection").is_some_and(|p| p == 1 || p == "1") {
            return Err(Error::WrongState(format!(
                "{noun} {vmid} is protected (protection: 1), and Proxmox refuses to destroy it: nothing was sent; the protection is the admin's to lift"
            )));
        }
        let purge = inv.values.contains_key("purge");
        let ha = match vmid.parse::<u64>() {
            Ok(id) => self
                .guest(id)
                .await?
                .and_then(|r| r.get("hastate").cloned())
                .is_some_and(|h| !h.is_null()),
            Err(_) => false,
        };
        if ha && !purge {
            return Err(Error::WrongState(format!(
                "{noun} {vmid} is an HA resource, and Proxmox destroys it only with --purge (which also removes it from the HA configuration): nothing was sent; add --purge if that is meant"
            )));
        }
        let mut goes = disks_of(&config);
        let snaps: Vec<String> = self
            .guest_read(inv, GuestRead::Snapshots)
            .await?
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("name").and_then(Value::as_str))
            .filter(|n| *n != "current")
            .map(|n| format!("snapshot {}", crate::base::text::printable(n)))
            .collect();
        goes.extend(snaps);
        if purge {
            goes.push("its entries in backup jobs, replication and HA".into());
        }
        Ok(crate::base::error::Scope {
            goes,
            stays: vec![format!("its backups (`pxagent backup list --vmid {vmid}`)")],
        })
    }

    /// [`catalog::Precheck::SnapshotExists`]: the guest has the snapshot `param` names.
    async fn snapshot_exists(&self, inv: &Invocation, param: &str) -> Result<()> {
        let Some(want) = inv.values.get(param) else {
            return Ok(());
        };
        let list = self.guest_read(inv, GuestRead::Snapshots).await?;
        let names: Vec<&str> = list
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("name").and_then(Value::as_str))
            .filter(|n| *n != "current")
            .collect();
        if names.contains(&want.as_str()) {
            return Ok(());
        }
        let noun = catalog::guest_noun(inv.op.area.guest_types()[0]);
        let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
        Err(Error::NotFound(format!(
            "{noun} {vmid} has no snapshot '{want}' ({}): nothing was sent and no phrase is needed",
            if names.is_empty() {
                "it has none".to_string()
            } else {
                format!("it has {}", names.join(", "))
            }
        )))
    }

    /// Send a prepared invocation and follow its task.
    pub async fn send(&self, inv: &Invocation) -> Result<Outcome> {
        self.send_with_progress(inv, &mut |_| {}).await
    }

    /// [`Remote::send`], handing each complete line the task prints (its log, as it runs) to
    /// `progress`. Afterwards the guest map forgets the guests an action may have changed
    /// (also when it failed: it may have got half-way).
    pub async fn send_with_progress(
        &self,
        inv: &Invocation,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Outcome> {
        let result = match self.send_one(inv, progress).await {
            Err(Error::Conflict(m)) => Err(self.explain_conflict(inv, m).await),
            other => other,
        };
        self.forget_changed(inv).await;
        result
    }

    async fn send_one(
        &self,
        inv: &Invocation,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Outcome> {
        let mut pending = Vec::new();
        let mut on_stdout = |chunk: &[u8]| {
            pending.extend_from_slice(chunk);
            while let Some(i) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=i).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim();
                if !line.is_empty() {
                    progress(line);
                }
            }
        };
        if inv.op.view == catalog::View::Brief {
            // Answered from the guest map, whose line this op's is.
            return Ok(Outcome {
                data: self.guest_of(inv).await?,
                warnings: Vec::new(),
                upid: None,
                node: None,
            });
        }
        let argv = inv.remote_argv();
        let out = self.exec_admitted(inv, &mut on_stdout).await?;
        classify(&out, &argv, &self.target)?;
        let warnings = warning_lines(&out);
        let node = inv.values.get("node").cloned();
        if inv.op.risk == catalog::Risk::Read {
            let mut data = parse_json(&out, inv)?;
            if argv == guests::map_argv() {
                self.remember_guest_map(&data).await;
            }
            if inv.op.view == catalog::View::Wait {
                data = self.wait_task(inv, data).await?;
            }
            return Ok(Outcome {
                data,
                warnings,
                upid: None,
                node,
            });
        }
        let found = find_upid(&out.stdout_text());
        if found.is_none() && inv.op.view == catalog::View::Done {
            // No task: the exit status (already classified) is the result.
            let text = out.stdout_text().trim().to_string();
            let data = crate::views::value(&crate::views::DoneResult {
                done: true,
                output: text,
            });
            return Ok(Outcome {
                data,
                warnings,
                upid: None,
                node,
            });
        }
        // Actions: pvesh printed the task log, then the UPID; it exits 0 even when the task
        // failed (FORMATS.md §1.3), so the task's own status decides.
        let upid = found.ok_or_else(|| {
            Error::Remote(format!(
                "`{}` returned no task id; stdout: {}; stderr: {}",
                inv.display(),
                tail(&out.stdout_text(), 3),
                tail(&out.stderr_text(), 3)
            ))
        })?;
        let status = self.task_status(&upid).await?;
        let exit = status
            .get("exitstatus")
            .and_then(Value::as_str)
            .unwrap_or("");
        tracing::debug!(
            target: "pxagent::remote",
            upid = %upid,
            status = status.get("status").and_then(|s| s.as_str()).unwrap_or(""),
            exitstatus = exit,
            "task"
        );
        if status.get("status").and_then(Value::as_str) == Some("stopped") && !task_ok(exit) {
            let log = self.task_log_tail(&upid, 10).await.unwrap_or_default();
            return Err(classify::failed_task(&upid, exit, &log));
        }
        // HA-managed guests only get a request: the task (hastart/hastop) ends at once and
        // the guest reaches its state later, so poll its status (FORMATS.md §1.3).
        if let Some(want) = inv.op.settles
            && upid.split(':').nth(5).is_some_and(|t| t.starts_with("ha"))
        {
            self.settle(inv, want).await?;
        }
        Ok(Outcome {
            data: status,
            warnings,
            upid: Some(upid),
            node,
        })
    }

    /// `task wait`: read the task's status again (once a second, as proxmoxer does) until it
    /// stopped, or until [`Remote::wait_limit`] ran out (exit 7). A task that ended not OK is
    /// exit 1 with its last log lines; otherwise its final status is the result.
    async fn wait_task(&self, inv: &Invocation, first: Value) -> Result<Value> {
        let upid = inv.values.get("upid").cloned().unwrap_or_default();
        let node = inv.values.get("node").cloned().unwrap_or_default();
        let deadline = self.wait_limit.map(|t| tokio::time::Instant::now() + t);
        let mut status = first;
        loop {
            if status.get("status").and_then(Value::as_str) == Some("stopped") {
                let exit = status
                    .get("exitstatus")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if task_ok(exit) {
                    return Ok(status);
                }
                let log = self.task_log_tail(&upid, 10).await.unwrap_or_default();
                return Err(Error::Remote(format!(
                    "task {upid} failed: {exit}{}",
                    if log.is_empty() {
                        String::new()
                    } else {
                        format!("\n{log}")
                    }
                )));
            }
            if let Some(d) = deadline
                && tokio::time::Instant::now() + std::time::Duration::from_secs(1) > d
            {
                return Err(Error::Connection(format!(
                    "task {upid} is still running after {}s (--timeout); it goes on: wait again with `pxagent task wait {upid}`, or stop it with `pxagent task stop {upid}`",
                    self.wait_limit.unwrap_or_default().as_secs()
                )));
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            status = self
                .read_op(&ops::TASK_STATUS, &[("upid", &upid), ("node", &node)])
                .await?;
        }
    }

    /// Poll a guest's status until it is `want` (at most the command timeout, default 120 s).
    async fn settle(&self, inv: &Invocation, want: &str) -> Result<()> {
        let vmid = inv.values.get("vmid").cloned().unwrap_or_default();
        let deadline = tokio::time::Instant::now() + self.settle_timeout;
        loop {
            let st = self.guest_read(inv, GuestRead::Status).await?;
            if st.get("status").and_then(Value::as_str) == Some(want) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Remote(format!(
                    "HA was asked to make guest {vmid} {want}, but after {}s it is {}",
                    self.settle_timeout.as_secs(),
                    st.get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    /// Run `inv`'s command as it is sent: its wire form; and when a gated host's policy wants
    /// the phrase the user already gave, the same command again in an envelope that carries
    /// it (once; nothing ran the first time). The captured output, unclassified.
    pub async fn exec_admitted(
        &self,
        inv: &Invocation,
        on_stdout: &mut (dyn FnMut(&[u8]) + Send),
    ) -> Result<crate::ssh::Captured> {
        let argv = inv.remote_argv();
        let wire = inv.wire_argv();
        let mut out = self.session.exec_streaming(&wire, on_stdout).await?;
        if wire == argv
            && inv.attach.confirmed.is_some()
            && gate_refusal(&out).is_some_and(|r| r.kind == RefusalKind::ConfirmationRequired)
        {
            out = self
                .session
                .exec_streaming(&inv.envelope(None), on_stdout)
                .await?;
        }
        Ok(out)
    }

    async fn precheck(&self, inv: &Invocation, check: catalog::Precheck) -> Result<()> {
        use catalog::Precheck;
        let node = inv.values.get("node").cloned().unwrap_or_default();
        match check {
            Precheck::NewVmid(param) => {
                let Some(id) = inv.values.get(param).and_then(|v| v.parse::<u64>().ok()) else {
                    return Ok(());
                };
                if let Some(r) = self.guest(id).await? {
                    let kind = match r.get("type").and_then(Value::as_str) {
                        Some("lxc") => "container",
                        _ => "VM",
                    };
                    // If the catalog has a confirm variant of this command selected by a
                    // switch (restore --force), that is the way to overwrite: say so.
                    let overwrite = catalog::ops_at(inv.op.cli).into_iter().find_map(|o| {
                        let flag = o.selecting_flags().next()?;
                        Some((flag, catalog::fill(o.confirm?.phrase, &inv.values)))
                    });
                    let hint = match overwrite {
                        Some((flag, phrase)) => format!(
                            "; to overwrite it add --{flag} (needs the phrase `{phrase}`), or pick a free VMID (`pxagent cluster nextid`)"
                        ),
                        None => "; pick a free VMID (`pxagent cluster nextid`)".to_string(),
                    };
                    return Err(Error::usage(format!(
                        "{kind} {id} already exists (on {}){hint}",
                        r.get("node").and_then(Value::as_str).unwrap_or("?")
                    )));
                }
                Ok(())
            }
            Precheck::SpaceGib(size_param, storage_param) => {
                let (Some(size), Some(storage)) =
                    (inv.values.get(size_param), inv.values.get(storage_param))
                else {
                    return Ok(());
                };
                let need = size.parse::<u64>().unwrap_or(0) * 1024 * 1024 * 1024;
                self.need_space(&node, storage, need, &format!("{size} GiB"))
                    .await
            }
            Precheck::PathApart(param) => {
                let Some(path) = inv.values.get(param) else {
                    return Ok(());
                };
                let config = self.read_op(&ops::STORAGE_CONFIG, &[]).await?;
                match catalog::kind::overlapping_storage(path, &config) {
                    Some((id, theirs)) => Err(Error::usage(catalog::kind::overlap_message(
                        path, &id, &theirs,
                    ))),
                    None => Ok(()),
                }
            }
            // Judged with the policy's NFS servers, by the engine and the gate.
            Precheck::Trusted(_) => Ok(()),
            // Judged with the policy's allow_ssh_lockout, by the engine and the gate.
            Precheck::KeepsSsh | Precheck::PinDigest(_) => Ok(()),
            // Checked before the phrase was asked for ([`Remote::before_asking`]).
            Precheck::Destroyable | Precheck::SnapshotExists(_) | Precheck::Connected(_) => Ok(()),
            Precheck::SpaceForArchive(archive_param, storage_param) => {
                let Some(archive) = inv.values.get(archive_param) else {
                    return Ok(());
                };
                let src = archive.split(':').next().unwrap_or("");
                let content = self
                    .read_op(
                        &ops::STORAGE_CONTENT,
                        &[("storage", src), ("content", "backup"), ("node", &node)],
                    )
                    .await?;
                let size = content
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c.get("volid").and_then(Value::as_str) == Some(archive.as_str()))
                    .map(|c| c.get("size").and_then(as_u64).unwrap_or(0))
                    .ok_or_else(|| {
                        Error::usage(format!(
                            "backup {archive} does not exist on {node} (see `pxagent backup list --storage {src}`)"
                        ))
                    })?;
                let Some(storage) = inv.values.get(storage_param) else {
                    return Ok(());
                };
                // A compressed archive expands: its size is only a floor for what restore needs.
                let what = format!(
                    "at least {} (the archive's size)",
                    crate::views::bytes(size as f64)
                );
                self.need_space(&node, storage, size, &what).await
            }
        }
    }

    /// The entry of `storage` in `node`'s storage list (its type, content, space), if the
    /// node has it.
    pub async fn storage_entry(&self, node: &str, storage: &str) -> Result<Option<Value>> {
        let list = self.read_op(&ops::STORAGE_LIST, &[("node", node)]).await?;
        Ok(list
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s.get("storage").and_then(Value::as_str) == Some(storage))
            .cloned())
    }

    async fn need_space(&self, node: &str, storage: &str, need: u64, what: &str) -> Result<()> {
        let entry = self.storage_entry(node, storage).await?.ok_or_else(|| {
            Error::usage(format!(
                "storage '{storage}' does not exist on {node} (see `pxagent storage list`)"
            ))
        })?;
        let avail = entry.get("avail").and_then(as_u64).unwrap_or(0);
        if need > avail {
            return Err(Error::usage(format!(
                "storage '{storage}' on {node} has {} free, but this needs {what}; free space first or choose another storage",
                crate::views::bytes(avail as f64)
            )));
        }
        Ok(())
    }

    /// Execute one remote argv and classify failures.
    pub async fn exec(&self, argv: &[String]) -> Result<Captured> {
        let out = self.session.exec(argv).await?;
        classify(&out, argv, &self.target)?;
        Ok(out)
    }

    /// Find the node for an invocation whose node is not pinned.
    pub async fn resolve_node(&self, inv: &Invocation) -> Result<String> {
        match inv.node_from() {
            Some(NodeFrom::Guest) => {
                let entry = self.guest_of(inv).await?;
                let vmid = inv.vmid().unwrap_or_default();
                let node = entry
                    .get("node")
                    .and_then(Value::as_str)
                    .map(String::from)
                    .ok_or_else(|| {
                        Error::Remote(format!("guest {vmid} has no node in /cluster/resources"))
                    })?;
                tracing::debug!(target: "pxagent::remote", vmid, node = %node, "guest's node from /cluster/resources");
                Ok(node)
            }
            Some(NodeFrom::Local) => self.local_node().await,
            Some(NodeFrom::Upid) | None => Err(Error::Internal("node cannot be resolved".into())),
        }
    }

    /// The guest a front end named instead of giving its VMID (`vm status web`),
    /// from the same `/cluster/resources` read the node lookup makes: the one guest of a
    /// kind `op` takes whose name is exactly `name`. Unknown and ambiguous names are usage
    /// errors (exit 2) listing the candidates; a guest of the other kind names the command
    /// that takes it.
    pub async fn guest_named(&self, op: &Op, name: &str) -> Result<GuestRef> {
        // The connection's guest map, read again when no guest has the name (created since).
        self.guests_where(|r| r.get("name").and_then(Value::as_str) == Some(name))
            .await?;
        let resources = self.guest_map().await?;
        let guests: Vec<GuestRef> = resources
            .iter()
            .filter_map(|r| {
                Some(GuestRef {
                    vmid: r.get("vmid").and_then(as_u64)?,
                    node: r.get("node").and_then(Value::as_str)?.to_string(),
                    kind: r.get("type").and_then(Value::as_str)?.to_string(),
                    name: r.get("name").and_then(Value::as_str).map(String::from),
                })
            })
            .collect();
        let want = op.area.guest_types();
        let noun = match want {
            [one] => catalog::guest_noun(one),
            _ => "guest",
        };
        let named: Vec<&GuestRef> = guests
            .iter()
            .filter(|g| g.name.as_deref() == Some(name))
            .collect();
        let (fits, other): (Vec<&GuestRef>, Vec<&GuestRef>) =
            named.iter().partition(|g| want.contains(&g.kind.as_str()));
        let list = |gs: &[&GuestRef]| {
            gs.iter()
                .map(|g| format!("{} on {}", g.vmid, g.node))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match (fits.as_slice(), other.as_slice()) {
            ([one], _) => {
                tracing::debug!(target: "pxagent::remote", name, vmid = one.vmid, node = %one.node, "guest named in /cluster/resources");
                Ok((*one).clone())
            }
            ([], [one, ..]) => Err(Error::usage(wrong_kind(op, name, &one.kind))),
            ([], []) => {
                let mut known: Vec<String> = guests
                    .iter()
                    .filter(|g| want.contains(&g.kind.as_str()))
                    .filter_map(|g| Some(format!("{} ({})", g.name.as_deref()?, g.vmid)))
                    .collect();
                let more = known.len().saturating_sub(20);
                known.truncate(20);
                let known = if known.is_empty() {
                    String::new()
                } else if more > 0 {
                    format!("; named ones: {} and {more} more", known.join(", "))
                } else {
                    format!("; named ones: {}", known.join(", "))
                };
                Err(Error::usage(format!(
                    "no {noun} is named '{name}'{known} (see `pxagent {} list`)",
                    op.cli[0]
                )))
            }
            (many, _) => Err(Error::usage(format!(
                "{} {noun}s are named '{name}': {}; give the VMID instead",
                many.len(),
                list(many)
            ))),
        }
    }

    /// Read the name of the node pxagent is connected to (`local: 1` in /cluster/status);
    /// [`Remote::local_node`] keeps it for the connection.
    async fn read_local_node(&self) -> Result<String> {
        let status = self.read_op(&ops::CLUSTER_STATUS, &[]).await?;
        status
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| {
                e.get("type").and_then(Value::as_str) == Some("node")
                    && e.get("local").and_then(as_u64) == Some(1)
            })
            .and_then(|e| e.get("name").and_then(Value::as_str))
            .map(String::from)
            .ok_or_else(|| Error::Remote("/cluster/status names no local node".into()))
    }

    /// Run a read op of the catalog (its handle, e.g. `&ops::VM_STATUS`) with raw values and
    /// return its JSON.
    pub async fn read_op(&self, op: &'static Op, values: &[(&'static str, &str)]) -> Result<Value> {
        let raw: BTreeMap<&'static str, String> =
            values.iter().map(|(k, v)| (*k, v.to_string())).collect();
        let inv = Invocation::new(op, raw)?;
        let out = self.exec(&inv.remote_argv()).await?;
        parse_json(&out, &inv)
    }

    async fn task_status(&self, upid: &str) -> Result<Value> {
        self.read_op(&ops::TASK_STATUS, &[("upid", upid)]).await
    }

    async fn task_log_tail(&self, upid: &str, n: usize) -> Result<String> {
        let log = self
            .read_op(&ops::TASK_LOG, &[("upid", upid), ("limit", "5000")])
            .await?;
        let lines: Vec<&str> = log
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.get("t").and_then(Value::as_str))
            .collect();
        Ok(lines[lines.len().saturating_sub(n)..].join("\n"))
    }
}

/// A task's exitstatus that counts as success.
pub fn task_ok(exitstatus: &str) -> bool {
    exitstatus == "OK" || exitstatus.starts_with("WARNINGS:")
}

/// The host gate's refusal in a command's answer, if it is one.
pub fn gate_refusal(out: &Captured) -> Option<GateRefusal> {
    GateRefusal::from_output(out.exit_status, &out.stderr_text())
}

/// stderr lines of a successful command: shown as warnings, never failures.
fn warning_lines(out: &Captured) -> Vec<String> {
    out.stderr_text()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect()
}

fn parse_json(out: &Captured, inv: &Invocation) -> Result<Value> {
    let text = out.stdout_text();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        // pvesh prints nothing for a `null` result.
        return Ok(Value::Null);
    }
    serde_json::from_str(trimmed).map_err(|e| {
        if e.is_eof() {
            // The document stops in the middle: output was lost on the way. sudo 1.9.13p3
            // with `log_output` drops what a slower reader has not taken when the command
            // exits (seen from 64 KiB on, in the test bed and with plain `ssh`).
            return Error::Remote(format!(
                "the answer to `{}` stops in the middle of its JSON after {} bytes: output was lost between the host's command and pxagent (sudo's I/O logging, log_output, is known to drop large outputs); ask for less (a shorter --timeframe, a --node, a filter) or try again",
                inv.display(),
                trimmed.len()
            ));
        }
        Error::Remote(format!(
            "`{}` did not return JSON ({e}): {}",
            inv.display(),
            tail(trimmed, 3).chars().take(400).collect::<String>()
        ))
    })
}

/// Find the UPID in pvesh's output: the last line is `"UPID:…:"` (JSON) or bare, or, when
/// pvesh proxied to another node, one JSON string holding the task log and the UPID.
pub fn find_upid(stdout: &str) -> Option<String> {
    let re =
        regex::Regex::new(&format!("({})", catalog::Kind::Upid.regex())).expect("static regex");
    let mut candidates: Vec<String> = Vec::new();
    for line in stdout.lines().rev() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let decoded = serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| line.to_string());
        candidates.push(decoded);
        break;
    }
    candidates.push(stdout.to_string());
    for c in candidates {
        if let Some(m) = re.find_iter(&c).last() {
            return Some(m.as_str().to_string());
        }
    }
    None
}

/// A number PVE gives as a JSON number or as a string of digits.
pub fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::testing::fixture;

    fn out(code: u32, stderr: &str) -> Captured {
        Captured {
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
            exit_status: code,
        }
    }

    fn argv() -> Vec<String> {
        ["sudo", "-n", "/usr/bin/pvesh", "get", "/version"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn sudo_refusals_are_exit_9() {
        // Real texts: fixtures/sudo/08_exec_denied_command.txt, 16_account_expired.txt,
        // 15b_only_password_rules_no_-n_no_tty.txt, 10d_list_nonexistent_command.txt.
        for (stderr, code, needle) in [
            (
                fixture("sudo/08_exec_denied_command.txt"),
                1,
                "no sudoers rule",
            ),
            (
                fixture("sudo/16_account_expired.txt"),
                1,
                "expired or locked",
            ),
            (
                fixture("sudo/15b_only_password_rules_no_-n_no_tty.txt"),
                1,
                "password",
            ),
            (
                fixture("sudo/10d_list_nonexistent_command.txt"),
                1,
                "does not exist",
            ),
            (
                "bash: line 1: sudo: command not found\n".to_string(),
                127,
                "not installed",
            ),
        ] {
            let stderr: String = stderr
                .lines()
                .filter(|l| !l.starts_with("rc="))
                .collect::<Vec<_>>()
                .join("\n");
            let e = classify(&out(code, &stderr), &argv(), "zen-agent@h:22").unwrap_err();
            assert_eq!(e.exit_code(), 9, "{stderr}");
            assert!(e.to_string().contains(needle), "{e}");
            assert!(e.to_string().contains("pxagent preflight"), "{e}");
        }
    }

    #[test]
    fn pve_without_root_is_a_setup_problem() {
        // fixtures/pve/pvesh_cluster_status_json_standalone_pve9.1_and_nonroot_error.transcript.txt
        let stderr = "ipcc_send_rec[1] failed: Unknown error -1\nUnable to load access control list: Unknown error -1\n";
        let e = classify(&out(255, stderr), &argv(), "h").unwrap_err();
        assert_eq!(e.exit_code(), 9);
        assert!(e.to_string().contains("without root"), "{e}");
    }

    #[test]
    fn other_failures_are_exit_1_and_warnings_are_not_failures() {
        let e = classify(
            &out(
                2,
                "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\n",
            ),
            &argv(),
            "h",
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("does not exist"));
        assert!(classify(&out(0, "storage 'nas' is not online\n"), &argv(), "h").is_ok());
    }

    #[test]
    fn upids_are_found_in_every_shape() {
        let u = "UPID:vh8:0030FB2D:330ECAE5:65665EEA:qmstart:352:root@pam:";
        assert_eq!(find_upid(&format!("{u}\n")).as_deref(), Some(u));
        assert_eq!(
            find_upid(&format!("some log\nmore\n\"{u}\"\n")).as_deref(),
            Some(u)
        );
        let proxied = serde_json::to_string(&format!("task log line\n{u}\n")).unwrap();
        assert_eq!(find_upid(&proxied).as_deref(), Some(u));
        assert_eq!(find_upid("no task here\n"), None);
    }

    #[test]
    fn json_cut_short_says_so_without_dumping_it() {
        let inv = Invocation::new(
            &ops::NODE_RRD,
            [("node", "pve1".to_string())].into_iter().collect(),
        )
        .unwrap();
        let whole = format!("[{}]", vec![r#"{"cpu":0.25,"time":1}"#; 10_000].join(","));
        let cut = Captured {
            stdout: whole.as_bytes()[..131_072].to_vec(),
            stderr: Vec::new(),
            exit_status: 0,
        };
        let e = parse_json(&cut, &inv).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        let msg = e.to_string();
        assert!(
            msg.contains("stops in the middle") && msg.contains("131072 bytes"),
            "{msg}"
        );
        assert!(msg.len() < 600, "{msg}");
        let bad = Captured {
            stdout: format!("not json {}", "x".repeat(5000)).into_bytes(),
            ..cut
        };
        assert!(parse_json(&bad, &inv).unwrap_err().to_string().len() < 600);
    }

    #[test]
    fn task_status_words() {
        assert!(task_ok("OK"));
        assert!(task_ok("WARNINGS: 2"));
        assert!(!task_ok("VM 100 already running"));
        assert!(!task_ok("unexpected status"));
    }
}

/// Which of a guest's reads [`Remote::before_asking`] makes.
#[derive(Debug, Clone, Copy)]
enum GuestRead {
    Status,
    Config,
    Snapshots,
}

/// A guest configuration's disks, as the short items of a [`crate::base::error::Scope`]:
/// `disk scsi0 (local-lvm:vm-100-disk-0, 32G)`; CD-ROMs and empty drives are not the guest's.
fn disks_of(config: &Value) -> Vec<String> {
    let Some(obj) = config.as_object() else {
        return Vec::new();
    };
    let is_disk = |k: &str| {
        let num = |p: &str| k.strip_prefix(p).is_some_and(|n| n.parse::<u32>().is_ok());
        k == "rootfs"
            || [
                "scsi", "virtio", "sata", "ide", "efidisk", "tpmstate", "mp", "unused",
            ]
            .iter()
            .any(|p| num(p))
    };
    obj.iter()
        .filter(|(k, _)| is_disk(k))
        .filter_map(|(k, v)| {
            let spec = v.as_str()?;
            if spec.contains("media=cdrom") || spec.starts_with("none") {
                return None;
            }
            let volid = spec.split(',').next().unwrap_or(spec);
            let size = spec
                .split(',')
                .find_map(|kv| kv.strip_prefix("size="))
                .map(|s| format!(", {s}"))
                .unwrap_or_default();
            Some(format!(
                "disk {k} ({}{size})",
                crate::base::text::printable(volid)
            ))
        })
        .collect()
}
