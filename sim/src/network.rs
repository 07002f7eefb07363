//! Node networks as PVE keeps them: `/etc/network/interfaces` (ifupdown2's format) with the
//! pending change beside it in `interfaces.new`, which every API write goes to and every read
//! shows (`PVE::INotify`'s shadow file); `PUT /nodes/{node}/network` moves it over the file
//! and runs `ifreload -a` in an `srvreload` task; `DELETE /nodes/{node}/network` drops it.
//! Texts and checks: pve-manager `PVE/API2/Network.pm` [SRC] (`create_network`: "interface
//! already exists", `$check_duplicate_ports`: "P is already used on interface 'I'.",
//! `delete_network`: "interface does not exist", `revert_network_changes`: unlink
//! `interfaces.new`, `reload_network_config`: `fork_worker('srvreload', 'networking', …)`).
//!
//! On the test bed the local node's network is the machine's real `/etc/network` when the bed
//! made that directory for the simulator (its marker [`MARKER`] is there): pxagent's helper
//! then applies and reverts the very files the simulator reads, and `ifreload -a` (this binary
//! under that name) records what runs. Otherwise, and for the other nodes, the files live in
//! the state. What runs is the `running` copy: an interface in it is `active`.
//!
//! A sim-only knob models an apply that cuts the host off: `pve-sim net-cut IFACE PID` makes
//! every reload that leaves IFACE running stop process PID (the bed's sshd listener: new SSH
//! connections hang) and every reload without it let PID go on.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::args::Parsed;
use crate::ops::{self, TaskRun};
use crate::state::{Node, NodeNet, State};
use crate::storage_ops::param_exc;
use crate::{Ctx, Failure, Output};

/// The directory of the real files.
pub const ETC_DIR: &str = "/etc/network";
/// The bed's mark that `/etc/network` is the simulator's to use.
pub const MARKER: &str = ".pve-sim";

/// The real directory, when the local node uses it.
fn real_dir(st: &State, node: &str) -> Option<PathBuf> {
    let dir = Path::new(ETC_DIR);
    (node == st.local_node && dir.join(MARKER).exists()).then(|| dir.to_path_buf())
}

/// The configuration a fresh PVE install writes: the NICs, and `vmbr0` on the node's address
/// over `eno1`.
pub fn initial(n: &Node) -> String {
    let gw =
        n.ip.rsplit_once('.')
            .map(|(net, _)| format!("{net}.1"))
            .unwrap_or_default();
    format!(
        "auto lo\niface lo inet loopback\n\niface eno1 inet manual\n\niface eno2 inet manual\n\nauto vmbr0\niface vmbr0 inet static\n\taddress {}/24\n\tgateway {gw}\n\tbridge-ports eno1\n\tbridge-stp off\n\tbridge-fd 0\n\n\nsource /etc/network/interfaces.d/*\n",
        n.ip
    )
}

fn node_of<'a>(st: &'a State, node: &str) -> Result<&'a Node, Failure> {
    st.node(node).ok_or_else(|| Failure::die("no such node"))
}

/// The node's files: (`interfaces`, `interfaces.new`, running).
fn files(st: &State, node: &str) -> Result<NodeNet, Failure> {
    let n = node_of(st, node)?;
    let kept = st.networks.get(node).cloned();
    match real_dir(st, node) {
        Some(dir) => Ok(NodeNet {
            config: std::fs::read_to_string(dir.join("interfaces")).unwrap_or_else(|_| initial(n)),
            pending: std::fs::read_to_string(dir.join("interfaces.new")).ok(),
            running: kept.and_then(|k| k.running),
        }),
        None => Ok(kept.unwrap_or_else(|| NodeNet {
            config: initial(n),
            ..NodeNet::default()
        })),
    }
}

fn store(st: &mut State, node: &str, net: NodeNet) -> Result<(), Failure> {
    if let Some(dir) = real_dir(st, node) {
        let io = |e: std::io::Error| Failure::die(format!("{}: {e}", dir.display()));
        std::fs::write(dir.join("interfaces"), &net.config).map_err(io)?;
        match &net.pending {
            Some(p) => std::fs::write(dir.join("interfaces.new"), p).map_err(io)?,
            None => match std::fs::remove_file(dir.join("interfaces.new")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
                _ => {}
            },
        }
        st.networks.insert(
            node.to_string(),
            NodeNet {
                running: net.running,
                ..NodeNet::default()
            },
        );
    } else {
        st.networks.insert(node.to_string(), net);
    }
    Ok(())
}

/// One `iface` stanza.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Iface {
    name: String,
    method: String,
    auto: bool,
    options: Vec<(String, String)>,
    comments: Vec<String>,
}

impl Iface {
    fn opt(&self, k: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The stanzas of an ifupdown2 file, in order (`source` lines and the like are kept apart).
fn parse(text: &str) -> Vec<Iface> {
    let mut autos = Vec::new();
    let mut out: Vec<Iface> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        let t = line.trim();
        if line.starts_with(char::is_whitespace) && open && !t.is_empty() {
            if let Some(last) = out.last_mut() {
                let (k, v) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
                last.options.push((k.to_string(), v.trim().to_string()));
            }
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            if open && let Some(last) = out.last_mut() {
                last.comments.push(c.to_string());
            }
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        open = false;
        match words.as_slice() {
            ["auto", names @ ..] => autos.extend(names.iter().map(|s| s.to_string())),
            ["iface", name, _family, method] => {
                open = true;
                out.push(Iface {
                    name: name.to_string(),
                    method: method.to_string(),
                    auto: false,
                    options: Vec::new(),
                    comments: Vec::new(),
                });
            }
            _ => {}
        }
    }
    for i in &mut out {
        i.auto = autos.contains(&i.name);
    }
    out
}

/// The file PVE writes back: loopback, NICs, then the rest in order, and the `source` line.
fn render(ifaces: &[Iface]) -> String {
    let mut s = String::new();
    for i in ifaces {
        if i.auto {
            s.push_str(&format!("auto {}\n", i.name));
        }
        s.push_str(&format!("iface {} inet {}\n", i.name, i.method));
        for (k, v) in &i.options {
            s.push_str(&format!("\t{k} {v}\n"));
        }
        for c in &i.comments {
            s.push_str(&format!("#{c}\n"));
        }
        s.push('\n');
    }
    s.push_str("\nsource /etc/network/interfaces.d/*\n");
    s
}

fn kind_of(i: &Iface) -> &'static str {
    if i.method == "loopback" {
        "loopback"
    } else if i.opt("bridge-ports").is_some() || i.name.starts_with("vmbr") {
        "bridge"
    } else if i.name.starts_with("en") || i.name.starts_with("eth") {
        "eth"
    } else {
        "unknown"
    }
}

/// The NICs the simulated hardware has, with their alternative names.
const NICS: &[(&str, &str)] = &[("eno1", "enp1s0"), ("eno2", "enp2s0")];

/// `GET /nodes/{node}/network`: what is pending if anything is, else the file; `active` for
/// what runs. Hash order in PVE; here the file's order.
pub fn list(st: &State, node: &str) -> Result<Value, Failure> {
    let net = files(st, node)?;
    let shown = parse(net.pending.as_deref().unwrap_or(&net.config));
    let run = parse(net.running.as_deref().unwrap_or(&net.config));
    let running: Vec<&str> = run.iter().map(|i| i.name.as_str()).collect();
    // A NIC is up when a running bridge has it as a port.
    let up: Vec<&str> = run
        .iter()
        .flat_map(|i| i.opt("bridge-ports").unwrap_or_default().split_whitespace())
        .collect();
    let mut out = Vec::new();
    for (prio, i) in shown.iter().enumerate() {
        let kind = kind_of(i);
        if kind == "loopback" {
            continue;
        }
        let mut e = json!({
            "iface": i.name, "type": kind, "method": i.method, "method6": "manual",
            "families": ["inet"], "priority": prio + 1,
        });
        let nic = NICS.iter().find(|(n, _)| *n == i.name);
        if let Some((_, alt)) = nic {
            e["exists"] = json!(1);
            e["altnames"] = json!([alt]);
        }
        let on = match kind {
            "eth" => nic.is_some() && up.contains(&i.name.as_str()),
            _ => running.contains(&i.name.as_str()),
        };
        if on {
            e["active"] = json!(1);
        }
        if i.auto {
            e["autostart"] = json!(1);
        }
        if let Some(a) = i.opt("address") {
            let (addr, len) = a.split_once('/').unwrap_or((a, "24"));
            e["address"] = json!(addr);
            e["netmask"] = json!(len);
            e["cidr"] = json!(format!("{addr}/{len}"));
        }
        if let Some(g) = i.opt("gateway") {
            e["gateway"] = json!(g);
        }
        if kind == "bridge" {
            e["bridge_ports"] = json!(i.opt("bridge-ports").filter(|p| *p != "none").unwrap_or(""));
            e["bridge_stp"] = json!(i.opt("bridge-stp").unwrap_or("off"));
            e["bridge_fd"] = json!(i.opt("bridge-fd").unwrap_or("0"));
            if i.opt("bridge-vlan-aware") == Some("yes") {
                e["bridge_vlan_aware"] = json!(1);
                e["bridge_vids"] = json!(i.opt("bridge-vids").unwrap_or("2-4094"));
            }
        }
        if !i.comments.is_empty() {
            let c: String = i.comments.iter().map(|c| format!("{c}\n")).collect();
            e["comments"] = json!(c);
        }
        out.push(e);
    }
    Ok(Value::Array(out))
}

/// pve-common's `pve-iface`: `^[a-zA-Z][a-zA-Z0-9_]{1,20}([:\.]\d+)?$`.
fn iface_ok(s: &str) -> bool {
    let (base, tail) = match s.find([':', '.']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let b = base.as_bytes();
    (2..=21).contains(&b.len())
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && tail.is_none_or(|t| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit()))
}

/// `POST /nodes/{node}/network`: a bridge written to `interfaces.new`.
pub fn create(st: &mut State, node: &str, o: &Parsed) -> Result<(), Failure> {
    let iface = o.get("iface").unwrap_or_default().to_string();
    if !iface_ok(&iface) {
        return Err(param_exc("iface", "value does not match the regex pattern"));
    }
    match o.get("type") {
        Some("bridge") => {}
        Some(t) => {
            return Err(Failure::die(format!(
                "pve-sim: only bridges are simulated, not type '{t}'"
            )));
        }
        None => {
            return Err(param_exc(
                "type",
                "property is missing and it is not optional",
            ));
        }
    }
    let mut net = files(st, node)?;
    let mut ifaces = parse(net.pending.as_deref().unwrap_or(&net.config));
    if ifaces.iter().any(|i| i.name == iface) {
        return Err(param_exc("iface", "interface already exists"));
    }
    let ports: Vec<String> = o
        .get("bridge_ports")
        .unwrap_or_default()
        .split([',', ';', ' '])
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    for other in &ifaces {
        for p in other
            .opt("bridge-ports")
            .unwrap_or_default()
            .split_whitespace()
        {
            if ports.iter().any(|x| x == p) {
                return Err(param_exc(
                    "bridge_ports",
                    &format!("{p} is already used on interface '{}'.", other.name),
                ));
            }
        }
    }
    let mut options = Vec::new();
    if let Some(cidr) = o.get("cidr") {
        options.push(("address".to_string(), cidr.to_string()));
    }
    let ports_text = if ports.is_empty() {
        "none".to_string()
    } else {
        ports.join(" ")
    };
    options.push(("bridge-ports".into(), ports_text));
    options.push(("bridge-stp".into(), "off".into()));
    options.push(("bridge-fd".into(), "0".into()));
    if o.flag("bridge_vlan_aware") {
        options.push(("bridge-vlan-aware".into(), "yes".into()));
        options.push(("bridge-vids".into(), "2-4094".into()));
    }
    let method = if o.get("cidr").is_some() {
        "static"
    } else {
        "manual"
    };
    ifaces.push(Iface {
        name: iface,
        method: method.into(),
        auto: o.flag("autostart"),
        options,
        comments: o
            .get("comments")
            .map(|c| c.lines().map(str::to_string).collect())
            .unwrap_or_default(),
    });
    net.pending = Some(render(&ifaces));
    store(st, node, net)
}

/// `DELETE /nodes/{node}/network/{iface}`.
pub fn delete(st: &mut State, node: &str, iface: &str) -> Result<(), Failure> {
    let mut net = files(st, node)?;
    let mut ifaces = parse(net.pending.as_deref().unwrap_or(&net.config));
    let before = ifaces.len();
    ifaces.retain(|i| i.name != iface);
    if ifaces.len() == before {
        return Err(param_exc("iface", "interface does not exist"));
    }
    net.pending = Some(render(&ifaces));
    store(st, node, net)
}

/// `DELETE /nodes/{node}/network`: the pending change is dropped.
pub fn revert(st: &mut State, node: &str) -> Result<(), Failure> {
    let mut net = files(st, node)?;
    net.pending = None;
    store(st, node, net)
}

/// `PUT /nodes/{node}/network`: the `srvreload` task.
pub fn reload(st: &mut State, ctx: &Ctx, node: &str) -> Result<TaskRun, Failure> {
    node_of(st, node)?;
    let node_s = node.to_string();
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "srvreload",
        "networking",
        |st, _log| {
            let mut net = files(st, &node_s).map_err(|f| f.msg)?;
            if let Some(p) = net.pending.take() {
                net.config = p;
            }
            net.running = Some(net.config.clone());
            store(st, &node_s, net).map_err(|f| f.msg)?;
            cut(st, &node_s);
            Ok(())
        },
    ))
}

/// `ifreload -a` on the local node (run by pxagent's helper after a revert).
pub fn ifreload(st: &mut State, args: &[String]) -> Output {
    if args != ["-a"] {
        return Output::err("pve-sim: ifreload: only `ifreload -a` is simulated", 1);
    }
    let node = st.local_node.clone();
    let mut net = match files(st, &node) {
        Ok(n) => n,
        Err(f) => return Output::err(&f.msg, 1),
    };
    net.running = Some(net.config.clone());
    if let Err(f) = store(st, &node, net) {
        return Output::err(&f.msg, 1);
    }
    cut(st, &node);
    Output::default()
}

/// Apply the `net-cut` knob after a reload of `node`.
fn cut(st: &State, node: &str) {
    let Some(c) = &st.net_cut else { return };
    if node != st.local_node {
        return;
    }
    let running = st
        .networks
        .get(node)
        .and_then(|n| n.running.clone())
        .unwrap_or_default();
    let signal = if parse(&running).iter().any(|i| i.name == c.iface) {
        "-STOP"
    } else {
        "-CONT"
    };
    let _ = std::process::Command::new("kill")
        .args([signal, &c.pid.to_string()])
        .status();
}

/// `pve-sim reset`: the real files, where the simulator uses them, back to a fresh install's.
pub fn reset_files(st: &State) {
    let node = st.local_node.clone();
    if let (Some(dir), Some(n)) = (real_dir(st, &node), st.node(&node)) {
        let _ = std::fs::write(dir.join("interfaces"), initial(n));
        let _ = std::fs::remove_file(dir.join("interfaces.new"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial as initial_state;

    fn parsed(pairs: &[(&str, &str)]) -> Parsed {
        Parsed::of(pairs)
    }

    #[test]
    fn a_bridge_is_pending_until_a_reload_and_a_revert_drops_it() {
        let mut st = initial_state(1_790_000_000);
        let node = "pve2";
        create(
            &mut st,
            node,
            &parsed(&[
                ("iface", "vmbr1"),
                ("type", "bridge"),
                ("bridge_ports", "eno2"),
                ("cidr", "10.10.0.1/24"),
                ("autostart", "1"),
                ("comments", "lab"),
            ]),
        )
        .unwrap();
        let l = list(&st, node).unwrap();
        let br = l
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["iface"] == "vmbr1")
            .unwrap();
        assert_eq!(br["bridge_ports"], "eno2");
        assert_eq!(br["cidr"], "10.10.0.1/24");
        assert_eq!(br["comments"], "lab\n");
        assert!(br.get("active").is_none(), "pending, not running");
        let e = create(
            &mut st,
            node,
            &parsed(&[("iface", "vmbr1"), ("type", "bridge")]),
        )
        .unwrap_err();
        assert!(e.msg.contains("interface already exists"), "{}", e.msg);
        let e = create(
            &mut st,
            node,
            &parsed(&[
                ("iface", "vmbr2"),
                ("type", "bridge"),
                ("bridge_ports", "eno1"),
            ]),
        )
        .unwrap_err();
        assert!(
            e.msg.contains("eno1 is already used on interface 'vmbr0'."),
            "{}",
            e.msg
        );
        revert(&mut st, node).unwrap();
        let l = list(&st, node).unwrap();
        assert!(l.as_array().unwrap().iter().all(|e| e["iface"] != "vmbr1"));
        let vmbr0 = l
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["iface"] == "vmbr0")
            .unwrap();
        assert_eq!(vmbr0["active"], 1);
        assert!(
            vmbr0["gateway"].as_str().unwrap().ends_with(".1"),
            "{vmbr0}"
        );
    }

    #[test]
    fn network_has_the_real_shape() {
        let st = initial_state(1_790_000_000);
        let v = list(&st, "pve2").unwrap();
        let find = |v: &Value, name: &str| {
            v.as_array()
                .unwrap()
                .iter()
                .find(|i| i["iface"] == name)
                .cloned()
                .unwrap()
        };
        let bridge = find(&v, "vmbr0");
        assert_eq!(bridge["cidr"], "10.10.10.12/24");
        let real: Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/pve/pvesh_nodes_network_json_pve9.1.json"
            ))
            .unwrap(),
        )
        .unwrap();
        let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(keys(&bridge), keys(&find(&real, "vmbr0")));
        assert_eq!(keys(&find(&v, "eno2")), keys(&find(&real, "nic2")));
    }

    #[test]
    fn the_file_round_trips() {
        let st = initial_state(1_790_000_000);
        let text = initial(st.node("pve1").unwrap());
        assert_eq!(render(&parse(&text)), text);
        assert!(iface_ok("vmbr1") && iface_ok("eno1.100") && !iface_ok("1x") && !iface_ok("a"));
    }
}
