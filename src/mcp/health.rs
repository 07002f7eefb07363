//! The tool `health`: "is anything wrong?" in one call, as `pxagent health` answers it
//! ([`crate::engine::health`]). Listed beside the operations' tools, and in the compact set
//! beside find, describe and run: it is no catalog op but a set of catalog reads, each judged
//! by the server's policy (a denied one is listed as not checked) and admitted by the host's
//! rules as it would be alone.

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::compact::tool;
use crate::base::error::{Error, Result};
use crate::engine::health::Options;

/// The tool's name.
pub const NAME: &str = "health";

/// The tool: read-only, closed world, two optional arguments; with `full`, the schema of its
/// result (the `pxagent -o json health` document).
pub fn spec(full: bool) -> Tool {
    let t = tool(
        NAME,
        "Health check",
        "What is wrong (quorum, nodes, tasks, storages, SMART, services, HA, updates), worst first, each with the command that shows more; ok false on a warning or critical.",
        json!({"type": "object", "properties": {
            "since": {"type": "string", "description": "failed tasks from then on: 24h (default), 2d, a date, RFC 3339 or Unix seconds"},
            "storage_threshold": {"type": "integer", "minimum": 1, "maximum": 100, "description": "percent full that is a finding (default 90)"}
        }, "additionalProperties": false}),
        true,
    );
    if !full {
        return t;
    }
    let finding = json!({"type": "object", "required": ["check", "severity", "subject", "message", "more"], "properties": {
        "check": {"type": "string"},
        "severity": {"enum": ["critical", "warning", "info"]},
        "node": {"type": ["string", "null"]},
        "subject": {"type": "string"},
        "message": {"type": "string"},
        "more": {"type": "string", "description": "the pxagent command that shows more"}
    }});
    let output = json!({"type": "object", "required": ["ok", "op", "host"], "properties": {
        "ok": {"type": "boolean", "description": "healthy: no finding is a warning or critical"},
        "op": {"const": NAME},
        "host": {"type": "string"},
        "error": {"type": "object", "description": "kind unhealthy (exit 5) when not healthy; another kind when the check failed"},
        "data": {"type": "object", "properties": {
            "healthy": {"type": "boolean"},
            "checked": {"type": "array", "items": {"type": "string"}},
            "findings": {"type": "array", "items": finding},
            "unchecked": {"type": "array", "items": {"type": "object"}},
            "since": {"type": "integer"},
            "storage_threshold": {"type": "integer"}
        }}
    }});
    match output {
        Value::Object(o) => t.with_raw_output_schema(std::sync::Arc::new(o)),
        _ => t,
    }
}

/// The call's arguments as options; anything else is invalid input (exit 2).
pub fn options(args: &serde_json::Map<String, Value>) -> Result<Options> {
    if let Some(k) = args
        .keys()
        .find(|k| !["since", "storage_threshold"].contains(&k.as_str()))
    {
        return Err(Error::usage(format!(
            "health takes no argument '{}' (only since and storage_threshold)",
            crate::base::text::printable(k)
        )));
    }
    // A number is taken as its digits; the rest is the CLI's own parsing.
    let given = |key: &str| -> Result<Option<String>> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) if n.is_u64() => Ok(Some(n.to_string())),
            Some(_) => Err(Error::usage(format!(
                "{key}: expected a string or a whole number"
            ))),
        }
    };
    Options::parse(
        given("since")?.as_deref(),
        given("storage_threshold")?.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_are_checked() {
        let o = options(&args(
            json!({"since": "1767225600", "storage_threshold": 80}),
        ))
        .unwrap();
        assert_eq!((o.since, o.storage_threshold), (1_767_225_600, 80));
        assert_eq!(
            options(&args(json!({"since": 1767225600}))).unwrap().since,
            1_767_225_600
        );
        assert_eq!(
            options(&args(json!({"since": "2026-01-01"})))
                .unwrap()
                .since,
            1_767_225_600
        );
        let day = options(&args(json!({}))).unwrap();
        assert_eq!(day.storage_threshold, 90);
        for bad in [
            json!({"since": "yesterday"}),
            json!({"storage_threshold": 0}),
            json!({"storage_threshold": 101}),
            json!({"node": "pve1"}),
            json!({"since": true}),
        ] {
            assert_eq!(
                options(&args(bad.clone())).unwrap_err().exit_code(),
                2,
                "{bad}"
            );
        }
        // The listed schema is a valid JSON Schema and takes what the server takes.
        let schema = Value::Object((*spec(false).input_schema).clone());
        assert!(jsonschema::meta::is_valid(&schema));
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&json!({"since": "24h", "storage_threshold": 95})));
        assert!(!v.is_valid(&json!({"storage_threshold": 101})));
    }
}
