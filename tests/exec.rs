//! Live tests for commands inside guests against the sandbox host: real sshd, real sudo with a
//! sudoers file these tests render (`--ct-exec 200-299`), the PVE simulator's guest agent and `pct
//! exec`, which run the guest commands for real in a sandbox account. `scripts/test.sh` brings the
//! bed up and exports its `PXAGENT_*` variables; without them every test here FAILS with a message
//! (never skips).
//!
//! Every test holds the one host [`lock`] (they change the sudoers file and the simulator's
//! knobs) and puts back what it changed. Each runs pxagent in its own [`Home`], so rate-limit
//! counters start empty.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::{Home, SudoersSwap, ct_exec_bed, lock, on_bed, sim};

#[test]
fn vm_exec_returns_exit_code_and_output_from_any_node() {
    let _s = ct_exec_bed();
    let e = Home::new();
    let d = e
        .on_bed(&["-o", "json", "vm", "exec", "100", "--", "uname", "-a"])
        .data();
    assert_eq!(d["exitcode"], 0);
    assert!(d["stdout"].as_str().unwrap().starts_with("Linux"), "{d}");
    assert_eq!(d["via"], "guest-agent");
    assert_eq!(d["out_truncated"], false);
    // A failing guest command: pxagent exits 0, the JSON carries the guest's code.
    let r = e.on_bed(&[
        "-o",
        "json",
        "vm",
        "exec",
        "101",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    let d = r.data();
    assert_eq!(d["exitcode"], 3);
    assert_eq!(d["stdout"], "out\n");
    assert_eq!(d["stderr"], "err\n");
    assert_eq!(
        d["node"], "pve2",
        "VM 101 lives on pve2: pvesh reaches it from pve1"
    );
    // Human mode: output passed through, the exit code named on stderr.
    let r = e.on_bed(&["vm", "exec", "100", "--", "sh", "-c", "echo hi; exit 5"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout, "hi\n");
    assert!(r.stderr.contains("the command exited 5"), "{}", r.stderr);
    // Words that look like options or shell reach the guest as an argv, untouched.
    let d = e
        .on_bed(&[
            "-o", "json", "vm", "exec", "100", "--", "printf", "%s|", "-la", "a; b", "$(id)",
        ])
        .data();
    assert_eq!(d["stdout"], "-la|a; b|$(id)|");
    // stdin through the agent's input-data.
    let d = e
        .px()
        .bed()
        .args([
            "-o", "json", "vm", "exec", "100", "--stdin", "-", "--", "sort",
        ])
        .stdin(b"b\na\n")
        .run()
        .data();
    assert_eq!(d["stdout"], "a\nb\n");
}

#[test]
fn truncation_flags_come_back() {
    let _s = ct_exec_bed();
    let before = sim(&["sandbox"]);
    let limit = before
        .split_whitespace()
        .find_map(|w| w.strip_prefix("out-limit="))
        .unwrap()
        .to_string();
    sim(&["sandbox", "out-limit=100"]);
    let r = Home::new().on_bed(&[
        "-o",
        "json",
        "vm",
        "exec",
        "100",
        "--",
        "head",
        "-c",
        "1000",
        "/dev/zero",
    ]);
    sim(&["sandbox", &format!("out-limit={limit}")]);
    let d = r.data();
    assert_eq!(d["out_truncated"], true, "{d}");
    assert_eq!(d["err_truncated"], false);
}

#[test]
fn stopped_vm_missing_agent_dead_agent_and_timeout_have_their_own_errors() {
    let _s = ct_exec_bed();
    let e = Home::new();
    let r = e.on_bed(&["-o", "json", "vm", "exec", "9000", "--", "true"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("VM 9000 is not running")
    );
    let r = e.on_bed(&["-o", "json", "vm", "exec", "102", "--", "true"]);
    assert_eq!(r.code, 1);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no guest agent configured"),
        "{}",
        r.stdout
    );
    sim(&["qga", "100", "down"]);
    let r = e.on_bed(&["-o", "json", "vm", "exec", "100", "--", "true"]);
    sim(&["qga", "100", "up"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("does not answer"), "{}", r.stdout);
    let r = e.on_bed(&[
        "-o",
        "json",
        "--timeout",
        "2",
        "vm",
        "exec",
        "100",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(r.code, 7, "{}", r.stdout);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("left running"), "{msg}");
    // The process it names is still there.
    let pid = msg
        .split("process ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap();
    let d = e
        .on_bed(&["-o", "json", "vm", "exec-status", "100", pid])
        .data();
    assert_eq!(d["exited"], false, "{d}");
}

#[test]
fn ct_exec_returns_exit_code_output_and_stdin() {
    let _s = ct_exec_bed();
    let e = Home::new();
    let d = e
        .on_bed(&[
            "-o",
            "json",
            "ct",
            "exec",
            "200",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 4",
        ])
        .data();
    assert_eq!(
        (d["exitcode"].clone(), d["via"].clone()),
        (4.into(), "pct-exec".into())
    );
    assert_eq!(d["stdout"], "out\n");
    assert_eq!(d["stderr"], "err\n");
    let d = e
        .px()
        .bed()
        .args([
            "-o", "json", "ct", "exec", "200", "--stdin", "-", "--", "tr", "a-z", "A-Z",
        ])
        .stdin(b"hello\n")
        .run()
        .data();
    assert_eq!(d["stdout"], "HELLO\n");
    // pct is local: a container on another node is named, nothing is run.
    let r = e.on_bed(&["-o", "json", "ct", "exec", "201", "--", "true"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.contains("is on node pve2"), "{}", r.stdout);
    // A privileged container is refused unless the policy allows it.
    let r = e.on_bed(&["-o", "json", "ct", "exec", "202", "--", "true"]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert!(r.stdout.contains("privileged"), "{}", r.stdout);
    let policy = e.write("p.yaml", b"allow_privileged_ct_exec: true\n");
    let r = e.on_bed(&[
        "-o", "json", "--policy", &policy, "ct", "exec", "202", "--", "true",
    ]);
    assert!(
        r.stdout.contains("not running"),
        "past the policy, 202 is stopped: {}",
        r.stdout
    );
}

#[test]
fn ct_exec_without_ct_exec_in_the_render_is_refused_by_sudo() {
    let _g = lock();
    let _swap = SudoersSwap::render(&[]);
    let r = Home::new().on_bed(&["-o", "json", "ct", "exec", "200", "--", "true"]);
    assert_eq!(r.code, 9, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "sudo_refused");
    assert!(r.stdout.contains("--ct-exec 200"), "{}", r.stdout);
}

#[test]
fn push_run_pull_round_trips_files_byte_for_byte() {
    let _s = ct_exec_bed();
    let e = Home::new();
    // Every byte value; small enough that file-read's JSON (about 2 bytes per byte) stays under
    // 64 KiB: sudo 1.9.13 with log_output drops what a slow reader has not taken of a larger
    // output once the command exited.
    let binary: Vec<u8> = (0..=255u8).cycle().take(20_000).collect();
    e.write("bin.dat", &binary);
    e.write("empty.dat", b"");
    e.write("in.txt", b"c\nb\na\n");
    for (kind, id) in [("vm", "100"), ("ct", "200")] {
        let tag = format!("{kind}{id}");
        let out = format!("{tag}-out.txt");
        let bin = format!("{tag}-bin.out");
        let empty = format!("{tag}-empty.out");
        let r = e.on_bed(&[
            "-o",
            "json",
            kind,
            "exec",
            id,
            "--push",
            "in.txt:/tmp/in.txt",
            "--push",
            "bin.dat:/tmp/bin.dat",
            "--push",
            "empty.dat:/tmp/empty.dat",
            "--pull",
            &format!("/tmp/out.txt:{out}"),
            "--pull",
            &format!("/tmp/bin.dat:{bin}"),
            "--pull",
            &format!("/tmp/empty.dat:{empty}"),
            "--",
            "sort",
            "-o",
            "/tmp/out.txt",
            "/tmp/in.txt",
        ]);
        let d = r.data();
        assert_eq!(d["exitcode"], 0, "{d}");
        assert_eq!(e.read(&out), b"a\nb\nc\n", "{kind}");
        assert_eq!(e.read(&bin), binary, "{kind}");
        assert_eq!(e.read(&empty), b"", "{kind}");
        assert_eq!(d["pulled"].as_array().unwrap().len(), 3);
        // Never over an existing file without --force (refused before sending).
        let r = e.on_bed(&[
            "-o",
            "json",
            kind,
            "exec",
            id,
            "--pull",
            &format!("/tmp/out.txt:{out}"),
            "--",
            "true",
        ]);
        assert_eq!(r.code, 2, "{}", r.stdout);
        assert!(r.stdout.contains("--force"));
        let r = e.on_bed(&[
            "-o",
            "json",
            kind,
            "exec",
            id,
            "--force",
            "--pull",
            &format!("/tmp/in.txt:{out}"),
            "--",
            "true",
        ]);
        assert_eq!(r.code, 0, "{}", r.stdout);
        assert_eq!(e.read(&out), b"c\nb\na\n");
    }
    // Over the guest agent's file-write limit: refused before sending, the limit named.
    e.write("big.dat", &vec![1u8; 46_081]);
    let r = e.on_bed(&[
        "-o",
        "json",
        "vm",
        "exec",
        "100",
        "--push",
        "big.dat:/tmp/big.dat",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.contains("46080"), "{}", r.stdout);
    // Guest paths are validated.
    let r = e.on_bed(&[
        "vm",
        "exec",
        "100",
        "--push",
        "in.txt:/tmp/../etc/x",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn the_allowlist_admits_the_example_shapes_and_refuses_the_rest() {
    let _s = ct_exec_bed();
    let e = Home::new();
    let policy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies/diagnostics.yaml"
    );
    // One fresh minute for the whole count, so the window cannot roll over mid-test.
    wait_for_a_fresh_minute();
    let ok = e.on_bed(&[
        "-o", "json", "--policy", policy, "vm", "exec", "100", "--", "uname", "-a",
    ]);
    assert_eq!(ok.data()["exitcode"], 0);
    for bad in [
        &["uname", "-a;", "rm", "-rf", "/"][..],
        &["uname", "-a", ";", "id"],
        &["uname", "$(id)"],
        &["uname", "-a", "extra"],
        &["sh", "-c", "uname -a; id"],
    ] {
        let mut args = vec!["-o", "json", "--policy", policy, "vm", "exec", "100", "--"];
        args.extend_from_slice(bad);
        let r = e.on_bed(&args);
        assert_eq!(r.code, 3, "{bad:?}: {}", r.stdout);
        assert!(
            r.stdout.contains("not one of the allowed commands"),
            "{}",
            r.stdout
        );
    }
    // The refusals used no quota: nine more calls fit in the minute's ten.
    for i in 1..10 {
        let r = e.on_bed(&["--policy", policy, "vm", "exec", "100", "--", "uptime"]);
        assert_eq!(r.code, 0, "call {}: {}", i + 1, r.stderr);
    }
    let r = e.on_bed(&[
        "-o", "json", "--policy", policy, "vm", "exec", "100", "--", "uptime",
    ]);
    assert_eq!(r.code, 8, "the eleventh call within a minute: {}", r.stdout);
    assert!(r.stdout.contains("resets in"), "{}", r.stdout);
    // How long to wait, as a field an agent can use.
    let wait = r.json()["error"]["retry_after"].as_u64().unwrap();
    assert!((1..=60).contains(&wait), "{}", r.stdout);
}

fn wait_for_a_fresh_minute() {
    let s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        % 60;
    if s > 30 {
        std::thread::sleep(std::time::Duration::from_secs(61 - s));
    }
}

#[test]
fn twenty_concurrent_processes_with_max_ten_admit_exactly_ten() {
    let _g = lock();
    let e = Home::new();
    let policy = e.write(
        "gw.json",
        br#"{"version":"1","default":"deny","tools":{"vm_exec":{"limits":[{"counter":"vm_exec_rate","window":"day","max":10,"scope":"grant"}]}}}"#,
    );
    // Admitted calls go on to connect; a closed port makes them fail fast (exit 7) without
    // twenty SSH logins, so what is counted is the limiter alone, across processes.
    let children: Vec<_> = (0..20)
        .map(|_| {
            e.px()
                .args([
                    "-H",
                    "127.0.0.1",
                    "-p",
                    "1",
                    "--policy",
                    &policy,
                    "vm",
                    "exec",
                    "100",
                    "--",
                    "true",
                ])
                .spawn()
        })
        .collect();
    let outs: Vec<_> = children.into_iter().map(|c| c.wait()).collect();
    let refused: Vec<_> = outs.iter().filter(|o| o.code == 8).collect();
    assert_eq!(
        refused.len(),
        10,
        "{:?}",
        outs.iter().map(|o| o.code).collect::<Vec<_>>()
    );
    assert!(outs.iter().all(|o| matches!(o.code, 7 | 8)));
    assert!(refused[0].stderr.contains("resets in"));
}

#[test]
fn the_gateway_policy_loads_and_default_deny_refuses_unlisted_ops() {
    let _s = ct_exec_bed();
    let e = Home::new();
    let gw = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/policies/gateway-vm-exec.json"
    );
    let r = e.on_bed(&[
        "-o", "json", "--policy", gw, "vm", "exec", "100", "--", "true",
    ]);
    assert_eq!(r.data()["exitcode"], 0);
    // An op the gateway did not list: refused before sending (PXAGENT_POLICY is --policy's
    // environment form, read by every command).
    let r = e
        .px()
        .bed()
        .args(["-o", "json", "vm", "start", "100"])
        .env("PXAGENT_POLICY", gw)
        .run();
    assert_eq!(r.code, 3, "{}", r.stdout);
    assert_eq!(r.json()["error"]["kind"], "policy_refused");
    // The same through the config's policy_file key.
    e.write("config.yaml", format!("policy_file: {gw}\n").as_bytes());
    let r = e.on_bed(&[
        "-o",
        "json",
        "--config",
        "config.yaml",
        "ct",
        "start",
        "200",
    ]);
    assert_eq!(r.code, 3, "{}", r.stdout);
    // Unknown fields and versions are errors naming them.
    let bad = e.write(
        "bad.json",
        br#"{"version":"1","tools":{"vm_exec":{"limits":[],"quota":5}}}"#,
    );
    let r = e.on_bed(&[
        "-o", "json", "--policy", &bad, "vm", "exec", "100", "--", "true",
    ]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.contains("quota"), "{}", r.stdout);
    let bad = e.write("v2.json", br#"{"version":"2","tools":{}}"#);
    let r = e.on_bed(&[
        "-o", "json", "--policy", &bad, "vm", "exec", "100", "--", "true",
    ]);
    assert_eq!(r.code, 2);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("unknown version \"2\""), "{msg}");
}

/// A push into a guest directory that does not exist is `not_found`, names the command that
/// makes it, and runs nothing; in a VM and in a container.
#[test]
fn a_push_into_a_missing_directory_is_not_found_and_names_the_fix() {
    let (_sudoers, _g) = ct_exec_bed();
    let home = Home::new();
    let local = home.write("p.txt", b"hi\n");
    let spec = format!("{local}:/nonexistent-dir/sub/p.txt");
    for (kind, id) in [("vm", "100"), ("ct", "200")] {
        let r = home.on_bed(&[
            kind,
            "exec",
            id,
            "--push",
            &spec,
            "-o",
            "json",
            "--",
            "cat",
            "/nonexistent-dir/sub/p.txt",
        ]);
        assert_eq!(r.code, 1, "{kind}: {}\n{}", r.stdout, r.stderr);
        let e = &r.json()["error"];
        assert_eq!(e["kind"], "not_found", "{kind}: {e}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("pass --mkdir to make it first")
                && msg.contains(&format!(
                    "pxagent {kind} exec {id} -- mkdir -p /nonexistent-dir/sub"
                )),
            "{kind}: {msg}"
        );
    }
}

/// `--mkdir` makes a push's guest directory first, as a guest command: the
/// file arrives and the command reads it, in a VM and in a container; the dry run lists the
/// `mkdir -p` step; a command allowlist without mkdir refuses it before anything is sent.
#[test]
fn mkdir_makes_the_push_directory_first() {
    let (_sudoers, _g) = ct_exec_bed();
    let home = Home::new();
    let local = home.write("p.txt", b"made\n");
    for (kind, id) in [("vm", "100"), ("ct", "200")] {
        let dir = format!("/tmp/pxagent-mkdir-{}", std::process::id());
        let file = format!("{dir}/deep/p.txt");
        let spec = format!("{local}:{file}");
        let exec = |more: &[&str]| {
            let mut args = vec![kind, "exec", id, "--mkdir", "--push", &spec, "-o", "json"];
            args.extend_from_slice(more);
            home.on_bed(&args)
        };
        let dry = exec(&["--dry-run", "--", "cat", &file]);
        assert_eq!(dry.code, 0, "{kind}: {}\n{}", dry.stdout, dry.stderr);
        assert_eq!(
            dry.json()["data"]["transfers"][0],
            format!("mkdir -p {dir}/deep"),
            "{kind}: {}",
            dry.stdout
        );
        let r = exec(&["--", "cat", &file]);
        assert_eq!(r.code, 0, "{kind}: {}\n{}", r.stdout, r.stderr);
        let d = &r.json()["data"];
        assert_eq!(d["stdout"], "made\n", "{kind}: {d}");
        assert_eq!(d["pushed"][0]["guest"], file.as_str(), "{kind}: {d}");
        // Again: the directory exists now, and mkdir -p is content with that.
        let again = exec(&["--", "true"]);
        assert_eq!(again.code, 0, "{kind}: {}\n{}", again.stdout, again.stderr);
    }
    let policy = home.write(
        "only-cat.yaml",
        b"ops:\n  vm.exec:\n    commands: [[cat, \"...\"]]\n    push: [\"/tmp/**\"]\n  ct.exec:\n    commands: [[cat, \"...\"]]\n    push: [\"/tmp/**\"]\n",
    );
    for (kind, id) in [("vm", "100"), ("ct", "200")] {
        let spec = format!("{local}:/tmp/new-dir/p.txt");
        let r = home.on_bed(&[
            "--policy",
            &policy,
            kind,
            "exec",
            id,
            "--mkdir",
            "--push",
            &spec,
            "-o",
            "json",
            "--",
            "cat",
            "/tmp/new-dir/p.txt",
        ]);
        assert_eq!(r.code, 3, "{kind}: {}\n{}", r.stdout, r.stderr);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("/bin/mkdir -p /tmp/new-dir"), "{kind}: {msg}");
    }
}

/// `--mkdir` without a push is a usage error, nothing sent.
#[test]
fn mkdir_without_a_push_is_a_usage_error() {
    let r = on_bed(&["-o", "json", "vm", "exec", "100", "--mkdir", "--", "true"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--mkdir makes the directories")
    );
}
