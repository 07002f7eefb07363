//! Argv-typed allowlists for commands inside guests.
//!
//! A guest command is an argv, never a shell string, and it is matched the same way:
//! argument by argument. A rule is a list whose first entry matches the program and each
//! further entry one argument — a literal string, or `{regex: RE}` matched against the whole
//! argument — optionally ending in `...`, which admits any further arguments. So a rule for
//! `uname` never admits `uname -a; rm -rf /` (that is `["uname", "-a;", "rm", …]`: three
//! arguments more than the rule has), and `sh -c STRING` passes only where a rule names `sh`,
//! `-c` and the string's shape explicitly.
//!
//! ```yaml
//! commands:
//!   - [uname]
//!   - [uname, -a]
//!   - [systemctl, status, {regex: '[A-Za-z0-9@_.:][A-Za-z0-9@_.:-]{0,127}'}]
//!   - [docker, inspect, {regex: '[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}'}, ...]
//!   - [echo, {literal: '...'}]     # the literal word `...`
//! ```
//!
//! Regexes are Rust `regex` syntax, anchored at both ends by pxagent (`^(?:RE)$`). A regex
//! that can match a word starting with `-` admits options: write `[a-z]…`, not `.*`.
//!
//! The rules as written ([`CommandRule`], [`ArgSpec`]) are [`schema`](super::schema) types;
//! this file compiles them into an [`Allowlist`] and matches argvs against it. Uses the schema
//! and the `regex` crate only.

use regex::Regex;

pub use super::schema::{ArgSpec, CommandRule};

#[derive(Debug, Clone)]
enum Matcher {
    Literal(String),
    Regex(Regex),
}

impl Matcher {
    fn matches(&self, word: &str) -> bool {
        match self {
            Matcher::Literal(l) => l == word,
            Matcher::Regex(r) => r.is_match(word),
        }
    }
}

/// A compiled allowlist.
#[derive(Debug, Clone)]
pub struct Allowlist {
    rules: Vec<(Vec<Matcher>, bool, String)>,
}

impl Allowlist {
    /// Compile rules; every problem is named (`where_` says where they were written).
    pub fn compile(rules: &[CommandRule], where_: &str) -> Result<Allowlist, Vec<String>> {
        let mut problems = Vec::new();
        let mut out = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let at = format!("{where_}[{i}]");
            let mut matchers = Vec::new();
            let mut rest = false;
            if rule.0.is_empty() || rule.0[0] == ArgSpec::Rest {
                problems.push(format!("{at}: a rule starts with the program"));
                continue;
            }
            for (j, spec) in rule.0.iter().enumerate() {
                match spec {
                    ArgSpec::Rest if j + 1 == rule.0.len() => rest = true,
                    ArgSpec::Rest => problems.push(format!("{at}: `...` must be the last entry")),
                    ArgSpec::Literal(l) => matchers.push(Matcher::Literal(l.clone())),
                    ArgSpec::Regex(r) if r.is_empty() => {
                        problems.push(format!("{at}: an empty regex"))
                    }
                    ArgSpec::Regex(r) => match Regex::new(&format!("^(?:{r})$")) {
                        Ok(re) => matchers.push(Matcher::Regex(re)),
                        Err(e) => problems.push(format!("{at}: bad regex {r:?}: {e}")),
                    },
                }
            }
            out.push((matchers, rest, rule.to_string()));
        }
        if problems.is_empty() {
            Ok(Allowlist { rules: out })
        } else {
            Err(problems)
        }
    }

    /// Whether some rule admits this argv (program first).
    pub fn admits(&self, argv: &[String]) -> bool {
        self.rules.iter().any(|(m, rest, _)| {
            let fixed = argv.len() == m.len() || (*rest && argv.len() > m.len());
            fixed && m.iter().zip(argv).all(|(m, w)| m.matches(w))
        })
    }

    /// The rules as written, for refusals (`uname | uname -a | …`).
    pub fn describe(&self) -> String {
        self.rules
            .iter()
            .map(|(_, _, s)| s.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(yaml: &str) -> Allowlist {
        let rules: Vec<CommandRule> = yaml_serde::from_str(yaml).unwrap();
        Allowlist::compile(&rules, "t").unwrap()
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn matches_argument_by_argument() {
        let a = list(
            "- [uname]\n- [uname, -a]\n- [systemctl, status, {regex: '[a-z][a-z0-9@_.-]{0,63}'}]\n- [ls, ...]\n",
        );
        assert!(a.admits(&argv(&["uname"])));
        assert!(a.admits(&argv(&["uname", "-a"])));
        assert!(a.admits(&argv(&["systemctl", "status", "nginx.service"])));
        assert!(a.admits(&argv(&["ls"])));
        assert!(a.admits(&argv(&["ls", "-la", "/tmp"])));
        for bad in [
            &["uname", "-a;", "rm", "-rf", "/"][..],
            &["uname", "-a", ";", "rm"],
            &["uname", "$(id)"],
            &["uname", "-a", "-r"],
            &["uname -a"],
            &["systemctl", "status", "--all"],
            &["systemctl", "status", "x; reboot"],
            &["systemctl", "stop", "nginx"],
            &["sh", "-c", "uname -a; id"],
            &[],
        ] {
            assert!(!a.admits(&argv(bad)), "{bad:?}");
        }
    }

    #[test]
    fn sh_c_only_where_named() {
        let a = list("- [sh, -c, 'uptime']\n");
        assert!(a.admits(&argv(&["sh", "-c", "uptime"])));
        assert!(!a.admits(&argv(&["sh", "-c", "uptime; id"])));
    }

    #[test]
    fn bad_rules_are_named() {
        let rules: Vec<CommandRule> =
            yaml_serde::from_str("- []\n- [..., x]\n- [a, ..., b]\n- [a, {regex: '('}]\n").unwrap();
        let e = Allowlist::compile(&rules, "policy.ops.vm.exec.commands").unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e[3].contains("policy.ops.vm.exec.commands[3]"), "{e:?}");
        assert!(yaml_serde::from_str::<Vec<CommandRule>>("- [a, {rx: b}]\n").is_err());
        // A literal `...` is written as {literal: '...'}.
        let a = list("- [echo, {literal: '...'}]\n");
        assert!(a.admits(&argv(&["echo", "..."])));
        assert!(!a.admits(&argv(&["echo", "x"])));
    }
}
