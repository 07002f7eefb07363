//! Proof against real sudo that VMID fences cover backups: with a `--vmids`/`--ctids` render
//! installed and checked by `visudo -c`, `sudo -n -l CMD` admits a restore only when both the
//! target VMID and the archive's own VMID are inside the fence, a removal or prune only for guests
//! inside it, and nothing that no fence can restrict (`pvesh delete /storage/…`) unless the render
//! was asked for it with `--unfenced-ops`; and a container restore only with `--unprivileged 1`.
//!
//! Same environment as `sudo_rules` (root, sudo, the bed's simulator at the PVE paths), whose
//! helpers these tests share; they FAIL, never skip, without it.

use std::collections::BTreeMap;

use pxagent::catalog::{OPS, Op, Profile, ops};

use crate::sudo_rules::{Installed, allowed, render, samples, w};
use crate::support::lock;

/// The argv pxagent builds for `op` with these values (node `pve1`).
fn argv(op: &Op, values: &[(&'static str, String)]) -> Vec<String> {
    let mut v: BTreeMap<&'static str, String> = values.iter().cloned().collect();
    v.insert("node", "pve1".into());
    op.argv(&v)
}

fn archive(kind: &str, vmid: u32) -> String {
    let ext = if kind == "qemu" { "vma.zst" } else { "tar.zst" };
    format!("local:backup/vzdump-{kind}-{vmid}-2026_11_01-02_00_00.{ext}")
}

fn restore(op: &Op, kind: &str, from: u32, to: u32) -> Vec<String> {
    let mut v = vec![("archive", archive(kind, from)), ("vmid", to.to_string())];
    if op.selecting_flags().any(|f| f == "force") {
        v.push(("force", "1".into()));
    }
    argv(op, &v)
}

#[test]
fn fenced_restores_need_both_vmids_inside_the_fence() {
    let _guard = lock();
    let _installed = Installed::new(&render(
        "full",
        &["--vmids", "100-199", "--ctids", "300-309"],
    ));
    // The case that must fail: a VM backup of 250 (outside the fence) restored to 177.
    assert!(!allowed(&restore(&ops::BACKUP_RESTORE, "qemu", 250, 177)));
    for op in [&ops::BACKUP_RESTORE, &ops::BACKUP_RESTORE_OVERWRITE] {
        for (from, to, ok) in [
            (150, 177, true),
            (100, 199, true),
            (199, 100, true),
            (99, 177, false),
            (200, 177, false),
            (250, 177, false),
            (150, 99, false),
            (150, 200, false),
            (150, 250, false),
            // The container fence does not admit VM restores.
            (300, 150, false),
            (150, 300, false),
        ] {
            assert_eq!(
                allowed(&restore(op, "qemu", from, to)),
                ok,
                "{} {from} -> {to}",
                op.id
            );
        }
        // A container's archive never passes a VM restore rule.
        assert!(!allowed(&restore(op, "lxc", 150, 177)), "{}", op.id);
    }
    for op in [&ops::BACKUP_RESTORE_CT, &ops::BACKUP_RESTORE_CT_OVERWRITE] {
        for (from, to, ok) in [
            (300, 305, true),
            (309, 300, true),
            (299, 305, false),
            (310, 305, false),
            (305, 310, false),
            (150, 305, false),
            (305, 150, false),
        ] {
            assert_eq!(
                allowed(&restore(op, "lxc", from, to)),
                ok,
                "{} {from} -> {to}",
                op.id
            );
        }
    }
}

#[test]
fn fenced_removes_and_prunes_stay_inside_the_fence() {
    let _guard = lock();
    let _installed = Installed::new(&render(
        "full",
        &["--vmids", "100-199", "--ctids", "300-309"],
    ));
    for (kind, id, ok) in [
        ("qemu", 100, true),
        ("qemu", 199, true),
        ("qemu", 99, false),
        ("qemu", 200, false),
        ("qemu", 250, false),
        ("lxc", 300, true),
        ("lxc", 309, true),
        ("lxc", 310, false),
        ("lxc", 299, false),
    ] {
        let line = argv(&ops::BACKUP_REMOVE, &[("archive", archive(kind, id))]);
        assert_eq!(allowed(&line), ok, "{line:?}");
    }
    for (id, ok) in [(150, true), (305, true), (250, false), (99, false)] {
        let line = argv(
            &ops::BACKUP_PRUNE,
            &[
                ("vmid", id.to_string()),
                ("keep_last", "2".into()),
                ("storage", "local".into()),
            ],
        );
        assert_eq!(allowed(&line), ok, "{line:?}");
    }
}

#[test]
fn fenced_renders_refuse_what_no_fence_restricts() {
    let _guard = lock();
    let remove = w(&[
        "/usr/bin/pvesh",
        "delete",
        "/storage/local-lvm",
        "--output-format",
        "json",
    ]);
    {
        let _installed = Installed::new(&render("full", &["--vmids", "100-199"]));
        assert!(!allowed(&remove), "storage remove in a fenced render");
        for op in [
            &ops::ISO_DOWNLOAD,
            &ops::ISO_REMOVE,
            &ops::TEMPLATE_DOWNLOAD,
            &ops::TEMPLATE_REMOVE,
        ] {
            for line in samples(op) {
                assert!(!allowed(&line), "{} {line:?}", op.id);
            }
        }
    }
    // Asked for explicitly, they are back, and the fences still hold everywhere else.
    let _installed = Installed::new(&render("full", &["--vmids", "100-199", "--unfenced-ops"]));
    assert!(allowed(&remove));
    assert!(!allowed(&restore(&ops::BACKUP_RESTORE, "qemu", 250, 177)));
    // Unfenced, storage remove is in `full` as always.
    drop(_installed);
    let _installed = Installed::new(&render("full", &[]));
    assert!(allowed(&remove));
}

/// A fenced render admits every command line the client builds for guests inside the fence
/// (each op × every optional-parameter combination, with the catalog's example ids 100 and
/// 200 inside), and refuses exactly the ops it leaves out.
#[test]
fn fenced_render_admits_every_sample_inside_its_fence() {
    let _guard = lock();
    let _installed = Installed::new(&render("full", &["--vmids", "100-299"]));
    let left_out = [
        &ops::TASK_STOP,
        &ops::STORAGE_REMOVE,
        &ops::ISO_DOWNLOAD,
        &ops::ISO_UPLOAD,
        &ops::ISO_REMOVE,
        &ops::TEMPLATE_DOWNLOAD,
        &ops::TEMPLATE_REMOVE,
        &ops::IMAGE_DOWNLOAD,
        &ops::IMAGE_REMOVE,
        &ops::STORAGE_ADD_DIR,
        &ops::STORAGE_ADD_LVMTHIN,
        &ops::STORAGE_ADD_ZFSPOOL,
        &ops::STORAGE_ADD_NFS,
        &ops::STORAGE_SET,
        &ops::STORAGE_SET_MOUNTPOINT,
        &ops::STORAGE_ENABLE,
        &ops::STORAGE_DISABLE,
        &ops::BRIDGE_CREATE,
        &ops::BRIDGE_REMOVE,
        &ops::NETWORK_REVERT,
        &ops::NETWORK_APPLY,
        &ops::NETWORK_CONFIRM,
        &ops::NODE_FIREWALL_ADD,
        &ops::NODE_FIREWALL_REMOVE,
        &ops::CLUSTER_FIREWALL_ADD,
        &ops::CLUSTER_FIREWALL_REMOVE,
        &ops::HA_RULE_NODE_AFFINITY,
        &ops::HA_RULE_RESOURCE_AFFINITY,
        &ops::HA_RULE_REMOVE,
        &ops::BACKUP_JOB_CREATE,
        &ops::BACKUP_JOB_REMOVE,
        &ops::BACKUP_JOB_RUN,
    ];
    for op in OPS {
        let expected = Profile::Full.allows_op(op) && !left_out.contains(op);
        for line in samples(op) {
            assert_eq!(allowed(&line), expected, "{} {line:?}", op.id);
        }
    }
}

#[test]
fn container_restores_only_unprivileged() {
    let _guard = lock();
    let _installed = Installed::new(&render("full", &[]));
    for op in [&ops::BACKUP_RESTORE_CT, &ops::BACKUP_RESTORE_CT_OVERWRITE] {
        let with = restore(op, "lxc", 200, 210);
        assert!(
            with.windows(2).any(|p| p == ["--unprivileged", "1"]),
            "{with:?}"
        );
        assert!(allowed(&with), "{with:?}");
        let strip = |from: &[String], replacement: Option<&str>| -> Vec<String> {
            let i = from.iter().position(|a| a == "--unprivileged").unwrap();
            let mut v = from.to_vec();
            match replacement {
                None => {
                    v.drain(i..i + 2);
                }
                Some(r) => v[i + 1] = r.to_string(),
            }
            v
        };
        assert!(!allowed(&strip(&with, None)), "{} without the flag", op.id);
        assert!(!allowed(&strip(&with, Some("0"))), "{} privileged", op.id);
    }
}
