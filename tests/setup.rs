//! `pxagent setup render|revoke` as a user runs them (local commands, no host): the scripts
//! come out on stdout and pass `bash -n`, bad input is exit 2 with a message naming it; and
//! the drop-in's `Match User` block, read by the real sshd of this machine (`sshd -T`),
//! applies to the agent account only, whether the config includes `sshd_config.d/*.conf`
//! (Debian, Proxmox) or only our file (the test bed's own config, after setup added the line).
//!
//! The sshd test needs `/usr/sbin/sshd`, `ssh-keygen` and sshd's privilege separation
//! directory `/run/sshd` (openssh-server; a host that runs sshd has it). Without them it FAILS
//! with what to install; it never skips. Applying the scripts is for the test bed (root, a
//! real sshd and sudo): the lead runs them there.

use std::path::{Path, PathBuf};
use std::process::Command;

use pxagent::host::setup::{self, AgentKey, SetupOptions};
use pxagent::host::sudoers::render::RenderOptions;

use crate::support::local;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/setup")
        .join(name)
        .display()
        .to_string()
}

fn bash_n(script: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sh");
    std::fs::write(&path, script).unwrap();
    let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn render_and_revoke_print_scripts_that_parse() {
    let agent = fixture("agent.pub");
    let alice = fixture("alice.pub");
    let r = local(&[
        "setup",
        "render",
        "--user",
        "zen-agent",
        "--pubkey",
        &agent,
        "--from",
        "192.0.2.0/24",
        "--profile",
        "operator",
        "--vmids",
        "100-199",
        "--approvers",
        &alice,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("#!/bin/bash\n"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("restrict,from=\"192.0.2.0/24\",command=\"/usr/local/bin/pxagent gate ")
    );
    bash_n(&r.stdout);

    let r = local(&["setup", "revoke", "--user", "zen-agent"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("usermod --expiredate 1 \"$U\""));
    bash_n(&r.stdout);

    // JSON: one document with the script in it.
    let r = local(&["setup", "revoke", "--user", "zen-agent", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["op"], "setup.revoke");
    assert!(
        doc["data"]["script"]
            .as_str()
            .unwrap()
            .starts_with("#!/bin/bash\n")
    );
}

#[test]
fn the_host_policy_comes_from_policy_and_is_checked() {
    let agent = fixture("agent.pub");
    let home = crate::support::Home::new();
    let good = home.write("host.yaml", b"ops:\n  \"*\": allow\n  vm.destroy: deny\n");
    let r = home
        .px()
        .args(["setup", "render", "--pubkey", &agent, "--policy", &good])
        .run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("\n  vm.destroy: deny\nPXAGENT_EOF\n"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("readonly POLICY_GIVEN='yes'"));
    let bad = home.write("bad.yaml", b"ops:\n  vm.destory: deny\n");
    let r = home
        .px()
        .args(["setup", "render", "--pubkey", &agent, "--policy", &bad])
        .run();
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("did you mean vm.destroy"), "{}", r.stderr);
    assert!(r.stdout.is_empty());
}

/// Every bad input: exit 2, nothing on stdout, a message naming what is wrong.
#[test]
fn bad_inputs_exit_2_with_a_clear_message() {
    let agent = fixture("agent.pub");
    let home = crate::support::Home::new();
    let private = home.write(
        "id_ed25519",
        b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n",
    );
    let agent_text = std::fs::read_to_string(&agent).unwrap();
    let with_options = home.write(
        "opts.pub",
        format!("restrict,command=\"/bin/sh\" {agent_text}").as_bytes(),
    );
    let two = home.write(
        "two.pub",
        format!(
            "{agent_text}{}",
            std::fs::read_to_string(fixture("alice.pub")).unwrap()
        )
        .as_bytes(),
    );
    let self_approver = home.write("approvers", agent_text.as_bytes());
    let long_name = "a".repeat(33);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--user", "root"], "refusing to render rules for root"),
        (vec!["--user=-x"], "invalid user name '-x'"),
        (vec!["--user", "a;b"], "invalid user name 'a;b'"),
        (vec!["--user", "Zen"], "invalid user name 'Zen'"),
        (vec!["--user", &long_name], "invalid user name"),
        (vec!["--from", "192.0.2.0/33"], "--from '192.0.2.0/33'"),
        (vec!["--from", "192.0.2.1/24"], "host bits"),
        (
            vec!["--from", "host.example"],
            "not an IPv4 or IPv6 address",
        ),
        (vec!["--from", "10.0.0.0/8 ,x"], "--from"),
        (vec!["--gate-bin", "pxagent"], "--gate-bin 'pxagent'"),
        (vec!["--sshd-config", "/etc/ssh/my config"], "--sshd-config"),
        (vec!["--profile", "root"], "profile"),
        (
            vec!["--approvers", &self_approver],
            "approve its own requests",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["setup", "render", "--pubkey", agent.as_str()];
        args.extend(extra.iter().copied());
        let r = home.px().args(&args).run();
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}");
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    let keys: Vec<(&str, &str)> = vec![
        (
            "/nonexistent/agent.pub",
            "cannot read /nonexistent/agent.pub",
        ),
        ("/", "cannot read /"),
        (&private, "holds a private key"),
        (&with_options, "options in front"),
        (&two, "holds 2 lines"),
    ];
    for (key, want) in keys {
        let r = home.px().args(["setup", "render", "--pubkey", key]).run();
        assert_eq!(r.code, 2, "{key}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{key}");
        assert!(r.stderr.contains(want), "{key}: {}", r.stderr);
    }
    let r = local(&["setup", "render"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--pubkey"), "{}", r.stderr);
    let r = local(&["setup", "revoke", "--user", "root"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("root"), "{}", r.stderr);
}

/// The real sshd of this machine, with a private config directory.
struct Sshd {
    dir: tempfile::TempDir,
}

impl Sshd {
    fn new() -> Sshd {
        assert!(
            Path::new("/usr/sbin/sshd").exists(),
            "/usr/sbin/sshd is missing: apt-get install openssh-server (this test reads the drop-in with the real sshd)"
        );
        assert!(
            Path::new("/run/sshd").is_dir(),
            "/run/sshd is missing: sshd -T needs its privilege separation directory (mkdir -p /run/sshd; a host that runs sshd has it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("hostkey");
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .output()
            .expect("ssh-keygen runs (apt-get install openssh-client)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::create_dir(dir.path().join("sshd_config.d")).unwrap();
        Sshd { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write the main config: `include` first, then Debian's global lines.
    fn config(&self, include: &str) {
        let text = format!(
            "Include {include}\nHostKey {}\nPidFile {}\nKbdInteractiveAuthentication no\nUsePAM yes\n\
             X11Forwarding yes\nPrintMotd no\nAcceptEnv LANG LC_*\nSubsystem sftp /usr/lib/openssh/sftp-server\n",
            self.path("hostkey").display(),
            self.path("sshd.pid").display(),
        );
        std::fs::write(self.path("sshd_config"), text).unwrap();
    }

    /// `sshd -T` for a connection of `user`, as (keyword, value) lines.
    fn settings(&self, user: &str) -> Vec<String> {
        let config = self.path("sshd_config");
        let check = Command::new("/usr/sbin/sshd")
            .arg("-t")
            .arg("-f")
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "sshd -t: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let out = Command::new("/usr/sbin/sshd")
            .arg("-T")
            .arg("-f")
            .arg(&config)
            .arg("-C")
            .arg(format!("user={user},host=localhost,addr=127.0.0.1"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sshd -T: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }
}

fn has(settings: &[String], line: &str) -> bool {
    settings.iter().any(|l| l == line)
}

#[test]
fn the_dropin_applies_to_the_agent_account_only() {
    let sshd = Sshd::new();
    let agent = std::fs::read_to_string(fixture("agent.pub")).unwrap();
    let opts = SetupOptions::new(
        RenderOptions::new("pxa-agent").unwrap(),
        AgentKey::parse(&agent, "agent.pub").unwrap(),
    );
    let dropin = sshd.path("sshd_config.d/pxagent-pxa-agent.conf");
    std::fs::write(&dropin, setup::sshd_dropin(&opts)).unwrap();
    // A drop-in read after ours, with a global setting: a leaking Match block would swallow it.
    std::fs::write(
        sshd.path("sshd_config.d/zz-later.conf"),
        "ClientAliveInterval 77\n",
    )
    .unwrap();
    let gate = format!("forcecommand {}", setup::forced_command(&opts));

    let debian = format!("{}/*.conf", sshd.path("sshd_config.d").display());
    let only_ours = dropin.display().to_string();
    for include in [debian.as_str(), only_ours.as_str()] {
        sshd.config(include);
        let agent = sshd.settings("pxa-agent");
        for want in [
            gate.as_str(),
            "authorizedkeysfile /etc/pxagent/keys/%u",
            "authenticationmethods publickey",
            "pubkeyauthentication yes",
            "passwordauthentication no",
            "kbdinteractiveauthentication no",
            "disableforwarding yes",
            "permittunnel no",
            "permittty no",
            "permituserrc no",
            "x11forwarding yes", // global, but DisableForwarding overrides every forwarding
        ] {
            assert!(has(&agent, want), "{include}: agent lacks {want:?}");
        }
        let other = sshd.settings("alice");
        for want in [
            "forcecommand none",
            "permittty yes",
            "disableforwarding no",
            "authenticationmethods any",
            "authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2",
            "x11forwarding yes",
            "subsystem sftp /usr/lib/openssh/sftp-server",
        ] {
            assert!(has(&other, want), "{include}: another user lacks {want:?}");
        }
        if include == debian {
            assert!(
                has(&other, "clientaliveinterval 77"),
                "the later drop-in applies to all"
            );
            assert!(
                has(&agent, "clientaliveinterval 77"),
                "and to the agent too"
            );
        }
    }
}
