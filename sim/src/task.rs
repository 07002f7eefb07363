//! Task ("worker") bookkeeping: UPIDs, worker identities, what a running task holds, and the
//! shape of a task's log.
//!
//! Real PVE runs every mutating guest operation through `fork_worker`; in CLI mode the worker runs
//! synchronously and its log goes to stdout (FORMATS §1.3). The simulator runs the operation inside
//! the state lock and records the finished task in the state
//! ([`crate::state::State::record_task`]), so `/nodes/N/tasks…` can report it later.
//!
//! Imports nothing of the crate: [`crate::state`] and [`crate::running`] build on it.

use serde::{Deserialize, Serialize};

/// The user every CLI task runs as (`setup_default_cli_env`, FORMATS §1.1).
pub const USER: &str = "root@pam";

/// `UPID:<node>:<pid %08X>:<pstart %08X>:<starttime %08X>:<type>:<id>:<user>:` (FORMATS §1.4).
pub fn format_upid(
    node: &str,
    pid: u32,
    pstart: u64,
    starttime: i64,
    kind: &str,
    id: &str,
    user: &str,
) -> String {
    format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:")
}

/// The fields of a UPID, parsed with PVE's own rule (FORMATS §1.4).
#[derive(Debug, PartialEq, Eq)]
pub struct Upid {
    /// Node.
    pub node: String,
    /// Worker PID.
    pub pid: u32,
    /// Process start ticks.
    pub pstart: u64,
    /// Start time.
    pub starttime: i64,
    /// Task type.
    pub kind: String,
    /// Id field.
    pub id: String,
    /// User.
    pub user: String,
}

/// Parse a UPID; `None` if PVE's regex would not match.
pub fn parse_upid(s: &str) -> Option<Upid> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 9 || parts[0] != "UPID" || !parts[8].is_empty() {
        return None;
    }
    let hex = |p: &str, min: usize, max: usize| {
        (p.len() >= min && p.len() <= max && p.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(p, 16).ok())
            .flatten()
    };
    let node_ok = !parts[1].is_empty()
        && parts[1]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !parts[1].starts_with('-')
        && !parts[1].ends_with('-');
    let field_ok = |p: &str| !p.contains(|c: char| c.is_whitespace() || c == '/');
    if !node_ok
        || parts[5].is_empty()
        || parts[7].is_empty()
        || ![5, 6, 7].iter().all(|&i| field_ok(parts[i]))
    {
        return None;
    }
    Some(Upid {
        node: parts[1].to_string(),
        pid: u32::try_from(hex(parts[2], 8, 8)?).ok()?,
        pstart: hex(parts[3], 8, 9)?,
        starttime: i64::try_from(hex(parts[4], 8, 8)?).ok()?,
        kind: parts[5].to_string(),
        id: parts[6].to_string(),
        user: parts[7].to_string(),
    })
}

/// Fold a task error the way the CLI prints it on stderr (newlines become spaces, FORMATS §1.3).
pub fn fold(msg: &str) -> String {
    msg.trim_end_matches('\n').replace('\n', " ")
}

/// The worker identity of a task that already has one: a task that was held running
/// ([`crate::running`]) ends under the UPID it started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// Worker PID.
    pub pid: u32,
    /// Its start in clock ticks since boot.
    pub pstart: u64,
    /// Task start, epoch seconds.
    pub starttime: i64,
}

/// What a running task holds and how it was asked to end (stored in
/// [`crate::state::Task::running`]; [`crate::running`] acts on it).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Running {
    /// The simulator process holding the task (the CLI call that waits for it).
    pub holder: u32,
    /// That process's start (`/proc/PID/stat` field 22), so a reused PID is not taken for it.
    pub holder_start: u64,
    /// The lock it holds on a guest, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<Held>,
    /// A stop was requested (`pvesh delete …/tasks/{upid}`).
    #[serde(default)]
    pub stop: bool,
}

/// A lock on one guest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The guest.
    pub vmid: u32,
    /// What kind of lock.
    pub how: How,
}

/// The two kinds of guest locks PVE has.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum How {
    /// The `lock:` property of the config (visible, survives the process).
    Config(String),
    /// The flock on the guest's lock file, exclusive or shared (gone with the process).
    Flock {
        /// Exclusive (`lock_config_full`) or shared (`lock_config_shared`).
        exclusive: bool,
    },
}

/// This process's PID and start time.
pub fn me() -> (u32, u64) {
    let pid = std::process::id();
    (pid, proc_start(pid).unwrap_or(0))
}

/// The start time of process `pid` (`/proc/PID/stat` field 22, clock ticks since boot), like
/// `PVE::ProcFSTools::read_proc_starttime`.
pub fn proc_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) is in parentheses and may hold spaces; count from the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split(' ').nth(19)?.parse().ok()
}

impl Running {
    /// The holding process still runs (`check_process_running($pid, $pstart)`).
    pub fn alive(&self) -> bool {
        proc_start(self.holder) == Some(self.holder_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upid_round_trip_and_real_samples() {
        let u = format_upid(
            "pve1", 0x30FB2D, 0x330ECAE5, 0x65665EEA, "qmstart", "352", USER,
        );
        assert_eq!(
            u,
            "UPID:pve1:0030FB2D:330ECAE5:65665EEA:qmstart:352:root@pam:"
        );
        let p = parse_upid(&u).unwrap();
        assert_eq!(
            (p.node.as_str(), p.kind.as_str(), p.id.as_str()),
            ("pve1", "qmstart", "352")
        );
        // Real samples (FORMATS §1.4): empty id, 9-digit pstart.
        assert!(
            parse_upid("UPID:example-node:0000C346:165A0CE4:68D7279C:aptupdate::root@pam:")
                .is_some()
        );
        assert!(parse_upid("UPID:n:0000C346:165A0CE41:68D7279C:vzdump:100:root@pam:").is_some());
        assert!(parse_upid("UPID:n:0000C346:165A0CE4:68D7279C:vzdump:100:root@pam").is_none());
        assert!(parse_upid("nonsense").is_none());
    }
}
