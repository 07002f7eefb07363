//! The linter's unit tests: fixtures of real sudoers files and `sudo -l` outputs, and
//! crafted rules for each finding.

use super::*;

fn shared(name: &str) -> String {
    let path = format!("{}/tests/fixtures/sudo/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn own(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/sudoers/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"))
}

fn at(findings: &[Finding], line: usize) -> Vec<(Severity, &'static str)> {
    findings
        .iter()
        .filter(|f| f.line == line)
        .map(|f| (f.severity, f.code))
        .collect()
}

fn has(findings: &[Finding], line: usize, severity: Severity, code: &str) -> bool {
    findings
        .iter()
        .any(|f| f.line == line && f.severity == severity && f.code == code)
}

fn codes(findings: &[Finding]) -> Vec<(Severity, &'static str)> {
    findings.iter().map(|f| (f.severity, f.code)).collect()
}

fn dump(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| format!("{}: {} [{}] {}\n", f.line, f.severity, f.code, f.why))
        .collect()
}

#[test]
fn published_every_root_equivalent_line_is_an_error() {
    let f = lint(&shared("published.sudoers"));
    let expected: &[(usize, &str)] = &[
        (1, "wildcard-args"),
        (2, "wildcard-args"),
        (3, "wildcard-args"),
        (4, "wildcard-args"),
        (5, "wildcard-args"),
        (5, "wrong-path"),
        (6, "wildcard-args"),
        (7, "wildcard-args"),
        (7, "wrong-path"),
        (8, "wildcard-args"),
        (9, "wildcard-args"),
        (10, "wildcard-args"),
        (14, "exec-escape"),
        (17, "pager-escape"),
        (18, "pager-escape"),
        (19, "pager-escape"),
        (21, "exec-escape"),
        (25, "mount"),
        (33, "defaults-bang-not-command"),
        (33, "defaults-tag-as-option"),
        (34, "defaults-bang-not-command"),
        (34, "defaults-tag-as-option"),
        (36, "defaults-bang-not-command"),
        // `Defaults!zen-agent LOG_INPUT` is invalid, so nothing turns input logging on.
        (1, "no-log-input"),
    ];
    for (line, code) in expected {
        assert!(
            has(&f, *line, Severity::Error, code),
            "line {line}: no error {code}\n{}",
            dump(&f)
        );
    }
    // Low-impact `*` rules: warnings, not errors.
    for line in [11, 12, 13, 15, 16, 20, 22, 23, 24, 26, 27, 28, 29, 30] {
        let here = at(&f, line);
        assert!(
            !here.iter().any(|(s, _)| *s == Severity::Error),
            "line {line}: {here:?}"
        );
        assert!(
            here.iter().any(|(s, _)| *s == Severity::Warning),
            "line {line}: {here:?}"
        );
    }
    assert!(has(&f, 26, Severity::Warning, "umount"));
    assert!(has(&f, 27, Severity::Warning, "mkdir"));
    // Reading /etc/fstab: worth a note, not a fix.
    assert!(has(&f, 31, Severity::Info, "file-read"));
    assert!(has(&f, 32, Severity::Info, "file-read"));
    // `(ALL)` everywhere.
    assert!(has(&f, 1, Severity::Warning, "runas-all"));
    // Global `Defaults log_output` counts: output is logged.
    assert!(!f.iter().any(|x| x.code == "no-log-output"), "{}", dump(&f));
    // Line 35 is valid and fine.
    assert!(at(&f, 35).is_empty());
}

#[test]
fn recommended_is_clean() {
    let f = lint(&shared("recommended.sudoers"));
    let loud: Vec<_> = f.iter().filter(|x| x.severity != Severity::Info).collect();
    assert!(loud.is_empty(), "{}", dump(&f));
    // Only the note that JSON event logs keep argv boundaries.
    assert_eq!(codes(&f), vec![(Severity::Info, "log-format")]);
}

#[test]
fn mixed_findings() {
    let f = lint(&shared("mixed.sudoers"));
    assert!(
        has(&f, 3, Severity::Warning, "log-disabled"),
        "{}",
        dump(&f)
    );
    // NOEXEC on journalctl is harmless there (info); on a PVE tool it would be a warning.
    assert!(has(&f, 6, Severity::Info, "noexec-tag"), "{}", dump(&f));
    assert!(has(&f, 8, Severity::Warning, "runas-all"));
    assert!(has(&f, 8, Severity::Warning, "password-rule"));
    assert!(has(&f, 8, Severity::Error, "pve-dangerous-args"));
    for line in [1, 2, 4, 5, 7, 9] {
        assert!(at(&f, line).is_empty(), "line {line}: {}", dump(&f));
    }
    assert!(
        !f.iter().any(|x| x.code.starts_with("no-log")),
        "{}",
        dump(&f)
    );
}

#[test]
fn regex2_draft() {
    let f = lint(&shared("regex2.sudoers"));
    // The regex path is reviewed, and the two tools it reaches are checked with `^list$`.
    assert!(has(&f, 6, Severity::Warning, "regex-path"), "{}", dump(&f));
    assert!(
        !has_errors(
            &f.iter()
                .filter(|x| x.line != 0 && !x.code.starts_with("no-log"))
                .cloned()
                .collect::<Vec<_>>()
        ),
        "{}",
        dump(&f)
    );
    // No log_input/log_output anywhere in that draft.
    assert!(has(&f, 1, Severity::Error, "no-log-input"));
}

#[test]
fn overbroad_fixture_each_class_flagged() {
    let f = lint(&own("overbroad.sudoers"));
    let text = own("overbroad.sudoers");
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .map(|i| i + 1)
            .unwrap_or_else(|| panic!("{needle}"))
    };
    let expect: &[(&str, Severity, &str)] = &[
        ("@includedir", Severity::Info, "include-not-followed"),
        (
            "Defaults:zen-agent requiretty",
            Severity::Info,
            "requiretty",
        ),
        ("!env_reset", Severity::Error, "env-not-reset"),
        ("env_keep", Severity::Error, "env-keep-dangerous"),
        ("Defaults:zen-agent setenv", Severity::Error, "setenv"),
        (
            "Defaults:zen-agent noexec",
            Severity::Warning,
            "noexec-breaks-pve",
        ),
        ("Cmnd_Alias WIDE", Severity::Error, "unconstrained-args"),
        ("Cmnd_Alias WIDE", Severity::Error, "wrong-path"),
        ("Cmnd_Alias WIDE", Severity::Error, "regex-unanchored"),
        ("Cmnd_Alias WIDE", Severity::Warning, "regex-too-broad"),
        ("Cmnd_Alias WIDE", Severity::Error, "pve-dangerous-args"),
        ("NOEXEC: WIDE", Severity::Warning, "noexec-breaks-pve"),
        ("/usr/bin/bash", Severity::Error, "shell"),
        ("python3.11", Severity::Error, "interpreter"),
        ("/usr/bin/vim", Severity::Error, "pager-editor"),
        ("/usr/bin/tee", Severity::Error, "file-write"),
        ("/usr/bin/sed", Severity::Error, "interpreter"),
        ("/usr/bin/tar", Severity::Error, "exec-escape"),
        (
            "/usr/bin/systemctl *",
            Severity::Error,
            "systemctl-unit-control",
        ),
        ("/usr/bin/cat /etc/shadow", Severity::Error, "file-read"),
        ("SETENV:", Severity::Error, "setenv"),
        (
            "ALL = (root) NOPASSWD: ALL",
            Severity::Error,
            "all-commands",
        ),
        ("qm list", Severity::Error, "relative-path"),
        ("sudoedit", Severity::Error, "sudoedit"),
        ("mkfs.ext4", Severity::Error, "disk-destroy"),
        ("usermod", Severity::Error, "account-admin"),
        ("/usr/bin/journalctl ^-u", Severity::Error, "pager-escape"),
        (
            "/usr/sbin/ha-manager",
            Severity::Error,
            "unconstrained-args",
        ),
        ("/opt/agent/bin/", Severity::Error, "wildcard-path"),
        ("/usr/bin/uptime", Severity::Warning, "unconstrained-args"),
        ("dd if", Severity::Warning, "parse-error"),
        ("UNDEFINED_THING", Severity::Warning, "undefined-alias"),
        ("(ALL : ALL)", Severity::Warning, "runas-all"),
    ];
    for (needle, severity, code) in expect {
        let line = line_of(needle);
        assert!(
            has(&f, line, *severity, code),
            "`{needle}` (line {line}): no {severity} {code}\n{}",
            dump(&f)
        );
    }
    // `Defaults:zen-agent log_input, log_output` is set: no log errors.
    assert!(
        !f.iter().any(|x| x.code.starts_with("no-log")),
        "{}",
        dump(&f)
    );
    // The systemctl rule with pinned verb, unit and --no-pager is fine.
    assert!(
        at(&f, line_of("is-active pvedaemon")).is_empty(),
        "{}",
        dump(&f)
    );
}

#[test]
fn check_command_pve_tools() {
    let c = |s: &str| codes(&check_command(s));
    assert_eq!(
        c("/usr/sbin/qm *"),
        vec![(Severity::Error, "wildcard-args")]
    );
    assert_eq!(
        c("/usr/sbin/qm"),
        vec![(Severity::Error, "unconstrained-args")]
    );
    assert!(c("/usr/sbin/qm ^list$").is_empty());
    assert!(c("/usr/sbin/qm ^(start|shutdown) [1-9][0-9]{2,8}$").is_empty());
    assert!(c("/usr/bin/vzdump ^[1-9][0-9]{2,8} --storage (backup-nfs|pbs1) --mode (snapshot|suspend|stop)$").is_empty());
    assert!(c("/usr/sbin/qm \"\"").is_empty());
    assert_eq!(
        c("/usr/sbin/pvesh ^get /version$"),
        vec![(Severity::Error, "wrong-path")],
        "pvesh lives in /usr/bin"
    );
    assert_eq!(
        c("/sbin/qm ^list$"),
        vec![(Severity::Info, "noncanonical-path")]
    );
    // Top-level alternation is half-anchored: `set 100 --hookscript … stop 100` matches.
    let f = c("/usr/sbin/qm ^start [0-9]+|stop [0-9]+$");
    assert!(f.contains(&(Severity::Error, "regex-unanchored")), "{f:?}");
    // One word may be `--hookscript=…`.
    let f = c("/usr/sbin/qm ^set [1-9][0-9]{2,8} [^ ]+$");
    assert!(f.contains(&(Severity::Warning, "regex-too-broad")), "{f:?}");
    assert!(
        f.contains(&(Severity::Error, "pve-dangerous-args")),
        "{f:?}"
    );
    let f = c("/usr/bin/vzdump ^[0-9]+ .*$");
    assert!(
        f.contains(&(Severity::Error, "pve-dangerous-args")),
        "{f:?}"
    );
    assert!(f.contains(&(Severity::Warning, "regex-too-broad")), "{f:?}");
    assert_eq!(
        c("/usr/sbin/pct ^enter [0-9]+$"),
        vec![(Severity::Error, "pve-dangerous-args")]
    );
    // A literal dangerous command line is caught the same way.
    assert_eq!(
        c("/usr/sbin/qm monitor 100"),
        vec![(Severity::Error, "pve-dangerous-args")]
    );
    assert_eq!(
        c("/usr/sbin/qm ^list"),
        vec![(Severity::Error, "regex-unterminated")]
    );
    assert_eq!(
        c("/usr/sbin/qm list$"),
        vec![(Severity::Warning, "regex-not-anchored")]
    );
}

#[test]
fn check_command_other_binaries() {
    let c = |s: &str| codes(&check_command(s));
    assert_eq!(c("ALL"), vec![(Severity::Error, "all-commands")]);
    assert_eq!(c("/usr/bin/find *"), vec![(Severity::Error, "exec-escape")]);
    assert_eq!(
        c("/usr/bin/find /var/log -name x"),
        vec![(Severity::Warning, "exec-escape")]
    );
    assert_eq!(
        c("/usr/bin/find /var/log -exec rm {} ;"),
        vec![(Severity::Error, "exec-escape")]
    );
    assert_eq!(
        c("/usr/bin/env /bin/sh"),
        vec![(Severity::Error, "exec-escape")]
    );
    assert_eq!(c("/bin/sh /opt/x.sh"), vec![(Severity::Error, "shell")]);
    assert_eq!(
        c("/usr/bin/less /var/log/syslog"),
        vec![(Severity::Error, "pager-editor")]
    );
    assert!(c("/usr/bin/uptime \"\"").is_empty());
    assert_eq!(
        c("/usr/bin/uptime"),
        vec![(Severity::Warning, "unconstrained-args")]
    );
    assert_eq!(
        c("/usr/bin/df *"),
        vec![(Severity::Warning, "wildcard-args")]
    );
    assert_eq!(
        c("/usr/bin/cat /etc/fstab"),
        vec![(Severity::Info, "file-read")]
    );
    assert_eq!(c("/usr/bin/cat *"), vec![(Severity::Error, "file-read")]);
    assert_eq!(
        c("/usr/bin/tee /etc/sudoers.d/x"),
        vec![(Severity::Error, "file-write")]
    );
    assert_eq!(
        c("/usr/bin/tee /tmp/out"),
        vec![(Severity::Warning, "file-write")]
    );
    assert_eq!(c("/usr/bin/umount *"), vec![(Severity::Warning, "umount")]);
    assert!(c("/usr/bin/umount /mnt/usb").is_empty());
    assert_eq!(
        c("/usr/bin/mount /mnt/backup"),
        vec![(Severity::Warning, "mount")]
    );
    assert_eq!(c("relative/bin"), vec![(Severity::Error, "relative-path")]);
    assert_eq!(c("/usr/bin/"), vec![(Severity::Error, "wildcard-path")]);
    assert_eq!(c("/usr/bin/py*"), vec![(Severity::Error, "wildcard-path")]);
    // `sudoedit` writes files as root; an error whatever the file.
    assert_eq!(c("sudoedit /etc/motd"), vec![(Severity::Error, "sudoedit")]);
    assert_eq!(
        c("/usr/sbin/mkfs.ext4 /dev/sdb1"),
        vec![(Severity::Error, "disk-destroy")]
    );
    assert_eq!(
        c("/usr/bin/vim.basic /etc/motd"),
        vec![(Severity::Error, "pager-editor")]
    );
    assert_eq!(
        c("/usr/bin/perl5.36.0 -v"),
        vec![(Severity::Error, "interpreter")]
    );
    assert_eq!(
        c("/home/zen-agent/tool \"\""),
        vec![(Severity::Warning, "nonstandard-path")]
    );
    assert_eq!(c("!/usr/bin/su"), vec![(Severity::Info, "negated-command")]);
    assert_eq!(
        c("/usr/bin/dmesg *"),
        vec![(Severity::Error, "pager-escape")]
    );
    assert_eq!(
        c("/usr/bin/ls ^-la [a-z ]+$"),
        Vec::<(Severity, &str)>::new(),
        "letters and spaces form no option"
    );
    assert_eq!(
        c("/usr/bin/ls ^-la .+$"),
        vec![(Severity::Warning, "regex-too-broad")]
    );
    assert_eq!(
        c("/usr/bin/ls ^-l|-a$"),
        vec![(Severity::Warning, "regex-unanchored")]
    );
}

#[test]
fn check_command_systemd() {
    let c = |s: &str| codes(&check_command(s));
    assert_eq!(
        c("/usr/bin/systemctl"),
        vec![(Severity::Error, "systemctl-unit-control")]
    );
    assert_eq!(
        c("/usr/bin/systemctl *"),
        vec![(Severity::Error, "systemctl-unit-control")]
    );
    assert_eq!(
        c("/usr/bin/systemctl restart *"),
        vec![(Severity::Error, "systemctl-unit-control")]
    );
    assert_eq!(
        c("/usr/bin/systemctl status *"),
        vec![(Severity::Error, "pager-escape")]
    );
    assert_eq!(
        c("/usr/bin/systemctl status pvedaemon"),
        vec![(Severity::Error, "pager-escape")]
    );
    assert!(c("/usr/bin/systemctl --no-pager status pvedaemon").is_empty());
    assert_eq!(
        c("/usr/bin/systemctl is-active *"),
        vec![(Severity::Warning, "wildcard-args")]
    );
    assert!(c("/usr/bin/systemctl restart pvedaemon").is_empty());
    assert!(c("/usr/bin/systemctl ^is-active (pvedaemon|pveproxy)$").is_empty());
    assert_eq!(
        c("/usr/bin/journalctl *"),
        vec![(Severity::Error, "pager-escape")]
    );
    assert_eq!(
        c("/usr/bin/journalctl ^-u pvedaemon$"),
        vec![(Severity::Error, "pager-escape")]
    );
    assert!(c("/usr/bin/journalctl ^-u pvedaemon -n [0-9]{1,4} --no-pager -o json$").is_empty());
    assert_eq!(
        c("/usr/bin/journalctl --no-pager *"),
        vec![(Severity::Error, "pager-escape")]
    );
    assert_eq!(
        c("/usr/bin/journalctl ^--no-pager( --[a-z-]+=[0-9a-z]+)?$"),
        vec![(Severity::Error, "journal-tamper")]
    );
}

#[test]
fn check_command_regex_path() {
    let f = codes(&check_command("^/usr/s?bin/(qm|pct)$ ^list$"));
    assert_eq!(f, vec![(Severity::Warning, "regex-path")]);
    let f = codes(&check_command("^/usr/bin/(ba)?sh$"));
    assert!(f.contains(&(Severity::Error, "shell")), "{f:?}");
}

#[test]
fn sudo_l_output_uses_the_same_checks() {
    // What the preflight will see: `sudo -ll` lists each command on a TAB-indented line.
    let recommended = shared("07_recommended_ll_COLUMNS100000.stdout");
    let cmds: Vec<&str> = recommended
        .lines()
        .filter_map(|l| l.strip_prefix('\t'))
        .collect();
    assert_eq!(cmds.len(), 15);
    for cmd in cmds {
        assert!(
            check_command(cmd).is_empty(),
            "{cmd}: {:?}",
            check_command(cmd)
        );
    }
    // `sudo -l` of the published rules: `    (ALL) NOPASSWD: /usr/sbin/qm *`.
    let published = shared("02_published_rules_fixed_defaults.stdout");
    let errors: Vec<String> = published
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(ALL) NOPASSWD: "))
        .filter(|cmd| has_errors(&check_command(cmd)))
        .map(String::from)
        .collect();
    for expected in [
        "/usr/sbin/qm *",
        "/usr/bin/find *",
        "/usr/bin/ip *",
        "/usr/bin/mount *",
        "/usr/bin/journalctl *",
    ] {
        assert!(
            errors.iter().any(|e| e == expected),
            "{expected} not an error: {errors:?}"
        );
    }
    assert!(!errors.iter().any(|e| e == "/usr/bin/uptime *"));
    // And the lint of the file agrees with check_command on every command.
    let file = lint(&shared("published.sudoers"));
    for (i, line) in shared("published.sudoers").lines().enumerate() {
        if let Some(cmd) = line.strip_prefix("zen-agent ALL=(ALL) NOPASSWD: ") {
            let direct: BTreeSet<&str> = check_command(cmd).iter().map(|f| f.code).collect();
            let in_file: BTreeSet<&str> = file
                .iter()
                .filter(|f| f.line == i + 1)
                .map(|f| f.code)
                .collect();
            assert!(
                direct.is_subset(&in_file),
                "line {}: {direct:?} vs {in_file:?}",
                i + 1
            );
        }
    }
}

#[test]
fn continuation_and_alias_expansion() {
    let text = "Defaults:bot log_input, log_output\n\
                Cmnd_Alias GUESTS = /usr/sbin/qm ^list$, \\\n    /usr/sbin/pct *, \\\n    /usr/sbin/qm ^status [1-9][0-9]{2,8}$\n\
                # a comment\n\
                Cmnd_Alias BOTH = GUESTS, /usr/bin/uptime \"\"\n\
                bot ALL = (root) NOPASSWD: NOEXEC: BOTH\n";
    // The rules are bot's: judged for zen-agent (the default) they are information only.
    assert!(!has_errors(&lint(text)), "{}", dump(&lint(text)));
    assert!(
        lint(text)
            .iter()
            .all(|f| f.severity == Severity::Info || f.code == "all-users"),
        "{}",
        dump(&lint(text))
    );
    let f = lint_for(text, &Principal::new("bot"));
    // The alias member is flagged where the alias starts (line 2), the tag where it's used.
    assert!(has(&f, 2, Severity::Error, "wildcard-args"), "{}", dump(&f));
    assert!(
        f.iter()
            .find(|x| x.line == 2)
            .unwrap()
            .source
            .contains("/usr/sbin/qm ^status [1-9][0-9]{2,8}$")
    );
    assert!(
        has(&f, 7, Severity::Warning, "noexec-breaks-pve"),
        "{}",
        dump(&f)
    );
    assert!(
        has(&f, 7, Severity::Info, "noexec-tag"),
        "uptime: {}",
        dump(&f)
    );
    assert_eq!(
        f.iter().filter(|x| x.code == "wildcard-args").count(),
        1,
        "{}",
        dump(&f)
    );
    assert!(
        !f.iter()
            .any(|x| x.code.starts_with("no-log") || x.code == "parse-error"),
        "{}",
        dump(&f)
    );
}

#[test]
fn commas_inside_regexes_and_escapes_do_not_split() {
    assert_eq!(
        split_commands(
            "/usr/sbin/qm ^status [1-9][0-9]{2,8}$, /usr/sbin/pct ^set [0-9]+ --tags [a-z\\,;]+$"
        ),
        vec![
            "/usr/sbin/qm ^status [1-9][0-9]{2,8}$",
            "/usr/sbin/pct ^set [0-9]+ --tags [a-z\\,;]+$"
        ]
    );
    assert_eq!(
        split_commands("/usr/bin/echo a\\,b, /usr/bin/uptime \"\""),
        vec!["/usr/bin/echo a\\,b", "/usr/bin/uptime \"\""]
    );
    let text =
        "u ALL=(root) NOPASSWD: /usr/sbin/qm ^status [1-9][0-9]{2,8}$, /usr/bin/echo a\\,b\n";
    let Ok(Entry::Spec(spec)) = parse_entry(text.trim()) else {
        panic!()
    };
    let cmnds: Vec<String> = spec.privileges[0]
        .iter()
        .map(|i| i.cmnd.display())
        .collect();
    assert_eq!(
        cmnds,
        vec!["/usr/sbin/qm ^status [1-9][0-9]{2,8}$", "/usr/bin/echo a,b"]
    );
}

#[test]
fn parses_runas_tags_and_host_separators() {
    let Ok(Entry::Spec(spec)) = parse_entry(
        "alice, bob ALL = (ALL : ALL) NOPASSWD : LOG_INPUT: /usr/bin/uptime \"\" : db1 = PASSWD: /usr/bin/df -h",
    ) else {
        panic!()
    };
    assert_eq!(spec.users, vec!["alice", "bob"]);
    assert_eq!(spec.privileges.len(), 2);
    let first = &spec.privileges[0][0];
    assert_eq!(
        first.runas,
        Some(Runas {
            users: vec!["ALL".into()],
            groups: vec!["ALL".into()]
        })
    );
    assert_eq!(first.tags, vec!["NOPASSWD", "LOG_INPUT"]);
    assert_eq!(
        first.cmnd,
        Cmnd::Path {
            path: "/usr/bin/uptime".into(),
            args: Args::Empty
        }
    );
    assert_eq!(spec.privileges[1][0].cmnd.display(), "/usr/bin/df -h");
    // A uid is not a comment.
    assert_eq!(
        strip_comment("#1000 ALL = /usr/bin/df # note"),
        "#1000 ALL = /usr/bin/df "
    );
}

#[test]
fn root_rules_and_stock_sudoers() {
    let f = lint("root\tALL=(ALL:ALL) ALL\n#includedir /etc/sudoers.d\n");
    assert_eq!(codes(&f), vec![(Severity::Info, "include-not-followed")]);
    // Debian's stock group rule is information for the agent, which is not in group sudo…
    let f = lint("%sudo ALL=(ALL:ALL) ALL\n");
    assert!(has(&f, 1, Severity::Info, "all-commands"), "{}", dump(&f));
    assert!(!has_errors(&f), "{}", dump(&f));
    assert!(
        f[0].why.contains("a rule for %sudo, not zen-agent"),
        "{}",
        dump(&f)
    );
    // … and root for an account that is.
    let member = Principal::new("zen-agent").with_groups(["sudo".to_string()]);
    let f = lint_for("%sudo ALL=(ALL:ALL) ALL\n", &member);
    assert!(has(&f, 1, Severity::Error, "all-commands"), "{}", dump(&f));
    // Debian 12's whole stock file.
    let stock = "Defaults\tenv_reset\nDefaults\tmail_badpass\nDefaults\tsecure_path=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\nDefaults\tuse_pty\nroot\tALL=(ALL:ALL) ALL\n%sudo\tALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n";
    assert!(!has_errors(&lint(stock)), "{}", dump(&lint(stock)));
}

#[test]
fn serializes_lowercase() {
    let f = &check_command("/usr/sbin/qm *")[0];
    let v = serde_json::to_value(f).unwrap();
    assert_eq!(v["severity"], "error");
    assert_eq!(v["code"], "wildcard-args");
    assert_eq!(v["line"], 0);
    assert_eq!(v["source"], "/usr/sbin/qm *");
    assert_eq!(Severity::Warning.to_string(), "warning");
}

#[test]
fn every_tool_has_risk_facts_and_probes_match_themselves() {
    for t in Tool::ALL {
        let r = tool_risk(t);
        // A rule spelling a probe literally must be flagged.
        for p in r.probes {
            let f = check_command(&format!("{} {p}", t.path()));
            assert!(has_errors(&f), "{} {p}: {f:?}", t.path());
        }
    }
}

#[test]
fn ere_translation_matches_posix_intent() {
    let re = |r: &str| Regex::new(&ere_to_regex(r)).unwrap();
    assert!(
        re(r"^[a-z][a-z0-9_-]*\:backup/x\.vma [1-9][0-9]{2,8}$").is_match("local:backup/x.vma 100")
    );
    assert!(
        re(r"^[a-z0-9\,;_-]+$").is_match(r"a\b,c"),
        "POSIX: backslash is literal in brackets"
    );
    assert!(re(r"^--output-format\=json$").is_match("--output-format=json"));
    assert!(re(r"^[[:digit:]]+$").is_match("123"));
    assert!(!re(r"^[^ ]+$").is_match("a b"));
    let shape = ere_shape(
        r"^get /nodes/[a-z0-9][a-z0-9-]{0,62}/tasks/UPID:[A-Za-z0-9:_@.!-]{1,200}/status$",
    );
    assert!(shape.broad.is_empty() && !shape.top_alternation);
    assert_eq!(ere_shape(r"^a( [a-z-]+)*$").broad, vec!["( [a-z-]+)*"]);
    assert!(ere_shape(r"^a( --vmid [0-9]+)?$").broad.is_empty());
    // `-` and `=` inside a word that began earlier (a URL's query) make no option; at a word
    // start, after a skippable atom, or in a group opened at a word start, they do.
    assert!(
        ere_shape(r"^--url (https?://[a-z.]{1,9}([?][a-z&=-]{0,255})?)$")
            .broad
            .is_empty()
    );
    assert!(ere_shape(r"^--x=[a-z=-]{0,9}$").broad.is_empty());
    for re in [
        r"^--url [a-z=-]{0,9}$",
        r"^a (x)?[a-z=-]{0,9}$",
        r"^a x?[a-z=-]{0,9}$",
        r"^a ([a-z=-]{0,9})$",
        r"^a( |x)[a-z=-]{0,9}$",
        r"^a (xy|[a-z=-]{0,9})$",
    ] {
        assert_eq!(ere_shape(re).broad, vec!["[a-z=-]{0,9}"], "{re}");
    }
    assert!(!ere_shape(r"^(a|b)$").top_alternation);
}

#[test]
fn every_emitted_code_is_listed() {
    let mut all = lint(&shared("published.sudoers"));
    all.extend(lint(&shared("mixed.sudoers")));
    all.extend(lint(&own("overbroad.sudoers")));
    for f in &all {
        assert!(CODES.contains(&f.code), "{}", f.code);
    }
}

#[test]
fn rendered_sudoers_lints_clean() {
    use crate::host::sudoers::render::{RenderOptions, render};
    let text = render(&RenderOptions::new("zen-agent").unwrap());
    let f = lint(&text);
    let loud: Vec<_> = f.iter().filter(|x| x.severity != Severity::Info).collect();
    assert!(loud.is_empty(), "{}\n{text}", dump(&f));
}

#[test]
fn every_rendered_regex_is_checked() {
    // The linter must read pxagent's own rules, free-text classes (`<`, `>`, quotes) and
    // nested bounded repeats included; "review it by hand" for them would hide real findings.
    use crate::catalog::Profile;
    use crate::host::sudoers::render::{RenderOptions, render};
    for profile in [Profile::Readonly, Profile::Operator, Profile::Full] {
        let mut o = RenderOptions::new("zen-agent").unwrap();
        o.profile = profile;
        let text = render(&o);
        let f = lint(&text);
        let unchecked: Vec<_> = f.iter().filter(|x| x.code == "regex-unchecked").collect();
        assert!(unchecked.is_empty(), "{profile:?}: {}", dump(&f));
    }
}

#[test]
fn bracket_punctuation_translates_to_literals() {
    let re = ::regex::Regex::new(&ere_to_regex(r"^a[<>'`%@,;:]b$")).unwrap();
    for c in "<>'`%@,;:".chars() {
        assert!(re.is_match(&format!("a{c}b")), "{c}");
    }
    assert!(!re.is_match("a-b"));
}

/// Input logging may be off for pxagent's helper alone (its stdin is an ISO image whose
/// SHA-256 the logged command line names); for any other command it is an error, also when
/// the tag reaches it from the helper before it.
#[test]
fn only_the_helper_may_go_without_input_logging() {
    let file = |spec: &str| {
        format!(
            "Defaults:zen-agent log_input, log_output, iolog_dir=/var/log/sudo-io/%{{user}}\n\
             Defaults:zen-agent log_allowed, log_denied, logfile=/var/log/sudo-zen-agent.log, log_format=json\n\
             zen-agent ALL=(root) NOPASSWD: {spec}\n"
        )
    };
    let pvesh = "/usr/bin/pvesh ^get /version --output-format json$";
    let helper = "/usr/local/lib/pxagent/pxagent-helper ^iso-receive --max-used ([1-9]|[1-8][0-9]|90) [a-z][a-z0-9_.-]{0,62}[a-z0-9] x[.]iso [1-9][0-9]{0,12} [0-9a-f]{64}$";
    let no_input = |spec: &str| lint(&file(spec)).iter().any(|f| f.code == "no-log-input");
    assert!(!no_input(&format!("{pvesh}, NOLOG_INPUT: {helper}")));
    assert!(no_input(&format!("NOLOG_INPUT: {pvesh}")));
    assert!(no_input(&format!("NOLOG_INPUT: {helper}, {pvesh}")));
}
