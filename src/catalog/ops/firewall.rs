//! Firewalls: a guest's own rules, its firewall switch and its IP sets (VMs and containers),
//! and the rules of a node and of the whole cluster.
//!
//! A guest's rules act on that guest's traffic only. A node's or the cluster's rules act on
//! the hosts themselves, so adding or removing one needs its phrase, and an inbound rule that
//! would drop the SSH connection pxagent uses is refused unless a policy allows it
//! ([`Precheck::KeepsSsh`], [`crate::catalog::firewall`]).
//!
//! Never offered: security groups, macros, interface or log options, aliases, a rule's edit in
//! place, a node's or the cluster's firewall switch and default policies, IP sets of the cluster.

use super::*;

/// `pxagent vm firewall rules ID`: the guest's own rules, in the order they apply.
pub static VM_FIREWALL_RULES: Op = Op {
    id: "vm.firewall.rules",
    cli: &["vm", "firewall", "rules"],
    about: "List a VM's firewall rules",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/qemu/{vmid}/firewall/rules"),
    view: View::Table(RULE_COLUMNS),
    ..ROW
};

/// `pxagent vm firewall add ID --direction in|out --action ACCEPT|DROP|REJECT …`: a rule at
/// the top of the guest's list, enabled.
pub static VM_FIREWALL_ADD: Op = Op {
    id: "vm.firewall.add",
    cli: &["vm", "firewall", "add"],
    about: "Add a rule to a VM's firewall",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[
        VMID, DIRECTION, ACTION, PROTO, DPORT, SPORT, SOURCE, DEST, COMMENT, GUEST_NODE,
    ],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/firewall/rules",
        RULE_ARGS[0],
        RULE_ARGS[1],
        RULE_ARGS[2],
        RULE_ARGS[3],
        RULE_ARGS[4],
        RULE_ARGS[5],
        RULE_ARGS[6],
        RULE_ARGS[7],
        RULE_ARGS[8],
        RULE_ARGS[9],
        RULE_ARGS[10],
        RULE_ARGS[11]
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent vm firewall remove ID POS`: the rule at that position.
pub static VM_FIREWALL_REMOVE: Op = Op {
    id: "vm.firewall.remove",
    cli: &["vm", "firewall", "remove"],
    about: "Remove a rule from a VM's firewall",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, POS, GUEST_NODE],
    args: pvesh!("delete", "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}"),
    view: View::Done,
    ..ROW
};

/// `pxagent vm firewall enable ID`: the guest's firewall applies its rules (where its
/// network devices have `firewall=1`).
pub static VM_FIREWALL_ENABLE: Op = Op {
    id: "vm.firewall.enable",
    cli: &["vm", "firewall", "enable"],
    about: "Turn on a VM's firewall",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/qemu/{vmid}/firewall/options",
        Arg::Word("--enable"),
        Arg::Word("1")
    ),
    view: View::Done,
    undo: Undo::Op(&VM_FIREWALL_DISABLE),
    ..ROW
};

/// `pxagent vm firewall disable ID`: the guest's rules stop applying.
pub static VM_FIREWALL_DISABLE: Op = Op {
    id: "vm.firewall.disable",
    cli: &["vm", "firewall", "disable"],
    about: "Turn off a VM's firewall",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/qemu/{vmid}/firewall/options",
        Arg::Word("--enable"),
        Arg::Word("0")
    ),
    view: View::Done,
    undo: Undo::Op(&VM_FIREWALL_ENABLE),
    ..ROW
};

/// `pxagent vm firewall ipset list ID NAME`: the addresses in one of the guest's IP sets.
pub static VM_FIREWALL_IPSET_LIST: Op = Op {
    id: "vm.firewall.ipset.list",
    cli: &["vm", "firewall", "ipset", "list"],
    about: "List the addresses in a VM's IP set",
    risk: Risk::Read,
    area: Area::Vm,
    params: &[VMID, IPSET, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/qemu/{vmid}/firewall/ipset/{ipset}"),
    view: View::Table(IPSET_COLUMNS),
    ..ROW
};

/// `pxagent vm firewall ipset create ID NAME`: an empty IP set of the guest's, for rules to
/// name as `+NAME`.
pub static VM_FIREWALL_IPSET_CREATE: Op = Op {
    id: "vm.firewall.ipset.create",
    cli: &["vm", "firewall", "ipset", "create"],
    about: "Create an IP set for a VM's rules",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, IPSET, COMMENT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/firewall/ipset",
        Arg::Word("--name"),
        Arg::Word("{ipset}"),
        Arg::Opt("comment", &["--comment", "{comment}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent vm firewall ipset add ID NAME ADDRESS`: one address into the guest's IP set.
pub static VM_FIREWALL_IPSET_ADD: Op = Op {
    id: "vm.firewall.ipset.add",
    cli: &["vm", "firewall", "ipset", "add"],
    about: "Add an address to a VM's IP set",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, IPSET, ADDRESS, COMMENT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/qemu/{vmid}/firewall/ipset/{ipset}",
        Arg::Word("--cidr"),
        Arg::Word("{address}"),
        Arg::Opt("comment", &["--comment", "{comment}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent vm firewall ipset remove ID NAME ADDRESS`: one address out of the guest's IP set.
pub static VM_FIREWALL_IPSET_REMOVE: Op = Op {
    id: "vm.firewall.ipset.remove",
    cli: &["vm", "firewall", "ipset", "remove"],
    about: "Remove an address from a VM's IP set",
    risk: Risk::Change,
    area: Area::Vm,
    params: &[VMID, IPSET, ADDRESS, GUEST_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/qemu/{vmid}/firewall/ipset/{ipset}/{address}"
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent ct firewall rules ID`: the guest's own rules, in the order they apply.
pub static CT_FIREWALL_RULES: Op = Op {
    id: "ct.firewall.rules",
    cli: &["ct", "firewall", "rules"],
    about: "List a container's firewall rules",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/lxc/{vmid}/firewall/rules"),
    view: View::Table(RULE_COLUMNS),
    ..ROW
};

/// `pxagent ct firewall add ID --direction in|out --action ACCEPT|DROP|REJECT …`: a rule at
/// the top of the guest's list, enabled.
pub static CT_FIREWALL_ADD: Op = Op {
    id: "ct.firewall.add",
    cli: &["ct", "firewall", "add"],
    about: "Add a rule to a container's firewall",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[
        CTID, DIRECTION, ACTION, PROTO, DPORT, SPORT, SOURCE, DEST, COMMENT, GUEST_NODE,
    ],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/firewall/rules",
        RULE_ARGS[0],
        RULE_ARGS[1],
        RULE_ARGS[2],
        RULE_ARGS[3],
        RULE_ARGS[4],
        RULE_ARGS[5],
        RULE_ARGS[6],
        RULE_ARGS[7],
        RULE_ARGS[8],
        RULE_ARGS[9],
        RULE_ARGS[10],
        RULE_ARGS[11]
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent ct firewall remove ID POS`: the rule at that position.
pub static CT_FIREWALL_REMOVE: Op = Op {
    id: "ct.firewall.remove",
    cli: &["ct", "firewall", "remove"],
    about: "Remove a rule from a container's firewall",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, POS, GUEST_NODE],
    args: pvesh!("delete", "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}"),
    view: View::Done,
    ..ROW
};

/// `pxagent ct firewall enable ID`: the guest's firewall applies its rules (where its
/// network devices have `firewall=1`).
pub static CT_FIREWALL_ENABLE: Op = Op {
    id: "ct.firewall.enable",
    cli: &["ct", "firewall", "enable"],
    about: "Turn on a container's firewall",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/lxc/{vmid}/firewall/options",
        Arg::Word("--enable"),
        Arg::Word("1")
    ),
    view: View::Done,
    undo: Undo::Op(&CT_FIREWALL_DISABLE),
    ..ROW
};

/// `pxagent ct firewall disable ID`: the guest's rules stop applying.
pub static CT_FIREWALL_DISABLE: Op = Op {
    id: "ct.firewall.disable",
    cli: &["ct", "firewall", "disable"],
    about: "Turn off a container's firewall",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, GUEST_NODE],
    args: pvesh!(
        "set",
        "/nodes/{node}/lxc/{vmid}/firewall/options",
        Arg::Word("--enable"),
        Arg::Word("0")
    ),
    view: View::Done,
    undo: Undo::Op(&CT_FIREWALL_ENABLE),
    ..ROW
};

/// `pxagent ct firewall ipset list ID NAME`: the addresses in one of the guest's IP sets.
pub static CT_FIREWALL_IPSET_LIST: Op = Op {
    id: "ct.firewall.ipset.list",
    cli: &["ct", "firewall", "ipset", "list"],
    about: "List the addresses in a container's IP set",
    risk: Risk::Read,
    area: Area::Ct,
    params: &[CTID, IPSET, GUEST_NODE],
    args: pvesh!("get", "/nodes/{node}/lxc/{vmid}/firewall/ipset/{ipset}"),
    view: View::Table(IPSET_COLUMNS),
    ..ROW
};

/// `pxagent ct firewall ipset create ID NAME`: an empty IP set of the guest's, for rules to
/// name as `+NAME`.
pub static CT_FIREWALL_IPSET_CREATE: Op = Op {
    id: "ct.firewall.ipset.create",
    cli: &["ct", "firewall", "ipset", "create"],
    about: "Create an IP set for a container's rules",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, IPSET, COMMENT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/firewall/ipset",
        Arg::Word("--name"),
        Arg::Word("{ipset}"),
        Arg::Opt("comment", &["--comment", "{comment}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent ct firewall ipset add ID NAME ADDRESS`: one address into the guest's IP set.
pub static CT_FIREWALL_IPSET_ADD: Op = Op {
    id: "ct.firewall.ipset.add",
    cli: &["ct", "firewall", "ipset", "add"],
    about: "Add an address to a container's IP set",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, IPSET, ADDRESS, COMMENT, GUEST_NODE],
    args: pvesh!(
        "create",
        "/nodes/{node}/lxc/{vmid}/firewall/ipset/{ipset}",
        Arg::Word("--cidr"),
        Arg::Word("{address}"),
        Arg::Opt("comment", &["--comment", "{comment}"])
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent ct firewall ipset remove ID NAME ADDRESS`: one address out of the guest's IP set.
pub static CT_FIREWALL_IPSET_REMOVE: Op = Op {
    id: "ct.firewall.ipset.remove",
    cli: &["ct", "firewall", "ipset", "remove"],
    about: "Remove an address from a container's IP set",
    risk: Risk::Change,
    area: Area::Ct,
    params: &[CTID, IPSET, ADDRESS, GUEST_NODE],
    args: pvesh!(
        "delete",
        "/nodes/{node}/lxc/{vmid}/firewall/ipset/{ipset}/{address}"
    ),
    view: View::Done,
    ..ROW
};

/// `pxagent node firewall rules NODE`: a node's own rules, in the order they apply.
pub static NODE_FIREWALL_RULES: Op = Op {
    id: "node.firewall.rules",
    cli: &["node", "firewall", "rules"],
    about: "List a node's firewall rules",
    risk: Risk::Read,
    area: Area::Node,
    params: &[NODE_POS],
    args: pvesh!("get", "/nodes/{node}/firewall/rules"),
    view: View::Table(RULE_COLUMNS),
    ..ROW
};

/// `pxagent node firewall add NODE --direction … --action …` (phrase): a rule for
/// node {node}, refused when it would drop the SSH connection pxagent uses.
pub static NODE_FIREWALL_ADD: Op = Op {
    id: "node.firewall.add",
    cli: &["node", "firewall", "add"],
    about: "Add a rule to a node's firewall",
    risk: Risk::Confirm,
    area: Area::Node,
    params: &[
        NODE_POS, DIRECTION, ACTION, PROTO, DPORT, SPORT, SOURCE, DEST, COMMENT,
    ],
    args: pvesh!(
        "create",
        "/nodes/{node}/firewall/rules",
        RULE_ARGS[0],
        RULE_ARGS[1],
        RULE_ARGS[2],
        RULE_ARGS[3],
        RULE_ARGS[4],
        RULE_ARGS[5],
        RULE_ARGS[6],
        RULE_ARGS[7],
        RULE_ARGS[8],
        RULE_ARGS[9],
        RULE_ARGS[10],
        RULE_ARGS[11]
    ),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes firewall on {node}",
        consequence: "this rule filters the traffic of node {node} itself, SSH and the web interface included, once its firewall is on",
        hint: None,
    }),
    prechecks: &[Precheck::KeepsSsh],
    ..ROW
};

/// `pxagent node firewall remove NODE POS` (phrase).
pub static NODE_FIREWALL_REMOVE: Op = Op {
    id: "node.firewall.remove",
    cli: &["node", "firewall", "remove"],
    about: "Remove a rule from a node's firewall",
    risk: Risk::Confirm,
    area: Area::Node,
    params: &[NODE_POS, POS],
    args: pvesh!("delete", "/nodes/{node}/firewall/rules/{pos}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove rule {pos} on {node}",
        consequence: "the traffic rule {pos} filtered on node {node} passes or stops as the next rules say",
        hint: Some("see the rule first: `pxagent node firewall rules {node}`"),
    }),
    ..ROW
};

/// `pxagent cluster firewall rules`: the cluster's own rules, in the order they apply.
pub static CLUSTER_FIREWALL_RULES: Op = Op {
    id: "cluster.firewall.rules",
    cli: &["cluster", "firewall", "rules"],
    about: "List the cluster's firewall rules",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    args: pvesh!("get", "/cluster/firewall/rules"),
    view: View::Table(RULE_COLUMNS),
    ..ROW
};

/// `pxagent cluster firewall add --direction … --action …` (phrase): a rule for
/// every node of the cluster, refused when it would drop the SSH connection pxagent uses.
pub static CLUSTER_FIREWALL_ADD: Op = Op {
    id: "cluster.firewall.add",
    cli: &["cluster", "firewall", "add"],
    about: "Add a rule to the cluster's firewall",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[
        DIRECTION, ACTION, PROTO, DPORT, SPORT, SOURCE, DEST, COMMENT,
    ],
    args: pvesh!(
        "create",
        "/cluster/firewall/rules",
        RULE_ARGS[0],
        RULE_ARGS[1],
        RULE_ARGS[2],
        RULE_ARGS[3],
        RULE_ARGS[4],
        RULE_ARGS[5],
        RULE_ARGS[6],
        RULE_ARGS[7],
        RULE_ARGS[8],
        RULE_ARGS[9],
        RULE_ARGS[10],
        RULE_ARGS[11]
    ),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes firewall on the cluster",
        consequence: "this rule filters the traffic of every node of the cluster itself, SSH and the web interface included, once its firewall is on",
        hint: None,
    }),
    prechecks: &[Precheck::KeepsSsh],
    ..ROW
};

/// `pxagent cluster firewall remove POS` (phrase).
pub static CLUSTER_FIREWALL_REMOVE: Op = Op {
    id: "cluster.firewall.remove",
    cli: &["cluster", "firewall", "remove"],
    about: "Remove a rule from the cluster's firewall",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[POS],
    args: pvesh!("delete", "/cluster/firewall/rules/{pos}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove rule {pos} on the cluster",
        consequence: "the traffic rule {pos} filtered on every node of the cluster passes or stops as the next rules say",
        hint: Some("see the rule first: `pxagent cluster firewall rules`"),
    }),
    ..ROW
};

/// The columns of a rules list.
const RULE_COLUMNS: &[(&str, &str)] = &[
    ("pos", "POS"),
    ("type", "DIR"),
    ("action", "ACTION"),
    ("proto", "PROTO"),
    ("dport", "DPORT"),
    ("source", "SOURCE"),
    ("dest", "DEST"),
    ("enable", "ON"),
    ("comment", "COMMENT"),
];
/// The columns of an IP set's list.
const IPSET_COLUMNS: &[(&str, &str)] = &[
    ("cidr", "ADDRESS"),
    ("nomatch", "NOMATCH"),
    ("comment", "COMMENT"),
];

/// A rule's words after `pvesh create …/rules`: direction and action, enabled, then what it
/// matches. Never `--macro`, `--iface`, `--log`, `--pos` or a security group.
const RULE_ARGS: [Arg; 12] = [
    Arg::Word("--type"),
    Arg::Word("{direction}"),
    Arg::Word("--action"),
    Arg::Word("{action}"),
    Arg::Word("--enable"),
    Arg::Word("1"),
    Arg::Opt("proto", &["--proto", "{proto}"]),
    Arg::Opt("dport", &["--dport", "{dport}"]),
    Arg::Opt("sport", &["--sport", "{sport}"]),
    Arg::Opt("source", &["--source", "{source}"]),
    Arg::Opt("dest", &["--dest", "{dest}"]),
    Arg::Opt("comment", &["--comment", "{comment}"]),
];

const DIRECTION: Param = Param {
    name: "direction",
    kind: Kind::Choice(&[same("in"), same("out")]),
    how: How::Required,
    help: "in: to it, out: from it",
};
const ACTION: Param = Param {
    name: "action",
    kind: Kind::Choice(&[same("ACCEPT"), same("DROP"), same("REJECT")]),
    how: How::Required,
    help: "what the rule does",
};
const PROTO: Param = Param {
    name: "proto",
    kind: Kind::Choice(&[same("tcp"), same("udp"), same("icmp")]),
    how: How::Option,
    help: "the protocol (needed for ports)",
};
const DPORT: Param = Param {
    name: "dport",
    kind: Kind::FwPorts,
    how: How::Option,
    help: "destination ports",
};
const SPORT: Param = Param {
    name: "sport",
    kind: Kind::FwPorts,
    how: How::Option,
    help: "source ports",
};
const SOURCE: Param = Param {
    name: "source",
    kind: Kind::FwAddr,
    how: How::Option,
    help: "only from",
};
const DEST: Param = Param {
    name: "dest",
    kind: Kind::FwAddr,
    how: How::Option,
    help: "only to",
};
const POS: Param = Param {
    name: "pos",
    kind: Kind::RulePos,
    how: How::Positional,
    help: "the position",
};
const IPSET: Param = Param {
    name: "ipset",
    kind: Kind::IpsetName,
    how: How::Positional,
    help: "the ipset",
};
const ADDRESS: Param = Param {
    name: "address",
    kind: Kind::IpAddr,
    how: How::Positional,
    help: "the address",
};
