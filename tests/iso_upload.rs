//! `iso upload FILE` on the beds, plain and gated: the bytes land exactly, in the storage's
//! `template/iso`, through pxagent's root-side helper (`/usr/local/lib/pxagent/pxagent-helper`,
//! installed by `scripts/testbed.sh`), and every refusal — the client's before a byte is sent,
//! or the helper's own on the host — leaves the host's files as they were. The helper's sudoers
//! line is checked with real sudo: admitted with the catalog's arguments, refused with any other.
//!
//! Every test holds the host [`lock`] and removes the images it made (each under a name of its
//! own), so the order of tests does not matter.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::sudo_rules::{Installed, allowed, render, w};
use crate::support::{Home, gated, lock, ssh_command};

/// The simulator's `local` storage keeps its ISO images here (its path is /var/lib/vz).
const ISO_DIR: &str = "/var/lib/vz/template/iso";
const HELPER: &str = "/usr/local/lib/pxagent/pxagent-helper";

/// Every file of `dir` (hidden ones too) with its size and modification time: what "the host's
/// files as they were" means here.
fn files(dir: &Path) -> BTreeMap<String, (u64, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    let m = std::fs::symlink_metadata(e.path()).unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        (m.len(), m.modified().unwrap()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the images a test named when it ends, however it ends.
struct Made(Vec<PathBuf>);

impl Drop for Made {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn made(names: &[&str]) -> Made {
    let paths: Vec<PathBuf> = names.iter().map(|n| Path::new(ISO_DIR).join(n)).collect();
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
    Made(paths)
}

/// `n` bytes that no two calls share (so a digest proves which file arrived).
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn sha256(data: &[u8]) -> String {
    pxagent::base::text::sha256_hex(data)
}

/// pxagent in `home` against the plain bed, or the gated one.
fn run(home: &Home, gated_bed: bool, args: &[&str]) -> crate::support::Run {
    let px = home.px();
    let px = if gated_bed { px.gated() } else { px.bed() };
    px.args(args).run()
}

#[test]
fn an_image_lands_byte_for_byte_is_listed_and_boots_a_new_vm() {
    let _g = lock();
    let _made = made(&["pxa-up-plain.iso", "pxa-up-gated.img"]);
    let home = Home::new();
    for (gated_bed, name, seed) in [
        (false, "pxa-up-plain.iso", 1),
        (true, "pxa-up-gated.img", 2),
    ] {
        let data = bytes(3 << 20, seed);
        let file = home.write("netinst.iso", &data);
        let r = run(
            &home,
            gated_bed,
            &["iso", "upload", &file, "--name", name, "-o", "json"],
        );
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        let d = &r.json()["data"];
        assert_eq!(d["volid"], format!("local:iso/{name}"), "{d}");
        assert_eq!(d["size"], data.len() as u64);
        assert_eq!(d["sha256"], sha256(&data));
        assert_eq!(d["changed"], true);
        // Exactly those bytes, root's, readable by all, as PVE's own ISO files.
        let on_host = Path::new(ISO_DIR).join(name);
        assert_eq!(std::fs::read(&on_host).unwrap(), data, "{name}");
        let meta = std::fs::metadata(&on_host).unwrap();
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        assert_eq!((meta.uid(), meta.permissions().mode() & 0o777), (0, 0o644));
        // Nothing else was left in the directory: no partial file.
        assert!(
            files(Path::new(ISO_DIR))
                .keys()
                .all(|f| !f.starts_with('.')),
            "{:?}",
            files(Path::new(ISO_DIR))
        );
        let list = run(&home, gated_bed, &["iso", "list", "-o", "json"]);
        assert!(
            list.json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(
                    |c| c["volid"] == format!("local:iso/{name}") && c["size"] == data.len() as u64
                ),
            "{}",
            list.stdout
        );
    }
    // A new VM boots from it.
    let r = run(
        &home,
        false,
        &[
            "vm",
            "create",
            "--iso",
            "local:iso/pxa-up-plain.iso",
            "--name",
            "pxa-iso-boot",
            "--vmid",
            "777",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let config = run(&home, false, &["vm", "config", "777", "-o", "json"]);
    assert!(
        config.stdout.contains("local:iso/pxa-up-plain.iso"),
        "{}",
        config.stdout
    );
    let r = run(
        &home,
        false,
        &["vm", "destroy", "777", "--confirm", "yes destroy 777"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Removing it through pxagent removes the file.
    let r = run(
        &home,
        true,
        &[
            "iso",
            "remove",
            "local:iso/pxa-up-gated.img",
            "--confirm",
            "yes remove local:iso/pxa-up-gated.img",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!Path::new(ISO_DIR).join("pxa-up-gated.img").exists());
}

#[test]
fn what_the_client_refuses_sends_nothing_and_changes_nothing() {
    let _g = lock();
    let _made = made(&["pxa-taken.iso"]);
    std::fs::write(Path::new(ISO_DIR).join("pxa-taken.iso"), b"the old one").unwrap();
    let home = Home::new();
    let data = bytes(1 << 20, 3);
    let file = home.write("a.iso", &data);
    let wrong = format!("sha256:{}", sha256(b"another file"));
    let cases: Vec<(Vec<&str>, i32, &str, &str)> = vec![
        (vec!["--checksum", &wrong], 2, "invalid_input", "not the"),
        (
            vec!["--checksum", "md5:0123456789abcdef0123456789abcdef"],
            2,
            "invalid_input",
            "SHA-256 only",
        ),
        (
            vec!["--name", "pxa-taken.iso"],
            1,
            "exists",
            "never overwrites",
        ),
        (vec!["--name", "../x.iso"], 2, "invalid_input", "name"),
        (vec!["--name", "a/b.iso"], 2, "invalid_input", "name"),
        (vec!["--name", "x.qcow2"], 2, "invalid_input", "name"),
        (vec!["--name", "x..iso"], 2, "invalid_input", ".."),
        (
            vec!["--name", "pxa-full.iso", "--max-used", "1"],
            1,
            "no_room",
            "% full",
        ),
        (
            vec!["--name", "pxa-lvm.iso", "--storage", "local-lvm"],
            2,
            "invalid_input",
            "not a directory storage",
        ),
        (
            vec!["--name", "pxa-nope.iso", "--storage", "nosuch"],
            1,
            "not_found",
            "does not exist",
        ),
    ];
    for gated_bed in [false, true] {
        for (extra, code, kind, says) in &cases {
            let before = files(Path::new(ISO_DIR));
            let runs = helper_runs();
            let mut args = vec!["iso", "upload", file.as_str(), "-o", "json"];
            args.extend(extra.iter().copied());
            let r = run(&home, gated_bed, &args);
            assert_eq!(r.code, *code, "{extra:?} gated={gated_bed}: {}", r.stdout);
            let e = &r.json()["error"];
            assert_eq!(e["kind"], *kind, "{extra:?}: {e}");
            assert!(
                e["message"].as_str().unwrap().contains(says),
                "{extra:?}: {e}"
            );
            assert_eq!(files(Path::new(ISO_DIR)), before, "{extra:?}");
            // The helper never ran (sudo logs every command it runs for the accounts).
            assert_eq!(helper_runs(), runs, "{extra:?}");
        }
    }
    // The numbers of a refused upload say why.
    let r = run(
        &home,
        false,
        &[
            "iso",
            "upload",
            &file,
            "--name",
            "pxa-full.iso",
            "--max-used",
            "1",
        ],
    );
    assert!(
        r.stderr.contains("used of")
            && r.stderr.contains("free")
            && r.stderr.contains("limit of 1%"),
        "{}",
        r.stderr
    );
}

/// How many helper runs the sudo logs of both beds' accounts name (each render logs to
/// `/var/log/sudo-ACCOUNT.log`).
fn helper_runs() -> usize {
    let mut n = 0;
    for user in [
        std::env::var("PXAGENT_USER").unwrap_or_else(|_| "zen-agent".into()),
        gated().user,
    ] {
        let log = std::fs::read_to_string(format!("/var/log/sudo-{user}.log")).unwrap_or_default();
        n += log.matches("pxagent-helper iso-receive").count();
    }
    n
}

/// The helper's own command line run over SSH on the plain bed, `data` on its stdin (OpenSSH,
/// so nothing of pxagent's client is in the way): what the helper itself refuses.
fn helper_over_ssh(line: &str, data: &[u8]) -> (i32, String) {
    let env = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set: run scripts/test.sh"))
    };
    let mut cmd = ssh_command(
        &format!("{}@{}", env("PXAGENT_USER"), env("PXAGENT_HOST")),
        &env("PXAGENT_PORT"),
        &env("PXAGENT_IDENTITY"),
        Some(&env("PXAGENT_KNOWN_HOSTS")),
        Some(std::ffi::OsStr::new(line)),
    );
    feed(&mut cmd, data)
}

fn feed(cmd: &mut Command, data: &[u8]) -> (i32, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_helper_itself_refuses_what_is_not_as_declared() {
    let _g = lock();
    let _made = made(&["pxa-h.iso", "pxa-taken2.iso"]);
    std::fs::write(Path::new(ISO_DIR).join("pxa-taken2.iso"), b"old").unwrap();
    let data = bytes(256 << 10, 4);
    let sum = sha256(&data);
    let line = |name: &str, size: usize, sha: &str, max: u8| {
        format!("sudo -n {HELPER} iso-receive --max-used {max} local {name} {size} {sha}")
    };
    let more = [data.clone(), b"x".to_vec()].concat();
    let cases: Vec<(String, &[u8], i32, &str)> = vec![
        // another digest
        (
            line("pxa-h.iso", data.len(), &sha256(b"x"), 90),
            &data,
            4,
            "SHA-256",
        ),
        // a short stream (the client died, the link broke)
        (
            line("pxa-h.iso", data.len(), &sum, 90),
            &data[..1000],
            4,
            "ended early",
        ),
        // a long one
        (
            line("pxa-h.iso", data.len(), &sum, 90),
            &more,
            4,
            "more than",
        ),
        // an existing name
        (
            line("pxa-taken2.iso", data.len(), &sum, 90),
            &data,
            5,
            "never overwrites",
        ),
        // the fill limit, checked on the host itself
        (
            line("pxa-h.iso", data.len(), &sum, 1),
            &data,
            6,
            "limit of 1%",
        ),
        // a storage without iso content, and one that is not a directory
        (
            line("pxa-h.iso", data.len(), &sum, 90).replace(" local ", " local-lvm "),
            &data,
            3,
            "not a directory",
        ),
    ];
    for (cmd, input, code, says) in cases {
        let before = files(Path::new(ISO_DIR));
        let (got, stderr) = helper_over_ssh(&cmd, input);
        assert_eq!(got, code, "{cmd}: {stderr}");
        assert!(stderr.contains(says), "{cmd}: {stderr}");
        assert_eq!(files(Path::new(ISO_DIR)), before, "{cmd}");
    }
    // The same line through the gate: judged as iso.upload, and the helper still checks.
    let g = gated();
    let (code, stderr) = feed(
        &mut g.ssh_cmd(&line("pxa-h.iso", data.len(), &sha256(b"x"), 90)),
        &data,
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(!Path::new(ISO_DIR).join("pxa-h.iso").exists());
    // And right: it lands.
    let (code, stderr) = helper_over_ssh(&line("pxa-h.iso", data.len(), &sum, 90), &data);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        std::fs::read(Path::new(ISO_DIR).join("pxa-h.iso")).unwrap(),
        data
    );
}

#[test]
fn a_storage_whose_template_iso_is_a_symlink_gets_nothing() {
    let _g = lock();
    let home = Home::new();
    let root = Path::new("/srv/pxa-iso-link");
    let elsewhere = Path::new("/srv/pxa-iso-elsewhere");
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(elsewhere);
    std::fs::create_dir_all(root.join("template")).unwrap();
    std::fs::create_dir_all(elsewhere).unwrap();
    std::os::unix::fs::symlink(elsewhere, root.join("template/iso")).unwrap();
    let r = home.on_bed(&[
        "storage",
        "add-dir",
        "pxalink",
        "--path",
        "/srv/pxa-iso-link",
        "--content",
        "iso",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let data = bytes(64 << 10, 5);
    let file = home.write("l.iso", &data);
    for gated_bed in [false, true] {
        let r = run(
            &home,
            gated_bed,
            &["iso", "upload", &file, "--storage", "pxalink", "-o", "json"],
        );
        assert_eq!(r.code, 2, "{}", r.stdout);
        let m = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.contains("symlink"), "{m}");
        assert!(files(elsewhere).is_empty(), "{:?}", files(elsewhere));
    }
    let r = home.on_bed(&[
        "storage",
        "remove",
        "pxalink",
        "--confirm",
        "yes remove pxalink",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(elsewhere);
}

#[test]
fn a_directory_storage_without_iso_content_gets_nothing() {
    let _g = lock();
    let home = Home::new();
    let root = Path::new("/srv/pxa-noiso");
    let _ = std::fs::remove_dir_all(root);
    // Its template/iso is there: only the storage's content keeps the image out.
    std::fs::create_dir_all(root.join("template/iso")).unwrap();
    let r = home.on_bed(&[
        "storage",
        "add-dir",
        "pxanoiso",
        "--path",
        "/srv/pxa-noiso",
        "--content",
        "backup",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let data = bytes(64 << 10, 7);
    let file = home.write("n.iso", &data);
    for gated_bed in [false, true] {
        let r = run(
            &home,
            gated_bed,
            &[
                "iso",
                "upload",
                &file,
                "--storage",
                "pxanoiso",
                "-o",
                "json",
            ],
        );
        assert_eq!(r.code, 2, "{}", r.stdout);
        let m = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.contains("does not hold iso content"), "{m}");
    }
    // The helper, asked directly, refuses it too.
    let (code, stderr) = helper_over_ssh(
        &format!(
            "sudo -n {HELPER} iso-receive --max-used 90 pxanoiso n.iso {} {}",
            data.len(),
            sha256(&data)
        ),
        &data,
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("does not hold iso content"), "{stderr}");
    assert!(files(&root.join("template/iso")).is_empty());
    let r = home.on_bed(&[
        "storage",
        "remove",
        "pxanoiso",
        "--confirm",
        "yes remove pxanoiso",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_killed_client_leaves_nothing_behind() {
    let _g = lock();
    let _made = made(&["pxa-killed.iso"]);
    let home = Home::new();
    // Large enough that the stream is still going when the client is killed.
    let data = bytes(256 << 20, 6);
    let file = home.write("big.iso", &data);
    drop(data);
    for gated_bed in [false, true] {
        let before = files(Path::new(ISO_DIR));
        let px = home.px();
        let px = if gated_bed { px.gated() } else { px.bed() };
        let running = px
            .args([
                "iso",
                "upload",
                &file,
                "--name",
                "pxa-killed.iso",
                "-o",
                "json",
            ])
            .spawn();
        // Kill the client once the helper runs on the host.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !helper_running() {
            assert!(Instant::now() < deadline, "the helper never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let killed = Command::new("kill")
            .args(["-KILL", &running.pid().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let _ = running.wait();
        // The helper ends (its stdin closed) and leaves nothing.
        let deadline = Instant::now() + Duration::from_secs(30);
        while helper_running() {
            assert!(Instant::now() < deadline, "the helper is still running");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(files(Path::new(ISO_DIR)), before, "gated={gated_bed}");
    }
}

/// Whether a pxagent-helper process runs on this machine (the bed's host).
fn helper_running() -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("^{HELPER} iso-receive")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The helper's sudoers line: admitted with the catalog's arguments, refused with any other
/// word, path, number or subcommand.
#[test]
fn sudo_admits_the_helper_only_with_the_catalogs_arguments() {
    let _g = lock();
    let _installed = Installed::new(&render("full", &["--iso-max-used", "80"]));
    let sha = "a".repeat(64);
    let ok = |rest: &[&str]| {
        let mut v = w(&[HELPER, "iso-receive", "--max-used"]);
        v.extend(w(rest));
        v
    };
    assert!(allowed(&ok(&["80", "local", "x.iso", "1048576", &sha])));
    assert!(allowed(&ok(&["1", "local", "x.img", "1", &sha])));
    for bad in [
        ok(&["81", "local", "x.iso", "1", &sha]),
        ok(&["99", "local", "x.iso", "1", &sha]),
        ok(&["80", "local", "x.iso", "1", &sha, "extra"]),
        ok(&["80", "local", "/etc/x.iso", "1", &sha]),
        ok(&["80", "local", "../x.iso", "1", &sha]),
        ok(&["80", "local", "x.sh", "1", &sha]),
        ok(&["80", "local", "x.iso", "1G", &sha]),
        ok(&["80", "local", "x.iso", "-1", &sha]),
        ok(&["80", "local", "x.iso", "1"]),
        ok(&["80", "local", "x.iso", "1", &sha.to_uppercase()]),
        ok(&["80", "/var/lib/vz", "x.iso", "1", &sha]),
        w(&[HELPER, "net-revert"]),
        w(&[HELPER, "iso-receive", "local", "x.iso", "1", &sha]),
        w(&[HELPER]),
    ] {
        assert!(!allowed(&bad), "{bad:?}");
    }
    // The full render is still clean under `sudoers lint`.
    let text = render("full", &[]);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("render");
    std::fs::write(&f, text).unwrap();
    let r = crate::support::local(&["sudoers", "lint", f.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}
