//! pxagent's root-side helper: the one program pxagent's account may run as root besides the
//! Proxmox tools, reached only through fixed sudoers lines that `pxagent setup render` writes.
//! It does two jobs no Proxmox command line does: it receives an ISO image (below), and it
//! applies a node's pending network change with a revert the host makes by itself ([`net`]).
//!
//! `pxagent-helper iso-receive --max-used PERCENT STORAGE NAME SIZE SHA256` takes an ISO image
//! on stdin (the SSH channel) and publishes it as `STORAGE:iso/NAME`. Everything the account
//! supplies is a storage id, a file name, a number or a digest, each checked here again (the
//! sudoers rule checks them first); the helper finds the directory itself from the storage's
//! config and never opens a path the account can create, name or swap:
//!
//! - the storage must be directory-backed, enabled and hold `iso` content;
//! - `PATH/template/iso` is opened one component at a time with `O_NOFOLLOW | O_DIRECTORY`, so
//!   a symlink anywhere on the way is refused, and everything after is relative to that open
//!   directory;
//! - before a byte is read: NAME must not exist, and SIZE must leave the file system at most
//!   PERCENT full (`fstatvfs` of that directory);
//! - the bytes go into an unnamed `O_TMPFILE` in that directory, hashed as they arrive; more or
//!   fewer than SIZE bytes, or another SHA-256, and the file vanishes with the process;
//! - only then is it given its name with `linkat`, which fails when NAME appeared meanwhile:
//!   never an overwrite, never a half file; synced before and after.
//!
//! Where a file system has no `O_TMPFILE`, the bytes go to `.NAME.pxagent-partial`, created
//! exclusively without following symlinks, removed on every failure the helper sees, and renamed
//! with `RENAME_NOREPLACE`.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use sha2::Digest;

pub mod chain;
mod check;
pub mod net;
pub use check::{Command, Request, parse_args, parse_command};

/// The Proxmox CLI the helper asks for a storage's config (absolute: sudo's `secure_path`
/// does not matter, and neither does the caller's PATH).
pub const PVESH: &str = "/usr/bin/pvesh";

/// Storage types whose `path` is a mounted directory PVE keeps `template/iso` under.
pub const DIR_TYPES: &[&str] = &["dir", "nfs", "cifs", "cephfs", "btrfs"];

/// How the helper failed; the exit code tells the class.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// A malformed command line (exit 2): the sudoers rule should never let one through.
    Usage(String),
    /// The storage cannot take an image (exit 3): not a directory storage, no `iso` content,
    /// disabled, or a symlink on the way to its `template/iso`.
    Refused(String),
    /// The bytes did not arrive as declared (exit 4): too few, too many, another digest.
    Mismatch(String),
    /// The name is taken (exit 5): it was there, or it appeared while the image arrived.
    Exists(String),
    /// The image would leave the file system fuller than the limit (exit 6).
    NoRoom(String),
    /// Anything else (exit 1): a file system error.
    Failed(String),
}

impl Failure {
    /// The process exit code of this failure.
    pub fn code(&self) -> u8 {
        match self {
            Failure::Failed(_) => 1,
            Failure::Usage(_) => 2,
            Failure::Refused(_) => 3,
            Failure::Mismatch(_) => 4,
            Failure::Exists(_) => 5,
            Failure::NoRoom(_) => 6,
        }
    }

    /// The message for stderr.
    pub fn message(&self) -> &str {
        match self {
            Failure::Usage(m)
            | Failure::Refused(m)
            | Failure::Mismatch(m)
            | Failure::Exists(m)
            | Failure::NoRoom(m)
            | Failure::Failed(m) => m,
        }
    }
}

/// What a storage's config says about where its files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// The storage's mounted directory (`path`).
    pub path: String,
}

/// Judge a storage's config (`pvesh get /storage/ID` JSON): directory-backed, enabled, with
/// `iso` content and an absolute path.
pub fn storage_from_config(id: &str, config: &serde_json::Value) -> Result<Storage, Failure> {
    let text = |k: &str| config.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let kind = text("type");
    if !DIR_TYPES.contains(&kind) {
        return Err(Failure::Refused(format!(
            "storage {id} is of type {kind:?}, not a directory storage ({}): an ISO image is a file in its template/iso",
            DIR_TYPES.join(", ")
        )));
    }
    let disabled = match config.get("disable") {
        Some(serde_json::Value::Number(n)) => n.as_u64() != Some(0),
        Some(serde_json::Value::String(s)) => s != "0",
        Some(serde_json::Value::Bool(b)) => *b,
        _ => false,
    };
    if disabled {
        return Err(Failure::Refused(format!("storage {id} is disabled")));
    }
    if !text("content").split(',').any(|c| c.trim() == "iso") {
        return Err(Failure::Refused(format!(
            "storage {id} does not hold iso content (its content: {:?})",
            text("content")
        )));
    }
    let path = text("path");
    if !path.starts_with('/') {
        return Err(Failure::Refused(format!(
            "storage {id} has no absolute path ({path:?})"
        )));
    }
    Ok(Storage {
        path: path.to_string(),
    })
}

/// A command with an empty environment (a fixed PATH) and no stdin, as root's tools run from
/// the helper: nothing of the caller's environment reaches them.
pub(crate) fn root_command(path: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(path);
    c.env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(std::process::Stdio::null());
    c
}

/// Bytes as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Ask PVE for a storage's config (`pvesh get /storage/ID --output-format json`), with an
/// empty environment.
pub fn storage_config(id: &str) -> Result<serde_json::Value, Failure> {
    let out = root_command(std::path::Path::new(PVESH))
        .args(["get", &format!("/storage/{id}"), "--output-format", "json"])
        .output()
        .map_err(|e| Failure::Failed(format!("cannot run {PVESH}: {e}")))?;
    if !out.status.success() {
        return Err(Failure::Refused(format!(
            "storage {id}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| Failure::Failed(format!("{PVESH} printed no JSON for storage {id}: {e}")))
}

/// Open `path` (absolute) one component at a time, never following a symlink, each a
/// directory.
pub fn open_dir_nofollow(path: &str) -> Result<OwnedFd, Failure> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fail = |at: &str, e: rustix::io::Errno| {
        let why = match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => {
                "a symlink or not a directory: the helper follows no link".to_string()
            }
            e => e.to_string(),
        };
        Failure::Refused(format!("cannot open {at} ({why})"))
    };
    let mut dir = rustix::fs::open("/", flags, Mode::empty()).map_err(|e| fail("/", e))?;
    let mut at = String::new();
    for comp in path.split('/').filter(|c| !c.is_empty()) {
        if comp == "." || comp == ".." {
            return Err(Failure::Refused(format!(
                "{path}: '.' and '..' are not followed"
            )));
        }
        at.push('/');
        at.push_str(comp);
        dir = rustix::fs::openat(&dir, comp, flags, Mode::empty()).map_err(|e| fail(&at, e))?;
    }
    Ok(dir)
}

/// How full the file system of `dir` would be with `extra` more bytes, in percent of what
/// ordinary files may fill (`f_blocks - f_bfree + f_bavail`, as `df` counts), with the
/// numbers for a message: `(percent, used, total)`.
pub fn fill_after(dir: &OwnedFd, extra: u64) -> Result<(f64, u64, u64), Failure> {
    let v = rustix::fs::fstatvfs(dir).map_err(|e| Failure::Failed(format!("statvfs: {e}")))?;
    let unit = v.f_frsize.max(1);
    let used = v.f_blocks.saturating_sub(v.f_bfree).saturating_mul(unit);
    let total = (v.f_blocks.saturating_sub(v.f_bfree) + v.f_bavail).saturating_mul(unit);
    if total == 0 {
        return Ok((100.0, used, total));
    }
    Ok((
        (used.saturating_add(extra)) as f64 * 100.0 / total as f64,
        used,
        total,
    ))
}

fn gib(n: u64) -> String {
    format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
}

/// Receive the image into the open directory `dir` (its `template/iso`): the checks, the
/// stream, the publication. `shown` is how messages name the directory.
pub fn receive(
    req: &Request,
    dir: &OwnedFd,
    shown: &str,
    input: &mut dyn Read,
) -> Result<(), Failure> {
    receive_into(req, dir, shown, input, true)
}

/// [`receive`], with `unnamed: false` going straight to the named fallback (for its tests).
fn receive_into(
    req: &Request,
    dir: &OwnedFd,
    shown: &str,
    input: &mut dyn Read,
    unnamed: bool,
) -> Result<(), Failure> {
    match rustix::fs::statat(dir, req.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(_) => {
            return Err(Failure::Exists(format!(
                "{shown}/{} exists: the helper never overwrites (remove it first: pxagent iso remove)",
                req.name
            )));
        }
        Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(Failure::Failed(format!("{shown}/{}: {e}", req.name))),
    }
    let (after, used, total) = fill_after(dir, req.size)?;
    if after > f64::from(req.max_used) {
        return Err(Failure::NoRoom(format!(
            "{} ({}) would leave the file system of {shown} {after:.1}% full ({} used of {}), over the limit of {}%",
            req.name,
            gib(req.size),
            gib(used),
            gib(total),
            req.max_used
        )));
    }
    let (file, partial) = temp_file(dir, &req.name, unnamed)?;
    let done = fill(req, &file, input).and_then(|()| publish(req, dir, &file, partial.as_deref()));
    if done.is_err()
        && let Some(p) = &partial
    {
        let _ = rustix::fs::unlinkat(dir, p.as_str(), AtFlags::empty());
    }
    done?;
    rustix::fs::fsync(dir).map_err(|e| Failure::Failed(format!("fsync {shown}: {e}")))
}

/// An unnamed file in `dir`, or where the file system has none, `.NAME.pxagent-partial`
/// (returned as the second value), created exclusively without following a symlink.
fn temp_file(
    dir: &OwnedFd,
    name: &str,
    unnamed: bool,
) -> Result<(OwnedFd, Option<String>), Failure> {
    let mode = Mode::from_raw_mode(0o600);
    if unnamed {
        match rustix::fs::openat(
            dir,
            ".",
            OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
            mode,
        ) {
            Ok(f) => return Ok((f, None)),
            Err(
                rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL,
            ) => {}
            Err(e) => {
                return Err(Failure::Failed(format!(
                    "cannot create a temporary file: {e}"
                )));
            }
        }
    }
    let partial = format!(".{name}.pxagent-partial");
    let f = rustix::fs::openat(
        dir,
        partial.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )
    .map_err(|e| Failure::Failed(format!("cannot create {partial}: {e}")))?;
    Ok((f, Some(partial)))
}

/// Copy exactly `req.size` bytes from `input` into `file`, hashing them; one byte more, one
/// byte less or another digest is a mismatch.
fn fill(req: &Request, file: &OwnedFd, input: &mut dyn Read) -> Result<(), Failure> {
    let mut out = std::fs::File::from(
        file.try_clone()
            .map_err(|e| Failure::Failed(e.to_string()))?,
    );
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut got: u64 = 0;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Failed(format!("reading the image: {e}"))),
        };
        got += n as u64;
        if got > req.size {
            return Err(Failure::Mismatch(format!(
                "more than the declared {} bytes arrived: nothing was kept",
                req.size
            )));
        }
        hash.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| Failure::Failed(format!("writing the image: {e}")))?;
    }
    if got != req.size {
        return Err(Failure::Mismatch(format!(
            "{got} of the declared {} bytes arrived (the stream ended early): nothing was kept",
            req.size
        )));
    }
    let digest = hex(&hash.finalize());
    if digest != req.sha256 {
        return Err(Failure::Mismatch(format!(
            "the image's SHA-256 is {digest}, not the declared {}: nothing was kept",
            req.sha256
        )));
    }
    out.sync_all()
        .map_err(|e| Failure::Failed(format!("fsync of the image: {e}")))
}

/// Give the filled file its name, never over an existing one, readable by all (as PVE's own
/// ISO files).
fn publish(
    req: &Request,
    dir: &OwnedFd,
    file: &OwnedFd,
    partial: Option<&str>,
) -> Result<(), Failure> {
    rustix::fs::fchmod(file, Mode::from_raw_mode(0o644))
        .map_err(|e| Failure::Failed(format!("chmod: {e}")))?;
    let r = match partial {
        None => rustix::fs::linkat(file, "", dir, req.name.as_str(), AtFlags::EMPTY_PATH),
        Some(p) => {
            rustix::fs::renameat_with(dir, p, dir, req.name.as_str(), RenameFlags::NOREPLACE)
        }
    };
    r.map_err(|e| match e {
        rustix::io::Errno::EXIST => Failure::Exists(format!(
            "{} appeared while the image arrived: the helper never overwrites, so nothing was kept",
            req.name
        )),
        e => Failure::Failed(format!("cannot name the image {}: {e}", req.name)),
    })
}

/// The whole `iso-receive`: resolve the storage, open its `template/iso`, receive. Prints
/// the volume id on success.
pub fn iso_receive(req: &Request, input: &mut dyn Read) -> Result<String, Failure> {
    let storage = storage_from_config(&req.storage, &storage_config(&req.storage)?)?;
    let shown = format!("{}/template/iso", storage.path.trim_end_matches('/'));
    let dir = open_dir_nofollow(&shown)?;
    receive(req, &dir, &shown, input)?;
    Ok(format!("{}:iso/{}", req.storage, req.name))
}

#[cfg(test)]
mod tests;
