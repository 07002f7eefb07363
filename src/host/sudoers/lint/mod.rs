//! Lint a sudoers file, or one command as `sudo -l` prints it, for rules that hand the
//! agent root.
//!
//! Why this exists: the widely shared setup for letting an agent drive Proxmox grants
//! `qm *`, `pct *`, `pvesh *`, `vzdump *`, `find *`, `ip *`, `mount *` … — every one of them a
//! root shell — and its `Defaults!zen-agent LOG_INPUT` lines are not even valid
//! sudoers. `pxagent sudoers lint` says which rules are root-equivalent, why, and what to
//! write instead; the preflight runs [`check_command`] over the host's `sudo -n -l` output,
//! so a rule is judged by the same checks whether it comes from a file or from sudo.
//!
//! The module is pure (text in, [`Finding`]s out). It reads sudoers the way sudo's own lexer
//! does (sudo ≥ 1.9.10, `plugins/sudoers/toke.l`) wherever that decides what a rule allows:
//! - arguments whose first word starts with `^` are one POSIX ERE running to the first
//!   unescaped `$`; commas, colons and spaces inside (`{2,8}`) belong to the regex, and sudo
//!   matches it against the arguments joined by single spaces;
//! - other arguments are an fnmatch glob over that same joined string, so `*` matches
//!   spaces, options and `--`; no arguments at all allow any arguments; `""` allows none;
//! - unescaped `,` `:` `=` end glob arguments (`\,` is a literal comma).
//!
//! It does not follow includes or resolve host lists, or decide whether visudo accepts the
//! file (`visudo -cf` does that); it judges what each rule lets through, and for whom: errors
//! are for the account judged ([`Principal`], `--user`), other principals' rules are
//! information. Whether a rule admits a root-equivalent command line is decided exactly, by
//! walking the rule's automaton against each danger's ([`automata`], [`dangers`] for the PVE
//! tools, the argument languages of `tables.rs` for other binaries), so the verdict is about
//! behaviour, not spelling; the older sample lines ("probes") still name typical abuse.
//!
//! Parts: `lexer` and `parser` (entries, items, aliases, Defaults lookup), `principal` (whom a
//! rule applies to), `rules` (a user spec in context), `checks` (a command: path, PVE tools),
//! `binaries` and `system` (other programs, systemd and pagers), `defaults` (Defaults entries),
//! `regex` (globs, EREs, shapes), `automata` and `dangers` (what a rule admits), `tables`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::LazyLock;

use ::regex::Regex;
use serde::Serialize;

use crate::catalog::pve::Tool;

#[cfg(test)]
mod agreement;
mod automata;
mod binaries;
mod checks;
#[cfg(test)]
mod corpus;
mod dangers;
mod defaults;
mod lexer;
mod parser;
mod principal;
mod regex;
mod rules;
mod system;
mod tables;
#[cfg(test)]
mod tests;

// The parts see each other, and this file, through these globs: the module was one file
// and its sections still share private types freely.
use self::automata::*;
use self::binaries::*;
use self::checks::*;
use self::dangers::*;
use self::defaults::*;
use self::lexer::*;
use self::parser::*;
pub use self::principal::Principal;
use self::regex::*;
use self::rules::*;
use self::system::*;
use self::tables::*;

// ---------------------------------------------------------------------------------------
// Public interface
// ---------------------------------------------------------------------------------------

/// Whether a command as `sudo -l` lists it (`/usr/bin/pvesh ^create /storage …$`) admits the
/// arguments `args` (joined by single spaces), matched as sudo 1.9.10+ matches a `^…$`
/// argument pattern. `None` when the command has no such pattern (no arguments, `""`, globs).
pub fn regex_rule_admits(command: &str, args: &str) -> Option<bool> {
    let (_, pattern) = command.split_once(' ')?;
    if !(pattern.starts_with('^') && pattern.ends_with('$')) {
        return None;
    }
    let re = ::regex::Regex::new(&ere_to_regex(pattern)).ok()?;
    Some(re.is_match(args))
}

/// How bad a finding is. `pxagent sudoers lint` fails (exit 1) when any finding is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Root-equivalent, invalid, or silently dead: fix before installing.
    Error,
    /// Over-broad or fragile, but not root by itself.
    Warning,
    /// Worth knowing; not necessarily anything to change.
    Info,
}

impl Severity {
    /// The lower-case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a sudoers file or in one command spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// 1-based line where the entry starts (an entry continued with `\` spans more lines,
    /// e.g. a `Cmnd_Alias`: its members' findings carry the alias's first line); 0 when the
    /// finding comes from [`check_command`].
    pub line: usize,
    /// The entry's text with continuations joined and comments removed; for
    /// [`check_command`], the spec itself.
    pub source: String,
    /// Stable identifier of the check (one of [`CODES`]); scripts and tests match on it.
    pub code: &'static str,
    /// Why it matters, naming the command or option concerned.
    pub why: String,
    /// What to write instead.
    pub fix: String,
}

/// Every code this module emits, so callers can rely on the set being stable.
pub const CODES: &[&str] = &[
    // commands
    "all-commands",
    "guest-exec",
    "host-network",
    "host-firewall",
    "unconstrained-args",
    "wildcard-args",
    "pve-dangerous-args",
    "pve-disruptive",
    "wrong-path",
    "noncanonical-path",
    "relative-path",
    "wildcard-path",
    "regex-path",
    "nonstandard-path",
    "regex-unanchored",
    "regex-unterminated",
    "regex-early-dollar",
    "regex-not-anchored",
    "regex-too-broad",
    "regex-unchecked",
    "pager-escape",
    "journal-tamper",
    "systemctl-unit-control",
    "shell",
    "interpreter",
    "pager-editor",
    "exec-escape",
    "file-write",
    "file-read",
    "mount",
    "umount",
    "mkdir",
    "disk-destroy",
    "package-manager",
    "account-admin",
    "storage-admin",
    "kernel-admin",
    "process-kill",
    "emulator",
    "sudoedit",
    "chroot",
    "negated-command",
    // rules in context
    "runas-all",
    "all-users",
    "password-rule",
    "setenv",
    "noexec-breaks-pve",
    "noexec-tag",
    "undefined-alias",
    // Defaults and logging
    "defaults-bang-not-command",
    "defaults-tag-as-option",
    "defaults-invalid-option",
    "env-not-reset",
    "env-keep-dangerous",
    "env-file",
    "secure-path",
    "log-location",
    "requiretty",
    "log-disabled",
    "no-log-input",
    "no-log-output",
    "log-format",
    // file structure
    "include-not-followed",
    "parse-error",
];

/// Lint a whole sudoers file (one file: includes are reported, not followed).
///
/// Findings come sorted by line; a command's own findings are reported where the command
/// is written (a `Cmnd_Alias` member at the alias), findings that depend on the rule using
/// it (tags, runas, logging) at the user spec.
pub fn lint(text: &str) -> Vec<Finding> {
    lint_for(text, &Principal::new(crate::ssh::DEFAULT_USER))
}

/// [`lint`] for the account `who` (`sudoers lint --user`): errors only where a rule or
/// Defaults entry applies to it; other principals' rules come back as information.
pub fn lint_for(text: &str, who: &Principal) -> Vec<Finding> {
    let entries: Vec<(Logical, Result<Entry, String>)> = logical_lines(text)
        .into_iter()
        .map(|l| {
            let e = if l.include {
                Ok(Entry::Include)
            } else {
                parse_entry(&l.text)
            };
            (l, e)
        })
        .collect();
    let aliases = Aliases::collect(&entries);
    let defaults: Vec<&DefaultsEntry> = entries
        .iter()
        .filter_map(|(_, e)| match e {
            Ok(Entry::Defaults(d)) => Some(d),
            _ => None,
        })
        .collect();
    let env = Env {
        aliases: &aliases,
        defaults: &defaults,
        who,
    };
    let uses = AliasUses::collect(&entries, &env);

    let mut out = Vec::new();
    let mut usage = LogUsage::default();
    let mut has_rules = false;
    for (logical, entry) in &entries {
        let found = match entry {
            Ok(Entry::Include) => vec![include_finding(&logical.text)],
            Err(reason) => vec![parse_error(reason)],
            Ok(Entry::Defaults(d)) => {
                let found = check_defaults(d, &aliases);
                if env.defaults_apply(d) {
                    found
                } else {
                    let whom = d.targets.join(", ");
                    found
                        .into_iter()
                        .map(|f| for_others(f, &whom, &who.name))
                        .collect()
                }
            }
            Ok(Entry::CmndAlias(defs)) => defs
                .iter()
                .flat_map(|(name, items)| {
                    items.iter().enumerate().flat_map(|(i, item)| {
                        let found = check_item(item);
                        if uses.only_elsewhere(name, i) {
                            found
                                .into_iter()
                                .map(|f| {
                                    for_others(f, "other accounts (or only subtracted)", &who.name)
                                })
                                .collect()
                        } else {
                            found
                        }
                    })
                })
                .collect(),
            Ok(Entry::NameAlias { .. }) => Vec::new(),
            Ok(Entry::Spec(spec)) => {
                let f = check_spec(spec, logical.line, &env, &mut usage);
                has_rules |= !usage.users.is_empty();
                f
            }
        };
        out.extend(found.into_iter().map(|f| Finding {
            line: logical.line,
            source: logical.text.clone(),
            ..f
        }));
    }
    out.extend(usage.findings(&entries));
    if has_rules {
        out.extend(log_format_finding(&entries));
    }

    let mut seen = HashSet::new();
    out.retain(|f| seen.insert((f.line, f.code, f.why.clone())));
    out.sort_by_key(|f| f.line);
    out
}

/// Check one command spec as sudo prints it in `sudo -l` / `sudo -ll` (`/usr/sbin/qm *`,
/// `/usr/sbin/qm ^list$`, `ALL`, `/usr/bin/uptime ""`). These are exactly the command checks
/// [`lint`] applies to each command it reads; findings have `line` 0 and `source` = `spec`.
/// Context a single command cannot show (runas, tags, Defaults) is not judged here.
pub fn check_command(spec: &str) -> Vec<Finding> {
    let spec_trimmed = spec.trim();
    let mut c = Cursor::new(spec_trimmed);
    let found = match parse_item(&mut c, true) {
        Ok(item) => check_item(&item),
        Err(reason) => vec![parse_error(&reason)],
    };
    found
        .into_iter()
        .map(|f| Finding {
            line: 0,
            source: spec_trimmed.to_string(),
            ..f
        })
        .collect()
}

/// Whether any finding is an error (what makes `pxagent sudoers lint` exit 1).
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

/// Split a sudoers command list (`a, b, c` after the `=` of a rule, or a `sudo -l` line's
/// commands) into the text of each command, the way sudo's lexer does: a comma inside a
/// regex argument (`{2,8}`), inside `(runas)` or escaped as `\,` does not split.
pub fn split_commands(list: &str) -> Vec<String> {
    let mut c = Cursor::new(list);
    let mut out = Vec::new();
    loop {
        c.skip_blanks();
        if c.at_end() {
            break;
        }
        let start = c.pos;
        if parse_item(&mut c, false).is_err() {
            // Keep the rest as one piece rather than guess.
            out.push(list[start..].trim().to_string());
            break;
        }
        out.push(list[start..c.pos].trim().to_string());
        c.skip_blanks();
        if c.peek() == Some(b',') {
            c.bump();
        } else {
            if !c.at_end() {
                out.push(c.rest().trim().to_string());
            }
            break;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Finding construction and shared fix texts
// ---------------------------------------------------------------------------------------

fn finding(severity: Severity, code: &'static str, why: String, fix: impl Into<String>) -> Finding {
    debug_assert!(CODES.contains(&code), "code {code} missing from CODES");
    Finding {
        severity,
        line: 0,
        source: String::new(),
        code,
        why,
        fix: fix.into(),
    }
}

/// What to do instead of an over-broad PVE tool rule.
const FIX_RENDER: &str = "Allow only the exact command lines the agent needs: `pxagent sudoers render` \
     writes one anchored regex per catalog operation (e.g. `/usr/sbin/qm ^(start|shutdown) [1-9][0-9]{2,8}$`); \
     check it with `visudo -cf` and install it in place of this rule.";

const FIX_DROP: &str = "Remove this rule and grant the specific PVE operation instead (`pxagent sudoers render`). \
     If a task really needs this binary, wrap the one fixed command line in a root-owned script \
     and allow exactly that path with `\"\"` (no arguments).";

const FIX_PIN: &str = "Pin the arguments: `\"\"` for none, the literal arguments, or an anchored regex \
     such as `^-h /var/lib/vz$` — a rule without arguments allows any.";

fn parse_error(reason: &str) -> Finding {
    finding(
        Severity::Warning,
        "parse-error",
        format!(
            "the linter could not read this entry ({reason}); sudo may reject it or read it differently"
        ),
        "Check the file with `visudo -cf FILE` and lint the corrected text.",
    )
}

fn include_finding(text: &str) -> Finding {
    finding(
        Severity::Info,
        "include-not-followed",
        format!(
            "`{}`: included files are not read by the linter; their rules apply too",
            text.trim()
        ),
        "Lint each included file as well, e.g. `pxagent sudoers lint /etc/sudoers.d/zen-agent`.",
    )
}
