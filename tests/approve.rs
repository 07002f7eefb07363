//! Black-box tests of `pxagent approve` (no host needed): its output is an approval that
//! `ssh-keygen -Y verify` accepts, as the signature alone or, with `--ttl`, after the re-dated
//! statement; and every refusal is exit 2 with nothing on stdout. Keys are made by
//! `ssh-keygen` in each run's isolated home.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pxagent::approval::{self, NAMESPACE, Statement};

use crate::support::Home;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn statement(ttl: Duration) -> Statement {
    Statement::new(
        approval::Place {
            host: "pve1",
            machine_id: "5c4b3a2918f7e6d5c4b3a2918f7e6d5c",
            account: "zen-agent",
        },
        "vm.destroy",
        BTreeMap::from([
            ("purge".to_string(), "1".to_string()),
            ("vmid".to_string(), "100".to_string()),
        ]),
        ttl,
        now(),
    )
    .unwrap()
}

/// A home with an unencrypted ed25519 key `key` (0600) and an allowed_signers file for it.
fn home_with_key() -> Home {
    let home = Home::new();
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "approver", "-f"])
        .arg(home.path().join("key"))
        .output()
        .expect("ssh-keygen is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = String::from_utf8(home.read("key.pub")).unwrap();
    home.write("allowed_signers", format!("approver {public}").as_bytes());
    home
}

/// Whether `ssh-keygen -Y verify` accepts `armored` over `text` by the home's key.
fn verifies(home: &Home, text: &str, armored: &str) -> bool {
    home.write("check.sig", armored.as_bytes());
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "verify", "-n", NAMESPACE, "-I", "approver", "-f"])
        .arg(home.path().join("allowed_signers"))
        .arg("-s")
        .arg(home.path().join("check.sig"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ssh-keygen is installed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    child.wait().unwrap().success()
}

#[test]
fn approve_prints_a_signature_ssh_keygen_verifies() {
    let home = home_with_key();
    let st = statement(approval::DEFAULT_TTL);
    let file = home.write("statement.txt", st.text().as_bytes());
    let r = home.px().args(["approve", "--key", "key", &file]).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("-----BEGIN SSH SIGNATURE-----\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.ends_with("-----END SSH SIGNATURE-----\n"),
        "{}",
        r.stdout
    );
    assert!(verifies(&home, &st.text(), &r.stdout));
    assert!(!verifies(
        &home,
        &st.text().replace("\"100\"", "\"101\""),
        &r.stdout
    ));
    // The human sees what they approve, on stderr.
    for shown in [
        "`vm.destroy` on host pve1 as account zen-agent",
        "machine id 5c4b3a2918f7e6d5c4b3a2918f7e6d5c",
        "vmid = \"100\"",
        "purge = \"1\"",
        "valid once, until",
    ] {
        assert!(r.stderr.contains(shown), "{shown}: {}", r.stderr);
    }

    // Same approval from stdin and from the text itself (Ed25519 signs deterministically).
    let from_stdin = home
        .px()
        .args(["approve", "--key", "key", "-"])
        .stdin(st.text())
        .run();
    assert_eq!(from_stdin.code, 0, "{}", from_stdin.stderr);
    assert_eq!(from_stdin.stdout, r.stdout);
    let inline = home
        .px()
        .args(["approve", "--key", "key", &st.text()])
        .run();
    assert_eq!(inline.stdout, r.stdout, "{}", inline.stderr);
}

#[test]
fn approve_with_ttl_prints_the_redated_statement_and_its_signature() {
    let home = home_with_key();
    let st = statement(Duration::from_secs(60));
    let file = home.write("statement.txt", st.text().as_bytes());
    let r = home
        .px()
        .args(["approve", "--key", "key", "--ttl", "30m", &file])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("--ttl changed the statement"),
        "{}",
        r.stderr
    );
    let parsed = approval::parse_approval(&r.stdout).unwrap();
    let text = parsed
        .statement
        .expect("the statement travels with the signature");
    let redated = Statement::parse(&text).unwrap();
    assert_eq!(redated.nonce, st.nonce);
    assert_eq!(redated.args, st.args);
    let expected = now() + 1800;
    assert!(redated.expires.abs_diff(expected) <= 5, "{text}");
    assert!(verifies(&home, &text, &parsed.signature));
    assert!(!verifies(&home, &st.text(), &parsed.signature));
}

#[test]
fn approve_refusals_are_exit_2_with_nothing_on_stdout() {
    let home = home_with_key();
    let st = statement(approval::DEFAULT_TTL);
    let file = home.write("statement.txt", st.text().as_bytes());
    let mut expired = st.clone();
    expired.expires = now() - 1;
    let expired_file = home.write("expired.txt", expired.text().as_bytes());
    let mut far = st.clone();
    far.expires = now() + 3 * 3600;
    let far_file = home.write("far.txt", far.text().as_bytes());
    let malformed = home.write(
        "malformed.txt",
        st.text().replace("arg vmid", "arg VMID").as_bytes(),
    );
    home.write("open_key", &home.read("key"));
    std::fs::set_permissions(
        home.path().join("open_key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--ttl", "2h", &file],
            "--ttl 2h: an approval lasts at most 1h",
        ),
        (vec!["--ttl", "soon", &file], "invalid --ttl 'soon'"),
        (vec![&malformed], "line 7: invalid arg name"),
        (vec![&expired_file], "expired at"),
        (vec![&far_file], "longer than the 1h"),
        (vec!["missing.txt"], "cannot read missing.txt"),
    ];
    for (args, says) in cases {
        let r = home
            .px()
            .args(["approve", "--key", "key"])
            .args(&args)
            .run();
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        assert!(
            r.stderr.contains(says),
            "{args:?} should say {says:?}: {}",
            r.stderr
        );
    }
    // A key file others can read, and a missing key.
    for (key, says) in [
        ("open_key", "UNPROTECTED PRIVATE KEY FILE"),
        ("nokey", "cannot read nokey"),
    ] {
        let r = home.px().args(["approve", "--key", key, &file]).run();
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stdout.is_empty());
        assert!(r.stderr.contains(says), "{}", r.stderr);
    }
    // The expired statement is fine once re-dated.
    let r = home
        .px()
        .args(["approve", "--key", "key", "--ttl", "600", &expired_file])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
}
