//! The MCP server's tests: the tool list against the catalog and the policy, the schemas
//! against the catalog's samples, and JSON-RPC over an in-memory pipe.

use std::collections::BTreeMap;

use rmcp::ServiceExt;
use serde_json::{Map, Value, json};

use super::schema::{folded_into, lean_tools, required, route};
use super::*;
use crate::base::error::Error;
use crate::catalog::{self, Kind, OPS, Op, Profile, Risk};
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
        // The server computes a sent file's size and digest itself.
        .filter(|(k, _)| op.param(k).unwrap().given())
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
fn annotations_say_what_the_op_does_to_the_world() {
    let spec = |id: &str| tool_spec(catalog::find(id).unwrap(), false);
    let exec = spec("vm.exec");
    assert!(exec.destructive && exec.open_world && !exec.read_only);
    let status = spec("vm.exec-status");
    assert!(status.read_only && !status.destructive && !status.open_world);
    let download = spec("iso.download");
    assert!(download.open_world && !download.destructive);
    assert!(spec("template.download").open_world);
    for id in [
        "vm.shutdown",
        "vm.reboot",
        "vm.suspend",
        "vm.stop",
        "vm.rollback",
        "vm.destroy",
        "vm.delsnapshot",
        "ct.shutdown",
        "ct.reboot",
        "backup.restore-overwrite",
        "backup.remove",
        "task.stop",
    ] {
        let s = spec(id);
        assert!(s.destructive && !s.read_only, "{id}");
    }
    for id in [
        "vm.start",
        "vm.resume",
        "vm.snapshot",
        "backup.create",
        "vm.create",
    ] {
        assert!(!spec(id).destructive, "{id} only adds");
    }
    // Idempotent: reads, and actions that bring a guest to a state.
    for id in ["vm.start", "vm.shutdown", "vm.stop", "vm.status"] {
        assert!(spec(id).idempotent, "{id}");
    }
    for id in [
        "vm.snapshot",
        "backup.create",
        "vm.reboot",
        "vm.exec",
        "task.stop",
    ] {
        assert!(!spec(id).idempotent, "{id}");
    }
    // A policy `confirm` makes a tool destructive.
    let resume = tool_spec(catalog::find("vm.resume").unwrap(), true);
    assert!(resume.destructive);
    for op in OPS {
        let s = tool_spec(op, false);
        assert!(!s.title.is_empty(), "{}", op.id);
        assert_eq!(
            s.read_only,
            op.risk == Risk::Read || s.name == "vm_exec_status" || s.name == "vm_file_read",
            "{}",
            op.id
        );
        if op.risk == Risk::Read {
            assert!(!s.destructive && s.idempotent && !s.open_world, "{}", op.id);
        }
        let t = serde_json::to_value(s.to_tool(true, &Shared::default())).unwrap();
        assert_eq!(t["title"], s.title.as_str(), "{}", op.id);
        let a = &t["annotations"];
        assert_eq!(a["readOnlyHint"], s.read_only, "{}", op.id);
        assert_eq!(a["destructiveHint"], s.destructive, "{}", op.id);
        assert_eq!(a["idempotentHint"], s.idempotent, "{}", op.id);
        assert_eq!(a["openWorldHint"], s.open_world, "{}", op.id);
        assert_eq!(t["outputSchema"], s.output_schema, "{}", op.id);
        assert_eq!(s.output_schema["type"], "object", "{}", op.id);
        assert!(
            jsonschema::meta::is_valid(&s.output_schema),
            "{}: output schema is not a JSON Schema",
            op.id
        );
        assert!(
            !s.output_schema.to_string().contains("\"format\":\""),
            "{}",
            op.id
        );
    }
}

/// The structured content the server sends validates against the tool's output schema: data
/// normalized from real captures, a task result, and a failure document.
#[test]
fn structured_content_fits_the_output_schema() {
    let fixture = |name: &str| -> Value {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/pve/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        serde_json::from_str::<Value>(&text).unwrap()["data"].clone()
    };
    let doc = |op: &Op, data: Value| json!({"ok": true, "op": op.id, "host": "h", "data": data});
    let check = |op: &Op, doc: &Value| {
        let schema = output_schema(op);
        let v = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}\n{doc}", op.id);
    };
    let resources = fixture("https_api_cluster_resources_pve7.4-8.0_capture.json");
    let vm_list = catalog::find("vm.list").unwrap();
    let data = crate::views::normalize(vm_list.view, &resources, None).unwrap();
    assert!(!data.as_array().unwrap().is_empty());
    check(vm_list, &doc(vm_list, data));
    let nodes = catalog::find("node.list").unwrap();
    let data = crate::views::normalize(
        nodes.view,
        &fixture("https_api_nodes_pve7.4-8.0_capture.json"),
        None,
    )
    .unwrap();
    check(nodes, &doc(nodes, data));
    let start = catalog::find("vm.start").unwrap();
    let task = json!({"upid": "UPID:pve1:000F4271:0735BBD7:6B0EB3A6:qmstart:100:root@pam:", "node": "pve1",
        "task": {"exitstatus": "OK", "status": "stopped", "type": "qmstart"}});
    check(start, &doc(start, task.clone()));
    // A list given where a task result belongs does not fit.
    let v = jsonschema::validator_for(&output_schema(start)).unwrap();
    assert!(!v.is_valid(&doc(start, json!([1, 2]))));
    // The views pxagent shapes itself have exact schemas: the agent's interfaces and RRD rows.
    let ips = catalog::find("vm.ips").unwrap();
    let raw: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/fixtures/pve/qga_network_get_interfaces_schema_sample.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let data = crate::views::normalize(ips.view, &raw, None).unwrap();
    assert_eq!(data[1]["ipv6"][0], "fe80::be24:11ff:fe5a:64");
    check(ips, &doc(ips, data.clone()));
    let v = jsonschema::validator_for(&output_schema(ips)).unwrap();
    let mut wrong = data;
    wrong[0]["ipv4"] = json!("127.0.0.1");
    assert!(
        !v.is_valid(&doc(ips, wrong)),
        "a string where a list belongs fits"
    );
    let rrd = catalog::find("node.rrd").unwrap();
    let data = crate::views::normalize(
        rrd.view,
        &fixture("https_api_node_rrddata_pve9_capture.json"),
        None,
    )
    .unwrap();
    check(rrd, &doc(rrd, data));
    let v = jsonschema::validator_for(&output_schema(rrd)).unwrap();
    assert!(
        !v.is_valid(&doc(rrd, json!([{"cpu": 0.5}]))),
        "a row without time fits"
    );
    let nextid = catalog::find("cluster.nextid").unwrap();
    // pvesh prints the next id as 148 or "148"; the view makes both the number.
    for raw in [json!(148), json!("148")] {
        let data = crate::views::normalize(nextid.view, &raw, None).unwrap();
        check(nextid, &doc(nextid, data));
    }
    // An action with nothing to do: no task, `changed: false`.
    let noop = json!({"changed": false, "vmid": 100, "node": "pve1", "status": "running",
        "message": "VM 100 is already running"});
    check(start, &doc(start, noop));
    let err = Error::usage("invalid VMID '99'");
    check(start, &failure_doc(&err, start.id, "h"));
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
    // JSON Schema counts integral numbers as integers, whatever their spelling.
    for integral in [json!(100.0), serde_json::from_str::<Value>("1e2").unwrap()] {
        let (raw, _) = raw_values(op, &obj(json!({"vmid": integral})), true).unwrap();
        assert_eq!(raw.get("vmid").map(String::as_str), Some("100"));
    }
    for bad in [
        json!({"vmid": 100.5}),
        json!({"vmid": 1e300}),
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

/// The precise remote kinds tell the model what to do next: a locked guest
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
    let shared = Shared::of(&expected);
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
    // The descriptions the lean tools share are said once, in the instructions.
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(!shared.sentence().is_empty());
    assert!(instructions.ends_with(&shared.sentence()), "{instructions}");
    io.get_mut()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();

    let list = rpc(&mut io, 2, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    // One tool per CLI path: a variant offered with its base is folded into the base's tool.
    let listed: Vec<&ToolSpec> = expected
        .iter()
        .filter(|s| folded_into(s, &expected).is_none())
        .collect();
    let lean = lean_tools(&expected, &shared);
    let mut want: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    // After the operations: the health check, which is no op.
    want.push(super::health::NAME);
    assert_eq!(names, want);
    assert!(!names.contains(&"vm_reboot") && !names.contains(&"vm_destroy"));
    for ((t, s), l) in tools.iter().zip(&listed).zip(&lean) {
        // The lean list (the default): the spec's lean form, the hints MCP's defaults leave out.
        assert_eq!(*t, serde_json::to_value(l).unwrap(), "{}", s.name);
        let folds = expected
            .iter()
            .any(|v| folded_into(v, &expected).is_some_and(|b| std::ptr::eq(b.op, s.op)));
        if !folds {
            assert_eq!(
                *t,
                serde_json::to_value(s.to_tool(false, &shared)).unwrap(),
                "{}",
                s.name
            );
        }
        let hint = |k: &str, default: bool| t["annotations"][k].as_bool().unwrap_or(default);
        assert!(
            !folds || hint("destructiveHint", true) || !s.destructive,
            "{}",
            s.name
        );
        if folds {
            continue;
        }
        assert_eq!(hint("readOnlyHint", false), s.read_only, "{}", s.name);
        if !s.read_only {
            assert_eq!(hint("destructiveHint", true), s.destructive, "{}", s.name);
            assert_eq!(hint("idempotentHint", false), s.idempotent, "{}", s.name);
        }
        // Left out: every tool reads as reaching beyond the host, the careful reading.
        assert!(
            t["annotations"].get("openWorldHint").is_none(),
            "{}",
            s.name
        );
        assert!(t.get("outputSchema").is_none(), "{}", s.name);
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
fn every_tool_takes_an_approval_as_the_host_may_ask_for_one() {
    let destroy = super::schema::input_schema(&crate::catalog::ops::VM_DESTROY, true);
    assert_eq!(destroy["properties"]["approval"]["type"], "string");
    // A host policy may mark a read `approve` too.
    let list = super::schema::input_schema(&crate::catalog::ops::VM_LIST, false);
    assert_eq!(list["properties"]["approval"]["type"], "string");
    let sig = "-----BEGIN SSH SIGNATURE-----\nx\n-----END SSH SIGNATURE-----\n";
    for op in [
        &crate::catalog::ops::VM_START,
        &crate::catalog::ops::VM_CONFIG,
    ] {
        let args = json!({"vmid": 100, "approval": sig});
        let (inv, _) = super::args::invocation(op, args.as_object().unwrap(), false).unwrap();
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
    }
    let bad = json!({"vmid": 100, "approval": 5});
    assert!(
        super::args::invocation(
            &crate::catalog::ops::VM_START,
            bad.as_object().unwrap(),
            false
        )
        .is_err()
    );
}

#[test]
fn an_approval_request_is_relayed_at_the_top_of_the_result() {
    use crate::base::gate_protocol::{ApprovalRequest, Refusal, RefusalKind};
    let mut r = Refusal::new(
        RefusalKind::ApprovalRequired,
        "vm.destroy needs a signed approval",
    );
    r.approval_request = Some(ApprovalRequest {
        statement: "pxagent-approval v1\nhost: pve1\nop: vm.destroy\n".into(),
        expires: "2026-01-01T00:10:00Z".into(),
        sign_with: vec!["pxagent approve --key ~/.ssh/id_ed25519 FILE".into()],
    });
    let err = Error::Host(Box::new(r));
    let doc = failure_doc(&err, "vm.destroy", "h");
    let text = doc["approval_request"].as_str().unwrap();
    assert!(text.contains("op: vm.destroy"), "{text}");
    assert!(text.contains("pxagent approve --key"), "{text}");
    assert!(text.contains("2026-01-01T00:10:00Z"), "{text}");
    assert_eq!(doc["error"]["kind"], "approval_required");
    let v = jsonschema::validator_for(&output_schema(&crate::catalog::ops::VM_DESTROY)).unwrap();
    assert!(v.is_valid(&doc));
}

/// A server over an in-memory pipe, initialized with `version`; nothing listens on port 9, so
/// only calls refused before any connection can be made.
async fn session(
    version: &str,
) -> (
    tokio::io::BufReader<tokio::io::DuplexStream>,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::AsyncWriteExt;
    let target = Target::new("127.0.0.1", 9, "zen-agent");
    let server = Server::new(Policy::default(), Profile::Full, target);
    let (server_io, client_io) = tokio::io::duplex(1 << 22);
    let cancels = server.cancels.clone();
    let running = tokio::spawn(async move {
        let (r, w) = tokio::io::split(server_io);
        let service = server
            .serve(LineTransport::new(r, w, cancels))
            .await
            .unwrap();
        service.waiting().await.unwrap();
    });
    let mut io = tokio::io::BufReader::new(client_io);
    let init = rpc(
        &mut io,
        1,
        "initialize",
        json!({"protocolVersion": version, "capabilities": {},
               "clientInfo": {"name": "test", "version": "0"}}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], version, "{init}");
    io.get_mut()
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    (io, running)
}

/// Send a raw line and read the next answer.
async fn raw(io: &mut tokio::io::BufReader<tokio::io::DuplexStream>, line: &[u8]) -> String {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    io.get_mut().write_all(line).await.unwrap();
    let mut answer = String::new();
    assert!(
        io.read_line(&mut answer).await.unwrap() > 0,
        "server hung up"
    );
    answer
}

#[tokio::test]
async fn argument_errors_are_results_since_2025_11_25_and_protocol_errors_before() {
    let bad_vmid = json!({"name": "vm_status", "arguments": {"vmid": 99}});
    // 2025-11-25 (SEP-1303): a tool result with isError and the structured error.
    let (mut io, running) = session("2025-11-25").await;
    let r = rpc(&mut io, 2, "tools/call", bad_vmid.clone()).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let doc = &r["result"]["structuredContent"];
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["error"]["kind"], "invalid_input");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("VMID"),
        "{doc}"
    );
    // The first text block is the structured content, serialized.
    let first: Value =
        serde_json::from_str(r["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&first, doc);
    assert!(
        r["result"]["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("Correct the arguments")
    );
    // An unknown tool stays a protocol error.
    let r = rpc(
        &mut io,
        3,
        "tools/call",
        json!({"name": "qm_monitor", "arguments": {}}),
    )
    .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A 2 MB bad argument comes back in a short reply.
    let big = "a".repeat(2 * 1024 * 1024);
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
               "params": {"name": "vm_status", "arguments": {"vmid": 100, "node": big}}})
    );
    let answer = raw(&mut io, line.as_bytes()).await;
    assert!(answer.len() < 8 * 1024, "{} bytes", answer.len());
    let r: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(r["id"], 4);
    assert_eq!(r["result"]["isError"], true);
    assert!(
        answer.contains("bytes in all)"),
        "the cut says how long it was: {answer}"
    );
    // A malformed line: -32700 with id null, and the session goes on.
    let r: Value =
        serde_json::from_str(&raw(&mut io, b"{\"jsonrpc\":\"2.0\",\"id\":5,\n").await).unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null);
    // Non-object arguments: -32602 under the request's id.
    let r: Value = serde_json::from_str(
        &raw(
            &mut io,
            b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"vm_status\",\"arguments\":[100]}}\n",
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(6), json!(-32602)),
        "{r}"
    );
    let r = rpc(&mut io, 7, "ping", json!({})).await;
    assert!(r["result"].is_object(), "{r}");
    drop(io);
    running.await.unwrap();

    // 2025-06-18: invalid params, with the same structured error as data.
    let (mut io, running) = session("2025-06-18").await;
    let r = rpc(&mut io, 2, "tools/call", bad_vmid).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["data"]["error"]["kind"], "invalid_input");
    drop(io);
    running.await.unwrap();
}

#[test]
fn lean_schemas_leave_out_helps_that_only_restate_the_name() {
    use super::schema::restates;
    assert!(restates("node", "the node"));
    assert!(restates("snapshot", "the snapshot's name"));
    assert!(restates("storage", "the storage id"));
    assert!(restates("ports", "its ports"));
    assert!(!restates("upid", "the task's UPID"));
    assert!(!restates("storage", "the target storage"));
    assert!(!restates(
        "purge",
        "also remove the guest from backup jobs, replication and HA"
    ));
}

/// The default (lean) tool list of every operation fits in 40 KB, the compact one
/// in 8 KB, and the full one still carries every output schema.
#[test]
fn the_lean_list_fits_in_40_kb_and_the_compact_one_in_8() {
    let specs = tool_specs(&Policy::default(), Profile::Full);
    let shared = Shared::of(&specs);
    let size = |full: bool| {
        let tools: Vec<Value> = match full {
            true => specs
                .iter()
                .map(|s| serde_json::to_value(s.to_tool(true, &shared)).unwrap())
                .collect(),
            false => lean_tools(&specs, &shared)
                .iter()
                .map(|t| serde_json::to_value(t).unwrap())
                .collect(),
        };
        serde_json::to_string(&json!({ "tools": tools }))
            .unwrap()
            .len()
    };
    // On failure, what each tool costs, largest first: where to make room.
    let each = || {
        let mut v: Vec<(usize, String)> = specs
            .iter()
            .map(|s| {
                let t = serde_json::to_string(&s.to_tool(false, &shared)).unwrap();
                (t.len(), s.name.clone())
            })
            .collect();
        v.sort_by(|a, b| b.cmp(a));
        if std::env::var_os("PXAGENT_LEAN_DUMP").is_some() {
            for s in &specs {
                eprintln!(
                    "{}",
                    serde_json::to_string(&s.to_tool(false, &shared)).unwrap()
                );
            }
        }
        v.iter()
            .map(|(n, t)| format!("{t} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    assert!(
        size(false) <= 40 * 1024,
        "lean: {} bytes; per tool: {}",
        size(false),
        each()
    );
    assert!(size(true) > 4 * size(false), "full: {} bytes", size(true));
    let compact = serde_json::to_string(&json!({ "tools": super::compact::tools() }))
        .unwrap()
        .len();
    assert!(compact <= 8 * 1024, "compact: {compact} bytes");
}

/// The lean list has one tool per CLI path, as the CLI has one command: each variant is folded
/// into its base's tool (its arguments, its phrase), and a call of the base's tool with the
/// variant's values runs the variant; every op stays callable.
#[test]
fn variants_fold_into_their_base_tool_and_their_values_choose_them() {
    use crate::catalog::ops;
    let specs = tool_specs(&Policy::default(), Profile::Full);
    let shared = Shared::of(&specs);
    let lean: Vec<Value> = lean_tools(&specs, &shared)
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    let tool = |name: &str| lean.iter().find(|t| t["name"] == name).cloned();
    for variant in [
        "vm_snapshot_vmstate",
        "backup_restore_ct",
        "backup_restore_overwrite",
        "backup_restore_ct_overwrite",
        "storage_set_mountpoint",
        "vm_create_image",
    ] {
        assert!(tool(variant).is_none(), "{variant} is listed");
    }
    let snap = tool("vm_snapshot").unwrap();
    assert_eq!(
        snap["inputSchema"]["properties"]["vmstate"]["type"],
        "boolean"
    );
    let d = snap["description"].as_str().unwrap();
    assert!(
        d.contains("With vmstate: true: take a snapshot of a VM including its RAM. Confirm: `yes vmstate <vmid> <snapshot>`."),
        "{d}"
    );
    // Folded hints are the careful ones: a variant that destroys makes the tool destructive.
    assert!(
        snap["annotations"].get("destructiveHint").is_none(),
        "{snap}"
    );
    let restore = tool("backup_restore").unwrap();
    assert_eq!(
        restore["inputSchema"]["required"],
        json!(["archive", "vmid"])
    );
    assert_eq!(
        restore["inputSchema"]["properties"]["force"],
        json!({"type": "boolean"})
    );
    assert!(
        restore["inputSchema"]["properties"]["archive"]
            .get("allOf")
            .is_none()
    );
    let create = tool("vm_create").unwrap();
    assert_eq!(create["inputSchema"]["required"], json!(["name"]));
    assert!(create["inputSchema"]["properties"]["image"].is_object());
    // The values choose, as on the command line.
    let args = |v: Value| v.as_object().unwrap().clone();
    let lxc = "local:backup/vzdump-lxc-200-2026_11_01-02_00_00.tar.zst";
    let qemu = "local:backup/vzdump-qemu-100-2026_11_01-02_00_00.vma.zst";
    for (op, a, want) in [
        (
            &ops::VM_SNAPSHOT,
            json!({"vmid": 100, "snapshot": "s1"}),
            &ops::VM_SNAPSHOT,
        ),
        (
            &ops::VM_SNAPSHOT,
            json!({"vmid": 100, "snapshot": "s1", "vmstate": true}),
            &ops::VM_SNAPSHOT_VMSTATE,
        ),
        (
            &ops::VM_SNAPSHOT,
            json!({"vmid": 100, "snapshot": "s1", "vmstate": false}),
            &ops::VM_SNAPSHOT,
        ),
        (
            &ops::BACKUP_RESTORE,
            json!({"archive": qemu, "vmid": 150}),
            &ops::BACKUP_RESTORE,
        ),
        (
            &ops::BACKUP_RESTORE,
            json!({"archive": lxc, "vmid": 250}),
            &ops::BACKUP_RESTORE_CT,
        ),
        (
            &ops::BACKUP_RESTORE,
            json!({"archive": qemu, "vmid": 100, "force": true}),
            &ops::BACKUP_RESTORE_OVERWRITE,
        ),
        (
            &ops::BACKUP_RESTORE,
            json!({"archive": lxc, "vmid": 200, "force": true}),
            &ops::BACKUP_RESTORE_CT_OVERWRITE,
        ),
        (
            &ops::VM_CREATE,
            json!({"name": "a", "image": "local:import/d.qcow2"}),
            &ops::VM_CREATE_IMAGE,
        ),
        (
            &ops::STORAGE_SET,
            json!({"storage": "s", "is_mountpoint": "yes"}),
            &ops::STORAGE_SET_MOUNTPOINT,
        ),
        (
            &ops::STORAGE_SET,
            json!({"storage": "s", "is_mountpoint": "no"}),
            &ops::STORAGE_SET,
        ),
        // A variant's own tool, and an op with no variants, are themselves.
        (
            &ops::VM_SNAPSHOT_VMSTATE,
            json!({"vmid": 100}),
            &ops::VM_SNAPSHOT_VMSTATE,
        ),
        (
            &ops::VM_START,
            json!({"vmid": 100, "vmstate": true}),
            &ops::VM_START,
        ),
    ] {
        assert_eq!(route(op, &args(a.clone())).id, want.id, "{} {a}", op.id);
    }
    // Every op is listed or folded into a listed base.
    for s in &specs {
        let listed = tool(&s.name).is_some();
        let folded = folded_into(s, &specs).is_some_and(|b| tool(&b.name).is_some());
        assert!(listed != folded, "{}", s.name);
    }
}

/// Each op's documented example, in the form its help and description give it (not the wire
/// form: `10.0.0.5/24`, a plain OpenSSH key, a date), passes its own tool's schema, and what
/// the schema takes the server takes. Every parameter is tried, options included, with other
/// given forms each kind's description names.
#[test]
fn documented_examples_pass_their_own_schema() {
    let more: &[(Kind, &[&str])] = &[
        (
            Kind::IpConfig,
            &["dhcp", "10.0.0.5/24", "192.168.1.20/16,gw=192.168.0.1"],
        ),
        (
            Kind::Epoch,
            &["1767225600", "2026-01-02", "2026-01-02T03:04:05Z"],
        ),
        (
            Kind::SshKeys,
            &["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBRQPGL2CEQuW0392R+C9lGvfVuz1GCljUYKWbWiGOiw"],
        ),
        (Kind::Nameservers, &["10.0.0.1,1.1.1.1"]),
    ];
    let mut tried = 0;
    for op in OPS.iter().filter(|o| !o.is_step()) {
        let spec = tool_spec(op, op.confirm.is_some());
        let v = jsonschema::validator_for(&spec.input_schema).unwrap();
        let base = catalog::example_values(op);
        for p in op.params {
            // A parameter that selects this variant keeps the variant's example.
            let selects = op.select.iter().any(|s| match s {
                catalog::Select::Flag(f) => *f == p.name,
                catalog::Select::Contains(n, _, _) => *n == p.name,
            });
            let mut given = vec![match selects {
                true => base[p.name].clone(),
                false => op.example_of(p.name, p.kind).to_string(),
            }];
            for (k, forms) in more {
                if *k == p.kind {
                    given.extend(forms.iter().map(|s| s.to_string()));
                }
            }
            for value in given {
                let mut raw = base.clone();
                raw.insert(p.name, value.clone());
                let args = as_args(op, &raw);
                let doc = Value::Object(args.clone());
                let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
                assert!(
                    errors.is_empty(),
                    "{} {}={value}: {errors:?}",
                    op.id,
                    p.name
                );
                invocation(op, &args, op.confirm.is_some())
                    .unwrap_or_else(|e| panic!("{} {}={value}: {e}", op.id, p.name));
                tried += 1;
            }
        }
    }
    assert!(tried > 300, "{tried}");
    // The forms the wire takes are not what a caller is asked for.
    let ci = OPS.iter().find(|o| o.id == "vm.create-image").unwrap();
    let schema = tool_spec(ci, false).input_schema;
    let ip = &schema["properties"]["ip"];
    let re = regex::Regex::new(ip["pattern"].as_str().unwrap()).unwrap();
    assert!(re.is_match("10.0.0.5/24,gw=10.0.0.1") && re.is_match("dhcp"));
    assert!(!re.is_match("10.0.0.5") && !re.is_match("ip=10.0.0.5/24;x"));
    assert!(schema["properties"]["sshkeys"].get("pattern").is_none());
}
