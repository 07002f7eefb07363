//! What a failed command's answer means: the one place that sorts the host's texts into error
//! classes.
//!
//! In order: the host gate's refusals; sudo's own refusals and a missing sudo (exit 9, a setup
//! problem); a PVE tool run without root (exit 9) versus one whose cluster filesystem is down
//! (exit 1, a host fault); then Proxmox's own error texts, which make a remote failure (exit 1)
//! precise: [`Error::NotFound`], [`Error::Locked`], [`Error::WrongState`] or, for anything
//! else, [`Error::Remote`]. The same texts classify a task that ended not OK by its
//! `exitstatus` ([`failed_task`]).
//!
//! Proxmox's texts are matched line by line, whole lines only (after the prefixes pvesh and the
//! task machinery put in front: `proxy handler failed: `, `TASK ERROR: `), so words in a log or
//! in a guest's output do not pass for them. Each pattern names the source it was read from
//! (snapshot commits of FORMATS.md §0).

use std::sync::LazyLock;

use regex::Regex;

use crate::base::error::{Error, Result};
use crate::ssh::Captured;

use super::{gate_refusal, tail};

/// The classes a Proxmox error text can put a remote failure in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A guest, snapshot, storage, volume or task that does not exist.
    NotFound,
    /// The guest is locked (config lock or flock).
    Locked,
    /// The guest is not in the state the operation needs.
    WrongState,
    /// The configuration changed since its digest was read.
    Conflict,
}

/// `(class, whole-line pattern, source)`. The sources are the PVE repositories of FORMATS.md §0.
const TEXTS: &[(Class, &str, &str)] = &[
    (
        Class::NotFound,
        r"Configuration file 'nodes/[^/']+/(qemu-server|lxc)/[0-9]+\.conf' does not exist",
        "pve-guest-common AbstractConfig.pm load_config",
    ),
    (
        Class::NotFound,
        r"unable to find configuration file for (VM|CT) [0-9]+ on node '[^']*'",
        "qemu-server QemuConfig.pm (check_running's config lookup)",
    ),
    (
        Class::NotFound,
        r"snapshot '[^']*' does not exist",
        "pve-guest-common AbstractConfig.pm, qemu-server API2/Qemu.pm",
    ),
    (
        Class::NotFound,
        r"(.*: )?storage '[^']*' does not exist",
        "pve-storage Storage.pm storage_config (vzdump wraps it: could not activate storage 'x': …)",
    ),
    (
        Class::NotFound,
        r"volume '[^']*' does not exist",
        "pve-storage Storage/Plugin.pm",
    ),
    (
        Class::NotFound,
        r"can't find file '[^']*'",
        "pve-storage Storage.pm abs_filesystem_path (a missing archive)",
    ),
    (
        Class::NotFound,
        r"ERROR: file '[^']*' does not exist",
        "pve-storage Storage.pm (restore of a missing archive)",
    ),
    (
        Class::NotFound,
        r"hostname lookup '[^']*' failed - .*",
        "pve-cluster Cluster.pm remote_node_ip (a node that is not in the cluster)",
    ),
    (
        Class::NotFound,
        r"(upid: )?no such task",
        "pve-manager API2/Tasks.pm read_task_status, stop_task",
    ),
    (
        Class::Locked,
        r"(.* - )?(VM|CT) is locked \([^)]*\)",
        "pve-guest-common AbstractConfig.pm check_lock",
    ),
    (
        Class::Locked,
        r"(.*: )?can't lock file '[^']*' - .*",
        "pve-common Tools.pm lock_file_full (got timeout: another task holds the config flock)",
    ),
    (
        Class::Locked,
        r"(.*: )?can't acquire lock '[^']*'.*",
        "pve-common Tools.pm lock_file_full, pve-manager VZDump.pm getlock",
    ),
    (
        Class::WrongState,
        r"(VM|CT) [0-9]+ (not running|already running)",
        "qemu-server API2/Qemu.pm, QemuServer.pm vm_start; pve-container API2/LXC/Status.pm",
    ),
    (
        Class::WrongState,
        r"VM [0-9]+ is not running",
        "qemu-server QemuServer/Agent.pm assert_agent_available",
    ),
    (
        Class::WrongState,
        r"container '[0-9]+' not running!",
        "pve-container CLI/pct.pm exec",
    ),
    (
        Class::WrongState,
        r"(VM|CT) [0-9]+ is running( - destroy failed)?",
        "qemu-server API2/Qemu.pm destroy_vm, CLI/qm.pm",
    ),
    (
        Class::Conflict,
        r"detected modified configuration - file changed by other user\? Try again\.",
        "pve-common Tools.pm assert_if_modified (qemu-server update_vm_api, pve-container update_pct_config)",
    ),
    (
        Class::WrongState,
        r"VM is paused - cannot shutdown",
        "qemu-server API2/Qemu.pm vm_shutdown",
    ),
    (
        Class::WrongState,
        r"VM [0-9]+ is a template|you can't [a-z ]+ if (it's|vm is) a template|cannot start a template",
        "qemu-server QemuServer.pm vm_start, CLI/qm.pm; pve-guest-common AbstractConfig.pm; pve-container",
    ),
    (
        Class::WrongState,
        r"unable to restore VM [0-9]+ - vm is running|unable to rollback vm [0-9]+: vm is running",
        "qemu-server API2/Qemu.pm create_vm; pve-guest-common AbstractConfig.pm snapshot_rollback",
    ),
];

static PATTERNS: LazyLock<Vec<(Class, Regex)>> = LazyLock::new(|| {
    TEXTS
        .iter()
        .map(|(class, re, _)| {
            (
                *class,
                Regex::new(&format!("^(?:{re})$")).expect("static regex"),
            )
        })
        .collect()
});

/// The class of the first line of `text` that is one of Proxmox's error texts, if any.
pub fn class_of(text: &str) -> Option<Class> {
    text.lines().find_map(|line| {
        let mut l = line.trim();
        for prefix in ["proxy handler failed: ", "TASK ERROR: "] {
            l = l.strip_prefix(prefix).unwrap_or(l);
        }
        PATTERNS
            .iter()
            .find(|(_, re)| re.is_match(l))
            .map(|(c, _)| *c)
    })
}

/// A remote failure whose host text is `text`, with `message` (which quotes it): the precise
/// class when the text is one of Proxmox's, else [`Error::Remote`].
pub fn remote_failure(text: &str, message: String) -> Error {
    match class_of(text) {
        Some(Class::NotFound) => Error::NotFound(message),
        Some(Class::Locked) => Error::Locked(format!(
            "{message}; another task holds the guest (see `pxagent task list`): retry once it has ended"
        )),
        Some(Class::WrongState) => Error::WrongState(message),
        Some(Class::Conflict) => Error::Conflict(message),
        None => Error::Remote(message),
    }
}

/// A task that ended not OK: classified by its `exitstatus` (the TASK ERROR text).
pub fn failed_task(upid: &str, exitstatus: &str, log: &str) -> Error {
    let log = if log.is_empty() {
        String::new()
    } else {
        format!("\n{log}")
    };
    remote_failure(
        exitstatus,
        format!("task {upid} failed: {}{log}", exitstatus.trim_end()),
    )
}

/// The shell's "no such command" for `sudo` itself: bash (`bash: line 1: sudo: command not
/// found`, older `bash: sudo: command not found`), dash (`sh: 1: sudo: not found`), zsh
/// (`zsh:1: command not found: sudo`).
static NO_SUDO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\S+:( line)? ?([0-9]+: )?(sudo: (command )?not found|command not found: sudo)$")
        .expect("static regex")
});

/// What pmxcfs answers a caller that is not root (or not in its group): `Unknown error -1`
/// (REAL `pvesh_cluster_status_json_standalone_pve9.1_and_nonroot_error.transcript.txt`), or a
/// permission error; `please run as root` is `setup_default_cli_env`'s own check.
fn not_root(stderr: &str) -> bool {
    stderr.lines().any(|l| {
        (l.starts_with("ipcc_send_rec") || l.starts_with("Unable to load access control list"))
            && (l.ends_with("Unknown error -1") || l.ends_with("Permission denied"))
    }) || stderr.lines().any(|l| l.trim() == "please run as root")
}

/// Turn a non-zero answer into the right error class. sudo's own refusals and a PVE tool
/// run without root are setup problems (exit 9); anything else is a remote failure (exit 1),
/// made precise by Proxmox's text where it is one of the known ones.
pub fn classify(out: &Captured, argv: &[String], target: &str) -> Result<()> {
    if let Some(r) = gate_refusal(out) {
        return Err(Error::Host(Box::new(r)));
    }
    let stderr = out.stderr_text();
    let cmd = argv.iter().skip(2).cloned().collect::<Vec<_>>().join(" ");
    let has = |s: &str| stderr.lines().any(|l| l.contains(s));
    if out.exit_status == 0 {
        return Ok(());
    }
    let refused = |why: String| {
        Err(Error::SudoRefused(format!(
            "sudo on {target} refused `{cmd}`: {why}; run `pxagent preflight` to see what is missing"
        )))
    };
    if has("account validation failure") {
        return refused("the account is expired or locked (revoked?)".into());
    }
    if has("sudo: a terminal is required") {
        return refused("the matching rule wants a password (not NOPASSWD)".into());
    }
    if has("sudo: a password is required") {
        return refused("no sudoers rule allows this command for the account".into());
    }
    // Only the shell's own line about `sudo` means sudo is missing: exit 127 alone is also what
    // a command inside a container returns for a missing program (`pct exec`).
    if out.exit_status == 127 && stderr.lines().any(|l| NO_SUDO.is_match(l.trim())) {
        return refused("sudo is not installed on the host (stock PVE 9 ships without it: apt-get install sudo)".into());
    }
    if has(": command not found") && has("sudo: /") {
        return refused(format!(
            "{} does not exist on the host",
            argv.get(2).map(String::as_str).unwrap_or("?")
        ));
    }
    if not_root(&stderr) {
        return Err(Error::SudoRefused(format!(
            "`{cmd}` ran on {target} without root privileges (Proxmox says: {}); the sudo setup is broken: run `pxagent preflight`",
            tail(&stderr, 1)
        )));
    }
    if has("ipcc_send_rec") || has("Unable to load access control list") {
        // As root, the IPC socket of pmxcfs refused or failed: the cluster filesystem is down
        // (pve-cluster src/PVE/Cluster.pm `die "ipcc_send_rec[$msgid] failed: $!\n"`; REAL 3P
        // `pmxcfs_down_root_connection_refused.txt`). A host fault, not a setup problem.
        return Err(Error::Remote(format!(
            "`{cmd}` failed on {target}: Proxmox's cluster filesystem (pmxcfs, the pve-cluster service) is not answering ({}); check it on the host with `systemctl status pve-cluster`",
            tail(&stderr, 2).trim()
        )));
    }
    Err(remote_failure(
        &stderr,
        format!(
            "`{cmd}` failed on {target} (exit {}): {}",
            out.exit_status,
            tail(&stderr, 5).trim()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::testing::fixture;

    #[test]
    fn proxmox_texts_have_their_class() {
        for (text, class) in [
            (
                "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist",
                Some(Class::NotFound),
            ),
            (
                "proxy handler failed: Configuration file 'nodes/pve2/lxc/200.conf' does not exist",
                Some(Class::NotFound),
            ),
            (
                "unable to find configuration file for VM 999 on node 'pve1'",
                Some(Class::NotFound),
            ),
            ("snapshot 'x' does not exist", Some(Class::NotFound)),
            ("storage 'x' does not exist", Some(Class::NotFound)),
            (
                "hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known",
                Some(Class::NotFound),
            ),
            (
                "could not activate storage 'nas': storage 'nas' does not exist could not get storage information for 'nas': storage 'nas' does not exist",
                Some(Class::NotFound),
            ),
            (
                "400 Parameter verification failed.\nupid: no such task\n\npvesh get <api_path>",
                Some(Class::NotFound),
            ),
            (
                "can't find file 'local:backup/vzdump-qemu-1-x.vma'",
                Some(Class::NotFound),
            ),
            ("VM is locked (backup)", Some(Class::Locked)),
            ("CT is locked (snapshot-delete)", Some(Class::Locked)),
            ("TASK ERROR: VM is locked (backup)", Some(Class::Locked)),
            (
                "trying to acquire lock...\ncan't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
                Some(Class::Locked),
            ),
            ("VM 100 not running", Some(Class::WrongState)),
            ("VM 100 already running", Some(Class::WrongState)),
            ("CT 200 already running", Some(Class::WrongState)),
            ("VM 100 is not running", Some(Class::WrongState)),
            ("container '200' not running!", Some(Class::WrongState)),
            (
                "VM 100 is running - destroy failed",
                Some(Class::WrongState),
            ),
            ("VM is paused - cannot shutdown", Some(Class::WrongState)),
            (
                "detected modified configuration - file changed by other user? Try again.",
                Some(Class::Conflict),
            ),
            (
                "you can't take a snapshot if it's a template",
                Some(Class::WrongState),
            ),
            // Not Proxmox's texts, or not whole lines of them.
            ("job errors", None),
            ("snapshot create failed: starting cleanup", None),
            ("INFO: the VM 100 not running here is fine", None),
            ("No QEMU guest agent configured", None),
            ("QEMU guest agent is not running", None),
            (
                "lvcreate snapshot 'pve/snap_vm-113' error: out of space",
                None,
            ),
        ] {
            assert_eq!(class_of(text), class, "{text}");
        }
    }

    fn out(code: u32, stderr: &str) -> Captured {
        Captured {
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
            exit_status: code,
        }
    }

    fn argv(words: &str) -> Vec<String> {
        words.split(' ').map(String::from).collect()
    }

    /// With pmxcfs down, a command run as root is a host fault (exit 1) naming the
    /// pve-cluster service; the non-root form stays a sudo setup problem (exit 9).
    #[test]
    fn pmxcfs_down_as_root_is_a_host_fault_not_a_sudo_problem() {
        let a = argv("sudo -n /usr/bin/pvesh get /version --output-format json");
        let e = classify(
            &out(111, &fixture("pve/pmxcfs_down_root_connection_refused.txt")),
            &a,
            "h",
        )
        .unwrap_err();
        assert_eq!((e.exit_code(), e.kind()), (1, "remote_failed"), "{e}");
        assert!(e.to_string().contains("pve-cluster"), "{e}");
        assert!(e.to_string().contains("Connection refused"), "{e}");
        let transcript = fixture(
            "pve/pvesh_cluster_status_json_standalone_pve9.1_and_nonroot_error.transcript.txt",
        );
        let start = transcript.find("ipcc_send_rec[1]").unwrap();
        let end = transcript.find("RC=255").unwrap();
        let e = classify(&out(255, &transcript[start..end]), &a, "h").unwrap_err();
        assert_eq!((e.exit_code(), e.kind()), (9, "sudo_refused"), "{e}");
        let e = classify(&out(255, "please run as root\n"), &a, "h").unwrap_err();
        assert_eq!(e.exit_code(), 9, "{e}");
    }

    /// Exit 127 with lxc-attach's line is not "sudo is not installed".
    #[test]
    fn exit_127_is_sudo_missing_only_with_the_shells_line() {
        let a = argv("sudo -n /usr/sbin/pct exec 200 -- /nonexistent");
        let guest = fixture("pve/pct_exec_missing_program_lxc_attach.txt");
        let e = classify(&out(127, &guest), &a, "h").unwrap_err();
        assert_eq!((e.exit_code(), e.kind()), (1, "remote_failed"), "{e}");
        let e = classify(&out(127, "sh: 1: sudo: not found\n"), &a, "h").unwrap_err();
        assert_eq!(e.exit_code(), 9, "{e}");
        assert!(e.to_string().contains("not installed"), "{e}");
    }

    #[test]
    fn remote_failures_get_the_precise_kind() {
        let a = argv("sudo -n /usr/sbin/qm snapshot 100 x");
        for (stderr, kind) in [
            ("VM is locked (backup)\n", "locked"),
            (
                "trying to acquire lock...\ncan't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout\n",
                "locked",
            ),
            (
                "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist\n",
                "not_found",
            ),
            ("VM 100 not running\n", "wrong_state"),
            ("lvcreate error\n", "remote_failed"),
        ] {
            let e = classify(&out(255, stderr), &a, "h").unwrap_err();
            assert_eq!((e.exit_code(), e.kind()), (1, kind), "{stderr}");
        }
        let e = failed_task("UPID:x", "VM is locked (backup)", "INFO: …");
        assert_eq!(e.kind(), "locked");
        assert!(e.to_string().contains("task list"), "{e}");
        assert_eq!(
            failed_task("UPID:x", "job errors", "").kind(),
            "remote_failed"
        );
    }

    #[test]
    fn every_pattern_compiles_and_names_its_source() {
        assert_eq!(PATTERNS.len(), TEXTS.len());
        assert!(TEXTS.iter().all(|(_, _, src)| !src.is_empty()));
    }

    #[test]
    fn only_the_shells_own_line_means_sudo_is_missing() {
        for l in [
            "bash: line 1: sudo: command not found",
            "bash: sudo: command not found",
            "sh: 1: sudo: not found",
            "zsh:1: command not found: sudo",
        ] {
            assert!(NO_SUDO.is_match(l), "{l}");
        }
        for l in [
            "lxc-attach: 200: ../src/lxc/attach.c: lxc_attach_run_command: 1845 No such file or directory - Failed to exec \"/nonexistent\"",
            "sh: 1: nonexistent: not found",
            "sudo: /usr/sbin/pct: command not found",
        ] {
            assert!(!NO_SUDO.is_match(l), "{l}");
        }
    }
}
