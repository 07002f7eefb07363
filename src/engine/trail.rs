//! What one invocation did, gathered while it runs, and its audit records.
//!
//! The flows fill a [`Trail`] (argv, phrase, UPID, transfers) and call [`Trail::begin`] right
//! before the first command that may change something is sent: that writes the `started`
//! record, or — when it cannot be written — refuses the op (exit 10, nothing sent: pxagent
//! changes nothing it cannot audit). The front end then calls [`Trail::record`] once the
//! invocation ended, which writes the completion (or, for reads, refusals and dry runs, the
//! invocation's one record). If the flow's future is dropped instead (a signal, the MCP
//! server shutting down, a cancelled call, a panic unwinding), the started record's guard
//! ([`Begun`]) writes an `interrupted` completion with what was known by then, so no started
//! record is left without its end unless the process was killed outright.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::audit::{NewRecord, Phase, Verdict, Via};
use crate::base::error::{Error, Result};
use crate::catalog::{Op, Risk};

/// What one invocation did, gathered while it runs, for its audit records.
#[derive(Debug, Default)]
pub struct Trail {
    /// Whether this invocation is audited (it was meant for a host).
    pub audited: bool,
    /// `user@host:port`.
    pub host: Option<String>,
    /// The agent account.
    pub account: Option<String>,
    /// The remote argv of the op.
    pub argv: Vec<String>,
    /// The confirmation phrase that was accepted.
    pub phrase: Option<String>,
    /// The task the op ran (known at the end, or earlier when its log shows it).
    pub upid: Option<String>,
    /// Only reported (dry run).
    pub dry_run: bool,
    /// Files a guest command's flow moves (for the audit record).
    pub transfers: Vec<String>,
    /// The front end, for the `started` record (the completion takes [`Trail::record`]'s).
    pub via: Via,
    /// The audit log; `None`: [`crate::audit::default_path`].
    pub log: Option<PathBuf>,
    /// Notified by [`Trail::begin`] once the op is about to be sent: a front end starts its
    /// spinner and its signal watch then, never over a confirmation prompt.
    pub sending: Option<Arc<tokio::sync::Notify>>,
    /// Set by a front end when a signal cut the op short (the signal's name): the completion
    /// is then `interrupted`.
    pub interrupted: Option<String>,
    /// The `started` record, once [`Trail::begin`] wrote it. Front ends leave it alone.
    pub begun: Option<Begun>,
    /// The change's inverse, once it ran (for its completion record).
    pub undo: Option<crate::audit::UndoStep>,
    /// The snapshot taken before the change (policy `snapshot_before`).
    pub snapshot: Option<String>,
    /// The record this invocation undoes (`pxagent undo`).
    pub undoes: Option<u64>,
}

/// The `started` record of an operation whose completion is not written yet. Dropped without
/// one (see the module doc), it writes an `interrupted` completion itself.
#[derive(Debug)]
pub struct Begun {
    path: PathBuf,
    /// The `started` record's seq (what `reconcile` takes).
    pub seq: u64,
    /// The started record's content, the base of its completion.
    template: NewRecord,
    at: Instant,
    done: AtomicBool,
}

impl Drop for Begun {
    fn drop(&mut self) {
        if self.done.load(Ordering::SeqCst) {
            return;
        }
        let mut rec = self.template.clone();
        rec.phase = Some(Phase::Interrupted);
        rec.started = Some(self.seq);
        // Like a lost connection: the command was sent, its end was not seen.
        rec.exit_code = 7;
        rec.duration_ms = self.at.elapsed().as_millis() as u64;
        rec.error = Some(crate::base::text::printable(&format!(
            "pxagent stopped waiting for {} before its result (shut down, cancelled or failed): it may or may not have completed on the host",
            rec.op
        )));
        if let Err(e) = crate::audit::append(&self.path, rec) {
            crate::output::note(format_args!(
                "warning: could not complete the audit record {} in {}: {e}",
                self.seq,
                self.path.display()
            ));
        }
    }
}

impl Trail {
    /// Where the audit log is.
    pub(super) fn log_path(&self) -> Option<PathBuf> {
        self.log.clone().or_else(crate::audit::default_path)
    }

    /// The decision an invocation's record states, from how it ended.
    fn verdict(&self, err: Option<&Error>) -> Verdict {
        match err {
            _ if self.dry_run => Verdict::DryRun,
            Some(
                Error::Policy(_)
                | Error::ConfirmationRequired { .. }
                | Error::ConfirmationMismatch { .. }
                | Error::RateLimited { .. }
                | Error::Host(_),
            ) => Verdict::Refused,
            Some(Error::Usage(_) | Error::ReadFile { .. } | Error::Internal(_))
                if self.begun.is_none() =>
            {
                Verdict::Failed
            }
            _ if self.phrase.is_some() => Verdict::Confirmed,
            _ => Verdict::Allowed,
        }
    }

    /// This invocation's record as it stands (the caller sets phase and result).
    fn new_record(&self, op: &str, via: Via, decision: Verdict) -> NewRecord {
        let mut rec = NewRecord::new(op, via, decision);
        rec.host = self.host.clone();
        rec.account = self.account.clone();
        // Long values (pushed data, stdin) are recorded by length and digest.
        rec.argv = self
            .argv
            .iter()
            .map(|w| crate::base::text::cut(w).into_owned())
            .collect();
        rec.phrase = self.phrase.clone();
        rec.upid = self.upid.clone();
        rec.transfers = self.transfers.clone();
        rec.snapshot = self.snapshot.clone();
        rec.undoes = self.undoes;
        rec
    }

    /// The op is about to be sent: for an audited op that may change something (risk change,
    /// confirm or exec), write its `started` record first. When that record cannot be written
    /// the op is refused with [`Error::Internal`] (exit 10) saying how to repair the log, and
    /// nothing is sent. Reads only notify [`Trail::sending`]. Calling it again is a no-op.
    pub fn begin(&mut self, op: &Op) -> Result<()> {
        if self.audited && !self.dry_run && op.risk != Risk::Read && self.begun.is_none() {
            let refuse = |why: String| {
                Error::Internal(format!(
                    "`{}` was not sent: its audit record cannot be written ({why}), and pxagent changes nothing it cannot audit",
                    op.id
                ))
            };
            let path = self.log_path().ok_or_else(|| {
                refuse("there is no HOME or XDG_STATE_HOME for the audit log; set one".into())
            })?;
            let mut rec = self.new_record(op.id, self.via, self.verdict(None));
            rec.phase = Some(Phase::Started);
            let written = crate::audit::append(&path, rec.clone()).map_err(|e| {
                let why = match e {
                    Error::Internal(m) => m,
                    e => e.to_string(),
                };
                if why.contains("audit new-chain") {
                    refuse(why)
                } else {
                    refuse(format!(
                        "{why}; make the file and its directory writable for this account, or start a new chain with `pxagent audit new-chain`"
                    ))
                }
            })?;
            self.begun = Some(Begun {
                path,
                seq: written.seq,
                template: rec,
                at: Instant::now(),
                done: AtomicBool::new(false),
            });
        }
        if let Some(n) = &self.sending {
            n.notify_one();
        }
        Ok(())
    }

    /// Record `inv`'s remote argv, with every guest-data value (`--stdin` text, a pushed
    /// file's content) replaced by its length and SHA-256: what went to the guest is
    /// identifiable, never readable, in the audit log.
    pub fn set_argv(&mut self, inv: &crate::catalog::invocation::Invocation) {
        use crate::catalog::Kind;
        let mut values = inv.values.clone();
        for p in inv.op.params.iter().filter(|p| p.kind == Kind::GuestData) {
            if let Some(v) = values.get_mut(p.name) {
                let sum = crate::base::text::sha256_hex(v.as_bytes());
                *v = format!("<{} bytes, sha256 {sum}>", v.len());
            }
        }
        let mut argv = vec!["sudo".to_string(), "-n".to_string()];
        argv.extend(inv.op.argv(&values));
        self.argv = argv;
    }

    /// A line of the op's output as it arrives: a UPID in it is the task's, kept in case the
    /// op is cut short before its end.
    pub fn saw(&mut self, line: &str) {
        if self.upid.is_none()
            && let Some(upid) = crate::remote::find_upid(line)
        {
            if let Some(b) = &mut self.begun {
                b.template.upid = Some(upid.clone());
            }
            self.upid = Some(upid);
        }
    }

    /// A front end's notifier for [`Trail::sending`] (made on first use).
    pub fn sending(&mut self) -> Arc<tokio::sync::Notify> {
        self.sending
            .get_or_insert_with(|| Arc::new(tokio::sync::Notify::new()))
            .clone()
    }

    /// The error of an op a signal cut short, and the note for its completion record: the
    /// command was sent, so it may or may not have happened (exit 7, like a lost connection).
    pub fn interrupt(&mut self, signal: &str, what: &str) -> Error {
        self.interrupted = Some(signal.to_string());
        let task = match &self.upid {
            Some(u) => format!(" (task {u}: see `pxagent task status {u}`)"),
            None => String::new(),
        };
        Error::Connection(format!(
            "interrupted by {signal}: `{what}` was sent and may or may not have completed on the host{task}"
        ))
    }

    /// Append this invocation's record: the completion of its `started` record, or its one
    /// record. A failure to write is a warning on stderr; it never changes the outcome of what
    /// already happened.
    pub fn record(&self, op: &str, via: Via, err: Option<&Error>, code: u8, took: Duration) {
        let Some(path) = self.log_path() else {
            crate::output::note(
                "warning: no HOME or XDG_STATE_HOME, so this invocation was not audited",
            );
            return;
        };
        // A completion names the op its start did (the CLI reports a variant under its path).
        let op = self.begun.as_ref().map_or(op, |b| b.template.op.as_str());
        let mut rec = self.new_record(op, via, self.verdict(err));
        rec.undo = self.undo.clone();
        rec.exit_code = code;
        rec.duration_ms = took.as_millis() as u64;
        // A wrong phrase's message quotes what was typed: keep only the error's kind.
        rec.error = err.map(|e| match e {
            Error::ConfirmationRequired { .. } | Error::ConfirmationMismatch { .. } => {
                e.kind().to_string()
            }
            _ => e.to_string(),
        });
        if let Some(b) = &self.begun {
            rec.phase = Some(match self.interrupted {
                Some(_) => Phase::Interrupted,
                None => Phase::Done,
            });
            rec.started = Some(b.seq);
        }
        match crate::audit::append(&path, rec) {
            Ok(_) => {
                if let Some(b) = &self.begun {
                    b.done.store(true, Ordering::SeqCst);
                }
            }
            Err(e) => crate::output::note(format_args!(
                "warning: could not write the audit log {}: {e}",
                path.display()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{self, Phase};
    use crate::catalog::ops;

    fn trail(log: &std::path::Path) -> Trail {
        Trail {
            audited: true,
            log: Some(log.to_path_buf()),
            argv: vec!["sudo".into(), "-n".into(), "/usr/bin/pvesh".into()],
            ..Trail::default()
        }
    }

    #[test]
    fn a_change_gets_a_started_record_and_its_completion() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let mut t = trail(&log);
        t.begin(&ops::VM_SNAPSHOT).unwrap();
        t.saw("\"UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmsnapshot:100:root@pam:\"");
        t.record("vm.snapshot", Via::Cli, None, 0, Duration::from_millis(5));
        drop(t);
        let recs = audit::read(&log, None).unwrap();
        assert_eq!(recs.len(), 2, "the guard wrote nothing more: {recs:?}");
        assert_eq!(recs[0].phase, Some(Phase::Started));
        assert_eq!(recs[1].phase, Some(Phase::Done));
        assert_eq!(recs[1].started, Some(1));
        assert!(recs[1].upid.as_deref().unwrap().contains("qmsnapshot"));
        // Reads and dry runs stay one record.
        let mut r = trail(&log);
        r.begin(&ops::VM_STATUS).unwrap();
        r.record("vm.status", Via::Cli, None, 0, Duration::ZERO);
        let mut d = trail(&log);
        d.dry_run = true;
        d.begin(&ops::VM_DESTROY).unwrap();
        d.record("vm.destroy", Via::Cli, None, 0, Duration::ZERO);
        let recs = audit::read(&log, None).unwrap();
        assert_eq!(recs.len(), 4);
        assert!(recs[2..].iter().all(|r| r.phase.is_none()));
    }

    #[test]
    fn a_dropped_operation_completes_as_interrupted_with_what_was_known() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let mut t = trail(&log);
        t.via = Via::Mcp;
        t.argv.push("--snapname".into());
        t.argv.push("before-upgrade".into());
        t.begin(&ops::VM_SNAPSHOT).unwrap();
        t.saw("UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmsnapshot:100:root@pam:");
        drop(t);
        let recs = audit::read(&log, None).unwrap();
        assert_eq!(recs.len(), 2);
        let end = &recs[1];
        assert_eq!(end.phase, Some(Phase::Interrupted));
        assert_eq!(
            (end.started, end.exit_code, end.via),
            (Some(1), 7, Via::Mcp)
        );
        assert!(end.argv.contains(&"before-upgrade".to_string()));
        assert!(end.upid.is_some());
        assert_eq!(audit::verify(&log).unwrap().first_broken, None);
        // A signal noted by the front end makes the completion `interrupted` too.
        let mut t = trail(&log);
        t.begin(&ops::VM_START).unwrap();
        let e = t.interrupt("SIGTERM", "vm start 100");
        assert_eq!(e.exit_code(), 7);
        t.record("vm.start", Via::Cli, Some(&e), 7, Duration::ZERO);
        drop(t);
        let recs = audit::read(&log, None).unwrap();
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[3].phase, Some(Phase::Interrupted));
        assert!(recs[3].error.as_deref().unwrap().contains("SIGTERM"));
    }

    #[test]
    fn guest_data_is_recorded_by_length_and_digest_only() {
        let inv = crate::catalog::invocation::Invocation::new(
            &ops::VM_EXEC,
            [
                ("vmid", "100".to_string()),
                ("command", r#"["sort"]"#.to_string()),
                ("input_data", "my secret\n".to_string()),
            ]
            .into(),
        )
        .unwrap();
        let mut t = Trail::default();
        t.set_argv(&inv);
        let joined = t.argv.join(" ");
        assert!(!joined.contains("secret"), "{joined}");
        assert!(joined.contains("<10 bytes, sha256 "), "{joined}");
        assert_eq!(t.argv.len(), inv.remote_argv().len());
    }

    #[test]
    fn changes_fail_closed_when_the_record_cannot_be_written_and_reads_go_on() {
        let dir = tempfile::tempdir().unwrap();
        // A torn last line.
        let torn = dir.path().join("torn.jsonl");
        std::fs::write(&torn, b"{\"seq\":1,\"ti").unwrap();
        // A directory that cannot be created (its parent is a file).
        let blocked = dir.path().join("torn.jsonl/sub/audit.jsonl");
        for (log, expect) in [(&torn, "audit new-chain"), (&blocked, "writable")] {
            for op in [&ops::VM_SNAPSHOT, &ops::VM_DESTROY, &ops::VM_EXEC] {
                let mut t = trail(log);
                let e = t.begin(op).unwrap_err();
                assert_eq!(e.exit_code(), 10, "{e}");
                let msg = e.to_string();
                assert!(
                    msg.contains("was not sent") && msg.contains(expect),
                    "{msg}"
                );
                assert!(t.begun.is_none());
            }
            let mut t = trail(log);
            t.begin(&ops::VM_STATUS).unwrap();
        }
        // Not audited (the engine's in-process tests): nothing is written or refused.
        let mut t = Trail {
            log: Some(torn.clone()),
            ..Trail::default()
        };
        t.begin(&ops::VM_START).unwrap();
    }
}
