//! Task ("worker") bookkeeping: UPIDs, the finished-task list, and the shape of a task's log.
//!
//! Real PVE runs every mutating guest operation through `fork_worker`; in CLI mode the worker runs
//! synchronously and its log goes to stdout (FORMATS §1.3). The simulator runs the operation inside
//! the state lock and records the finished task here, so `/nodes/N/tasks…` can report it later.

use crate::state::State;

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

/// Record a finished task and return its UPID. `log` is what the worker printed; the stored log
/// gets the closing `TASK OK` / `TASK ERROR: <msg>` line that only the log file shows. `worker`
/// is the identity of a task that started earlier (else a new one starts at `start`).
#[allow(clippy::too_many_arguments)]
pub fn record(
    state: &mut State,
    node: &str,
    kind: &str,
    id: &str,
    start: i64,
    end: i64,
    mut log: Vec<String>,
    error: Option<&str>,
    worker: Option<Worker>,
) -> String {
    let Worker {
        pid,
        pstart,
        starttime: start,
    } = worker.unwrap_or_else(|| new_worker(state, node, start));
    let upid = format_upid(node, pid, pstart, start, kind, id, USER);
    let exitstatus = match error {
        None => "OK".to_string(),
        Some(e) => fold(e),
    };
    log.push(match error {
        None => "TASK OK".to_string(),
        Some(_) => format!("TASK ERROR: {exitstatus}"),
    });
    state.push_task(crate::state::Task {
        upid: upid.clone(),
        node: node.to_string(),
        kind: kind.to_string(),
        id: id.to_string(),
        user: USER.to_string(),
        pid,
        pstart,
        starttime: start,
        endtime: end,
        exitstatus,
        log,
        running: None,
    });
    upid
}

/// A fresh worker identity on `node`, starting at `start`.
pub fn new_worker(state: &mut State, node: &str, start: i64) -> Worker {
    let seq = state.next_seq();
    let boot = state
        .node(node)
        .map(|n| n.boot_time)
        .unwrap_or(start - 86_400);
    let pid = 1_000_000 + u32::try_from(seq % 3_000_000).unwrap_or(0) * 7 % 3_000_000;
    // pstart is the worker's start in clock ticks (USER_HZ 100) since boot; `seq` keeps it unique.
    let pstart = u64::try_from((start - boot).max(1)).unwrap_or(1) * 100 + seq % 100;
    Worker {
        pid,
        pstart,
        starttime: start,
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
