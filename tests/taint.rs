//! Taint (issue 25, item 8): with the policy's `taint: after_exec`, once a guest's output came
//! back in an MCP session (or a batch), the session's next change needs its phrase: what a guest
//! prints may carry instructions meant for the agent, not its user's.

use serde_json::{Value, json};

use crate::support::*;

fn session(home: &Home, policy: Option<&str>, spec: &Value) -> Vec<Value> {
    let mut env = Vec::new();
    if let Some(p) = policy {
        env.push((
            "PXAGENT_POLICY",
            home.path()
                .join(home.write("p.yaml", p.as_bytes()))
                .display()
                .to_string(),
        ));
    }
    let report = crate::mcp::client_with(home, &["--calls", &spec.to_string()], &env);
    report["calls"].as_array().unwrap().clone()
}

fn kind(call: &Value) -> String {
    match call["is_error"].as_bool() {
        Some(true) => call["structured"]["error"]["kind"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
        _ => "ok".into(),
    }
}

#[test]
fn after_a_guest_command_the_next_change_of_the_session_needs_its_phrase() {
    let _g = lock();
    let _s = sim_reset();
    let home = Home::new();
    let set = |d: &str| json!(["vm_set", {"vmid": 100, "description": d}]);
    let spec = json!([
        set("before"),
        ["vm_exec", {"vmid": 100, "command": ["cat", "/etc/hostname"]}],
        ["vm_status", {"vmid": 100}],
        set("tainted"),
        ["vm_set", {"vmid": 100, "description": "confirmed", "confirm": "yes vm set 100"}],
        set("clean"),
    ]);
    let calls = session(&home, Some("taint: after_exec\n"), &spec);
    let kinds: Vec<String> = calls.iter().map(kind).collect();
    assert_eq!(
        kinds,
        ["ok", "ok", "ok", "confirmation_required", "ok", "ok"],
        "{calls:#?}"
    );
    let msg = calls[3]["structured"]["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("vm exec 100") && msg.contains("taint: after_exec"),
        "{msg}"
    );
    assert_eq!(
        sim_get(&format!("/nodes/{}/qemu/100/config", node_of(100)), &[])["description"],
        "clean"
    );
    // Without the option the same session runs every call (no `confirm` needed, or taken).
    let plain = json!([spec[0], spec[1], spec[2], spec[3], spec[5]]);
    let calls = session(&Home::new(), None, &plain);
    assert!(calls.iter().all(|c| kind(c) == "ok"), "{calls:#?}");
}
