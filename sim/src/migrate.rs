//! Moving a guest to another node: `pvesh create …/{qemu,lxc}/{vmid}/migrate --target N`.
//! Sources (FORMATS §0 snapshot commits):
//!
//! * qemu-server e6352be67f70 `src/PVE/API2/Qemu.pm` `migrate_vm` (pre-fork:
//!   `target: target is local node.`, `no such cluster node '<n>'`, the lock,
//!   `can't migrate running VM without --online`, the warning
//!   `VM isn't running. Doing offline migration instead.`; HA guests get a `hamigrate` task that
//!   prints `Requesting HA migration for VM <id> to node <n>`, else a `qmigrate` task);
//!   `src/PVE/QemuMigrate.pm` (`phase1`: `starting migration of VM <id> to node '<n>' (<ip>)`;
//!   `scan_local_volumes`: `found local disk '<volid>' (attached)`,
//!   `can't migrate local disk '<volid>': non-migratable snapshot exists` for snapshots on a
//!   storage other than zfs/btrfs/qcow2, `online storage migration not possible if
//!   non-replicated snapshot exists`, `can't live migrate attached local disks without
//!   with-local-disks option`, `local cdrom image`, then
//!   `Problem found while scanning volumes - can't migrate VM - check log`;
//!   `phase1_cleanup`: `aborting phase 1 - cleanup resources`;
//!   `sync_offline_local_volumes`: `copying local disk images`,
//!   `volume '<v>' is '<v>' on the target`; the live phase's lines).
//! * pve-guest-common `AbstractMigrate.pm`: every log line starts with
//!   `strftime("%F %H:%M:%S")`, errors with `ERROR: `; the end is
//!   `migration finished successfully (duration HH:MM:SS)` or
//!   `migration aborted (duration …): <err>` with TASK ERROR `migration aborted`.
//! * pve-container 94f558522ef6 `src/PVE/API2/LXC.pm` `migrate_vm`
//!   (`can't migrate running container without --online or --restart`; `hamigrate` /
//!   `vzmigrate`) and `src/PVE/LXC/Migrate.pm` (`shutdown CT <id>`,
//!   `starting migration of CT <id> to node '<n>' (<ip>)`, `found local volume '<v>' (in
//!   current VM config)`, `can't migrate CT - check log`, `start final cleanup`,
//!   `start container on target node`).
//!
//! [INFER]: copying a disk's lines are representative (lvcreate, `successfully imported`,
//! lvremove), not captured; durations are fixed; an HA migration moves the guest at once (the
//! CRM does it a few seconds later).

use crate::ops::{self, TaskRun, run_task};
use crate::settings::{check_lock, param_exc};
use crate::state::Kind;
use crate::state::State;
use crate::{Ctx, Failure, timefmt};

/// What a migration request asks for.
#[derive(Debug, Clone, Copy)]
pub struct Migrate<'a> {
    /// The node the guest is on (the path's node).
    pub node: &'a str,
    /// VM or container.
    pub kind: Kind,
    /// The guest.
    pub vmid: u32,
    /// `--target`.
    pub target: &'a str,
    /// `--online` (VM) .
    pub online: bool,
    /// `--with-local-disks` (VM).
    pub with_local_disks: bool,
    /// `--restart` (container).
    pub restart: bool,
}

/// What a migration prints before its result (stderr of the API call).
pub struct Started {
    /// The task.
    pub task: TaskRun,
    /// `warn` lines of the pre-fork checks.
    pub warnings: Vec<String>,
}

/// `POST /nodes/{node}/{qemu,lxc}/{vmid}/migrate --target N …`.
pub fn migrate(st: &mut State, ctx: &Ctx, m: &Migrate) -> Result<Started, Failure> {
    let (node, kind, vmid) = (m.node, m.kind, m.vmid);
    if m.target == node {
        return Err(param_exc("target", "target is local node."));
    }
    let Some(target_ip) = st.node(m.target).map(|n| n.ip.clone()) else {
        return Err(Failure::die(format!("no such cluster node '{}'", m.target)));
    };
    let g = ops::load(st, node, kind, vmid)?.clone();
    let mut warnings = Vec::new();
    if kind == Kind::Qemu {
        check_lock(&g)?;
        if g.running && !m.online {
            return Err(Failure::die("can't migrate running VM without --online"));
        }
        if !g.running && m.online {
            warnings.push("VM isn't running. Doing offline migration instead.".to_string());
        }
    } else if g.running && !m.restart {
        return Err(Failure::die(
            "can't migrate running container without --online or --restart",
        ));
    }
    let target = m.target.to_string();
    let noun = kind.noun();
    if g.ha.is_some() {
        let task = run_task(st, ctx, node, "hamigrate", &vmid.to_string(), |st, log| {
            log.push(format!(
                "Requesting HA migration for {noun} {vmid} to node {target}"
            ));
            if let Some(g) = st.guests.get_mut(&vmid) {
                g.node = target.clone();
            }
            Ok(())
        });
        return Ok(Started { task, warnings });
    }
    let ttype = match kind {
        Kind::Qemu => "qmigrate",
        Kind::Lxc => "vzmigrate",
    };
    let now = ctx.now;
    let online = kind == Kind::Qemu && m.online && g.running;
    let with_local = m.with_local_disks;
    let restart = kind == Kind::Lxc && m.restart && g.running;
    let task = run_task(st, ctx, node, ttype, &vmid.to_string(), |st, log| {
        let ts = timefmt::iso(now);
        let mut say = |line: String| log.push(format!("{ts} {line}"));
        let g = st
            .guests
            .get(&vmid)
            .cloned()
            .ok_or_else(|| ops::conf_missing(&target, kind, vmid))?;
        if restart {
            say(format!("shutdown CT {vmid}"));
        }
        say(format!(
            "starting migration of {noun} {vmid} to node '{target}' ({target_ip})"
        ));
        // scan_local_volumes: every local disk, and why it cannot move.
        let in_snapshot = |volid: &str| {
            g.snapshots.iter().any(|s| {
                crate::state::disks_of(&s.config)
                    .iter()
                    .any(|(_, v)| v == volid)
            })
        };
        let mut errors: Vec<(String, &str)> = Vec::new();
        let mut disks = Vec::new();
        for (key, volid) in g.disks() {
            let sid = volid.split(':').next().unwrap_or("");
            let Some(scfg) = st.storage(sid) else {
                continue;
            };
            if scfg.shared {
                continue;
            }
            match kind {
                Kind::Qemu => say(format!("found local disk '{volid}' (attached)")),
                Kind::Lxc => say(format!(
                    "found local volume '{volid}' (in current VM config)"
                )),
            }
            let snapshots_move = scfg.kind == "zfspool" || scfg.kind == "btrfs";
            if in_snapshot(&volid) && !snapshots_move {
                errors.push((
                    volid.clone(),
                    if online {
                        "online storage migration not possible if non-replicated snapshot exists"
                    } else {
                        "non-migratable snapshot exists"
                    },
                ));
            } else if online && !with_local {
                errors.push((
                    volid.clone(),
                    "can't live migrate attached local disks without with-local-disks option",
                ));
            }
            disks.push((key, volid));
        }
        // A CD-ROM image on a storage the target cannot read (QemuMigrate `$test_volid`).
        for (k, v) in &g.config {
            let Some(s) = v.as_str() else { continue };
            let volid = s.split(',').next().unwrap_or("");
            let local = st
                .storage(volid.split(':').next().unwrap_or(""))
                .is_some_and(|sc| !sc.shared);
            if kind == Kind::Qemu && s.contains("media=cdrom") && volid.contains(':') && local {
                let _ = k;
                errors.push((volid.to_string(), "local cdrom image"));
            }
        }
        if !errors.is_empty() {
            let check = match kind {
                Kind::Qemu => "can't migrate VM - check log",
                Kind::Lxc => "can't migrate CT - check log",
            };
            for (volid, why) in &errors {
                match kind {
                    Kind::Qemu => say(format!("can't migrate local disk '{volid}': {why}")),
                    Kind::Lxc => say(format!("can't migrate local volume '{volid}': {why}")),
                }
            }
            let err = match kind {
                Kind::Qemu => format!("Problem found while scanning volumes - {check}"),
                Kind::Lxc => check.to_string(),
            };
            say(format!("ERROR: {err}"));
            say("aborting phase 1 - cleanup resources".into());
            say(format!(
                "ERROR: migration aborted (duration 00:00:00): {err}"
            ));
            return Err("migration aborted".into());
        }
        if online {
            say(format!("starting VM {vmid} on remote node '{target}'"));
            for (_, volid) in &disks {
                say(format!("volume '{volid}' is '{volid}' on the target"));
            }
            say("start remote tunnel".into());
            say("ssh tunnel ver 1".into());
            say("starting storage migration".into());
            for (key, _) in &disks {
                say(format!(
                    "{key}: start migration to nbd:unix:/run/qemu-server/{vmid}_nbd.migrate:exportname=drive-{key}"
                ));
                say(format!("drive mirror is starting for drive-{key}"));
            }
            say("all 'mirror' jobs are ready".into());
            say(format!(
                "starting online/live migration on unix:/run/qemu-server/{vmid}.migrate"
            ));
            say("set migration capabilities".into());
            say("migration downtime limit: 100 ms".into());
            say("set migration parameters".into());
            say(format!(
                "start migrate command to unix:/run/qemu-server/{vmid}.migrate"
            ));
            say("migration status: completed".into());
            for (key, _) in &disks {
                say(format!("drive-{key}: mirror-job finished"));
            }
        } else if !disks.is_empty() {
            if kind == Kind::Qemu {
                say("copying local disk images".into());
            }
            for (_, volid) in &disks {
                let lv = volid.rsplit([':', '/']).next().unwrap_or("");
                say(format!("  Logical volume \"{lv}\" created."));
                say(format!("successfully imported '{volid}'"));
                say(format!("volume '{volid}' is '{volid}' on the target"));
            }
        }
        for (_, volid) in &disks {
            let lv = volid.rsplit([':', '/']).next().unwrap_or("");
            say(format!("  Logical volume \"{lv}\" successfully removed."));
        }
        if kind == Kind::Lxc {
            say("start final cleanup".into());
            if restart {
                say("start container on target node".into());
            }
        }
        say("migration finished successfully (duration 00:00:01)".into());
        if let Some(g) = st.guests.get_mut(&vmid) {
            g.node = target.clone();
        }
        if restart {
            if let Some(g) = st.guests.get_mut(&vmid) {
                ops::set_stopped(g);
            }
            ops::set_running(st, vmid, now);
        }
        Ok(())
    });
    Ok(Started { task, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::initial;

    const NOW: i64 = 1_790_000_000;

    #[test]
    fn migrate_moves_or_explains() {
        let mut st = initial(NOW);
        let ctx = Ctx::new(NOW);
        let m = |vmid, target, online, restart| Migrate {
            node: "pve1",
            kind: if (200..300).contains(&vmid) {
                Kind::Lxc
            } else {
                Kind::Qemu
            },
            vmid,
            target,
            online,
            with_local_disks: online,
            restart,
        };
        let f = migrate(&mut st, &ctx, &m(100, "pve1", false, false))
            .err()
            .unwrap();
        assert_eq!(
            f.msg,
            "400 Parameter verification failed.\ntarget: target is local node.\n"
        );
        let f = migrate(&mut st, &ctx, &m(100, "pve2", false, false))
            .err()
            .unwrap();
        assert_eq!(f.msg, "can't migrate running VM without --online");
        let f = migrate(&mut st, &ctx, &m(100, "pve9", false, false))
            .err()
            .unwrap();
        assert_eq!(f.msg, "no such cluster node 'pve9'");
        // Snapshots on LVM-thin cannot move.
        let s = migrate(&mut st, &ctx, &m(102, "pve2", false, false))
            .ok()
            .unwrap();
        assert_eq!(s.task.error.as_deref(), Some("migration aborted"));
        assert!(s.task.log.iter().any(|l| l.ends_with(
            "can't migrate local disk 'local-lvm:vm-102-disk-0': non-migratable snapshot exists"
        )));
        assert_eq!(st.guests[&102].node, "pve1");
        // A running VM moves live, with its local disks.
        let s = migrate(&mut st, &ctx, &m(100, "pve2", true, false))
            .ok()
            .unwrap();
        assert!(s.task.error.is_none(), "{:?}", s.task.log);
        assert!(s.task.upid.contains(":qmigrate:100:"));
        assert_eq!(st.guests[&100].node, "pve2");
        assert!(st.guests[&100].running);
        // A running container moves by restart only.
        let f = migrate(&mut st, &ctx, &m(200, "pve3", false, false))
            .err()
            .unwrap();
        assert_eq!(
            f.msg,
            "can't migrate running container without --online or --restart"
        );
        let s = migrate(&mut st, &ctx, &m(200, "pve3", false, true))
            .ok()
            .unwrap();
        assert!(s.task.error.is_none());
        assert_eq!(
            s.task.log[0]
                .split_once(' ')
                .unwrap()
                .1
                .split_once(' ')
                .unwrap()
                .1,
            "shutdown CT 200"
        );
        assert_eq!(
            (st.guests[&200].node.as_str(), st.guests[&200].running),
            ("pve3", true)
        );
        // HA guests: the CRM does it.
        let mut ha = m(104, "pve3", false, false);
        ha.node = "pve2";
        let s = migrate(&mut st, &ctx, &ha).ok().unwrap();
        assert_eq!(
            s.task.log,
            ["Requesting HA migration for VM 104 to node pve3"]
        );
        assert!(s.task.upid.contains(":hamigrate:104:"));
    }
}
