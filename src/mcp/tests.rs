//! The MCP server's tests: the tool list against the catalog and the policy, the schemas
//! against the catalog's samples, and JSON-RPC over an in-memory pipe.

use std::collections::BTreeMap;

use rmcp::ServiceExt;
use serde_json::{Map, Value, json};

use super::*;
use crate::catalog::{self, Kind, OPS, Op, Profile, Risk};
use crate::error::Error;
use crate::policy::{Action, Policy};
use crate::policy::{PolicyConfig, Rule};
use crate::ssh::Target;

fn deny(ids: &[&str]) -> Policy {
    let mut cfg = PolicyConfig::default();
    for id in ids {
        cfg.ops.insert(id.to_string(), Rule::new(Action::Deny));
    }
    Policy::from_config(cfg, "test policy").unwrap()
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(o) => o,
        _ => panic!("not an object"),
    }
}

/// A sample of raw CLI values as the JSON arguments a client sends.
fn as_args(op: &Op, raw: &BTreeMap<&'static str, String>) -> Map<String, Value> {
    raw.iter()
        .map(|(k, v)| {
            let p = op.param(k).unwrap();
            let value = match p.kind {
                Kind::Flag => json!(true),
                Kind::GuestArgv => serde_json::from_str(v).unwrap(),
                Kind::Choice(cs) => {
                    // Samples hold wire values; clients send the CLI name.
                    let c = cs.iter().find(|c| c.cli == v || c.wire == v).unwrap();
                    json!(c.cli)
                }
                k if integer_range(k).is_some() => json!(v.parse::<u64>().unwrap()),
                _ => json!(v),
            };
            (k.to_string(), value)
        })
        .collect()
}

#[test]
fn tools_are_the_catalog_minus_denied_and_profile_excluded() {
    let policy = deny(&["vm.destroy"]);
    for profile in Profile::ALL {
        let names: Vec<String> = tool_specs(&policy, profile)
            .into_iter()
            .map(|s| s.name)
            .collect();
        let expected: Vec<String> = OPS
            .iter()
            .filter(|op| profile.allows_op(op) && !op.is_step() && op.id != "vm.destroy")
            .map(|op| op.tool_name())
            .collect();
        assert_eq!(names, expected, "{profile:?}");
    }
    let readonly = tool_specs(&policy, Profile::Readonly);
    assert!(readonly.iter().all(|s| s.op.risk == Risk::Read));
    assert!(readonly.iter().any(|s| s.name == "vm_list"));
    let full = tool_specs(&Policy::default(), Profile::Full);
    assert!(full.iter().any(|s| s.name == "vm_destroy"));
    // Variants sharing a CLI path are separate tools.
    for name in [
        "vm_snapshot",
        "vm_snapshot_vmstate",
        "backup_restore",
        "backup_restore_ct",
        "backup_restore_overwrite",
        "backup_restore_ct_overwrite",
    ] {
        assert!(full.iter().any(|s| s.name == name), "{name}");
    }
    // Names are unique and valid MCP tool names.
    let mut seen = std::collections::BTreeSet::new();
    for s in &full {
        assert!(seen.insert(s.name.clone()), "duplicate {}", s.name);
        assert!(
            s.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{}",
            s.name
        );
    }
}

#[test]
fn read_only_policy_hides_every_non_read() {
    let cfg = PolicyConfig {
        read_only: true,
        ..PolicyConfig::default()
    };
    let policy = Policy::from_config(cfg, "test").unwrap();
    let specs = tool_specs(&policy, Profile::Full);
    assert!(!specs.is_empty());
    assert!(specs.iter().all(|s| s.op.risk == Risk::Read));
}

#[test]
fn schemas_accept_samples_and_reject_bad_arguments() {
    for op in OPS {
        let spec = tool_spec(op, op.confirm.is_some());
        assert!(
            jsonschema::meta::is_valid(&spec.input_schema),
            "{}: not a valid JSON Schema",
            op.id
        );
        let v = jsonschema::validator_for(&spec.input_schema).unwrap();
        let samples = catalog::samples(op);
        assert!(!samples.is_empty(), "{}", op.id);
        for raw in &samples {
            let args = as_args(op, raw);
            let value = Value::Object(args.clone());
            let errors: Vec<String> = v.iter_errors(&value).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{} {value}: {errors:?}", op.id);
            // What the schema admits, the server admits.
            let (inv, _) = invocation(op, &args, op.confirm.is_some())
                .unwrap_or_else(|e| panic!("{} {value}: {e}", op.id));
            assert_eq!(inv.op.id, op.id);

            let mut bad = Vec::new();
            let mut unknown = args.clone();
            unknown.insert("bogus".into(), json!(1));
            bad.push(unknown);
            if op.param("vmid").is_some() {
                let mut a = args.clone();
                a.insert("vmid".into(), json!(99));
                bad.push(a);
            }
            for p in op.params.iter().filter(|p| p.kind == Kind::SnapName) {
                let mut a = args.clone();
                a.insert(p.name.into(), json!("; rm"));
                bad.push(a);
            }
            for p in op.params.iter().filter(|p| required(op, p)) {
                let mut a = args.clone();
                a.remove(p.name);
                bad.push(a);
            }
            for a in bad {
                let value = Value::Object(a.clone());
                assert!(!v.is_valid(&value), "{} schema admits {value}", op.id);
                let e = invocation(op, &a, op.confirm.is_some()).unwrap_err();
                assert_eq!(e.exit_code(), 2, "{} {value}: {e}", op.id);
            }
        }
    }
}

#[test]
fn schema_details() {
    let start = tool_spec(catalog::find("vm.start").unwrap(), false);
    let s = &start.input_schema;
    assert_eq!(s["properties"]["vmid"]["type"], "integer");
    assert_eq!(s["properties"]["vmid"]["minimum"], 100);
    assert_eq!(s["properties"]["vmid"]["maximum"], 999_999_999);
    assert_eq!(s["required"], json!(["vmid"]));
    assert_eq!(s["additionalProperties"], false);
    assert!(s["properties"].get("confirm").is_none());
    assert!(
        s["properties"]["node"]["pattern"]
            .as_str()
            .unwrap()
            .starts_with('^')
    );

    let destroy = tool_spec(catalog::find("vm.destroy").unwrap(), true);
    assert_eq!(
        destroy.input_schema["properties"]["confirm"]["type"],
        "string"
    );
    assert_eq!(
        destroy.input_schema["properties"]["purge"]["type"],
        "boolean"
    );
    assert!(destroy.description.contains("`yes destroy <vmid>`"));
    assert!(destroy.description.contains("human"));

    let vmstate = tool_spec(catalog::find("vm.snapshot-vmstate").unwrap(), true);
    assert_eq!(
        vmstate.input_schema["required"],
        json!(["vmid", "snapshot", "vmstate"])
    );
    assert_eq!(vmstate.input_schema["properties"]["vmstate"]["const"], true);
    let resources = tool_spec(catalog::find("cluster.resources").unwrap(), false);
    assert!(resources.input_schema["properties"]["type"]["enum"].is_array());
}

#[test]
fn annotations_follow_risk() {
    for op in OPS {
        let s = tool_spec(op, false);
        assert_eq!(s.read_only, op.risk == Risk::Read, "{}", op.id);
        assert_eq!(s.destructive, op.risk == Risk::Confirm, "{}", op.id);
        assert_eq!(s.idempotent, op.risk == Risk::Read, "{}", op.id);
        let t = serde_json::to_value(s.to_tool()).unwrap();
        let a = &t["annotations"];
        assert_eq!(a["readOnlyHint"], s.read_only, "{}", op.id);
        assert_eq!(a["destructiveHint"], s.destructive, "{}", op.id);
        assert_eq!(a["idempotentHint"], s.idempotent, "{}", op.id);
        assert_eq!(a["openWorldHint"], false, "{}", op.id);
    }
}

#[test]
fn arguments_become_the_cli_strings() {
    let op = catalog::find("vm.destroy").unwrap();
    let (raw, confirm) = raw_values(
        op,
        &obj(json!({"vmid": 100, "purge": false, "node": null, "confirm": "yes destroy 100"})),
        true,
    )
    .unwrap();
    assert_eq!(raw.get("vmid").map(String::as_str), Some("100"));
    assert!(!raw.contains_key("purge") && !raw.contains_key("node"));
    assert_eq!(confirm.as_deref(), Some("yes destroy 100"));
    let (raw, _) = raw_values(op, &obj(json!({"vmid": "101", "purge": true})), true).unwrap();
    assert_eq!(raw.get("vmid").map(String::as_str), Some("101"));
    assert_eq!(raw.get("purge").map(String::as_str), Some("1"));
    for bad in [
        json!({"vmid": 100.5}),
        json!({"vmid": -100}),
        json!({"vmid": true}),
        json!({"vmid": 100, "purge": "yes"}),
        json!({"vmid": 100, "confirm": 1}),
    ] {
        assert!(raw_values(op, &obj(bad.clone()), true).is_err(), "{bad}");
    }
    // No `confirm` where the tool takes none.
    let start = catalog::find("vm.start").unwrap();
    assert!(raw_values(start, &obj(json!({"vmid": 100, "confirm": "x"})), false).is_err());
}

#[test]
fn a_variant_tool_runs_only_its_own_op() {
    let restore = catalog::find("backup.restore").unwrap();
    let lxc = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";
    let e = invocation(restore, &obj(json!({"archive": lxc, "vmid": 300})), false).unwrap_err();
    assert!(e.to_string().contains("backup_restore_ct"), "{e}");
    let ct = catalog::find("backup.restore-ct").unwrap();
    assert!(invocation(ct, &obj(json!({"archive": lxc, "vmid": 300})), false).is_ok());
}

#[test]
fn failures_tell_the_model_what_to_do() {
    let op = catalog::find("vm.destroy").unwrap();
    let (inv, _) = invocation(op, &obj(json!({"vmid": 100})), true).unwrap();
    let text = failure_text(&inv.refusal().unwrap(), &inv);
    assert!(text.starts_with("I won't run `vm destroy 100` without explicit confirmation"));
    assert!(
        text.contains("ask the user to reply `yes destroy 100`"),
        "{text}"
    );
    assert!(text.contains("\"confirm\": \"yes destroy 100\""), "{text}");
    assert!(text.contains("must come from the human user"), "{text}");

    let start = catalog::find("vm.start").unwrap();
    let (inv, _) = invocation(start, &obj(json!({"vmid": 102})), false).unwrap();
    let text = failure_text(&Error::Connection("lost it".into()), &inv);
    assert!(text.contains("may or may not have happened"), "{text}");
    assert!(text.contains("vm_status (vmid 102)"), "{text}");
    let status = catalog::find("vm.status").unwrap();
    let (inv, _) = invocation(status, &obj(json!({"vmid": 102})), false).unwrap();
    assert!(!failure_text(&Error::Connection("lost".into()), &inv).contains("may or may not"));
}

/// The precise remote kinds (issue 12 item 24) tell the model what to do next: a locked guest
/// is waited for, not unlocked.
#[test]
fn the_precise_remote_kinds_say_what_to_do() {
    let op = catalog::find("vm.snapshot").unwrap();
    let (inv, _) = invocation(op, &obj(json!({"vmid": 100, "snapshot": "s1"})), false).unwrap();
    for (e, needle) in [
        (Error::Locked("VM is locked (backup)".into()), "task_list"),
        (Error::NotFound("no guest".into()), "list tools"),
        (Error::WrongState("VM 100 not running".into()), "status"),
    ] {
        let text = failure_text(&e, &inv);
        assert!(text.starts_with(&e.to_string()), "{text}");
        assert!(text.contains("ran on the host and failed"), "{text}");
        assert!(text.contains(needle), "{text}");
    }
}

/// Send one JSON-RPC line and read lines until the answer with this id.
async fn rpc(
    io: &mut tokio::io::BufReader<tokio::io::DuplexStream>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    io.get_mut()
        .write_all(format!("{msg}\n").as_bytes())
        .await
        .unwrap();
    loop {
        let mut line = String::new();
        assert!(io.read_line(&mut line).await.unwrap() > 0, "server hung up");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == id {
            return v;
        }
    }
}

#[tokio::test]
async fn a_client_over_a_duplex_pipe_sees_exactly_the_offered_tools() {
    use tokio::io::AsyncWriteExt;
    let policy = deny(&["vm.reboot"]);
    let expected = tool_specs(&policy, Profile::Operator);
    // Nothing listens on port 9: no call below needs the host.
    let target = Target::new("127.0.0.1", 9, "zen-agent");
    let server = Server::new(policy, Profile::Operator, target);
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let running = tokio::spawn(async move {
        let service = server.serve(server_io).await.unwrap();
        service.waiting().await.unwrap();
    });
    let mut io = tokio::io::BufReader::new(client_io);
    let init = rpc(
        &mut io,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test", "version": "0"}}),
    )
    .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "pxagent");
    assert_eq!(
        init["result"]["serverInfo"]["version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(init["result"]["capabilities"]["tools"].is_object());
    io.get_mut()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();

    let list = rpc(&mut io, 2, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let want: Vec<&str> = expected.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, want);
    assert!(!names.contains(&"vm_reboot") && !names.contains(&"vm_destroy"));
    for (t, s) in tools.iter().zip(&expected) {
        assert_eq!(t["inputSchema"], s.input_schema, "{}", s.name);
        assert_eq!(t["annotations"]["readOnlyHint"], s.read_only, "{}", s.name);
        assert_eq!(
            t["annotations"]["destructiveHint"], s.destructive,
            "{}",
            s.name
        );
        assert_eq!(t["description"], s.description.as_str());
    }

    // An unknown tool is a protocol error (and not audited: it names no op).
    let unknown = rpc(
        &mut io,
        3,
        "tools/call",
        json!({"name": "qm_monitor", "arguments": {}}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    drop(io);
    running.await.unwrap();
}

#[test]
fn tools_that_change_state_take_an_approval_and_reads_do_not() {
    let destroy = super::schema::input_schema(&crate::catalog::ops::VM_DESTROY, true);
    assert_eq!(destroy["properties"]["approval"]["type"], "string");
    let list = super::schema::input_schema(&crate::catalog::ops::VM_LIST, false);
    assert!(list["properties"].get("approval").is_none());
    let args = serde_json::json!({"vmid": 100, "approval": "-----BEGIN SSH SIGNATURE-----\nx\n-----END SSH SIGNATURE-----\n"});
    let (inv, _) = super::args::invocation(
        &crate::catalog::ops::VM_START,
        args.as_object().unwrap(),
        false,
    )
    .unwrap();
    assert!(
        inv.attach
            .approval
            .as_deref()
            .unwrap()
            .starts_with("-----BEGIN")
    );
    assert!(
        !inv.remote_argv().concat().contains("SIGNATURE"),
        "never in the argv"
    );
    assert_eq!(inv.wire_argv()[0], "pxagent-gate/1");
    let bad = serde_json::json!({"vmid": 100, "approval": 5});
    assert!(
        super::args::invocation(
            &crate::catalog::ops::VM_START,
            bad.as_object().unwrap(),
            false
        )
        .is_err()
    );
}
