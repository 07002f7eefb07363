//! The simulated world (cluster, nodes, guests, snapshots, storages, volumes, tasks) and the one
//! root-owned JSON file that keeps it between calls.
//!
//! Every call of a real PVE tool is a fresh process that reads and writes pmxcfs under a cluster
//! lock; here every call is a fresh process too, so the state lives in one file
//! (`/var/lib/pve-sim/state.json`, mode 0600, directory 0700). A call takes an exclusive
//! `flock` on the sibling `state.json.lock` for its whole read-modify-write, so parallel mutating
//! calls never lose an update, and replaces the file atomically (temp file, fsync, rename, fsync of
//! the directory). The lock lives in a separate file because the rename swaps the state inode.
//!
//! The path can be moved with `PVE_SIM_STATE`. That is safe on the test bed: sudo's `env_reset`
//! strips the variable, so a caller going through sudo always gets the default root-owned file;
//! the override is for tests that run the binary directly (as root) against a temp file.
//!
//! Of the crate this module imports only [`crate::task`] (UPIDs, worker identities, what a
//! running task holds) and [`crate::timefmt`]: the modules that act on the world, running tasks
//! ([`crate::running`]) among them, build on it, never the other way round.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::task::{self, Running, Worker};
use crate::timefmt;

/// Default location of the state file (overridable by `PVE_SIM_STATE`, see the module doc).
pub const DEFAULT_STATE_PATH: &str = "/var/lib/pve-sim/state.json";

/// Most tasks kept per node; older ones are dropped like `/var/log/pve/tasks/index` rotation.
const MAX_TASKS: usize = 400;

/// The whole simulated cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct State {
    /// Cluster name (`pvecm status` `Name:`, `/cluster/status` cluster entry).
    pub cluster: String,
    /// corosync config version.
    pub config_version: u32,
    /// The node this "host" is: `qm`/`pct` act only on its guests, pvesh proxies to the others.
    pub local_node: String,
    /// `pvesh get /version`.
    pub version: PveVersion,
    /// Cluster members.
    pub nodes: Vec<Node>,
    /// Every guest of the cluster, by VMID.
    pub guests: BTreeMap<u32, Guest>,
    /// Storage definitions (storage.cfg); every storage is enabled on every node.
    pub storages: Vec<Storage>,
    /// Files on (non-shared) storages: backups, ISOs, container templates.
    pub volumes: Vec<Volume>,
    /// Tasks, oldest first (in the order they ended; running ones where they started).
    pub tasks: Vec<Task>,
    /// Monotonic counter for PIDs and task ids, so UPIDs never repeat.
    pub seq: u64,
    /// VMs whose QEMU guest agent does not answer although `agent` is configured and the VM runs
    /// (qemu-guest-agent not installed or not started in the guest) [sim-only knob:
    /// `pve-sim qga VMID up|down`].
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub qga_down: BTreeSet<u32>,
    /// VMs whose guest agent answers but refuses commands and files, as RHEL-family guests ship
    /// it (`FILTER_RPC_ARGS="--allow-rpcs=…"` without guest-exec and guest-file-*) [sim-only
    /// knob: `pve-sim qga VMID no-exec`].
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub qga_no_exec: BTreeSet<u32>,
    /// Limits of the guest-command sandbox ([`crate::sandbox`]).
    #[serde(default)]
    pub sandbox: SandboxLimits,
    /// Node networks kept here ([`crate::network`]): every node's but the local one's when
    /// the bed gave the simulator `/etc/network`; for that one only what runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub networks: BTreeMap<String, NodeNet>,
    /// The `net-cut` knob ([`crate::network`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_cut: Option<NetCut>,
    /// Firewall configurations ([`crate::firewall`]).
    #[serde(default, skip_serializing_if = "Firewalls::is_empty")]
    pub firewall: Firewalls,
    /// HA rules ([`crate::ha`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ha_rules: Vec<HaRule>,
    /// Backup jobs as `GET /cluster/backup/{id}` returns them ([`crate::backup_jobs`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backup_jobs: Vec<serde_json::Map<String, Value>>,
    /// Resource pools and their guests.
    #[serde(default)]
    pub pools: BTreeMap<String, Vec<u32>>,
}

/// A node's network files, where they are not the real ones.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeNet {
    /// `interfaces`.
    pub config: String,
    /// `interfaces.new`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    /// What the last reload applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
}

/// Every firewall configuration the simulator holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Firewalls {
    /// Guests' files, by VMID.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guests: BTreeMap<u32, GuestFw>,
    /// Nodes' rules (`host.fw`), by node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nodes: BTreeMap<String, Vec<Rule>>,
    /// The cluster's rules (`cluster.fw`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<Rule>,
}

impl Firewalls {
    pub fn is_empty(&self) -> bool {
        self == &Firewalls::default()
    }
}

/// One guest's firewall file.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct GuestFw {
    /// `[OPTIONS] enable` (off by default).
    #[serde(default)]
    pub enable: bool,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub ipsets: BTreeMap<String, IpSet>,
}

/// An IP set: its comment and entries.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct IpSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default)]
    pub entries: Vec<Map<String, Value>>,
}

/// A rule's properties as the API returns them (without `pos` and `digest`).
pub type Rule = Map<String, Value>;

/// What the simulated cluster starts with: VM 100 and container 200 each have an IP set
/// `admins` holding the admins' jump host, and no rules.
pub fn initial_firewalls() -> Firewalls {
    let admins = || GuestFw {
        enable: false,
        rules: Vec::new(),
        ipsets: BTreeMap::from([(
            "admins".to_string(),
            IpSet {
                comment: Some("who may log in".into()),
                entries: vec![Map::from_iter([
                    ("cidr".to_string(), json!("192.0.2.10")),
                    ("comment".to_string(), json!("the jump host")),
                ])],
            },
        )]),
    };
    Firewalls {
        guests: BTreeMap::from([(100, admins()), (200, admins())]),
        ..Firewalls::default()
    }
}

/// The `net-cut` knob.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NetCut {
    /// The interface whose presence cuts the host off.
    pub iface: String,
    /// The process stopped meanwhile.
    pub pid: u32,
}

/// Limits of the guest-command sandbox, settable with `pve-sim sandbox out-limit=N timeout=S`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Bytes of stdout and of stderr an agent-run command keeps; beyond them `out-truncated` /
    /// `err-truncated`. Default: qemu-guest-agent's GUEST_EXEC_MAX_OUTPUT, 16 MiB [SRC qemu
    /// qga/commands.c].
    pub out_limit: u64,
    /// Seconds before a guest command is killed [sim-only; the real agent has no limit].
    pub timeout: u64,
}

/// qemu-guest-agent's GUEST_EXEC_MAX_OUTPUT (16 MiB per stream) [SRC qemu qga/commands.c].
pub const GUEST_EXEC_MAX_OUTPUT: u64 = 16 * 1024 * 1024;

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            out_limit: GUEST_EXEC_MAX_OUTPUT,
            timeout: 300,
        }
    }
}

/// `{"release","repoid","version"}` of `/version` (FORMATS §2.1).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PveVersion {
    /// e.g. `9.1`.
    pub release: String,
    /// 16 hex digits.
    pub repoid: String,
    /// e.g. `9.1.1`.
    pub version: String,
}

/// One cluster member.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Node {
    /// Node name.
    pub name: String,
    /// corosync node id.
    pub nodeid: u32,
    /// Ring address.
    pub ip: String,
    /// Member online.
    pub online: bool,
    /// Boot time (epoch seconds); uptime is derived from it.
    pub boot_time: i64,
    /// CPU threads.
    pub maxcpu: u32,
    /// RAM bytes.
    pub maxmem: u64,
    /// RAM used, bytes.
    pub mem: u64,
    /// Root fs bytes.
    pub maxdisk: u64,
    /// Root fs used bytes.
    pub disk: u64,
    /// CPU load fraction.
    pub cpu: f64,
    /// SHA-256 fingerprint of pve-ssl.pem, `AA:BB:…`.
    pub ssl_fingerprint: String,
    /// What `pve-sim break` made fail on this node, for the health checks' tests:
    /// `service:NAME` (its unit failed, as systemd shows a crashed daemon) and `disk:DEV`
    /// (smartctl's overall assessment `FAILED`). Empty on a fresh node.
    #[serde(default)]
    pub broken: Vec<String>,
}

/// Guest type.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A VM (`qm`, `/qemu/`).
    Qemu,
    /// A container (`pct`, `/lxc/`).
    Lxc,
}

impl Kind {
    /// The API path segment and `/cluster/resources` type.
    pub fn api(self) -> &'static str {
        match self {
            Kind::Qemu => "qemu",
            Kind::Lxc => "lxc",
        }
    }
    /// The pmxcfs config directory (`nodes/<n>/<dir>/<vmid>.conf`).
    pub fn conf_dir(self) -> &'static str {
        match self {
            Kind::Qemu => "qemu-server",
            Kind::Lxc => "lxc",
        }
    }
    /// `VM` or `CT`, as in `VM 100 not running` / `CT 200 already running`.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Qemu => "VM",
            Kind::Lxc => "CT",
        }
    }
    /// Task-type prefix: `qmstart` / `vzstart`.
    pub fn task_prefix(self) -> &'static str {
        match self {
            Kind::Qemu => "qm",
            Kind::Lxc => "vz",
        }
    }
}

/// One VM or container.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Guest {
    /// VMID.
    pub vmid: u32,
    /// qemu or lxc.
    pub kind: Kind,
    /// Node that owns the config.
    pub node: String,
    /// Process running.
    pub running: bool,
    /// QEMU paused by `suspend` (qmpstatus `paused`, status stays `running`).
    #[serde(default)]
    pub paused: bool,
    /// When the guest was (re)started, epoch seconds.
    pub started_at: Option<i64>,
    /// PID of the guest's main process while running.
    pub pid: Option<u32>,
    /// Boot disk size in bytes (`maxdisk`).
    pub maxdisk: u64,
    /// The config as `pvesh get …/config` returns it (minus `digest`): values typed as PVE parses
    /// them (ints for integer options, strings for property strings). Holds `parent` and
    /// `template` like the real config file.
    pub config: BTreeMap<String, Value>,
    /// Snapshots in creation order.
    pub snapshots: Vec<Snapshot>,
    /// HA resource (`vm:<id>` / `ct:<id>` in `ha/resources.cfg`), when HA-managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<Ha>,
}

/// The HA side of a guest: the requested state and, while the LRM has not acted yet, when it
/// will have (HA requests return at once and the guest follows later, FORMATS §1.3).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Ha {
    /// Requested state (`ha-manager set --state`): `started` or `stopped`.
    pub request: String,
    /// Epoch seconds at which the LRM will have carried the request out; `None` once settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<i64>,
    /// `max_restart`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restart: Option<u64>,
}

/// An HA rule (`ha/rules.cfg`, [`crate::ha`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HaRule {
    /// Its id.
    pub rule: String,
    /// `node-affinity` or `resource-affinity`.
    pub kind: String,
    /// Resource ids (`vm:100`), as given.
    pub resources: Vec<String>,
    /// A node-affinity rule's nodes, `node` or `node:priority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// `strict`.
    #[serde(default)]
    pub strict: bool,
    /// A resource-affinity rule's `positive` or `negative`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// `comment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `disable`.
    #[serde(default)]
    pub disable: bool,
    /// Its place among the rules.
    pub order: u64,
}

/// Seconds an HA request takes to reach the guest (CRM + LRM rounds on a real cluster take
/// ~10-20 s; kept short so tests poll briefly).
pub const HA_DELAY: i64 = 2;

impl Ha {
    /// The CRM service state `ha-manager status`, `status/current` `ha.state` and
    /// `/cluster/resources` `hastate` show: `request_start`/`request_stop` while the request is
    /// pending, then `started`/`stopped` (pve-ha-manager `$valid_service_states` [SRC]).
    pub fn service_state(&self) -> &'static str {
        match (self.request.as_str(), self.due.is_some()) {
            ("started", true) => "request_start",
            ("started", false) => "started",
            (_, true) => "request_stop",
            (_, false) => "stopped",
        }
    }
}

impl Guest {
    /// VM `name` (default `VM <vmid>`, FORMATS §2.6) or CT `hostname` (default `CT<vmid>`, §2.7).
    pub fn name(&self) -> String {
        let key = match self.kind {
            Kind::Qemu => "name",
            Kind::Lxc => "hostname",
        };
        match self.config.get(key).and_then(Value::as_str) {
            Some(n) => n.to_string(),
            None => match self.kind {
                Kind::Qemu => format!("VM {}", self.vmid),
                Kind::Lxc => format!("CT{}", self.vmid),
            },
        }
    }
    /// `template: 1` in the config.
    pub fn is_template(&self) -> bool {
        config_flag(&self.config, "template")
    }
    /// Guest agent enabled (`agent: 1` / `agent: enabled=1,…`).
    pub fn agent(&self) -> bool {
        match self.config.get("agent") {
            Some(Value::String(s)) => s == "1" || s.starts_with("1,") || s.contains("enabled=1"),
            Some(Value::Number(n)) => n.as_i64() == Some(1),
            _ => false,
        }
    }
    /// Memory in bytes (`memory` is MiB: a string for qemu, an int for lxc).
    pub fn maxmem(&self) -> u64 {
        let mib = match self.config.get("memory") {
            Some(Value::String(s)) => s
                .trim_start_matches("current=")
                .split(',')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(512),
            Some(Value::Number(n)) => n.as_u64().unwrap_or(512),
            _ => 512,
        };
        mib * 1024 * 1024
    }
    /// Virtual CPUs (`cores` × `sockets`).
    pub fn cpus(&self) -> u64 {
        let cores = self
            .config
            .get("cores")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let sockets = self
            .config
            .get("sockets")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        cores * sockets
    }
    /// Disks as `(config key, volid)`, e.g. `("scsi0", "local-lvm:vm-100-disk-0")`; CD-ROMs skipped.
    pub fn disks(&self) -> Vec<(String, String)> {
        disks_of(&self.config)
    }
    /// The snapshot the current state descends from.
    pub fn parent(&self) -> Option<String> {
        self.config
            .get("parent")
            .and_then(Value::as_str)
            .map(str::to_string)
    }
    /// Uptime in seconds at `now`.
    pub fn uptime(&self, now: i64) -> i64 {
        match (self.running, self.started_at) {
            (true, Some(t)) => (now - t).max(0),
            _ => 0,
        }
    }
}

/// Disks of a config, see [`Guest::disks`].
pub fn disks_of(config: &BTreeMap<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in config {
        let is_disk = k == "rootfs"
            || k.strip_prefix("mp")
                .is_some_and(|n| n.parse::<u32>().is_ok())
            || ["scsi", "virtio", "sata", "ide", "efidisk", "tpmstate"]
                .iter()
                .any(|p| k.strip_prefix(p).is_some_and(|n| n.parse::<u32>().is_ok()));
        let Some(s) = v.as_str() else { continue };
        if !is_disk || s.contains("media=cdrom") {
            continue;
        }
        let volid = s.split(',').next().unwrap_or_default();
        if volid.contains(':') {
            out.push((k.clone(), volid.to_string()));
        }
    }
    out
}

/// A config flag that may be stored as int or string.
pub fn config_flag(config: &BTreeMap<String, Value>, key: &str) -> bool {
    match config.get(key) {
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        Some(Value::String(s)) => s == "1",
        _ => false,
    }
}

/// One snapshot of a guest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Snapshot name.
    pub name: String,
    /// Parent snapshot.
    pub parent: Option<String>,
    /// Free text, `""` when unset.
    pub description: String,
    /// Creation time, epoch seconds.
    pub snaptime: i64,
    /// RAM state saved (qemu only; the guest was running).
    pub vmstate: bool,
    /// The config at snapshot time (without `parent`).
    pub config: BTreeMap<String, Value>,
}

/// One storage definition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Storage {
    /// Storage id.
    pub id: String,
    /// Plugin type (`dir`, `lvmthin`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Content types, sorted.
    pub content: Vec<String>,
    /// Shared between nodes.
    pub shared: bool,
    /// Mount path for file-based storages.
    pub path: Option<String>,
    /// Size in bytes (the same on every node).
    pub total: u64,
    /// Bytes used by things the simulator does not model.
    pub base_used: u64,
    /// `disable 1` in storage.cfg: listed, but neither active nor enabled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable: bool,
    /// The plugin's other options as storage.cfg holds them (`is_mountpoint`, `vgname`,
    /// `thinpool`, `pool`, `server`, `export`, `datastore`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

impl Storage {
    /// Whether PVE can use the storage now: enabled, and for a directory marked as an external
    /// mount point (`is_mountpoint yes` or a path), mounted, which nothing is in the simulator
    /// (pve-storage `DirPlugin` `status`: an unmounted mount point is offline).
    pub fn active(&self) -> bool {
        !self.disable
            && !self
                .options
                .get("is_mountpoint")
                .is_some_and(|v| v != "no" && v != "0")
    }
}

/// One file on a storage (backup archive, ISO, container template).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Volume {
    /// Node whose (local) storage holds the file.
    pub node: String,
    /// Storage id.
    pub storage: String,
    /// `backup/<file>`, `iso/<file>`, `vztmpl/<file>`.
    pub volname: String,
    /// Content type.
    pub content: String,
    /// `vma.zst`, `iso`, `tzst`, …
    pub format: String,
    /// Bytes.
    pub size: u64,
    /// Creation time.
    pub ctime: i64,
    /// Owner VMID (backups).
    pub vmid: Option<u32>,
    /// `qemu`/`lxc` for backups.
    pub subtype: Option<String>,
    /// The guest config inside a backup archive (what `qmrestore` brings back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_config: Option<BTreeMap<String, Value>>,
    /// The backed-up guest's disk size (`maxdisk`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_size: Option<u64>,
    /// The file is a symbolic link to this host path (a share's `host-disk.raw` pointing at
    /// `/dev/sda`): what root reads when it follows the link ([`crate::storage_cfg::share`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// A qcow2 image's backing file (`qemu-img info`'s `backing-filename`): a share's
    /// `layered.qcow2` whose backing file is the host's `/dev/sda`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing: Option<String>,
    /// A file a root program placed in the storage's directory ([`adopt_iso_files`]): listed
    /// only while the file is there, as PVE lists a directory storage's files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_disk: bool,
}

impl Volume {
    /// A plain file on a storage (an ISO, a template, an image): no owner, no archive
    /// contents, no link.
    pub fn file(
        node: &str,
        storage: &str,
        volname: &str,
        content: &str,
        format: &str,
        size: u64,
        ctime: i64,
    ) -> Volume {
        Volume {
            node: node.into(),
            storage: storage.into(),
            volname: volname.into(),
            content: content.into(),
            format: format.into(),
            size,
            ctime,
            vmid: None,
            subtype: None,
            guest_config: None,
            disk_size: None,
            link: None,
            backing: None,
            on_disk: false,
        }
    }

    /// `<storage>:<volname>`.
    pub fn volid(&self) -> String {
        format!("{}:{}", self.storage, self.volname)
    }
    /// The file name without the content directory.
    pub fn file_name(&self) -> &str {
        self.volname.rsplit('/').next().unwrap_or(&self.volname)
    }
}

/// One task: finished, or still running ([`Task::running`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Task {
    /// Full UPID.
    pub upid: String,
    /// Node that ran it.
    pub node: String,
    /// Task type (`qmstart`, `vzdump`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// Id field (VMID, file name, or empty).
    pub id: String,
    /// `root@pam`.
    pub user: String,
    /// Worker PID.
    pub pid: u32,
    /// Worker process start, in clock ticks since boot.
    pub pstart: u64,
    /// Start, epoch seconds.
    pub starttime: i64,
    /// End, epoch seconds.
    pub endtime: i64,
    /// `OK`, `WARNINGS: N`, or the error text.
    pub exitstatus: String,
    /// Log lines, including the final `TASK OK` / `TASK ERROR: …`.
    pub log: Vec<String>,
    /// Set while the task runs (a `hold` fault): who holds it, what it locks, whether a stop
    /// was asked ([`crate::running`]). `endtime` and `exitstatus` mean nothing meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<Running>,
}

impl State {
    /// Node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }
    /// Storage by id.
    pub fn storage(&self, id: &str) -> Option<&Storage> {
        self.storages.iter().find(|s| s.id == id)
    }
    /// The guest `vmid` if its config lives on `node` and has the given type.
    pub fn guest_on(&self, node: &str, kind: Kind, vmid: u32) -> Option<&Guest> {
        self.guests
            .get(&vmid)
            .filter(|g| g.node == node && g.kind == kind)
    }
    /// Mutable [`State::guest_on`].
    pub fn guest_on_mut(&mut self, node: &str, kind: Kind, vmid: u32) -> Option<&mut Guest> {
        self.guests
            .get_mut(&vmid)
            .filter(|g| g.node == node && g.kind == kind)
    }
    /// Next value of the monotonic counter.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
    /// Append a finished task, dropping the oldest beyond [`MAX_TASKS`].
    pub fn push_task(&mut self, task: Task) {
        self.tasks.push(task);
        if self.tasks.len() > MAX_TASKS {
            let drop = self.tasks.len() - MAX_TASKS;
            self.tasks.drain(..drop);
        }
    }
    /// Record a finished task and return its UPID. `log` is what the worker printed; the stored
    /// log gets the closing `TASK OK` / `TASK ERROR: <msg>` line that only the log file shows.
    /// `worker` is the identity of a task that started earlier (else a new one starts at `start`).
    #[allow(clippy::too_many_arguments)]
    pub fn record_task(
        &mut self,
        node: &str,
        kind: &str,
        id: &str,
        start: i64,
        end: i64,
        mut log: Vec<String>,
        error: Option<&str>,
        worker: Option<Worker>,
    ) -> String {
        let Worker {
            pid,
            pstart,
            starttime: start,
        } = worker.unwrap_or_else(|| self.new_worker(node, start));
        let upid = task::format_upid(node, pid, pstart, start, kind, id, task::USER);
        let exitstatus = match error {
            None => "OK".to_string(),
            Some(e) => task::fold(e),
        };
        log.push(match error {
            None => "TASK OK".to_string(),
            Some(_) => format!("TASK ERROR: {exitstatus}"),
        });
        self.push_task(Task {
            upid: upid.clone(),
            node: node.to_string(),
            kind: kind.to_string(),
            id: id.to_string(),
            user: task::USER.to_string(),
            pid,
            pstart,
            starttime: start,
            endtime: end,
            exitstatus,
            log,
            running: None,
        });
        upid
    }
    /// A fresh worker identity on `node`, starting at `start`.
    pub fn new_worker(&mut self, node: &str, start: i64) -> Worker {
        let seq = self.next_seq();
        let boot = self
            .node(node)
            .map(|n| n.boot_time)
            .unwrap_or(start - 86_400);
        let pid = 1_000_000 + u32::try_from(seq % 3_000_000).unwrap_or(0) * 7 % 3_000_000;
        // pstart is the worker's start in clock ticks (USER_HZ 100) since boot; `seq` keeps it
        // unique.
        let pstart = u64::try_from((start - boot).max(1)).unwrap_or(1) * 100 + seq % 100;
        Worker {
            pid,
            pstart,
            starttime: start,
        }
    }
    /// Bytes used on `storage` at `node`: the base plus the modelled files; for LVM-thin a fifth
    /// of the guest disks living there (thin provisioning).
    pub fn storage_used(&self, node: &str, storage: &Storage) -> u64 {
        let files: u64 = self
            .volumes
            .iter()
            .filter(|v| v.storage == storage.id && (storage.shared || v.node == node))
            .map(|v| v.size)
            .sum();
        let disks: u64 = self
            .guests
            .values()
            .filter(|g| storage.shared || g.node == node)
            .flat_map(|g| g.disks().into_iter().map(move |(_, volid)| (g, volid)))
            .filter(|(_, volid)| volid.split(':').next() == Some(storage.id.as_str()))
            .map(|(g, _)| g.maxdisk / 5)
            .sum();
        (storage.base_used + files + disks).min(storage.total)
    }
}

fn cfg(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

fn qemu_config(
    vmid: u32,
    name: &str,
    mem_mib: u32,
    cores: u32,
    disk: &str,
    agent: bool,
) -> BTreeMap<String, Value> {
    let mut c = cfg(&[
        ("boot", json!("order=scsi0;ide2;net0")),
        ("cores", json!(cores)),
        ("cpu", json!("x86-64-v2-AES")),
        ("ide2", json!("none,media=cdrom")),
        ("memory", json!(mem_mib.to_string())),
        ("meta", json!("creation-qemu=10.1.2,ctime=1761900000")),
        ("name", json!(name)),
        (
            "net0",
            json!(format!(
                "virtio=BC:24:11:5A:{:02X}:{:02X},bridge=vmbr0,firewall=1",
                vmid / 256 % 256,
                vmid % 256
            )),
        ),
        ("numa", json!(0)),
        ("ostype", json!("l26")),
        ("scsi0", json!(disk)),
        ("scsihw", json!("virtio-scsi-single")),
        (
            "smbios1",
            json!(format!(
                "uuid={:08x}-5a1e-4c0d-9e7b-{:012x}",
                vmid,
                u64::from(vmid) * 7919
            )),
        ),
        ("sockets", json!(1)),
        (
            "vmgenid",
            json!(format!(
                "{:08x}-2b7c-4f4e-8d2a-{:012x}",
                vmid * 31,
                u64::from(vmid) * 104_729
            )),
        ),
    ]);
    if agent {
        c.insert("agent".into(), json!("1"));
    }
    c
}

fn lxc_config(
    vmid: u32,
    hostname: &str,
    mem_mib: u32,
    disk: &str,
    unprivileged: bool,
) -> BTreeMap<String, Value> {
    let mut c = cfg(&[
        ("arch", json!("amd64")),
        ("cores", json!(1)),
        ("hostname", json!(hostname)),
        ("memory", json!(mem_mib)),
        (
            "net0",
            json!(format!(
                "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5B:{:02X}:{:02X},ip=dhcp,type=veth",
                vmid / 256 % 256,
                vmid % 256
            )),
        ),
        ("ostype", json!("debian")),
        ("rootfs", json!(disk)),
        ("swap", json!(512)),
    ]);
    if unprivileged {
        c.insert("unprivileged".into(), json!(1));
        c.insert("features".into(), json!("nesting=1"));
    }
    c
}

const GIB: u64 = 1024 * 1024 * 1024;

/// The documented starting world (see the brief in the crate docs): cluster `pxlab` of three
/// online nodes `pve1` (local), `pve2`, `pve3` on PVE 9.1.1, a few guests, storages, files and
/// finished tasks. Times are relative to `now` so that backups are never in the future.
pub fn initial(now: i64) -> State {
    let node = |name: &str, id: u32, boot_ago: i64, maxcpu: u32, maxmem: u64, fp: &str| Node {
        name: name.to_string(),
        nodeid: id,
        ip: format!("10.10.10.{}", 10 + id),
        online: true,
        boot_time: now - boot_ago,
        maxcpu,
        maxmem,
        mem: maxmem / 3,
        maxdisk: 100_861_726_720,
        disk: 5_014_233_088 + u64::from(id) * 377_487_360,
        cpu: 0.0123 * f64::from(id),
        ssl_fingerprint: fp.to_string(),
        broken: Vec::new(),
    };
    let nodes = vec![
        node(
            "pve1",
            1,
            1_209_600,
            16,
            67_324_100_608,
            "3A:7C:1F:9E:52:D4:08:B6:C1:4E:77:A2:90:3B:5D:E8:6F:21:C9:04:BB:13:8A:F5:62:0D:D7:49:A6:E3:15:7B",
        ),
        node(
            "pve2",
            2,
            1_036_800,
            8,
            33_567_391_744,
            "91:0E:B4:26:CD:73:5A:E9:18:F2:4B:87:3C:D0:65:A1:7F:2E:B8:54:09:C6:E3:1D:90:AB:47:F8:2C:65:DE:13",
        ),
        node(
            "pve3",
            3,
            950_400,
            8,
            33_567_391_744,
            "5E:A8:03:C7:71:9B:E2:4D:36:F0:8C:15:D9:62:AE:07:B3:58:C4:1A:E6:9F:20:7D:8B:34:F1:C5:0A:6E:92:BD",
        ),
    ];

    let mut guests = BTreeMap::new();
    let mut add = |g: Guest| {
        guests.insert(g.vmid, g);
    };
    add(Guest {
        vmid: 100,
        kind: Kind::Qemu,
        node: "pve1".into(),
        running: true,
        paused: false,
        started_at: Some(now - 86_400 * 3),
        pid: Some(2_789),
        maxdisk: 32 * GIB,
        config: qemu_config(
            100,
            "web",
            2048,
            2,
            "local-lvm:vm-100-disk-0,iothread=1,size=32G",
            true,
        ),
        snapshots: vec![],
        ha: None,
    });
    add(Guest {
        vmid: 101,
        kind: Kind::Qemu,
        node: "pve2".into(),
        running: true,
        paused: false,
        started_at: Some(now - 86_400 * 5),
        pid: Some(3_013),
        maxdisk: 64 * GIB,
        config: qemu_config(
            101,
            "db",
            4096,
            4,
            "local-lvm:vm-101-disk-0,iothread=1,size=64G",
            true,
        ),
        snapshots: vec![],
        ha: None,
    });
    let build_cfg = qemu_config(
        102,
        "build",
        8192,
        4,
        "local-lvm:vm-102-disk-0,iothread=1,size=100G",
        false,
    );
    let mut build_now = build_cfg.clone();
    build_now.insert("parent".into(), json!("pre-upgrade"));
    add(Guest {
        vmid: 102,
        kind: Kind::Qemu,
        node: "pve1".into(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk: 100 * GIB,
        config: build_now,
        snapshots: vec![
            Snapshot {
                name: "base".into(),
                parent: None,
                description: "clean install".into(),
                snaptime: now - 86_400 * 30,
                vmstate: false,
                config: build_cfg.clone(),
            },
            Snapshot {
                name: "pre-upgrade".into(),
                parent: Some("base".into()),
                description: "before apt full-upgrade".into(),
                snaptime: now - 86_400 * 2,
                vmstate: false,
                config: build_cfg,
            },
        ],
        ha: None,
    });
    add(Guest {
        vmid: 103,
        kind: Kind::Qemu,
        node: "pve3".into(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk: 16 * GIB,
        config: qemu_config(
            103,
            "archive",
            1024,
            1,
            "local-lvm:vm-103-disk-0,size=16G",
            false,
        ),
        snapshots: vec![],
        ha: None,
    });
    // An HA-managed VM (FORMATS §1.3, §3.13): starts/stops only through HA requests.
    add(Guest {
        vmid: 104,
        kind: Kind::Qemu,
        node: "pve2".into(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk: 32 * GIB,
        config: qemu_config(
            104,
            "ha-web",
            2048,
            2,
            "local-lvm:vm-104-disk-0,iothread=1,size=32G",
            true,
        ),
        snapshots: vec![],
        ha: Some(Ha {
            request: "stopped".into(),
            due: None,
            max_restart: None,
        }),
    });
    // Agent configured, VM running, but nothing answers inside (no qemu-guest-agent in the
    // guest): the "QEMU guest agent is not running" case (see `qga_down` below).
    add(Guest {
        vmid: 110,
        kind: Kind::Qemu,
        node: "pve1".into(),
        running: true,
        paused: false,
        started_at: Some(now - 86_400),
        pid: Some(4_127),
        maxdisk: 16 * GIB,
        config: qemu_config(
            110,
            "appliance",
            1024,
            1,
            "local-lvm:vm-110-disk-0,iothread=1,size=16G",
            true,
        ),
        snapshots: vec![],
        ha: None,
    });
    let mut tmpl = qemu_config(
        9000,
        "debian13-tmpl",
        1024,
        1,
        "local-lvm:base-9000-disk-0,size=8G",
        true,
    );
    tmpl.insert("template".into(), json!(1));
    add(Guest {
        vmid: 9000,
        kind: Kind::Qemu,
        node: "pve1".into(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk: 8 * GIB,
        config: tmpl,
        snapshots: vec![],
        ha: None,
    });
    add(Guest {
        vmid: 200,
        kind: Kind::Lxc,
        node: "pve1".into(),
        running: true,
        paused: false,
        started_at: Some(now - 86_400 * 3),
        pid: Some(2_938),
        maxdisk: 8 * GIB,
        config: lxc_config(200, "dns", 512, "local-lvm:vm-200-disk-0,size=8G", true),
        snapshots: vec![],
        ha: None,
    });
    add(Guest {
        vmid: 201,
        kind: Kind::Lxc,
        node: "pve2".into(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk: 8 * GIB,
        config: lxc_config(201, "proxy", 1024, "local-lvm:vm-201-disk-0,size=8G", true),
        snapshots: vec![],
        ha: None,
    });
    add(Guest {
        vmid: 202,
        kind: Kind::Lxc,
        node: "pve1".into(),
        running: false,
        paused: false,
        started_at: None,
        pid: None,
        maxdisk: 4 * GIB,
        config: lxc_config(202, "legacy", 256, "local-lvm:vm-202-disk-0,size=4G", false),
        snapshots: vec![],
        ha: None,
    });

    let storages = vec![
        Storage {
            id: "local".into(),
            kind: "dir".into(),
            // With `import` (PVE ≥ 8.4), which an admin enables for cloud images
            // (`pvesm set local --content backup,iso,vztmpl,import`) [INFER: a fresh install's
            // `local` has `backup,iso,vztmpl`]; the sandbox has it so that `image download` runs.
            content: vec![
                "backup".into(),
                "iso".into(),
                "vztmpl".into(),
                "import".into(),
            ],
            shared: false,
            path: Some("/var/lib/vz".into()),
            total: 100_861_726_720,
            base_used: 4_521_984_000,
            disable: false,
            options: BTreeMap::new(),
        },
        Storage {
            id: "local-lvm".into(),
            kind: "lvmthin".into(),
            content: vec!["images".into(), "rootdir".into()],
            shared: false,
            path: None,
            total: 366_988_017_664,
            base_used: 0,
            disable: false,
            options: BTreeMap::new(),
        },
        // A Proxmox Backup Server datastore, added by the admin with `pvesm add pbs` (its
        // password lives in /etc/pve/priv, never in storage.cfg): storage.cfg's `pbs: pbs1` with
        // `datastore`, `server`, `content backup`, `username` and `fingerprint`; pbs is one of
        // pve-storage's `@SHARED_STORAGE` types (src/PVE/Storage/Plugin.pm), so every node lists
        // the same backups (FORMATS.md §2.15).
        Storage {
            id: "pbs1".into(),
            kind: "pbs".into(),
            content: vec!["backup".into()],
            shared: true,
            path: None,
            total: 4_000_787_030_016,
            base_used: 1_211_180_777_472,
            disable: false,
            options: [
                ("datastore", "store1"),
                ("server", "192.0.2.20"),
                ("username", "pve1@pbs"),
                (
                    "fingerprint",
                    "61:0c:a5:4e:15:a3:e8:42:07:7c:52:b5:d3:31:f1:72:d5:3b:91:c5:a7:4d:98:54:26:cf:73:92:66:06:e6:50",
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        },
    ];

    // Backups from "last night" 02:00 local time, named like vzdump names them (FORMATS §3.10).
    let last_night = timefmt::local_midnight_before(now) - 86_400 + 2 * 3600;
    let backup = |node: &str, kind: &str, vmid: u32, t: i64, ext: &str, size: u64| Volume {
        node: node.into(),
        storage: "local".into(),
        volname: format!(
            "backup/vzdump-{kind}-{vmid}-{}.{ext}",
            timefmt::archive_stamp(t)
        ),
        content: "backup".into(),
        format: ext.into(),
        size,
        ctime: t,
        vmid: Some(vmid),
        subtype: Some(kind.into()),
        guest_config: None,
        disk_size: None,
        link: None,
        backing: None,
        on_disk: false,
    };
    let file = |node: &str, volname: &str, content: &str, format: &str, size: u64, t: i64| {
        Volume::file(node, "local", volname, content, format, size, t)
    };
    // `local` on every node holds the installer ISO, two container templates and last night's
    // backups of VM 100 and CT 200 (so a restore works on any node); pve2 also has VM 101's.
    let mut volumes = Vec::new();
    for node in ["pve1", "pve2", "pve3"] {
        volumes.push(backup(
            node,
            "qemu",
            100,
            last_night,
            "vma.zst",
            1_234_567_890,
        ));
        volumes.push(backup(
            node,
            "lxc",
            200,
            last_night + 600,
            "tar.zst",
            187_654_321,
        ));
        if node == "pve2" {
            volumes.push(backup(
                node,
                "qemu",
                101,
                last_night + 300,
                "vma.zst",
                2_345_678_901,
            ));
        }
        volumes.push(file(
            node,
            "iso/debian-13.2.0-amd64-netinst.iso",
            "iso",
            "iso",
            790_626_304,
            now - 86_400 * 20,
        ));
        volumes.push(file(
            node,
            "vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            "vztmpl",
            "tzst",
            125_607_936,
            now - 86_400 * 40,
        ));
        volumes.push(file(
            node,
            "vztmpl/debian-13-standard_13.1-2_amd64.tar.zst",
            "vztmpl",
            "tzst",
            130_262_528,
            now - 86_400 * 20,
        ));
    }

    for v in &mut volumes {
        if let Some(g) = v.vmid.and_then(|id| guests.get(&id)) {
            let mut c = g.config.clone();
            c.remove("parent");
            v.guest_config = Some(c);
            v.disk_size = Some(g.maxdisk);
        }
    }
    let mut state = State {
        cluster: "pxlab".into(),
        config_version: 3,
        local_node: "pve1".into(),
        version: PveVersion {
            release: "9.1".into(),
            repoid: "42db4a6cf33dac83".into(),
            version: "9.1.1".into(),
        },
        nodes,
        guests,
        storages,
        volumes,
        tasks: vec![],
        seq: 0,
        qga_down: BTreeSet::from([110]),
        qga_no_exec: BTreeSet::new(),
        sandbox: SandboxLimits::default(),
        networks: BTreeMap::new(),
        net_cut: None,
        firewall: initial_firewalls(),
        ha_rules: Vec::new(),
        backup_jobs: Vec::new(),
        // One pool, `prod`, with the web VM and the DNS container.
        pools: BTreeMap::from([("prod".to_string(), vec![100, 200])]),
    };
    let history: [(&str, &str, &str, i64, Vec<String>); 5] = [
        ("pve1", "vzdump", "100", last_night, vec![]),
        ("pve1", "vzdump", "200", last_night + 600, vec![]),
        ("pve2", "qmstart", "101", now - 86_400 * 5, vec![]),
        ("pve1", "qmstart", "100", now - 86_400 * 3, vec![]),
        ("pve1", "vzstart", "200", now - 86_400 * 3, vec![]),
    ];
    for (node, kind, id, start, log) in history {
        state.record_task(node, kind, id, start, start + 20, log, None, None);
    }
    state
}

/// ISO images a root program placed in a directory storage's `template/iso` on this machine
/// (pxagent-helper's upload) become the local node's volumes: PVE's dir plugin lists a
/// storage's files from the directory itself (pve-storage `Plugin.pm` `list_volumes` over
/// `get_subdir`, with `$ISO_EXT_RE_0 = qr/\.(?:iso|img)/i`), so a file there is an ISO like
/// one the simulator made. Only regular files (no symlink), each once; one whose file is gone
/// (removed on the host) is no longer listed; the simulator's own volumes without a file stay
/// as they are.
pub fn adopt_iso_files(st: &mut State) {
    let local = st.local_node.clone();
    let dirs: BTreeMap<String, String> = st
        .storages
        .iter()
        .filter_map(|s| s.path.as_ref().map(|p| (s.id.clone(), p.clone())))
        .collect();
    st.volumes.retain(|v| {
        !v.on_disk
            || dirs.get(&v.storage).is_some_and(|p| {
                let name = v.volname.trim_start_matches("iso/");
                fs::symlink_metadata(format!("{p}/template/iso/{name}"))
                    .is_ok_and(|m| m.file_type().is_file())
            })
    });
    let mut found = Vec::new();
    // A storage with a `path` keeps its files in that directory (see `provision::file_path`).
    for sto in st
        .storages
        .iter()
        .filter(|s| !s.disable && s.content.iter().any(|c| c == "iso"))
    {
        let Some(path) = &sto.path else { continue };
        let Ok(entries) = fs::read_dir(format!("{path}/template/iso")) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let lower = name.to_ascii_lowercase();
            let Ok(meta) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            if name.starts_with('.')
                || !(lower.ends_with(".iso") || lower.ends_with(".img"))
                || !meta.file_type().is_file()
            {
                continue;
            }
            let volname = format!("iso/{name}");
            let known = st.volumes.iter().any(|v| {
                v.storage == sto.id && v.volname == volname && (v.node == local || sto.shared)
            });
            if !known {
                use std::os::unix::fs::MetadataExt;
                let mut v = Volume::file(
                    &local,
                    &sto.id,
                    &volname,
                    "iso",
                    "iso",
                    meta.len(),
                    meta.mtime(),
                );
                v.on_disk = true;
                found.push(v);
            }
        }
    }
    st.volumes.extend(found);
}

/// The state file plus its lock file.
#[derive(Clone, Debug)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    /// A store at `path` (the file need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Store { path: path.into() }
    }

    /// The state file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock_path(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".lock");
        PathBuf::from(p)
    }

    /// Run `f` on the state under the exclusive lock; write the state back (atomically) only if
    /// `f` changed it. A missing file is created with [`initial`] first.
    pub fn transact<R>(&self, now: i64, f: impl FnOnce(&mut State) -> R) -> io::Result<R> {
        let _lock = self.lock()?;
        let (mut state, fresh) = match fs::read(&self.path) {
            Ok(bytes) => (
                serde_json::from_slice::<State>(&bytes).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "state file '{}' is corrupt: {e} (run `pve-sim reset`)",
                            self.path.display()
                        ),
                    )
                })?,
                false,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (initial(now), true),
            Err(e) => return Err(e),
        };
        let before = if fresh { None } else { Some(state.clone()) };
        adopt_iso_files(&mut state);
        let out = f(&mut state);
        if before.as_ref() != Some(&state) {
            self.write(&state)?;
        }
        Ok(out)
    }

    /// Run `f` on the state under a *shared* lock, beside other readers, as PVE answers reads
    /// without its cluster lock: `Some` of what it returned when it left the state as it
    /// was; `None` (nothing written) when it changed it, or there is no state yet, so the
    /// caller runs it again under [`Store::transact`]'s exclusive lock.
    pub fn peek<R>(&self, f: impl FnOnce(&mut State) -> R) -> io::Result<Option<R>> {
        let lock = self.lock_file()?;
        lock.lock_shared()?;
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let Ok(before) = serde_json::from_slice::<State>(&bytes) else {
            // transact says what is wrong with it.
            return Ok(None);
        };
        let mut state = before.clone();
        adopt_iso_files(&mut state);
        let out = f(&mut state);
        Ok((state == before).then_some(out))
    }

    /// Replace the state with [`initial`] under the lock.
    pub fn reset(&self, now: i64) -> io::Result<()> {
        let _lock = self.lock()?;
        self.write(&initial(now))
    }

    fn ensure_dir(&self) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.exists()
        {
            DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        Ok(())
    }

    /// The lock file, opened (created when missing), not locked yet.
    fn lock_file(&self) -> io::Result<File> {
        self.ensure_dir()?;
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.lock_path())
    }

    fn lock(&self) -> io::Result<File> {
        let f = self.lock_file()?;
        f.lock()?;
        Ok(f)
    }

    fn write(&self, state: &State) -> io::Result<()> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let bytes = serde_json::to_vec_pretty(state).map_err(io::Error::other)?;
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)?;
        File::open(&dir)?.sync_all()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads run beside each other (a shared lock held elsewhere does not keep one out, as
    /// PVE's reads take no cluster lock); a "read" that changed the world is not answered,
    /// and nothing of it is written: the caller runs it under the exclusive lock.
    #[test]
    fn reads_share_the_lock_and_a_read_that_changes_the_world_is_left_to_transact() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("state.json"));
        assert!(store.peek(|_| ()).unwrap().is_none(), "no state yet");
        store.reset(0).unwrap();
        let other = OpenOptions::new()
            .read(true)
            .write(true)
            .open(store.lock_path())
            .unwrap();
        other.lock_shared().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = store.clone();
        std::thread::spawn(move || {
            let _ = tx.send(reader.peek(|st| st.guests.len()).unwrap());
        });
        let n = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a read waits for no other read");
        assert_eq!(n, Some(initial(0).guests.len()));
        drop(other);
        let before = fs::read(store.path()).unwrap();
        assert!(store.peek(|st| st.guests.clear()).unwrap().is_none());
        assert_eq!(fs::read(store.path()).unwrap(), before, "nothing written");
    }

    /// An image placed in a directory storage's `template/iso` (by the upload helper) is the
    /// local node's ISO: listed with its size, usable, and removed with its file; symlinks,
    /// hidden files and other names are not images.
    #[test]
    fn iso_files_on_disk_are_the_local_nodes_volumes() {
        let dir = tempfile::tempdir().unwrap();
        let iso = dir.path().join("template/iso");
        fs::create_dir_all(&iso).unwrap();
        fs::write(iso.join("up.iso"), b"0123456789").unwrap();
        fs::write(iso.join("UPPER.IMG"), b"x").unwrap();
        fs::write(iso.join(".up2.iso.pxagent-partial"), b"x").unwrap();
        fs::write(iso.join("notes.txt"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", iso.join("link.iso")).unwrap();
        let store = Store::new(dir.path().join("state.json"));
        store
            .transact(1_790_000_000, |st| {
                let local = st.storages.iter_mut().find(|s| s.id == "local").unwrap();
                local.path = Some(dir.path().to_string_lossy().into_owned());
            })
            .unwrap();
        let listed = |store: &Store| {
            store
                .transact(1_790_000_000, |st| {
                    let v = crate::api::storage_content(st, "pve1", "local", Some("iso"), None)
                        .unwrap();
                    v.as_array()
                        .unwrap()
                        .iter()
                        .map(|e| {
                            (
                                e["volid"].as_str().unwrap().to_string(),
                                e["size"].as_u64().unwrap(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap()
        };
        let first = listed(&store);
        assert!(
            first.contains(&("local:iso/up.iso".to_string(), 10)),
            "{first:?}"
        );
        assert!(
            first.iter().any(|(v, _)| v == "local:iso/UPPER.IMG"),
            "{first:?}"
        );
        assert!(
            !first.iter().any(|(v, _)| v.contains("link")
                || v.contains("notes")
                || v.contains("pxagent-partial")),
            "{first:?}"
        );
        assert_eq!(listed(&store), first, "adopted once");
        // Not another node's: pve2's local storage is its own disk.
        store
            .transact(1_790_000_000, |st| {
                let v =
                    crate::api::storage_content(st, "pve2", "local", Some("iso"), None).unwrap();
                assert!(!v.to_string().contains("up.iso"), "{v}");
            })
            .unwrap();
        // Freed: the volume and its file go.
        store
            .transact(1_790_000_000, |st| {
                let ctx = crate::Ctx::new(1_790_000_000);
                crate::storage_ops::free_on(st, &ctx, "pve1", "local:iso/up.iso", None).unwrap();
            })
            .unwrap();
        assert!(!iso.join("up.iso").exists());
        assert!(!listed(&store).iter().any(|(v, _)| v == "local:iso/up.iso"));
        assert!(
            iso.join("link.iso").symlink_metadata().is_ok(),
            "a symlink is left alone"
        );
        // A file removed on the host is no longer listed; the simulator's own images stay.
        fs::remove_file(iso.join("UPPER.IMG")).unwrap();
        let now = listed(&store);
        assert!(
            !now.iter().any(|(v, _)| v == "local:iso/UPPER.IMG"),
            "{now:?}"
        );
        assert!(
            now.iter()
                .any(|(v, _)| v == "local:iso/debian-13.2.0-amd64-netinst.iso"),
            "{now:?}"
        );
    }

    #[test]
    fn initial_state_matches_the_brief() {
        let s = initial(1_790_000_000);
        assert_eq!(s.cluster, "pxlab");
        assert_eq!(s.local_node, "pve1");
        assert_eq!(s.nodes.len(), 3);
        assert!(s.nodes.iter().all(|n| n.online));
        assert!(s.guests[&100].running && s.guests[&100].agent());
        assert_eq!(s.guests[&101].node, "pve2");
        assert_eq!(s.guests[&102].snapshots.len(), 2);
        assert_eq!(s.guests[&102].parent().as_deref(), Some("pre-upgrade"));
        assert!(s.guests[&9000].is_template());
        assert!(!s.guests[&202].config.contains_key("unprivileged"));
        assert_eq!(s.guests[&201].config["unprivileged"], json!(1));
        assert_eq!(s.guests[&103].name(), "archive");
        let ha = s.guests[&104].ha.as_ref().unwrap();
        assert_eq!(
            (s.guests[&104].node.as_str(), ha.service_state()),
            ("pve2", "stopped")
        );
        for node in ["pve1", "pve2", "pve3"] {
            let has = |volname: &str| {
                s.volumes.iter().any(|v| {
                    v.node == node && v.storage == "local" && v.volname.starts_with(volname)
                })
            };
            assert!(has("iso/debian-13.2.0-amd64-netinst.iso"), "{node}");
            assert!(
                has("vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"),
                "{node}"
            );
            assert!(
                has("backup/vzdump-qemu-100-") && has("backup/vzdump-lxc-200-"),
                "{node}"
            );
        }
        assert_eq!(s.tasks.len(), 5);
        assert!(s.guests[&110].running && s.guests[&110].agent());
        assert!(s.qga_down.contains(&110) && !s.qga_down.contains(&100));
        assert!(!s.guests[&102].config.contains_key("agent"));
    }

    #[test]
    fn transact_creates_writes_and_skips_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("sub/state.json"));
        let n = store.transact(1_790_000_000, |s| s.guests.len()).unwrap();
        assert_eq!(n, 10);
        let meta = fs::metadata(store.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            fs::metadata(dir.path().join("sub"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        store
            .transact(1_790_000_000, |s| {
                s.guests.remove(&103);
            })
            .unwrap();
        let n = store.transact(1_790_000_100, |s| s.guests.len()).unwrap();
        assert_eq!(n, 9);
        store.reset(1_790_000_200).unwrap();
        assert_eq!(
            store.transact(1_790_000_300, |s| s.guests.len()).unwrap(),
            10
        );
    }
}
