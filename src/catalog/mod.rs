//! The operation catalog: the single source of truth.
//!
//! Every operation pxagent can perform is one static [`Op`] row. The CLI, the sudoers
//! render, `pxagent catalog`, dry-run, the preflight's expectations and (later) the MCP
//! tools are all derived from these rows, so adding an operation is adding a row (see
//! [`ops`]). Code names an op by its handle (`ops::VM_STATUS`), never by its id string;
//! [`find`] looks an op up by the id a user typed (CLI, MCP, policy files).
//!
//! An op's remote command is a template of [`Arg`]s after an absolute tool path. The same
//! template yields the argv (with values) and the anchored sudoers regex (with each
//! parameter kind's regex), which is why the client can never build a line sudo refuses.
//!
//! Layer: catalog. May import: `base`.

pub mod calendar;
pub mod cloud;
pub mod firewall;
pub mod guest;
pub mod inverse;
pub mod invocation;
pub mod kind;
pub mod ops;
pub mod pve;
pub mod skill;
#[cfg(test)]
pub mod testing;
pub mod then;
pub mod undo;

use std::collections::BTreeMap;

pub use kind::{Choice, Kind, RETENTION_KEYS};
pub use ops::OPS;
pub use then::Then;
pub use undo::Undo;

use crate::base::error::{Error, Result};
use crate::catalog::pve::Tool;

/// How dangerous an operation is; decides profiles, confirmation and MCP annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Risk {
    /// Observes only.
    Read,
    /// A reversible state change.
    Change,
    /// Soft blacklist: runs only with the exact confirmation phrase.
    Confirm,
    /// Runs a command inside a guest (rate-limited, argv-validated).
    Exec,
}

impl Risk {
    /// The lower-case name used in output.
    pub fn name(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Change => "change",
            Risk::Confirm => "confirm",
            Risk::Exec => "exec",
        }
    }
}

/// A sudoers profile: which risk classes the rendered file allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    /// Read ops only.
    Readonly,
    /// Read and change ops.
    Operator,
    /// Read, change and confirm ops (the confirmation is enforced by the client).
    Full,
}

impl Profile {
    /// Every profile, least privileged first.
    pub const ALL: [Profile; 3] = [Profile::Readonly, Profile::Operator, Profile::Full];

    /// The profile's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Readonly => "readonly",
            Profile::Operator => "operator",
            Profile::Full => "full",
        }
    }

    /// Parse a profile name.
    pub fn parse(s: &str) -> Result<Profile> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                Error::usage(format!(
                    "unknown profile '{}': expected readonly, operator or full",
                    crate::base::text::printable(s)
                ))
            })
    }

    /// Whether ops of this risk class belong to the profile as a class. Exec ops are
    /// decided one by one: see [`Profile::allows_op`].
    pub fn allows(self, risk: Risk) -> bool {
        match risk {
            Risk::Read => true,
            Risk::Change => self >= Profile::Operator,
            Risk::Confirm => self >= Profile::Full,
            Risk::Exec => false,
        }
    }

    /// Whether the op belongs to the profile. Guest-agent exec on VMs (root inside that VM,
    /// nothing on the host) is in `full`; container exec (`pct exec`, root in the container
    /// and close to the host's root for a privileged one) is in no profile: the admin names
    /// the container ids (`sudoers render --ct-exec RANGES`).
    pub fn allows_op(self, op: &Op) -> bool {
        match (op.risk, op.area) {
            (Risk::Exec, Area::Vm) => self >= Profile::Full,
            // Letting a key log in to an existing VM is root in it, like guest exec.
            (Risk::Change, Area::Vm) if op.grants_guest_login() => self >= Profile::Full,
            (Risk::Exec, _) => false,
            (risk, _) => self.allows(risk),
        }
    }
}

/// What part of Proxmox an op touches; names the sudoers `Cmnd_Alias` group with the risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Area {
    /// Cluster-wide reads.
    Cluster,
    /// Nodes.
    Node,
    /// QEMU/KVM virtual machines.
    Vm,
    /// LXC containers.
    Ct,
    /// Storage.
    Storage,
    /// Proxmox tasks.
    Task,
    /// Backups (of VMs and containers).
    Backup,
}

impl Area {
    /// Upper-case name for alias names.
    pub fn name(self) -> &'static str {
        match self {
            Area::Cluster => "CLUSTER",
            Area::Node => "NODE",
            Area::Vm => "VM",
            Area::Ct => "CT",
            Area::Storage => "STORAGE",
            Area::Task => "TASK",
            Area::Backup => "BACKUP",
        }
    }

    /// The `/cluster/resources` types of the guests this area's ops act on: a VM op takes
    /// only VMs, a container op only containers, and the rest (backups, tasks) either kind,
    /// as Proxmox does.
    pub fn guest_types(self) -> &'static [&'static str] {
        match self {
            Area::Vm => &["qemu"],
            Area::Ct => &["lxc"],
            _ => &["qemu", "lxc"],
        }
    }
}

/// What a guest of a `/cluster/resources` type is called in messages (`VM`, `container`).
pub fn guest_noun(kind: &str) -> &'static str {
    match kind {
        "lxc" => "container",
        _ => "VM",
    }
}

/// Where the node in a `/nodes/{node}/…` path comes from when the user does not pin it
/// with `--node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFrom {
    /// The node that hosts the guest named by `vmid` (from `/cluster/resources`), so a
    /// guest on another cluster node works from any node.
    Guest,
    /// The node pxagent is connected to (`local: 1` in `/cluster/status`).
    Local,
    /// The node field of the `upid` parameter.
    Upid,
}

/// How a parameter appears on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// A required positional argument.
    Positional,
    /// An optional `--name VALUE`.
    Option,
    /// An optional `--name` switch.
    Flag,
    /// A required `--name VALUE`.
    Required,
    /// An optional `--name VALUE` with this default.
    Defaulted(&'static str),
    /// An optional `--vmid` for a new guest: when absent, the cluster's next free VMID
    /// (`/cluster/nextid`) is used.
    NextId,
    /// An optional `--name VALUE` that defaults to the last path segment of another
    /// parameter (a download's file name from its URL).
    BasenameOf(&'static str),
    /// The `node` of a `/nodes/{node}` path: `--node NODE` pins it, else it is resolved.
    Node(NodeFrom),
    /// A value the client computes, no one gives it: a size or SHA-256 of the local file an
    /// op sends ([`Op::uploads`]), or a setting of the backup job an op runs
    /// ([`Op::fans_out`]).
    Staged,
}

/// What a sudoers render chooses for values whose bounds are the admin's (`None`: the kind's
/// own regex).
#[derive(Debug, Clone, Copy, Default)]
pub struct Places<'a> {
    /// The ERE group of the roots a [`Kind::StoragePath`] must be below
    /// ([`kind::storage_roots_group`]); `None`, the default roots.
    pub roots_group: Option<&'a str>,
    /// The ERE group of the NFS servers the admin named ([`kind::nfs_servers_group`]); `None`,
    /// any [`Kind::Server`].
    pub servers_group: Option<&'a str>,
    /// The ERE group of the fill limits a [`Kind::FillPercent`] may take
    /// (the render's `--iso-max-used`, `1..=N`); `None`, 1-99.
    pub fill_group: Option<&'a str>,
}

/// One typed parameter of an op.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name in templates (`{vmid}`) and JSON; the CLI uses it with `_` → `-`.
    pub name: &'static str,
    /// Its kind (validation and regex).
    pub kind: Kind,
    /// How it is given.
    pub how: How,
    /// One line of help.
    pub help: &'static str,
}

impl Param {
    /// Whether a front end takes this value from its user: not a sent file's size or digest
    /// or a job's setting ([`How::Staged`]), which the client computes.
    pub fn given(&self) -> bool {
        self.how != How::Staged
    }

    /// Whether the value may be given as a guest's name: a `vmid` that names an
    /// existing guest (an op's guest, or a `--vmid` filter), never the id of a guest still
    /// to be made (a restore's or create's `--vmid`, a clone's `newid`).
    pub fn takes_name(&self) -> bool {
        self.name == "vmid"
            && self.kind == Kind::Vmid
            && matches!(self.how, How::Positional | How::Option)
    }
}

/// One element of an op's remote command template (after the tool path).
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    /// Always present: one argv word, with `{param}` placeholders.
    Word(&'static str),
    /// Present only when the named parameter was given: these argv words.
    Opt(&'static str, &'static [&'static str]),
    /// A [`Kind::GuestArgv`] parameter, one argv word per element, each preceded by the flag
    /// when there is one (`--command uname --command -a`). In sudoers: the flag, then `.*`.
    List(&'static str, Option<&'static str>),
}

/// How an op's result is parsed into typed data and shown (see [`crate::views`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// One free-form JSON object: key/value lines, humanised by what each key means.
    Object,
    /// A guest's `status/current` (VMs and containers): state, uptime, CPU, memory … first.
    GuestStatus,
    /// One guest's entry of `/cluster/resources` (`vm status --brief`): answered from the
    /// connection's guest map ([`crate::remote::Remote::guest_of`]), one read for many guests.
    Brief,
    /// A node's `/nodes/N/status`: version, kernel, CPU, load, memory … first.
    NodeStatus,
    /// A task's `/nodes/N/tasks/UPID/status`: how it ended, when it started.
    TaskStatus,
    /// A guest's configuration (sizes in MiB).
    Config,
    /// Task entries (`/nodes/N/tasks`): started, duration, type, status, UPID.
    Tasks,
    /// `/cluster/status`: the cluster entry and its members.
    ClusterStatus,
    /// `/cluster/resources` entries; `Some(type)` keeps only entries of that type.
    Resources(Option<&'static str>),
    /// `/nodes` entries.
    Nodes,
    /// `/nodes/N/storage` entries.
    Storages,
    /// A storage's content (`volid`, `size`, `ctime` …): backups, ISOs, templates, disks.
    Content,
    /// An array of objects shown with these `(key, header)` columns.
    Table(&'static [(&'static str, &'static str)]),
    /// A guest's snapshots.
    Snapshots,
    /// A task's log lines.
    Log,
    /// An array of text lines (the host's journal), shown one per line.
    Lines,
    /// The QEMU guest agent's `network-get-interfaces` (`{"result":[…]}`): interfaces with
    /// their MAC and addresses.
    Interfaces,
    /// RRD metrics history (`…/rrddata`): one row per time step.
    Rrd,
    /// An action: the task it ran and how it ended.
    Task,
    /// An action that runs no Proxmox task: its exit status is the result.
    Done,
    /// A file sent to the host ([`Op::uploads`]): the volume it became, its size and digest.
    Upload,
    /// A change applied with a revert the host makes unless pxagent reached it again
    /// ([`Op::confirms_with`]): whether it was kept.
    Applied,
    /// A backup job run now ([`Op::fans_out`]): one task per node that holds its guests.
    JobRun,
    /// A node's pending network change: whether there is one, its diff, an armed revert.
    Pending,
    /// A task's status, read again until the task stopped (`task wait`): how it ended is the
    /// result, a failed task is exit 1, and a task still running when `--timeout` ran out is
    /// exit 7.
    Wait,
    /// A bare number (`/cluster/nextid`, which pvesh prints as `148` or `"148"`): a JSON
    /// number, and only its digits for people, so a script can use it as it is.
    Number,
}

/// The guest state in which an action has nothing to do: the engine reads the
/// guest's status first and, when `field` is `is`, answers `changed: false` and sends
/// nothing else (no phrase needed, no rate limit counted; the policy still decides first).
/// When the guest map (read moments ago) already shows the action is needed
/// ([`Already::needed_by`]), that read is left out.
#[derive(Debug, Clone, Copy)]
pub struct Already {
    /// The read that tells the state: the guest's `status/current` (`vm status`, `ct status`).
    pub read: &'static Op,
    /// The field of its answer that tells: `status`, or `qmpstatus`, which alone tells a
    /// paused VM (`status: running`) from a running one (FORMATS.md §2.8).
    pub field: &'static str,
    /// The value that means the guest is already where the action would take it.
    pub is: &'static str,
}

impl Already {
    /// Whether a guest whose `/cluster/resources` entry says `status` (`running` or
    /// `stopped`) is surely not `is` yet, so the action has something to do. The map's
    /// `status` is the guest's `status`; it tells `qmpstatus` only when the guest is
    /// stopped (a paused VM is `running` there, FORMATS.md §2.4, §2.8). Anything else
    /// (no entry, another word) proves nothing: the status is read.
    pub fn needed_by(&self, status: &str) -> bool {
        if !matches!(status, "running" | "stopped") {
            return false;
        }
        match self.field {
            "status" => status != self.is,
            "qmpstatus" => status == "stopped" && self.is != "stopped",
            _ => false,
        }
    }
}

/// A value an action's task log names that its result carries, so a script needs no second
/// read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Yield {
    /// The archive vzdump wrote, as a volume id on the storage named by this parameter:
    /// `INFO: creating vzdump archive '/var/lib/vz/dump/vzdump-qemu-101-….vma.zst'` gives
    /// `local:backup/vzdump-qemu-101-….vma.zst`, and `creating Proxmox Backup Server archive
    /// 'vm/101/2026-…Z'` gives `pbs:backup/vm/101/2026-…Z` (FORMATS.md §3.10). Shown as
    /// `archive`.
    Archive(&'static str),
    /// The guest it made, by the parameter holding its VMID (a create's resolved `vmid`, a
    /// clone's `newid`): shown as `vmid`, a number.
    Guest(&'static str),
    /// The snapshot it took, by its name parameter: shown as `snapshot`.
    Snapshot(&'static str),
    /// The volume a download stored: `STORAGE:DIR/NAME` from the `storage` parameter, this
    /// content directory (`iso`, `import`, `vztmpl`) and the name parameter. Shown as `volid`.
    Volume(&'static str, &'static str),
}

/// A check made on the host before an action is sent, so that an obviously doomed or
/// surprising request is refused with a clear message (nothing is sent when it fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precheck {
    /// The VMID in this parameter must not exist yet (restores and creates go to a *new*
    /// guest; overwriting is a separate confirm op).
    NewVmid(&'static str),
    /// The storage named by the second parameter must have room for the GiB in the first.
    SpaceGib(&'static str, &'static str),
    /// The storage named by the second parameter must have room for the archive named by
    /// the first (when that storage parameter is given).
    SpaceForArchive(&'static str, &'static str),
    /// The directory in this parameter must lie neither inside nor above another storage's
    /// path (`GET /storage`, [`ops::STORAGE_CONFIG`]): a directory storage over another
    /// storage's files, or inside them, lets one storage's content appear as another's, written
    /// by whoever writes the other. See [`kind::overlapping_storage`].
    PathApart(&'static str),
    /// Root-run Proxmox code trusts the files of the storage this parameter names (a storage
    /// id, or a volume's `STORAGE:` part): it restores from it, imports or boots from it, or
    /// writes guests' data to it. Where a policy names the trusted NFS servers
    /// (`nfs_servers`), an NFS storage on any other server is refused here: its
    /// files are whoever runs that server's. See [`Op::trusted_storages`].
    Trusted(&'static str),
    /// Checked before the phrase is asked for: the guest can be destroyed now —
    /// not running, not protected (`protection: 1`), not an HA resource unless `purge` is
    /// given — and the refusal says what goes with it (its disks, its snapshots) and what
    /// stays (its backups).
    Destroyable,
    /// Checked before the phrase is asked for: the guest has the snapshot this parameter names.
    SnapshotExists(&'static str),
    /// Checked before the phrase is asked for: the node this parameter names is the one
    /// pxagent is connected to (the helper acts on its own host).
    Connected(&'static str),
    /// The change is pinned to the configuration it is made against: unless the caller gave
    /// this parameter (the `digest` of `vm config`/`ct config`), the guest's config is read
    /// first and its digest sent, so Proxmox refuses the change (`conflict`) when someone
    /// edited the guest in between; what changed is read for the refusal, and the values read
    /// before are what an undo sets back.
    PinDigest(&'static str),
    /// The firewall rule must not drop the SSH connection pxagent uses
    /// ([`firewall::drops_ssh`]) unless a policy allows it (`allow_ssh_lockout`): judged by
    /// the engine with its connection's addresses and by the gate with `SSH_CONNECTION`.
    KeepsSsh,
}

impl Precheck {
    /// What this check will verify, with the values given (`<…>` where a value is known only
    /// at run time), as a dry run shows it: a sentence, never the enum's name.
    pub fn describe(&self, values: &BTreeMap<&'static str, String>) -> String {
        let v = |p: &str| match values.get(p) {
            Some(x) => crate::base::text::printable(x).to_string(),
            None => format!("<{p}>"),
        };
        match self {
            Precheck::NewVmid(p) => match values.get(*p) {
                Some(_) => format!("no guest has VMID {} yet", v(p)),
                None => "the new VMID is free (the cluster's next free one is read at run time)"
                    .to_string(),
            },
            Precheck::SpaceGib(gib, storage) => {
                format!("storage {} has room for {} GiB", v(storage), v(gib))
            }
            Precheck::SpaceForArchive(archive, storage) => format!(
                "storage {} has room for the archive {} (when a storage is given)",
                v(storage),
                v(archive)
            ),
            Precheck::PathApart(p) => format!(
                "the directory {} lies neither inside nor above another storage's path",
                v(p)
            ),
            Precheck::Trusted(p) => format!(
                "the storage of {} is one the policy trusts (its NFS server is in nfs_servers, where the policy names them)",
                v(p)
            ),
            Precheck::Destroyable => format!(
                "guest {} can go now: not running, not protected, not an HA resource unless --purge (checked before the phrase is asked for)",
                v("vmid")
            ),
            Precheck::SnapshotExists(p) => format!(
                "guest {} has the snapshot {} (checked before the phrase is asked for)",
                v("vmid"),
                v(p)
            ),
            Precheck::Connected(p) => format!(
                "node {} is the node pxagent is connected to (checked before the phrase is asked for)",
                v(p)
            ),
            Precheck::PinDigest(p) => match values.get(*p) {
                Some(_) => format!(
                    "the guest's config still has digest {} (Proxmox refuses the change otherwise: conflict)",
                    v(p)
                ),
                None => "the guest's config is read first and its digest sent, so a change made by someone else in between is refused (conflict), not overwritten".to_string(),
            },
            Precheck::KeepsSsh => "the rule does not drop the SSH connection pxagent uses, unless a policy allows it (allow_ssh_lockout; checked with the connection's addresses before the phrase is asked for)".to_string(),
        }
    }

    /// Whether the engine runs this check before it asks for a phrase (it reads the host):
    /// a human is never asked to confirm what cannot run.
    pub fn before_asking(&self) -> bool {
        matches!(
            self,
            Precheck::Destroyable | Precheck::SnapshotExists(_) | Precheck::Connected(_)
        )
    }
}

/// A condition that selects one of several ops sharing a CLI path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The switch is given (`vm snapshot --vmstate`).
    Flag(&'static str),
    /// The parameter's value contains this text; the third field is an example value that
    /// does (for `catalog` and tests).
    Contains(&'static str, &'static str, &'static str),
}

/// The soft-blacklist data of a `confirm` op.
#[derive(Debug, Clone, Copy)]
pub struct Confirm {
    /// The phrase to type, with placeholders: `yes destroy {vmid}`.
    pub phrase: &'static str,
    /// What happens, for the refusal text: `this deletes the VM and its disks irrecoverably`.
    pub consequence: &'static str,
    /// An optional gentler alternative.
    pub hint: Option<&'static str>,
}

/// One operation of the catalog.
#[derive(Debug)]
pub struct Op {
    /// Stable id, e.g. `vm.start`.
    pub id: &'static str,
    /// The CLI path, e.g. `["vm", "start"]`. Two ops may share a path when one is a
    /// variant chosen by its values (see `select`).
    pub cli: &'static [&'static str],
    /// One line of help.
    pub about: &'static str,
    /// Risk class.
    pub risk: Risk,
    /// Area (with the risk, names the sudoers alias).
    pub area: Area,
    /// Typed parameters.
    pub params: &'static [Param],
    /// The tool run on the host.
    pub tool: Tool,
    /// The arguments after the tool path.
    pub args: &'static [Arg],
    /// Confirmation data; present exactly for `confirm` ops.
    pub confirm: Option<Confirm>,
    /// Conditions that select this op among those sharing its CLI path; all must hold, and
    /// the op with the most satisfied conditions wins. Empty for a plain op.
    pub select: &'static [Select],
    /// For guest actions: the status the guest settles in. HA-managed guests only *request*
    /// a state (the task ends at once), so pxagent polls until this status is reached.
    pub settles: Option<&'static str>,
    /// A change that stops, restarts or pauses something that runs (a guest, a task): not
    /// only additive, so MCP marks it destructive ([`Op::destructive`]). Confirm ops and
    /// commands inside guests are destructive whatever this says.
    pub interrupts: bool,
    /// How the result is parsed and shown.
    pub view: View,
    /// Checks made on the host before the action is sent.
    pub prechecks: &'static [Precheck],
    /// Options of which at least one must be given (`vm set` with nothing to set is a usage
    /// error, exit 2). Empty for most ops.
    pub needs_one_of: &'static [&'static str],
    /// A step of another op's flow (the file sync of `vm exec`), not a command of its own:
    /// a row so that sudoers, dry-run and the preflight know its command line, but neither
    /// the CLI nor the MCP server offers it.
    pub step: bool,
    /// The ops this one is a variant of: it shares their CLI path and is chosen by its values
    /// (`vm.snapshot-vmstate` is `vm snapshot --vmstate`). A policy entry for a base op
    /// covers its variants unless a variant has an entry of its own.
    pub variant_of: &'static [&'static Op],
    /// Ops of other CLI paths that this one is, for policy: it has their effect, so a policy
    /// entry for one of them covers this op as an entry for a direct base does (ties go to the
    /// stricter action). `storage set --is-mountpoint yes` takes a storage offline, so it counts
    /// as `storage.disable`.
    pub counts_as: &'static [&'static Op],
    /// For guest actions: the state in which the action has nothing to do.
    pub already: Option<Already>,
    /// A value the action's task log names that the result carries.
    pub yields: Option<Yield>,
    /// The guest fence of this op's VMIDs when it is not its area's: a backup restore is a
    /// backup op whose target and archive are one kind of guest (`Some(Area::Vm)` for a VM
    /// restore), so only that kind's fence admits it; `Some(Area::Cluster)` for a cluster-wide
    /// op on one guest of either kind (`ha add`), which either fence admits. `None`: see
    /// [`Op::fence_area`].
    pub fence: Option<Area>,
    /// What runs after the op succeeded, each step an op of its own (its policy, audit record
    /// and sudoers rule): a cloud image's disk grown, a clone's cloud-init set. Empty for most.
    pub then: &'static [Then],
    /// Parameters the client applies to PVE's answer and never sends: filters of a read whose
    /// endpoint takes none (`cluster tasks --errors`, as `GET /cluster/tasks` has no
    /// parameters). No template names them, so no command line or sudoers rule has them.
    pub local: &'static [&'static str],
    /// The op whose command prints a token that pxagent sends back with this op over a
    /// **new** SSH connection, proving the host is still reachable after the change
    /// (`network apply` → `network confirm`): see `engine::network`.
    pub confirms_with: Option<&'static Op>,
    /// The read whose answer gives this op's [`How::Staged`] values (`backup job run`: the
    /// job): the op runs once per node that holds the guests it names, each run a line of its
    /// own with its own audit record. See `engine::job`.
    pub fans_out: Option<&'static Op>,
    /// How the change is taken back (`pxagent undo`), or why it cannot be.
    pub undo: Undo,
}

/// Two ops are the same op when their ids are (ids are unique: the catalog tests check).
impl PartialEq for Op {
    fn eq(&self, other: &Op) -> bool {
        self.id == other.id
    }
}

impl Eq for Op {}

impl Op {
    /// The op's MCP tool name: `vm.start` → `vm_start`.
    pub fn tool_name(&self) -> String {
        self.id.replace(['.', '-'], "_")
    }

    /// This op's id at distance 0, then the ids of the ops it is a variant of with their
    /// distance (1 for a direct base), nearest first, each once: what a policy entry may name
    /// to cover it.
    pub fn lineage(&self) -> Vec<(&'static str, usize)> {
        let mut out = vec![(self.id, 0)];
        let mut level: Vec<&'static Op> = self.counts_as.to_vec();
        level.extend_from_slice(self.variant_of);
        let mut depth = 1;
        while !level.is_empty() {
            let mut next = Vec::new();
            for op in level {
                if !out.iter().any(|(id, _)| *id == op.id) {
                    out.push((op.id, depth));
                    next.extend_from_slice(op.variant_of);
                }
            }
            level = next;
            depth += 1;
        }
        out
    }

    /// Whether this op is a step of another op's flow (see [`Op::step`]).
    pub fn is_step(&self) -> bool {
        self.step
    }

    /// The parameter that pins this change to the config it was made against
    /// ([`Precheck::PinDigest`]): not what the change does, only what it was checked against.
    pub fn pinned_digest(&self) -> Option<&'static str> {
        self.prechecks.iter().find_map(|c| match c {
            Precheck::PinDigest(p) => Some(*p),
            _ => None,
        })
    }

    /// The snapshot and rollback ops of the guest this op changes, when a snapshot can be
    /// taken before it (policy `snapshot_before`): a change of an existing VM or container
    /// (its VMID a positional), never a snapshot op itself.
    pub fn snapshots(&self) -> Option<(&'static Op, &'static Op)> {
        let pair = match self.area {
            Area::Vm => (&ops::VM_SNAPSHOT, &ops::VM_ROLLBACK),
            Area::Ct => (&ops::CT_SNAPSHOT, &ops::CT_ROLLBACK),
            _ => return None,
        };
        let existing = self
            .params
            .iter()
            .any(|p| p.name == "vmid" && p.how == How::Positional);
        let snapshot_op = self.lineage().iter().any(|(id, _)| *id == pair.0.id)
            || matches!(self.undo, Undo::Delete(..));
        (self.risk != Risk::Read && existing && !snapshot_op && !self.step).then_some(pair)
    }

    /// Whether this op starts a Proxmox task (a UPID to follow; what `--no-wait` skips).
    pub fn runs_task(&self) -> bool {
        self.view == View::Task
    }

    /// Whether this op reads one node's state (`node disks NODE`, `storage list [--node]`): a
    /// read whose node is a positional or the local node, not a guest's, and whose only
    /// positional is that node (`node smart NODE DISK` names a thing of one node). The CLI
    /// runs such an op on every online node with `--all-nodes`.
    pub fn node_scoped_read(&self) -> bool {
        self.risk == Risk::Read
            && !self.step
            && !self
                .params
                .iter()
                .any(|p| p.how == How::Positional && p.kind != Kind::Node)
            && self.params.iter().any(|p| {
                p.kind == Kind::Node
                    && matches!(p.how, How::Positional | How::Node(NodeFrom::Local))
            })
    }

    /// Whether this op starts a process inside a guest (it takes a [`Kind::GuestArgv`]).
    pub fn runs_guest_command(&self) -> bool {
        self.params.iter().any(|p| p.kind == Kind::GuestArgv)
    }

    /// Whether the op only observes (MCP's `readOnlyHint`): reads, and the exec ops that are
    /// a `pvesh get` (a guest process's status, a guest file): an API GET changes nothing.
    pub fn read_only(&self) -> bool {
        match self.risk {
            Risk::Read => true,
            Risk::Exec => {
                self.tool == Tool::Pvesh && matches!(self.args.first(), Some(Arg::Word("get")))
            }
            Risk::Change | Risk::Confirm => false,
        }
    }

    /// Whether the op may destroy, undo or interrupt something rather than only add
    /// (MCP's `destructiveHint`): every confirm op, every exec op that is not a read (a
    /// command runs as root in the guest; a file write replaces the file), and the changes
    /// whose row says [`Op::interrupts`].
    pub fn destructive(&self) -> bool {
        match self.risk {
            Risk::Read => false,
            Risk::Confirm => true,
            Risk::Exec => !self.read_only(),
            Risk::Change => self.interrupts,
        }
    }

    /// Whether calling the op again with the same arguments changes nothing more (MCP's
    /// `idempotentHint`): reads, and actions that bring a guest to a state ([`Op::settles`]:
    /// a second start finds it running).
    pub fn idempotent(&self) -> bool {
        self.read_only() || self.settles.is_some()
    }

    /// Whether the op reaches beyond the Proxmox host pxagent manages (MCP's
    /// `openWorldHint`): it downloads from outside — a URL the caller chose, or a template
    /// from Proxmox's repository (a [`Kind::TemplateName`] is what aplinfo fetches) — or runs
    /// a command inside a guest, which may reach anything the guest reaches.
    pub fn open_world(&self) -> bool {
        self.runs_guest_command()
            || self
                .params
                .iter()
                .any(|p| matches!(p.kind, Kind::Url | Kind::TemplateName))
    }

    /// Whether the op sets who may log in to an existing VM (cloud-init's user or SSH keys on
    /// the command line it sends): whoever holds the key is root in that VM at its next boot,
    /// so it ranks with guest exec (`full`). A new VM from an image (`vm create --image`, its
    /// VMID new) holds nothing yet, and a clone's keys travel in its follow-up step.
    pub fn grants_guest_login(&self) -> bool {
        let login = |name: &str| {
            self.param(name)
                .is_some_and(|p| matches!(p.kind, Kind::SshKeys | Kind::CiUser))
        };
        self.area == Area::Vm
            && !self.params.iter().any(|p| p.how == How::NextId)
            && self
                .args
                .iter()
                .any(|a| matches!(a, Arg::Opt(n, _) if login(n)))
    }

    /// The parameter naming a local file this op sends to the host (`iso upload FILE`), if
    /// any: its bytes go to the command's stdin, its size and digest are [`How::Staged`].
    pub fn uploads(&self) -> Option<&'static Param> {
        self.params.iter().find(|p| p.kind == Kind::LocalFile)
    }

    /// Find a parameter by name.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The profiles that contain this op.
    pub fn profiles(&self) -> Vec<Profile> {
        Profile::ALL
            .into_iter()
            .filter(|p| p.allows_op(self))
            .collect()
    }

    /// Which guest fence applies to this op's VMIDs and archives (backups and task filters
    /// take either kind of guest, unless the row's `fence` names one).
    pub fn fence_area(&self) -> Option<Area> {
        if self.fence.is_some() {
            return self.fence;
        }
        match self.area {
            Area::Vm | Area::Ct | Area::Backup | Area::Task => Some(self.area),
            _ => None,
        }
    }

    /// Whether a VMID fence restricts this op to the guests inside it: it has a fence area and
    /// its command line always names a guest (a VMID, or a backup archive, whose name carries
    /// its guest's VMID). Changes that are not per guest (`storage remove`, downloads) cannot
    /// be fenced, so a fenced render leaves them out.
    pub fn per_guest(&self) -> bool {
        let names_guest = |name: &str| {
            self.param(split_part(name).0)
                .is_some_and(|p| matches!(p.kind, Kind::Vmid | Kind::Archive))
        };
        self.fence_area().is_some()
            && self.args.iter().any(|a| match a {
                Arg::Word(w) => placeholders(w).any(names_guest),
                _ => false,
            })
    }

    /// Whether these values give one of the options in [`Op::needs_one_of`] (always, when it
    /// is empty).
    pub fn has_one_of(&self, values: &BTreeMap<&'static str, String>) -> bool {
        self.needs_one_of.is_empty() || self.needs_one_of.iter().any(|n| values.contains_key(n))
    }

    /// Whether all of this op's selection conditions hold for these raw values.
    pub fn selected(&self, raw: &BTreeMap<&'static str, String>) -> bool {
        self.select.iter().all(|s| match s {
            Select::Flag(f) => raw.contains_key(f),
            Select::Contains(p, needle, _) => raw.get(p).is_some_and(|v| v.contains(needle)),
        })
    }

    /// The texts of parameter `name` that select another op at this op's CLI path and not
    /// this one ([`Select::Contains`]): values this op's own rule must not admit.
    pub fn variant_values(&self, name: &str) -> Vec<&'static str> {
        ops_at(self.cli)
            .into_iter()
            .filter(|o| o.id != self.id)
            .flat_map(|o| o.select.iter())
            .filter_map(|s| match s {
                Select::Contains(p, needle, _) if *p == name && !self.select.contains(s) => {
                    Some(*needle)
                }
                _ => None,
            })
            .collect()
    }

    /// An example value of parameter `name` of kind `kind` for this op: the kind's own, or for
    /// a choice whose value selects a variant ([`Op::variant_values`]), the first choice that
    /// selects none.
    pub fn example_of(&self, name: &str, kind: Kind) -> &'static str {
        match kind {
            Kind::Choice(choices) => {
                let taken = self.variant_values(name);
                choices
                    .iter()
                    .find(|c| !taken.iter().any(|t| c.wire.contains(t)))
                    .map_or(kind.example(), |c| c.cli)
            }
            _ => kind.example(),
        }
    }

    /// Whether this op adds a storage on a server of the agent's naming (`storage add-nfs`):
    /// the host admits it only for the NFS servers its admin named (`sudoers render
    /// --nfs-servers`, host policy `nfs_servers`), since what such a storage holds is written
    /// by that server and read by root-run Proxmox code.
    pub fn names_a_server(&self) -> bool {
        self.params.iter().any(|p| p.kind == Kind::Server)
    }

    /// The storages whose files root-run Proxmox code would trust for this invocation
    /// ([`Precheck::Trusted`]): each such parameter's storage id (a volume's part before `:`).
    pub fn trusted_storages(&self, values: &BTreeMap<&'static str, String>) -> Vec<String> {
        self.prechecks
            .iter()
            .filter_map(|c| match c {
                Precheck::Trusted(param) => values.get(param),
                _ => None,
            })
            .map(|v| v.split(':').next().unwrap_or_default().to_string())
            .collect()
    }

    /// The names of the switches that select this op (for help and CLI args).
    pub fn selecting_flags(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.select.iter().filter_map(|s| match s {
            Select::Flag(f) => Some(*f),
            Select::Contains(..) => None,
        })
    }

    /// Whether a command line can name this op: not when a switch that selects it stays on
    /// the client (`local`), as `vm status --brief`'s does. Such an op sends another op's
    /// line (the guest map's, `vm list`'s), and the host sees that op.
    pub fn on_the_wire(&self) -> bool {
        !self.selecting_flags().any(|f| self.local.contains(&f))
    }

    /// A usage line: `vm snapshot <vmid> <name> [--description <text>] [--node <node>]`.
    pub fn usage(&self) -> String {
        let mut s = self.cli.join(" ");
        for p in self.params {
            let flag = p.name.replace('_', "-");
            match p.how {
                How::Positional if p.kind == Kind::GuestArgv => {
                    s.push_str(" -- <program> [<args>…]")
                }
                How::Positional => s.push_str(&format!(" <{flag}>")),
                How::Option => s.push_str(&format!(" [--{flag} <{flag}>]")),
                How::Flag => s.push_str(&format!(" [--{flag}]")),
                How::Required => s.push_str(&format!(" --{flag} <{flag}>")),
                How::Defaulted(d) => s.push_str(&format!(" [--{flag} <{flag}> (default {d})]")),
                How::Node(_) => s.push_str(" [--node <node>]"),
                How::NextId => s.push_str(&format!(" [--{flag} <{flag}> (default: next free)]")),
                How::BasenameOf(of) => {
                    s.push_str(&format!(" [--{flag} <{flag}> (default: from <{of}>)]"))
                }
                How::Staged => {}
            }
        }
        s
    }

    /// The anchored sudoers regex over the joined arguments, with `vmid` replaced by a fence
    /// regex when one is given, and a directory storage's path below the default storage roots.
    pub fn args_regex(&self, vmid_regex: Option<&str>) -> String {
        self.args_regex_in(vmid_regex, &Places::default())
    }

    /// [`Op::args_regex`] with the [`Places`] of a render.
    pub fn args_regex_in(&self, vmid_regex: Option<&str>, places: &Places<'_>) -> String {
        let Places {
            roots_group,
            servers_group,
            fill_group,
        } = *places;
        let param_re = |name: &str| -> String {
            let (name, part) = split_part(name);
            let p = self
                .param(name)
                .unwrap_or_else(|| panic!("op {} template names unknown param {name}", self.id));
            match (p.kind, vmid_regex, part) {
                (kind, _, Some(i)) => kind.part_regex(i),
                (Kind::StoragePath, _, None) => match roots_group {
                    Some(g) => format!("({})", kind::storage_path_regex(g)),
                    None => wrap(&Kind::StoragePath.regex()),
                },
                (Kind::Server, _, None) if servers_group.is_some() => {
                    servers_group.unwrap_or_default().to_string()
                }
                (Kind::FillPercent, _, None) if fill_group.is_some() => {
                    fill_group.unwrap_or_default().to_string()
                }
                (Kind::Vmid, Some(fence), None) => format!("({fence})"),
                // A restore takes one kind of guest's archives (its `fence`); the archive's
                // own VMID is fenced like the target's.
                (Kind::Archive, fence, None) => kind::archive_regex(
                    match self.fence {
                        Some(Area::Vm) => "qemu",
                        Some(Area::Ct) => "lxc",
                        _ => "(qemu|lxc)",
                    },
                    &fence.map_or_else(|| Kind::Vmid.regex(), |f| format!("({f})")),
                ),
                // A base op's rule never admits a value that selects one of its variants
                // (`storage set --is-mountpoint yes` is the confirm variant's line only).
                (Kind::Choice(choices), _, None) if !self.variant_values(p.name).is_empty() => {
                    let taken = self.variant_values(p.name);
                    let mut wires: Vec<&str> = Vec::new();
                    for c in choices {
                        if !taken.iter().any(|t| c.wire.contains(t)) && !wires.contains(&c.wire) {
                            wires.push(c.wire);
                        }
                    }
                    format!("({})", wires.join("|"))
                }
                (kind, _, None) => wrap(&kind.regex()),
            }
        };
        let mut out = String::from("^");
        let mut first = true;
        for arg in self.args {
            match arg {
                Arg::Word(w) => {
                    if !first {
                        out.push(' ');
                    }
                    out.push_str(&expand(w, |seg| match seg {
                        Seg::Lit(l) => escape_ere(l),
                        Seg::Param(n) => param_re(n),
                    }));
                }
                Arg::Opt(_, words) => {
                    out.push('(');
                    for (i, w) in words.iter().enumerate() {
                        if !first || i > 0 {
                            out.push(' ');
                        }
                        out.push_str(&expand(w, |seg| match seg {
                            Seg::Lit(l) => escape_ere(l),
                            Seg::Param(n) => param_re(n),
                        }));
                    }
                    out.push_str(")?");
                }
                Arg::List(_, flag) => {
                    if !first {
                        out.push(' ');
                    }
                    if let Some(f) = flag {
                        out.push_str(&escape_ere(f));
                        out.push(' ');
                    }
                    out.push_str(&Kind::GuestArgv.regex());
                }
            }
            first = false;
        }
        out.push('$');
        out
    }

    /// The sudoers command spec: absolute path and anchored argument regex.
    pub fn sudoers_rule(&self, vmid_regex: Option<&str>) -> String {
        self.sudoers_rule_in(vmid_regex, &Places::default())
    }

    /// [`Op::sudoers_rule`] with the [`Places`] of a render.
    pub fn sudoers_rule_in(&self, vmid_regex: Option<&str>, places: &Places<'_>) -> String {
        format!(
            "{} {}",
            self.tool.path(),
            self.args_regex_in(vmid_regex, places)
        )
    }

    /// Build the remote argv (tool path first) from validated wire values. A `node` value
    /// that is absent is rendered as `<node>` (only dry-run may show that).
    pub fn argv(&self, values: &BTreeMap<&'static str, String>) -> Vec<String> {
        let get = |name: &str| -> String {
            let (base, part) = split_part(name);
            match (values.get(base), part) {
                (Some(v), None) => v.clone(),
                (Some(v), Some(i)) => v.split(':').nth(i).unwrap_or_default().to_string(),
                (None, _) => format!("<{base}>"),
            }
        };
        let mut argv = vec![self.tool.path().to_string()];
        for arg in self.args {
            match arg {
                Arg::Word(w) => argv.push(expand(w, |seg| match seg {
                    Seg::Lit(l) => l.to_string(),
                    Seg::Param(n) => get(n),
                })),
                Arg::Opt(name, words) => {
                    if values.contains_key(split_part(name).0) {
                        for w in *words {
                            argv.push(expand(w, |seg| match seg {
                                Seg::Lit(l) => l.to_string(),
                                Seg::Param(n) => get(n),
                            }));
                        }
                    }
                }
                Arg::List(name, flag) => match values.get(name) {
                    Some(wire) => {
                        for word in kind::guest_argv(wire) {
                            if let Some(f) = flag {
                                argv.push(f.to_string());
                            }
                            argv.push(word);
                        }
                    }
                    None => argv.push(format!("<{name}>")),
                },
            }
        }
        argv
    }

    /// The confirmation phrase for these values, if this op needs one.
    pub fn phrase(&self, values: &BTreeMap<&'static str, String>) -> Option<String> {
        self.confirm.map(|c| fill(c.phrase, values))
    }
}

/// Fill `{name}` placeholders in a message template.
pub fn fill(template: &str, values: &BTreeMap<&'static str, String>) -> String {
    expand(template, |seg| match seg {
        Seg::Lit(l) => l.to_string(),
        Seg::Param(n) => values.get(n).cloned().unwrap_or_else(|| format!("<{n}>")),
    })
}

/// `checksum:1` → (`checksum`, Some(1)); `vmid` → (`vmid`, None).
fn split_part(name: &str) -> (&str, Option<usize>) {
    match name.split_once(':') {
        Some((n, i)) => (n, i.parse().ok()),
        None => (name, None),
    }
}

/// Wrap a regex in a group when it has a top-level alternation or optional tail.
fn wrap(re: &str) -> String {
    if re.starts_with('(') && re.ends_with(')') || !re.contains(['|', '?']) {
        re.to_string()
    } else {
        format!("({re})")
    }
}

/// The parameter names a template word mentions (`{disk_storage}:{disk_size}` → both).
fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

/// A piece of a template word.
enum Seg<'a> {
    Lit(&'a str),
    Param(&'a str),
}

fn expand(template: &str, mut f: impl FnMut(Seg<'_>) -> String) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&f(Seg::Lit(&rest[..start])));
        let end = rest[start..]
            .find('}')
            .map(|e| start + e)
            .unwrap_or_else(|| panic!("unclosed placeholder in {template}"));
        out.push_str(&f(Seg::Param(&rest[start + 1..end])));
        rest = &rest[end + 1..];
    }
    out.push_str(&f(Seg::Lit(rest)));
    out
}

/// Escape ERE metacharacters in a literal, and the characters sudoers' lexer gives meaning
/// inside a command line (`,` separates commands, `=` and `:` are syntax): sudo 1.9.13 and
/// 1.9.16 take `\,` and `\=` in a regex argument as the plain character (checked with
/// `visudo -c` and `sudo -l`), and so does Rust's regex.
fn escape_ere(lit: &str) -> String {
    let mut s = String::new();
    for c in lit.chars() {
        if ".[]{}()*+?^$|\\,=".contains(c) {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// Representative values for an op: examples for positionals and the node, the selecting
/// switch of a variant, no other options. Used by `pxagent catalog`.
pub fn example_values(op: &Op) -> BTreeMap<&'static str, String> {
    let mut v = BTreeMap::new();
    for p in op.params {
        let example = match (p.kind, op.area) {
            (Kind::Vmid, Area::Ct) => "200",
            (k, _) => op.example_of(p.name, k),
        };
        match p.how {
            How::Positional | How::Node(_) => {
                v.insert(p.name, example.to_string());
            }
            How::Required | How::Defaulted(_) | How::NextId | How::BasenameOf(_) | How::Staged => {
                v.insert(p.name, example.to_string());
            }
            _ => {}
        }
    }
    for s in op.select {
        match s {
            Select::Flag(f) => {
                v.insert(f, "1".to_string());
            }
            Select::Contains(p, _, example) => {
                v.insert(p, example.to_string());
            }
        }
    }
    if let Some(p) = op.needs_one_of.first().and_then(|n| op.param(n)) {
        v.insert(p.name, p.kind.example().to_string());
    }
    v
}

/// The command line of an op's [`example_values`], each value in the form the op sends it
/// (a parameter's kind may rewrite what a person types: `10.0.0.5/24` is sent as
/// `ip=10.0.0.5/24`, keys URL-encoded): what `pxagent catalog` shows, and what the op's own
/// sudoers rule admits (a catalog test proves it for every op).
pub fn example_argv(op: &Op) -> Vec<String> {
    let values: BTreeMap<&'static str, String> = example_values(op)
        .into_iter()
        .map(|(name, raw)| {
            let wire = op
                .param(name)
                .and_then(|p| p.kind.parse(name, &raw).ok())
                .unwrap_or(raw);
            (name, wire)
        })
        .collect();
    op.argv(&values)
}

/// Most optional parameters whose every combination [`samples`] builds; beyond them it
/// builds none, each one alone, each all-but-one and all (every option present and absent,
/// next to every other one, in the one order the template fixes), so a `vm set` with seven
/// options has 16 samples instead of 128.
const ALL_COMBINATIONS_UP_TO: usize = 4;

/// Example values for every combination of an op's optional parameters (present or
/// absent; see [`ALL_COMBINATIONS_UP_TO`] for ops with many), with its selecting values
/// set. The catalog tests and the real-sudo proof build their command lines from these.
pub fn samples(op: &Op) -> Vec<BTreeMap<&'static str, String>> {
    let optional: Vec<&Param> = op
        .params
        .iter()
        .filter(|p| matches!(p.how, How::Option | How::Flag))
        .collect();
    let n = optional.len();
    let masks: Vec<u32> = if n <= ALL_COMBINATIONS_UP_TO {
        (0..(1u32 << n)).collect()
    } else {
        let all = (1u32 << n) - 1;
        let mut m = vec![0, all];
        m.extend((0..n).map(|i| 1 << i));
        m.extend((0..n).map(|i| all & !(1 << i)));
        m
    };
    let mut out = Vec::new();
    for mask in masks {
        let mut v = BTreeMap::new();
        for p in op.params {
            let example = match (p.kind, op.area) {
                (Kind::Vmid, Area::Ct) => "200".to_string(),
                (k, _) => k.parse(p.name, op.example_of(p.name, k)).unwrap(),
            };
            match p.how {
                How::Positional
                | How::Node(_)
                | How::Required
                | How::Defaulted(_)
                | How::NextId
                | How::BasenameOf(_)
                | How::Staged => {
                    v.insert(p.name, example);
                }
                How::Option | How::Flag => {
                    let i = optional.iter().position(|o| o.name == p.name).unwrap();
                    if mask & (1 << i) != 0 {
                        v.insert(p.name, example);
                    }
                }
            }
        }
        // A variant is only ever built with its selector set.
        for sel in op.select {
            match sel {
                Select::Flag(f) => {
                    v.insert(f, "1".to_string());
                }
                Select::Contains(p, _, example) => {
                    v.insert(p, example.to_string());
                }
            }
        }
        if !op.selected(&v) || !op.has_one_of(&v) {
            continue;
        }
        out.push(v);
    }
    out
}

/// Choose the op at a CLI path for these raw values: the one whose selection conditions all
/// hold, the most specific first.
pub fn select(path: &[&str], raw: &BTreeMap<&'static str, String>) -> Result<&'static Op> {
    let ops = ops_at(path);
    ops.iter()
        .filter(|o| o.selected(raw))
        .max_by_key(|o| o.select.len())
        .copied()
        .ok_or_else(|| {
            let needs: Vec<String> = ops
                .iter()
                .flat_map(|o| o.select.iter())
                .filter_map(|s| match s {
                    Select::Contains(p, needle, _) => Some(format!("<{p}> containing '{needle}'")),
                    Select::Flag(_) => None,
                })
                .collect();
            Error::usage(format!("`{}` needs {}", path.join(" "), needs.join(" or ")))
        })
}

/// All ops with a given CLI path (a base op and its variants).
pub fn ops_at(path: &[&str]) -> Vec<&'static Op> {
    OPS.iter().copied().filter(|o| o.cli == path).collect()
}

/// Look an op up by the id a user gave; code that knows its op uses the handle in [`ops`].
pub fn find(id: &str) -> Option<&'static Op> {
    OPS.iter().copied().find(|o| o.id == id)
}

#[cfg(test)]
mod tests;
