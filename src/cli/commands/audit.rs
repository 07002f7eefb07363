//! `pxagent audit show|verify`: the local audit trail.

use serde_json::{Value, json};

use super::Failure;
use crate::error::{Error, Result};
use crate::output::{self, Output};

/// `pxagent audit show [--op GLOB] [--host GLOB] [--decision D] [--vmid N] [--since WHEN]
/// [--until WHEN]`: the records that pass every filter, each with its target.
pub fn audit_show(filter: &crate::audit_query::Filter, out: &Output) -> Result<u8> {
    let path = crate::audit::default_path()
        .ok_or_else(|| Error::usage("no HOME or XDG_STATE_HOME: there is no audit log"))?;
    let records = crate::audit_query::read(&path, filter)?;
    out.success("audit.show", json!(records), |d| {
        let rows: Vec<Vec<String>> = d
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let s = |k: &str| match &r[k] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    v => v.to_string(),
                };
                let target = r["target"]
                    .as_object()
                    .map(crate::audit_query::describe)
                    .unwrap_or_else(|| s("target"));
                vec![
                    s("seq"),
                    output::units::local_rfc3339(&s("time")),
                    s("via"),
                    s("op"),
                    target,
                    output::style::state(&s("decision")),
                    s("exit_code"),
                    s("host"),
                    s("error"),
                ]
            })
            .collect();
        if rows.is_empty() {
            return "no audit records match".into();
        }
        output::table(
            &[
                "SEQ", "TIME", "VIA", "OP", "TARGET", "DECISION", "EXIT", "HOST", "ERROR",
            ],
            &rows,
        )
    });
    Ok(0)
}

/// `pxagent audit verify`: exit 1 naming the first broken line.
pub fn audit_verify(out: &Output) -> std::result::Result<u8, Failure> {
    let path = crate::audit::default_path().ok_or_else(|| {
        (
            Error::usage("no HOME or XDG_STATE_HOME: there is no audit log"),
            None,
        )
    })?;
    let v = crate::audit::verify(&path).map_err(|e| (e, None))?;
    let data = json!({"path": path, "lines": v.lines, "head": v.head, "first_broken": v.first_broken.as_ref().map(|(n, why)| json!({"line": n, "why": why}))});
    if let Some((n, why)) = &v.first_broken {
        return Err((
            Error::Findings(format!("audit log {} line {n}: {why}", path.display())),
            Some(data),
        ));
    }
    out.success("audit.verify", data, |_| {
        if v.lines == 0 {
            format!("no audit log yet at {}", path.display())
        } else {
            format!(
                "{}: {} line(s), chain intact; head {}",
                path.display(),
                v.lines,
                v.head
            )
        }
    });
    Ok(0)
}
