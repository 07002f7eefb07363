//! Ansible inventories as fleets: `--hosts @inventory.yml[:GROUP]` or `@hosts.ini:GROUP`.
//!
//! A fleet defined for Ansible or AWX works unchanged. Both inventory formats are read (YAML:
//! groups with `hosts`, `vars` and nested `children`; INI: `[group]`, `[group:children]`,
//! `[group:vars]`, `host key=value`), and the variables that map to pxagent's settings are
//! taken from host and group vars (a host's own over its groups', a child group's over its
//! parent's): `ansible_host` (or `ansible_ssh_host`) the address, `ansible_port`
//! (`ansible_ssh_port`) the port, `ansible_user` (`ansible_ssh_user`) the account,
//! `ansible_ssh_private_key_file` the key. Others are ignored. Host ranges (`pve[1:3]`) are
//! refused rather than guessed. A group means its hosts and those of its children, all the
//! way down; no group means every host (`all`).
//!
//! The hosts become config hosts (a host the config itself names keeps the config's entry),
//! and the selection `@FILE[:GROUP]` a config group of that name, so the fleet code resolves
//! them like any other. Uses the config types only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{Config, HostEntry};
use crate::base::error::{Error, Result};

/// Whether a `--hosts` item names an inventory file (`@path`, `@path:GROUP`) rather than a
/// config group: it has a `/` or an inventory's extension.
pub fn is_inventory(item: &str) -> bool {
    let Some(rest) = item.strip_prefix('@') else {
        return false;
    };
    let file = split(rest).0;
    file.contains('/')
        || [".yml", ".yaml", ".ini", ".cfg", ".hosts"]
            .iter()
            .any(|e| file.ends_with(e))
}

/// `path[:GROUP]`.
fn split(rest: &str) -> (&str, Option<&str>) {
    match rest.rsplit_once(':') {
        Some((file, group)) if !group.contains('/') && !group.is_empty() => (file, Some(group)),
        _ => (rest, None),
    }
}

/// One group as read: its own hosts with their vars, its vars, its children.
#[derive(Debug, Default)]
struct Group {
    hosts: BTreeMap<String, BTreeMap<String, String>>,
    vars: BTreeMap<String, String>,
    children: BTreeSet<String>,
}

/// A parsed inventory: every group by name (`all` included).
#[derive(Debug, Default)]
pub struct Inventory {
    groups: BTreeMap<String, Group>,
}

impl Inventory {
    /// Read an inventory file (YAML when it parses as a mapping, else INI).
    pub fn read(path: &Path) -> Result<Inventory> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::ReadFile {
            path: path.to_path_buf(),
            source: e,
        })?;
        let what = |e: String| Error::usage(format!("inventory {}: {e}", path.display()));
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e == "yml" || e == "yaml");
        let mut inv = if yaml {
            Inventory::from_yaml(&text).map_err(what)?
        } else {
            Inventory::from_ini(&text).map_err(what)?
        };
        inv.groups.entry("all".into()).or_default();
        // Every top-level group is a child of `all`.
        let tops: Vec<String> = inv
            .groups
            .keys()
            .filter(|g| *g != "all")
            .filter(|g| !inv.groups.values().any(|o| o.children.contains(*g)))
            .cloned()
            .collect();
        inv.groups
            .get_mut("all")
            .expect("all")
            .children
            .extend(tops);
        Ok(inv)
    }

    fn from_yaml(text: &str) -> std::result::Result<Inventory, String> {
        let doc: yaml_serde::Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        let mut inv = Inventory::default();
        let top = doc.as_mapping().ok_or("expected a mapping of groups")?;
        for (name, body) in top {
            let name = name.as_str().ok_or("a group name that is not text")?;
            inv.yaml_group(name, body)?;
        }
        Ok(inv)
    }

    fn yaml_group(
        &mut self,
        name: &str,
        body: &yaml_serde::Value,
    ) -> std::result::Result<(), String> {
        check_name(name)?;
        self.groups.entry(name.to_string()).or_default();
        if body.is_null() {
            return Ok(());
        }
        let body = body
            .as_mapping()
            .ok_or_else(|| format!("group {name}: expected hosts, vars or children"))?;
        for (key, value) in body {
            match key.as_str() {
                Some("hosts") if value.is_null() => {}
                Some("hosts") => {
                    let hosts = value
                        .as_mapping()
                        .ok_or_else(|| format!("group {name}: `hosts` must be a mapping"))?;
                    for (h, vars) in hosts {
                        let h = h.as_str().ok_or("a host name that is not text")?;
                        check_name(h)?;
                        let vars = yaml_vars(vars).map_err(|e| format!("host {h}: {e}"))?;
                        let g = self.groups.get_mut(name).expect("group");
                        g.hosts.entry(h.to_string()).or_default().extend(vars);
                    }
                }
                Some("vars") => {
                    let vars = yaml_vars(value).map_err(|e| format!("group {name}: {e}"))?;
                    self.groups.get_mut(name).expect("group").vars.extend(vars);
                }
                Some("children") if value.is_null() => {}
                Some("children") => {
                    let children = value
                        .as_mapping()
                        .ok_or_else(|| format!("group {name}: `children` must be a mapping"))?;
                    for (c, cbody) in children {
                        let c = c.as_str().ok_or("a group name that is not text")?;
                        self.groups
                            .get_mut(name)
                            .expect("group")
                            .children
                            .insert(c.to_string());
                        self.yaml_group(c, cbody)?;
                    }
                }
                _ => return Err(format!("group {name}: unknown key {key:?}")),
            }
        }
        Ok(())
    }

    fn from_ini(text: &str) -> std::result::Result<Inventory, String> {
        let mut inv = Inventory::default();
        // Section kind: hosts, children or vars of a group.
        let mut section = ("ungrouped".to_string(), "hosts");
        inv.groups.entry("ungrouped".into()).or_default();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let at = |e: String| format!("line {}: {e}", n + 1);
            if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let (g, kind) = match head.split_once(':') {
                    Some((g, "children")) => (g, "children"),
                    Some((g, "vars")) => (g, "vars"),
                    Some((_, k)) => return Err(at(format!("unknown section kind ':{k}'"))),
                    None => (head, "hosts"),
                };
                check_name(g).map_err(at)?;
                inv.groups.entry(g.to_string()).or_default();
                section = (g.to_string(), kind);
                continue;
            }
            let group = inv.groups.get_mut(&section.0).expect("group");
            match section.1 {
                "children" => {
                    check_name(line).map_err(at)?;
                    group.children.insert(line.to_string());
                }
                "vars" => {
                    let (k, v) = line
                        .split_once('=')
                        .ok_or_else(|| at("expected key=value".into()))?;
                    group.vars.insert(k.trim().into(), unquote(v.trim()).into());
                }
                _ => {
                    let mut words = line.split_whitespace();
                    let host = words.next().expect("not empty");
                    check_name(host).map_err(at)?;
                    let mut vars = BTreeMap::new();
                    for w in words {
                        let (k, v) = w
                            .split_once('=')
                            .ok_or_else(|| at(format!("expected key=value, got '{w}'")))?;
                        vars.insert(k.to_string(), unquote(v).to_string());
                    }
                    group
                        .hosts
                        .entry(host.to_string())
                        .or_default()
                        .extend(vars);
                }
            }
        }
        for (g, body) in &inv.groups {
            for c in &body.children {
                if !inv.groups.contains_key(c) {
                    return Err(format!("group {g}: child group {c} is not defined"));
                }
            }
        }
        Ok(inv)
    }

    /// The hosts of `group` and of its children, all the way down, in name order.
    pub fn members(&self, group: &str) -> Result<Vec<String>> {
        if !self.groups.contains_key(group) {
            return Err(Error::usage(format!(
                "the inventory has no group '{}' (groups: {})",
                crate::base::text::printable(group),
                self.groups.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let mut seen = BTreeSet::new();
        let mut hosts = BTreeSet::new();
        let mut todo = vec![group.to_string()];
        while let Some(g) = todo.pop() {
            if !seen.insert(g.clone()) {
                continue;
            }
            if let Some(body) = self.groups.get(&g) {
                hosts.extend(body.hosts.keys().cloned());
                todo.extend(body.children.iter().cloned());
            }
        }
        Ok(hosts.into_iter().collect())
    }

    /// The variables of `host`: its groups' vars from `all` down (a child's over its parent's),
    /// then its own.
    fn vars_of(&self, host: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        self.collect_vars("all", host, &mut out, &mut BTreeSet::new());
        out
    }

    fn collect_vars(
        &self,
        group: &str,
        host: &str,
        out: &mut BTreeMap<String, String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        if !seen.insert(group.to_string()) {
            return false;
        }
        let Some(body) = self.groups.get(group) else {
            return false;
        };
        let mut mine = body.vars.clone();
        let mut holds = false;
        for c in &body.children {
            let mut sub = BTreeMap::new();
            if self.collect_vars(c, host, &mut sub, seen) {
                holds = true;
                mine.extend(sub);
            }
        }
        if let Some(own) = body.hosts.get(host) {
            holds = true;
            mine.extend(own.clone());
        }
        if holds || group == "all" {
            out.extend(mine);
        }
        holds
    }

    /// The config entry of `host` from its variables.
    fn entry(&self, host: &str, base: &Path) -> Result<HostEntry> {
        let vars = self.vars_of(host);
        let get = |a: &str, b: &str| vars.get(a).or_else(|| vars.get(b)).cloned();
        let port = match get("ansible_port", "ansible_ssh_port") {
            None => None,
            Some(p) => Some(p.parse::<u16>().map_err(|_| {
                Error::usage(format!(
                    "inventory host {host}: ansible_port '{p}' is not a port"
                ))
            })?),
        };
        let identity = get("ansible_ssh_private_key_file", "ansible_private_key_file").map(|k| {
            let p = crate::config::expand_home(Path::new(&k));
            if p.is_relative() { base.join(p) } else { p }
        });
        Ok(HostEntry {
            address: get("ansible_host", "ansible_ssh_host").unwrap_or_else(|| host.to_string()),
            port,
            user: get("ansible_user", "ansible_ssh_user"),
            identity,
            known_hosts: None,
            jump: None,
        })
    }
}

fn check_name(name: &str) -> std::result::Result<(), String> {
    if name.contains('[') {
        return Err(format!(
            "'{name}': host ranges are not supported; list the hosts one by one"
        ));
    }
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "'{}' is not a host or group name",
            name.escape_debug()
        ));
    }
    Ok(())
}

fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(v)
}

fn yaml_vars(v: &yaml_serde::Value) -> std::result::Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    if v.is_null() {
        return Ok(out);
    }
    let m = v.as_mapping().ok_or("vars must be a mapping")?;
    for (k, val) in m {
        let k = k.as_str().ok_or("a variable name that is not text")?;
        let text = match val {
            yaml_serde::Value::String(s) => s.clone(),
            yaml_serde::Value::Number(n) => n.to_string(),
            yaml_serde::Value::Bool(b) => b.to_string(),
            // Lists and mappings map to no pxagent setting.
            _ => continue,
        };
        out.insert(k.to_string(), text);
    }
    Ok(out)
}

/// Load the inventories `--hosts` names (`@FILE[:GROUP]` items) into `cfg`: their hosts as
/// config hosts (the config's own entries win) and each item as a config group of the same
/// name (`FILE[:GROUP]`, without the `@`), so that [`crate::cli::fleet`] resolves it.
pub fn load_into(list: &str, cfg: &mut Config) -> Result<()> {
    for item in list.split(',').map(str::trim).filter(|i| is_inventory(i)) {
        let rest = &item[1..];
        let (file, group) = split(rest);
        let path = crate::config::expand_home(Path::new(file));
        let inv = Inventory::read(&path)?;
        let base: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let members = inv.members(group.unwrap_or("all"))?;
        for h in &members {
            if !cfg.hosts.contains_key(h) {
                cfg.hosts.insert(h.clone(), inv.entry(h, &base)?);
            }
        }
        cfg.groups.insert(rest.to_string(), members);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "all:
  vars:
    ansible_user: zen-agent
  hosts:
    lone:
      ansible_host: 10.0.0.9
  children:
    edge:
      vars:
        ansible_port: 2222
      hosts:
        a:
          ansible_host: 10.0.0.1
        b:
          ansible_host: 10.0.0.2
          ansible_user: other
      children:
        east:
          hosts:
            c:
              ansible_host: 10.0.0.3
              ansible_ssh_private_key_file: keys/c
    core:
      hosts:
        d:
";

    fn yaml() -> Inventory {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("inv.yml");
        std::fs::write(&p, YAML).unwrap();
        Inventory::read(&p).unwrap()
    }

    #[test]
    fn nested_groups_give_their_hosts_and_their_childrens() {
        let inv = yaml();
        assert_eq!(inv.members("edge").unwrap(), ["a", "b", "c"]);
        assert_eq!(inv.members("east").unwrap(), ["c"]);
        assert_eq!(inv.members("all").unwrap(), ["a", "b", "c", "d", "lone"]);
        assert!(inv.members("west").is_err());
    }

    #[test]
    fn variables_map_to_settings_with_the_nearest_winning() {
        let inv = yaml();
        let base = Path::new("/inv");
        let a = inv.entry("a", base).unwrap();
        assert_eq!(
            (a.address.as_str(), a.port, a.user.as_deref()),
            ("10.0.0.1", Some(2222), Some("zen-agent"))
        );
        let b = inv.entry("b", base).unwrap();
        assert_eq!(b.user.as_deref(), Some("other"));
        let c = inv.entry("c", base).unwrap();
        assert_eq!(c.port, Some(2222), "from the parent group");
        assert_eq!(c.identity.as_deref(), Some(Path::new("/inv/keys/c")));
        let d = inv.entry("d", base).unwrap();
        assert_eq!((d.address.as_str(), d.port), ("d", None));
    }

    #[test]
    fn ini_inventories_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hosts.ini");
        std::fs::write(
            &p,
            "lone ansible_host=10.0.0.9\n[edge]\na ansible_host=10.0.0.1\nb ansible_host=\"10.0.0.2\" ansible_user=other\n[edge:children]\neast\n[east]\nc ansible_host=10.0.0.3\n[edge:vars]\nansible_port=2222\n[all:vars]\nansible_user=zen-agent\n",
        )
        .unwrap();
        let inv = Inventory::read(&p).unwrap();
        assert_eq!(inv.members("edge").unwrap(), ["a", "b", "c"]);
        let c = inv.entry("c", Path::new("/")).unwrap();
        assert_eq!((c.port, c.user.as_deref()), (Some(2222), Some("zen-agent")));
        assert_eq!(inv.entry("b", Path::new("/")).unwrap().address, "10.0.0.2");
        std::fs::write(&p, "[edge]\npve[1:3]\n").unwrap();
        assert!(
            Inventory::read(&p)
                .unwrap_err()
                .to_string()
                .contains("host ranges")
        );
    }

    #[test]
    fn selections_become_config_groups() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("inv.yml");
        std::fs::write(&p, YAML).unwrap();
        let mut cfg = Config::default();
        let item = format!("@{}:edge", p.display());
        assert!(is_inventory(&item));
        assert!(!is_inventory("@edge"));
        load_into(&item, &mut cfg).unwrap();
        assert_eq!(cfg.groups[&item[1..]], ["a", "b", "c"]);
        assert_eq!(cfg.hosts["a"].address, "10.0.0.1");
        assert!(!cfg.hosts.contains_key("d"));
    }
}
