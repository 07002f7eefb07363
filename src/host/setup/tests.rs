//! Unit tests of the setup scripts: validation of every input, the exact files the render
//! script carries, here-documents that content cannot end early, and the scripts as bash and
//! shellcheck see them. Running the scripts is the test bed's job (root, a real sshd).

use std::io::Write;
use std::process::{Command, Stdio};

use super::script::{Script, sq};
use super::*;
use crate::catalog::Profile;
use crate::host::sudoers::ranges::Ranges;
use crate::host::sudoers::render as sudoers;

const AGENT: &str = include_str!("../../../tests/fixtures/setup/agent.pub");
const ALICE: &str = include_str!("../../../tests/fixtures/setup/alice.pub");
const RSA3072: &str = include_str!("../../../tests/fixtures/setup/rsa3072.pub");
const RSA1024: &str = include_str!("../../../tests/fixtures/setup/rsa1024.pub");
const DSA: &str = include_str!("../../../tests/fixtures/setup/dsa.pub");

fn options(user: &str) -> SetupOptions {
    SetupOptions::new(
        RenderOptions::new(user).unwrap(),
        AgentKey::parse(AGENT, "agent.pub").unwrap(),
    )
}

fn usage_message(r: Result<impl std::fmt::Debug>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    e.to_string()
}

/// Run `script` with bash and return its stdout (bash must succeed).
fn bash(script: &str) -> Vec<u8> {
    let mut child = Command::new("bash")
        .arg("-s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "bash failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn single_quoted_words_come_back_exactly() {
    for v in [
        "zen-agent",
        "it's",
        "'",
        "''",
        "$(id) `id` ${HOME} \\ \" !x",
        "a\nb",
        "",
    ] {
        let out = bash(&format!("printf '%s' {}", sq(v)));
        assert_eq!(String::from_utf8(out).unwrap(), v);
    }
}

#[test]
fn the_delimiter_is_never_a_line_of_the_content() {
    assert_eq!(heredoc_delimiter("a\nb\n"), "PXAGENT_EOF");
    assert_eq!(heredoc_delimiter("PXAGENT_EOF\n"), "PXAGENT_EOF_1");
    assert_eq!(
        heredoc_delimiter("x\nPXAGENT_EOF\nPXAGENT_EOF_1\n"),
        "PXAGENT_EOF_2"
    );
    // Only a whole line ends a document: these do not take the delimiter.
    assert_eq!(
        heredoc_delimiter(" PXAGENT_EOF\nPXAGENT_EOF \n#PXAGENT_EOF\nPXAGENT_EOF\r\n"),
        "PXAGENT_EOF"
    );
}

#[test]
fn content_cannot_end_its_here_document_or_expand() {
    // Everything an attacker could put in a policy file to break out of the document.
    let content = "PXAGENT_EOF\nPXAGENT_EOF_1\necho pwned $(id) `id` ${U} \\\n'PXAGENT_EOF'\nEOF\n\ttabbed\nlast line without newline";
    let mut s = Script::new("test");
    s.data("data_x", "adversarial", content);
    s.text("main() { data_x; }\n");
    let out = bash(&s.finish());
    assert_eq!(String::from_utf8(out).unwrap(), format!("{content}\n"));
}

#[test]
fn from_takes_addresses_and_networks_only() {
    for good in [
        "192.0.2.0/24",
        "10.0.0.0/8,192.0.2.7",
        "192.0.2.7/32",
        "0.0.0.0/0",
        "2001:db8::/32",
        "::1",
        "2001:db8::1/128,127.0.0.0/8",
    ] {
        assert_eq!(SourceList::parse(good).unwrap().joined(), good);
    }
    for bad in [
        "",
        "example.com",
        "192.0.2.0/33",
        "2001:db8::/129",
        "192.0.2.0/+8",
        "192.0.2.0/",
        "192.0.2.0/24,",
        ",192.0.2.0/24",
        "192.0.2.0/24, 10.0.0.0/8",
        "192.0.2.0/24\"",
        "!192.0.2.0/24",
        "192.0.2.*",
        "010.0.0.1",
        "fe80::1%eth0",
    ] {
        usage_message(SourceList::parse(bad));
    }
    let m = usage_message(SourceList::parse("192.0.2.5/24"));
    assert!(m.contains("host bits"), "{m}");
    let m = usage_message(SourceList::parse("2001:db8::1/64"));
    assert!(m.contains("host bits"), "{m}");
}

#[test]
fn the_agent_key_is_one_bare_strong_public_key() {
    let k = AgentKey::parse(AGENT, "agent.pub").unwrap();
    assert_eq!(k.line(), AGENT.trim());
    assert!(k.fingerprint().starts_with("SHA256:"));
    assert!(AgentKey::parse(RSA3072, "rsa.pub").is_ok());
    let cases = [
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
            "private key",
        ),
        (
            &format!("restrict,command=\"/bin/sh\" {AGENT}"),
            "options in front",
        ),
        (&format!("no-pty {AGENT}"), "options in front"),
        (&format!("{AGENT}{ALICE}"), "2 lines"),
        ("", "no public key"),
        ("# only a comment\n", "no public key"),
        ("ssh-ed25519 AAAAnotbase64!!\n", "not an OpenSSH public key"),
        (RSA1024, "1024 bits"),
        (DSA, "DSA"),
        (
            &AGENT.replace("agent@client", "agent\u{1b}[2J"),
            "control characters",
        ),
    ];
    for (text, want) in cases {
        let m = usage_message(AgentKey::parse(text, "k.pub"));
        assert!(m.contains(want), "{text:?}: {m}");
        assert!(m.starts_with("--pubkey k.pub"), "{m}");
    }
}

#[test]
fn approvers_are_public_keys_with_comments_kept() {
    let text = format!("# people who approve\r\n\n{ALICE}  {RSA3072}");
    let a = Approvers::parse(&text, "approvers").unwrap();
    assert_eq!(
        a.text(),
        format!(
            "# people who approve\n\n{}\n{}\n",
            ALICE.trim(),
            RSA3072.trim()
        )
    );
    let alice = AgentKey::parse(ALICE, "alice.pub").unwrap();
    assert!(a.contains(alice.blob()));
    assert!(!a.contains(AgentKey::parse(AGENT, "a").unwrap().blob()));
    let m = usage_message(Approvers::parse(&format!("{ALICE}not a key\n"), "ap"));
    assert!(m.starts_with("--approvers ap:2:"), "{m}");
    let m = usage_message(Approvers::parse(&format!("# x\n{DSA}"), "ap"));
    assert!(m.starts_with("--approvers ap:2: DSA"), "{m}");
    usage_message(Approvers::parse("# a\u{7}bell\n", "ap"));
}

#[test]
fn host_paths_are_plain_absolute_paths() {
    for good in [
        "/usr/local/bin/pxagent",
        "/etc/ssh/sshd_config",
        "/a",
        "/opt/px-1.2_b+c",
    ] {
        assert_eq!(HostPath::parse("--x", good).unwrap().as_str(), good);
    }
    for bad in [
        "",
        "relative/path",
        "/",
        "/etc/../root",
        "/etc/./x",
        "/etc//x",
        "/etc/x/",
        "/etc/my file",
        "/etc/x\"y",
        "/etc/x'y",
        "/etc/$x",
        "/etc/x\ny",
    ] {
        let m = usage_message(HostPath::parse("--gate-bin", bad));
        assert!(m.starts_with("--gate-bin"), "{m}");
    }
    assert_eq!(
        HostPath::parse("--x", "/sshd_config").unwrap().parent(),
        "/"
    );
    assert_eq!(
        HostPath::parse("--x", "/etc/ssh/sshd_config")
            .unwrap()
            .parent(),
        "/etc/ssh"
    );
}

#[test]
fn host_policies_are_checked_by_the_policy_loader() {
    let p = HostPolicy::parse("ops:\n  \"*\": allow\n  vm.destroy: deny", "p.yaml").unwrap();
    assert_eq!(p.text(), "ops:\n  \"*\": allow\n  vm.destroy: deny\n");
    let m = usage_message(HostPolicy::parse("ops:\n  vm.destory: deny\n", "p.yaml"));
    assert!(m.contains("did you mean vm.destroy"), "{m}");
    usage_message(HostPolicy::parse("ops: [", "p.yaml"));
    usage_message(HostPolicy::parse("ops: {}\0", "p.yaml"));
    // The default the script installs is a valid policy; it names the NFS servers the render
    // names for sudo, so the gate admits what sudo does.
    let mut o = options("zen-agent");
    let plain = Policy::from_host_text(&default_policy(&o), "default").unwrap();
    o.sudoers.nfs_servers = vec!["192.0.2.30".into(), "nas".into()];
    let text = default_policy(&o);
    assert!(
        text.contains("\nnfs_servers: [192.0.2.30, nas]\n"),
        "{text}"
    );
    let named = Policy::from_host_text(&text, "default").unwrap();
    let add = |server: &str| {
        let mut values = std::collections::BTreeMap::new();
        values.insert("storage", "n1".to_string());
        values.insert("server", server.to_string());
        values.insert("export", "/export/pve".to_string());
        crate::catalog::invocation::Invocation {
            op: &crate::catalog::ops::STORAGE_ADD_NFS,
            values,
            keep_type: None,
            attach: Default::default(),
        }
    };
    named.check_nfs_server(&add("nas"), true).unwrap();
    assert!(
        named
            .check_nfs_server(&add("evil.example.org"), true)
            .is_err()
    );
    assert!(plain.check_nfs_server(&add("nas"), true).is_err());
}

#[test]
fn account_names_are_validated_for_both_scripts() {
    for bad in ["root", "-x", "a;b", "Zen", "a b", "$(id)", &"a".repeat(33)] {
        usage_message(RevokeOptions::new(bad));
        usage_message(RenderOptions::new(bad));
    }
}

#[test]
fn the_key_line_is_restricted_and_forced_into_the_gate() {
    let mut o = options("zen-agent");
    let gate = "/usr/local/bin/pxagent gate --host-chain --policy /etc/pxagent/policy.yaml --approvers /etc/pxagent/approvers";
    assert_eq!(forced_command(&o), gate);
    let lines: Vec<String> = authorized_keys_line(&o).lines().map(String::from).collect();
    assert!(lines[0].starts_with("# /etc/pxagent/keys/zen-agent: "));
    assert_eq!(
        lines[1],
        format!("restrict,command=\"{gate}\" {}", AGENT.trim())
    );
    o.from = Some(SourceList::parse("192.0.2.0/24,2001:db8::/32").unwrap());
    o.gate = HostPath::parse("--gate-bin", "/opt/pxagent").unwrap();
    let line = authorized_keys_line(&o);
    assert!(
        line.contains(
            "\nrestrict,from=\"192.0.2.0/24,2001:db8::/32\",command=\"/opt/pxagent gate --host-chain --policy "
        ),
        "{line}"
    );
}

#[test]
fn the_dropin_is_one_match_block_for_the_account() {
    let mut o = options("zen-agent");
    o.sshd.config = HostPath::parse("--sshd-config", "/srv/bed/sshd_config").unwrap();
    assert_eq!(
        o.sshd.dropin("zen-agent"),
        "/srv/bed/sshd_config.d/pxagent-zen-agent.conf"
    );
    assert_eq!(
        Sshd::default().dropin("x"),
        "/etc/ssh/sshd_config.d/pxagent-x.conf"
    );
    let d = sshd_dropin(&o);
    let directives: Vec<&str> = d.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        directives,
        [
            "Match User zen-agent",
            "    AuthorizedKeysFile /etc/pxagent/keys/%u",
            "    AuthenticationMethods publickey",
            "    PubkeyAuthentication yes",
            "    PasswordAuthentication no",
            "    KbdInteractiveAuthentication no",
            "    DisableForwarding yes",
            "    PermitTunnel no",
            "    PermitTTY no",
            "    PermitUserRC no",
            "    ForceCommand /usr/local/bin/pxagent gate --host-chain --policy /etc/pxagent/policy.yaml --approvers /etc/pxagent/approvers",
        ]
    );
}

#[test]
fn the_render_script_carries_the_values_and_the_files() {
    let mut o = options("zen-agent");
    o.sudoers.profile = Profile::Operator;
    o.sudoers.vmids = Some(Ranges::parse("--vmids", "100-199").unwrap());
    o.approvers = Some(Approvers::parse(ALICE, "alice.pub").unwrap());
    let s = render(&o).unwrap();
    assert!(s.starts_with("#!/bin/bash\n# pxagent setup render: agent account zen-agent"));
    for want in [
        "\nset -euo pipefail\numask 022\n",
        "\nreadonly U='zen-agent'  # the agent account\n",
        "\nreadonly PROFILE='operator'  # ",
        "\nreadonly APPROVERS_GIVEN='yes'  # ",
        "\nreadonly POLICY_GIVEN='no'  # ",
        "\nreadonly SUDOERS='/etc/sudoers.d/zen-agent'  # ",
        "\nreadonly DROPIN='/etc/ssh/sshd_config.d/pxagent-zen-agent.conf'  # ",
        "\nreadonly SSHD_PID_FILE=''  # ",
        "\ndata_sudoers() {\n    cat <<'PXAGENT_EOF'\n# /etc/sudoers.d/zen-agent: rendered by pxagent",
        "vmids 100-199",
        "\ndata_policy() {\n    cat <<'PXAGENT_EOF'\n# /etc/pxagent/policy.yaml: the host policy",
        &format!(
            "\ndata_approvers() {{\n    cat <<'PXAGENT_EOF'\n{}\nPXAGENT_EOF\n}}\n",
            ALICE.trim()
        ),
        "\nzen-agent ALL=(root) NOPASSWD: PXA_ZEN_AGENT_",
        "visudo -cf",
        "sshd -t -f \"$SSHD_CONFIG\"",
        "sudo -l -U \"$U\"",
    ] {
        assert!(s.contains(want), "missing {want:?}");
    }
    assert!(s.ends_with("\nmain\n"), "main runs last");
    // The account's sudoers is exactly what `sudoers render` prints.
    assert!(s.contains(&sudoers::render(&o.sudoers)));
}

#[test]
fn contradicting_options_are_refused() {
    let mut o = options("zen-agent");
    o.approvers = Some(Approvers::parse(&format!("{ALICE}{AGENT}"), "ap").unwrap());
    let m = usage_message(render(&o));
    assert!(m.contains("approve its own requests"), "{m}");
    let mut o = options("zen-agent");
    o.approvers_path = o.policy_path.clone();
    usage_message(render(&o));
}

#[test]
fn a_policy_cannot_forge_the_delimiter() {
    // A valid policy with a line that is exactly the default delimiter (inside a quoted
    // multi-line reason, which YAML folds into one line).
    let text = "ops:\n  vm.stop: {action: deny, reason: \"use\nPXAGENT_EOF\n    vm shutdown\"}\n";
    let policy = HostPolicy::parse(text, "p.yaml").unwrap();
    let mut o = options("zen-agent");
    o.policy = Some(policy);
    let s = render(&o).unwrap();
    assert!(
        s.contains("\ndata_policy() {\n    cat <<'PXAGENT_EOF_1'\n"),
        "{s}"
    );
    // bash prints exactly the policy back.
    let start = s.find("\ndata_policy() {").unwrap();
    let end = start + s[start..].find("\n}\n").unwrap() + 3;
    let out = bash(&format!("{}data_policy\n", &s[start..end]));
    assert_eq!(String::from_utf8(out).unwrap(), text);
}

/// shellcheck is optional: installed, it must find nothing of severity warning or above in
/// either script; absent, `bash -n` still checks the syntax.
fn check_script(script: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.sh");
    std::fs::write(&path, script).unwrap();
    let syntax = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        syntax.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    match Command::new("shellcheck")
        .args(["--severity=warning", "--shell=bash"])
        .arg(&path)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "shellcheck:\n{}",
            String::from_utf8_lossy(&out.stdout)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("shellcheck could not run: {e}"),
    }
}

#[test]
fn both_scripts_pass_bash_n_and_shellcheck() {
    let mut o = options("zen-agent");
    check_script(&render(&o).unwrap());
    o.from = Some(SourceList::parse("192.0.2.0/24").unwrap());
    o.policy = Some(HostPolicy::parse("ops:\n  \"*\": deny\n", "p").unwrap());
    o.approvers = Some(Approvers::parse(ALICE, "a").unwrap());
    o.sudoers.ct_exec = Some(Ranges::parse("--ct-exec", "200").unwrap());
    o.sshd.config = HostPath::parse("--x", "/srv/bed/sshd_config").unwrap();
    o.sshd.pid_file = Some(HostPath::parse("--x", "/srv/bed/sshd.pid").unwrap());
    check_script(&render(&o).unwrap());
    let mut r = RevokeOptions::new("zen-agent").unwrap();
    check_script(&revoke(&r));
    r.sshd = o.sshd.clone();
    let s = revoke(&r);
    check_script(&s);
    for want in [
        "\nreadonly U='zen-agent'  # ",
        "\nreadonly SSHD_CONFIG='/srv/bed/sshd_config'  # ",
        "\nreadonly SSHD_PID_FILE='/srv/bed/sshd.pid'  # ",
        "usermod --expiredate 1 \"$U\"",
        "passwd -l \"$U\"",
        "kill -KILL \"${ACCOUNT_PIDS[@]}\"",
        "[[ $r == \"$uid\" || $e == \"$uid\" || $s == \"$uid\" || $f == \"$uid\" ]]",
    ] {
        assert!(s.contains(want), "missing {want:?}");
    }
}
