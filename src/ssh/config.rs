//! A reader for the OpenSSH client configuration (`~/.ssh/config`), so that `pxagent -H pve`
//! reaches the same host, port, user and key as `ssh pve`.
//!
//! Only the keywords pxagent acts on are read: `Host`, `HostName`, `Port`, `User`,
//! `IdentityFile`, `IdentitiesOnly`, `UserKnownHostsFile`, `ProxyJump`, `ProxyCommand` and
//! `Include`. Every other keyword is ignored, as it would be by an older `ssh` with
//! `IgnoreUnknown *`. The semantics follow `ssh_config(5)`: for each keyword the first value
//! obtained wins, except `IdentityFile`, whose values accumulate in order; `ProxyJump` and
//! `ProxyCommand` share one slot, so whichever comes first wins (`none` fills it with nothing).
//!
//! Decisions:
//! - `Match` blocks are skipped entirely (treated as not matching). Evaluating them needs
//!   `exec`, `canonical`, `localnetwork`… which a non-interactive tool should not run; a host
//!   that depends on `Match` should be configured in pxagent's own config file instead.
//! - `Include` is supported, with `*`/`?` globs in the last path component; relative paths are
//!   resolved against the directory of the top-level file (`~/.ssh` for the default file, as
//!   OpenSSH does for user configs).
//! - Host names and patterns are compared case-insensitively (ssh lowercases the host name).
//! - `ProxyJump` is honoured (the session tunnels through each jump host, checking its host
//!   key and using public keys only, like the target's). `ProxyCommand` is recorded only so
//!   that it can be refused with a clear message: pxagent never runs a local command to reach
//!   a host.
//!
//! This module does not talk to the network and does not import russh.

use std::path::{Path, PathBuf};

use crate::base::error::{Error, Result};

/// What `~/.ssh/config` says about one host alias. `None` / empty means "not set": the caller
/// applies its own defaults (`-u` defaults to `zen-agent`, port 22, …).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostConfig {
    /// `HostName`: the real host to connect to (tokens expanded).
    pub hostname: Option<String>,
    /// `Port`.
    pub port: Option<u16>,
    /// `User`.
    pub user: Option<String>,
    /// Every matching `IdentityFile`, in file order, with `~` and `%` tokens expanded.
    pub identity_files: Vec<PathBuf>,
    /// The first file of the first matching `UserKnownHostsFile` (OpenSSH reads all listed
    /// files but records new keys in the first; pxagent uses only that one).
    pub user_known_hosts_file: Option<PathBuf>,
    /// `IdentitiesOnly`: use only the identity files, not every key the agent holds.
    pub identities_only: Option<bool>,
    /// How the host is reached, when the config says (`ProxyJump` or `ProxyCommand`).
    pub proxy: Option<Proxy>,
}

/// The one `ProxyJump`/`ProxyCommand` slot of ssh_config(5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxy {
    /// `ProxyJump host1,host2`: the jump hosts as written (`[user@]host[:port]`, or
    /// `ssh://[user@]host[:port]`), in order.
    Jump(Vec<String>),
    /// `ProxyCommand …`, with where it was set (`file:line`): refused, never run.
    Command {
        /// `file:line` of the directive.
        origin: String,
    },
    /// `ProxyJump none` / `ProxyCommand none`: connect directly.
    Direct,
}

/// Where the configuration is read from and the local facts needed to expand `~` and tokens.
/// Tests build one by hand so that the developer's own `~/.ssh/config` never leaks in.
#[derive(Debug, Clone)]
pub struct SshConfigEnv {
    /// The top-level file to read (normally `~/.ssh/config`). A missing file means "no config".
    pub config_path: PathBuf,
    /// The local home directory, for `~` and `%d`.
    pub home: PathBuf,
    /// The local user name, for `%u`.
    pub local_user: String,
    /// The remote user if the config has no `User` (pxagent's `-u` or its default), for `%r`.
    pub default_remote_user: String,
}

impl SshConfigEnv {
    /// The usual context: `$HOME/.ssh/config`, `$USER` (or `$LOGNAME`). `None` without `$HOME`.
    pub fn from_env(default_remote_user: &str) -> Option<SshConfigEnv> {
        let home = PathBuf::from(std::env::var_os("HOME")?);
        let local_user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .unwrap_or_default();
        Some(SshConfigEnv {
            config_path: home.join(".ssh").join("config"),
            home,
            local_user,
            default_remote_user: default_remote_user.to_string(),
        })
    }
}

/// Looks up `alias` (the host as the user typed it) in the configuration.
///
/// A missing top-level file gives an empty [`HostConfig`]. A syntax error (bad `Port`,
/// unbalanced quotes, unknown `%` token, `Include` nested too deeply) is an [`Error::Usage`]
/// naming the file and line.
pub fn lookup(alias: &str, ctx: &SshConfigEnv) -> Result<HostConfig> {
    let text = match std::fs::read_to_string(&ctx.config_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HostConfig::default()),
        Err(source) => {
            return Err(Error::ReadFile {
                path: ctx.config_path.clone(),
                source,
            });
        }
    };
    let base_dir = ctx
        .config_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| ctx.home.join(".ssh"));
    let mut raw = Raw::default();
    let mut reader = Reader {
        alias: alias.to_ascii_lowercase(),
        base_dir,
        raw: &mut raw,
    };
    reader.read_text(&text, &ctx.config_path, true, 0)?;
    raw.finish(alias, ctx)
}

/// Values as found, before token expansion (tokens need the final host name and user).
#[derive(Default)]
struct Raw {
    hostname: Option<Located>,
    port: Option<u16>,
    user: Option<String>,
    identity_files: Vec<Located>,
    user_known_hosts_file: Option<Located>,
    identities_only: Option<bool>,
    proxy: Option<Proxy>,
}

/// A value plus where it came from, for error messages during expansion.
struct Located {
    value: String,
    origin: String,
}

impl Raw {
    fn finish(self, alias: &str, ctx: &SshConfigEnv) -> Result<HostConfig> {
        // `%h` in HostName itself means the alias (ssh_config(5)); everywhere else it means the
        // final host name.
        let alias_tokens = Tokens {
            host: alias,
            alias,
            user: &ctx.default_remote_user,
            port: self.port.unwrap_or(22),
            ctx,
        };
        let hostname = match &self.hostname {
            Some(h) => Some(alias_tokens.expand(h)?),
            None => None,
        };
        let remote_user = self.user.as_deref().unwrap_or(&ctx.default_remote_user);
        let tokens = Tokens {
            host: hostname.as_deref().unwrap_or(alias),
            user: remote_user,
            ..alias_tokens
        };
        let path = |v: &Located| tokens.expand_path(v);
        Ok(HostConfig {
            port: self.port,
            user: self.user.clone(),
            identity_files: self
                .identity_files
                .iter()
                .map(path)
                .collect::<Result<_>>()?,
            user_known_hosts_file: self.user_known_hosts_file.as_ref().map(path).transpose()?,
            identities_only: self.identities_only,
            proxy: self.proxy.clone(),
            hostname,
        })
    }
}

/// The `%` tokens of ssh_config(5) that make sense for the keywords pxagent reads.
struct Tokens<'a> {
    host: &'a str,
    alias: &'a str,
    user: &'a str,
    port: u16,
    ctx: &'a SshConfigEnv,
}

impl Tokens<'_> {
    fn expand(&self, v: &Located) -> Result<String> {
        let mut out = String::with_capacity(v.value.len());
        let mut chars = v.value.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('%') => out.push('%'),
                Some('h') => out.push_str(self.host),
                Some('n') => out.push_str(self.alias),
                Some('r') => out.push_str(self.user),
                Some('u') => out.push_str(&self.ctx.local_user),
                Some('p') => out.push_str(&self.port.to_string()),
                Some('d') => out.push_str(&self.ctx.home.to_string_lossy()),
                other => {
                    return Err(Error::usage(format!(
                        "{}: unsupported token `%{}` in `{}` (pxagent expands %h %n %r %u %p %d %%)",
                        v.origin,
                        other.map(String::from).unwrap_or_default(),
                        v.value
                    )));
                }
            }
        }
        Ok(out)
    }

    fn expand_path(&self, v: &Located) -> Result<PathBuf> {
        let s = self.expand(v)?;
        Ok(expand_tilde(&s, &self.ctx.home))
    }
}

/// `~` and `~/x` expand to the local home; `~user/x` is left alone (rare, and needs NSS).
fn expand_tilde(s: &str, home: &Path) -> PathBuf {
    if s == "~" {
        home.to_path_buf()
    } else if let Some(rest) = s.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(s)
    }
}

/// OpenSSH stops at this Include depth, and so do we (it also stops include loops).
const MAX_INCLUDE_DEPTH: usize = 16;

struct Reader<'a> {
    alias: String,
    base_dir: PathBuf,
    raw: &'a mut Raw,
}

impl Reader<'_> {
    /// Reads one file's text. `active` is whether the lines before the first `Host`/`Match`
    /// apply (they do at top level, and in an included file iff the `Include` line did).
    fn read_text(&mut self, text: &str, file: &Path, active: bool, depth: usize) -> Result<()> {
        let mut active = active;
        // A file included from a block that does not apply never applies, whatever its own
        // `Host` lines say (OpenSSH's SSHCONF_NEVERMATCH).
        let never_match = !active && depth > 0;
        for (index, line) in text.lines().enumerate() {
            let origin = format!("{}:{}", file.display(), index + 1);
            let Some((keyword, args)) = split_line(line, &origin)? else {
                continue;
            };
            match keyword.as_str() {
                "host" => {
                    if args.is_empty() {
                        return Err(Error::usage(format!("{origin}: `Host` needs a pattern")));
                    }
                    active = !never_match && host_matches(&self.alias, &args);
                }
                "match" => {
                    // Match blocks are not evaluated: see the module documentation.
                    active = false;
                }
                "include" => {
                    if args.is_empty() {
                        return Err(Error::usage(format!("{origin}: `Include` needs a path")));
                    }
                    if depth + 1 > MAX_INCLUDE_DEPTH {
                        return Err(Error::usage(format!(
                            "{origin}: `Include` nested more than {MAX_INCLUDE_DEPTH} deep"
                        )));
                    }
                    for pattern in &args {
                        for path in self.include_paths(pattern)? {
                            let Ok(included) = std::fs::read_to_string(&path) else {
                                // OpenSSH silently skips includes it cannot read.
                                continue;
                            };
                            self.read_text(&included, &path, active, depth + 1)?;
                        }
                    }
                }
                "hostname" => {
                    let v = single(&args, "HostName", &origin)?;
                    if active && self.raw.hostname.is_none() {
                        self.raw.hostname = Some(Located {
                            value: v.to_string(),
                            origin,
                        });
                    }
                }
                "port" => {
                    // Values are checked even in blocks that do not apply, as OpenSSH does,
                    // so a typo is found before it matters.
                    let v = single(&args, "Port", &origin)?;
                    let port = v.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                        Error::usage(format!(
                            "{origin}: bad `Port` value `{v}`: expected 1-65535"
                        ))
                    })?;
                    if active {
                        self.raw.port.get_or_insert(port);
                    }
                }
                "user" => {
                    let v = single(&args, "User", &origin)?;
                    if active {
                        self.raw.user.get_or_insert_with(|| v.to_string());
                    }
                }
                "identityfile" => {
                    let v = single(&args, "IdentityFile", &origin)?;
                    if active {
                        self.raw.identity_files.push(Located {
                            value: v.to_string(),
                            origin,
                        });
                    }
                }
                "userknownhostsfile" => {
                    let v = args.first().ok_or_else(|| {
                        Error::usage(format!("{origin}: `UserKnownHostsFile` needs a path"))
                    })?;
                    if active && self.raw.user_known_hosts_file.is_none() {
                        self.raw.user_known_hosts_file = Some(Located {
                            value: v.to_string(),
                            origin,
                        });
                    }
                }
                "identitiesonly" => {
                    let v = single(&args, "IdentitiesOnly", &origin)?;
                    let b = match v.to_ascii_lowercase().as_str() {
                        "yes" | "true" => true,
                        "no" | "false" => false,
                        _ => {
                            return Err(Error::usage(format!(
                                "{origin}: bad `IdentitiesOnly` value `{v}`: expected yes or no"
                            )));
                        }
                    };
                    if active {
                        self.raw.identities_only.get_or_insert(b);
                    }
                }
                "proxyjump" => {
                    let v = single(&args, "ProxyJump", &origin)?;
                    let proxy = if v.eq_ignore_ascii_case("none") {
                        Proxy::Direct
                    } else {
                        let hops: Vec<String> = v.split(',').map(str::to_string).collect();
                        if hops.iter().any(String::is_empty) {
                            return Err(Error::usage(format!(
                                "{origin}: bad `ProxyJump` value `{v}`: expected \
                                 [user@]host[:port] separated by commas"
                            )));
                        }
                        Proxy::Jump(hops)
                    };
                    if active {
                        self.raw.proxy.get_or_insert(proxy);
                    }
                }
                "proxycommand" => {
                    if args.is_empty() {
                        return Err(Error::usage(format!(
                            "{origin}: `ProxyCommand` needs a command"
                        )));
                    }
                    let proxy = if args.len() == 1 && args[0].eq_ignore_ascii_case("none") {
                        Proxy::Direct
                    } else {
                        Proxy::Command { origin }
                    };
                    if active {
                        self.raw.proxy.get_or_insert(proxy);
                    }
                }
                // Everything else (ControlMaster, LocalForward, …) is not pxagent's business.
                _ => {}
            }
        }
        Ok(())
    }

    /// The files an `Include` argument names, sorted like glob(3) would.
    fn include_paths(&self, pattern: &str) -> Result<Vec<PathBuf>> {
        let home = self.base_dir.parent().unwrap_or(Path::new("/"));
        let expanded = if pattern.starts_with('~') {
            expand_tilde(pattern, home)
        } else {
            PathBuf::from(pattern)
        };
        let full = if expanded.is_absolute() {
            expanded
        } else {
            self.base_dir.join(expanded)
        };
        let name = full
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !name.contains(['*', '?']) {
            return Ok(vec![full]);
        }
        let dir = full.parent().unwrap_or(Path::new("/"));
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(Vec::new());
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                // glob(3) does not match dot files with a leading wildcard.
                !n.starts_with('.') && wildcard_match(&name, &n)
            })
            .map(|e| e.path())
            .collect();
        found.sort();
        Ok(found)
    }
}

fn single<'a>(args: &'a [String], keyword: &str, origin: &str) -> Result<&'a str> {
    match args {
        [v] => Ok(v),
        [] => Err(Error::usage(format!("{origin}: `{keyword}` needs a value"))),
        _ => Err(Error::usage(format!(
            "{origin}: `{keyword}` takes one value, found {}",
            args.len()
        ))),
    }
}

/// Splits `Keyword value…` / `Keyword=value…` into a lowercase keyword and its arguments
/// (quotes removed). `None` for blank and comment lines.
fn split_line(line: &str, origin: &str) -> Result<Option<(String, Vec<String>)>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let keyword = line[..end].to_ascii_lowercase();
    let mut rest = line[end..].trim_start();
    if let Some(r) = rest.strip_prefix('=') {
        rest = r.trim_start();
    }
    // shlex gives the same word splitting and quote handling as OpenSSH's argv_split for the
    // values that occur in practice (quoted paths with spaces, trailing comments).
    let args = shlex::split(rest)
        .ok_or_else(|| Error::usage(format!("{origin}: unbalanced quotes in `{line}`")))?;
    Ok(Some((keyword, args)))
}

/// `Host` semantics: some positive pattern matches and no negated one does.
fn host_matches(host: &str, patterns: &[String]) -> bool {
    let mut matched = false;
    for p in patterns {
        let p = p.to_ascii_lowercase();
        if let Some(neg) = p.strip_prefix('!') {
            if wildcard_match(neg, host) {
                return false;
            }
        } else if wildcard_match(&p, host) {
            matched = true;
        }
    }
    matched
}

/// OpenSSH-style pattern match: `*` is any run of characters (also empty), `?` exactly one.
/// Shared with the known_hosts reader in [`crate::ssh`].
pub(crate) fn wildcard_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Classic greedy matching with backtracking to the last `*`: linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        dir: tempfile::TempDir,
        ctx: SshConfigEnv,
    }

    fn fixture(config: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let config_path = home.join(".ssh").join("config");
        std::fs::write(&config_path, config).unwrap();
        let ctx = SshConfigEnv {
            config_path,
            home,
            local_user: "alice".into(),
            default_remote_user: "zen-agent".into(),
        };
        Fixture { dir, ctx }
    }

    fn look(config: &str, alias: &str) -> HostConfig {
        let f = fixture(config);
        lookup(alias, &f.ctx).unwrap()
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("*", "anything"));
        assert!(wildcard_match("pve?", "pve1"));
        assert!(!wildcard_match("pve?", "pve"));
        assert!(!wildcard_match("pve?", "pve12"));
        assert!(wildcard_match("*.example.com", "a.b.example.com"));
        assert!(!wildcard_match("*.example.com", "example.com"));
        assert!(wildcard_match("a*b*c", "aXXbYYbc"));
        assert!(!wildcard_match("a*b*c", "aXXbYY"));
        assert!(wildcard_match("10.0.0.*", "10.0.0.7"));
    }

    #[test]
    fn basic_alias_with_all_keywords() {
        let hc = look(
            "Host pve\n  HostName 192.0.2.10\n  Port 2201\n  User zen\n  \
             IdentityFile ~/.ssh/pve_ed25519\n  UserKnownHostsFile ~/.ssh/kh_pve other\n  \
             IdentitiesOnly yes\n",
            "pve",
        );
        assert_eq!(hc.hostname.as_deref(), Some("192.0.2.10"));
        assert_eq!(hc.port, Some(2201));
        assert_eq!(hc.user.as_deref(), Some("zen"));
        assert!(hc.identity_files[0].ends_with("home/.ssh/pve_ed25519"));
        assert!(hc.identity_files[0].is_absolute());
        assert!(
            hc.user_known_hosts_file
                .unwrap()
                .ends_with("home/.ssh/kh_pve")
        );
        assert_eq!(hc.identities_only, Some(true));
    }

    #[test]
    fn proxy_jump_and_proxy_command_share_one_slot() {
        assert_eq!(
            look("Host pve\n  ProxyJump ops@bastion:2200,ssh://gw\n", "pve").proxy,
            Some(Proxy::Jump(vec![
                "ops@bastion:2200".into(),
                "ssh://gw".into()
            ]))
        );
        // Whichever comes first wins, as in OpenSSH.
        let hc = look(
            "Host pve\n  ProxyCommand nc -X 5 %h %p\n  ProxyJump bastion\n",
            "pve",
        );
        assert!(
            matches!(&hc.proxy, Some(Proxy::Command { origin }) if origin.ends_with(":2")),
            "{hc:?}"
        );
        let hc = look("Host pve\n  ProxyJump none\nHost *\n  ProxyJump b\n", "pve");
        assert_eq!(hc.proxy, Some(Proxy::Direct));
        let hc = look("Host pve\n  ProxyCommand none\n", "pve");
        assert_eq!(hc.proxy, Some(Proxy::Direct));
        assert_eq!(look("Host other\n  ProxyJump b\n", "pve").proxy, None);
        let err = lookup("pve", &fixture("Host pve\n  ProxyJump a,,b\n").ctx).unwrap_err();
        assert!(err.to_string().contains(":2: bad `ProxyJump`"), "{err}");
    }

    #[test]
    fn no_match_and_missing_file_are_empty() {
        assert_eq!(look("Host other\n  Port 1\n", "pve"), HostConfig::default());
        let f = fixture("");
        let ctx = SshConfigEnv {
            config_path: f.dir.path().join("nope"),
            ..f.ctx.clone()
        };
        assert_eq!(lookup("pve", &ctx).unwrap(), HostConfig::default());
    }

    #[test]
    fn first_value_wins_and_identity_files_accumulate() {
        let hc = look(
            "Host pve\n  Port 2201\n  IdentityFile /k/one\nHost *\n  Port 22\n  User root\n  \
             IdentityFile /k/two\n",
            "pve",
        );
        assert_eq!(hc.port, Some(2201));
        assert_eq!(hc.user.as_deref(), Some("root"));
        assert_eq!(
            hc.identity_files,
            vec![PathBuf::from("/k/one"), PathBuf::from("/k/two")]
        );
    }

    #[test]
    fn global_lines_before_any_host_apply() {
        let hc = look("User early\nHost pve\n  User late\n", "pve");
        assert_eq!(hc.user.as_deref(), Some("early"));
    }

    #[test]
    fn multiple_patterns_and_negation() {
        let cfg = "Host pve? !pve9 lab-*\n  User zen\n";
        assert_eq!(look(cfg, "pve1").user.as_deref(), Some("zen"));
        assert_eq!(look(cfg, "lab-x").user.as_deref(), Some("zen"));
        assert_eq!(look(cfg, "pve9").user, None);
        assert_eq!(look(cfg, "pve10").user, None);
        // A host matching only the negation is not matched either.
        assert_eq!(look("Host !pve\n  User zen\n", "other").user, None);
    }

    #[test]
    fn case_insensitive_keywords_equals_syntax_and_quotes() {
        let hc = look(
            "HOST PVE\n  hostname=pve.lab\n  IDENTITYFILE \"/keys/with space\" # comment\n",
            "pve",
        );
        assert_eq!(hc.hostname.as_deref(), Some("pve.lab"));
        assert_eq!(hc.identity_files, vec![PathBuf::from("/keys/with space")]);
    }

    #[test]
    fn match_blocks_are_skipped() {
        let hc = look(
            "Match host pve\n  User frommatch\nHost pve\n  Port 2\n  User fromhost\n",
            "pve",
        );
        assert_eq!(hc.user.as_deref(), Some("fromhost"));
        assert_eq!(hc.port, Some(2));
    }

    #[test]
    fn tokens_are_expanded() {
        let hc = look(
            "Host pve\n  HostName %h.lab\n  User ops\n  IdentityFile ~/.ssh/%h-%r-%u-%n-%p\n  \
             IdentityFile %d/100%%\n",
            "pve",
        );
        assert_eq!(hc.hostname.as_deref(), Some("pve.lab"));
        let id = hc.identity_files[0].to_string_lossy().into_owned();
        assert!(id.ends_with("home/.ssh/pve.lab-ops-alice-pve-22"), "{id}");
        assert!(
            hc.identity_files[1]
                .to_string_lossy()
                .ends_with("home/100%")
        );
        // Without User, %r is the caller's default remote user.
        let hc = look("Host pve\n  IdentityFile /k/%r\n", "pve");
        assert_eq!(hc.identity_files, vec![PathBuf::from("/k/zen-agent")]);
    }

    #[test]
    fn errors_name_file_and_line() {
        let f = fixture("Host pve\n  Port ninety\n");
        let err = lookup("pve", &f.ctx).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("config:2"), "{err}");
        assert!(err.to_string().contains("Port"), "{err}");

        let f = fixture("Host pve\n  IdentityFile /k/%x\n");
        let err = lookup("pve", &f.ctx).unwrap_err().to_string();
        assert!(err.contains("config:2") && err.contains("%x"), "{err}");

        // A bad line in a block that does not match is still an error, as in OpenSSH.
        let f = fixture("Host other\n  Port 0\n");
        assert!(lookup("pve", &f.ctx).is_err());
    }

    #[test]
    fn include_relative_glob_and_inactive_blocks() {
        let f = fixture(
            "Include config.d/*.conf\nHost pve\n  Include pve.extra\nHost other\n  \
             Include other.extra\n",
        );
        let ssh = f.ctx.home.join(".ssh");
        std::fs::create_dir_all(ssh.join("config.d")).unwrap();
        std::fs::write(ssh.join("config.d/10-a.conf"), "Host pve\n  Port 2210\n").unwrap();
        std::fs::write(
            ssh.join("config.d/20-b.conf"),
            "Host pve\n  Port 2220\n  User b\n",
        )
        .unwrap();
        std::fs::write(ssh.join("config.d/.hidden.conf"), "Host *\n  User hidden\n").unwrap();
        // Lines before any Host in an included file apply iff the Include line was active.
        std::fs::write(ssh.join("pve.extra"), "IdentityFile /k/pve\n").unwrap();
        std::fs::write(ssh.join("other.extra"), "IdentityFile /k/other\n").unwrap();
        let hc = lookup("pve", &f.ctx).unwrap();
        assert_eq!(hc.port, Some(2210));
        assert_eq!(hc.user.as_deref(), Some("b"));
        assert_eq!(hc.identity_files, vec![PathBuf::from("/k/pve")]);
    }

    #[test]
    fn include_loops_stop() {
        let f = fixture("Include config\n");
        let err = lookup("pve", &f.ctx).unwrap_err().to_string();
        assert!(err.contains("nested"), "{err}");
    }
}
