//! Signed human approvals (the layer between the host gate and sudoers): for an
//! operation the host policy marks `approve`, the gate asks for an SSH signature (SSHSIG,
//! namespace [`NAMESPACE`]) by a key listed in `/etc/pxagent/approvers` over a canonical
//! [`Statement`] of the exact op, parameters, host, a nonce and an expiry. The gate issues the
//! statement in its refusal, a human signs it (`pxagent approve`, or `ssh-keygen -Y sign`, so
//! that FIDO keys and agents work), the agent hands the approval back, and [`check`] decides.
//!
//! This folder is the pure library both sides use: no SSH connection, no network, no clock (the
//! caller passes `now`), only file reads and the two small stores the gate keeps
//! ([`NonceStore`], [`Pending`]). By job: `statement` (the canonical text), `time` (its
//! timestamps, `--ttl` durations), `sshsig` (keys, signing, the approvers file), `check` (the
//! gate's decision and its [`Rejection`]s), `nonces` (single use), `pending` (statements the
//! gate issued), and this file: the constants and the text an approval travels as.
//!
//! May use std, serde_json, regex, and the offline `ssh-key` crate through russh's re-export
//! (`russh::keys::ssh_key`, in `sshsig` only — never russh's transport). Every input here
//! (statement, signature, key, approvers file, store entry) is untrusted and validated
//! strictly; every failure is a refusal that says which check failed and what to do.
//!
//! Layer: approval. May import: `base`, `catalog`.

mod check;
mod nonces;
mod pending;
pub mod preview;
mod rejection;
mod sshsig;
mod statement;

#[cfg(test)]
mod tests;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use check::{Requested, Verified, check, verify};
pub use nonces::NonceStore;
pub use pending::{MAX_PENDING, Pending};
pub use rejection::Rejection;
pub use sshsig::{Approver, Approvers, PrivateKey, load_private_key, sign};
pub use statement::{
    Place, Statement, valid_account, valid_arg_name, valid_host, valid_machine_id, valid_nonce,
    valid_op,
};

/// The SSHSIG namespace of approvals: a signature made for anything else (`file`, `git`…)
/// can never pass as an approval.
pub const NAMESPACE: &str = "pxagent-approval";

/// The first line of every statement; the number is the format's version.
pub const VERSION_LINE: &str = "pxagent-approval/2";

/// How long a statement the gate issues stays valid.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10 * 60);

/// The longest an approval may stay valid (`pxagent approve --ttl` included).
pub const MAX_TTL: Duration = Duration::from_secs(60 * 60);

/// How far the signer's clock may run ahead of the gate's: an expiry up to this much past
/// `now + MAX_TTL` is still accepted.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

const BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const END: &str = "-----END SSH SIGNATURE-----";

/// An approval as it travels from the human to the gate: an armored SSH signature, with the
/// statement in front of it when the signer changed the statement (`pxagent approve --ttl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// The statement text, when it travels with the signature (else the gate finds it among
    /// the statements it issued).
    pub statement: Option<String>,
    /// The armored signature, `-----BEGIN SSH SIGNATURE-----` to `-----END SSH SIGNATURE-----`
    /// with a final newline, as `ssh-keygen -Y sign` writes it.
    pub signature: String,
}

impl Approval {
    /// The text form: the statement (if any) then the armored signature.
    pub fn to_text(&self) -> String {
        let mut s = self.statement.clone().unwrap_or_default();
        s.push_str(&self.signature);
        s
    }
}

/// Read an approval: an armored SSH signature alone (what `ssh-keygen -Y sign` writes), or a
/// statement followed by one. Whitespace around it is tolerated; anything else is malformed,
/// and the error says why. The signature itself is decoded by [`check`].
pub fn parse_approval(text: &str) -> Result<Approval, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("the approval is empty".into());
    }
    let Some(begin) = text.find(BEGIN) else {
        return Err(format!(
            "no `{BEGIN}` line: an approval is the output of `pxagent approve` or the .sig file of `ssh-keygen -Y sign -n {NAMESPACE}`"
        ));
    };
    let (head, armored) = text.split_at(begin);
    if armored[BEGIN.len()..].contains(BEGIN) {
        return Err("more than one signature: an approval carries exactly one".into());
    }
    if !armored.ends_with(END) {
        return Err(format!(
            "the signature does not end with `{END}` (cut short, or followed by other text)"
        ));
    }
    // The two armour lines may overlap (`-----BEGIN SSH SIGNATURE-----END SSH SIGNATURE-----`
    // ends with END too): only text between a whole BEGIN and a whole END is a body.
    let Some(inner) = armored.get(BEGIN.len()..armored.len().saturating_sub(END.len())) else {
        return Err("the signature's armor is broken (its BEGIN and END lines overlap)".into());
    };
    if inner.contains("-----") {
        return Err("the signature's armor is broken (a stray `-----` line)".into());
    }
    for line in inner.lines() {
        let line = line.trim_end_matches('\r');
        if !line
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='))
        {
            return Err("the signature's armor holds a line that is not base64".into());
        }
    }
    let signature = format!("{}\n", armored.replace("\r\n", "\n"));
    let statement = if head.is_empty() {
        None
    } else {
        if !head.starts_with(VERSION_LINE) {
            return Err(format!(
                "unexpected text before the signature: only a statement (starting `{VERSION_LINE}`) may come first"
            ));
        }
        if !head.ends_with('\n') {
            return Err("the signature must start on a line of its own".into());
        }
        // The statement keeps exactly one final newline, its canonical end.
        Some(format!("{}\n", head.trim_end()))
    };
    Ok(Approval {
        statement,
        signature,
    })
}

/// Open (creating it 0700 if missing) a directory the gate keeps state in, refusing one that
/// is a symlink, not a directory, or writable by group or others (anyone who can write there
/// could forget a nonce or plant a statement).
fn private_dir(dir: &Path, what: &str) -> Result<PathBuf, String> {
    let shown = dir.display();
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create the {what} {shown}: {e}"))?;
            std::fs::symlink_metadata(dir)
                .map_err(|e| format!("cannot read the {what} {shown}: {e}"))?
        }
        Err(e) => return Err(format!("cannot read the {what} {shown}: {e}")),
    };
    if !meta.is_dir() {
        return Err(format!(
            "the {what} {shown} is not a directory (a symlink is refused too)"
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "the {what} {shown} is writable by group or others (mode {mode:04o}); fix with `chmod 700 {shown}`"
        ));
    }
    Ok(dir.to_path_buf())
}

/// A directory every gated account's gate writes to (the used nonces, the signed freezes):
/// it must exist (root makes it: `install -d -o root -g root -m 1777 DIR`), be a real directory
/// owned by root, and, when others can write it, have the sticky bit, so that a record can only
/// be removed by the account that made it (or root). `what` names it in messages.
pub fn shared_dir(dir: &Path, what: &str) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let shown = dir.display();
    let fix = format!("create it as root: install -d -o root -g root -m 1777 {shown}");
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("the host's {what} {shown} cannot be read ({e}); {fix}"))?;
    if !meta.is_dir() {
        return Err(format!(
            "the host's {what} {shown} is not a directory (a symlink is refused too); {fix}"
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if meta.uid() != 0 {
        return Err(format!(
            "the host's {what} {shown} is not owned by root (uid {}); {fix}",
            meta.uid()
        ));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "the host's {what} {shown} is writable by others without the sticky bit (mode {mode:04o}), so one account could remove another's records; {fix}"
        ));
    }
    Ok(())
}
