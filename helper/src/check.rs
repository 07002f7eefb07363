//! The helper's command lines, checked again here although the sudoers rules admit only these
//! shapes, nothing more or less: `iso-receive --max-used PERCENT STORAGE NAME SIZE SHA256`,
//! `net-pending`, `net-arm SECONDS`, `net-confirm TOKEN`; and the two the helper schedules
//! itself as root (no sudoers rule names them): `net-revert [ID]`, `net-watch ID`.

use super::Failure;
use super::net;

/// One checked command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `iso-receive …`.
    IsoReceive(Request),
    /// `net-pending`.
    NetPending,
    /// `net-arm SECONDS`.
    NetArm(u32),
    /// `net-confirm TOKEN`.
    NetConfirm(String),
    /// `net-revert [ID]`.
    NetRevert(Option<String>),
    /// `net-watch ID`.
    NetWatch(String),
    /// `audit-append` (the gate's record on stdin).
    AuditAppend,
    /// `audit-verify [--at N]`.
    AuditVerify(Option<u64>),
}

/// Parse any of the helper's command lines (without the program name).
pub fn parse_command(args: &[String]) -> Result<Command, Failure> {
    let usage = |why: String| {
        Failure::Usage(format!(
            "{why}; usage: pxagent-helper iso-receive … | net-pending | net-arm SECONDS | net-confirm TOKEN | audit-append | audit-verify [--at N]"
        ))
    };
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["iso-receive", ..] => parse_args(args).map(Command::IsoReceive),
        ["net-pending"] => Ok(Command::NetPending),
        ["net-arm", s] => number(s)
            .filter(|n| net::WINDOW.contains(&(*n as u32)) && *n <= 600)
            .map(|n| Command::NetArm(n as u32))
            .ok_or_else(|| usage(format!("net-arm {s:?}: seconds, 30 to 600"))),
        ["net-confirm", t] if net::token_ok(t) => Ok(Command::NetConfirm(t.to_string())),
        ["net-confirm", t] => Err(usage(format!("{t:?} is not a token the helper made"))),
        ["net-revert"] => Ok(Command::NetRevert(None)),
        ["net-revert", id] | ["net-watch", id] if !net::id_ok(id) => {
            Err(usage(format!("{id:?} is not an arm id")))
        }
        ["net-revert", id] => Ok(Command::NetRevert(Some(id.to_string()))),
        ["net-watch", id] => Ok(Command::NetWatch(id.to_string())),
        ["audit-append"] => Ok(Command::AuditAppend),
        ["audit-verify"] => Ok(Command::AuditVerify(None)),
        ["audit-verify", "--at", n] => number(n)
            .filter(|n| *n > 0)
            .map(|n| Command::AuditVerify(Some(n)))
            .ok_or_else(|| usage(format!("audit-verify --at {n:?}: a line number"))),
        [] => Err(usage("no subcommand".into())),
        [cmd, ..] => Err(usage(format!("unknown subcommand or arguments of {cmd:?}"))),
    }
}

/// The largest image the helper takes (1 TiB): a size is a number, never a suffix.
pub const SIZE_MAX: u64 = 1 << 40;

/// One checked `iso-receive` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// How full the file system may be after the image, in percent (1-99).
    pub max_used: u8,
    /// The storage id (PVE's `pve-storage-id`).
    pub storage: String,
    /// The image's file name: PVE's ISO name rule, `.iso` or `.img`.
    pub name: String,
    /// The image's exact size in bytes.
    pub size: u64,
    /// Its SHA-256, 64 lower-case hex digits.
    pub sha256: String,
}

/// PVE's storage id (`pve-storage-id`: `[a-z][a-z0-9\-\_\.]*[a-z0-9]`), at most 64 bytes.
pub fn storage_id_ok(s: &str) -> bool {
    let b = s.as_bytes();
    (2..=64).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1].is_ascii_lowercase() | b[b.len() - 1].is_ascii_digit()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"-_.".contains(c))
}

/// PVE's ISO file name (`[^/]+\.(iso|img)`, PVE::Storage `ISO_EXT_RE_0`) narrowed to
/// `[A-Za-z0-9][A-Za-z0-9._-]*` and at most 200 bytes: no `/`, no `..`, no leading dot.
pub fn iso_name_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= 200
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
        && !s.contains("..")
        && (s.ends_with(".iso") || s.ends_with(".img"))
        && s.len() > 4
}

pub(crate) fn number(s: &str) -> Option<u64> {
    let ok = !s.is_empty()
        && s.len() <= 20
        && s.bytes().all(|c| c.is_ascii_digit())
        && !(s.len() > 1 && s.starts_with('0'));
    ok.then(|| s.parse().ok()).flatten()
}

/// Parse the helper's arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Request, Failure> {
    let usage = |why: &str| {
        Failure::Usage(format!(
            "{why}; usage: pxagent-helper iso-receive --max-used PERCENT STORAGE NAME SIZE SHA256"
        ))
    };
    let [cmd, flag, pct, storage, name, size, sha] = args else {
        return Err(usage(&format!("expected 7 arguments, got {}", args.len())));
    };
    if cmd != "iso-receive" {
        return Err(usage(&format!("unknown subcommand {cmd:?}")));
    }
    if flag != "--max-used" {
        return Err(usage("--max-used PERCENT comes first"));
    }
    let max_used = number(pct)
        .filter(|n| (1..=99).contains(n))
        .ok_or_else(|| usage(&format!("--max-used {pct:?}: a percentage 1-99")))?
        as u8;
    if !storage_id_ok(storage) {
        return Err(usage(&format!("{storage:?} is not a storage id")));
    }
    if !iso_name_ok(name) {
        return Err(usage(&format!(
            "{name:?} is not an ISO file name (letters, digits, '.', '_', '-', ending in .iso or .img; no '..')"
        )));
    }
    let size = number(size)
        .filter(|n| (1..=SIZE_MAX).contains(n))
        .ok_or_else(|| usage(&format!("size {size:?}: bytes, 1 to {SIZE_MAX}")))?;
    if sha.len() != 64
        || !sha
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    {
        return Err(usage(&format!(
            "{sha:?} is not a SHA-256 (64 lower-case hex digits)"
        )));
    }
    Ok(Request {
        max_used,
        storage: storage.clone(),
        name: name.clone(),
        size,
        sha256: sha.clone(),
    })
}
