//! What a person at a terminal sees: focused help, completions and the manual, `version`, colour,
//! refusal texts, `audit show` filters, and — on the bed — humane status views, snapshot
//! descriptions people type, and host data that cannot drive the terminal. The first half needs no
//! bed (`cargo test --test integration ux::local`), the second (`ux::live`) needs the bed like
//! `live::`.

mod local {
    use crate::support::{Home, PATH, bin, isolate, local, px};

    /// The host flags (connection and policy) as they appear in help.
    const HOST_FLAGS: &[&str] = &[
        "--host",
        "--port",
        "--identity",
        "--known-hosts",
        "--accept-new",
        "--timeout",
        "--config",
        "--policy",
        "--dry-run",
        "--confirm",
        "--approval",
        "--no-wait",
    ];

    #[test]
    fn local_commands_neither_list_nor_take_host_flags() {
        for cmd in [
            &["sudoers", "render"][..],
            &["sudoers", "lint"],
            &["catalog"],
            &["audit", "show"],
            &["completions"],
            &["man"],
            &["approve"],
            &["setup", "revoke"],
        ] {
            let mut args = cmd.to_vec();
            args.push("--help");
            let r = local(&args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
            for f in HOST_FLAGS {
                // `audit show --host GLOB` is a filter of its own (which records), not a host.
                if cmd == ["audit", "show"] && *f == "--host" {
                    continue;
                }
                assert!(
                    !r.stdout.contains(&format!("{f} ")),
                    "{args:?} lists {f}:\n{}",
                    r.stdout
                );
            }
            assert!(!r.stdout.contains("Connection options"), "{args:?}");
        }
        // Typed anyway, before or after the command: a usage error naming the flag.
        let r = local(&["-H", "pve1", "sudoers", "render"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("does not take --host"), "{}", r.stderr);
        assert_eq!(local(&["sudoers", "render", "--confirm", "x"]).code, 2);
        assert_eq!(local(&["catalog", "--identity", "k"]).code, 2);
    }

    #[test]
    fn host_commands_list_host_flags_under_their_own_headings() {
        let r = local(&["vm", "start", "--help"]);
        let conn = r.stdout.find("Connection options:").expect(&r.stdout);
        let pol = r.stdout.find("Policy options:").expect(&r.stdout);
        assert!(r.stdout[conn..pol].contains("--identity"), "{}", r.stdout);
        assert!(r.stdout[pol..].contains("--confirm"), "{}", r.stdout);
        let s = local(&["status", "--help"]).stdout;
        assert!(s.contains("--host") && !s.contains("--confirm"), "{s}");
        // Before or after the command, the value arrives.
        for args in [
            &[
                "-H",
                "zen-agent@127.0.0.1:1",
                "vm",
                "destroy",
                "100",
                "--dry-run",
                "-o",
                "json",
            ][..],
            &[
                "vm",
                "destroy",
                "100",
                "-H",
                "zen-agent@127.0.0.1:1",
                "--dry-run",
                "-o",
                "json",
            ],
        ] {
            let r = local(args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        }
    }

    /// Every command of the tree, as its words after `pxagent` (the root is `[]`), with the
    /// arguments its help lists as its own (no heading, not hidden) and the headings (in no
    /// particular order) of those it takes from its parents (`global`) or has under a heading.
    fn every_command(
        cmd: &clap::Command,
        path: Vec<String>,
        inherited: &[clap::Arg],
        out: &mut Vec<(Vec<String>, Vec<clap::Arg>, Vec<String>)>,
    ) {
        let args: Vec<clap::Arg> = inherited
            .iter()
            .filter(|a| !cmd.get_arguments().any(|o| o.get_id() == a.get_id()))
            .chain(cmd.get_arguments())
            .cloned()
            .collect();
        let own = cmd
            .get_arguments()
            .filter(|a| a.get_help_heading().is_none() && !a.is_hide_set())
            .cloned()
            .collect();
        let mut headings: Vec<String> = Vec::new();
        for h in args.iter().filter_map(|a| a.get_help_heading()) {
            if !headings.iter().any(|x| x == h) {
                headings.push(h.to_string());
            }
        }
        let passed: Vec<clap::Arg> = args.into_iter().filter(|a| a.is_global_set()).collect();
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            every_command(sub, p, &passed, out);
        }
        out.push((path, own, headings));
    }

    /// What a help line lists, when it is an entry (`  -H, --host <HOST>`, `      --vmid`,
    /// `  <VMID>`) rather than a description: `--host`, `--vmid`, `<VMID>`.
    fn entry(line: &str) -> Option<String> {
        let rest = line.strip_prefix("  ")?;
        // A positional: `<VMID>`, `<PROGRAM ARGS>...`, or an optional one `[COMMAND]...`.
        if let Some(name) = rest.strip_prefix(['<', '[']) {
            return name
                .find(['>', ']'])
                .map(|end| format!("<{}>", &name[..end]));
        }
        let rest = match rest.as_bytes() {
            [b'-', c, b',', b' ', ..] if *c != b'-' => &rest[4..],
            _ => rest.strip_prefix("    ")?,
        };
        rest.starts_with("--")
            .then(|| rest.split([' ', '=', '.']).next().unwrap().to_string())
    }

    #[test]
    fn every_help_lists_own_options_then_host_headings_then_global_ones() {
        use pxagent::cli::args::{CONNECTION_HEADING, GLOBAL_HEADING, POLICY_HEADING};
        let mut all = Vec::new();
        every_command(&pxagent::cli::command(), Vec::new(), &[], &mut all);
        assert!(all.len() > 100, "{} commands", all.len());
        let home = Home::new();
        let mut with_host_flags: Vec<String> = Vec::new();
        for (path, own, headings) in &all {
            // The headings a command takes come in this order, and only these exist.
            let order = [CONNECTION_HEADING, POLICY_HEADING, GLOBAL_HEADING];
            assert!(
                headings.iter().all(|h| order.contains(&h.as_str())),
                "{path:?}: {headings:?}"
            );
            assert!(headings.iter().any(|h| h == GLOBAL_HEADING), "{path:?}");
            if headings.iter().any(|h| h == CONNECTION_HEADING) {
                with_host_flags.push(path.join(" "));
            }
            let mut long_reaches = false;
            for flag in ["--help", "-h"] {
                let mut words: Vec<&str> = path.iter().map(String::as_str).collect();
                words.push(flag);
                let r = home.px().args(&words).run();
                assert_eq!(r.code, 0, "{words:?}: {}", r.stderr);
                let help = &r.stdout;
                // Where each heading starts, in the order of `order`, absent ones left out.
                let at: Vec<(usize, &str)> = order
                    .iter()
                    .filter_map(|h| help.find(&format!("\n{h}:\n")).map(|i| (i, *h)))
                    .collect();
                let shown: Vec<&str> = at.iter().map(|(_, h)| *h).collect();
                if flag == "--help" {
                    long_reaches = shown.contains(&CONNECTION_HEADING);
                }
                if flag == "-h" {
                    // The short help fits a screen: the command's own arguments, and the
                    // shared options summarised in one line where the command reaches a host;
                    // `--help` lists them all.
                    assert!(shown.is_empty(), "{words:?}: -h shows {shown:?}\n{help}");
                    let is_op = pxagent::catalog::OPS
                        .iter()
                        .any(|o| o.cli.iter().eq(path.iter()));
                    assert!(
                        !is_op || help.lines().count() <= 45,
                        "{words:?}: -h is {} lines\n{help}",
                        help.lines().count()
                    );
                    let reaches = long_reaches;
                    let summary = help.contains("Host and output: -H HOST");
                    assert_eq!(
                        summary,
                        reaches && !help.contains("\nCommands:\n"),
                        "{words:?}\n{help}"
                    );
                    for a in own {
                        if let Some(l) = a.get_long() {
                            assert!(
                                help.contains(&format!("--{l}")),
                                "{words:?}: --{l} not in -h\n{help}"
                            );
                        }
                    }
                    continue;
                }
                let want: Vec<&str> = order
                    .into_iter()
                    .filter(|h| headings.iter().any(|x| x == h))
                    .collect();
                assert_eq!(shown, want, "{words:?}: the headings\n{help}");
                assert!(
                    at.windows(2).all(|w| w[0].0 < w[1].0),
                    "{words:?}: headings out of order\n{help}"
                );
                // The command's own arguments and options: all of them before the first
                // heading of flags it shares with other commands.
                let first_heading = at[0].0;
                let entries: Vec<(usize, String)> = help
                    .lines()
                    .scan(0, |pos, line| {
                        let here = *pos;
                        *pos += line.len() + 1;
                        Some((here, line))
                    })
                    .filter_map(|(pos, line)| entry(line).map(|e| (pos, e)))
                    .collect();
                let mut seen_own = 0;
                for a in own {
                    let name = match a.get_long() {
                        Some(l) => format!("--{l}"),
                        None => format!(
                            "<{}>",
                            a.get_value_names()
                                .and_then(|v| v.first())
                                .map(|v| v.to_string())
                                .unwrap_or_else(|| a.get_id().to_string().to_uppercase())
                        ),
                    };
                    let (pos, _) = entries
                        .iter()
                        .find(|(_, e)| *e == name)
                        .unwrap_or_else(|| panic!("{words:?}: {name} not listed\n{help}"));
                    assert!(
                        *pos < first_heading,
                        "{words:?}: own {name} after a heading\n{help}"
                    );
                    seen_own += 1;
                }
                // The global options, last: each listed after their heading.
                let global = at.last().unwrap().0;
                for g in ["--output", "--color", "--verbose"] {
                    let (pos, _) = entries
                        .iter()
                        .find(|(_, e)| e == g)
                        .unwrap_or_else(|| panic!("{words:?}: {g} not listed\n{help}"));
                    assert!(*pos > global, "{words:?}: {g} before its heading\n{help}");
                }
                assert_eq!(seen_own, own.len());
            }
        }
        // The walk reached the commands that take host flags: every catalog op and the others.
        let reach = pxagent::catalog::OPS
            .iter()
            .filter(|o| !o.is_step())
            .map(|o| o.cli.join(" "))
            .chain(["", "status", "preflight", "mcp", "batch", "persist status"].map(String::from));
        for p in reach {
            assert!(with_host_flags.contains(&p), "`pxagent {p}` not walked");
        }
    }

    #[test]
    fn environment_variables_never_break_a_local_command() {
        let home = Home::new();
        for args in [
            &["catalog"][..],
            &["sudoers", "render"],
            &["audit", "show"],
            &["completions", "bash"],
            &["man"],
            &["version", "--client"],
        ] {
            let r = home
                .px()
                .env("PXAGENT_HOST", "nowhere")
                .env("PXAGENT_PORT", "not-a-port")
                .env("PXAGENT_TIMEOUT", "forever")
                .env("PXAGENT_IDENTITY", "/nonexistent/key")
                .env("PXAGENT_KNOWN_HOSTS", "/nonexistent/known_hosts")
                .env("PXAGENT_CONFIG", "/nonexistent/config.yaml")
                .env("PXAGENT_POLICY", "/nonexistent/policy.yaml")
                .args(args)
                .run();
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        }
    }

    #[test]
    fn every_group_says_what_it_is_for_and_missing_options_are_named_together() {
        let top = local(&["--help"]).stdout;
        assert!(!top.contains("Operations"), "{top}");
        for g in ["backup", "iso", "template"] {
            let line = top
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{g} ")))
                .unwrap_or_else(|| panic!("no {g} in\n{top}"));
            assert!(line.split_whitespace().count() > 3, "{line}");
        }
        let r = local(&["vm", "create", "-o", "json"]);
        assert_eq!(r.code, 2);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("--name"), "{msg}");
        // An installer ISO or a cloud image (the vm.create-image variant): both ways are named.
        let r = local(&["vm", "create", "--name", "web", "-o", "json"]);
        assert_eq!(r.code, 2);
        let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(msg.contains("--iso") && msg.contains("--image"), "{msg}");
        let help = local(&["vm", "create", "--help"]).stdout;
        assert!(
            help.contains("Usage: pxagent vm create [OPTIONS] --name <NAME>")
                && help.contains("op vm.create-image"),
            "{help}"
        );
    }

    #[test]
    fn completions_are_valid_shell_and_the_manual_is_roff() {
        let home = Home::new();
        let bash = home.px().args(["completions", "bash"]).run();
        assert_eq!(bash.code, 0, "{}", bash.stderr);
        assert!(bash.stdout.contains("_pxagent") && bash.stdout.contains("sudoers"));
        let file = home.write("pxagent.bash", bash.stdout.as_bytes());
        let check = std::process::Command::new("bash")
            .args(["-n", &file])
            .current_dir(home.path())
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "bash -n: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        for shell in ["zsh", "fish", "elvish", "powershell"] {
            let r = local(&["completions", shell]);
            assert_eq!(r.code, 0, "{shell}");
            assert!(
                r.stdout.contains("pxagent") && r.stdout.len() > 1000,
                "{shell}"
            );
        }
        assert_eq!(local(&["completions", "tcsh"]).code, 2);

        let man = local(&["man"]);
        assert_eq!(man.code, 0, "{}", man.stderr);
        for part in [
            ".TH pxagent 1",
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH SUBCOMMANDS",
            ".SH \"ALL COMMANDS\"",
        ] {
            assert!(man.stdout.contains(part), "{part} missing");
        }
        assert!(man.stdout.contains("\\fBpxagent vm start\\fR"));
        // groff reads it without a warning, and the text is there.
        let page = home.write("pxagent.1", man.stdout.as_bytes());
        let out = std::process::Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", &page])
            .current_dir(home.path())
            .env("PATH", PATH)
            .output()
            .expect("groff (groff-base; scripts/lib/deps.sh installs it)");
        assert!(out.status.success());
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(warnings.trim().is_empty(), "groff: {warnings}");
        // grotty's bold is overstrike ("N\bN"): read the plain text.
        let text = regex::Regex::new(".\u{8}")
            .unwrap()
            .replace_all(&String::from_utf8_lossy(&out.stdout), "")
            .into_owned();
        assert!(
            text.contains("pxagent sudoers render") && text.contains("-H, --host"),
            "{text}"
        );
        let sub = local(&["man", "vm", "start"]);
        assert!(
            sub.stdout.contains(".TH pxagent-vm-start 1"),
            "{}",
            &sub.stdout[..200.min(sub.stdout.len())]
        );
        assert_eq!(local(&["man", "vm", "fly"]).code, 2);
    }

    #[test]
    fn version_client_needs_no_host() {
        let r = local(&["version", "--client", "-o", "json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            r.json()["data"]["client"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        assert!(r.json()["data"].get("server").is_none());
        let t = local(&["version", "--client"]);
        assert!(t.stdout.starts_with("Client: pxagent "), "{}", t.stdout);
        // Without --client it reaches the host: no host named is the usual error, and the
        // client part is still shown.
        let r = local(&["version"]);
        assert_ne!(r.code, 0);
        assert!(r.stdout.starts_with("Client: pxagent "), "{}", r.stdout);
    }

    /// An audit log with a refused destroy and an allowed start, written as pxagent writes it.
    fn audit_home() -> Home {
        let home = Home::new();
        let dir = home.state_dir().join("pxagent");
        std::fs::create_dir_all(&dir).unwrap();
        let rec = |seq: u32, time: &str, op: &str, argv: &[&str], decision: &str, code: u8| {
            serde_json::json!({"seq":seq,"time":time,"host":"zen-agent@192.0.2.10:22","account":"zen-agent","op":op,
                "argv":argv,"decision":decision,"phrase":null,"exit_code":code,"duration_ms":5,"upid":null,"via":"cli",
                "error":null,"prev":"0"})
            .to_string()
        };
        let start = [
            "sudo",
            "-n",
            "/usr/bin/pvesh",
            "create",
            "/nodes/pve1/qemu/100/status/start",
            "--output-format",
            "json",
        ];
        let snap = [
            "sudo",
            "-n",
            "/usr/bin/pvesh",
            "create",
            "/nodes/pve1/qemu/101/snapshot",
            "--snapname",
            "pre-up",
            "--output-format",
            "json",
        ];
        let destroy = ["sudo", "-n", "/usr/sbin/qm", "destroy", "102"];
        let lines = [
            rec(
                1,
                "2026-11-30T06:00:00.000Z",
                "vm.start",
                &start,
                "allowed",
                0,
            ),
            rec(
                2,
                "2026-11-30T07:00:00.000Z",
                "vm.snapshot",
                &snap,
                "allowed",
                0,
            ),
            rec(
                3,
                "2026-11-30T08:00:00.000Z",
                "vm.destroy",
                &destroy,
                "refused",
                4,
            ),
        ];
        std::fs::write(dir.join("audit.jsonl"), lines.join("\n") + "\n").unwrap();
        home
    }

    #[test]
    fn audit_show_filters_and_names_targets() {
        let home = audit_home();
        let show = |args: &[&str]| {
            let mut a = vec!["audit", "show"];
            a.extend_from_slice(args);
            let r = home.px().env("TZ", "UTC").args(&a).run();
            assert_eq!(r.code, 0, "{a:?}: {}", r.stderr);
            r
        };
        let r = show(&["--op", "vm.start"]);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines.len(), 2, "{}", r.stdout);
        assert!(lines[0].contains("TARGET"), "{}", r.stdout);
        assert!(
            lines[1].contains("2026-11-30 06:00:00") && lines[1].contains("vm.start  100 "),
            "{}",
            r.stdout
        );
        let r = show(&["--op", "vm.s*", "-o", "json"]);
        let data = r.json()["data"].clone();
        assert_eq!(data.as_array().unwrap().len(), 2);
        assert_eq!(
            data[1]["target"],
            serde_json::json!({"vmid": 101, "snapshot": "pre-up"})
        );
        assert!(
            show(&["--vmid", "101"])
                .stdout
                .contains("101 snapshot pre-up")
        );
        let refused = show(&["--decision", "refused"]).stdout;
        assert!(
            refused.contains("vm.destroy") && !refused.contains("vm.start"),
            "{refused}"
        );
        let window = show(&[
            "--since",
            "2026-11-30T06:30:00Z",
            "--until",
            "2026-11-30T07:30:00Z",
        ])
        .stdout;
        assert!(
            window.contains("vm.snapshot")
                && !window.contains("vm.destroy")
                && !window.contains("vm.start "),
            "{window}"
        );
        assert!(
            show(&["--host", "*@198.51.100.1:*"])
                .stdout
                .contains("no audit records match")
        );
        assert_eq!(
            home.px()
                .args(["audit", "show", "--decision", "maybe"])
                .run()
                .code,
            2
        );
        assert_eq!(
            home.px()
                .args(["audit", "show", "--until", "soon"])
                .run()
                .code,
            2
        );
    }

    #[test]
    fn colour_follows_the_flag_the_environment_and_the_terminal() {
        let home = audit_home();
        let red = "\u{1b}[31mrefused\u{1b}[0m";
        let run = |env: &[(&str, &str)], args: &[&str]| {
            let mut p = home.px();
            for (k, v) in env {
                p = p.env(k, v);
            }
            let mut a = vec!["audit", "show"];
            a.extend_from_slice(args);
            p.args(&a).run()
        };
        assert!(run(&[], &["--color", "always"]).stdout.contains(red));
        assert!(
            !run(&[], &[]).stdout.contains('\u{1b}'),
            "a pipe gets no colour"
        );
        assert!(run(&[("CLICOLOR_FORCE", "1")], &[]).stdout.contains(red));
        assert!(
            !run(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], &[])
                .stdout
                .contains('\u{1b}')
        );
        assert!(
            !run(&[("CLICOLOR_FORCE", "1")], &["--color", "never"])
                .stdout
                .contains('\u{1b}')
        );
        assert!(
            !run(&[("CLICOLOR_FORCE", "1")], &["-o", "json"])
                .stdout
                .contains("\\u001b")
        );
        assert!(
            !run(&[], &["--color", "always", "-o", "json"])
                .stdout
                .contains('\u{1b}')
        );
        // At a terminal (`script` gives pxagent a pseudo-terminal): colour, unless TERM=dumb
        // or NO_COLOR.
        let at_terminal = |term: &str, no_color: bool| {
            let mut c = std::process::Command::new("script");
            isolate(&mut c, home.path()).env("TERM", term);
            if no_color {
                c.env("NO_COLOR", "1");
            }
            let cmd = format!("{} audit show </dev/null", bin().display());
            let out = c.args(["-qefc", &cmd, "/dev/null"]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert!(at_terminal("xterm", false).contains(red));
        assert!(!at_terminal("dumb", false).contains('\u{1b}'));
        assert!(!at_terminal("xterm", true).contains('\u{1b}'));
    }

    #[test]
    /// (`storage remove` asks before it connects: it has nothing to check on the host first.)
    fn a_refusal_at_a_terminal_names_the_confirm_flag() {
        let home = Home::new();
        let cmd = format!(
            "{} -H zen-agent@127.0.0.1:1 storage remove local </dev/null",
            bin().display()
        );
        let mut c = std::process::Command::new("script");
        isolate(&mut c, home.path()).env("TERM", "dumb");
        let out = c.args(["-qefc", &cmd, "/dev/null"]).output().unwrap();
        let screen = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{screen}");
        assert!(screen.contains("Reply `yes remove local`"), "{screen}");
        assert!(
            screen.contains("run the same command again with --confirm 'yes remove local'"),
            "{screen}"
        );
        // Without a terminal (an agent), the reference text alone.
        let r = px()
            .args(["-H", "zen-agent@127.0.0.1:1", "storage", "remove", "local"])
            .run();
        assert_eq!(r.code, 4);
        assert!(!r.stderr.contains("--confirm 'yes"), "{}", r.stderr);
    }
}

mod live {
    use crate::support::{Home, assert_not_sent, fresh, lock, sim, sudo_log_len};

    /// No 9+-digit number — a raw byte count or epoch — in a human view.
    fn no_raw_numbers(what: &str, text: &str) {
        // A number standing alone (a hash such as a config's digest has digit runs inside it).
        let re = regex::Regex::new(r"\b[0-9]{9,}\b").unwrap();
        let raw: Vec<&str> = text
            .lines()
            .filter(|l| re.is_match(l) && !l.contains("UPID:"))
            .collect();
        assert!(raw.is_empty(), "{what}: raw numbers in {raw:?}\n{text}");
    }

    #[test]
    fn status_views_are_humane() {
        let _g = lock();
        let home = Home::new();
        let r = home.on_bed(&["vm", "status", "100"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.starts_with("name "), "{}", r.stdout);
        assert!(
            r.stdout.contains("GiB") || r.stdout.contains("MiB"),
            "{}",
            r.stdout
        );
        no_raw_numbers("vm status", &r.stdout);
        let j = home.on_bed(&["vm", "status", "100", "-o", "json"]).data();
        assert!(
            j["maxmem"].as_u64().unwrap() > 100_000_000,
            "JSON keeps the raw value: {j}"
        );
        for args in [
            &["ct", "status", "200"][..],
            &["node", "status", "pve1"],
            &["node", "list"],
            &["vm", "list"],
            &["vm", "config", "100"],
            &["storage", "list"],
            &["task", "list"],
            &["status"],
        ] {
            let r = home.on_bed(args);
            assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
            no_raw_numbers(&args.join(" "), &r.stdout);
        }
        // A task of our own, so that its status is always there to show.
        let name = fresh("ux");
        let snap = home.on_bed(&["vm", "snapshot", "100", &name, "-o", "json"]);
        assert_eq!(snap.code, 0, "{}", snap.stderr);
        let upid = snap.data()["upid"].as_str().unwrap().to_string();
        let r = home.on_bed(&["task", "status", &upid]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.starts_with("status "), "{}", r.stdout);
        no_raw_numbers("task status", &r.stdout);
        let del = home.on_bed(&[
            "vm",
            "delsnapshot",
            "100",
            &name,
            "--confirm",
            &format!("yes delsnapshot 100 {name}"),
        ]);
        assert_eq!(del.code, 0, "{}", del.stderr);
    }

    #[test]
    fn version_shows_both_sides() {
        let _g = lock();
        let r = Home::new().on_bed(&["version"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert!(lines[0].starts_with("Client: pxagent "), "{}", r.stdout);
        assert!(lines[1].starts_with("Server: Proxmox VE "), "{}", r.stdout);
        let d = Home::new().on_bed(&["version", "-o", "json"]).data();
        assert!(
            d["server"]["version"].is_string() && d["client"]["version"].is_string(),
            "{d}"
        );
    }

    #[test]
    fn a_description_people_type_round_trips() {
        let _g = lock();
        let home = Home::new();
        let d = "it's the \"good\" one, finally! (v2; 50% done?)";
        let r = home.on_bed(&["vm", "snapshot", "100", "uxdesc", "--description", d]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let list = home
            .on_bed(&["vm", "snapshots", "100", "-o", "json"])
            .data();
        let snap = list
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "uxdesc")
            .cloned();
        assert_eq!(snap.unwrap()["description"], d);
        assert!(home.on_bed(&["vm", "snapshots", "100"]).stdout.contains(d));
        // The audit trail names the target.
        let a = home
            .px()
            .args(["audit", "show", "--op", "vm.snapshot"])
            .run();
        assert!(a.stdout.contains("100 snapshot uxdesc"), "{}", a.stdout);
        let r = home.on_bed(&[
            "vm",
            "delsnapshot",
            "100",
            "uxdesc",
            "--confirm",
            "yes delsnapshot 100 uxdesc",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        // Refused before sending: a description with `$`.
        let before = sudo_log_len();
        assert_eq!(
            home.on_bed(&[
                "vm",
                "snapshot",
                "100",
                "uxbad",
                "--description",
                "costs $5"
            ])
            .code,
            2
        );
        assert_not_sent(before, &["uxbad"]);
    }

    #[test]
    fn audit_show_op_names_the_targets() {
        let _g = lock();
        let home = Home::new();
        for id in ["100", "101"] {
            let _ = home.on_bed(&["vm", "start", id]);
        }
        let r = home.px().args(["audit", "show", "--op", "vm.start"]).run();
        assert_eq!(r.code, 0, "{}", r.stderr);
        let rows: Vec<&str> = r.stdout.lines().skip(1).collect();
        assert_eq!(rows.len(), 2, "{}", r.stdout);
        assert!(
            rows[0].contains("vm.start  100 ") && rows[1].contains("vm.start  101 "),
            "{}",
            r.stdout
        );
        let only = home
            .px()
            .args(["audit", "show", "--vmid", "101", "-o", "json"])
            .run()
            .json();
        assert_eq!(only["data"].as_array().unwrap().len(), 1, "{only}");
    }

    #[test]
    fn host_data_cannot_drive_the_terminal() {
        let _g = lock();
        let home = Home::new();
        // A snapshot made on the host itself, with a terminal sequence in its description.
        let evil = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}";
        sim(&[
            "pvesh",
            "create",
            "/nodes/pve1/qemu/100/snapshot",
            "--snapname",
            "uxevil",
            "--description",
            evil,
            "--output-format",
            "json",
        ]);
        let r = home.on_bed(&["vm", "snapshots", "100"]);
        sim(&[
            "pvesh",
            "delete",
            "/nodes/pve1/qemu/100/snapshot/uxevil",
            "--output-format",
            "json",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            !r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{202e}'),
            "{:?}",
            r.stdout
        );
        assert!(
            r.stdout.contains("evil\\u{1b}]0;pwned\\u{7}"),
            "{}",
            r.stdout
        );
        let j = home.on_bed(&["vm", "snapshots", "100", "-o", "json"]);
        assert_eq!(j.code, 0);
        // An error text from the host, with the same sequence.
        crate::support::fault(&format!(
            r#"{{"match":"qemu/101/status/current","action":"fail","message":"{}"}}"#,
            "boom\\u001b]0;pwned\\u0007"
        ));
        let r = home.on_bed(&["vm", "status", "101"]);
        crate::support::clear_faults();
        assert_ne!(r.code, 0);
        assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
        assert!(r.stderr.contains("boom\\u{1b}]0;pwned"), "{}", r.stderr);
    }

    #[test]
    fn guest_output_is_escaped_at_a_terminal_and_raw_into_a_pipe() {
        let _g = lock();
        let home = Home::new();
        if crate::support::status_of(100) != "running" {
            assert_eq!(home.on_bed(&["vm", "start", "100"]).code, 0);
        }
        let script = r"printf 'a\033]0;pwned\007b\n'";
        // Into a pipe: the user's bytes, as the guest wrote them; JSON: raw in the document.
        let piped = home.on_bed(&["vm", "exec", "100", "--", "sh", "-c", script]);
        assert_eq!(piped.code, 0, "{}", piped.stderr);
        assert_eq!(piped.stdout, "a\u{1b}]0;pwned\u{7}b\n");
        let j = home
            .on_bed(&["-o", "json", "vm", "exec", "100", "--", "sh", "-c", script])
            .data();
        assert_eq!(j["stdout"], "a\u{1b}]0;pwned\u{7}b\n");
        // At a terminal: escaped.
        let mut c = std::process::Command::new("script");
        crate::support::bed_env(crate::support::isolate(&mut c, home.path()).env("TERM", "dumb"));
        let cmd = format!(
            "{} vm exec 100 -- sh -c {} </dev/null",
            crate::support::bin().display(),
            pxagent::base::text::quote_word(script)
        );
        let out = c.args(["-qefc", &cmd, "/dev/null"]).output().unwrap();
        let screen = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{screen}");
        assert!(!screen.contains('\u{1b}'), "{screen:?}");
        assert!(screen.contains("a\\u{1b}]0;pwned\\u{7}b"), "{screen:?}");
    }
}

/// Under a pseudo-terminal (as many agent harnesses run shells), a confirm op
/// without its phrase never waits on a prompt when the caller said so — `-o json`, `--no-input`
/// or `PXAGENT_NO_INPUT=1` — but answers at once with the refusal (exit 4). `script` gives the
/// command a terminal for stdin, stdout and stderr.
mod no_hidden_prompt {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use crate::support::{Home, bed_env, bin, isolate, lock};

    fn under_a_pty(
        home: &Home,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Option<i32>, String, Duration) {
        let line: Vec<String> = std::iter::once(bin().to_string_lossy().into_owned())
            .chain(args.iter().map(|a| a.to_string()))
            .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
            .collect();
        let mut c = Command::new("timeout");
        isolate(&mut c, home.path());
        bed_env(&mut c);
        for (k, v) in env {
            c.env(k, v);
        }
        // `timeout` ends a prompt that waits; `script -e` passes on the command's exit code.
        c.args(["20", "script", "-qec", &line.join(" "), "/dev/null"])
            .stdin(std::process::Stdio::null());
        let t = Instant::now();
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            t.elapsed(),
        )
    }

    #[test]
    fn json_no_input_and_the_variable_each_refuse_at_once_under_a_terminal() {
        let _g = lock();
        let home = Home::new();
        for (args, env) in [
            (&["-o", "json", "vm", "destroy", "103"][..], &[][..]),
            (&["--no-input", "vm", "destroy", "103"][..], &[][..]),
            (
                &["vm", "destroy", "103"][..],
                &[("PXAGENT_NO_INPUT", "1")][..],
            ),
        ] {
            let (code, out, took) = under_a_pty(&home, args, env);
            assert_eq!(code, Some(4), "{args:?} {env:?}: {out}");
            assert!(
                took < Duration::from_secs(15),
                "{args:?} {env:?} waited {took:?}"
            );
            assert!(out.contains("yes destroy 103"), "{args:?}: {out}");
            assert!(
                !out.contains("Type `yes destroy 103`"),
                "{args:?} prompted: {out}"
            );
        }
    }
}

/// The phrase is the human's, and every CLI answer says so. A missing phrase
/// and a wrong one are different kinds; the JSON carries `phrase_from` and an instruction, the
/// text mode without a terminal a `hint:` line with the same words; nothing tells the caller to
/// pass the phrase on its own. Nothing is sent in any case.
mod the_phrase_is_the_humans {
    use serde_json::Value;

    use crate::support::{Home, assert_not_sent, lock, sudo_log_len};

    #[test]
    fn missing_and_wrong_phrases_are_told_apart_and_say_whose_the_phrase_is() {
        let _g = lock();
        let home = Home::new();
        let at = sudo_log_len();
        for op in [&["vm", "destroy", "103"][..], &["ct", "destroy", "201"][..]] {
            let mut args = vec!["-o", "json"];
            args.extend_from_slice(op);
            let r = home.on_bed(&args);
            assert_eq!(r.code, 4, "{op:?}: {}", r.stdout);
            let e: Value = r.json()["error"].clone();
            assert_eq!(e["kind"], "confirmation_required", "{e}");
            assert_eq!(e["phrase_from"], "user", "{e}");
            let phrase = e["phrase"].as_str().unwrap().to_string();
            let instruction = e["instruction"].as_str().unwrap();
            assert!(instruction.contains("must come from the human user"), "{e}");
            assert!(!instruction.contains(&phrase), "{e}");
            // A wrong phrase: its own kind, the same owner.
            let mut wrong = args.clone();
            let given = format!("{phrase}0");
            wrong.extend(["--confirm", &given]);
            let r = home.on_bed(&wrong);
            assert_eq!(r.code, 4, "{op:?}: {}", r.stdout);
            let e: Value = r.json()["error"].clone();
            assert_eq!(e["kind"], "confirmation_mismatch", "{e}");
            assert_eq!(e["phrase_from"], "user", "{e}");
            assert!(
                e["instruction"]
                    .as_str()
                    .unwrap()
                    .contains("Ask them again"),
                "{e}"
            );
            // Text mode with no terminal: the same instruction, no `--confirm` to copy.
            let r = home.on_bed(op);
            assert_eq!(r.code, 4);
            assert!(
                r.stderr
                    .contains("hint: Nothing was sent. The phrase must come from the human user"),
                "{}",
                r.stderr
            );
            assert!(!r.stderr.contains("--confirm '"), "{}", r.stderr);
        }
        assert_not_sent(at, &["/status/stop", "delete /nodes"]);
    }
}

/// A confirm op checks what pxagent can know before it asks for the phrase
/// — a destroy that Proxmox would refuse (running, protected, an HA resource without --purge),
/// a rollback or snapshot removal of a snapshot that is not there — and asks only for what can
/// run, saying what goes with the guest and what stays. Nothing but reads is sent.
mod check_before_asking {
    use serde_json::Value;

    use crate::support::{Home, assert_not_sent, lock, sim, sudo_log_len};

    fn error(home: &Home, args: &[&str], code: i32) -> Value {
        let mut argv = vec!["-o", "json"];
        argv.extend_from_slice(args);
        let r = home.on_bed(&argv);
        assert_eq!(r.code, code, "{args:?}: {}", r.stdout);
        r.json()["error"].clone()
    }

    #[test]
    fn a_phrase_is_asked_only_for_what_can_run() {
        let _g = lock();
        let home = Home::new();
        let at = sudo_log_len();
        // VM 100 runs: Proxmox would refuse the destroy after the phrase, so none is asked.
        let e = error(&home, &["vm", "destroy", "100"], 1);
        assert_eq!(e["kind"], "wrong_state", "{e}");
        assert!(e["message"].as_str().unwrap().contains("is running"), "{e}");
        assert!(e.get("phrase").is_none(), "{e}");
        // VM 103 is stopped: the phrase is asked for, with what goes and what stays.
        let e = error(&home, &["vm", "destroy", "103"], 4);
        assert_eq!(e["kind"], "confirmation_required", "{e}");
        let goes: Vec<&str> = e["goes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(goes.iter().any(|g| g.starts_with("disk scsi0 (")), "{e}");
        assert!(e["stays"][0].as_str().unwrap().contains("backups"), "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("with it go: disk scsi0"),
            "{e}"
        );
        // VM 104 is an HA resource: only with --purge, which the question then names.
        let e = error(&home, &["vm", "destroy", "104"], 1);
        assert_eq!(e["kind"], "wrong_state", "{e}");
        assert!(e["message"].as_str().unwrap().contains("--purge"), "{e}");
        let e = error(&home, &["vm", "destroy", "104", "--purge"], 4);
        assert!(
            e["goes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g.as_str().unwrap().contains("HA")),
            "{e}"
        );
        // A protected VM: the admin's protection is named, no phrase asked.
        sim(&[
            "pvesh",
            "set",
            "/nodes/pve3/qemu/103/config",
            "--protection",
            "1",
        ]);
        let e = error(&home, &["vm", "destroy", "103"], 1);
        sim(&[
            "pvesh",
            "set",
            "/nodes/pve3/qemu/103/config",
            "--protection",
            "0",
        ]);
        assert_eq!(e["kind"], "wrong_state", "{e}");
        assert!(e["message"].as_str().unwrap().contains("protected"), "{e}");
        // A snapshot that is not there: not found, before any phrase.
        for op in ["rollback", "delsnapshot"] {
            let e = error(&home, &["vm", op, "100", "nosuch"], 1);
            assert_eq!(e["kind"], "not_found", "{op}: {e}");
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .contains("has no snapshot 'nosuch'"),
                "{op}: {e}"
            );
        }
        let e = error(&home, &["ct", "destroy", "201"], 4);
        assert!(
            e["goes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g.as_str().unwrap().starts_with("disk rootfs (")),
            "{e}"
        );
        assert_not_sent(at, &["delete /nodes", "/rollback", "create /nodes"]);
    }
}
