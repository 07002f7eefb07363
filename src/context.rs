//! What every front end needs before it runs an op: the config file, the effective policy,
//! the SSH target, an async runtime and an [`Engine`]. The CLI, the MCP server (and the batch
//! and gate to come) build a [`Context`] from their own typed settings; none of this knows
//! clap or rmcp.
//!
//! Where to connect and how: the explicit connection arguments (flags, and `PXAGENT_*`,
//! which the CLI folds into them) beat the config file, which beats `~/.ssh/config`, which
//! beats the defaults (design §4). A host may be a config host name, `user@host[:port]`, or
//! an `~/.ssh/config` alias, so that `pxagent -H pve` works like `ssh pve`. pxagent never logs
//! in as root, whatever a config says: the whole point is an unprivileged account.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{self, Config};
use crate::engine::{Engine, OnceConnector};
use crate::error::{Error, Result};
use crate::policy::Policy;
use crate::ssh::config as ssh_config;
use crate::ssh::{self, HostKeyPolicy, Target};

/// The longest duration pxagent takes anywhere (timeouts, TTLs, windows): 24 hours.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// How to reach the host, as the front end was told (nothing resolved yet).
#[derive(Debug, Clone, Default)]
pub struct ConnectArgs {
    /// `-H`: a config host name, `user@host[:port]`, or an `~/.ssh/config` alias.
    pub host: Option<String>,
    /// `-p`.
    pub port: Option<u16>,
    /// `-u`.
    pub user: Option<String>,
    /// `-i`.
    pub identity: Option<PathBuf>,
    /// `--known-hosts`.
    pub known_hosts: Option<PathBuf>,
    /// `--accept-new`.
    pub accept_new: bool,
    /// `--timeout`: give up on one remote command after this long.
    pub timeout: Option<Duration>,
    /// `--persist`: keep the connection this long after the last call (else the config's
    /// `persist:`).
    pub persist: Option<Duration>,
}

/// Parse a whole number of seconds given for `what` (`--timeout`): more than zero, at most
/// [`MAX_DURATION`]. One parser, one message, for every front end.
pub fn parse_seconds(what: &str, text: &str) -> Result<Duration> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0 && *n <= MAX_DURATION.as_secs())
        .map(Duration::from_secs)
        .ok_or_else(|| {
            Error::usage(format!(
                "invalid {what} '{}': expected whole seconds from 1 to {}",
                crate::catalog::kind::printable(text),
                MAX_DURATION.as_secs()
            ))
        })
}

/// The longest `--persist`: a holder of a connection lasts at most a day after its last call.
pub const MAX_PERSIST: Duration = MAX_DURATION;

/// Parse `--persist` / `persist:`: a duration such as `30s`, `10m`, `1h` (or whole seconds),
/// more than zero and at most [`MAX_PERSIST`].
pub fn parse_persist(text: &str) -> Result<Duration> {
    crate::approval::time::parse_duration(text)
        .filter(|d| *d <= MAX_PERSIST)
        .ok_or_else(|| {
            Error::usage(format!(
                "invalid persist duration '{}': expected e.g. 30s, 10m or 1h (at most 24h)",
                crate::catalog::kind::printable(text)
            ))
        })
}

/// Parse a TCP port (1–65535).
pub fn parse_port(text: &str) -> Result<u16> {
    text.trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            Error::usage(format!(
                "invalid port '{}'",
                crate::catalog::kind::printable(text)
            ))
        })
}

/// The config, the effective policy and how to reach the host: one per front-end run.
#[derive(Debug)]
pub struct Context {
    /// The config file (empty when there is none).
    pub config: Config,
    /// The effective local policy.
    pub policy: Policy,
    /// How to reach the host.
    pub connect: ConnectArgs,
}

impl Context {
    /// Load the config (`--config`, else the default path) and the effective policy
    /// (`--policy`, else the config's).
    pub fn load(
        config: Option<&Path>,
        policy: Option<&str>,
        connect: ConnectArgs,
    ) -> Result<Context> {
        let config = config::load(config)?;
        let policy = Policy::effective(policy, &config)?;
        Ok(Context {
            config,
            policy,
            connect,
        })
    }

    /// The SSH target for this run.
    pub fn target(&self) -> Result<Target> {
        target_of(&self.connect, &self.config)
    }

    /// The SSH target of one host of a fleet (`host` as `--hosts` named it; the other
    /// connection flags apply to every host).
    pub fn target_for(&self, host: &str) -> Result<Target> {
        let mut c = self.connect.clone();
        c.host = Some(host.to_string());
        target_of(&c, &self.config)
    }

    /// How long a persistent connection is kept after the last call: `--persist`, else the
    /// config's `persist:`; `None`: each run connects anew.
    pub fn persist(&self) -> Option<Duration> {
        self.connect.persist.or_else(|| self.config.persist())
    }

    /// A connector for `target` that goes through a persistent connection when asked to.
    pub fn connector(&self, target: Target) -> OnceConnector {
        OnceConnector::new(target).persist(self.persist())
    }

    /// An engine over one connection to `target`, opened on first use. `interactive`: a human
    /// at a terminal may be asked for a confirmation phrase.
    pub fn engine<'a>(
        &'a self,
        connector: &'a OnceConnector,
        interactive: bool,
    ) -> Engine<'a, OnceConnector> {
        Engine {
            policy: &self.policy,
            connector,
            interactive,
        }
    }
}

/// A current-thread runtime: one invocation is one connection; concurrency comes from
/// channels, not threads.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the async runtime: {e}")))
}

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

/// Build the SSH target from the connection arguments and the config.
pub fn target_of(c: &ConnectArgs, cfg: &Config) -> Result<Target> {
    let host_spec = c
        .host
        .clone()
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
    let flag_user = c.user.clone();
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
    let port = match c.port {
        Some(p) => p,
        None => spec_port
            .or_else(|| entry.as_ref().and_then(|e| e.port))
            .or(ssh_cfg.port)
            .unwrap_or(22),
    };
    let hostname = ssh_cfg.hostname.clone().unwrap_or(alias);
    let mut t = Target::new(hostname, port, user);
    let identity = c
        .identity
        .clone()
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
    t.known_hosts = c
        .known_hosts
        .clone()
        .or_else(|| entry.as_ref().and_then(|e| e.known_hosts.clone()))
        .or(ssh_cfg.user_known_hosts_file.clone())
        .map(|p| config::expand_home(&p))
        .unwrap_or_else(ssh::default_known_hosts);
    if c.accept_new {
        t.host_key_policy = HostKeyPolicy::AcceptNew;
    }
    t.command_timeout = c.timeout;
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
