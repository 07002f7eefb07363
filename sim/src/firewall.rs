//! The firewall's configuration as PVE's API keeps it: a guest's rules, its `enable` option and
//! its IP sets (`/etc/pve/firewall/VMID.fw`), a node's rules (`host.fw`) and the cluster's
//! (`cluster.fw`). Only the configuration: nothing here filters packets.
//!
//! Texts and checks: pve-firewall `src/PVE/Firewall.pm` `verify_rule` [SRC, find_string
//! "sub verify_rule {" id 3646860968]: "missing property - 'dport' requires this property",
//! "protocol 'P' does not support ports", "no such ipset 'N'", "detected mixed ipv4/ipv6
//! addresses in rule"; `API2/Firewall/Rules.pm` (`create_rule` puts the new rule first, its
//! `enable` 0 unless given; `get_rules` numbers them `pos` from 0 and gives each the
//! configuration's `digest`); `API2/Firewall/IPSet.pm` [SRC, find_string "path => '{cidr}'"
//! id 6805830055] (`remove_ip` keeps every other entry and fails on none; "no such IPSet",
//! "address 'A' already exists", "IPSet 'N' already exists"). Return shapes: PVE 9.2's
//! schema (`GET …/firewall/rules`: `pos`, `type`, `action`, optional `enable`, `proto`, `dport`,
//! `sport`, `source`, `dest`, `comment`, `ipversion`; `GET …/ipset/{name}`: `cidr`, `nomatch`,
//! `comment`, `digest`).

use serde_json::{Map, Value, json};

use crate::Failure;
use crate::api::digest;
use crate::args::Parsed;
use crate::ops;
use crate::state::{GuestFw, IpSet, Kind, Rule, State};
use crate::storage_ops::param_exc;

/// Which rule list a path names.
#[derive(Debug, Clone)]
pub enum Scope {
    Guest(String, Kind, u32),
    Node(String),
    Cluster,
}

/// The properties a rule keeps (`$rule_properties`), in the order they are copied.
const RULE_KEYS: &[&str] = &[
    "type",
    "action",
    "enable",
    "proto",
    "dport",
    "sport",
    "source",
    "dest",
    "comment",
    "macro",
    "iface",
    "log",
    "icmp-type",
];

/// Protocols with ports (`$PROTOCOLS_WITH_PORTS`).
const WITH_PORTS: &[&str] = &[
    "tcp", "udp", "udplite", "sctp", "dccp", "6", "17", "136", "132", "33",
];

/// The guest's file, after its config is checked on that node (else `load_config`'s exit 2).
fn guest<'a>(
    st: &'a mut State,
    node: &str,
    kind: Kind,
    vmid: u32,
) -> Result<&'a mut GuestFw, Failure> {
    ops::load(st, node, kind, vmid)?;
    Ok(st.firewall.guests.entry(vmid).or_default())
}

fn rules_mut<'a>(st: &'a mut State, scope: &Scope) -> Result<&'a mut Vec<Rule>, Failure> {
    Ok(match scope {
        Scope::Guest(n, k, v) => &mut guest(st, n, *k, *v)?.rules,
        Scope::Node(n) => st.firewall.nodes.entry(n.clone()).or_default(),
        Scope::Cluster => &mut st.firewall.cluster,
    })
}

/// `GET …/firewall/rules`.
pub fn list(st: &mut State, scope: &Scope) -> Result<Value, Failure> {
    let rules = rules_mut(st, scope)?.clone();
    let d = digest(&rules);
    Ok(Value::Array(
        rules
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                r.insert("pos".into(), json!(i));
                r.insert("digest".into(), json!(d));
                Value::Object(r)
            })
            .collect(),
    ))
}

/// The IP version an address list implies (`parse_address_list`), or why it is invalid.
fn ip_version(list: &str) -> Result<Option<u8>, String> {
    if list.starts_with('+') {
        return Ok(None);
    }
    let mut version = None;
    for part in list.split(',') {
        let addr = part.split('/').next().unwrap_or("");
        let v = match addr.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(_)) => 4,
            Ok(std::net::IpAddr::V6(_)) => 6,
            Err(_) => return Err(format!("invalid IP address: '{part}'")),
        };
        if version.is_some_and(|was| was != v) {
            return Err("detected mixed ipv4/ipv6 addresses in rule".into());
        }
        version = Some(v);
    }
    Ok(version)
}

/// `POST …/firewall/rules`: `verify_rule`, then the rule goes first.
pub fn create(st: &mut State, scope: &Scope, o: &Parsed) -> Result<(), Failure> {
    let mut rule = Rule::new();
    for k in RULE_KEYS {
        if let Some(v) = o.get(k).filter(|v| !v.is_empty() && *v != "-") {
            rule.insert(
                (*k).into(),
                match *k {
                    "enable" => json!(v.parse::<i64>().unwrap_or(0)),
                    _ => json!(v),
                },
            );
        }
    }
    let get = |k: &str| rule.get(k).and_then(Value::as_str).map(str::to_string);
    let (kind, action) = (
        get("type").unwrap_or_default(),
        get("action").unwrap_or_default(),
    );
    if matches!(kind.as_str(), "in" | "out" | "forward")
        && !matches!(action.as_str(), "ACCEPT" | "DROP" | "REJECT")
    {
        return Err(param_exc("action", &format!("unknown action '{action}'")));
    }
    let proto = get("proto");
    for port in ["dport", "sport"] {
        if rule.contains_key(port) {
            let Some(p) = &proto else {
                return Err(param_exc(
                    "proto",
                    &format!("missing property - '{port}' requires this property"),
                ));
            };
            let icmp_ok = port == "dport" && (p == "icmp" || p == "icmpv6");
            if !WITH_PORTS.contains(&p.as_str()) && !icmp_ok {
                return Err(param_exc(
                    port,
                    &format!("protocol '{p}' does not support ports"),
                ));
            }
        }
    }
    let mut version = match proto.as_deref() {
        Some("icmp") => Some(4),
        Some("icmpv6" | "ipv6-icmp") => Some(6),
        _ => None,
    };
    for side in ["source", "dest"] {
        let Some(v) = get(side) else { continue };
        match ip_version(&v) {
            Ok(Some(n)) if version.is_some_and(|was| was != n) => {
                return Err(param_exc(
                    side,
                    "detected mixed ipv4/ipv6 addresses in rule",
                ));
            }
            Ok(Some(n)) => version = Some(n),
            Ok(None) => {}
            Err(e) => return Err(param_exc(side, &e)),
        }
        if let Some(name) = v.strip_prefix('+') {
            let known = match scope {
                Scope::Guest(_, _, vmid) => st
                    .firewall
                    .guests
                    .get(vmid)
                    .is_some_and(|g| g.ipsets.contains_key(name)),
                _ => false,
            };
            if !known {
                return Err(param_exc(side, &format!("no such ipset '{name}'")));
            }
        }
    }
    if let Some(v) = version {
        rule.insert("ipversion".into(), json!(v));
    }
    if !rule.contains_key("enable") {
        rule.insert("enable".into(), json!(0));
    }
    rules_mut(st, scope)?.insert(0, rule);
    Ok(())
}

/// `DELETE …/firewall/rules/{pos}`.
pub fn delete(st: &mut State, scope: &Scope, pos: &str) -> Result<(), Failure> {
    let pos: usize = pos.parse().map_err(|_| {
        param_exc(
            "pos",
            &format!("type check ('integer') failed - got '{pos}'"),
        )
    })?;
    let rules = rules_mut(st, scope)?;
    if pos >= rules.len() {
        return Err(Failure::die(format!("no rule at position {pos}")));
    }
    rules.remove(pos);
    Ok(())
}

/// `PUT …/firewall/options` on a guest: its `enable`.
pub fn set_options(
    st: &mut State,
    node: &str,
    kind: Kind,
    vmid: u32,
    o: &Parsed,
) -> Result<(), Failure> {
    let fw = guest(st, node, kind, vmid)?;
    if let Some(e) = o.get("enable") {
        fw.enable = e == "1";
    }
    Ok(())
}

/// `GET …/firewall/options` on a guest.
pub fn options(st: &mut State, node: &str, kind: Kind, vmid: u32) -> Result<Value, Failure> {
    let fw = guest(st, node, kind, vmid)?.clone();
    Ok(json!({ "enable": i32::from(fw.enable), "digest": digest(&fw) }))
}

fn no_set(name: &str) -> Failure {
    Failure::die(format!("no such IPSet '{name}'"))
}

/// `POST …/firewall/ipset`: a new, empty set.
pub fn ipset_create(
    st: &mut State,
    node: &str,
    kind: Kind,
    vmid: u32,
    o: &Parsed,
) -> Result<(), Failure> {
    let name = o.get("name").unwrap_or_default().to_string();
    let fw = guest(st, node, kind, vmid)?;
    if fw.ipsets.keys().any(|k| k.eq_ignore_ascii_case(&name)) {
        return Err(Failure::die(format!("IPSet '{name}' already exists")));
    }
    fw.ipsets.insert(
        name,
        IpSet {
            comment: o.get("comment").map(str::to_string),
            entries: Vec::new(),
        },
    );
    Ok(())
}

/// `GET …/firewall/ipset/{name}`.
pub fn ipset_list(
    st: &mut State,
    node: &str,
    kind: Kind,
    vmid: u32,
    name: &str,
) -> Result<Value, Failure> {
    let fw = guest(st, node, kind, vmid)?;
    let set = fw.ipsets.get(name).ok_or_else(|| no_set(name))?;
    let d = digest(set);
    Ok(Value::Array(
        set.entries
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e.insert("digest".into(), json!(d));
                Value::Object(e)
            })
            .collect(),
    ))
}

/// `POST …/firewall/ipset/{name}`: one entry, first.
pub fn ipset_add(
    st: &mut State,
    node: &str,
    kind: Kind,
    vmid: u32,
    name: &str,
    o: &Parsed,
) -> Result<(), Failure> {
    let cidr = o.get("cidr").unwrap_or_default().to_string();
    if ip_version(&cidr).is_err() || cidr.contains(',') || cidr.starts_with('+') {
        return Err(param_exc(
            "cidr",
            "invalid format - value does not look like a valid IP address or CIDR network",
        ));
    }
    let fw = guest(st, node, kind, vmid)?;
    let set = fw.ipsets.get_mut(name).ok_or_else(|| no_set(name))?;
    if set
        .entries
        .iter()
        .any(|e| e.get("cidr").and_then(Value::as_str) == Some(cidr.as_str()))
    {
        return Err(param_exc(
            "cidr",
            &format!("address '{cidr}' already exists"),
        ));
    }
    let mut e = Map::new();
    e.insert("cidr".into(), json!(cidr));
    if let Some(c) = o.get("comment") {
        e.insert("comment".into(), json!(c));
    }
    if o.flag("nomatch") {
        e.insert("nomatch".into(), json!(1));
    }
    set.entries.insert(0, e);
    Ok(())
}

/// `DELETE …/firewall/ipset/{name}/{cidr}`: every other entry stays; an address that is not
/// there changes nothing.
pub fn ipset_remove(
    st: &mut State,
    node: &str,
    kind: Kind,
    vmid: u32,
    name: &str,
    cidr: &str,
) -> Result<(), Failure> {
    let fw = guest(st, node, kind, vmid)?;
    let set = fw.ipsets.get_mut(name).ok_or_else(|| no_set(name))?;
    set.entries
        .retain(|e| e.get("cidr").and_then(Value::as_str) != Some(cidr));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Parsed;

    fn st() -> State {
        crate::state::initial(1_767_225_600)
    }

    #[test]
    fn rules_go_first_and_are_numbered() {
        let mut s = st();
        let scope = Scope::Guest("pve1".into(), Kind::Qemu, 100);
        create(
            &mut s,
            &scope,
            &Parsed::of(&[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("enable", "1"),
                ("proto", "tcp"),
                ("dport", "22"),
            ]),
        )
        .unwrap();
        create(
            &mut s,
            &scope,
            &Parsed::of(&[("type", "in"), ("action", "DROP"), ("source", "10.0.0.0/8")]),
        )
        .unwrap();
        let l = list(&mut s, &scope).unwrap();
        assert_eq!(l[0]["action"], "DROP");
        assert_eq!(l[0]["pos"], 0);
        assert_eq!(l[0]["enable"], 0);
        assert_eq!(l[0]["ipversion"], 4);
        assert_eq!(l[1]["dport"], "22");
        assert_eq!(l[1]["pos"], 1);
        assert_eq!(l[0]["digest"], l[1]["digest"]);
        delete(&mut s, &scope, "0").unwrap();
        assert_eq!(list(&mut s, &scope).unwrap()[0]["action"], "ACCEPT");
        assert!(
            delete(&mut s, &scope, "5")
                .unwrap_err()
                .msg
                .contains("no rule at position 5")
        );
    }

    #[test]
    fn verify_rule_refuses_as_pve_does() {
        let mut s = st();
        let scope = Scope::Node("pve1".into());
        let err = |pairs: &[(&str, &str)]| {
            let mut s2 = s.clone();
            create(&mut s2, &scope, &Parsed::of(pairs)).unwrap_err().msg
        };
        assert!(
            err(&[("type", "in"), ("action", "DROP"), ("dport", "22")])
                .contains("proto: missing property - 'dport' requires this property")
        );
        assert!(
            err(&[
                ("type", "in"),
                ("action", "DROP"),
                ("proto", "icmp"),
                ("sport", "22")
            ])
            .contains("sport: protocol 'icmp' does not support ports")
        );
        assert!(
            err(&[
                ("type", "in"),
                ("action", "DROP"),
                ("source", "10.0.0.1"),
                ("dest", "fd00::1")
            ])
            .contains("mixed ipv4/ipv6")
        );
        assert!(
            err(&[("type", "in"), ("action", "DROP"), ("source", "+nope")])
                .contains("no such ipset 'nope'")
        );
        create(
            &mut s,
            &scope,
            &Parsed::of(&[("type", "out"), ("action", "REJECT")]),
        )
        .unwrap();
        assert_eq!(
            list(&mut s, &Scope::Node("pve1".into()))
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            list(&mut s, &Scope::Node("pve2".into())).unwrap(),
            json!([])
        );
    }

    #[test]
    fn guests_ipsets_and_options() {
        let mut s = st();
        assert!(
            ipset_list(&mut s, "pve1", Kind::Qemu, 100, "web")
                .unwrap_err()
                .msg
                .contains("no such IPSet 'web'")
        );
        ipset_create(
            &mut s,
            "pve1",
            Kind::Qemu,
            100,
            &Parsed::of(&[("name", "web")]),
        )
        .unwrap();
        assert!(
            ipset_create(
                &mut s,
                "pve1",
                Kind::Qemu,
                100,
                &Parsed::of(&[("name", "web")])
            )
            .unwrap_err()
            .msg
            .contains("already exists")
        );
        ipset_add(
            &mut s,
            "pve1",
            Kind::Qemu,
            100,
            "web",
            &Parsed::of(&[("cidr", "192.0.2.7")]),
        )
        .unwrap();
        assert!(
            ipset_add(
                &mut s,
                "pve1",
                Kind::Qemu,
                100,
                "web",
                &Parsed::of(&[("cidr", "192.0.2.7")])
            )
            .unwrap_err()
            .msg
            .contains("address '192.0.2.7' already exists")
        );
        assert_eq!(
            ipset_list(&mut s, "pve1", Kind::Qemu, 100, "web").unwrap()[0]["cidr"],
            "192.0.2.7"
        );
        // A rule may name the guest's set now.
        create(
            &mut s,
            &Scope::Guest("pve1".into(), Kind::Qemu, 100),
            &Parsed::of(&[("type", "in"), ("action", "ACCEPT"), ("source", "+web")]),
        )
        .unwrap();
        ipset_remove(&mut s, "pve1", Kind::Qemu, 100, "web", "192.0.2.7").unwrap();
        assert_eq!(
            ipset_list(&mut s, "pve1", Kind::Qemu, 100, "web").unwrap(),
            json!([])
        );
        assert_eq!(
            ipset_list(&mut s, "pve1", Kind::Lxc, 200, "admins").unwrap()[0]["cidr"],
            "192.0.2.10"
        );
        set_options(
            &mut s,
            "pve1",
            Kind::Qemu,
            100,
            &Parsed::of(&[("enable", "1")]),
        )
        .unwrap();
        assert_eq!(
            options(&mut s, "pve1", Kind::Qemu, 100).unwrap()["enable"],
            1
        );
        // A guest that is not on that node: load_config's exit 2.
        assert_eq!(
            options(&mut s, "pve2", Kind::Qemu, 100).unwrap_err().code,
            2
        );
    }
}
