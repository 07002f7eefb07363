//! Rate limits: per-op counters in fixed UTC windows, shared by every pxagent
//! process of this account.
//!
//! A looping agent must not fire guest commands dozens of times a minute. So a policy's
//! `limits` name a counter, a window (`minute`, `hour`, `day`: fixed windows aligned to UTC,
//! so `minute` resets at every full minute) and a maximum; ops that start a process in a
//! guest (`vm.exec`, `ct.exec`) get `{counter: <tool>_rate, window: minute, max: 10}` unless
//! the policy says otherwise — the verdict the MCP gateway registry gives these tools.
//!
//! Counters live in `$XDG_STATE_HOME/pxagent/limits.json` (else
//! `~/.local/state/pxagent/limits.json`). [`admit`] holds an exclusive `flock` on that file
//! from reading the counters to writing them back, so concurrent processes (the CLI, the MCP
//! server) count one after another and never both take the last slot. Front ends call
//! [`admit`] only once policy, validation and confirmation have passed: a refused call never
//! uses quota. When a limit is full the call fails with [`Error::RateLimited`] (exit 8) naming
//! the seconds until the window resets; nothing was sent.
//!
//! Several ops may share one counter (name the same counter in each op's limits); an op with
//! several limits is admitted only when every one of them has room, and then counts in all.
//!
//! The limit types ([`Limit`], [`Window`], [`Scope`]) are the policy's
//! ([`crate::policy::schema`], re-exported here); this file keeps the counters. Uses the policy
//! (its limits per op), the catalog and the audit module's state directory; the policy does not
//! use this file.

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::catalog::Op;
use crate::policy::Policy;
pub use crate::policy::schema::{Limit, Scope, Window};

/// A limit's key in the state file: `counter/window`.
fn key(l: &Limit) -> String {
    format!("{}/{}", l.counter, l.window.name())
}

/// What the state file holds per `counter/window`.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize)]
struct Count {
    /// The window this count belongs to (Unix seconds of its start).
    start: u64,
    /// Admissions in that window.
    used: u64,
}

/// `$XDG_STATE_HOME/pxagent/limits.json`, else `~/.local/state/pxagent/limits.json`.
pub fn default_path() -> Option<PathBuf> {
    crate::audit::default_path().map(|p| p.with_file_name("limits.json"))
}

/// Admit one call of `op` under the policy's limits, counting it; [`Error::RateLimited`]
/// (exit 8) when a limit is full. Call it after policy, validation and confirmation passed
/// and before anything is sent. Ops without limits are admitted without touching the file.
pub fn admit(op: &Op, policy: &Policy) -> Result<()> {
    let limits = policy.limits_for(op);
    if limits.is_empty() {
        return Ok(());
    }
    let path = default_path().ok_or_else(|| {
        Error::usage(format!(
            "{} is rate-limited, but there is no HOME or XDG_STATE_HOME to keep the counters in",
            op.id
        ))
    })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    admit_at(&path, op, &limits, now, policy.limits_source(op).as_deref())
}

/// [`admit`] with the file, limits and clock given (for tests).
pub fn admit_at(
    path: &Path,
    op: &Op,
    limits: &[Limit],
    now: u64,
    source: Option<&str>,
) -> Result<()> {
    let io = |what: &str, e: std::io::Error| {
        Error::Internal(format!(
            "rate-limit counters {}: {what}: {e}",
            path.display()
        ))
    };
    if let Some(dir) = path.parent() {
        create_private_dir(dir).map_err(|e| io("create the directory", e))?;
    }
    let mut f = open_private(path).map_err(|e| io("open", e))?;
    f.lock().map_err(|e| io("lock", e))?;
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| io("read", e))?;
    // A damaged file (a crash mid-write, a hand edit) must not lift the limits: start the
    // counts again from nothing only when the file is empty.
    let mut counts: BTreeMap<String, Count> = if text.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(&text).map_err(|e| {
            Error::Internal(format!(
                "rate-limit counters {} are damaged ({e}); delete the file to reset them",
                path.display()
            ))
        })?
    };
    for l in limits {
        let start = l.window.start(now);
        let c = counts.get(&key(l)).copied().unwrap_or_default();
        let used = if c.start == start { c.used } else { 0 };
        if used >= l.max {
            let reset = start + l.window.seconds() - now;
            return Err(Error::RateLimited {
                message: format!(
                    "rate limit reached: {} allows {} call(s) per {} on counter {} and {used} were made; \
                     the window resets in {reset}s ({}); nothing was sent",
                    op.id,
                    l.max,
                    l.window.name(),
                    l.counter,
                    source.unwrap_or("pxagent's default for commands inside guests"),
                ),
                retry_after: Some(reset),
            });
        }
    }
    for l in limits {
        let start = l.window.start(now);
        let c = counts.entry(key(l)).or_default();
        if c.start != start {
            *c = Count { start, used: 0 };
        }
        c.used += 1;
    }
    // Drop counts of windows that are over, so the file stays small.
    counts.retain(|k, c| {
        let len = match k.rsplit('/').next() {
            Some("minute") => 60,
            Some("hour") => 3600,
            _ => 86_400,
        };
        c.start + len > now
    });
    let body = serde_json::to_string(&counts).map_err(|e| Error::Internal(e.to_string()))?;
    f.set_len(0).map_err(|e| io("truncate", e))?;
    f.rewind().map_err(|e| io("seek", e))?;
    f.write_all(body.as_bytes()).map_err(|e| io("write", e))?;
    f.sync_all().map_err(|e| io("sync", e))?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> &'static Op {
        crate::catalog::find("vm.exec").unwrap()
    }

    fn lim(max: u64, window: Window) -> Limit {
        Limit {
            counter: "vm_exec_rate".into(),
            window,
            max,
            scope: Scope::Grant,
        }
    }

    #[test]
    fn the_eleventh_call_in_a_minute_is_refused_and_names_the_reset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limits.json");
        let t = 1_793_498_580; // a full minute
        for i in 0..10 {
            admit_at(&path, op(), &[lim(10, Window::Minute)], t + i, None).unwrap();
        }
        let e = admit_at(&path, op(), &[lim(10, Window::Minute)], t + 23, None).unwrap_err();
        assert_eq!(e.exit_code(), 8);
        assert!(e.to_string().contains("resets in 37s"), "{e}");
        // The next window admits again.
        admit_at(&path, op(), &[lim(10, Window::Minute)], t + 60, None).unwrap();
    }

    #[test]
    fn every_limit_must_have_room_and_a_refusal_counts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limits.json");
        let t = 1_793_498_580;
        let both = [lim(5, Window::Minute), lim(2, Window::Day)];
        admit_at(&path, op(), &both, t, None).unwrap();
        admit_at(&path, op(), &both, t + 1, None).unwrap();
        let e = admit_at(&path, op(), &both, t + 2, None).unwrap_err();
        assert!(e.to_string().contains("per day"), "{e}");
        let counts: BTreeMap<String, Count> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(counts["vm_exec_rate/minute"].used, 2);
    }

    #[test]
    fn damaged_counters_fail_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limits.json");
        std::fs::write(&path, "{not json").unwrap();
        let e = admit_at(&path, op(), &[lim(10, Window::Minute)], 60, None).unwrap_err();
        assert!(e.to_string().contains("damaged"), "{e}");
    }

    #[test]
    fn threads_share_the_file_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limits.json");
        let t = 1_793_498_580;
        let handles: Vec<_> = (0..20)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || {
                    admit_at(&p, op(), &[lim(10, Window::Minute)], t, None).is_ok()
                })
            })
            .collect();
        let ok = handles
            .into_iter()
            .filter(|_| true)
            .map(|h| h.join().unwrap())
            .filter(|a| *a)
            .count();
        assert_eq!(ok, 10);
    }
}
