//! One exec call as the front ends hand it over: the guest argv, `--push`/`--pull` pairs,
//! stdin, timeout — checked locally (exit 2) before anything else, and turned into the
//! catalog invocation the policy judges. Uses the catalog and the invocation only.

use std::path::PathBuf;
use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::catalog::invocation::Invocation;
use crate::catalog::{self, Kind, Op};

use super::*;

/// One command to run in a guest, as a front end received it (nothing validated yet).
#[derive(Debug, Clone)]
pub struct GuestRequest {
    /// `vm.exec` or `ct.exec`.
    pub op: &'static Op,
    /// The guest's id as given.
    pub vmid: String,
    /// `--node` (VMs only; containers must be on the connected node).
    pub node: Option<String>,
    /// The program, then its arguments.
    pub argv: Vec<String>,
    /// Data for the command's stdin.
    pub stdin: Option<Vec<u8>>,
    /// `(local file, guest path)` to copy in before the command.
    pub push: Vec<(PathBuf, String)>,
    /// `(guest path, local file)` to copy out after it.
    pub pull: Vec<(String, PathBuf)>,
    /// Overwrite existing local files.
    pub force: bool,
    /// Make each pushed file's guest directory first (`mkdir -p DIR`, run as a guest command).
    pub mkdir: bool,
    /// How long to wait for the command (VMs; containers: the connection's command timeout).
    pub timeout: Duration,
}

/// A request that passed the local checks.
#[derive(Debug)]
pub(super) struct Checked {
    pub(super) inv: Invocation,
    pub(super) argv: Vec<String>,
    pub(super) push: Vec<(PathBuf, String, Vec<u8>)>,
    pub(super) pull: Vec<(String, PathBuf)>,
    /// stdin for `pct exec` (a VM's travels in the invocation as `input_data`).
    pub(super) stdin: Option<Vec<u8>>,
    pub(super) force: bool,
    /// The guest directories to make before the pushes (`--mkdir`), each once, in order.
    pub(super) mkdirs: Vec<String>,
}

impl GuestRequest {
    /// Parse `--push LOCAL:GUEST` (split at the last `:/`: the guest path is absolute).
    pub fn parse_push(spec: &str) -> Result<(PathBuf, String)> {
        match spec.rfind(":/") {
            Some(i) if i > 0 => Ok((PathBuf::from(&spec[..i]), spec[i + 1..].to_string())),
            _ => Err(Error::usage(format!(
                "--push {}: expected LOCAL:/ABSOLUTE/GUEST/PATH",
                crate::base::text::printable(spec)
            ))),
        }
    }

    /// Parse `--pull GUEST:LOCAL` (split at the last `:`).
    pub fn parse_pull(spec: &str) -> Result<(String, PathBuf)> {
        match spec.rfind(':') {
            Some(i) if spec.starts_with('/') && i + 1 < spec.len() => {
                Ok((spec[..i].to_string(), PathBuf::from(&spec[i + 1..])))
            }
            _ => Err(Error::usage(format!(
                "--pull {}: expected /ABSOLUTE/GUEST/PATH:LOCAL",
                crate::base::text::printable(spec)
            ))),
        }
    }

    pub(super) fn is_vm(&self) -> bool {
        self.op.area == catalog::Area::Vm
    }

    /// Everything that can be checked without the host (exit 2, nothing sent).
    pub(super) fn check(&self) -> Result<Checked> {
        let mut raw = std::collections::BTreeMap::new();
        raw.insert("vmid", self.vmid.clone());
        raw.insert(
            "command",
            serde_json::to_string(&self.argv).map_err(|e| Error::Internal(e.to_string()))?,
        );
        if let Some(n) = &self.node {
            if !self.is_vm() {
                return Err(Error::usage(
                    "ct exec takes no --node: `pct exec` runs on the node pxagent connects to",
                ));
            }
            raw.insert("node", n.clone());
        }
        if let Some(data) = &self.stdin {
            if self.is_vm() {
                let text = std::str::from_utf8(data).map_err(|_| {
                    Error::usage(
                        "vm exec --stdin carries text only (the guest agent's input-data is a string); push binary data with --push",
                    )
                })?;
                if data.len() > VM_STDIN_MAX {
                    return Err(Error::usage(format!(
                        "--stdin is {} bytes; the guest agent's input-data takes at most {VM_STDIN_MAX}",
                        data.len()
                    )));
                }
                raw.insert("input_data", text.to_string());
            } else if data.len() > CT_FILE_MAX {
                return Err(Error::usage(format!(
                    "--stdin is {} bytes; ct exec sends at most {CT_FILE_MAX}",
                    data.len()
                )));
            }
        }
        let inv = Invocation::new(self.op, raw)?;
        let mut push = Vec::new();
        for (local, guest) in &self.push {
            let guest = Kind::GuestPath.parse("guest path", guest)?;
            let data = std::fs::read(local).map_err(|source| Error::ReadFile {
                path: local.clone(),
                source,
            })?;
            let max = if self.is_vm() {
                VM_PUSH_MAX
            } else {
                CT_FILE_MAX
            };
            if data.len() > max {
                return Err(Error::usage(if self.is_vm() {
                    format!(
                        "{} is {} bytes; the guest agent's file-write carries at most {FILE_WRITE_MAX_BASE64} bytes of base64 ({VM_PUSH_MAX} bytes of file) and cannot append, so it is refused before sending",
                        local.display(),
                        data.len()
                    )
                } else {
                    format!(
                        "{} is {} bytes; ct exec pushes at most {CT_FILE_MAX}",
                        local.display(),
                        data.len()
                    )
                }));
            }
            push.push((local.clone(), guest, data));
        }
        let mut pull = Vec::new();
        for (guest, local) in &self.pull {
            let guest = Kind::GuestPath.parse("guest path", guest)?;
            if local.as_os_str().is_empty() || local.to_string_lossy().ends_with('/') {
                return Err(Error::usage(format!(
                    "--pull {guest}: name a local file, not a directory"
                )));
            }
            if !self.force && std::fs::symlink_metadata(local).is_ok() {
                return Err(Error::usage(format!(
                    "{} exists; pass --force to overwrite it",
                    local.display()
                )));
            }
            let dir = parent_dir(local);
            if !dir.is_dir() {
                return Err(Error::usage(format!(
                    "cannot pull to {}: {} is not a directory",
                    local.display(),
                    dir.display()
                )));
            }
            pull.push((guest, local.clone()));
        }
        if self.mkdir && push.is_empty() {
            return Err(Error::usage(
                "--mkdir makes the directories of --push files; give --push LOCAL:GUEST with it",
            ));
        }
        Ok(Checked {
            inv,
            argv: self.argv.clone(),
            mkdirs: self.mkdirs(),
            push,
            pull,
            stdin: if self.is_vm() {
                None
            } else {
                self.stdin.clone()
            },
            force: self.force,
        })
    }
}

/// The directory of an absolute guest path (`/a/b/f` → `/a/b`, `/f` → `/`).
pub(super) fn guest_dir(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((d, _)) if !d.is_empty() => d.to_string(),
        _ => "/".to_string(),
    }
}

/// The guest command that makes `dir` (`--mkdir`).
pub(super) fn mkdir_argv(dir: &str) -> Vec<String> {
    vec![MKDIR.to_string(), "-p".to_string(), dir.to_string()]
}

/// The local checks of a request (exit 2, nothing sent): its invocation and the guest argv.
pub fn check_request(req: &GuestRequest) -> Result<(Invocation, Vec<String>)> {
    let c = req.check()?;
    Ok((c.inv, c.argv))
}
