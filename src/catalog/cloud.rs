//! The values of cloud images and cloud-init that need more than a regex: OpenSSH public
//! keys (checked key by key, sent URL-encoded as PVE's `sshkeys` expects), a guest's IPv4
//! configuration (`ip=dhcp` or `ip=CIDR[,gw=ADDR]`, qemu-server's `pve-qm-ipconfig`), DNS
//! servers, and an image's file name on a storage's `import` content.
//!
//! Layer: catalog. Imports only the base layer.

use std::net::{IpAddr, Ipv4Addr};

use base64ct::{Base64, Encoding};

/// Key types a cloud-init `sshkeys` may carry (OpenSSH's public key algorithms, no
/// certificates): anything else is refused.
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Most keys one `sshkeys` value holds.
pub const MAX_KEYS: usize = 16;
/// Most bytes of the encoded `sshkeys` value (PVE stores it in the guest's config).
pub const MAX_SSHKEYS_BYTES: usize = 16 * 1024;

/// The characters that travel unencoded; every other byte is `%XX`. A subset of PVE's
/// `urlencoded` format (`[-%a-zA-Z0-9_.!~*'()]*`, pve-common `pve_verify_urlencoded`).
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'
}

fn url_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn url_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("a '%' not followed by two hex digits")?;
                out.push(hex);
                i += 3;
            }
            b if unreserved(b) => {
                out.push(b);
                i += 1;
            }
            _ => return Err("a character that is not URL-encoded".into()),
        }
    }
    String::from_utf8(out).map_err(|_| "not UTF-8 once decoded".into())
}

/// One public key line: `TYPE BASE64 [COMMENT]`, the blob's own type equal to TYPE.
fn check_key(line: &str) -> Result<String, String> {
    let mut parts = line.split_whitespace();
    let ty = parts.next().unwrap_or_default();
    if !KEY_TYPES.contains(&ty) {
        return Err(format!(
            "'{}' is not an OpenSSH public key type ({}); authorized_keys options are not allowed",
            crate::base::text::printable(&ty.chars().take(40).collect::<String>()),
            KEY_TYPES.join(", ")
        ));
    }
    let b64 = parts.next().ok_or("a key without its base64 body")?;
    let blob = Base64::decode_vec(b64).map_err(|_| "a key body that is not base64")?;
    // The SSH wire format: a 4-byte big-endian length, then the type name.
    let named = blob
        .get(..4)
        .map(|l| u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .and_then(|n| blob.get(4..4 + n))
        .ok_or("a key body too short to be a key")?;
    if named != ty.as_bytes() {
        return Err(format!("a key body that is not an {ty} key"));
    }
    let comment: Vec<&str> = parts.collect();
    let comment = comment.join(" ");
    if !comment
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "@._+=:/- ".contains(c))
    {
        return Err(
            "a key comment with characters other than letters, digits, @ . _ + = : / - and spaces"
                .into(),
        );
    }
    Ok(if comment.is_empty() {
        format!("{ty} {b64}")
    } else {
        format!("{ty} {b64} {comment}")
    })
}

/// OpenSSH public keys, one per line (as in a `.pub` or `authorized_keys` file without
/// options; blank lines and `#` comments are skipped), or their URL-encoded wire form; returns
/// the wire form: the keys joined by newlines, URL-encoded (qemu-server decodes `sshkeys` with
/// `uri_unescape`, and `qm set --sshkeys FILE` sends a file's keys the same way).
pub fn parse_sshkeys(raw: &str) -> Result<String, String> {
    let text = if !raw.contains([' ', '\n', '\t']) && raw.contains('%') {
        url_decode(raw)?
    } else {
        raw.to_string()
    };
    let keys: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(check_key)
        .collect::<Result<_, _>>()?;
    if keys.is_empty() {
        return Err("no public key in it".into());
    }
    if keys.len() > MAX_KEYS {
        return Err(format!("{} keys, more than {MAX_KEYS}", keys.len()));
    }
    let wire = url_encode(&keys.join("\n"));
    if wire.len() > MAX_SSHKEYS_BYTES {
        return Err(format!(
            "longer than {MAX_SSHKEYS_BYTES} bytes once encoded"
        ));
    }
    Ok(wire)
}

/// The keys of an `sshkeys` wire value, for showing.
pub fn sshkeys_text(wire: &str) -> String {
    url_decode(wire).unwrap_or_else(|_| wire.to_string())
}

fn ipv4(s: &str) -> Option<Ipv4Addr> {
    // std's parser refuses leading zeros and anything but four decimal parts.
    s.parse().ok()
}

/// `dhcp`, `CIDR` or `CIDR,gw=ADDR` (or the wire form with a leading `ip=`); returns the wire
/// form `ip=dhcp` / `ip=CIDR[,gw=ADDR]`. The gateway must be inside the address's network
/// and not the address itself; DHCP takes no gateway (qemu-server's parse_ipconfig).
pub fn parse_ipconfig(raw: &str) -> Result<String, String> {
    let s = raw.strip_prefix("ip=").unwrap_or(raw);
    let (ip, gw) = match s.split_once(",gw=") {
        Some((ip, gw)) => (ip, Some(gw)),
        None => (s, None),
    };
    if ip == "dhcp" {
        return match gw {
            None => Ok("ip=dhcp".into()),
            Some(_) => Err("DHCP takes no gateway".into()),
        };
    }
    let (addr, bits) = ip
        .split_once('/')
        .ok_or("expected dhcp or an IPv4 address with its prefix, e.g. 10.0.0.5/24")?;
    let addr = ipv4(addr).ok_or("not an IPv4 address")?;
    let bits: u32 = bits
        .parse()
        .ok()
        .filter(|b| (8..=32).contains(b) && !bits.starts_with('0'))
        .ok_or("a prefix length of 8-32")?;
    let mut wire = format!("ip={addr}/{bits}");
    if let Some(gw) = gw {
        let g = ipv4(gw).ok_or("a gateway that is not an IPv4 address")?;
        let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
        if u32::from(g) & mask != u32::from(addr) & mask || g == addr {
            return Err(format!(
                "the gateway {g} is not another address of {addr}/{bits}"
            ));
        }
        wire.push_str(&format!(",gw={g}"));
    }
    Ok(wire)
}

/// One to three DNS server addresses (IPv4 or IPv6), joined by `,` (PVE's `address-list`).
pub fn parse_nameservers(raw: &str) -> Result<String, String> {
    let list: Vec<&str> = raw.split(',').collect();
    if list.len() > 3 {
        return Err("at most three servers".into());
    }
    let mut out = Vec::new();
    for a in list {
        let ip: IpAddr = a
            .parse()
            .map_err(|_| format!("'{a}' is not an IP address"))?;
        out.push(ip.to_string());
    }
    Ok(out.join(","))
}

/// The file name an image from a URL is stored under: its last path segment, with `.img`
/// (the usual name of qcow2 cloud images: Ubuntu's, Debian's `genericcloud`) changed to
/// `.qcow2`, since PVE's download-url stores `import` content only as `.qcow2`, `.raw` or
/// `.vmdk` (pve-storage `$UPLOAD_IMPORT_EXT_RE_1`, and import-from takes the format from the
/// extension).
pub fn image_name_from(base: &str) -> String {
    match base.strip_suffix(".img") {
        Some(stem) => format!("{stem}.qcow2"),
        None => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ed25519 public key (generated for this test with ssh-keygen; no private key
    /// is kept anywhere).
    const ED: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBRQPGL2CEQuW0392R+C9lGvfVuz1GCljUYKWbWiGOiw alice@laptop";

    #[test]
    fn keys_are_checked_and_url_encoded() {
        let wire = parse_sshkeys(&format!("# mine\n{ED}\n\n")).unwrap();
        assert!(wire.starts_with("ssh-ed25519%20AAAAC3"), "{wire}");
        assert!(
            wire.contains("%2B") && wire.ends_with("alice%40laptop"),
            "{wire}"
        );
        assert_eq!(
            parse_sshkeys(&wire).unwrap(),
            wire,
            "the wire form is canonical"
        );
        assert_eq!(sshkeys_text(&wire), ED);
        let two = parse_sshkeys(&format!("{ED}\n{ED} second")).unwrap();
        assert!(two.contains("%0Assh-ed25519"), "{two}");
        for bad in [
            "",
            "# only a comment",
            "command=\"id\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBRQPGL2CEQuW0392R+C9lGvfVuz1GCljUYKWbWiGOiw",
            "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
            "ssh-ed25519 notbase64!",
            // an RSA body under an ed25519 label
            "ssh-ed25519 AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBRQPGL2CEQuW0392R+C9lGvfVuz1GCljUYKWbWiGOiw a$(id)",
            "ssh-ed25519%ZZ",
        ] {
            assert!(parse_sshkeys(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ipconfig_takes_dhcp_or_an_address_with_its_gateway() {
        assert_eq!(parse_ipconfig("dhcp").unwrap(), "ip=dhcp");
        assert_eq!(parse_ipconfig("10.0.0.5/24").unwrap(), "ip=10.0.0.5/24");
        assert_eq!(
            parse_ipconfig("10.0.0.5/24,gw=10.0.0.1").unwrap(),
            "ip=10.0.0.5/24,gw=10.0.0.1"
        );
        assert_eq!(
            parse_ipconfig("ip=10.0.0.5/24,gw=10.0.0.1").unwrap(),
            "ip=10.0.0.5/24,gw=10.0.0.1"
        );
        for bad in [
            "10.0.0.5",
            "10.0.0.5/33",
            "10.0.0.5/4",
            "10.0.0.5/024",
            "010.0.0.5/24",
            "dhcp,gw=10.0.0.1",
            "10.0.0.5/24,gw=10.0.1.1",
            "10.0.0.5/24,gw=10.0.0.5",
            "10.0.0.5/24,gw=x",
            "10.0.0.5/24,ip6=auto",
            "auto",
        ] {
            assert!(parse_ipconfig(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nameservers_and_image_names() {
        assert_eq!(
            parse_nameservers("1.1.1.1,2606:4700::1111").unwrap(),
            "1.1.1.1,2606:4700::1111"
        );
        assert!(parse_nameservers("1.1.1.1 8.8.8.8").is_err());
        assert!(parse_nameservers("1.1.1.1,1.0.0.1,8.8.8.8,8.8.4.4").is_err());
        assert_eq!(
            image_name_from("noble-server-cloudimg-amd64.img"),
            "noble-server-cloudimg-amd64.qcow2"
        );
        assert_eq!(
            image_name_from("debian-13-genericcloud-amd64.qcow2"),
            "debian-13-genericcloud-amd64.qcow2"
        );
    }
}
