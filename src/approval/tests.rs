//! The approval library end to end: signing and checking with real keys made by `ssh-keygen`,
//! interoperability with `ssh-keygen -Y sign` and `-Y verify` in both directions, every
//! [`Rejection`] from a crafted case, and the approval text form.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::*;

const NOW: u64 = 1_796_126_400; // 2026-12-01T12:00:00Z

/// A temp dir with keys, an approvers file and the gate's nonce store.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Bed {
        Bed {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A fresh unencrypted key `name` of `kind` (`ed25519`, `ecdsa`, `rsa`); returns its
    /// private key file and public key line.
    fn key(&self, name: &str, kind: &str) -> (PathBuf, String) {
        let path = self.path(name);
        let mut cmd = Command::new("ssh-keygen");
        cmd.args(["-q", "-t", kind, "-N", "", "-C", name, "-f"])
            .arg(&path);
        if kind == "rsa" {
            cmd.args(["-b", "2048"]);
        }
        run(&mut cmd);
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        (path, public.trim().to_string())
    }

    fn approvers(&self, keys: &[&str]) -> Approvers {
        Approvers::parse(&format!("{}\n", keys.join("\n")), "approvers").unwrap()
    }

    fn nonces(&self) -> NonceStore {
        NonceStore::open(&self.path("nonces")).unwrap()
    }

    /// `ssh-keygen -Y sign -n NAMESPACE -f key` over `text`: the armored signature.
    fn ssh_keygen_sign(&self, key: &Path, namespace: &str, text: &str) -> String {
        let file = self.path("statement.txt");
        let sig = self.path("statement.txt.sig");
        let _ = std::fs::remove_file(&sig);
        std::fs::write(&file, text).unwrap();
        run(Command::new("ssh-keygen")
            .args(["-q", "-Y", "sign", "-n", namespace, "-f"])
            .arg(key)
            .arg(&file));
        std::fs::read_to_string(sig).unwrap()
    }

    /// Whether `ssh-keygen -Y verify` accepts `armored` over `text` by `public` in our
    /// namespace.
    fn ssh_keygen_verifies(&self, public: &str, text: &str, armored: &str) -> bool {
        let signers = self.path("allowed_signers");
        std::fs::write(&signers, format!("approver {public}\n")).unwrap();
        let sig = self.path("check.sig");
        std::fs::write(&sig, armored).unwrap();
        let mut child = Command::new("ssh-keygen")
            .args(["-Y", "verify", "-n", NAMESPACE, "-I", "approver", "-f"])
            .arg(&signers)
            .arg("-s")
            .arg(&sig)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-keygen is installed");
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
        child.wait().unwrap().success()
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("ssh-keygen is installed");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn vm_args(vmid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("purge".to_string(), "1".to_string()),
        ("vmid".to_string(), vmid.to_string()),
    ])
}

const MID: &str = "5c4b3a2918f7e6d5c4b3a2918f7e6d5c";
const PLACE: Place = Place {
    host: "pve1",
    machine_id: MID,
    account: "zen-agent",
};

fn statement() -> Statement {
    Statement::new(PLACE, "vm.destroy", vm_args("100"), DEFAULT_TTL, NOW).unwrap()
}

fn request(args: &BTreeMap<String, String>) -> Requested<'_> {
    Requested {
        place: PLACE,
        op: "vm.destroy",
        args,
    }
}

#[test]
fn pxagent_signature_checks_and_matches_ssh_keygen_byte_for_byte() {
    let bed = Bed::new();
    let (key, public) = bed.key("alice", "ed25519");
    let st = statement();
    let armored = sign(&load_private_key(&key).unwrap(), &st.text()).unwrap();
    // Ed25519 signatures are deterministic, so the two signers must agree exactly.
    assert_eq!(armored, bed.ssh_keygen_sign(&key, NAMESPACE, &st.text()));
    let args = vm_args("100");
    let ok = check(
        &bed.approvers(&[&public]),
        &bed.nonces(),
        &request(&args),
        &st.text(),
        &armored,
        NOW,
    )
    .unwrap();
    assert_eq!(ok.comment, "alice");
    assert_eq!(ok.statement, st);
    assert_eq!(
        ok.fingerprint,
        bed.approvers(&[&public]).iter().next().unwrap().fingerprint
    );
    assert!(bed.nonces().contains(&st.nonce));
}

#[test]
fn ssh_keygen_verifies_what_pxagent_signs() {
    let bed = Bed::new();
    for kind in ["ed25519", "ecdsa", "rsa"] {
        let (key, public) = bed.key(kind, kind);
        let text = statement().text();
        let armored = sign(&load_private_key(&key).unwrap(), &text).unwrap();
        assert!(bed.ssh_keygen_verifies(&public, &text, &armored), "{kind}");
        let tampered = text.replace("\"100\"", "\"101\"");
        assert!(
            !bed.ssh_keygen_verifies(&public, &tampered, &armored),
            "{kind}"
        );
    }
}

#[test]
fn check_accepts_what_ssh_keygen_signs() {
    let bed = Bed::new();
    for kind in ["ed25519", "ecdsa", "rsa"] {
        let (key, public) = bed.key(kind, kind);
        let st = statement();
        let armored = bed.ssh_keygen_sign(&key, NAMESPACE, &st.text());
        let args = vm_args("100");
        let ok = check(
            &bed.approvers(&[&public]),
            &bed.nonces(),
            &request(&args),
            &st.text(),
            &armored,
            NOW,
        );
        assert!(ok.is_ok(), "{kind}: {ok:?}");
        // A statement file that lost its final newline before signing is the same statement.
        let st = statement();
        let armored = bed.ssh_keygen_sign(&key, NAMESPACE, st.text().trim_end());
        let ok = check(
            &bed.approvers(&[&public]),
            &bed.nonces(),
            &request(&args),
            &st.text(),
            &armored,
            NOW,
        );
        assert!(ok.is_ok(), "{kind} without final newline: {ok:?}");
    }
}

#[test]
fn every_rejection_from_a_crafted_case() {
    let bed = Bed::new();
    let (alice, alice_pub) = bed.key("alice", "ed25519");
    let (mallory, _) = bed.key("mallory", "ed25519");
    let approvers = bed.approvers(&[&alice_pub]);
    let nonces = bed.nonces();
    let alice_key = load_private_key(&alice).unwrap();
    let args = vm_args("100");
    let signed = |st: &Statement| sign(&alice_key, &st.text()).unwrap();
    let reject = |req: &Requested, text: &str, sig: &str, now: u64| -> Rejection {
        check(&approvers, &nonces, req, text, sig, now).unwrap_err()
    };

    let st = statement();
    let sig = signed(&st);

    // Malformed: a statement that is not canonical; a signature that is not one.
    let r = reject(&request(&args), &st.text().replace('\n', "\r\n"), &sig, NOW);
    assert_eq!(r.code(), "malformed", "{r}");
    assert!(r.to_string().contains("carriage return"), "{r}");
    let r = reject(
        &request(&args),
        &st.text(),
        "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n",
        NOW,
    );
    assert_eq!(r.code(), "malformed", "{r}");

    // Tampered statement: alice's signature, another VM.
    let mut tampered = st.clone();
    tampered.args.insert("vmid".into(), "101".into());
    let args101 = vm_args("101");
    let r = reject(&request(&args101), &tampered.text(), &sig, NOW);
    assert_eq!(r.code(), "bad_signature", "{r}");
    assert!(r.to_string().contains("sign the fresh statement"), "{r}");

    // Signed for another purpose.
    let file_sig = bed.ssh_keygen_sign(&alice, "file", &st.text());
    let r = reject(&request(&args), &st.text(), &file_sig, NOW);
    assert_eq!(r, Rejection::WrongNamespace("file".into()));
    assert!(r.to_string().contains("-n pxagent-approval"), "{r}");

    // Signed by someone who is not an approver.
    let mallory_sig = sign(&load_private_key(&mallory).unwrap(), &st.text()).unwrap();
    let r = reject(&request(&args), &st.text(), &mallory_sig, NOW);
    let Rejection::UnlistedKey { fingerprint } = &r else {
        panic!("{r:?}")
    };
    assert!(fingerprint.starts_with("SHA256:"), "{r}");
    assert_eq!(r.code(), "unlisted_key");

    // Another host (by name, or one of the same name with another machine id), another
    // account, another op, other args.
    let r = reject(
        &Requested {
            place: Place {
                host: "pve2",
                ..PLACE
            },
            ..request(&args)
        },
        &st.text(),
        &sig,
        NOW,
    );
    assert_eq!(
        r,
        Rejection::WrongHost {
            statement: format!("pve1 (machine id {MID})"),
            request: format!("pve2 (machine id {MID})"),
        }
    );
    let twin = "0".repeat(32);
    let r = reject(
        &Requested {
            place: Place {
                machine_id: &twin,
                ..PLACE
            },
            ..request(&args)
        },
        &st.text(),
        &sig,
        NOW,
    );
    assert_eq!(r.code(), "wrong_host", "{r}");
    assert!(r.to_string().contains(&twin), "{r}");
    let r = reject(
        &Requested {
            place: Place {
                account: "zen-other",
                ..PLACE
            },
            ..request(&args)
        },
        &st.text(),
        &sig,
        NOW,
    );
    assert_eq!(
        r,
        Rejection::WrongAccount {
            statement: "zen-agent".into(),
            request: "zen-other".into(),
        }
    );
    let r = reject(
        &Requested {
            op: "vm.stop",
            ..request(&args)
        },
        &st.text(),
        &sig,
        NOW,
    );
    assert_eq!(r.code(), "wrong_op", "{r}");
    let mut other = vm_args("101");
    other.remove("purge");
    other.insert("force".into(), "1".into());
    let r = reject(&request(&other), &st.text(), &sig, NOW);
    assert_eq!(
        r,
        Rejection::WrongArgs {
            differences: vec![
                "force: requested \"1\", not in the approval".into(),
                "purge: approved \"1\", not in the request".into(),
                "vmid: approved \"100\", requested \"101\"".into(),
            ]
        }
    );

    // Expired, and valid for too long.
    let r = reject(&request(&args), &st.text(), &sig, st.expires);
    assert_eq!(
        r,
        Rejection::Expired {
            expired: "2026-12-01T12:10:00Z".into()
        }
    );
    let mut long = statement();
    long.expires = NOW + MAX_TTL.as_secs() + CLOCK_SKEW.as_secs() + 1;
    let r = reject(&request(&args), &long.text(), &signed(&long), NOW);
    assert_eq!(r.code(), "too_long", "{r}");
    long.expires -= 1;
    assert!(
        check(
            &approvers,
            &nonces,
            &request(&args),
            &long.text(),
            &signed(&long),
            NOW
        )
        .is_ok()
    );

    // None of the refusals used the nonce up; the first success does, then it is a replay.
    check(&approvers, &nonces, &request(&args), &st.text(), &sig, NOW).unwrap();
    let r = reject(&request(&args), &st.text(), &sig, NOW + 1);
    assert_eq!(
        r,
        Rejection::Replayed {
            nonce: st.nonce.clone()
        }
    );
    assert!(r.to_string().contains("already used"), "{r}");
}

#[test]
fn codes_are_stable_and_messages_say_what_to_do() {
    let cases = [
        (
            Rejection::Malformed("x".into()),
            "malformed",
            "sign the host's statement unchanged",
        ),
        (
            Rejection::BadSignature("x".into()),
            "bad_signature",
            "sign the fresh statement",
        ),
        (
            Rejection::WrongNamespace("git".into()),
            "wrong_namespace",
            "-n pxagent-approval",
        ),
        (
            Rejection::UnlistedKey {
                fingerprint: "SHA256:x".into(),
            },
            "unlisted_key",
            "/etc/pxagent/approvers",
        ),
        (
            Rejection::Expired {
                expired: "t".into(),
            },
            "expired",
            "sign the fresh statement",
        ),
        (
            Rejection::TooLong {
                expires: "t".into(),
            },
            "too_long",
            "at most 1h",
        ),
        (
            Rejection::WrongHost {
                statement: "a".into(),
                request: "b".into(),
            },
            "wrong_host",
            "this host issued",
        ),
        (
            Rejection::WrongOp {
                statement: "a".into(),
                request: "b".into(),
            },
            "wrong_op",
            "sign the fresh statement",
        ),
        (
            Rejection::WrongArgs {
                differences: vec!["d".into()],
            },
            "wrong_args",
            "(d)",
        ),
        (
            Rejection::Replayed { nonce: "n".into() },
            "replayed",
            "one operation",
        ),
        (
            Rejection::StoreFailed("disk".into()),
            "store_failed",
            "host's admin",
        ),
    ];
    for (r, code, says) in cases {
        assert_eq!(r.code(), code);
        assert!(r.to_string().contains(says), "{r} should say {says:?}");
    }
}

#[test]
fn private_keys_that_cannot_be_used_say_why() {
    let bed = Bed::new();
    let (key, _) = bed.key("open", "ed25519");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = load_private_key(&key).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string().contains("UNPROTECTED PRIVATE KEY FILE"),
        "{err}"
    );

    let locked = bed.path("locked");
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "secret phrase", "-f"])
        .arg(&locked));
    let err = load_private_key(&locked).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("passphrase-protected"), "{err}");
    assert!(
        err.to_string()
            .contains("ssh-keygen -Y sign -n pxagent-approval"),
        "{err}"
    );

    let err = load_private_key(&bed.path("missing")).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let junk = bed.path("junk");
    std::fs::write(&junk, "not a key").unwrap();
    std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(
        load_private_key(&junk)
            .unwrap_err()
            .to_string()
            .contains("cannot use private key")
    );
}

const SIG: &str = "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\nAAAA==\n-----END SSH SIGNATURE-----\n";

#[test]
fn approval_text_forms() {
    let alone = parse_approval(&format!("\n  {SIG}\n\n")).unwrap();
    assert_eq!(
        alone,
        Approval {
            statement: None,
            signature: SIG.into()
        }
    );
    assert_eq!(alone.to_text(), SIG);

    let st = statement().text();
    let both = parse_approval(&format!("{st}{SIG}")).unwrap();
    assert_eq!(both.statement.as_deref(), Some(st.as_str()));
    assert_eq!(both.signature, SIG);
    assert_eq!(parse_approval(&both.to_text()).unwrap(), both);
    assert_eq!(
        parse_approval(&format!("{st}\n\n{}", SIG.replace('\n', "\r\n"))).unwrap(),
        both,
        "blank lines between and CRLF armor are tolerated"
    );

    for (text, why) in [
        ("".to_string(), "empty"),
        (
            "hello".to_string(),
            "no `-----BEGIN SSH SIGNATURE-----` line",
        ),
        (format!("approve please\n{SIG}"), "only a statement"),
        (format!("{SIG}{SIG}"), "more than one signature"),
        (format!("{SIG}trailing words"), "does not end with"),
        (
            SIG.replace("-----END SSH SIGNATURE-----\n", ""),
            "does not end with",
        ),
        (SIG.replace("AAAA==", "AA AA=="), "not base64"),
        (format!("{}{SIG}", st.trim_end()), "own"),
    ] {
        let err = parse_approval(&text).unwrap_err();
        assert!(
            err.contains(why),
            "{text:?}: {err:?} should contain {why:?}"
        );
    }
}

#[test]
fn overlapping_armour_lines_are_an_error_not_a_panic() {
    for text in [
        "-----BEGIN SSH SIGNATURE-----END SSH SIGNATURE-----",
        "x\n-----BEGIN SSH SIGNATURE-----END SSH SIGNATURE-----",
        "pxagent-approval v1\n-----BEGIN SSH SIGNATURE-----END SSH SIGNATURE-----\n",
        "-----BEGIN SSH SIGNATURE----END SSH SIGNATURE-----",
        "-----BEGIN SSH SIGNATURE-----",
    ] {
        assert!(super::parse_approval(text).is_err(), "{text:?}");
    }
}
