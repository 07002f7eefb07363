//! The `setup revoke` script: expire and lock the account, end its processes, remove its keys,
//! drop-in and sudoers file, reload sshd, verify. It keeps the account (so its UID is never
//! reused) and the gate's state directory (counters and nonces, for the audit).

use super::script::Script;
use super::{KEYS_DIR, RevokeOptions, STATE_BASE, SUDOERS_DIR};

const COMMON: &str = include_str!("common.sh");
const STEPS: &str = include_str!("revoke.sh");

fn header(o: &RevokeOptions) -> String {
    let user = &o.user;
    format!(
        "pxagent setup revoke: take agent account {user} away on this Proxmox host (pxagent {version})

Review it, then run it as root on the host:  bash pxagent-revoke-{user}.sh
Idempotent: a second run changes nothing. Each step prints `ok` (already so) or `changed`,
the summary at the end lists every change.

What it does, in order:
  1. expires {user} (usermod --expiredate 1: no SSH login and no sudo from that moment; a
     locked password alone stops neither) and locks its password
  2. ends every process of {user} with SIGKILL: each with its uid as real, effective, saved
     or filesystem uid (sudo keeps it as the real one), each in a session one of those leads
     (what sudo runs, as root or as anyone), every descendant of these, and everything in its
     systemd slice user-UID.slice; stopped first, so none can fork away, then killed, repeated
     until a scan of /proc finds none
  3. removes {KEYS_DIR}/{user} and the authorized_keys in its home
  4. removes the sshd drop-in {dropin} (and the Include line setup render may have added to
     {sshd_config}); sshd -t; reload sshd
  5. removes {SUDOERS_DIR}/{user}; visudo -c
  6. verification: chage -l shows the account expired, the same scan finds no process, no key
     file, sudo -l -U lists no rules
It keeps the account (expired, so its UID is never given to anyone else) and
{STATE_BASE}/{user} (the gate's counters and approval nonces, for the audit).",
        version = env!("CARGO_PKG_VERSION"),
        dropin = o.sshd.dropin(user),
        sshd_config = o.sshd.config.as_str(),
    )
}

/// The whole `setup revoke` script.
pub fn revoke(o: &RevokeOptions) -> String {
    let user = &o.user;
    let mut s = Script::new(&header(o));
    s.section("Values (everything this script removes is derived from these)");
    s.value("U", user, "the agent account");
    s.value("KEYS_FILE", &format!("{KEYS_DIR}/{user}"), "its key");
    s.value(
        "STATE_DIR",
        &format!("{STATE_BASE}/{user}"),
        "the gate's state (kept)",
    );
    s.value(
        "SUDOERS",
        &format!("{SUDOERS_DIR}/{user}"),
        "its sudoers file",
    );
    s.value(
        "SSHD_CONFIG",
        o.sshd.config.as_str(),
        "the config sshd reads",
    );
    s.value("DROPIN", &o.sshd.dropin(user), "its sshd drop-in");
    s.value(
        "SSHD_PID_FILE",
        o.sshd.pid_file.as_ref().map(|p| p.as_str()).unwrap_or(""),
        "empty: reload through systemd",
    );
    s.text("\n");
    s.text(COMMON);
    s.text("\n");
    s.text(STEPS);
    s.finish()
}
