//! The MCP gateway's policy form, read by `--policy FILE` beside pxagent's own.
//!
//! Registry records for these tools carry policies like
//! `{"version":"1","default":"deny","tools":{"vm_exec":{"limits":[{"counter":"vm_exec_rate",
//! "window":"minute","max":10,"scope":"grant"}]}}}`. Tool names are the ops' MCP names
//! (`vm.exec` → `vm_exec`, see [`crate::catalog::Op::tool_name`]). The form compiles to a
//! [`PolicyConfig`]: `default: deny` becomes `"*": deny`, each listed tool an exact `allow`
//! rule with its limits — so a tool the gateway did not list is refused (exit 3) exactly as a
//! denied op is. Unknown fields, versions, windows, scopes or tools are errors naming them
//! (exit 2): a policy that is silently half-read is worse than none. Uses the policy's
//! [`schema`](super::schema) types and the catalog only; [`super::load`] calls it.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::schema::{Action, Limit, PolicyConfig, Rule};
use crate::base::error::{Error, Result};
use crate::catalog::OPS;

/// The versions of the gateway form this pxagent reads.
pub const VERSIONS: &[&str] = &["1"];

/// The whole gateway policy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Gateway {
    version: String,
    #[serde(default)]
    default: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, Tool>,
}

/// One tool's entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Tool {
    #[serde(default)]
    limits: Vec<Limit>,
}

/// Whether a policy file's text is the gateway form (a JSON or YAML mapping with a
/// `version`, `default` or `tools` key at the top).
pub fn is_gateway_form(text: &str) -> bool {
    let Ok(v) = yaml_serde::from_str::<serde_json::Value>(text) else {
        return false;
    };
    v.as_object().is_some_and(|o| {
        ["version", "default", "tools"]
            .iter()
            .any(|k| o.contains_key(*k))
    })
}

/// Parse the gateway form into pxagent's policy section. `source` names the file.
pub fn parse(text: &str, source: &str) -> Result<PolicyConfig> {
    let bad = |why: String| Error::usage(format!("policy {source}: {why}"));
    let g: Gateway = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| bad(e.to_string()))?
    } else {
        yaml_serde::from_str(text).map_err(|e| bad(e.to_string()))?
    };
    if !VERSIONS.contains(&g.version.as_str()) {
        return Err(bad(format!(
            "unknown version {:?} (this pxagent reads version {})",
            g.version,
            VERSIONS.join(", ")
        )));
    }
    let mut cfg = PolicyConfig::default();
    match g.default.as_deref() {
        None | Some("allow") => {}
        Some("deny") => {
            cfg.ops.insert("*".into(), Rule::new(Action::Deny));
        }
        Some(other) => {
            return Err(bad(format!(
                "unknown default {other:?} (expected \"allow\" or \"deny\")"
            )));
        }
    }
    let mut problems = Vec::new();
    for (name, tool) in g.tools {
        let Some(op) = OPS.iter().find(|o| o.tool_name() == name && !o.is_step()) else {
            let hint = crate::catalog::find(&name)
                .map(|o| format!(" (write the tool name {})", o.tool_name()))
                .unwrap_or_else(|| " (`pxagent catalog` lists each op's mcp_tool)".into());
            problems.push(format!("unknown tool {name:?}{hint}"));
            continue;
        };
        let mut rule = Rule::new(Action::Allow);
        rule.limits = (!tool.limits.is_empty()).then_some(tool.limits);
        cfg.ops.insert(op.id.to_string(), rule);
    }
    if !problems.is_empty() {
        return Err(bad(problems.join("; ")));
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::testing::inv;
    use crate::policy::Policy;

    const REGISTRY: &str = r#"{"version":"1","default":"deny","tools":{"vm_exec":{"limits":[{"counter":"vm_exec_rate","window":"minute","max":10,"scope":"grant"}]}}}"#;

    #[test]
    fn the_registry_record_loads_and_denies_unlisted_ops() {
        assert!(is_gateway_form(REGISTRY));
        assert!(!is_gateway_form("ops:\n  vm.exec: allow\n"));
        let cfg = parse(REGISTRY, "gw.json").unwrap();
        let p = Policy::from_config(cfg, "gw.json").unwrap();
        let exec = inv("vm.exec", &[("vmid", "100"), ("command", r#"["uname"]"#)]);
        assert!(
            p.check(&exec, Some(&crate::policy::GuestTags::default()))
                .is_ok()
        );
        let l = p.limits_for(exec.op);
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].counter.as_str(), l[0].max), ("vm_exec_rate", 10));
        let e = p
            .check(
                &inv("vm.start", &[("vmid", "100")]),
                Some(&crate::policy::GuestTags::default()),
            )
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("policy.ops.*"), "{e}");
        assert!(!p.allows_listing(crate::catalog::find("vm.list").unwrap()));
    }

    #[test]
    fn unknown_fields_versions_and_tools_are_named() {
        let e = |t: &str| parse(t, "gw.json").unwrap_err();
        for (text, needle) in [
            (r#"{"version":"2","tools":{}}"#, "unknown version \"2\""),
            (
                r#"{"version":"1","tools":{},"extra":1}"#,
                "unknown field `extra`",
            ),
            (
                r#"{"version":"1","tools":{"vm_exec":{"limit":[]}}}"#,
                "unknown field `limit`",
            ),
            (
                r#"{"version":"1","tools":{"vm_exec":{"limits":[{"counter":"c","window":"week","max":1}]}}}"#,
                "week",
            ),
            (
                r#"{"version":"1","tools":{"vm_exec":{"limits":[{"counter":"c","window":"minute","max":1,"scope":"user"}]}}}"#,
                "user",
            ),
            (
                r#"{"version":"1","tools":{"vm_exec":{"limits":[{"counter":"c","window":"minute","max":1,"burst":2}]}}}"#,
                "burst",
            ),
            (r#"{"version":"1","tools":{"vm.exec":{}}}"#, "vm_exec"),
            (
                r#"{"version":"1","tools":{"nope":{}}}"#,
                "unknown tool \"nope\"",
            ),
            (r#"{"version":"1","default":"maybe"}"#, "unknown default"),
        ] {
            let err = e(text);
            assert_eq!(err.exit_code(), 2, "{text}");
            assert!(err.to_string().contains(needle), "{text}: {err}");
            assert!(err.to_string().starts_with("policy gw.json: "), "{err}");
        }
    }

    #[test]
    fn default_allow_lists_limits_only() {
        let cfg = parse(
            r#"{"version":"1","default":"allow","tools":{"ct_exec":{"limits":[{"counter":"exec","window":"hour","max":3}]}}}"#,
            "g",
        )
        .unwrap();
        let p = Policy::from_config(cfg, "g").unwrap();
        assert!(
            p.check(
                &inv("vm.start", &[("vmid", "100")]),
                Some(&crate::policy::GuestTags::default())
            )
            .is_ok()
        );
        let ct = crate::catalog::find("ct.exec").unwrap();
        assert_eq!(p.limits_for(ct)[0].max, 3);
    }
}
