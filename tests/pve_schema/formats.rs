//! PVE's named string formats (`format => 'pve-node'`), the ones the catalog's parameters
//! meet, written after their registration in pve-common `src/PVE/JSONSchema.pm`
//! (`register_format`), pve-storage `PVE/Storage.pm` and qemu-server (`pve-qm-ipconfig`).
//! A `NAME-list` is split like `PVE::Tools::split_list` (on `,`, `;` and white space) and
//! each element checked as NAME; a `NAME-opt` is checked when it is not empty. A name not
//! here fails the check: the schema test never passes a value it did not look at.

use std::net::{Ipv4Addr, Ipv6Addr};

use regex::Regex;

/// Check `v` against the named format `name`.
pub fn check(name: &str, v: &str) -> Result<(), String> {
    if let Some(base) = name.strip_suffix("-list")
        && known(base)
    {
        // Note: PVE allows empty lists.
        for item in split_list(v) {
            one(base, item)?;
        }
        return Ok(());
    }
    if let Some(base) = name.strip_suffix("-opt")
        && known(base)
    {
        return if v.is_empty() { Ok(()) } else { one(base, v) };
    }
    one(name, v)
}

fn split_list(v: &str) -> Vec<&str> {
    if v.contains('\0') {
        return v.split('\0').collect();
    }
    v.split([',', ';', ' ', '\t', '\n'])
        .filter(|s| !s.is_empty())
        .collect()
}

const KNOWN: &[&str] = &[
    "string",
    "pve-ha-resource-or-vm-id",
    "pve-ha-resource-id",
    "pve-ha-node",
    "pve-calendar-event",
    "urlencoded",
    "pve-configid",
    "pve-storage-id",
    "pve-bridge-id",
    "pve-vmid",
    "pve-node",
    "mac-addr",
    "ipv4",
    "ipv6",
    "ip",
    "CIDRv4",
    "CIDRv6",
    "CIDR",
    "pve-ipv4-config",
    "pve-ipv6-config",
    "dns-name",
    "address",
    "pve-iface",
    "disk-size",
    "pve-tag",
    "pve-volume-id",
    "pve-volume-id-or-qm-path",
    "pve-volume-id-or-absolute-path",
    "pve-storage-content",
    "pve-qm-ipconfig",
    "pve-task-status-type",
    "pve-startup-order",
    "pve-lxc-mp-string",
    "prune-backups",
    "pve-qm-boot",
    "pve-storage-path",
    "pve-storage-vgname",
    "pve-storage-server",
    "pve-storage-options",
    "pve-fw-protocol-spec",
    "pve-fw-dport-spec",
    "pve-fw-sport-spec",
    "pve-fw-addr-spec",
    "IPorCIDRorAlias",
];

fn known(name: &str) -> bool {
    KNOWN.contains(&name)
}

fn re(pattern: &str, v: &str) -> bool {
    Regex::new(&format!("^(?:{pattern})$")).unwrap().is_match(v)
}

fn ipv4(v: &str) -> bool {
    v.parse::<Ipv4Addr>().is_ok()
}

fn ipv6(v: &str) -> bool {
    v.parse::<Ipv6Addr>().is_ok()
}

fn cidr(v: &str, ip: fn(&str) -> bool, max: u32) -> bool {
    match v.split_once('/') {
        Some((a, bits)) => {
            ip(a)
                && bits.bytes().all(|b| b.is_ascii_digit())
                && bits.parse::<u32>().is_ok_and(|b| b > 7 && b <= max)
        }
        None => false,
    }
}

fn dns_name(v: &str) -> bool {
    let label = "[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?";
    re(&format!("({label}\\.)*{label}"), v)
}

/// pve-storage `parse_volume_id`: `STORAGE:NAME`.
fn volume_id(v: &str) -> bool {
    re(r"(?i)[a-z][a-z0-9\-_.]*[a-z0-9]:.+", v)
}

fn one(name: &str, v: &str) -> Result<(), String> {
    let ok = match name {
        "string" => true,
        "urlencoded" => re(r"[-%a-zA-Z0-9_.!~*'()]*", v),
        "pve-configid" => re(r"(?i)[a-z][a-z0-9_-]+", v),
        "pve-storage-id" => re(r"(?i)[a-z][a-z0-9\-_.]*[a-z0-9]", v),
        "pve-bridge-id" => re(r"[-_.\w\d]+", v),
        "pve-vmid" => re(r"[1-9][0-9]{2,8}", v),
        "pve-node" => re(r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?", v),
        "mac-addr" => re(r"(?i)[a-f0-9][02468ace](?::[a-f0-9]{2}){5}", v),
        "ipv4" => ipv4(v),
        "ipv6" => ipv6(v),
        "ip" => ipv4(v) || ipv6(v),
        "CIDRv4" => cidr(v, ipv4, 32),
        "CIDRv6" => cidr(v, ipv6, 128),
        "CIDR" => cidr(v, ipv4, 32) || cidr(v, ipv6, 128),
        "pve-ipv4-config" => v == "dhcp" || v == "manual" || cidr(v, ipv4, 32),
        "pve-ipv6-config" => ["auto", "dhcp", "manual"].contains(&v) || cidr(v, ipv6, 128),
        "dns-name" => dns_name(v),
        "address" => ipv4(v) || ipv6(v) || dns_name(v),
        "pve-iface" => re(r"(?i)[a-z][a-z0-9_]{1,20}([:.]\d+)?", v),
        "disk-size" => re(r"\d+(\.\d+)?[KMGT]?", v),
        "pve-tag" => re(r"(?i)[a-z0-9_][a-z0-9_\-+.]*", v),
        "pve-volume-id" => volume_id(v),
        // qemu-server: a volume, `none`, `cdrom`, or a path on the host (which pxagent never
        // builds: its own kinds only take STORAGE:… volumes).
        "pve-volume-id-or-qm-path" => {
            volume_id(v) || v == "none" || v == "cdrom" || v.starts_with('/')
        }
        "pve-volume-id-or-absolute-path" => volume_id(v) || v.starts_with('/'),
        "pve-storage-content" => [
            "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import",
        ]
        .contains(&v),
        "pve-task-status-type" => re(r"(?i)ok|error|warning|unknown", v),
        "pve-startup-order" => v
            .split(',')
            .all(|p| p.trim().is_empty() || re(r"(order=)?\d+", p) || re(r"(up|down)=\d+", p)),
        "pve-qm-ipconfig" => return ipconfig(v),
        // pve-container `verify_lxc_mp_string`: no `.` or `..` path component.
        "pve-lxc-mp-string" => !re(r"(.*/)?\.\.?(/.*)?", v),
        "prune-backups" => return prune_backups(v),
        // qemu-server's `pve-qm-boot`: `[legacy=]<[acdn]{1,4}>` or `order=DEV[;DEV…]`, each
        // device a drive or NIC key (`pve_verify_bootdev`).
        "pve-qm-boot" => v.split(',').all(|part| match part.split_once('=') {
            Some(("order", devs)) => devs.split(';').all(|d| {
                re(
                    r"(ide|sata|scsi|virtio|net|usb|hostpci)\d+|efidisk0|tpmstate0",
                    d,
                )
            }),
            Some(("legacy", l)) => re("[acdn]{1,4}", l),
            None => re("[acdn]{1,4}", part),
            _ => false,
        }),
        // pve-storage `src/PVE/Storage/Plugin.pm`: `verify_path` (`m|^/[^;\(\)]+|`, anchored
        // at the start only),
        // `verify_vgname` (lvm(8): `[a-zA-Z0-9\.\+\_][a-zA-Z0-9\.\+\_\-]+`) and
        // `verify_server` (an IP address or a DNS name).
        "pve-storage-path" => re(r"/[^;()]+.*", v),
        "pve-storage-vgname" => re(r"[a-zA-Z0-9.+_][a-zA-Z0-9.+_\-]+", v),
        "pve-storage-server" => ipv4(v) || ipv6(v) || dns_name(v),
        // pve-storage `src/PVE/Storage/Plugin.pm` `verify_options` (mount options): `^\S+$`.
        "pve-storage-options" => re(r"\S+", v),
        // pve-firewall `src/PVE/Firewall.pm` [SRC, find_string "sub verify_rule {" id
        // 3646860968]: `pve_fw_verify_protocol_spec` (a name in /etc/protocols or its number),
        // `parse_port_name_number_or_range` (ports and `LOW:HIGH` ranges up to 65535, never
        // backwards, or /etc/services names), `parse_address_list` (an IP set `+NAME`, an
        // alias, or Net::IP addresses, networks or ranges of one family, a range alone).
        "pve-fw-protocol-spec" => {
            re("[0-9]{1,3}", v) && v.parse::<u32>().is_ok_and(|n| n <= 255)
                || [
                    "tcp",
                    "udp",
                    "icmp",
                    "icmpv6",
                    "ipv6-icmp",
                    "sctp",
                    "udplite",
                    "dccp",
                    "gre",
                    "esp",
                    "ah",
                    "ospf",
                    "vrrp",
                    "igmp",
                ]
                .contains(&v)
        }
        "pve-fw-dport-spec" | "pve-fw-sport-spec" => return ports(v),
        "pve-fw-addr-spec" => return addr_list(v),
        // pve-firewall `IPSet.pm` `cidr`: an address, a network or an alias name.
        // pve-ha-manager b71218f279d5 `src/PVE/HA/Tools.pm`: `pve_verify_ha_resource_or_vm_id`,
        // `pve_verify_ha_resource_id`, `pve_verify_ha_node` (a `-list` splits as usual).
        "pve-ha-resource-or-vm-id" => re(r"[a-z]+:\S+|\d+", v),
        "pve-ha-resource-id" => re(r"[a-z]+:\S+", v),
        "pve-ha-node" => re(r"([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)(:\d+)?", v),
        // proxmox-time `CalendarEvent` (PVE's `pve-calendar-event`, a subset of systemd's): a
        // keyword, or weekdays, a date and a time, each optional, in that order; a field is
        // a list of values, ranges `A..B`, `*` and repetitions `/N`.
        "pve-calendar-event" => return calendar_event(v),
        "IPorCIDRorAlias" => net_ip(v).is_ok() || re("[A-Za-z][A-Za-z0-9_-]+", v),
        other => {
            return Err(format!(
                "format `{other}` has no checker in tests/pve_schema/formats.rs"
            ));
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("not a valid {name}"))
    }
}

/// `parse_port_name_number_or_range`.
fn ports(v: &str) -> Result<(), String> {
    let items: Vec<&str> = v.split(',').collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err("extraneous commas in list".into());
    }
    for item in items {
        if let Some((a, b)) = item.split_once(':') {
            let (a, b) = (a.parse::<u64>(), b.parse::<u64>());
            match (a, b) {
                (Ok(a), Ok(b)) if a <= 65535 && b <= 65535 && a <= b => {}
                _ => return Err(format!("invalid port range '{item}'")),
            }
        } else if item.bytes().all(|c| c.is_ascii_digit()) {
            if item.parse::<u64>().map_or(true, |p| p > 65535) {
                return Err(format!("invalid port '{item}'"));
            }
        } else if !re("[a-z][a-z0-9-]*", item) {
            return Err(format!("invalid port '{item}'"));
        }
    }
    Ok(())
}

/// What `Net::IP->new` takes of an element: an address, a network whose host bits are 0, or a
/// range `A-B`; its family.
fn net_ip(e: &str) -> Result<u8, String> {
    if let Some((a, b)) = e.split_once('-') {
        return match (a.parse::<std::net::IpAddr>(), b.parse::<std::net::IpAddr>()) {
            (Ok(a), Ok(b)) if a.is_ipv4() == b.is_ipv4() && a <= b => {
                Ok(if a.is_ipv4() { 4 } else { 6 })
            }
            _ => Err(format!("invalid IP address: {e}")),
        };
    }
    let (a, len) = e.split_once('/').map_or((e, None), |(a, l)| (a, Some(l)));
    let ip: std::net::IpAddr = a.parse().map_err(|_| format!("invalid IP address: {e}"))?;
    let (bits, max): (u128, u32) = match ip {
        std::net::IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
        std::net::IpAddr::V6(v) => (u128::from(v), 128),
    };
    if let Some(l) = len {
        let l: u32 = l.parse().map_err(|_| format!("invalid prefix: {e}"))?;
        if l > max {
            return Err(format!("invalid prefix: {e}"));
        }
        let host = if l == 0 {
            bits
        } else {
            bits & (u128::MAX >> (128 - max + l))
        };
        if host != 0 {
            return Err(format!("invalid prefix (host bits set): {e}"));
        }
    }
    Ok(if ip.is_ipv4() { 4 } else { 6 })
}

/// `parse_address_list`.
fn addr_list(v: &str) -> Result<(), String> {
    if let Some(name) = v.strip_prefix('+') {
        return if !name.is_empty() && !name.contains(char::is_whitespace) && v.len() <= 65 {
            Ok(())
        } else {
            Err("invalid ipset reference".into())
        };
    }
    if re("[A-Za-z][A-Za-z0-9_-]+", v) {
        return Ok(());
    }
    let items: Vec<&str> = v.split(',').collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err("extraneous commas in list".into());
    }
    let mut family = None;
    for e in &items {
        let f = net_ip(e)?;
        if family.is_some_and(|was| was != f) {
            return Err(format!(
                "detected mixed ipv4/ipv6 addresses in address list '{v}'"
            ));
        }
        family = Some(f);
    }
    if items.len() > 1 && items.iter().any(|e| e.contains('-')) {
        return Err("you can't use a range in a list".into());
    }
    Ok(())
}

/// qemu-server `parse_ipconfig`: `ip=`, `gw=`, `ip6=`, `gw6=`; a gateway needs an address,
/// and DHCP takes none.
fn ipconfig(v: &str) -> Result<(), String> {
    let mut ip = None;
    let mut gw = false;
    let mut ip6 = None;
    let mut gw6 = false;
    for part in v.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, val) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` without a key"))?;
        let ok = match k {
            "ip" => {
                ip = Some(val);
                one("pve-ipv4-config", val).is_ok()
            }
            "gw" => {
                gw = true;
                ipv4(val)
            }
            "ip6" => {
                ip6 = Some(val);
                one("pve-ipv6-config", val).is_ok()
            }
            "gw6" => {
                gw6 = true;
                ipv6(val)
            }
            _ => return Err(format!("ipconfig has no key `{k}`")),
        };
        if !ok {
            return Err(format!("ipconfig {k}={val} is not valid"));
        }
    }
    for (gw, ip, fam) in [(gw, ip, "IPv4"), (gw6, ip6, "IPv6")] {
        match (gw, ip) {
            (true, None) => return Err(format!("{fam} gateway without an address")),
            (true, Some("dhcp")) => return Err(format!("{fam} gateway together with DHCP")),
            _ => {}
        }
    }
    Ok(())
}

/// pve-common's `prune-backups` property string: `keep-all=<1|0>` or any of
/// `keep-{last,hourly,daily,weekly,monthly,yearly}=<N>` (N ≥ 1), never keep-all with another.
fn prune_backups(v: &str) -> Result<(), String> {
    let counts = [
        "keep-last",
        "keep-hourly",
        "keep-daily",
        "keep-weekly",
        "keep-monthly",
        "keep-yearly",
    ];
    let mut keys = Vec::new();
    for part in v.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, val) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` without a key"))?;
        let ok = if k == "keep-all" {
            val == "1" || val == "0"
        } else if counts.contains(&k) {
            val.parse::<u64>().is_ok_and(|n| n >= 1)
        } else {
            return Err(format!("prune-backups has no key `{k}`"));
        };
        if !ok || keys.contains(&k) {
            return Err(format!("prune-backups {k}={val} is not valid"));
        }
        keys.push(k);
    }
    if keys.contains(&"keep-all") && keys.len() > 1 {
        return Err("keep-all together with other keep options".into());
    }
    Ok(())
}

fn calendar_event(v: &str) -> Result<(), String> {
    const KEYWORDS: &[&str] = &[
        "minutely",
        "hourly",
        "daily",
        "weekly",
        "monthly",
        "yearly",
        "annually",
        "quarterly",
        "semiannually",
        "semi-annually",
    ];
    if KEYWORDS.contains(&v) {
        return Ok(());
    }
    let spec = r"(\*|[0-9]{1,4}(\.\.[0-9]{1,4})?)(/[0-9]{1,4})?";
    let list = format!("{spec}(,{spec})*");
    let day = "(mon|tue|wed|thu|fri|sat|sun)(\\.\\.(mon|tue|wed|thu|fri|sat|sun))?";
    let shapes = [
        format!("{day}(,{day})*"),
        format!("({list}-)?{list}-{list}"),
        format!("{list}(:{list}){{0,2}}"),
    ];
    let mut next = 0;
    let words: Vec<&str> = v.split(' ').collect();
    for w in &words {
        let Some(at) = (next..shapes.len()).find(|i| re(&shapes[*i], w)) else {
            return Err(format!("{v:?} is not a calendar event ({w:?})"));
        };
        next = at + 1;
    }
    if words.is_empty() || v.is_empty() {
        return Err("an empty calendar event".into());
    }
    Ok(())
}
