//! Single use: the gate records each accepted approval's nonce, and refuses a nonce it has
//! seen.
//!
//! One file per nonce, created with `O_CREAT|O_EXCL` (`create_new`), so that of any number of
//! concurrent gates consuming the same nonce exactly one succeeds — the filesystem is the
//! lock. The file holds the statement's expiry; entries whose expiry lies more than
//! [`MAX_TTL`] in the past are removed on the next consume (an expired statement is refused
//! before its nonce is looked at, so the record is no longer needed). The nonce is checked to
//! be 32 hex characters before it names a file. Uses std only.
//!
//! On a host the store is the host's, not an account's ([`NonceStore::open_shared`]): one
//! root-owned directory with the sticky bit that every gated account's gate writes to, so an
//! approval used as one account is used up for all of them, and no account can remove or
//! rename a record another account's gate made.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::MAX_TTL;
use super::rejection::Rejection;
use super::statement::valid_nonce;

/// The directory of consumed nonces.
#[derive(Debug, Clone)]
pub struct NonceStore {
    dir: PathBuf,
}

impl NonceStore {
    /// Open the store at `dir`, creating it (mode 0700) if missing; refused when it is not a
    /// directory or group or others can write it.
    pub fn open(dir: &Path) -> Result<NonceStore, String> {
        Ok(NonceStore {
            dir: super::private_dir(dir, "nonce directory")?,
        })
    }

    /// Open the host's shared store at `dir` as the gate does: it must already exist (root
    /// makes it: `install -d -o root -g root -m 1777 DIR`), be a real directory owned by root,
    /// and, when others can write it, have the sticky bit, so that a record can only be
    /// removed by the account that made it. Never created here: the gate runs as the account.
    pub fn open_shared(dir: &Path) -> Result<NonceStore, String> {
        super::shared_dir(dir, "nonce directory")?;
        Ok(NonceStore {
            dir: dir.to_path_buf(),
        })
    }

    /// Record `nonce` (of a statement valid until `expires`) as used: [`Rejection::Replayed`]
    /// if it was used before, [`Rejection::Malformed`] if it is not a nonce,
    /// [`Rejection::StoreFailed`] if it cannot be recorded (fail closed).
    pub fn consume(&self, nonce: &str, expires: u64, now: u64) -> Result<(), Rejection> {
        if !valid_nonce(nonce) {
            return Err(Rejection::Malformed(
                "the nonce is not 32 lowercase hex characters".into(),
            ));
        }
        self.prune(now);
        let path = self.dir.join(nonce);
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Rejection::Replayed {
                    nonce: nonce.to_string(),
                });
            }
            Err(e) => {
                return Err(Rejection::StoreFailed(format!(
                    "cannot create {}: {e}",
                    path.display()
                )));
            }
        };
        // The nonce is recorded once the file exists; the expiry only helps pruning, so a
        // failed write is not a reason to refuse.
        let _ = writeln!(file, "{expires}");
        Ok(())
    }

    /// Whether `nonce` has been consumed.
    pub fn contains(&self, nonce: &str) -> bool {
        valid_nonce(nonce) && self.dir.join(nonce).exists()
    }

    /// Remove records whose statement expired more than [`MAX_TTL`] before `now`. A record
    /// without a readable expiry (a crash between create and write) is judged by its mtime.
    fn prune(&self, now: u64) {
        let Some(cutoff) = now.checked_sub(MAX_TTL.as_secs()) else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_str().is_some_and(valid_nonce) {
                continue;
            }
            let path = entry.path();
            let expires = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .or_else(|| {
                    let modified = entry.metadata().ok()?.modified().ok()?;
                    Some(modified.duration_since(UNIX_EPOCH).ok()?.as_secs() + MAX_TTL.as_secs())
                });
            if expires.is_some_and(|e| e < cutoff) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    const N: &str = "00112233445566778899aabbccddeeff";
    const NOW: u64 = 1_796_126_400;

    #[test]
    fn a_nonce_is_good_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = NonceStore::open(&dir.path().join("nonces")).unwrap();
        let mode = std::fs::metadata(dir.path().join("nonces"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(!store.contains(N));
        store.consume(N, NOW + 600, NOW).unwrap();
        assert!(store.contains(N));
        assert_eq!(
            store.consume(N, NOW + 600, NOW + 1),
            Err(Rejection::Replayed { nonce: N.into() })
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("nonces").join(N)).unwrap(),
            format!("{}\n", NOW + 600)
        );
    }

    #[test]
    fn only_real_nonces_touch_the_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let store = NonceStore::open(dir.path()).unwrap();
        for bad in [
            "../escape",
            "",
            "00112233445566778899AABBCCDDEEFF",
            "0011",
            &format!("{N}0"),
        ] {
            let err = store.consume(bad, NOW + 600, NOW).unwrap_err();
            assert_eq!(err.code(), "malformed", "{bad}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn concurrent_consumers_of_one_nonce_get_one_success() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(NonceStore::open(dir.path()).unwrap());
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (store, barrier) = (store.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.consume(N, NOW + 600, NOW)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        assert!(
            results
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| e.code() == "replayed")
        );
    }

    #[test]
    fn old_records_are_pruned_recent_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = NonceStore::open(dir.path()).unwrap();
        let old = "ffffffffffffffffffffffffffffffff";
        let recent = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
        store.consume(old, NOW + 600, NOW).unwrap();
        store.consume(recent, NOW + 3000, NOW + 2000).unwrap();
        std::fs::write(dir.path().join("README"), "not a nonce").unwrap();
        // Past the old one's expiry plus MAX_TTL, not the recent one's.
        store.consume(N, NOW + 6000, NOW + 600 + 3601).unwrap();
        assert!(!store.contains(old));
        assert!(store.contains(recent));
        assert!(dir.path().join("README").exists());
    }

    #[test]
    fn the_shared_store_must_be_roots_and_sticky_when_others_write_it() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("nonces");
        let missing = NonceStore::open_shared(&shared).unwrap_err();
        assert!(
            missing.contains("install -d -o root -g root -m 1777"),
            "{missing}"
        );
        std::fs::create_dir(&shared).unwrap();
        let root = std::fs::metadata("/proc/self").map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == 0
        });
        if root.unwrap() {
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
            let e = NonceStore::open_shared(&shared).unwrap_err();
            assert!(e.contains("without the sticky bit"), "{e}");
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
            let store = NonceStore::open_shared(&shared).unwrap();
            store.consume(N, NOW + 600, NOW).unwrap();
            assert!(store.contains(N));
        } else {
            let e = NonceStore::open_shared(&shared).unwrap_err();
            assert!(e.contains("not owned by root"), "{e}");
        }
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&shared, &link).unwrap();
        let e = NonceStore::open_shared(&link).unwrap_err();
        assert!(e.contains("symlink"), "{e}");
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = NonceStore::open(dir.path()).unwrap_err();
        assert!(
            err.contains("writable by group or others (mode 0777)"),
            "{err}"
        );
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(
            NonceStore::open(&file)
                .unwrap_err()
                .contains("not a directory")
        );
    }
}
