//! VMs from cloud images, live on the sandbox host and against real sudo: `image download`
//! (import content), `vm create --image` with cloud-init (`--ciuser`, `--sshkey FILE`, `--ip`),
//! `vm cloudinit` and `cloudinit-set|keys|regenerate`, `vm template` (its phrase), a full clone with a
//! static IP, and `image remove`; through the gate too. The sudo test proves the new rules
//! admit the catalog's lines and refuse their dangerous neighbours: `import-from` a host path or a
//! device, `cicustom`, `cipassword`, a key that reads as an option, a `.img` or `..` file name.
//! Like `newops.rs` these FAIL (never skip) without the bed.

use serde_json::Value;

use crate::sudo_rules::{Installed, allowed, render, samples, w};
use crate::support::{Home, gated, lock, sim_get};
use pxagent::catalog::{Profile, ops};

/// A real ed25519 public key (made with ssh-keygen for these tests; its private half was
/// thrown away).
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBRQPGL2CEQuW0392R+C9lGvfVuz1GCljUYKWbWiGOiw alice@laptop";
const DEBIAN: &str =
    "https://cloud.debian.org/images/cloud/trixie/latest/debian-13-genericcloud-amd64.qcow2";
const UBUNTU: &str =
    "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img";

fn ok(r: &crate::support::Run) -> Value {
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    r.json()["data"].clone()
}

fn config(vmid: u64) -> Value {
    sim_get(&format!("/nodes/pve1/qemu/{vmid}/config"), &[])
}

fn imports() -> Vec<String> {
    sim_get(
        "/nodes/pve1/storage/local/content",
        &["--content", "import"],
    )
    .as_array()
    .unwrap()
    .iter()
    .map(|v| v["volid"].as_str().unwrap().to_string())
    .collect()
}

/// Remove what a test made (VMs, images), whatever state it left them in.
struct Cleanup<'h> {
    home: &'h Home,
    vms: Vec<&'static str>,
    images: Vec<&'static str>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for vmid in &self.vms {
            let phrase = format!("yes destroy {vmid}");
            let _ = self
                .home
                .on_bed(&["vm", "destroy", vmid, "--confirm", &phrase]);
        }
        for image in &self.images {
            let phrase = format!("yes remove {image}");
            let _ = self
                .home
                .on_bed(&["image", "remove", image, "--confirm", &phrase]);
        }
    }
}

#[test]
fn cloud_image_to_vm_with_cloud_init_then_template_then_clone_with_a_static_ip() {
    let _g = lock();
    let home = Home::new();
    let _clean = Cleanup {
        home: &home,
        vms: vec!["731", "730"],
        images: vec![
            "local:import/debian-13-genericcloud-amd64.qcow2",
            "local:import/noble-server-cloudimg-amd64.qcow2",
        ],
    };
    let key = home.path().join("id_ed25519.pub");
    std::fs::write(&key, format!("# laptop\n{KEY}\n")).unwrap();

    // The host downloads the images into import content; a `.img` is stored as `.qcow2`.
    ok(&home.on_bed(&["image", "download", DEBIAN, "-o", "json"]));
    ok(&home.on_bed(&["image", "download", UBUNTU, "-o", "json"]));
    let have = imports();
    for v in [
        "local:import/debian-13-genericcloud-amd64.qcow2",
        "local:import/noble-server-cloudimg-amd64.qcow2",
    ] {
        assert!(have.iter().any(|h| h == v), "{v} not in {have:?}");
    }
    let listed = ok(&home.on_bed(&["image", "list", "-o", "json"]));
    assert!(
        listed
            .to_string()
            .contains("debian-13-genericcloud-amd64.qcow2"),
        "{listed}"
    );
    // Like ISO downloads: nothing inside the host's own network, no other extension.
    let r = home.on_bed(&["image", "download", "http://169.254.169.254/latest/x.qcow2"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = home.on_bed(&["image", "download", DEBIAN, "--filename", "x.iso"]);
    assert_eq!(r.code, 2, "{}", r.stderr);

    // A VM from the image, with cloud-init: the user, the key file, DHCP.
    let made = ok(&home.on_bed(&[
        "vm",
        "create",
        "--vmid",
        "730",
        "--name",
        "ci-730",
        "--image",
        "local:import/debian-13-genericcloud-amd64.qcow2",
        "--ciuser",
        "debian",
        "--sshkey",
        key.to_str().unwrap(),
        "--ip",
        "dhcp",
        "-o",
        "json",
    ]));
    assert_eq!(made["task"]["exitstatus"], "OK", "{made}");
    // import-from keeps the image's size; the step after it grows the disk to --disk-size
    // (default 32 GiB), as an op of its own.
    assert_eq!(made["then"][0]["op"], "vm.resize", "{made}");
    assert!(
        made["then"][0]["argv"].to_string().contains("--size"),
        "{made}"
    );
    let cfg = config(730);
    let scsi0 = cfg["scsi0"].as_str().unwrap();
    assert!(
        scsi0.starts_with("local-lvm:vm-730-disk-0,") && scsi0.ends_with("size=32G"),
        "{cfg}"
    );
    assert!(!cfg.to_string().contains("import-from"), "{cfg}");
    assert_eq!(
        cfg["ide2"], "local-lvm:vm-730-cloudinit,media=cdrom",
        "{cfg}"
    );
    assert_eq!(cfg["ciuser"], "debian");
    assert_eq!(cfg["ipconfig0"], "ip=dhcp");
    assert_eq!(cfg["serial0"], "socket");
    // The key travels URL-encoded, as PVE stores it.
    let sshkeys = cfg["sshkeys"].as_str().unwrap();
    assert!(
        sshkeys.starts_with("ssh-ed25519%20AAAA") && !sshkeys.contains(' '),
        "{sshkeys}"
    );

    // cloud-init shows what is pending until the drive is regenerated.
    let pending = ok(&home.on_bed(&["vm", "cloudinit", "730", "-o", "json"]));
    let entry = |v: &Value, k: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == k)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(entry(&pending, "ciuser")["pending"], "debian", "{pending}");
    ok(&home.on_bed(&["vm", "cloudinit-regenerate", "730", "-o", "json"]));
    let now = ok(&home.on_bed(&["vm", "cloudinit", "730", "-o", "json"]));
    assert_eq!(entry(&now, "ciuser")["value"], "debian", "{now}");
    assert!(entry(&now, "ciuser")["pending"].is_null(), "{now}");

    // A template needs its phrase; then it is one.
    let r = home.on_bed(&["vm", "template", "730"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("yes template 730"), "{}", r.stderr);
    assert!(config(730)["template"].is_null());
    ok(&home.on_bed(&[
        "vm",
        "template",
        "730",
        "--confirm",
        "yes template 730",
        "-o",
        "json",
    ]));
    assert_eq!(config(730)["template"], 1);

    // A full clone with its own static address and DNS (PVE's clone takes no cloud-init
    // settings: a `vm cloudinit-set` step follows it), then a snapshot before a change.
    let cloned = ok(&home.on_bed(&[
        "vm",
        "clone",
        "730",
        "731",
        "--name",
        "ci-731",
        "--full",
        "--ip",
        "10.0.0.31/24",
        "--gw",
        "10.0.0.1",
        "--nameserver",
        "10.0.0.1",
        "--searchdomain",
        "example.org",
        "-o",
        "json",
    ]));
    assert_eq!(cloned["then"][0]["op"], "vm.cloudinit-set", "{cloned}");
    let cfg = config(731);
    assert_eq!(cfg["ipconfig0"], "ip=10.0.0.31/24,gw=10.0.0.1", "{cfg}");
    assert_eq!(cfg["nameserver"], "10.0.0.1");
    assert_eq!(cfg["searchdomain"], "example.org");
    assert_eq!(
        cfg["ciuser"], "debian",
        "the clone keeps the template's cloud-init user"
    );
    ok(&home.on_bed(&["vm", "snapshot", "731", "pre-change", "-o", "json"]));
    // Each step has its own audit record, after its op's.
    let audit = home.on_bed(&["audit", "show", "-o", "json"]);
    let ops_in_order: Vec<String> = ok(&audit)
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] != "started")
        .map(|r| r["op"].as_str().unwrap_or_default().to_string())
        .collect();
    let pos = |op: &str| ops_in_order.iter().position(|o| o == op);
    assert!(
        pos("vm.create-image") < pos("vm.resize"),
        "{ops_in_order:?}"
    );
    assert!(
        pos("vm.clone") < pos("vm.cloudinit-set"),
        "{ops_in_order:?}"
    );
    // The dry run shows the steps, and --no-wait refuses them (it could not run them).
    let create = |more: &[&str]| {
        let mut args = vec![
            "vm",
            "create",
            "--name",
            "x",
            "--image",
            "local:import/debian-13-genericcloud-amd64.qcow2",
        ];
        args.extend_from_slice(more);
        home.on_bed(&args)
    };
    let dry = ok(&create(&["--dry-run", "-o", "json"]));
    assert!(
        dry["then"][0]["then"].as_str().unwrap().contains("32 GiB"),
        "{dry}"
    );
    // Every step with its command line, values as far as they are known:
    // the new VMID and the growth are the run's, never a stand-in that looks real.
    let step: Vec<&str> = dry["then"][0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        step.contains(&"/nodes/<node>/qemu/<vmid>/resize") && step.contains(&"+<growth>G"),
        "{step:?}"
    );
    // The checks say what they check, with the values given.
    let checks = dry["prechecks"].to_string();
    assert!(
        checks.contains("storage local-lvm has room for 32 GiB") && !checks.contains("SpaceGib"),
        "{checks}"
    );
    let human = create(&["--vmid", "777", "--dry-run"]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(
        human
            .stdout
            .contains("  then:     vm resize: scsi0 grown to 32 GiB")
            && human
                .stdout
                .contains("/qemu/777/resize' --disk scsi0 --size '+<growth>G'")
            && human
                .stdout
                .contains("  checks:   no guest has VMID 777 yet"),
        "{}",
        human.stdout
    );
    let r = create(&["--no-wait"]);
    assert_eq!(r.code, 2, "{}", r.stderr);

    // What the client refuses before anything is sent.
    for (args, why) in [
        (
            vec![
                "vm",
                "cloudinit-set",
                "731",
                "--ip",
                "10.0.0.31/24",
                "--gw",
                "10.0.1.1",
            ],
            "gateway",
        ),
        (
            vec![
                "vm",
                "cloudinit-set",
                "731",
                "--ip",
                "dhcp",
                "--gw",
                "10.0.0.1",
            ],
            "DHCP",
        ),
        (
            vec!["vm", "cloudinit-set", "731", "--ip", "10.0.0.31"],
            "prefix",
        ),
        (
            vec!["vm", "cloudinit-keys", "731", "--ciuser", "Root Admin"],
            "ciuser",
        ),
        (vec!["vm", "cloudinit-set", "731"], "one of"),
        (vec!["vm", "cloudinit-keys", "731"], "one of"),
    ] {
        let r = home.on_bed(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(why), "{args:?}: {}", r.stderr);
    }
    let bad = home.path().join("bad.pub");
    std::fs::write(&bad, "command=\"id\" ".to_string() + KEY).unwrap();
    let r = home.on_bed(&[
        "vm",
        "cloudinit-keys",
        "731",
        "--sshkey",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = home.on_bed(&["vm", "cloudinit-keys", "731", "--sshkey", "/etc"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn the_gate_runs_the_cloud_image_ops_and_refuses_their_dangerous_neighbours() {
    let _g = lock();
    let g = gated();
    let home = Home::new();
    let _clean = Cleanup {
        home: &home,
        vms: vec!["732"],
        images: vec!["local:import/debian-13-genericcloud-amd64.qcow2"],
    };
    let key = home.path().join("k.pub");
    std::fs::write(&key, KEY).unwrap();
    let run = |args: &[&str]| home.px().gated().args(args).run();
    let r = run(&["image", "download", DEBIAN]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&[
        "vm",
        "create",
        "--vmid",
        "732",
        "--name",
        "ci-732",
        "--image",
        "local:import/debian-13-genericcloud-amd64.qcow2",
        "--sshkey",
        key.to_str().unwrap(),
        "--ip",
        "10.0.0.32/24,gw=10.0.0.1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(config(732)["ipconfig0"], "ip=10.0.0.32/24,gw=10.0.0.1");
    let r = run(&["vm", "cloudinit-keys", "732", "--ciuser", "ops"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let create = "sudo -n /usr/bin/pvesh create /nodes/pve1/qemu --vmid 733 --name x --memory 2048 --cores 2 --scsihw virtio-scsi-single";
    for line in [
        format!("{create} --scsi0 local-lvm:0,import-from=/etc/shadow --ide2 local-lvm:cloudinit --boot order=scsi0 --serial0 socket --vga serial0 --agent 1 --net0 virtio,bridge=vmbr0 --ostype l26 --output-format json"),
        format!("{create} --scsi0 local-lvm:0,import-from=/dev/sda --ide2 local-lvm:cloudinit --boot order=scsi0 --serial0 socket --vga serial0 --agent 1 --net0 virtio,bridge=vmbr0 --ostype l26 --output-format json"),
        "sudo -n /usr/bin/pvesh set /nodes/pve1/qemu/732/config --cicustom user=local:snippets/x.yaml --output-format json".into(),
        "sudo -n /usr/bin/pvesh set /nodes/pve1/qemu/732/config --cipassword hunter2 --output-format json".into(),
        "sudo -n /usr/bin/pvesh set /nodes/pve1/qemu/732/config --sshkeys -args --output-format json".into(),
        "sudo -n /usr/bin/pvesh create /nodes/pve1/storage/local/download-url --content snippets --url https://x.example/a.qcow2 --filename a.qcow2 --output-format json".into(),
    ] {
        let (code, _, err) = g.ssh(Some(&line));
        assert_eq!(code, 125, "{line}: {err}");
    }
}

/// Lines next to the new rules that reach further: a host path or device for `import-from`,
/// custom snippets, a password, an option smuggled as a key, other content or file names.
fn escapes() -> Vec<Vec<String>> {
    let p = "/usr/bin/pvesh";
    let j = ["--output-format", "json"];
    let create = |scsi0: &str, extra: &[&str]| {
        let mut v = w(&[
            p,
            "create",
            "/nodes/pve1/qemu",
            "--vmid",
            "100",
            "--name",
            "web01",
            "--memory",
            "2048",
            "--cores",
            "2",
            "--scsihw",
            "virtio-scsi-single",
            "--scsi0",
            scsi0,
            "--ide2",
            "local-lvm:cloudinit",
            "--boot",
            "order=scsi0",
            "--serial0",
            "socket",
            "--vga",
            "serial0",
            "--agent",
            "1",
            "--net0",
            "virtio,bridge=vmbr0",
            "--ostype",
            "l26",
        ]);
        v.extend(w(extra));
        v.extend(w(&j));
        v
    };
    let set = |extra: &[&str]| {
        let mut v = w(&[p, "set", "/nodes/pve1/qemu/100/config"]);
        v.extend(w(extra));
        v.extend(w(&j));
        v
    };
    let download = |content: &str, file: &str| {
        let mut v = w(&[
            p,
            "create",
            "/nodes/pve1/storage/local/download-url",
            "--content",
            content,
            "--url",
            "https://cloud.debian.org/a.qcow2",
            "--filename",
            file,
        ]);
        v.extend(w(&j));
        v
    };
    vec![
        create("local-lvm:0,import-from=/etc/shadow", &[]),
        create("local-lvm:0,import-from=/dev/sda", &[]),
        create("local-lvm:0,import-from=/dev/disk/by-id/x", &[]),
        create("local-lvm:0,import-from=local:iso/debian.iso", &[]),
        create(
            "local-lvm:0,import-from=local:import/../../../etc/shadow.raw",
            &[],
        ),
        create(
            "local-lvm:0,import-from=local:import/a.qcow2,cache=unsafe",
            &[],
        ),
        create(
            "local-lvm:0,import-from=local:import/a.qcow2",
            &["--cicustom", "user=local:snippets/u.yaml"],
        ),
        create(
            "local-lvm:0,import-from=local:import/a.qcow2",
            &["--cipassword", "hunter2"],
        ),
        create(
            "local-lvm:0,import-from=local:import/a.qcow2",
            &["--hookscript", "local:snippets/h.pl"],
        ),
        create(
            "local-lvm:0,import-from=local:import/a.qcow2",
            &["--sshkeys", "-args"],
        ),
        create(
            "local-lvm:0,import-from=local:import/a.qcow2",
            &["--ipconfig0", "ip=dhcp --args -x"],
        ),
        set(&["--cicustom", "user=local:snippets/u.yaml"]),
        set(&["--cipassword", "hunter2"]),
        set(&["--ciuser", "debian", "--cipassword", "x"]),
        set(&["--sshkeys", "ssh-ed25519%20AAAA --args x"]),
        set(&["--ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto"]),
        set(&["--nameserver", "10.0.0.1 --args x"]),
        download("import", "a.img"),
        download("import", "../a.qcow2"),
        download("snippets", "a.qcow2"),
        download("images", "a.qcow2"),
        w(&[
            p,
            "create",
            "/nodes/pve1/qemu/100/template",
            "--disk",
            "scsi0",
            j[0],
            j[1],
        ]),
        w(&[
            p,
            "delete",
            "/nodes/pve1/storage/local/content/local:import/../images/100/vm-100-disk-0.qcow2",
            j[0],
            j[1],
        ]),
        w(&[
            p,
            "delete",
            "/nodes/pve1/storage/local/content/local:snippets/h.pl",
            j[0],
            j[1],
        ]),
    ]
}

#[test]
fn cloud_image_rules_admit_the_catalogs_lines_and_refuse_their_neighbours() {
    let _guard = lock();
    let new = [
        &ops::IMAGE_DOWNLOAD,
        &ops::IMAGE_LIST,
        &ops::IMAGE_REMOVE,
        &ops::VM_CREATE_IMAGE,
        &ops::VM_CLOUDINIT,
        &ops::VM_CLOUDINIT_SET,
        &ops::VM_CLOUDINIT_KEYS,
        &ops::VM_CLOUDINIT_REGENERATE,
        &ops::VM_TEMPLATE,
    ];
    // Keys for an existing VM are root in it: `full` only, like guest exec; a new VM from an
    // image and a clone (whose keys travel in a `vm cloudinit-keys` step) are `operator`.
    assert!(!Profile::Operator.allows_op(&ops::VM_CLOUDINIT_KEYS));
    assert!(Profile::Full.allows_op(&ops::VM_CLOUDINIT_KEYS));
    for op in [
        &ops::VM_CREATE_IMAGE,
        &ops::VM_CLONE,
        &ops::VM_CLOUDINIT_SET,
    ] {
        assert!(Profile::Operator.allows_op(op), "{}", op.id);
    }
    for profile in Profile::ALL {
        let _installed = Installed::new(&render(profile.name(), &[]));
        for argv in escapes() {
            assert!(
                !allowed(&argv),
                "profile {}: allowed: {argv:?}",
                profile.name()
            );
        }
        for op in new {
            let inside = profile.allows_op(op);
            for argv in samples(op) {
                assert_eq!(
                    allowed(&argv),
                    inside,
                    "profile {} {}: {argv:?}",
                    profile.name(),
                    op.id
                );
            }
        }
    }
}
