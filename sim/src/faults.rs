//! Fault injection for tests: a root-owned rule file (`/var/lib/pve-sim/faults.json`, or
//! `PVE_SIM_FAULTS`; sudo's `env_reset` strips that variable on the real path) read on every call.
//!
//! The file is a JSON list of rules
//! `{"match": "<substring>", "action": "hang"|"fail"|"warn"|"hold"|"delay-task"|"detach"|"pmxcfs-down", "message": "...", "seconds": N, "times": N}`.
//! `match` is compared with the call's argv joined by single spaces, starting with the tool name
//! (`qm start 100`, `pvesh create /nodes/pve1/qemu/100/status/start --output-format json`); an
//! empty `match` hits every call. Every matching rule applies:
//! * `hang` sleeps `seconds` (default 30) and then proceeds; the sleep happens before the state
//!   lock is taken, so a hung call never blocks the others;
//! * `fail` makes a task-producing call's task fail with `message` (TASK ERROR), and any other call
//!   print `message` on stderr and exit 255;
//! * `warn` prints `message` on stderr, output and exit stay normal;
//! * `hold` keeps the task a call starts **running** for `seconds` (default 30): the call blocks
//!   like the real CLI, the task shows as running in the task list and its status, the guest's
//!   config lock (`lock: backup` for a backup, `snapshot`, …) is held meanwhile, and
//!   `pvesh delete /nodes/{node}/tasks/{upid}` stops it the way Proxmox does (see
//!   [`crate::running`]); a call that starts no task ignores it;
//! * `delay-task` makes the task a call starts appear only `seconds` (default 10) after the
//!   call reached it, as on a slow host where a tool spends that long before it forks its
//!   worker: meanwhile the call blocks, the node's task list has no trace of the task, and
//!   nothing is locked; then the task starts (its UPID's start time is that moment) and runs
//!   as usual, held running too when a `hold` rule also matched. A call that starts no task
//!   is not delayed (see [`crate::running`]);
//! * `detach`, with `hold`: the held task's worker outlives its tool. SIGTERM (INT, QUIT) to the
//!   tool ends it at once (exit 143) instead of interrupting the task, which goes on running
//!   in a process of its own (its own process group, as a worker is in its own session) until
//!   its hold ends or it is stopped: a worker whose tool was killed before it could pass the
//!   signal on (see [`crate::running`]);
//! * `pmxcfs-down` answers as a PVE tool does, as root, while pmxcfs (the `pve-cluster`
//!   service) is not running: `ipcc_send_rec[1] failed: Connection refused`, see
//!   [`PMXCFS_DOWN`].
//!
//! `times`, when present, is decremented on each use and the rule is removed at 0; the file is
//! rewritten under its own lock (`faults.json.lock`).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a rule does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Sleep, then proceed.
    Hang,
    /// Fail the call / its task.
    Fail,
    /// Print a warning on stderr.
    Warn,
    /// Keep the call's task running for `seconds` ([`crate::running`]).
    Hold,
    /// Start the call's task only `seconds` after the call reached it ([`crate::running`]).
    #[serde(rename = "delay-task")]
    DelayTask,
    /// Fail like a PVE tool whose pmxcfs is down ([`PMXCFS_DOWN`]).
    #[serde(rename = "pmxcfs-down")]
    PmxcfsDown,
    /// A held task's worker outlives its tool: a signal ends the tool without reaching the
    /// worker ([`crate::running`]).
    Detach,
}

/// What a PVE tool prints, run as root, when pmxcfs is not running: the IPC socket refuses the
/// connection (`die "ipcc_send_rec[$msgid] failed: $!\n"`, pve-cluster 7091d92e5949
/// `src/PVE/Cluster.pm`; `$!` = ECONNREFUSED), then the access control list cannot be loaded.
/// The text is a third party's capture (`tests/fixtures/pve/pmxcfs_down_root_connection_refused.txt`);
/// the exit status is Perl's for an uncaught `die` with `$!` set: ECONNREFUSED, 111 [INFER,
/// FORMATS §1.2]. The non-root form says `Unknown error -1` instead ([`crate::access`]).
pub const PMXCFS_DOWN: &str = "ipcc_send_rec[1] failed: Connection refused\n\
Unable to load access control list: Connection refused\n";

/// Exit status of [`PMXCFS_DOWN`].
pub const PMXCFS_DOWN_EXIT: i32 = 111;

/// One fault rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Substring of the joined argv.
    #[serde(rename = "match")]
    pub pattern: String,
    /// What to do.
    pub action: Action,
    /// Text for fail/warn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Hang duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
    /// Remaining uses; absent = forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

/// The combined effect of the rules that matched one call.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Effects {
    /// Seconds to sleep before running.
    pub hang_secs: u64,
    /// Failure message, first `fail` rule wins.
    pub fail: Option<String>,
    /// Warnings for stderr.
    pub warn: Vec<String>,
    /// Seconds to keep the call's task running (`hold`).
    pub hold_secs: u64,
    /// Seconds before the call's task starts (`delay-task`).
    pub delay_secs: u64,
    /// pmxcfs is down for this call (`pmxcfs-down`).
    pub pmxcfs_down: bool,
    /// A held task's worker outlives its tool (`detach`).
    pub detach: bool,
}

fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

fn with_rules<R>(path: &Path, create: bool, f: impl FnOnce(&mut Vec<Rule>) -> R) -> io::Result<R> {
    if !create && !path.exists() {
        return Ok(f(&mut Vec::new()));
    }
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(lock_path(path))?;
    lock.lock()?;
    let mut rules: Vec<Rule> = match fs::read(path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Vec::new(),
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let before = rules.clone();
    let out = f(&mut rules);
    if rules != before || (create && !path.exists()) {
        let tmp = lock_path(path).with_extension(format!("tmp.{}", std::process::id()));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(&rules).map_err(io::Error::other)?)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
    }
    Ok(out)
}

/// Evaluate the rules for one call (joined argv) and consume their `times`.
pub fn take(path: &Path, joined: &str) -> io::Result<Effects> {
    with_rules(path, false, |rules| {
        let mut fx = Effects::default();
        for r in rules.iter_mut().filter(|r| joined.contains(&r.pattern)) {
            match r.action {
                Action::Hang => fx.hang_secs += r.seconds.unwrap_or(30),
                Action::Fail => {
                    if fx.fail.is_none() {
                        fx.fail = Some(
                            r.message
                                .clone()
                                .unwrap_or_else(|| "simulated failure".into()),
                        );
                    }
                }
                Action::Warn => fx.warn.push(
                    r.message
                        .clone()
                        .unwrap_or_else(|| "simulated warning".into()),
                ),
                Action::Hold => fx.hold_secs += r.seconds.unwrap_or(30),
                Action::DelayTask => fx.delay_secs += r.seconds.unwrap_or(10),
                Action::PmxcfsDown => fx.pmxcfs_down = true,
                Action::Detach => fx.detach = true,
            }
            if let Some(t) = r.times.as_mut() {
                *t = t.saturating_sub(1);
            }
        }
        rules.retain(|r| r.times != Some(0));
        fx
    })
}

/// Append a rule (given as JSON text).
pub fn add(path: &Path, json: &str) -> Result<(), String> {
    let rule: Rule = serde_json::from_str(json).map_err(|e| format!("invalid fault rule: {e}"))?;
    with_rules(path, true, |rules| rules.push(rule)).map_err(|e| e.to_string())
}

/// Remove every rule.
pub fn clear(path: &Path) -> io::Result<()> {
    with_rules(path, true, Vec::clear)
}

/// The current rules.
pub fn list(path: &Path) -> io::Result<Vec<Rule>> {
    with_rules(path, false, |r| r.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_apply_and_count_down() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("faults.json");
        assert_eq!(take(&p, "qm start 100").unwrap(), Effects::default());
        add(
            &p,
            r#"{"match":"start 100","action":"fail","message":"boom","times":1}"#,
        )
        .unwrap();
        add(&p, r#"{"match":"qm ","action":"warn","message":"careful"}"#).unwrap();
        add(&p, r#"{"match":"status","action":"hang","seconds":0}"#).unwrap();
        add(
            &p,
            r#"{"match":"vzdump","action":"delay-task","seconds":7,"times":1}"#,
        )
        .unwrap();
        assert_eq!(take(&p, "vzdump 100").unwrap().delay_secs, 7);
        assert_eq!(take(&p, "vzdump 100").unwrap().delay_secs, 0);
        assert!(add(&p, r#"{"match":"x","action":"explode"}"#).is_err());
        let fx = take(&p, "qm start 100").unwrap();
        assert_eq!(fx.fail.as_deref(), Some("boom"));
        assert_eq!(fx.warn, vec!["careful".to_string()]);
        let fx = take(&p, "qm start 100").unwrap();
        assert_eq!(fx.fail, None, "times:1 rule is used up");
        assert_eq!(list(&p).unwrap().len(), 2);
        clear(&p).unwrap();
        assert!(list(&p).unwrap().is_empty());
    }
}
