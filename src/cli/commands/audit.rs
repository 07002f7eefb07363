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

/// `audit verify --host HOST`: the host audit chain, checked end to end on the host by the
/// root-side helper (the only reader of its MAC key), and held against the head this machine
/// saw last time (kept in `host-chains.json` beside the audit log): a chain that is shorter
/// now, or whose line N is no longer the line N seen then, was cut or rewritten.
pub fn host_verify(
    ctx: &crate::config::context::Context,
    out: &mut Output,
    trail: &mut crate::engine::Trail,
) -> std::result::Result<u8, Failure> {
    let plain = |e: Error| (e, None);
    let target = super::resolve(ctx, out, trail).map_err(plain)?;
    trail.audited = false;
    let host = target.display();
    let anchors_path = crate::audit::default_path()
        .and_then(|p| p.parent().map(|d| d.join("host-chains.json")))
        .ok_or_else(|| {
            plain(Error::usage(
                "no HOME or XDG_STATE_HOME: nowhere to keep the host's head",
            ))
        })?;
    let mut anchors: serde_json::Map<String, Value> = std::fs::read(&anchors_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let kept = anchors.get(&host).cloned();
    let kept_lines = kept
        .as_ref()
        .and_then(|k| k["lines"].as_u64())
        .filter(|n| *n > 0);
    let at = kept_lines.map(|n| n.to_string());
    let rt = crate::base::runtime::runtime().map_err(plain)?;
    let found = rt
        .block_on(async {
            let remote = super::open(ctx, &target).await?;
            let mut values: Vec<(&'static str, &str)> = Vec::new();
            if let Some(n) = &at {
                values.push(("at", n.as_str()));
            }
            let r = remote
                .read_op(&crate::catalog::ops::AUDIT_HOST_VERIFY, &values)
                .await;
            remote.session.close().await;
            r
        })
        .map_err(plain)?;
    let lines = found["lines"].as_u64().unwrap_or(0);
    let head = found["head"].as_str().unwrap_or("").to_string();
    let mut data = json!({
        "host": host,
        "file": found["file"],
        "lines": lines,
        "head": head,
        "first_broken": found["first_broken"],
        "last_verified": kept,
    });
    if let Some(b) = found["first_broken"].as_object() {
        let e = Error::Findings(format!(
            "the host audit chain of {host} breaks at line {}: {}",
            b.get("line").cloned().unwrap_or_default(),
            b.get("why").and_then(Value::as_str).unwrap_or("?")
        ));
        return Err((e, Some(data)));
    }
    if let (Some(n), Some(k)) = (kept_lines, &kept) {
        let then = k["head"].as_str().unwrap_or("");
        let problem = if lines < n {
            Some(format!(
                "it has {lines} line(s), fewer than the {n} it had when this machine verified it last: records were removed from its end"
            ))
        } else if found["at"]["hash"].as_str() != Some(then) {
            Some(format!(
                "its line {n} is not the line {n} this machine verified last (head {then}): the chain was rewritten"
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            let e = Error::Findings(format!("the host audit chain of {host}: {p}"));
            return Err((e, Some(data)));
        }
    }
    anchors.insert(host.clone(), json!({"lines": lines, "head": head}));
    if let Some(dir) = anchors_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&anchors_path, Value::Object(anchors).to_string()).map_err(|e| {
        plain(Error::Internal(format!(
            "cannot keep the host's head in {}: {e}",
            anchors_path.display()
        )))
    })?;
    data["kept"] = json!(anchors_path);
    out.success("audit.verify-host", data, |d| {
        format!(
            "{}: host audit chain {} intact, {} line(s); head {}{}",
            d["host"].as_str().unwrap_or(""),
            d["file"].as_str().unwrap_or(""),
            d["lines"],
            d["head"].as_str().unwrap_or(""),
            match d["last_verified"]["lines"].as_u64() {
                Some(n) => format!("\nstill holds the {n} line(s) verified last time"),
                None => String::new(),
            }
        )
    });
    Ok(0)
}
