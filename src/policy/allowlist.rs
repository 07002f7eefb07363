//! Argv-typed allowlists for commands inside guests (issue 6).
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

use std::fmt;

use regex::Regex;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

/// One entry of a rule as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSpec {
    /// Exactly this word.
    Literal(String),
    /// A word matching this regex entirely.
    Regex(String),
    /// `...`: any further arguments (last entry only).
    Rest,
}

/// One allowed command shape, as written in the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRule(pub Vec<ArgSpec>);

impl<'de> Deserialize<'de> for ArgSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ArgSpec, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ArgSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a literal word, `...`, {regex: RE} or {literal: WORD}")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ArgSpec, E> {
                Ok(if s == "..." {
                    ArgSpec::Rest
                } else {
                    ArgSpec::Literal(s.to_string())
                })
            }
            // YAML reads `-1` or `10` as numbers: they are words here.
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ArgSpec, E> {
                Ok(ArgSpec::Literal(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ArgSpec, E> {
                Ok(ArgSpec::Literal(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ArgSpec, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let value: String = map.next_value()?;
                let spec = match key.as_str() {
                    "regex" => ArgSpec::Regex(value),
                    "literal" => ArgSpec::Literal(value),
                    other => return Err(de::Error::unknown_field(other, &["regex", "literal"])),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "one key per argument, got `{key}` and `{extra}`"
                    )));
                }
                Ok(spec)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for CommandRule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CommandRule, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CommandRule;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list: the program, then one entry per argument")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CommandRule, A::Error> {
                let mut v = Vec::new();
                while let Some(s) = seq.next_element::<ArgSpec>()? {
                    v.push(s);
                }
                Ok(CommandRule(v))
            }
        }
        d.deserialize_seq(V)
    }
}

impl fmt::Display for CommandRule {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let words: Vec<String> = self
            .0
            .iter()
            .map(|s| match s {
                ArgSpec::Literal(l) => l.clone(),
                ArgSpec::Regex(r) => format!("/{r}/"),
                ArgSpec::Rest => "...".into(),
            })
            .collect();
        f.write_str(&words.join(" "))
    }
}

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

    fn example(name: &str) -> crate::policy::Policy {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/policies")
            .join(name);
        crate::policy::Policy::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn verdict(p: &crate::policy::Policy, op: &str, words: &[&str]) -> bool {
        let op = crate::catalog::find(op).unwrap();
        let vmid = if op.area == crate::catalog::Area::Ct {
            "200"
        } else {
            "100"
        };
        let inv = crate::invocation::Invocation::new(
            op,
            [
                ("vmid", vmid.to_string()),
                ("command", serde_json::to_string(words).unwrap()),
            ]
            .into_iter()
            .collect(),
        )
        .unwrap();
        let r = p.check_command(&inv, &argv(words));
        if let Err(e) = &r {
            assert_eq!(e.exit_code(), 3);
        }
        r.is_ok()
    }

    #[test]
    fn the_docker_example_admits_exactly_read_only_docker() {
        let p = example("docker-readonly.yaml");
        for op in ["vm.exec", "ct.exec"] {
            for ok in [
                &["docker", "ps"][..],
                &["docker", "ps", "-a"],
                &["docker", "images"],
                &["docker", "inspect", "web-1"],
                &["docker", "logs", "web-1"],
                &["docker", "logs", "--tail", "100", "web-1"],
                &["docker", "stats", "--no-stream"],
                &["docker", "stats", "--no-stream", "db"],
            ] {
                assert!(verdict(&p, op, ok), "{op} {ok:?}");
            }
            for bad in [
                &["docker", "ps;", "rm", "-rf", "/"][..],
                &["docker", "ps", ";", "id"],
                &["docker", "ps", "$(id)"],
                &["docker", "ps", "-a", "extra"],
                &["docker", "run", "alpine"],
                &["docker", "rm", "-f", "web-1"],
                &["docker", "exec", "web-1", "sh"],
                &["docker", "logs", "-f", "web-1"],
                &["docker", "logs", "--tail", "10", "--follow"],
                &["docker", "stats"],
                &["docker", "inspect", "--format", "x"],
                &["sh", "-c", "docker ps"],
                &["docker ps"],
            ] {
                assert!(!verdict(&p, op, bad), "{op} {bad:?}");
            }
        }
        let l = p.limits_for(crate::catalog::find("vm.exec").unwrap());
        assert_eq!((l[0].max, l[0].window.name()), (10, "minute"));
    }

    #[test]
    fn the_diagnostics_example_admits_exactly_its_commands() {
        let p = example("diagnostics.yaml");
        for ok in [
            &["uname"][..],
            &["uname", "-a"],
            &["uname", "-sr"],
            &["df"],
            &["df", "-h"],
            &["uptime"],
            &["systemctl", "status", "nginx.service"],
            &["systemctl", "status", "getty@tty1.service"],
        ] {
            assert!(verdict(&p, "vm.exec", ok), "{ok:?}");
        }
        for bad in [
            &["uname", "-a;", "rm", "-rf", "/"][..],
            &["uname", "-a", ";", "rm", "-rf", "/"],
            &["uname", "$(reboot)"],
            &["uname", "-a", "-r"],
            &["uname", "--help"],
            &["df", "-h", "/"],
            &["uptime", "-s"],
            &["systemctl", "status"],
            &["systemctl", "status", "--all"],
            &["systemctl", "status", "a", "b"],
            &["systemctl", "restart", "nginx"],
            &["sh", "-c", "uname -a"],
            &["/bin/sh", "-c", "uptime; reboot"],
        ] {
            assert!(!verdict(&p, "vm.exec", bad), "{bad:?}");
        }
    }

    #[test]
    fn the_gateway_example_loads() {
        let p = example("gateway-vm-exec.json");
        assert!(!p.allows_listing(crate::catalog::find("vm.start").unwrap()));
        assert!(p.allows_listing(crate::catalog::find("vm.exec").unwrap()));
    }
}
