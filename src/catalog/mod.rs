//! The operation catalog: the single source of truth (design §2).
//!
//! Every operation pxagent can perform is one static [`Op`] row. The CLI, the sudoers
//! render, `pxagent catalog`, dry-run, the preflight's expectations and (later) the MCP
//! tools are all derived from these rows, so adding an operation is adding a row.
//!
//! An op's remote command is a template of [`Arg`]s after an absolute tool path. The same
//! template yields the argv (with values) and the anchored sudoers regex (with each
//! parameter kind's regex), which is why the client can never build a line sudo refuses.

pub mod kind;
mod ops;

use std::collections::BTreeMap;

pub use kind::{Choice, Kind};
pub use ops::OPS;

use crate::error::{Error, Result};
use crate::pve::Tool;

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
                    kind::printable(s)
                ))
            })
    }

    /// Whether ops of this risk class belong to the profile. Exec ops are in no profile by
    /// default: the admin opts in per guest range.
    pub fn allows(self, risk: Risk) -> bool {
        match risk {
            Risk::Read => true,
            Risk::Change => self >= Profile::Operator,
            Risk::Confirm => self >= Profile::Full,
            Risk::Exec => false,
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
        }
    }
}

/// Where the node in a `/nodes/{node}/…` path comes from when the user does not pin it
/// with `--node`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFrom {
    /// The node that hosts the guest named by `vmid` (from `/cluster/resources`), so a
    /// guest on another cluster node works from any node (design §7).
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
    /// The `node` of a `/nodes/{node}` path: `--node NODE` pins it, else it is resolved.
    Node(NodeFrom),
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

/// One element of an op's remote command template (after the tool path).
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    /// Always present: one argv word, with `{param}` placeholders.
    Word(&'static str),
    /// Present only when the named parameter was given: these argv words.
    Opt(&'static str, &'static [&'static str]),
}

/// How an op's result is parsed into typed data and shown (see [`crate::views`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// One free-form JSON object (config, status): key/value lines.
    Object,
    /// `/cluster/status`: the cluster entry and its members.
    ClusterStatus,
    /// `/cluster/resources` entries; `Some(type)` keeps only entries of that type.
    Resources(Option<&'static str>),
    /// `/nodes` entries.
    Nodes,
    /// `/nodes/N/storage` entries.
    Storages,
    /// A guest's snapshots.
    Snapshots,
    /// A task's log lines.
    Log,
    /// An action: the task it ran and how it ended.
    Task,
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
    /// variant selected by a switch (see `selected_by`).
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
    /// For a variant sharing its CLI path with a base op: the switch that selects it.
    pub selected_by: Option<&'static str>,
    /// How the result is parsed and shown.
    pub view: View,
}

impl Op {
    /// The op's MCP tool name: `vm.start` → `vm_start`.
    pub fn tool_name(&self) -> String {
        self.id.replace(['.', '-'], "_")
    }

    /// Find a parameter by name.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The profiles that contain this op.
    pub fn profiles(&self) -> Vec<Profile> {
        Profile::ALL
            .into_iter()
            .filter(|p| p.allows(self.risk))
            .collect()
    }

    /// Which guest fence applies to this op's VMIDs.
    pub fn fence_area(&self) -> Option<Area> {
        match self.area {
            Area::Vm | Area::Ct => Some(self.area),
            _ => None,
        }
    }

    /// A usage line: `vm snapshot <vmid> <name> [--description <text>] [--node <node>]`.
    pub fn usage(&self) -> String {
        let mut s = self.cli.join(" ");
        for p in self.params {
            let flag = p.name.replace('_', "-");
            match p.how {
                How::Positional => s.push_str(&format!(" <{flag}>")),
                How::Option => s.push_str(&format!(" [--{flag} <{flag}>]")),
                How::Flag => s.push_str(&format!(" [--{flag}]")),
                How::Node(_) => s.push_str(" [--node <node>]"),
            }
        }
        s
    }

    /// The anchored sudoers regex over the joined arguments, with `vmid` replaced by a fence
    /// regex when one is given.
    pub fn args_regex(&self, vmid_regex: Option<&str>) -> String {
        let param_re = |name: &str| -> String {
            let p = self
                .param(name)
                .unwrap_or_else(|| panic!("op {} template names unknown param {name}", self.id));
            match (p.kind, vmid_regex) {
                (Kind::Vmid, Some(fence)) => format!("({fence})"),
                (kind, _) => wrap(&kind.regex()),
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
            }
            first = false;
        }
        out.push('$');
        out
    }

    /// The sudoers command spec: absolute path and anchored argument regex.
    pub fn sudoers_rule(&self, vmid_regex: Option<&str>) -> String {
        format!("{} {}", self.tool.path(), self.args_regex(vmid_regex))
    }

    /// Build the remote argv (tool path first) from validated wire values. A `node` value
    /// that is absent is rendered as `<node>` (only dry-run may show that).
    pub fn argv(&self, values: &BTreeMap<&'static str, String>) -> Vec<String> {
        let get = |name: &str| -> String {
            values
                .get(name)
                .cloned()
                .unwrap_or_else(|| format!("<{name}>"))
        };
        let mut argv = vec![self.tool.path().to_string()];
        for arg in self.args {
            match arg {
                Arg::Word(w) => argv.push(expand(w, |seg| match seg {
                    Seg::Lit(l) => l.to_string(),
                    Seg::Param(n) => get(n),
                })),
                Arg::Opt(name, words) => {
                    if values.contains_key(name) {
                        for w in *words {
                            argv.push(expand(w, |seg| match seg {
                                Seg::Lit(l) => l.to_string(),
                                Seg::Param(n) => get(n),
                            }));
                        }
                    }
                }
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

/// Wrap a regex in a group when it has a top-level alternation or optional tail.
fn wrap(re: &str) -> String {
    if re.starts_with('(') && re.ends_with(')') || !re.contains(['|', '?']) {
        re.to_string()
    } else {
        format!("({re})")
    }
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

/// Escape ERE metacharacters in a literal.
fn escape_ere(lit: &str) -> String {
    let mut s = String::new();
    for c in lit.chars() {
        if ".[]{}()*+?^$|\\".contains(c) {
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
            (k, _) => k.example(),
        };
        match p.how {
            How::Positional | How::Node(_) => {
                v.insert(p.name, example.to_string());
            }
            How::Flag if op.selected_by == Some(p.name) => {
                v.insert(p.name, "1".to_string());
            }
            _ => {}
        }
    }
    v
}

/// All ops with a given CLI path (a base op and its variants).
pub fn ops_at(path: &[&str]) -> Vec<&'static Op> {
    OPS.iter().filter(|o| o.cli == path).collect()
}

/// Look an op up by id.
pub fn find(id: &str) -> Option<&'static Op> {
    OPS.iter().find(|o| o.id == id)
}

#[cfg(test)]
mod tests;
