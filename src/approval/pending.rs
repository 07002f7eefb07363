//! The statements the gate issued and that are still open, so that an approval that is only
//! a signature (the `.sig` file of `ssh-keygen -Y sign`) can be matched to its statement
//! without the agent carrying the statement back.
//!
//! One file per statement, named by its nonce and the client it was issued to
//! (`<nonce>.<client tag>`), written through a temporary file and a rename, so a reader never
//! sees half a statement. Expired statements are removed whenever a new one is remembered.
//! An open statement is never dropped to make room: each client (the address sshd reports)
//! has room for [`MAX_PER_CLIENT`] open statements and the store for [`MAX_PENDING`]; past
//! that no new statement is issued until one is used or expires. So an agent that asks again
//! and again cannot fill the disk, nor push out the statement another client's human is
//! signing. Nothing here is trusted for the decision: [`super::check`] still verifies the
//! signature over whichever candidate it tries. Uses std and [`Statement`].

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::check::Requested;
use super::statement::{Statement, valid_nonce};

/// The most open statements kept.
pub const MAX_PENDING: usize = 256;

/// The most open statements one client may have.
pub const MAX_PER_CLIENT: usize = 32;

/// The client tag of a used statement (no client's tag: those are 16 hex digits).
const USED: &str = "used";

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
    /// The client tag from the file name.
    client: String,
    statement: Option<Statement>,
    modified: SystemTime,
}

/// The tag of a client in file names: 16 hex characters of the SHA-256 of its address.
fn client_tag(client: &str) -> String {
    let mut tag = crate::base::text::sha256_hex(client.as_bytes());
    tag.truncate(16);
    tag
}

impl Pending {
    /// Open the store at `dir`, creating it (mode 0700) if missing; refused when it is not a
    /// directory or group or others can write it.
    pub fn open(dir: &Path) -> Result<Pending, String> {
        Ok(Pending {
            dir: super::private_dir(dir, "pending-statement directory")?,
        })
    }

    /// Remember a statement the gate just issued to `client`, after dropping expired ones
    /// (at `now`). `Err` when it cannot be written, or when `client` or the store has no room
    /// left: open statements are never dropped for a new one.
    pub fn remember(&self, st: &Statement, client: &str, now: u64) -> Result<(), String> {
        let tag = client_tag(client);
        let open = self.prune(now);
        let mine = open.iter().filter(|e| e.client == tag).count();
        if mine >= MAX_PER_CLIENT {
            return Err(format!(
                "this client already has {mine} open statements (at most {MAX_PER_CLIENT}), so no new one is issued: have one signed and used, or wait until they expire (within {})",
                crate::base::time::describe_duration(super::DEFAULT_TTL)
            ));
        }
        if open.len() >= MAX_PENDING {
            return Err(format!(
                "the host already has {} open statements (at most {MAX_PENDING}), so no new one is issued until some are used or expire",
                open.len()
            ));
        }
        let path = self.dir.join(format!("{}.{tag}", st.nonce));
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
        Ok(())
    }

    /// The texts of the open statements for exactly this request (host, op and every
    /// parameter), newest first.
    pub fn candidates(&self, req: &Requested, now: u64) -> Vec<String> {
        let mut open: Vec<(Statement, SystemTime)> = self
            .entries()
            .into_iter()
            .filter_map(|e| Some((e.statement?, e.modified)))
            .filter(|(st, _)| {
                st.expires > now
                    && st.host == req.place.host
                    && st.machine_id == req.place.machine_id
                    && st.account == req.place.account
                    && st.op == req.op
                    && &st.args == req.args
            })
            .collect();
        open.sort_by(|(a, am), (b, bm)| b.expires.cmp(&a.expires).then(bm.cmp(am)));
        open.into_iter().map(|(st, _)| st.text()).collect()
    }

    /// Every file named like a statement (`<nonce>` of an older pxagent, or
    /// `<nonce>.<tag>`), with its statement if it holds a valid one for that nonce.
    fn entries(&self) -> Vec<Entry> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let (nonce, client) = name.split_once('.').unwrap_or((&name, ""));
                if !valid_nonce(nonce) {
                    return None;
                }
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                let statement = (meta.len() <= MAX_STATEMENT_BYTES)
                    .then(|| std::fs::read_to_string(e.path()).ok())
                    .flatten()
                    .and_then(|text| Statement::parse(&text).ok())
                    .filter(|st| st.nonce == nonce);
                Some(Entry {
                    path: e.path(),
                    client: client.to_string(),
                    statement,
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                })
            })
            .collect()
    }

    /// Remove expired and unreadable statements; returns the open ones.
    /// Mark the statement with this nonce used (its nonce is spent): it no longer takes its
    /// client's room, and stays until it expires only so that a replay of its bare signature is
    /// still told `replayed`.
    pub fn mark_used(&self, nonce: &str) {
        if !super::statement::valid_nonce(nonce) {
            return;
        }
        for e in self.entries() {
            let named = e
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.split('.').next() == Some(nonce));
            if named && e.client != USED {
                let _ = std::fs::rename(&e.path, self.dir.join(format!("{nonce}.{USED}")));
            }
        }
    }

    fn prune(&self, now: u64) -> Vec<Entry> {
        let mut keep: Vec<Entry> = Vec::new();
        for e in self.entries() {
            match &e.statement {
                Some(st) if st.expires > now => keep.push(e),
                _ => {
                    let _ = std::fs::remove_file(&e.path);
                }
            }
        }
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const NOW: u64 = 1_796_126_400;
    const MID: &str = "5c4b3a2918f7e6d5c4b3a2918f7e6d5c";
    const PLACE: super::super::Place = super::super::Place {
        host: "pve1",
        machine_id: MID,
        account: "zen-agent",
    };

    fn st(nonce: u32, vmid: &str, expires: u64) -> Statement {
        Statement {
            host: "pve1".into(),
            machine_id: MID.into(),
            account: "zen-agent".into(),
            op: "vm.destroy".into(),
            args: BTreeMap::from([("vmid".to_string(), vmid.to_string())]),
            nonce: format!("{nonce:032x}"),
            expires,
        }
    }

    fn request(args: &BTreeMap<String, String>) -> Requested<'_> {
        Requested {
            place: PLACE,
            op: "vm.destroy",
            args,
        }
    }

    #[test]
    fn a_used_statement_frees_its_clients_room_and_stays_a_candidate() {
        let dir = tempfile::tempdir().unwrap();
        let p = Pending::open(dir.path()).unwrap();
        let client = "10.0.0.1";
        for i in 0..MAX_PER_CLIENT as u32 {
            p.remember(&st(i, "100", NOW + 600), client, NOW).unwrap();
        }
        assert!(p.remember(&st(99, "100", NOW + 600), client, NOW).is_err());
        p.mark_used(&st(3, "100", NOW + 600).nonce);
        p.remember(&st(99, "100", NOW + 600), client, NOW).unwrap();
        assert!(p.remember(&st(98, "100", NOW + 600), client, NOW).is_err());
        // The used one is still a candidate, so its replay is told `replayed` by the check.
        let args = BTreeMap::from([("vmid".to_string(), "100".to_string())]);
        let open = p.candidates(&request(&args), NOW);
        assert_eq!(open.len(), MAX_PER_CLIENT + 1);
        assert!(open.iter().any(|t| t.contains(&format!("{:032x}", 3))));
        // Not a nonce: nothing is touched.
        p.mark_used("../x");
        assert_eq!(p.candidates(&request(&args), NOW).len(), MAX_PER_CLIENT + 1);
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
        let mut other_account = st(7, "100", NOW + 600);
        other_account.account = "zen-other".into();
        let mut other_machine = st(8, "100", NOW + 600);
        other_machine.machine_id = "f".repeat(32);
        for s in [
            &older,
            &newer,
            &other_vm,
            &other_host,
            &other_op,
            &more_args,
            &other_account,
            &other_machine,
        ] {
            p.remember(s, "10.0.0.1", NOW).unwrap();
        }
        let args = BTreeMap::from([("vmid".to_string(), "100".to_string())]);
        let req = request(&args);
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
        p.remember(&good, "10.0.0.1", NOW).unwrap();
        // A statement stored under another statement's nonce, and a non-canonical one.
        std::fs::write(dir.path().join(&other.nonce), good.text()).unwrap();
        std::fs::write(
            dir.path().join(format!("{:032x}", 3)),
            st(3, "100", NOW + 600).text().replace('\n', "\r\n"),
        )
        .unwrap();
        let args = BTreeMap::from([("vmid".to_string(), "100".to_string())]);
        assert_eq!(p.candidates(&request(&args), NOW), vec![good.text()]);
    }

    #[test]
    fn one_client_cannot_push_out_anothers_statement() {
        let dir = tempfile::tempdir().unwrap();
        let p = Pending::open(dir.path()).unwrap();
        p.remember(&st(0, "100", NOW + 10), "10.0.0.9", NOW)
            .unwrap();
        let theirs = st(1, "100", NOW + 600);
        p.remember(&theirs, "10.0.0.2", NOW).unwrap();
        let count = || std::fs::read_dir(dir.path()).unwrap().count();
        // A flood from one address fills its own room, then is refused; nothing is evicted.
        let mut refused = 0;
        for i in 2..(2 + MAX_PER_CLIENT as u32 + 20) {
            match p.remember(
                &st(i, "100", NOW + 100 + u64::from(i)),
                "10.0.0.1",
                NOW + 20,
            ) {
                Ok(()) => {}
                Err(e) => {
                    assert!(e.contains("open statements"), "{e}");
                    refused += 1;
                }
            }
        }
        assert_eq!(refused, 20);
        assert_eq!(count(), MAX_PER_CLIENT + 1, "the expired one went");
        let args = BTreeMap::from([("vmid".to_string(), "100".to_string())]);
        assert!(
            p.candidates(&request(&args), NOW + 20)
                .contains(&theirs.text())
        );
        // The other client still gets new statements.
        p.remember(&st(999, "100", NOW + 700), "10.0.0.2", NOW + 20)
            .unwrap();
        // Once the flood's statements expire, its room is free again.
        p.remember(&st(1000, "100", NOW + 2000), "10.0.0.1", NOW + 1000)
            .unwrap();
    }

    #[test]
    fn the_store_as_a_whole_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = Pending::open(dir.path()).unwrap();
        let mut n = 0u32;
        for c in 0..(MAX_PENDING / MAX_PER_CLIENT) {
            for _ in 0..MAX_PER_CLIENT {
                n += 1;
                p.remember(&st(n, "100", NOW + 600), &format!("10.0.1.{c}"), NOW)
                    .unwrap();
            }
        }
        let e = p
            .remember(&st(n + 1, "100", NOW + 600), "10.0.2.1", NOW)
            .unwrap_err();
        assert!(e.contains("the host already has 256"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), MAX_PENDING);
    }
}
