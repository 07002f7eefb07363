//! `pxagent audit new-chain`: move the log aside and start a new chain linked to the old
//! one's head. It is the way out when the log cannot be appended to (a broken last
//! line blocks every change, see [`super::REPAIR`]), and the way to archive a long log.
//!
//! The old file keeps its name plus the time (`audit.jsonl.20261130T060000Z`); the new file's
//! first record (`op: audit.new-chain`) carries a [`Link`] with that name, the old head and
//! line count, and its first broken line if it had one. The move happens under the old file's
//! exclusive lock, and appenders that waited for that lock reopen the new file
//! ([`super::append`]), so no record lands in the archive after its head was taken.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{GENESIS, Link, NewRecord, Record, Verdict, Via};
use crate::base::error::{Error, Result};

/// Start a new chain at `path`; returns where the old log went and the new chain's first
/// record. `via` and `host` describe who asked (for that record).
pub fn new_chain(path: &Path, via: Via) -> Result<(PathBuf, Record)> {
    let fail = |what: &str, e: std::io::Error| {
        Error::Internal(format!(
            "cannot {what} the audit log {}: {e}",
            path.display()
        ))
    };
    let old = match OpenOptions::new().read(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::usage(format!(
                "there is no audit log at {}: the next audited command starts one",
                path.display()
            )));
        }
        Err(e) => return Err(fail("open", e)),
    };
    old.lock().map_err(|e| fail("lock", e))?;
    let v = super::verify_locked(path, &old)?;
    let archive = archive_name(path);
    fs::rename(path, &archive).map_err(|e| fail("move aside", e))?;
    let link = Link {
        file: archive.display().to_string(),
        head: v.head,
        lines: v.lines,
        first_broken: v.first_broken.map(|(n, _)| n),
    };
    let mut rec = NewRecord::new("audit.new-chain", via, Verdict::Allowed);
    rec.continues = Some(link);
    // The new file must be new: whoever created one meanwhile (nobody can append while we
    // hold the lock on the old one, but a hand could) is not written over.
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail("create", e))?;
    f.lock().map_err(|e| fail("lock", e))?;
    let record = super::build(rec, 1, GENESIS.to_string());
    let mut line = serde_json::to_vec(&record)
        .map_err(|e| Error::Internal(format!("cannot encode an audit record: {e}")))?;
    line.push(b'\n');
    f.write_all(&line)
        .and_then(|()| f.sync_all())
        .map_err(|e| fail("write", e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The rename and the new name survive a crash only once the directory is synced.
        let _ = File::open(dir).and_then(|d| d.sync_all());
    }
    drop(old);
    Ok((archive, record))
}

/// `audit.jsonl.20261130T060000Z`, with `.2`, `.3` … when that name is taken.
fn archive_name(path: &Path) -> PathBuf {
    let stamp: String = crate::base::time::format_millis(SystemTime::now())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(15)
        .collect::<String>()
        + "Z";
    let base = format!("{}.{stamp}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 2;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    candidate
}

/// Whether a chain's link still matches the file it names: `None` when it does, else why
/// not (the file is gone, or its head or length differ from what the link recorded).
pub fn check_link(link: &Link) -> Option<String> {
    let v = match super::verify(Path::new(&link.file)) {
        Ok(v) => v,
        Err(e) => return Some(format!("{} cannot be read: {e}", link.file)),
    };
    if v.lines == 0 && link.lines > 0 {
        return Some(format!(
            "{} is gone (it had {} lines)",
            link.file, link.lines
        ));
    }
    if (v.lines, v.head.as_str()) != (link.lines, link.head.as_str()) {
        return Some(format!(
            "{} now has {} lines and head {}, but the new chain recorded {} lines and head {}",
            link.file, v.lines, v.head, link.lines, link.head
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{append, verify};
    use super::*;

    fn rec(op: &str) -> NewRecord {
        NewRecord::new(op, Via::Cli, Verdict::Allowed)
    }

    #[test]
    fn a_broken_log_is_moved_aside_and_the_new_chain_links_to_its_head() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        for op in ["a", "b", "c"] {
            append(&path, rec(op)).unwrap();
        }
        // A torn last line blocks appending.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"seq\":4,\"ti").unwrap();
        drop(f);
        let before = verify(&path).unwrap();
        assert_eq!(before.first_broken.as_ref().map(|b| b.0), Some(4));
        let e = append(&path, rec("d")).unwrap_err().to_string();
        assert!(e.contains("audit new-chain"), "{e}");

        let (archive, first) = new_chain(&path, Via::Cli).unwrap();
        assert!(
            archive
                .display()
                .to_string()
                .starts_with(&path.display().to_string())
        );
        assert_eq!(first.seq, 1);
        assert_eq!(first.op, "audit.new-chain");
        let link = first.continues.clone().unwrap();
        assert_eq!(link.head, before.head);
        assert_eq!((link.lines, link.first_broken), (4, Some(4)));
        assert_eq!(check_link(&link), None);
        // The new chain verifies, names its predecessor, and takes records again.
        append(&path, rec("d")).unwrap();
        let v = verify(&path).unwrap();
        assert_eq!((v.lines, v.first_broken), (2, None));
        assert_eq!(v.continues, Some(link.clone()));
        // Changing the archive afterwards is visible through the link.
        std::fs::write(&archive, b"").unwrap();
        assert!(check_link(&link).unwrap().contains("gone"));
        // A second new chain gets another archive name.
        let (again, _) = new_chain(&path, Via::Cli).unwrap();
        assert_ne!(again, archive);
    }

    #[test]
    fn no_log_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = new_chain(&dir.path().join("none.jsonl"), Via::Cli).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
