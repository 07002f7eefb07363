//! Tests of the exec flows' local parts: request parsing, checksums, base64, local writes.

use std::path::PathBuf;

use super::*;
use crate::catalog;

#[test]
fn base64_matches_the_rfc_vectors() {
    for (raw, enc) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(raw.as_bytes()), enc);
    }
    assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    assert_eq!(VM_PUSH_MAX, 46080);
    assert_eq!(base64(&vec![0u8; VM_PUSH_MAX]).len(), FILE_WRITE_MAX_BASE64);
}

#[test]
fn pve_strings_are_bytes() {
    // "é" as UTF-8 (C3 A9) comes back from pvesh as the characters U+00C3 U+00A9.
    assert_eq!(pve_bytes("\u{c3}\u{a9}"), vec![0xc3, 0xa9]);
    assert_eq!(pve_bytes("\u{0}\u{ff}"), vec![0, 0xff]);
    assert_eq!(pve_bytes("€"), "€".as_bytes());
}

#[test]
fn push_and_pull_specs() {
    assert_eq!(
        GuestRequest::parse_push("in.txt:/tmp/in.txt").unwrap(),
        (PathBuf::from("in.txt"), "/tmp/in.txt".to_string())
    );
    assert_eq!(
        GuestRequest::parse_push("C:/x/in.txt:/tmp/in.txt")
            .unwrap()
            .1,
        "/tmp/in.txt"
    );
    assert!(GuestRequest::parse_push("in.txt").is_err());
    assert!(GuestRequest::parse_push("in.txt:tmp/x").is_err());
    assert_eq!(
        GuestRequest::parse_pull("/tmp/out.txt:out.txt").unwrap(),
        ("/tmp/out.txt".to_string(), PathBuf::from("out.txt"))
    );
    assert!(GuestRequest::parse_pull("tmp/out.txt:out.txt").is_err());
    assert!(GuestRequest::parse_pull("/tmp/out.txt:").is_err());
}

fn req(argv: &[&str]) -> GuestRequest {
    GuestRequest {
        op: catalog::find("vm.exec").unwrap(),
        vmid: "100".into(),
        node: None,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        stdin: None,
        push: vec![],
        pull: vec![],
        force: false,
        mkdir: false,
        timeout: DEFAULT_TIMEOUT,
    }
}

#[test]
fn local_checks_refuse_before_sending() {
    assert!(req(&["uname", "-a"]).check().is_ok());
    assert_eq!(req(&[]).check().unwrap_err().exit_code(), 2);
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::write(&big, vec![7u8; VM_PUSH_MAX + 1]).unwrap();
    let mut r = req(&["true"]);
    r.push = vec![(big, "/tmp/big".into())];
    let e = r.check().unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("46080"), "{e}");
    for bad in ["tmp/x", "/tmp/../etc/shadow", "/tmp/a\nb", "/tmp/"] {
        let mut r = req(&["true"]);
        r.pull = vec![(bad.into(), dir.path().join("x"))];
        assert_eq!(r.check().unwrap_err().exit_code(), 2, "{bad:?}");
    }
    let exists = dir.path().join("exists");
    std::fs::write(&exists, "x").unwrap();
    let mut r = req(&["true"]);
    r.pull = vec![("/tmp/out".into(), exists.clone())];
    assert!(r.check().unwrap_err().to_string().contains("--force"));
    r.force = true;
    assert!(r.check().is_ok());
    let mut r = req(&["cat"]);
    r.stdin = Some(vec![0xff, 0xfe]);
    assert!(r.check().unwrap_err().to_string().contains("text only"));
}

#[test]
fn the_argv_reaches_pvesh_word_by_word() {
    let c = req(&["sh", "-c", "echo a; echo b", "--output-format"])
        .check()
        .unwrap();
    let mut inv = c.inv;
    inv.values.insert("node", "pve1".into());
    assert_eq!(
        inv.argv()[1..],
        [
            "create",
            "/nodes/pve1/qemu/100/agent/exec",
            "--command",
            "sh",
            "--command",
            "-c",
            "--command",
            "echo a; echo b",
            "--command",
            "--output-format",
            "--output-format",
            "json"
        ]
    );
}

#[test]
fn local_files_are_never_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.bin");
    write_local(&p, b"one", false).unwrap();
    let e = write_local(&p, b"two", false).unwrap_err();
    assert!(e.to_string().contains("--force"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"one");
    write_local(&p, b"two", true).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"two");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
