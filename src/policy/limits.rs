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

/// What a sliding-window cap the host gate counts is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapKind {
    /// Identical calls (policy `runaway`).
    Runaway,
    /// Change, confirm and exec operations of the account (policy `budget`).
    Budget,
}

/// A cap on calls in a sliding window: at most `max` in any `window` seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cap {
    /// What it caps.
    pub kind: CapKind,
    /// Its counter's key in the state file.
    pub key: String,
    /// The most calls in the window.
    pub max: u64,
    /// The window, seconds.
    pub window: u64,
}

/// A cap that is full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    /// The cap.
    pub cap: Cap,
    /// Seconds until its oldest counted call leaves the window.
    pub retry_after: u64,
}

/// What the state file of sliding caps keeps per key.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
struct Recent {
    /// The cap's window, to prune by.
    window: u64,
    /// When each counted call was admitted (Unix seconds), oldest first.
    times: Vec<u64>,
}

/// Admit one call under sliding-window `caps` kept in `path` (created 0600), counting it in
/// every cap; `Ok(Err(full))` names the first full cap (nothing is counted then); `Err` is a
/// state file that cannot be used (the caller refuses: fail closed). Every process of the
/// account counts one after another under an exclusive lock on the file.
pub fn admit_sliding(
    path: &Path,
    caps: &[Cap],
    now: u64,
) -> std::result::Result<std::result::Result<(), Full>, String> {
    if caps.is_empty() {
        return Ok(Ok(()));
    }
    let io = |what: &str, e: std::io::Error| format!("{} ({what}): {e}", path.display());
    let mut f = open_private(path).map_err(|e| io("open", e))?;
    f.lock().map_err(|e| io("lock", e))?;
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| io("read", e))?;
    let mut all: BTreeMap<String, Recent> = if text.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(&text).map_err(|e| {
            format!(
                "{} is damaged ({e}); root may delete it to reset the counts",
                path.display()
            )
        })?
    };
    // Forget what left its window, for every key (the file stays as small as the windows).
    for r in all.values_mut() {
        let from = now.saturating_sub(r.window);
        // A call counted by a process that started a moment later (a later `now`) stays.
        r.times.retain(|t| *t > from);
    }
    all.retain(|_, r| !r.times.is_empty());
    for cap in caps {
        let times = all.get(&cap.key).map(|r| r.times.as_slice()).unwrap_or(&[]);
        if times.len() as u64 >= cap.max {
            let oldest = times[times.len() - cap.max as usize];
            return Ok(Err(Full {
                cap: cap.clone(),
                retry_after: (oldest + cap.window).saturating_sub(now).max(1),
            }));
        }
    }
    for cap in caps {
        let r = all.entry(cap.key.clone()).or_default();
        r.window = r.window.max(cap.window);
        r.times.push(now);
        r.times.sort_unstable();
    }
    let text = serde_json::to_string(&all).map_err(|e| format!("{}: {e}", path.display()))?;
    f.set_len(0).map_err(|e| io("truncate", e))?;
    f.rewind().map_err(|e| io("rewind", e))?;
    f.write_all(text.as_bytes()).map_err(|e| io("write", e))?;
    Ok(Ok(()))
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

    #[test]
    fn sliding_caps_admit_exactly_max_in_any_window_and_say_when_the_next_fits() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("caps.json");
        let same = |key: &str| Cap {
            kind: CapKind::Runaway,
            key: key.into(),
            max: 20,
            window: 120,
        };
        let budget = Cap {
            kind: CapKind::Budget,
            key: "budget".into(),
            max: 25,
            window: 3600,
        };
        // 20 identical calls one second apart pass; the 21st, 20 s after the first, does not,
        // and fits again when the first leaves the window.
        for i in 0..20 {
            let r = admit_sliding(&f, &[same("a"), budget.clone()], 1000 + i).unwrap();
            assert_eq!(r, Ok(()), "call {i}");
        }
        let full = admit_sliding(&f, &[same("a"), budget.clone()], 1020)
            .unwrap()
            .unwrap_err();
        assert_eq!(full.cap.kind, CapKind::Runaway);
        assert_eq!(full.retry_after, 100);
        // A refused call counted nowhere: another call still has 5 of the budget.
        for i in 0..5 {
            assert_eq!(
                admit_sliding(&f, &[same("b"), budget.clone()], 1030 + i).unwrap(),
                Ok(()),
                "{i}"
            );
        }
        let full = admit_sliding(&f, &[same("c"), budget.clone()], 1040)
            .unwrap()
            .unwrap_err();
        assert_eq!(full.cap.kind, CapKind::Budget);
        assert_eq!(full.retry_after, 3600 - 40);
        // Past the window of the first call, "a" fits again (the budget is another matter).
        assert_eq!(admit_sliding(&f, &[same("a")], 1120).unwrap(), Ok(()));
        assert!(admit_sliding(&f, &[same("a")], 1120).unwrap().is_err());
        assert!(admit_sliding(&f, &[same("a")], 1121).unwrap().is_ok());
        // A damaged file refuses rather than forgetting the counts.
        std::fs::write(&f, "{not json").unwrap();
        assert!(admit_sliding(&f, &[same("a")], 1200).is_err());
        // No caps: the file is not touched.
        assert_eq!(
            admit_sliding(&dir.path().join("none"), &[], 1).unwrap(),
            Ok(())
        );
        assert!(!dir.path().join("none").exists());
    }

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
