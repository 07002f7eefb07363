//! The policy's data types as written: what a `policy:` section, a policy
//! file or the MCP gateway's form deserializes into, before anything is checked against the
//! catalog. No I/O and no decisions; [`super::load`] validates and compiles these types,
//! [`super::eval`] decides with the result. Uses serde and the catalog (for the default limit
//! of guest commands) only; every other policy file, and the config and limits modules, may use
//! this one.
//!
//! The `policy:` section of config.yaml (or a policy file of the same YAML):
//!
//! ```yaml
//! policy:
//!   read_only: false          # true: refuse every op whose risk is not `read`
//!   allow_privileged_ct_exec: false
//!   ops:                      # per op id, or a glob over ids (`*` matches any characters)
//!     "*": allow              # quote keys that start with `*` (YAML reads `*x` as an alias)
//!     vm.destroy: deny
//!     vm.stop: {action: deny, reason: "use `vm shutdown` instead"}
//!     "ct.*": confirm         # every ct op now needs a phrase
//!     vm.start: {action: confirm, reason: "production host"}
//!     vm.exec:
//!       limits: [{counter: vm_exec_rate, window: minute, max: 10}]
//!       commands:
//!         - [uname, -a]
//!         - [systemctl, status, {regex: '[a-z][a-z0-9@_.-]{0,63}'}]
//!   protect: [100, 105, keep] # VMIDs (unquoted numbers) and PVE tags
//!   snapshot_before: [vm.resize, vm.set]  # a snapshot first, for `pxagent undo --rollback`
//!   taint: after_exec         # after guest output in a session, its next change needs a phrase
//! ```
//!
//! A rule is `allow`, `deny` or `confirm`, or the map `{action: …, reason: "…"}` (the reason
//! is shown in the refusal). The map form also takes `limits` (rate limits, counted by
//! [`crate::policy::limits`]) and `commands` (an argv allowlist, compiled by [`super::allowlist`]);
//! `action` may then be left out (it is `allow`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::{Deserialize, Serialize};

use crate::catalog::Op;

/// The `policy:` section of config.yaml. Unknown keys are errors, as everywhere in the config.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Refuse every op whose risk is not `read`.
    #[serde(default)]
    pub read_only: bool,
    /// Rules per op id (`vm.destroy`) or glob over ids (`vm.*`, `*`).
    #[serde(default)]
    pub ops: BTreeMap<String, Rule>,
    /// Protected guests: any op that changes state on them is refused.
    #[serde(default)]
    pub protect: Vec<Protect>,
    /// Let `ct exec` run in privileged containers (no `unprivileged: 1`), where root in the
    /// container is close to root on the host. Off by default.
    #[serde(default)]
    pub allow_privileged_ct_exec: bool,
    /// The hosts ISO and template downloads may come from. When present, only these pass;
    /// a loopback, link-local, private or similar address passes only when listed here.
    #[serde(default)]
    pub download_hosts: Option<Vec<String>>,
    /// The NFS servers an agent may add storages from (`storage add-nfs`). When present, only
    /// these pass. The gate refuses every NFS storage while the host policy has no such list:
    /// a share's files are written by its server and read by root-run Proxmox code.
    #[serde(default)]
    pub nfs_servers: Option<Vec<String>>,
    /// How full an ISO upload may leave a storage's file system, in percent (1-99): an
    /// upload asking for a higher `--max-used` is refused. None: the sudoers render's bound.
    #[serde(default)]
    pub iso_max_used: Option<u8>,
    /// Let a node or cluster firewall rule drop or reject the SSH connection pxagent uses
    /// (an inbound rule on its port from its address). Off by default: such a rule cuts
    /// pxagent, and any SSH from the same place, off from the host.
    #[serde(default)]
    pub allow_ssh_lockout: bool,
    /// Host policy: the cap on identical calls (same op, same arguments) per account, counted
    /// by the gate. Absent: [`Runaway::default`] (20 in 2 minutes, change, confirm and exec
    /// ops); `max: 0` turns it off.
    #[serde(default)]
    pub runaway: Option<Runaway>,
    /// Host policy: the cap on change, confirm and exec operations per account in a window,
    /// counted by the gate. Absent: no cap.
    #[serde(default)]
    pub budget: Option<Budget>,
    /// Host policy: how long an approver's grant may last at most. Absent: 8 hours.
    #[serde(default)]
    pub grants: Option<Grants>,
    /// Ops (ids or globs) before which the engine takes a snapshot of the guest, named after
    /// the audit record (`pxagent-undo-N`), which `pxagent undo` offers to roll back to.
    #[serde(default)]
    pub snapshot_before: Vec<String>,
    /// `after_exec`: after a guest command's output came back in an MCP session or a batch,
    /// its next change needs a confirmation phrase (guest output may carry instructions meant
    /// for the agent).
    #[serde(default)]
    pub taint: Option<TaintMode>,
}

/// When a session is tainted (policy `taint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintMode {
    /// Once a guest command's (or guest file's) output came back.
    AfterExec,
}

/// The host's bound on grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// The longest a grant may last, seconds (`8h`, `28800`).
    #[serde(deserialize_with = "de_seconds")]
    pub max_for: u64,
}

impl Grants {
    /// The bound when the host policy names none: 8 hours.
    pub const DEFAULT_MAX_FOR: u64 = 8 * 3600;
}

/// At most `max` identical calls in any `window` seconds (a sliding window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runaway {
    /// The most identical calls admitted in the window (0: no cap).
    #[serde(default = "Runaway::default_max")]
    pub max: u64,
    /// The window, in seconds (`120`, or a duration such as `2m`).
    #[serde(default = "Runaway::default_window", deserialize_with = "de_seconds")]
    pub window: u64,
    /// Count reads too (default: only change, confirm and exec operations).
    #[serde(default)]
    pub reads: bool,
}

impl Runaway {
    fn default_max() -> u64 {
        20
    }
    fn default_window() -> u64 {
        120
    }
}

impl Default for Runaway {
    /// 20 identical change, confirm or exec calls in 2 minutes.
    fn default() -> Runaway {
        Runaway {
            max: Runaway::default_max(),
            window: Runaway::default_window(),
            reads: false,
        }
    }
}

/// At most `changes` change, confirm and exec operations in any `window` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The most operations admitted in the window.
    pub changes: u64,
    /// The window, in seconds (`3600`, or a duration such as `1h`).
    #[serde(default = "Budget::default_window", deserialize_with = "de_seconds")]
    pub window: u64,
}

impl Budget {
    fn default_window() -> u64 {
        3600
    }
}

/// Seconds, from a number or a duration (`90`, `2m`, `1h`).
fn de_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Secs(u64),
        Text(String),
    }
    let secs = match Form::deserialize(d)? {
        Form::Secs(n) => n,
        Form::Text(t) => crate::base::time::parse_duration(&t)
            .map(|d| d.as_secs())
            .ok_or_else(|| {
                de::Error::custom(format!(
                    "window {t:?} is not a duration (seconds, or 30m, 2h, 1d)"
                ))
            })?,
    };
    if secs == 0 || secs > 7 * 24 * 3600 {
        return Err(de::Error::custom(format!(
            "window {secs}s: between 1 second and 7 days"
        )));
    }
    Ok(secs)
}

/// What a rule does with the ops it matches. Ordered by strictness (used to break ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// No objection (the catalog's own confirmation still applies).
    Allow,
    /// The op becomes soft-blacklisted: it runs only with its confirmation phrase.
    Confirm,
    /// Host policy only: the op runs only with a human's signed approval, checked by the
    /// gate (`pxagent gate`). A client policy refuses to load it.
    Approve,
    /// Host policy only: the op runs only inside an approver's signed grant (a time-boxed
    /// scope, `pxagent grant`); outside one it is refused.
    Grantable,
    /// The op is refused (exit 3).
    Deny,
}

impl Action {
    /// The name used in YAML and messages.
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Confirm => "confirm",
            Action::Approve => "approve",
            Action::Grantable => "grantable",
            Action::Deny => "deny",
        }
    }

    fn parse(s: &str) -> Option<Action> {
        [
            Action::Allow,
            Action::Confirm,
            Action::Approve,
            Action::Grantable,
            Action::Deny,
        ]
        .into_iter()
        .find(|a| a.name() == s)
    }
}

/// One `ops` entry: `deny`, or `{action: deny, reason: "use vm shutdown"}`, with optional
/// `limits` and `commands` (then `action` defaults to `allow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What happens to matching ops.
    pub action: Action,
    /// Why, shown in refusals and confirmation prompts (one line).
    pub reason: Option<String>,
    /// Rate limits of the matching ops (replacing the default of guest commands).
    pub limits: Option<Vec<Limit>>,
    /// The guest commands the matching ops may run (argv shapes).
    pub commands: Option<Vec<CommandRule>>,
    /// Where files may be pushed into the guest (absolute path globs: `*` within one path
    /// segment, `**` across segments). With `commands` and no `push`, nothing may be pushed.
    pub push: Option<Vec<String>>,
    /// Where files may be pulled from (as `push`).
    pub pull: Option<Vec<String>>,
}

impl Rule {
    /// A rule with only an action.
    pub fn new(action: Action) -> Rule {
        Rule {
            action,
            reason: None,
            limits: None,
            commands: None,
            push: None,
            pull: None,
        }
    }
}

impl<'de> Deserialize<'de> for Rule {
    // Hand-written rather than `#[serde(untagged)]` so that a typo gets a message naming
    // what was expected instead of "data did not match any variant".
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Rule, D::Error> {
        struct V;
        const EXPECTED: &str = "allow, deny, confirm or approve";
        impl<'de> Visitor<'de> for V {
            type Value = Rule;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("allow, deny, confirm, approve, or {action: allow|deny|confirm|approve, reason: \"…\"}")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Rule, E> {
                let action =
                    Action::parse(s).ok_or_else(|| E::invalid_value(Unexpected::Str(s), &self))?;
                Ok(Rule::new(action))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Rule, A::Error> {
                const FIELDS: &[&str] = &["action", "reason", "limits", "commands", "push", "pull"];
                let (mut action, mut reason, mut limits, mut commands) = (None, None, None, None);
                let (mut push, mut pull) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "action" if action.is_none() => {
                            let s: String = map.next_value()?;
                            action = Some(Action::parse(&s).ok_or_else(|| {
                                de::Error::invalid_value(Unexpected::Str(&s), &EXPECTED)
                            })?);
                        }
                        "reason" if reason.is_none() => reason = Some(map.next_value::<String>()?),
                        "limits" if limits.is_none() => limits = Some(map.next_value()?),
                        "commands" if commands.is_none() => commands = Some(map.next_value()?),
                        "push" if push.is_none() => push = Some(map.next_value()?),
                        "pull" if pull.is_none() => pull = Some(map.next_value()?),
                        "action" | "reason" | "limits" | "commands" | "push" | "pull" => {
                            return Err(de::Error::custom(format!("duplicate field `{key}`")));
                        }
                        other => {
                            return Err(de::Error::unknown_field(other, FIELDS));
                        }
                    }
                }
                let action = match action {
                    Some(a) => a,
                    None if limits.is_some()
                        || commands.is_some()
                        || push.is_some()
                        || pull.is_some() =>
                    {
                        Action::Allow
                    }
                    None => return Err(de::Error::missing_field("action")),
                };
                Ok(Rule {
                    action,
                    reason,
                    limits,
                    commands,
                    push,
                    pull,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// One `protect` entry: a VMID (an unquoted number) or a PVE tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protect {
    /// A guest id.
    Vmid(u64),
    /// A guest tag, matched case-insensitively.
    Tag(String),
}

impl<'de> Deserialize<'de> for Protect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Protect, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Protect;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a VMID (100-999999999) or a guest tag")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Protect, E> {
                Ok(Protect::Vmid(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Protect, E> {
                u64::try_from(v)
                    .map(Protect::Vmid)
                    .map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Protect, E> {
                // `"100"` is almost certainly meant as VMID 100; silently treating it as a tag
                // would leave guest 100 unprotected. Digit-only tags are therefore not
                // supported here.
                if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(E::custom(format!(
                        "\"{s}\" is quoted: write {s} without quotes to protect VMID {s} (tags made only of digits cannot be protected)"
                    )));
                }
                Ok(Protect::Tag(s.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

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

/// A fixed window aligned to UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Window {
    /// From one full UTC minute to the next.
    Minute,
    /// From one full UTC hour to the next.
    Hour,
    /// From one UTC midnight to the next.
    Day,
}

impl Window {
    /// The window's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Window::Minute => 60,
            Window::Hour => 3600,
            Window::Day => 86_400,
        }
    }

    /// The name used in YAML and messages.
    pub fn name(self) -> &'static str {
        match self {
            Window::Minute => "minute",
            Window::Hour => "hour",
            Window::Day => "day",
        }
    }

    /// The start of the window holding `now` (Unix seconds). Unix time has no leap seconds,
    /// so multiples of the length are UTC minute, hour and day boundaries.
    pub fn start(self, now: u64) -> u64 {
        now - now % self.seconds()
    }
}

/// Who shares a counter. pxagent keeps counters per account on this machine (its state
/// directory): that is the gateway's `grant`, the only scope it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One quota for the credential this pxagent runs with.
    #[default]
    Grant,
}

/// One limit: at most `max` admissions per `window` on `counter`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// The counter's name; ops naming the same counter share it.
    pub counter: String,
    /// The window.
    pub window: Window,
    /// How many calls the window admits.
    pub max: u64,
    /// Who shares the counter (only `grant`).
    #[serde(default)]
    pub scope: Scope,
}

impl Limit {
    /// The default for ops that run a command in a guest: 10 per minute.
    pub fn exec_default(op: &Op) -> Limit {
        Limit {
            counter: format!("{}_rate", op.tool_name()),
            window: Window::Minute,
            max: 10,
            scope: Scope::Grant,
        }
    }

    /// Problems with this limit (a bad counter name), for the policy loader.
    pub fn problems(&self) -> Option<String> {
        let ok = !self.counter.is_empty()
            && self.counter.len() <= 128
            && self
                .counter
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
        (!ok).then(|| {
            format!(
                "counter {:?} must be 1-128 letters, digits, '_', '.', ':' or '-'",
                self.counter
            )
        })
    }
}

/// Where a policy is stated, as the config and the command line name it (see
/// [`crate::config::Config::policy_source`]); [`super::Policy::load`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySource {
    /// No policy anywhere: the built-in default (nothing refused, nothing extra confirmed).
    Default,
    /// A config's `policy:` section.
    Section {
        /// The section as written.
        policy: PolicyConfig,
        /// Where it was written (the config path), named in every refusal.
        source: String,
    },
    /// A policy file: pxagent's YAML form or the MCP gateway's JSON form.
    File(PathBuf),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(max: u64, window: Window) -> Limit {
        Limit {
            counter: "vm_exec_rate".into(),
            window,
            max,
            scope: Scope::Grant,
        }
    }

    #[test]
    fn yaml_errors_say_what_was_expected() {
        let e = |y: &str| {
            yaml_serde::from_str::<PolicyConfig>(y)
                .unwrap_err()
                .to_string()
        };
        assert!(
            e("ops:\n  vm.stop: maybe\n").contains("allow, deny"),
            "{}",
            e("ops:\n  vm.stop: maybe\n")
        );
        assert!(e("ops:\n  vm.stop: {action: nope}\n").contains("allow, deny, confirm or approve"));
        assert!(e("ops:\n  vm.stop: {deny: why}\n").contains("unknown field `deny`"));
        assert!(e("ops:\n  vm.stop: {reason: why}\n").contains("missing field `action`"));
        assert!(e("readonly: true\n").contains("unknown field `readonly`"));
        assert!(e("protect: [\"100\"]\n").contains("without quotes"));
        assert!(e("protect: [-5]\n").contains("VMID"));
    }

    #[test]
    fn windows_align_to_utc() {
        // 2026-11-01T02:03:04Z
        let t = 1_793_498_584;
        assert_eq!(Window::Minute.start(t) % 60, 0);
        assert_eq!(t - Window::Minute.start(t), 4);
        assert_eq!(t - Window::Hour.start(t), 3 * 60 + 4);
        assert_eq!(t - Window::Day.start(t), 2 * 3600 + 3 * 60 + 4);
    }

    #[test]
    fn counter_names_are_checked() {
        assert!(lim(1, Window::Day).problems().is_none());
        let mut l = lim(1, Window::Day);
        l.counter = "a b".into();
        assert!(l.problems().is_some());
    }
}
