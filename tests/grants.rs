//! Signed grants on the gated bed (issue 25, item 1): a grant an approver signed admits exactly
//! its scope (ops, VMIDs, count) until it ends or is revoked; a grant signed by the agent's own
//! key, or made for another account or host, admits nothing. Every test holds the host lock and
//! removes the grants it made.

use std::path::PathBuf;
use std::process::Command;

use crate::support::*;

fn control_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("PXAGENT_GATED_TESTBED_GATE_CONTROL").unwrap_or_else(|_| {
            panic!("PXAGENT_GATED_TESTBED_GATE_CONTROL is not set: run scripts/test.sh")
        }),
    )
}

/// Removes every record of the control directory on drop.
struct Cleared(PathBuf);

impl Drop for Cleared {
    fn drop(&mut self) {
        for e in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn snap(home: &Home, vmid: &str) -> Run {
    home.px()
        .gated()
        .args(["vm", "snapshot", vmid, &fresh("g"), "-o", "json"])
        .run()
}

fn grant(home: &Home, key: &std::path::Path, args: &[&str]) -> Run {
    home.px()
        .gated()
        .args(["grant"])
        .args(args)
        .args(["-o", "json", "--key"])
        .arg_path(key)
        .run()
}

#[test]
fn a_signed_grant_admits_exactly_its_scope_until_it_ends_or_is_revoked() {
    let _g = lock();
    let _s = sim_reset();
    let g = gated();
    let _c = Cleared(control_dir());
    let _p = g.policy("ops:\n  vm.snapshot: grantable\n");
    let agent = Home::new();
    let approver = Home::new();

    // No grant: refused (exit 3), nothing ran.
    let r = snap(&agent, "100");
    assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only inside an approver's grant"),
        "{}",
        r.stdout
    );

    // Signed by the agent's own key: refused, no grant.
    let own = PathBuf::from(std::env::var("PXAGENT_GATED_IDENTITY").unwrap());
    let r = grant(&agent, &own, &["--ops", "vm.snapshot*", "--for", "1h"]);
    assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["error"]["reason"], "unlisted_key", "{}", r.stdout);

    // Made for another account, or another host, and signed by the approver: refused.
    let asked = agent
        .px()
        .gated()
        .args(["grant", "--ops", "vm.snapshot", "--for", "1h", "-o", "json"])
        .run();
    assert_eq!(asked.code, 4, "{}", asked.stdout);
    let st = asked.json()["error"]["approval_request"]["statement"]
        .as_str()
        .unwrap()
        .to_string();
    for (from, to, why) in [
        (
            format!("account: {}\n", g.user),
            "account: someone\n".to_string(),
            "wrong_account",
        ),
        (
            "host: ".to_string(),
            "host: other-".to_string(),
            "wrong_host",
        ),
    ] {
        let forged = st.replacen(&from, &to, 1);
        assert_ne!(forged, st);
        let file = agent.path().join("forged.txt");
        std::fs::write(&file, &forged).unwrap();
        let sig = file.with_extension("txt.sig");
        let _ = std::fs::remove_file(&sig);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-Y", "sign", "-n", "pxagent-approval", "-f"])
            .arg(&g.approver_key)
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success());
        let mut both = forged.clone();
        both.push_str(&std::fs::read_to_string(&sig).unwrap());
        agent.write("forged.approval", both.as_bytes());
        let r = agent
            .px()
            .gated()
            .args(["grant", "--ops", "vm.snapshot", "--for", "1h", "-o", "json"])
            .args(["--approval", "forged.approval"])
            .run();
        assert_eq!(r.code, 4, "{}\n{}", r.stdout, r.stderr);
        assert_eq!(r.json()["error"]["reason"], why, "{}", r.stdout);
    }
    let r = agent
        .px()
        .gated()
        .args(["grant", "list", "-o", "json"])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json()["data"]["grants"],
        serde_json::json!([]),
        "{}",
        r.stdout
    );

    // The approver's grant: snapshots of 100-101, at most 2.
    let r = grant(
        &approver,
        &g.approver_key,
        &[
            "--ops",
            "vm.snapshot*",
            "--vmids",
            "100-101",
            "--for",
            "1h",
            "--max",
            "2",
        ],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let id = r.json()["data"]["id"].as_str().unwrap().to_string();
    let offset = g.log_len();
    assert_eq!(snap(&agent, "100").code, 0);
    // Outside its VMIDs: refused.
    assert_eq!(snap(&agent, "102").code, 3);
    assert_eq!(snap(&agent, "101").code, 0);
    // Its count is used up.
    assert_eq!(snap(&agent, "100").code, 3);
    let granted: Vec<_> = g
        .log_since(offset)
        .into_iter()
        .filter(|rec| rec["decision"] == "allowed" && rec["op"] == "vm.snapshot")
        .collect();
    assert_eq!(granted.len(), 2, "{granted:?}");
    assert!(
        granted.iter().all(|rec| rec["grant"] == id.as_str()),
        "{granted:?}"
    );

    // A grant revoked by an approver admits nothing more.
    let r = grant(
        &approver,
        &g.approver_key,
        &["--ops", "vm.snapshot", "--vmids", "102", "--for", "1h"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let second = r.json()["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(snap(&agent, "102").code, 0);
    let r = agent
        .px()
        .gated()
        .args(["grant", "list", "-o", "json"])
        .run();
    assert!(r.stdout.contains(&second), "{}", r.stdout);
    let r = approver
        .px()
        .gated()
        .args(["grant", "revoke", &second, "-o", "json", "--key"])
        .arg_path(&g.approver_key)
        .run();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(snap(&agent, "102").code, 3);

    // A grant ends when it says.
    let r = grant(
        &approver,
        &g.approver_key,
        &["--ops", "vm.snapshot", "--vmids", "102", "--for", "2s"],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(snap(&agent, "102").code, 0);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(snap(&agent, "102").code, 3);
    // Longer than the host policy allows: refused before anything is signed.
    let _q = g.policy("ops:\n  vm.snapshot: grantable\ngrants: {max_for: 1h}\n");
    let r = grant(
        &approver,
        &g.approver_key,
        &["--ops", "vm.snapshot", "--for", "2h"],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
}
