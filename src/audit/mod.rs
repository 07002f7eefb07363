//! The audit trail: one JSON line per invocation, hash-chained.
//!
//! Every invocation — allowed, confirmed, refused, dry-run, failed — appends one [`Record`]
//! to `$XDG_STATE_HOME/pxagent/audit.jsonl`, so a human can later see what an agent asked
//! for and what pxagent did about it, including what it refused.
//!
//! Why a hash chain: each line carries `prev`, the SHA-256 of the previous line's bytes, and
//! a consecutive `seq`. Editing, inserting, deleting or reordering any line breaks the chain
//! at that point, and [`verify`] names the first broken line. What it cannot do, honestly:
//!
//! - it is not a signature: whoever can write the file can rewrite the whole chain from the
//!   edit onwards. It makes casual or partial tampering evident; it does not stop the
//!   account owner. The records that root controls are sudo's own logs on the host;
//!   compare against those, or keep [`Verified::head`] somewhere else;
//! - nothing follows the last line, so cutting lines off the end (or deleting the whole
//!   file) and editing the last line into another valid record are invisible to the chain
//!   alone. [`Verified::head`] compared with a copy kept elsewhere catches both.
//!
//! **Two phases**: an operation that may change something (risk change, confirm or
//! exec) gets a `started` record before its command is sent and a completion after it —
//! `done` with its result, or `interrupted` when a signal, a shutdown or a cancellation cut it
//! short (with what was known by then, such as the UPID). A completion names its started
//! record (`started: SEQ`); [`verify`] checks that it does, and [`operations`] shows the two
//! as one operation. Reads, refusals and dry runs stay one record. A started record whose
//! completion is missing means pxagent was killed (SIGKILL, power loss) while it ran.
//!
//! **Fail closed**: when the started record cannot be written (the file or its directory
//! unwritable, the last line broken), the operation is not sent ([`crate::engine::Trail`]
//! says so, exit 10). [`new_chain`] (`pxagent audit new-chain`) moves the log aside and starts
//! a new chain whose first record names the old file and its head hash, so nothing is lost
//! and the link can be checked.
//!
//! The log is never rotated silently (a rotated-away head would break `seq` and `prev`);
//! `pxagent audit new-chain` archives it with the link above.
//!
//! Concurrency: [`append`] holds an exclusive `flock` on the log itself across reading the
//! last line, writing the new one and `fsync`, so concurrent pxagent processes (CLI runs, an
//! MCP server) never interleave, fork the chain or lose lines. Readers take a shared lock,
//! so they never see a half-written line.
//!
//! Layer: audit. May import: `base`, `catalog`.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::base::text::sha256_hex;
use crate::base::time::{format_millis, parse_time};

mod chain;
mod ops;
pub mod query;

pub use chain::{check_link, new_chain};
pub use ops::operations;

/// The `prev` of the first line: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What pxagent decided about an invocation. The outcome of what ran is in `exit_code`,
/// `error` and `upid`, not here: a remote op that ran and failed is `allowed` (or
/// `confirmed`) with exit code 1.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Passed every local check and was sent (no phrase was needed).
    Allowed,
    /// Needed a confirmation phrase (catalog or policy), got the right one, and was sent.
    Confirmed,
    /// Not sent: local policy (exit 3), a missing or wrong phrase (exit 4) or a rate limit
    /// (exit 8); `exit_code` says which.
    Refused,
    /// `--dry-run`: reported, not sent.
    DryRun,
    /// Stopped before a verdict: invalid input, an unreadable config, an internal error
    /// (exit 2, 10…). Nothing was sent.
    Failed,
}

/// Which front end the invocation came through.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// The command line.
    #[default]
    Cli,
    /// The MCP server.
    Mcp,
    /// `pxagent batch` (one record per request line).
    Batch,
}

/// One line of the audit log (compact JSON, fields in this order).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Record {
    /// 1-based and consecutive: line N has seq N.
    pub seq: u64,
    /// When the record was written, RFC 3339 UTC with milliseconds
    /// (`2026-11-30T06:00:00.123Z`).
    pub time: String,
    /// The target host as shown to the user (`zen-agent@192.0.2.10:22`), when known.
    pub host: Option<String>,
    /// The SSH account, when known.
    pub account: Option<String>,
    /// The op id (`vm.start`) or command (`preflight`, `status`).
    pub op: String,
    /// The remote argv (`sudo -n /usr/bin/pvesh …`); empty when nothing was built.
    pub argv: Vec<String>,
    /// What pxagent decided.
    pub decision: Verdict,
    /// The confirmation phrase that was accepted, if one was needed.
    pub phrase: Option<String>,
    /// pxagent's exit code.
    pub exit_code: u8,
    /// Wall time of the invocation.
    pub duration_ms: u64,
    /// The Proxmox task, when one ran.
    pub upid: Option<String>,
    /// CLI or MCP.
    pub via: Via,
    /// The error message, when the invocation did not succeed.
    pub error: Option<String>,
    /// Files a guest command's flow moves (`push LOCAL -> GUEST`, `pull GUEST -> LOCAL`);
    /// left out when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfers: Vec<String>,
    /// Which half of a two-phase record this is; left out for a one-record invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// On a completion: the seq of the `started` record it completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
    /// On the first record of a chain that `audit new-chain` started: the chain it continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<Link>,
    /// On a `reconcile` record: the seq of the record whose outcome it found out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciles: Option<u64>,
    /// On a `reconcile` record: what really happened (`ok`, `failed`, `running`, `not_run`,
    /// `applied`, `not_applied`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// On the completion of a change that can be taken back: its inverse (`pxagent undo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undo: Option<UndoStep>,
    /// The snapshot taken of the guest before this change (policy `snapshot_before`), which
    /// `pxagent undo` offers to roll back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// On the records of an undo: the seq of the record it takes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<u64>,
    /// Hex SHA-256 of the previous line's bytes (without its newline); [`GENESIS`] first.
    pub prev: String,
}

/// A change's inverse as recorded: an op of the catalog and its values, made an invocation
/// again (and so checked again) when it is undone.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct UndoStep {
    /// The op id (`vm.shutdown`).
    pub op: String,
    /// Its values by parameter name.
    pub values: std::collections::BTreeMap<String, String>,
    /// What it cannot take back, with why; left out when nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
}

impl Record {
    /// The catalog op and values of the command line this record sent (`sudo -n TOOL …` read
    /// back), the record's own op preferred where a line reads back to several; `None` when
    /// it sent none, or none pxagent can read back.
    pub fn read_back(
        &self,
    ) -> Option<(
        &'static crate::catalog::Op,
        std::collections::BTreeMap<&'static str, String>,
    )> {
        let found = crate::catalog::inverse::parse_argv(self.argv.get(2..)?).ok()?;
        let at = found.iter().position(|(o, _)| o.id == self.op).unwrap_or(0);
        found.into_iter().nth(at)
    }
}

/// The phase of a two-phase record (see the module doc).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Written before the command was sent; `exit_code` and `duration_ms` are 0.
    Started,
    /// The command's result (`exit_code`, `error`, `upid`).
    Done,
    /// Cut short by a signal, a shutdown or a cancellation; carries what was known then.
    Interrupted,
}

/// Where a chain that `audit new-chain` started came from.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The old log, as it was moved aside.
    pub file: String,
    /// The old chain's head (SHA-256 of its last line, as [`verify`] reports it).
    pub head: String,
    /// How many lines it had.
    pub lines: u64,
    /// Its first broken line, if it was broken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_broken: Option<u64>,
}

/// A record to append: everything except what [`append`] fills in (`seq`, `time`, `prev`).
///
/// Store nothing user-typed besides the argv and the accepted phrase: a wrong phrase typed
/// at a prompt could be anything (a password typed into the wrong window), so a
/// confirmation error is best recorded by its kind, not with the typed text.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    /// See [`Record::host`].
    pub host: Option<String>,
    /// See [`Record::account`].
    pub account: Option<String>,
    /// See [`Record::op`].
    pub op: String,
    /// See [`Record::argv`].
    pub argv: Vec<String>,
    /// See [`Record::decision`].
    pub decision: Verdict,
    /// See [`Record::phrase`].
    pub phrase: Option<String>,
    /// See [`Record::exit_code`].
    pub exit_code: u8,
    /// See [`Record::duration_ms`].
    pub duration_ms: u64,
    /// See [`Record::upid`].
    pub upid: Option<String>,
    /// See [`Record::via`].
    pub via: Via,
    /// See [`Record::error`].
    pub error: Option<String>,
    /// See [`Record::transfers`].
    pub transfers: Vec<String>,
    /// See [`Record::phase`].
    pub phase: Option<Phase>,
    /// See [`Record::started`].
    pub started: Option<u64>,
    /// See [`Record::continues`].
    pub continues: Option<Link>,
    /// See [`Record::reconciles`].
    pub reconciles: Option<u64>,
    /// See [`Record::outcome`].
    pub outcome: Option<String>,
    /// See [`Record::undo`].
    pub undo: Option<UndoStep>,
    /// See [`Record::snapshot`].
    pub snapshot: Option<String>,
    /// See [`Record::undoes`].
    pub undoes: Option<u64>,
}

impl NewRecord {
    /// A record with the rest empty (exit code 0); set the other fields directly.
    pub fn new(op: impl Into<String>, via: Via, decision: Verdict) -> NewRecord {
        NewRecord {
            host: None,
            account: None,
            op: op.into(),
            argv: Vec::new(),
            decision,
            phrase: None,
            exit_code: 0,
            duration_ms: 0,
            upid: None,
            via,
            error: None,
            transfers: Vec::new(),
            phase: None,
            started: None,
            continues: None,
            reconciles: None,
            outcome: None,
            undo: None,
            snapshot: None,
            undoes: None,
        }
    }
}

/// The result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many lines the file has (0 when it does not exist).
    pub lines: u64,
    /// The first line that breaks the chain and why, or `None` when the chain is intact.
    pub first_broken: Option<(u64, String)>,
    /// SHA-256 of the last line ([`GENESIS`] for an empty log): the chain's head. Kept
    /// somewhere else and compared later, it reveals what the chain alone cannot — lines cut
    /// off the end, an edited last line, a rewritten chain.
    pub head: String,
    /// The chain this one continues (`audit new-chain`), from its first record.
    pub continues: Option<Link>,
    /// Started records with no completion (pxagent was killed while they ran), by seq.
    pub unfinished: Vec<u64>,
}

/// `$XDG_STATE_HOME/pxagent/audit.jsonl`, else `~/.local/state/pxagent/audit.jsonl`.
pub fn default_path() -> Option<PathBuf> {
    // The XDG spec says relative values are invalid and must be ignored.
    if let Some(x) = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
    {
        return Some(x.join("pxagent/audit.jsonl"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/pxagent/audit.jsonl"))
}

/// Append one record and return it as written. Creates the directory (0700) and the file
/// (0600) when missing. Holds an exclusive lock on the log from reading its last line to
/// `fsync`, so concurrent processes append one after another. Reads only the last line,
/// seeking from the end, however long the log is.
///
/// Refuses to append after a last line that is incomplete or not a record (a crash mid-write
/// or a hand edit): chaining onto it would bury the damage. `pxagent audit verify` then
/// names the line.
pub fn append(path: &Path, rec: NewRecord) -> Result<Record> {
    let write_err = |what: &str, e: io::Error| {
        // There is no write-error class in `Error` yet; this is not a user mistake, so it is
        // reported as internal (exit 10) with the path and the OS error.
        Error::Internal(format!(
            "cannot {what} the audit log {}: {e}",
            path.display()
        ))
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| write_err("create the directory of", e))?;
    }
    let mut f = open_locked(path).map_err(|e| write_err("open", e))?;
    let len = f.seek(SeekFrom::End(0)).map_err(|e| write_err("read", e))?;
    let (seq, prev) = if len == 0 {
        (1, GENESIS.to_string())
    } else {
        let last = last_line(&mut f, len).map_err(|e| write_err("read", e))?;
        let Some((start, last)) = last else {
            return Err(Error::Internal(format!(
                "the audit log {} ends with an incomplete line (an interrupted write?); {REPAIR}",
                path.display()
            )));
        };
        let broken = |what: &str| {
            Error::Internal(format!(
                "the last line of the audit log {} {what}; {REPAIR}",
                path.display()
            ))
        };
        let record = serde_json::from_slice::<Record>(&last)
            .map_err(|_| broken("is not an audit record"))?;
        // The tail must be a chain, not just a record: the last line names the one before it
        // (by hash and seq), or is the first line of the file with the genesis hash. A pasted or
        // inserted last record, or an edited or deleted line before it, would otherwise become
        // the base of every later one. (An edit of the last line itself breaks no link: the
        // head hash that `audit verify` prints, kept elsewhere, is what shows that.)
        let linked = if start == 0 {
            record.seq == 1 && record.prev == GENESIS
        } else {
            match last_line(&mut f, start).map_err(|e| write_err("read", e))? {
                Some((_, before)) => {
                    record.prev == sha256_hex(&before)
                        && serde_json::from_slice::<Record>(&before)
                            .is_ok_and(|b| b.seq + 1 == record.seq)
                }
                None => false,
            }
        };
        if !linked {
            return Err(broken(
                "does not link to the line before it (edited, inserted or cut?)",
            ));
        }
        (record.seq + 1, sha256_hex(&last))
    };
    let record = build(rec, seq, prev);
    // Compact JSON escapes every newline inside strings, so one record is one line.
    let mut line = serde_json::to_vec(&record)
        .map_err(|e| Error::Internal(format!("cannot encode an audit record: {e}")))?;
    line.push(b'\n');
    if let Err(e) = f.write_all(&line).and_then(|()| f.sync_data()) {
        // A short write (disk full) would leave half a line that blocks every later append;
        // we still hold the lock, so cut the file back to where it was.
        let _ = f.set_len(len);
        return Err(write_err("write", e));
    }
    Ok(record)
}

/// The seq the next record appended to `path` will get, unless another process appends
/// first (1 for a missing or empty log). Reads only the last line, under a shared lock.
pub fn next_seq(path: &Path) -> Result<u64> {
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(1),
        Err(e) => return Err(read_err(e)),
    };
    f.lock_shared().map_err(read_err)?;
    let len = f.seek(SeekFrom::End(0)).map_err(read_err)?;
    if len == 0 {
        return Ok(1);
    }
    let last = last_line(&mut f, len).map_err(read_err)?;
    last.and_then(|(_, l)| serde_json::from_slice::<Record>(&l).ok())
        .map(|r| r.seq + 1)
        .ok_or_else(|| {
            Error::Internal(format!(
                "the last line of the audit log {} is not a record; {REPAIR}",
                path.display()
            ))
        })
}

/// The record a [`NewRecord`] becomes as line `seq` after a line whose hash is `prev`.
fn build(rec: NewRecord, seq: u64, prev: String) -> Record {
    Record {
        seq,
        time: format_millis(SystemTime::now()),
        host: rec.host,
        account: rec.account,
        op: rec.op,
        argv: rec.argv,
        decision: rec.decision,
        phrase: rec.phrase,
        exit_code: rec.exit_code,
        duration_ms: rec.duration_ms,
        upid: rec.upid,
        via: rec.via,
        error: rec.error,
        transfers: rec.transfers,
        phase: rec.phase,
        started: rec.started,
        continues: rec.continues,
        reconciles: rec.reconciles,
        outcome: rec.outcome,
        undo: rec.undo,
        snapshot: rec.snapshot,
        undoes: rec.undoes,
        prev,
    }
}

/// What to do about a log pxagent cannot append to (part of every such message).
pub const REPAIR: &str = "`pxagent audit verify` names the broken line: repair or move the file, or start a new chain linked to this one's head with `pxagent audit new-chain`";

/// Open the log for appending (creating it 0600) and take its exclusive lock, released when
/// the file is closed. When the path was moved away while this process waited for the lock
/// (`audit new-chain`), the new file is opened instead, so no record lands in the archive.
fn open_locked(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    for _ in 0..10 {
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        f.lock()?;
        let held = f.metadata()?;
        match std::fs::metadata(path) {
            Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => return Ok(f),
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(
        "the file kept being replaced while pxagent waited for its lock",
    ))
}

/// The last line of the first `len` bytes of a file (non-empty), without its newline, and
/// the offset where it starts; `None` when byte `len - 1` is not a newline. Reads backwards in
/// chunks, never the whole file.
fn last_line(f: &mut File, len: u64) -> io::Result<Option<(u64, Vec<u8>)>> {
    const CHUNK: u64 = 4096;
    let mut byte = [0u8];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut byte)?;
    if byte[0] != b'\n' {
        return Ok(None);
    }
    let mut tail: Vec<u8> = Vec::new();
    let mut end = len - 1;
    loop {
        let start = end.saturating_sub(CHUNK);
        let mut chunk = vec![0u8; (end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk)?;
        let cut = chunk.iter().rposition(|&b| b == b'\n');
        if let Some(i) = cut {
            chunk.drain(..=i);
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        if let Some(i) = cut {
            return Ok(Some((start + i as u64 + 1, tail)));
        }
        if start == 0 {
            return Ok(Some((0, tail)));
        }
        end = start;
    }
}

/// Check the whole chain: every line parses as a record, line N has seq N, and its `prev` is
/// the hash of line N-1 (64 zeros for line 1). Stops judging at the first broken line but
/// still counts the rest. A missing file is an empty, intact log (0 lines): the caller
/// should say "no audit log yet at PATH" — and remember that a deleted log looks the same.
pub fn verify(path: &Path) -> Result<Verified> {
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Verified {
                lines: 0,
                first_broken: None,
                head: GENESIS.into(),
                continues: None,
                unfinished: Vec::new(),
            });
        }
        Err(e) => return Err(read_err(e)),
    };
    f.lock_shared().map_err(read_err)?;
    verify_locked(path, &f)
}

/// [`verify`] of the log at `path`, open as `f` and locked by the caller.
fn verify_locked(path: &Path, f: &File) -> Result<Verified> {
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = BufReader::new(f);
    let mut line = Vec::new();
    let (mut lines, mut first_broken, mut head) = (0u64, None, GENESIS.to_string());
    let mut continues = None;
    // Started records not completed yet: seq → op.
    let mut open: std::collections::BTreeMap<u64, String> = Default::default();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(read_err)? == 0 {
            break;
        }
        lines += 1;
        let complete = line.last() == Some(&b'\n');
        if complete {
            line.pop();
        }
        if first_broken.is_none() {
            let verdict = if complete {
                check_line(&line, lines, &head).and_then(|rec| {
                    if lines == 1 {
                        continues = rec.continues.clone();
                    }
                    check_phases(&rec, &mut open)
                })
            } else {
                Err("the line is incomplete (no newline at its end): a write was interrupted or the file was cut".into())
            };
            if let Err(why) = verdict {
                first_broken = Some((lines, why));
            }
        }
        head = sha256_hex(&line);
    }
    Ok(Verified {
        lines,
        first_broken,
        head,
        continues,
        unfinished: open.into_keys().collect(),
    })
}

/// A record's place among the two-phase records before it: a completion must name an earlier
/// started record of the same op that nothing completed yet.
fn check_phases(
    rec: &Record,
    open: &mut std::collections::BTreeMap<u64, String>,
) -> std::result::Result<(), String> {
    match (rec.phase, rec.started) {
        (None, None) => Ok(()),
        (Some(Phase::Started), None) => {
            open.insert(rec.seq, rec.op.clone());
            Ok(())
        }
        (Some(Phase::Done | Phase::Interrupted), Some(n)) => match open.remove(&n) {
            Some(op) if op == rec.op => Ok(()),
            Some(op) => Err(format!(
                "it completes line {n}, which started {op}, not {}",
                rec.op
            )),
            None => Err(format!(
                "it completes line {n}, which is not a started record still waiting for its result"
            )),
        },
        _ => Err("its phase and started fields do not fit together".into()),
    }
}

/// Judge line `n` given the hash of line `n - 1`; the record when it is sound.
fn check_line(line: &[u8], n: u64, prev_hash: &str) -> std::result::Result<Record, String> {
    let rec: Record = serde_json::from_slice(line)
        .map_err(|e| format!("the line is not an audit record ({e})"))?;
    if rec.seq != n {
        return Err(format!(
            "seq is {} where {n} was expected: lines were deleted, inserted or moved before this one",
            rec.seq
        ));
    }
    if rec.prev != prev_hash {
        return Err(if n == 1 {
            "prev is not the start of a chain (64 zeros): lines were deleted from the beginning"
                .into()
        } else {
            format!(
                "prev does not match the hash of line {}: that line was edited, or lines were inserted, deleted or moved here",
                n - 1
            )
        });
    }
    Ok(rec)
}

/// Every record, oldest first, keeping those written at or after `since`. A missing file
/// has no records. A line that is not a record is an error naming it (run [`verify`] for
/// the chain itself).
pub fn read(path: &Path, since: Option<SystemTime>) -> Result<Vec<Record>> {
    let bad = |msg: String| Error::ReadFile {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, msg),
    };
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::ReadFile {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    f.lock_shared().map_err(read_err)?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).split(b'\n').enumerate() {
        let line = line.map_err(read_err)?;
        let n = i + 1;
        let rec: Record = serde_json::from_slice(&line).map_err(|e| {
            bad(format!(
                "line {n} is not an audit record ({e}); run `pxagent audit verify`"
            ))
        })?;
        if let Some(since) = since {
            let t = parse_time(&rec.time).ok_or_else(|| {
                bad(format!(
                    "line {n} has an unreadable time {:?}; run `pxagent audit verify`",
                    rec.time
                ))
            })?;
            if t < since {
                continue;
            }
        }
        out.push(rec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Set by [`separate_processes_never_interleave`] for the child processes it spawns.
    const CHILD_ENV: &str = "PXAGENT_AUDIT_TEST_CHILD_LOG";

    fn rec(op: &str) -> NewRecord {
        NewRecord {
            host: Some("zen-agent@127.0.0.1:2222".into()),
            account: Some("zen-agent".into()),
            argv: vec![
                "sudo".into(),
                "-n".into(),
                "/usr/bin/pvesh".into(),
                "create".into(),
                "/nodes/pve1/qemu/100/status/start".into(),
            ],
            duration_ms: 1234,
            upid: Some("UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:qmstart:100:root@pam:".into()),
            ..NewRecord::new(op, Via::Cli, Verdict::Allowed)
        }
    }

    fn log_with(n: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/pxagent/audit.jsonl");
        for i in 0..n {
            append(&path, rec(&format!("op{i}"))).unwrap();
        }
        (dir, path)
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    fn write_lines(path: &Path, lines: &[String]) {
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(path, text).unwrap();
    }

    fn broken_at(path: &Path) -> (u64, String) {
        verify(path)
            .unwrap()
            .first_broken
            .expect("the chain should be broken")
    }

    #[test]
    fn chain_verifies_after_many_appends() {
        let (_d, path) = log_with(200);
        let v = verify(&path).unwrap();
        assert_eq!(v.lines, 200);
        assert_eq!(v.first_broken, None);
        let all = read(&path, None).unwrap();
        assert_eq!(all.len(), 200);
        assert!(all.iter().enumerate().all(|(i, r)| r.seq == i as u64 + 1));
        assert_eq!(all[0].prev, GENESIS);
        assert_eq!(all[1].prev, sha256_hex(lines(&path)[0].as_bytes()));
        assert_eq!(v.head, sha256_hex(lines(&path)[199].as_bytes()));
    }

    #[test]
    fn append_returns_what_it_wrote_as_one_compact_line() {
        let (_d, path) = log_with(0);
        let mut r = rec("vm.destroy");
        r.decision = Verdict::Refused;
        r.exit_code = 4;
        r.error = Some("line one\nline two".into());
        let written = append(&path, r).unwrap();
        assert_eq!(written.seq, 1);
        assert_eq!(written.prev, GENESIS);
        assert!(parse_time(&written.time).is_some(), "{}", written.time);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches('\n').count(), 1);
        assert!(text.starts_with("{\"seq\":1,\"time\":"), "{text}");
        assert!(text.contains("\"decision\":\"refused\""), "{text}");
        assert!(text.contains("\"via\":\"cli\""), "{text}");
        assert_eq!(read(&path, None).unwrap(), vec![written]);
    }

    #[test]
    fn creates_a_private_directory_and_file() {
        let (d, path) = log_with(1);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&d.path().join("state")), 0o700);
    }

    #[test]
    fn an_edited_middle_line_is_detected() {
        let (_d, path) = log_with(10);
        let mut l = lines(&path);
        // Still valid JSON: only the next line's `prev` can tell.
        l[4] = l[4].replace("\"duration_ms\":1234", "\"duration_ms\":1235");
        write_lines(&path, &l);
        let (n, why) = broken_at(&path);
        assert_eq!(n, 6);
        assert!(why.contains("hash of line 5"), "{why}");

        // One byte that breaks the JSON: the line itself is named.
        let (_d, path) = log_with(10);
        let mut l = lines(&path);
        l[4].replace_range(0..1, "[");
        write_lines(&path, &l);
        let (n, why) = broken_at(&path);
        assert_eq!(n, 5);
        assert!(why.contains("not an audit record"), "{why}");
    }

    #[test]
    fn deleted_inserted_and_swapped_lines_are_detected() {
        let (_d, path) = log_with(10);
        let orig = lines(&path);

        let mut l = orig.clone();
        l.remove(3);
        write_lines(&path, &l);
        assert_eq!(broken_at(&path).0, 4);

        let mut l = orig.clone();
        l.insert(3, orig[3].clone());
        write_lines(&path, &l);
        assert_eq!(broken_at(&path).0, 5);

        // An inserted forgery with the right seq and prev still breaks the next line.
        let mut l = orig.clone();
        let mut forged: Record = serde_json::from_str(&orig[3]).unwrap();
        forged.op = "vm.forged".into();
        l[3] = serde_json::to_string(&forged).unwrap();
        write_lines(&path, &l);
        assert_eq!(broken_at(&path).0, 5);

        let mut l = orig.clone();
        l.swap(3, 4);
        write_lines(&path, &l);
        let (n, why) = broken_at(&path);
        assert_eq!(n, 4);
        assert!(why.contains("seq is 5 where 4"), "{why}");

        let mut l = orig.clone();
        l.remove(0);
        write_lines(&path, &l);
        assert_eq!(broken_at(&path).0, 1);

        // Lines after the break are still counted.
        let mut l = orig.clone();
        l.remove(3);
        write_lines(&path, &l);
        assert_eq!(verify(&path).unwrap().lines, 9);
    }

    #[test]
    fn truncating_the_tail_is_invisible_to_the_chain_but_not_to_the_head() {
        let (_d, path) = log_with(10);
        let head = verify(&path).unwrap().head;
        let l = lines(&path);
        write_lines(&path, &l[..7]);
        let v = verify(&path).unwrap();
        assert_eq!((v.lines, v.first_broken), (7, None));
        assert_ne!(v.head, head);
    }

    #[test]
    fn an_incomplete_last_line_is_reported_and_blocks_appending() {
        let (_d, path) = log_with(3);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() - 10]).unwrap();
        let (n, why) = broken_at(&path);
        assert_eq!(n, 3);
        assert!(why.contains("incomplete"), "{why}");
        let e = append(&path, rec("vm.start")).unwrap_err().to_string();
        assert!(e.contains("incomplete line"), "{e}");
    }

    #[test]
    fn an_edited_or_pasted_last_record_blocks_appending() {
        // The line before the last edited: the last one no longer links to it. (An edit of the
        // last line itself breaks no link: only a head hash kept elsewhere shows it.)
        let (_d, path) = log_with(3);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"op\":\"op1\"", "\"op\":\"opX\"")).unwrap();
        assert_ne!(
            std::fs::read_to_string(&path).unwrap(),
            text,
            "the edit took"
        );
        let e = append(&path, rec("vm.start")).unwrap_err();
        assert_eq!(e.exit_code(), 10);
        assert!(e.to_string().contains("does not link"), "{e}");
        assert!(e.to_string().contains("audit new-chain"), "{e}");
        // Pasted: the last record repeated (its seq and prev point at the wrong line).
        let mut l = lines(&path);
        l.truncate(2);
        l.push(l[1].clone());
        write_lines(&path, &l);
        assert!(
            append(&path, rec("x"))
                .unwrap_err()
                .to_string()
                .contains("does not link")
        );
        // A lone line that is not line 1 of a chain.
        write_lines(&path, &l[1..2]);
        assert!(
            append(&path, rec("x"))
                .unwrap_err()
                .to_string()
                .contains("does not link")
        );
        // An intact tail still appends, after a long line too.
        let (_d2, path) = log_with(2);
        assert_eq!(append(&path, rec("ok")).unwrap().seq, 3);
    }

    #[test]
    fn long_last_lines_are_read_from_the_end() {
        let (_d, path) = log_with(2);
        let mut r = rec("vm.snapshot");
        r.argv.push("x".repeat(20_000));
        append(&path, r).unwrap();
        append(&path, rec("after")).unwrap();
        let v = verify(&path).unwrap();
        assert_eq!((v.lines, v.first_broken), (4, None));
    }

    #[test]
    fn a_missing_log_verifies_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.jsonl");
        assert_eq!(
            verify(&path).unwrap(),
            Verified {
                lines: 0,
                first_broken: None,
                head: GENESIS.into(),
                continues: None,
                unfinished: Vec::new(),
            }
        );
        assert!(read(&path, None).unwrap().is_empty());
    }

    #[test]
    fn concurrent_threads_never_interleave() {
        let (_d, path) = log_with(0);
        let barrier = std::sync::Barrier::new(20);
        std::thread::scope(|s| {
            for i in 0..20 {
                let (path, barrier) = (&path, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    append(path, rec(&format!("thread{i}"))).unwrap();
                });
            }
        });
        let v = verify(&path).unwrap();
        assert_eq!((v.lines, v.first_broken), (20, None));
    }

    /// Helper for [`separate_processes_never_interleave`]: appends one record when run as
    /// its child (the env var names the log); a no-op in a normal test run.
    #[test]
    fn child_process_appends_once() {
        if let Some(path) = std::env::var_os(CHILD_ENV) {
            append(Path::new(&path), rec("child")).unwrap();
        }
    }

    #[test]
    fn separate_processes_never_interleave() {
        let (_d, path) = log_with(0);
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..20)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "--exact",
                        "audit::tests::child_process_appends_once",
                        "--test-threads=1",
                        "--quiet",
                    ])
                    .env(CHILD_ENV, &path)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        let v = verify(&path).unwrap();
        assert_eq!((v.lines, v.first_broken), (20, None));
        assert!(read(&path, None).unwrap().iter().all(|r| r.op == "child"));
    }

    #[test]
    fn read_filters_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut l = Vec::new();
        let mut prev = GENESIS.to_string();
        for (i, time) in [
            "2026-11-30T05:00:00.000Z",
            "2026-11-30T06:00:00.000Z",
            "2026-11-30T07:00:00.000Z",
        ]
        .iter()
        .enumerate()
        {
            let r = Record {
                seq: i as u64 + 1,
                time: time.to_string(),
                host: None,
                account: None,
                op: format!("op{i}"),
                argv: vec![],
                decision: Verdict::DryRun,
                phrase: None,
                exit_code: 0,
                duration_ms: 0,
                upid: None,
                via: Via::Mcp,
                error: None,
                transfers: Vec::new(),
                phase: None,
                started: None,
                continues: None,
                reconciles: None,
                outcome: None,
                undo: None,
                snapshot: None,
                undoes: None,
                prev: prev.clone(),
            };
            let line = serde_json::to_string(&r).unwrap();
            prev = sha256_hex(line.as_bytes());
            l.push(line);
        }
        write_lines(&path, &l);
        assert_eq!(verify(&path).unwrap().first_broken, None);
        let since = parse_time("2026-11-30T06:00:00Z");
        let ops: Vec<String> = read(&path, since)
            .unwrap()
            .into_iter()
            .map(|r| r.op)
            .collect();
        assert_eq!(ops, ["op1", "op2"]);
        assert_eq!(read(&path, None).unwrap().len(), 3);
    }

    #[test]
    fn default_path_follows_xdg() {
        // Only checks the shape: the environment is the developer's.
        if let Some(p) = default_path() {
            assert!(p.ends_with("pxagent/audit.jsonl"), "{}", p.display());
        }
    }
}
