//! The statements the gate issued and that are still open, so that an approval that is only
//! a signature (the `.sig` file of `ssh-keygen -Y sign`) can be matched to its statement
//! without the agent carrying the statement back.
//!
//! One file per statement, named by its nonce and written through a temporary file and a
//! rename, so a reader never sees half a statement. Expired statements are removed whenever a
//! new one is remembered, and at most [`MAX_PENDING`] are kept (the earliest to expire go
//! first), so an agent that asks again and again cannot fill the disk. Nothing here is
//! trusted for the decision: [`super::check`] still verifies the signature over whichever
//! candidate it tries. Uses std and [`Statement`].

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::check::Request;
use super::statement::{Statement, valid_nonce};

/// The most open statements kept.
pub const MAX_PENDING: usize = 256;

/// Largest file read as a statement.
const MAX_STATEMENT_BYTES: u64 = 64 * 1024;

/// The directory of statements the gate issued.
#[derive(Debug, Clone)]
pub struct Pending {
    dir: PathBuf,
}

/// One stored statement and what orders it.
struct Entry {
    path: PathBuf,
    statement: Option<Statement>,
    modified: SystemTime,
}

impl Pending {
    /// Open the store at `dir`, creating it (mode 0700) if missing; refused when it is not a
    /// directory or group or others can write it.
    pub fn open(dir: &Path) -> Result<Pending, String> {
        Ok(Pending {
            dir: super::private_dir(dir, "pending-statement directory")?,
        })
    }

    /// Remember a statement the gate just issued; drops expired ones (at `now`) and the
    /// earliest to expire beyond [`MAX_PENDING`].
    pub fn remember(&self, st: &Statement, now: u64) -> Result<(), String> {
        let path = self.dir.join(&st.nonce);
        let tmp = self.dir.join(format!(".{}.tmp", st.nonce));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(st.text().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!(
                "cannot record the statement in {}: {e}",
                path.display()
            ));
        }
        self.prune(now);
        Ok(())
    }

    /// The texts of the open statements for exactly this request (host, op and every
    /// parameter), newest first.
    pub fn candidates(&self, req: &Request, now: u64) -> Vec<String> {
        let mut open: Vec<(Statement, SystemTime)> = self
            .entries()
            .into_iter()
            .filter_map(|e| Some((e.statement?, e.modified)))
            .filter(|(st, _)| {
                st.expires > now && st.host == req.host && st.op == req.op && &st.args == req.args
            })
            .collect();
        open.sort_by(|(a, am), (b, bm)| b.expires.cmp(&a.expires).then(bm.cmp(am)));
        open.into_iter().map(|(st, _)| st.text()).collect()
    }

    /// Every file named like a nonce, with its statement if it holds a valid one for that
    /// nonce.
    fn entries(&self) -> Vec<Entry> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.flatten()
            .filter(|e| e.file_name().to_str().is_some_and(valid_nonce))
            .filter_map(|e| {
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                let statement = (meta.len() <= MAX_STATEMENT_BYTES)
                    .then(|| std::fs::read_to_string(e.path()).ok())
                    .flatten()
                    .and_then(|text| Statement::parse(&text).ok())
                    .filter(|st| e.file_name().to_str() == Some(st.nonce.as_str()));
                Some(Entry {
                    path: e.path(),
                    statement,
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                })
            })
            .collect()
    }

    fn prune(&self, now: u64) {
        let mut keep: Vec<Entry> = Vec::new();
        for e in self.entries() {
            match &e.statement {
                Some(st) if st.expires > now => keep.push(e),
                _ => {
                    let _ = std::fs::remove_file(&e.path);
                }
            }
        }
        if keep.len() <= MAX_PENDING {
            return;
        }
        let expires = |e: &Entry| e.statement.as_ref().map_or(0, |s| s.expires);
        keep.sort_by(|a, b| {
            expires(a)
                .cmp(&expires(b))
                .then(a.modified.cmp(&b.modified))
        });
        for e in &keep[..keep.len() - MAX_PENDING] {
            let _ = std::fs::remove_file(&e.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const NOW: u64 = 1_796_126_400;

    fn st(nonce: u32, vmid: &str, expires: u64) -> Statement {
        Statement {
            host: "pve1".into(),
            op: "vm.destroy".into(),
            args: BTreeMap::from([("vmid".to_string(), vmid.to_string())]),
            nonce: format!("{nonce:032x}"),
            expires,
        }
    }

    #[test]
    fn candidates_are_open_exact_matches_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = Pending::open(dir.path()).unwrap();
        let older = st(1, "100", NOW + 300);
        let newer = st(2, "100", NOW + 600);
        let other_vm = st(3, "101", NOW + 600);
        let mut other_host = st(4, "100", NOW + 600);
        other_host.host = "pve2".into();
        let mut other_op = st(5, "100", NOW + 600);
        other_op.op = "vm.stop".into();
        let mut more_args = st(6, "100", NOW + 600);
        more_args.args.insert("purge".into(), "1".into());
        for s in [
            &older,
            &newer,
            &other_vm,
            &other_host,
            &other_op,
            &more_args,
        ] {
            p.remember(s, NOW).unwrap();
        }
        let args = BTreeMap::from([("vmid".to_string(), "100".to_string())]);
        let req = Request {
            host: "pve1",
            op: "vm.destroy",
            args: &args,
        };
        assert_eq!(p.candidates(&req, NOW), vec![newer.text(), older.text()]);
        // The older one has expired by then.
        assert_eq!(p.candidates(&req, NOW + 300), vec![newer.text()]);
        assert!(p.candidates(&req, NOW + 600).is_empty());
    }

    #[test]
    fn tampered_or_misnamed_files_are_no_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let p = Pending::open(dir.path()).unwrap();
        let good = st(1, "100", NOW + 600);
        let other = st(2, "100", NOW + 600);
        p.remember(&good, NOW).unwrap();
        // A statement stored under another statement's nonce, and a non-canonical one.
        std::fs::write(dir.path().join(&other.nonce), good.text()).unwrap();
        std::fs::write(
            dir.path().join(format!("{:032x}", 3)),
            st(3, "100", NOW + 600).text().replace('\n', "\r\n"),
        )
        .unwrap();
        let args = BTreeMap::from([("vmid".to_string(), "100".to_string())]);
        let req = Request {
            host: "pve1",
            op: "vm.destroy",
            args: &args,
        };
        assert_eq!(p.candidates(&req, NOW), vec![good.text()]);
    }

    #[test]
    fn expired_ones_go_and_the_count_is_capped() {
        let dir = tempfile::tempdir().unwrap();
        let p = Pending::open(dir.path()).unwrap();
        p.remember(&st(0, "100", NOW + 10), NOW).unwrap();
        let count = || std::fs::read_dir(dir.path()).unwrap().count();
        for i in 1..=(MAX_PENDING as u32 + 9) {
            p.remember(&st(i, "100", NOW + 100 + u64::from(i)), NOW + 20)
                .unwrap();
        }
        assert_eq!(count(), MAX_PENDING);
        assert!(!dir.path().join(format!("{:032x}", 0)).exists(), "expired");
        // The earliest to expire were dropped, the newest kept.
        assert!(!dir.path().join(format!("{:032x}", 9)).exists());
        assert!(dir.path().join(format!("{:032x}", 10)).exists());
        assert!(
            dir.path()
                .join(format!("{:032x}", MAX_PENDING as u32 + 9))
                .exists()
        );
    }
}
