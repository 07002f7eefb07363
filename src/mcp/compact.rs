//! Which tools a server offers (`--tools`), and the compact set: three tools that find,
//! describe and run every operation the server offers, for clients whose context window
//! should not hold a hundred tool definitions.
//!
//! `run_operation` is not a second way in: it hands the named tool and its arguments to the
//! same call path as the per-op tool (the same validation with the kinds' regexes, policy,
//! phrases, approvals, audit, progress and cancellation), and answers exactly as that tool
//! does. Uses the catalog and the tool specs; nothing above the server.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::ToolSpec;

/// Find operations by words.
pub const FIND: &str = "find_operation";
/// One operation's full description and input schema.
pub const DESCRIBE: &str = "describe_operation";
/// Run one operation.
pub const RUN: &str = "run_operation";

/// Which tools a server offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSet {
    /// One tool per offered op whose id (`vm.start`) or tool name (`vm_start`) matches one of
    /// these patterns (`*` matches any run of characters); every offered op when empty.
    PerOp(Vec<String>),
    /// [`FIND`], [`DESCRIBE`] and [`RUN`] over every offered op.
    Compact,
}

impl ToolSet {
    /// `--tools VALUE`: `compact`, `all`, or patterns separated by commas (`vm.*,task.*`).
    /// A pattern that matches no operation of the catalog is refused, so a typo does not
    /// silently leave a tool out.
    pub fn parse(value: &str) -> std::result::Result<ToolSet, String> {
        match value.trim() {
            "compact" => return Ok(ToolSet::Compact),
            "all" | "" => return Ok(ToolSet::PerOp(Vec::new())),
            _ => {}
        }
        let mut pats = Vec::new();
        for p in value.split(',').map(str::trim) {
            if p.is_empty() {
                return Err(format!("--tools '{value}': an empty pattern"));
            }
            if !crate::catalog::OPS
                .iter()
                .any(|op| glob(p, op.id) || glob(p, &op.tool_name()))
            {
                return Err(format!(
                    "--tools '{value}': '{p}' matches no operation (patterns match op ids such as vm.start or tool names such as vm_start; `*` matches anything)"
                ));
            }
            pats.push(p.to_string());
        }
        Ok(ToolSet::PerOp(pats))
    }

    /// Whether this set lists `spec` as a tool of its own.
    pub fn lists(&self, spec: &ToolSpec) -> bool {
        match self {
            ToolSet::Compact => false,
            ToolSet::PerOp(p) if p.is_empty() => true,
            ToolSet::PerOp(p) => p.iter().any(|p| glob(p, spec.op.id) || glob(p, &spec.name)),
        }
    }
}

/// `*`-only glob matching of a whole string.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    if !text.ends_with(last) {
        return false;
    }
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

pub(super) fn tool(
    name: &str,
    title: &str,
    description: &str,
    schema: Value,
    read_only: bool,
) -> Tool {
    let schema = match schema {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    let hints = if read_only {
        ToolAnnotations::new().read_only(true).open_world(false)
    } else {
        ToolAnnotations::new()
    };
    Tool::new(name.to_string(), description.to_string(), Arc::new(schema))
        .with_title(title.to_string())
        .with_annotations(hints)
}

/// The three compact tools.
pub fn tools() -> Vec<Tool> {
    vec![
        tool(
            FIND,
            "Find operations",
            "Find the Proxmox operations this server offers: each one's tool name, what it does, its risk and the phrase it needs. Give words to narrow (`snapshot`, `vm start`, `storage`); none lists all.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "additionalProperties": false}),
            true,
        ),
        tool(
            DESCRIBE,
            "Describe an operation",
            "One operation's full description and the JSON Schema of its arguments and result, by tool name (from find_operation).",
            json!({"type": "object", "properties": {"tool": {"type": "string"}}, "required": ["tool"], "additionalProperties": false}),
            true,
        ),
        tool(
            RUN,
            "Run an operation",
            "Run one operation by tool name with its arguments (as describe_operation says), exactly as its own tool: same checks, policy, confirmation phrase (`confirm` in arguments), approval and audit. Answers with that operation's result.",
            json!({"type": "object", "properties": {
                "tool": {"type": "string"},
                "arguments": {"type": "object"}
            }, "required": ["tool"], "additionalProperties": false}),
            false,
        ),
    ]
}

/// [`FIND`]: the offered ops whose id, tool name or help contains every word of `query`.
pub fn find(specs: &[&ToolSpec], query: &str) -> Value {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let found: Vec<Value> = specs
        .iter()
        .filter(|s| {
            let hay = format!("{} {} {}", s.op.id, s.name, s.op.about).to_lowercase();
            words.iter().all(|w| hay.contains(w.as_str()))
        })
        .map(|s| {
            let mut v = json!({
                "tool": s.name,
                "about": s.op.about,
                "risk": s.op.risk.name(),
            });
            if let Some(c) = s.op.confirm {
                v["phrase"] = json!(c.phrase);
            } else if s.confirm {
                v["phrase"] = json!("(asked by the local policy)");
            }
            v
        })
        .collect();
    json!({"count": found.len(), "operations": found})
}

/// [`DESCRIBE`]: the tool's full description, input schema and output schema.
pub fn describe(spec: &ToolSpec) -> Value {
    json!({
        "tool": spec.name,
        "op": spec.op.id,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("vm.*", "vm.start"));
        assert!(glob("*.start", "vm.start"));
        assert!(glob("vm.*snap*", "vm.delsnapshot"));
        assert!(!glob("vm.*", "ct.start"));
        assert!(!glob("vm.start", "vm.start2"));
        assert!(glob("*", "anything"));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn tool_sets_parse_and_refuse_patterns_that_match_nothing() {
        assert_eq!(ToolSet::parse("compact"), Ok(ToolSet::Compact));
        assert_eq!(ToolSet::parse("all"), Ok(ToolSet::PerOp(vec![])));
        assert_eq!(
            ToolSet::parse("vm.*, task_*"),
            Ok(ToolSet::PerOp(vec!["vm.*".into(), "task_*".into()]))
        );
        assert!(
            ToolSet::parse("vm.strat")
                .unwrap_err()
                .contains("matches no operation")
        );
        assert!(ToolSet::parse("vm.*,").is_err());
    }
}
