//! Black-box tests of the `pxagent` binary for local commands (no host needed): catalog,
//! sudoers render/lint, dry-run, bad input; and `pxagent::run` in-process. Each binary run has
//! an isolated environment (`support::px`) so a developer's PXAGENT_* settings or config never
//! leak in.

use serde_json::Value;

use crate::support::{Run, local, px};

fn fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A local command, whose output must be valid UTF-8.
fn run(args: &[&str]) -> Run {
    let r = local(args);
    r.assert_utf8();
    r
}

#[test]
fn catalog_json_lists_every_op_with_rule_and_argv() {
    let r = run(&["catalog", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["op"], "catalog");
    let ops = doc["data"].as_array().unwrap();
    assert_eq!(ops.len(), pxagent::catalog::OPS.len());
    let destroy = ops.iter().find(|o| o["id"] == "vm.destroy").unwrap();
    assert_eq!(destroy["risk"], "confirm");
    assert_eq!(destroy["profiles"], serde_json::json!(["full"]));
    assert_eq!(destroy["phrase"], "yes destroy {vmid}");
    assert_eq!(destroy["example_argv"][0], "/usr/bin/pvesh");
    assert!(
        destroy["sudoers_rule"]
            .as_str()
            .unwrap()
            .starts_with("/usr/bin/pvesh ^delete /nodes/")
    );
    for o in ops {
        for key in [
            "id",
            "usage",
            "risk",
            "profiles",
            "example_argv",
            "sudoers_rule",
        ] {
            assert!(!o[key].is_null(), "{} lacks {key}", o["id"]);
        }
    }
}

#[test]
fn catalog_table_is_readable() {
    let r = run(&["catalog"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("vm.start  [change; operator,full]"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("  sudoers: /usr/bin/pvesh ^create /nodes/")
    );
}

#[test]
fn dry_run_of_destroy_shows_argv_rule_and_phrase() {
    let r = run(&["vm", "destroy", "100", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("vm.destroy (risk: confirm)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "remote:   sudo -n /usr/bin/pvesh delete '/nodes/<node>/qemu/100' --output-format json"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("sudoers:  /usr/bin/pvesh ^delete /nodes/"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("needs the phrase `yes destroy 100`"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("nothing was sent"));

    let r = run(&[
        "vm",
        "destroy",
        "100",
        "--purge",
        "--node",
        "pve2",
        "--dry-run",
        "-o",
        "json",
    ]);
    let d = &r.json()["data"];
    assert_eq!(
        d["argv"],
        serde_json::json!([
            "sudo",
            "-n",
            "/usr/bin/pvesh",
            "delete",
            "/nodes/pve2/qemu/100",
            "--purge",
            "1",
            "--output-format",
            "json"
        ])
    );
    assert_eq!(d["phrase"], "yes destroy 100");
    assert_eq!(d["sent"], false);
    // The argv matches the rule it names.
    let rule = d["sudoers_rule"].as_str().unwrap();
    let re = regex::Regex::new(rule.split_once(' ').unwrap().1).unwrap();
    let joined: Vec<&str> = d["argv"].as_array().unwrap()[3..]
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(re.is_match(&joined.join(" ")));
}

#[test]
fn snapshot_with_vmstate_is_the_confirm_variant() {
    let r = run(&[
        "vm",
        "snapshot",
        "100",
        "before",
        "--vmstate",
        "--dry-run",
        "-o",
        "json",
    ]);
    let d = &r.json()["data"];
    assert_eq!(d["op"], "vm.snapshot-vmstate");
    assert_eq!(d["risk"], "confirm");
    assert_eq!(d["phrase"], "yes vmstate 100 before");
    let r = run(&[
        "vm",
        "snapshot",
        "100",
        "before",
        "--description",
        "pre upgrade",
        "--dry-run",
        "-o",
        "json",
    ]);
    let d = &r.json()["data"];
    assert_eq!(d["op"], "vm.snapshot");
    assert_eq!(d["phrase"], Value::Null);
}

#[test]
fn an_op_without_a_host_says_how_to_name_one() {
    let r = run(&["vm", "start", "100", "-o", "json"]);
    assert_eq!(r.code, 2);
    let doc = r.json();
    assert_eq!(doc["ok"], false);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("-H HOST"),
        "{doc}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2_with_nothing_on_stdout() {
    let cases: &[&[&str]] = &[
        &["sudoers", "render", "--profile", "admin"],
        &["sudoers", "render", "--vmids", "50-20"],
        &["sudoers", "render", "--vmids", "abc"],
        &["sudoers", "render", "--vmids", "300-200"],
        &["sudoers", "render", "--user", "x;rm -rf /"],
        &["sudoers", "render", "--user", "$(id)"],
        &["sudoers", "render", "--user", "root"],
        &["sudoers", "lint", "/nonexistent/sudoers"],
        &["vm", "start", "99"],
        &["vm", "start", "100; reboot"],
        &["vm", "snapshot", "100", "current"],
        &[
            "vm",
            "snapshot",
            "100",
            "ok-name",
            "--description",
            "x --vmstate 1",
        ],
        &["vm", "status", "100", "--node", "pve1/../x"],
        &["task", "status", "not-a-upid"],
        &["vm", "start", "100", "--bogus"],
        &["cluster", "resources", "--type", "lxc"],
        // Durations are bounded: above 24 hours, or past u64, is exit 2.
        &["vm", "status", "100", "--timeout", "18446744073709551615"],
        &["vm", "status", "100", "--timeout", "18446744073709551616"],
        &["vm", "status", "100", "--timeout", "86401"],
        &["vm", "status", "100", "--timeout", "0"],
        &[
            "task",
            "wait",
            "UPID:pve1:00001234:00005678:65000000:vzdump:100:root@pam:",
            "--timeout",
            "99999999999999999999999999",
        ],
        &["vm", "status", "100", "--persist", "25h"],
        &["vm", "status", "100", "--persist", "18446744073709551615s"],
    ];
    for args in cases {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stdout.is_empty(),
            "{args:?} wrote to stdout: {}",
            r.stdout
        );
        assert!(!r.stderr.trim().is_empty(), "{args:?}");
        if !args.contains(&"--bogus") {
            assert_eq!(r.stderr.trim().lines().count(), 1, "{args:?}: {}", r.stderr);
        }
    }
    // In JSON mode the same errors are one JSON document on stdout.
    let r = run(&["-o", "json", "vm", "start", "99"]);
    assert_eq!(r.code, 2);
    let doc = r.json();
    assert_eq!(doc["error"]["kind"], "invalid_input");
    let r = run(&["vm", "start", "100", "--bogus", "-o", "json"]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json()["ok"], false);
}

#[test]
fn the_checked_in_template_is_the_default_render() {
    let r = run(&["sudoers", "render"]);
    assert_eq!(r.code, 0);
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/templates/zen-agent-sudoers"
    ))
    .unwrap();
    if let Some((n, (a, b))) = r
        .stdout
        .lines()
        .zip(template.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        panic!(
            "templates/zen-agent-sudoers is stale at line {}: render has {a:?}, file has {b:?}; run `cargo run -q -- sudoers render > templates/zen-agent-sudoers`",
            n + 1
        );
    }
    assert_eq!(
        r.stdout.lines().count(),
        template.lines().count(),
        "templates/zen-agent-sudoers is stale (length)"
    );
    assert_eq!(r.stdout, template);
}

#[test]
fn render_then_lint_reports_no_errors() {
    for profile in ["readonly", "operator", "full"] {
        let rendered = run(&[
            "sudoers",
            "render",
            "--profile",
            profile,
            "--vmids",
            "100-199",
        ])
        .stdout;
        let out = px()
            .args(["sudoers", "lint", "-", "-o", "json"])
            .stdin(rendered)
            .run();
        let doc: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(out.code, 0, "{profile}: {doc}");
        assert_eq!(doc["data"]["errors"], 0, "{profile}: {doc}");
    }
}

#[test]
fn lint_flags_every_root_equivalent_line_of_the_published_template() {
    let path = fixtures().join("sudo/published.sudoers");
    let text = std::fs::read_to_string(&path).unwrap();
    let r = run(&["sudoers", "lint", path.to_str().unwrap(), "-o", "json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["ok"], false);
    let findings = doc["data"]["findings"].as_array().unwrap();
    let error_lines: Vec<u64> = findings
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| f["line"].as_u64().unwrap())
        .collect();
    // Root-equivalent: every `*` rule on a PVE tool or an escape binary, and the invalid
    // Defaults lines.
    let root_equivalent = [
        "qm *",
        "pct *",
        "pvesh *",
        "pvesm *",
        "vzdump *",
        "qmrestore *",
        "qemu-img *",
        "pveam *",
        "ha-manager *",
        "/find *",
        "journalctl *",
        "systemctl status *",
        "/ip *",
        "/mount *",
        "Defaults!zen-agent LOG_INPUT",
        "Defaults!zen-agent LOG_OUTPUT",
    ];
    for (i, line) in text.lines().enumerate() {
        if root_equivalent.iter().any(|p| line.contains(p)) {
            assert!(
                error_lines.contains(&(i as u64 + 1)),
                "line {} not flagged as error: {line}",
                i + 1
            );
        }
    }
    // Human output names the file and line.
    let r = run(&["sudoers", "lint", path.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout.contains("published.sudoers:1: error"),
        "{}",
        r.stdout
    );
}

/// `run()` keeps no global state: a second call in the same process works like the first.
/// In process its output is the test harness's own stdout, which nothing captures: so a
/// command of one short line (`version --client`), never the whole catalog.
#[test]
fn run_can_be_called_twice_in_one_process() {
    for call in ["first", "second"] {
        let code = pxagent::run(vec![
            "pxagent".into(),
            "version".into(),
            "--client".into(),
            "-o".into(),
            "json".into(),
        ]);
        assert_eq!(code, 0, "the {call} call");
    }
}

#[test]
fn a_dry_run_of_a_refused_op_is_the_same_refusal() {
    // Exit 3 and the policy's message, not a report that says "refused".
    let home = crate::support::Home::new();
    home.write("deny.yaml", b"ops:\n  vm.destroy: {action: deny, reason: \"not here\"}\n  vm.exec: {commands: [[uname]]}\n");
    let r = home
        .px()
        .args([
            "--policy",
            "deny.yaml",
            "-o",
            "json",
            "vm",
            "destroy",
            "100",
            "--dry-run",
        ])
        .run();
    assert_eq!(r.code, 3, "{}", r.stdout);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains("policy refuses vm.destroy on 100: not here"),
        "{msg}"
    );
    // A guest command outside the allowlist, and a push with no push paths: the same.
    let r = home
        .px()
        .args([
            "--policy",
            "deny.yaml",
            "vm",
            "exec",
            "100",
            "--dry-run",
            "--",
            "id",
        ])
        .run();
    assert_eq!(r.code, 3, "{}", r.stderr);
    home.write("f", b"x");
    let r = home
        .px()
        .args([
            "--policy",
            "deny.yaml",
            "vm",
            "exec",
            "100",
            "--dry-run",
            "--push",
            "f:/tmp/f",
            "--",
            "uname",
        ])
        .run();
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("lists no push paths"), "{}", r.stderr);
    // Allowed: still a report, exit 0.
    let r = home
        .px()
        .args([
            "--policy",
            "deny.yaml",
            "vm",
            "exec",
            "100",
            "--dry-run",
            "--",
            "uname",
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A protected tag cannot be known without the host: the report never says plainly
    // "allowed" for a change to a guest while a tag is protected.
    home.write("tags.yaml", b"protect: [keep]\n");
    let dry = |op: &[&str]| {
        let mut args = vec!["--policy", "tags.yaml", "-o", "json"];
        args.extend_from_slice(op);
        args.push("--dry-run");
        let r = home.px().args(args).run();
        assert_eq!(r.code, 0, "{op:?}: {}", r.stderr);
        r.json()["data"]["policy"].as_str().unwrap().to_string()
    };
    let stop = dry(&["vm", "stop", "100"]);
    assert!(
        stop.contains("unless the guest carries a protected tag"),
        "{stop}"
    );
    let read = dry(&["vm", "status", "100"]);
    assert_eq!(read, "allowed");
}

#[test]
fn a_failed_write_to_stdout_is_an_error_and_a_closed_pipe_is_quiet() {
    use std::process::{Command, Stdio};
    let home = crate::support::Home::new();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut cmd = Command::new(crate::support::bin());
    crate::support::isolate(&mut cmd, home.path());
    let out = cmd
        .args(["sudoers", "render"])
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(10));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write the output"));
    // A reader that stops early: no message, the command's own code.
    let mut cmd = Command::new(crate::support::bin());
    crate::support::isolate(&mut cmd, home.path());
    let mut child = cmd
        .args(["catalog"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_policy_flag_cannot_widen_the_configs_policy() {
    // The config says read_only; `--policy` allowing everything narrows, never widens (the dry run
    // is refused like the run would be, before anything is sent).
    let home = crate::support::Home::new();
    let cfg = home.config_dir().join("pxagent");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.yaml"), "policy:\n  read_only: true\n").unwrap();
    home.write("allow.yaml", b"ops:\n  \"*\": allow\n");
    for args in [
        vec![
            "--policy",
            "allow.yaml",
            "vm",
            "destroy",
            "100",
            "--dry-run",
        ],
        vec!["vm", "destroy", "100", "--dry-run"],
    ] {
        let r = home
            .px()
            .args(&args)
            .env("PXAGENT_POLICY", "allow.yaml")
            .run();
        assert_eq!(r.code, 3, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("read_only"), "{}", r.stderr);
    }
}

#[test]
fn downloads_from_inside_the_hosts_network_are_refused_before_sending() {
    // Exit 2 and nothing sent (port 1 would be exit 7 had it connected).
    for url in [
        "http://169.254.169.254/x.iso",
        "http://127.1/x.iso",
        "http://localhost/x.iso",
    ] {
        let r = local(&[
            "-H",
            "127.0.0.1",
            "-p",
            "1",
            "iso",
            "download",
            url,
            "--storage",
            "local",
        ]);
        assert_eq!(r.code, 2, "{url}: {}", r.stderr);
        assert!(r.stderr.contains("download_hosts"), "{}", r.stderr);
    }
}

#[test]
fn a_dry_run_and_the_audit_show_every_transfer() {
    let home = crate::support::Home::new();
    home.write("f", b"x");
    let r = home
        .px()
        .args([
            "-o",
            "json",
            "vm",
            "exec",
            "100",
            "--dry-run",
            "--push",
            "f:/tmp/f",
            "--pull",
            "/tmp/g:g",
            "--",
            "uname",
        ])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.data()["transfers"],
        serde_json::json!(["push f -> /tmp/f", "pull /tmp/g -> g"])
    );
    let a = home.px().args(["-o", "json", "audit", "show"]).run();
    let recs = a.data();
    assert_eq!(recs[0]["transfers"][0], "push f -> /tmp/f", "{}", a.stdout);
}
