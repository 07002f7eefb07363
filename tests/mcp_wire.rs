//! `pxagent mcp`'s stdio layer through the real binary, without a host: what a client that is not a
//! well-behaved SDK gets. Nothing listens on the port the server is given; no call here needs the
//! host.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{Home, bin, isolate};

fn server(home: &Home) -> std::process::Child {
    let mut c = Command::new(bin());
    isolate(&mut c, home.path())
        .args(["-H", "zen-agent@127.0.0.1", "-p", "9", "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("start pxagent mcp")
}

#[test]
fn eof_before_initialize_exits_0_quietly() {
    let home = Home::new();
    let mut child = server(&home);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn bad_lines_get_json_rpc_errors_and_the_session_goes_on() {
    let home = Home::new();
    let mut child = server(&home);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut raw = |line: &str| -> String {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut got = String::new();
        stdout.read_line(&mut got).unwrap();
        got
    };
    let mut answer = |line: &str| -> Value {
        let got = raw(line);
        serde_json::from_str(&got).unwrap_or_else(|e| panic!("{e}: {got}"))
    };
    let init = answer(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string(),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "pxagent");
    // A notification gets no answer, so the next answer is the parse error's.
    let parse = answer(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\"",
    );
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    assert_eq!(parse["id"], Value::Null);
    let array = answer(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"vm_status","arguments":[100]}}"#,
    );
    assert_eq!(array["id"], 3);
    assert_eq!(array["error"]["code"], -32602, "{array}");
    let invalid = answer(r#"{"jsonrpc":"2.0","id":4}"#);
    assert_eq!(invalid["id"], 4);
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    // A 5 MiB line: answered and skipped, under its id.
    let big = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "vm_status", "arguments": {"vmid": 100, "node": "n".repeat(5 << 20)}}});
    let long = answer(&big.to_string());
    assert_eq!(long["id"], 5);
    assert_eq!(long["error"]["code"], -32600, "{long}");
    assert!(
        long["error"]["message"]
            .as_str()
            .unwrap()
            .contains("4194304")
    );
    // A 2 MB bad argument: an isError result under 8 KiB.
    let two = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": {"name": "vm_status", "arguments": {"vmid": 100, "node": "n".repeat(2 << 20)}}});
    let r: Value = answer(&two.to_string());
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r.to_string().len() < 8 * 1024,
        "{} bytes",
        r.to_string().len()
    );
    let ping = answer(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    assert!(ping["result"].is_object(), "{ping}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // Every refused call left an audit record whose message is cut to a kibibyte.
    let audit = std::fs::read_to_string(home.audit_log()).unwrap();
    for line in audit.lines() {
        assert!(line.len() < 4096, "{} bytes: {}", line.len(), &line[..200]);
    }
}
