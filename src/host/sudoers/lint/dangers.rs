//! What each PVE tool must never be allowed to run, as languages of argument lines: a rule
//! that admits any line of one of them is root (or hands over the cluster), whatever shape the
//! rule has. [`automata`](super::automata) decides it; these tables say what and why.
//!
//! The lines are `regex` patterns over the whole joined argument line, written for the
//! command lines the tools really accept: `qm`/`pct` take the subcommand first; pvesh takes
//! `--noproxy`/`--nooutput` before its verb (pve-manager `PVE/CLI/pvesh.pm`) and an API path
//! whose slashes may repeat or lead (`PVE::RESTHandler::find_handler` drops empty parts); PVE's
//! option parser takes `-opt` as well as `--opt`, and `--opt=value` as well as `--opt value`.
//! Each danger is a class (container exec, hook scripts, `/access` writes …), never one
//! example, and pxagent's own rules admit none of them (a test renders every profile).
//!
//! "Open" dangers catch rules that let the caller name options on an endpoint where options
//! are root (a guest's config, a storage, a restore): such a rule admits an option nobody
//! listed, `--unlisted-option x`.

use super::*;

/// One class of dangerous command lines of a tool.
pub(super) struct Danger {
    /// What such a line does, for the finding.
    pub(super) what: &'static str,
    /// The lines (whole line, `regex` syntax).
    pub(super) lines: String,
    /// Lines that are fine after all (a restore that sets `--unprivileged 1`).
    pub(super) unless: Option<String>,
    /// `Error` for root and cluster takeover; `Warning` for disruption.
    pub(super) severity: Severity,
}

/// A danger compiled.
pub(super) struct Compiled {
    pub(super) danger: Danger,
    pub(super) lines: Lang,
    pub(super) unless: Option<Lang>,
}

/// The compiled dangers of `tool` (built once).
pub(super) fn dangers(tool: Tool) -> &'static [Compiled] {
    static ALL: LazyLock<Vec<(Tool, Vec<Compiled>)>> = LazyLock::new(|| {
        Tool::ALL
            .iter()
            .map(|&t| {
                let compiled = table(t)
                    .into_iter()
                    .map(|d| Compiled {
                        lines: Lang::full(&d.lines)
                            .unwrap_or_else(|| panic!("danger of {t:?} compiles: {}", d.lines)),
                        unless: d.unless.as_ref().map(|u| {
                            Lang::full(u).unwrap_or_else(|| panic!("unless compiles: {u}"))
                        }),
                        danger: d,
                    })
                    .collect();
                (t, compiled)
            })
            .collect()
    });
    ALL.iter()
        .find(|(t, _)| *t == tool)
        .map(|(_, c)| c.as_slice())
        .unwrap_or(&[])
}

/// Any further words.
const TAIL: &str = "(?: .*)?";
/// Any words before (ending at a word boundary).
const BEFORE: &str = "(?:.* )?";
/// An option the caller names: PVE takes `-x`, `--x`, `--x=v` and `--x v`.
fn opt(names: &str) -> String {
    format!("--?(?:{names})[= ].*")
}
/// A storage path that is the host's system: `/`, at or below a system directory (pxagent's
/// `SYSTEM_DIRS`), relative, or with a `.`, `..` or empty segment.
const SYSTEM_PATH: &str = "(?:/+|/+(?:etc|root|usr|var|boot|proc|sys|dev|bin|sbin|lib[^ /]*|run|tmp)(?:/[^ ]*)?|[^ /][^ ]*|[^ ]*/[.][.]?(?:/[^ ]*)?|[^ ]*//[^ ]*)";
/// An option nobody listed, for the "open" dangers.
const UNLISTED: &str = "--unlisted-option x";
/// A boolean option set true.
fn truthy(name: &str) -> String {
    format!("--?{name}[= ](?:1|yes|on|true)")
}

/// A pvesh command line: optional `--noproxy`/`--nooutput`, one of `verbs`, then the API
/// path of these segments (`*` is one path parameter: a node, a VMID, a storage), then `tail`.
fn pvesh(verbs: &str, path: &str, tail: &str) -> String {
    // Split at the slashes outside groups and brackets (those are written out in full).
    let mut segs = vec![String::new()];
    let mut depth = 0i32;
    for c in path.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '/' if depth == 0 => {
                segs.push(String::new());
                continue;
            }
            _ => {}
        }
        segs.last_mut().expect("one segment at least").push(c);
    }
    let segs: Vec<&str> = segs
        .iter()
        .map(|s| if s == "*" { "[^ /]+" } else { s.as_str() })
        .collect();
    format!(
        "(?:--?(?:noproxy|nooutput) )*(?:{verbs}) /*{}/*{tail}",
        segs.join("/+")
    )
}

fn d(severity: Severity, what: &'static str, lines: String) -> Danger {
    Danger {
        what,
        lines,
        unless: None,
        severity,
    }
}

fn err(what: &'static str, lines: String) -> Danger {
    d(Severity::Error, what, lines)
}

// What the guest configuration options do, shared by qm, pct and pvesh.
const QEMU_ROOT_OPTS: &str = "raw QEMU arguments (`--args`), hook scripts (run as root at the guest's next start), \
     custom cloud-init snippets and host PCI devices or directories passed to the guest";
const HOST_DISK: &str = "a host path or device as a guest disk (`--scsi1 /dev/sda`, `import-from=/etc/shadow`): the guest \
     reads and writes the host's files as root";
const HOST_USB_SERIAL: &str = "host USB devices and serial ports passed to the guest";
const LXC_ROOT_OPTS: &str = "hook scripts (run as root on the host), host paths bind-mounted into the container \
     (`--mp0 /,mp=/host`), host devices (`--dev0 /dev/sda`), privileged containers (`--unprivileged 0`), whose root \
     is close to the host's, and features that let it mount filesystems or make device nodes";
const OPEN_CONFIG: &str = "options of the caller's choosing on a guest's configuration, where a handful of them \
     (hook scripts, `--args`, host paths and devices) are root";

const QEMU_DISKS: &str = "ide|sata|scsi|virtio|efidisk|tpmstate|unused";
const OPEN_ACTION: &str = "options of the caller's choosing on an action (`--skiplock`, `--stateuri`, `--force` … and, \
     where the endpoint takes them, the root-equivalent ones): a rule must name every option it allows";
/// qm's and pct's subcommands that change something.
const QM_ACTIONS: &str = "start|stop|shutdown|reboot|reset|suspend|resume|destroy|clone|migrate|move[-_]disk|\
     disk|resize|rollback|snapshot|delsnapshot|template|unlock|cloudinit|rescan|wait|cleanup|nbdstop";
const PCT_ACTIONS: &str = "start|stop|shutdown|reboot|suspend|resume|destroy|clone|migrate|move[-_]volume|resize|\
     rollback|snapshot|delsnapshot|template|unlock|rescan|fsck|fstrim|unmount|cpusets";

/// The dangers of one tool.
fn table(tool: Tool) -> Vec<Danger> {
    let guest_set = |verbs: &str| format!("(?:{verbs}) [^ ]+ {BEFORE}");
    match tool {
        Tool::Qm => {
            let set = guest_set("set|create");
            vec![
                err(
                    "the QEMU monitor (`migrate \"exec:…\"` runs any command on the host as root) or the \
                     guest's console and keyboard",
                    format!("(?:monitor|terminal|vncproxy|sendkey){TAIL}"),
                ),
                err(
                    "commands or passwords inside the guest through its agent (root there)",
                    format!("guest (?:exec|passwd){TAIL}"),
                ),
                err(
                    "imports any host file or device into a guest disk (`importdisk 100 /etc/shadow`), or copies \
                     a guest to another cluster",
                    format!("(?:importdisk|importovf|disk import|remote-migrate){TAIL}"),
                ),
                err(
                    QEMU_ROOT_OPTS,
                    format!(
                        "{set}{}",
                        opt("args|hookscript|cicustom|hostpci[0-9]+|virtiofs[0-9]+")
                    ),
                ),
                err(
                    HOST_DISK,
                    format!(
                        "{set}--?(?:{QEMU_DISKS})[0-9]+[= ](?:[^ ]*,)?(?:(?:file|volume|import-from)=)?/.*"
                    ),
                ),
                err(
                    HOST_USB_SERIAL,
                    format!(
                        "{set}--?(?:usb[0-9]+[= ](?:[^ ]*,)?host=|(?:serial|parallel)[0-9]+[= ]/).*"
                    ),
                ),
                err(OPEN_CONFIG, format!("{set}{UNLISTED}{TAIL}")),
                err(
                    OPEN_ACTION,
                    format!("(?:{QM_ACTIONS}) {BEFORE}{UNLISTED}{TAIL}"),
                ),
            ]
        }
        Tool::Pct => {
            let set = guest_set("set|create|restore");
            vec![
                err(
                    "a shell, console or file copy in or out of the container: `exec`, `enter` and `console` are \
                     root inside it (close to the host's root in a privileged one), `push`/`pull` write and read \
                     host paths as root, `mount` mounts its filesystem on the host",
                    format!("(?:exec|enter|console|push|pull|mount){TAIL}"),
                ),
                err(
                    "copies the container to another cluster",
                    format!("remote-migrate{TAIL}"),
                ),
                err(
                    LXC_ROOT_OPTS,
                    format!(
                        "{set}(?:{}|--?(?:mp[0-9]+|rootfs)[= ](?:[^ ]*,)?(?:volume=)?/.*|--?dev[0-9]+[= ].*|--?unprivileged[= ](?:0|no|off|false){TAIL}|--?features[= ][^ ]*(?:mount=|mknod=1)[^ ]*{TAIL})",
                        opt("hookscript")
                    ),
                ),
                err(
                    "restores an archive from a host path the caller may have written",
                    "restore [^ ]+ /.*".to_string(),
                ),
                Danger {
                    unless: Some(format!("{BEFORE}{}{TAIL}", truthy("unprivileged"))),
                    ..err(
                        "restores a container without `--unprivileged 1`: a privileged container's backup comes \
                         back privileged, its root close to the host's",
                        "restore .*".to_string(),
                    )
                },
                err(OPEN_CONFIG, format!("{set}{UNLISTED}{TAIL}")),
                err(
                    OPEN_ACTION,
                    format!("(?:{PCT_ACTIONS}) {BEFORE}{UNLISTED}{TAIL}"),
                ),
            ]
        }
        Tool::Pvesh => pvesh_table(),
        Tool::Pvesm => vec![
            err(
                "adds or rewires a storage: `pvesm add dir x --path / --content snippets` makes any host directory \
                 a storage (hook scripts and raw volumes follow)",
                format!("(?:add|set){TAIL}"),
            ),
            err(
                "reads or writes any volume and any host path given as its file",
                format!("(?:export|import){TAIL}"),
            ),
            err(
                "deletes a guest's disk",
                "free [^ ]*:(?:[0-9]+/)?(?:vm|base|subvol)-[0-9].*".to_string(),
            ),
        ],
        Tool::Vzdump => vec![
            err(
                "`--script` runs a program as root, `--dumpdir`/`--tmpdir` write anywhere, `--stdout` streams a \
                 guest's disks to the caller",
                format!("{BEFORE}--?(?:script|dumpdir|tmpdir|stdout)(?:[= ].*)?"),
            ),
            err(
                "options of the caller's choosing (`--script` among them)",
                format!("{BEFORE}{UNLISTED}{TAIL}"),
            ),
        ],
        Tool::Qmrestore => vec![
            err(
                "restores an archive from a place the caller can write (a relative path, /tmp, a home): its \
                 config may carry hook scripts or raw QEMU arguments",
                "(?:(?:/tmp|/var/tmp|/dev/shm|/home|/run|/root)/[^ ]*|[^/: -][^ :]*) .*"
                    .to_string(),
            ),
            err(
                "`--force` restores over any existing VM",
                format!("{BEFORE}--?force(?:[= ].*)?"),
            ),
            err(
                "options of the caller's choosing",
                format!("{BEFORE}{UNLISTED}{TAIL}"),
            ),
        ],
        Tool::Pvecm => vec![err(
            "cluster membership and quorum: `add` joins a cluster the caller controls, `delnode` drops nodes, \
             `expected 1` forces quorum, `qdevice setup` adds a vote",
            format!("(?:add|addnode|delnode|expected|qdevice|create){TAIL}"),
        )],
        Tool::QemuImg => vec![err(
            "reads or writes host files and disks (`convert … /etc/sudoers.d/x`, `info /etc/shadow`)",
            format!(
                "{BEFORE}(?:[^ ]*=)?(?:/etc/|/root/|/boot/|/usr/|/var/spool/cron|/var/lib/pve-cluster|/dev/(?:sd|nvme|vd|hd|xvd|mapper/|dm-|disk/))[^ ]*{TAIL}"
            ),
        )],
        // The helper checks its own command line again and takes one shape only: whatever a
        // rule admits, it writes one new ISO file into a directory storage and nothing else.
        Tool::Pveam | Tool::HaManager | Tool::Helper => Vec::new(),
    }
}

fn pvesh_table() -> Vec<Danger> {
    let w = "create|set|delete";
    let cfg = |kind: &str| format!("nodes/*/{kind}(?:/+[^ /]+/+config)?");
    vec![
        err(
            "user, token, group, role, realm, TFA, password and ACL changes: `set /access/password --userid \
             root@pam`, an Administrator ACL or a new API token is root on every node",
            pvesh(w, "access(?:/[^ ]*)?", TAIL),
        ),
        err(
            "a shell on the node (`termproxy`, `vncshell`, `spiceshell`) or a batch of API calls as root \
             (`execute`)",
            pvesh(
                "create|set",
                "nodes/*/(?:termproxy|vncshell|spiceshell|vncproxy|spiceproxy|execute)",
                TAIL,
            ),
        ),
        err(
            "a guest's QEMU monitor (`migrate \"exec:…\"` is a root shell on the host), console or keyboard",
            pvesh(
                "create|set",
                "nodes/*/(?:qemu|lxc)/*/(?:termproxy|vncproxy|spiceproxy|monitor|sendkey)",
                TAIL,
            ),
        ),
        err(
            "commands, files and passwords inside a VM through its guest agent (root there)",
            format!(
                "(?:{}|{})",
                pvesh(
                    "create|set",
                    "nodes/*/qemu/*/agent/(?:exec|file-write|set-user-password)",
                    TAIL
                ),
                pvesh("get", "nodes/*/qemu/*/agent/file-read", TAIL)
            ),
        ),
        err(
            "the node's network, DNS, /etc/hosts, TLS certificates, package sources, node config (ACME), \
             firewall, disks or Ceph: rewired, intercepted or destroyed",
            pvesh(
                w,
                "nodes/*/(?:network|dns|hosts|certificates|apt/+repositories|config|firewall|disks|ceph)(?:/[^ ]*)?",
                TAIL,
            ),
        ),
        err(
            "the cluster itself: membership (`/cluster/config/join` hands the node to another cluster), SDN, \
             ACME plugins (they run scripts), resource mappings (host directories and devices for guests), \
             the cluster firewall and options",
            pvesh(
                w,
                "cluster/(?:config|sdn|acme|mapping|firewall|options)(?:/[^ ]*)?",
                TAIL,
            ),
        ),
        err(
            "adds or rewires a storage at a host system directory (`--path /`, `--path /etc`, a `..` \
             segment), for hook scripts (`--content snippets`) or with options of the caller's choosing \
             (`--content-dirs`, `--options`, `--keyring` …): host files become volumes, hook scripts follow",
            format!(
                "(?:{}|{}|{}|{})",
                pvesh("create", "storage", &format!(" {BEFORE}{UNLISTED}{TAIL}")),
                pvesh("set", "storage/*", &format!(" {BEFORE}{UNLISTED}{TAIL}")),
                pvesh(
                    "create|set",
                    "storage(?:/+[^ /]+)?",
                    &format!(" {BEFORE}--?path[= ]{SYSTEM_PATH}{TAIL}")
                ),
                pvesh(
                    "create|set",
                    "storage(?:/+[^ /]+)?",
                    &format!(" {BEFORE}--?content[= ](?:[^ ]*,)?snippets(?:,[^ ]*)?{TAIL}")
                )
            ),
        ),
        err(
            "uploads any file into a storage (a snippet becomes a hook script)",
            pvesh("create", "nodes/*/storage/*/upload", TAIL),
        ),
        err(
            "downloads with options of the caller's choosing (no certificate checks, other content types)",
            format!(
                "(?:{}|{})",
                pvesh(
                    "create",
                    "nodes/*/storage/*/download-url",
                    &format!(" {BEFORE}{UNLISTED}{TAIL}")
                ),
                pvesh(
                    "create",
                    "nodes/*/storage/*/download-url",
                    &format!(" {BEFORE}--?verify-certificates[= ](?:0|no|off|false){TAIL}")
                )
            ),
        ),
        err(
            "reads any file of any backed-up guest",
            pvesh("get", "nodes/*/storage/*/file-restore/download", TAIL),
        ),
        err(
            QEMU_ROOT_OPTS,
            pvesh(
                "create|set",
                &cfg("qemu"),
                &format!(
                    " {BEFORE}{}",
                    opt("args|hookscript|cicustom|hostpci[0-9]+|virtiofs[0-9]+")
                ),
            ),
        ),
        err(
            HOST_DISK,
            pvesh(
                "create|set",
                &cfg("qemu"),
                &format!(
                    " {BEFORE}--?(?:{QEMU_DISKS})[0-9]+[= ](?:[^ ]*,)?(?:(?:file|volume|import-from)=)?/.*"
                ),
            ),
        ),
        err(
            HOST_USB_SERIAL,
            pvesh(
                "create|set",
                &cfg("qemu"),
                &format!(
                    " {BEFORE}--?(?:usb[0-9]+[= ](?:[^ ]*,)?host=|(?:serial|parallel)[0-9]+[= ]/).*"
                ),
            ),
        ),
        err(
            "restores a VM from an archive at a host path the caller may have written",
            pvesh(
                "create",
                "nodes/*/qemu",
                &format!(" {BEFORE}--?archive[= ]/.*"),
            ),
        ),
        err(
            LXC_ROOT_OPTS,
            pvesh(
                "create|set",
                &cfg("lxc"),
                &format!(
                    " {BEFORE}(?:{}|--?(?:mp[0-9]+|rootfs)[= ](?:[^ ]*,)?(?:volume=)?/.*|--?dev[0-9]+[= ].*|--?unprivileged[= ](?:0|no|off|false){TAIL}|--?features[= ][^ ]*(?:mount=|mknod=1)[^ ]*{TAIL})",
                    opt("hookscript")
                ),
            ),
        ),
        Danger {
            unless: Some(format!("{BEFORE}{}{TAIL}", truthy("unprivileged"))),
            ..err(
                "restores a container without `--unprivileged 1`: a privileged container's backup comes back \
                 privileged, its root close to the host's",
                pvesh(
                    "create",
                    "nodes/*/lxc",
                    &format!(" {BEFORE}--?restore(?:[= ](?:1|yes|on|true))?{TAIL}"),
                ),
            )
        },
        err(
            OPEN_CONFIG,
            pvesh(
                "create|set",
                "nodes/*/(?:qemu|lxc)(?:/+[^ /]+/+config)?",
                &format!(" {BEFORE}{UNLISTED}{TAIL}"),
            ),
        ),
        err(
            "a backup with `--script` (a program run as root), `--dumpdir`/`--tmpdir` (written anywhere) or \
             `--stdout`, or with options of the caller's choosing",
            pvesh(
                "create|set",
                "(?:nodes/+[^ /]+/+vzdump|cluster/+backup(?:/+[^ /]+)?)",
                &format!(
                    " {BEFORE}(?:--?(?:script|dumpdir|tmpdir|stdout)(?:[= ].*)?|{UNLISTED}{TAIL})"
                ),
            ),
        ),
        err(
            "copies a guest to another cluster (`remote_migrate`), or feeds a migration tunnel",
            pvesh(
                "create",
                "nodes/*/(?:qemu|lxc)/*/(?:remote_migrate|mtunnel|mtunnelwebsocket)",
                TAIL,
            ),
        ),
        err(
            OPEN_ACTION,
            pvesh(
                "create|set|delete",
                "[^ ]*",
                &format!(" {BEFORE}{UNLISTED}{TAIL}"),
            ),
        ),
        d(
            Severity::Warning,
            "reboots or shuts the node down, stops, suspends or migrates all of its guests, or stops PVE's own \
             services",
            format!(
                "(?:{}|{})",
                pvesh(
                    "create",
                    "nodes/*/(?:status|startall|stopall|migrateall|suspendall|services/+[^ /]+/+(?:stop|restart|reload))",
                    TAIL,
                ),
                pvesh("create", "cluster/bulk-action(?:/[^ ]*)?", TAIL)
            ),
        ),
    ]
}

/// The dangers a rule's arguments admit, each with its shortest admitted line; `None` when
/// the automata could not decide.
pub(super) fn admitted_dangers(tool: Tool, args: &Args) -> Option<Vec<(&'static Danger, String)>> {
    // The same rule comes back often (a file lists it per alias, renders share most rules):
    // remember the answers, a bounded number of them.
    type Memo = std::sync::Mutex<HashMap<(Tool, String), Option<Vec<(&'static Danger, String)>>>>;
    static MEMO: LazyLock<Memo> = LazyLock::new(Default::default);
    let key = (tool, format!("{args:?}"));
    if let Some(hit) = MEMO.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return hit;
    }
    let answer = decide_dangers(tool, args);
    if let Ok(mut m) = MEMO.lock() {
        if m.len() >= 4096 {
            m.clear();
        }
        m.insert(key, answer.clone());
    }
    answer
}

fn decide_dangers(tool: Tool, args: &Args) -> Option<Vec<(&'static Danger, String)>> {
    // A rule sudo rejects admits nothing; one the translation cannot read is reported as
    // unchecked by the argument checks already.
    let Some(rule) = Lang::of_args(args) else {
        return Some(Vec::new());
    };
    let mut out = Vec::new();
    let mut unknown = false;
    for c in dangers(tool) {
        let avoid: Vec<&Lang> = c.unless.iter().collect();
        match admits(&rule, &[&c.lines], &avoid) {
            Answer::Yes(w) => out.push((&c.danger, w)),
            Answer::No => {}
            Answer::Unknown => unknown = true,
        }
    }
    (!unknown || !out.is_empty()).then_some(out)
}
