//! Defaults entries judged: environment variables that reach a root process, tags turned
//! into options, and the log format.

use super::*;

/// Environment variables that turn a root command into the caller's code.
pub(super) const DANGEROUS_ENV: &[(&str, &str)] = &[
    (
        "LD_PRELOAD",
        "loads the caller's library into the root process",
    ),
    (
        "LD_LIBRARY_PATH",
        "makes the root process load the caller's libraries",
    ),
    (
        "LD_AUDIT",
        "loads the caller's library into the root process",
    ),
    (
        "PERL5OPT",
        "runs the caller's Perl code in qm, pct, pvesh … (they are Perl)",
    ),
    (
        "PERL5LIB",
        "loads the caller's Perl modules into qm, pct, pvesh …",
    ),
    (
        "PERLLIB",
        "loads the caller's Perl modules into qm, pct, pvesh …",
    ),
    ("PERL5DB", "runs the caller's Perl debugger code"),
    ("PYTHONPATH", "loads the caller's Python modules"),
    ("PYTHONSTARTUP", "runs the caller's Python code"),
    ("PYTHONHOME", "loads the caller's Python standard library"),
    ("RUBYLIB", "loads the caller's Ruby code"),
    ("RUBYOPT", "runs the caller's Ruby code"),
    ("NODE_OPTIONS", "runs the caller's JavaScript (`--require`)"),
    (
        "BASH_ENV",
        "makes every bash script source the caller's file",
    ),
    ("ENV", "makes sh scripts source the caller's file"),
    (
        "SHELLOPTS",
        "changes how root shell scripts run (`xtrace` + PS4)",
    ),
    ("PS4", "runs command substitutions under `set -x`"),
    ("IFS", "changes how root shell scripts split words"),
    ("GCONV_PATH", "loads the caller's iconv modules"),
    ("PAGER", "chooses the pager root commands start"),
    (
        "SYSTEMD_PAGER",
        "chooses the pager systemctl/journalctl start",
    ),
    ("LESSOPEN", "runs the caller's input preprocessor in less"),
    ("EDITOR", "chooses the editor root commands start"),
    ("VISUAL", "chooses the editor root commands start"),
    ("SUDO_EDITOR", "chooses the editor root commands start"),
    (
        "SYSTEMD_EDITOR",
        "chooses the editor `systemctl edit` starts",
    ),
    ("MANPAGER", "chooses the pager man starts"),
    ("GIT_PAGER", "chooses the pager git starts"),
    (
        "LESS",
        "passes options (and `+` commands) to every less root starts",
    ),
    ("LESSCLOSE", "runs the caller's postprocessor in less"),
    (
        "PERLDB_OPTS",
        "configures the Perl debugger (with PERL5OPT=-d)",
    ),
    (
        "PERL_UNICODE",
        "changes how qm, pct and pvesh read their input",
    ),
    (
        "PYTHONWARNINGS",
        "imports the caller's module (`action:message:category` names one)",
    ),
    (
        "PYTHONUSERBASE",
        "loads the caller's site-packages (usercustomize)",
    ),
    ("GEM_PATH", "loads the caller's Ruby gems"),
    ("GEM_HOME", "loads the caller's Ruby gems"),
    ("NODE_PATH", "loads the caller's JavaScript modules"),
    ("LUA_INIT", "runs the caller's Lua code"),
    ("LUA_PATH", "loads the caller's Lua modules"),
    ("LUA_CPATH", "loads the caller's Lua C modules"),
    ("TCLLIBPATH", "loads the caller's Tcl packages"),
    ("PHPRC", "loads the caller's php.ini (`auto_prepend_file`)"),
    ("PHP_INI_SCAN_DIR", "loads the caller's php.ini files"),
    (
        "JAVA_TOOL_OPTIONS",
        "passes `-javaagent:` and any option to every JVM",
    ),
    (
        "_JAVA_OPTIONS",
        "passes `-javaagent:` and any option to every JVM",
    ),
    (
        "JDK_JAVA_OPTIONS",
        "passes `-javaagent:` and any option to every JVM",
    ),
    (
        "OPENSSL_CONF",
        "loads the caller's OpenSSL config (engines and providers are code)",
    ),
    ("OPENSSL_ENGINES", "loads the caller's OpenSSL engines"),
    ("GIT_SSH", "runs the caller's program for git's SSH"),
    ("GIT_SSH_COMMAND", "runs the caller's command for git's SSH"),
    ("GIT_EXEC_PATH", "runs the caller's git subcommands"),
    (
        "GIT_CONFIG_GLOBAL",
        "loads the caller's git config (`core.pager`, hooks)",
    ),
    (
        "GIT_DIR",
        "points git at the caller's repository and its hooks",
    ),
    (
        "LD_DEBUG_OUTPUT",
        "writes the dynamic loader's debug output to a file the caller names",
    ),
    (
        "MALLOC_TRACE",
        "writes glibc's malloc trace to a file the caller names",
    ),
    (
        "HOME",
        "makes root commands read the caller's dotfiles (git's core.pager, Python's user site)",
    ),
    (
        "XDG_CONFIG_HOME",
        "makes root commands read the caller's configuration files",
    ),
];

/// What each rule tag is called as a Defaults option.
pub(super) fn tag_as_option(tag: &str) -> &'static str {
    match tag {
        "LOG_INPUT" => "log_input",
        "LOG_OUTPUT" => "log_output",
        "NOLOG_INPUT" => "!log_input",
        "NOLOG_OUTPUT" => "!log_output",
        "NOPASSWD" => "!authenticate",
        "PASSWD" => "authenticate",
        "NOEXEC" => "noexec",
        "EXEC" => "!noexec",
        "INTERCEPT" => "intercept",
        "NOINTERCEPT" => "!intercept",
        "SETENV" => "setenv",
        "NOSETENV" => "!setenv",
        "MAIL" => "mail_all_cmnds",
        "NOMAIL" => "!mail_all_cmnds",
        "FOLLOW" => "sudoedit_follow",
        _ => "!sudoedit_follow",
    }
}

pub(super) fn check_defaults(d: &DefaultsEntry, aliases: &Aliases) -> Vec<Finding> {
    let mut out = Vec::new();
    let head = match d.binding {
        Binding::Global => "Defaults".to_string(),
        b => {
            let sigil = match b {
                Binding::User => ':',
                Binding::Host => '@',
                Binding::Runas => '>',
                _ => '!',
            };
            format!("Defaults{sigil}{}", d.targets.join(","))
        }
    };
    if d.binding == Binding::Cmnd {
        for t in &d.targets {
            let t = t.trim_start_matches('!');
            if is_alias_name(t) && t != "ALL" {
                if !aliases.cmnd.contains_key(t) {
                    out.push(finding(
                        Severity::Warning,
                        "undefined-alias",
                        format!(
                            "`Defaults!{t}` names a Cmnd_Alias that is not defined in this file"
                        ),
                        format!("Define `Cmnd_Alias {t} = …`, or lint the file that defines it."),
                    ));
                }
            } else if !(t == "ALL" || t == "sudoedit" || t.starts_with('/') || t.starts_with('^')) {
                out.push(finding(
                    Severity::Error,
                    "defaults-bang-not-command",
                    format!(
                        "`Defaults!{t}`: after `!` sudo expects commands (a full path or a Cmnd_Alias), so `{t}` is a \
                         syntax error ('expected a fully-qualified path name') that every sudo call prints, and \
                         these options never take effect"
                    ),
                    format!("To set options for the account write `Defaults:{t} …` (a colon binds to users)."),
                ));
            }
        }
    }
    for o in &d.options {
        let valid_name =
            !o.name.is_empty() && o.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if !valid_name {
            if let Some(tag) = TAGS.iter().find(|t| **t == o.name) {
                out.push(finding(
                    Severity::Error,
                    "defaults-tag-as-option",
                    format!(
                        "`{tag}` is a tag for rules (`{tag}: /usr/sbin/qm …`), not a Defaults option: sudo rejects \
                         `{head} {}` and the setting never takes effect",
                        o.text
                    ),
                    format!(
                        "Use the Defaults option `{}` (e.g. `Defaults:zen-agent log_input, log_output`).",
                        tag_as_option(tag)
                    ),
                ));
            } else {
                out.push(finding(
                    Severity::Error,
                    "defaults-invalid-option",
                    format!("`{}` is not a sudoers option (options are lower-case words such as `log_output`)", o.text),
                    "Use an option from sudoers(5); check with `visudo -cf FILE`.",
                ));
            }
            continue;
        }
        match (o.name.as_str(), o.negated) {
            ("env_reset", true) => out.push(finding(
                Severity::Error,
                "env-not-reset",
                format!(
                    "`{head} !env_reset` hands the caller's environment to root commands: `PERL5OPT`/`PERL5LIB` run \
                     code inside qm, pct and pvesh (Perl), `LD_PRELOAD` inside anything"
                ),
                "Remove `!env_reset` (env_reset is sudo's default).",
            )),
            // env_check keeps a variable whose value has no `/` or `%`: `PERL5OPT=-Mstrict;system…`
            // passes that test, so a dangerous name there is as bad as in env_keep.
            ("env_keep" | "env_check", false) if !o.removes => {
                for var in o.value.split([' ', '\t', ',']).map(|v| v.trim_matches('"')).filter(|v| !v.is_empty()) {
                    // `VAR=value` in env_keep keeps VAR only with that value: still the variable.
                    let var = var.split('=').next().unwrap_or(var);
                    let hit = DANGEROUS_ENV.iter().find(|(name, _)| match var.strip_suffix('*') {
                        Some(prefix) => name.starts_with(prefix),
                        None => *name == var || (var.starts_with("LD_") && name.starts_with("LD_")),
                    });
                    if let Some((name, effect)) = hit {
                        out.push(finding(
                            Severity::Error,
                            "env-keep-dangerous",
                            format!(
                                "`{}` lets `{var}` through to root commands: {name} {effect}",
                                o.text
                            ),
                            format!("Remove `{var}` from {}.", o.name),
                        ));
                    }
                }
            }
            ("env_file" | "restricted_env_file", false) if o.has_value => out.push(finding(
                Severity::Error,
                "env-file",
                format!(
                    "`{head} {}`: sudo sets the variables of {} in every root command's environment{}: whoever can \
                     write that file (or a directory above it) runs code in qm, pct and pvesh (`PERL5OPT`, \
                     `PERL5LIB`), and the linter cannot see what it holds",
                    o.text,
                    o.value,
                    if o.name == "env_file" {
                        ", past env_reset"
                    } else {
                        " that env_check and env_keep let through"
                    }
                ),
                format!("Remove `{}`; pxagent's commands need no environment.", o.name),
            )),
            ("secure_path", false) if o.has_value => {
                let bad: Vec<&str> = o.value.split(':').filter(|d| writable_place(d)).collect();
                if !bad.is_empty() {
                    out.push(finding(
                        Severity::Error,
                        "secure-path",
                        format!(
                            "`{head} {}` puts {} on the PATH of root commands: programs they start by name (a \
                             pager, an editor, a helper) are looked up there first, and the agent can write there",
                            o.text,
                            bad.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ")
                        ),
                        "Use `secure_path=\"/usr/sbin:/usr/bin:/sbin:/bin\"` (what pxagent renders).",
                    ));
                }
            }
            ("iolog_dir" | "iolog_file" | "logfile", false) if o.has_value && writable_place(&o.value) => {
                out.push(finding(
                    Severity::Error,
                    "log-location",
                    format!(
                        "`{head} {}`: sudo's {} would live where the agent can write, so the agent could \
                         rewrite or delete the record of what it ran as root",
                        o.text,
                        if o.name == "logfile" { "event log" } else { "I/O logs" }
                    ),
                    "Keep sudo's logs root-only: `iolog_dir=/var/log/sudo-io/%{user}`, `logfile=/var/log/sudo-USER.log`.",
                ));
            }
            ("group_plugin", false) if o.has_value => {
                let path = o.value.split_whitespace().next().unwrap_or_default();
                out.push(finding(
                    if writable_place(path) { Severity::Error } else { Severity::Info },
                    "log-location",
                    format!(
                        "`{head} {}`: sudo itself, as root, loads {path} to look up groups{}",
                        o.text,
                        if writable_place(path) {
                            ", from a place the agent can write: its code runs as root"
                        } else {
                            "; keep it root-owned"
                        }
                    ),
                    "Load group plugins only from root-owned paths, or drop the option.",
                ));
            }
            ("iolog_mode", false) if o.has_value => {
                let mode = u32::from_str_radix(o.value.trim_start_matches('0'), 8).unwrap_or(0);
                if mode & 0o022 != 0 {
                    out.push(finding(
                        Severity::Error,
                        "log-location",
                        format!("`{head} {}`: I/O logs writable by their group or everyone can be rewritten", o.text),
                        "Leave iolog_mode at 0600.",
                    ));
                }
            }
            ("iolog_user" | "iolog_group", false) if o.has_value && o.value != "root" => out.push(finding(
                Severity::Warning,
                "log-location",
                format!(
                    "`{head} {}`: the I/O logs belong to `{}`, who can then rewrite the record of what ran as root",
                    o.text, o.value
                ),
                "Leave the I/O logs root's.",
            )),
            ("runchroot", false) if o.has_value => {
                out.push(chroot_finding(&format!("`{head} {}`", o.text), &o.value))
            }
            ("setenv", false) => out.push(finding(
                Severity::Error,
                "setenv",
                format!(
                    "`{head} setenv` lets the caller pass any environment into root commands \
                     (`PERL5OPT`, `LD_PRELOAD` …): root"
                ),
                "Remove `setenv`.",
            )),
            ("requiretty", false) => out.push(finding(
                Severity::Info,
                "requiretty",
                format!(
                    "`{head} requiretty` refuses sudo without a terminal, and pxagent runs commands over a non-tty \
                     SSH exec: every command fails with 'sorry, you must have a tty to run sudo'"
                ),
                "Add `Defaults:zen-agent !requiretty`.",
            )),
            ("noexec" | "intercept", false) => out.push(noexec_pve(&format!("`{head} {}`", o.text))),
            ("log_input" | "log_output" | "log_allowed" | "log_denied", true) => out.push(finding(
                Severity::Warning,
                "log-disabled",
                format!(
                    "`{head} {}` turns logging off{}: what runs through these rules leaves less or no trace",
                    o.text,
                    if d.binding == Binding::Cmnd { " for those commands" } else { "" }
                ),
                "Keep log_input, log_output, log_allowed and log_denied on for the agent's commands.",
            )),
            _ => {}
        }
    }
    out
}

/// Whether a directory (or file) is one an unprivileged account can usually write or make:
/// relative, empty, under a home, a temp directory or the account's runtime directory.
fn writable_place(path: &str) -> bool {
    let p = path.trim().trim_matches('"');
    p.is_empty()
        || !p.starts_with('/')
        || [
            "/home/",
            "/tmp",
            "/var/tmp",
            "/dev/shm",
            "/run/user",
            "/var/lib/pxagent/",
        ]
        .iter()
        .any(|w| p == w.trim_end_matches('/') || p.starts_with(w))
}

/// `logfile` without `log_format=json` loses argv boundaries.
pub(super) fn log_format_finding(entries: &[(Logical, Result<Entry, String>)]) -> Option<Finding> {
    let mut logfile = None;
    let mut json = false;
    for (l, e) in entries {
        if let Ok(Entry::Defaults(d)) = e {
            for o in &d.options {
                if o.name == "logfile" && o.has_value && !o.negated && logfile.is_none() {
                    logfile = Some(l);
                }
                if o.name == "log_format" && o.value == "json" {
                    json = true;
                }
            }
        }
    }
    let l = logfile.filter(|_| !json)?;
    Some(Finding {
        line: l.line,
        source: l.text.clone(),
        ..finding(
            Severity::Info,
            "log-format",
            "the sudo event log is in sudo's text format, where `qm set 100 --name 'a b'` and \
             `qm set 100 --name a b` look the same"
                .into(),
            "Add `log_format=json` next to `logfile=`: JSON events keep argv boundaries.",
        )
    })
}
