//! Node reads: the cluster's nodes, one node's status, its Proxmox version, its metrics
//! history and its network interfaces; and the host observations: disks and their SMART
//! health, the system journal, the Proxmox services' states and the pending package updates.
//! All are `pvesh get`: nothing here changes a host.

use super::*;

/// `pxagent node list`
pub static NODE_LIST: Op = Op {
    id: "node.list",
    cli: &["node", "list"],
    about: "List the cluster's nodes with CPU, memory and uptime",
    risk: Risk::Read,
    area: Area::Node,
    params: &[],
    args: pvesh!("get", "/nodes"),
    view: View::Nodes,
    ..ROW
};

/// `pxagent node status NODE`
pub static NODE_STATUS: Op = Op {
    id: "node.status",
    cli: &["node", "status"],
    about: "Show one node's status (CPU, memory, load, kernel, version)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/status"),
    view: View::NodeStatus,
    ..ROW
};

/// `pxagent node version NODE`
pub static NODE_VERSION: Op = Op {
    id: "node.version",
    cli: &["node", "version"],
    about: "Show one node's Proxmox VE version (nodes differ while a cluster is upgraded)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/version"),
    view: View::Object,
    ..ROW
};

/// `pxagent node rrd NODE`
pub static NODE_RRD: Op = Op {
    id: "node.rrd",
    cli: &["node", "rrd"],
    about: "Show one node's metrics history (CPU, load, memory, network, I/O wait)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS, TIMEFRAME, RRD_CF],
    args: pvesh!(
        "get",
        "/nodes/{node}/rrddata",
        Arg::Word("--timeframe"),
        Arg::Word("{timeframe}"),
        Arg::Opt("cf", &["--cf", "{cf}"])
    ),
    view: View::Rrd,
    ..ROW
};

/// `pxagent node network NODE`
pub static NODE_NETWORK: Op = Op {
    id: "node.network",
    cli: &["node", "network"],
    about: "List one node's network interfaces and bridges",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/network"),
    view: View::Table(&[
        ("iface", "IFACE"),
        ("type", "TYPE"),
        ("active", "ACTIVE"),
        ("method", "METHOD"),
        ("cidr", "ADDRESS"),
        ("gateway", "GATEWAY"),
        ("bridge_ports", "PORTS"),
    ]),
    ..ROW
};

// --- host observation: disks, journal, services, updates -----------------------

/// `pxagent node disks NODE`: `GET /nodes/{node}/disks/list` (pve-manager
/// `PVE/API2/Disks.pm` `list`, from `PVE::Diskmanage::get_disks`). Drives are shown by serial
/// first; their device path is shown too, for `node smart`.
pub static NODE_DISKS: Op = Op {
    id: "node.disks",
    cli: &["node", "disks"],
    about: "List one node's disks: serial, model, WWN, size, use and SMART health",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/disks/list"),
    view: View::Table(&[
        ("serial", "SERIAL"),
        ("model", "MODEL"),
        ("wwn", "WWN"),
        ("size", "SIZE"),
        ("used", "USED"),
        ("health", "HEALTH"),
        ("devpath", "DEVICE"),
    ]),
    ..ROW
};

/// `pxagent node smart NODE DISK`: `GET /nodes/{node}/disks/smart --disk DISK` (pve-manager
/// `PVE/API2/Disks.pm` `smart`: `smartctl` on the disk, read only). The disk is a whole-disk
/// device path ([`Kind::BlockDevice`]), a strict subset of PVE's `^/dev/[a-zA-Z0-9\/]+$`.
pub static NODE_SMART: Op = Op {
    id: "node.smart",
    cli: &["node", "smart"],
    about: "Show one disk's SMART health and attributes (see `node disks` for device paths)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS, DISK],
    args: pvesh!(
        "get",
        "/nodes/{node}/disks/smart",
        Arg::Word("--disk"),
        Arg::Word("{disk}")
    ),
    view: View::Object,
    ..ROW
};

/// `pxagent node journal NODE`: `GET /nodes/{node}/journal` (pve-manager
/// `PVE/API2/Nodes.pm` `journal`: `journalctl` output, one string per entry). PVE takes either a
/// time range (`since`, `until`) or `lastentries`; the cursors are not offered.
pub static NODE_JOURNAL: Op = Op {
    id: "node.journal",
    cli: &["node", "journal"],
    about: "Show one node's system journal (the last lines, or a time range)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS, SINCE, UNTIL, LINES],
    args: pvesh!(
        "get",
        "/nodes/{node}/journal",
        Arg::Opt("since", &["--since", "{since}"]),
        Arg::Opt("until", &["--until", "{until}"]),
        Arg::Opt("lines", &["--lastentries", "{lines}"])
    ),
    view: View::Lines,
    ..ROW
};

/// `pxagent node services NODE`: `GET /nodes/{node}/services` (pve-manager
/// `PVE/API2/Services.pm` `index`: the Proxmox services' systemd states).
pub static NODE_SERVICES: Op = Op {
    id: "node.services",
    cli: &["node", "services"],
    about: "List one node's Proxmox services and their systemd states",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/services"),
    view: View::Table(&[
        ("name", "SERVICE"),
        ("active_state", "ACTIVE"),
        ("state", "STATE"),
        ("unit_state", "ENABLED"),
        ("desc", "DESCRIPTION"),
    ]),
    ..ROW
};

/// `pxagent node service NODE SERVICE`: `GET /nodes/{node}/services/{service}/state`
/// (pve-manager `PVE/API2/Services.pm` `service_state`). Only reading: starting, stopping and
/// restarting services are not in the catalog.
pub static NODE_SERVICE: Op = Op {
    id: "node.service",
    cli: &["node", "service"],
    about: "Show one Proxmox service's systemd state on a node",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS, SERVICE],
    args: pvesh!("get", "/nodes/{node}/services/{service}/state"),
    view: View::Object,
    ..ROW
};

/// `pxagent node updates NODE`: `GET /nodes/{node}/apt/update` (pve-manager
/// `PVE/API2/APT.pm` `list_updates`: the package index's pending updates, as the last
/// `apt update` left it). Read only: the `POST` that refreshes the index is not in the catalog.
pub static NODE_UPDATES: Op = Op {
    id: "node.updates",
    cli: &["node", "updates"],
    about: "List the package updates pending on one node (read only; nothing is installed)",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/apt/update"),
    view: View::Table(&[
        ("package", "PACKAGE"),
        ("old_version", "INSTALLED"),
        ("version", "NEW"),
        ("origin", "ORIGIN"),
        ("priority", "PRIORITY"),
    ]),
    ..ROW
};

const DISK: Param = Param {
    name: "disk",
    kind: Kind::BlockDevice,
    how: How::Positional,
    help: "the disk's device path, e.g. /dev/sda or /dev/nvme0n1 (see `pxagent node disks`)",
};
const SINCE: Param = Param {
    name: "since",
    kind: Kind::Epoch,
    how: How::Option,
    help: "only entries from then on: Unix seconds, an RFC 3339 time or a date",
};
const UNTIL: Param = Param {
    name: "until",
    kind: Kind::Epoch,
    how: How::Option,
    help: "only entries until then: Unix seconds, an RFC 3339 time or a date",
};
const LINES: Param = Param {
    name: "lines",
    kind: Kind::Count,
    how: How::Option,
    help: "only the last N entries (Proxmox refuses it together with --since or --until)",
};
/// The services of `GET /nodes/{node}/services/{service}/state`, exactly its `enum` in PVE
/// 9.1.11 and 9.2 (tests/pve_schema checks every one).
const SERVICE: Param = Param {
    name: "service",
    kind: Kind::Choice(&[
        same("pveproxy"),
        same("chrony"),
        same("corosync"),
        same("cron"),
        same("ksmtuned"),
        same("lxcfs"),
        same("postfix"),
        same("proxmox-firewall"),
        same("pve-cluster"),
        same("pve-firewall"),
        same("pve-ha-crm"),
        same("pve-ha-lrm"),
        same("pve-lxc-syscalld"),
        same("pvedaemon"),
        same("pvefw-logger"),
        same("pvescheduler"),
        same("pvestatd"),
        same("qmeventd"),
        same("spiceproxy"),
        same("sshd"),
        same("syslog"),
        same("systemd-journald"),
        same("systemd-timesyncd"),
    ]),
    how: How::Positional,
    help: "the service",
};

/// The line number `audit verify --host` asks the host chain's hash of (the head it kept).
const CHAIN_LINE: Param = Param {
    name: "at",
    kind: Kind::ByteSize,
    how: How::Option,
    help: "a line of the host audit chain whose hash to give (the head kept last time)",
};

/// `pxagent audit verify --host`: the host audit chain checked end to end by the root-side
/// helper, which alone reads the chain's MAC key (`helper/src/chain.rs`). A step: the CLI
/// reaches it through `audit verify --host`, the MCP server not at all.
pub static AUDIT_HOST_VERIFY: Op = Op {
    id: "audit.host-verify",
    cli: &["audit", "host-verify"],
    about: "Check the host's audit chain of the gate's records end to end",
    risk: Risk::Read,
    area: Area::Node,
    tool: Tool::Helper,
    params: &[CHAIN_LINE],
    args: &[Arg::Word("audit-verify"), Arg::Opt("at", &["--at", "{at}"])],
    view: View::Object,
    step: true,
    ..ROW
};
