//! What every front end needs before it runs an op: the config file, the effective policy,
//! the SSH target, an async runtime and an [`Engine`]. The CLI, the MCP server (and the batch
//! and gate to come) build a [`Context`] from their own typed settings; none of this knows
//! clap or rmcp.
//!
//! Where to connect and how: the command line (flags, and the parts of `-H user@host:port`)
//! beats `PXAGENT_*`, which beats the config file, which beats `~/.ssh/config`, which beats
//! the defaults ([`target_of`]). A host may be a config host name, `user@host[:port]`, or
//! an `~/.ssh/config` alias, so that `pxagent -H pve` works like `ssh pve`. pxagent never logs
//! in as root, whatever a config says: the whole point is an unprivileged account.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::base::error::{Error, Result};
use crate::config::{self, Config};
use crate::engine::{Engine, OnceConnector};
use crate::policy::Policy;
use crate::ssh::config as ssh_config;
use crate::ssh::{self, HostKeyPolicy, Target};

/// The longest duration pxagent takes anywhere (timeouts, TTLs, windows): 24 hours.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// How to reach the host, as the front end was told (nothing resolved yet): the values typed
/// on the command line, and apart from them those that came from `PXAGENT_*` variables, which
/// rank below the command line (see [`target_of`]).
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
    /// `-J`: jump hosts, `[user@]host[:port]` separated by commas, or `none`.
    pub jump: Option<String>,
    /// The connection values `PXAGENT_*` variables gave (below the command line, above the
    /// config file).
    pub env: EnvArgs,
}

/// `PXAGENT_HOST`, `_PORT`, `_USER`, `_IDENTITY`, `_KNOWN_HOSTS`, as given.
#[derive(Debug, Clone, Default)]
pub struct EnvArgs {
    /// `PXAGENT_HOST`.
    pub host: Option<String>,
    /// `PXAGENT_PORT`.
    pub port: Option<u16>,
    /// `PXAGENT_USER`.
    pub user: Option<String>,
    /// `PXAGENT_IDENTITY`.
    pub identity: Option<PathBuf>,
    /// `PXAGENT_KNOWN_HOSTS`.
    pub known_hosts: Option<PathBuf>,
}

impl ConnectArgs {
    /// The agent account named on the command line, else by `PXAGENT_USER` (for commands
    /// that name the account without connecting: `sudoers render`, `setup`).
    pub fn named_user(&self) -> Option<&str> {
        self.user.as_deref().or(self.env.user.as_deref())
    }
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
                crate::base::text::printable(text),
                MAX_DURATION.as_secs()
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
                crate::base::text::printable(text)
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
            taint: None,
        }
    }
}

/// Build the SSH target from the connection arguments and the config. Precedence,
/// for the user, the port, the key and the known_hosts file alike: the command line (`-u`,
/// `-p`, `-i`, `--known-hosts`, and the parts of a `-H user@host:port` typed there), then
/// `PXAGENT_*` (with the parts of `PXAGENT_HOST`), then the config file (a named host's
/// address and fields), then `~/.ssh/config`, then the defaults. Two different values on the
/// same layer (`-u x -H u@h`) are a usage error rather than a guess.
pub fn target_of(c: &ConnectArgs, cfg: &Config) -> Result<Target> {
    target_with(c, cfg, ssh_config::SshConfigEnv::from_env)
}

/// Which layer a connection value came from, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    CommandLine,
    Env,
    Config,
}

/// One value from two places of the same layer: equal or one missing is fine.
fn same_layer<T: PartialEq + std::fmt::Display>(
    what: &str,
    layer: Layer,
    a: (Option<T>, &str),
    b: (Option<T>, &str),
) -> Result<Option<T>> {
    match (a.0, b.0) {
        (Some(x), Some(y)) if x != y => Err(Error::usage(format!(
            "the {what} is given twice {}: {} {} and {} {}; give it once",
            match layer {
                Layer::CommandLine => "on the command line",
                Layer::Env => "in the environment",
                Layer::Config => "in the config",
            },
            a.1,
            crate::base::text::printable(&x.to_string()),
            b.1,
            crate::base::text::printable(&y.to_string()),
        ))),
        (x, y) => Ok(x.or(y)),
    }
}

/// [`target_of`] with the `~/.ssh/config` context injected (tests use their own file).
fn target_with(
    c: &ConnectArgs,
    cfg: &Config,
    ssh_ctx: impl FnOnce(&str) -> Option<ssh_config::SshConfigEnv>,
) -> Result<Target> {
    let (host_spec, spec_layer) = match (&c.host, &c.env.host, &cfg.default_host) {
        (Some(h), _, _) => (h.clone(), Layer::CommandLine),
        (None, Some(h), _) => (h.clone(), Layer::Env),
        (None, None, Some(h)) => (h.clone(), Layer::Config),
        (None, None, None) => {
            return Err(Error::usage(
                "no host: pass -H HOST (or set PXAGENT_HOST, or default_host in the config)",
            ));
        }
    };
    let entry = cfg.hosts.get(&host_spec).cloned();
    // The parts of the spec belong to the layer that gave it; a named host's address is the
    // config's.
    let (spec_user, alias, spec_port) = match &entry {
        Some(e) => crate::ssh::split_host(&e.address)?,
        None => crate::ssh::split_host(&host_spec)?,
    };
    let spec_layer = if entry.is_some() {
        Layer::Config
    } else {
        spec_layer
    };
    let part = |l: Layer, v: &Option<String>| if spec_layer == l { v.clone() } else { None };
    let port_part = |l: Layer| if spec_layer == l { spec_port } else { None };
    let host_flag = "-H";
    let cli_user = same_layer(
        "user",
        Layer::CommandLine,
        (c.user.clone(), "-u"),
        (part(Layer::CommandLine, &spec_user), host_flag),
    )?;
    let env_user = same_layer(
        "user",
        Layer::Env,
        (c.env.user.clone(), "PXAGENT_USER"),
        (part(Layer::Env, &spec_user), "PXAGENT_HOST"),
    )?;
    // A named host: its address's user first, then its `user` field.
    let cfg_user =
        part(Layer::Config, &spec_user).or_else(|| entry.as_ref().and_then(|e| e.user.clone()));
    let pre_user = cli_user.or(env_user).or(cfg_user);
    let ssh_cfg = match ssh_ctx(pre_user.as_deref().unwrap_or(crate::ssh::DEFAULT_USER)) {
        Some(ctx) => ssh_config::lookup(&alias, &ctx)?,
        None => ssh_config::HostConfig::default(),
    };
    let user = pre_user
        .or(ssh_cfg.user.clone())
        .unwrap_or_else(|| crate::ssh::DEFAULT_USER.to_string());
    if user == "root" {
        return Err(Error::usage(
            "pxagent never logs in as root: use the unprivileged agent account (default zen-agent) whose sudoers pxagent rendered",
        ));
    }
    let cli_port = same_layer(
        "port",
        Layer::CommandLine,
        (c.port, "-p"),
        (port_part(Layer::CommandLine), host_flag),
    )?;
    let env_port = same_layer(
        "port",
        Layer::Env,
        (c.env.port, "PXAGENT_PORT"),
        (port_part(Layer::Env), "PXAGENT_HOST"),
    )?;
    let port = cli_port
        .or(env_port)
        .or(port_part(Layer::Config))
        .or_else(|| entry.as_ref().and_then(|e| e.port))
        .or(ssh_cfg.port)
        .unwrap_or(22);
    let hostname = ssh_cfg.hostname.clone().unwrap_or(alias);
    let mut t = Target::new(hostname, port, user);
    let identity = c
        .identity
        .clone()
        .or_else(|| c.env.identity.clone())
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
        .or_else(|| c.env.known_hosts.clone())
        .or_else(|| entry.as_ref().and_then(|e| e.known_hosts.clone()))
        .or(ssh_cfg.user_known_hosts_file.clone())
        .map(|p| config::expand_home(&p))
        .unwrap_or_else(ssh::default_known_hosts);
    if c.accept_new {
        t.host_key_policy = HostKeyPolicy::AcceptNew;
    }
    t.command_timeout = c.timeout;
    let jump = c
        .jump
        .clone()
        .or_else(|| entry.as_ref().and_then(|e| e.jump.clone()));
    t.jumps = jumps_of(jump.as_deref(), &ssh_cfg, &t)?;
    Ok(t)
}

/// Jump hosts in one chain at most (OpenSSH has no limit; a longer chain is a mistake).
const MAX_JUMPS: usize = 8;

/// The jump hosts on the way to `target`: `explicit` (`-J`, `PXAGENT_JUMP`, the config host's
/// `jump:`; `none` for a direct connection) beats the target's `~/.ssh/config` `ProxyJump`.
/// A `ProxyCommand` that would apply is refused: pxagent never runs a local command to reach
/// a host. Each jump host is looked up in `~/.ssh/config` like `ssh` would (`HostName`,
/// `Port`, `User`, `IdentityFile`, `UserKnownHostsFile`; the first hop's own `ProxyJump` is
/// followed, as OpenSSH does), its user defaults to the local one, and it is checked exactly
/// like the target: host key in its known_hosts (by default the target's), public keys only
/// (its own `IdentityFile`s, else the target's keys), never root.
fn jumps_of(
    explicit: Option<&str>,
    ssh_cfg: &ssh_config::HostConfig,
    target: &Target,
) -> Result<Vec<Target>> {
    let specs: Vec<String> = match explicit {
        Some(s) if s.trim().eq_ignore_ascii_case("none") => return Ok(Vec::new()),
        Some(s) => s.split(',').map(|h| h.trim().to_string()).collect(),
        None => match &ssh_cfg.proxy {
            None | Some(ssh_config::Proxy::Direct) => return Ok(Vec::new()),
            Some(ssh_config::Proxy::Jump(hops)) => hops.clone(),
            Some(ssh_config::Proxy::Command { origin }) => {
                return Err(proxy_command_refused(origin, &target.host));
            }
        },
    };
    let ctx = ssh_config::SshConfigEnv::from_env(&local_user());
    let hops = resolve_chain(&specs, ctx.as_ref(), target, 0)?;
    if hops.len() > MAX_JUMPS {
        return Err(Error::usage(format!(
            "too many jump hosts on the way to {}: at most {MAX_JUMPS}",
            target.host
        )));
    }
    Ok(hops)
}

/// Resolves a chain of jump specs. The first hop's own `ProxyJump` comes before it (OpenSSH
/// reaches the first hop with that host's configuration); later hops' are not consulted, as
/// in OpenSSH. `depth` stops loops.
fn resolve_chain(
    specs: &[String],
    ctx: Option<&ssh_config::SshConfigEnv>,
    target: &Target,
    depth: usize,
) -> Result<Vec<Target>> {
    if depth > MAX_JUMPS {
        return Err(Error::usage(format!(
            "the jump hosts' ProxyJump settings nest more than {MAX_JUMPS} deep (a loop?)"
        )));
    }
    let mut hops = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (hop, proxy) = jump_target(spec, ctx, target)?;
        if i == 0 {
            match proxy {
                Some(ssh_config::Proxy::Jump(before)) => {
                    hops.extend(resolve_chain(&before, ctx, target, depth + 1)?);
                }
                Some(ssh_config::Proxy::Command { origin }) => {
                    return Err(proxy_command_refused(&origin, &hop.host));
                }
                Some(ssh_config::Proxy::Direct) | None => {}
            }
        }
        hops.push(hop);
    }
    Ok(hops)
}

fn proxy_command_refused(origin: &str, host: &str) -> Error {
    Error::usage(format!(
        "{origin}: `ProxyCommand` for {host} is not supported: pxagent never runs a local command \
         to reach a host. Use `ProxyJump` (or `-J user@jumphost`) instead, or `ProxyCommand none` \
         / `-J none` to connect directly"
    ))
}

/// The local user name (`$USER`, else `$LOGNAME`), the default user on jump hosts.
fn local_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default()
}

/// One jump host from its spec (`[user@]host[:port]` or `ssh://…`), and its own proxy setting.
fn jump_target(
    spec: &str,
    ctx: Option<&ssh_config::SshConfigEnv>,
    target: &Target,
) -> Result<(Target, Option<ssh_config::Proxy>)> {
    let bare = spec.strip_prefix("ssh://").unwrap_or(spec);
    let bare = bare.strip_suffix('/').unwrap_or(bare);
    let (spec_user, alias, spec_port) = crate::ssh::split_host(bare).map_err(|_| {
        Error::usage(format!(
            "invalid jump host '{}': expected [USER@]HOST[:PORT]",
            crate::base::text::printable(spec)
        ))
    })?;
    let cfg = match ctx {
        Some(ctx) => ssh_config::lookup(&alias, ctx)?,
        None => ssh_config::HostConfig::default(),
    };
    let user = spec_user
        .or(cfg.user.clone())
        .filter(|u| !u.is_empty())
        .or_else(|| Some(local_user()).filter(|u| !u.is_empty()))
        .ok_or_else(|| {
            Error::usage(format!(
                "no user for jump host {alias}: write it as USER@{alias}, or set `User` for it in ~/.ssh/config"
            ))
        })?;
    if user == "root" {
        return Err(Error::usage(format!(
            "pxagent never logs in as root, also not on a jump host: use an unprivileged account on {alias} (USER@{alias})"
        )));
    }
    let port = spec_port.or(cfg.port).unwrap_or(22);
    let mut hop = Target::new(cfg.hostname.clone().unwrap_or(alias), port, user);
    hop.identities = if cfg.identity_files.is_empty() {
        target.identities.clone()
    } else {
        cfg.identity_files.clone()
    };
    hop.identities_only = cfg.identities_only.unwrap_or(target.identities_only);
    hop.use_agent = target.use_agent;
    hop.agent_socket = target.agent_socket.clone();
    hop.known_hosts = cfg
        .user_known_hosts_file
        .clone()
        .unwrap_or_else(|| target.known_hosts.clone());
    hop.host_key_policy = target.host_key_policy;
    hop.connect_timeout = target.connect_timeout;
    hop.keepalive = target.keepalive;
    Ok((hop, cfg.proxy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_bounded_to_a_day_and_never_overflow() {
        assert_eq!(
            parse_seconds("--timeout", "86400").unwrap().as_secs(),
            86400
        );
        assert_eq!(parse_seconds("--timeout", " 30 ").unwrap().as_secs(), 30);
        for bad in [
            "0",
            "86401",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "1e3",
            "",
        ] {
            let e = parse_seconds("--timeout", bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        assert_eq!(
            crate::persist::parse_persist("24h").unwrap().as_secs(),
            86400
        );
        for bad in ["25h", "86401", "999999999h", "18446744073709551615s", "0s"] {
            assert_eq!(
                crate::persist::parse_persist(bad).unwrap_err().exit_code(),
                2,
                "{bad:?}"
            );
        }
    }

    /// Resolve with an `~/.ssh/config` of our own: host `h` has User `sshuser`, Port 2200.
    fn resolve(c: &ConnectArgs, cfg: &Config) -> Result<Target> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(
            &path,
            "Host h\n  User sshuser\n  Port 2200\n  UserKnownHostsFile /ssh/kh\n",
        )
        .unwrap();
        target_with(c, cfg, |user| {
            Some(ssh_config::SshConfigEnv {
                config_path: path.clone(),
                home: dir.path().to_path_buf(),
                local_user: "me".into(),
                default_remote_user: user.to_string(),
            })
        })
    }

    /// A config naming host `named` (address `h`) with its own user, port and known_hosts.
    fn config(default_host: Option<&str>) -> Config {
        let text =
            "hosts:\n  named: {address: h, port: 2300, user: cfguser, known_hosts: /cfg/kh}\n";
        let mut cfg: Config = yaml_serde::from_str(text).unwrap();
        cfg.default_host = default_host.map(String::from);
        cfg
    }

    fn got(t: &Target) -> (String, u16) {
        (t.user.clone(), t.port)
    }

    #[test]
    fn the_command_line_beats_the_environment_including_the_parts_of_dash_h() {
        // PXAGENT_PORT=1 PXAGENT_USER=x pxagent -H u@h:2222 … connects as u
        // to port 2222.
        let c = ConnectArgs {
            host: Some("u@h:2222".into()),
            env: EnvArgs {
                port: Some(1),
                user: Some("x".into()),
                ..EnvArgs::default()
            },
            ..ConnectArgs::default()
        };
        assert_eq!(
            got(&resolve(&c, &Config::default()).unwrap()),
            ("u".into(), 2222)
        );
        // -u and -p typed beat the environment too.
        let c = ConnectArgs {
            host: Some("h".into()),
            user: Some("flag".into()),
            port: Some(2201),
            env: EnvArgs {
                host: Some("other@elsewhere:9".into()),
                port: Some(1),
                user: Some("x".into()),
                ..EnvArgs::default()
            },
            ..ConnectArgs::default()
        };
        assert_eq!(
            got(&resolve(&c, &Config::default()).unwrap()),
            ("flag".into(), 2201)
        );
    }

    #[test]
    fn every_layer_beats_the_ones_below_it() {
        let none = Config::default();
        let named = config(None);
        let cli = |host: &str| ConnectArgs {
            host: Some(host.into()),
            ..ConnectArgs::default()
        };
        let env = |host: Option<&str>, user: Option<&str>, port: Option<u16>| ConnectArgs {
            env: EnvArgs {
                host: host.map(String::from),
                user: user.map(String::from),
                port,
                known_hosts: Some("/env/kh".into()),
                ..EnvArgs::default()
            },
            ..ConnectArgs::default()
        };
        // command line > config: -H u@named-host's parts over the named host's fields is not
        // a thing (a name is looked up as a whole), so -u/-p over a named host.
        let c = ConnectArgs {
            host: Some("named".into()),
            user: Some("flag".into()),
            port: Some(2201),
            known_hosts: Some("/cli/kh".into()),
            ..ConnectArgs::default()
        };
        let t = resolve(&c, &named).unwrap();
        assert_eq!(got(&t), ("flag".into(), 2201));
        assert_eq!(t.known_hosts, PathBuf::from("/cli/kh"));
        // command line > ~/.ssh/config and defaults.
        assert_eq!(
            got(&resolve(&cli("u@h:2222"), &none).unwrap()),
            ("u".into(), 2222)
        );
        assert_eq!(
            got(&resolve(&cli("u@nowhere:2222"), &none).unwrap()),
            ("u".into(), 2222)
        );
        // environment > config.
        let mut c = env(None, Some("envuser"), Some(2400));
        c.host = Some("named".into());
        let t = resolve(&c, &named).unwrap();
        assert_eq!(got(&t), ("envuser".into(), 2400));
        assert_eq!(t.known_hosts, PathBuf::from("/env/kh"));
        // environment (with the parts of PXAGENT_HOST) > ~/.ssh/config and defaults.
        let t = resolve(&env(Some("e@h:2500"), None, None), &none).unwrap();
        assert_eq!(got(&t), ("e".into(), 2500));
        assert_eq!(t.known_hosts, PathBuf::from("/env/kh"));
        let t = resolve(&env(Some("nowhere"), Some("e"), Some(2501)), &none).unwrap();
        assert_eq!(got(&t), ("e".into(), 2501));
        // config > ~/.ssh/config (host `named` is `h` there) and defaults.
        let t = resolve(&cli("named"), &named).unwrap();
        assert_eq!(got(&t), ("cfguser".into(), 2300));
        assert_eq!(t.known_hosts, PathBuf::from("/cfg/kh"));
        let t = resolve(&ConnectArgs::default(), &config(Some("named"))).unwrap();
        assert_eq!(got(&t), ("cfguser".into(), 2300));
        let t = resolve(&ConnectArgs::default(), &config(Some("d@h:2600"))).unwrap();
        assert_eq!(got(&t), ("d".into(), 2600));
        // ~/.ssh/config > defaults.
        let t = resolve(&cli("h"), &none).unwrap();
        assert_eq!(got(&t), ("sshuser".into(), 2200));
        assert_eq!(t.known_hosts, PathBuf::from("/ssh/kh"));
        // defaults.
        let t = resolve(&cli("nowhere"), &none).unwrap();
        assert_eq!(got(&t), (crate::ssh::DEFAULT_USER.into(), 22));
        // The host itself: command line > environment > default_host.
        let mut c = env(Some("envhost"), None, None);
        c.host = Some("clihost".into());
        assert_eq!(
            resolve(&c, &config(Some("cfghost"))).unwrap().host,
            "clihost"
        );
        let c = env(Some("envhost"), None, None);
        assert_eq!(
            resolve(&c, &config(Some("cfghost"))).unwrap().host,
            "envhost"
        );
    }

    #[test]
    fn two_values_on_one_layer_are_an_error_not_a_guess() {
        let none = Config::default();
        let c = ConnectArgs {
            host: Some("u@h:2222".into()),
            user: Some("x".into()),
            ..ConnectArgs::default()
        };
        let e = resolve(&c, &none).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains("user is given twice on the command line"),
            "{e}"
        );
        let c = ConnectArgs {
            host: Some("u@h:2222".into()),
            port: Some(2223),
            ..ConnectArgs::default()
        };
        assert!(resolve(&c, &none).unwrap_err().to_string().contains("port"));
        let c = ConnectArgs {
            env: EnvArgs {
                host: Some("u@h:2222".into()),
                port: Some(1),
                ..EnvArgs::default()
            },
            ..ConnectArgs::default()
        };
        assert!(
            resolve(&c, &none)
                .unwrap_err()
                .to_string()
                .contains("in the environment")
        );
        // The same value twice is no conflict.
        let c = ConnectArgs {
            host: Some("u@h:2222".into()),
            user: Some("u".into()),
            port: Some(2222),
            ..ConnectArgs::default()
        };
        assert_eq!(got(&resolve(&c, &none).unwrap()), ("u".into(), 2222));
    }

    #[test]
    fn host_specs() {
        assert_eq!(
            crate::ssh::split_host("pve").unwrap(),
            (None, "pve".into(), None)
        );
        assert_eq!(
            crate::ssh::split_host("zen@10.0.0.1:2222").unwrap(),
            (Some("zen".into()), "10.0.0.1".into(), Some(2222))
        );
        assert_eq!(
            crate::ssh::split_host("[::1]:2222").unwrap(),
            (None, "::1".into(), Some(2222))
        );
        for bad in ["-oProxyCommand=x", "a b", "h:notaport", "h;id", ""] {
            assert!(crate::ssh::split_host(bad).is_err(), "{bad}");
        }
    }
}
