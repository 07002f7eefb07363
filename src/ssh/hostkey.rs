//! The host key check: the russh [`client::Handler`] that compares the server's key with
//! known_hosts inside the handshake, so a refusal comes before a user name or key is sent.
//!
//! Unknown hosts are refused unless the policy is [`HostKeyPolicy::AcceptNew`] (then the key is
//! appended, OpenSSH's `accept-new`); a changed key, a revoked key, or a host recorded only
//! with other key types is refused always. Uses [`super::known_hosts`] for the file and
//! nothing above the transport.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use russh::client;
use russh::keys::{Algorithm, PublicKey};

use super::{HostKeyPolicy, Target, describe, known_hosts, sha256};
use crate::base::error::{Error, Result};

/// What the handshake learnt about the host key, read back by the session once connected.
#[derive(Default)]
pub(super) struct HostKeyOutcome {
    /// The key the server presented, as `ssh-ed25519 key SHA256:…`.
    pub(super) presented: String,
    /// With accept-new, the note that the key was recorded (`added … to PATH:LINE`).
    pub(super) recorded: Option<String>,
    /// The key itself in OpenSSH form (`ssh-ed25519 AAAA…`), so that another process can
    /// check it against its own known_hosts (a persistent connection's callers).
    pub(super) key_line: String,
}

/// The russh handler: its one job is the host key check, done during the handshake, so a
/// refusal comes before authentication.
pub(super) struct Verifier {
    host: String,
    port: u16,
    user: String,
    known_hosts: PathBuf,
    policy: HostKeyPolicy,
    entries: Vec<known_hosts::Entry>,
    outcome: Arc<Mutex<HostKeyOutcome>>,
    ended: Arc<Mutex<Option<Ended>>>,
}

/// Why an established connection ended, as russh told the handler: the session's messages
/// name it instead of the bare "channel closed".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ended {
    /// The host answered none of the keepalives (a half-open or silent link).
    Keepalive,
    /// Anything else, said in words.
    Other(String),
}

/// Lets a precise [`Error`] escape the handshake instead of russh's generic "unknown key".
#[derive(Debug)]
pub(super) enum HandlerError {
    Ssh(russh::Error),
    HostKey(Error),
}

impl Verifier {
    /// A verifier for `target` against the parsed `entries` of its known_hosts file; what it
    /// learns lands in `outcome`.
    pub(super) fn new(
        target: &Target,
        entries: Vec<known_hosts::Entry>,
        outcome: Arc<Mutex<HostKeyOutcome>>,
        ended: Arc<Mutex<Option<Ended>>>,
    ) -> Verifier {
        Verifier {
            host: target.host.clone(),
            port: target.port,
            user: target.user.clone(),
            known_hosts: target.known_hosts.clone(),
            policy: target.host_key_policy,
            entries,
            outcome,
            ended,
        }
    }
}

impl From<russh::Error> for HandlerError {
    fn from(e: russh::Error) -> Self {
        HandlerError::Ssh(e)
    }
}

impl client::Handler for Verifier {
    type Error = HandlerError;

    async fn check_server_key(
        &mut self,
        server_key: &russh::keys::PublicKeyOrCertificate,
    ) -> std::result::Result<bool, HandlerError> {
        let key = match server_key {
            russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            // pxagent does not advertise certificate host key algorithms, so this does not
            // happen; if it did, refuse rather than trust a CA nobody configured.
            russh::keys::PublicKeyOrCertificate::Certificate(_) => {
                return Err(HandlerError::HostKey(Error::Auth(format!(
                    "{}:{} presented a host certificate; pxagent checks plain host keys only",
                    self.host, self.port
                ))));
            }
        };
        {
            let mut outcome = self.outcome.lock().expect("host key outcome lock");
            outcome.presented = describe(&key);
            outcome.key_line = key.to_openssh().unwrap_or_default();
        }
        self.verify(&key).map_err(HandlerError::HostKey)
    }

    async fn disconnected(
        &mut self,
        reason: client::DisconnectReason<HandlerError>,
    ) -> std::result::Result<(), HandlerError> {
        let ended = match &reason {
            client::DisconnectReason::ReceivedDisconnect(info) => Ended::Other(format!(
                "the host closed the connection{}",
                if info.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", info.message.escape_debug())
                }
            )),
            client::DisconnectReason::Error(HandlerError::Ssh(russh::Error::KeepaliveTimeout)) => {
                Ended::Keepalive
            }
            client::DisconnectReason::Error(e) => Ended::Other(match e {
                HandlerError::Ssh(e) => e.to_string(),
                HandlerError::HostKey(e) => e.to_string(),
            }),
        };
        tracing::debug!(target: "pxagent::ssh", host = %self.host, port = self.port, reason = ?ended, "disconnected");
        *self.ended.lock().expect("ended lock") = Some(ended);
        match reason {
            client::DisconnectReason::ReceivedDisconnect(_) => Ok(()),
            client::DisconnectReason::Error(e) => Err(e),
        }
    }
}

impl Verifier {
    fn verify(&mut self, key: &PublicKey) -> Result<bool> {
        let name = known_hosts::host_key_name(&self.host, self.port);
        let kh = self.known_hosts.display();
        let verdict = known_hosts::check(&self.entries, &self.host, self.port, key);
        tracing::debug!(
            target: "pxagent::ssh",
            host = %name,
            algorithm = key.algorithm().as_str(),
            fingerprint = %sha256(key),
            known_hosts = %kh,
            verdict = match &verdict {
                known_hosts::Verdict::Known => "matched",
                known_hosts::Verdict::Unknown => "not recorded",
                known_hosts::Verdict::Changed { .. } => "CHANGED",
                known_hosts::Verdict::OtherTypes { .. } => "recorded with other key types only",
                known_hosts::Verdict::Revoked { .. } => "revoked",
            },
            "host key"
        );
        match verdict {
            known_hosts::Verdict::Known => Ok(true),
            known_hosts::Verdict::Unknown => match self.policy {
                HostKeyPolicy::AcceptNew => {
                    let line = known_hosts::append(&self.known_hosts, &self.host, self.port, key)
                        .map_err(|e| {
                        Error::Auth(format!("cannot record the host key of {name} in {kh}: {e}"))
                    })?;
                    tracing::debug!(
                        target: "pxagent::ssh",
                        host = %name,
                        known_hosts = %kh,
                        line,
                        "accept-new: recorded the host key"
                    );
                    self.outcome.lock().expect("host key outcome lock").recorded =
                        Some(format!("added {name} {} to {kh}:{line}", describe(key)));
                    Ok(true)
                }
                HostKeyPolicy::Strict => Err(Error::Auth(format!(
                    "host key verification failed: {name} is not in {kh}. The server presented \
                     {}. Verify this fingerprint out of band (on the host: `ssh-keygen -lf \
                     /etc/ssh/ssh_host_{}_key.pub`), then trust it by running once with \
                     `--accept-new` (e.g. `pxagent --accept-new -H {}@{} preflight`), or record \
                     it with `{} >> {kh}`",
                    describe(key),
                    keyscan_type(key).unwrap_or("ed25519"),
                    self.user,
                    host_arg(&self.host, self.port),
                    keyscan_command(&self.host, self.port, key),
                ))),
            },
            known_hosts::Verdict::Changed { line, stored } => Err(Error::Auth(format!(
                "REMOTE HOST IDENTIFICATION HAS CHANGED for {name}: the server presented {}, but \
                 {kh}:{line} records {}. Someone may be intercepting the connection \
                 (man-in-the-middle), or the host was reinstalled. Refusing to connect (also \
                 with --accept-new). If the change is expected, verify the new fingerprint out \
                 of band, remove the old entry with `ssh-keygen -R '{name}' -f {kh}`, and \
                 connect once with --accept-new",
                describe(key),
                describe(&stored),
            ))),
            known_hosts::Verdict::OtherTypes { stored } => {
                let recorded: Vec<String> = stored
                    .iter()
                    .map(|(line, k)| format!("{} at {kh}:{line}", describe(k)))
                    .collect();
                Err(Error::Auth(format!(
                    "host key verification failed: {name} is recorded only with other key \
                     types ({}), but the server presented {}. Refusing to connect (also with \
                     --accept-new). Verify the new key out of band, then add it with `{} >> {kh}`",
                    recorded.join("; "),
                    describe(key),
                    keyscan_command(&self.host, self.port, key),
                )))
            }
            known_hosts::Verdict::Revoked { line } => Err(Error::Auth(format!(
                "host key verification failed: the server {name} presented {}, which {kh}:{line} \
                 marks @revoked. Refusing to connect",
                describe(key)
            ))),
        }
    }
}

/// Check a host key another process saw (`ssh-ed25519 AAAA…`, a persistent connection's) as
/// if this process had connected to `target` itself: the same known_hosts file, the same
/// verdicts and messages (a changed, revoked or unknown key is refused; with accept-new an
/// unknown key is recorded). Returns what the handshake check would have noted.
pub(super) fn check_line(target: &Target, key_line: &str) -> Result<Option<String>> {
    let key = PublicKey::from_openssh(key_line.trim()).map_err(|e| {
        Error::Auth(format!(
            "the persistent connection to {} reported a host key that is not an OpenSSH key ({e}); refusing it",
            target.display()
        ))
    })?;
    let entries = known_hosts::read(&target.known_hosts).map_err(|source| Error::ReadFile {
        path: target.known_hosts.clone(),
        source,
    })?;
    let outcome = Arc::new(Mutex::new(HostKeyOutcome::default()));
    let mut v = Verifier::new(target, entries, outcome.clone(), Arc::new(Mutex::new(None)));
    v.verify(&key)?;
    let recorded = outcome
        .lock()
        .expect("host key outcome lock")
        .recorded
        .take();
    Ok(recorded)
}

fn keyscan_type(key: &PublicKey) -> Option<&'static str> {
    match key.algorithm() {
        Algorithm::Ed25519 => Some("ed25519"),
        Algorithm::Ecdsa { .. } => Some("ecdsa"),
        Algorithm::Rsa { .. } => Some("rsa"),
        _ => None,
    }
}

fn keyscan_command(host: &str, port: u16, key: &PublicKey) -> String {
    let mut cmd = String::from("ssh-keyscan");
    if port != 22 {
        cmd.push_str(&format!(" -p {port}"));
    }
    if let Some(t) = keyscan_type(key) {
        cmd.push_str(&format!(" -t {t}"));
    }
    cmd.push(' ');
    cmd.push_str(host);
    cmd
}

fn host_arg(host: &str, port: u16) -> String {
    match (host.contains(':'), port) {
        (false, 22) => host.to_string(),
        (false, p) => format!("{host}:{p}"),
        (true, 22) => host.to_string(),
        (true, p) => format!("[{host}]:{p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyscan_hint() {
        let key = PublicKey::from_openssh(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ",
        )
        .unwrap();
        assert_eq!(
            keyscan_command("127.0.0.1", 2301, &key),
            "ssh-keyscan -p 2301 -t ed25519 127.0.0.1"
        );
        assert_eq!(
            keyscan_command("pve", 22, &key),
            "ssh-keyscan -t ed25519 pve"
        );
        assert_eq!(host_arg("pve", 22), "pve");
        assert_eq!(host_arg("::1", 2301), "[::1]:2301");
    }
}
