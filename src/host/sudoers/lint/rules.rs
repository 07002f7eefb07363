//! User specs judged in context: tags (NOEXEC, SETENV …), runas, log usage, and the
//! command items each rule allows.

use super::*;

/// Effective tags along a command list: each tag holds for the following commands too.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TagState {
    pub(super) nopasswd: Option<bool>,
    pub(super) noexec: Option<bool>,
    pub(super) intercept: Option<bool>,
    pub(super) setenv: Option<bool>,
    pub(super) log_input: Option<bool>,
    pub(super) log_output: Option<bool>,
}

impl TagState {
    pub(super) fn apply(&mut self, tag: &str) {
        match tag {
            "NOPASSWD" => self.nopasswd = Some(true),
            "PASSWD" => self.nopasswd = Some(false),
            "NOEXEC" => self.noexec = Some(true),
            "EXEC" => self.noexec = Some(false),
            "INTERCEPT" => self.intercept = Some(true),
            "NOINTERCEPT" => self.intercept = Some(false),
            "SETENV" => self.setenv = Some(true),
            "NOSETENV" => self.setenv = Some(false),
            "LOG_INPUT" => self.log_input = Some(true),
            "NOLOG_INPUT" => self.log_input = Some(false),
            "LOG_OUTPUT" => self.log_output = Some(true),
            "NOLOG_OUTPUT" => self.log_output = Some(false),
            _ => {}
        }
    }
}

/// Which users' rules run without I/O logging, first line each.
#[derive(Debug, Default)]
pub(super) struct LogUsage {
    pub(super) users: Vec<String>,
    pub(super) no_input: HashMap<String, usize>,
    pub(super) no_output: HashMap<String, usize>,
}

impl LogUsage {
    pub(super) fn record(&mut self, user: &str, line: usize, input: bool, output: bool) {
        if !self.users.iter().any(|u| u == user) {
            self.users.push(user.to_string());
        }
        if !input {
            self.no_input.entry(user.to_string()).or_insert(line);
        }
        if !output {
            self.no_output.entry(user.to_string()).or_insert(line);
        }
    }

    pub(super) fn findings(&self, entries: &[(Logical, Result<Entry, String>)]) -> Vec<Finding> {
        let source = |line: usize| {
            entries
                .iter()
                .find(|(l, _)| l.line == line)
                .map(|(l, _)| l.text.clone())
                .unwrap_or_default()
        };
        let fix = |u: &str| {
            format!(
                "Add `Defaults:{u} log_input, log_output, iolog_dir=/var/log/sudo-io/%{{user}}` and \
                 `Defaults:{u} log_allowed, log_denied, logfile=/var/log/sudo-{u}.log, log_format=json` \
                 (`pxagent sudoers render` writes both)."
            )
        };
        let mut out = Vec::new();
        for u in &self.users {
            for (map, code, what, option) in [
                (
                    &self.no_input,
                    "no-log-input",
                    "what is typed into",
                    "log_input",
                ),
                (
                    &self.no_output,
                    "no-log-output",
                    "what is printed by",
                    "log_output",
                ),
            ] {
                if let Some(&line) = map.get(u) {
                    out.push(Finding {
                        line,
                        source: source(line),
                        ..finding(
                            Severity::Error,
                            code,
                            format!(
                                "{u}'s root commands run without `{option}`: sudo keeps no I/O log of {what} them, \
                                 so misuse of a leaked key or a confused agent leaves only a one-line event"
                            ),
                            fix(u),
                        )
                    });
                }
            }
        }
        out
    }
}

pub(super) fn check_spec(
    spec: &Spec,
    line: usize,
    env: &Env,
    usage: &mut LogUsage,
) -> Vec<Finding> {
    let users = env.aliases.expand_users(&spec.users);
    // root's own rules (the stock `root ALL=(ALL:ALL) ALL`) give root nothing new.
    if users.iter().all(|u| u == "root" || u == "#0") {
        return Vec::new();
    }
    let applies = env.aliases.users_apply(&spec.users, env.who);
    let u = env.who.name.as_str();
    let mut out = Vec::new();
    if users.iter().any(|u| u == "ALL") {
        out.push(finding(
            Severity::Warning,
            "all-users",
            "`ALL` as the user gives these rules to every account on the host, not just the agent"
                .into(),
            "Name the agent account (`zen-agent ALL=(root) NOPASSWD: …`).",
        ));
    }
    for items in &spec.privileges {
        let mut tags = TagState::default();
        let mut runas: Option<Runas> = None;
        for item in items {
            if item.runas.is_some() {
                runas = item.runas.clone();
            }
            for t in &item.tags {
                tags.apply(t);
            }
            // The leaf commands this entry grants (`granted`) or subtracts.
            let leaves: Vec<(Item, bool)> = match &item.cmnd {
                Cmnd::Alias(name) => match env.aliases.expand_signed(name, item.negated) {
                    Some(l) => l
                        .into_iter()
                        .map(|(_, _, leaf, granted)| {
                            // `!ALIAS` over a `!cmd` member grants `cmd`: nothing checked it
                            // where it is written (a subtraction there), so check it here.
                            if granted && leaf.negated {
                                let plain = Item {
                                    negated: false,
                                    ..leaf.clone()
                                };
                                out.extend(check_item(&plain).into_iter().map(|f| Finding {
                                    why: format!(
                                        "through a double negation (`!{name}` of a `!` member): {}",
                                        f.why
                                    ),
                                    ..f
                                }));
                            }
                            (leaf, granted)
                        })
                        .collect(),
                    None => {
                        out.push(finding(
                            Severity::Warning,
                            "undefined-alias",
                            format!(
                                "`{name}` is used as a command but no `Cmnd_Alias {name}` is defined in this file: \
                                 visudo rejects that, or it is defined in another file the linter did not read"
                            ),
                            format!("Define `Cmnd_Alias {name} = …` before the rule, or lint the file that defines it."),
                        ));
                        Vec::new()
                    }
                },
                _ => {
                    out.extend(check_item(item));
                    vec![(item.clone(), !item.negated)]
                }
            };
            let display = item.cmnd.display();
            if let Some(r) = &runas {
                // names_contain is true for a literal `ALL` too.
                let all = Aliases::names_contain(&env.aliases.runas, &r.users, "ALL")
                    || r.groups.iter().any(|g| g == "ALL");
                if all {
                    out.push(finding(
                        Severity::Warning,
                        "runas-all",
                        format!(
                            "`({})` lets the agent run `{display}` as any user or group (`sudo -u postgres …`); \
                             pxagent's commands need nothing but root",
                            runas_text(r)
                        ),
                        "Write `(root)`: least privilege, and what pxagent renders.",
                    ));
                }
            }
            if tags.setenv == Some(true) {
                out.push(finding(
                    Severity::Error,
                    "setenv",
                    format!(
                        "SETENV on `{display}` lets the caller pass any environment into a root command: \
                         `PERL5OPT=-M…`/`PERL5LIB` run code inside qm, pct and pvesh (they are Perl), \
                         `LD_PRELOAD` inside anything"
                    ),
                    "Remove the SETENV tag; keep sudo's env_reset.",
                ));
            }
            for (leaf, _) in leaves.iter().filter(|(_, granted)| *granted) {
                let leaf_display = leaf.cmnd.display();
                let is_pve = leaf_tool(&leaf.cmnd).is_some();
                if tags.noexec == Some(true) || tags.intercept == Some(true) {
                    let tag = if tags.noexec == Some(true) {
                        "NOEXEC"
                    } else {
                        "INTERCEPT"
                    };
                    out.push(if is_pve {
                        noexec_pve(&format!("{tag} on `{leaf_display}`"))
                    } else {
                        finding(
                            Severity::Info,
                            "noexec-tag",
                            format!(
                                "{tag} on `{leaf_display}` is harmless for it, but a tag carries over to the \
                                 following commands of the same rule, and on a PVE tool it breaks them"
                            ),
                            "Keep NOEXEC/INTERCEPT rules apart from PVE tool rules (a separate line each).",
                        )
                    });
                }
            }
            // A rule made only of `!` exceptions grants nothing by itself.
            let grants = leaves.iter().any(|(_, granted)| *granted);
            if !grants {
                continue;
            }
            let nopasswd = tags.nopasswd.unwrap_or(!env.flag("authenticate", true));
            if !nopasswd {
                out.push(finding(
                    Severity::Warning,
                    "password-rule",
                    format!(
                        "`{display}` needs {u}'s password (no NOPASSWD), but pxagent runs `sudo -n` over a key-only \
                         account: the rule never applies to it and the agent gets 'sudo: a password is required'"
                    ),
                    "Add `NOPASSWD:` if the agent should run it, or drop the rule.",
                ));
            }
            if applies {
                // pxagent's helper reads an ISO image on stdin: an I/O log of it would be a
                // second copy of the image on the host's root file system, and its command
                // line (always logged) carries the image's SHA-256.
                let helper_only = leaves.iter().filter(|(_, granted)| *granted).all(|(l, _)| {
                    matches!(&l.cmnd, Cmnd::Path { path, .. } if path == Tool::Helper.path())
                });
                let input = helper_only
                    || tags
                        .log_input
                        .unwrap_or_else(|| env.flag("log_input", false));
                let output = tags
                    .log_output
                    .unwrap_or_else(|| env.flag("log_output", false));
                usage.record(u, line, input, output);
            }
        }
    }
    if applies {
        out
    } else {
        let whom = spec.users.join(", ");
        out.into_iter().map(|f| for_others(f, &whom, u)).collect()
    }
}

/// A finding about a rule that does not apply to the account judged: information only, and
/// the text says whose rule it is.
pub(super) fn for_others(f: Finding, whom: &str, who: &str) -> Finding {
    if f.severity == Severity::Info {
        return f;
    }
    Finding {
        severity: Severity::Info,
        why: format!(
            "(a rule for {whom}, not {who}; it would be {}) {}",
            f.severity, f.why
        ),
        ..f
    }
}

pub(super) fn runas_text(r: &Runas) -> String {
    if r.groups.is_empty() {
        r.users.join(", ")
    } else {
        format!("{} : {}", r.users.join(", "), r.groups.join(", "))
    }
}

pub(super) fn leaf_tool(c: &Cmnd) -> Option<Tool> {
    match c {
        Cmnd::Path { path, .. } => Tool::from_name(basename(path)),
        _ => None,
    }
}

pub(super) fn noexec_pve(what: &str) -> Finding {
    finding(
        Severity::Warning,
        "noexec-breaks-pve",
        format!(
            "{what}: NOEXEC and `intercept` stop a command from starting other programs, and the PVE tools must \
             (qm starts kvm, pct runs lxc-start, vzdump runs tar and zstd): operations fail halfway"
        ),
        "Remove NOEXEC/INTERCEPT from PVE tool rules; constrain their arguments instead.",
    )
}

/// Which `Cmnd_Alias` members the file's rules grant, to the account judged or to anyone: a
/// member is judged where it is written, at the severity of its use.
#[derive(Debug, Default)]
pub(super) struct AliasUses {
    /// (alias, member index) granted by a rule that applies to the account.
    live: HashSet<(String, usize)>,
    /// (alias, member index) reached by any rule.
    used: HashSet<(String, usize)>,
}

impl AliasUses {
    pub(super) fn collect(entries: &[(Logical, Result<Entry, String>)], env: &Env) -> AliasUses {
        let mut uses = AliasUses::default();
        for (_, e) in entries {
            let Ok(Entry::Spec(spec)) = e else { continue };
            let users = env.aliases.expand_users(&spec.users);
            if users.iter().all(|u| u == "root" || u == "#0") {
                continue;
            }
            let applies = env.aliases.users_apply(&spec.users, env.who);
            for item in spec.privileges.iter().flatten() {
                let Cmnd::Alias(name) = &item.cmnd else {
                    continue;
                };
                for (alias, i, _, granted) in env
                    .aliases
                    .expand_signed(name, item.negated)
                    .unwrap_or_default()
                {
                    if granted && applies {
                        uses.live.insert((alias.clone(), i));
                    }
                    uses.used.insert((alias, i));
                }
            }
        }
        uses
    }

    /// Whether rules use this member, but none grants it to the account judged (it is only
    /// other principals' or only subtracted). An unused member keeps its severity: another
    /// file may use the alias.
    pub(super) fn only_elsewhere(&self, alias: &str, index: usize) -> bool {
        let key = (alias.to_string(), index);
        self.used.contains(&key) && !self.live.contains(&key)
    }
}
