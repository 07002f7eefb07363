//! Local and host policy against the real binary: an entry for an op covers its variants (the CLI,
//! the dry run, the MCP tool list and the host gate alike), and `protect` covers a guest's backups.
//! The dry-run and listing tests need no host; the others run on the bed (or the gated bed) and
//! prove that nothing reached sudo.

use crate::support::*;

const QEMU_100: &str = "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst";
const LXC_200: &str = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";

/// The four rows of `backup restore`, as command lines (each with its phrase where it has one).
fn restores() -> Vec<Vec<&'static str>> {
    vec![
        vec!["backup", "restore", QEMU_100, "--vmid", "150"],
        vec!["backup", "restore", LXC_200, "--vmid", "250"],
        vec![
            "backup",
            "restore",
            QEMU_100,
            "--vmid",
            "100",
            "--force",
            "--confirm",
            "yes overwrite 100",
        ],
        vec![
            "backup",
            "restore",
            LXC_200,
            "--vmid",
            "200",
            "--force",
            "--confirm",
            "yes overwrite 200",
        ],
    ]
}

#[test]
fn deny_on_backup_restore_covers_its_variants_in_the_dry_run_and_the_tool_list() {
    let home = Home::new();
    home.write("deny.yaml", b"ops:\n  backup.restore: deny\n");
    for args in restores() {
        let r = home
            .px()
            .args(["--policy", "deny.yaml", "-o", "json", "--dry-run"])
            .args(&args)
            .run();
        assert_eq!(r.code, 3, "{args:?}: {}", r.stdout);
        let e = &r.json()["error"];
        assert_eq!(e["kind"], "policy_refused", "{args:?}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("policy.ops.backup.restore"),
            "{e}"
        );
    }
    // A variant's own entry decides for it.
    home.write(
        "ct.yaml",
        b"ops:\n  backup.restore: deny\n  backup.restore-ct: allow\n",
    );
    let r = home
        .px()
        .args(["--policy", "ct.yaml", "--dry-run"])
        .args(&restores()[1])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // The MCP server lists none of the four tools.
    let r = home
        .px()
        .args([
            "-H",
            "127.0.0.1",
            "--policy",
            "deny.yaml",
            "mcp",
            "--list-tools",
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("backup_list\t"), "{}", r.stdout);
    assert!(!r.stdout.contains("backup_restore"), "{}", r.stdout);
    home.write("snap.yaml", b"ops:\n  vm.snapshot: deny\n");
    let r = home
        .px()
        .args([
            "-H",
            "127.0.0.1",
            "--policy",
            "snap.yaml",
            "mcp",
            "--list-tools",
        ])
        .run();
    for tool in ["vm_snapshot\t", "vm_snapshot_vmstate\t"] {
        assert!(!r.stdout.contains(tool), "{tool}: {}", r.stdout);
    }
    assert!(r.stdout.contains("vm_snapshots\t"), "{}", r.stdout);
}

#[test]
fn deny_on_backup_restore_refuses_a_forced_restore_on_the_bed() {
    let _g = lock();
    let home = Home::new();
    home.write("deny.yaml", b"ops:\n  backup.restore: deny\n");
    let before = sudo_log_len();
    for args in restores() {
        let r = home
            .px()
            .bed()
            .args(["--policy", "deny.yaml", "-o", "json"])
            .args(&args)
            .run();
        assert_eq!(r.code, 3, "{args:?}: {}", r.stdout);
    }
    assert_not_sent(before, &["/qemu --vmid", "/lxc --vmid"]);
}

#[test]
fn the_host_gate_covers_variants_too() {
    let _g = lock();
    let g = gated();
    let _p = g.policy("ops:\n  \"*\": allow\n  backup.restore: deny\n");
    let home = Home::new();
    // A backup of VM 100 the bed really has (the client's prechecks look for it).
    let list = home
        .px()
        .gated()
        .args(["-o", "json", "backup", "list", "--vmid", "100"])
        .run();
    assert_eq!(list.code, 0, "{}", list.stdout);
    let archive = list.json()["data"][0]["volid"]
        .as_str()
        .unwrap_or_else(|| panic!("no backup of 100: {}", list.stdout))
        .to_string();
    let args = [
        "backup",
        "restore",
        &archive,
        "--vmid",
        "100",
        "--force",
        "--confirm",
        "yes overwrite 100",
    ];
    let r = home.px().gated().args(["-o", "json"]).args(args).run();
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    let e = &r.json()["error"];
    assert_eq!(e["source"], "host", "{e}");
    assert_eq!(e["kind"], "policy_refused", "{e}");
}

#[test]
fn protect_covers_the_backups_of_a_protected_guest() {
    let _g = lock();
    let home = Home::new();
    home.write("protect.yaml", b"protect: [100, 200]\n");
    let before = sudo_log_len();
    let cases: Vec<Vec<&str>> = vec![
        // A restore to a VMID nobody protects, of a protected guest's backup.
        vec!["backup", "restore", QEMU_100, "--vmid", "177"],
        vec!["backup", "restore", LXC_200, "--vmid", "277"],
        vec![
            "backup",
            "remove",
            QEMU_100,
            "--confirm",
            "yes remove local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst",
        ],
        vec![
            "backup",
            "prune",
            "100",
            "--keep-last",
            "1",
            "--confirm",
            "yes prune 100",
        ],
    ];
    for args in &cases {
        let r = home
            .px()
            .bed()
            .args(["--policy", "protect.yaml", "-o", "json"])
            .args(args)
            .run();
        assert_eq!(r.code, 3, "{args:?}: {}", r.stdout);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("is protected"), "{msg}");
    }
    assert_not_sent(
        before,
        &["--vmid 177", "--vmid 277", "pvesm free", "prunebackups"],
    );
    // Listing the backups stays allowed.
    let r = home
        .px()
        .bed()
        .args([
            "--policy",
            "protect.yaml",
            "backup",
            "list",
            "--vmid",
            "100",
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
}
