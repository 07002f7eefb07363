//! What both flows share: step invocations, the guest's tags, checksums, base64, and writing
//! pulled files locally (temporary file beside the target, moved into place).

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::catalog::Op;
use crate::error::{Error, Result};
use crate::invocation::Invocation;

use super::*;

/// A catalog invocation for one step of a flow (already-validated values).
pub(super) fn step_inv(op: &'static Op, values: &[(&'static str, &str)]) -> Result<Invocation> {
    Invocation::new(
        op,
        values.iter().map(|(k, v)| (*k, v.to_string())).collect(),
    )
}

/// pvesh booleans are 0/1 (sometimes strings).
pub(super) fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_u64().is_some_and(|n| n != 0),
        Value::String(s) => s == "1" || s == "true",
        _ => false,
    }
}

/// The bytes behind a string PVE decoded from base64: Perl holds them as a byte string and
/// pvesh's JSON encoder writes each byte as the character U+0000–U+00FF, so each character
/// is one byte. (A string with larger characters was real text: its UTF-8 is the data.)
pub fn pve_bytes(s: &str) -> Vec<u8> {
    if s.chars().all(|c| (c as u32) <= 0xFF) {
        s.chars().map(|c| c as u32 as u8).collect()
    } else {
        s.as_bytes().to_vec()
    }
}

/// `sha256sum` prints `HEX  PATH`; take the digest.
pub(super) fn parse_sum(out: &str, path: &str) -> Result<String> {
    let hex = out.split_whitespace().next().unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(Error::Remote(format!(
            "cannot verify {path}: `{SHA256SUM}` printed {:?}",
            out.trim()
        )))
    }
}

pub(super) fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(super) fn verify(guest_sum: &str, data: &[u8], what: &str) -> Result<()> {
    let local = sha256_hex(data);
    if local == guest_sum {
        Ok(())
    } else {
        Err(Error::Remote(format!(
            "{what}: checksum mismatch (guest sha256 {guest_sum}, pxagent's {local}); the file was not taken"
        )))
    }
}

pub(super) fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Write a pulled file atomically: a temporary file beside it, then a hard link (which
/// fails when the target exists: no overwrite without `--force`, even if one appeared since
/// the check) or, with `--force`, a rename.
pub(super) fn write_local(dest: &Path, data: &[u8], force: bool) -> Result<()> {
    use std::io::Write;
    let dir = parent_dir(dest);
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pull".into());
    let tmp = dir.join(format!(".{name}.pxagent-{}", std::process::id()));
    let fail = |what: &str, e: std::io::Error| {
        Error::Internal(format!("cannot write {}: {what}: {e}", dest.display()))
    };
    let mut f = std::fs::File::create(&tmp).map_err(|e| fail("create a temporary file", e))?;
    f.write_all(data).map_err(|e| fail("write", e))?;
    f.sync_all().map_err(|e| fail("sync", e))?;
    drop(f);
    let r = if force {
        std::fs::rename(&tmp, dest)
    } else {
        std::fs::hard_link(&tmp, dest).and_then(|_| std::fs::remove_file(&tmp))
    };
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(Error::usage(format!(
                "{} exists; pass --force to overwrite it",
                dest.display()
            )));
        }
        return Err(fail("move into place", e));
    }
    Ok(())
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}
