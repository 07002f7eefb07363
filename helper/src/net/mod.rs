//! The network change with a revert the host makes by itself (`network apply`).
//!
//! PVE applies a node's pending network configuration (`pvesh set /nodes/localhost/network`:
//! `interfaces.new` moved over `interfaces`, then `ifreload -a`) with no way back when the new
//! configuration cuts the host off. So the account never applies it directly; it asks the
//! helper:
//!
//! - `net-arm SECONDS` (30-600): with nothing armed and something pending, keeps a copy of
//!   `/etc/network/interfaces` in a root-only directory, schedules the revert (a transient
//!   systemd timer where systemd runs, otherwise a detached root process of its own process
//!   group), then applies, and prints a random token;
//! - `net-confirm TOKEN`, sent by the client over a **new** SSH connection, proves the host is
//!   still reachable: the revert is called off;
//! - with no confirm before the deadline (the apply cut the host off, or the client died), the
//!   scheduled `net-revert ID` puts the copy back, drops anything pending, runs `ifreload -a`
//!   and writes a record (syslog and the directory's `history.jsonl`).
//!
//! `net-pending` shows the diff PVE would apply and whether a change is armed. One armed change
//! at a time; every step holds the directory's lock. Everything the account supplies is an
//! integer or the token the helper made (only its SHA-256 is kept).

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::Digest;

use super::{Failure, hex, root_command as tool};

/// The shortest and longest revert window, in seconds.
pub const WINDOW: std::ops::RangeInclusive<u32> = 30..=600;

/// Where a network change is applied and reverted, and with what: fixed paths on a host
/// ([`Net::host`]), a temporary directory in the tests.
#[derive(Debug, Clone)]
pub struct Net {
    /// `/etc/network/interfaces`; PVE keeps the pending change beside it as `interfaces.new`.
    pub interfaces: PathBuf,
    /// The helper's root-only directory (0700): lock, armed change, copy, history.
    pub state: PathBuf,
    /// The Proxmox CLI that applies the pending change.
    pub pvesh: PathBuf,
    /// What reloads the network after a revert.
    pub ifreload: PathBuf,
    /// The program the scheduled revert runs (the helper itself).
    pub helper: PathBuf,
    /// How the revert is scheduled.
    pub schedule: Schedule,
}

/// How the revert is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// A transient timer owned by PID 1 (`systemd-run --on-active`).
    Systemd,
    /// A detached root process that waits (`net-watch ID`), where systemd does not run.
    Waiter,
    /// Nothing (unit tests call [`Net::watch`] themselves).
    None,
}

/// The armed change, as kept in `armed.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Armed {
    /// Names this arm in the schedule and the history (16 hex digits).
    pub id: String,
    /// The SHA-256 of the token the client got.
    pub token_sha256: String,
    /// Unix seconds.
    pub armed_at: u64,
    /// Unix seconds: no confirm by then, and the revert runs.
    pub deadline: u64,
}

impl Armed {
    fn to_json(&self) -> String {
        serde_json::json!({
            "id": self.id, "token_sha256": self.token_sha256,
            "armed_at": self.armed_at, "deadline": self.deadline,
        })
        .to_string()
    }

    fn from_json(text: &str) -> Option<Armed> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(Armed {
            id: v.get("id")?.as_str()?.to_string(),
            token_sha256: v.get("token_sha256")?.as_str()?.to_string(),
            armed_at: v.get("armed_at")?.as_u64()?,
            deadline: v.get("deadline")?.as_u64()?,
        })
    }
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn sha256_hex(s: &str) -> String {
    hex(&sha2::Sha256::digest(s.as_bytes()))
}

/// `n` random bytes from the kernel, as hex.
fn random_hex(n: usize) -> Result<String, Failure> {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| Failure::Failed(format!("/dev/urandom: {e}")))?;
    Ok(hex(&buf))
}

fn fail(what: &str, e: std::io::Error) -> Failure {
    Failure::Failed(format!("{what}: {e}"))
}

/// Write `text` to `path` through a temporary file beside it, synced, then renamed over it.
fn replace_file(path: &Path, text: &[u8], mode: u32) -> Result<(), Failure> {
    let tmp = path.with_extension("pxagent-tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)
        .map_err(|e| fail(&tmp.display().to_string(), e))?;
    f.write_all(text)
        .and_then(|()| f.sync_all())
        .map_err(|e| fail(&tmp.display().to_string(), e))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(&path.display().to_string(), e))
}

impl Net {
    /// The fixed paths of a host; the revert is a systemd timer where systemd runs.
    pub fn host() -> Net {
        Net {
            interfaces: PathBuf::from("/etc/network/interfaces"),
            state: PathBuf::from("/var/lib/pxagent-helper"),
            pvesh: PathBuf::from(super::PVESH),
            ifreload: PathBuf::from("/usr/sbin/ifreload"),
            helper: PathBuf::from("/usr/local/lib/pxagent/pxagent-helper"),
            schedule: if Path::new("/run/systemd/system").is_dir() {
                Schedule::Systemd
            } else {
                Schedule::Waiter
            },
        }
    }

    fn pending_file(&self) -> PathBuf {
        let mut p = self.interfaces.clone().into_os_string();
        p.push(".new");
        PathBuf::from(p)
    }

    fn armed_file(&self) -> PathBuf {
        self.state.join("armed.json")
    }

    fn before_file(&self) -> PathBuf {
        self.state.join("interfaces.before")
    }

    /// The state directory (root's, 0700), created when missing; then its lock, held until
    /// the returned file is dropped.
    fn lock(&self) -> Result<std::fs::File, Failure> {
        let shown = self.state.display().to_string();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.state)
            .map_err(|e| fail(&shown, e))?;
        let meta = std::fs::symlink_metadata(&self.state).map_err(|e| fail(&shown, e))?;
        if !meta.is_dir() || meta.permissions().mode() & 0o077 != 0 {
            return Err(Failure::Refused(format!(
                "{shown} must be a directory only its owner can use (0700)"
            )));
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.state.join("net.lock"))
            .map_err(|e| fail("net.lock", e))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| Failure::Failed(format!("lock {shown}/net.lock: {e}")))?;
        Ok(f)
    }

    /// The armed change, if any.
    pub fn armed(&self) -> Result<Option<Armed>, Failure> {
        match std::fs::read_to_string(self.armed_file()) {
            Ok(t) => Armed::from_json(&t).map(Some).ok_or_else(|| {
                Failure::Failed(format!("{} is damaged", self.armed_file().display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fail("armed.json", e)),
        }
    }

    /// Append one record to `history.jsonl` and send it to syslog (best effort: the file is
    /// the record that counts).
    fn record(&self, event: &str, armed: &Armed, why: &str) -> Result<(), Failure> {
        let line = serde_json::json!({
            "at": now(), "event": event, "id": armed.id,
            "armed_at": armed.armed_at, "deadline": armed.deadline, "why": why,
        })
        .to_string();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.state.join("history.jsonl"))
            .map_err(|e| fail("history.jsonl", e))?;
        writeln!(f, "{line}")
            .and_then(|()| f.sync_all())
            .map_err(|e| fail("history.jsonl", e))?;
        syslog(&format!("network change {} {event}: {why}", armed.id));
        Ok(())
    }

    /// `net-pending`: the diff between the running configuration and the pending one (empty
    /// when nothing is pending) and the armed change, as one JSON object.
    pub fn pending(&self) -> Result<String, Failure> {
        let diff = if self.pending_file().exists() {
            let out = tool(Path::new("/usr/bin/diff"))
                .arg("-u")
                .arg(&self.interfaces)
                .arg(self.pending_file())
                .output()
                .map_err(|e| fail("/usr/bin/diff", e))?;
            if out.status.code().is_none_or(|c| c > 1) {
                return Err(Failure::Failed(format!(
                    "diff: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            String::from_utf8_lossy(&out.stdout).into_owned()
        } else {
            String::new()
        };
        let armed = self.armed()?.map(
            |a| serde_json::json!({"id": a.id, "armed_at": a.armed_at, "deadline": a.deadline}),
        );
        Ok(
            serde_json::json!({"pending": !diff.is_empty(), "diff": diff, "armed": armed})
                .to_string(),
        )
    }

    /// `net-arm SECONDS`: see the module doc. Prints `{token, id, deadline, seconds, upid}`.
    pub fn arm(&self, seconds: u32) -> Result<String, Failure> {
        if !WINDOW.contains(&seconds) {
            return Err(Failure::Usage(format!(
                "a revert window is {} to {} seconds, not {seconds}",
                WINDOW.start(),
                WINDOW.end()
            )));
        }
        let _lock = self.lock()?;
        if let Some(a) = self.armed()? {
            return Err(Failure::Exists(format!(
                "a network change is already armed (id {}, reverted at {} unless confirmed): one at a time",
                a.id, a.deadline
            )));
        }
        if !self.pending_file().exists() {
            return Err(Failure::Refused(
                "nothing is pending: there is no network change to apply".into(),
            ));
        }
        let before = std::fs::read(&self.interfaces)
            .map_err(|e| fail(&self.interfaces.display().to_string(), e))?;
        replace_file(&self.before_file(), &before, 0o600)?;
        let token = random_hex(16)?;
        let armed_at = now();
        let armed = Armed {
            id: random_hex(8)?,
            token_sha256: sha256_hex(&token),
            armed_at,
            deadline: armed_at + u64::from(seconds),
        };
        replace_file(&self.armed_file(), armed.to_json().as_bytes(), 0o600)?;
        // The revert is scheduled before anything changes: a helper killed during the apply
        // still leaves it behind.
        if let Err(e) = self.schedule(&armed, seconds) {
            let _ = std::fs::remove_file(self.armed_file());
            return Err(e);
        }
        self.record(
            "armed",
            &armed,
            &format!("revert in {seconds} s unless confirmed"),
        )?;
        let upid = match self.apply() {
            Ok(upid) => upid,
            Err(e) => {
                let why = format!("the apply failed ({}): reverted at once", e.message());
                self.revert_locked(&armed, &why)?;
                return Err(Failure::Failed(format!(
                    "{}; the previous configuration is back",
                    e.message()
                )));
            }
        };
        Ok(serde_json::json!({
            "token": token, "id": armed.id, "deadline": armed.deadline,
            "seconds": seconds, "upid": upid,
        })
        .to_string())
    }

    /// Start the revert's clock.
    fn schedule(&self, armed: &Armed, seconds: u32) -> Result<(), Failure> {
        match self.schedule {
            Schedule::None => Ok(()),
            Schedule::Systemd => {
                let out = tool(Path::new("/usr/bin/systemd-run"))
                    .args([
                        "--quiet",
                        "--collect",
                        &format!("--unit=pxagent-net-revert-{}", armed.id),
                        &format!("--on-active={seconds}s"),
                        "--timer-property=AccuracySec=1s",
                    ])
                    .arg(&self.helper)
                    .args(["net-revert", &armed.id])
                    .output()
                    .map_err(|e| fail("systemd-run", e))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(Failure::Failed(format!(
                        "systemd-run could not schedule the revert: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    )))
                }
            }
            Schedule::Waiter => {
                // Its own process group: neither sudo's nor the gate's end of the session
                // reaches it; no stdio: nothing holds the session's pty open.
                tool(&self.helper)
                    .args(["net-watch", &armed.id])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .map(drop)
                    .map_err(|e| fail("starting the revert waiter", e))
            }
        }
    }

    /// `pvesh set /nodes/localhost/network`, then the task's own status: its UPID.
    fn apply(&self) -> Result<String, Failure> {
        let out = tool(&self.pvesh)
            .args(["set", "/nodes/localhost/network"])
            .output()
            .map_err(|e| fail(&self.pvesh.display().to_string(), e))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(Failure::Failed(format!(
                "pvesh set /nodes/localhost/network: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let Some(upid) = stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with("UPID:"))
        else {
            return Ok(String::new());
        };
        let status = tool(&self.pvesh)
            .args([
                "get",
                &format!("/nodes/localhost/tasks/{upid}/status"),
                "--output-format",
                "json",
            ])
            .output()
            .map_err(|e| fail("pvesh get …/status", e))?;
        let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
        match v.get("exitstatus").and_then(|s| s.as_str()) {
            Some("OK") => Ok(upid.to_string()),
            other => Err(Failure::Failed(format!(
                "the reload task {upid} ended with {}",
                other.unwrap_or("no status")
            ))),
        }
    }

    /// `net-confirm TOKEN`: the client reached the host again; the revert is called off.
    pub fn confirm(&self, token: &str) -> Result<String, Failure> {
        let _lock = self.lock()?;
        let Some(armed) = self.armed()? else {
            return Err(Failure::Refused(format!(
                "no network change is armed{}",
                self.last_event()
                    .map(|e| format!(" (last: {e})"))
                    .unwrap_or_default()
            )));
        };
        if sha256_hex(token) != armed.token_sha256 {
            return Err(Failure::Refused(
                "that is not the token of the armed network change".into(),
            ));
        }
        if now() >= armed.deadline {
            return Err(Failure::Refused(format!(
                "too late: the window ended at {}, the revert runs now",
                armed.deadline
            )));
        }
        let _ = std::fs::remove_file(self.before_file());
        std::fs::remove_file(self.armed_file()).map_err(|e| fail("armed.json", e))?;
        self.record("confirmed", &armed, "the client reached the host again")?;
        if self.schedule == Schedule::Systemd {
            // Tidy only: a timer that fires finds nothing armed under its id.
            let _ = tool(Path::new("/usr/bin/systemctl"))
                .args(["stop", &format!("pxagent-net-revert-{}.timer", armed.id)])
                .output();
        }
        Ok(serde_json::json!({"confirmed": true, "id": armed.id}).to_string())
    }

    /// `net-revert [ID]`: revert the armed change (only the one named ID, when given) now.
    pub fn revert(&self, id: Option<&str>, why: &str) -> Result<String, Failure> {
        let _lock = self.lock()?;
        let Some(armed) = self.armed()? else {
            return Ok(serde_json::json!({"reverted": false, "why": "nothing armed"}).to_string());
        };
        if id.is_some_and(|id| id != armed.id) {
            return Ok(
                serde_json::json!({"reverted": false, "why": "another change is armed"})
                    .to_string(),
            );
        }
        self.revert_locked(&armed, why)?;
        Ok(serde_json::json!({"reverted": true, "id": armed.id}).to_string())
    }

    /// Put the copy back, drop what is pending, reload, record; the lock is held.
    fn revert_locked(&self, armed: &Armed, why: &str) -> Result<(), Failure> {
        let before = std::fs::read(self.before_file()).map_err(|e| fail("interfaces.before", e))?;
        replace_file(&self.interfaces, &before, 0o644)?;
        match std::fs::remove_file(self.pending_file()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail("interfaces.new", e)),
        }
        let reload = tool(&self.ifreload).arg("-a").output();
        let reloaded = match &reload {
            Ok(o) if o.status.success() => String::new(),
            Ok(o) => format!(
                "; ifreload -a failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => format!("; ifreload -a could not run: {e}"),
        };
        let _ = std::fs::remove_file(self.before_file());
        std::fs::remove_file(self.armed_file()).map_err(|e| fail("armed.json", e))?;
        self.record("reverted", armed, &format!("{why}{reloaded}"))
    }

    /// `net-watch ID`: wait until the armed change's deadline, then revert it when it is
    /// still the one armed (a confirm removes it; a later arm has another id).
    pub fn watch(&self, id: &str) -> Result<String, Failure> {
        loop {
            let armed = {
                let _lock = self.lock()?;
                self.armed()?
            };
            match armed {
                Some(a) if a.id == id => {
                    let left = a.deadline.saturating_sub(now());
                    if left == 0 {
                        return self.revert(
                            Some(id),
                            "no confirm arrived within the window: the previous configuration is back",
                        );
                    }
                    std::thread::sleep(std::time::Duration::from_secs(left.min(5)));
                }
                _ => {
                    return Ok(
                        serde_json::json!({"reverted": false, "why": "confirmed or gone"})
                            .to_string(),
                    );
                }
            }
        }
    }

    /// The last history event, `confirmed at T` / `reverted at T`.
    fn last_event(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.state.join("history.jsonl")).ok()?;
        let v: serde_json::Value = serde_json::from_str(text.lines().last()?).ok()?;
        Some(format!(
            "{} at {}",
            v.get("event")?.as_str()?,
            v.get("at")?.as_u64()?
        ))
    }
}

/// One record to the host's syslog (`/dev/log`), as `pxagent-helper`; nothing when there is
/// no syslog.
fn syslog(msg: &str) {
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    // Facility auth (4), severity notice (5): next to sudo's own records.
    let line = format!(
        "<{}>pxagent-helper[{}]: {msg}",
        4 * 8 + 5,
        std::process::id()
    );
    let _ = sock.send_to(line.as_bytes(), "/dev/log");
}

/// A token the helper made: 32 lower-case hex digits.
pub fn token_ok(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// An arm id: 16 lower-case hex digits.
pub fn id_ok(s: &str) -> bool {
    s.len() == 16
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

#[cfg(test)]
mod tests;
