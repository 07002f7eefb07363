//! The risky-binaries tables (what each root-equivalent tool is and why) and the checks
//! that read them.

use super::*;

// --- Risky binaries ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Is, or starts, a shell.
    Shell,
    /// Its arguments are a program.
    Interpreter,
    /// Pagers and editors: `!sh`.
    PagerEditor,
    /// Runs other programs given as arguments or options.
    ExecEscape,
    /// Writes or changes files.
    FileWrite,
    /// Reads files.
    FileRead,
    Mount,
    Umount,
    Mkdir,
    /// Destroys disks.
    Disk,
    Package,
    Account,
}

impl Class {
    pub(super) fn code(self) -> &'static str {
        match self {
            Class::Shell => "shell",
            Class::Interpreter => "interpreter",
            Class::PagerEditor => "pager-editor",
            Class::ExecEscape => "exec-escape",
            Class::FileWrite => "file-write",
            Class::FileRead => "file-read",
            Class::Mount => "mount",
            Class::Umount => "umount",
            Class::Mkdir => "mkdir",
            Class::Disk => "disk-destroy",
            Class::Package => "package-manager",
            Class::Account => "account-admin",
        }
    }

    /// True when no argument constraint makes the binary safe.
    pub(super) fn always_error(self) -> bool {
        matches!(
            self,
            Class::Shell | Class::Interpreter | Class::PagerEditor | Class::Disk | Class::Account
        )
    }
}

pub(super) struct Risky {
    pub(super) names: &'static [&'static str],
    pub(super) class: Class,
    pub(super) how: &'static str,
}

/// Binaries that are root (or close) as a sudo rule — GTFOBins' usual suspects plus what
/// the published PVE setup uses. Versioned names (`python3.11`, `perl5.36`, `mkfs.ext4`,
/// `vim.basic`) resolve to their family in [`lookup_risky`].
#[rustfmt::skip] // a data table: one line per group reads better than one per name
pub(super) const RISKY: &[Risky] = &[
    Risky {
        names: &[
            "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "csh", "tcsh", "fish", "ash", "rbash", "busybox",
            "su", "sudo", "doas", "runuser", "login", "pkexec", "setpriv", "capsh", "script", "tmux", "screen",
            "machinectl",
        ],
        class: Class::Shell,
        how: "it is, or starts, a shell (`sudo -s`, `su -`, `script -c sh`, `machinectl shell`): root whatever \
              the arguments",
    },
    Risky {
        names: &[
            "python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "irb", "lua", "luajit", "node",
            "nodejs", "php", "tclsh", "wish", "expect", "Rscript", "julia", "guile",
        ],
        class: Class::Interpreter,
        how: "an interpreter runs whatever program its arguments name or contain (`python3 -c`, `perl -e`), and a \
              fixed script is only as safe as every file and module it loads",
    },
    Risky {
        names: &["awk", "gawk", "mawk", "nawk"],
        class: Class::Interpreter,
        how: "awk programs run commands: `awk 'BEGIN {system(\"/bin/sh\")}'`",
    },
    Risky {
        names: &["sed"],
        class: Class::Interpreter,
        how: "sed's `e` command runs a shell command and `w` writes any file (`sed -n '1e /bin/sh' /etc/hostname`)",
    },
    Risky { names: &["make"], class: Class::Interpreter, how: "make runs recipes: `make -f /dev/stdin` or `--eval`" },
    Risky { names: &["gdb"], class: Class::Interpreter, how: "gdb runs `!sh`, Python and any program it debugs" },
    Risky {
        names: &[
            "less", "more", "most", "pg", "man", "view", "vi", "vim", "nvim", "rvim", "rview", "vimdiff", "ex",
            "nano", "pico", "ed", "red", "emacs", "joe", "jed", "mcedit", "micro", "mc", "editor",
            "sensible-editor", "pager", "sensible-pager",
        ],
        class: Class::PagerEditor,
        how: "pagers run `!sh` and editors `:!sh` (or save over /etc/sudoers.d), whatever file they were opened on",
    },
    Risky {
        names: &["find"],
        class: Class::ExecEscape,
        how: "`find / -exec /bin/sh \\;` runs a shell, `-fprint` writes any file, `-delete` deletes",
    },
    Risky { names: &["xargs"], class: Class::ExecEscape, how: "`xargs sh -c …` runs any command" },
    Risky { names: &["env"], class: Class::ExecEscape, how: "`env /bin/sh` runs any program" },
    Risky {
        names: &[
            "nice", "nohup", "timeout", "stdbuf", "setsid", "taskset", "ionice", "chrt", "flock", "watch", "time",
            "run-parts", "start-stop-daemon", "systemd-run", "sg", "unbuffer", "busctl", "coredumpctl",
        ],
        class: Class::ExecEscape,
        how: "it runs another program named in its arguments (`nice /bin/sh`, `systemd-run sh`, `busctl call` into \
              systemd, `coredumpctl debug` → gdb)",
    },
    Risky {
        names: &["strace", "ltrace", "valgrind"],
        class: Class::ExecEscape,
        how: "it launches any program or attaches to any process (`strace -o /dev/null /bin/sh`)",
    },
    Risky {
        names: &["unshare", "nsenter", "chroot"],
        class: Class::ExecEscape,
        how: "`nsenter -t 1 -a sh`, `unshare sh` and `chroot / sh` start a root shell",
    },
    Risky {
        names: &["ip"],
        class: Class::ExecEscape,
        how: "`ip netns exec NAME sh` runs a root shell, and `ip link`/`ip route` rewire the host's network",
    },
    Risky {
        names: &["tar"],
        class: Class::ExecEscape,
        how: "`tar --to-command=sh` and `--checkpoint-action=exec=sh` run commands; `tar -x -C /` overwrites any file",
    },
    Risky { names: &["zip"], class: Class::ExecEscape, how: "`zip x.zip f -T -TT 'sh #'` runs a command" },
    Risky {
        names: &["rsync"],
        class: Class::ExecEscape,
        how: "`rsync -e 'sh -c …'` runs commands, and it overwrites any file",
    },
    Risky {
        names: &["ssh", "scp", "sftp"],
        class: Class::ExecEscape,
        how: "`ssh -o ProxyCommand=…`/`scp -S prog` run commands, and they read root's keys and any file and send \
              them off-host",
    },
    Risky {
        names: &["git"],
        class: Class::ExecEscape,
        how: "git runs a pager (`!sh`), hooks, and `-c core.pager=…`/`core.sshCommand=…` commands",
    },
    Risky {
        names: &["docker", "podman", "nerdctl", "ctr", "kubectl", "lxc", "lxc-attach", "lxc-execute", "lxc-start"],
        class: Class::ExecEscape,
        how: "`docker run -v /:/host …` or `lxc-attach` into a container is root on the host",
    },
    Risky {
        names: &["crontab", "at", "batch"],
        class: Class::ExecEscape,
        how: "`crontab -e` or `at` schedule any command as root",
    },
    Risky {
        names: &["socat", "nc", "ncat", "netcat", "telnet"],
        class: Class::ExecEscape,
        how: "`socat … EXEC:sh` or `nc -e sh` serve a root shell to the network",
    },
    Risky {
        names: &["sort"],
        class: Class::ExecEscape,
        how: "`sort --compress-program=sh` runs a command and `sort -o FILE` writes any file",
    },
    Risky {
        names: &["tee", "cp", "mv", "dd", "install", "ln", "truncate", "cpio", "patch", "unzip", "openssl"],
        class: Class::FileWrite,
        how: "it writes any file as root (`echo … | tee /etc/sudoers.d/x`, `cp`, `dd of=`, `unzip -o -d /`)",
    },
    Risky {
        names: &["chmod", "chown", "chgrp", "chattr", "setfacl"],
        class: Class::FileWrite,
        how: "it makes any file writable, or a shell setuid root",
    },
    Risky { names: &["rm", "shred", "unlink"], class: Class::FileWrite, how: "it deletes any file as root" },
    Risky {
        names: &["curl", "wget"],
        class: Class::FileWrite,
        how: "`curl -o /etc/sudoers.d/x URL` writes any file and `curl file:///etc/shadow` reads any file",
    },
    Risky {
        names: &[
            "cat", "head", "tail", "tac", "nl", "od", "hexdump", "xxd", "strings", "base64", "base32", "grep",
            "egrep", "fgrep", "rgrep", "zcat", "zgrep", "bzcat", "xzcat", "zstdcat", "diff", "cmp", "cut", "paste",
            "fold", "column", "uniq",
        ],
        class: Class::FileRead,
        how: "it reads files as root: /etc/shadow, or /etc/pve/priv/authkey.key, which signs cluster logins as \
              root@pam",
    },
    Risky {
        names: &["mount"],
        class: Class::Mount,
        how: "`mount --bind /tmp/x /etc` or a filesystem carrying a setuid shell is root",
    },
    Risky {
        names: &["umount"],
        class: Class::Umount,
        how: "it can pull storage out from under running guests and PVE itself (/etc/pve is a FUSE mount)",
    },
    Risky {
        names: &["mkdir"],
        class: Class::Mkdir,
        how: "it creates directories anywhere as root (root-owned `.d` directories services read)",
    },
    Risky {
        names: &["mkfs", "mkswap", "fdisk", "sfdisk", "gdisk", "sgdisk", "cfdisk", "parted", "wipefs", "blkdiscard"],
        class: Class::Disk,
        how: "it destroys disks and the storages and guests on them",
    },
    Risky {
        names: &["apt", "apt-get", "aptitude", "dpkg", "pip", "pip3", "npm", "gem", "snap", "pveupgrade"],
        class: Class::Package,
        how: "`apt-get install ./x.deb`/`dpkg -i` run maintainer scripts as root, `apt-get changelog` opens a pager, \
              `pveupgrade --shell` opens a shell",
    },
    Risky {
        names: &[
            "usermod", "useradd", "adduser", "userdel", "deluser", "passwd", "chpasswd", "gpasswd", "groupadd",
            "groupmod", "groupdel", "addgroup", "delgroup", "visudo", "vipw", "vigr", "chsh", "chfn", "chage",
            "newusers", "pveum",
        ],
        class: Class::Account,
        how: "it changes accounts or sudoers: a new uid-0 user, root's password, the agent in the sudo group, \
              `visudo` itself, or (pveum) an Administrator ACL",
    },
];

/// PVE programs outside the catalog's tools: over-broad rules on them are errors, fixed
/// arguments are left alone.
pub(super) const OTHER_PVE: &[(&str, &str)] = &[
    (
        "pve-firewall",
        "`pve-firewall stop` switches off the firewall of the host and every guest — a protection the agent has \
         no business removing",
    ),
    (
        "pvenode",
        "`pvenode cert set` replaces the node's TLS certificate and `pvenode config set` its ACME setup",
    ),
    (
        "pveceph",
        "`pveceph pool destroy`/`purge` destroy Ceph storage cluster-wide",
    ),
    (
        "pvesr",
        "`pvesr create-local-job`/`delete` move guest disks between nodes and drop replicas",
    ),
    ("pveupdate", "it runs apt as root"),
    (
        "pvesubscription",
        "it sets or deletes the subscription key and reaches out to the network",
    ),
    (
        "proxmox-boot-tool",
        "`proxmox-boot-tool format|init` rewrites boot partitions: it can brick the node",
    ),
    (
        "proxmox-backup-client",
        "`restore` writes any file as root and `backup` reads any file and sends it off-host",
    ),
    ("pvedaemon", "it stops and restarts the PVE API daemon"),
    ("pveproxy", "it stops and restarts the PVE web/API proxy"),
    (
        "pvereport",
        "it collects the whole host configuration, secrets included",
    ),
];

/// Low-impact tools, with what `*` still lets through.
pub(super) const GENERIC_NOTES: &[(&str, &str)] = &[
    (
        "du",
        "`du --files0-from=/etc/shadow` prints the file's lines in its error messages",
    ),
    (
        "blkid",
        "`blkid -c FILE` writes a cache file anywhere as root",
    ),
    (
        "ss",
        "`ss -K` kills sockets, the agent's own SSH and pveproxy's included",
    ),
    ("ping", "`ping -f` floods as root"),
    (
        "resolvectl",
        "`resolvectl dns LINK IP` redirects the host's DNS",
    ),
    ("ls", "`ls -la /root /etc/pve/priv` lists any directory"),
    (
        "hostnamectl",
        "`hostnamectl set-hostname` renames the node (breaks the PVE cluster)",
    ),
    (
        "timedatectl",
        "`timedatectl set-time` moves the clock (breaks tickets, TLS and corosync)",
    ),
    ("networkctl", "`networkctl down` takes links down"),
    ("kill", "it kills any process, the guests' kvm included"),
    ("pkill", "it kills any process, the guests' kvm included"),
    ("killall", "it kills any process, the guests' kvm included"),
    ("reboot", "it takes the whole node down"),
    ("shutdown", "it takes the whole node down"),
    ("poweroff", "it takes the whole node down"),
    ("lsblk", ""),
    ("df", ""),
    ("uname", ""),
    ("uptime", ""),
    ("free", ""),
];

pub(super) fn lookup_risky(base: &str) -> Option<&'static Risky> {
    let find = |n: &str| RISKY.iter().find(|r| r.names.contains(&n));
    let stem = base.split('.').next().unwrap_or(base);
    find(base)
        .or_else(|| find(stem))
        .or_else(|| find(stem.trim_end_matches(|c: char| c.is_ascii_digit())))
}

/// Paths whose writing is root (or bricks the host).
#[rustfmt::skip] // a data table: one line per group reads better than one per name
pub(super) const WRITE_TARGETS: &[&str] = &[
    "/etc/sudoers", "/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/cron", "/var/spool/cron",
    "/etc/systemd", "/lib/systemd", "/etc/init.d", "/etc/rc.local", "/etc/profile", "/etc/bash.bashrc",
    "/etc/environment", "/etc/ld.so", "/etc/pam.d", "/etc/security", "/etc/ssh", "/root", "/etc/pve", "/usr/",
    "/bin/", "/sbin/", "/lib/", "/boot", "/dev/", "/etc/apt", "/etc/modprobe.d", "/etc/udev", "/var/lib/vz/snippets",
];

/// Files whose reading is root (or leaks credentials).
#[rustfmt::skip] // a data table: one line per group reads better than one per name
pub(super) const SECRET_FILES: &[&str] = &[
    "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/pve/priv", ".key", "/root/", "/etc/ssh/ssh_host_",
    "/etc/corosync/authkey", "/var/lib/pve-cluster/config.db", "/home/",
];

/// Argument words that make an exec-capable binary run something.
#[rustfmt::skip] // a data table: one line per group reads better than one per name
pub(super) const EXEC_WORDS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "exec", "--to-command", "--checkpoint-action", "--use-compress-program",
    "--rsh", "ProxyCommand", "LocalCommand", "--compress-program",
];

/// How wide a rule's arguments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// No argument list, `*`, or a regex that swallows words / is not anchored.
    Open,
    /// `""`, literal arguments or a tight regex.
    Fixed,
}

pub(super) fn scope(args: &Args) -> Scope {
    match args {
        Args::Any | Args::Unterminated(_) | Args::EarlyDollar(..) => Scope::Open,
        Args::Empty => Scope::Fixed,
        Args::Glob(g) if has_star(g) => Scope::Open,
        Args::Glob(_) => Scope::Fixed,
        Args::Regex(r) => {
            let s = ere_shape(r);
            if s.top_alternation || !s.broad.is_empty() {
                Scope::Open
            } else {
                Scope::Fixed
            }
        }
    }
}

pub(super) fn check_risky(r: &Risky, args: &Args, display: &str) -> Vec<Finding> {
    let open = scope(args) == Scope::Open;
    let text = args.text();
    let words: Vec<&str> = text.split([' ', '=']).filter(|w| !w.is_empty()).collect();
    let runs_shell = words.iter().any(|w| {
        EXEC_WORDS.contains(w)
            || lookup_risky(basename(w))
                .is_some_and(|x| matches!(x.class, Class::Shell | Class::Interpreter))
    });
    let write_target = WRITE_TARGETS.iter().find(|p| text.contains(**p));
    let secret = SECRET_FILES.iter().find(|p| text.contains(**p));
    let (severity, note) = if r.class.always_error() {
        (Some(Severity::Error), String::new())
    } else {
        match r.class {
            Class::ExecEscape if open || runs_shell => (Some(Severity::Error), String::new()),
            Class::ExecEscape => (
                Some(Severity::Warning),
                "; these fixed arguments look harmless, but keep such binaries out of an agent's rules".into(),
            ),
            Class::FileWrite if open => (Some(Severity::Error), String::new()),
            Class::FileWrite => match write_target {
                Some(p) => (Some(Severity::Error), format!("; the arguments reach {p}")),
                None => (Some(Severity::Warning), "; the fixed arguments limit what it touches".into()),
            },
            Class::FileRead if open => (Some(Severity::Error), String::new()),
            Class::FileRead => match secret {
                Some(p) => (Some(Severity::Error), format!("; the arguments reach {p}")),
                None => (Some(Severity::Info), String::new()),
            },
            Class::Mount | Class::Package if open => (Some(Severity::Error), String::new()),
            Class::Mount | Class::Package => (Some(Severity::Warning), String::new()),
            Class::Umount | Class::Mkdir if open => (Some(Severity::Warning), String::new()),
            _ => (None, String::new()),
        }
    };
    let mut out = args_findings(args, display, false);
    if let Some(severity) = severity {
        let args_note = match args {
            Args::Any => " (no argument list: any arguments)",
            Args::Glob(g) if has_star(g) => " (`*` matches any arguments)",
            _ => "",
        };
        let fix = match r.class {
            Class::FileRead if severity == Severity::Info => {
                "Nothing to do if the file is harmless; pxagent reads host state through `pvesh get … \
                 --output-format json` instead."
            }
            Class::Umount | Class::Mkdir => FIX_PIN,
            _ => FIX_DROP,
        };
        let why = if r.class == Class::FileRead && severity == Severity::Info {
            format!(
                "`{display}` reads `{text}` as root: fine if that file holds no secrets (with open arguments \
                 the same rule would read /etc/shadow or /etc/pve/priv/authkey.key)"
            )
        } else {
            format!("`{display}`{args_note}: {}{note}", r.how)
        };
        out.push(finding(severity, r.class.code(), why, fix));
    }
    out
}

/// Any other binary: only over-broad arguments are reported, at `severity`.
pub(super) fn check_generic(
    args: &Args,
    display: &str,
    severity: Severity,
    hint: &str,
) -> Vec<Finding> {
    let hint = if hint.is_empty() {
        "low impact, but more than the agent needs".to_string()
    } else {
        hint.to_string()
    };
    let mut out = args_findings(args, display, false);
    match args {
        Args::Any => out.push(finding(
            severity,
            "unconstrained-args",
            format!("`{display}` has no argument list, and sudo reads that as \"any arguments\": {hint}"),
            FIX_PIN,
        )),
        Args::Glob(g) if has_star(g) => out.push(finding(
            severity,
            "wildcard-args",
            format!("`{display}`: sudo's `*` matches spaces, options and `--`, so any arguments pass: {hint}"),
            FIX_PIN,
        )),
        _ => {}
    }
    out
}

/// Findings about the argument list itself (regex quality, look-alike regexes).
/// `critical`: the binary is a PVE or systemd tool, where loose arguments are root.
pub(super) fn args_findings(args: &Args, display: &str, critical: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    match args {
        Args::Unterminated(r) => out.push(finding(
            Severity::Error,
            "regex-unterminated",
            format!(
                "`{display}`: arguments starting with `^` are a regex that must end with `$`; `{r}` has no `$`, \
                 so sudo rejects the line ('unterminated regular expression')"
            ),
            "End the regex with `$`.",
        )),
        Args::EarlyDollar(r, after) => out.push(finding(
            Severity::Error,
            "regex-early-dollar",
            format!(
                "`{display}`: sudo ends a regex argument at its first `$`, so the regex is `{r}` and `{after}` \
                 is left over: a syntax error (visudo rejects the file, sudo skips the rule); a `$` inside an \
                 alternation or a bracket does not do what it says"
            ),
            "Write one `$`, at the very end, and group alternatives: `^(a|b)$`; a literal dollar is `\\$`.",
        )),
        Args::Regex(r) => {
            if Regex::new(&ere_to_regex(r)).is_err() {
                out.push(finding(
                    Severity::Info,
                    "regex-unchecked",
                    format!("`{display}`: the linter could not evaluate this regex; review it by hand"),
                    "Keep argument regexes to plain POSIX ERE: literals, classes, groups, `|`, `?`, `{m,n}`.",
                ));
            }
            let shape = ere_shape(r);
            if shape.top_alternation {
                out.push(finding(
                    if critical { Severity::Error } else { Severity::Warning },
                    "regex-unanchored",
                    format!(
                        "`{display}`: in POSIX ERE `^a|b$` means `(^a)|(b$)` — each alternative is anchored at one \
                         end only, so the other end accepts anything, extra options included"
                    ),
                    "Group the alternatives: `^(a|b)$`.",
                ));
            }
            for atom in &shape.broad {
                out.push(finding(
                    Severity::Warning,
                    "regex-too-broad",
                    format!(
                        "`{display}`: `{atom}` {}",
                        if atom.starts_with('(') {
                            "repeats words that may start with `-`: extra options pass"
                        } else if atom.contains(' ') || atom.starts_with('.') || atom.contains("\\s") {
                            "can match spaces and dashes, so it takes in whole extra words, options included"
                        } else {
                            "can match both `-` and `=`, so one word can be a complete `--option=value`"
                        }
                    ),
                    "Use classes without space, `-`-first words and `=`, and bound them: `[1-9][0-9]{2,8}` for a \
                     VMID, `[a-z0-9][a-z0-9-]{0,62}` for a name.",
                ));
            }
        }
        Args::Glob(g) if looks_like_regex(g) => out.push(finding(
            Severity::Warning,
            "regex-not-anchored",
            format!(
                "`{display}`: sudo treats arguments as a regex only when they start with `^` (and end with `$`); \
                 these are matched as a glob, literally, so the rule probably never matches"
            ),
            "Write the regex as `^…$`.",
        )),
        _ => {}
    }
    out
}

pub(super) fn looks_like_regex(g: &str) -> bool {
    g.ends_with('$') || g.contains("]+") || g.contains("]{") || (g.contains('(') && g.contains('|'))
}
