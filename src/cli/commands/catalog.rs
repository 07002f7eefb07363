//! `pxagent catalog`: every operation with its risk, profiles, remote command and sudoers rule.

use serde_json::{Value, json};

use crate::base::error::Result;
use crate::catalog::{self, OPS};
use crate::output::Output;

/// Print the catalog.
pub fn catalog(out: &Output) -> Result<u8> {
    let ops: Vec<Value> = OPS
        .iter()
        .map(|op| {
            json!({
                "id": op.id,
                "usage": op.usage(),
                "about": op.about,
                "risk": op.risk.name(),
                "profiles": op.profiles().iter().map(|p| p.name()).collect::<Vec<_>>(),
                "example_argv": catalog::example_argv(op),
                "sudoers_rule": op.sudoers_rule(None),
                "phrase": op.confirm.map(|c| c.phrase),
                "mcp_tool": op.tool_name(),
            })
        })
        .collect();
    out.success("catalog", json!(ops), |data| {
        let mut text = String::new();
        for o in data.as_array().into_iter().flatten() {
            let s = |k: &str| o[k].as_str().unwrap_or("").to_string();
            let words: Vec<String> = o["example_argv"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(crate::base::text::quote_word)
                .collect();
            let profiles: Vec<&str> = o["profiles"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            text.push_str(&format!(
                "{}  [{}; {}]  {}\n",
                s("id"),
                s("risk"),
                profiles.join(","),
                s("about")
            ));
            text.push_str(&format!("  usage:   pxagent {}\n", s("usage")));
            text.push_str(&format!("  remote:  sudo -n {}\n", words.join(" ")));
            text.push_str(&format!("  sudoers: {}\n", s("sudoers_rule")));
            if let Some(p) = o["phrase"].as_str() {
                text.push_str(&format!("  confirm: {p}\n"));
            }
        }
        text
    });
    Ok(0)
}
