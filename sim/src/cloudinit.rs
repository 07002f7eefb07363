//! Cloud-init of VMs: the pending values (`GET …/qemu/{vmid}/cloudinit`), regenerating the
//! drive (`PUT …/cloudinit`), and turning a VM into a template (`POST …/template`).
//!
//! PVE remembers the values the cloud-init drive was last generated from in the config's
//! `[special:cloudinit]` section [SRC qemu-server PVE/QemuServer/Cloudinit.pm, `cloudinit`
//! section written by `generate_cloudinitconfig`; PVE/API2/Qemu.pm `cloudinit_pending`
//! compares them with the config]. The simulator keeps that section under the config key
//! `special:cloudinit`, which no config read shows.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::ops::{self, TaskRun};
use crate::state::{Kind, State};
use crate::{Ctx, Failure};

/// Where the generated values live in a simulated config.
pub const SECTION: &str = "special:cloudinit";

/// The config keys cloud-init reads (qemu-server `$cloudinit_keys`, the ones pxagent sets and
/// the ones it never does).
const KEYS: &[&str] = &[
    "ciuser",
    "cipassword",
    "citype",
    "ciupgrade",
    "cicustom",
    "sshkeys",
    "nameserver",
    "searchdomain",
    "ipconfig0",
    "ipconfig1",
    "ipconfig2",
    "ipconfig3",
];

fn current(config: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    KEYS.iter()
        .filter_map(|k| config.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

/// `cloudinit_pending`: one entry per key, `value` as the drive has it, `pending` where the
/// config differs, `delete: 1` where the config no longer has it.
pub fn pending(st: &State, node: &str, vmid: u32) -> Result<Value, Failure> {
    let g = ops::load(st, node, Kind::Qemu, vmid)?;
    let now = current(&g.config);
    let drive: BTreeMap<String, Value> = g
        .config
        .get(SECTION)
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let mut keys: Vec<&String> = now.keys().chain(drive.keys()).collect();
    keys.sort();
    keys.dedup();
    let out: Vec<Value> = keys
        .into_iter()
        .map(|k| {
            let mut e = json!({ "key": k });
            match (drive.get(k), now.get(k)) {
                (Some(d), Some(n)) if d == n => e["value"] = d.clone(),
                (Some(d), Some(n)) => {
                    e["value"] = d.clone();
                    e["pending"] = n.clone();
                }
                (Some(d), None) => {
                    e["value"] = d.clone();
                    e["delete"] = json!(1);
                }
                (None, Some(n)) => e["pending"] = n.clone(),
                (None, None) => {}
            }
            e
        })
        .collect();
    Ok(Value::Array(out))
}

/// Write the config's cloud-init values onto the drive (the VM must have one).
pub fn regenerate(st: &mut State, node: &str, vmid: u32) -> Result<(), Failure> {
    ops::load(st, node, Kind::Qemu, vmid)?;
    let g = st.guests.get_mut(&vmid).expect("loaded above");
    let has_drive = g
        .config
        .values()
        .filter_map(Value::as_str)
        .any(|v| v.contains("cloudinit"));
    if !has_drive {
        return Err(Failure::die(format!("VM {vmid} has no cloud-init drive")));
    }
    let now: serde_json::Map<String, Value> = current(&g.config).into_iter().collect();
    g.config.insert(SECTION.into(), Value::Object(now));
    Ok(())
}

/// `qm template` through the API (task `qmtemplate`): a stopped VM, not already a template;
/// its disks become base images (`vm-100-disk-0` → `base-100-disk-0`) [SRC qemu-server
/// PVE/API2/Qemu.pm `template`, PVE::QemuServer::template_create].
pub fn template(st: &mut State, ctx: &Ctx, node: &str, vmid: u32) -> Result<TaskRun, Failure> {
    let g = ops::load(st, node, Kind::Qemu, vmid)?;
    if g.is_template() {
        return Err(Failure::die("you can't convert a template to a template"));
    }
    if g.running {
        return Err(Failure::die(
            "you can't convert a VM to template if VM is running",
        ));
    }
    Ok(ops::run_task(
        st,
        ctx,
        node,
        "qmtemplate",
        &vmid.to_string(),
        |st, log| {
            let g = st.guests.get_mut(&vmid).ok_or("VM vanished")?;
            let from = format!("vm-{vmid}-");
            let to = format!("base-{vmid}-");
            for v in g.config.values_mut() {
                let Some(s) = v
                    .as_str()
                    .filter(|s| s.contains(&from) && !s.contains("cloudinit"))
                else {
                    continue;
                };
                let old = s.split(',').next().unwrap_or(s);
                let name = old.rsplit([':', '/']).next().unwrap_or(old).to_string();
                log.push(format!(
                    "  Renamed \"{name}\" to \"{}\" in volume group \"pve\"",
                    name.replace(&from, &to)
                ));
                *v = json!(s.replace(&from, &to));
            }
            g.config.insert("template".into(), json!(1));
            Ok(())
        },
    ))
}
