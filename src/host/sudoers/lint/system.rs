//! The systemd and kernel-log tools judged by what their arguments admit: `systemctl` (unit
//! control is root: `start debug-shell.service`, `edit`, `link`, `set-environment`), and the
//! pagers behind `systemctl`, `journalctl` and `dmesg` (`!sh` in less), plus the journal's own
//! deletion options.

use super::*;

// --- systemd and other pager tools ------------------------------------------------------

/// Why a systemd tool that can start its pager is root.
pub(super) fn pager_why(tool: &str) -> String {
    format!(
        "on a terminal (any `ssh -t`) {tool} pages its output through less, and `!sh` in less is a root shell; \
         systemd ≥ 247 switches less to secure mode under sudo, but only when it detects sudo and the pager is \
         less, while a pinned `--no-pager` depends on neither"
    )
}

pub(super) const FIX_NO_PAGER: &str = "Pin `--no-pager` in an anchored regex with exactly the arguments needed, e.g. \
     `/usr/bin/journalctl ^-u pvedaemon -n [0-9]{1,4} --no-pager -o json$`, or drop the rule.";

pub(super) const SYSTEMCTL_ROOT_PROBES: &[&str] = &[
    "start debug-shell.service",
    "restart debug-shell.service",
    "reload-or-restart debug-shell.service",
    "enable --now debug-shell.service",
    "isolate rescue.target",
    "edit ssh.service",
    "link /tmp/x.service",
    "enable /tmp/x.service",
    "set-environment LD_PRELOAD=/tmp/x.so",
    "set-property ssh.service ExecStart=/bin/sh",
];

/// The systemctl command lines that are root, whatever the rule's shape: the verb is the
/// first word after any options; unit control is root when the unit is the caller's choice of
/// a shell (`debug-shell.service` on tty9, `rescue`, `emergency`) or a unit file path.
pub(super) const SYSTEMCTL_ROOT_LINES: &str = r"(?:--?[^ ]+ )*(?:edit|link|revert|set-environment|import-environment|set-property|isolate|set-default|daemon-reexec|switch-root|soft-reboot|add-wants|add-requires)(?: .*)?|(?:--?[^ ]+ )*(?:start|restart|reload-or-restart|try-restart|try-reload-or-restart|condrestart|enable|reenable|preset|unmask)(?: .*)? (?:debug-shell|emergency|rescue|[^ ]*/[^ ]*)(?:\.[a-z]+)?(?: .*)?";

pub(super) const SYSTEMCTL_PAGER_VERBS: &[&str] = &[
    "status",
    "show",
    "cat",
    "help",
    "list-units",
    "list-unit-files",
    "list-timers",
    "list-sockets",
    "list-jobs",
    "list-dependencies",
    "list-machines",
];

pub(super) fn check_systemctl(args: &Args, display: &str) -> Vec<Finding> {
    let unit_control = |extra: &str| {
        finding(
            Severity::Error,
            "systemctl-unit-control",
            format!(
                "`{display}`{extra} lets the agent control any unit as root: `systemctl start debug-shell.service` \
                 is a root shell on tty9, `systemctl edit` opens an editor as root, `link`/`enable` install unit \
                 files from any path, `set-environment` reaches every service started later"
            ),
            "Allow fixed verbs and units only, e.g. `/usr/bin/systemctl ^is-active (pvedaemon|pveproxy)$`, \
             and `--no-pager` for anything that prints.",
        )
    };
    if matches!(args, Args::Any) {
        return vec![unit_control(" (no argument list: any arguments)")];
    }
    let mut out = args_findings(args, display, true);
    let root_probes: Vec<String> = SYSTEMCTL_ROOT_PROBES
        .iter()
        .map(|p| p.to_string())
        .collect();
    static ROOT: LazyLock<Lang> = LazyLock::new(|| table_lang(SYSTEMCTL_ROOT_LINES));
    if !admitted(args, &root_probes).is_empty() || reaches(args, &ROOT, |_| false).is_some() {
        out.push(unit_control(""));
        return out;
    }
    let pager_probes: Vec<String> = SYSTEMCTL_PAGER_VERBS
        .iter()
        .flat_map(|v| [v.to_string(), format!("{v} pvedaemon")])
        .collect();
    if !args.text().contains("--no-pager") && !admitted(args, &pager_probes).is_empty() {
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!("`{display}`: {}", pager_why("systemctl")),
            "Pin `--no-pager` in an anchored regex with exactly the verb and units needed, e.g. \
             `/usr/bin/systemctl ^--no-pager status (pvedaemon|pveproxy)$`, or drop the rule.",
        ));
    } else if matches!(args, Args::Glob(g) if has_star(g)) {
        out.push(finding(
            Severity::Warning,
            "wildcard-args",
            format!("`{display}`: `*` also passes options (`-H host`, `--root=DIR` …); over-broad"),
            FIX_PIN,
        ));
    }
    out
}

pub(super) fn check_journalctl(args: &Args, display: &str) -> Vec<Finding> {
    let tamper = "; `--vacuum-time=1s`, `--rotate` and `--flush` delete or rotate the journal — the audit trail";
    let unbounded = matches!(args, Args::Any) || matches!(args, Args::Glob(g) if has_star(g));
    if unbounded || !args.text().contains("--no-pager") {
        let mut out = args_findings(args, display, true);
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!(
                "`{display}`: {}{}",
                pager_why("journalctl"),
                if unbounded { tamper } else { "" }
            ),
            FIX_NO_PAGER,
        ));
        return out;
    }
    let mut out = args_findings(args, display, true);
    let probes: Vec<String> = [
        "--no-pager --vacuum-time=1s",
        "--vacuum-time=1s --no-pager",
        "--no-pager --vacuum-size=1",
        "--no-pager --rotate",
        "--no-pager --flush",
        "--no-pager --relinquish-var",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    if !admitted(args, &probes).is_empty() {
        out.push(finding(
            Severity::Error,
            "journal-tamper",
            format!("`{display}` admits `--vacuum-*`/`--rotate`/`--flush`: the agent can delete the journal it is audited by"),
            FIX_NO_PAGER,
        ));
    }
    out
}

pub(super) fn check_dmesg(args: &Args, display: &str) -> Vec<Finding> {
    let mut out = args_findings(args, display, false);
    if matches!(args, Args::Any) || matches!(args, Args::Glob(g) if has_star(g)) {
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!(
                "`{display}`: `dmesg -H` pages through less (`!sh` is a root shell; util-linux does not make less \
                 secure) and `dmesg -C` clears the kernel log"
            ),
            "Pin the arguments, e.g. `/usr/bin/dmesg ^--ctime --nopager$`, or drop the rule.",
        ));
    }
    out
}

/// systemd's other tools that page their listings through less (`--no-pager` turns it off).
pub(super) const SYSTEMD_PAGERS: &[&str] = &[
    "loginctl",
    "networkctl",
    "timedatectl",
    "localectl",
    "bootctl",
    "systemd-analyze",
    "systemd-cgls",
    "systemd-delta",
    "userdbctl",
    "homectl",
    "portablectl",
];

/// The verbs of those tools that print through the pager (no verb at all lists, too).
const PAGED_LINES: &str = r"(?:-[^ ]+ )*(?:(?:list[a-z-]*|show[a-z-]*|status|[a-z]+-status|cat[a-z-]*|tree|introspect|blame|dump|info|lldp|critical-chain|plot|unit-files|unit-paths|syscall-filter|security|verify|inspect|user|users|seat|session)(?: .*)?)?";

pub(super) fn check_systemd_pager(tool: &str, args: &Args, display: &str) -> Vec<Finding> {
    static PAGED: LazyLock<Lang> = LazyLock::new(|| table_lang(PAGED_LINES));
    let mut out = args_findings(args, display, true);
    let unbounded = matches!(args, Args::Any) || matches!(args, Args::Glob(g) if has_star(g));
    let pages = unbounded
        || (!args.text().contains("--no-pager") && reaches(args, &PAGED, |_| false).is_some());
    if pages {
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!("`{display}`: {}", pager_why(tool)),
            format!(
                "Pin `--no-pager` in an anchored regex with exactly the verb needed, e.g. `/usr/bin/{tool} ^--no-pager list-[a-z-]+$`, or drop the rule."
            ),
        ));
    }
    out
}
