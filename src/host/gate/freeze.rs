//! The kill switch: a frozen host runs reads only.
//!
//! A host is frozen while root's freeze file exists (`/etc/pxagent/freeze`, or the gate's
//! `--freeze`; its first line is the reason). Every gated account's gate then refuses each
//! change, confirm and exec operation with kind `frozen` (client exit 3) and the reason; reads
//! go on, so people and agents can still see what is happening. Only root lifts it, by
//! removing the file.
//!
//! The file is judged by its existence, never by its owner or its content: whoever could
//! create it (root, in a root-owned directory) meant to stop the agents, and a file the gate
//! cannot even look at (a directory it may not search) freezes too, since the gate cannot
//! tell. So the kill switch fails closed.
//!
//! An approver freezes a host without root (`pxagent freeze --key KEY -H HOST --reason …`):
//! a `control` envelope asks the gate, which answers with a statement to sign (op
//! `host.freeze`, the reason, this host's name and machine id, a nonce, an expiry); signed by a
//! key in the approvers file, the gate records it in the control directory, shared by every
//! gated account (root's, sticky, like the nonces: no account removes another's record). A
//! thaw is the same with op `host.thaw`, naming the freezes it lifts by id, so an old thaw
//! never lifts a newer freeze. A freeze record counts as long as it is there (root removes it
//! too); a thaw only while its signature holds against the approvers file. A control
//! directory the gate cannot trust freezes the host.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::approval::Subject;
use super::control::{Record, read_record, record_name, signed_record};
use super::{Options, RequestFacts, trusted_file};
use crate::base::gate_protocol::{Envelope, Refusal, RefusalKind};

pub use crate::host::setup::{CONTROL_DIR, FREEZE_FILE};

/// The statement op of an approver's freeze, and of a thaw.
pub const FREEZE_OP: &str = "host.freeze";
/// See [`FREEZE_OP`].
pub const THAW_OP: &str = "host.thaw";

/// The longest reason shown, in characters.
const MAX_REASON: usize = 300;

/// Why the host is frozen, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frozen {
    /// The freeze's reason (its first line), as printable text.
    pub reason: String,
    /// Who froze it: `root` for the freeze file.
    pub by: String,
    /// When (Unix seconds), when known.
    pub since: Option<u64>,
    /// What lifts it.
    pub lift: String,
}

impl Frozen {
    /// The refusal's message for `what` (the refused request, as pxagent's command line).
    pub fn refusal(&self, what: &str) -> String {
        let since = self
            .since
            .map(|t| format!(" since {}", crate::base::time::format_rfc3339(t)))
            .unwrap_or_default();
        format!(
            "this host is frozen{since} by {}: {}; `{what}` did not run. Reads go on; no change, confirm or exec operation runs until {}",
            self.by, self.reason, self.lift
        )
    }

    /// The record of the freeze, for the host audit and the gate's hello.
    pub fn to_json(&self) -> Value {
        json!({
            "reason": self.reason,
            "by": self.by,
            "since": self.since.map(crate::base::time::format_rfc3339),
            "lift": self.lift,
        })
    }
}

/// Whether the host is frozen, and why. `None`: not frozen.
pub(super) fn state(opts: &Options, ctx: &RequestFacts) -> Option<Frozen> {
    if let Some(f) = root_freeze(&opts.freeze) {
        return Some(f);
    }
    let lift = format!(
        "an approver's signed thaw (`pxagent thaw --key KEY -H HOST`) or root removes its records in {}",
        opts.control_dir.display()
    );
    match signed_freezes(opts, ctx) {
        Ok(active) if active.is_empty() => None,
        Ok(active) => Some(Frozen {
            reason: active
                .iter()
                .map(|f| f.reason.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            by: active
                .iter()
                .map(|f| f.approver.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            since: active.iter().map(|f| f.at).min(),
            lift,
        }),
        Err(why) => Some(Frozen {
            reason: why,
            by: "the gate (it cannot trust its control directory)".into(),
            since: None,
            lift: format!("root fixes {}", opts.control_dir.display()),
        }),
    }
}

/// An approver's freeze in force.
#[derive(Debug, Clone)]
struct Signed {
    /// Its id (the statement's nonce), which a thaw names.
    id: String,
    reason: String,
    approver: String,
    at: u64,
}

/// The approvers' freezes no valid thaw has lifted, oldest first. `Err`: the control
/// directory cannot be trusted (the caller freezes).
fn signed_freezes(opts: &Options, ctx: &RequestFacts) -> Result<Vec<Signed>, String> {
    let dir = &opts.control_dir;
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(Vec::new());
    }
    crate::approval::shared_dir(dir, "control directory")?;
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "the control directory {} cannot be read: {e}",
            dir.display()
        )
    })?;
    let mut freezes: Vec<Signed> = Vec::new();
    let mut thaws: Vec<Record> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((kind, id)) = record_name(&name) else {
            continue;
        };
        let record = read_record(&entry.path());
        match kind {
            "grant" | "revoke" => {}
            "freeze" => freezes.push(match record {
                Some(r) => Signed {
                    id: id.to_string(),
                    reason: crate::approval::Statement::parse(&r.statement)
                        .ok()
                        .and_then(|st| st.args.get("reason").cloned())
                        .map(|r| crate::base::text::printable(&r))
                        .unwrap_or_else(|| format!("an unreadable freeze record {name}")),
                    approver: r.approver,
                    at: r.at,
                },
                None => Signed {
                    id: id.to_string(),
                    reason: format!("an unreadable freeze record {name}"),
                    approver: "?".into(),
                    at: 0,
                },
            }),
            _ => thaws.extend(record),
        }
    }
    if freezes.is_empty() {
        return Ok(freezes);
    }
    let lifted = lifted_ids(opts, ctx, &thaws);
    freezes.retain(|f| !lifted.contains(&f.id));
    freezes.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
    Ok(freezes)
}

/// The freeze ids the thaws lift: only thaws whose signature by a listed approver holds, for
/// this host. Without a usable approvers file no thaw counts.
fn lifted_ids(opts: &Options, ctx: &RequestFacts, thaws: &[Record]) -> Vec<String> {
    if thaws.is_empty() || trusted_file(&opts.approvers, ctx.uid).is_err() {
        return Vec::new();
    }
    let Ok(approvers) = crate::approval::Approvers::load(&opts.approvers) else {
        return Vec::new();
    };
    let machine_id = ctx.machine_id.as_deref().unwrap_or("");
    thaws
        .iter()
        .filter_map(|r| crate::approval::verify(&approvers, &r.statement, &r.signature).ok())
        .filter(|(st, _)| st.op == THAW_OP && st.host == ctx.host && st.machine_id == machine_id)
        .filter_map(|(st, _)| st.args.get("lifts").cloned())
        .flat_map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// Answer a `control` envelope: an approver's freeze or thaw. Without a signature the refusal
/// carries the statement to sign; with one that holds, the record is written and the answer
/// is the host's freeze state.
pub(super) fn control(
    opts: &Options,
    ctx: &RequestFacts,
    env: &Envelope,
    audit: &mut Value,
) -> Result<Value, Box<Refusal>> {
    let c = env.control.clone().unwrap_or_default();
    audit["control"] = json!(crate::base::text::printable(&c.action));
    let bad = |m: String| Box::new(Refusal::new(RefusalKind::BadRequest, m));
    let unavailable = |m: String| Box::new(Refusal::new(RefusalKind::PolicyUnavailable, m));
    let (kind, subject) = match c.action.as_str() {
        "freeze" => {
            let reason = c.reason.unwrap_or_default();
            valid_reason(&reason).map_err(bad)?;
            audit["freeze_reason"] = json!(reason);
            let subject = Subject {
                op: FREEZE_OP.into(),
                args: BTreeMap::from([("reason".to_string(), reason.clone())]),
                display: format!(
                    "freeze --reason {}",
                    serde_json::Value::String(reason.clone())
                ),
            };
            ("freeze", subject)
        }
        "thaw" => {
            if c.reason.is_some() {
                return Err(bad("a thaw takes no reason".into()));
            }
            let active = signed_freezes(opts, ctx).map_err(unavailable)?;
            if active.is_empty() {
                let still = state(opts, ctx);
                return Ok(json!({
                    "action": "thaw",
                    "thawed": [],
                    "frozen": still.as_ref().map(Frozen::to_json),
                    "note": match still {
                        Some(f) => format!("no approver's freeze is in force; the host stays frozen until {}", f.lift),
                        None => "the host was not frozen".to_string(),
                    },
                }));
            }
            let ids: Vec<String> = active.iter().map(|f| f.id.clone()).collect();
            audit["lifts"] = json!(ids);
            let subject = Subject {
                op: THAW_OP.into(),
                args: BTreeMap::from([("lifts".to_string(), ids.join(","))]),
                display: "thaw".into(),
            };
            ("thaw", subject)
        }
        other => {
            return Err(bad(format!(
                "unknown control action {}: the gate takes `freeze`, `thaw`, `grant`, `grants` and `revoke`",
                serde_json::Value::String(crate::base::text::printable(other))
            )));
        }
    };
    let (approver, _) = signed_record(opts, ctx, env, &subject, kind, audit)?;
    audit["decision"] = json!(if kind == "freeze" { "frozen" } else { "thawed" });
    let now = state(opts, ctx);
    let mut answer = json!({
        "action": kind,
        "approver": approver,
        "frozen": now.as_ref().map(Frozen::to_json),
    });
    if kind == "thaw" {
        answer["thawed"] = json!(subject.args["lifts"].split(',').collect::<Vec<_>>());
    }
    Ok(answer)
}

/// A freeze's reason: one line of 1 to 200 printable characters.
fn valid_reason(reason: &str) -> Result<(), String> {
    let n = reason.chars().count();
    if n == 0 || reason.trim().is_empty() {
        return Err("a freeze needs a reason (--reason): everyone refused reads it".into());
    }
    if n > 200 {
        return Err(format!("the reason is {n} characters; at most 200"));
    }
    if reason.chars().any(char::is_control) || crate::base::text::printable(reason) != reason {
        return Err("the reason must be one line of printable text".into());
    }
    Ok(())
}

/// Root's freeze file at `path`.
fn root_freeze(path: &Path) -> Option<Frozen> {
    let lift = format!("root removes {}", path.display());
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(Frozen {
                reason: format!(
                    "the gate cannot tell whether the freeze file {} exists ({e}), so it counts as frozen",
                    path.display()
                ),
                by: "root".into(),
                since: None,
                lift: format!("the gate can read {}'s directory", path.display()),
            });
        }
    };
    let since = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    let reason = match std::fs::read(path) {
        Ok(bytes) => first_line(&bytes),
        Err(e) => format!("(the freeze file cannot be read: {e})"),
    };
    Some(Frozen {
        reason,
        by: "root".into(),
        since,
        lift,
    })
}

/// A freeze file's reason: its first non-empty line, printable and cut, or a placeholder.
fn first_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty());
    match line {
        Some(l) => {
            let shown = crate::base::text::printable(l);
            if shown.chars().count() > MAX_REASON {
                let cut: String = shown.chars().take(MAX_REASON).collect();
                format!("{cut}…")
            } else {
                shown
            }
        }
        None => "no reason given".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_freeze_file_freezes_by_its_existence_with_its_first_line_as_reason() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("freeze");
        assert_eq!(root_freeze(&f), None);
        std::fs::write(&f, "\n  incident 42: disk array degraded \nsecond line\n").unwrap();
        let fr = root_freeze(&f).unwrap();
        assert_eq!(fr.reason, "incident 42: disk array degraded");
        assert_eq!(fr.by, "root");
        assert!(fr.since.is_some());
        assert!(
            fr.refusal("vm start 100")
                .contains("`vm start 100` did not run"),
            "{}",
            fr.refusal("vm start 100")
        );
        // Empty, hostile or long: still frozen, shown safely.
        std::fs::write(&f, "").unwrap();
        assert_eq!(root_freeze(&f).unwrap().reason, "no reason given");
        std::fs::write(&f, "\x1b[2Jgone\n").unwrap();
        assert!(!root_freeze(&f).unwrap().reason.contains('\x1b'));
        std::fs::write(&f, "x".repeat(5000)).unwrap();
        assert!(root_freeze(&f).unwrap().reason.chars().count() <= MAX_REASON + 1);
        // A directory or a dangling symlink is there too: frozen.
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(dir.path().join("nothing"), &f).unwrap();
        assert!(root_freeze(&f).is_some());
    }
}
