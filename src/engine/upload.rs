//! `iso upload FILE`: a file of this machine streamed to the host's root-side helper.
//!
//! The order is that of every change, with the file read first: the file is read once for its
//! size and SHA-256 (and checked against `--checksum`), then the local policy, the phrase and
//! the rate limit decide, then two reads on the host check what the helper will check again
//! (the storage can take an image, the name is free, the image fits under the fill limit), and
//! only then is the helper's command line sent with the file on its stdin. The helper publishes
//! the image only when exactly those bytes with that digest arrived, so a file that changed
//! after it was hashed, a cut connection or a killed client leaves nothing on the host.

use std::io::{Read, Seek};

use serde_json::Value;

use super::{Connector, Done, Engine, Trail};
use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::kind::BYTE_SIZE_MAX;
use crate::catalog::{Kind, ops};
use crate::remote::Remote;

/// Storage types whose `path` is a directory PVE keeps `template/iso` under (PVE's plugins
/// with a `path` and `iso` content): the ones the helper writes into.
const DIR_TYPES: &[&str] = &["dir", "nfs", "cifs", "cephfs", "btrfs"];

/// How much of the helper's stdout and stderr is kept: one JSON line, one message.
const KEEP: usize = 64 * 1024;

/// The file an upload sends, opened and measured.
#[derive(Debug)]
pub struct Staged {
    /// The open file, at its start.
    pub file: std::fs::File,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
}

/// Read the file an upload names once: its size and SHA-256 become the invocation's `size` and
/// `sha256`, which the command line carries and the helper checks. A `--checksum` given must
/// be a SHA-256 equal to the file's. Errors are exit 2; nothing is sent.
pub fn stage(inv: &Invocation) -> Result<(Invocation, Staged)> {
    let param = inv
        .op
        .uploads()
        .ok_or_else(|| Error::Internal(format!("{} sends no file", inv.op.id)))?;
    let path = inv
        .values
        .get(param.name)
        .ok_or_else(|| Error::usage(format!("{} needs <{}>", inv.op.id, param.name)))?;
    let read_error = |source| Error::ReadFile {
        path: path.into(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    let shown = crate::base::text::printable(path);
    if !meta.is_file() {
        return Err(Error::usage(format!("{shown} is not a regular file")));
    }
    if meta.len() == 0 || meta.len() > BYTE_SIZE_MAX {
        return Err(Error::usage(format!(
            "{shown} has {} bytes: an image is 1 byte to 1 TiB",
            meta.len()
        )));
    }
    let (size, sha256) = digest(&mut file).map_err(read_error)?;
    if size != meta.len() {
        return Err(Error::usage(format!(
            "{shown} changed while it was read ({} bytes, then {size}): send it once it is complete",
            meta.len()
        )));
    }
    if let Some(given) = inv.values.get("checksum") {
        let (algo, hex) = given.split_once(':').unwrap_or(("", given));
        if algo != "sha256" {
            return Err(Error::usage(format!(
                "--checksum {algo}:…: an upload is checked with SHA-256 only (the host's helper hashes with it); give sha256:HEX"
            )));
        }
        if !hex.eq_ignore_ascii_case(&sha256) {
            return Err(Error::usage(format!(
                "{shown} has the SHA-256 {sha256}, not the {} given with --checksum: nothing was sent",
                hex.to_ascii_lowercase()
            )));
        }
    }
    file.rewind().map_err(read_error)?;
    let mut inv = inv.clone();
    inv.values
        .insert("size", Kind::ByteSize.parse("size", &size.to_string())?);
    inv.values
        .insert("sha256", Kind::Sha256.parse("sha256", &sha256)?);
    Ok((inv, Staged { file, size, sha256 }))
}

/// The byte count and SHA-256 of what `r` reads, 1 MiB at a time.
fn digest(r: &mut dyn Read) -> std::io::Result<(u64, String)> {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n: u64 = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                hash.update(&buf[..k]);
                n += k as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let hex = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((n, hex))
}

impl<C: Connector> Engine<'_, C> {
    /// Run an op that sends a file ([`crate::catalog::Op::uploads`]): see the module doc.
    /// `sent(done, total)` is told the bytes sent so far as they go (a progress bar).
    pub async fn upload(
        &self,
        inv: &Invocation,
        given: Option<&str>,
        trail: &mut Trail,
        sent: &mut (dyn FnMut(u64, u64) + Send),
    ) -> Result<Done> {
        let (mut inv, mut staged) = stage(inv)?;
        self.decide(&inv, given, trail).await?;
        let remote = self.connector.remote().await?;
        let node = remote.local_node().await?;
        room_for(&remote, &inv, &node, staged.size).await?;
        inv.attach.confirmed = trail.phrase.clone().or_else(|| given.map(str::to_string));
        // A phrase or an approval travels in the gate's envelope from the start: the file
        // cannot be sent twice.
        let wire = match (&inv.attach.approval, &inv.attach.confirmed) {
            (None, None) => inv.remote_argv(),
            (approval, _) => inv.envelope(approval.clone()),
        };
        trail.begin(inv.op)?;
        let total = staged.size;
        let mut done: u64 = 0;
        let mut on_chunk = |n: u64| {
            done += n;
            sent(done, total)
        };
        let out = remote
            .session
            .exec_from_reader(&wire, &mut staged.file, &mut on_chunk, KEEP)
            .await?
            .output;
        helper_answer(&out, &inv, &remote.target, "the image")?;
        let storage = inv.values.get("storage").cloned().unwrap_or_default();
        let name = inv.values.get("name").cloned().unwrap_or_default();
        let data = crate::views::value(&crate::views::UploadResult {
            changed: true,
            volid: format!("{storage}:iso/{name}"),
            storage,
            size: staged.size,
            sha256: staged.sha256,
            file: inv.values.get("file").cloned().unwrap_or_default(),
        });
        Ok(Done {
            data,
            warnings: Vec::new(),
        })
    }
}

/// What the helper's exit says: 0 done; its own failures (`pxagent-helper: …` on stderr, exit
/// 1-6) by their class (2 and 3 the request, 5 taken, 6 no room); anything else (sudo, the
/// gate) as every command's. `what` names what the helper refused in the message.
pub(super) fn helper_answer(
    out: &crate::ssh::Captured,
    inv: &Invocation,
    target: &str,
    what: &str,
) -> Result<()> {
    if out.exit_status == 0 {
        return Ok(());
    }
    let stderr = out.stderr_text();
    let said = stderr
        .lines()
        .find_map(|l| l.strip_prefix("pxagent-helper: "))
        .map(|m| crate::base::text::printable(m).to_string());
    let Some(said) = said else {
        return crate::remote::classify(out, &inv.remote_argv(), target);
    };
    let msg = format!("the host's helper refused {what} on {target}: {said}");
    Err(match out.exit_status {
        3 => Error::usage(msg),
        5 => Error::Exists(msg),
        6 => Error::NoRoom(msg),
        _ => Error::Remote(msg),
    })
}

/// What the helper will check again, from the host's own answers, before a byte is sent:
/// the storage is on this node, active, directory-backed and holds `iso` content; no image
/// of that name is there; and the image leaves its file system at most `max_used` percent
/// full.
async fn room_for(remote: &Remote, inv: &Invocation, node: &str, size: u64) -> Result<()> {
    let storage = inv.values.get("storage").map(String::as_str).unwrap_or("");
    let name = inv.values.get("name").map(String::as_str).unwrap_or("");
    let limit: f64 = inv
        .values
        .get("max_used")
        .and_then(|v| v.parse().ok())
        .unwrap_or(90.0);
    let entry = remote.storage_entry(node, storage).await?.ok_or_else(|| {
            Error::NotFound(format!(
                "storage '{storage}' does not exist on {node}, the node pxagent is connected to (see `pxagent storage list`)"
            ))
        })?;
    let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("");
    let number = |k: &str| entry.get(k).and_then(crate::remote::as_u64).unwrap_or(0);
    let kind = text("type");
    if !DIR_TYPES.contains(&kind) {
        return Err(Error::usage(format!(
            "storage '{storage}' is of type {kind}, not a directory storage ({}): an ISO image is a file in a directory storage's template/iso (`local` is one)",
            DIR_TYPES.join(", ")
        )));
    }
    if !text("content").split(',').any(|c| c == "iso") {
        return Err(Error::usage(format!(
            "storage '{storage}' does not hold iso content (its content: {}); choose one that does, or add it with `pxagent storage set {storage} --content …`",
            text("content")
        )));
    }
    if number("active") != 1 {
        return Err(Error::WrongState(format!(
            "storage '{storage}' is not active on {node}"
        )));
    }
    let (used, total) = (number("used"), number("total"));
    let after = if total == 0 {
        100.0
    } else {
        (used.saturating_add(size)) as f64 * 100.0 / total as f64
    };
    if after > limit {
        let b = |n: u64| crate::views::bytes(n as f64);
        return Err(Error::NoRoom(format!(
            "{name} ({}) would leave storage '{storage}' on {node} {after:.1}% full ({} used of {}, {} free), over the limit of {limit}% (--max-used; the host's sudoers sets the highest): nothing was sent",
            b(size),
            b(used),
            b(total),
            b(total.saturating_sub(used))
        )));
    }
    let content = remote
        .read_op(&ops::ISO_LIST, &[("storage", storage), ("node", node)])
        .await?;
    let volid = format!("{storage}:iso/{name}");
    if content
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c.get("volid").and_then(Value::as_str) == Some(volid.as_str()))
    {
        return Err(Error::Exists(format!(
            "{volid} already exists on {node}: pxagent never overwrites an image; choose another --name, or remove it first (`pxagent iso remove {volid}`)"
        )));
    }
    Ok(())
}

/// The result's lines for a human.
pub fn human(data: &Value) -> String {
    let mut s = format!(
        "{} ({} bytes, sha256 {})",
        data["volid"].as_str().unwrap_or(""),
        data["size"],
        data["sha256"].as_str().unwrap_or("")
    );
    if let Some(f) = data["file"].as_str() {
        s.push_str(&format!("\nfrom {}", crate::output::escape::cell(f)));
    }
    s
}
