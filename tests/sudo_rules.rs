//! Proof against real sudo: the rendered sudoers passes `visudo -c`, allows every catalog op's
//! command line in the profiles that contain it, denies it in the others, and denies every escape
//! attempt in every profile.
//!
//! Needs root, `sudo` and `visudo`, and the PVE tool paths to exist (sudo answers "command
//! not found" otherwise): `scripts/test.sh` installs sudo and brings up the test bed, which
//! puts the simulator there. Without them these tests FAIL with a message; they never skip.
//!
//! Each test holds the host [`lock`]: one installed sudoers file at a time, and never while a
//! live test swaps the bed's.

use std::path::Path;
use std::process::Command;

use pxagent::catalog::pve::Tool;
use pxagent::catalog::{OPS, Op, Profile};

use crate::support::{lock, px};

/// The throwaway account these tests install rules for.
pub(crate) const ACCOUNT: &str = "pxa-sudo-test";
const SUDOERS: &str = "/etc/sudoers.d/pxa-sudo-test";

pub(crate) fn require_environment() {
    let uid = Command::new("id").arg("-u").output().expect("run id");
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "these tests install sudoers rules and must run as root (use scripts/test.sh)"
    );
    for bin in ["/usr/bin/sudo", "/usr/sbin/visudo"] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: run scripts/test.sh, which installs sudo"
        );
    }
    for t in Tool::ALL
        .iter()
        .filter(|t| OPS.iter().any(|o| o.tool == **t))
    {
        assert!(
            Path::new(t.path()).exists(),
            "{} is missing: bring the test bed up first (scripts/testbed.sh up) so the PVE simulator is installed",
            t.path()
        );
    }
}

fn pxagent(args: &[&str]) -> String {
    let out = px().args(args).run();
    assert_eq!(out.code, 0, "pxagent {args:?}: {}", out.stderr);
    out.assert_utf8();
    out.stdout
}

/// The render of `profile` with `extra` options; unless they name NFS servers, with the bed's
/// (`scripts/testbed.sh`), so that `storage add-nfs` is in it.
pub(crate) fn render(profile: &str, extra: &[&str]) -> String {
    let mut args = vec!["sudoers", "render", "--user", ACCOUNT, "--profile", profile];
    args.extend_from_slice(extra);
    if !extra.contains(&"--nfs-servers") {
        args.extend_from_slice(&["--nfs-servers", NFS_SERVERS]);
    }
    pxagent(&args)
}

/// The NFS servers the beds' admin names (`BED_NFS_SERVERS` in scripts/testbed.sh).
pub(crate) const NFS_SERVERS: &str = "192.0.2.10,192.0.2.30,nas";

/// Installs an account and a sudoers file the safe way; removes both on drop. (`sudo_fences`
/// uses these helpers too.)
pub(crate) struct Installed;

impl Installed {
    pub(crate) fn new(text: &str) -> Installed {
        require_environment();
        if Command::new("id")
            .arg(ACCOUNT)
            .output()
            .unwrap()
            .status
            .success()
        {
            // left over from an interrupted run
        } else {
            let st = Command::new("useradd")
                .args(["--no-create-home", "--shell", "/usr/sbin/nologin", ACCOUNT])
                .status()
                .unwrap();
            assert!(st.success(), "useradd {ACCOUNT}");
        }
        let tmp = format!("{SUDOERS}.new");
        std::fs::write(&tmp, text).unwrap();
        let check = Command::new("visudo")
            .args(["-c", "-f", &tmp])
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "visudo -cf rejected the render:\n{}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        Command::new("chmod").args(["0440", &tmp]).status().unwrap();
        std::fs::rename(&tmp, SUDOERS).unwrap();
        let all = Command::new("visudo").arg("-c").output().unwrap();
        assert!(
            all.status.success(),
            "visudo -c: {}",
            String::from_utf8_lossy(&all.stderr)
        );
        Installed
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(SUDOERS);
        let _ = std::fs::remove_file(format!("{SUDOERS}.new"));
        let _ = Command::new("userdel").arg(ACCOUNT).output();
    }
}

/// Root asks sudo whether ACCOUNT may run this exact command: exit 0 = allowed.
pub(crate) fn allowed(argv: &[String]) -> bool {
    let out = Command::new("sudo")
        .args(["-n", "-l", "-U", ACCOUNT])
        .args(argv)
        .output()
        .unwrap();
    if out.status.success() {
        // sudo prints the command it matched.
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(&argv[0]),
            "unexpected sudo -l output {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    out.status.success()
}

/// The command line of every optional-parameter combination of an op, and the one
/// `pxagent catalog` shows as its example.
pub(crate) fn samples(op: &Op) -> Vec<Vec<String>> {
    let mut all: Vec<Vec<String>> = pxagent::catalog::samples(op)
        .iter()
        .map(|v| op.argv(v))
        .collect();
    all.push(pxagent::catalog::example_argv(op));
    all
}

pub(crate) fn w(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

/// Escape attempts, the ways from a broad PVE rule to a root shell on the host: none may be allowed
/// in any profile.
fn escapes() -> Vec<Vec<String>> {
    let pvesh = "/usr/bin/pvesh";
    let qm = "/usr/sbin/qm";
    let pct = "/usr/sbin/pct";
    let j = ["--output-format", "json"];
    let mut v = vec![
        // hookscripts and raw QEMU arguments: root on the host
        w(&[qm, "set", "100", "--hookscript", "local:snippets/x.pl"]),
        w(&[qm, "set", "100", "--args", "-monitor stdio"]),
        w(&[
            pvesh,
            "set",
            "/nodes/pve1/qemu/100/config",
            "--hookscript",
            "local:snippets/x.pl",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "set",
            "/nodes/pve1/qemu/100/config",
            "--args",
            "-monitor stdio",
            j[0],
            j[1],
        ]),
        // the QEMU monitor (`migrate exec:`), guest exec, container exec and file copies
        w(&[qm, "monitor", "100"]),
        w(&[qm, "guest", "exec", "100", "--", "id"]),
        w(&[pct, "exec", "200", "--", "id"]),
        w(&[pct, "enter", "200"]),
        w(&[pct, "push", "200", "/etc/shadow", "/tmp/x"]),
        w(&[pct, "pull", "200", "/etc/shadow", "/tmp/x"]),
        w(&[pct, "set", "200", "--mp0", "/,mp=/host"]),
        // even innocent-looking qm/pct: pxagent never uses them, so they are not allowed
        w(&[qm, "start", "100"]),
        w(&[qm, "list"]),
        // accounts, ACLs and the node shell endpoint
        w(&[
            pvesh,
            "set",
            "/access/password",
            "--userid",
            "root@pam",
            "--password",
            "x",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "set",
            "/access/acl",
            "--path",
            "/",
            "--roles",
            "Administrator",
            "--users",
            "x@pve",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/access/users",
            "--userid",
            "x@pve",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/execute",
            "--commands",
            "[]",
            j[0],
            j[1],
        ]),
        // (guest-agent exec is the catalog's vm.exec: in `full` only, see
        // vm_exec_rules_are_full_only_and_fenced) vzdump hooks and output redirection
        w(&["/usr/bin/vzdump", "100", "--script", "/tmp/x"]),
        w(&["/usr/bin/vzdump", "100", "--dumpdir", "/etc/sudoers.d"]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/vzdump",
            "--vmid",
            "100",
            "--script",
            "/tmp/x",
            j[0],
            j[1],
        ]),
        // dangerous options on allowed endpoints
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/status/start",
            "--stateuri",
            "tcp",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/status/start",
            "--skiplock",
            "1",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/status/stop",
            "--skiplock",
            "1",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "delete",
            "/nodes/pve1/qemu/100",
            "--skiplock",
            "1",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/status/start",
            "--migratedfrom",
            "pve2",
            j[0],
            j[1],
        ]),
        // option injection through free text
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/snapshot",
            "--snapname",
            "s1",
            "--description",
            "x --hookscript y",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/snapshot",
            "--snapname",
            "s1",
            "--description",
            "-x",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/snapshot",
            "--snapname",
            "--vmstate",
            j[0],
            j[1],
        ]),
        // extra trailing arguments, missing output format, other output formats
        w(&[pvesh, "get", "/version", j[0], j[1], "--noproxy"]),
        w(&[pvesh, "get", "/version", j[0], j[1], "extra"]),
        w(&[pvesh, "get", "/version"]),
        w(&[pvesh, "get", "/version", j[0], "yaml"]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/100/status/start",
            j[0],
            j[1],
            "--timeout",
            "1",
        ]),
        // newlines, traversal, shell metacharacters inside one argument
        w(&[pvesh, "get", "/version\n", j[0], j[1]]),
        w(&[pvesh, "get", "/nodes/pve1\n/status", j[0], j[1]]),
        w(&[pvesh, "get", "/nodes/../access/users/status", j[0], j[1]]),
        w(&[pvesh, "get", "/nodes/pve1;id/status", j[0], j[1]]),
        w(&[pvesh, "get", "/nodes/$(id)/status", j[0], j[1]]),
        w(&[
            pvesh,
            "get",
            "/nodes/pve1/qemu/100/status/current --output-format json",
            j[0],
            j[1],
        ]),
        // VMIDs outside what Proxmox accepts
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/99/status/start",
            j[0],
            j[1],
        ]),
        w(&[
            pvesh,
            "create",
            "/nodes/pve1/qemu/0100/status/start",
            j[0],
            j[1],
        ]),
        // tools pxagent never runs
        w(&[
            "/usr/bin/qemu-img",
            "convert",
            "-O",
            "raw",
            "/tmp/x",
            "/etc/sudoers.d/x",
        ]),
        w(&[
            "/usr/sbin/ha-manager",
            "set",
            "vm:100",
            "--state",
            "started",
        ]),
        w(&["/usr/bin/pveam", "download", "local", "x.tar.zst"]),
    ];
    // A wrong path for pvesh (a common mistake) never matches.
    v.push(w(&["/usr/sbin/pvesh", "get", "/version", j[0], j[1]]));
    v
}

#[test]
fn every_profile_and_fenced_render_passes_visudo() {
    let _guard = lock();
    require_environment();
    let dir = tempfile::tempdir().unwrap();
    let renders = [
        ("readonly", vec![]),
        ("operator", vec![]),
        ("full", vec![]),
        ("full", vec!["--vmids", "100-199,250"]),
        (
            "operator",
            vec!["--vmids", "100-199,250", "--ctids", "200-299"],
        ),
        ("readonly", vec!["--ctids", "1000-1999"]),
        ("full", vec!["--ct-exec", "200-299"]),
        ("readonly", vec!["--ct-exec", "200,250-260"]),
    ];
    for (i, (profile, extra)) in renders.iter().enumerate() {
        let text = render(profile, extra);
        let path = dir.path().join(format!("render{i}"));
        std::fs::write(&path, &text).unwrap();
        let out = Command::new("visudo")
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "visudo rejected {profile} {extra:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn each_op_is_allowed_exactly_in_its_profiles() {
    let _guard = lock();
    for profile in Profile::ALL {
        let _installed = Installed::new(&render(profile.name(), &[]));
        for op in OPS {
            for argv in samples(op) {
                let expected = profile.allows_op(op);
                assert_eq!(
                    allowed(&argv),
                    expected,
                    "profile {}: {} {argv:?} should be {}",
                    profile.name(),
                    op.id,
                    if expected { "allowed" } else { "denied" }
                );
            }
        }
    }
}

#[test]
fn every_escape_is_denied_in_every_profile() {
    let _guard = lock();
    for profile in Profile::ALL {
        let _installed = Installed::new(&render(profile.name(), &[]));
        for argv in escapes() {
            assert!(
                !allowed(&argv),
                "profile {}: escape allowed: {argv:?}",
                profile.name()
            );
        }
    }
}

#[test]
fn vmstate_cannot_ride_in_on_a_description_below_full() {
    let _guard = lock();
    let smuggled = w(&[
        "/usr/bin/pvesh",
        "create",
        "/nodes/pve1/qemu/100/snapshot",
        "--snapname",
        "s1",
        "--description",
        "x --vmstate 1",
        "--output-format",
        "json",
    ]);
    for profile in ["readonly", "operator"] {
        let _installed = Installed::new(&render(profile, &[]));
        assert!(!allowed(&smuggled), "{profile}");
    }
}

#[test]
fn fences_admit_only_their_ids() {
    let _guard = lock();
    let _installed = Installed::new(&render(
        "full",
        &["--vmids", "100-199,250", "--ctids", "200-209"],
    ));
    let start = |kind: &str, id: u32| {
        w(&[
            "/usr/bin/pvesh",
            "create",
            &format!("/nodes/pve1/{kind}/{id}/status/start"),
            "--output-format",
            "json",
        ])
    };
    for (id, ok) in [
        (99, false),
        (100, true),
        (199, true),
        (200, false),
        (250, true),
        (251, false),
    ] {
        assert_eq!(allowed(&start("qemu", id)), ok, "vm {id}");
    }
    for (id, ok) in [(199, false), (200, true), (209, true), (210, false)] {
        assert_eq!(allowed(&start("lxc", id)), ok, "ct {id}");
    }
    // Reads without a VMID are not fenced; reads with one are.
    assert!(allowed(&w(&[
        "/usr/bin/pvesh",
        "get",
        "/cluster/resources",
        "--type",
        "vm",
        "--output-format",
        "json"
    ])));
    assert!(!allowed(&w(&[
        "/usr/bin/pvesh",
        "get",
        "/nodes/pve1/qemu/300/status/current",
        "--output-format",
        "json"
    ])));
    assert!(allowed(&w(&[
        "/usr/bin/pvesh",
        "get",
        "/nodes/pve1/qemu/150/status/current",
        "--output-format",
        "json"
    ])));
}

/// `pct exec` is in no profile; `--ct-exec RANGES` adds it for those containers only, and only as
/// `pct exec ID -- …` (never `pct enter`, `push`, `pull` or an option before `--`).
#[test]
fn container_exec_only_with_ct_exec_and_only_in_its_fence() {
    let _guard = lock();
    let pct = "/usr/sbin/pct";
    let exec = |id: &str, rest: &[&str]| {
        let mut v = w(&[pct, "exec", id, "--"]);
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    {
        let _installed = Installed::new(&render("full", &[]));
        assert!(
            !allowed(&exec("200", &["uname", "-a"])),
            "full without --ct-exec"
        );
    }
    let _installed = Installed::new(&render("readonly", &["--ct-exec", "200-209"]));
    for (argv, ok) in [
        (exec("200", &["uname", "-a"]), true),
        (exec("209", &["/usr/bin/tee", "/tmp/a b"]), true),
        (exec("205", &["sh", "-c", "echo a; echo b\nc"]), true),
        (exec("210", &["uname"]), false),
        (exec("100", &["uname"]), false),
        (
            w(&[pct, "exec", "200", "--keep-env", "1", "--", "sh"]),
            false,
        ),
        (w(&[pct, "exec", "200", "sh"]), false),
        (w(&[pct, "enter", "200"]), false),
        (w(&[pct, "push", "200", "/etc/shadow", "/tmp/x"]), false),
        (
            w(&[pct, "pull", "200", "/tmp/x", "/etc/sudoers.d/x"]),
            false,
        ),
    ] {
        assert_eq!(allowed(&argv), ok, "{argv:?}");
    }
    // The readonly profile's other rules are untouched: no VM exec, no changes.
    for op in OPS {
        for argv in samples(op) {
            if op.id == "ct.exec" {
                continue; // its sample uses VMID 200, inside the fence: checked above
            }
            let expected = Profile::Readonly.allows_op(op);
            assert_eq!(allowed(&argv), expected, "{} {argv:?}", op.id);
        }
    }
}

/// Guest-agent exec is in `full` only, fenced like every VM op, and its rules admit nothing but the
/// agent endpoints (no monitor, no other path on the same tool).
#[test]
fn vm_exec_rules_are_full_only_and_fenced() {
    let _guard = lock();
    let pvesh = "/usr/bin/pvesh";
    let j = ["--output-format", "json"];
    let exec = |id: &str, words: &[&str]| {
        let mut v = w(&[
            pvesh,
            "create",
            &format!("/nodes/pve1/qemu/{id}/agent/exec"),
        ]);
        for word in words {
            v.push("--command".into());
            v.push(word.to_string());
        }
        v.extend(j.iter().map(|s| s.to_string()));
        v
    };
    {
        let _installed = Installed::new(&render("operator", &[]));
        assert!(!allowed(&exec("100", &["uname"])));
    }
    let _installed = Installed::new(&render("full", &["--vmids", "100-199"]));
    for (argv, ok) in [
        (exec("100", &["uname", "-a"]), true),
        (exec("150", &["ls", "-la", "--output-format", "a; b"]), true),
        (exec("200", &["uname"]), false),
        (
            w(&[
                pvesh,
                "get",
                "/nodes/pve1/qemu/100/agent/exec-status",
                "--pid",
                "12",
                j[0],
                j[1],
            ]),
            true,
        ),
        (
            w(&[
                pvesh,
                "get",
                "/nodes/pve1/qemu/100/agent/exec-status",
                "--pid",
                "x",
                j[0],
                j[1],
            ]),
            false,
        ),
        (
            w(&[
                pvesh,
                "create",
                "/nodes/pve1/qemu/100/agent/file-write",
                "--file",
                "/tmp/x",
                "--content",
                "aGk=",
                "--encode",
                "0",
                j[0],
                j[1],
            ]),
            true,
        ),
        (
            w(&[
                pvesh,
                "get",
                "/nodes/pve1/qemu/100/agent/file-read",
                "--file",
                "/tmp/x",
                j[0],
                j[1],
            ]),
            true,
        ),
        (
            w(&[
                pvesh,
                "create",
                "/nodes/pve1/qemu/100/monitor",
                "--command",
                "info",
                j[0],
                j[1],
            ]),
            false,
        ),
        (
            w(&[
                pvesh,
                "create",
                "/nodes/pve1/execute",
                "--commands",
                "x",
                j[0],
                j[1],
            ]),
            false,
        ),
        (
            w(&[
                pvesh,
                "create",
                "/nodes/pve1/qemu/100/agent/exec",
                "--command",
                "x",
            ]),
            false,
        ),
    ] {
        assert_eq!(allowed(&argv), ok, "{argv:?}");
    }
}

/// Snapshot descriptions: every description the client accepts is admitted by real sudo, and none
/// of the accepted characters lets a line break out of the rule — no extra option, no smuggled
/// `--vmstate`, no second command — whatever the quoting.
#[test]
fn every_accepted_description_is_admitted_and_none_breaks_out() {
    use pxagent::catalog::{Kind, find};
    let _guard = lock();
    let _installed = Installed::new(&render("operator", &[]));
    let punct = "_.@/,'\"!%&();:<>?^`|}{~+";
    let mut accepted: Vec<String> = vec![
        "before upgrade to 9.1".into(),
        "it's the \"good\" one, finally!".into(),
        "pre-upgrade: kernel 6.8 (test) & apt; 50% done?".into(),
        "a+b <x> {y} | ~z ^w `q` x-y /etc/x.conf".into(),
        format!("{} end", "w".repeat(64)),
        vec!["x"; 32].join(" "),
    ];
    // Each character alone, first in a word and inside one.
    for c in punct.chars() {
        accepted.push(format!("{c}"));
        accepted.push(format!("a{c}b {c}{c}"));
    }
    accepted.push("x-y a-".into());
    // Text that names a command is still only text: one argument to pvesh.
    accepted.push("x, /usr/bin/id".into());
    for (op_id, path) in [("vm.snapshot", "qemu/100"), ("ct.snapshot", "lxc/200")] {
        let op = find(op_id).unwrap();
        for d in &accepted {
            Kind::Text
                .parse("description", d)
                .unwrap_or_else(|e| panic!("the client refuses {d:?}: {e}"));
            let argv = w(&[
                "/usr/bin/pvesh",
                "create",
                &format!("/nodes/pve1/{path}/snapshot"),
                "--snapname",
                "s1",
                "--description",
                d,
                "--output-format",
                "json",
            ]);
            let mut values = std::collections::BTreeMap::new();
            values.insert("node", "pve1".to_string());
            values.insert("vmid", path.rsplit('/').next().unwrap().to_string());
            values.insert("snapshot", "s1".to_string());
            values.insert("description", d.clone());
            assert_eq!(op.argv(&values), argv, "the catalog builds this line");
            assert!(
                allowed(&argv),
                "{op_id}: sudo refuses the accepted description {d:?}"
            );
        }
    }
    // Break-out attempts: what a hostile caller could hand sudo directly (plain ssh), built
    // from the accepted characters. Each must be refused by sudo.
    let line = |desc: &[&str], tail: &[&str]| {
        let mut v = w(&[
            "/usr/bin/pvesh",
            "create",
            "/nodes/pve1/qemu/100/snapshot",
            "--snapname",
            "s1",
            "--description",
        ]);
        v.extend(w(desc));
        v.extend(w(tail));
        v
    };
    let json = ["--output-format", "json"];
    let mut attempts: Vec<Vec<String>> = vec![
        line(&["x --vmstate 1"], &json),
        line(&["x"], &["--vmstate", "1", "--output-format", "json"]),
        line(&["x", "--vmstate", "1"], &json),
        line(&["x' --vmstate '1"], &json),
        line(&["x\" --vmstate \"1"], &json),
        line(&["x\t--vmstate\t1"], &json),
        line(&["x\n--vmstate 1"], &json),
        line(&["x,", "/usr/bin/id", "-x"], &json),
        line(&["x;", "--vmstate", "1"], &json),
        line(&["x", "-d"], &json),
        line(&["$(id)"], &json),
        line(&["x #"], &json),
        line(&["x\\", "--vmstate"], &json),
        line(&["[x]"], &json),
        line(&["a=b"], &json),
        line(&["*"], &json),
        line(&["x"], &["--output-format", "json", "--vmstate", "1"]),
        line(&["x --output-format json --vmstate 1"], &[]),
        line(&["caf\u{e9}"], &json),
    ];
    for c in punct.chars() {
        attempts.push(line(
            &[&format!("x{c}"), &format!("--vmstate{c}"), "1"],
            &json,
        ));
        // One argument that sudo's space-joined view reads as separate words, one of them an
        // option. (`x _--vmstate 1` is no break-out: no word starts with `-`, and pvesh's
        // option parser takes only `-`/`--` prefixes, PVE::JSONSchema::get_options.)
        attempts.push(line(&[&format!("x{c} --vmstate 1")], &json));
        attempts.push(line(&[&format!("x{c} -x")], &json));
    }
    for a in &attempts {
        assert!(!allowed(a), "sudo admits a break-out: {a:?}");
        // And the catalog builds no such line in this profile: its description is refused, or
        // it is another op's line (`--vmstate 1` is the RAM snapshot, profile full only).
        if let Ok(found) = pxagent::catalog::inverse::parse_argv(a) {
            assert!(
                found.iter().all(|(op, _)| !Profile::Operator.allows_op(op)),
                "the catalog builds {a:?} in profile operator"
            );
        }
    }
}

/// Every UPID `Kind::Upid` accepts — PVE's own decoding (any character but `:`, whitespace and `/`
/// in type, id and user), narrowed to printable ASCII without `=` — is admitted by real sudo in the
/// task rules, and every one it refuses is denied there too: the client's validation and the
/// sudoers regex are the same rule.
#[test]
fn every_upid_the_client_accepts_is_admitted_by_sudo_and_no_other() {
    use pxagent::catalog::kind::Kind;
    let _guard = lock();
    let _installed = Installed::new(&render("readonly", &[]));
    let upid = |ty: &str, id: &str, user: &str| {
        format!("UPID:pve1:0000C346:165A0CE4:68D7279C:{ty}:{id}:{user}:")
    };
    let mut cases = vec![
        "UPID:vh8:0030FB2D:330ECAE5:65665EEA:qmstart:352:root@pam:".to_string(),
        "UPID:example-node:0000C346:165A0CE4:68D7279C:aptupdate::root@pam:".to_string(),
        "UPID:pve1:0000C346:1165A0CE4:68D7279C:vzdump:100:u@pam!some-token:".to_string(),
        upid("qmstart", "100", "root@pam!api"),
    ];
    for c in (0x20u8..=0x7e)
        .map(char::from)
        .chain(['\t', '\n', '\u{7f}', 'é'])
    {
        cases.push(upid(&format!("q{c}m"), "100", "root@pam"));
        cases.push(upid("qmstart", &format!("1{c}0"), "root@pam"));
        cases.push(upid("qmstart", "100", &format!("root@pam!t{c}k")));
    }
    let status = pxagent::catalog::find("task.status").unwrap();
    let list = pxagent::catalog::find("task.log").unwrap();
    let (mut admitted, mut refused) = (0, 0);
    for u in &cases {
        let accepted = Kind::Upid.parse("upid", u).is_ok();
        for op in [status, list] {
            let values = [("upid", u.clone()), ("node", "pve1".to_string())]
                .into_iter()
                .collect();
            let argv = op.argv(&values);
            assert_eq!(
                allowed(&argv),
                accepted,
                "{}: {u:?} accepted by the client: {accepted}",
                op.id
            );
        }
        if accepted {
            admitted += 1;
        } else {
            refused += 1;
        }
    }
    // All but `:`, `/`, `=`, space and the four others pass in each of the three fields.
    assert_eq!((admitted, refused), (4 + 91 * 3, 8 * 3));
}

/// Download URLs with a query: every URL the client accepts — the file name taken from the path,
/// not the query — is admitted by real sudo, and a hostile caller cannot use a query to add a word,
/// an option or a second command.
#[test]
fn download_urls_with_a_query_are_admitted_and_none_breaks_out() {
    use pxagent::catalog::find;
    use pxagent::catalog::invocation::Invocation;
    let _guard = lock();
    let _installed = Installed::new(&render("full", &[]));
    let op = find("iso.download").unwrap();
    for url in [
        "https://dl.example.com/debian-13.iso?a=b",
        "https://dl.example.com/pub/debian-13.iso?token=a1%2Fb2-c.d_e~f+g&expires=1767225600",
        "https://dl.example.com/debian-13.iso?",
    ] {
        let mut raw = std::collections::BTreeMap::new();
        raw.insert("url", url.to_string());
        raw.insert("storage", "local".to_string());
        raw.insert("node", "pve1".to_string());
        let inv = Invocation::new(op, raw).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(inv.values["filename"], "debian-13.iso", "{url}");
        let argv = inv.argv();
        assert!(
            allowed(&argv),
            "sudo refuses the accepted URL {url}: {argv:?}"
        );
    }
    let line = |url: &str, tail: &[&str]| {
        let mut v = w(&[
            "/usr/bin/pvesh",
            "create",
            "/nodes/pve1/storage/local/download-url",
            "--content",
            "iso",
            "--url",
            url,
            "--filename",
            "x.iso",
        ]);
        v.extend(w(tail));
        v.extend(w(&["--output-format", "json"]));
        v
    };
    assert!(allowed(&line("https://h/x.iso?a=b", &[])), "the plain line");
    for attempt in [
        line("https://h/x.iso?a=b --content vztmpl", &[]),
        line("https://h/x.iso?a=b", &["--verify-certificates", "0"]),
        line("https://h/x.iso?a=b,", &["/usr/bin/id"]),
        line("https://h/x.iso?a=$(id)", &[]),
        line("https://h/x.iso?a=b;id", &[]),
        line("https://h/x.iso?a=b#frag", &[]),
        line("https://h/x.iso?a=b\\", &[]),
        line("https://h/x.iso?a=b'c", &[]),
        line("https://h/x.iso?a=b\tc", &[]),
        line("https://h/x.iso?a=b?c=d", &[]),
        line(&format!("https://h/x.iso?{}", "a".repeat(256)), &[]),
    ] {
        assert!(!allowed(&attempt), "sudo admits {attempt:?}");
    }
}

/// Cloud-init keys: real sudo with the rendered rule and the gate's grammar agree on the keys
/// the client sends and on near misses that would add authorized_keys options or lines (issue
/// 39: the rule admitted `%0A` followed by anything).
#[test]
fn sshkeys_near_misses_are_refused_by_sudo_and_the_gate_alike() {
    use pxagent::catalog::{Kind, inverse, ops::VM_CLOUDINIT_KEYS};
    let _guard = lock();
    let _installed = Installed::new(&render("full", &[]));
    let wire = Kind::SshKeys
        .parse("sshkeys", Kind::SshKeys.example())
        .unwrap();
    let line = |keys: &str| {
        w(&[
            "/usr/bin/pvesh",
            "set",
            "/nodes/pve1/qemu/100/config",
            "--sshkeys",
            keys,
            "--output-format",
            "json",
        ])
    };
    let good = line(&wire);
    assert_eq!(good, {
        let mut v = std::collections::BTreeMap::new();
        v.insert("vmid", "100".to_string());
        v.insert("node", "pve1".to_string());
        v.insert("sshkeys", wire.clone());
        VM_CLOUDINIT_KEYS.argv(&v)
    });
    assert!(allowed(&good));
    assert!(inverse::parse_argv(&good).is_ok());
    for bad in [
        format!("{wire}%0Acommand%3D%22id%22%20{wire}"),
        format!("{wire}%0Afrom%3D%22%2A%22%2Ccommand%3D%22sh%22%20{wire}"),
        format!("{wire}%0D%0A{wire}"),
        format!("{wire}%0A"),
        format!("{wire}%0A%0A{wire}"),
        format!("{wire}%0Aenvironment%3D%22LD_PRELOAD%3D%2Ftmp%2Fx%22%20{wire}"),
        wire.replace("%20AAAA", "%2Cno-pty%20AAAA"),
        format!("{wire}%09x"),
    ] {
        let l = line(&bad);
        assert!(!allowed(&l), "sudo admits {bad}");
        assert!(inverse::parse_argv(&l).is_err(), "the gate admits {bad}");
    }
}
