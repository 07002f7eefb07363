//! The network arm, confirm and revert against a temporary directory standing for
//! `/etc/network`, with stand-ins for `pvesh` (moves `interfaces.new` over `interfaces`, as
//! PVE's reload does) and `ifreload`.

use std::os::unix::fs::PermissionsExt;

use super::*;

const BEFORE: &str = "auto lo\niface lo inet loopback\n\nauto vmbr0\niface vmbr0 inet static\n\taddress 192.0.2.10/24\n";
const NEW: &str = "auto lo\niface lo inet loopback\n\nauto vmbr0\niface vmbr0 inet static\n\taddress 192.0.2.10/24\n\nauto vmbr1\niface vmbr1 inet manual\n";

/// A bed in a temporary directory; `apply_ok: false` makes the reload task fail.
fn bed(apply_ok: bool) -> (tempfile::TempDir, Net) {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    std::fs::write(etc.join("interfaces"), BEFORE).unwrap();
    let pvesh = dir.path().join("pvesh");
    let status = if apply_ok {
        "OK"
    } else {
        "command 'ifreload -a' failed: exit code 1"
    };
    std::fs::write(
        &pvesh,
        format!(
            "#!/bin/sh\nif [ \"$1\" = set ]; then mv '{e}/interfaces.new' '{e}/interfaces'; echo 'UPID:pve1:00001234:00005678:6740A1B2:srvreload:networking:root@pam:'; else echo '{{\"exitstatus\":\"{status}\",\"status\":\"stopped\"}}'; fi\n",
            e = etc.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&pvesh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let reloads = dir.path().join("reloads");
    let ifreload = dir.path().join("ifreload");
    std::fs::write(
        &ifreload,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\n", reloads.display()),
    )
    .unwrap();
    std::fs::set_permissions(&ifreload, std::fs::Permissions::from_mode(0o755)).unwrap();
    let net = Net {
        interfaces: etc.join("interfaces"),
        state: dir.path().join("state"),
        pvesh,
        ifreload,
        helper: PathBuf::from("/bin/false"),
        schedule: Schedule::None,
    };
    (dir, net)
}

fn pend(net: &Net) {
    std::fs::write(net.pending_file(), NEW).unwrap();
}

fn token_of(out: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(out).unwrap();
    v["token"].as_str().unwrap().to_string()
}

fn expire(net: &Net) {
    let mut a = net.armed().unwrap().unwrap();
    a.deadline = now();
    std::fs::write(net.armed_file(), a.to_json()).unwrap();
}

fn history(net: &Net) -> Vec<String> {
    std::fs::read_to_string(net.state.join("history.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn nothing_pending_is_refused_and_nothing_is_armed() {
    let (_d, net) = bed(true);
    let e = net.arm(60).unwrap_err();
    assert_eq!(e.code(), 3, "{e:?}");
    assert!(net.armed().unwrap().is_none());
    assert_eq!(std::fs::read_to_string(&net.interfaces).unwrap(), BEFORE);
}

#[test]
fn a_window_outside_30_to_600_seconds_is_refused() {
    let (_d, net) = bed(true);
    pend(&net);
    for s in [0, 29, 601, 3600] {
        assert_eq!(net.arm(s).unwrap_err().code(), 2, "{s}");
    }
    assert!(net.pending_file().exists(), "nothing applied");
}

#[test]
fn a_confirmed_change_stays_and_the_copy_goes() {
    let (_d, net) = bed(true);
    pend(&net);
    let out = net.arm(60).unwrap();
    assert!(out.contains("UPID:pve1:"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&net.interfaces).unwrap(),
        NEW,
        "applied"
    );
    let mode = std::fs::metadata(&net.state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let armed = net.armed().unwrap().unwrap();
    let token = token_of(&out);
    assert_ne!(armed.token_sha256, token, "only the token's hash is kept");
    // Another token is refused and changes nothing.
    let wrong = "0".repeat(32);
    assert_eq!(net.confirm(&wrong).unwrap_err().code(), 3);
    assert!(net.armed().unwrap().is_some());
    net.confirm(&token).unwrap();
    assert!(net.armed().unwrap().is_none());
    assert!(!net.before_file().exists());
    // The waiter of that arm finds nothing to do: the change stays.
    net.watch(&armed.id).unwrap();
    assert_eq!(std::fs::read_to_string(&net.interfaces).unwrap(), NEW);
    assert_eq!(history(&net), ["armed", "confirmed"]);
    // The same token twice is refused.
    assert_eq!(net.confirm(&token).unwrap_err().code(), 3);
}

#[test]
fn no_confirm_in_the_window_and_the_host_reverts_by_itself() {
    let (d, net) = bed(true);
    pend(&net);
    let out = net.arm(30).unwrap();
    let id = net.armed().unwrap().unwrap().id;
    expire(&net);
    let r = net.watch(&id).unwrap();
    assert!(r.contains("\"reverted\":true"), "{r}");
    assert_eq!(std::fs::read_to_string(&net.interfaces).unwrap(), BEFORE);
    assert!(
        !net.pending_file().exists(),
        "nothing pending after the revert"
    );
    assert!(net.armed().unwrap().is_none());
    assert_eq!(
        std::fs::read_to_string(d.path().join("reloads")).unwrap(),
        "-a\n"
    );
    assert_eq!(history(&net), ["armed", "reverted"]);
    // A confirm after the revert is refused, and says what happened.
    let e = net.confirm(&token_of(&out)).unwrap_err();
    assert!(e.message().contains("reverted at"), "{e:?}");
}

#[test]
fn a_confirm_after_the_deadline_is_too_late() {
    let (_d, net) = bed(true);
    pend(&net);
    let token = token_of(&net.arm(30).unwrap());
    expire(&net);
    let e = net.confirm(&token).unwrap_err();
    assert!(e.message().contains("too late"), "{e:?}");
}

#[test]
fn one_armed_change_at_a_time_and_an_old_waiter_leaves_a_new_arm_alone() {
    let (_d, net) = bed(true);
    pend(&net);
    let first = token_of(&net.arm(60).unwrap());
    let first_id = {
        pend(&net);
        let e = net.arm(60).unwrap_err();
        assert_eq!(e.code(), 5, "{e:?}");
        net.armed().unwrap().unwrap().id
    };
    net.confirm(&first).unwrap();
    net.arm(60).unwrap();
    expire(&net);
    // The first arm's waiter wakes: not its change, nothing happens.
    net.watch(&first_id).unwrap();
    assert!(net.armed().unwrap().is_some());
    assert_eq!(std::fs::read_to_string(&net.interfaces).unwrap(), NEW);
}

#[test]
fn a_failed_apply_is_reverted_at_once() {
    let (_d, net) = bed(false);
    pend(&net);
    let e = net.arm(60).unwrap_err();
    assert!(
        e.message().contains("previous configuration is back"),
        "{e:?}"
    );
    assert_eq!(std::fs::read_to_string(&net.interfaces).unwrap(), BEFORE);
    assert!(net.armed().unwrap().is_none());
    assert_eq!(history(&net), ["armed", "reverted"]);
}

#[test]
fn pending_shows_the_diff_and_the_armed_change() {
    let (_d, net) = bed(true);
    let none: serde_json::Value = serde_json::from_str(&net.pending().unwrap()).unwrap();
    assert_eq!(none["pending"], false);
    assert_eq!(none["armed"], serde_json::Value::Null);
    pend(&net);
    let some: serde_json::Value = serde_json::from_str(&net.pending().unwrap()).unwrap();
    assert_eq!(some["pending"], true);
    assert!(
        some["diff"].as_str().unwrap().contains("+auto vmbr1"),
        "{some}"
    );
    net.arm(60).unwrap();
    let armed: serde_json::Value = serde_json::from_str(&net.pending().unwrap()).unwrap();
    assert_eq!(armed["pending"], false);
    assert!(armed["armed"]["deadline"].as_u64().unwrap() > now());
}

#[test]
fn a_state_directory_others_can_use_is_refused() {
    let (_d, net) = bed(true);
    std::fs::create_dir(&net.state).unwrap();
    std::fs::set_permissions(&net.state, std::fs::Permissions::from_mode(0o755)).unwrap();
    pend(&net);
    assert_eq!(net.arm(60).unwrap_err().code(), 3);
    assert_eq!(std::fs::read_to_string(&net.interfaces).unwrap(), BEFORE);
}

#[test]
fn command_lines() {
    let a = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        crate::parse_command(&a(&["net-pending"])).unwrap(),
        crate::Command::NetPending
    );
    assert_eq!(
        crate::parse_command(&a(&["net-arm", "60"])).unwrap(),
        crate::Command::NetArm(60)
    );
    let t = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        crate::parse_command(&a(&["net-confirm", t])).unwrap(),
        crate::Command::NetConfirm(t.into())
    );
    for bad in [
        &["net-arm", "29"][..],
        &["net-arm", "601"],
        &["net-arm", "060"],
        &["net-arm", "60", "x"],
        &["net-arm"],
        &["net-pending", "x"],
        &["net-confirm", "0123456789ABCDEF0123456789ABCDEF"],
        &["net-confirm", "x"],
        &["net-revert", "../x"],
        &["net-watch"],
        &["net-apply"],
        &[],
    ] {
        assert_eq!(
            crate::parse_command(&a(bad)).unwrap_err().code(),
            2,
            "{bad:?}"
        );
    }
}
