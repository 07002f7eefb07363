//! Guest locks as the operations meet them: the config's `lock:` property, which refuses a
//! change with `VM is locked (backup)` (pve-guest-common 4a8f6cbf78e1 `src/PVE/AbstractConfig.pm`
//! `check_lock`: `die $class->guest_type() . " is locked ($conf->{lock})\n"`; `guest_type` is
//! `VM` in qemu-server's `QemuConfig.pm`, `CT` in pve-container's `LXC/Config.pm`), and the flock
//! on the guest's lock file that `lock_config` takes for 10 s at most, which fails with
//! `can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout` (pve-common f665029eac78
//! `src/PVE/Tools.pm` `lock_file_full` + `run_with_timeout`'s `got timeout`; paths from
//! `QemuConfig::config_file_lock` and `LXC::Config::config_file_lock`).
//!
//! Only running tasks ([`crate::running`]) hold flocks between calls here, so a call that meets
//! one is retried once the task ends or the 10 s are over (the retry sees
//! [`crate::running::CallTasks::waited`]); the real tool waits inside the same call.

use crate::running::{self, Blocked, Wait};
use crate::state::{Guest, Kind, State};
use crate::{Ctx, Failure};

/// The file `lock_config` flocks for guest `vmid`.
pub fn flock_path(kind: Kind, vmid: u32) -> String {
    match kind {
        Kind::Qemu => format!("/var/lock/qemu-server/lock-{vmid}.conf"),
        Kind::Lxc => format!("/run/lock/lxc/pve-config-{vmid}.lock"),
    }
}

/// `check_lock`: the guest's config must carry no `lock:`.
pub fn check_lock(g: &Guest) -> Result<(), String> {
    match g.config.get("lock").and_then(|v| v.as_str()) {
        Some(l) if !l.is_empty() => Err(format!("{} is locked ({l})", g.kind.noun())),
        _ => Ok(()),
    }
}

/// `lock_config` (exclusive) or `lock_config_shared` on guest `vmid`: free unless a running task
/// holds a conflicting flock. Then the call is marked blocked (it is dropped and retried after
/// the wait) — or, on the retry after the 10 s ran out, fails with the timeout text.
pub fn flock(st: &State, ctx: &Ctx, kind: Kind, vmid: u32, exclusive: bool) -> Result<(), String> {
    let Some(holder) = running::flock_holder(st, vmid, exclusive) else {
        return Ok(());
    };
    if let Some((Wait::Flock, true)) = ctx.tasks.waited {
        return Err(format!(
            "can't lock file '{}' - got timeout",
            flock_path(kind, vmid)
        ));
    }
    *ctx.tasks.blocked.borrow_mut() = Some(Blocked {
        upid: holder.upid.clone(),
        what: Wait::Flock,
    });
    Err("pve-sim: waiting for a lock".into())
}

/// What most changes do first: `lock_config` (exclusive), then `check_lock` on the config.
pub fn guard(st: &State, ctx: &Ctx, kind: Kind, vmid: u32) -> Result<(), String> {
    flock(st, ctx, kind, vmid, true)?;
    match st.guests.get(&vmid) {
        Some(g) => check_lock(g),
        None => Ok(()),
    }
}

/// [`guard`] for a check before any task exists (the error is a pre-fork `die`).
pub fn guard_prefork(st: &State, ctx: &Ctx, kind: Kind, vmid: u32) -> Result<(), Failure> {
    guard(st, ctx, kind, vmid).map_err(Failure::die)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    #[test]
    fn config_locks_refuse_with_the_guest_type() {
        let mut st = initial(0);
        let vm = st.guests.get_mut(&100).unwrap();
        assert_eq!(check_lock(vm), Ok(()));
        vm.config.insert("lock".into(), serde_json::json!("backup"));
        assert_eq!(check_lock(vm), Err("VM is locked (backup)".into()));
        let ct = st.guests.get_mut(&200).unwrap();
        ct.config
            .insert("lock".into(), serde_json::json!("snapshot"));
        assert_eq!(check_lock(ct), Err("CT is locked (snapshot)".into()));
        assert_eq!(
            flock_path(Kind::Qemu, 100),
            "/var/lock/qemu-server/lock-100.conf"
        );
    }
}
