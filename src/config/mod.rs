//! The config file: named hosts, a default host and the local policy.
//!
//! `$XDG_CONFIG_HOME/pxagent/config.yaml` (or `~/.config/pxagent/config.yaml`, or
//! `--config FILE`). Flags and `PXAGENT_*` variables override it. Unknown keys are errors,
//! not silently ignored: a misspelt `known_host:` must not quietly fall back to a default.
//!
//! ```yaml
//! default_host: lab
//! hosts:
//!   lab:
//!     address: 192.0.2.10
//!     port: 22
//!     user: zen-agent
//!     identity: ~/.ssh/pxagent_ed25519
//!     known_hosts: ~/.ssh/known_hosts
//! policy: {read_only: true}     # or policy_file: FILE
//! groups: {edge: [lab, zen-agent@192.0.2.11]}   # --hosts @edge
//! persist: 60s                   # keep the connection for repeated calls (--persist)
//! ```
//!
//! Uses the policy's [`schema`](crate::policy::schema) types for its `policy:` section and
//! decides which policy source is in force ([`Config::policy_source`]); the policy does not use
//! this file: [`Policy::effective`], which narrows the config's policy by `--policy`, lives
//! here for that reason.
//!
//! Layer: config. May import: `base`, `engine`, `persist`, `policy`, `ssh`.

pub mod context;
pub mod inventory;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::base::error::{Error, Result};
use crate::policy::Policy;
use crate::policy::schema::{PolicyConfig, PolicySource};

/// The whole config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The host used when `-H` is not given.
    pub default_host: Option<String>,
    /// Named hosts.
    #[serde(default)]
    pub hosts: BTreeMap<String, HostEntry>,
    /// Local policy (see [`crate::policy`]).
    #[serde(default)]
    pub policy: PolicyConfig,
    /// A policy file instead of the `policy:` section: pxagent's YAML form or the MCP
    /// gateway's JSON form (relative paths are relative to this config file).
    pub policy_file: Option<PathBuf>,
    /// Named lists of hosts for `--hosts @NAME`: each member a host name of
    /// `hosts:` or a `user@host[:port]` / `~/.ssh/config` alias.
    #[serde(default)]
    pub groups: BTreeMap<String, Vec<String>>,
    /// Keep the SSH connection open this long after the last call (`60s`, `10m`), as
    /// `--persist` does (see [`crate::persist`]); absent: every call connects anew.
    pub persist: Option<String>,
    /// Where this config was read from (not a key in the file).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// One named host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// Host name or address (or an `~/.ssh/config` alias).
    pub address: String,
    /// SSH port.
    pub port: Option<u16>,
    /// The agent account.
    pub user: Option<String>,
    /// Private key file.
    pub identity: Option<PathBuf>,
    /// known_hosts file.
    pub known_hosts: Option<PathBuf>,
    /// Jump hosts (`[user@]host[:port]`, comma-separated, or `none`), as `-J` takes them.
    pub jump: Option<String>,
}

/// The default config path, if a home or XDG directory is known.
pub fn default_path() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("pxagent/config.yaml"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/pxagent/config.yaml"))
}

/// Load the config: an explicit path must exist; the default path may be absent.
pub fn load(explicit: Option<&Path>) -> Result<Config> {
    let (path, required) = match explicit {
        Some(p) => (p.to_path_buf(), true),
        None => match default_path() {
            Some(p) => (p, false),
            None => return Ok(Config::default()),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            return Ok(Config::default());
        }
        Err(source) => return Err(Error::ReadFile { path, source }),
    };
    let mut cfg = parse(&text, &path)?;
    cfg.path = Some(path);
    Ok(cfg)
}

/// Parse config text; errors name the file, line and column and what was expected.
pub fn parse(text: &str, path: &Path) -> Result<Config> {
    if text.trim().is_empty() {
        return Ok(Config::default());
    }
    let cfg: Config = yaml_serde::from_str(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        Error::usage(format!("config {}{at}: {e}", path.display()))
    })?;
    if let Some(d) = cfg
        .default_host
        .as_ref()
        .filter(|d| !cfg.hosts.contains_key(*d))
    {
        return Err(Error::usage(format!(
            "config {}: default_host '{d}' is not one of the hosts ({})",
            path.display(),
            cfg.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    for (name, members) in &cfg.groups {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(Error::usage(format!(
                "config {}: group name '{}' may hold only letters, digits, - and _",
                path.display(),
                crate::base::text::printable(name)
            )));
        }
        if members.is_empty() {
            return Err(Error::usage(format!(
                "config {}: group '{name}' lists no hosts",
                path.display()
            )));
        }
        for m in members.iter().filter(|m| !cfg.hosts.contains_key(*m)) {
            crate::ssh::split_host(m).map_err(|e| {
                Error::usage(format!("config {}: group '{name}': {e}", path.display()))
            })?;
        }
    }
    if let Some(p) = &cfg.persist {
        crate::persist::parse_persist(p)
            .map_err(|e| Error::usage(format!("config {}: persist: {e}", path.display())))?;
    }
    Ok(cfg)
}

impl Config {
    /// `persist:` as a duration (checked when the file was read).
    pub fn persist(&self) -> Option<std::time::Duration> {
        self.persist
            .as_deref()
            .and_then(|p| crate::persist::parse_persist(p).ok())
    }

    /// Where the policies in force are stated, broadest first: the config's own (its
    /// `policy_file:`, relative to the config file, else its `policy:` section, else the
    /// built-in default), then `flag` (`--policy FILE`) or, without it, the file named by
    /// `PXAGENT_POLICY` (read here too for callers that did not go through clap). The later
    /// one only narrows the first: no flag or variable can widen what the config
    /// forbids.
    pub fn policy_sources(&self, flag: Option<&str>) -> Result<Vec<PolicySource>> {
        let mut v = vec![self.policy_source()?];
        if let Some(f) = flag.filter(|f| !f.is_empty()) {
            v.push(PolicySource::File(expand_home(Path::new(f))));
        } else if let Some(f) = std::env::var_os("PXAGENT_POLICY").filter(|v| !v.is_empty()) {
            v.push(PolicySource::File(expand_home(Path::new(&f))));
        }
        Ok(v)
    }

    /// The config's own policy: `policy_file:` (relative to this config file), else the
    /// `policy:` section, else the built-in default without a config file.
    pub fn policy_source(&self) -> Result<PolicySource> {
        if let Some(f) = &self.policy_file {
            if self.policy != PolicyConfig::default() {
                return Err(Error::usage(format!(
                    "config {}: both `policy:` and `policy_file:` are set; keep one",
                    self.path
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                )));
            }
            let f = expand_home(f);
            let f = match (&self.path, f.is_relative()) {
                (Some(cfg), true) => cfg.parent().unwrap_or(Path::new(".")).join(f),
                _ => f,
            };
            return Ok(PolicySource::File(f));
        }
        Ok(match &self.path {
            Some(p) => PolicySource::Section {
                policy: self.policy.clone(),
                source: p.display().to_string(),
            },
            None => PolicySource::Default,
        })
    }
}

// Here rather than in `policy`, because the policy must not name the config.
impl Policy {
    /// The policy in force for a command: the config's (its `policy_file:` or its `policy:`
    /// section), narrowed by `--policy FILE` (or `PXAGENT_POLICY`) when given.
    pub fn effective(flag: Option<&str>, cfg: &Config) -> Result<Policy> {
        let mut sources = cfg.policy_sources(flag)?;
        // A config that states no policy forbids nothing: the built-in defaults are not a
        // layer to narrow, or `--policy` could not even allow what the defaults merely leave
        // off (`allow_privileged_ct_exec`).
        let states_nothing = match &sources[0] {
            PolicySource::Default => true,
            PolicySource::Section { policy, .. } => *policy == PolicyConfig::default(),
            PolicySource::File(_) => false,
        };
        if sources.len() > 1 && states_nothing {
            sources.remove(0);
        }
        let mut layers = sources.into_iter();
        let mut policy = Policy::load(layers.next().unwrap_or(PolicySource::Default))?;
        for more in layers {
            policy = policy.narrowed_by(Policy::load(more)?);
        }
        Ok(policy)
    }
}

/// Expand a leading `~/` with `$HOME`.
pub fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Config> {
        parse(text, Path::new("/etc/x/config.yaml"))
    }

    #[test]
    fn reads_hosts_and_default() {
        let c = p("default_host: lab\nhosts:\n  lab:\n    address: 127.0.0.1\n    port: 2222\n    user: zen-agent\n").unwrap();
        assert_eq!(c.default_host.as_deref(), Some("lab"));
        assert_eq!(c.hosts["lab"].port, Some(2222));
    }

    #[test]
    fn errors_name_file_line_and_expectation() {
        let e = p("hosts:\n  lab:\n    address: x\n    port: many\n").unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 2);
        assert!(msg.starts_with("config /etc/x/config.yaml:4:"), "{msg}");
        assert!(msg.contains("port"), "{msg}");
        let e = p("hosts:\n  lab:\n    adress: x\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(":3:") && e.contains("unknown field `adress`"),
            "{e}"
        );
        let e = p("default_host: nope\nhosts: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("default_host 'nope'"), "{e}");
        let e = p("hosts: [1, 2\n").unwrap_err().to_string();
        assert!(e.starts_with("config /etc/x/config.yaml:"), "{e}");
    }

    #[test]
    fn empty_is_default() {
        assert!(p("").unwrap().hosts.is_empty());
    }

    #[test]
    fn policy_source_precedence() {
        let mut c = p("policy: {read_only: true}\npolicy_file: gw.json\n").unwrap();
        c.path = Some(PathBuf::from("/etc/x/config.yaml"));
        // The config's own conflict is an error whatever `--policy` says: it only narrows.
        assert_eq!(
            c.policy_sources(Some("/p.yaml")).unwrap_err().exit_code(),
            2
        );
        let e = c.policy_source().unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "config /etc/x/config.yaml: both `policy:` and `policy_file:` are set; keep one"
        );
        c.policy = PolicyConfig::default();
        assert_eq!(
            c.policy_source().unwrap(),
            PolicySource::File(PathBuf::from("/etc/x/gw.json"))
        );
        c.policy_file = None;
        assert_eq!(
            c.policy_source().unwrap(),
            PolicySource::Section {
                policy: PolicyConfig::default(),
                source: "/etc/x/config.yaml".into()
            }
        );
        assert_eq!(
            Config::default().policy_source().unwrap(),
            PolicySource::Default
        );
        assert_eq!(
            c.policy_sources(Some("/p.yaml")).unwrap(),
            vec![
                PolicySource::Section {
                    policy: PolicyConfig::default(),
                    source: "/etc/x/config.yaml".into()
                },
                PolicySource::File(PathBuf::from("/p.yaml"))
            ]
        );
    }

    #[test]
    fn a_policy_flag_narrows_a_stated_policy_and_stands_alone_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.yaml");
        std::fs::write(&f, "allow_privileged_ct_exec: true\n").unwrap();
        let flag = f.to_str();
        // No config, or a config without a policy: the file is the policy.
        let p = Policy::effective(flag, &Config::default()).unwrap();
        assert!(p.allow_privileged_ct_exec());
        let mut c = p_cfg("default_host: x\nhosts: {x: {address: h}}\n");
        assert!(
            Policy::effective(flag, &c)
                .unwrap()
                .allow_privileged_ct_exec()
        );
        // A config that states a policy is narrowed, never widened.
        c = p_cfg("policy: {read_only: true}\n");
        let p = Policy::effective(flag, &c).unwrap();
        assert!(p.read_only() && !p.allow_privileged_ct_exec());
    }

    fn p_cfg(text: &str) -> Config {
        let mut c = parse(text, Path::new("/etc/x/config.yaml")).unwrap();
        c.path = Some(PathBuf::from("/etc/x/config.yaml"));
        c
    }
}
