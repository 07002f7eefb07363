//! Authentication: public keys only, from key files first and then ssh-agent.
//!
//! pxagent never calls russh's password or keyboard-interactive methods, even when the server
//! offers them: an agent must not be able to type a password, and a password prompt over a
//! pipe would hang a script. The server's offer is recorded (from the `none` probe every SSH
//! client sends first) so the preflight can warn about it. Private key files readable by group
//! or others are refused, as OpenSSH does ("UNPROTECTED PRIVATE KEY FILE"): such a key must be
//! presumed leaked. Key files are read before connecting, so permission and path problems fail
//! before any network traffic. Uses the handshake's [`Verifier`] handle and nothing above the
//! transport.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::client;
use russh::keys::agent::client::AgentClient;
use russh::keys::{Algorithm, HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};

use super::hostkey::Verifier;
use super::{Target, sha256};
use crate::base::error::{Error, Result};

/// A key file, loaded before connecting so permission and path problems fail before any
/// network traffic.
pub(super) enum KeyFile {
    Ready {
        path: PathBuf,
        key: Arc<PrivateKey>,
    },
    /// Passphrase-protected: usable only through the agent. The public half is readable
    /// without the passphrase (OpenSSH format), which lets us prefer that key in the agent.
    Encrypted {
        path: PathBuf,
        public: Option<PublicKey>,
    },
    /// The file does not exist. Skipped, as OpenSSH skips a missing `IdentityFile` (a
    /// `Host *` block often names keys that only some machines have); the authentication
    /// error names it if nothing else worked.
    Missing {
        path: PathBuf,
    },
}

impl KeyFile {
    fn public(&self) -> Option<PublicKey> {
        match self {
            KeyFile::Ready { key, .. } => Some(key.public_key().clone()),
            KeyFile::Encrypted { public, .. } => public.clone(),
            KeyFile::Missing { .. } => None,
        }
    }
}

pub(super) fn load_identities(paths: &[PathBuf]) -> Result<Vec<KeyFile>> {
    paths.iter().map(|p| load_identity(p)).collect()
}

fn load_identity(path: &Path) -> Result<KeyFile> {
    let read_err = |source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(KeyFile::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(read_err(e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    // OpenSSH refuses only files owned by the caller; pxagent refuses any such file, because
    // a key that others can read must be presumed leaked whoever owns it.
    if mode & 0o077 != 0 {
        return Err(Error::Auth(format!(
            "WARNING: UNPROTECTED PRIVATE KEY FILE! Permissions {mode:04o} for '{}' are too \
             open: a private key must not be readable by group or others. Refusing to use it \
             (as OpenSSH does); fix with `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(read_err)?;
    match russh::keys::decode_secret_key(&text, None) {
        Ok(key) => Ok(KeyFile::Ready {
            path: path.to_path_buf(),
            key: Arc::new(key),
        }),
        Err(russh::keys::Error::KeyIsEncrypted) => Ok(KeyFile::Encrypted {
            path: path.to_path_buf(),
            public: PrivateKey::from_openssh(&text)
                .ok()
                .map(|k| k.public_key().clone())
                .or_else(|| {
                    let mut pubpath = path.as_os_str().to_owned();
                    pubpath.push(".pub");
                    russh::keys::load_public_key(PathBuf::from(pubpath)).ok()
                }),
        }),
        Err(e) => Err(Error::Auth(format!(
            "cannot use private key {}: {e}",
            path.display()
        ))),
    }
}

/// What authentication found out: the methods the server offered in its `none` reply, and
/// the fingerprint of the key that logged in (`None` when the server let the account in
/// without one).
pub(super) struct LoggedIn {
    pub(super) offered: Option<Vec<String>>,
    pub(super) key: Option<String>,
}

/// Public-key authentication (see [`LoggedIn`]).
pub(super) async fn authenticate(
    handle: &mut client::Handle<Verifier>,
    target: &Target,
    keys: &[KeyFile],
) -> Result<LoggedIn> {
    let who = target.display();
    let lost = |e: &dyn std::fmt::Display| {
        Error::Auth(format!(
            "authentication as {who} failed: the server closed the connection ({e}); too many \
             keys tried (sshd MaxAuthTries), or the account is not allowed to log in"
        ))
    };

    // The `none` probe is what every SSH client sends first; its failure lists the methods
    // the server would accept. It never counts against MaxAuthTries.
    let offered = match handle
        .authenticate_none(&target.user)
        .await
        .map_err(|e| lost(&e))?
    {
        client::AuthResult::Success => {
            tracing::debug!(target: "pxagent::ssh", user = %target.user, method = "none", "authenticated without a key");
            return Ok(LoggedIn {
                offered: None,
                key: None,
            });
        }
        client::AuthResult::Failure {
            remaining_methods, ..
        } => remaining_methods
            .iter()
            .map(|m| <&str>::from(m).to_string())
            .collect::<Vec<_>>(),
    };
    tracing::debug!(target: "pxagent::ssh", user = %target.user, offered = %offered.join(","), "server's authentication methods");
    if !offered.is_empty() && !offered.iter().any(|m| m == "publickey") {
        return Err(Error::Auth(format!(
            "{who}: the server does not offer public-key authentication for this user (it \
             offers: {}); pxagent never uses passwords",
            offered.join(", ")
        )));
    }

    let mut tried: Vec<String> = Vec::new();
    let mut tried_keys: Vec<PublicKey> = Vec::new();
    let mut encrypted: Vec<&Path> = Vec::new();
    let mut missing: Vec<String> = Vec::new();

    for key in keys {
        match key {
            KeyFile::Encrypted { path, .. } => encrypted.push(path),
            KeyFile::Missing { path } => missing.push(path.display().to_string()),
            KeyFile::Ready { path, key } => {
                let hash = rsa_hash(handle, &key.algorithm()).await;
                let with_alg = PrivateKeyWithHashAlg::new(key.clone(), hash);
                let result = handle
                    .authenticate_publickey(&target.user, with_alg)
                    .await
                    .map_err(|e| lost(&e))?;
                if result.success() {
                    tracing::debug!(
                        target: "pxagent::ssh",
                        user = %target.user,
                        method = "publickey",
                        key_file = %path.display(),
                        fingerprint = %sha256(key.public_key()),
                        "authenticated"
                    );
                    return Ok(LoggedIn {
                        offered: Some(offered),
                        key: Some(sha256(key.public_key())),
                    });
                }
                tried.push(format!("{} ({})", path.display(), sha256(key.public_key())));
                tried_keys.push(key.public_key().clone());
            }
        }
    }

    let mut agent_note = None;
    if target.use_agent {
        let socket = target
            .agent_socket
            .clone()
            .or_else(|| std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from));
        match socket {
            None => agent_note = Some("no ssh-agent (SSH_AUTH_SOCK is not set)".to_string()),
            Some(socket) => match agent_login(handle, target, keys, &tried_keys, &socket).await {
                Ok(AgentOutcome::Success(key)) => {
                    return Ok(LoggedIn {
                        offered: Some(offered),
                        key: Some(key),
                    });
                }
                Ok(AgentOutcome::Failed(agent_tried)) => {
                    if agent_tried.is_empty() {
                        agent_note = Some(format!(
                            "ssh-agent at {} offered no usable key",
                            socket.display()
                        ));
                    }
                    tried.extend(agent_tried);
                }
                Err(AgentError::Unreachable(e)) => {
                    agent_note = Some(format!(
                        "ssh-agent at {} is unreachable: {e}",
                        socket.display()
                    ))
                }
                Err(AgentError::Lost(e)) => return Err(lost(&e)),
            },
        }
    }

    let mut msg =
        format!("authentication as {who} failed (public key only; pxagent never uses passwords). ");
    if tried.is_empty() {
        msg.push_str("No key was offered");
    } else {
        msg.push_str(&format!("Keys tried: {}", tried.join(", ")));
    }
    if !missing.is_empty() {
        msg.push_str(&format!(
            "; identity file(s) not found: {}",
            missing.join(", ")
        ));
    }
    if let Some(note) = agent_note {
        msg.push_str(&format!("; {note}"));
    }
    msg.push('.');
    if !encrypted.is_empty() {
        let list: Vec<String> = encrypted.iter().map(|p| p.display().to_string()).collect();
        msg.push_str(&format!(
            " The key {} is passphrase-protected and pxagent does not prompt for passphrases: \
             load it into ssh-agent with `ssh-add {}` (and make sure SSH_AUTH_SOCK is set).",
            list.join(", "),
            list.join(" ")
        ));
    } else if tried.is_empty() {
        msg.push_str(" Give a key with -i/--identity or load one into ssh-agent.");
    } else {
        msg.push_str(&format!(
            " Check that the public key is in ~{}/.ssh/authorized_keys on the host (`pxagent \
             setup render` prints the setup).",
            target.user
        ));
    }
    Err(Error::Auth(msg))
}

/// For RSA keys, the best signature hash the server supports (rsa-sha2-512/256); `None`
/// otherwise or when the server does not say.
async fn rsa_hash(handle: &client::Handle<Verifier>, alg: &Algorithm) -> Option<HashAlg> {
    if !matches!(alg, Algorithm::Rsa { .. }) {
        return None;
    }
    handle
        .best_supported_rsa_hash()
        .await
        .ok()
        .flatten()
        .flatten()
}

enum AgentOutcome {
    /// Logged in with the agent key of this fingerprint.
    Success(String),
    Failed(Vec<String>),
}

enum AgentError {
    Unreachable(String),
    Lost(String),
}

async fn agent_login(
    handle: &mut client::Handle<Verifier>,
    target: &Target,
    keys: &[KeyFile],
    already_tried: &[PublicKey],
    socket: &Path,
) -> std::result::Result<AgentOutcome, AgentError> {
    let mut agent = AgentClient::connect_uds(socket)
        .await
        .map_err(|e| AgentError::Unreachable(e.to_string()))?;
    let identities = agent
        .request_identities()
        .await
        .map_err(|e| AgentError::Unreachable(e.to_string()))?;
    let file_keys: Vec<PublicKey> = keys.iter().filter_map(KeyFile::public).collect();
    let matches_file = |k: &PublicKey| file_keys.iter().any(|f| f.key_data() == k.key_data());

    // Plain keys only: agent-held certificates would need a CA on the host, which pxagent's
    // setup does not use.
    let mut candidates: Vec<(PublicKey, String)> = identities
        .iter()
        .filter_map(|id| match id {
            russh::keys::agent::AgentIdentity::PublicKey { key, comment } => {
                Some((key.clone(), comment.clone()))
            }
            russh::keys::agent::AgentIdentity::Certificate { .. } => None,
        })
        .filter(|(k, _)| !already_tried.iter().any(|t| t.key_data() == k.key_data()))
        .filter(|(k, _)| !target.identities_only || matches_file(k))
        .collect();
    // Keys that match a named identity file first (OpenSSH orders them the same way).
    candidates.sort_by_key(|(k, _)| !matches_file(k));

    let mut tried = Vec::new();
    for (key, comment) in candidates {
        let hash = rsa_hash(handle, &key.algorithm()).await;
        let result = handle
            .authenticate_publickey_with(&target.user, key.clone(), hash, &mut agent)
            .await;
        match result {
            Ok(r) if r.success() => {
                tracing::debug!(
                    target: "pxagent::ssh",
                    user = %target.user,
                    method = "publickey",
                    key_file = "ssh-agent",
                    agent = %socket.display(),
                    fingerprint = %sha256(&key),
                    "authenticated"
                );
                return Ok(AgentOutcome::Success(sha256(&key)));
            }
            Ok(_) => {}
            // The agent refused to sign (locked, confirmation denied): try the next key.
            Err(russh::AgentAuthError::Key(_)) => {}
            Err(russh::AgentAuthError::Send(e)) => return Err(AgentError::Lost(e.to_string())),
        }
        let name = if comment.is_empty() {
            "ssh-agent key".to_string()
        } else {
            format!("ssh-agent key '{comment}'")
        };
        tried.push(format!("{name} ({})", sha256(&key)));
    }
    Ok(AgentOutcome::Failed(tried))
}

/// The fingerprints of the public keys `target` would offer from its key files (those that
/// exist; passphrase-protected ones by their public half), sorted. The same permission checks
/// as a connection: an unprotected key file is refused.
pub(super) fn file_fingerprints(target: &Target) -> Result<Vec<String>> {
    let mut v: Vec<String> = load_identities(&target.identities)?
        .iter()
        .filter_map(KeyFile::public)
        .map(|k| sha256(&k))
        .collect();
    v.sort();
    v.dedup();
    Ok(v)
}

/// Whether `target` could log in with the key of this fingerprint itself: it is one of its key
/// files, or (agent allowed) a key its ssh-agent holds — and, with `IdentitiesOnly`, also a
/// key file's. A persistent connection is used only by callers that could have opened it.
pub(super) async fn could_use(target: &Target, fingerprint: &str) -> Result<bool> {
    let files = file_fingerprints(target)?;
    if files.iter().any(|f| f == fingerprint) {
        return Ok(true);
    }
    if !target.use_agent || target.identities_only {
        return Ok(false);
    }
    let Some(socket) = target
        .agent_socket
        .clone()
        .or_else(|| std::env::var_os("SSH_AUTH_SOCK").map(PathBuf::from))
    else {
        return Ok(false);
    };
    let Ok(mut agent) = AgentClient::connect_uds(&socket).await else {
        return Ok(false);
    };
    let Ok(ids) = agent.request_identities().await else {
        return Ok(false);
    };
    Ok(ids.iter().any(|id| match id {
        russh::keys::agent::AgentIdentity::PublicKey { key, .. } => sha256(key) == fingerprint,
        russh::keys::agent::AgentIdentity::Certificate { .. } => false,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unprotected_key_is_refused_before_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id");
        std::fs::write(&path, "not even a key").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_identity(&path).err().unwrap();
        assert_eq!(err.exit_code(), 6);
        assert!(err.to_string().contains("UNPROTECTED PRIVATE KEY FILE"));
        assert!(err.to_string().contains("0644"));
        assert!(matches!(
            load_identity(&dir.path().join("nope")),
            Ok(KeyFile::Missing { .. })
        ));
    }
}
