//! The tool list: one MCP tool per catalog op — name, title, description, input schema (from
//! the parameter kinds, the same regexes as sudoers), output schema (from the typed views of
//! [`crate::views`]) and annotations (from what the catalog says the op does), with the policy
//! and profile deciding which ops are offered; the lean list folds a CLI path's variants into
//! its base's tool ([`lean_tools`]). Uses the catalog, the views and the policy.

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
    /// What a person reads in a tool picker: the op's one line of help (`Start a VM`).
    pub title: String,
    /// What the model reads: what it does, its risk, what it needs.
    pub description: String,
    /// The JSON Schema of the arguments (an object schema, `additionalProperties: false`).
    pub input_schema: Value,
    /// The JSON Schema of the structured result: the `-o json` document
    /// (`{"ok","op","host","data"|"error"}`) with the op's `data` schema.
    pub output_schema: Value,
    /// `readOnlyHint`: the op only observes ([`Op::read_only`]).
    pub read_only: bool,
    /// `destructiveHint`: the op may destroy, undo or interrupt something
    /// ([`Op::destructive`]), or the local policy makes it need a phrase.
    pub destructive: bool,
    /// `idempotentHint`: calling it again with the same arguments changes nothing more
    /// ([`Op::idempotent`]).
    pub idempotent: bool,
    /// `openWorldHint`: it reaches beyond the Proxmox host ([`Op::open_world`]).
    pub open_world: bool,
    /// A call may need a phrase (the catalog's or a local `confirm` rule's): the tool takes
    /// `confirm`.
    pub confirm: bool,
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

/// Whether a call of this op may need a phrase: the catalog soft-blacklists it, a local
/// `confirm` rule does, or it is a change and the policy's `taint: after_exec` may ask for one.
pub fn takes_confirm(policy: &Policy, op: &Op) -> bool {
    op.confirm.is_some()
        || policy
            .rule_for(op.id)
            .is_some_and(|(_, r)| r.action == Action::Confirm)
        || policy.taint_holds(op)
}

/// The tool for one op. `confirm` (the op needs a phrase, by the catalog or a local
/// `confirm` rule) adds the optional `confirm` property and makes the tool destructive.
pub fn tool_spec(op: &'static Op, confirm: bool) -> ToolSpec {
    ToolSpec {
        op,
        name: op.tool_name(),
        title: op.about.trim_end_matches('.').to_string(),
        description: description(op, confirm),
        input_schema: input_schema(op, confirm),
        output_schema: output_schema(op),
        read_only: op.read_only() && !confirm,
        destructive: op.destructive() || confirm,
        idempotent: op.idempotent(),
        open_world: op.open_world(),
        confirm,
    }
}

/// The output schema of an op's tool: the JSON document every call returns as structured
/// content, success (`ok: true` and `data`) and failure (`ok: false` and `error`) alike,
/// with the op's data schema ([`crate::views::data_schema`]). Definitions the data schema
/// refers to move to the top, where its `$ref`s point; `format` annotations (`uint64` …) are
/// dropped, as strict validators refuse formats they do not know.
pub fn output_schema(op: &Op) -> Value {
    let mut data = crate::views::data_schema(op.view);
    strip_formats(&mut data);
    let defs = data.as_object_mut().and_then(|o| o.remove("$defs"));
    let mut schema = json!({
        "type": "object",
        "properties": {
            "ok": {"type": "boolean", "description": "true: the op ran and `data` is its result; false: see `error`"},
            "op": {"type": "string", "description": "the catalog op id (vm.start)"},
            "host": {"type": "string", "description": "the host, user@host:port"},
            "data": data,
            "warnings": {"type": "array", "items": {"type": "string"}, "description": "stderr lines of a command that succeeded"},
            "error": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string"},
                    "message": {"type": "string"},
                    "exit_code": {"type": "integer"},
                },
                "required": ["kind", "message", "exit_code"],
            },
            "approval_request": {"type": "string", "description": "when the host wants a signed approval: the text to relay to the human approver"},
        },
        "required": ["ok", "op", "host"],
    });
    if let Some(defs) = defs {
        schema["$defs"] = defs;
    }
    schema
}

fn strip_formats(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("format").is_some_and(Value::is_string) {
                o.remove("format");
            }
            o.values_mut().for_each(strip_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_formats),
        _ => {}
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
        Kind::FillPercent => Some((1, 99)),
        Kind::RevertWindow => Some((30, 600)),
        Kind::RulePos => Some((0, 9999)),
        Kind::Tries => Some((0, 99)),
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
            // What a caller gives ([`Kind::input_regex`]), anchored; extra checks such as
            // reserved snapshot names are made by the server.
            None => match kind.input_regex() {
                None => json!({"type": "string"}),
                Some(re) => json!({"type": "string", "pattern": format!("^({re})$")}),
            },
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
    // A sent file's size and digest are computed from the file, never given.
    for p in op.params.iter().filter(|p| p.given()) {
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
    // Any op, reads too: the host policy may mark any op `approve`.
    props.insert(
        "approval".into(),
        json!({
            "type": "string",
            "description": "only when the host asked for one (error kind approval_required): the signature a human approver made over the statement the host issued; never made up",
        }),
    );
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
        .filter(|p| p.given() && required(op, p))
        .map(|p| p.name)
        .collect();
    if !needs.is_empty() {
        s.push_str(&format!(" Needs: {}.", needs.join(", ")));
    }
    let optional: Vec<&str> = op
        .params
        .iter()
        .filter(|p| p.given() && !required(op, p))
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
    s.push_str(&only_for(op));
    if let Some(c) = op.confirm {
        s.push_str(&format!(
            " Runs only when `confirm` is exactly `{}`; that phrase must come from the human user, never from you: call without `confirm` to get the exact phrase, ask the user to reply with it, then call again passing it as `confirm`.",
            shown_phrase(c.phrase)
        ));
    } else if confirm {
        s.push_str(" Local policy requires a confirmation phrase from the human user: call without `confirm` to learn it, ask the user, then pass their reply as `confirm`.");
    }
    if op.runs_guest_command() {
        s.push_str(" `command` is the program and its arguments as an array of strings (no shell). Waits for the command to end and returns its exit code and output.");
    } else if op.runs_task() {
        s.push_str(" Waits for the Proxmox task to end.");
    }
    s
}

/// For a variant that shares its CLI path with others: which arguments select it
/// (` Only for snapshot with ':import/'.`); empty otherwise.
fn only_for(op: &Op) -> String {
    let when: Vec<String> = op
        .select
        .iter()
        .map(|sel| match sel {
            Select::Flag(f) => format!("{f}: true"),
            Select::Contains(p, needle, _) => format!("{p} with '{needle}'"),
        })
        .collect();
    if when.is_empty() || catalog::ops_at(op.cli).len() < 2 {
        return String::new();
    }
    format!(" Only for {}.", when.join(" and "))
}

/// `Take a snapshot …` as `take a snapshot …`.
fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

/// A phrase template as a model reads it: `yes destroy <vmid>`.
fn shown_phrase(template: &str) -> String {
    template.replace('{', "<").replace('}', ">")
}

/// The short description of the lean tool list: the op's line of help, what it risks and the
/// phrase it needs (which tool of a family it is, its schema says). How phrases and approvals work is said
/// once, in the server's instructions.
pub(super) fn lean_description(op: &Op, confirm: bool) -> String {
    let mut s = format!("{}.", op.about.trim_end_matches('.'));
    // Read-only, destructive: the annotations say it.
    if op.risk == Risk::Exec {
        s.push_str(" In the guest as root; no shell.");
    }
    // Which arguments select a variant, the schema says (`const`, `allOf` patterns).
    if let Some(c) = op.confirm {
        s.push_str(&format!(" Confirm: `{}`.", shown_phrase(c.phrase)));
    } else if confirm {
        s.push_str(" Confirm: the user's phrase (policy).");
    }
    s
}

/// The lean input schema: the same properties, types, choices, defaults and required ones as
/// [`input_schema`], without the kinds' patterns and ranges, the texts the instructions say
/// once (the guest's id, `confirm`, `approval`), the `node` pxagent looks up itself (the instructions
/// say every tool takes it) and `additionalProperties: false` (the server
/// checks every value with the kinds' regexes and refuses what an op does not take anyway,
/// and says what was wrong).
pub(super) fn lean_input_schema(op: &Op, shared: &Shared) -> Value {
    let mut props = Map::new();
    let mut req: Vec<&str> = Vec::new();
    // A node pxagent finds by itself (`How::Node`) is optional everywhere, which the
    // instructions say once; the server still takes it.
    for p in op
        .params
        .iter()
        .filter(|p| p.given() && !matches!(p.how, How::Node(_)))
    {
        let mut s = param_schema(op, p);
        if let Some(o) = s.as_object_mut() {
            // Checked by the server with the kinds' regexes and ranges, which say what was
            // wrong; the schema keeps the types, choices and defaults.
            o.remove("pattern");
            o.remove("minimum");
            o.remove("maximum");
            // The guest's id and its node are said once, in the server's instructions.
            match lean_help(p) {
                Some(h) if shared.get(p.name) != Some(&h) => {
                    o.insert("description".into(), json!(h));
                }
                _ => {
                    o.remove("description");
                }
            }
        }
        props.insert(p.name.to_string(), s);
        if required(op, p) {
            req.push(p.name);
        }
    }
    // `confirm` (where the description names a phrase) and `approval` (every tool) are said
    // once, in the instructions; without
    // `additionalProperties: false` a client may send it. The server still refuses any
    // argument the op does not take, by name.
    let mut schema = json!({
        "type": "object",
        "properties": props,
    });
    if !req.is_empty() {
        schema["required"] = json!(req);
    }
    schema
}

/// What the lean list says of a parameter, before [`Shared`] takes out what many tools say
/// alike: nothing for the guest's id (the instructions say it), an empty help or one that only
/// restates the name; else the help without its asides.
fn lean_help(p: &Param) -> Option<&'static str> {
    let common = p.name == "vmid" && matches!(p.how, How::Positional);
    (!common && !p.help.is_empty() && !restates(p.name, p.help)).then(|| short_help(p.help))
}

/// Parameter descriptions the lean list gives once, in the server's instructions, instead of
/// in every tool: for a name whose lean help is the same in two or more offered tools (the
/// firewall's `direction`, a restore's `archive`; never `vmid`), that help (the most frequent one where a
/// name has several; the others stay in their tools).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shared(std::collections::BTreeMap<&'static str, &'static str>);

impl Shared {
    /// The shared descriptions of these tools.
    pub fn of<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> Shared {
        let mut count: std::collections::BTreeMap<(&'static str, &'static str), usize> =
            Default::default();
        for s in specs {
            for p in s.op.params.iter().filter(|p| p.given()) {
                // `vmid` means the guest acted on in most tools: a new guest's stays inline.
                if p.name == "vmid" || matches!(p.how, How::Node(_)) {
                    continue;
                }
                if let Some(h) = lean_help(p) {
                    *count.entry((p.name, h)).or_default() += 1;
                }
            }
        }
        let mut best: std::collections::BTreeMap<&'static str, (usize, &'static str)> =
            Default::default();
        for ((name, help), n) in count.into_iter().filter(|(_, n)| *n >= 2) {
            let b = best.entry(name).or_insert((n, help));
            if n > b.0 {
                *b = (n, help);
            }
        }
        Shared(best.into_iter().map(|(k, (_, h))| (k, h)).collect())
    }

    fn get(&self, name: &str) -> Option<&&'static str> {
        self.0.get(name)
    }

    /// The sentence the instructions carry: `` `name`: help; … ``, or nothing.
    pub fn sentence(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let each: Vec<String> = self.0.iter().map(|(k, h)| format!("`{k}`: {h}")).collect();
        format!(
            " Arguments described here once, not in each tool: {}.",
            each.join("; ")
        )
    }
}

/// A parameter's help without its asides (what is in parentheses, examples after `, e.g.`):
/// what the lean tool list says of it.
/// Whether a parameter's help only says its name again (`node`: "the node", `snapshot`:
/// "the snapshot's name", `storage`: "the storage id"): the lean schema leaves such a text out.
pub(super) fn restates(name: &str, help: &str) -> bool {
    let named: Vec<&str> = name.split('_').collect();
    help.split_whitespace()
        .map(|w| w.trim_end_matches("'s").to_ascii_lowercase())
        .filter(|w| !matches!(w.as_str(), "the" | "a" | "an" | "its"))
        .all(|w| named.contains(&w.as_str()) || w == "id" || w == "name")
}

pub(super) fn short_help(help: &str) -> &str {
    let cut = [" (", ", e.g.", "; e.g."]
        .iter()
        .filter_map(|m| help.find(m))
        .min()
        .unwrap_or(help.len());
    help[..cut].trim_end()
}

/// The lean list's tools, one per CLI path as the CLI has one command per path: a variant
/// offered together with its base (`vm_snapshot_vmstate` with `vm_snapshot`) is folded into
/// the base's tool ([`ToolSpec::lean_tool`]), and a call of the base's tool with the
/// variant's selecting values runs the variant ([`route`]). A variant whose base is not
/// offered keeps its own tool; the full list and the compact mode keep every op's.
pub fn lean_tools(specs: &[ToolSpec], shared: &Shared) -> Vec<Tool> {
    specs
        .iter()
        .filter(|s| folded_into(s, specs).is_none())
        .map(|base| {
            let variants: Vec<&ToolSpec> = specs
                .iter()
                .filter(|v| folded_into(v, specs).is_some_and(|b| std::ptr::eq(b.op, base.op)))
                .collect();
            base.lean_tool(&variants, shared)
        })
        .collect()
}

/// The offered base whose tool a variant's spec folds into.
pub fn folded_into<'a>(spec: &ToolSpec, specs: &'a [ToolSpec]) -> Option<&'a ToolSpec> {
    if spec.op.variant_of.is_empty() {
        return None;
    }
    specs
        .iter()
        .find(|b| b.op.cli == spec.op.cli && b.op.variant_of.is_empty())
}

/// The op a call of `op`'s tool runs: for the base of a CLI path, the op its arguments
/// select there ([`catalog::select`], as the CLI chooses: `vmstate: true` on `vm_snapshot`
/// is `vm.snapshot-vmstate`); otherwise `op` itself. Arguments that select nothing leave the
/// base, whose own checks then say what is wrong.
pub fn route(op: &'static Op, args: &Map<String, Value>) -> &'static Op {
    if !op.variant_of.is_empty() || catalog::ops_at(op.cli).len() < 2 {
        return op;
    }
    let raw: std::collections::BTreeMap<&'static str, String> = catalog::ops_at(op.cli)
        .iter()
        .flat_map(|o| o.params.iter())
        .filter_map(|p| {
            let v = match args.get(p.name)? {
                Value::String(s) => s.clone(),
                Value::Bool(true) => "1".into(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            Some((p.name, v))
        })
        .collect();
    catalog::select(op.cli, &raw).unwrap_or(op)
}

impl ToolSpec {
    /// The lean tool of a CLI path's base with the variants folded into it: their arguments
    /// join the base's (`required` only where every op at the path needs it; no `const` or
    /// pattern that would refuse another op's values), their hints join conservatively, and
    /// the description says, for each, the values that select it, what it does and its
    /// phrase.
    pub(super) fn lean_tool(&self, variants: &[&ToolSpec], shared: &Shared) -> Tool {
        if variants.is_empty() {
            return self.to_tool(false, shared);
        }
        // The base's own selecting values too, now that no pattern in the schema says them.
        let mut description = lean_description(self.op, self.confirm);
        if !self.op.select.is_empty() {
            let own = only_for(self.op);
            description = format!(
                "{} ({}).{}",
                self.op.about.trim_end_matches('.'),
                own.trim_start_matches(" Only for ").trim_end_matches('.'),
                &description[self.op.about.trim_end_matches('.').len() + 1..]
            );
        }
        let mut schema = lean_input_schema(self.op, shared);
        for v in variants {
            let part = lean_description(v.op, v.confirm);
            description.push_str(&format!(
                " With{}: {}",
                only_for(v.op)
                    .trim_start_matches(" Only for")
                    .trim_end_matches('.'),
                lowercase_first(&part)
            ));
            let vs = lean_input_schema(v.op, shared);
            if let (Some(props), Some(more)) = (
                schema["properties"].as_object_mut(),
                vs["properties"].as_object(),
            ) {
                for (k, p) in more {
                    props.entry(k.clone()).or_insert_with(|| p.clone());
                }
            }
            let theirs: Vec<Value> = vs["required"].as_array().cloned().unwrap_or_default();
            if let Some(req) = schema["required"].as_array_mut() {
                req.retain(|r| theirs.contains(r));
            }
        }
        if let Some(props) = schema["properties"].as_object_mut() {
            for p in props.values_mut().filter_map(Value::as_object_mut) {
                p.remove("allOf");
                if p.remove("const").is_some() {
                    p.insert("type".into(), json!("boolean"));
                }
            }
        }
        if schema["required"].as_array().is_some_and(Vec::is_empty) {
            schema.as_object_mut().map(|o| o.remove("required"));
        }
        let all: Vec<&ToolSpec> = std::iter::once(self)
            .chain(variants.iter().copied())
            .collect();
        let joined = ToolSpec {
            read_only: all.iter().all(|s| s.read_only),
            destructive: all.iter().any(|s| s.destructive),
            idempotent: all.iter().all(|s| s.idempotent),
            ..self.clone()
        };
        let schema = match schema {
            Value::Object(o) => o,
            _ => JsonObject::new(),
        };
        let mut t = Tool::new(self.name.clone(), description, Arc::new(schema));
        t.annotations = joined.lean_annotations();
        t
    }

    /// The lean list's hints: only those that differ from MCP's defaults (readOnly false,
    /// destructive true, idempotent false) and let a client do less asking; none when all are
    /// at their defaults. `openWorldHint` is left out: a client then reads every tool as
    /// reaching beyond the host, the careful reading (the full list says which do not).
    fn lean_annotations(&self) -> Option<ToolAnnotations> {
        let mut a = ToolAnnotations::new();
        if self.read_only {
            a = a.read_only(true);
        } else if !self.destructive {
            a = a.destructive(false);
        }
        if self.idempotent && !self.read_only {
            a = a.idempotent(true);
        }
        (a != ToolAnnotations::new()).then_some(a)
    }

    /// The rmcp tool: with its output schema and the long texts (`full`), or lean (see
    /// [`lean_description`], [`lean_input_schema`]).
    pub(super) fn to_tool(&self, full: bool, shared: &Shared) -> Tool {
        let (description, input) = if full {
            (self.description.clone(), self.input_schema.clone())
        } else {
            (
                lean_description(self.op, self.confirm),
                lean_input_schema(self.op, shared),
            )
        };
        let schema = match input {
            Value::Object(o) => o,
            _ => JsonObject::new(),
        };
        let tool = Tool::new(self.name.clone(), description, Arc::new(schema));
        if full {
            let tool = tool.with_title(self.title.clone());
            let output = match &self.output_schema {
                Value::Object(o) => o.clone(),
                _ => JsonObject::new(),
            };
            return tool
                .with_raw_output_schema(Arc::new(output))
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(self.read_only)
                        .destructive(self.destructive)
                        .idempotent(self.idempotent)
                        .open_world(self.open_world),
                );
        }
        match self.lean_annotations() {
            Some(a) => tool.with_annotations(a),
            None => tool,
        }
    }
}
