//! One OpenSSH public key line (`ALGORITHM BASE64 [COMMENT]`), parsed into plain types for the
//! files pxagent writes onto the host (`setup render`: the agent's authorized key, the
//! approvers file). It lives here because this folder is the only user of russh and its
//! ssh-key types; it does no I/O and knows nothing of the setup script.
//!
//! Only bare keys parse: a line with authorized_keys options in front (`restrict,command=… `),
//! a certificate, or anything after which ssh-key's decoder finds trailing bytes is refused,
//! so the caller can say which of those it was.

use russh::keys::HashAlg;
use russh::keys::ssh_key::PublicKey;

/// What the rest of pxagent may know about a parsed public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKeyLine {
    /// The algorithm as OpenSSH writes it first on the line (`ssh-ed25519`, `ssh-rsa`, …).
    pub algorithm: String,
    /// The base64 key blob, the line's second word: it identifies the key whatever the comment.
    pub blob: String,
    /// The comment (the rest of the line), possibly empty.
    pub comment: String,
    /// The RSA modulus size in bits; `None` for other algorithms.
    pub rsa_bits: Option<u32>,
    /// Whether this is a DSA key (refused by OpenSSH's defaults since 7.0, removed in 10.0).
    pub dsa: bool,
    /// The SHA256 fingerprint as `ssh-keygen -l` prints it (`SHA256:…`).
    pub fingerprint: String,
}

impl PublicKeyLine {
    /// The line as OpenSSH writes it: algorithm, blob and (when there is one) the comment.
    pub fn to_line(&self) -> String {
        if self.comment.is_empty() {
            format!("{} {}", self.algorithm, self.blob)
        } else {
            format!("{} {} {}", self.algorithm, self.blob, self.comment)
        }
    }
}

/// Parse one public key line. The error is ssh-key's reason, for the caller to put into its
/// own message (which names the file and line).
pub fn parse_public_key(line: &str) -> Result<PublicKeyLine, String> {
    let key = PublicKey::from_openssh(line.trim()).map_err(|e| e.to_string())?;
    let text = key.to_openssh().map_err(|e| e.to_string())?;
    let mut words = text.splitn(3, ' ');
    let algorithm = words.next().unwrap_or_default().to_string();
    let blob = words.next().unwrap_or_default().to_string();
    let comment = words.next().unwrap_or_default().trim().to_string();
    if algorithm.is_empty() || blob.is_empty() {
        return Err("not of the form ALGORITHM BASE64 [COMMENT]".into());
    }
    Ok(PublicKeyLine {
        algorithm,
        blob,
        comment,
        rsa_bits: key.key_data().rsa().map(|k| k.key_size()),
        dsa: key.key_data().is_dsa(),
        fingerprint: key.fingerprint(HashAlg::Sha256).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILM+rvN+ot98qgEN796jTiQfZfG1KaT0PtFDJ/XFSqti foo@bar.com";

    #[test]
    fn a_bare_key_parses_with_its_parts() {
        let k = parse_public_key(ED).unwrap();
        assert_eq!(k.algorithm, "ssh-ed25519");
        assert!(k.blob.starts_with("AAAAC3NzaC1lZDI1NTE5"));
        assert_eq!(k.comment, "foo@bar.com");
        assert_eq!(k.to_line(), ED);
        assert!(k.fingerprint.starts_with("SHA256:"), "{}", k.fingerprint);
        assert_eq!((k.rsa_bits, k.dsa), (None, false));
        let bare = parse_public_key(&ED[..ED.len() - " foo@bar.com".len()]).unwrap();
        assert_eq!(bare.comment, "");
        assert_eq!(bare.blob, k.blob);
    }

    #[test]
    fn options_certificates_and_garbage_do_not_parse() {
        for bad in [
            &format!("restrict,command=\"x\" {ED}"),
            "ssh-ed25519 AAAA",
            "ssh-ed25519",
            "",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            // The blob says ed25519, the text says rsa.
            &ED.replacen("ssh-ed25519", "ssh-rsa", 1),
        ] {
            assert!(parse_public_key(bad).is_err(), "{bad}");
        }
    }
}
