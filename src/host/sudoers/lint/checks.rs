//! Command checks shared by `lint` and `check_command`: paths, the PVE tools against the
//! catalog, and the systemd/pager tools.

use super::*;

pub(super) fn check_item(item: &Item) -> Vec<Finding> {
    let mut out = chroot_findings(item);
    out.extend(check_cmnd(item));
    out
}

/// `CHROOT=DIR` before a command: sudo runs it inside that tree, so whoever can write there
/// chooses what `/usr/sbin/qm` is; `CHROOT=*` lets the caller pick the tree (`sudo -R DIR`).
fn chroot_findings(item: &Item) -> Vec<Finding> {
    item.options
        .iter()
        .filter(|(name, _)| *name == "CHROOT")
        .map(|(_, dir)| chroot_finding(&format!("CHROOT={dir} on `{}`", item.cmnd.display()), dir))
        .collect()
}

/// The finding for a chroot, from a rule's `CHROOT=` or `Defaults runchroot=`.
pub(super) fn chroot_finding(what: &str, dir: &str) -> Finding {
    finding(
        Severity::Error,
        "chroot",
        format!(
            "{what}: sudo changes root to {} before running the command, so the programs, libraries and \
             Perl modules it loads come from that tree{}",
            if dir == "*" {
                "a directory the caller names (`sudo -R DIR`, `--chroot=DIR`)"
            } else {
                "that directory"
            },
            if dir == "*" {
                ": the caller's own copy of the tool runs as root"
            } else {
                ": anyone who can write under it runs code as root, and PVE's tools do not work there anyway"
            }
        ),
        "Remove the chroot (`CHROOT=`, `runchroot=`); pxagent's rules need none.",
    )
}

fn check_cmnd(item: &Item) -> Vec<Finding> {
    let display = item.cmnd.display();
    if item.negated {
        return vec![finding(
            Severity::Info,
            "negated-command",
            format!(
                "`!{display}` only subtracts this exact path: a copy, a symlink or a shell still runs it, so a \
                 `!` exception never makes a broad rule safe"
            ),
            "List what is allowed instead of subtracting from a broad rule.",
        )];
    }
    match &item.cmnd {
        Cmnd::All => vec![finding(
            Severity::Error,
            "all-commands",
            "`ALL` as a command lets the account run anything as root: it is root, and so is \
             whoever holds its SSH key"
                .into(),
            "List only the commands the agent needs: `pxagent sudoers render` writes them.",
        )],
        // Expanded where the alias is defined.
        Cmnd::Alias(_) => Vec::new(),
        Cmnd::Sudoedit(args) => vec![finding(
            Severity::Error,
            "sudoedit",
            format!(
                "`{display}` lets the agent write {} as root: whatever reads the file trusts what the agent put \
                 there (sudo, cron, systemd, PAM, PVE and every shell read files under /etc), a glob or regex of \
                 paths reaches more files than it seems, and the agent needs to edit nothing",
                if matches!(args, Args::Glob(_) | Args::Regex(_) | Args::Empty) {
                    "these files"
                } else {
                    "any file"
                }
            ),
            "Drop sudoedit from the agent's rules; change configuration through PVE operations.",
        )],
        Cmnd::Path { path, args } => check_path(path, args, &display),
    }
}

pub(super) const STD_DIRS: [&str; 6] = [
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
];

pub(super) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub(super) fn check_path(path: &str, args: &Args, display: &str) -> Vec<Finding> {
    if path.starts_with('^') {
        return check_regex_path(path, args, display);
    }
    if !path.starts_with('/') {
        return vec![finding(
            Severity::Error,
            "relative-path",
            format!(
                "`{display}`: sudoers needs a fully-qualified path (visudo rejects `{path}`), and a rule that \
                 depends on PATH would never be safe"
            ),
            match Tool::from_name(basename(path)) {
                Some(t) => format!("Write `{}`.", t.path()),
                None => format!("Write the absolute path (`command -v {path}` on the host)."),
            },
        )];
    }
    if path.ends_with('/') || path.contains(['*', '?', '[']) {
        let shells = STD_DIRS
            .iter()
            .any(|d| glob_matches(path, &format!("{d}/bash")) || path == format!("{d}/"));
        return vec![finding(
            Severity::Error,
            "wildcard-path",
            format!(
                "`{display}` allows every program {}{}",
                if path.ends_with('/') {
                    "in that directory"
                } else {
                    "whose path matches the pattern"
                },
                if shells {
                    ", bash and python among them: root"
                } else {
                    ": review what can ever match"
                }
            ),
            "Name each binary by its full path.",
        )];
    }
    let base = basename(path);
    let mut out = Vec::new();
    if let Some(tool) = Tool::from_name(base) {
        out.extend(check_pve_tool(tool, path, args, display));
        return out;
    }
    let dir = &path[..path.len() - base.len()].trim_end_matches('/');
    if !STD_DIRS.contains(dir) {
        out.push(finding(
            Severity::Warning,
            "nonstandard-path",
            format!(
                "`{path}` is outside the system binary directories: if the agent can write the file or any \
                 directory above it, it can replace the program and run anything as root"
            ),
            "Keep allowed programs root-owned under /usr/bin or /usr/sbin (or /usr/local/{s,}bin, root-owned).",
        ));
    }
    out.extend(match base {
        "systemctl" => check_systemctl(args, display),
        "journalctl" => check_journalctl(args, display),
        "dmesg" => check_dmesg(args, display),
        b if SYSTEMD_PAGERS.contains(&b) => check_systemd_pager(b, args, display),
        _ => match lookup_risky(base) {
            Some(r) => check_risky(base, r, args, display),
            None => match OTHER_PVE.iter().find(|o| o.name == base) {
                Some(o) => check_other_pve(o, args, display),
                None => {
                    let hint = GENERIC_NOTES
                        .iter()
                        .find(|(n, _)| *n == base)
                        .map_or("", |(_, h)| *h);
                    check_generic(args, display, Severity::Warning, hint)
                }
            },
        },
    });
    out
}

pub(super) fn check_regex_path(path: &str, args: &Args, display: &str) -> Vec<Finding> {
    let matcher = Regex::new(&ere_to_regex(path)).ok();
    let mut matched: Vec<String> = Vec::new();
    if let Some(m) = &matcher {
        for cand in known_paths() {
            if m.is_match(cand) && !matched.iter().any(|p| basename(p) == basename(cand)) {
                matched.push(cand.clone());
            }
        }
    }
    let mut out = vec![finding(
        Severity::Warning,
        "regex-path",
        format!(
            "`{display}`: a regex as the command path is hard to review and may match more programs than meant{}",
            match (&matcher, matched.is_empty()) {
                (None, _) => " (the linter could not evaluate it)".to_string(),
                (Some(_), true) => String::new(),
                (Some(_), false) => format!(" (it matches {})", matched.join(", ")),
            }
        ),
        "Write one rule per binary with its literal path; pxagent renders literal paths only.",
    )];
    for p in &matched {
        out.extend(check_path(
            p,
            args,
            format!("{p} {}", args.text()).trim_end(),
        ));
    }
    out
}

/// Every path the linter has an opinion about, for judging regex command paths.
pub(super) fn known_paths() -> &'static [String] {
    static PATHS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        names.extend(RISKY.iter().flat_map(|r| r.names.iter().copied()));
        names.extend(OTHER_PVE.iter().map(|o| o.name));
        names.extend(GENERIC_NOTES.iter().map(|(n, _)| *n));
        names.extend(["systemctl", "journalctl", "dmesg"]);
        names.extend(SYSTEMD_PAGERS.iter().copied());
        let mut out: Vec<String> = Tool::ALL.iter().map(|t| t.path().to_string()).collect();
        for n in names {
            out.extend(STD_DIRS.iter().map(|d| format!("{d}/{n}")));
        }
        out
    });
    &PATHS
}

// --- PVE tools --------------------------------------------------------------------------

/// Why an unconstrained PVE tool is root, and command lines that prove it. A rule whose
/// arguments admit any probe is root-equivalent. Probes list only abuse, never operations
/// pxagent's catalog performs (stop, destroy, storage remove … are confirm-class ops).
pub(super) struct ToolRisk {
    pub(super) tool: Tool,
    pub(super) why: &'static str,
    pub(super) probes: &'static [&'static str],
}

pub(super) const TOOL_RISKS: [ToolRisk; 11] = [
    ToolRisk {
        tool: Tool::Qm,
        why: "qm is root in a few words: `qm set N --hookscript local:snippets/x.pl` runs a script as root at the \
              guest's next start, `qm set N --args …` passes raw arguments to QEMU (which runs as root), \
              `qm monitor N` reaches the QEMU monitor where `migrate \"exec:…\"` runs any shell command, and \
              `qm guest exec` runs commands inside guests",
        probes: &[
            "monitor 100",
            "set 100 --hookscript local:snippets/x.pl",
            "set 100 --hookscript=local:snippets/x.pl",
            "set 100 --args -x",
            "set 100 --args=-x",
            "create 100 --hookscript local:snippets/x.pl",
            "guest exec 100 -- sh",
            "guest exec 100 sh",
            "importdisk 100 /etc/shadow local",
            "disk import 100 /etc/shadow local",
        ],
    },
    ToolRisk {
        tool: Tool::Pct,
        why: "pct is root in a few words: `pct exec N -- sh` and `pct enter N` give a shell in the container \
              (in a privileged one, root on the host), `pct push`/`pct pull` copy host files in and out as root \
              (`pct pull N /x /etc/sudoers.d/x`), `pct set N --mp0 /,mp=/host` bind-mounts the host's root into a \
              container, and `--hookscript` runs a script as root",
        probes: &[
            "enter 100",
            "exec 100 -- sh",
            "exec 100 sh",
            "console 100",
            "push 100 /etc/shadow /tmp/s",
            "pull 100 /tmp/x /etc/sudoers.d/x",
            "set 100 --mp0 /,mp=/mnt/host",
            "set 100 --mp0=/,mp=/mnt/host",
            "set 100 --hookscript local:snippets/x.pl",
            "set 100 --hookscript=local:snippets/x.pl",
            "restore 100 /tmp/x.tar",
        ],
    },
    ToolRisk {
        tool: Tool::Pvesh,
        why: "pvesh is the whole PVE API as root@pam, on every node of the cluster: \
              `pvesh set /access/password --userid root@pam …` sets root's password, \
              `pvesh set /access/acl --path / --roles Administrator …` makes anyone an administrator, \
              `pvesh create /nodes/N/termproxy` opens a root shell, and guest config endpoints take hookscripts \
              and bind mounts",
        probes: &[
            "set /access/password --userid root@pam --password x",
            "set /access/acl --path / --roles Administrator --users x@pve",
            "create /access/users --userid x@pve",
            "create /nodes/pve/termproxy",
            "create /nodes/pve/vncshell",
            "create /nodes/pve/execute --commands x",
            "create /nodes/pve/qemu/100/monitor --command x",
            "set /nodes/pve/qemu/100/config --hookscript local:snippets/x.pl",
            "create /nodes/pve/qemu/100/config --hookscript local:snippets/x.pl",
            "set /nodes/pve/lxc/100/config --mp0 /,mp=/mnt/host",
            "create /cluster/config/join --hostname x --fingerprint x --password x",
        ],
    },
    ToolRisk {
        tool: Tool::Pvesm,
        why: "`pvesm add dir X --path / --content snippets,images` turns any host directory into a storage (then \
              hookscripts, and `pvesm export`/`import` read and write any file there), and `pvesm set` rewires \
              existing storages",
        probes: &[
            "add dir x --path / --content snippets",
            "add dir x --path=/ --content=snippets",
            "set local --path /",
            "set local --content snippets",
            "export local:100/vm-100-disk-0.raw raw+size /etc/sudoers.d/x",
            "import local:100/vm-100-disk-0.raw raw+size /etc/shadow",
        ],
    },
    ToolRisk {
        tool: Tool::Vzdump,
        why: "`vzdump N --script /path` runs any program as root (as a hook script), `--dumpdir`/`--tmpdir` write \
              into any directory, and `--stdout` streams any guest's disks to the caller",
        probes: &[
            "100 --script /tmp/x",
            "100 --script=/tmp/x",
            "100 --dumpdir /etc",
            "100 --tmpdir /etc",
            "100 --stdout",
            "100 --stdout 1",
            "--all 1 --script /tmp/x",
            "100 --storage local --script /tmp/x",
            "100 --storage local --mode snapshot --script /tmp/x",
        ],
    },
    ToolRisk {
        tool: Tool::Qmrestore,
        why: "`qmrestore ARCHIVE N` restores any archive, one the caller crafted included, over any VMID \
              (`--force` overwrites an existing guest); the archive's config can carry a hookscript or raw QEMU \
              `args:`, which run as root at the next start",
        probes: &[
            "/tmp/x.vma 100",
            "/tmp/x.vma 100 --force 1",
            "/tmp/x.vma.zst 100",
        ],
    },
    ToolRisk {
        tool: Tool::Pveam,
        why: "`pveam download STORAGE TEMPLATE` writes into any storage, `pveam remove` deletes templates and \
              `pveam update` refreshes the appliance index as root; not a shell by itself, but far more than a \
              fixed download needs",
        probes: &[],
    },
    ToolRisk {
        tool: Tool::HaManager,
        why: "ha-manager acts on the whole cluster: `ha-manager set vm:N --state stopped|disabled`, `remove`, \
              `crm-command migrate|relocate` and `crm-command node-maintenance enable` stop or move every HA guest, \
              and HA recovery can fence (hard-reset) nodes; not a root shell, but cluster-wide disruption from one \
              account",
        probes: &[],
    },
    ToolRisk {
        tool: Tool::Pvecm,
        why: "`pvecm add HOST` joins this node to a cluster the caller controls, which then owns it as root; \
              `pvecm delnode` removes nodes and `pvecm expected 1` forces quorum (split brain)",
        probes: &[
            "add 10.0.0.1",
            "add 10.0.0.1 --force",
            "add 10.0.0.1 --force 1",
        ],
    },
    ToolRisk {
        tool: Tool::QemuImg,
        why: "`qemu-img convert -f raw -O raw /tmp/x /etc/sudoers.d/x` writes any file as root, and \
              `qemu-img info`/`convert`/`dd` read any file (/etc/shadow, /etc/pve/priv/authkey.key)",
        probes: &[
            "convert -O raw /tmp/x /etc/sudoers.d/x",
            "convert -f raw -O raw /tmp/x /etc/sudoers.d/x",
            "dd if=/tmp/x of=/etc/sudoers.d/x",
            "create -f raw /etc/sudoers.d/x 1M",
            "info /etc/shadow",
        ],
    },
    ToolRisk {
        tool: Tool::Helper,
        why: "pxagent's own root-side helper takes one command line only (`iso-receive --max-used N STORAGE NAME \
              SIZE SHA256`, checked again by itself) and writes one new ISO file, of exactly the bytes declared, \
              into a directory storage's template/iso; not a shell, but a rule wider than the catalog's lets the \
              account choose a looser fill limit",
        probes: &[],
    },
];

pub(super) fn tool_risk(tool: Tool) -> &'static ToolRisk {
    TOOL_RISKS
        .iter()
        .find(|r| r.tool == tool)
        .expect("every Tool has a ToolRisk (tested)")
}

/// Merged /usr (PVE 8 and 9): /bin is /usr/bin and /sbin is /usr/sbin, and sudo also
/// matches a rule's path by inode, so `/sbin/qm` works; `/usr/bin/qm` does not exist.
pub(super) fn merged_usr(path: &str) -> String {
    for (from, to) in [("/bin/", "/usr/bin/"), ("/sbin/", "/usr/sbin/")] {
        if let Some(rest) = path.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    path.to_string()
}

pub(super) fn check_pve_tool(tool: Tool, path: &str, args: &Args, display: &str) -> Vec<Finding> {
    // pxagent's own exec rules carry a guest's argv by design: `.*` after a pinned
    // prefix (verb, endpoint, fenced VMID). Say what they grant instead of "over-broad".
    if let (Args::Regex(r), true) = (args, path == tool.path())
        && let Some(op) = own_exec_op(tool, r)
    {
        let (severity, what) = match op.area {
            crate::catalog::Area::Ct => (
                Severity::Warning,
                "root inside these containers (close to host root in a privileged one; pxagent refuses those unless its policy allows them)",
            ),
            _ => (
                Severity::Info,
                "root inside these VMs through their guest agent, nothing on the host",
            ),
        };
        return vec![finding(
            severity,
            "guest-exec",
            format!(
                "`{display}` is pxagent's {} rule: it runs commands as {what}",
                op.id
            ),
            "Keep it only if agents need commands inside guests; pxagent rate-limits them and checks its policy's command allowlist.",
        )];
    }
    // pxagent's own rules that change the host itself by design, each fenced its own way
    // ([`OWN_HOST_OPS`]): reported as what they are, not as the danger their tool's paths carry.
    if let (Args::Regex(r), true) = (args, path == tool.path())
        && let Some((own, op)) = OWN_HOST_OPS.iter().find_map(|own| {
            own.ops
                .iter()
                .find(|op| op.tool == tool && op.args_regex(None) == *r)
                .map(|op| (own, op))
        })
    {
        return vec![finding(
            Severity::Info,
            own.code,
            format!("`{display}` is pxagent's {} rule: {}", op.id, own.what),
            own.fix,
        )];
    }
    let risk = tool_risk(tool);
    let name = tool.name();
    let mut out = Vec::new();
    if merged_usr(path) != tool.path() {
        out.push(finding(
            Severity::Error,
            "wrong-path",
            format!(
                "`{path}` does not exist on PVE 8/9 ({name} is {}): sudo never matches this rule, so it is dead \
                 and the agent gets 'sudo: a password is required'",
                tool.path()
            ),
            format!("Write `{}`.", tool.path()),
        ));
    } else if path != tool.path() {
        out.push(finding(
            Severity::Info,
            "noncanonical-path",
            format!(
                "`{path}` works on merged-/usr hosts (sudo matches it by inode), but pxagent runs `{}`",
                tool.path()
            ),
            format!("Write `{}`.", tool.path()),
        ));
    }
    match args {
        Args::Any => out.push(finding(
            Severity::Error,
            "unconstrained-args",
            format!(
                "`{display}` has no argument list, and sudo reads that as \"any arguments\": every {name} command \
                 line is allowed. {}",
                risk.why
            ),
            FIX_RENDER,
        )),
        Args::Glob(g) if has_star(g) => out.push(finding(
            Severity::Error,
            "wildcard-args",
            format!(
                "`{display}`: sudo's `*` matches spaces, options and `--`, so this allows any {name} command line. {}",
                risk.why
            ),
            FIX_RENDER,
        )),
        _ => {
            out.extend(args_findings(args, display, true));
            let probes: Vec<String> = risk
                .probes
                .iter()
                .flat_map(|p| {
                    // pvesh rules usually pin the output format at the end.
                    let tails: &[&str] = if tool == Tool::Pvesh {
                        &["", " --output-format json", " --output-format=json"]
                    } else {
                        &[""]
                    };
                    tails.iter().map(move |t| format!("{p}{t}"))
                })
                .collect();
            let hits = admitted(args, &probes);
            let (found, decided) = match admitted_dangers(tool, args) {
                Some(found) => (found, true),
                None => (Vec::new(), false),
            };
            let (errors, warnings): (Vec<_>, Vec<_>) =
                found.iter().partition(|(d, _)| d.severity == Severity::Error);
            let line = |w: &str| format!("`{name} {}`", crate::base::text::printable(w));
            if !hits.is_empty() || !errors.is_empty() {
                let mut shown: Vec<String> = hits.iter().take(3).map(|h| line(h)).collect();
                for (_, w) in &errors {
                    if shown.len() >= 3 {
                        break;
                    }
                    shown.push(line(w));
                }
                let mut whats: Vec<&str> = Vec::new();
                for (d, _) in &errors {
                    if !whats.contains(&d.what) {
                        whats.push(d.what);
                    }
                }
                // The specific reasons when the danger tables found them, else the tool's.
                let why = if whats.is_empty() {
                    format!("`{display}` still admits {}. {}", shown.join(", "), risk.why)
                } else {
                    format!("`{display}` still admits {}: {}", shown.join(", "), whats.join("; "))
                };
                out.push(finding(Severity::Error, "pve-dangerous-args", why, FIX_RENDER));
            }
            for (d, w) in warnings {
                out.push(finding(
                    Severity::Warning,
                    "pve-disruptive",
                    format!("`{display}` admits {}: it {}", line(w), d.what),
                    "Leave node power, mass guest actions and PVE's services to people; pxagent has no op for them.",
                ));
            }
            if !decided {
                out.push(finding(
                    Severity::Warning,
                    "regex-unchecked",
                    format!(
                        "`{display}`: the linter could not decide which {name} command lines this rule admits \
                         (the automata outgrew their budget); review it by hand"
                    ),
                    FIX_RENDER,
                ));
            }
        }
    }
    out
}

/// A family of pxagent's own rules that change the host itself (see [`check_pve_tool`]).
struct OwnHostOps {
    ops: &'static [&'static crate::catalog::Op],
    code: &'static str,
    /// What the rule does, after "is pxagent's OP rule: ".
    what: &'static str,
    fix: &'static str,
}

const OWN_HOST_OPS: &[OwnHostOps] = &[
    // The node's pending network change, by design exactly these lines and a new bridge
    // `vmbrN` only; it takes effect only through the helper's apply, which the host reverts
    // unless pxagent reaches it again.
    OwnHostOps {
        ops: &[
            &crate::catalog::ops::BRIDGE_CREATE,
            &crate::catalog::ops::BRIDGE_REMOVE,
            &crate::catalog::ops::NETWORK_REVERT,
        ],
        code: "host-network",
        what: "it changes the node's pending network configuration                  (a bridge vmbr1-vmbr9999 only, never vmbr0 or a NIC), which takes effect only through                  `network apply`, reverted by the host unless pxagent reaches it again",
        fix: "Keep it only if agents manage bridges; the apply needs its phrase.",
    },
    // The hosts' own firewall rules: a fixed shape, each behind its phrase, and refused by the
    // client and the gate when it would drop the SSH connection pxagent comes over.
    OwnHostOps {
        ops: &[
            &crate::catalog::ops::NODE_FIREWALL_ADD,
            &crate::catalog::ops::NODE_FIREWALL_REMOVE,
            &crate::catalog::ops::CLUSTER_FIREWALL_ADD,
            &crate::catalog::ops::CLUSTER_FIREWALL_REMOVE,
        ],
        code: "host-firewall",
        what: "it adds or removes one rule of the hosts' own firewall (direction, action, protocol, ports, addresses; never a macro, an interface or a security group), each with its phrase; pxagent and its gate refuse a rule that drops their own SSH connection",
        fix: "Keep it only if agents manage the hosts' firewall.",
    },
];

/// The catalog exec op whose rendered rule (with any VMID fence) this regex is.
pub(super) fn own_exec_op(tool: Tool, regex: &str) -> Option<&'static crate::catalog::Op> {
    const SENTINEL: &str = "PXAVMIDFENCE";
    crate::catalog::OPS
        .iter()
        .copied()
        .filter(|op| op.risk == crate::catalog::Risk::Exec && op.tool == tool)
        .find(|op| {
            let escaped = ::regex::escape(&op.args_regex(Some(SENTINEL))).replace(
                &format!(r"\({SENTINEL}\)"),
                r"(?:\[1-9\]\[0-9\]\{2,8\}|\([0-9\[\]{}|-]+\))",
            );
            Regex::new(&format!("^{escaped}$")).is_ok_and(|re| re.is_match(regex))
        })
}
