//! A node's network: bridges added to or removed from its pending configuration, the pending
//! change shown or dropped, and applied with a revert the host makes by itself (pxagent's
//! root-side helper, [`Tool::Helper`]): `network apply` arms the revert, applies, and the
//! client confirms over a new SSH connection that it can still reach the host; with no
//! confirm in the window the host puts the old configuration back.
//!
//! Never offered: changing an existing interface (a NIC, `vmbr0`'s address, its gateway),
//! bonds, VLAN devices, OVS, a gateway on a new bridge, or an apply without the revert.

use super::*;

/// `pxagent bridge create NODE vmbrN`: `POST /nodes/{node}/network` with `type=bridge`,
/// written to the node's `interfaces.new`; nothing changes until `network apply`.
pub static BRIDGE_CREATE: Op = Op {
    id: "bridge.create",
    cli: &["bridge", "create"],
    about: "Add a bridge to a node's pending network change",
    risk: Risk::Change,
    area: Area::Node,
    params: &[NODE_POS, NEW_BRIDGE, PORTS, VLAN_AWARE, CIDR, COMMENT],
    args: pvesh!(
        "create",
        "/nodes/{node}/network",
        Arg::Word("--iface"),
        Arg::Word("{bridge}"),
        Arg::Word("--type"),
        Arg::Word("bridge"),
        Arg::Word("--autostart"),
        Arg::Word("1"),
        Arg::Opt("ports", &["--bridge_ports", "{ports}"]),
        Arg::Opt("vlan_aware", &["--bridge_vlan_aware", "1"]),
        Arg::Opt("cidr", &["--cidr", "{cidr}"]),
        Arg::Opt("comment", &["--comments", "{comment}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent bridge remove NODE vmbrN`: `DELETE /nodes/{node}/network/{iface}`, pending until
/// `network apply`.
pub static BRIDGE_REMOVE: Op = Op {
    id: "bridge.remove",
    cli: &["bridge", "remove"],
    about: "Remove a bridge (pending until network apply)",
    risk: Risk::Confirm,
    area: Area::Node,
    params: &[NODE_POS, NEW_BRIDGE],
    args: pvesh!("delete", "/nodes/{node}/network/{bridge}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove {bridge} on {node}",
        consequence: "once applied, guests whose network devices use {bridge} on {node} lose their network",
        hint: None,
    }),
    ..ROW
};

/// `pxagent network pending NODE`: the diff PVE would apply (`interfaces` against
/// `interfaces.new`) and an armed change, from the helper on the node pxagent is connected to.
pub static NETWORK_PENDING: Op = Op {
    id: "network.pending",
    cli: &["network", "pending"],
    about: "Show a node's pending network change",
    risk: Risk::Read,
    area: Area::Node,
    tool: Tool::Helper,
    params: &[NODE_POS],
    args: &[Arg::Word("net-pending")],
    view: View::Pending,
    prechecks: &[Precheck::Connected("node")],
    local: &["node"],
    ..ROW
};

/// `pxagent network revert NODE`: `DELETE /nodes/{node}/network` drops the pending change.
pub static NETWORK_REVERT: Op = Op {
    id: "network.revert",
    cli: &["network", "revert"],
    about: "Drop a node's pending network change",
    risk: Risk::Change,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("delete", "/nodes/{node}/network"),
    view: View::Done,
    ..ROW
};

/// `pxagent network apply NODE`: the helper's `net-arm WINDOW` keeps a copy of the running
/// configuration, schedules its return, applies and prints a token; pxagent then sends the
/// token back over a new SSH connection ([`NETWORK_CONFIRM`]). No confirm within the window
/// (the change cut the host off, or pxagent died) and the host reverts by itself.
pub static NETWORK_APPLY: Op = Op {
    id: "network.apply",
    cli: &["network", "apply"],
    about: "Apply a node's pending network change; the host reverts it unless reached again",
    risk: Risk::Confirm,
    area: Area::Node,
    tool: Tool::Helper,
    params: &[NODE_POS, WINDOW],
    args: &[Arg::Word("net-arm"), Arg::Word("{window}")],
    view: View::Applied,
    confirm: Some(Confirm {
        phrase: "yes apply network on {node}",
        consequence: "this reloads the network of {node}; if pxagent cannot reach the host again within the window, the host restores the old configuration",
        hint: None,
    }),
    prechecks: &[Precheck::Connected("node")],
    interrupts: true,
    confirms_with: Some(&NETWORK_CONFIRM),
    local: &["node"],
    ..ROW
};

/// The second half of `network apply`, over a new SSH connection: `net-confirm TOKEN` calls
/// the host's revert off. A step, not a command of its own.
pub static NETWORK_CONFIRM: Op = Op {
    id: "network.confirm",
    cli: &["network", "confirm"],
    about: "Keep an applied network change (pxagent reached the host again)",
    risk: Risk::Change,
    area: Area::Node,
    tool: Tool::Helper,
    params: &[TOKEN],
    args: &[Arg::Word("net-confirm"), Arg::Word("{token}")],
    view: View::Done,
    step: true,
    ..ROW
};

const NEW_BRIDGE: Param = Param {
    name: "bridge",
    kind: Kind::NewBridge,
    how: How::Positional,
    help: "the bridge",
};
const PORTS: Param = Param {
    name: "ports",
    kind: Kind::BridgePorts,
    how: How::Option,
    help: "its ports",
};
const VLAN_AWARE: Param = Param {
    name: "vlan_aware",
    kind: Kind::Flag,
    how: How::Flag,
    help: "VLAN aware",
};
const CIDR: Param = Param {
    name: "cidr",
    kind: Kind::Cidr4,
    how: How::Option,
    help: "IPv4 address/prefix",
};
const WINDOW: Param = Param {
    name: "window",
    kind: Kind::RevertWindow,
    how: How::Defaulted("60"),
    help: "seconds until the host reverts",
};
const TOKEN: Param = Param {
    name: "token",
    kind: Kind::NetToken,
    how: How::Positional,
    help: "the helper's token",
};
