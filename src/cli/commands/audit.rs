//! `pxagent audit show|verify|new-chain`: the local audit trail.

use serde_json::{Value, json};

use super::Failure;
use crate::base::error::{Error, Result};
use crate::output::{self, Output};

/// `pxagent audit show [--op GLOB] [--host GLOB] [--decision D] [--vmid N] [--since WHEN]
/// [--until WHEN]`: the records that pass every filter, each with its target.
pub fn audit_show(filter: &crate::audit::query::Filter, out: &Output) -> Result<u8> {
    let path = crate::audit::default_path()
        .ok_or_else(|| Error::usage("no HOME or XDG_STATE_HOME: there is no audit log"))?;
    // One line per operation: a two-phase op's started record and its completion as one.
    let records = crate::audit::query::read(&path, filter)?;
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
                    .map(crate::audit::query::describe)
                    .unwrap_or_else(|| s("target"));
                vec![
                    s("seq"),
                    output::units::local_rfc3339(&s("time")),
                    s("via"),
                    s("op"),
                    target,
                    // A started op without its result, or one cut short, says so.
                    match r["phase"].as_str() {
                        Some("started") => format!("{} (no result)", s("decision")),
                        Some("interrupted") => format!("{} (interrupted)", s("decision")),
                        _ => output::style::state(&s("decision")),
                    },
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
    // A chain started by `audit new-chain` names the file it continues: that file must still
    // end where the link says.
    let link_problem = v.continues.as_ref().and_then(crate::audit::check_link);
    let data = json!({
        "path": path,
        "lines": v.lines,
        "head": v.head,
        "first_broken": v.first_broken.as_ref().map(|(n, why)| json!({"line": n, "why": why})),
        "continues": v.continues,
        "link_problem": link_problem,
        "unfinished": v.unfinished,
    });
    if let Some((n, why)) = &v.first_broken {
        return Err((
            Error::Findings(format!("audit log {} line {n}: {why}", path.display())),
            Some(data),
        ));
    }
    if let Some(p) = &link_problem {
        return Err((
            Error::Findings(format!(
                "audit log {}: the chain it continues does not match its link: {p}",
                path.display()
            )),
            Some(data),
        ));
    }
    out.success("audit.verify", data, |_| {
        if v.lines == 0 {
            return format!("no audit log yet at {}", path.display());
        }
        let mut s = format!(
            "{}: {} line(s), chain intact; head {}",
            path.display(),
            v.lines,
            v.head
        );
        if let Some(l) = &v.continues {
            s.push_str(&format!(
                "\ncontinues {} ({} line(s), head {}), which still matches",
                l.file, l.lines, l.head
            ));
        }
        if !v.unfinished.is_empty() {
            s.push_str(&format!(
                "\nstarted without a recorded result (pxagent was killed while they ran): line(s) {}",
                v.unfinished
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        s
    });
    Ok(0)
}

/// `pxagent audit new-chain`: move the log aside and start a new chain linked to its head.
pub fn audit_new_chain(out: &Output) -> Result<u8> {
    let path = crate::audit::default_path()
        .ok_or_else(|| Error::usage("no HOME or XDG_STATE_HOME: there is no audit log"))?;
    let (archive, first) = crate::audit::new_chain(&path, crate::audit::Via::Cli)?;
    let link = first.continues.clone();
    out.success(
        "audit.new-chain",
        json!({"path": path, "archived": archive, "record": first}),
        |_| {
            let l = link.as_ref();
            format!(
                "moved {} to {} ({} line(s), head {}{}); a new chain starts at {} with a record linking to it",
                path.display(),
                archive.display(),
                l.map_or(0, |l| l.lines),
                l.map_or("", |l| l.head.as_str()),
                match l.and_then(|l| l.first_broken) {
                    Some(n) => format!(", broken from line {n}"),
                    None => String::new(),
                },
                path.display()
            )
        },
    );
    Ok(0)
}
