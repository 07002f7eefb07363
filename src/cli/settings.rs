//! Where to connect and how: flags (and `PXAGENT_*`, which clap folds into the flags) beat the
//! config file, which beats `~/.ssh/config`, which beats the defaults (design §4).
//!
//! `-H` may be a config host name, `user@host[:port]`, or an `~/.ssh/config` alias, so that
//! `pxagent -H pve` works like `ssh pve`. pxagent never logs in as root, whatever a config
//! says: the whole point is an unprivileged account.

use std::path::PathBuf;
use std::time::Duration;

use clap::ArgMatches;

use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::ssh::config as ssh_config;
use crate::ssh::{self, HostKeyPolicy, Target};

/// The default agent account.
pub const DEFAULT_USER: &str = "zen-agent";

/// Split `user@host:port` / `host:port` / `[v6]:port` / `host`.
pub fn split_host(spec: &str) -> Result<(Option<String>, String, Option<u16>)> {
    let bad = || {
        Error::usage(format!(
            "invalid host '{}': expected NAME, HOST, USER@HOST or USER@HOST:PORT",
            crate::catalog::kind::printable(spec)
        ))
    };
    let (user, rest) = match spec.rsplit_once('@') {
        Some((u, r)) => (Some(u.to_string()), r),
        None => (None, spec),
    };
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        let (h, after) = inner.split_once(']').ok_or_else(bad)?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if after.is_empty() => None,
            None => return Err(bad()),
        };
        (h.to_string(), port)
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.parse().map_err(|_| bad())?)),
            None => (rest.to_string(), None),
        }
    };
    let ok = regex::Regex::new(r"^[A-Za-z0-9._:%-]{1,253}$").expect("static regex");
    if !ok.is_match(&host) || host.starts_with('-') {
        return Err(bad());
    }
    Ok((user, host, port))
}

/// Build the SSH target for this invocation.
pub fn target(m: &ArgMatches, cfg: &Config) -> Result<Target> {
    let flag = |k: &str| m.get_one::<String>(k).cloned();
    let host_spec = flag("host")
        .or_else(|| cfg.default_host.clone())
        .ok_or_else(|| {
            Error::usage(
                "no host: pass -H HOST (or set PXAGENT_HOST, or default_host in the config)",
            )
        })?;
    let entry = cfg.hosts.get(&host_spec).cloned();
    let (spec_user, alias, spec_port) = match &entry {
        Some(e) => split_host(&e.address)?,
        None => split_host(&host_spec)?,
    };
    let flag_user = flag("user");
    let pre_user = flag_user
        .clone()
        .or(spec_user.clone())
        .or_else(|| entry.as_ref().and_then(|e| e.user.clone()));
    let ssh_cfg = match ssh_config::Context::from_env(pre_user.as_deref().unwrap_or(DEFAULT_USER)) {
        Some(ctx) => ssh_config::lookup(&alias, &ctx)?,
        None => ssh_config::HostConfig::default(),
    };
    let user = pre_user
        .or(ssh_cfg.user.clone())
        .unwrap_or_else(|| DEFAULT_USER.to_string());
    if user == "root" {
        return Err(Error::usage(
            "pxagent never logs in as root: use the unprivileged agent account (default zen-agent) whose sudoers pxagent rendered",
        ));
    }
    let port = match flag("port") {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| Error::usage(format!("invalid port '{p}'")))?,
        None => spec_port
            .or_else(|| entry.as_ref().and_then(|e| e.port))
            .or(ssh_cfg.port)
            .unwrap_or(22),
    };
    let hostname = ssh_cfg.hostname.clone().unwrap_or(alias);
    let mut t = Target::new(hostname, port, user);
    let identity = flag("identity")
        .map(PathBuf::from)
        .or_else(|| entry.as_ref().and_then(|e| e.identity.clone()))
        .map(|p| config::expand_home(&p));
    if let Some(id) = identity {
        t.identities = vec![id];
    } else if !ssh_cfg.identity_files.is_empty() {
        t.identities = ssh_cfg.identity_files.clone();
    }
    if let Some(only) = ssh_cfg.identities_only {
        t.identities_only = only;
    }
    t.known_hosts = flag("known_hosts")
        .map(PathBuf::from)
        .or_else(|| entry.as_ref().and_then(|e| e.known_hosts.clone()))
        .or(ssh_cfg.user_known_hosts_file.clone())
        .map(|p| config::expand_home(&p))
        .unwrap_or_else(ssh::default_known_hosts);
    if m.get_flag("accept_new") {
        t.host_key_policy = HostKeyPolicy::AcceptNew;
    }
    if let Some(secs) = flag("timeout") {
        let n: u64 = secs.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::usage(format!(
                "invalid --timeout '{secs}': expected whole seconds > 0"
            ))
        })?;
        t.command_timeout = Some(Duration::from_secs(n));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_specs() {
        assert_eq!(split_host("pve").unwrap(), (None, "pve".into(), None));
        assert_eq!(
            split_host("zen@10.0.0.1:2222").unwrap(),
            (Some("zen".into()), "10.0.0.1".into(), Some(2222))
        );
        assert_eq!(
            split_host("[::1]:2222").unwrap(),
            (None, "::1".into(), Some(2222))
        );
        for bad in ["-oProxyCommand=x", "a b", "h:notaport", "h;id", ""] {
            assert!(split_host(bad).is_err(), "{bad}");
        }
    }
}
