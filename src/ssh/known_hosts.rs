//! Reading and appending OpenSSH `known_hosts` files for the transport's host-key check.
//!
//! russh ships a known_hosts helper, but pxagent needs more than it offers: correct line
//! numbers when the file has comments (the "key changed" refusal names `path:line`), fields
//! separated by any whitespace, `@revoked` and `@cert-authority` markers, wildcard and negated
//! host patterns, and a distinction between "unknown host" and "host known only with other key
//! types" (which `--accept-new` must not paper over). The format is sshd(8)'s
//! "SSH_KNOWN_HOSTS FILE FORMAT"; lines that do not parse are skipped, as OpenSSH does.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use russh::keys::ssh_key::known_hosts::HostPatterns;
use russh::keys::{Algorithm, PublicKey};
use sha1::Sha1;

use crate::ssh::config::wildcard_match;

/// The name a host is recorded under: `host` on port 22, `[host]:port` otherwise.
pub(crate) fn host_key_name(host: &str, port: u16) -> String {
    let host = host.to_ascii_lowercase();
    if port == 22 {
        host
    } else {
        format!("[{host}]:{port}")
    }
}

/// One parsed line.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// 1-based line number in the file, as editors and `ssh-keygen -R` count.
    pub line: usize,
    marker: Option<Marker>,
    hosts: Hosts,
    pub key: PublicKey,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    CertAuthority,
    Revoked,
}

#[derive(Debug, Clone)]
enum Hosts {
    Patterns(Vec<String>),
    Hashed { salt: Vec<u8>, hash: [u8; 20] },
}

impl Hosts {
    fn matches(&self, name: &str) -> bool {
        match self {
            Hosts::Hashed { salt, hash } => {
                let Ok(mac) = <Hmac<Sha1> as KeyInit>::new_from_slice(salt) else {
                    return false;
                };
                mac.chain_update(name.as_bytes()).verify_slice(hash).is_ok()
            }
            Hosts::Patterns(patterns) => {
                let mut matched = false;
                for p in patterns {
                    let p = p.to_ascii_lowercase();
                    if let Some(neg) = p.strip_prefix('!') {
                        if wildcard_match(neg, name) {
                            return false;
                        }
                    } else if wildcard_match(&p, name) {
                        matched = true;
                    }
                }
                matched
            }
        }
    }
}

/// Parses a whole file; a missing file is an empty list (nothing is known yet).
pub(crate) fn read(path: &Path) -> std::io::Result<Vec<Entry>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(parse(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

pub(crate) fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| parse_line(i + 1, line))
        .collect()
}

fn parse_line(line_no: usize, line: &str) -> Option<Entry> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut fields = line.split_whitespace().peekable();
    let marker = match fields.peek() {
        Some(m) if m.starts_with('@') => {
            let marker = match *m {
                "@cert-authority" => Marker::CertAuthority,
                "@revoked" => Marker::Revoked,
                _ => return None,
            };
            fields.next();
            Some(marker)
        }
        _ => None,
    };
    let hosts_field = fields.next()?;
    let key_type = fields.next()?;
    let key_b64 = fields.next()?;
    let hosts = if hosts_field.starts_with("|1|") {
        match hosts_field.parse::<HostPatterns>().ok()? {
            HostPatterns::HashedName { salt, hash } => Hosts::Hashed { salt, hash },
            HostPatterns::Patterns(_) => return None,
        }
    } else {
        Hosts::Patterns(hosts_field.split(',').map(str::to_string).collect())
    };
    let key = PublicKey::from_openssh(&format!("{key_type} {key_b64}")).ok()?;
    Some(Entry {
        line: line_no,
        marker,
        hosts,
        key,
    })
}

/// What the file says about the key a server presented.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// An entry for this host holds exactly this key.
    Known,
    /// No entry names this host at all.
    Unknown,
    /// The host is recorded with a different key of the same type: the classic MITM warning.
    Changed { line: usize, stored: PublicKey },
    /// The host is recorded, but only with keys of other types. OpenSSH would ask; pxagent
    /// refuses, because accepting would let an attacker downgrade to a type it holds.
    OtherTypes { stored: Vec<(usize, PublicKey)> },
    /// The key is marked `@revoked`.
    Revoked { line: usize },
}

pub(crate) fn check(entries: &[Entry], host: &str, port: u16, key: &PublicKey) -> Verdict {
    let name = host_key_name(host, port);
    // A revoked key is refused whatever host it is presented for (sshd(8)).
    if let Some(e) = entries
        .iter()
        .find(|e| e.marker == Some(Marker::Revoked) && e.key.key_data() == key.key_data())
    {
        return Verdict::Revoked { line: e.line };
    }
    let for_host: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.marker.is_none() && e.hosts.matches(&name))
        .collect();
    if for_host.iter().any(|e| e.key.key_data() == key.key_data()) {
        return Verdict::Known;
    }
    if let Some(e) = for_host
        .iter()
        .find(|e| same_family(&e.key.algorithm(), &key.algorithm()))
    {
        return Verdict::Changed {
            line: e.line,
            stored: e.key.clone(),
        };
    }
    if for_host.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::OtherTypes {
            stored: for_host.iter().map(|e| (e.line, e.key.clone())).collect(),
        }
    }
}

/// The key types already recorded for this host, so the handshake can ask for those first (as
/// OpenSSH orders HostKeyAlgorithms) instead of tripping over a second key type the server has.
pub(crate) fn known_algorithms(entries: &[Entry], host: &str, port: u16) -> Vec<Algorithm> {
    let name = host_key_name(host, port);
    let mut algs: Vec<Algorithm> = Vec::new();
    for e in entries {
        if e.marker.is_none() && e.hosts.matches(&name) {
            let a = e.key.algorithm();
            if !algs.iter().any(|b| same_family(b, &a)) {
                algs.push(a);
            }
        }
    }
    algs
}

/// RSA keys are one type whatever signature hash is negotiated.
pub(crate) fn same_family(a: &Algorithm, b: &Algorithm) -> bool {
    match (a, b) {
        (Algorithm::Rsa { .. }, Algorithm::Rsa { .. }) => true,
        _ => a == b,
    }
}

/// Appends `name keytype base64` (OpenSSH's unhashed form), creating the directory (0700) and
/// the file (0600) if needed. Returns the line number written.
pub(crate) fn append(
    path: &Path,
    host: &str,
    port: u16,
    key: &PublicKey,
) -> std::io::Result<usize> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let mut existing = String::new();
    file.read_to_string(&mut existing)?;
    let mut text = String::new();
    if !existing.is_empty() && !existing.ends_with('\n') {
        text.push('\n');
    }
    let bare = PublicKey::new(key.key_data().clone(), "");
    let openssh = bare
        .to_openssh()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    text.push_str(&format!(
        "{} {}\n",
        host_key_name(host, port),
        openssh.trim()
    ));
    file.seek(SeekFrom::End(0))?;
    file.write_all(text.as_bytes())?;
    file.flush()?;
    Ok(existing.lines().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real public keys (two ed25519, one ECDSA P-256) made with ssh-keygen for these tests.
    const ED_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
    const ED_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILIG2T/B0l0gaqj3puu510tu9N1OkQ4znY3LYuEm5zCF";
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBGeQmB7euAjE9BE6WmVRZUUjXX0ueJAeywbiVDM784ol6ZUtXNUfwwiVJxwRw07488d0FVz+J8QoLybZpzJVVzM=";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).unwrap()
    }

    #[test]
    fn host_names() {
        assert_eq!(host_key_name("PVE.lab", 22), "pve.lab");
        assert_eq!(host_key_name("127.0.0.1", 2301), "[127.0.0.1]:2301");
    }

    #[test]
    fn plain_port_and_multiple_keys() {
        let text = format!(
            "# comment line\n\n[127.0.0.1]:2301 {ECDSA}\n[127.0.0.1]:2301\t{ED_A} some comment\n\
             pve,pve.lab {ED_B}\n"
        );
        let e = parse(&text);
        assert!(matches!(
            check(&e, "127.0.0.1", 2301, &key(ED_A)),
            Verdict::Known
        ));
        assert!(matches!(
            check(&e, "127.0.0.1", 2301, &key(ECDSA)),
            Verdict::Known
        ));
        assert!(matches!(
            check(&e, "PVE.LAB", 22, &key(ED_B)),
            Verdict::Known
        ));
        // Port 22 entries do not answer for other ports and vice versa.
        assert!(matches!(
            check(&e, "127.0.0.1", 22, &key(ED_A)),
            Verdict::Unknown
        ));
        assert!(matches!(
            check(&e, "pve", 2301, &key(ED_B)),
            Verdict::Unknown
        ));
    }

    #[test]
    fn changed_key_names_the_real_line_despite_comments() {
        let text = format!("# one\n# two\n\n[h]:2301 {ED_A}\n");
        match check(&parse(&text), "h", 2301, &key(ED_B)) {
            Verdict::Changed { line, stored } => {
                assert_eq!(line, 4);
                assert_eq!(stored.key_data(), key(ED_A).key_data());
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn other_types_only_is_not_unknown() {
        let text = format!("[h]:2301 {ECDSA}\n");
        assert!(matches!(
            check(&parse(&text), "h", 2301, &key(ED_A)),
            Verdict::OtherTypes { .. }
        ));
        let algs = known_algorithms(&parse(&text), "h", 2301);
        assert_eq!(algs, vec![key(ECDSA).algorithm()]);
    }

    #[test]
    fn wildcards_negation_and_markers() {
        let text = format!(
            "*.lab,!bad.lab {ED_A}\n@cert-authority *.lab {ED_B}\n@revoked * {ECDSA}\n@weird x {ED_B}\n"
        );
        let e = parse(&text);
        assert_eq!(e.len(), 3);
        assert!(matches!(
            check(&e, "pve.lab", 22, &key(ED_A)),
            Verdict::Known
        ));
        assert!(matches!(
            check(&e, "bad.lab", 22, &key(ED_A)),
            Verdict::Unknown
        ));
        // A CA key is not a host key.
        assert!(matches!(
            check(&e, "x.other", 22, &key(ED_B)),
            Verdict::Unknown
        ));
        assert!(matches!(
            check(&e, "any", 22, &key(ECDSA)),
            Verdict::Revoked { line: 3 }
        ));
    }

    #[test]
    fn hashed_entries() {
        // OpenSSH's scheme: HMAC-SHA1 keyed by the salt over the host name. The integration
        // tests also check a file hashed by the real `ssh-keygen -H`.
        let salt = b"0123456789abcdefghij";
        let mac = <Hmac<Sha1> as KeyInit>::new_from_slice(salt)
            .unwrap()
            .chain_update(b"[127.0.0.1]:2301")
            .finalize()
            .into_bytes();
        let hashed = HostPatterns::HashedName {
            salt: salt.to_vec(),
            hash: mac.into(),
        }
        .to_string();
        let text = format!("{hashed} {ED_A}\n");
        let e = parse(&text);
        assert!(matches!(
            check(&e, "127.0.0.1", 2301, &key(ED_A)),
            Verdict::Known
        ));
        assert!(matches!(
            check(&e, "127.0.0.1", 2301, &key(ED_B)),
            Verdict::Changed { line: 1, .. }
        ));
        assert!(matches!(
            check(&e, "127.0.0.2", 2301, &key(ED_A)),
            Verdict::Unknown
        ));
    }

    #[test]
    fn garbage_lines_are_skipped() {
        let text = format!("garbage\nhost ssh-ed25519 notbase64\n[h]:2 {ED_A}\n");
        let e = parse(&text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].line, 3);
    }

    #[test]
    fn append_creates_private_file_and_dir() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("known_hosts");
        assert_eq!(append(&path, "127.0.0.1", 2301, &key(ED_A)).unwrap(), 1);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // A file without a trailing newline gets one before the new line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"# no newline").unwrap();
        assert_eq!(append(&path, "pve", 22, &key(ED_B)).unwrap(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("[127.0.0.1]:2301 {ED_A}\n# no newline\npve {ED_B}\n")
        );
        let e = parse(&text);
        assert!(matches!(check(&e, "pve", 22, &key(ED_B)), Verdict::Known));
    }
}
