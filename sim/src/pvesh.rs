//! `pvesh get|create|delete <path> [--key value]… --output-format json`: the API paths pxagent
//! uses, printed like pvesh prints them (FORMATS §1.6): one canonical JSON line for reads; for
//! task endpoints the task log on stdout and then the UPID as a JSON string, exit 0 even when the
//! task failed (the error goes to stderr) (FORMATS §1.3 [SRC; INFER for the failing case]).
//!
//! Paths whose `{node}` is not the local node are "proxied": reads print the same thing; a task's
//! output comes back as one JSON string holding the remote log lines run together (no newlines)
//! and the escaped UPID, because pvesh cannot decode the remote output and returns the raw text;
//! an error's last remote stderr line becomes `proxy handler failed: <line>` (FORMATS §1.6;
//! [SRC pvesh.pm `proxy_handler`, pve-common `Cmd.pm`], see [`proxied_error`]).
//!
//! `pvesh delete /nodes/{node}/tasks/{upid}` stops a running task ([`crate::running::stop`]).
//!
//! The guest-agent endpoints (`…/qemu/{vmid}/agent/exec|exec-status|file-write|file-read`) are
//! in [`crate::guest`]; their commands really run in [`crate::sandbox`]. Setting options and
//! resizing are in [`crate::settings`], migrating in [`crate::migrate`]; the observation reads (agent
//! interfaces, RRD history, cluster tasks, HA status, node network) in [`crate::observe`].

use serde_json::Value;

use crate::args::{self, Param, Parsed, Ty, p};
use crate::ops::{self, Power, TaskRun};
use crate::state::{Kind, State};
use crate::{
    Ctx, Failure, Output, api, guest, hostinfo, migrate, observe, provision, settings, storage_cfg,
    storage_ops,
};

const OUTPUT_OPTS: [Param; 5] = [
    p(
        "output-format",
        Ty::Enum(&["json", "json-pretty", "text", "yaml"]),
    ),
    p("quiet", Ty::Bool),
    p("noborder", Ty::Bool),
    p("noheader", Ty::Bool),
    p("human-readable", Ty::Bool),
];

const VMID: Ty = Ty::Int(Some(100), Some(999_999_999));

/// One matched API path.
#[derive(Debug, Clone)]
enum Route {
    Version,
    NodeVersion(String),
    Nodes,
    NodeStatus(String),
    ClusterStatus,
    ClusterResources,
    NextId,
    GuestList(String, Kind),
    StatusCurrent(String, Kind, String),
    Config(String, Kind, String),
    SnapList(String, Kind, String),
    StorageList(String),
    StorageContent(String, String),
    Tasks(String),
    TaskStatus(String, String),
    TaskLog(String, String),
    TaskStop(String, String),
    Power(String, Kind, String, Power),
    SnapCreate(String, Kind, String),
    Rollback(String, Kind, String, String),
    SnapDelete(String, Kind, String, String),
    Destroy(String, Kind, String),
    Vzdump(String),
    QemuCreate(String),
    LxcCreate(String),
    Clone(String, String),
    PruneList(String, String),
    PruneDelete(String, String),
    DownloadUrl(String, String),
    AplInfo(String),
    AplDownload(String),
    StorageDelete(String),
    AgentExec(String, String),
    AgentExecStatus(String, String),
    AgentFileWrite(String, String),
    AgentFileRead(String, String),
    ConfigSet(String, Kind, String),
    Resize(String, Kind, String),
    Migrate(String, Kind, String),
    AgentInterfaces(String, String),
    GuestRrd(String, Kind, String),
    NodeRrd(String),
    NodeNetwork(String),
    ClusterTasks,
    HaStatus,
    ContentDelete(String, String, String),
    CloudinitPending(String, String),
    CloudinitRegenerate(String, String),
    Template(String, String),
    // host observation and storage configuration
    NodeDisks(String),
    NodeSmart(String),
    NodeJournal(String),
    NodeServices(String),
    NodeService(String, String),
    AptUpdates(String),
    StorageCreate,
    StorageSet(String),
    StorageIndex,
    StorageRead(String),
    NetworkCreate(String),
    NetworkReload(String),
    NetworkRevert(String),
    NetworkDelete(String, String),
    FwRules(crate::firewall::Scope),
    FwRuleCreate(crate::firewall::Scope),
    FwRuleDelete(crate::firewall::Scope, String),
    FwOptions(String, Kind, String),
    FwOptionsSet(String, Kind, String),
    IpsetCreate(String, Kind, String),
    IpsetList(String, Kind, String, String),
    IpsetAdd(String, Kind, String, String),
    IpsetRemove(String, Kind, String, String, String),
    HaResourceCreate,
    HaResourceDelete(String),
    HaRules,
    HaRuleCreate,
    HaRuleDelete(String),
    BackupJobs,
    BackupJobCreate,
    BackupJob(String),
    BackupJobDelete(String),
}

fn kind_of(s: &str) -> Option<Kind> {
    match s {
        "qemu" => Some(Kind::Qemu),
        "lxc" => Some(Kind::Lxc),
        _ => None,
    }
}

/// A guest's VMID in a firewall path (checked like every path VMID before the route runs;
/// 0 when it is not a number, which that check refuses).
fn guest_id(v: &str) -> u32 {
    v.parse().unwrap_or(0)
}

fn route(verb: &str, segs: &[&str]) -> Option<Route> {
    use crate::firewall::Scope as Fw;
    use Route as R;
    let s = |i: usize| segs[i].to_string();
    Some(match (verb, segs) {
        ("get", ["version"]) => R::Version,
        // host observation and storage configuration, before the generic
        // `nodes/{node}/{kind}` arms below, whose `kind_of(k)?` ends the match
        ("get", ["nodes", _, "disks", "list"]) => R::NodeDisks(s(1)),
        ("get", ["nodes", _, "disks", "smart"]) => R::NodeSmart(s(1)),
        ("get", ["nodes", _, "journal"]) => R::NodeJournal(s(1)),
        ("get", ["nodes", _, "services"]) => R::NodeServices(s(1)),
        ("get", ["nodes", _, "services", _, "state"]) => R::NodeService(s(1), s(3)),
        ("get", ["nodes", _, "apt", "update"]) => R::AptUpdates(s(1)),
        ("get", ["storage"]) => R::StorageIndex,
        ("get", ["storage", _]) => R::StorageRead(s(1)),
        ("create", ["storage"]) => R::StorageCreate,
        ("set", ["storage", _]) => R::StorageSet(s(1)),
        ("get", ["nodes", _, "aplinfo"]) => R::AplInfo(s(1)),
        ("create", ["nodes", _, "aplinfo"]) => R::AplDownload(s(1)),
        ("create", ["nodes", _, "vzdump"]) => R::Vzdump(s(1)),
        ("create", ["nodes", _, "qemu"]) => R::QemuCreate(s(1)),
        ("create", ["nodes", _, "lxc"]) => R::LxcCreate(s(1)),
        ("create", ["nodes", _, "qemu", _, "clone"]) => R::Clone(s(1), s(3)),
        ("get", ["nodes", _, "storage", _, "prunebackups"]) => R::PruneList(s(1), s(3)),
        ("delete", ["nodes", _, "storage", _, "prunebackups"]) => R::PruneDelete(s(1), s(3)),
        ("create", ["nodes", _, "storage", _, "download-url"]) => R::DownloadUrl(s(1), s(3)),
        ("delete", ["storage", _]) => R::StorageDelete(s(1)),
        ("create", ["nodes", _, "qemu", _, "agent", "exec"]) => R::AgentExec(s(1), s(3)),
        ("get", ["nodes", _, "qemu", _, "agent", "exec-status"]) => R::AgentExecStatus(s(1), s(3)),
        ("create", ["nodes", _, "qemu", _, "agent", "file-write"]) => R::AgentFileWrite(s(1), s(3)),
        ("get", ["nodes", _, "qemu", _, "agent", "file-read"]) => R::AgentFileRead(s(1), s(3)),
        ("set", ["nodes", _, k, _, "config"]) => R::ConfigSet(s(1), kind_of(k)?, s(3)),
        ("get", ["nodes", _, "qemu", _, "cloudinit"]) => R::CloudinitPending(s(1), s(3)),
        ("set", ["nodes", _, "qemu", _, "cloudinit"]) => R::CloudinitRegenerate(s(1), s(3)),
        ("create", ["nodes", _, "qemu", _, "template"]) => R::Template(s(1), s(3)),
        ("set", ["nodes", _, k, _, "resize"]) => R::Resize(s(1), kind_of(k)?, s(3)),
        ("create", ["nodes", _, k, _, "migrate"]) => R::Migrate(s(1), kind_of(k)?, s(3)),
        ("get", ["nodes", _, "qemu", _, "agent", "network-get-interfaces"]) => {
            R::AgentInterfaces(s(1), s(3))
        }
        ("get", ["nodes", _, k, _, "rrddata"]) => R::GuestRrd(s(1), kind_of(k)?, s(3)),
        ("get", ["nodes", _, "rrddata"]) => R::NodeRrd(s(1)),
        ("get", ["nodes", _, "network"]) => R::NodeNetwork(s(1)),
        ("create", ["nodes", _, "network"]) => R::NetworkCreate(s(1)),
        ("set", ["nodes", _, "network"]) => R::NetworkReload(s(1)),
        ("delete", ["nodes", _, "network"]) => R::NetworkRevert(s(1)),
        ("delete", ["nodes", _, "network", _]) => R::NetworkDelete(s(1), s(3)),
        // firewalls (pve-firewall API2/Firewall/{Rules,VM,Host,Cluster,IPSet}.pm)
        ("get", ["cluster", "firewall", "rules"]) => R::FwRules(Fw::Cluster),
        ("create", ["cluster", "firewall", "rules"]) => R::FwRuleCreate(Fw::Cluster),
        ("delete", ["cluster", "firewall", "rules", _]) => R::FwRuleDelete(Fw::Cluster, s(3)),
        ("get", ["nodes", _, "firewall", "rules"]) => R::FwRules(Fw::Node(s(1))),
        ("create", ["nodes", _, "firewall", "rules"]) => R::FwRuleCreate(Fw::Node(s(1))),
        ("delete", ["nodes", _, "firewall", "rules", _]) => R::FwRuleDelete(Fw::Node(s(1)), s(4)),
        ("get", ["nodes", _, k, _, "firewall", "rules"]) => {
            R::FwRules(Fw::Guest(s(1), kind_of(k)?, guest_id(segs[3])))
        }
        ("create", ["nodes", _, k, _, "firewall", "rules"]) => {
            R::FwRuleCreate(Fw::Guest(s(1), kind_of(k)?, guest_id(segs[3])))
        }
        ("delete", ["nodes", _, k, _, "firewall", "rules", _]) => {
            R::FwRuleDelete(Fw::Guest(s(1), kind_of(k)?, guest_id(segs[3])), s(6))
        }
        ("get", ["nodes", _, k, _, "firewall", "options"]) => R::FwOptions(s(1), kind_of(k)?, s(3)),
        ("set", ["nodes", _, k, _, "firewall", "options"]) => {
            R::FwOptionsSet(s(1), kind_of(k)?, s(3))
        }
        ("create", ["nodes", _, k, _, "firewall", "ipset"]) => {
            R::IpsetCreate(s(1), kind_of(k)?, s(3))
        }
        ("get", ["nodes", _, k, _, "firewall", "ipset", _]) => {
            R::IpsetList(s(1), kind_of(k)?, s(3), s(6))
        }
        ("create", ["nodes", _, k, _, "firewall", "ipset", _]) => {
            R::IpsetAdd(s(1), kind_of(k)?, s(3), s(6))
        }
        ("delete", ["nodes", _, k, _, "firewall", "ipset", _, _]) => {
            R::IpsetRemove(s(1), kind_of(k)?, s(3), s(6), s(7))
        }
        ("get", ["cluster", "tasks"]) => R::ClusterTasks,
        ("get", ["cluster", "ha", "status", "current"]) => R::HaStatus,
        // HA (pve-ha-manager API2/HA/{Resources,Rules}.pm)
        ("create", ["cluster", "ha", "resources"]) => R::HaResourceCreate,
        ("delete", ["cluster", "ha", "resources", _]) => R::HaResourceDelete(s(3)),
        ("get", ["cluster", "ha", "rules"]) => R::HaRules,
        ("create", ["cluster", "ha", "rules"]) => R::HaRuleCreate,
        ("delete", ["cluster", "ha", "rules", _]) => R::HaRuleDelete(s(3)),
        // backup jobs (pve-manager API2/Backup.pm)
        ("get", ["cluster", "backup"]) => R::BackupJobs,
        ("create", ["cluster", "backup"]) => R::BackupJobCreate,
        ("get", ["cluster", "backup", _]) => R::BackupJob(s(2)),
        ("delete", ["cluster", "backup", _]) => R::BackupJobDelete(s(2)),
        // The volume may hold a '/' (`fragmentDelimiter => ''` on the content subclass,
        // pve-storage API2/Storage/Status.pm [SRC]): the rest of the path is the volume.
        ("delete", ["nodes", _, "storage", _, "content", rest @ ..]) if !rest.is_empty() => {
            R::ContentDelete(s(1), s(3), rest.join("/"))
        }
        ("get", ["nodes"]) => R::Nodes,
        ("get", ["nodes", _, "version"]) => R::NodeVersion(s(1)),
        ("get", ["nodes", _, "status"]) => R::NodeStatus(s(1)),
        ("get", ["cluster", "status"]) => R::ClusterStatus,
        ("get", ["cluster", "resources"]) => R::ClusterResources,
        ("get", ["cluster", "nextid"]) => R::NextId,
        ("get", ["nodes", _, "storage"]) => R::StorageList(s(1)),
        ("get", ["nodes", _, "tasks"]) => R::Tasks(s(1)),
        ("get", ["nodes", _, k]) => R::GuestList(s(1), kind_of(k)?),
        ("get", ["nodes", _, k, _, "status", "current"]) => {
            R::StatusCurrent(s(1), kind_of(k)?, s(3))
        }
        ("get", ["nodes", _, k, _, "config"]) => R::Config(s(1), kind_of(k)?, s(3)),
        ("get", ["nodes", _, k, _, "snapshot"]) => R::SnapList(s(1), kind_of(k)?, s(3)),
        ("get", ["nodes", _, "storage", _, "content"]) => R::StorageContent(s(1), s(3)),
        ("get", ["nodes", _, "tasks", _, "status"]) => R::TaskStatus(s(1), s(3)),
        ("get", ["nodes", _, "tasks", _, "log"]) => R::TaskLog(s(1), s(3)),
        ("create", ["nodes", _, k, _, "status", a]) => {
            let kind = kind_of(k)?;
            let action = Power::parse(a)?;
            if kind == Kind::Lxc && matches!(action, Power::Suspend | Power::Resume) {
                return None;
            }
            R::Power(s(1), kind, s(3), action)
        }
        ("create", ["nodes", _, k, _, "snapshot"]) => R::SnapCreate(s(1), kind_of(k)?, s(3)),
        ("create", ["nodes", _, k, _, "snapshot", _, "rollback"]) => {
            R::Rollback(s(1), kind_of(k)?, s(3), s(5))
        }
        ("delete", ["nodes", _, k, _, "snapshot", _]) => {
            R::SnapDelete(s(1), kind_of(k)?, s(3), s(5))
        }
        ("delete", ["nodes", _, "tasks", _]) => R::TaskStop(s(1), s(3)),
        ("delete", ["nodes", _, k, _]) => R::Destroy(s(1), kind_of(k)?, s(3)),
        _ => return None,
    })
}

/// Options each route accepts (subset of the API schema that matters here), beyond the
/// standard output options.
fn schema(r: &Route) -> Vec<Param> {
    use Route as R;
    match r {
        R::ClusterResources => vec![p("type", Ty::Enum(&["vm", "storage", "node", "sdn"]))],
        R::NextId => vec![p("vmid", VMID)],
        R::GuestList(..) => vec![p("full", Ty::Bool)],
        R::Config(..) => vec![p("current", Ty::Bool), p("snapshot", Ty::ConfigId)],
        R::StorageList(_) => vec![
            p("content", Ty::Str),
            p("enabled", Ty::Bool),
            p("format", Ty::Bool),
            p("storage", Ty::Str),
            p("target", Ty::Str),
        ],
        R::StorageContent(..) => vec![
            p(
                "content",
                Ty::Enum(&[
                    "backup", "iso", "vztmpl", "images", "rootdir", "snippets", "import",
                ]),
            ),
            p("vmid", VMID),
        ],
        R::Vzdump(_) => {
            let mut v = vec![p("vmid", Ty::Str), p("all", Ty::Bool)];
            v.extend(
                crate::backup::VZDUMP_OPTS
                    .iter()
                    .filter(|x| x.name != "quiet"),
            );
            v
        }
        R::QemuCreate(_) => {
            let mut v = vec![
                p("vmid", VMID),
                p("archive", Ty::Str),
                p("storage", Ty::StorageId),
                p("force", Ty::Bool),
                p("unique", Ty::Bool),
                p("start", Ty::Bool),
                p("pool", Ty::Str),
                p("bwlimit", Ty::Int(Some(0), None)),
                p("live-restore", Ty::Bool),
                p("name", Ty::Str),
                p("description", Ty::Str),
                p("tags", Ty::Str),
                p("memory", Ty::Int(Some(16), None)),
                p("balloon", Ty::Int(Some(0), None)),
                p("cores", Ty::Int(Some(1), Some(1024))),
                p("sockets", Ty::Int(Some(1), Some(4))),
                p("cpu", Ty::Str),
                p("numa", Ty::Bool),
                p("onboot", Ty::Bool),
                p("agent", Ty::Str),
                p("boot", Ty::Str),
                p("bios", Ty::Enum(&["seabios", "ovmf"])),
                p("machine", Ty::Str),
                p("scsihw", Ty::Str),
                p(
                    "ostype",
                    Ty::Enum(&[
                        "other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10",
                        "win11", "l24", "l26", "solaris",
                    ]),
                ),
                p("cdrom", Ty::Str),
                p("serial0", Ty::Str),
                p("vga", Ty::Str),
                p("ciuser", Ty::Str),
                p("sshkeys", Ty::Str),
                p("ipconfig0", Ty::Str),
                p("nameserver", Ty::Str),
                p("searchdomain", Ty::Str),
            ];
            v.extend(
                [
                    "ide0", "ide1", "ide2", "ide3", "sata0", "sata1", "scsi0", "scsi1", "scsi2",
                    "scsi3", "virtio0", "virtio1", "efidisk0", "net0", "net1", "net2", "net3",
                ]
                .map(|k| p(k, Ty::Str)),
            );
            v
        }
        R::LxcCreate(_) => {
            let mut v = vec![
                p("vmid", VMID),
                p("ostemplate", Ty::Str),
                p("restore", Ty::Bool),
                p("force", Ty::Bool),
                p("storage", Ty::StorageId),
                p("unique", Ty::Bool),
                p("start", Ty::Bool),
                p("pool", Ty::Str),
                p("hostname", Ty::Str),
                p("description", Ty::Str),
                p("tags", Ty::Str),
                p("memory", Ty::Int(Some(16), None)),
                p("swap", Ty::Int(Some(0), None)),
                p("cores", Ty::Int(Some(1), Some(8192))),
                p("cpulimit", Ty::Str),
                p("unprivileged", Ty::Bool),
                p("password", Ty::Str),
                p("ssh-public-keys", Ty::Str),
                p("features", Ty::Str),
                p("onboot", Ty::Bool),
                p("nameserver", Ty::Str),
                p("searchdomain", Ty::Str),
                p(
                    "arch",
                    Ty::Enum(&["amd64", "i386", "arm64", "armhf", "riscv32", "riscv64"]),
                ),
                p("ignore-unpack-errors", Ty::Bool),
                p("bwlimit", Ty::Int(Some(0), None)),
                p("ha-managed", Ty::Bool),
            ];
            v.extend(
                [
                    "rootfs", "mp0", "mp1", "mp2", "net0", "net1", "net2", "net3",
                ]
                .map(|k| p(k, Ty::Str)),
            );
            v
        }
        R::Clone(..) => vec![
            p("newid", VMID),
            p("name", Ty::Str),
            p("description", Ty::Str),
            p("full", Ty::Bool),
            p("storage", Ty::StorageId),
            p("format", Ty::Enum(&["raw", "qcow2", "vmdk"])),
            p("target", Ty::Str),
            p("pool", Ty::Str),
            p("snapname", Ty::ConfigId),
            p("bwlimit", Ty::Int(Some(0), None)),
        ],
        R::PruneList(..) | R::PruneDelete(..) => vec![
            p("vmid", VMID),
            p("type", Ty::Enum(&["qemu", "lxc"])),
            p("prune-backups", Ty::Str),
        ],
        R::DownloadUrl(..) => vec![
            p("content", Ty::Enum(&["iso", "vztmpl", "import"])),
            p("url", Ty::Str),
            p("filename", Ty::Str),
            p("checksum", Ty::Str),
            p(
                "checksum-algorithm",
                Ty::Enum(&["md5", "sha1", "sha224", "sha256", "sha384", "sha512"]),
            ),
            p("compression", Ty::Str),
            p("verify-certificates", Ty::Bool),
        ],
        R::AplDownload(_) => vec![p("storage", Ty::StorageId), p("template", Ty::Str)],
        // PVE 9.2 `POST …/firewall/rules` (every rule list takes the same options).
        R::FwRuleCreate(_) => vec![
            p("action", Ty::MaxLen(20)),
            p("type", Ty::Enum(&["in", "out", "forward", "group"])),
            p("enable", Ty::Int(Some(0), None)),
            p("proto", Ty::Str),
            p("dport", Ty::Str),
            p("sport", Ty::Str),
            p("source", Ty::MaxLen(512)),
            p("dest", Ty::MaxLen(512)),
            p("comment", Ty::Str),
            p("digest", Ty::MaxLen(64)),
            p("pos", Ty::Int(Some(0), None)),
            p("iface", Ty::MaxLen(20)),
            p(
                "log",
                Ty::Enum(&[
                    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "nolog",
                ]),
            ),
            p("macro", Ty::MaxLen(128)),
            p("icmp-type", Ty::Str),
        ],
        R::FwRuleDelete(..) => vec![p("digest", Ty::MaxLen(64))],
        // PVE 9.2 `POST /cluster/ha/resources`, `DELETE …/{sid}`, `GET` and `POST /cluster/ha/rules`.
        R::HaResourceCreate => vec![
            p("sid", Ty::Str),
            p("type", Ty::Enum(&["ct", "vm"])),
            p(
                "state",
                Ty::Enum(&["started", "stopped", "enabled", "disabled", "ignored"]),
            ),
            p("max_restart", Ty::Int(Some(0), None)),
            p("max_relocate", Ty::Int(Some(0), None)),
            p("group", Ty::ConfigId),
            p("comment", Ty::MaxLen(4096)),
            p("failback", Ty::Bool),
            p("auto-rebalance", Ty::Bool),
        ],
        R::HaResourceDelete(_) => vec![p("purge", Ty::Bool)],
        // PVE 9.2 `POST /cluster/backup` (`json_config_properties` and the job's own).
        R::BackupJobCreate => vec![
            p("id", Ty::ConfigId),
            p("schedule", Ty::MaxLen(128)),
            p("starttime", Ty::Str),
            p("dow", Ty::Str),
            p("enabled", Ty::Bool),
            p("repeat-missed", Ty::Bool),
            p("comment", Ty::MaxLen(512)),
            p("all", Ty::Bool),
            p("bwlimit", Ty::Int(Some(0), None)),
            p("compress", Ty::Enum(&["0", "1", "gzip", "lzo", "zstd"])),
            p("dumpdir", Ty::Str),
            p("exclude", Ty::Str),
            p("exclude-path", Ty::List),
            p("fleecing", Ty::Str),
            p("ionice", Ty::Int(Some(0), Some(8))),
            p("lockwait", Ty::Int(Some(0), None)),
            p("mailnotification", Ty::Enum(&["always", "failure"])),
            p("mailto", Ty::Str),
            p("mode", Ty::Enum(&["snapshot", "suspend", "stop"])),
            p("node", Ty::Str),
            p("notes-template", Ty::MaxLen(1024)),
            p(
                "notification-mode",
                Ty::Enum(&["auto", "legacy-sendmail", "notification-system"]),
            ),
            p(
                "pbs-change-detection-mode",
                Ty::Enum(&["legacy", "data", "metadata"]),
            ),
            p("performance", Ty::Str),
            p("pigz", Ty::Int(None, None)),
            p("pool", Ty::Str),
            p("protected", Ty::Bool),
            p("prune-backups", Ty::Str),
            p("quiet", Ty::Bool),
            p("remove", Ty::Bool),
            p("script", Ty::Str),
            p("stdexcludes", Ty::Bool),
            p("stop", Ty::Bool),
            p("stopwait", Ty::Int(Some(0), None)),
            p("storage", Ty::StorageId),
            p("tmpdir", Ty::Str),
            p("vmid", Ty::Str),
            p("zstd", Ty::Int(None, None)),
        ],
        R::HaRules => vec![
            p("type", Ty::Enum(&["node-affinity", "resource-affinity"])),
            p("resource", Ty::Str),
        ],
        R::HaRuleCreate => vec![
            p("rule", Ty::ConfigId),
            p("type", Ty::Enum(&["node-affinity", "resource-affinity"])),
            p("resources", Ty::Str),
            p("nodes", Ty::Str),
            p("strict", Ty::Bool),
            p("affinity", Ty::Enum(&["positive", "negative"])),
            p("comment", Ty::MaxLen(4096)),
            p("disable", Ty::Bool),
        ],
        R::FwOptionsSet(..) => vec![
            p("enable", Ty::Bool),
            p("dhcp", Ty::Bool),
            p("ipfilter", Ty::Bool),
            p("macfilter", Ty::Bool),
            p("ndp", Ty::Bool),
            p("radv", Ty::Bool),
            p("policy_in", Ty::Enum(&["ACCEPT", "REJECT", "DROP"])),
            p("policy_out", Ty::Enum(&["ACCEPT", "REJECT", "DROP"])),
            p("digest", Ty::MaxLen(64)),
            p("delete", Ty::Str),
        ],
        R::IpsetCreate(..) => vec![
            p("name", Ty::MaxLen(64)),
            p("comment", Ty::Str),
            p("digest", Ty::MaxLen(64)),
            p("rename", Ty::MaxLen(64)),
        ],
        R::IpsetAdd(..) => vec![
            p("cidr", Ty::Str),
            p("comment", Ty::Str),
            p("nomatch", Ty::Bool),
        ],
        R::IpsetRemove(..) => vec![p("digest", Ty::MaxLen(64))],
        // PVE 9.2 `POST /nodes/{node}/network` (the options a bridge takes; no OVS).
        R::NetworkCreate(_) => vec![
            p("iface", Ty::Str),
            p(
                "type",
                Ty::Enum(&[
                    "bridge",
                    "bond",
                    "eth",
                    "alias",
                    "vlan",
                    "fabric",
                    "OVSBridge",
                    "OVSBond",
                    "OVSPort",
                    "OVSIntPort",
                    "vnet",
                    "unknown",
                ]),
            ),
            p("bridge_ports", Ty::Str),
            p("bridge_vlan_aware", Ty::Bool),
            p("cidr", Ty::Str),
            p("comments", Ty::Str),
            p("autostart", Ty::Bool),
        ],
        R::NetworkReload(_) => vec![p("regenerate-frr", Ty::Bool)],
        R::Tasks(_) => vec![
            p("limit", Ty::Int(Some(0), None)),
            p("start", Ty::Int(Some(0), None)),
            p("vmid", VMID),
            p("typefilter", Ty::Str),
            p("errors", Ty::Bool),
            p("source", Ty::Enum(&["archive", "active", "all"])),
            p("userfilter", Ty::Str),
            p("statusfilter", Ty::Str),
            p("since", Ty::Int(None, None)),
            p("until", Ty::Int(None, None)),
        ],
        R::TaskLog(..) => vec![
            p("limit", Ty::Int(Some(0), None)),
            p("start", Ty::Int(Some(0), None)),
            p("download", Ty::Bool),
        ],
        R::Power(_, kind, _, action) => {
            let mut v = vec![p("skiplock", Ty::Bool)];
            match action {
                Power::Start => {
                    v.push(p("timeout", Ty::Int(Some(0), Some(86_400))));
                    if *kind == Kind::Lxc {
                        v.push(p("debug", Ty::Bool));
                    }
                }
                Power::Shutdown => v.extend([
                    p("timeout", Ty::Int(Some(0), None)),
                    p("forceStop", Ty::Bool),
                    p("keepActive", Ty::Bool),
                ]),
                Power::Stop => v.extend([
                    p("timeout", Ty::Int(Some(0), None)),
                    p("keepActive", Ty::Bool),
                    p("overrule-shutdown", Ty::Bool),
                ]),
                Power::Reboot => v.push(p("timeout", Ty::Int(Some(0), None))),
                Power::Suspend => v.extend([p("todisk", Ty::Bool), p("statestorage", Ty::Str)]),
                Power::Resume => v.push(p("nocheck", Ty::Bool)),
            }
            v
        }
        R::SnapCreate(_, kind, _) => {
            let mut v = vec![p("snapname", Ty::ConfigId), p("description", Ty::Str)];
            if *kind == Kind::Qemu {
                v.push(p("vmstate", Ty::Bool));
            }
            v
        }
        R::Rollback(..) => vec![p("start", Ty::Bool)],
        // API2/Qemu/Agent.pm [SRC] (see `guest`).
        R::AgentExec(..) => vec![
            p("command", Ty::List),
            p("input-data", Ty::MaxLen(crate::guest::INPUT_DATA_MAX)),
        ],
        R::AgentExecStatus(..) => vec![p("pid", Ty::Int(None, None))],
        R::AgentFileWrite(..) => vec![
            p("file", Ty::Str),
            p("content", Ty::MaxLen(crate::guest::FILE_WRITE_MAX)),
            p("encode", Ty::Bool),
        ],
        R::AgentFileRead(..) => vec![
            p("file", Ty::Str),
            p(
                "count",
                Ty::Int(Some(1), Some(crate::guest::MAX_READ_SIZE as i64)),
            ),
            p("decode", Ty::Bool),
            p("offset", Ty::Int(Some(0), None)),
        ],
        R::SnapDelete(..) => vec![p("force", Ty::Bool)],
        R::ConfigSet(_, kind, _) => {
            let mut v = vec![
                p("cores", Ty::Int(Some(1), Some(8192))),
                p("description", Ty::MaxLen(8192)),
                p("tags", Ty::Str),
                p("onboot", Ty::Bool),
                p("protection", Ty::Bool),
                p("digest", Ty::MaxLen(40)),
                p("delete", Ty::Str),
                p("revert", Ty::Str),
            ];
            match kind {
                Kind::Qemu => v.extend([
                    p("memory", Ty::Str),
                    p("balloon", Ty::Int(Some(0), None)),
                    p("name", Ty::Str),
                    p("skiplock", Ty::Bool),
                    p("ciuser", Ty::Str),
                    p("sshkeys", Ty::Str),
                    p("ipconfig0", Ty::Str),
                    p("nameserver", Ty::Str),
                    p("searchdomain", Ty::Str),
                ]),
                Kind::Lxc => v.extend([
                    p("memory", Ty::Int(Some(16), None)),
                    p("swap", Ty::Int(Some(0), None)),
                    p("hostname", Ty::MaxLen(255)),
                ]),
            }
            v
        }
        R::Resize(..) => vec![
            p("disk", Ty::Str),
            p("size", Ty::Str),
            p("digest", Ty::MaxLen(40)),
            p("skiplock", Ty::Bool),
        ],
        R::Migrate(_, kind, _) => {
            let mut v = vec![
                p("target", Ty::Str),
                p("online", Ty::Bool),
                p("bwlimit", Ty::Int(Some(0), None)),
            ];
            match kind {
                Kind::Qemu => v.extend([
                    p("force", Ty::Bool),
                    p("migration_type", Ty::Enum(&["secure", "insecure"])),
                    p("migration_network", Ty::Str),
                    p("with-local-disks", Ty::Bool),
                    p("targetstorage", Ty::Str),
                    p("with-conntrack-state", Ty::Bool),
                ]),
                Kind::Lxc => v.extend([
                    p("restart", Ty::Bool),
                    p("timeout", Ty::Int(None, None)),
                    p("target-storage", Ty::Str),
                ]),
            }
            v
        }
        // qemu-server / pve-container `rrddata`: five frames; the node's also `decade`.
        R::GuestRrd(..) => vec![
            p(
                "timeframe",
                Ty::Enum(&["hour", "day", "week", "month", "year"]),
            ),
            p("cf", Ty::Enum(&["AVERAGE", "MAX"])),
        ],
        R::NodeRrd(_) => vec![
            p(
                "timeframe",
                Ty::Enum(&["hour", "day", "week", "month", "year", "decade"]),
            ),
            p("cf", Ty::Enum(&["AVERAGE", "MAX"])),
        ],
        R::NodeNetwork(_) => vec![p(
            "type",
            Ty::Enum(&[
                "bridge",
                "bond",
                "eth",
                "alias",
                "vlan",
                "fabric",
                "OVSBridge",
                "OVSBond",
                "OVSPort",
                "OVSIntPort",
                "vnet",
                "any_bridge",
                "any_local_bridge",
                "include_sdn",
            ]),
        )],
        R::ContentDelete(..) => vec![p("delay", Ty::Int(Some(1), Some(30)))],
        // host observation and storage configuration
        R::NodeDisks(_) => vec![
            p("include-partitions", Ty::Bool),
            p("skipsmart", Ty::Bool),
            p("type", Ty::Enum(&["unused", "journal_disks"])),
        ],
        R::NodeSmart(_) => vec![p("disk", Ty::Str), p("healthonly", Ty::Bool)],
        R::NodeJournal(_) => vec![
            p("since", Ty::Int(Some(0), None)),
            p("until", Ty::Int(Some(0), None)),
            p("lastentries", Ty::Int(Some(0), None)),
            p("startcursor", Ty::Str),
            p("endcursor", Ty::Str),
        ],
        R::StorageCreate => storage_cfg::CREATE_OPTS.to_vec(),
        R::StorageIndex => vec![p("type", Ty::Enum(storage_cfg::TYPES))],
        R::StorageRead(_) => Vec::new(),
        R::StorageSet(_) => storage_cfg::SET_OPTS.to_vec(),
        R::Destroy(_, kind, _) => {
            let mut v = vec![
                p("purge", Ty::Bool),
                p("destroy-unreferenced-disks", Ty::Bool),
                p("skiplock", Ty::Bool),
            ];
            if *kind == Kind::Lxc {
                v.push(p("force", Ty::Bool));
            }
            v
        }
        _ => vec![],
    }
}

fn route_node(r: &Route) -> Option<&str> {
    use Route as R;
    match r {
        R::NodeVersion(n)
        | R::NodeStatus(n)
        | R::GuestList(n, _)
        | R::StatusCurrent(n, ..)
        | R::Config(n, ..)
        | R::SnapList(n, ..)
        | R::StorageList(n)
        | R::StorageContent(n, _)
        | R::Tasks(n)
        | R::TaskStatus(n, _)
        | R::TaskLog(n, _)
        | R::TaskStop(n, _)
        | R::Power(n, ..)
        | R::SnapCreate(n, ..)
        | R::Rollback(n, ..)
        | R::SnapDelete(n, ..)
        | R::Destroy(n, ..)
        | R::Vzdump(n)
        | R::QemuCreate(n)
        | R::LxcCreate(n)
        | R::Clone(n, _)
        | R::PruneList(n, _)
        | R::PruneDelete(n, _)
        | R::DownloadUrl(n, _)
        | R::AplInfo(n)
        | R::AplDownload(n)
        | R::AgentExec(n, _)
        | R::AgentExecStatus(n, _)
        | R::AgentFileWrite(n, _)
        | R::AgentFileRead(n, _)
        | R::ConfigSet(n, ..)
        | R::Resize(n, ..)
        | R::Migrate(n, ..)
        | R::AgentInterfaces(n, _)
        | R::GuestRrd(n, ..)
        | R::NodeRrd(n)
        | R::NodeNetwork(n)
        | R::NetworkCreate(n)
        | R::NetworkReload(n)
        | R::NetworkRevert(n)
        | R::NetworkDelete(n, _)
        | R::ContentDelete(n, ..)
        | R::NodeDisks(n)
        | R::NodeSmart(n)
        | R::NodeJournal(n)
        | R::NodeServices(n)
        | R::NodeService(n, _)
        | R::AptUpdates(n)
        | R::FwRules(crate::firewall::Scope::Node(n) | crate::firewall::Scope::Guest(n, ..))
        | R::FwRuleCreate(crate::firewall::Scope::Node(n) | crate::firewall::Scope::Guest(n, ..))
        | R::FwRuleDelete(
            crate::firewall::Scope::Node(n) | crate::firewall::Scope::Guest(n, ..),
            _,
        )
        | R::FwOptions(n, ..)
        | R::FwOptionsSet(n, ..)
        | R::IpsetCreate(n, ..)
        | R::IpsetList(n, ..)
        | R::IpsetAdd(n, ..)
        | R::IpsetRemove(n, ..) => Some(n),
        _ => None,
    }
}

fn route_storage(r: &Route) -> Option<&str> {
    use Route as R;
    match r {
        R::StorageContent(_, s)
        | R::PruneList(_, s)
        | R::PruneDelete(_, s)
        | R::DownloadUrl(_, s)
        | R::StorageDelete(s)
        | R::ContentDelete(_, s, _)
        | R::StorageSet(s) => Some(s),
        _ => None,
    }
}

/// Options the API schema does not mark optional (checked like JSONSchema does, with its
/// `property is missing and it is not optional`).
fn required(r: &Route) -> &'static [&'static str] {
    use Route as R;
    match r {
        R::SnapCreate(..) => &["snapname"],
        R::QemuCreate(_) => &["vmid"],
        R::LxcCreate(_) => &["vmid", "ostemplate"],
        R::Clone(..) => &["newid"],
        R::DownloadUrl(..) => &["content", "filename", "url"],
        R::AplDownload(_) => &["storage", "template"],
        R::AgentExec(..) => &["command"],
        R::AgentExecStatus(..) => &["pid"],
        R::AgentFileWrite(..) => &["file", "content"],
        R::AgentFileRead(..) => &["file"],
        R::Resize(..) => &["disk", "size"],
        R::Migrate(..) => &["target"],
        R::GuestRrd(..) | R::NodeRrd(_) => &["timeframe"],
        R::FwRuleCreate(_) => &["action", "type"],
        R::HaResourceCreate => &["sid"],
        R::HaRuleCreate => &["resources", "rule", "type"],
        R::IpsetCreate(..) => &["name"],
        R::IpsetAdd(..) => &["cidr"],
        R::NodeSmart(_) => &["disk"],
        R::StorageCreate => &["storage", "type"],
        _ => &[],
    }
}

fn route_vmid(r: &Route) -> Option<&str> {
    use Route as R;
    match r {
        R::StatusCurrent(_, _, v)
        | R::Config(_, _, v)
        | R::SnapList(_, _, v)
        | R::Power(_, _, v, _)
        | R::SnapCreate(_, _, v)
        | R::Rollback(_, _, v, _)
        | R::SnapDelete(_, _, v, _)
        | R::Destroy(_, _, v)
        | R::Clone(_, v)
        | R::AgentExec(_, v)
        | R::AgentExecStatus(_, v)
        | R::AgentFileWrite(_, v)
        | R::AgentFileRead(_, v)
        | R::ConfigSet(_, _, v)
        | R::Resize(_, _, v)
        | R::Migrate(_, _, v)
        | R::AgentInterfaces(_, v)
        | R::GuestRrd(_, _, v)
        | R::CloudinitPending(_, v)
        | R::CloudinitRegenerate(_, v)
        | R::Template(_, v)
        | R::FwOptions(_, _, v)
        | R::FwOptionsSet(_, _, v)
        | R::IpsetCreate(_, _, v)
        | R::IpsetList(_, _, v, _)
        | R::IpsetAdd(_, _, v, _)
        | R::IpsetRemove(_, _, v, ..) => Some(v),
        _ => None,
    }
}

fn usage(verb: &str) -> String {
    format!("pvesh {verb} <api_path> [OPTIONS] [FORMAT_OPTIONS]")
}

fn node_name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// Entry point for `pvesh …`.
pub fn run(st: &mut State, ctx: &Ctx, argv: &[String]) -> Output {
    let Some(verb) = argv.first() else {
        return Output::err(
            "ERROR: no command specified\nUSAGE: pvesh <COMMAND> [ARGS] [OPTIONS]",
            255,
        );
    };
    if !["get", "create", "delete", "set", "ls", "usage", "help"].contains(&verb.as_str()) {
        return Output::err(
            &format!("unknown command 'pvesh {verb}'\nUSAGE: pvesh <COMMAND> [ARGS] [OPTIONS]"),
            255,
        );
    }
    let Some(path) = argv.get(1) else {
        return Output::err(&format!("400 not enough arguments\n{}", usage(verb)), 255);
    };
    // `localhost` names the node pvesh runs on (pvesh.pm's `proxy_handler` proxies only to
    // another node's name) [SRC].
    let local = st.local_node.clone();
    let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() > 1 && segs[0] == "nodes" && segs[1] == "localhost" {
        segs[1] = local.as_str();
    }
    let Some(route) = route(verb, &segs) else {
        if ["get", "create", "delete", "set"].contains(&verb.as_str()) {
            // pvesh.pm extract_path_info (REAL pve-9.2.4 transcript): exit 1.
            return Output::err(&format!("No '{verb}' handler defined for '{path}'"), 1);
        }
        return Output::err(&format!("pve-sim: 'pvesh {verb}' is not simulated"), 255);
    };
    let mut schema = schema(&route);
    schema.extend(OUTPUT_OPTS);
    let parsed = match args::parse(&argv[2..], &schema) {
        Ok(p) if !p.pos.is_empty() => {
            return Output::err(&format!("400 too many arguments\n{}", usage(verb)), 255);
        }
        Ok(p) => p,
        Err(e) => return args::param_error(&e, &usage(verb)),
    };
    // Path parameters are verified like options.
    let mut path_errors = args::ParamErrors::new();
    if let Some(n) = route_node(&route).filter(|n| !node_name_ok(n)) {
        path_errors.push((
            "node".into(),
            format!("invalid format - value does not look like a valid node name ({n})"),
        ));
    }
    let mut vmid = 0u32;
    if let Some(v) = route_vmid(&route) {
        match args::check(VMID, v) {
            Ok(v) => vmid = v.parse().unwrap_or(0),
            Err(m) => path_errors.push(("vmid".into(), m)),
        }
    }
    if let Some(sid) = route_storage(&route)
        && let Err(m) = args::check(Ty::StorageId, sid)
    {
        path_errors.push(("storage".into(), m));
    }
    for key in required(&route) {
        if parsed.get(key).is_none() && !parsed.lists.contains_key(*key) {
            path_errors.push((
                (*key).to_string(),
                "property is missing and it is not optional".into(),
            ));
        }
    }
    if let Route::DownloadUrl(..) = route {
        // JSONSchema `requires` in both directions, and the url `pattern`.
        if parsed.get("checksum").is_some() && parsed.get("checksum-algorithm").is_none() {
            path_errors.push((
                "checksum-algorithm".into(),
                "missing property required by 'checksum'".into(),
            ));
        }
        if parsed.get("checksum-algorithm").is_some() && parsed.get("checksum").is_none() {
            path_errors.push((
                "checksum".into(),
                "missing property required by 'checksum-algorithm'".into(),
            ));
        }
        if parsed
            .get("url")
            .is_some_and(|u| !(u.starts_with("http://") || u.starts_with("https://")))
        {
            path_errors.push((
                "url".into(),
                "value does not match the regex pattern".into(),
            ));
        }
    }
    if let Route::Resize(_, kind, _) = &route {
        let names = match kind {
            Kind::Qemu => settings::vm_disk_names(),
            Kind::Lxc => settings::ct_disk_names(),
        };
        if let Some(d) = parsed.get("disk").filter(|d| !names.iter().any(|n| n == d)) {
            path_errors.push((
                "disk".into(),
                format!(
                    "value '{d}' does not have a value in the enumeration '{}'",
                    names.join(", ")
                ),
            ));
        }
        if parsed.get("size").is_some_and(|sz| !settings::size_ok(sz)) {
            path_errors.push((
                "size".into(),
                "value does not match the regex pattern".into(),
            ));
        }
    }
    if let Route::Migrate(..) = route
        && let Some(t) = parsed.get("target").filter(|t| !node_name_ok(t))
    {
        path_errors.push((
            "target".into(),
            format!("invalid format - value does not look like a valid node name ({t})"),
        ));
    }
    // host observation: the `service` path enum and the `disk` pattern
    // `^/dev/[a-zA-Z0-9\/]+$` of the schema (PVE 9.1.11, 9.2).
    if let Route::NodeService(_, svc) = &route
        && !hostinfo::service_names().contains(&svc.as_str())
    {
        path_errors.push((
            "service".into(),
            format!(
                "value '{svc}' does not have a value in the enumeration '{}'",
                hostinfo::service_names().join(", ")
            ),
        ));
    }
    if let Route::NodeSmart(_) = route
        && parsed.get("disk").is_some_and(|d| {
            !d.strip_prefix("/dev/").is_some_and(|r| {
                !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'/')
            })
        })
    {
        path_errors.push((
            "disk".into(),
            "value does not match the regex pattern".into(),
        ));
    }
    if !path_errors.is_empty() {
        return args::param_error(&path_errors, &usage(verb));
    }

    let format = parsed.get("output-format").unwrap_or("text").to_string();
    // A path on another node goes there as `ssh root@IP -- pvesh --noproxy VERB PATH
    // --output-format json ARGS…` (pvesh.pm `proxy_handler`); the answer changes form, see
    // [`proxied_error`] and [`task_output`].
    let mut proxied = false;
    if let Some(node) = route_node(&route) {
        if st.node(node).is_none() {
            return Output::err(
                &format!(
                    "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
                ),
                255,
            );
        }
        proxied = node != st.local_node;
    }
    let quiet = parsed.flag("quiet");
    let result = execute(st, ctx, &route, vmid, &parsed);
    let mut out = match result {
        Ok(Reply::Data(v)) => Output::ok(render(&v, &format)),
        Ok(Reply::DataWarn(v, warnings)) => Output {
            stdout: render(&v, &format),
            stderr: warnings.iter().map(|w| format!("{w}\n")).collect(),
            code: 0,
        },
        // A `null` result prints nothing, in every format (FORMATS §1.6).
        Ok(Reply::Nothing) => Output::default(),
        // What the handler printed, then its `null`. Proxied, the remote output is no JSON
        // document, so pvesh hands it back as a string, its lines run together like a task's
        // log (see [`task_output`]) [INFER].
        Ok(Reply::Printed(text, warnings)) => Output {
            stdout: if proxied && !text.is_empty() {
                render(&Value::String(text.lines().collect()), &format)
            } else {
                text
            },
            stderr: warnings.iter().map(|w| format!("{w}\n")).collect(),
            code: 0,
        },
        Ok(Reply::TaskWarn(t, warnings)) => {
            let mut o = task_output(&t, &format, proxied);
            let w: String = warnings.iter().map(|w| format!("{w}\n")).collect();
            o.stderr.insert_str(0, &w);
            o
        }
        Ok(Reply::Task(t)) => task_output(&t, &format, proxied),
        Err(mut f) => {
            // A parameter exception from the handler gets pvesh's usage like a schema error
            // (`RESTHandler::cli_handler` [SRC]).
            if f.msg.starts_with("400 Parameter verification failed.\n") && !f.msg.contains("\n\n")
            {
                f.msg = format!("{}\n\n{}", f.msg.trim_end(), usage(verb));
            }
            let mut o = Output::from(f.clone());
            if proxied {
                o = proxied_error(&o);
            }
            o
        }
    };
    if quiet {
        out.stdout.clear();
    }
    out
}

/// What a route produced.
enum Reply {
    Data(Value),
    /// Data plus `warn` lines on stderr.
    DataWarn(Value, Vec<String>),
    Task(TaskRun),
    /// A task, after `warn` lines of the checks before it.
    TaskWarn(TaskRun, Vec<String>),
    Nothing,
    /// A `null` result after lines the handler printed (`update VM …`), with warnings.
    Printed(String, Vec<String>),
}

fn execute(
    st: &mut State,
    ctx: &Ctx,
    route: &Route,
    vmid: u32,
    o: &Parsed,
) -> Result<Reply, Failure> {
    use Route as R;
    let now = ctx.now;
    let data = |v: Value| Ok(Reply::Data(v));
    match route {
        R::Version | R::NodeVersion(_) => data(api::version(st)),
        R::Nodes => data(api::nodes(st, now)),
        R::NodeStatus(n) => {
            let node = st
                .node(n)
                .cloned()
                .ok_or_else(|| Failure::die("no such node"))?;
            data(api::node_status(st, &node, now))
        }
        R::ClusterStatus => data(api::cluster_status(st)),
        R::ClusterResources => data(api::cluster_resources(st, now, o.get("type"))),
        R::NextId => data(api::nextid(st, o.int("vmid"))?),
        R::GuestList(n, k) => data(api::guest_list(st, n, *k, now)),
        R::StatusCurrent(n, k, _) => data(api::status_current(ops::load(st, n, *k, vmid)?, now)),
        R::Config(n, k, _) => {
            let g = ops::load(st, n, *k, vmid)?;
            match o.get("snapshot") {
                Some(s) => {
                    let snap =
                        g.snapshots.iter().find(|x| x.name == s).ok_or_else(|| {
                            Failure::die(format!("snapshot '{s}' does not exist"))
                        })?;
                    let mut m: serde_json::Map<String, Value> =
                        snap.config.clone().into_iter().collect();
                    m.insert("digest".into(), Value::String(api::digest(&g.config)));
                    if let Some(p) = &snap.parent {
                        m.insert("parent".into(), Value::String(p.clone()));
                    }
                    m.insert("snaptime".into(), snap.snaptime.into());
                    data(Value::Object(m))
                }
                None => data(api::config(g)),
            }
        }
        R::SnapList(n, k, _) => data(api::snapshot_list(ops::load(st, n, *k, vmid)?)),
        R::StorageList(n) => {
            let mut v = api::storage_list(st, n, o.get("content"));
            if let (Some(sid), Value::Array(a)) = (o.get("storage"), &mut v) {
                a.retain(|e| e["storage"] == sid);
            }
            data(v)
        }
        R::StorageContent(n, sid) => data(api::storage_content(
            st,
            n,
            sid,
            o.get("content"),
            o.int("vmid").and_then(|v| u32::try_from(v).ok()),
        )?),
        R::Tasks(n) => {
            let f = api::TaskFilter {
                limit: o.int("limit").map(|v| usize::try_from(v).unwrap_or(0)),
                start: o.int("start").map(|v| usize::try_from(v).unwrap_or(0)),
                vmid: o.get("vmid").map(str::to_string),
                typefilter: o.get("typefilter").map(str::to_string),
                errors: o.flag("errors"),
                source: o.get("source").map(str::to_string),
            };
            data(api::tasks(st, n, &f))
        }
        R::TaskStatus(n, upid) => data(api::task_status(st, n, upid)?),
        R::TaskLog(n, upid) => {
            let start = o
                .int("start")
                .map_or(0, |v| usize::try_from(v).unwrap_or(0));
            let limit = o
                .int("limit")
                .map_or(50, |v| usize::try_from(v).unwrap_or(0));
            data(api::task_log(st, n, upid, start, limit)?)
        }
        R::Power(n, k, _, a) => ops::power(st, ctx, n, *k, vmid, *a).map(Reply::Task),
        R::SnapCreate(n, k, _) => ops::snapshot(
            st,
            ctx,
            n,
            *k,
            vmid,
            &ops::NewSnapshot {
                name: o.get("snapname").unwrap_or_default(),
                description: o.get("description"),
                vmstate: o.flag("vmstate"),
            },
        )
        .map(Reply::Task),
        R::Rollback(n, k, _, s) => {
            ops::rollback(st, ctx, n, *k, vmid, s, o.flag("start")).map(Reply::Task)
        }
        R::SnapDelete(n, k, _, s) => ops::delsnapshot(st, ctx, n, *k, vmid, s).map(Reply::Task),
        R::TaskStop(n, upid) => {
            crate::running::stop(st, ctx, n, upid)?;
            Ok(Reply::Nothing)
        }
        R::Destroy(n, k, _) => ops::destroy(st, ctx, n, *k, vmid, o.flag("purge")).map(Reply::Task),
        R::Vzdump(n) => {
            if o.get("vmid").is_none() && !o.flag("all") {
                return Err(param_exc("vmid", "property is missing"));
            }
            let ids = crate::backup::vmid_list(o.get("vmid").unwrap_or_default())
                .map_err(|m| param_exc("vmid", &m))?;
            match crate::backup::vzdump_job(st, ctx, Some(n), &ids, o) {
                Some(t) => Ok(Reply::Task(t)),
                // "silent exit if specified VMs run on other nodes" [SRC API2/VZDump.pm]
                None => data(Value::String("OK".into())),
            }
        }
        R::QemuCreate(n) => {
            let id = o
                .int("vmid")
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0);
            match o.get("archive") {
                Some(archive) => {
                    if let Some(k) = o.opts.keys().find(|k| {
                        ["ide", "sata", "scsi", "virtio", "efidisk"]
                            .iter()
                            .any(|p| k.strip_prefix(p).is_some_and(|n| n.parse::<u32>().is_ok()))
                    }) {
                        return Err(param_exc(k, "option conflicts with option 'archive'"));
                    }
                    provision::qemu_restore(
                        st,
                        ctx,
                        &provision::QemuRestore {
                            node: n,
                            vmid: id,
                            archive,
                            storage: o.get("storage"),
                            force: o.flag("force"),
                            start: o.flag("start"),
                        },
                    )
                    .map(Reply::Task)
                }
                None => provision::qemu_create(st, ctx, n, id, o).map(Reply::Task),
            }
        }
        R::LxcCreate(n) => {
            let id = o
                .int("vmid")
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0);
            provision::lxc_create(st, ctx, n, id, o).map(Reply::Task)
        }
        R::Clone(n, _) => {
            let newid = o
                .int("newid")
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0);
            provision::clone(st, ctx, n, vmid, newid, o).map(Reply::Task)
        }
        R::PruneList(n, sid) => data(storage_ops::prune_dryrun(
            st,
            n,
            sid,
            o.get("prune-backups"),
            o.int("vmid").and_then(|v| u32::try_from(v).ok()),
            o.get("type"),
        )?),
        R::PruneDelete(n, sid) => storage_ops::prune(
            st,
            ctx,
            n,
            sid,
            o.get("prune-backups"),
            o.int("vmid").and_then(|v| u32::try_from(v).ok()),
            o.get("type"),
        )
        .map(Reply::Task),
        R::DownloadUrl(n, sid) => storage_ops::download_url(
            st,
            ctx,
            &storage_ops::DownloadUrl {
                node: n,
                storage: sid,
                content: o.get("content").unwrap_or_default(),
                url: o.get("url").unwrap_or_default(),
                filename: o.get("filename").unwrap_or_default(),
                checksum: o.get("checksum-algorithm").zip(o.get("checksum")),
            },
        )
        .map(Reply::Task),
        R::AplInfo(_) => data(storage_ops::aplinfo()),
        R::AplDownload(n) => storage_ops::apl_download(
            st,
            ctx,
            n,
            o.get("storage").unwrap_or_default(),
            o.get("template").unwrap_or_default(),
        )
        .map(Reply::Task),
        R::StorageDelete(sid) => {
            storage_ops::delete_storage(st, sid)?;
            Ok(Reply::Nothing)
        }
        R::AgentExec(n, _) => data(guest::exec(
            st,
            ctx,
            n,
            vmid,
            o.lists.get("command").map_or(&[][..], Vec::as_slice),
            o.get("input-data"),
        )?),
        R::AgentExecStatus(n, _) => data(guest::exec_status(
            st,
            ctx,
            n,
            vmid,
            o.int("pid").unwrap_or(-1),
        )?),
        R::AgentFileWrite(n, _) => {
            guest::file_write(
                st,
                ctx,
                n,
                vmid,
                o.get("file").unwrap_or_default(),
                o.get("content").unwrap_or_default(),
                o.get("encode") != Some("0"),
            )?;
            Ok(Reply::Nothing)
        }
        R::ConfigSet(n, k, _) => settings::config_set(st, ctx, n, *k, vmid, o)
            .map(|text| Reply::Printed(text, Vec::new())),
        R::Resize(n, k, _) => settings::resize(
            st,
            ctx,
            n,
            *k,
            vmid,
            o.get("disk").unwrap_or_default(),
            o.get("size").unwrap_or_default(),
        )
        .map(Reply::Task),
        R::Migrate(n, k, _) => migrate::migrate(
            st,
            ctx,
            &migrate::Migrate {
                node: n,
                kind: *k,
                vmid,
                target: o.get("target").unwrap_or_default(),
                online: o.flag("online"),
                with_local_disks: o.flag("with-local-disks"),
                restart: o.flag("restart"),
            },
        )
        .map(|s| Reply::TaskWarn(s.task, s.warnings)),
        R::AgentInterfaces(n, _) => data(observe::agent_interfaces(st, n, vmid, now)?),
        R::GuestRrd(n, k, _) => {
            let g = ops::load(st, n, *k, vmid)?;
            data(observe::guest_rrd(
                g,
                now,
                o.get("timeframe").unwrap_or("hour"),
            ))
        }
        R::NodeRrd(n) => {
            let node = st
                .node(n)
                .cloned()
                .ok_or_else(|| Failure::die("no such node"))?;
            data(observe::node_rrd(
                &node,
                now,
                o.get("timeframe").unwrap_or("hour"),
            ))
        }
        R::NodeNetwork(n) => data(crate::network::list(st, n)?),
        R::NetworkCreate(n) => crate::network::create(st, n, o).map(|()| Reply::Nothing),
        R::NetworkDelete(n, iface) => crate::network::delete(st, n, iface).map(|()| Reply::Nothing),
        R::NetworkRevert(n) => crate::network::revert(st, n).map(|()| Reply::Nothing),
        R::NetworkReload(n) => crate::network::reload(st, ctx, n).map(Reply::Task),
        R::FwRules(scope) => data(crate::firewall::list(st, scope)?),
        R::FwRuleCreate(scope) => crate::firewall::create(st, scope, o).map(|()| Reply::Nothing),
        R::FwRuleDelete(scope, pos) => {
            crate::firewall::delete(st, scope, pos).map(|()| Reply::Nothing)
        }
        R::FwOptions(n, k, _) => data(crate::firewall::options(st, n, *k, vmid)?),
        R::FwOptionsSet(n, k, _) => {
            crate::firewall::set_options(st, n, *k, vmid, o).map(|()| Reply::Nothing)
        }
        R::IpsetCreate(n, k, _) => {
            crate::firewall::ipset_create(st, n, *k, vmid, o).map(|()| Reply::Nothing)
        }
        R::IpsetList(n, k, _, name) => data(crate::firewall::ipset_list(st, n, *k, vmid, name)?),
        R::IpsetAdd(n, k, _, name) => {
            crate::firewall::ipset_add(st, n, *k, vmid, name, o).map(|()| Reply::Nothing)
        }
        R::IpsetRemove(n, k, _, name, cidr) => {
            crate::firewall::ipset_remove(st, n, *k, vmid, name, cidr).map(|()| Reply::Nothing)
        }
        R::ClusterTasks => data(observe::cluster_tasks(st)),
        R::HaStatus => data(observe::ha_status(st, ctx)),
        R::HaResourceCreate => crate::ha::add(st, ctx, o).map(|()| Reply::Nothing),
        R::HaResourceDelete(sid) => crate::ha::remove(st, sid, o).map(|()| Reply::Nothing),
        R::HaRules => data(crate::ha::rules(st, o)),
        R::BackupJobs => data(crate::backup_jobs::list(st, ctx)),
        R::BackupJobCreate => crate::backup_jobs::create(st, o).map(|()| Reply::Nothing),
        R::BackupJob(id) => data(crate::backup_jobs::read(st, id)?),
        R::BackupJobDelete(id) => crate::backup_jobs::delete(st, id).map(|()| Reply::Nothing),
        R::HaRuleCreate => crate::ha::create_rule(st, o).map(|()| Reply::Nothing),
        R::HaRuleDelete(id) => {
            crate::ha::delete_rule(st, id);
            Ok(Reply::Nothing)
        }
        R::CloudinitPending(n, _) => data(crate::cloudinit::pending(st, n, vmid)?),
        // Returns null: pvesh prints nothing for a `null` result.
        R::CloudinitRegenerate(n, _) => crate::cloudinit::regenerate(st, n, vmid)
            .map(|_| Reply::Printed(String::new(), Vec::new())),
        R::Template(n, _) => crate::cloudinit::template(st, ctx, n, vmid).map(Reply::Task),
        R::ContentDelete(n, sid, volume) => {
            storage_ops::free_on(st, ctx, n, volume, Some(sid)).map(Reply::Task)
        }
        // host observation and storage configuration
        R::NodeDisks(n) => data(hostinfo::disks(&node_of(st, n)?)),
        R::NodeSmart(n) => data(hostinfo::smart(
            &node_of(st, n)?,
            o.get("disk").unwrap_or_default(),
            o.flag("healthonly"),
        )?),
        R::NodeJournal(n) => data(hostinfo::journal(
            &node_of(st, n)?,
            now,
            o.int("since"),
            o.int("until"),
            o.int("lastentries")
                .and_then(|v| usize::try_from(v).ok())
                .filter(|v| *v > 0),
        )),
        R::NodeServices(n) => data(hostinfo::services(&node_of(st, n)?)),
        R::NodeService(n, svc) => data(hostinfo::service(&node_of(st, n)?, svc)?),
        R::AptUpdates(_) => data(hostinfo::updates()),
        R::StorageIndex => data(storage_cfg::index(st, o.get("type"))),
        R::StorageRead(sid) => data(storage_cfg::read(st, sid)?),
        R::StorageCreate => data(storage_cfg::create(st, o)?),
        R::StorageSet(sid) => data(storage_cfg::set(st, sid, o)?),
        R::AgentFileRead(n, _) => {
            let (v, warnings) = guest::file_read(
                st,
                ctx,
                n,
                vmid,
                &guest::FileRead {
                    file: o.get("file").unwrap_or_default(),
                    count: o.int("count").and_then(|c| u64::try_from(c).ok()),
                    offset: o
                        .int("offset")
                        .and_then(|c| u64::try_from(c).ok())
                        .unwrap_or(0),
                    decode: o.get("decode") != Some("0"),
                },
            )?;
            Ok(Reply::DataWarn(v, warnings))
        }
    }
}

/// The node a path names (its existence is checked before any route runs).
fn node_of(st: &State, n: &str) -> Result<crate::state::Node, Failure> {
    st.node(n)
        .cloned()
        .ok_or_else(|| Failure::die("no such node"))
}

/// A parameter exception raised by a handler (`raise_param_exc`), printed like a schema error.
fn param_exc(key: &str, msg: &str) -> Failure {
    Failure::die(format!(
        "400 Parameter verification failed.\n{key}: {msg}\n"
    ))
}

/// Print an API result (`PVE::CLIFormatter::print_api_result`, FORMATS §1.6). `json`: canonical
/// one line; `json-pretty`: JSON::PP pretty (3-space indent, `"k" : v`); other formats are not
/// simulated: strings print bare, everything else as canonical JSON.
pub fn render(v: &Value, format: &str) -> String {
    match format {
        "json" => format!("{}\n", api::canonical(v)),
        "json-pretty" => format!("{}\n", pretty(v, 0)),
        _ => match v {
            Value::String(s) => format!("{s}\n"),
            Value::Null => String::new(),
            other => format!("{}\n", api::canonical(other)),
        },
    }
}

fn pretty(v: &Value, depth: usize) -> String {
    let pad = "   ".repeat(depth + 1);
    let end = "   ".repeat(depth);
    match v {
        Value::Object(m) if !m.is_empty() => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{pad}{} : {}",
                        Value::String((*k).clone()),
                        pretty(&m[k.as_str()], depth + 1)
                    )
                })
                .collect();
            format!("{{\n{}\n{end}}}", items.join(",\n"))
        }
        Value::Array(a) if !a.is_empty() => {
            let items: Vec<String> = a
                .iter()
                .map(|x| format!("{pad}{}", pretty(x, depth + 1)))
                .collect();
            format!("[\n{}\n{end}]", items.join(",\n"))
        }
        other => api::canonical(other),
    }
}

/// How the local pvesh reports a proxied call that failed: `proxy_handler` runs the remote
/// pvesh through `run_command(…, errmsg => "proxy handler failed")`, which prints each remote
/// stderr line but the last on stderr and dies with `proxy handler failed: <last line>` (or
/// `proxy handler failed: exit code N` when the remote printed nothing on stderr); the remote's
/// stdout is dropped [SRC pve-manager 14a22df35955 `PVE/CLI/pvesh.pm` `proxy_handler`, pve-common
/// f665029eac78 `src/PVE/Cmd.pm` `run` (`$laststderr`)]. The exit code of that `die` is Perl's
/// `$!`-or-255 rule; 255 here [INFER, FORMATS §1.2].
fn proxied_error(remote: &Output) -> Output {
    let mut lines: Vec<&str> = remote.stderr.lines().collect();
    let last = lines.pop();
    let mut stderr: String = lines.iter().map(|l| format!("{l}\n")).collect();
    match last {
        Some(l) => stderr.push_str(&format!("proxy handler failed: {l}\n")),
        None => stderr.push_str(&format!(
            "proxy handler failed: exit code {}\n",
            remote.code
        )),
    }
    Output {
        stdout: String::new(),
        stderr,
        code: 255,
    }
}

fn task_output(t: &TaskRun, format: &str, proxied: bool) -> Output {
    let log: String = t.log.iter().map(|l| format!("{l}\n")).collect();
    let upid = Value::String(t.upid.clone());
    let stdout = if proxied && !log.is_empty() {
        // The remote `pvesh --noproxy … --output-format json` printed its log and `"UPID…"`;
        // `proxy_handler` collects stdout line by line *without* the newlines (`outfunc => sub
        // { $res .= shift }`, and `run_command` strips them), cannot decode that as JSON and
        // returns the raw text, which prints as one JSON string [SRC pvesh.pm, Cmd.pm].
        let raw: String = t
            .log
            .iter()
            .map(String::as_str)
            .chain(std::iter::once(api::canonical(&upid).as_str()))
            .collect();
        render(&Value::String(raw), format)
    } else {
        format!("{log}{}", render(&upid, format))
    };
    let stderr = t
        .error
        .as_ref()
        .map(|e| format!("{e}\n"))
        .unwrap_or_default();
    Output {
        stdout,
        stderr,
        code: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    fn call(st: &mut State, line: &str) -> Output {
        let argv: Vec<String> = line.split(' ').map(String::from).collect();
        run(st, &Ctx::new(NOW), &argv)
    }

    #[test]
    fn unknown_path_and_param_errors() {
        let mut st = initial(NOW);
        let o = call(&mut st, "get /nodes/pve1/sdn/vnets --output-format json");
        assert_eq!(
            (o.stderr.as_str(), o.code),
            ("No 'get' handler defined for '/nodes/pve1/sdn/vnets'\n", 1)
        );
        let o = call(
            &mut st,
            "create /nodes/pve1/lxc/200/status/suspend --output-format json",
        );
        assert_eq!(o.code, 1);
        let o = call(
            &mut st,
            "get /cluster/resources --type vms --output-format json",
        );
        assert_eq!(o.code, 255);
        assert!(o.stderr.starts_with("400 Parameter verification failed.\ntype: value 'vms' does not have a value in the enumeration 'vm, storage, node, sdn'\n"));
        let o = call(
            &mut st,
            "get /nodes/pve1/qemu/99/status/current --output-format json",
        );
        assert!(
            o.stderr
                .contains("vmid: value must have a minimum value of 100")
        );
        let o = call(
            &mut st,
            "create /nodes/pve1/qemu/100/snapshot --output-format json",
        );
        assert!(
            o.stderr
                .contains("snapname: property is missing and it is not optional")
        );
        let o = call(&mut st, "get /nodes/pve9/qemu --output-format json");
        assert!(o.stderr.starts_with("hostname lookup 'pve9' failed"));
    }

    #[test]
    fn task_endpoint_prints_upid_last_and_exits_zero_on_task_error() {
        let mut st = initial(NOW);
        let o = call(
            &mut st,
            "create /nodes/pve1/qemu/100/status/start --output-format json",
        );
        assert_eq!(o.code, 0);
        assert_eq!(o.stderr, "VM 100 already running\n");
        let last = o.stdout.lines().last().unwrap();
        let upid: String = serde_json::from_str(last).unwrap();
        assert!(upid.starts_with("UPID:pve1:") && upid.ends_with(":qmstart:100:root@pam:"));
        let o = call(
            &mut st,
            &format!("get /nodes/pve1/tasks/{upid}/status --output-format json"),
        );
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(v["exitstatus"], "VM 100 already running");
        assert_eq!(v["status"], "stopped");
        let o = call(
            &mut st,
            &format!("get /nodes/pve1/tasks/{upid}/log --output-format json"),
        );
        assert_eq!(
            o.stdout,
            "[{\"n\":1,\"t\":\"TASK ERROR: VM 100 already running\"}]\n"
        );
        // pre-fork: no UPID
        let o = call(
            &mut st,
            "create /nodes/pve1/qemu/102/status/shutdown --timeout 60 --output-format json",
        );
        assert_eq!(
            (o.stdout.as_str(), o.stderr.as_str(), o.code),
            ("", "VM 102 not running\n", 255)
        );
    }

    #[test]
    fn proxied_calls() {
        let mut st = initial(NOW);
        // Reads on another node just work.
        let o = call(
            &mut st,
            "get /nodes/pve2/qemu/101/status/current --output-format json",
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        // Wrong node: the config is looked up on the path's node.
        let o = call(
            &mut st,
            "get /nodes/pve2/qemu/100/config --output-format json",
        );
        // The remote's last stderr line becomes the proxy error (pvesh.pm, Cmd.pm).
        assert_eq!(
            o.stderr,
            "proxy handler failed: Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist\n"
        );
        assert_eq!((o.code, o.stdout.as_str()), (255, ""));
        // Earlier remote lines pass through; a 400 error keeps its lines but the last.
        let o = call(
            &mut st,
            "create /nodes/pve2/qemu/101/snapshot --snapname current --output-format json",
        );
        assert_eq!(
            o.stderr,
            "proxy handler failed: unable to use snapshot name 'current' (reserved name)\n"
        );
        let o = call(
            &mut st,
            "create /nodes/pve1/qemu/100/snapshot --snapname a1 --output-format json",
        );
        assert!(o.stdout.lines().count() > 1);
        // A task with log lines on another node comes back as one JSON string.
        let o = call(
            &mut st,
            "create /nodes/pve2/qemu/101/snapshot --snapname a1 --output-format json",
        );
        assert_eq!(o.stdout.lines().count(), 1);
        let raw: String = serde_json::from_str(o.stdout.trim_end()).unwrap();
        // The remote's lines run together: `run_command` hands them over without newlines.
        assert!(!raw.contains('\n'), "{raw}");
        assert!(
            raw.starts_with("freeze guest filesystemsnapshotting 'drive-scsi0'"),
            "{raw}"
        );
        assert!(raw.contains("thaw guest filesystem\"UPID:pve2:"), "{raw}");
        assert!(raw.ends_with(":qmsnapshot:101:root@pam:\""), "{raw}");
        // Without log lines the remote output decodes, and the UPID prints normally.
        let o = call(
            &mut st,
            "create /nodes/pve2/qemu/101/status/stop --output-format json",
        );
        let upid: String = serde_json::from_str(o.stdout.trim_end()).unwrap();
        assert!(upid.starts_with("UPID:pve2:"));
    }
}
