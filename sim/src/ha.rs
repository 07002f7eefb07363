//! The HA manager's configuration as PVE 9's API keeps it: the guests it manages
//! (`ha/resources.cfg`, kept on each [`crate::state::Guest`] as [`Ha`]) and its rules
//! (`ha/rules.cfg`). Only the configuration and the requested state: no CRM, no fencing.
//!
//! Texts and checks: pve-ha-manager b71218f279d5 `src/PVE/API2/HA/Resources.pm` (`create`:
//! "resource ID 'SID' already defined" under "create resource failed: "; `delete`: "cannot
//! delete service 'SID', not HA managed!"; `purge`, on by default, takes the resource out of
//! every rule and deletes a rule left empty, `PVE::HA::Config::delete_service_from_config`),
//! `src/PVE/HA/Config.pm` `parse_sid` ("unable to detect SID from VMID - VM/CT N does not
//! exist", "unable to parse service id 'S'"), `src/PVE/HA/Resources/PVEVM.pm` and `PVECT.pm`
//! `exists` ("resource 'vm:N' does not exist in cluster", "… - guest with ID N is not a VM"),
//! `src/PVE/API2/HA/Rules.pm` (`create_rule`: "HA rule 'R' already defined" under "create ha
//! rule failed: ", "cannot use unmanaged resource(s) …", "cannot use non-existent node(s) …",
//! the rule's `order` after the others, "Rule 'R' is invalid." with the feasibility errors;
//! `delete_rule` of an unknown rule succeeds; `index` lists rules by `order`, each with
//! `rule`, `digest`, `order`, `resources` and `nodes` encoded as sorted lists, `strict`
//! only when set), `src/PVE/HA/Rules/ResourceAffinity.pm` ("rule is ineffective as there are
//! less than two resources") and `NodeAffinity.pm` ("resource 'SID' is already used in
//! another node affinity rule").

use serde_json::{Value, json};

use crate::api::digest;
use crate::args::Parsed;
use crate::state::{HA_DELAY, Ha, HaRule, Kind, State};
use crate::storage_ops::param_exc;
use crate::{Ctx, Failure};

/// `parse_sid`: the resource id and its guest's VMID and kind.
fn parse_sid(st: &State, sid: &str) -> Result<(String, u32, Kind), Failure> {
    let (kind, vmid) = if let Ok(vmid) = sid.parse::<u32>() {
        let g = st.guests.get(&vmid).ok_or_else(|| {
            Failure::die(format!(
                "unable to detect SID from VMID - VM/CT {sid} does not exist\n"
            ))
        })?;
        (g.kind, vmid)
    } else {
        let parsed = sid.split_once(':').and_then(|(t, n)| {
            let kind = match t {
                "vm" => Kind::Qemu,
                "ct" => Kind::Lxc,
                _ => return None,
            };
            Some((kind, n))
        });
        let Some((kind, name)) = parsed else {
            return Err(Failure::die(format!(
                "unable to parse service id '{sid}'\n"
            )));
        };
        let vmid = name
            .parse::<u32>()
            .ok()
            .filter(|v| *v >= 100)
            .ok_or_else(|| Failure::die("invalid VMID\n"))?;
        (kind, vmid)
    };
    Ok((format!("{}:{vmid}", type_of(kind)), vmid, kind))
}

fn type_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Qemu => "vm",
        Kind::Lxc => "ct",
    }
}

/// `POST /cluster/ha/resources`.
pub fn add(st: &mut State, ctx: &Ctx, o: &Parsed) -> Result<(), Failure> {
    let (sid, vmid, kind) = parse_sid(st, o.get("sid").unwrap_or_default())?;
    if o.get("type").is_some_and(|t| t != type_of(kind)) {
        return Err(Failure::die("types does not match\n"));
    }
    if o.get("group").is_some() {
        return Err(Failure::die(
            "invalid parameter 'group': ha groups have been migrated to rules\n",
        ));
    }
    let g = match st.guests.get_mut(&vmid) {
        Some(g) if g.kind == kind => g,
        Some(_) => {
            let noun = if kind == Kind::Qemu { "VM" } else { "CT" };
            return Err(Failure::die(format!(
                "resource '{sid}' - guest with ID {vmid} is not a {noun}\n"
            )));
        }
        None => {
            return Err(Failure::die(format!(
                "resource '{sid}' does not exist in cluster\n"
            )));
        }
    };
    if g.ha.is_some() {
        return Err(Failure::die(format!(
            "create resource failed: resource ID '{sid}' already defined\n"
        )));
    }
    let request = match o.get("state").unwrap_or("started") {
        "enabled" => "started",
        s => s,
    };
    let wanted_running = request == "started";
    let settles = matches!(request, "started" | "stopped") && g.running != wanted_running;
    g.ha = Some(Ha {
        request: request.into(),
        due: settles.then_some(ctx.now + HA_DELAY),
        max_restart: o.get("max_restart").and_then(|v| v.parse().ok()),
    });
    Ok(())
}

/// `DELETE /cluster/ha/resources/{sid}` (with PVE's default `purge`).
pub fn remove(st: &mut State, sid: &str, o: &Parsed) -> Result<(), Failure> {
    let (sid, vmid, kind) = parse_sid(st, sid)?;
    let managed = st
        .guests
        .get(&vmid)
        .is_some_and(|g| g.kind == kind && g.ha.is_some());
    if !managed {
        return Err(Failure::die(format!(
            "cannot delete service '{sid}', not HA managed!\n"
        )));
    }
    if let Some(g) = st.guests.get_mut(&vmid) {
        g.ha = None;
    }
    if o.get("purge") != Some("0") {
        for r in &mut st.ha_rules {
            r.resources.retain(|s| *s != sid);
        }
        st.ha_rules.retain(|r| !r.resources.is_empty());
    }
    Ok(())
}

/// Whether a resource id names an HA-managed guest (`service_is_configured`).
fn managed(st: &State, sid: &str) -> bool {
    let Some((t, n)) = sid.split_once(':') else {
        return false;
    };
    let Ok(vmid) = n.parse::<u32>() else {
        return false;
    };
    st.guests
        .get(&vmid)
        .is_some_and(|g| type_of(g.kind) == t && g.ha.is_some())
}

/// `GET /cluster/ha/rules`: every rule in its order, or those of a `type` or naming a
/// `resource` (`foreach_rule`).
pub fn rules(st: &State, o: &Parsed) -> Value {
    let d = digest(&st.ha_rules);
    let mut rules: Vec<&HaRule> = st
        .ha_rules
        .iter()
        .filter(|r| o.get("type").is_none_or(|t| r.kind == t))
        .filter(|r| {
            o.get("resource")
                .is_none_or(|sid| r.resources.iter().any(|s| s == sid))
        })
        .collect();
    rules.sort_by(|a, b| (a.order, &a.rule).cmp(&(b.order, &b.rule)));
    Value::Array(
        rules
            .into_iter()
            .map(|r| {
                let mut v = json!({
                    "rule": r.rule, "type": r.kind, "digest": d, "order": r.order,
                    "resources": sorted(&r.resources).join(","),
                });
                if let Some(nodes) = &r.nodes {
                    v["nodes"] = json!(sorted(nodes).join(","));
                }
                if r.strict {
                    v["strict"] = json!(1);
                }
                if let Some(a) = &r.affinity {
                    v["affinity"] = json!(a);
                }
                if let Some(c) = &r.comment {
                    v["comment"] = json!(c);
                }
                if r.disable {
                    v["disable"] = json!(1);
                }
                v
            })
            .collect(),
    )
}

fn sorted(v: &[String]) -> Vec<&str> {
    let mut s: Vec<&str> = v.iter().map(String::as_str).collect();
    s.sort_unstable();
    s
}

/// `POST /cluster/ha/rules`.
pub fn create_rule(st: &mut State, o: &Parsed) -> Result<(), Failure> {
    let id = o.get("rule").unwrap_or_default().to_string();
    let kind = o.get("type").unwrap_or_default().to_string();
    let node_affinity = kind == "node-affinity";
    // The plugin's own options (`check_config`): a rule type takes only its own.
    let foreign = if node_affinity { "affinity" } else { "nodes" };
    if o.get(foreign).is_some() || (!node_affinity && o.get("strict").is_some()) {
        let key = if o.get(foreign).is_some() {
            foreign
        } else {
            "strict"
        };
        return Err(param_exc(
            key,
            "property is not defined in schema and the schema does not allow additional properties",
        ));
    }
    let required = if node_affinity { "nodes" } else { "affinity" };
    if o.get(required).is_none() {
        return Err(param_exc(
            required,
            "property is missing and it is not optional",
        ));
    }
    let mut resources: Vec<String> = Vec::new();
    for sid in o.get("resources").unwrap_or_default().split(',') {
        if !sid.contains(':') {
            return Err(param_exc(
                "resources",
                "value does not look like a valid ha resource id",
            ));
        }
        if !resources.iter().any(|s| s == sid) {
            resources.push(sid.to_string());
        }
    }
    let nodes = o.get("nodes").map(|n| {
        n.split(',')
            .map(|e| match e.split_once(':') {
                Some((n, p)) if p.parse::<u64>() == Ok(0) => n.to_string(),
                _ => e.to_string(),
            })
            .collect::<Vec<String>>()
    });
    if st.ha_rules.iter().any(|r| r.rule == id) {
        return Err(Failure::die(format!(
            "create ha rule failed: HA rule '{id}' already defined\n"
        )));
    }
    let unmanaged: Vec<&str> = sorted(&resources)
        .into_iter()
        .filter(|s| !managed(st, s))
        .collect();
    if !unmanaged.is_empty() {
        return Err(Failure::die(format!(
            "create ha rule failed: cannot use unmanaged resource(s) {}.\n",
            unmanaged.join(", ")
        )));
    }
    if let Some(nodes) = &nodes {
        let names: Vec<String> = nodes
            .iter()
            .map(|e| e.split(':').next().unwrap_or(e).to_string())
            .collect();
        let missing: Vec<&str> = sorted(&names)
            .into_iter()
            .filter(|n| !st.nodes.iter().any(|x| x.name == *n))
            .collect();
        if !missing.is_empty() {
            return Err(Failure::die(format!(
                "create ha rule failed: cannot use non-existent node(s) {}.\n",
                missing.join(", ")
            )));
        }
    }
    // Feasibility (`check_feasibility`), for the new rule.
    let problem = if node_affinity {
        sorted(&resources).into_iter().find_map(|sid| {
            st.ha_rules
                .iter()
                .any(|r| r.nodes.is_some() && !r.disable && r.resources.iter().any(|s| s == sid))
                .then(|| format!("resource '{sid}' is already used in another node affinity rule"))
        })
    } else {
        (resources.len() < 2)
            .then(|| "rule is ineffective as there are less than two resources".to_string())
    };
    if let Some(p) = problem {
        return Err(Failure::die(format!(
            "create ha rule failed: Rule '{id}' is invalid.\nresources: {p}\n"
        )));
    }
    // `get_next_ordinal`: one after the smallest order there is (as PVE has it).
    let order = st.ha_rules.iter().map(|r| r.order).min().unwrap_or(0) + 1;
    st.ha_rules.push(HaRule {
        rule: id,
        kind,
        resources,
        nodes,
        strict: o.get("strict") == Some("1"),
        affinity: o.get("affinity").map(str::to_string),
        comment: o.get("comment").map(str::to_string),
        disable: o.get("disable") == Some("1"),
        order,
    });
    Ok(())
}

/// `DELETE /cluster/ha/rules/{rule}`: an unknown rule is no error.
pub fn delete_rule(st: &mut State, id: &str) {
    st.ha_rules.retain(|r| r.rule != id);
}
