//! The checks of every other binary: how wide a rule's arguments are, what the risky-binaries
//! tables say of the program, what its arguments admit (a write to /etc, a secret read, an
//! exec option), and the shape of the argument regex itself.

use super::*;

/// How wide a rule's arguments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// No argument list, `*`, or a regex that swallows words / is not anchored.
    Open,
    /// `""`, literal arguments or a tight regex.
    Fixed,
}

pub(super) fn scope(args: &Args) -> Scope {
    match args {
        Args::Any | Args::Unterminated(_) | Args::EarlyDollar(..) => Scope::Open,
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

/// A language built from a pattern the tables hold (they are tested to compile).
pub(super) fn table_lang(pattern: &str) -> Lang {
    Lang::full(pattern).unwrap_or_else(|| panic!("table pattern compiles: {pattern}"))
}

/// Words naming a file whose writing is root, or whose reading leaks a secret: whole
/// arguments, or the value of `opt=` / a `file://` URL.
fn path_words(paths: &[&str]) -> String {
    let alts: Vec<String> = paths
        .iter()
        .map(|p| match p.strip_prefix('.') {
            Some(suffix) => format!("[^ ]*\\.{}[^ ]*", ::regex::escape(suffix)),
            None => format!("{}[^ ]*", ::regex::escape(p)),
        })
        .collect();
    format!("(?:.* )?(?:[^ ]*(?:=|://))?(?:{})(?: .*)?", alts.join("|"))
}

static WRITE_LANG: LazyLock<Lang> = LazyLock::new(|| table_lang(&path_words(WRITE_TARGETS)));
static SECRET_LANG: LazyLock<Lang> = LazyLock::new(|| table_lang(&path_words(SECRET_FILES)));
static SHELL_LANG: LazyLock<Lang> = LazyLock::new(|| table_lang(SHELL_WORD));
static ARG_LANGS: LazyLock<Vec<(&'static [&'static str], Lang)>> = LazyLock::new(|| {
    ARG_DANGERS
        .iter()
        .map(|(names, p)| (*names, table_lang(p)))
        .collect()
});

/// The shortest argument line of `lang` the rule admits. A rule the automata cannot read
/// falls back to `fallback` over its text.
pub(super) fn reaches(args: &Args, lang: &Lang, fallback: impl Fn(&str) -> bool) -> Option<String> {
    match Lang::of_args(args) {
        Some(rule) => match admits(&rule, &[lang], &[]) {
            Answer::Yes(w) => Some(w),
            _ => None,
        },
        None if fallback(args.text()) => Some(args.text().to_string()),
        None => None,
    }
}

pub(super) fn check_risky(base: &str, r: &Risky, args: &Args, display: &str) -> Vec<Finding> {
    let open = scope(args) == Scope::Open;
    let text = args.text();
    let words: Vec<&str> = text.split([' ', '=']).filter(|w| !w.is_empty()).collect();
    let exec_word = words.iter().any(|w| {
        EXEC_WORDS.contains(w)
            || lookup_risky(basename(w))
                .is_some_and(|x| matches!(x.class, Class::Shell | Class::Interpreter))
    });
    let stem = base.split('.').next().unwrap_or(base);
    let arg_danger = ARG_LANGS
        .iter()
        .find(|(names, _)| names.contains(&base) || names.contains(&stem))
        .and_then(|(_, lang)| reaches(args, lang, |_| false));
    let shell = match r.class {
        Class::ExecEscape => reaches(args, &SHELL_LANG, |_| false),
        _ => None,
    };
    let runs_shell = exec_word || shell.is_some() || arg_danger.is_some();
    let write_target = reaches(args, &WRITE_LANG, |t| {
        WRITE_TARGETS.iter().any(|p| t.contains(p))
    });
    let secret = reaches(args, &SECRET_LANG, |t| {
        SECRET_FILES.iter().any(|p| t.contains(p))
    });
    let admits = |w: &Option<String>| {
        w.as_ref()
            .map(|w| format!("; it admits `{base} {}`", crate::base::text::printable(w)))
            .unwrap_or_default()
    };
    let (severity, note) = if r.class.always_error() {
        (Some(Severity::Error), String::new())
    } else {
        match r.class {
            Class::ExecEscape if open => (Some(Severity::Error), String::new()),
            Class::ExecEscape if runs_shell => (
                Some(Severity::Error),
                admits(&arg_danger.clone().or(shell.clone())),
            ),
            Class::ExecEscape => (
                Some(Severity::Warning),
                "; these fixed arguments look harmless, but keep such binaries out of an agent's rules".into(),
            ),
            Class::FileWrite if open => (Some(Severity::Error), String::new()),
            Class::FileWrite if arg_danger.is_some() => (Some(Severity::Error), admits(&arg_danger)),
            // Writers read too: `cp /etc/shadow /tmp/x`, `openssl enc -in /etc/shadow`.
            Class::FileWrite if secret.is_some() && write_target.is_none() => (
                Some(Severity::Error),
                format!("; the arguments reach {}", secret.clone().unwrap_or_default()),
            ),
            Class::FileWrite => match &write_target {
                Some(p) => (Some(Severity::Error), format!("; the arguments reach {p}")),
                None => (Some(Severity::Warning), "; the fixed arguments limit what it touches".into()),
            },
            Class::FileRead if open => (Some(Severity::Error), String::new()),
            Class::FileRead => match &secret {
                Some(p) => (Some(Severity::Error), format!("; the arguments reach {p}")),
                None => (Some(Severity::Info), String::new()),
            },
            Class::Mount | Class::Package if open => (Some(Severity::Error), String::new()),
            // A mount over /etc, /usr … is root however tightly it is written.
            Class::Mount if write_target.is_some() => (
                Some(Severity::Error),
                format!("; the arguments reach {}", write_target.clone().unwrap_or_default()),
            ),
            Class::Mount | Class::Package if arg_danger.is_some() => {
                (Some(Severity::Error), admits(&arg_danger))
            }
            Class::Mount | Class::Package => (Some(Severity::Warning), String::new()),
            Class::Umount | Class::Mkdir if open => (Some(Severity::Warning), String::new()),
            Class::Storage | Class::Kernel | Class::Kill if open => (Some(Severity::Error), String::new()),
            Class::Storage | Class::Kernel if arg_danger.is_some() => {
                (Some(Severity::Error), admits(&arg_danger))
            }
            // Listing ZFS and reading kernel parameters are fine.
            Class::Storage if matches!(stem, "zfs" | "zpool") => (None, String::new()),
            Class::Kernel if stem == "sysctl" => (None, String::new()),
            Class::Storage | Class::Kernel | Class::Kill => (
                Some(Severity::Warning),
                "; the fixed arguments limit it, but keep it out of an agent's rules".into(),
            ),
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
pub(super) fn check_generic(
    args: &Args,
    display: &str,
    severity: Severity,
    hint: &str,
) -> Vec<Finding> {
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
pub(super) fn args_findings(args: &Args, display: &str, critical: bool) -> Vec<Finding> {
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
        Args::EarlyDollar(r, after) => out.push(finding(
            Severity::Error,
            "regex-early-dollar",
            format!(
                "`{display}`: sudo ends a regex argument at its first `$`, so the regex is `{r}` and `{after}` \
                 is left over: a syntax error (visudo rejects the file, sudo skips the rule); a `$` inside an \
                 alternation or a bracket does not do what it says"
            ),
            "Write one `$`, at the very end, and group alternatives: `^(a|b)$`; a literal dollar is `\\$`.",
        )),
        Args::Regex(r) => {
            // Only whether it parses: a bounded repeat inside a bounded repeat (pxagent's own
            // description rule) compiles past the regex crate's default 10 MiB budget.
            let parsed = ::regex::RegexBuilder::new(&ere_to_regex(r))
                .size_limit(256 << 20)
                .build();
            if let Err(e) = parsed {
                tracing::debug!("regex-unchecked: {e}");
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

pub(super) fn looks_like_regex(g: &str) -> bool {
    g.ends_with('$') || g.contains("]+") || g.contains("]{") || (g.contains('(') && g.contains('|'))
}

/// A PVE program outside the catalog: over-broad arguments, or any admitted dangerous
/// subcommand, are errors.
pub(super) fn check_other_pve(o: &OtherPve, args: &Args, display: &str) -> Vec<Finding> {
    let mut out = check_generic(args, display, Severity::Error, o.how);
    if out.iter().any(|f| f.severity == Severity::Error) || o.danger.is_empty() {
        return out;
    }
    if let Some(w) = admits_line(args, o.danger) {
        out.push(finding(
            Severity::Error,
            "pve-dangerous-args",
            format!(
                "`{display}` admits `{} {}`: {}",
                o.name,
                crate::base::text::printable(&w),
                o.how
            ),
            FIX_DROP,
        ));
    }
    out
}

/// The shortest line of `lines` (whole argument line, `regex` syntax) the rule's arguments
/// admit, if any. Undecidable answers count as "no": callers use it to escalate fixed rules.
pub(super) fn admits_line(args: &Args, lines: &str) -> Option<String> {
    let rule = Lang::of_args(args)?;
    let want = Lang::full(lines)?;
    match admits(&rule, &[&want], &[]) {
        Answer::Yes(w) => Some(w),
        _ => None,
    }
}
