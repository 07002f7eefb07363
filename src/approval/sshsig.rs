//! Keys and signatures: loading the signer's private key, making an SSHSIG signature over a
//! statement (what `ssh-keygen -Y sign -n pxagent-approval` makes), and the approvers file
//! that lists whose signatures count.
//!
//! The one file of the approval library that uses the `ssh-key` crate (through russh's
//! re-export, offline: no transport). Decisions:
//! - **Private keys follow the transport's rules** (`src/ssh/auth.rs`): a key file readable by
//!   group or others is refused (it must be presumed leaked), and a passphrase is never asked
//!   for. An encrypted key or a FIDO key is signed with `ssh-keygen -Y sign` instead, whose
//!   `.sig` file is an equally valid approval.
//! - **The approvers file is authorized_keys style without options**: one public key per line,
//!   blank lines and `#` comments skipped. Options (`from=`, `restrict`…) would suggest limits
//!   that nothing here enforces, so a line with them is an error, as is a certificate, a DSA
//!   key, an RSA key under 2048 bits, or a file that group or others can write (whoever can
//!   write it can approve anything).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub use russh::keys::ssh_key::PrivateKey;
use russh::keys::ssh_key::{HashAlg, LineEnding, PublicKey, SshSig, public::KeyData};

use super::NAMESPACE;
use crate::base::error::{Error, Result};

/// Key types an approver may have. Security keys (`sk-…`) are the point of allowing
/// `ssh-keygen -Y sign`.
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "sk-ssh-ed25519@openssh.com",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-rsa",
];

/// The smallest RSA modulus accepted from an approver.
const MIN_RSA_BITS: u32 = 2048;

/// Load the private key a human signs approvals with. Refused (usage errors, exit 2): a file
/// group or others can read, an unreadable or unparsable file, a passphrase-protected key,
/// a FIDO key — the last two with the `ssh-keygen -Y sign` command that handles them.
pub fn load_private_key(path: &Path) -> Result<PrivateKey> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::usage(format!(
            "WARNING: UNPROTECTED PRIVATE KEY FILE! Permissions {mode:04o} for '{shown}' are too \
             open: a private key must not be readable by group or others. Refusing to use it; \
             fix with `chmod 600 {shown}`"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    let key = match russh::keys::decode_secret_key(&text, None) {
        Ok(key) => key,
        Err(russh::keys::Error::KeyIsEncrypted) => {
            return Err(Error::usage(format!(
                "the key {shown} is passphrase-protected and pxagent never asks for passphrases: \
                 sign with `ssh-keygen -Y sign -n {NAMESPACE} -f {shown} statement.txt` instead \
                 (it asks, or uses your ssh-agent); its statement.txt.sig is the approval"
            )));
        }
        Err(e) => {
            return Err(Error::usage(format!(
                "cannot use private key {shown}: {e} (expected an unencrypted OpenSSH private key)"
            )));
        }
    };
    if key.algorithm().as_str().starts_with("sk-") {
        return Err(Error::usage(format!(
            "the key {shown} lives on a security key, which only OpenSSH can drive: sign with \
             `ssh-keygen -Y sign -n {NAMESPACE} -f {shown} statement.txt`; its \
             statement.txt.sig is the approval"
        )));
    }
    Ok(key)
}

/// Sign a statement's text: the armored SSH signature (SHA-512, namespace [`NAMESPACE`]),
/// byte for byte what `ssh-keygen -Y sign -n pxagent-approval` writes.
pub fn sign(key: &PrivateKey, statement_text: &str) -> Result<String> {
    key.sign(NAMESPACE, HashAlg::Sha512, statement_text.as_bytes())
        .and_then(|sig| sig.to_pem(LineEnding::LF))
        .map_err(|e| Error::usage(format!("cannot sign with this key: {e}")))
}

/// One approver: a public key and the comment it was listed with.
#[derive(Debug, Clone)]
pub struct Approver {
    key: PublicKey,
    /// The key's comment in the approvers file (often who it belongs to); may be empty.
    pub comment: String,
    /// `SHA256:…`, as `ssh-keygen -l` shows it.
    pub fingerprint: String,
    /// The line of the approvers file it came from.
    pub line: usize,
}

/// The keys whose signatures count as approvals (`/etc/pxagent/approvers`).
#[derive(Debug, Clone, Default)]
pub struct Approvers {
    keys: Vec<Approver>,
}

impl Approvers {
    /// Parse an approvers file's text; `source` names it in errors. A bad line is an error
    /// naming its number: a half-understood list of approvers must not be used.
    pub fn parse(text: &str, source: &str) -> std::result::Result<Approvers, String> {
        let mut keys = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = i + 1;
            let key = parse_key_line(line).map_err(|why| format!("{source}:{n}: {why}"))?;
            keys.push(Approver {
                comment: key.comment().as_str_lossy().to_string(),
                fingerprint: fingerprint(key.key_data()),
                line: n,
                key,
            });
        }
        Ok(Approvers { keys })
    }

    /// Read and parse an approvers file. Refused when group or others can write it.
    pub fn load(path: &Path) -> std::result::Result<Approvers, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("cannot read approvers file {shown}: {e}"))?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(format!(
                "the approvers file {shown} is writable by group or others (mode {mode:04o}): \
                 anyone who can write it could approve anything; fix with `chmod 644 {shown}`"
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read approvers file {shown}: {e}"))?;
        Approvers::parse(&text, &shown.to_string())
    }

    /// How many keys are listed.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is listed (then nothing can be approved).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The listed keys, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &Approver> {
        self.keys.iter()
    }

    /// The first listed approver with exactly this key (key data, not comment).
    pub(super) fn find(&self, key: &KeyData) -> Option<&Approver> {
        self.keys.iter().find(|a| a.key.key_data() == key)
    }
}

impl Approver {
    /// Whether `sig` is a valid signature by this approver over `msg` in [`NAMESPACE`].
    pub(super) fn verifies(&self, msg: &[u8], sig: &SshSig) -> bool {
        self.key.verify(NAMESPACE, msg, sig).is_ok()
    }
}

/// `SHA256:…` of a public key.
pub(super) fn fingerprint(key: &KeyData) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Why a signature that verifies must still not count, if it must not: RSA over SHA-1 (as
/// OpenSSH refuses in SSHSIG), and a security-key signature made without the user-presence
/// flag (a touch), which `ssh-keygen -Y verify` also requires.
pub(super) fn weak_signature(sig: &SshSig) -> Option<&'static str> {
    let alg = sig.signature().algorithm();
    match alg.as_str() {
        "ssh-rsa" => Some(
            "an RSA signature over SHA-1, which is refused; sign with rsa-sha2-512 (what ssh-keygen and pxagent do)",
        ),
        "sk-ssh-ed25519@openssh.com" | "sk-ecdsa-sha2-nistp256@openssh.com"
            if !user_present(sig.signature_bytes()) =>
        {
            Some("a security-key signature made without touching the key (no user-presence flag)")
        }
        _ => None,
    }
}

/// A security-key signature ends with its flags byte and a 4-byte counter; bit 0 of the
/// flags is "user present".
fn user_present(sig_bytes: &[u8]) -> bool {
    sig_bytes
        .len()
        .checked_sub(5)
        .and_then(|i| sig_bytes.get(i))
        .is_some_and(|flags| flags & 0x01 != 0)
}

/// Decode an armored signature.
pub(super) fn decode(armored: &str) -> std::result::Result<SshSig, String> {
    SshSig::from_pem(armored.trim().as_bytes())
        .map_err(|e| format!("the signature cannot be decoded ({e}): it is not an SSH signature as `ssh-keygen -Y sign` writes"))
}

fn parse_key_line(line: &str) -> std::result::Result<PublicKey, String> {
    let first = line.split_whitespace().next().unwrap_or("");
    if !KEY_TYPES.contains(&first) {
        return Err(if first.ends_with("-cert-v01@openssh.com") {
            "a certificate: list the plain public key instead".to_string()
        } else if first == "ssh-dss" {
            "a DSA key, which is not accepted: use an ed25519 key".to_string()
        } else {
            format!(
                "expected `KEYTYPE BASE64 [COMMENT]`, found {:?} where the key type belongs; \
                 options or names before the key type (authorized_keys `from=`/`restrict`, \
                 allowed_signers principals) are not supported: list the bare public key",
                crate::base::text::printable(&first.chars().take(40).collect::<String>())
            )
        });
    }
    let key = PublicKey::from_openssh(line).map_err(|e| format!("bad {first} public key: {e}"))?;
    if let KeyData::Rsa(rsa) = key.key_data()
        && rsa.key_size() < MIN_RSA_BITS
    {
        return Err(format!(
            "an RSA key of {} bits, under the {MIN_RSA_BITS} accepted",
            rsa.key_size()
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnWfVD/d91OTlCmeNSfvZdxyiJKvPg/1TReVYy0hhlF alice@example";

    #[test]
    fn approvers_skip_blanks_and_comments() {
        let text = format!("# who may approve\n\n   \n{ED}\n  {ED}  \n");
        let a = Approvers::parse(&text, "approvers").unwrap();
        assert_eq!(a.len(), 2);
        assert!(!a.is_empty());
        let first = a.iter().next().unwrap();
        assert_eq!(first.comment, "alice@example");
        assert_eq!(first.line, 4);
        assert!(
            first.fingerprint.starts_with("SHA256:"),
            "{}",
            first.fingerprint
        );
        assert!(Approvers::parse("# nobody\n", "x").unwrap().is_empty());
    }

    #[test]
    fn approvers_errors_name_the_line() {
        let cases = [
            (
                format!("# c\n{ED}\nrestrict {ED}\n"),
                "approvers:3: expected `KEYTYPE BASE64 [COMMENT]`, found \"restrict\"",
            ),
            (format!("from=\"10.0.0.1\" {ED}\n"), "approvers:1: expected"),
            (
                format!("alice@example {ED}\n"),
                "allowed_signers principals",
            ),
            (
                "\n\nssh-ed25519 AAAAnotbase64!\n".to_string(),
                "approvers:3: bad ssh-ed25519 public key",
            ),
            (
                "ssh-ed25519\n".to_string(),
                "approvers:1: bad ssh-ed25519 public key",
            ),
            (
                "ssh-dss AAAAB3NzaC1kc3MAAACBAP\n".to_string(),
                "approvers:1: a DSA key",
            ),
            (
                "ssh-ed25519-cert-v01@openssh.com AAAA\n".to_string(),
                "approvers:1: a certificate",
            ),
            // The type word must match the key inside.
            (
                ED.replace("ssh-ed25519 ", "ecdsa-sha2-nistp256 "),
                "approvers:1: bad ecdsa-sha2-nistp256 public key",
            ),
        ];
        for (text, expect) in cases {
            let err = Approvers::parse(&text, "approvers").unwrap_err();
            assert!(err.contains(expect), "{err:?} should contain {expect:?}");
        }
    }

    #[test]
    fn load_refuses_a_file_others_can_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvers");
        std::fs::write(&path, format!("{ED}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Approvers::load(&path).unwrap().len(), 1);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        let err = Approvers::load(&path).unwrap_err();
        assert!(
            err.contains("writable by group or others (mode 0664)"),
            "{err}"
        );
        let err = Approvers::load(&dir.path().join("nope")).unwrap_err();
        assert!(err.contains("cannot read approvers file"), "{err}");
    }

    #[test]
    fn verifying_signatures_can_still_be_too_weak() {
        use russh::keys::ssh_key::{Algorithm, Signature};
        let key = PublicKey::from_openssh(ED).unwrap().key_data().clone();
        let sig = |alg: Algorithm, bytes: Vec<u8>| {
            SshSig::new(
                key.clone(),
                NAMESPACE,
                HashAlg::Sha512,
                Signature::new(alg, bytes).unwrap(),
            )
            .unwrap()
        };
        let sha1 = sig(Algorithm::Rsa { hash: None }, vec![1; 256]);
        assert!(weak_signature(&sha1).unwrap().contains("SHA-1"));
        assert_eq!(
            weak_signature(&sig(
                Algorithm::Rsa {
                    hash: Some(HashAlg::Sha512)
                },
                vec![1; 256]
            )),
            None
        );
        let mut sk = vec![7u8; 64];
        sk.extend([0x00, 0, 0, 0, 1]);
        let untouched = sig(Algorithm::SkEd25519, sk.clone());
        assert!(
            weak_signature(&untouched)
                .unwrap()
                .contains("user-presence")
        );
        sk[64] = 0x01;
        assert_eq!(weak_signature(&sig(Algorithm::SkEd25519, sk)), None);
        assert_eq!(weak_signature(&sig(Algorithm::Ed25519, vec![7; 64])), None);
    }

    #[test]
    fn user_presence_is_bit_zero_of_the_flags_before_the_counter() {
        let mut sig = vec![7u8; 64];
        sig.extend([0x01, 0, 0, 0, 9]);
        assert!(user_present(&sig));
        sig[64] = 0x04;
        assert!(!user_present(&sig));
        assert!(!user_present(&[1, 2, 3]));
    }
}
