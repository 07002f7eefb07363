//! The host audit chain: the gate's records, hash-chained in a root-owned, append-only file.
//!
//! `pxagent gate` runs as the agent's account, which can neither write nor remove a root file;
//! so for each request it decides, it hands its record (a JSON object on stdin) to
//! `sudo -n pxagent-helper audit-append`, and the helper appends it as one line of
//! `/var/log/pxagent/gate.jsonl` (root, 0640, in a root 0750 directory):
//!
//! - `seq` (consecutive), `time`, and `account`: the account sudo ran the helper for (`SUDO_UID`),
//!   never a value of the record;
//! - `iolog`: the I/O log session sudo gives the account's next command
//!   (`/var/log/sudo-io/ACCOUNT/seq` plus one, as `00/05/VT`; the counter already holds this
//!   append's own session): the command the gate runs right after is that session unless
//!   another session of the account starts in between (sudo's own log line, `TSID=`, is
//!   authoritative);
//! - `record`: the gate's record (request id, decision, approval or grant, command line);
//! - `prev`: the SHA-256 of the previous line's bytes (64 zeros first);
//! - `mac`: an HMAC-SHA256 of the line before it, keyed with 32 random bytes only root reads
//!   (`/var/lib/pxagent-helper/audit.key`, made on first use).
//!
//! `audit-verify [--at N]` reads the file and checks every line: its `seq`, its `prev`, its
//! `mac`. An edited line breaks its MAC; a deleted one the next line's `prev` and `seq`; a line
//! appended by anyone without the key its MAC. What the chain alone cannot show — lines cut off
//! the end, the whole file replaced by root — the head shows: the gate puts each new head in its
//! syslog record (which a remote syslog keeps), and `pxagent audit verify --host` keeps the head
//! it last saw and asks (`--at N`) for line N's hash again.

use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use hmac::{KeyInit, Mac};
use sha2::Digest;

use super::{Failure, hex};

/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The largest record the gate may hand over.
pub const RECORD_MAX: usize = 16 * 1024;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Where the chain, its key and sudo's I/O logs are: fixed paths on a host ([`Chain::host`]),
/// a temporary directory in the tests.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The chain (`/var/log/pxagent/gate.jsonl`).
    pub file: PathBuf,
    /// The MAC key (`/var/lib/pxagent-helper/audit.key`).
    pub key: PathBuf,
    /// sudo's `iolog_dir` base: the account's sessions are under `ACCOUNT/`.
    pub iolog: PathBuf,
}

impl Chain {
    /// The host's paths.
    pub fn host() -> Chain {
        Chain {
            file: PathBuf::from("/var/log/pxagent/gate.jsonl"),
            key: PathBuf::from("/var/lib/pxagent-helper/audit.key"),
            iolog: PathBuf::from("/var/log/sudo-io"),
        }
    }

    /// The key, made on first use (32 bytes of `/dev/urandom`, root-only).
    fn key(&self) -> Result<Vec<u8>, Failure> {
        let failed = |what: &str, e: std::io::Error| {
            Failure::Failed(format!("{what} {}: {e}", self.key.display()))
        };
        match std::fs::read(&self.key) {
            Ok(k) if k.len() == 32 => return Ok(k),
            Ok(_) => {
                return Err(Failure::Failed(format!(
                    "{} is not a 32-byte key: the chain cannot be signed or checked",
                    self.key.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed("cannot read", e)),
        }
        if let Some(dir) = self.key.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| failed("cannot create the directory of", e))?;
        }
        let mut k = vec![0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut r| r.read_exact(&mut k))
            .map_err(|e| Failure::Failed(format!("cannot read /dev/urandom: {e}")))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&self.key)
            .map_err(|e| failed("cannot create", e))?;
        f.write_all(&k)
            .and_then(|_| f.sync_all())
            .map_err(|e| failed("cannot write", e))?;
        Ok(k)
    }

    /// Append the gate's `record` for `account`; returns `{"seq":N,"head":"…"}`.
    pub fn append(&self, account: &str, record: &[u8]) -> Result<String, Failure> {
        if record.len() > RECORD_MAX {
            return Err(Failure::Usage(format!(
                "a record is at most {RECORD_MAX} bytes"
            )));
        }
        let record: serde_json::Value = serde_json::from_slice(record)
            .ok()
            .filter(serde_json::Value::is_object)
            .ok_or_else(|| Failure::Usage("the record is not a JSON object".into()))?;
        let key = self.key()?;
        let failed = |what: &str, e: std::io::Error| {
            Failure::Failed(format!("{what} {}: {e}", self.file.display()))
        };
        if let Some(dir) = self.file.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(dir)
                .map_err(|e| failed("cannot create the directory of", e))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o640)
            // Never reached through a symlink.
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&self.file)
            .map_err(|e| failed("cannot open", e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| failed("cannot lock", e.into()))?;
        let _ = f.set_permissions(std::fs::Permissions::from_mode(0o640));
        let (seq, prev) = match last_line(&mut f).map_err(|e| failed("cannot read", e))? {
            None => (1, GENESIS.to_string()),
            Some(last) => {
                let seq = serde_json::from_slice::<serde_json::Value>(&last)
                    .ok()
                    .and_then(|v| v["seq"].as_u64())
                    .ok_or_else(|| {
                        Failure::Failed(format!(
                            "the last line of {} is no chain record: `pxagent-helper audit-verify` names the damage; move the file aside to start a new chain",
                            self.file.display()
                        ))
                    })?;
                (seq + 1, hex(&sha2::Sha256::digest(&last)))
            }
        };
        let body = serde_json::json!({
            "seq": seq,
            "time": now_rfc3339(),
            "account": account,
            "iolog": self.next_iolog(account),
            "record": record,
            "prev": prev,
        });
        let line = sign(&key, &body.to_string());
        f.write_all(format!("{line}\n").as_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| failed("cannot write", e))?;
        let head = hex(&sha2::Sha256::digest(line.as_bytes()));
        Ok(serde_json::json!({"seq": seq, "head": head}).to_string())
    }

    /// The session id sudo gives the account's next I/O-logged command, when its sequence
    /// file is there.
    fn next_iolog(&self, account: &str) -> serde_json::Value {
        let seq = std::fs::read_to_string(self.iolog.join(account).join("seq")).ok();
        let next = seq
            .and_then(|s| u64::from_str_radix(s.trim(), 36).ok())
            .map(|n| n + 1)
            .filter(|n| *n < 36u64.pow(6));
        match next {
            Some(n) => {
                let digits: String = (0..6)
                    .rev()
                    .map(|i| {
                        let d = (n / 36u64.pow(i)) % 36;
                        std::char::from_digit(d as u32, 36)
                            .unwrap_or('0')
                            .to_ascii_uppercase()
                    })
                    .collect();
                serde_json::json!(format!(
                    "{}/{}/{}",
                    &digits[0..2],
                    &digits[2..4],
                    &digits[4..6]
                ))
            }
            None => serde_json::Value::Null,
        }
    }

    /// Check the whole chain; with `at`, also give line `at`'s hash. Returns the finding as
    /// JSON: `lines`, `head`, `first_broken` (`{line, why}` or null), `at`.
    pub fn verify(&self, at: Option<u64>) -> Result<String, Failure> {
        let f = match std::fs::File::open(&self.file) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(serde_json::json!({
                    "file": self.file.display().to_string(),
                    "lines": 0, "head": GENESIS, "first_broken": null,
                    "at": at.map(|_| serde_json::Value::Null),
                })
                .to_string());
            }
            Err(e) => {
                return Err(Failure::Failed(format!(
                    "cannot open {}: {e}",
                    self.file.display()
                )));
            }
        };
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockShared)
            .map_err(|e| Failure::Failed(format!("cannot lock: {e}")))?;
        let key = self.key()?;
        let mut prev = GENESIS.to_string();
        let mut lines = 0u64;
        let mut first_broken: Option<(u64, String)> = None;
        let mut at_hash = None;
        for line in std::io::BufReader::new(f).split(b'\n') {
            let line = line.map_err(|e| Failure::Failed(format!("cannot read: {e}")))?;
            lines += 1;
            if first_broken.is_none()
                && let Err(why) = check_line(&key, &line, lines, &prev)
            {
                first_broken = Some((lines, why));
            }
            prev = hex(&sha2::Sha256::digest(&line));
            if Some(lines) == at {
                at_hash = Some(prev.clone());
            }
        }
        Ok(serde_json::json!({
            "file": self.file.display().to_string(),
            "lines": lines,
            "head": prev,
            "first_broken": first_broken.map(|(line, why)| serde_json::json!({"line": line, "why": why})),
            "at": at.map(|n| serde_json::json!({"line": n, "hash": at_hash})),
        })
        .to_string())
    }
}

/// `body` (a JSON object) with its `mac` as the last member.
fn sign(key: &[u8], body: &str) -> String {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(body.as_bytes());
    let tag = hex(&mac.finalize().into_bytes());
    format!("{},\"mac\":\"{tag}\"}}", &body[..body.len() - 1])
}

/// Why line `n` (its bytes) does not belong after a line whose hash is `prev`.
fn check_line(key: &[u8], line: &[u8], n: u64, prev: &str) -> Result<(), String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
    let (body, tag) = text
        .strip_suffix("\"}")
        .and_then(|t| t.rsplit_once(",\"mac\":\""))
        .ok_or("no mac: not written by the helper")?;
    let body = format!("{body}}}");
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(body.as_bytes());
    if hex(&mac.finalize().into_bytes()) != tag {
        return Err(
            "its mac does not match: the line was edited or written without the key".into(),
        );
    }
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|_| "not a JSON record".to_string())?;
    if v["seq"].as_u64() != Some(n) {
        return Err(format!(
            "seq {} where {n} belongs: a line before it was removed or inserted",
            v["seq"]
        ));
    }
    if v["prev"].as_str() != Some(prev) {
        return Err("prev is not the hash of the line before: a line before it was edited, removed or inserted".into());
    }
    Ok(())
}

/// The file's last line (without its newline); `None` for an empty file.
fn last_line(f: &mut std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    let len = f.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(None);
    }
    // Records are bounded: the last one lies within the last few tens of KiB.
    let start = len.saturating_sub(4 * RECORD_MAX as u64);
    f.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    let tail = tail.strip_suffix(b"\n").unwrap_or(&tail);
    let from = tail.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    Ok(Some(tail[from..].to_vec()))
}

/// Now, RFC 3339 UTC to the second.
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(dir: &std::path::Path) -> Chain {
        Chain {
            file: dir.join("log/gate.jsonl"),
            key: dir.join("key/audit.key"),
            iolog: dir.join("sudo-io"),
        }
    }

    fn verify(c: &Chain) -> serde_json::Value {
        serde_json::from_str(&c.verify(Some(2)).unwrap()).unwrap()
    }

    #[test]
    fn appended_records_verify_and_every_kind_of_tampering_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let c = chain(dir.path());
        std::fs::create_dir_all(dir.path().join("sudo-io/zen")).unwrap();
        std::fs::write(dir.path().join("sudo-io/zen/seq"), "0005VS\n").unwrap();
        for i in 0..4 {
            let r = c
                .append(
                    "zen",
                    format!("{{\"request\":\"r{i}\",\"decision\":\"allowed\"}}").as_bytes(),
                )
                .unwrap();
            assert!(r.contains(&format!("\"seq\":{}", i + 1)), "{r}");
        }
        let v = verify(&c);
        assert_eq!(v["lines"], 4);
        assert!(v["first_broken"].is_null(), "{v}");
        assert!(v["at"]["hash"].is_string());
        let text = std::fs::read_to_string(&c.file).unwrap();
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains("\"iolog\":\"00/05/VT\""),
            "{text}"
        );
        let mode = std::fs::metadata(&c.file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let original = text.clone();
        let lines: Vec<&str> = original.lines().collect();
        let broken_at = |text: String| {
            std::fs::write(&c.file, text).unwrap();
            verify(&c)["first_broken"]["line"].as_u64()
        };
        // Edited: the MAC.
        let edited = original.replacen("\"r1\"", "\"rX\"", 1);
        assert_eq!(broken_at(edited), Some(2));
        // Deleted: the next line's seq and prev.
        let deleted = [lines[0], lines[2], lines[3]].join("\n") + "\n";
        assert_eq!(broken_at(deleted), Some(2));
        // Appended without the key: no valid MAC.
        let forged = lines[3]
            .replace("\"r3\"", "\"r4\"")
            .replace("\"seq\":4", "\"seq\":5");
        assert_eq!(broken_at(format!("{original}{forged}\n")), Some(5));
        let plain = format!("{original}{{\"seq\":5}}\n");
        assert_eq!(broken_at(plain), Some(5));
        // Cut off the end: the chain holds, the head and line 2's hash tell (the client's check).
        std::fs::write(&c.file, &original).unwrap();
        let full = verify(&c);
        std::fs::write(&c.file, [lines[0], lines[1]].join("\n") + "\n").unwrap();
        let cut = verify(&c);
        assert!(cut["first_broken"].is_null());
        assert_ne!(cut["head"], full["head"]);
        assert_eq!(cut["at"]["hash"], full["at"]["hash"]);
        // A record that is no object, or too long, is refused.
        assert!(matches!(c.append("zen", b"[1]"), Err(Failure::Usage(_))));
        assert!(matches!(
            c.append("zen", &vec![b' '; RECORD_MAX + 1]),
            Err(Failure::Usage(_))
        ));
    }

    #[test]
    fn the_time_is_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }
}
