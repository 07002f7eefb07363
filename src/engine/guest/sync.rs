//! What both flows share: step invocations, the guest's tags, checksums, base64, and writing
//! pulled files locally (an exclusive, unguessable temporary file beside the target, moved
//! into place).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::base::error::{Error, Result};
use crate::catalog::Op;
use crate::catalog::invocation::Invocation;

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

pub(super) use crate::base::text::sha256_hex;

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

/// Write a pulled file safely: a temporary file beside it with an unpredictable
/// name, created exclusively (`O_EXCL`: never an existing file), never through a symlink
/// (`O_NOFOLLOW`), mode 0600, synced; then a hard link to the target (which fails when the
/// target exists — a file or a symlink — so nothing is overwritten without `--force`, even if
/// it appeared since the check) or, with `--force`, a rename (which replaces a symlink
/// itself, never what it points to).
pub(super) fn write_local(dest: &Path, data: &[u8], force: bool) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = parent_dir(dest);
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pull".into());
    let fail = |what: &str, e: std::io::Error| {
        Error::Internal(format!("cannot write {}: {what}: {e}", dest.display()))
    };
    let mut attempt = 0;
    let (tmp, mut f) = loop {
        let tmp = dir.join(format!(".{name}.pxagent-{}.tmp", random_hex()?));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => break (tmp, f),
            // Someone holds that name already (chance, or a planted file): take another.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                attempt += 1;
            }
            Err(e) => return Err(fail("create a temporary file", e)),
        }
    };
    let written = f
        .write_all(data)
        .and_then(|()| f.sync_all())
        .map_err(|e| fail("write", e));
    drop(f);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
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

/// 128 random bits as hex, from the kernel (`/dev/urandom`), for names nobody can guess.
fn random_hex() -> Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::Internal(format!("cannot read /dev/urandom: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
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

/// `mkdir -p DIR` (`--mkdir`) failed in the guest: nothing was pushed and the command did not
/// run. `what` is `VM 100` or `container 200`.
pub(super) fn mkdir_error(dir: &str, what: &str, code: &Value, stderr: &str) -> Error {
    Error::Remote(format!(
        "cannot make {dir} in {what}: `{MKDIR} -p {dir}` exited {code}: {}; nothing was pushed and the command did not run",
        stderr.trim()
    ))
}

/// A push that the guest refused, as an error whose kind says why: a guest directory that is
/// not there is `not_found` (with the command that makes it); anything else stays the guest's
/// own words (`remote_failed`). `what` is `VM 100` or `container 200`, `exec` the pxagent
/// command that runs a program there (`vm exec 100`).
pub(super) fn push_error(
    err: Error,
    local: &std::path::Path,
    guest: &str,
    what: &str,
    exec: &str,
) -> Error {
    let text = match &err {
        Error::Remote(m) => m.clone(),
        _ => return err,
    };
    let dir = super::request::guest_dir(guest);
    if text.contains("No such file or directory") {
        return Error::NotFound(format!(
            "pushing {} to {guest}: the directory {dir} does not exist in {what}; pass --mkdir to make it first (or `pxagent {exec} -- mkdir -p {dir}`) ({})",
            local.display(),
            text.trim()
        ));
    }
    Error::Remote(format!(
        "pushing {} to {guest} in {what}: {}",
        local.display(),
        text.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_push_into_a_missing_directory_is_not_found() {
        let local = std::path::Path::new("a.txt");
        for text in [
            "Agent error: failed to open file '/x/y/a.txt' (mode: 'wb'): No such file or directory",
            "`/usr/bin/tee` exited 1: tee: /x/y/a.txt: No such file or directory",
        ] {
            let e = push_error(
                Error::Remote(text.into()),
                local,
                "/x/y/a.txt",
                "VM 100",
                "vm exec 100",
            );
            assert_eq!(e.kind(), "not_found", "{e}");
            assert!(
                e.to_string()
                    .contains("`pxagent vm exec 100 -- mkdir -p /x/y`"),
                "{e}"
            );
        }
        let e = push_error(
            Error::Remote("tee: /a.txt: Read-only file system".into()),
            local,
            "/a.txt",
            "container 200",
            "ct exec 200",
        );
        assert_eq!(e.kind(), "remote_failed");
        assert!(
            e.to_string()
                .contains("in container 200: tee: /a.txt: Read-only"),
            "{e}"
        );
        let other = push_error(
            Error::Connection("lost".into()),
            local,
            "/a",
            "VM 1",
            "vm exec 1",
        );
        assert_eq!(other.kind(), "connection_failed");
    }

    #[test]
    fn a_pull_never_writes_through_a_symlink_or_over_a_file_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        // A symlink planted at the target: refused without --force, and with it the link
        // itself is replaced, never the file it points to.
        let dest = dir.path().join("out.txt");
        std::os::unix::fs::symlink(&victim, &dest).unwrap();
        let e = write_local(&dest, b"pulled", false).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        write_local(&dest, b"pulled", true).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let meta = std::fs::symlink_metadata(&dest).unwrap();
        assert!(
            meta.file_type().is_file(),
            "the link was replaced by a file"
        );
        assert_eq!(std::fs::read(&dest).unwrap(), b"pulled");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Symlinks planted at the temporary names the old code used (`.NAME.pxagent-PID`)
        // and at a guess of the new form lead nowhere.
        let fresh = dir.path().join("fresh.txt");
        for planted in [
            format!(".fresh.txt.pxagent-{}", std::process::id()),
            ".fresh.txt.pxagent-00000000000000000000000000000000.tmp".to_string(),
        ] {
            std::os::unix::fs::symlink(&victim, dir.path().join(planted)).unwrap();
        }
        write_local(&fresh, b"new", false).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&fresh).unwrap(), b"new");
        // An existing regular file needs --force too; no temporary file is left behind.
        let e = write_local(&fresh, b"again", false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp") && !n.contains("0000000000"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn temporary_names_are_unpredictable() {
        let a = random_hex().unwrap();
        let b = random_hex().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
