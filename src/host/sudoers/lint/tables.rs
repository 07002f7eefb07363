//! The risky-binaries tables: what each root-equivalent tool is and why, the PVE programs
//! outside the catalog, low-impact tools, and the argument languages that make a fixed rule
//! dangerous (an exec option, a write under /etc, a secret read). `binaries.rs` reads them.

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
    /// Storage administration: ZFS, LVM, device mapper, loop devices, RAID, iSCSI.
    Storage,
    /// Kernel modules and parameters.
    Kernel,
    /// Sends signals to any process.
    Kill,
    /// A machine emulator run directly (QEMU as root).
    Emulator,
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
            Class::Storage => "storage-admin",
            Class::Kernel => "kernel-admin",
            Class::Kill => "process-kill",
            Class::Emulator => "emulator",
        }
    }

    /// True when no argument constraint makes the binary safe.
    pub(super) fn always_error(self) -> bool {
        matches!(
            self,
            Class::Shell
                | Class::Interpreter
                | Class::PagerEditor
                | Class::Disk
                | Class::Account
                | Class::Emulator
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
    Risky {
        names: &["run0", "sudoreplay"],
        class: Class::Shell,
        how: "`run0` is systemd's sudo (a root shell), and `sudoreplay` replays every account's I/O logs, \
              passwords typed into them included, and drops into their sessions' output",
    },
    Risky {
        names: &["nmap", "bpftrace", "perf", "tshark"],
        class: Class::Interpreter,
        how: "it runs scripts or programs as root: `nmap --script` (Lua), `bpftrace -e 'BEGIN { system(…) }'`, \
              `perf record -- sh`, `tshark -X lua_script:…`",
    },
    Risky {
        names: &["zless", "zmore", "bzless", "bzmore", "xzless", "xzmore", "lessfile", "lesspipe"],
        class: Class::PagerEditor,
        how: "pagers run `!sh`",
    },
    Risky {
        names: &[
            "tcpdump", "dumpcap", "logrotate", "ifup", "ifdown", "ifreload", "ifquery", "systemd-nspawn", "dbus-send",
            "gdbus", "aria2c", "parallel", "rlwrap", "vncterm", "spiceterm", "termproxy", "dtach", "update-grub",
            "update-initramfs", "ansible", "ansible-playbook", "puppet", "salt-call", "chef-client", "hg", "svn",
        ],
        class: Class::ExecEscape,
        how: "it runs commands it is given: `tcpdump -z CMD` after each capture file, `logrotate FILE` and \
              `ifup -i FILE` the scripts in the file, `systemd-nspawn -D /` a root shell, `dbus-send` calls into \
              systemd, `termproxy`/`vncterm -c` a terminal program, configuration management anything",
    },
    Risky {
        names: &[
            "iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy", "iptables-nft", "ip6tables-nft",
            "iptables-restore", "ip6tables-restore", "ebtables", "arptables", "nft", "service", "invoke-rc.d",
            "update-rc.d",
        ],
        class: Class::ExecEscape,
        how: "`iptables --modprobe=PROG` runs a program as root and the firewall tools take the host's and every \
              guest's network down; `service ../../bin/sh` (a path for a service name) is a root shell",
    },
    Risky {
        names: &["setcap", "update-alternatives", "vma", "bsdtar", "7z", "7za", "gpg", "tar-split", "ar"],
        class: Class::FileWrite,
        how: "it writes files as root or gives them powers: `setcap cap_setuid+ep` on a copy of a shell, \
              `update-alternatives --install` over a system binary, `vma extract` and archive tools writing \
              anywhere",
    },
    Risky {
        names: &["pv", "exiftool", "nl", "look", "rev", "comm", "join", "csplit", "split", "iconv"],
        class: Class::FileRead,
        how: "it reads files as root: /etc/shadow, or /etc/pve/priv/authkey.key, which signs cluster logins as \
              root@pam",
    },
    Risky {
        names: &["exportfs", "mount.nfs", "mount.cifs", "fusermount", "fusermount3", "sshfs", "bindfs"],
        class: Class::Mount,
        how: "`exportfs -o rw,no_root_squash '*:/'` exports the host's root filesystem, and the mount helpers \
              mount anything anywhere",
    },
    Risky {
        names: &["efibootmgr", "grub-install", "grub-editenv", "hdparm", "nvme", "dmraid", "zerofree"],
        class: Class::Disk,
        how: "it rewrites boot entries, boot loaders or disks (`nvme format`, `hdparm --security-erase`)",
    },
    Risky {
        names: &["dpkg-reconfigure", "debconf-set-selections", "add-apt-repository", "apt-key", "unattended-upgrade",
                 "apt-mark"],
        class: Class::Package,
        how: "it runs maintainer scripts as root or adds package sources the next upgrade installs from",
    },
    Risky {
        names: &[
            "zfs", "zpool", "zdb", "lvm", "lvcreate", "lvremove", "lvchange", "lvextend", "lvreduce", "lvresize",
            "lvrename", "lvconvert", "vgcreate", "vgremove", "vgchange", "vgextend", "vgreduce", "vgrename",
            "vgimport", "vgexport", "vgcfgrestore", "vgmerge", "vgsplit", "pvcreate", "pvremove", "pvchange",
            "pvmove", "pvresize", "dmsetup", "losetup", "mdadm", "cryptsetup", "multipath", "iscsiadm", "kpartx",
            "partprobe", "blockdev",
        ],
        class: Class::Storage,
        how: "it administers the host's storage, every guest's disks on it: `zfs set mountpoint=/etc`, `zfs send` \
              of any guest, `lvremove`/`zfs destroy` of guest volumes, `lvcreate -s` or `losetup` and a mount of \
              another guest's disk",
    },
    Risky {
        names: &["modprobe", "insmod", "rmmod", "depmod", "kmod", "sysctl", "kexec", "bpftool"],
        class: Class::Kernel,
        how: "it changes the running kernel: `modprobe -C FILE` runs the file's `install` commands, `insmod` \
              loads any module, `sysctl kernel.core_pattern='|/tmp/x'` runs a program at the next crash, \
              `kexec` boots another kernel",
    },
    Risky {
        names: &["kill", "pkill", "killall", "killall5", "skill", "snice", "fuser"],
        class: Class::Kill,
        how: "it signals any process as root: every guest's kvm, pmxcfs (/etc/pve), corosync, sshd",
    },
    Risky {
        names: &["kvm", "qemu-kvm", "qemu-nbd", "qemu-io", "qemu-storage-daemon", "swtpm"],
        class: Class::Emulator,
        how: "QEMU run directly as root takes `-monitor stdio` (`migrate \"exec:…\"` runs any command), \
              `-drive file=/dev/sda` and host devices; qemu-nbd, qemu-io and qemu-storage-daemon read and write \
              any file or disk",
    },
];

/// Name prefixes of binary families, with a member whose [`RISKY`] entry they share.
pub(super) const FAMILIES: &[(&str, &str)] = &[
    ("qemu-system-", "kvm"),
    ("qemu-", "kvm"),
    ("lxc-", "lxc-attach"),
];

/// A PVE program outside the catalog's tools.
pub(super) struct OtherPve {
    pub(super) name: &'static str,
    /// Why an over-broad rule on it is an error.
    pub(super) how: &'static str,
    /// The command lines (whole argument line, `regex` syntax) that are dangerous even when
    /// written out in full; `""` when fixed arguments are fine.
    pub(super) danger: &'static str,
}

/// PVE programs outside the catalog's tools: over-broad rules on them are errors, and so are
/// rules admitting their dangerous subcommands; other fixed arguments are left alone.
#[rustfmt::skip] // a data table: one entry per program
pub(super) const OTHER_PVE: &[OtherPve] = &[
    OtherPve {
        name: "pve-firewall",
        how: "`pve-firewall stop` switches off the firewall of the host and every guest — a protection the agent \
              has no business removing",
        danger: "(?:stop|localnet)(?: .*)?",
    },
    OtherPve {
        name: "pvenode",
        how: "`pvenode cert set` replaces the node's TLS certificate, `pvenode acme` runs ACME plugins (scripts) \
              and `pvenode config set` rewires the node; `startall`/`stopall`/`migrateall` act on every guest",
        danger: "(?:cert|acme|config|startall|stopall|migrateall|wakeonlan)(?: .*)?",
    },
    OtherPve {
        name: "pveceph",
        how: "`pveceph pool destroy`/`purge` destroy Ceph storage cluster-wide",
        danger: "(?:(?:pool|osd|mon|mds|mgr|fs) (?:destroy|create|set)|purge|install|init|createosd|destroyosd)(?: .*)?",
    },
    OtherPve {
        name: "pvesr",
        how: "`pvesr create-local-job`/`delete` move guest disks between nodes and drop replicas",
        danger: "(?:create-local-job|delete|update|enable|disable|set-state|finalize-local-job|prepare-local-job|run|schedule-now)(?: .*)?",
    },
    OtherPve { name: "pveupdate", how: "it runs apt as root", danger: "" },
    OtherPve {
        name: "pvesubscription",
        how: "it sets or deletes the subscription key and reaches out to the network",
        danger: "(?:set|delete|update)(?: .*)?",
    },
    OtherPve {
        name: "proxmox-boot-tool",
        how: "`proxmox-boot-tool format|init` rewrites boot partitions: it can brick the node",
        danger: "(?:format|init|clean|reinit|refresh|kernel)(?: .*)?",
    },
    OtherPve {
        name: "pve-efiboot-tool",
        how: "`pve-efiboot-tool format|init` rewrites boot partitions: it can brick the node",
        danger: "(?:format|init|clean|reinit|refresh|kernel)(?: .*)?",
    },
    OtherPve {
        name: "proxmox-backup-client",
        how: "`restore` writes any file as root and `backup` reads any file and sends it off-host",
        danger: "(?:restore|backup|mount|map|catalog)(?: .*)?",
    },
    OtherPve { name: "pvedaemon", how: "it stops and restarts the PVE API daemon", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "pveproxy", how: "it stops and restarts the PVE web/API proxy", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "spiceproxy", how: "it stops and restarts the SPICE proxy", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "pvestatd", how: "it stops and restarts PVE's status daemon", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "pvescheduler", how: "it stops and restarts the backup and replication scheduler", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "pve-ha-crm", how: "it stops the HA cluster manager (HA guests are no longer recovered)", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "pve-ha-lrm", how: "it stops the HA resource manager (the watchdog can fence the node)", danger: "(?:stop|restart|start)(?: .*)?" },
    OtherPve { name: "pvereport", how: "it collects the whole host configuration, secrets included", danger: ".*" },
    OtherPve { name: "pmxcfs", how: "a second pmxcfs (`-l`, local mode) takes /etc/pve out of the cluster", danger: ".*" },
    OtherPve { name: "corosync-keygen", how: "it replaces the cluster's corosync key: the node drops out", danger: ".*" },
    OtherPve {
        name: "corosync-cfgtool",
        how: "it reloads, kills or reconfigures corosync: the cluster's membership",
        danger: ".*",
    },
    OtherPve {
        name: "corosync-quorumtool",
        how: "it changes votes and expected votes: forced quorum, split brain",
        danger: "(?:.* )?-[A-Za-z]*[evomfx](?: .*)?",
    },
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
        .or_else(|| {
            FAMILIES
                .iter()
                .find(|(prefix, _)| base.starts_with(prefix) && base.len() > prefix.len())
                .and_then(|(_, member)| find(member))
        })
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

/// Argument lines (whole line, `regex` syntax) that make a binary with fixed-looking
/// arguments run something, by binary name: a rule admitting one is an error however its
/// arguments are written (`^/var/log -name [a-z]+( -[a-z]+)?$` admits `-delete`).
#[rustfmt::skip] // a data table: one line per binary family
pub(super) const ARG_DANGERS: &[(&[&str], &str)] = &[
    (&["find"], r"(?:.* )?-(?:exec|execdir|ok|okdir|fprint|fprint0|fprintf|fls|delete)(?: .*)?"),
    (&["rsync"], r"(?:.* )?(?:-[A-Za-z]*e|--rsh|--rsync-path)(?:=| ).*"),
    (&["tar", "bsdtar"], r"(?:.* )?(?:--to-command|--checkpoint-action|--use-compress-program|--info-script|--new-volume-script|-I|-F)(?:=| ).*"),
    (&["git", "hg"], r"(?:.* )?(?:-c|--config|--config-env|--exec-path|-p|--paginate)(?:=| |$).*|(?:(?:-C|--git-dir|--work-tree|-R|--cwd) [^ ]+ )*(?:log|show|diff|help|blame|grep|branch|tag|config|shortlog|reflog|whatchanged|stash|annotate|cat)(?: .*)?"),
    (&["tcpdump", "dumpcap", "tshark"], r"(?:.* )?-[A-Za-y]*z.*|(?:.* )?-[A-Za-z]*w ?(?:/etc/|/root/|/usr/|/bin/|/sbin/|/lib/|/boot/|/var/spool/cron|/dev/|/var/lib/vz/snippets)[^ ]*(?: .*)?"),
    (&["sort"], r"(?:.* )?--compress-program(?:=| ).*"),
    (&["zip"], r"(?:.* )?(?:-TT|--unzip-command)(?:=| ).*"),
    (&["ssh", "scp", "sftp"], r"(?:.* )?(?:-o|-F|-S)(?: |[^ ]).*"),
    (&["ifup", "ifdown", "ifreload", "ifquery"], r"(?:.* )?(?:-i|--interfaces)(?:=| ).*"),
    (&["crontab", "at", "batch"], r".+"),
    (&["systemd-nspawn", "dbus-send", "gdbus", "vncterm", "spiceterm", "termproxy", "dtach", "ansible",
       "ansible-playbook", "puppet", "salt-call", "chef-client", "parallel", "rlwrap", "aria2c", "setcap"], r".*"),
    (&["update-alternatives"], r"(?:.* )?--(?:install|set|config|remove|all)(?: .*)?"),
    (&["iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy", "iptables-nft", "ip6tables-nft",
       "iptables-restore", "ip6tables-restore", "ebtables", "arptables"], r"(?:.* )?(?:--modprobe|-M)(?:=| |[^ ]).*|(?:.* )?(?:-F|--flush|-X|-P [A-Z]+ ACCEPT)(?: .*)?"),
    (&["nft"], r"(?:.* )?(?:-f|--file|flush|delete)(?: .*)?"),
    (&["service", "invoke-rc.d", "update-rc.d"], r"(?:-[^ ]+ )*(?:[^ ]*/[^ ]*|debug-shell|emergency|rescue)(?: .*)?"),
    (&["lxc-attach", "lxc-execute", "lxc-console", "lxc-unshare", "lxc-usernsexec", "lxc-device", "lxc-start"], r".*"),
    (&["logrotate"], r"(?:-[^ ]+ )*(?:/(?:tmp|var/tmp|dev/shm|home|run|root)/|[^/ -])[^ ]*(?: .*)?"),
    (&["env"], r"(?:.* )?(?:PERL5OPT|PERL5LIB|PERLLIB|PERL5DB|LD_PRELOAD|LD_LIBRARY_PATH|LD_AUDIT|PYTHONPATH|PYTHONSTARTUP|PYTHONHOME|RUBYOPT|RUBYLIB|NODE_OPTIONS|BASH_ENV|ENV|SHELLOPTS|PS4|GCONV_PATH|PAGER|EDITOR|VISUAL|LESSOPEN)=.*|(?:.* )?(?:-S|--split-string|-C|--chdir)(?:=| ).*"),
    (&["vma"], r"(?:.* )?extract(?: .*)?"),
    (&["apt", "apt-get", "aptitude", "dpkg"], r"(?:.* )?(?:-o|--option|-c|--config-file|-i|--install|--unpack|changelog|edit-sources)(?:=| |$).*|(?:.* )?(?:install|reinstall) (?:.* )?[^ ]*(?:/|\.deb)[^ ]*(?: .*)?"),
    (&["pip", "pip3", "npm", "gem"], r"(?:.* )?(?:install|download|-r|--requirement|-e|--editable)(?: .*)?"),
    (&["modprobe", "kmod"], r"(?:.* )?(?:-C|--config|-d|--dirname)(?:=| ).*"),
    (&["sysctl"], r"(?:.* )?(?:[^ -][^ ]*=[^ ]*|-w|--write|-p|--load|-f|--system)(?: .*)?"),
    (&["zfs", "zpool"], r"(?:-[^ ]+ )*(?:destroy|set|mount|unmount|umount|send|receive|recv|allow|unallow|rename|rollback|promote|create|import|export|remove|detach|replace|attach|labelclear|split|upgrade|inherit|clone|snapshot|load-key|change-key|online|offline|reguid|trim|initialize|add|bookmark|redact|diff|program|jail)(?: .*)?"),
];

/// The shells and interpreters an exec-escape binary may be told to run (`nice /bin/sh`,
/// `env perl -e …`), as an argument word: whole, or the last part of a path.
pub(super) const SHELL_WORD: &str = r"(?:.* )?(?:[^ ]*/)?(?:sh|bash|dash|zsh|ksh|ksh93|mksh|csh|tcsh|fish|ash|busybox|su|sudo|python[0-9.]*|perl[0-9.]*|ruby|lua|node|nodejs|php|tclsh|expect|awk|gawk|sed|vi|vim|less|more)(?: .*)?";
