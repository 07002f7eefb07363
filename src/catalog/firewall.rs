//! Firewall rules as pxagent builds them: the exact checks of [`Kind::FwPorts`] and
//! [`Kind::FwAddr`], and whether a node or cluster rule would drop the SSH connection pxagent
//! itself uses ([`Precheck::KeepsSsh`], judged by the client and by the gate).
//!
//! PVE's firewall accepts packets of established connections before any rule
//! (`ctstate RELATED,ESTABLISHED`), so a rule cuts pxagent off from its *next* connection:
//! an inbound (`in`) rule that drops or rejects TCP to the SSH port from the address pxagent
//! connects from. What cannot be known from the rule alone (an IP set's members, the source
//! port of a connection not yet made) counts as a match: the rule is refused unless a policy
//! allows it (`allow_ssh_lockout`).
//!
//! [`Kind::FwPorts`]: super::Kind::FwPorts
//! [`Kind::FwAddr`]: super::Kind::FwAddr
//! [`Precheck::KeepsSsh`]: super::Precheck::KeepsSsh

use std::collections::BTreeMap;
use std::net::IpAddr;

/// Why `raw` (of [`super::Kind::FwPorts`]'s characters) is not a list of ports and ranges,
/// if it is not: each port 1-65535, each range low below high, at most 15 ports with a range
/// counting as two (iptables' `multiport` limit, which PVE's rules compile to).
pub fn ports_problem(raw: &str) -> Option<String> {
    let counted: usize = raw
        .split(',')
        .map(|p| if p.contains(':') { 2 } else { 1 })
        .sum();
    if counted > 15 {
        return Some("more than 15 ports (a range counts as two)".into());
    }
    for part in raw.split(',') {
        let (lo, hi) = part.split_once(':').unwrap_or((part, part));
        let (Ok(lo), Ok(hi)) = (lo.parse::<u32>(), hi.parse::<u32>()) else {
            return Some(format!("'{part}' is not a port or a range"));
        };
        if !(1..=65535).contains(&lo) || !(1..=65535).contains(&hi) {
            return Some(format!("'{part}': ports are 1-65535"));
        }
        if part.contains(':') && lo >= hi {
            return Some(format!("'{part}': a range goes from low to high"));
        }
    }
    None
}

/// Why `raw` (of [`super::Kind::FwAddr`]'s characters) is not an IP set or a list of
/// addresses and networks of one family, if it is not. A network is written as its first
/// address (`192.0.2.0/24`, not `192.0.2.7/24`), as PVE's `Net::IP` requires.
pub fn addr_problem(raw: &str) -> Option<String> {
    if raw.starts_with('+') {
        return None;
    }
    let mut v4 = None;
    for part in raw.split(',') {
        let (ip, len) = match net(part) {
            Ok(n) => n,
            Err(why) => return Some(why),
        };
        if !contains(ip, len, ip) || first(ip, len) != ip {
            return Some(format!(
                "'{part}' is no network's first address: write {}/{len}",
                first(ip, len)
            ));
        }
        match v4 {
            None => v4 = Some(ip.is_ipv4()),
            Some(was) if was != ip.is_ipv4() => {
                return Some("IPv4 and IPv6 in one list (Proxmox refuses the mix)".into());
            }
            _ => {}
        }
    }
    None
}

/// An address or network `A` or `A/N`: the address and its prefix length.
fn net(part: &str) -> Result<(IpAddr, u8), String> {
    let (addr, len) = match part.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (part, None),
    };
    let ip: IpAddr = addr
        .parse()
        .ok()
        .filter(|ip: &IpAddr| ip.to_string() == addr)
        .ok_or_else(|| format!("'{addr}' is not an IP address in its usual form"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max && (n == 0 || !l.starts_with('0')) => n,
            _ => return Err(format!("'{part}': the prefix length is 0 to {max}")),
        },
    };
    Ok((ip, len))
}

/// The first address of the network `ip/len`.
fn first(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((u32::from(v) & mask).into())
        }
        IpAddr::V6(v) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((u128::from(v) & mask).into())
        }
    }
}

/// Whether `ip` lies in the network `base/len`.
fn contains(base: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (base, ip) {
        (IpAddr::V4(b), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(b) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(b), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(b) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// The SSH connection pxagent uses, as the host sees it: the client's address and the
/// host's address and port (`SSH_CONNECTION` on the host). An address the client cannot know
/// (behind a jump host) is `None`: any rule naming addresses may match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPath {
    pub client: Option<IpAddr>,
    pub server: Option<IpAddr>,
    pub port: u16,
}

impl SshPath {
    /// From `SSH_CONNECTION` (`CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT`).
    pub fn from_ssh_connection(s: &str) -> Option<SshPath> {
        let w: Vec<&str> = s.split(' ').collect();
        let [client, _, server, port] = w[..] else {
            return None;
        };
        Some(SshPath {
            client: Some(unmap(client.parse().ok()?)),
            server: Some(unmap(server.parse().ok()?)),
            port: port.parse().ok()?,
        })
    }

    fn describe(&self) -> String {
        let ip = |a: Option<IpAddr>| a.map_or("?".to_string(), |a| a.to_string());
        format!(
            "TCP from {} to {} port {}",
            ip(self.client),
            ip(self.server),
            self.port
        )
    }
}

/// An IPv4 address sshd reports in IPv6 form (`::ffff:192.0.2.7`) as IPv4.
pub fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether an address field of a rule (absent: every address) may match `ip` (unknown: it
/// may). An IP set may hold anything.
fn may_match(field: Option<&String>, ip: Option<IpAddr>) -> bool {
    let Some(field) = field else { return true };
    if field.starts_with('+') {
        return true;
    }
    let Some(ip) = ip else { return true };
    field
        .split(',')
        .filter_map(|p| net(p).ok())
        .any(|(base, len)| contains(base, len, ip))
}

/// Whether the ports field of a rule (absent: every port) names `port`.
fn names_port(field: Option<&String>, port: u16) -> bool {
    let Some(field) = field else { return true };
    field.split(',').any(|part| {
        let (lo, hi) = part.split_once(':').unwrap_or((part, part));
        matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&port))
    })
}

/// Why the rule in `values` (an op's `direction`, `action`, `proto`, `dport`, `sport`,
/// `source`, `dest`) would drop or reject `path`, if it would. `None`: it lets that SSH
/// connection through.
pub fn drops_ssh(values: &BTreeMap<&'static str, String>, path: &SshPath) -> Option<String> {
    let get = |k: &str| values.get(k);
    if get("direction").map(String::as_str) != Some("in") {
        return None;
    }
    if get("action").is_none_or(|a| a == "ACCEPT") {
        return None;
    }
    if get("proto").is_some_and(|p| p != "tcp") {
        return None;
    }
    if !names_port(get("dport"), path.port) {
        return None;
    }
    if !may_match(get("source"), path.client) || !may_match(get("dest"), path.server) {
        return None;
    }
    let sport = match get("sport") {
        Some(_) => " (a source port a new connection may use)",
        None => "",
    };
    Some(format!(
        "this inbound {} rule matches the SSH connection pxagent uses ({}){sport}: once active it cuts pxagent (and any SSH from there) off from this host",
        get("action").map_or("", String::as_str),
        path.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(pairs: &[(&'static str, &str)]) -> BTreeMap<&'static str, String> {
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    fn path() -> SshPath {
        SshPath::from_ssh_connection("192.0.2.50 51234 192.0.2.10 22").unwrap()
    }

    #[test]
    fn ports_and_addresses() {
        for ok in ["22", "80,443", "8000:8080", "1,65535", "22,80:90,443"] {
            assert_eq!(ports_problem(ok), None, "{ok}");
        }
        for bad in [
            "0",
            "65536",
            "90:80",
            "22:22",
            "1:70000",
            "1:2,3:4,5:6,7:8,9:10,11:12,13:14,15:16",
        ] {
            assert!(ports_problem(bad).is_some(), "{bad}");
        }
        for ok in [
            "10.0.0.0/24",
            "192.0.2.7",
            "10.0.0.1,10.0.0.2/31",
            "fd00::/8",
            "+admins",
            "0.0.0.0/0",
        ] {
            assert_eq!(addr_problem(ok), None, "{ok}");
        }
        for bad in [
            "10.0.0.0/33",
            "10.0.0.0/024",
            "010.0.0.1",
            "10.0.0.1,fd00::1",
            "fd00::/129",
            "FD00::1",
            "256.0.0.1",
            "192.0.2.7/24",
            "fd00::1/64",
        ] {
            assert!(addr_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn what_drops_ssh() {
        let drops = |pairs: &[(&'static str, &str)]| drops_ssh(&rule(pairs), &path()).is_some();
        let base = [("direction", "in"), ("action", "DROP")];
        assert!(drops(&base));
        assert!(drops(&[("direction", "in"), ("action", "REJECT")]));
        assert!(drops(&[
            base[0],
            base[1],
            ("proto", "tcp"),
            ("dport", "22")
        ]));
        assert!(drops(&[base[0], base[1], ("dport", "1:1024")]));
        assert!(drops(&[base[0], base[1], ("source", "192.0.2.0/24")]));
        assert!(drops(&[base[0], base[1], ("source", "+office")]));
        assert!(drops(&[base[0], base[1], ("dest", "192.0.2.10")]));
        assert!(drops(&[base[0], base[1], ("sport", "1024:65535")]));
        assert!(!drops(&[("direction", "out"), ("action", "DROP")]));
        assert!(!drops(&[("direction", "in"), ("action", "ACCEPT")]));
        assert!(!drops(&[base[0], base[1], ("proto", "udp")]));
        assert!(!drops(&[base[0], base[1], ("dport", "80,443")]));
        assert!(!drops(&[base[0], base[1], ("source", "198.51.100.0/24")]));
        assert!(!drops(&[base[0], base[1], ("dest", "192.0.2.11")]));
        assert!(!drops(&[base[0], base[1], ("source", "fd00::/8")]));
        // A client behind a jump host: any source may be its own.
        let hidden = SshPath {
            client: None,
            ..path()
        };
        assert!(
            drops_ssh(
                &rule(&[base[0], base[1], ("source", "198.51.100.0/24")]),
                &hidden
            )
            .is_some()
        );
    }

    #[test]
    fn ssh_connection_is_read_as_sshd_writes_it() {
        let p =
            SshPath::from_ssh_connection("::ffff:127.0.0.1 40000 ::ffff:127.0.0.1 2222").unwrap();
        assert_eq!(p.client, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(p.port, 2222);
        assert_eq!(SshPath::from_ssh_connection("local"), None);
        assert_eq!(SshPath::from_ssh_connection("1.2.3.4 5 6.7.8.9"), None);
    }
}
