//! What can be checked without an sshd: the ownership and permission checks of the socket
//! directory and the socket, the socket's key, and the spec a holder gets. The holder itself
//! runs against the bed's real sshd in `tests/persist.rs`.

use std::os::unix::fs::PermissionsExt;

use super::*;

fn target() -> Target {
    let mut t = Target::new("127.0.0.1", 2222, "zen-agent");
    t.identities = Vec::new();
    t.use_agent = false;
    t.known_hosts = "/tmp/kh".into();
    t
}

#[test]
fn only_our_own_closed_directory_and_socket_are_used() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pxagent");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    check_owned(&dir, true).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = check_owned(&dir, true).unwrap_err();
    assert_eq!(e.exit_code(), 6);
    assert!(e.to_string().contains("mode 0755"), "{e}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A symlink to a good directory is not the directory.
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(
        check_owned(&link, true)
            .unwrap_err()
            .to_string()
            .contains("not a directory")
    );

    let sock = dir.join("x.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600)).unwrap();
    check_owned(&sock, false).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(
        check_owned(&sock, false)
            .unwrap_err()
            .to_string()
            .contains("others could use it")
    );
    // A plain file is no socket.
    let file = dir.join("f.sock");
    std::fs::write(&file, "").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(
        check_owned(&file, false)
            .unwrap_err()
            .to_string()
            .contains("not a socket")
    );
    // Another owner: root's / for anyone but root; as root (the test bed runs so), a
    // directory and a socket of our own given to nobody (65534), modes still 0700/0600.
    if uid() != 0 {
        assert!(
            check_owned(Path::new("/"), true)
                .unwrap_err()
                .to_string()
                .contains("owned by uid 0")
        );
    } else {
        let theirs = dir.join("theirs");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&theirs)
            .unwrap();
        check_owned(&theirs, true).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = check_owned(&theirs, true).unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        assert_eq!(e.exit_code(), 6, "{e}");
        std::os::unix::fs::chown(&sock, Some(65534), None).unwrap();
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = check_owned(&sock, false).unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    }
}

#[test]
fn the_socket_is_keyed_by_account_host_port_known_hosts_and_keys() {
    let base = socket_name(&target()).unwrap();
    assert_eq!(base, socket_name(&target()).unwrap());
    assert!(base.ends_with(".sock") && base.len() == 24 + 5);
    let variants: Vec<fn(&mut Target)> = vec![
        |t| t.user = "other".into(),
        |t| t.host = "127.0.0.2".into(),
        |t| t.port = 2223,
        |t| t.known_hosts = "/tmp/other".into(),
        |t| {
            t.use_agent = true;
            t.agent_socket = Some("/tmp/agent.sock".into());
        },
        |t| t.jumps = vec![Target::new("bastion", 22, "jump")],
    ];
    for change in variants {
        let mut t = target();
        change(&mut t);
        assert_ne!(socket_name(&t).unwrap(), base);
    }
    // Another key file: another socket.
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("id");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .output();
    if let Ok(out) = out
        && out.status.success()
    {
        let mut t = target();
        t.identities = vec![key];
        assert_ne!(socket_name(&t).unwrap(), base);
    }
}

#[test]
fn the_spec_carries_the_target_without_a_command_timeout() {
    let mut t = target();
    t.command_timeout = Some(Duration::from_secs(3));
    t.host_key_policy = HostKeyPolicy::AcceptNew;
    t.jumps = vec![Target::new("bastion", 22, "jump")];
    let spec = Spec::new(&t, Path::new("/run/x.sock"), Duration::from_secs(30));
    let back: Spec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
    let t2 = back.target();
    assert_eq!(
        (t2.host.as_str(), t2.port, t2.user.as_str()),
        ("127.0.0.1", 2222, "zen-agent")
    );
    assert_eq!(t2.host_key_policy, HostKeyPolicy::AcceptNew);
    assert_eq!(
        t2.command_timeout, None,
        "each request carries its caller's"
    );
    assert_eq!(back.idle_secs, 30);
    assert!(serde_json::from_str::<Spec>(r#"{"host":"h","shell":true}"#).is_err());
}
