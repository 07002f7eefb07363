//! Lint a sudoers file, or one command as `sudo -l` prints it, for rules that hand the
//! agent root.
//!
//! Why this exists: the widely shared setup for letting an agent drive Proxmox grants
//! `qm *`, `pct *`, `pvesh *`, `vzdump *`, `find *`, `ip *`, `mount *` … — every one of them a
//! root shell (design §1) — and its `Defaults!zen-agent LOG_INPUT` lines are not even valid
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
//! It does not follow includes, resolve host lists or group membership, or decide whether
//! visudo accepts the file (`visudo -cf` does that); it judges what each rule lets through.
//! Whether a regex admits a known root-equivalent command line is decided by running it
//! (translated to the `regex` crate) against sample lines ("probes"), so the verdict is
//! about behaviour, not spelling.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::catalog::pve::Tool;

// ---------------------------------------------------------------------------------------
// Public interface
// ---------------------------------------------------------------------------------------

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
    "unconstrained-args",
    "wildcard-args",
    "pve-dangerous-args",
    "wrong-path",
    "noncanonical-path",
    "relative-path",
    "wildcard-path",
    "regex-path",
    "nonstandard-path",
    "regex-unanchored",
    "regex-unterminated",
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
    "sudoedit",
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
    };

    let mut out = Vec::new();
    let mut usage = LogUsage::default();
    let mut has_rules = false;
    for (logical, entry) in &entries {
        let found = match entry {
            Ok(Entry::Include) => vec![include_finding(&logical.text)],
            Err(reason) => vec![parse_error(reason)],
            Ok(Entry::Defaults(d)) => check_defaults(d, &aliases),
            Ok(Entry::CmndAlias(defs)) => defs
                .iter()
                .flat_map(|(_, items)| items.iter().flat_map(check_item))
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

// ---------------------------------------------------------------------------------------
// Logical lines: comments, continuations, includes
// ---------------------------------------------------------------------------------------

/// One entry of the file: physical lines joined at `\`-newline, comment removed.
#[derive(Debug, Clone)]
struct Logical {
    /// 1-based line the entry starts on.
    line: usize,
    text: String,
    include: bool,
}

fn logical_lines(text: &str) -> Vec<Logical> {
    static INCLUDE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(#include|#includedir|@include|@includedir)(\s|$)").expect("static regex")
    });
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if buf.is_empty() {
            start = i + 1;
            if INCLUDE.is_match(raw) {
                out.push(Logical {
                    line: start,
                    text: raw.trim().to_string(),
                    include: true,
                });
                continue;
            }
        }
        let part = strip_comment(raw).trim_end();
        let trailing = part.len() - part.trim_end_matches('\\').len();
        let continued = trailing % 2 == 1;
        let part = if continued {
            &part[..part.len() - 1]
        } else {
            part
        };
        // sudo treats `\`-newline as a blank between words; indentation of the next line
        // is layout. (Inside a regex sudo inserts nothing; no sane rule splits one there.)
        if !buf.is_empty() && !part.trim().is_empty() {
            buf.push(' ');
        }
        buf.push_str(if buf.is_empty() {
            part.trim_start()
        } else {
            part.trim()
        });
        if continued {
            continue;
        }
        let t = buf.trim().to_string();
        buf.clear();
        if !t.is_empty() {
            out.push(Logical {
                line: start,
                text: t,
                include: false,
            });
        }
    }
    let t = buf.trim();
    if !t.is_empty() {
        out.push(Logical {
            line: start,
            text: t.to_string(),
            include: false,
        });
    }
    out
}

/// Cut a `#` comment. As in sudo's lexer, `#` followed by a digit (or `-digit`) is a uid or
/// gid, not a comment; an escaped `\#` and a `#` inside double quotes are literal.
fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    let mut quoted = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => quoted = !quoted,
            b'#' if !quoted => {
                let next = b.get(i + 1).copied();
                let uid = matches!(next, Some(b'0'..=b'9'))
                    || (next == Some(b'-') && matches!(b.get(i + 2), Some(b'0'..=b'9')));
                if !uid {
                    return &line[..i];
                }
            }
            _ => {}
        }
        i += 1;
    }
    line
}

// ---------------------------------------------------------------------------------------
// Entries
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Entry {
    Include,
    Defaults(DefaultsEntry),
    /// `Cmnd_Alias A = …[ : B = …]`.
    CmndAlias(Vec<(String, Vec<Item>)>),
    /// `User_Alias`, `Runas_Alias`, `Host_Alias`: names only.
    NameAlias {
        kind: NameKind,
        defs: Vec<(String, Vec<String>)>,
    },
    Spec(Spec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NameKind {
    User,
    Runas,
    Host,
}

/// `users hosts = cmnds [: hosts = cmnds]`; host lists are not judged.
#[derive(Debug, Clone)]
struct Spec {
    users: Vec<String>,
    privileges: Vec<Vec<Item>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Binding {
    Global,
    Host,
    User,
    Runas,
    Cmnd,
}

#[derive(Debug, Clone)]
struct DefaultsEntry {
    binding: Binding,
    targets: Vec<String>,
    options: Vec<DefOpt>,
}

#[derive(Debug, Clone)]
struct DefOpt {
    /// As written (`!log_output` → name `log_output`, negated).
    text: String,
    name: String,
    negated: bool,
    /// `=`, `+=` or `-=` given.
    has_value: bool,
    value: String,
}

fn parse_entry(text: &str) -> Result<Entry, String> {
    if let Some(rest) = text.strip_prefix("Defaults") {
        match rest.bytes().next() {
            None | Some(b' ' | b'\t' | b':' | b'@' | b'>' | b'!') => return parse_defaults(rest),
            _ => {}
        }
    }
    for (kw, kind) in [
        ("Cmnd_Alias", None),
        ("Cmd_Alias", None),
        ("User_Alias", Some(NameKind::User)),
        ("Runas_Alias", Some(NameKind::Runas)),
        ("Host_Alias", Some(NameKind::Host)),
    ] {
        if let Some(rest) = text.strip_prefix(kw)
            && rest.starts_with([' ', '\t'])
        {
            return parse_alias(rest, kind);
        }
    }
    parse_spec(text)
}

fn parse_defaults(rest: &str) -> Result<Entry, String> {
    let mut c = Cursor::new(rest);
    let binding = match c.peek() {
        Some(b':') => Binding::User,
        Some(b'@') => Binding::Host,
        Some(b'>') => Binding::Runas,
        Some(b'!') => Binding::Cmnd,
        _ => Binding::Global,
    };
    let mut targets = Vec::new();
    if binding != Binding::Global {
        c.bump();
        loop {
            c.skip_blanks();
            let start = c.pos;
            if binding == Binding::Cmnd && c.rest().trim_start_matches('!').starts_with('^') {
                while c.peek() == Some(b'!') {
                    c.bump();
                }
                read_regex(&mut c);
            } else {
                c.take_until(|b| matches!(b, b' ' | b'\t' | b','));
            }
            if c.pos == start {
                return Err("`Defaults` binding without a name".into());
            }
            targets.push(c.s[start..c.pos].to_string());
            c.skip_blanks();
            if c.peek() == Some(b',') {
                c.bump();
            } else {
                break;
            }
        }
    }
    let options: Vec<DefOpt> = split_unquoted(c.rest(), b',')
        .into_iter()
        .map(|o| parse_def_opt(o.trim()))
        .filter(|o| !o.text.is_empty())
        .collect();
    if options.is_empty() {
        return Err("`Defaults` without options".into());
    }
    Ok(Entry::Defaults(DefaultsEntry {
        binding,
        targets,
        options,
    }))
}

fn parse_def_opt(text: &str) -> DefOpt {
    let bangs = text.len() - text.trim_start_matches(['!', ' ', '\t']).len();
    let negated = text[..bangs].matches('!').count() % 2 == 1;
    let body = &text[bangs..];
    let name_len = body
        .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .unwrap_or(body.len());
    let name = body[..name_len].to_string();
    let after = body[name_len..].trim_start();
    let value = after
        .strip_prefix("+=")
        .or_else(|| after.strip_prefix("-="))
        .or_else(|| after.strip_prefix('='));
    DefOpt {
        text: text.to_string(),
        name,
        negated,
        has_value: value.is_some(),
        value: value
            .map(|v| v.trim().trim_matches('"').to_string())
            .unwrap_or_default(),
    }
}

fn parse_alias(rest: &str, kind: Option<NameKind>) -> Result<Entry, String> {
    let mut c = Cursor::new(rest);
    let mut cmnd_defs = Vec::new();
    let mut name_defs = Vec::new();
    loop {
        c.skip_blanks();
        let start = c.pos;
        c.take_until(|b| !(b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        let name = c.s[start..c.pos].to_string();
        if !is_alias_name(&name) {
            return Err(format!(
                "expected an upper-case alias name, found `{}`",
                c.s[start..].trim()
            ));
        }
        c.skip_blanks();
        if c.peek() != Some(b'=') {
            return Err(format!("expected `=` after alias name {name}"));
        }
        c.bump();
        match kind {
            None => cmnd_defs.push((name, parse_items(&mut c)?)),
            Some(_) => {
                let start = c.pos;
                c.take_until(|b| b == b':');
                let members = c.s[start..c.pos]
                    .split(',')
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty())
                    .collect();
                name_defs.push((name, members));
            }
        }
        if c.peek() == Some(b':') {
            c.bump();
        } else {
            break;
        }
    }
    Ok(match kind {
        None => Entry::CmndAlias(cmnd_defs),
        Some(kind) => Entry::NameAlias {
            kind,
            defs: name_defs,
        },
    })
}

fn parse_spec(text: &str) -> Result<Entry, String> {
    let eq = find_unescaped(text, 0, b'=')
        .ok_or("not a Defaults line, an alias, or a `user host = command` rule")?;
    let left = &text[..eq];
    // Words split at blanks; `alice, bob` stays one list.
    let mut groups: Vec<String> = Vec::new();
    for word in split_unescaped_blanks(left) {
        match groups.last_mut() {
            Some(last) if last.ends_with(',') || word.starts_with(',') => last.push_str(word),
            _ => groups.push(word.to_string()),
        }
    }
    if groups.len() != 2 {
        return Err(format!(
            "expected `users hosts =`, found `{}=`",
            left.trim()
        ));
    }
    let users = groups[0]
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(String::from)
        .collect();
    let mut c = Cursor::new(&text[eq + 1..]);
    let mut privileges = Vec::new();
    loop {
        privileges.push(parse_items(&mut c)?);
        if c.peek() != Some(b':') {
            break;
        }
        // `: other-hosts = more commands`
        c.bump();
        let eq = find_unescaped(c.s, c.pos, b'=').ok_or("`:` not followed by `hosts =`")?;
        c.pos = eq + 1;
    }
    Ok(Entry::Spec(Spec { users, privileges }))
}

// ---------------------------------------------------------------------------------------
// Command items (the part after `=`, or one `sudo -l` command)
// ---------------------------------------------------------------------------------------

/// Tags a rule may carry (`NOPASSWD:` …). Also what a Defaults option must not be spelled as.
const TAGS: [&str; 16] = [
    "NOPASSWD",
    "PASSWD",
    "NOEXEC",
    "EXEC",
    "INTERCEPT",
    "NOINTERCEPT",
    "SETENV",
    "NOSETENV",
    "LOG_INPUT",
    "NOLOG_INPUT",
    "LOG_OUTPUT",
    "NOLOG_OUTPUT",
    "MAIL",
    "NOMAIL",
    "FOLLOW",
    "NOFOLLOW",
];

/// Per-command options (`CWD=/`, `TIMEOUT=5m` …): skipped, they do not widen a rule.
const COMMAND_OPTIONS: [&str; 10] = [
    "CWD",
    "CHROOT",
    "ROLE",
    "TYPE",
    "TIMEOUT",
    "NOTBEFORE",
    "NOTAFTER",
    "APPARMOR_PROFILE",
    "PRIVS",
    "LIMITPRIVS",
];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Runas {
    users: Vec<String>,
    groups: Vec<String>,
}

/// One entry of a command list: `(runas) TAGS: !command args`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    runas: Option<Runas>,
    tags: Vec<&'static str>,
    negated: bool,
    cmnd: Cmnd,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cmnd {
    All,
    Alias(String),
    Sudoedit(Args),
    Path { path: String, args: Args },
}

/// What follows the command path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Args {
    /// Nothing: sudo allows any arguments.
    Any,
    /// `""`: sudo allows no arguments.
    Empty,
    /// An fnmatch pattern over the space-joined arguments (escapes for `,:=` removed).
    Glob(String),
    /// `^…$`, as written (sudo passes escapes through to regcomp).
    Regex(String),
    /// `^…` without its closing `$`: sudo rejects the line.
    Unterminated(String),
}

impl Args {
    fn text(&self) -> &str {
        match self {
            Args::Any => "",
            Args::Empty => "\"\"",
            Args::Glob(s) | Args::Regex(s) | Args::Unterminated(s) => s,
        }
    }
}

impl Cmnd {
    fn display(&self) -> String {
        let with = |head: &str, args: &Args| match args {
            Args::Any => head.to_string(),
            a => format!("{head} {}", a.text()),
        };
        match self {
            Cmnd::All => "ALL".into(),
            Cmnd::Alias(n) => n.clone(),
            Cmnd::Sudoedit(a) => with("sudoedit", a),
            Cmnd::Path { path, args } => with(path, args),
        }
    }
}

/// Parse `item, item, …` up to a top-level `:` (next host spec or alias) or the end.
fn parse_items(c: &mut Cursor) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    loop {
        c.skip_blanks();
        items.push(parse_item(c, false)?);
        c.skip_blanks();
        match c.peek() {
            Some(b',') => c.bump(),
            None | Some(b':') => return Ok(items),
            Some(_) => return Err(format!("unexpected `{}` after a command", c.rest())),
        }
    }
}

/// Parse one command list entry. With `whole`, glob arguments run to the end of the text
/// (a `sudo -l` command, already split and unescaped by sudo); otherwise they end at an
/// unescaped `,` `:` `=` as in sudoers.
fn parse_item(c: &mut Cursor, whole: bool) -> Result<Item, String> {
    c.skip_blanks();
    let mut runas = None;
    if c.peek() == Some(b'(') {
        let close = c.s[c.pos..].find(')').ok_or("unclosed `(` in runas list")? + c.pos;
        let inner = &c.s[c.pos + 1..close];
        let (u, g) = inner.split_once(':').unwrap_or((inner, ""));
        let list = |s: &str| {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        };
        runas = Some(Runas {
            users: list(u),
            groups: list(g),
        });
        c.pos = close + 1;
    }
    let mut tags = Vec::new();
    'prefix: loop {
        c.skip_blanks();
        for opt in COMMAND_OPTIONS {
            if c.rest().starts_with(opt) && c.rest()[opt.len()..].trim_start().starts_with('=') {
                c.pos += opt.len();
                c.skip_blanks();
                c.bump(); // '='
                c.skip_blanks();
                if c.peek() == Some(b'"') {
                    c.bump();
                    c.take_until(|b| b == b'"');
                    c.bump();
                } else {
                    c.take_until(|b| matches!(b, b' ' | b'\t' | b','));
                }
                continue 'prefix;
            }
        }
        for tag in TAGS {
            if let Some(after) = c.rest().strip_prefix(tag)
                && after.trim_start_matches([' ', '\t']).starts_with(':')
            {
                c.pos += tag.len();
                c.skip_blanks();
                c.bump(); // ':'
                tags.push(tag);
                continue 'prefix;
            }
        }
        break;
    }
    // Digests (`sha256:… /usr/bin/x`) pin the binary's content; they do not widen a rule.
    static DIGEST: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(sha224|sha256|sha384|sha512)\s*:\s*[A-Za-z0-9+/=]+\s*(,\s*)?")
            .expect("static regex")
    });
    while let Some(m) = DIGEST.find(c.rest()) {
        c.pos += m.end();
    }
    let mut bangs = 0;
    while matches!(c.peek(), Some(b'!' | b' ' | b'\t')) {
        bangs += usize::from(c.peek() == Some(b'!'));
        c.bump();
    }
    let negated = bangs % 2 == 1;

    let word_end =
        |c: &Cursor, n: usize| matches!(c.peek_at(n), None | Some(b' ' | b'\t' | b',' | b':'));
    let cmnd = if c.rest().starts_with("ALL") && word_end(c, 3) {
        c.pos += 3;
        Cmnd::All
    } else if c.rest().starts_with("sudoedit") && word_end(c, 8) {
        c.pos += 8;
        Cmnd::Sudoedit(parse_args(c, whole))
    } else {
        match c.peek() {
            None => return Err("missing command".into()),
            Some(b'^') => {
                let path = read_regex(c).to_string();
                Cmnd::Path {
                    path,
                    args: parse_args(c, whole),
                }
            }
            Some(b'A'..=b'Z') if is_alias_name(alias_prefix(c.rest())) => {
                let name = alias_prefix(c.rest()).to_string();
                c.pos += name.len();
                Cmnd::Alias(name)
            }
            Some(_) => {
                // A path (or, wrongly, a relative name): up to an unescaped `,:= \t#`.
                let path =
                    read_unescaped(c, |b| matches!(b, b',' | b':' | b'=' | b' ' | b'\t' | b'#'));
                if path.is_empty() {
                    return Err(format!("expected a command, found `{}`", c.rest()));
                }
                // A directory (`/usr/bin/`) takes no arguments.
                let args = if path.ends_with('/') {
                    Args::Any
                } else {
                    parse_args(c, whole)
                };
                Cmnd::Path { path, args }
            }
        }
    };
    Ok(Item {
        runas,
        tags,
        negated,
        cmnd,
    })
}

fn alias_prefix(s: &str) -> &str {
    let n = s
        .find(|ch: char| !(ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_'))
        .unwrap_or(s.len());
    &s[..n]
}

fn parse_args(c: &mut Cursor, whole: bool) -> Args {
    c.skip_blanks();
    match c.peek() {
        None => return Args::Any,
        Some(b',' | b':') if !whole => return Args::Any,
        Some(b'^') => {
            let start = c.pos;
            let re = read_regex(c);
            return if re.len() > 1 && re.ends_with('$') && c.pos > start {
                Args::Regex(re.to_string())
            } else {
                Args::Unterminated(re.to_string())
            };
        }
        _ => {}
    }
    let raw = if whole {
        let r = c.rest().to_string();
        c.pos = c.s.len();
        r
    } else {
        read_unescaped(c, |b| matches!(b, b',' | b':' | b'='))
    };
    // sudo keeps one blank between words, whatever the spacing in the file.
    let joined = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined == "\"\"" {
        Args::Empty
    } else if joined.is_empty() {
        Args::Any
    } else {
        Args::Glob(joined)
    }
}

/// Read `^…$` up to the first unescaped `$` (sudo's regex token), or to the end.
fn read_regex<'a>(c: &mut Cursor<'a>) -> &'a str {
    let start = c.pos;
    let b = c.s.as_bytes();
    let mut i = c.pos;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'$' => {
                i += 1;
                break;
            }
            _ => i += 1,
        }
    }
    c.pos = i.min(b.len());
    &c.s[start..c.pos]
}

/// Read up to an unescaped stop byte; `\` before `,:=#` and blanks is removed (sudo's
/// "quoted sudoers special char"), before anything else it is kept (a glob escape).
fn read_unescaped(c: &mut Cursor, stop: impl Fn(u8) -> bool) -> String {
    let b = c.s.as_bytes();
    let mut out = String::new();
    let mut i = c.pos;
    let mut seg = i;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            if matches!(b[i + 1], b',' | b':' | b'=' | b'#' | b' ' | b'\t' | b'\\') {
                out.push_str(&c.s[seg..i]);
                seg = i + 1;
            }
            i += 2;
            continue;
        }
        if stop(b[i]) {
            break;
        }
        i += 1;
    }
    out.push_str(&c.s[seg..i]);
    c.pos = i;
    out.trim_end().to_string()
}

// ---------------------------------------------------------------------------------------
// Aliases and Defaults lookup
// ---------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Aliases {
    cmnd: HashMap<String, Vec<Item>>,
    user: HashMap<String, Vec<String>>,
    runas: HashMap<String, Vec<String>>,
}

impl Aliases {
    fn collect(entries: &[(Logical, Result<Entry, String>)]) -> Aliases {
        let mut a = Aliases::default();
        for (_, e) in entries {
            match e {
                Ok(Entry::CmndAlias(defs)) => {
                    for (name, items) in defs {
                        a.cmnd.insert(name.clone(), items.clone());
                    }
                }
                Ok(Entry::NameAlias { kind, defs }) => {
                    let map = match kind {
                        NameKind::User => &mut a.user,
                        NameKind::Runas => &mut a.runas,
                        NameKind::Host => continue,
                    };
                    for (name, members) in defs {
                        map.insert(name.clone(), members.clone());
                    }
                }
                _ => {}
            }
        }
        a
    }

    /// The leaf commands of a Cmnd_Alias (nested aliases expanded, cycles cut), or None
    /// when it is not defined.
    fn expand_cmnd(&self, name: &str) -> Option<Vec<Item>> {
        fn walk(a: &Aliases, name: &str, seen: &mut HashSet<String>, out: &mut Vec<Item>) -> bool {
            let Some(items) = a.cmnd.get(name) else {
                return false;
            };
            if !seen.insert(name.to_string()) {
                return true;
            }
            for it in items {
                match &it.cmnd {
                    Cmnd::Alias(inner) => {
                        walk(a, inner, seen, out);
                    }
                    _ => out.push(it.clone()),
                }
            }
            true
        }
        let mut out = Vec::new();
        walk(self, name, &mut HashSet::new(), &mut out).then_some(out)
    }

    /// Whether a name list (users or runas) contains `who`, through aliases.
    fn names_contain(map: &HashMap<String, Vec<String>>, list: &[String], who: &str) -> bool {
        fn walk(
            map: &HashMap<String, Vec<String>>,
            list: &[String],
            who: &str,
            depth: usize,
        ) -> bool {
            depth < 16
                && list.iter().any(|n| {
                    !n.starts_with('!')
                        && (n == who
                            || n == "ALL"
                            || map.get(n).is_some_and(|m| walk(map, m, who, depth + 1)))
                })
        }
        walk(map, list, who, 0)
    }

    fn expand_users(&self, users: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, usize)> = users.iter().rev().map(|u| (u.clone(), 0)).collect();
        while let Some((u, depth)) = stack.pop() {
            match self.user.get(&u) {
                Some(members) if depth < 16 => {
                    stack.extend(members.iter().rev().map(|m| (m.clone(), depth + 1)))
                }
                _ if !u.starts_with('!') && !out.contains(&u) => out.push(u),
                _ => {}
            }
        }
        out
    }
}

/// What a rule's Defaults look like for one user.
struct Env<'a> {
    aliases: &'a Aliases,
    defaults: &'a [&'a DefaultsEntry],
}

impl Env<'_> {
    /// The value of a boolean Defaults option for `user` running commands as root, as sudo
    /// resolves it: generic, then `@host`, then `:user`, then `>runas` Defaults, later ones
    /// of a class overriding earlier ones. Command-bound Defaults are left out (they apply
    /// to some commands only and are reported on their own line).
    fn flag(&self, user: &str, name: &str, default: bool) -> bool {
        let mut best: Option<(u8, bool)> = None;
        for d in self.defaults {
            let tier = match d.binding {
                Binding::Global => 0,
                Binding::Host => 1,
                Binding::User if Aliases::names_contain(&self.aliases.user, &d.targets, user) => 2,
                Binding::Runas
                    if Aliases::names_contain(&self.aliases.runas, &d.targets, "root") =>
                {
                    3
                }
                _ => continue,
            };
            for o in d.options.iter().filter(|o| o.name == name) {
                if best.is_none_or(|(t, _)| tier >= t) {
                    best = Some((tier, !o.negated));
                }
            }
        }
        best.map_or(default, |(_, v)| v)
    }
}

// ---------------------------------------------------------------------------------------
// User specs: rules in context
// ---------------------------------------------------------------------------------------

/// Effective tags along a command list: each tag holds for the following commands too.
#[derive(Debug, Clone, Copy, Default)]
struct TagState {
    nopasswd: Option<bool>,
    noexec: Option<bool>,
    intercept: Option<bool>,
    setenv: Option<bool>,
    log_input: Option<bool>,
    log_output: Option<bool>,
}

impl TagState {
    fn apply(&mut self, tag: &str) {
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
struct LogUsage {
    users: Vec<String>,
    no_input: HashMap<String, usize>,
    no_output: HashMap<String, usize>,
}

impl LogUsage {
    fn record(&mut self, user: &str, line: usize, input: bool, output: bool) {
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

    fn findings(&self, entries: &[(Logical, Result<Entry, String>)]) -> Vec<Finding> {
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

fn check_spec(spec: &Spec, line: usize, env: &Env, usage: &mut LogUsage) -> Vec<Finding> {
    let users = env.aliases.expand_users(&spec.users);
    // root's own rules (the stock `root ALL=(ALL:ALL) ALL`) give root nothing new.
    let users: Vec<String> = users
        .into_iter()
        .filter(|u| u != "root" && u != "#0")
        .collect();
    if users.is_empty() {
        return Vec::new();
    }
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
            let leaves = match &item.cmnd {
                Cmnd::Alias(name) => match env.aliases.expand_cmnd(name) {
                    Some(l) => l,
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
                    vec![item.clone()]
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
            for leaf in leaves.iter().filter(|l| !l.negated) {
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
            let only_negated = leaves.iter().all(|l| l.negated);
            for u in &users {
                let nopasswd = tags.nopasswd.unwrap_or(!env.flag(u, "authenticate", true));
                if !nopasswd && !only_negated {
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
                if !leaves.is_empty() && !only_negated {
                    let input = tags
                        .log_input
                        .unwrap_or_else(|| env.flag(u, "log_input", false));
                    let output = tags
                        .log_output
                        .unwrap_or_else(|| env.flag(u, "log_output", false));
                    usage.record(u, line, input, output);
                }
            }
        }
    }
    out
}

fn runas_text(r: &Runas) -> String {
    if r.groups.is_empty() {
        r.users.join(", ")
    } else {
        format!("{} : {}", r.users.join(", "), r.groups.join(", "))
    }
}

fn leaf_tool(c: &Cmnd) -> Option<Tool> {
    match c {
        Cmnd::Path { path, .. } => Tool::from_name(basename(path)),
        _ => None,
    }
}

fn noexec_pve(what: &str) -> Finding {
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

// ---------------------------------------------------------------------------------------
// Defaults
// ---------------------------------------------------------------------------------------

/// Environment variables that turn a root command into the caller's code.
const DANGEROUS_ENV: &[(&str, &str)] = &[
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
];

/// What each rule tag is called as a Defaults option.
fn tag_as_option(tag: &str) -> &'static str {
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

fn check_defaults(d: &DefaultsEntry, aliases: &Aliases) -> Vec<Finding> {
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
            ("env_keep", false) => {
                for var in o.value.split([' ', '\t', ',']).map(|v| v.trim_matches('"')).filter(|v| !v.is_empty()) {
                    let hit = DANGEROUS_ENV.iter().find(|(name, _)| match var.strip_suffix('*') {
                        Some(prefix) => name.starts_with(prefix),
                        None => *name == var || (var.starts_with("LD_") && name.starts_with("LD_")),
                    });
                    if let Some((name, effect)) = hit {
                        out.push(finding(
                            Severity::Error,
                            "env-keep-dangerous",
                            format!("`{}` keeps `{var}` for root commands: {name} {effect}", o.text),
                            format!("Remove `{var}` from env_keep."),
                        ));
                    }
                }
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

/// `logfile` without `log_format=json` loses argv boundaries (design §6).
fn log_format_finding(entries: &[(Logical, Result<Entry, String>)]) -> Option<Finding> {
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

// ---------------------------------------------------------------------------------------
// Command checks (shared by lint and check_command)
// ---------------------------------------------------------------------------------------

fn check_item(item: &Item) -> Vec<Finding> {
    let display = item.cmnd.display();
    if item.negated {
        return vec![finding(
            Severity::Info,
            "negated-command",
            format!(
                "`!{display}` only subtracts this exact path: a copy, a symlink or a shell still runs it, so a \
                 `!` exception never makes a broad rule safe"
            ),
            "List what is allowed instead of subtracting from a broad rule.",
        )];
    }
    match &item.cmnd {
        Cmnd::All => vec![finding(
            Severity::Error,
            "all-commands",
            "`ALL` as a command lets the account run anything as root: it is root, and so is \
             whoever holds its SSH key"
                .into(),
            "List only the commands the agent needs: `pxagent sudoers render` writes them.",
        )],
        // Expanded where the alias is defined.
        Cmnd::Alias(_) => Vec::new(),
        Cmnd::Sudoedit(args) => vec![finding(
            Severity::Warning,
            "sudoedit",
            format!(
                "`{display}` lets the agent edit {} as root: harmless for a file nothing trusts, root for anything \
                 sudo, cron, systemd or PVE reads",
                if matches!(args, Args::Glob(_) | Args::Regex(_)) {
                    "these files"
                } else {
                    "any file"
                }
            ),
            "Drop sudoedit from the agent's rules; change configuration through PVE operations.",
        )],
        Cmnd::Path { path, args } => check_path(path, args, &display),
    }
}

const STD_DIRS: [&str; 6] = [
    "/usr/bin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
];

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn check_path(path: &str, args: &Args, display: &str) -> Vec<Finding> {
    if path.starts_with('^') {
        return check_regex_path(path, args, display);
    }
    if !path.starts_with('/') {
        return vec![finding(
            Severity::Error,
            "relative-path",
            format!(
                "`{display}`: sudoers needs a fully-qualified path (visudo rejects `{path}`), and a rule that \
                 depends on PATH would never be safe"
            ),
            match Tool::from_name(basename(path)) {
                Some(t) => format!("Write `{}`.", t.path()),
                None => format!("Write the absolute path (`command -v {path}` on the host)."),
            },
        )];
    }
    if path.ends_with('/') || path.contains(['*', '?', '[']) {
        let shells = STD_DIRS
            .iter()
            .any(|d| glob_matches(path, &format!("{d}/bash")) || path == format!("{d}/"));
        return vec![finding(
            Severity::Error,
            "wildcard-path",
            format!(
                "`{display}` allows every program {}{}",
                if path.ends_with('/') {
                    "in that directory"
                } else {
                    "whose path matches the pattern"
                },
                if shells {
                    ", bash and python among them: root"
                } else {
                    ": review what can ever match"
                }
            ),
            "Name each binary by its full path.",
        )];
    }
    let base = basename(path);
    let mut out = Vec::new();
    if let Some(tool) = Tool::from_name(base) {
        out.extend(check_pve_tool(tool, path, args, display));
        return out;
    }
    let dir = &path[..path.len() - base.len()].trim_end_matches('/');
    if !STD_DIRS.contains(dir) {
        out.push(finding(
            Severity::Warning,
            "nonstandard-path",
            format!(
                "`{path}` is outside the system binary directories: if the agent can write the file or any \
                 directory above it, it can replace the program and run anything as root"
            ),
            "Keep allowed programs root-owned under /usr/bin or /usr/sbin (or /usr/local/{s,}bin, root-owned).",
        ));
    }
    out.extend(match base {
        "systemctl" => check_systemctl(args, display),
        "journalctl" => check_journalctl(args, display),
        "dmesg" => check_dmesg(args, display),
        _ => match lookup_risky(base) {
            Some(r) => check_risky(r, args, display),
            None => match OTHER_PVE.iter().find(|(n, _)| *n == base) {
                Some((_, how)) => check_generic(args, display, Severity::Error, how),
                None => {
                    let hint = GENERIC_NOTES
                        .iter()
                        .find(|(n, _)| *n == base)
                        .map_or("", |(_, h)| *h);
                    check_generic(args, display, Severity::Warning, hint)
                }
            },
        },
    });
    out
}

fn check_regex_path(path: &str, args: &Args, display: &str) -> Vec<Finding> {
    let matcher = Regex::new(&ere_to_regex(path)).ok();
    let mut matched: Vec<String> = Vec::new();
    if let Some(m) = &matcher {
        for cand in known_paths() {
            if m.is_match(cand) && !matched.iter().any(|p| basename(p) == basename(cand)) {
                matched.push(cand.clone());
            }
        }
    }
    let mut out = vec![finding(
        Severity::Warning,
        "regex-path",
        format!(
            "`{display}`: a regex as the command path is hard to review and may match more programs than meant{}",
            match (&matcher, matched.is_empty()) {
                (None, _) => " (the linter could not evaluate it)".to_string(),
                (Some(_), true) => String::new(),
                (Some(_), false) => format!(" (it matches {})", matched.join(", ")),
            }
        ),
        "Write one rule per binary with its literal path; pxagent renders literal paths only.",
    )];
    for p in &matched {
        out.extend(check_path(
            p,
            args,
            format!("{p} {}", args.text()).trim_end(),
        ));
    }
    out
}

/// Every path the linter has an opinion about, for judging regex command paths.
fn known_paths() -> &'static [String] {
    static PATHS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut names: BTreeSet<&str> = BTreeSet::new();
        names.extend(RISKY.iter().flat_map(|r| r.names.iter().copied()));
        names.extend(OTHER_PVE.iter().map(|(n, _)| *n));
        names.extend(GENERIC_NOTES.iter().map(|(n, _)| *n));
        names.extend(["systemctl", "journalctl", "dmesg"]);
        let mut out: Vec<String> = Tool::ALL.iter().map(|t| t.path().to_string()).collect();
        for n in names {
            out.extend(STD_DIRS.iter().map(|d| format!("{d}/{n}")));
        }
        out
    });
    &PATHS
}

// --- PVE tools --------------------------------------------------------------------------

/// Why an unconstrained PVE tool is root, and command lines that prove it. A rule whose
/// arguments admit any probe is root-equivalent. Probes list only abuse, never operations
/// pxagent's catalog performs (stop, destroy, storage remove … are confirm-class ops).
struct ToolRisk {
    tool: Tool,
    why: &'static str,
    probes: &'static [&'static str],
}

const TOOL_RISKS: [ToolRisk; 10] = [
    ToolRisk {
        tool: Tool::Qm,
        why: "qm is root in a few words: `qm set N --hookscript local:snippets/x.pl` runs a script as root at the \
              guest's next start, `qm set N --args …` passes raw arguments to QEMU (which runs as root), \
              `qm monitor N` reaches the QEMU monitor where `migrate \"exec:…\"` runs any shell command, and \
              `qm guest exec` runs commands inside guests",
        probes: &[
            "monitor 100",
            "set 100 --hookscript local:snippets/x.pl",
            "set 100 --hookscript=local:snippets/x.pl",
            "set 100 --args -x",
            "set 100 --args=-x",
            "create 100 --hookscript local:snippets/x.pl",
            "guest exec 100 -- sh",
            "guest exec 100 sh",
            "importdisk 100 /etc/shadow local",
            "disk import 100 /etc/shadow local",
        ],
    },
    ToolRisk {
        tool: Tool::Pct,
        why: "pct is root in a few words: `pct exec N -- sh` and `pct enter N` give a shell in the container \
              (in a privileged one, root on the host), `pct push`/`pct pull` copy host files in and out as root \
              (`pct pull N /x /etc/sudoers.d/x`), `pct set N --mp0 /,mp=/host` bind-mounts the host's root into a \
              container, and `--hookscript` runs a script as root",
        probes: &[
            "enter 100",
            "exec 100 -- sh",
            "exec 100 sh",
            "console 100",
            "push 100 /etc/shadow /tmp/s",
            "pull 100 /tmp/x /etc/sudoers.d/x",
            "set 100 --mp0 /,mp=/mnt/host",
            "set 100 --mp0=/,mp=/mnt/host",
            "set 100 --hookscript local:snippets/x.pl",
            "set 100 --hookscript=local:snippets/x.pl",
            "restore 100 /tmp/x.tar",
        ],
    },
    ToolRisk {
        tool: Tool::Pvesh,
        why: "pvesh is the whole PVE API as root@pam, on every node of the cluster: \
              `pvesh set /access/password --userid root@pam …` sets root's password, \
              `pvesh set /access/acl --path / --roles Administrator …` makes anyone an administrator, \
              `pvesh create /nodes/N/termproxy` opens a root shell, and guest config endpoints take hookscripts \
              and bind mounts",
        probes: &[
            "set /access/password --userid root@pam --password x",
            "set /access/acl --path / --roles Administrator --users x@pve",
            "create /access/users --userid x@pve",
            "create /nodes/pve/termproxy",
            "create /nodes/pve/vncshell",
            "create /nodes/pve/execute --commands x",
            "create /nodes/pve/qemu/100/monitor --command x",
            "set /nodes/pve/qemu/100/config --hookscript local:snippets/x.pl",
            "create /nodes/pve/qemu/100/config --hookscript local:snippets/x.pl",
            "set /nodes/pve/lxc/100/config --mp0 /,mp=/mnt/host",
            "create /cluster/config/join --hostname x --fingerprint x --password x",
        ],
    },
    ToolRisk {
        tool: Tool::Pvesm,
        why: "`pvesm add dir X --path / --content snippets,images` turns any host directory into a storage (then \
              hookscripts, and `pvesm export`/`import` read and write any file there), and `pvesm set` rewires \
              existing storages",
        probes: &[
            "add dir x --path / --content snippets",
            "add dir x --path=/ --content=snippets",
            "set local --path /",
            "set local --content snippets",
            "export local:100/vm-100-disk-0.raw raw+size /etc/sudoers.d/x",
            "import local:100/vm-100-disk-0.raw raw+size /etc/shadow",
        ],
    },
    ToolRisk {
        tool: Tool::Vzdump,
        why: "`vzdump N --script /path` runs any program as root (as a hook script), `--dumpdir`/`--tmpdir` write \
              into any directory, and `--stdout` streams any guest's disks to the caller",
        probes: &[
            "100 --script /tmp/x",
            "100 --script=/tmp/x",
            "100 --dumpdir /etc",
            "100 --tmpdir /etc",
            "100 --stdout",
            "100 --stdout 1",
            "--all 1 --script /tmp/x",
            "100 --storage local --script /tmp/x",
            "100 --storage local --mode snapshot --script /tmp/x",
        ],
    },
    ToolRisk {
        tool: Tool::Qmrestore,
        why: "`qmrestore ARCHIVE N` restores any archive, one the caller crafted included, over any VMID \
              (`--force` overwrites an existing guest); the archive's config can carry a hookscript or raw QEMU \
              `args:`, which run as root at the next start",
        probes: &[
            "/tmp/x.vma 100",
            "/tmp/x.vma 100 --force 1",
            "/tmp/x.vma.zst 100",
        ],
    },
    ToolRisk {
        tool: Tool::Pveam,
        why: "`pveam download STORAGE TEMPLATE` writes into any storage, `pveam remove` deletes templates and \
              `pveam update` refreshes the appliance index as root; not a shell by itself, but far more than a \
              fixed download needs",
        probes: &[],
    },
    ToolRisk {
        tool: Tool::HaManager,
        why: "ha-manager acts on the whole cluster: `ha-manager set vm:N --state stopped|disabled`, `remove`, \
              `crm-command migrate|relocate` and `crm-command node-maintenance enable` stop or move every HA guest, \
              and HA recovery can fence (hard-reset) nodes; not a root shell, but cluster-wide disruption from one \
              account",
        probes: &[],
    },
    ToolRisk {
        tool: Tool::Pvecm,
        why: "`pvecm add HOST` joins this node to a cluster the caller controls, which then owns it as root; \
              `pvecm delnode` removes nodes and `pvecm expected 1` forces quorum (split brain)",
        probes: &[
            "add 10.0.0.1",
            "add 10.0.0.1 --force",
            "add 10.0.0.1 --force 1",
        ],
    },
    ToolRisk {
        tool: Tool::QemuImg,
        why: "`qemu-img convert -f raw -O raw /tmp/x /etc/sudoers.d/x` writes any file as root, and \
              `qemu-img info`/`convert`/`dd` read any file (/etc/shadow, /etc/pve/priv/authkey.key)",
        probes: &[
            "convert -O raw /tmp/x /etc/sudoers.d/x",
            "convert -f raw -O raw /tmp/x /etc/sudoers.d/x",
            "dd if=/tmp/x of=/etc/sudoers.d/x",
            "create -f raw /etc/sudoers.d/x 1M",
            "info /etc/shadow",
        ],
    },
];

fn tool_risk(tool: Tool) -> &'static ToolRisk {
    TOOL_RISKS
        .iter()
        .find(|r| r.tool == tool)
        .expect("every Tool has a ToolRisk (tested)")
}

/// Merged /usr (PVE 8 and 9): /bin is /usr/bin and /sbin is /usr/sbin, and sudo also
/// matches a rule's path by inode, so `/sbin/qm` works; `/usr/bin/qm` does not exist.
fn merged_usr(path: &str) -> String {
    for (from, to) in [("/bin/", "/usr/bin/"), ("/sbin/", "/usr/sbin/")] {
        if let Some(rest) = path.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    path.to_string()
}

fn check_pve_tool(tool: Tool, path: &str, args: &Args, display: &str) -> Vec<Finding> {
    // pxagent's own exec rules (issue 6) carry a guest's argv by design: `.*` after a pinned
    // prefix (verb, endpoint, fenced VMID). Say what they grant instead of "over-broad".
    if let (Args::Regex(r), true) = (args, path == tool.path())
        && let Some(op) = own_exec_op(tool, r)
    {
        let (severity, what) = match op.area {
            crate::catalog::Area::Ct => (
                Severity::Warning,
                "root inside these containers (close to host root in a privileged one; pxagent refuses those unless its policy allows them)",
            ),
            _ => (
                Severity::Info,
                "root inside these VMs through their guest agent, nothing on the host",
            ),
        };
        return vec![finding(
            severity,
            "guest-exec",
            format!(
                "`{display}` is pxagent's {} rule: it runs commands as {what}",
                op.id
            ),
            "Keep it only if agents need commands inside guests; pxagent rate-limits them and checks its policy's command allowlist.",
        )];
    }
    let risk = tool_risk(tool);
    let name = tool.name();
    let mut out = Vec::new();
    if merged_usr(path) != tool.path() {
        out.push(finding(
            Severity::Error,
            "wrong-path",
            format!(
                "`{path}` does not exist on PVE 8/9 ({name} is {}): sudo never matches this rule, so it is dead \
                 and the agent gets 'sudo: a password is required'",
                tool.path()
            ),
            format!("Write `{}`.", tool.path()),
        ));
    } else if path != tool.path() {
        out.push(finding(
            Severity::Info,
            "noncanonical-path",
            format!(
                "`{path}` works on merged-/usr hosts (sudo matches it by inode), but pxagent runs `{}`",
                tool.path()
            ),
            format!("Write `{}`.", tool.path()),
        ));
    }
    match args {
        Args::Any => out.push(finding(
            Severity::Error,
            "unconstrained-args",
            format!(
                "`{display}` has no argument list, and sudo reads that as \"any arguments\": every {name} command \
                 line is allowed. {}",
                risk.why
            ),
            FIX_RENDER,
        )),
        Args::Glob(g) if has_star(g) => out.push(finding(
            Severity::Error,
            "wildcard-args",
            format!(
                "`{display}`: sudo's `*` matches spaces, options and `--`, so this allows any {name} command line. {}",
                risk.why
            ),
            FIX_RENDER,
        )),
        _ => {
            out.extend(args_findings(args, display, true));
            let probes: Vec<String> = risk
                .probes
                .iter()
                .flat_map(|p| {
                    // pvesh rules usually pin the output format at the end.
                    let tails: &[&str] = if tool == Tool::Pvesh {
                        &["", " --output-format json", " --output-format=json"]
                    } else {
                        &[""]
                    };
                    tails.iter().map(move |t| format!("{p}{t}"))
                })
                .collect();
            let hits = admitted(args, &probes);
            if !hits.is_empty() {
                let shown: Vec<String> = hits.iter().take(3).map(|h| format!("`{name} {h}`")).collect();
                out.push(finding(
                    Severity::Error,
                    "pve-dangerous-args",
                    format!("`{display}` still admits {}. {}", shown.join(", "), risk.why),
                    FIX_RENDER,
                ));
            }
        }
    }
    out
}

/// The catalog exec op whose rendered rule (with any VMID fence) this regex is.
fn own_exec_op(tool: Tool, regex: &str) -> Option<&'static crate::catalog::Op> {
    const SENTINEL: &str = "PXAVMIDFENCE";
    crate::catalog::OPS
        .iter()
        .copied()
        .filter(|op| op.risk == crate::catalog::Risk::Exec && op.tool == tool)
        .find(|op| {
            let escaped = regex::escape(&op.args_regex(Some(SENTINEL))).replace(
                &format!(r"\({SENTINEL}\)"),
                r"(?:\[1-9\]\[0-9\]\{2,8\}|\([0-9\[\]{}|-]+\))",
            );
            Regex::new(&format!("^{escaped}$")).is_ok_and(|re| re.is_match(regex))
        })
}

// --- systemd and other pager tools ------------------------------------------------------

/// Why a systemd tool that can start its pager is root.
fn pager_why(tool: &str) -> String {
    format!(
        "on a terminal (any `ssh -t`) {tool} pages its output through less, and `!sh` in less is a root shell; \
         systemd ≥ 247 switches less to secure mode under sudo, but only when it detects sudo and the pager is \
         less, while a pinned `--no-pager` depends on neither"
    )
}

const FIX_NO_PAGER: &str = "Pin `--no-pager` in an anchored regex with exactly the arguments needed, e.g. \
     `/usr/bin/journalctl ^-u pvedaemon -n [0-9]{1,4} --no-pager -o json$`, or drop the rule.";

const SYSTEMCTL_ROOT_PROBES: &[&str] = &[
    "start debug-shell.service",
    "restart debug-shell.service",
    "reload-or-restart debug-shell.service",
    "enable --now debug-shell.service",
    "isolate rescue.target",
    "edit ssh.service",
    "link /tmp/x.service",
    "enable /tmp/x.service",
    "set-environment LD_PRELOAD=/tmp/x.so",
    "set-property ssh.service ExecStart=/bin/sh",
];

const SYSTEMCTL_PAGER_VERBS: &[&str] = &[
    "status",
    "show",
    "cat",
    "help",
    "list-units",
    "list-unit-files",
    "list-timers",
    "list-sockets",
    "list-jobs",
    "list-dependencies",
    "list-machines",
];

fn check_systemctl(args: &Args, display: &str) -> Vec<Finding> {
    let unit_control = |extra: &str| {
        finding(
            Severity::Error,
            "systemctl-unit-control",
            format!(
                "`{display}`{extra} lets the agent control any unit as root: `systemctl start debug-shell.service` \
                 is a root shell on tty9, `systemctl edit` opens an editor as root, `link`/`enable` install unit \
                 files from any path, `set-environment` reaches every service started later"
            ),
            "Allow fixed verbs and units only, e.g. `/usr/bin/systemctl ^is-active (pvedaemon|pveproxy)$`, \
             and `--no-pager` for anything that prints.",
        )
    };
    if matches!(args, Args::Any) {
        return vec![unit_control(" (no argument list: any arguments)")];
    }
    let mut out = args_findings(args, display, true);
    let root_probes: Vec<String> = SYSTEMCTL_ROOT_PROBES
        .iter()
        .map(|p| p.to_string())
        .collect();
    if !admitted(args, &root_probes).is_empty() {
        out.push(unit_control(""));
        return out;
    }
    let pager_probes: Vec<String> = SYSTEMCTL_PAGER_VERBS
        .iter()
        .flat_map(|v| [v.to_string(), format!("{v} pvedaemon")])
        .collect();
    if !args.text().contains("--no-pager") && !admitted(args, &pager_probes).is_empty() {
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!("`{display}`: {}", pager_why("systemctl")),
            "Pin `--no-pager` in an anchored regex with exactly the verb and units needed, e.g. \
             `/usr/bin/systemctl ^--no-pager status (pvedaemon|pveproxy)$`, or drop the rule.",
        ));
    } else if matches!(args, Args::Glob(g) if has_star(g)) {
        out.push(finding(
            Severity::Warning,
            "wildcard-args",
            format!("`{display}`: `*` also passes options (`-H host`, `--root=DIR` …); over-broad"),
            FIX_PIN,
        ));
    }
    out
}

fn check_journalctl(args: &Args, display: &str) -> Vec<Finding> {
    let tamper = "; `--vacuum-time=1s`, `--rotate` and `--flush` delete or rotate the journal — the audit trail";
    let unbounded = matches!(args, Args::Any) || matches!(args, Args::Glob(g) if has_star(g));
    if unbounded || !args.text().contains("--no-pager") {
        let mut out = args_findings(args, display, true);
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!(
                "`{display}`: {}{}",
                pager_why("journalctl"),
                if unbounded { tamper } else { "" }
            ),
            FIX_NO_PAGER,
        ));
        return out;
    }
    let mut out = args_findings(args, display, true);
    let probes: Vec<String> = [
        "--no-pager --vacuum-time=1s",
        "--vacuum-time=1s --no-pager",
        "--no-pager --vacuum-size=1",
        "--no-pager --rotate",
        "--no-pager --flush",
        "--no-pager --relinquish-var",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    if !admitted(args, &probes).is_empty() {
        out.push(finding(
            Severity::Error,
            "journal-tamper",
            format!("`{display}` admits `--vacuum-*`/`--rotate`/`--flush`: the agent can delete the journal it is audited by"),
            FIX_NO_PAGER,
        ));
    }
    out
}

fn check_dmesg(args: &Args, display: &str) -> Vec<Finding> {
    let mut out = args_findings(args, display, false);
    if matches!(args, Args::Any) || matches!(args, Args::Glob(g) if has_star(g)) {
        out.push(finding(
            Severity::Error,
            "pager-escape",
            format!(
                "`{display}`: `dmesg -H` pages through less (`!sh` is a root shell; util-linux does not make less \
                 secure) and `dmesg -C` clears the kernel log"
            ),
            "Pin the arguments, e.g. `/usr/bin/dmesg ^--ctime --nopager$`, or drop the rule.",
        ));
    }
    out
}

// --- Risky binaries ---------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Is, or starts, a shell.
    Shell,
    /// Its arguments are a program.
    Interpreter,
    /// Pagers and editors: `!sh`.
    PagerEditor,
    /// Runs other programs given as arguments or options.
    ExecEscape,
    /// Writes or changes files.
    FileWrite,
    /// Reads files.
    FileRead,
    Mount,
    Umount,
    Mkdir,
    /// Destroys disks.
    Disk,
    Package,
    Account,
}

impl Class {
    fn code(self) -> &'static str {
        match self {
            Class::Shell => "shell",
            Class::Interpreter => "interpreter",
            Class::PagerEditor => "pager-editor",
            Class::ExecEscape => "exec-escape",
            Class::FileWrite => "file-write",
            Class::FileRead => "file-read",
            Class::Mount => "mount",
            Class::Umount => "umount",
            Class::Mkdir => "mkdir",
            Class::Disk => "disk-destroy",
            Class::Package => "package-manager",
            Class::Account => "account-admin",
        }
    }

    /// True when no argument constraint makes the binary safe.
    fn always_error(self) -> bool {
        matches!(
            self,
            Class::Shell | Class::Interpreter | Class::PagerEditor | Class::Disk | Class::Account
        )
    }
}

struct Risky {
    names: &'static [&'static str],
    class: Class,
    how: &'static str,
}

/// Binaries that are root (or close) as a sudo rule — GTFOBins' usual suspects plus what
/// the published PVE setup uses. Versioned names (`python3.11`, `perl5.36`, `mkfs.ext4`,
/// `vim.basic`) resolve to their family in [`lookup_risky`].
#[rustfmt::skip] // a data table: one line per group reads better than one per name
const RISKY: &[Risky] = &[
    Risky {
        names: &[
            "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "csh", "tcsh", "fish", "ash", "rbash", "busybox",
            "su", "sudo", "doas", "runuser", "login", "pkexec", "setpriv", "capsh", "script", "tmux", "screen",
            "machinectl",
        ],
        class: Class::Shell,
        how: "it is, or starts, a shell (`sudo -s`, `su -`, `script -c sh`, `machinectl shell`): root whatever \
              the arguments",
    },
    Risky {
        names: &[
            "python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "irb", "lua", "luajit", "node",
            "nodejs", "php", "tclsh", "wish", "expect", "Rscript", "julia", "guile",
        ],
        class: Class::Interpreter,
        how: "an interpreter runs whatever program its arguments name or contain (`python3 -c`, `perl -e`), and a \
              fixed script is only as safe as every file and module it loads",
    },
    Risky {
        names: &["awk", "gawk", "mawk", "nawk"],
        class: Class::Interpreter,
        how: "awk programs run commands: `awk 'BEGIN {system(\"/bin/sh\")}'`",
    },
    Risky {
        names: &["sed"],
        class: Class::Interpreter,
        how: "sed's `e` command runs a shell command and `w` writes any file (`sed -n '1e /bin/sh' /etc/hostname`)",
    },
    Risky { names: &["make"], class: Class::Interpreter, how: "make runs recipes: `make -f /dev/stdin` or `--eval`" },
    Risky { names: &["gdb"], class: Class::Interpreter, how: "gdb runs `!sh`, Python and any program it debugs" },
    Risky {
        names: &[
            "less", "more", "most", "pg", "man", "view", "vi", "vim", "nvim", "rvim", "rview", "vimdiff", "ex",
            "nano", "pico", "ed", "red", "emacs", "joe", "jed", "mcedit", "micro", "mc", "editor",
            "sensible-editor", "pager", "sensible-pager",
        ],
        class: Class::PagerEditor,
        how: "pagers run `!sh` and editors `:!sh` (or save over /etc/sudoers.d), whatever file they were opened on",
    },
    Risky {
        names: &["find"],
        class: Class::ExecEscape,
        how: "`find / -exec /bin/sh \\;` runs a shell, `-fprint` writes any file, `-delete` deletes",
    },
    Risky { names: &["xargs"], class: Class::ExecEscape, how: "`xargs sh -c …` runs any command" },
    Risky { names: &["env"], class: Class::ExecEscape, how: "`env /bin/sh` runs any program" },
    Risky {
        names: &[
            "nice", "nohup", "timeout", "stdbuf", "setsid", "taskset", "ionice", "chrt", "flock", "watch", "time",
            "run-parts", "start-stop-daemon", "systemd-run", "sg", "unbuffer", "busctl", "coredumpctl",
        ],
        class: Class::ExecEscape,
        how: "it runs another program named in its arguments (`nice /bin/sh`, `systemd-run sh`, `busctl call` into \
              systemd, `coredumpctl debug` → gdb)",
    },
    Risky {
        names: &["strace", "ltrace", "valgrind"],
        class: Class::ExecEscape,
        how: "it launches any program or attaches to any process (`strace -o /dev/null /bin/sh`)",
    },
    Risky {
        names: &["unshare", "nsenter", "chroot"],
        class: Class::ExecEscape,
        how: "`nsenter -t 1 -a sh`, `unshare sh` and `chroot / sh` start a root shell",
    },
    Risky {
        names: &["ip"],
        class: Class::ExecEscape,
        how: "`ip netns exec NAME sh` runs a root shell, and `ip link`/`ip route` rewire the host's network",
    },
    Risky {
        names: &["tar"],
        class: Class::ExecEscape,
        how: "`tar --to-command=sh` and `--checkpoint-action=exec=sh` run commands; `tar -x -C /` overwrites any file",
    },
    Risky { names: &["zip"], class: Class::ExecEscape, how: "`zip x.zip f -T -TT 'sh #'` runs a command" },
    Risky {
        names: &["rsync"],
        class: Class::ExecEscape,
        how: "`rsync -e 'sh -c …'` runs commands, and it overwrites any file",
    },
    Risky {
        names: &["ssh", "scp", "sftp"],
        class: Class::ExecEscape,
        how: "`ssh -o ProxyCommand=…`/`scp -S prog` run commands, and they read root's keys and any file and send \
              them off-host",
    },
    Risky {
        names: &["git"],
        class: Class::ExecEscape,
        how: "git runs a pager (`!sh`), hooks, and `-c core.pager=…`/`core.sshCommand=…` commands",
    },
    Risky {
        names: &["docker", "podman", "nerdctl", "ctr", "kubectl", "lxc", "lxc-attach", "lxc-execute", "lxc-start"],
        class: Class::ExecEscape,
        how: "`docker run -v /:/host …` or `lxc-attach` into a container is root on the host",
    },
    Risky {
        names: &["crontab", "at", "batch"],
        class: Class::ExecEscape,
        how: "`crontab -e` or `at` schedule any command as root",
    },
    Risky {
        names: &["socat", "nc", "ncat", "netcat", "telnet"],
        class: Class::ExecEscape,
        how: "`socat … EXEC:sh` or `nc -e sh` serve a root shell to the network",
    },
    Risky {
        names: &["sort"],
        class: Class::ExecEscape,
        how: "`sort --compress-program=sh` runs a command and `sort -o FILE` writes any file",
    },
    Risky {
        names: &["tee", "cp", "mv", "dd", "install", "ln", "truncate", "cpio", "patch", "unzip", "openssl"],
        class: Class::FileWrite,
        how: "it writes any file as root (`echo … | tee /etc/sudoers.d/x`, `cp`, `dd of=`, `unzip -o -d /`)",
    },
    Risky {
        names: &["chmod", "chown", "chgrp", "chattr", "setfacl"],
        class: Class::FileWrite,
        how: "it makes any file writable, or a shell setuid root",
    },
    Risky { names: &["rm", "shred", "unlink"], class: Class::FileWrite, how: "it deletes any file as root" },
    Risky {
        names: &["curl", "wget"],
        class: Class::FileWrite,
        how: "`curl -o /etc/sudoers.d/x URL` writes any file and `curl file:///etc/shadow` reads any file",
    },
    Risky {
        names: &[
            "cat", "head", "tail", "tac", "nl", "od", "hexdump", "xxd", "strings", "base64", "base32", "grep",
            "egrep", "fgrep", "rgrep", "zcat", "zgrep", "bzcat", "xzcat", "zstdcat", "diff", "cmp", "cut", "paste",
            "fold", "column", "uniq",
        ],
        class: Class::FileRead,
        how: "it reads files as root: /etc/shadow, or /etc/pve/priv/authkey.key, which signs cluster logins as \
              root@pam",
    },
    Risky {
        names: &["mount"],
        class: Class::Mount,
        how: "`mount --bind /tmp/x /etc` or a filesystem carrying a setuid shell is root",
    },
    Risky {
        names: &["umount"],
        class: Class::Umount,
        how: "it can pull storage out from under running guests and PVE itself (/etc/pve is a FUSE mount)",
    },
    Risky {
        names: &["mkdir"],
        class: Class::Mkdir,
        how: "it creates directories anywhere as root (root-owned `.d` directories services read)",
    },
    Risky {
        names: &["mkfs", "mkswap", "fdisk", "sfdisk", "gdisk", "sgdisk", "cfdisk", "parted", "wipefs", "blkdiscard"],
        class: Class::Disk,
        how: "it destroys disks and the storages and guests on them",
    },
    Risky {
        names: &["apt", "apt-get", "aptitude", "dpkg", "pip", "pip3", "npm", "gem", "snap", "pveupgrade"],
        class: Class::Package,
        how: "`apt-get install ./x.deb`/`dpkg -i` run maintainer scripts as root, `apt-get changelog` opens a pager, \
              `pveupgrade --shell` opens a shell",
    },
    Risky {
        names: &[
            "usermod", "useradd", "adduser", "userdel", "deluser", "passwd", "chpasswd", "gpasswd", "groupadd",
            "groupmod", "groupdel", "addgroup", "delgroup", "visudo", "vipw", "vigr", "chsh", "chfn", "chage",
            "newusers", "pveum",
        ],
        class: Class::Account,
        how: "it changes accounts or sudoers: a new uid-0 user, root's password, the agent in the sudo group, \
              `visudo` itself, or (pveum) an Administrator ACL",
    },
];

/// PVE programs outside the catalog's tools: over-broad rules on them are errors, fixed
/// arguments are left alone.
const OTHER_PVE: &[(&str, &str)] = &[
    (
        "pve-firewall",
        "`pve-firewall stop` switches off the firewall of the host and every guest — a protection the agent has \
         no business removing",
    ),
    (
        "pvenode",
        "`pvenode cert set` replaces the node's TLS certificate and `pvenode config set` its ACME setup",
    ),
    (
        "pveceph",
        "`pveceph pool destroy`/`purge` destroy Ceph storage cluster-wide",
    ),
    (
        "pvesr",
        "`pvesr create-local-job`/`delete` move guest disks between nodes and drop replicas",
    ),
    ("pveupdate", "it runs apt as root"),
    (
        "pvesubscription",
        "it sets or deletes the subscription key and reaches out to the network",
    ),
    (
        "proxmox-boot-tool",
        "`proxmox-boot-tool format|init` rewrites boot partitions: it can brick the node",
    ),
    (
        "proxmox-backup-client",
        "`restore` writes any file as root and `backup` reads any file and sends it off-host",
    ),
    ("pvedaemon", "it stops and restarts the PVE API daemon"),
    ("pveproxy", "it stops and restarts the PVE web/API proxy"),
    (
        "pvereport",
        "it collects the whole host configuration, secrets included",
    ),
];

/// Low-impact tools, with what `*` still lets through.
const GENERIC_NOTES: &[(&str, &str)] = &[
    (
        "du",
        "`du --files0-from=/etc/shadow` prints the file's lines in its error messages",
    ),
    (
        "blkid",
        "`blkid -c FILE` writes a cache file anywhere as root",
    ),
    (
        "ss",
        "`ss -K` kills sockets, the agent's own SSH and pveproxy's included",
    ),
    ("ping", "`ping -f` floods as root"),
    (
        "resolvectl",
        "`resolvectl dns LINK IP` redirects the host's DNS",
    ),
    ("ls", "`ls -la /root /etc/pve/priv` lists any directory"),
    (
        "hostnamectl",
        "`hostnamectl set-hostname` renames the node (breaks the PVE cluster)",
    ),
    (
        "timedatectl",
        "`timedatectl set-time` moves the clock (breaks tickets, TLS and corosync)",
    ),
    ("networkctl", "`networkctl down` takes links down"),
    ("kill", "it kills any process, the guests' kvm included"),
    ("pkill", "it kills any process, the guests' kvm included"),
    ("killall", "it kills any process, the guests' kvm included"),
    ("reboot", "it takes the whole node down"),
    ("shutdown", "it takes the whole node down"),
    ("poweroff", "it takes the whole node down"),
    ("lsblk", ""),
    ("df", ""),
    ("uname", ""),
    ("uptime", ""),
    ("free", ""),
];

fn lookup_risky(base: &str) -> Option<&'static Risky> {
    let find = |n: &str| RISKY.iter().find(|r| r.names.contains(&n));
    let stem = base.split('.').next().unwrap_or(base);
    find(base)
        .or_else(|| find(stem))
        .or_else(|| find(stem.trim_end_matches(|c: char| c.is_ascii_digit())))
}

/// Paths whose writing is root (or bricks the host).
#[rustfmt::skip] // a data table: one line per group reads better than one per name
const WRITE_TARGETS: &[&str] = &[
    "/etc/sudoers", "/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/cron", "/var/spool/cron",
    "/etc/systemd", "/lib/systemd", "/etc/init.d", "/etc/rc.local", "/etc/profile", "/etc/bash.bashrc",
    "/etc/environment", "/etc/ld.so", "/etc/pam.d", "/etc/security", "/etc/ssh", "/root", "/etc/pve", "/usr/",
    "/bin/", "/sbin/", "/lib/", "/boot", "/dev/", "/etc/apt", "/etc/modprobe.d", "/etc/udev", "/var/lib/vz/snippets",
];

/// Files whose reading is root (or leaks credentials).
#[rustfmt::skip] // a data table: one line per group reads better than one per name
const SECRET_FILES: &[&str] = &[
    "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/pve/priv", ".key", "/root/", "/etc/ssh/ssh_host_",
    "/etc/corosync/authkey", "/var/lib/pve-cluster/config.db", "/home/",
];

/// Argument words that make an exec-capable binary run something.
#[rustfmt::skip] // a data table: one line per group reads better than one per name
const EXEC_WORDS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "exec", "--to-command", "--checkpoint-action", "--use-compress-program",
    "--rsh", "ProxyCommand", "LocalCommand", "--compress-program",
];

/// How wide a rule's arguments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// No argument list, `*`, or a regex that swallows words / is not anchored.
    Open,
    /// `""`, literal arguments or a tight regex.
    Fixed,
}

fn scope(args: &Args) -> Scope {
    match args {
        Args::Any | Args::Unterminated(_) => Scope::Open,
        Args::Empty => Scope::Fixed,
        Args::Glob(g) if has_star(g) => Scope::Open,
        Args::Glob(_) => Scope::Fixed,
        Args::Regex(r) => {
            let s = ere_shape(r);
            if s.top_alternation || !s.broad.is_empty() {
                Scope::Open
            } else {
                Scope::Fixed
            }
        }
    }
}

fn check_risky(r: &Risky, args: &Args, display: &str) -> Vec<Finding> {
    let open = scope(args) == Scope::Open;
    let text = args.text();
    let words: Vec<&str> = text.split([' ', '=']).filter(|w| !w.is_empty()).collect();
    let runs_shell = words.iter().any(|w| {
        EXEC_WORDS.contains(w)
            || lookup_risky(basename(w))
                .is_some_and(|x| matches!(x.class, Class::Shell | Class::Interpreter))
    });
    let write_target = WRITE_TARGETS.iter().find(|p| text.contains(**p));
    let secret = SECRET_FILES.iter().find(|p| text.contains(**p));
    let (severity, note) = if r.class.always_error() {
        (Some(Severity::Error), String::new())
    } else {
        match r.class {
            Class::ExecEscape if open || runs_shell => (Some(Severity::Error), String::new()),
            Class::ExecEscape => (
                Some(Severity::Warning),
                "; these fixed arguments look harmless, but keep such binaries out of an agent's rules".into(),
            ),
            Class::FileWrite if open => (Some(Severity::Error), String::new()),
            Class::FileWrite => match write_target {
                Some(p) => (Some(Severity::Error), format!("; the arguments reach {p}")),
                None => (Some(Severity::Warning), "; the fixed arguments limit what it touches".into()),
            },
            Class::FileRead if open => (Some(Severity::Error), String::new()),
            Class::FileRead => match secret {
                Some(p) => (Some(Severity::Error), format!("; the arguments reach {p}")),
                None => (Some(Severity::Info), String::new()),
            },
            Class::Mount | Class::Package if open => (Some(Severity::Error), String::new()),
            Class::Mount | Class::Package => (Some(Severity::Warning), String::new()),
            Class::Umount | Class::Mkdir if open => (Some(Severity::Warning), String::new()),
            _ => (None, String::new()),
        }
    };
    let mut out = args_findings(args, display, false);
    if let Some(severity) = severity {
        let args_note = match args {
            Args::Any => " (no argument list: any arguments)",
            Args::Glob(g) if has_star(g) => " (`*` matches any arguments)",
            _ => "",
        };
        let fix = match r.class {
            Class::FileRead if severity == Severity::Info => {
                "Nothing to do if the file is harmless; pxagent reads host state through `pvesh get … \
                 --output-format json` instead."
            }
            Class::Umount | Class::Mkdir => FIX_PIN,
            _ => FIX_DROP,
        };
        let why = if r.class == Class::FileRead && severity == Severity::Info {
            format!(
                "`{display}` reads `{text}` as root: fine if that file holds no secrets (with open arguments \
                 the same rule would read /etc/shadow or /etc/pve/priv/authkey.key)"
            )
        } else {
            format!("`{display}`{args_note}: {}{note}", r.how)
        };
        out.push(finding(severity, r.class.code(), why, fix));
    }
    out
}

/// Any other binary: only over-broad arguments are reported, at `severity`.
fn check_generic(args: &Args, display: &str, severity: Severity, hint: &str) -> Vec<Finding> {
    let hint = if hint.is_empty() {
        "low impact, but more than the agent needs".to_string()
    } else {
        hint.to_string()
    };
    let mut out = args_findings(args, display, false);
    match args {
        Args::Any => out.push(finding(
            severity,
            "unconstrained-args",
            format!("`{display}` has no argument list, and sudo reads that as \"any arguments\": {hint}"),
            FIX_PIN,
        )),
        Args::Glob(g) if has_star(g) => out.push(finding(
            severity,
            "wildcard-args",
            format!("`{display}`: sudo's `*` matches spaces, options and `--`, so any arguments pass: {hint}"),
            FIX_PIN,
        )),
        _ => {}
    }
    out
}

/// Findings about the argument list itself (regex quality, look-alike regexes).
/// `critical`: the binary is a PVE or systemd tool, where loose arguments are root.
fn args_findings(args: &Args, display: &str, critical: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    match args {
        Args::Unterminated(r) => out.push(finding(
            Severity::Error,
            "regex-unterminated",
            format!(
                "`{display}`: arguments starting with `^` are a regex that must end with `$`; `{r}` has no `$`, \
                 so sudo rejects the line ('unterminated regular expression')"
            ),
            "End the regex with `$`.",
        )),
        Args::Regex(r) => {
            if Regex::new(&ere_to_regex(r)).is_err() {
                out.push(finding(
                    Severity::Info,
                    "regex-unchecked",
                    format!("`{display}`: the linter could not evaluate this regex; review it by hand"),
                    "Keep argument regexes to plain POSIX ERE: literals, classes, groups, `|`, `?`, `{m,n}`.",
                ));
            }
            let shape = ere_shape(r);
            if shape.top_alternation {
                out.push(finding(
                    if critical { Severity::Error } else { Severity::Warning },
                    "regex-unanchored",
                    format!(
                        "`{display}`: in POSIX ERE `^a|b$` means `(^a)|(b$)` — each alternative is anchored at one \
                         end only, so the other end accepts anything, extra options included"
                    ),
                    "Group the alternatives: `^(a|b)$`.",
                ));
            }
            for atom in &shape.broad {
                out.push(finding(
                    Severity::Warning,
                    "regex-too-broad",
                    format!(
                        "`{display}`: `{atom}` {}",
                        if atom.starts_with('(') {
                            "repeats words that may start with `-`: extra options pass"
                        } else if atom.contains(' ') || atom.starts_with('.') || atom.contains("\\s") {
                            "can match spaces and dashes, so it takes in whole extra words, options included"
                        } else {
                            "can match both `-` and `=`, so one word can be a complete `--option=value`"
                        }
                    ),
                    "Use classes without space, `-`-first words and `=`, and bound them: `[1-9][0-9]{2,8}` for a \
                     VMID, `[a-z0-9][a-z0-9-]{0,62}` for a name.",
                ));
            }
        }
        Args::Glob(g) if looks_like_regex(g) => out.push(finding(
            Severity::Warning,
            "regex-not-anchored",
            format!(
                "`{display}`: sudo treats arguments as a regex only when they start with `^` (and end with `$`); \
                 these are matched as a glob, literally, so the rule probably never matches"
            ),
            "Write the regex as `^…$`.",
        )),
        _ => {}
    }
    out
}

fn looks_like_regex(g: &str) -> bool {
    g.ends_with('$') || g.contains("]+") || g.contains("]{") || (g.contains('(') && g.contains('|'))
}

// ---------------------------------------------------------------------------------------
// Globs and regexes
// ---------------------------------------------------------------------------------------

fn has_star(glob: &str) -> bool {
    let b = glob.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'*' => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// The probes a rule's arguments admit (all of them when the arguments are unconstrained).
fn admitted(args: &Args, probes: &[String]) -> Vec<String> {
    let re = match args {
        Args::Any => return probes.to_vec(),
        Args::Unterminated(_) => return Vec::new(),
        Args::Empty => return Vec::new(),
        Args::Glob(g) => Regex::new(&glob_to_regex(g)),
        Args::Regex(r) => Regex::new(&ere_to_regex(r)),
    };
    match re {
        Ok(re) => probes.iter().filter(|p| re.is_match(p)).cloned().collect(),
        Err(_) => Vec::new(),
    }
}

fn glob_matches(glob: &str, text: &str) -> bool {
    Regex::new(&glob_to_regex(glob)).is_ok_and(|re| re.is_match(text))
}

/// An fnmatch pattern (no FNM_PATHNAME: `*` crosses `/` and spaces) as an anchored Rust regex.
fn glob_to_regex(glob: &str) -> String {
    let mut out = String::from("(?s)^");
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '\\' if i + 1 < chars.len() => {
                i += 1;
                out.push_str(&regex::escape(&chars[i].to_string()));
            }
            '[' => match parse_bracket(&chars, i, true) {
                Some((end, set)) => {
                    out.push_str(&set.to_regex());
                    i = end;
                    continue;
                }
                None => out.push_str(r"\["),
            },
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out.push('$');
    out
}

/// A POSIX ERE as sudo's regcomp sees it, translated for the `regex` crate. Differences
/// handled: a backslash inside brackets is literal in POSIX; `.` matches newline; `\<`
/// `\>` (GNU) become `\b`; unknown escapes are the literal character.
fn ere_to_regex(re: &str) -> String {
    let chars: Vec<char> = re.chars().collect();
    let mut out = String::from("(?s)");
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                let n = chars[i + 1];
                match n {
                    'w' | 'W' | 's' | 'S' | 'b' | 'B' => {
                        out.push('\\');
                        out.push(n);
                    }
                    '<' | '>' => out.push_str(r"\b"),
                    _ => out.push_str(&regex::escape(&n.to_string())),
                }
                i += 2;
                continue;
            }
            '[' => {
                if let Some((end, set)) = parse_bracket(&chars, i, false) {
                    out.push_str(&set.to_regex());
                    i = end;
                    continue;
                }
                out.push_str(r"\[");
            }
            '{' => {
                let rest: String = chars[i..].iter().collect();
                static INTERVAL: LazyLock<Regex> =
                    LazyLock::new(|| Regex::new(r"^\{[0-9]+(,[0-9]*)?\}").expect("static regex"));
                match INTERVAL.find(&rest) {
                    Some(m) => {
                        out.push_str(m.as_str());
                        i += m.as_str().chars().count();
                        continue;
                    }
                    None => out.push_str(r"\{"),
                }
            }
            '.' | '*' | '+' | '?' | '|' | '(' | ')' | '^' | '$' => out.push(c),
            _ => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out
}

/// A bracket expression: ranges and POSIX classes, possibly negated.
#[derive(Debug, Clone, Default)]
struct CharSet {
    negated: bool,
    ranges: Vec<(char, char)>,
    classes: Vec<String>,
}

impl CharSet {
    fn contains(&self, ch: char) -> bool {
        let in_class = |name: &str| match name {
            "space" | "blank" => ch == ' ',
            "punct" | "graph" => ch == '-' || ch == '=',
            "print" => ch == ' ' || ch == '-' || ch == '=',
            _ => false,
        };
        let hit = self.ranges.iter().any(|&(lo, hi)| lo <= ch && ch <= hi)
            || self.classes.iter().any(|c| in_class(c));
        hit != self.negated
    }

    fn to_regex(&self) -> String {
        let esc = |c: char| {
            if c.is_ascii_alphanumeric() || c == ' ' || !c.is_ascii() {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        };
        let mut s = String::from("[");
        if self.negated {
            s.push('^');
        }
        for &(lo, hi) in &self.ranges {
            s.push_str(&esc(lo));
            if hi != lo {
                s.push('-');
                s.push_str(&esc(hi));
            }
        }
        for c in &self.classes {
            s.push_str(&format!("[:{c}:]"));
        }
        if self.ranges.is_empty() && self.classes.is_empty() {
            // `[^]` cannot happen in POSIX; keep the regex valid anyway.
            s.push_str("\\x00");
        }
        s.push(']');
        s
    }
}

/// Parse `[...]` starting at `chars[start] == '['`; returns the index after `]`. In a glob
/// (`glob`), `!` also negates and `\` escapes; in an ERE `\` is literal inside brackets.
fn parse_bracket(chars: &[char], start: usize, glob: bool) -> Option<(usize, CharSet)> {
    let mut set = CharSet::default();
    let mut i = start + 1;
    if chars.get(i) == Some(&'^') || (glob && chars.get(i) == Some(&'!')) {
        set.negated = true;
        i += 1;
    }
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && !first {
            return Some((i + 1, set));
        }
        first = false;
        if c == '[' && matches!(chars.get(i + 1), Some(':' | '.' | '=')) {
            let kind = chars[i + 1];
            let close = (i + 2..chars.len().saturating_sub(1))
                .find(|&j| chars[j] == kind && chars[j + 1] == ']')?;
            let inner: String = chars[i + 2..close].iter().collect();
            if kind == ':' {
                set.classes.push(inner);
            } else if let Some(ch) = inner.chars().next() {
                set.ranges.push((ch, ch));
            }
            i = close + 2;
            continue;
        }
        let lo = if glob && c == '\\' && i + 1 < chars.len() {
            i += 1;
            chars[i]
        } else {
            c
        };
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&n| n != ']') {
            let hi = chars[i + 2];
            set.ranges.push((lo, hi.max(lo)));
            i += 3;
        } else {
            set.ranges.push((lo, lo));
            i += 1;
        }
    }
    None
}

/// What a regex's structure says about its breadth.
#[derive(Debug, Default)]
struct Shape {
    /// A `|` outside any group: the regex is only half anchored.
    top_alternation: bool,
    /// Repeated atoms that can produce an option word: `.*`, `[^ ]+`, `( [a-z-]+)*` …
    broad: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
struct AtomProps {
    space: bool,
    dash: bool,
    eq: bool,
    /// A class (`.`, `[…]`, `\S`), not a literal.
    class: bool,
    /// Can begin with a class that produces `-` (a word the caller chooses can start there).
    starts_dash: bool,
    /// Can end with a space.
    ends_space: bool,
    /// Contains a space followed by a class that can produce `-`: a caller-chosen word
    /// that may be an option.
    word_dash: bool,
}

/// One nesting level of an ERE while scanning it (level 0 is the whole regex).
#[derive(Debug, Default)]
struct Level {
    start: usize,
    props: AtomProps,
    first: Option<bool>,
    after_space: bool,
    open_after_space: bool,
}

impl Level {
    fn add(&mut self, p: AtomProps) {
        if self.first.is_none() {
            self.first = Some(p.starts_dash);
        }
        if self.after_space && p.starts_dash {
            self.props.word_dash = true;
        }
        self.props.word_dash |= p.word_dash;
        self.props.space |= p.space;
        self.props.dash |= p.dash;
        self.props.eq |= p.eq;
        self.after_space = p.ends_space;
    }
}

fn ere_shape(re: &str) -> Shape {
    let chars: Vec<char> = re.chars().collect();
    let mut shape = Shape::default();
    let mut levels: Vec<Level> = vec![Level::default()];
    let class = |space: bool, dash: bool, eq: bool| AtomProps {
        space,
        dash,
        eq,
        class: true,
        starts_dash: dash,
        ends_space: space,
        word_dash: false,
    };
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let props = match chars[i] {
            '\\' => {
                let n = chars.get(i + 1).copied().unwrap_or('\\');
                i += 2;
                match n {
                    's' => class(true, false, false),
                    'S' => class(false, true, true),
                    c => literal_props(c),
                }
            }
            '[' => match parse_bracket(&chars, i, false) {
                Some((end, set)) => {
                    i = end;
                    class(set.contains(' '), set.contains('-'), set.contains('='))
                }
                None => {
                    i += 1;
                    literal_props('[')
                }
            },
            '.' => {
                i += 1;
                class(true, true, true)
            }
            '(' => {
                let open_after_space = levels.last().is_some_and(|l| l.after_space);
                levels.push(Level {
                    start: i,
                    open_after_space,
                    ..Default::default()
                });
                i += 1;
                continue;
            }
            ')' if levels.len() > 1 => {
                i += 1;
                let level = levels.pop().expect("checked above");
                let (multi, end) = quantifier(&chars, i);
                i = end;
                let starts_dash = level.first.unwrap_or(false);
                // Repeated, the group's end meets its start (or what precedes it).
                let wraps = starts_dash && (level.after_space || level.open_after_space);
                if multi && (level.props.word_dash || wraps) {
                    shape.broad.push(chars[level.start..i].iter().collect());
                }
                let p = AtomProps {
                    starts_dash,
                    ends_space: level.after_space,
                    word_dash: level.props.word_dash || (multi && wraps),
                    ..level.props
                };
                levels.last_mut().expect("level 0 stays").add(p);
                continue;
            }
            '|' => {
                if levels.len() == 1 {
                    shape.top_alternation = true;
                }
                i += 1;
                continue;
            }
            '^' | '$' => {
                i += 1;
                continue;
            }
            c => {
                i += 1;
                literal_props(c)
            }
        };
        let (multi, end) = quantifier(&chars, i);
        i = end;
        if multi && props.class && props.dash && (props.space || props.eq) {
            shape.broad.push(chars[start..i].iter().collect());
        }
        levels.last_mut().expect("level 0 stays").add(props);
    }
    shape
}

/// A literal character: never a caller-chosen word start (`--vmid` written out is fine).
fn literal_props(c: char) -> AtomProps {
    AtomProps {
        space: c == ' ',
        dash: c == '-',
        eq: c == '=',
        ends_space: c == ' ',
        ..Default::default()
    }
}

/// Read a quantifier at `i`: whether it allows more than one repetition, and where it ends.
fn quantifier(chars: &[char], i: usize) -> (bool, usize) {
    match chars.get(i) {
        Some('*' | '+') => (true, i + 1),
        Some('?') => (false, i + 1),
        Some('{') => {
            let Some(close) = chars[i..].iter().position(|&c| c == '}').map(|p| p + i) else {
                return (false, i);
            };
            let inner: String = chars[i + 1..close].iter().collect();
            let (m, n) = match inner.split_once(',') {
                Some((m, n)) => (
                    m.parse::<u32>().ok(),
                    if n.is_empty() {
                        Some(u32::MAX)
                    } else {
                        n.parse().ok()
                    },
                ),
                None => {
                    let m = inner.parse::<u32>().ok();
                    (m, m)
                }
            };
            match (m, n) {
                (Some(_), Some(n)) => (n >= 2, close + 1),
                _ => (false, i),
            }
        }
        _ => (false, i),
    }
}

// ---------------------------------------------------------------------------------------
// Small lexing helpers
// ---------------------------------------------------------------------------------------

/// A byte cursor over ASCII-delimited text. It only stops at ASCII bytes, so every slice
/// taken at its position is on a char boundary.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Cursor<'a> {
        Cursor { s, pos: 0 }
    }
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }
    fn peek_at(&self, n: usize) -> Option<u8> {
        self.s.as_bytes().get(self.pos + n).copied()
    }
    fn rest(&self) -> &'a str {
        &self.s[self.pos.min(self.s.len())..]
    }
    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }
    fn bump(&mut self) {
        if self.pos < self.s.len() {
            self.pos += 1;
        }
    }
    fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }
    /// Advance to the first byte satisfying `stop` (or the end), honouring `\` escapes.
    fn take_until(&mut self, stop: impl Fn(u8) -> bool) {
        while let Some(b) = self.peek() {
            if b == b'\\' {
                self.pos = (self.pos + 2).min(self.s.len());
                continue;
            }
            if stop(b) {
                break;
            }
            self.pos += 1;
        }
    }
}

fn is_alias_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|f| f.is_ascii_uppercase())
        && b.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

fn find_unescaped(s: &str, from: usize, needle: u8) -> Option<usize> {
    let b = s.as_bytes();
    let mut quoted = false;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => quoted = !quoted,
            c if c == needle && !quoted => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn split_unquoted(s: &str, sep: u8) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut from = 0;
    while let Some(i) = find_unescaped(s, from, sep) {
        out.push(&s[start..i]);
        start = i + 1;
        from = i + 1;
    }
    out.push(&s[start..]);
    out
}

fn split_unescaped_blanks(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut start = None;
    let mut i = 0;
    while i < b.len() {
        let blank = matches!(b[i], b' ' | b'\t');
        if blank {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    if let Some(st) = start {
        out.push(&s[st..b.len().min(s.len())]);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
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
            ("sudoedit", Severity::Warning, "sudoedit"),
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
        assert_eq!(
            c("sudoedit /etc/motd"),
            vec![(Severity::Warning, "sudoedit")]
        );
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
        assert!(
            c("/usr/bin/journalctl ^-u pvedaemon -n [0-9]{1,4} --no-pager -o json$").is_empty()
        );
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
        let f = lint(text);
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
        let f = lint("%sudo ALL=(ALL:ALL) ALL\n");
        assert!(has(&f, 1, Severity::Error, "all-commands"));
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
            re(r"^[a-z][a-z0-9_-]*\:backup/x\.vma [1-9][0-9]{2,8}$")
                .is_match("local:backup/x.vma 100")
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
}
