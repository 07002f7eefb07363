//! The guest map of one connection: the answer of `/cluster/resources --type vm` (every guest
//! of the cluster with its node, type, name and tags), read once and kept, so that the node
//! lookup of every guest op, the policy's tag reads, name resolution and the "new VMID"
//! precheck cost one host command per connection instead of one each (on a real
//! Proxmox host every `pvesh` is a Perl process that loads much of the API, so the number of
//! host commands per action is what users feel).
//!
//! One map per [`super::Remote`], shared by its clones: one per CLI run, per batch, per MCP
//! connection. Under a persistent connection ([`crate::persist`]) each process also asks the
//! holder for the last map any process of that connection read ([`Transport::memo_get`]), so
//! successive CLI calls share it too.
//!
//! When the map is re-read:
//! - it is older than [`MAX_AGE`] (another client may have created, moved or tagged guests);
//! - a lookup misses (a guest created since; a name not in it) and the map was not read from
//!   the host during this lookup already (a map from a memo, kept by another process, is read
//!   again on a miss);
//! - this connection sent an op that may change a guest: that guest's entries are dropped
//!   (any change op with a VMID; one without drops the whole map), so the next lookup of it
//!   reads again, while lookups of other guests keep hitting;
//! - a guest is not where the map says: the engine asks [`super::Remote::relocate`] after
//!   Proxmox answered that the guest's config is not on that node.
//!
//! Concurrent lookups that miss share one read: the first one reads while the others wait for
//! it (a batch of 50 `vm status` sends one `/cluster/resources`, not eight).
//! A user's own `vm list` (and every read whose command line is the map's) refreshes the map
//! with its answer; it is always sent to the host, never answered from here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::Remote;
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, ops};

/// How long a guest map is used before it is read again.
pub const MAX_AGE: Duration = Duration::from_secs(10);

/// The name of the map in a persistent connection's memo.
const MEMO_GUESTS: &str = "guests";
/// The name of the connected node in a persistent connection's memo.
const MEMO_LOCAL_NODE: &str = "local_node";
/// The largest map passed to a persistent connection's memo (a cluster of thousands of guests
/// is still well below this).
const MEMO_MAX: usize = 4 * 1024 * 1024;

/// One read of the map and when it was made.
#[derive(Debug, Clone)]
struct Snapshot {
    entries: Arc<Vec<Value>>,
    read_at: Instant,
}

/// The cached guest map of one connection (see the module docs).
#[derive(Debug)]
pub struct GuestMap {
    current: Mutex<Option<Snapshot>>,
    /// Held while the map is read, so concurrent misses share one read.
    reading: tokio::sync::Mutex<()>,
    /// The node this connection reaches (`local: 1` in `/cluster/status`): it cannot change
    /// while the connection lasts.
    local_node: tokio::sync::OnceCell<String>,
    max_age: Duration,
}

impl Default for GuestMap {
    fn default() -> GuestMap {
        GuestMap::with_max_age(MAX_AGE)
    }
}

impl GuestMap {
    /// An empty map that is re-read after `max_age`.
    pub fn with_max_age(max_age: Duration) -> GuestMap {
        GuestMap {
            current: Mutex::new(None),
            reading: tokio::sync::Mutex::new(()),
            local_node: tokio::sync::OnceCell::new(),
            max_age,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Snapshot>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current snapshot if it is young enough.
    fn fresh(&self) -> Option<Snapshot> {
        self.lock()
            .clone()
            .filter(|s| s.read_at.elapsed() < self.max_age)
    }

    fn store(&self, entries: Vec<Value>, read_at: Instant) -> Snapshot {
        let snap = Snapshot {
            entries: Arc::new(entries),
            read_at,
        };
        *self.lock() = Some(snap.clone());
        snap
    }
}

/// The command line the map is read with (`vm list`'s, `ct list`'s).
pub fn map_argv() -> Vec<String> {
    Invocation::new(&ops::VM_LIST, Default::default())
        .map(|i| i.remote_argv())
        .unwrap_or_default()
}

fn entries_of(answer: &Value) -> Result<Vec<Value>> {
    answer
        .as_array()
        .cloned()
        .ok_or_else(|| Error::Remote(format!("/cluster/resources returned {answer}, not a list")))
}

/// Whether `message` carries Proxmox's "not on this node" error for guest `vmid` on `node`:
/// `Configuration file 'nodes/<node>/(qemu-server|lxc)/<vmid>.conf' does not exist`
/// (FORMATS.md §2.8 and its list of stable messages).
fn config_missing(message: &str, node: &str, vmid: u64) -> bool {
    ["qemu-server", "lxc"].iter().any(|dir| {
        message.contains(&format!(
            "Configuration file 'nodes/{node}/{dir}/{vmid}.conf' does not exist"
        ))
    })
}

/// The VMID of a `/cluster/resources` guest entry (a number, or a string of digits).
pub fn vmid_of(entry: &Value) -> Option<u64> {
    entry.get("vmid").and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    })
}

impl Remote {
    /// Every guest of the cluster, from this connection's map (read when missing or older
    /// than [`MAX_AGE`]).
    pub async fn guest_map(&self) -> Result<Arc<Vec<Value>>> {
        if let Some(s) = self.guests.fresh() {
            return Ok(s.entries);
        }
        Ok(self.read_guest_map(Instant::now()).await?.entries)
    }

    /// The map's entries that `matches` (say, a guest's name), reading the map again once when
    /// none does and it was not read during this call: a guest created since the last read
    /// is found, a name that exists nowhere costs one read.
    pub async fn guests_where(&self, matches: impl Fn(&Value) -> bool) -> Result<Vec<Value>> {
        let began = Instant::now();
        let pick = |s: &Snapshot| -> Vec<Value> {
            s.entries.iter().filter(|e| matches(e)).cloned().collect()
        };
        if let Some(s) = self.guests.fresh() {
            let found = pick(&s);
            if !found.is_empty() {
                return Ok(found);
            }
        }
        let s = self.read_guest_map(began).await?;
        let found = pick(&s);
        if found.is_empty() && s.read_at < began {
            // The map came from a memo, read before this lookup (another process kept it):
            // a guest it lacks may be new, so read it from the host once.
            let s = self.read_guest_map(began).await?;
            return Ok(pick(&s));
        }
        Ok(found)
    }

    /// Guest `vmid`'s entry in the map, if the cluster has it (see [`Remote::guests_where`]).
    pub async fn guest(&self, vmid: u64) -> Result<Option<Value>> {
        Ok(self
            .guests_where(|e| vmid_of(e) == Some(vmid))
            .await?
            .into_iter()
            .next())
    }

    /// The `status` the map gives guest `vmid` (`running`, `stopped`, `unknown`), if the map
    /// is still young enough to be used: a hint moments old, for an action's "is there
    /// anything to do" check ([`crate::catalog::Already::needed_by`]), never a result.
    pub fn mapped_status(&self, vmid: u64) -> Option<String> {
        let s = self.guests.fresh()?;
        let entry = s.entries.iter().find(|e| vmid_of(e) == Some(vmid))?;
        entry.get("status")?.as_str().map(String::from)
    }

    /// The map's entry of `inv`'s guest, of a kind `inv`'s op takes: an unknown VMID is not
    /// found (after one read anew), a guest of the other kind names the command that takes it.
    /// The node lookup's source, and the answer of `vm status --brief` and `ct status
    /// --brief`: the map is their own line, read by this connection or kept by a call moments
    /// before (at most [`MAX_AGE`]; Proxmox itself refreshes those numbers every 10 s), so
    /// many guests' brief status cost one read.
    pub async fn guest_of(&self, inv: &Invocation) -> Result<Value> {
        let vmid = inv
            .vmid()
            .ok_or_else(|| Error::Internal("guest op without vmid".into()))?;
        let entry = self.guest(vmid).await?.ok_or_else(|| {
            Error::NotFound(format!(
                "no guest with id {vmid} in the cluster (see `pxagent {} list`)",
                inv.op.cli[0]
            ))
        })?;
        let kind = entry.get("type").and_then(Value::as_str).unwrap_or("");
        if !inv.op.area.guest_types().contains(&kind) {
            return Err(Error::usage(super::wrong_kind(
                inv.op,
                &vmid.to_string(),
                kind,
            )));
        }
        Ok(entry)
    }

    /// Forget what the map says about `vmid` (this connection just changed it), so its next
    /// lookup reads the map again.
    pub async fn forget_guest(&self, vmid: u64) {
        let kept = {
            let mut current = self.guests.lock();
            let Some(s) = current.as_mut() else {
                return;
            };
            let entries: Vec<Value> = s
                .entries
                .iter()
                .filter(|e| vmid_of(e) != Some(vmid))
                .cloned()
                .collect();
            s.entries = Arc::new(entries);
            s.clone()
        };
        self.memo_store(&kept).await;
    }

    /// Forget the whole map.
    pub async fn forget_guests(&self) {
        *self.guests.lock() = None;
        self.session
            .memo_put(MEMO_GUESTS, b"", Duration::ZERO)
            .await;
    }

    /// After an op ran (or failed) on the host: forget the guests it may have changed. Reads
    /// change nothing; an op with VMIDs changes those guests; any other change may have
    /// touched any guest.
    pub(crate) async fn forget_changed(&self, inv: &Invocation) {
        if inv.op.risk == catalog::Risk::Read {
            return;
        }
        let ids: Vec<u64> = inv
            .op
            .params
            .iter()
            .filter(|p| p.kind == catalog::Kind::Vmid)
            .filter_map(|p| inv.values.get(p.name)?.parse().ok())
            .collect();
        if ids.is_empty() {
            self.forget_guests().await;
        }
        for id in ids {
            self.forget_guest(id).await;
        }
    }

    /// After `prepared` failed with `err`: when Proxmox said the guest's config is not on the
    /// node the map named (the guest moved, or was destroyed and its VMID reused elsewhere),
    /// forget the guest, look it up again and return `inv` prepared for its new node. `None`
    /// when the failure was something else or the guest is still (or no longer) there: then
    /// the failure stands. Proxmox raises that error before it forks a task (FORMATS.md
    /// §1.2, §2.8), so nothing ran and sending again is safe.
    pub async fn relocate(
        &self,
        inv: &Invocation,
        prepared: &Invocation,
        err: &Error,
    ) -> Result<Option<Invocation>> {
        let (Some(vmid), Some(node)) = (prepared.vmid(), prepared.values.get("node")) else {
            return Ok(None);
        };
        if inv.node_from() != Some(catalog::NodeFrom::Guest)
            || !inv.needs_node()
            || !config_missing(&err.to_string(), node, vmid)
        {
            return Ok(None);
        }
        self.forget_guest(vmid).await;
        if self.guest(vmid).await?.is_none() {
            return Ok(None);
        }
        let again = self.prepare(inv).await?;
        if again.values.get("node") == Some(node) {
            return Ok(None);
        }
        tracing::debug!(target: "pxagent::remote", vmid, from = %node, to = again.values.get("node").map(String::as_str).unwrap_or("?"), "the guest moved; sending again");
        Ok(Some(again))
    }

    /// Keep `answer` as the map: it is the answer of the map's own command line, which the
    /// user just sent (`vm list`).
    pub(crate) async fn remember_guest_map(&self, answer: &Value) {
        if let Ok(entries) = entries_of(answer) {
            let snap = self.guests.store(entries, Instant::now());
            self.memo_store(&snap).await;
        }
    }

    /// The node this connection reaches (`local: 1` in `/cluster/status`), read once per
    /// connection.
    pub async fn local_node(&self) -> Result<String> {
        self.guests
            .local_node
            .get_or_try_init(|| async {
                if let Some((bytes, _)) = self.session.memo_get(MEMO_LOCAL_NODE).await
                    && let Ok(name) = String::from_utf8(bytes)
                    && catalog::Kind::Node.parse("node", &name).is_ok()
                {
                    return Ok(name);
                }
                let name = self.read_local_node().await?;
                self.session
                    .memo_put(MEMO_LOCAL_NODE, name.as_bytes(), Duration::ZERO)
                    .await;
                Ok(name)
            })
            .await
            .cloned()
    }

    /// Read the map from the host (or a persistent connection's memo) unless another lookup
    /// did so since `began`.
    async fn read_guest_map(&self, began: Instant) -> Result<Snapshot> {
        let _reading = self.guests.reading.lock().await;
        if let Some(s) = self.guests.lock().clone()
            && s.read_at >= began
        {
            return Ok(s);
        }
        if self.guests.lock().is_none()
            && let Some(s) = self.memo_load().await
        {
            return Ok(s);
        }
        let answer = self.read_op(&ops::VM_LIST, &[]).await?;
        let snap = self.guests.store(entries_of(&answer)?, Instant::now());
        tracing::debug!(target: "pxagent::remote", guests = snap.entries.len(), "guest map read");
        self.memo_store(&snap).await;
        Ok(snap)
    }

    /// The map a persistent connection's holder kept, if it is young enough.
    async fn memo_load(&self) -> Option<Snapshot> {
        let (bytes, age) = self.session.memo_get(MEMO_GUESTS).await?;
        if bytes.is_empty() || age >= self.guests.max_age {
            return None;
        }
        let entries: Vec<Value> = serde_json::from_slice(&bytes).ok()?;
        let read_at = Instant::now().checked_sub(age)?;
        tracing::debug!(target: "pxagent::remote", guests = entries.len(), age_ms = age.as_millis() as u64, "guest map from the persistent connection");
        Some(self.guests.store(entries, read_at))
    }

    async fn memo_store(&self, snap: &Snapshot) {
        let Ok(bytes) = serde_json::to_vec(&*snap.entries) else {
            return;
        };
        if bytes.len() <= MEMO_MAX {
            self.session
                .memo_put(MEMO_GUESTS, &bytes, snap.read_at.elapsed())
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The guest map over a [`Replay`] fed with the real `/cluster/resources` capture
    //! (`pve/https_api_cluster_resources_pve7.4-8.0_capture.json`: VM 100 on node2, 101, 102
    //! and 200 on node1) and recorded answers; every test asserts exactly what reached the host.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::base::testing::{fixture, words};
    use crate::remote::replay::{Answer, Replay};
    use crate::remote::transport::{BoxFuture, Transport};

    /// The capture's guests as `pvesh get /cluster/resources --type vm` prints them, with VM
    /// 100 moved to `node`.
    fn map_answer(node_of_100: &str) -> Answer {
        let body: Value = serde_json::from_str(&fixture(
            "pve/https_api_cluster_resources_pve7.4-8.0_capture.json",
        ))
        .unwrap();
        let guests: Vec<Value> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| matches!(r["type"].as_str(), Some("qemu" | "lxc")))
            .cloned()
            .map(|mut r| {
                if r["vmid"] == 100 {
                    r["node"] = node_of_100.into();
                }
                r
            })
            .collect();
        Answer::ok(format!("{}\n", Value::Array(guests)))
    }

    const MAP: &str =
        "sudo -n /usr/bin/pvesh get /cluster/resources --type vm --output-format json";

    fn status(node: &str, vmid: u64) -> Vec<String> {
        words(&format!(
            "sudo -n /usr/bin/pvesh get /nodes/{node}/qemu/{vmid}/status/current --output-format json"
        ))
    }

    fn running() -> Answer {
        Answer::ok(fixture(
            "replay/pvesh_get_qemu_status_current_running_sim.json",
        ))
    }

    fn inv(op: &'static crate::catalog::Op, kv: &[(&'static str, &str)]) -> Invocation {
        let raw: BTreeMap<&'static str, String> =
            kv.iter().map(|(k, v)| (*k, v.to_string())).collect();
        Invocation::new(op, raw).unwrap()
    }

    async fn status_of(remote: &Remote, vmid: u64) -> Result<Value> {
        let i = inv(&ops::VM_STATUS, &[("vmid", &vmid.to_string())]);
        let prepared = remote.prepare(&i).await?;
        Ok(remote.send(&prepared).await?.data)
    }

    /// The replay behind a short wait per command, so concurrent lookups really overlap (a
    /// replay alone answers before any other task runs).
    #[derive(Debug)]
    struct Slow(Arc<Replay>);

    impl Transport for Slow {
        fn exec_streaming<'a>(
            &'a self,
            argv: &'a [String],
            on_stdout: &'a mut (dyn FnMut(&[u8]) + Send),
        ) -> BoxFuture<'a, Result<crate::ssh::Captured>> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                self.0.exec_streaming(argv, on_stdout).await
            })
        }
        fn exec_with_stdin<'a>(
            &'a self,
            argv: &'a [String],
            input: &'a [u8],
        ) -> BoxFuture<'a, Result<crate::ssh::Captured>> {
            self.0.exec_with_stdin(argv, input)
        }
        fn exec_many(
            &self,
            cmds: Vec<Vec<String>>,
        ) -> BoxFuture<'_, Vec<Result<crate::ssh::Captured>>> {
            self.0.exec_many(cmds)
        }
        fn close(&self) -> BoxFuture<'_, ()> {
            self.0.close()
        }
        fn is_closed(&self) -> bool {
            self.0.is_closed()
        }
        fn host_key(&self) -> &str {
            self.0.host_key()
        }
        fn server_auth_methods(&self) -> Option<Vec<String>> {
            self.0.server_auth_methods()
        }
        fn recorded_host_key(&self) -> Option<&str> {
            self.0.recorded_host_key()
        }
    }

    fn finish(host: &Replay) {
        if let Err(problems) = host.finish() {
            panic!("the host saw something else than expected:\n{problems}");
        }
    }

    #[tokio::test]
    async fn fifty_statuses_cost_one_map_read_even_eight_at_a_time() {
        // 50 statuses of the capture's four VMs, 8 in flight at a time, as a batch sends them.
        let ids = [100u64, 101, 102, 200];
        let mut host = Replay::new("pve").expect(&words(MAP), map_answer("node2"));
        for i in 0..50 {
            let id = ids[i % 4];
            let node = if id == 100 { "node2" } else { "node1" };
            host = host.expect(&status(node, id), running());
        }
        let host = Arc::new(host);
        let remote = Remote::new(Slow(host.clone()), "zen-agent@pve:22".into(), None);
        let mut set = tokio::task::JoinSet::new();
        let slots = Arc::new(tokio::sync::Semaphore::new(8));
        for i in 0..50 {
            let (remote, slots) = (remote.clone(), slots.clone());
            set.spawn(async move {
                let _slot = slots.acquire().await.unwrap();
                status_of(&remote, ids[i % 4]).await
            });
        }
        while let Some(r) = set.join_next().await {
            assert_eq!(r.unwrap().unwrap()["status"], "running");
        }
        assert_eq!(host.count(), 51, "one map read and 50 statuses");
        finish(&host);
    }

    #[tokio::test]
    async fn an_old_map_and_a_missing_guest_are_read_again() {
        let host = Arc::new(
            Replay::new("pve")
                .expect(&words(MAP), map_answer("node2"))
                .expect(&status("node2", 100), running())
                // VM 999 is in no map: one more read, then the error.
                .expect(&words(MAP), map_answer("node2"))
                // Older than its age: read again.
                .expect(&words(MAP), map_answer("node2"))
                .expect(&status("node2", 100), running()),
        );
        let mut remote = Remote::over(host.clone(), "zen-agent@pve:22".into(), None);
        remote.guests = Arc::new(GuestMap::with_max_age(Duration::from_millis(200)));
        status_of(&remote, 100).await.unwrap();
        let e = status_of(&remote, 999).await.unwrap_err();
        assert!(e.to_string().contains("no guest with id 999"), "{e}");
        tokio::time::sleep(Duration::from_millis(250)).await;
        status_of(&remote, 100).await.unwrap();
        finish(&host);
    }

    #[tokio::test]
    async fn a_change_forgets_only_its_guest() {
        let upid = "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstop:100:root@pam:";
        let host = Arc::new(
            Replay::new("pve")
                .expect(&words(MAP), map_answer("node2"))
                .expect(
                    &words("sudo -n /usr/bin/pvesh create /nodes/node2/qemu/100/status/stop --output-format json"),
                    Answer::ok(fixture("replay/pvesh_create_stop_sim.stdout")),
                )
                .expect(
                    &words(&format!(
                        "sudo -n /usr/bin/pvesh get /nodes/pve1/tasks/{upid}/status --output-format json"
                    )),
                    Answer::ok(fixture("replay/pvesh_get_task_status_stop_ok_sim.json")),
                )
                // VM 101 still hits; VM 100 was changed, so it is looked up again.
                .expect(&status("node1", 101), running())
                .expect(&words(MAP), map_answer("node2"))
                .expect(&status("node2", 100), running()),
        );
        let remote = Remote::over(host.clone(), "zen-agent@pve:22".into(), None);
        let stop = remote
            .prepare(&inv(&ops::VM_STOP, &[("vmid", "100")]))
            .await
            .unwrap();
        remote.send(&stop).await.unwrap();
        status_of(&remote, 101).await.unwrap();
        status_of(&remote, 100).await.unwrap();
        finish(&host);
    }

    #[tokio::test]
    async fn vm_list_refreshes_the_map_and_the_local_node_is_read_once() {
        let cluster: Value = serde_json::from_str(&fixture(
            "pve/https_api_cluster_status_pve7.4-8.0_capture.json",
        ))
        .unwrap();
        let storages = "sudo -n /usr/bin/pvesh get /nodes/node1/storage --output-format json";
        let host = Arc::new(
            Replay::new("pve")
                .expect(&words(MAP), map_answer("node2"))
                .expect(&status("node2", 100), running())
                .expect(
                    &words("sudo -n /usr/bin/pvesh get /cluster/status --output-format json"),
                    Answer::ok(format!("{}\n", cluster["data"])),
                )
                .expect(&words(storages), Answer::ok("[]\n"))
                .expect(&words(storages), Answer::ok("[]\n")),
        );
        let remote = Remote::over(host.clone(), "zen-agent@pve:22".into(), None);
        // The user's `vm list` is sent (never answered from the map) and becomes the map.
        let list = remote.run(&inv(&ops::VM_LIST, &[])).await.unwrap();
        assert_eq!(list.data.as_array().unwrap().len(), 4);
        status_of(&remote, 100).await.unwrap();
        for _ in 0..2 {
            remote.run(&inv(&ops::STORAGE_LIST, &[])).await.unwrap();
        }
        finish(&host);
    }

    #[tokio::test]
    async fn a_guest_that_moved_is_found_on_its_new_node() {
        let missing = "Configuration file 'nodes/node2/qemu-server/100.conf' does not exist\n";
        let host = Arc::new(
            Replay::new("pve")
                .expect(&words(MAP), map_answer("node2"))
                .expect(&status("node2", 100), Answer::fail(2, missing))
                .expect(&words(MAP), map_answer("node1"))
                .expect(&status("node1", 100), running()),
        );
        let remote = Remote::over(host.clone(), "zen-agent@pve:22".into(), None);
        let i = inv(&ops::VM_STATUS, &[("vmid", "100")]);
        let prepared = remote.prepare(&i).await.unwrap();
        let err = remote.send(&prepared).await.unwrap_err();
        let moved = remote.relocate(&i, &prepared, &err).await.unwrap().unwrap();
        assert_eq!(moved.values["node"], "node1");
        remote.send(&moved).await.unwrap();
        finish(&host);

        // Still on the node the map says: the failure stands, after one read.
        let host = Arc::new(
            Replay::new("pve")
                .expect(&words(MAP), map_answer("node2"))
                .expect(&status("node2", 100), Answer::fail(2, missing))
                .expect(&words(MAP), map_answer("node2")),
        );
        let remote = Remote::over(host.clone(), "zen-agent@pve:22".into(), None);
        let prepared = remote.prepare(&i).await.unwrap();
        let err = remote.send(&prepared).await.unwrap_err();
        assert!(
            remote
                .relocate(&i, &prepared, &err)
                .await
                .unwrap()
                .is_none()
        );
        // Another failure, or a pinned node, never re-reads.
        let other = Error::Remote("VM 100 not running".into());
        assert!(
            remote
                .relocate(&i, &prepared, &other)
                .await
                .unwrap()
                .is_none()
        );
        let pinned = inv(&ops::VM_STATUS, &[("vmid", "100"), ("node", "node2")]);
        assert!(
            remote
                .relocate(&pinned, &pinned, &err)
                .await
                .unwrap()
                .is_none()
        );
        finish(&host);
    }
}
