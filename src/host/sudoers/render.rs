//! Render the host's sudoers file from the catalog: exactly the catalog's command lines.
//!
//! One `Cmnd_Alias` per (area, risk) group, one anchored regex rule per op, absolute paths,
//! `(root) NOPASSWD`, never a bare `*`. Alias names carry the account's name because
//! Cmnd_Alias names are global across all of /etc/sudoers.d: two accounts (say, two test
//! beds) would otherwise collide and break sudo for everyone.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::base::error::{Error, Result};
use crate::base::text::printable;
use crate::catalog::kind::{
    Kind, STORAGE_ROOTS_DEFAULT, nfs_servers_group, storage_root_problem, storage_roots_group,
};
use crate::catalog::{Area, OPS, Op, Places, Profile, Risk};

use super::ranges::Ranges;

/// What to render.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// The agent account.
    pub user: String,
    /// Which risk classes to allow.
    pub profile: Profile,
    /// Fence for VM ops' VMIDs.
    pub vmids: Option<Ranges>,
    /// Fence for container ops' VMIDs (defaults to `vmids`: a container id is a VMID too).
    pub ctids: Option<Ranges>,
    /// Containers `pct exec` may enter (`--ct-exec`); without it no profile has `ct.exec`.
    pub ct_exec: Option<Ranges>,
    /// With a fence, also allow the changes a fence cannot restrict (`--unfenced-ops`):
    /// `storage remove`, downloads … (see [`Op::per_guest`]). Without a fence it changes
    /// nothing: every op of the profile is there anyway.
    pub unfenced_ops: bool,
    /// The directories a directory storage's path must be below (`--storage-roots`; by
    /// default `/mnt` and `/srv`), each checked by [`parse_storage_roots`].
    pub storage_roots: Vec<String>,
    /// The NFS servers the admin lets the agent add storages from (`--nfs-servers`, each a
    /// [`Kind::Server`]); without any, `storage add-nfs` is not rendered at all.
    pub nfs_servers: Vec<String>,
    /// How full an ISO upload may leave a storage's file system, in percent
    /// (`--iso-max-used`, default [`ISO_MAX_USED_DEFAULT`]): the rule admits `--max-used` up
    /// to it, so the account may ask for less room used, never more.
    pub iso_max_used: u8,
}

/// The fill limit of an ISO upload when the render names none: PVE's own storage status turns
/// a storage red at 90 % in the GUI, and the host still has room for its logs and updates.
pub const ISO_MAX_USED_DEFAULT: u8 = 90;

impl RenderOptions {
    /// Defaults: `zen-agent`, profile `full`, no fences.
    pub fn new(user: &str) -> Result<RenderOptions> {
        Ok(RenderOptions {
            user: validate_user(user)?,
            profile: Profile::Full,
            vmids: None,
            ctids: None,
            ct_exec: None,
            unfenced_ops: false,
            storage_roots: STORAGE_ROOTS_DEFAULT
                .iter()
                .map(|r| r.to_string())
                .collect(),
            nfs_servers: Vec::new(),
            iso_max_used: ISO_MAX_USED_DEFAULT,
        })
    }

    /// Whether the storage roots are other than the default ones.
    pub fn custom_storage_roots(&self) -> bool {
        self.storage_roots != STORAGE_ROOTS_DEFAULT
    }

    /// The op's rule in this render: its VMID fence, the storage roots and the NFS servers.
    pub fn rule(&self, op: &Op) -> String {
        op.sudoers_rule_in(
            self.fence_for(op).as_deref(),
            &Places {
                roots_group: Some(&storage_roots_group(&self.storage_roots)),
                servers_group: Some(&nfs_servers_group(&self.nfs_servers)),
                fill_group: Some(&format!(
                    "({})",
                    super::ranges::number_range_regex(1, u64::from(self.iso_max_used))
                )),
            },
        )
    }

    /// Whether this render leaves the op out for want of a place the admin names: an NFS
    /// storage ([`Op::names_a_server`]) without `--nfs-servers`.
    pub fn unnamed(&self, op: &Op) -> bool {
        op.names_a_server() && self.nfs_servers.is_empty()
    }

    /// Whether a VMID fence (`--vmids`/`--ctids`) is set.
    pub fn fenced(&self) -> bool {
        self.vmids.is_some() || self.ctids.is_some()
    }

    /// Whether a fenced render leaves this op out: a change that is not per guest, unless
    /// `--unfenced-ops` asks for it. Reads stay: they change nothing.
    pub fn left_out(&self, op: &Op) -> bool {
        self.fenced() && !self.unfenced_ops && unfenceable(op)
    }

    /// The fence regex that applies to an op, if any.
    pub fn fence_for(&self, op: &Op) -> Option<String> {
        // Container exec is fenced by its own opt-in list, never by the general fences.
        if is_ct_exec(op) {
            return self.ct_exec.as_ref().map(Ranges::regex);
        }
        let cts = self.ctids.as_ref().or(self.vmids.as_ref());
        let ranges = match op.fence_area()? {
            Area::Vm => self.vmids.clone(),
            Area::Ct => cts.cloned(),
            // Backups, task filters and HA name VMs and containers alike: either fence admits.
            _ => match (self.vmids.as_ref(), cts) {
                (Some(v), Some(c)) => Some(v.union(c)),
                (v, c) => v.or(c).cloned(),
            },
        }?;
        Some(ranges.regex())
    }

    /// The ops this render allows, in catalog order.
    pub fn ops(&self) -> impl Iterator<Item = &'static Op> + '_ {
        OPS.iter()
            .copied()
            .filter(|op| self.profile.allows_op(op) || (is_ct_exec(op) && self.ct_exec.is_some()))
            .filter(|op| !self.left_out(op) && !self.unnamed(op))
    }
}

/// A change no VMID fence can restrict (not per guest): fenced renders leave it out unless
/// `--unfenced-ops` is given, and the preflight does not miss it on a fenced host.
pub fn unfenceable(op: &Op) -> bool {
    op.risk != Risk::Read && !op.per_guest()
}

/// `pct exec`: root in the container, near-host-root in a privileged one.
fn is_ct_exec(op: &Op) -> bool {
    op.risk == Risk::Exec && op.area == Area::Ct
}

/// Parse `--storage-roots`: absolute directories joined by `,` (`/mnt,/srv,/data/pools`),
/// at most 8, none twice. A root that is `/`, or at or below a system directory (`/etc`,
/// `/root`, `/usr`, `/var`, `/boot`, `/proc`, `/sys`, `/dev`, `/bin`, `/sbin`, `/lib*`, `/run`,
/// `/tmp`), is refused with the reason: a storage there could overwrite the host's own files.
pub fn parse_storage_roots(flag: &str, text: &str) -> Result<Vec<String>> {
    let mut roots: Vec<String> = Vec::new();
    for root in text.split(',') {
        if let Some(why) = storage_root_problem(root) {
            return Err(Error::usage(format!(
                "{flag}: refusing storage root '{}': {why}",
                printable(root)
            )));
        }
        if roots.iter().any(|r| r == root) {
            return Err(Error::usage(format!(
                "{flag}: '{}' is given twice",
                printable(root)
            )));
        }
        roots.push(root.to_string());
    }
    if roots.len() > 8 {
        return Err(Error::usage(format!("{flag}: at most 8 storage roots")));
    }
    Ok(roots)
}

/// Parse `--nfs-servers`: NFS servers joined by `,` (`192.0.2.30,nas.example.org`), each an
/// IPv4 address or a DNS name ([`Kind::Server`]), at most 16, none twice.
pub fn parse_nfs_servers(flag: &str, text: &str) -> Result<Vec<String>> {
    let mut servers: Vec<String> = Vec::new();
    for server in text.split(',') {
        let server = Kind::Server
            .parse("server", server)
            .map_err(|e| Error::usage(format!("{flag}: {e}")))?;
        if servers.contains(&server) {
            return Err(Error::usage(format!(
                "{flag}: '{}' is given twice",
                printable(&server)
            )));
        }
        servers.push(server);
    }
    if servers.len() > 16 {
        return Err(Error::usage(format!("{flag}: at most 16 NFS servers")));
    }
    Ok(servers)
}

/// Validate an account name: a plain POSIX login name, never root. It appears unquoted in
/// sudoers and in alias names, so anything else is refused.
pub fn validate_user(user: &str) -> Result<String> {
    let re = regex::Regex::new("^[a-z_][a-z0-9_-]{0,31}$").expect("static regex");
    if !re.is_match(user) {
        return Err(Error::usage(format!(
            "invalid user name '{}': expected a login name of lower-case letters, digits, '_' and '-' (at most 32)",
            printable(user)
        )));
    }
    if user == "root" {
        return Err(Error::usage(
            "refusing to render rules for root: pxagent's account must be unprivileged",
        ));
    }
    Ok(user.to_string())
}

/// The log file sudo writes JSON events to for this account.
pub fn logfile(user: &str) -> String {
    format!("/var/log/sudo-{user}.log")
}

fn alias_name(user: &str, area: Area, risk: Risk) -> String {
    format!(
        "PXA_{}_{}_{}",
        user.to_ascii_uppercase().replace('-', "_"),
        area.name(),
        risk.name().to_ascii_uppercase()
    )
}

/// The rule that lets the gate append its records to the host audit chain: the one rule of a
/// render that is no catalog op's (the client never sends it; the gate's grammar refuses it).
pub fn chain_rule() -> String {
    format!("{} ^audit-append$", crate::catalog::pve::HELPER_PATH)
}

/// Render the whole sudoers file.
pub fn render(opts: &RenderOptions) -> String {
    let user = &opts.user;
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "# /etc/sudoers.d/{user}: rendered by pxagent {} (profile {}{}{}{}{}{})",
        env!("CARGO_PKG_VERSION"),
        opts.profile.name(),
        if opts.custom_storage_roots() {
            format!(", storage roots {}", opts.storage_roots.join(","))
        } else {
            String::new()
        } + &if opts.nfs_servers.is_empty() {
            String::new()
        } else {
            format!(", nfs servers {}", opts.nfs_servers.join(","))
        },
        opts.ct_exec
            .as_ref()
            .map(|r| format!(", ct-exec {}", r.display()))
            .unwrap_or_default(),
        opts.vmids
            .as_ref()
            .map(|r| format!(", vmids {}", r.display()))
            .unwrap_or_default(),
        opts.ctids
            .as_ref()
            .map(|r| format!(", ctids {}", r.display()))
            .unwrap_or_default(),
        if opts.fenced() && opts.unfenced_ops {
            ", unfenced ops"
        } else {
            ""
        },
    );
    let _ = writeln!(w, "#");
    let _ = writeln!(
        w,
        "# It allows exactly the command lines of `pxagent catalog` for this profile: each rule is an"
    );
    let _ = writeln!(
        w,
        "# absolute path plus an anchored POSIX regex over the arguments. Never add `*` to a PVE tool:"
    );
    let _ = writeln!(
        w,
        "# sudo's `*` matches spaces and options, and every PVE tool has a root shell behind an option."
    );
    let _ = writeln!(w, "#");
    let _ = writeln!(
        w,
        "# Requires classic sudo >= 1.9.10 (regex arguments); Debian 12 ships 1.9.13, Debian 13 1.9.16."
    );
    let _ = writeln!(
        w,
        "# sudo-rs supports neither regex arguments nor I/O logs: do not use it. Stock PVE 9 ships"
    );
    let _ = writeln!(w, "# without sudo: `apt-get install sudo`.");
    let _ = writeln!(w, "#");
    let _ = writeln!(
        w,
        "# Install safely, as root (sudo ignores file names that contain a dot):"
    );
    let _ = writeln!(
        w,
        "#   pxagent sudoers render --user {user} > /etc/sudoers.d/{user}.new"
    );
    let _ = writeln!(w, "#   visudo -cf /etc/sudoers.d/{user}.new");
    let _ = writeln!(w, "#   chmod 0440 /etc/sudoers.d/{user}.new");
    let _ = writeln!(w, "#   mv /etc/sudoers.d/{user}.new /etc/sudoers.d/{user}");
    let _ = writeln!(w, "# Then check from the client: pxagent preflight");
    if opts.nfs_servers.is_empty()
        && opts
            .profile
            .allows_op(&crate::catalog::ops::STORAGE_ADD_NFS)
    {
        let _ = writeln!(w, "#");
        let _ = writeln!(
            w,
            "# No NFS servers named (--nfs-servers): `storage add-nfs` is left out. A share's files are"
        );
        let _ = writeln!(
            w,
            "# written by its server and read by root-run Proxmox code, so only the admin picks servers."
        );
    }
    if opts.fenced() {
        let out: Vec<&str> = OPS
            .iter()
            .filter(|op| opts.profile.allows_op(op) && opts.left_out(op))
            .map(|op| op.id)
            .collect();
        let _ = writeln!(w, "#");
        let _ = writeln!(
            w,
            "# VMID fences cover every guest id in a rule, a backup archive's own id included."
        );
        if !out.is_empty() {
            let _ = writeln!(
                w,
                "# Left out because no fence can restrict them (add --unfenced-ops to allow them):"
            );
            let _ = writeln!(w, "#   {}", out.join(", "));
        }
    }
    let _ = writeln!(
        w,
        "# To revoke at once (SSH and sudo): usermod --expiredate 1 {user}"
    );
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "Defaults:{user} env_reset, !requiretty, !lecture, umask=0022, timestamp_timeout=0"
    );
    let _ = writeln!(
        w,
        "Defaults:{user} secure_path=\"/usr/sbin:/usr/bin:/sbin:/bin\""
    );
    let _ = writeln!(
        w,
        "Defaults:{user} log_allowed, log_denied, log_format=json, logfile={}",
        logfile(user)
    );
    let _ = writeln!(
        w,
        "Defaults:{user} log_input, log_output, iolog_dir=/var/log/sudo-io/%{{user}}"
    );

    // Ops whose command reads a file from stdin (`iso upload`) get aliases of their own, last,
    // tagged NOLOG_INPUT: sudo's I/O log would otherwise keep a second copy of every image under
    // /var/log, on the host's root file system. Their output and command line are still logged,
    // and the command line carries the image's SHA-256.
    let mut groups: BTreeMap<(bool, Risk, Area), Vec<&Op>> = BTreeMap::new();
    for op in opts.ops() {
        groups
            .entry((op.uploads().is_some(), op.risk, op.area))
            .or_default()
            .push(op);
    }
    let mut aliases = Vec::new();
    let mut unlogged = Vec::new();
    for ((stdin, risk, area), ops) in &groups {
        let name = match stdin {
            false => alias_name(user, *area, *risk),
            true => format!("{}_UPLOAD", alias_name(user, *area, *risk)),
        };
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "# {} ops, risk {}{}: {}",
            area.name().to_ascii_lowercase(),
            risk.name(),
            if *stdin {
                ", a file on stdin (not I/O-logged)"
            } else {
                ""
            },
            ops.iter().map(|o| o.id).collect::<Vec<_>>().join(", ")
        );
        let mut rules: Vec<String> = Vec::new();
        for op in ops {
            let rule = opts.rule(op);
            // Several reads share one command line (vm list, ct list); one rule suffices.
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        }
        let _ = writeln!(w, "Cmnd_Alias {name} = \\");
        let last = rules.len() - 1;
        for (i, rule) in rules.iter().enumerate() {
            let _ = writeln!(w, "    {rule}{}", if i == last { "" } else { ", \\" });
        }
        match stdin {
            false => aliases.push(name),
            true => unlogged.push(name),
        }
    }
    // The gate hands each of its records to the helper, which appends it to the host audit
    // chain (`helper/src/chain.rs`). I/O-logged like the rest: the helper reads the account's
    // session counter after sudo took this session's, so the next one is the command's.
    let chain = format!(
        "PXA_{}_HOST_AUDIT",
        user.to_ascii_uppercase().replace('-', "_")
    );
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "# the gate's records, appended to the host audit chain (only the gate calls it)"
    );
    let _ = writeln!(w, "Cmnd_Alias {chain} = {}", chain_rule());
    let _ = writeln!(w);
    // Before the NOLOG_INPUT group: a tag holds for every alias after it.
    aliases.push(chain);
    if !unlogged.is_empty() {
        aliases.push(format!("NOLOG_INPUT: {}", unlogged.join(", ")));
    }
    let spec = aliases.join(", ");
    let _ = writeln!(w, "{user} ALL=(root) NOPASSWD: {spec}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_nest() {
        let mut o = RenderOptions::new("zen-agent").unwrap();
        o.profile = Profile::Readonly;
        let ro = render(&o);
        o.profile = Profile::Operator;
        let op = render(&o);
        o.profile = Profile::Full;
        let full = render(&o);
        assert!(ro.contains("/status/current"));
        assert!(!ro.contains("/status/start"));
        assert!(op.contains("/status/start"));
        assert!(!op.contains("/status/stop"));
        assert!(full.contains("/status/stop"));
        assert!(full.contains("( --purge 1)?"));
    }

    #[test]
    fn only_the_upload_rule_goes_without_input_logging_and_its_fill_limit_is_the_render_s() {
        let mut o = RenderOptions::new("zen-agent").unwrap();
        let full = render(&o);
        let spec = full.lines().last().unwrap();
        let (logged, unlogged) = spec.split_once("NOLOG_INPUT: ").unwrap();
        assert_eq!(unlogged, "PXA_ZEN_AGENT_STORAGE_CHANGE_UPLOAD", "{spec}");
        assert!(!logged.contains("UPLOAD"), "{spec}");
        let alias: Vec<&str> = full
            .split("Cmnd_Alias PXA_ZEN_AGENT_STORAGE_CHANGE_UPLOAD = \\\n")
            .nth(1)
            .unwrap()
            .lines()
            .take_while(|l| l.starts_with("    "))
            .collect();
        assert_eq!(alias.len(), 1, "{alias:?}");
        assert!(
            alias[0].starts_with(
                "    /usr/local/lib/pxagent/pxagent-helper ^iso-receive --max-used ([1-9]|[1-8][0-9]|90) "
            ) && alias[0].ends_with(" [1-9][0-9]{0,12} [0-9a-f]{64}$"),
            "{alias:?}"
        );
        o.iso_max_used = 75;
        assert!(render(&o).contains("--max-used ([1-9]|[1-6][0-9]|7[0-5]) "));
        // A profile without the upload has no unlogged commands at all.
        o.profile = Profile::Operator;
        assert!(render(&o).contains("NOLOG_INPUT"));
        o.profile = Profile::Readonly;
        assert!(!render(&o).contains("NOLOG_INPUT"));
    }

    #[test]
    fn never_a_wildcard_and_always_anchored() {
        let full = render(&RenderOptions::new("zen-agent").unwrap());
        for line in full.lines().filter(|l| l.starts_with("    /")) {
            // Exec rules end in the guest's argv or data, `.*` after a fixed prefix.
            let exec = line.contains("/agent/") || line.contains("pct ^exec");
            let line = if exec {
                line.replace(".*", "")
            } else {
                line.to_string()
            };
            assert!(!line.contains('*'), "{line}");
            assert!(
                line.contains(" ^") && line.trim_end_matches([',', ' ', '\\']).ends_with('$'),
                "{line}"
            );
        }
        assert!(full.contains("zen-agent ALL=(root) NOPASSWD: PXA_ZEN_AGENT_"));
    }

    #[test]
    fn fences_apply_to_guest_rules_only() {
        let mut o = RenderOptions::new("zen-agent").unwrap();
        o.vmids = Some(Ranges::parse("--vmids", "100-199").unwrap());
        o.ctids = Some(Ranges::parse("--ctids", "300").unwrap());
        let s = render(&o);
        assert!(s.contains("/qemu/(1[0-9]{2})/status/start"), "{s}");
        assert!(s.contains("/lxc/(300)/status/start"), "{s}");
        assert!(!s.contains("/qemu/[1-9][0-9]{2,8}"), "{s}");
        assert!(s.contains("# /etc/sudoers.d/zen-agent: rendered by pxagent"));
        assert!(s.contains("vmids 100-199, ctids 300"));
    }

    #[test]
    fn backups_are_fenced_by_both_fences() {
        let mut o = RenderOptions::new("zen-agent").unwrap();
        o.vmids = Some(Ranges::parse("--vmids", "100-199").unwrap());
        o.ctids = Some(Ranges::parse("--ctids", "300").unwrap());
        let s = render(&o);
        let vzdump = s.lines().find(|l| l.contains("/vzdump --vmid")).unwrap();
        assert!(vzdump.contains("--vmid (1[0-9]{2}|300) "), "{vzdump}");
        assert!(
            !s.contains("--vmid [1-9][0-9]{2,8}"),
            "an unfenced VMID is left"
        );
    }

    /// The rule of `op` in a render, as a Rust regex over the joined arguments.
    fn rule_re(o: &RenderOptions, op: &Op) -> regex::Regex {
        let rule = o.rule(op);
        regex::Regex::new(rule.split_once(' ').unwrap().1).unwrap()
    }

    /// NFS storages only on the servers the admin named; none named, no rule.
    #[test]
    fn nfs_storages_only_on_named_servers() {
        use crate::catalog::ops;
        let mut o = RenderOptions::new("zen-agent").unwrap();
        assert!(o.unnamed(&ops::STORAGE_ADD_NFS));
        assert!(!o.ops().any(|op| op.id == "storage.add-nfs"));
        assert!(render(&o).contains("No NFS servers named"));
        o.nfs_servers = parse_nfs_servers("--nfs-servers", "192.0.2.30,nas").unwrap();
        assert!(o.ops().any(|op| op.id == "storage.add-nfs"));
        let re = rule_re(&o, &ops::STORAGE_ADD_NFS);
        let line = |server: &str| {
            format!(
                "create /storage --storage n1 --type nfs --server {server} --export /export/pve --options nosuid,nodev,noexec,nosymfollow --output-format json"
            )
        };
        for ok in ["192.0.2.30", "nas"] {
            assert!(re.is_match(&line(ok)), "{ok}");
        }
        for bad in ["192a0a2a30", "nasx", "nas.evil.org", "192.0.2.3", "evil"] {
            assert!(!re.is_match(&line(bad)), "{bad}");
        }
        for bad in ["", "nas,nas", "-x", "a b"] {
            assert!(parse_nfs_servers("--nfs-servers", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn directory_storages_stay_below_the_storage_roots() {
        use crate::catalog::ops;
        let line = |path: &str| {
            format!(
                "create /storage --storage s1 --type dir --path {path} --content iso --output-format json"
            )
        };
        let mut o = RenderOptions::new("zen-agent").unwrap();
        let re = rule_re(&o, &ops::STORAGE_ADD_DIR);
        for ok in [
            "/mnt/a",
            "/srv/iso-store",
            "/mnt/pvex/x.y/z_1",
            "/srv/pve/x",
        ] {
            assert!(re.is_match(&line(ok)), "{ok}");
        }
        for bad in [
            "/",
            "/mnt",
            "/mnt/pve",
            "/mnt/pve/x.y/z_1",
            "/etc",
            "/root/x",
            "/mnt/../etc",
            "/mnt/./x",
            "/mnt//x",
            "/mnt/x/",
            "/mnta/x",
            "/data/x",
            "/mnt/x --type pbs",
        ] {
            assert!(!re.is_match(&line(bad)), "{bad}");
        }
        assert!(!render(&o).contains("storage roots"));
        o.storage_roots = parse_storage_roots("--storage-roots", "/data/pools,/srv").unwrap();
        let re = rule_re(&o, &ops::STORAGE_ADD_DIR);
        assert!(re.is_match(&line("/data/pools/a")));
        assert!(re.is_match(&line("/srv/a")));
        assert!(!re.is_match(&line("/mnt/a")));
        assert!(!re.is_match(&line("/data/a")));
        assert!(!re.is_match(&line("/data/pools")));
        let s = render(&o);
        assert!(s.contains("storage roots /data/pools,/srv)"), "{s}");
        // A `.` in a root is literal.
        o.storage_roots = parse_storage_roots("--storage-roots", "/mnt/a.b").unwrap();
        let re = rule_re(&o, &ops::STORAGE_ADD_DIR);
        assert!(re.is_match(&line("/mnt/a.b/c")));
        assert!(!re.is_match(&line("/mnt/axb/c")));
    }

    #[test]
    fn system_directories_are_never_storage_roots() {
        for bad in [
            "/",
            "/etc",
            "/etc/pve",
            "/root",
            "/usr",
            "/usr/local",
            "/var",
            "/var/lib/vz",
            "/boot",
            "/proc",
            "/sys",
            "/dev",
            "/bin",
            "/sbin",
            "/lib",
            "/lib64",
            "/libx32",
            "/run",
            "/tmp",
            "mnt",
            "/mnt/",
            "/mnt/../etc",
            "/mnt/./x",
            "/mnt//x",
            "",
            "/mnt,/etc",
            "/mnt,/mnt",
            "/mnt x",
        ] {
            let e = parse_storage_roots("--storage-roots", bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("--storage-roots"), "{e}");
        }
        let e = parse_storage_roots("--storage-roots", "/etc").unwrap_err();
        assert!(
            e.to_string().contains("/etc holds the host's system"),
            "{e}"
        );
        assert_eq!(
            parse_storage_roots("--storage-roots", "/mnt,/srv/pve,/data").unwrap(),
            ["/mnt", "/srv/pve", "/data"]
        );
    }

    #[test]
    fn fences_cover_the_archives_own_vmid() {
        use crate::catalog::ops;
        let mut o = RenderOptions::new("zen-agent").unwrap();
        o.vmids = Some(Ranges::parse("--vmids", "100-199").unwrap());
        o.ctids = Some(Ranges::parse("--ctids", "300-399").unwrap());
        let archive =
            |t: &str, id: u32| format!("local:backup/vzdump-{t}-{id}-2026_11_01-02_00_00.vma.zst");
        let vm = rule_re(&o, &ops::BACKUP_RESTORE);
        let line = |id: u32, a: &str| {
            format!("create /nodes/pve1/qemu --vmid {id} --archive {a} --output-format json")
        };
        for (target, from, ok) in [
            (177, 150, true),
            (177, 250, false),
            (177, 99, false),
            (177, 100, true),
            (177, 199, true),
            (177, 200, false),
            (250, 150, false),
            // A VM restore is fenced by the VM fence only, the archive's id as well.
            (350, 150, false),
            (177, 350, false),
        ] {
            assert_eq!(
                vm.is_match(&line(target, &archive("qemu", from))),
                ok,
                "{target} {from}"
            );
        }
        // A container's archive never passes the VM restore rule.
        assert!(!vm.is_match(&line(177, &archive("lxc", 150))));
        let remove = rule_re(&o, &ops::BACKUP_REMOVE);
        for (t, id, ok) in [
            ("qemu", 150, true),
            ("lxc", 350, true),
            ("qemu", 250, false),
            ("lxc", 299, false),
        ] {
            assert_eq!(
                remove.is_match(&format!("free {}", archive(t, id))),
                ok,
                "{t} {id}"
            );
        }
        let prune = rule_re(&o, &ops::BACKUP_PRUNE);
        let prune_line = |id: u32| {
            format!(
                "delete /nodes/pve1/storage/local/prunebackups --vmid {id} --prune-backups keep-last=1 --output-format json"
            )
        };
        assert!(prune.is_match(&prune_line(150)) && prune.is_match(&prune_line(350)));
        assert!(!prune.is_match(&prune_line(250)));
    }

    #[test]
    fn fenced_renders_leave_out_what_no_fence_restricts() {
        use crate::catalog::ops;
        let mut o = RenderOptions::new("zen-agent").unwrap();
        assert!(
            o.ops().any(|op| op == &ops::STORAGE_REMOVE),
            "unfenced: everything"
        );
        o.vmids = Some(Ranges::parse("--vmids", "100-199").unwrap());
        let ids: Vec<&str> = o.ops().map(|op| op.id).collect();
        for gone in [
            "task.stop",
            "storage.remove",
            "iso.download",
            "iso.remove",
            "template.download",
            "template.remove",
        ] {
            assert!(!ids.contains(&gone), "{gone} in a fenced render");
        }
        // Reads and per-guest changes stay.
        for kept in [
            "storage.list",
            "vm.start",
            "backup.remove",
            "backup.prune",
            "vm.create",
        ] {
            assert!(ids.contains(&kept), "{kept}");
        }
        let s = render(&o);
        assert!(!s.contains("^delete /storage/"), "{s}");
        assert!(
            s.contains(
                "#   task.stop, storage.remove, iso.download, iso.upload, iso.remove, template.download, template.remove"
            ),
            "{s}"
        );
        o.unfenced_ops = true;
        let s = render(&o);
        assert!(s.contains("^delete /storage/"), "{s}");
        assert!(s.contains("vmids 100-199, unfenced ops)"), "{s}");
        // --ct-exec alone is no VMID fence.
        let mut o = RenderOptions::new("zen-agent").unwrap();
        o.ct_exec = Some(Ranges::parse("--ct-exec", "200").unwrap());
        assert!(o.ops().any(|op| op == &ops::STORAGE_REMOVE));
    }

    #[test]
    fn container_restores_require_unprivileged() {
        use crate::catalog::ops;
        let o = RenderOptions::new("zen-agent").unwrap();
        let a = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";
        let re = rule_re(&o, &ops::BACKUP_RESTORE_CT);
        let with = format!(
            "create /nodes/pve1/lxc --vmid 210 --ostemplate {a} --restore 1 --unprivileged 1 --output-format json"
        );
        assert!(re.is_match(&with));
        for bad in [
            format!(
                "create /nodes/pve1/lxc --vmid 210 --ostemplate {a} --restore 1 --output-format json"
            ),
            format!(
                "create /nodes/pve1/lxc --vmid 210 --ostemplate {a} --restore 1 --unprivileged 0 --output-format json"
            ),
        ] {
            assert!(!re.is_match(&bad), "{bad}");
        }
        let over = rule_re(&o, &ops::BACKUP_RESTORE_CT_OVERWRITE);
        assert!(over.is_match(&format!("create /nodes/pve1/lxc --vmid 200 --ostemplate {a} --restore 1 --unprivileged 1 --force 1 --output-format json")));
        assert!(!over.is_match(&format!("create /nodes/pve1/lxc --vmid 200 --ostemplate {a} --restore 1 --force 1 --output-format json")));
    }

    #[test]
    fn container_exec_only_with_its_own_fence() {
        let mut o = RenderOptions::new("zen-agent").unwrap();
        let full = render(&o);
        assert!(!full.contains("/usr/sbin/pct ^exec"), "{full}");
        // VM exec through the guest agent is in full, not below.
        assert!(full.contains("/agent/exec --command .*( --input-data .*)? --output-format json$"));
        o.profile = Profile::Operator;
        assert!(!render(&o).contains("/agent/exec"));
        o.ct_exec = Some(Ranges::parse("--ct-exec", "200-299").unwrap());
        o.ctids = Some(Ranges::parse("--ctids", "200-999").unwrap());
        let s = render(&o);
        assert!(s.contains("/usr/sbin/pct ^exec (2[0-9]{2}) -- .*$"), "{s}");
        assert!(s.contains("ct-exec 200-299"), "{s}");
        assert!(!s.contains("/agent/exec"), "operator has no VM exec: {s}");
    }

    #[test]
    fn users_are_validated() {
        for bad in [
            "root",
            "Zen",
            "a;b",
            "a b",
            "$(id)",
            "",
            "-x",
            &"a".repeat(33),
        ] {
            assert_eq!(RenderOptions::new(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
        assert!(RenderOptions::new("zen_agent2").is_ok());
    }
}
