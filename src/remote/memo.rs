//! What a connection of this process alone keeps for the next process to the same host: the
//! guest map ([`super::guests`]) and the connected node, in the state directory
//! (`$XDG_STATE_HOME/pxagent/memo/`, else `~/.local/state/pxagent/memo/`), so that a fresh CLI
//! process does not read `/cluster/resources` again when one did moments ago (on a real host
//! every `pvesh` is a Perl process of a few hundred milliseconds; issue 27).
//!
//! A hint, never an authority: the map says which node to send a guest's command to, and when
//! Proxmox answers that the guest's config is not there the engine looks it up again once
//! ([`super::Remote::relocate`]); the reader applies the map's own age limit
//! ([`super::guests::MAX_AGE`]). Each value is kept per account, host and host key (the file
//! name is the SHA-256 of the three), so another host — or the same name with another key —
//! never sees it. What this process changes it forgets, here too. A value older than
//! [`MAX_KEPT`] is not read at all. Files are written whole (a temporary file renamed over),
//! mode 0600 in a 0700 directory; one that cannot be read or written is simply no memo.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The oldest value read back, whatever its reader's own limit.
pub const MAX_KEPT: Duration = Duration::from_secs(3600);

/// One kept value with when it was read from the host.
#[derive(Serialize, Deserialize)]
struct Kept {
    /// Milliseconds since the epoch when the value was read from the host.
    read_at_ms: u64,
    value: String,
}

/// The memo of one account on one host (see the module doc).
#[derive(Debug, Clone)]
pub struct FileMemo {
    dir: PathBuf,
    scope: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl FileMemo {
    /// The memo in the state directory for `target` (`user@host:port`) with this host key;
    /// `None` without a state directory.
    pub fn new(target: &str, host_key: &str) -> Option<FileMemo> {
        let dir = crate::audit::default_path()?.with_file_name("memo");
        Some(FileMemo::in_dir(dir, target, host_key))
    }

    /// The same in `dir` (for tests).
    pub fn in_dir(dir: PathBuf, target: &str, host_key: &str) -> FileMemo {
        let scope = crate::base::text::sha256_hex(format!("{target}\n{host_key}").as_bytes());
        FileMemo { dir, scope }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{}.{key}.json", &self.scope[..32]))
    }

    /// The value kept under `key` and how old it is.
    pub fn get(&self, key: &str) -> Option<(Vec<u8>, Duration)> {
        let text = std::fs::read(self.path(key)).ok()?;
        let kept: Kept = serde_json::from_slice(&text).ok()?;
        let age = Duration::from_millis(now_ms().checked_sub(kept.read_at_ms)?);
        (age < MAX_KEPT && !kept.value.is_empty()).then(|| (kept.value.into_bytes(), age))
    }

    /// Keep `value` (read from the host `age` ago) under `key`; an empty value forgets it.
    pub fn put(&self, key: &str, value: &[u8], age: Duration) {
        let path = self.path(key);
        let Ok(value) = String::from_utf8(value.to_vec()) else {
            return;
        };
        if value.is_empty() {
            let _ = std::fs::remove_file(&path);
            return;
        }
        let kept = Kept {
            read_at_ms: now_ms().saturating_sub(age.as_millis() as u64),
            value,
        };
        let Ok(bytes) = serde_json::to_vec(&kept) else {
            return;
        };
        if std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .is_err()
        {
            return;
        }
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&bytes));
        if written.is_err() || std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo(dir: &std::path::Path, target: &str, key: &str) -> FileMemo {
        FileMemo::in_dir(dir.to_path_buf(), target, key)
    }

    #[test]
    fn a_value_is_kept_per_account_host_and_host_key_with_its_age() {
        let dir = std::env::temp_dir().join(format!("pxagent-memo-{}", std::process::id()));
        let m = memo(&dir, "zen-agent@h:22", "ssh-ed25519 key SHA256:a");
        assert!(m.get("guests").is_none());
        m.put("guests", b"[1]", Duration::from_secs(2));
        let (v, age) = m.get("guests").unwrap();
        assert_eq!(v, b"[1]");
        assert!(
            age >= Duration::from_secs(2) && age < Duration::from_secs(60),
            "{age:?}"
        );
        // Another host key, account or host sees nothing.
        for other in [
            memo(&dir, "zen-agent@h:22", "ssh-ed25519 key SHA256:b"),
            memo(&dir, "other@h:22", "ssh-ed25519 key SHA256:a"),
            memo(&dir, "zen-agent@h2:22", "ssh-ed25519 key SHA256:a"),
        ] {
            assert!(other.get("guests").is_none());
        }
        // Too old is nothing; empty forgets.
        m.put("old", b"x", MAX_KEPT + Duration::from_secs(1));
        assert!(m.get("old").is_none());
        m.put("guests", b"", Duration::ZERO);
        assert!(m.get("guests").is_none());
        let mode = std::fs::metadata(&dir).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o700
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
