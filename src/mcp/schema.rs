//! The tool list: one MCP tool per catalog op — name, description, input schema (from the
//! parameter kinds, the same regexes as sudoers) and annotations (from the risk class), with
//! the policy and profile deciding which ops are offered. Uses the catalog and the policy only.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::catalog::{self, How, Kind, OPS, Op, Param, Profile, Risk, Select};
use crate::policy::{Action, Policy};

/// One MCP tool, derived from one catalog op (independent of rmcp, for tests and docs).
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The catalog row.
    pub op: &'static Op,
    /// `vm_start`.
    pub name: String,
    /// What the model reads: what it does, its risk, what it needs.
    pub description: String,
    /// The JSON Schema of the arguments (an object schema, `additionalProperties: false`).
    pub input_schema: Value,
    /// `readOnlyHint`: the op only observes.
    pub read_only: bool,
    /// `destructiveHint`: the op may destroy data (risk `confirm`).
    pub destructive: bool,
    /// `idempotentHint`: calling it again with the same arguments has no further effect.
    /// Only reads claim it; a second `vm_start` is harmless on PVE but still a new task.
    pub idempotent: bool,
}

/// Whether an op is offered as a tool: it is a command of its own (not a step of another
/// op's flow), the profile has it, and the local policy does not refuse it whatever its
/// arguments.
pub fn offered(policy: &Policy, profile: Profile, op: &Op) -> bool {
    !op.is_step() && profile.allows_op(op) && policy.allows_listing(op)
}

/// The tools a server with this policy and profile offers, in catalog order.
pub fn tool_specs(policy: &Policy, profile: Profile) -> Vec<ToolSpec> {
    OPS.iter()
        .filter(|op| offered(policy, profile, op))
        .map(|op| tool_spec(op, takes_confirm(policy, op)))
        .collect()
}

/// Whether a call of this op may need a phrase: the catalog soft-blacklists it, or a local
/// `confirm` rule does.
pub(super) fn takes_confirm(policy: &Policy, op: &Op) -> bool {
    op.confirm.is_some()
        || policy
            .rule_for(op.id)
            .is_some_and(|(_, r)| r.action == Action::Confirm)
}

/// The tool for one op. `confirm` adds the optional `confirm` property.
pub fn tool_spec(op: &'static Op, confirm: bool) -> ToolSpec {
    ToolSpec {
        op,
        name: op.tool_name(),
        description: description(op, confirm),
        input_schema: input_schema(op, confirm),
        read_only: op.risk == Risk::Read,
        destructive: op.risk == Risk::Confirm,
        idempotent: op.risk == Risk::Read,
    }
}

/// The inclusive range of a kind that travels as a JSON integer.
pub(super) fn integer_range(kind: Kind) -> Option<(u64, u64)> {
    match kind {
        Kind::Vmid => Some((catalog::kind::VMID_MIN, catalog::kind::VMID_MAX)),
        Kind::Seconds => Some((0, 9999)),
        Kind::Count => Some((1, 99_999)),
        Kind::Mebibytes => Some((16, 4_194_304)),
        Kind::Cores => Some((1, 512)),
        Kind::Gibibytes => Some((1, 65_536)),
        Kind::Pid => Some((1, 9_999_999_999)),
        _ => None,
    }
}

/// The schema of one parameter's value.
pub(super) fn param_schema(op: &Op, p: &Param) -> Value {
    let mut s = match p.kind {
        Kind::Flag => json!({"type": "boolean"}),
        // One argv word per element, passed to the guest as they are (no shell).
        Kind::GuestArgv => json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
        Kind::Choice(choices) => {
            let mut names: Vec<&str> = Vec::new();
            for c in choices {
                if !names.contains(&c.cli) {
                    names.push(c.cli);
                }
            }
            json!({"type": "string", "enum": names})
        }
        kind => match integer_range(kind) {
            Some((min, max)) => json!({"type": "integer", "minimum": min, "maximum": max}),
            // The kind's own regex (the one in sudoers), anchored; extra checks such as
            // reserved snapshot names are made by the server.
            None if kind.regex() == ".*" => json!({"type": "string"}),
            None => json!({"type": "string", "pattern": format!("^({})$", kind.regex())}),
        },
    };
    let mut text = match p.how {
        How::Flag => p.help.to_string(),
        _ => format!("{}: {}", p.help, p.kind.describe()),
    };
    match p.how {
        How::Defaulted(d) => {
            text.push_str(&format!(" (default {d})"));
            s["default"] = match integer_range(p.kind) {
                Some(_) => d.parse::<u64>().map(Value::from).unwrap_or(json!(d)),
                None => json!(d),
            };
        }
        How::NextId => text.push_str(" (default: the cluster's next free VMID)"),
        How::BasenameOf(of) => text.push_str(&format!(" (default: the file name in {of})")),
        _ => {}
    }
    for sel in op.select {
        match sel {
            Select::Flag(f) if *f == p.name => {
                s["const"] = json!(true);
                text.push_str(" (must be true: it selects this tool)");
            }
            Select::Contains(name, needle, _) if *name == p.name => {
                s["allOf"] = json!([{"pattern": escape_pattern(needle)}]);
                text.push_str(&format!(" (must contain '{needle}')"));
            }
            _ => {}
        }
    }
    s["description"] = json!(text);
    s
}

/// A literal as an (unanchored) JSON Schema pattern.
pub(super) fn escape_pattern(lit: &str) -> String {
    let mut out = String::new();
    for c in lit.chars() {
        if "\\^$.|?*+()[]{}/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether a parameter must be given in a call of this op.
pub(super) fn required(op: &Op, p: &Param) -> bool {
    matches!(p.how, How::Positional | How::Required)
        || op
            .select
            .iter()
            .any(|s| matches!(s, Select::Flag(f) if *f == p.name))
}

/// The input schema of an op's tool.
pub fn input_schema(op: &Op, confirm: bool) -> Value {
    let mut props = Map::new();
    let mut req: Vec<&str> = Vec::new();
    for p in op.params {
        props.insert(p.name.to_string(), param_schema(op, p));
        if required(op, p) {
            req.push(p.name);
        }
    }
    if confirm {
        props.insert(
            "confirm".into(),
            json!({
                "type": "string",
                "description": "the exact confirmation phrase, typed by the human user (never made up): call without it first to learn the phrase",
            }),
        );
    }
    if op.risk != crate::catalog::Risk::Read {
        props.insert(
            "approval".into(),
            json!({
                "type": "string",
                "description": "only when the host asked for one (error kind approval_required): the signature a human approver made over the statement the host issued; never made up",
            }),
        );
    }
    json!({
        "type": "object",
        "properties": props,
        "required": req,
        "additionalProperties": false,
    })
}

/// The description a model reads.
pub(super) fn description(op: &Op, confirm: bool) -> String {
    let mut s = format!("{}.", op.about.trim_end_matches('.'));
    s.push_str(match op.risk {
        Risk::Read => " Read-only: changes nothing.",
        Risk::Change => " Changes state on the Proxmox host.",
        Risk::Confirm => " DESTRUCTIVE or hard to undo.",
        Risk::Exec => " Acts inside the guest, as root there; rate-limited.",
    });
    let needs: Vec<&str> = op
        .params
        .iter()
        .filter(|p| required(op, p))
        .map(|p| p.name)
        .collect();
    if !needs.is_empty() {
        s.push_str(&format!(" Needs: {}.", needs.join(", ")));
    }
    let optional: Vec<&str> = op
        .params
        .iter()
        .filter(|p| !required(op, p))
        .map(|p| p.name)
        .collect();
    if !optional.is_empty() {
        s.push_str(&format!(" Optional: {}.", optional.join(", ")));
    }
    if !op.needs_one_of.is_empty() {
        s.push_str(&format!(
            " Give at least one of: {}.",
            op.needs_one_of.join(", ")
        ));
    }
    let siblings = catalog::ops_at(op.cli);
    if siblings.len() > 1 {
        let when: Vec<String> = op
            .select
            .iter()
            .map(|sel| match sel {
                Select::Flag(f) => format!("{f}: true"),
                Select::Contains(p, needle, _) => format!("a {p} containing '{needle}'"),
            })
            .collect();
        if !when.is_empty() {
            s.push_str(&format!(" Only for {}.", when.join(" and ")));
        }
    }
    if let Some(c) = op.confirm {
        s.push_str(&format!(
            " Runs only when `confirm` is exactly `{}`; that phrase must come from the human user, never from you: call without `confirm` to get the exact phrase, ask the user to reply with it, then call again passing it as `confirm`.",
            c.phrase.replace('{', "<").replace('}', ">")
        ));
    } else if confirm {
        s.push_str(" Local policy requires a confirmation phrase from the human user: call without `confirm` to learn it, ask the user, then pass their reply as `confirm`.");
    }
    if op.runs_guest_command() {
        s.push_str(" `command` is the program and its arguments as an array of strings (no shell). Waits for the command to end and returns its exit code and output.");
    } else if matches!(op.risk, Risk::Change | Risk::Confirm) {
        s.push_str(" Waits for the Proxmox task to end.");
    }
    s
}

impl ToolSpec {
    /// The rmcp tool.
    pub(super) fn to_tool(&self) -> Tool {
        let schema = match &self.input_schema {
            Value::Object(o) => o.clone(),
            _ => JsonObject::new(),
        };
        Tool::new(
            self.name.clone(),
            self.description.clone(),
            Arc::new(schema),
        )
        .with_annotations(
            ToolAnnotations::new()
                .read_only(self.read_only)
                .destructive(self.destructive)
                .idempotent(self.idempotent)
                .open_world(false),
        )
    }
}
