//! The HA manager: its status, the guests it manages and PVE 9's HA rules
//! (`/cluster/ha/resources`, `/cluster/ha/rules`). Putting a guest under HA or taking it out,
//! and every rule change, needs its phrase: from then on the HA manager starts, stops and
//! moves guests by itself, on every node. Never offered: HA groups (PVE 9 migrated them to
//! rules), `migrate`/`relocate` requests, `set` on a resource or a rule, the states
//! `disabled` and `ignored`, `arm-ha`/`disarm-ha` and node maintenance (`ha-manager
//! crm-command`). A VMID fence admits `ha add` and `ha remove` for the guests inside it (of
//! either kind: the VMID alone names the guest); rules span guests, so a fenced render leaves
//! them out.

use super::*;

/// `pxagent ha status`
pub static HA_STATUS: Op = Op {
    id: "ha.status",
    cli: &["ha", "status"],
    about: "Show the HA manager's status: quorum, master, node agents and HA resources",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    args: pvesh!("get", "/cluster/ha/status/current"),
    view: View::Table(&[("type", "TYPE"), ("status", "STATUS")]),
    ..ROW
};

/// `pxagent ha add VMID [--state started|stopped] [--max-restart N]` (phrase): the guest
/// becomes an HA resource. pvesh takes the bare VMID and finds whether it is a VM or a
/// container (pve-ha-manager `PVE::HA::Config::parse_sid`).
pub static HA_ADD: Op = Op {
    id: "ha.add",
    cli: &["ha", "add"],
    about: "Put a guest under the HA manager",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[GUEST, STATE, MAX_RESTART],
    args: pvesh!(
        "create",
        "/cluster/ha/resources",
        Arg::Word("--sid"),
        Arg::Word("{vmid}"),
        Arg::Opt("state", &["--state", "{state}"]),
        Arg::Opt("max_restart", &["--max_restart", "{max_restart}"])
    ),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes ha add {vmid}",
        consequence: "the HA manager starts, stops and restarts guest {vmid} by itself from now on, and moves it to another node when its node fails",
        hint: None,
    }),
    fence: Some(Area::Cluster),
    ..ROW
};

/// `pxagent ha remove VMID` (phrase): the guest leaves the HA manager and the rules that
/// name it (PVE's `purge`, on by default, deletes a rule it was the only resource of).
pub static HA_REMOVE: Op = Op {
    id: "ha.remove",
    cli: &["ha", "remove"],
    about: "Take a guest out of the HA manager",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[GUEST],
    args: pvesh!("delete", "/cluster/ha/resources/{vmid}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes ha remove {vmid}",
        consequence: "nothing restarts guest {vmid} or moves it when its node fails, and it leaves every HA rule that names it",
        hint: Some("see the guest's HA state first: `pxagent ha status`"),
    }),
    fence: Some(Area::Cluster),
    ..ROW
};

/// `pxagent ha rule list`: PVE 9's HA rules, in their order.
pub static HA_RULE_LIST: Op = Op {
    id: "ha.rule.list",
    cli: &["ha", "rule", "list"],
    about: "List the HA rules",
    risk: Risk::Read,
    area: Area::Cluster,
    params: &[],
    args: pvesh!("get", "/cluster/ha/rules"),
    view: View::Table(&[
        ("rule", "RULE"),
        ("type", "TYPE"),
        ("resources", "RESOURCES"),
        ("nodes", "NODES"),
        ("affinity", "AFFINITY"),
        ("strict", "STRICT"),
        ("disable", "OFF"),
        ("comment", "COMMENT"),
    ]),
    ..ROW
};

/// `pxagent ha rule node-affinity RULE --resources vm:100,… --nodes pve1:2,pve2 [--strict]`
/// (phrase): the resources prefer (strict: may only run on) these nodes, higher priority
/// first.
pub static HA_RULE_NODE_AFFINITY: Op = Op {
    id: "ha.rule.node-affinity",
    cli: &["ha", "rule", "node-affinity"],
    about: "Add an HA rule that keeps guests on some nodes",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[RULE, RESOURCES, NODES, STRICT, COMMENT],
    args: pvesh!(
        "create",
        "/cluster/ha/rules",
        Arg::Word("--type"),
        Arg::Word("node-affinity"),
        Arg::Word("--rule"),
        Arg::Word("{rule}"),
        Arg::Word("--resources"),
        Arg::Word("{resources}"),
        Arg::Word("--nodes"),
        Arg::Word("{nodes}"),
        Arg::Opt("strict", &["--strict", "1"]),
        Arg::Opt("comment", &["--comment", "{comment}"])
    ),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes ha rule {rule}",
        consequence: "the HA manager moves {resources} to the nodes {nodes} by itself (with --strict: stops them when none of those nodes is up)",
        hint: None,
    }),
    ..ROW
};

/// `pxagent ha rule resource-affinity RULE --resources vm:100,vm:101 --affinity
/// positive|negative` (phrase): the resources run together, or apart.
pub static HA_RULE_RESOURCE_AFFINITY: Op = Op {
    id: "ha.rule.resource-affinity",
    cli: &["ha", "rule", "resource-affinity"],
    about: "Add an HA rule that keeps guests together or apart",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[RULE, RESOURCES, AFFINITY, COMMENT],
    args: pvesh!(
        "create",
        "/cluster/ha/rules",
        Arg::Word("--type"),
        Arg::Word("resource-affinity"),
        Arg::Word("--rule"),
        Arg::Word("{rule}"),
        Arg::Word("--resources"),
        Arg::Word("{resources}"),
        Arg::Word("--affinity"),
        Arg::Word("{affinity}"),
        Arg::Opt("comment", &["--comment", "{comment}"])
    ),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes ha rule {rule}",
        consequence: "the HA manager moves {resources} by itself to keep them on one node (positive) or on separate nodes (negative)",
        hint: None,
    }),
    ..ROW
};

/// `pxagent ha rule remove RULE` (phrase).
pub static HA_RULE_REMOVE: Op = Op {
    id: "ha.rule.remove",
    cli: &["ha", "rule", "remove"],
    about: "Remove an HA rule",
    risk: Risk::Confirm,
    area: Area::Cluster,
    params: &[RULE],
    args: pvesh!("delete", "/cluster/ha/rules/{rule}"),
    view: View::Done,
    confirm: Some(Confirm {
        phrase: "yes remove ha rule {rule}",
        consequence: "the HA manager no longer keeps the guests of rule {rule} where it said, and may move them",
        hint: Some("see the rule first: `pxagent ha rule list`"),
    }),
    ..ROW
};

const GUEST: Param = Param {
    name: "vmid",
    kind: Kind::Vmid,
    how: How::Positional,
    help: "the guest's id (a VM or a container)",
};
const STATE: Param = Param {
    name: "state",
    kind: Kind::Choice(&[same("started"), same("stopped")]),
    how: How::Option,
    help: "the state to keep the guest in (Proxmox default: started)",
};
const MAX_RESTART: Param = Param {
    name: "max_restart",
    kind: Kind::Tries,
    how: How::Option,
    help: "restarts before the guest moves to another node (Proxmox default: 1)",
};
const RULE: Param = Param {
    name: "rule",
    kind: Kind::ConfigId,
    how: How::Positional,
    help: "the rule's id",
};
const RESOURCES: Param = Param {
    name: "resources",
    kind: Kind::HaSids,
    how: How::Required,
    help: "the guests, as HA resources (vm:100,ct:200); each must be under HA",
};
const NODES: Param = Param {
    name: "nodes",
    kind: Kind::HaNodes,
    how: How::Required,
    help: "nodes, each with an optional priority, higher first (pve1:2,pve2)",
};
const STRICT: Param = Param {
    name: "strict",
    kind: Kind::Flag,
    how: How::Flag,
    help: "stop the guests when none of the nodes is up",
};
const AFFINITY: Param = Param {
    name: "affinity",
    kind: Kind::Choice(&[same("positive"), same("negative")]),
    how: How::Required,
    help: "positive: on one node; negative: apart",
};
