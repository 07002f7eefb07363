//! `pve-sim reset|dump|fault …`: the simulator's own commands for tests and the test bed
//! (root only, like everything else here).

use std::path::Path;

use crate::state::Store;
use crate::{Env, Output, faults};

/// Usage of the `pve-sim` entry point.
pub const USAGE: &str = "USAGE: pve-sim <TOOL> [ARGS]     (TOOL: qm pct pvesh pvesm vzdump qmrestore pveam ha-manager pvecm)
       pve-sim reset                restore the initial state
       pve-sim dump                 print the state JSON
       pve-sim fault add '<json>'   add a fault rule {\"match\",\"action\":\"hang|fail|warn|hold|pmxcfs-down\",\"message\",\"seconds\",\"times\"}
                                    (hold: the call's task stays running `seconds`, its guest locked; stop it with
                                    `pvesh delete /nodes/NODE/tasks/UPID`)
       pve-sim fault list           print the fault rules
       pve-sim fault clear          remove all fault rules
       pve-sim qga VMID up|down|no-exec
                                    let the VM's guest agent answer, or not, or answer but refuse
                                    guest-exec and files (RHEL's allow list)
       pve-sim break NODE service NAME|disk DEV|offline|none
                                    make a service fail, a disk fail SMART, the node drop out of
                                    the cluster; `none` mends the node
       pve-sim net-cut IFACE PID|off
                                    a network reload that leaves IFACE running stops process PID
                                    (new SSH connections hang), one without it lets PID go on
       pve-sim tool-ms [MS]         show/set each PVE tool run's start-up cost (0: none; `reset` sets 0),
                                    spent before the state lock, as real PVE's Perl start-up runs in parallel
       pve-sim sandbox [out-limit=BYTES] [timeout=SECONDS]
                                    show/set the guest-command limits (output kept per stream, kill after)
       (internal: pve-sim guest-run …, guest-io …, guest-tool … are the sandbox's helpers, see sandbox.rs and guest_tools.rs)
State file: $PVE_SIM_STATE or /var/lib/pve-sim/state.json; faults: $PVE_SIM_FAULTS or /var/lib/pve-sim/faults.json";

/// Run an admin subcommand.
pub fn run(cmd: &str, args: &[String], env: &Env, now: i64) -> Output {
    let store = Store::new(&env.state_path);
    let io = |r: std::io::Result<()>| match r {
        Ok(()) => Output::default(),
        Err(e) => Output::err(&format!("pve-sim: {e}"), 255),
    };
    match (cmd, args.first().map(String::as_str)) {
        ("reset", None) => io(store
            .reset(now)
            .and_then(|()| store.transact(now, |st| crate::network::reset_files(st)))
            .and_then(|()| crate::startup::set(&env.state_path, 0))),
        ("tool-ms", None) => Output::ok(format!("{}\n", crate::startup::cost_ms(env))),
        ("tool-ms", Some(ms)) if args.len() == 1 => match ms.parse::<u64>() {
            Ok(ms) if ms <= 10_000 => io(crate::startup::set(&env.state_path, ms)),
            _ => Output::err(USAGE, 2),
        },
        ("net-cut", Some("off")) if args.len() == 1 => {
            io(store.transact(now, |st| st.net_cut = None))
        }
        ("net-cut", Some(iface)) if args.len() == 2 => match args[1].parse::<u32>() {
            Ok(pid) if pid > 1 => io(store.transact(now, |st| {
                st.net_cut = Some(crate::state::NetCut {
                    iface: iface.to_string(),
                    pid,
                })
            })),
            _ => Output::err(USAGE, 2),
        },
        ("dump", None) => match store.transact(now, |st| {
            // Show the state as of now: HA requests that are due have been carried out.
            crate::ops::settle_ha(st, now);
            serde_json::to_string_pretty(st)
        }) {
            Ok(Ok(s)) => Output::ok(format!("{s}\n")),
            Ok(Err(e)) => Output::err(&format!("pve-sim: {e}"), 255),
            Err(e) => Output::err(&format!("pve-sim: {e}"), 255),
        },
        ("fault", Some("add")) => match args.get(1) {
            Some(json) if args.len() == 2 => match faults::add(Path::new(&env.faults_path), json) {
                Ok(()) => Output::default(),
                Err(e) => Output::err(&format!("pve-sim: {e}"), 2),
            },
            _ => Output::err(USAGE, 2),
        },
        ("fault", Some("clear")) if args.len() == 1 => io(faults::clear(&env.faults_path)),
        ("fault", Some("list")) if args.len() == 1 => match faults::list(&env.faults_path) {
            Ok(r) => Output::ok(format!(
                "{}\n",
                serde_json::to_string_pretty(&r).unwrap_or_default()
            )),
            Err(e) => Output::err(&format!("pve-sim: {e}"), 255),
        },
        ("qga", Some(id)) if args.len() == 2 => {
            let (Ok(vmid), Some(up)) = (
                id.parse::<u32>(),
                match args[1].as_str() {
                    "up" => Some((false, false)),
                    "down" => Some((true, false)),
                    "no-exec" => Some((false, true)),
                    _ => None,
                },
            ) else {
                return Output::err(USAGE, 2);
            };
            let (down, no_exec) = up;
            match store.transact(now, |st| {
                let set = |s: &mut std::collections::BTreeSet<u32>, on: bool| {
                    if on {
                        s.insert(vmid);
                    } else {
                        s.remove(&vmid);
                    }
                };
                set(&mut st.qga_down, down);
                set(&mut st.qga_no_exec, no_exec);
            }) {
                Ok(()) => Output::default(),
                Err(e) => Output::err(&format!("pve-sim: {e}"), 255),
            }
        }
        // `break NODE service NAME|disk DEV|offline`, and `break NODE none` to mend it.
        ("break", Some(node)) if (2..=3).contains(&args.len()) => {
            let what = match (args[1].as_str(), args.get(2)) {
                ("service", Some(name))
                    if crate::hostinfo::service_names().contains(&name.as_str()) =>
                {
                    Some(format!("service:{name}"))
                }
                ("disk", Some(dev)) if dev.starts_with("/dev/") => Some(format!("disk:{dev}")),
                ("offline", None) | ("none", None) => None,
                _ => return Output::err(USAGE, 2),
            };
            let mend = args[1] == "none";
            let offline = args[1] == "offline";
            match store.transact(now, |st| {
                let n = st.nodes.iter_mut().find(|n| n.name == *node)?;
                match (&what, mend, offline) {
                    (Some(w), _, _) => n.broken.push(w.clone()),
                    (None, true, _) => {
                        n.broken.clear();
                        n.online = true;
                    }
                    (None, _, _) => n.online = false,
                }
                Some(())
            }) {
                Ok(Some(())) => Output::default(),
                Ok(None) => Output::err(&format!("pve-sim: no node '{node}'"), 2),
                Err(e) => Output::err(&format!("pve-sim: {e}"), 255),
            }
        }
        ("sandbox", _) => {
            let mut set = Vec::new();
            for a in args {
                match a.split_once('=').map(|(k, v)| (k, v.parse::<u64>())) {
                    Some(("out-limit", Ok(n))) => set.push((true, n)),
                    Some(("timeout", Ok(n))) if n > 0 => set.push((false, n)),
                    _ => return Output::err(USAGE, 2),
                }
            }
            match store.transact(now, |st| {
                for (is_limit, n) in &set {
                    if *is_limit {
                        st.sandbox.out_limit = *n;
                    } else {
                        st.sandbox.timeout = *n;
                    }
                }
                st.sandbox
            }) {
                Ok(l) => Output::ok(format!("out-limit={} timeout={}\n", l.out_limit, l.timeout)),
                Err(e) => Output::err(&format!("pve-sim: {e}"), 255),
            }
        }
        ("help" | "--help" | "-h", _) => Output::ok(format!("{USAGE}\n")),
        _ => Output::err(USAGE, 2),
    }
}
