//! Local policy: what this pxagent installation refuses before anything is sent (issue 5).
//!
//! The host's sudoers decides what the agent account *can* run; this policy narrows what this
//! client *will* run: deny an op, demand a confirmation phrase for an op the catalog does not
//! soft-blacklist, protect guests, or go read-only. It is the weakest layer of design §1 —
//! anyone holding the key and a plain `ssh` walks past it — so it guards against a mistaken,
//! looping or prompt-injected agent, not against a thief. Refusals are exit 3 and one line
//! that says what was refused, why, and which config key did it.
//!
//! The `policy:` section of config.yaml:
//!
//! ```yaml
//! policy:
//!   read_only: false          # true: refuse every op whose risk is not `read`
//!   ops:                      # per op id, or a glob over ids (`*` matches any characters)
//!     "*": allow              # quote keys that start with `*` (YAML reads `*x` as an alias)
//!     vm.destroy: deny
//!     vm.stop: {action: deny, reason: "use `vm shutdown` instead"}
//!     "ct.*": confirm         # every ct op now needs a phrase
//!     vm.start: {action: confirm, reason: "production host"}
//!   protect: [100, 105, keep] # VMIDs (unquoted numbers) and PVE tags
//! ```
//!
//! A rule is `allow`, `deny` or `confirm`, or the map `{action: …, reason: "…"}` (the reason
//! is shown in the refusal). Decisions, in this order, first match wins:
//!
//! 1. the most specific `ops` rule is `deny` → refused;
//! 2. `read_only` and the op is not a read → refused;
//! 3. the op changes state (risk `change`, `confirm` or `exec`) and one of its VMIDs (every
//!    parameter of kind VMID, so a clone's or restore's *target* too) is protected, or the
//!    target guest carries a protected tag → refused;
//! 4. the most specific rule is `confirm` → [`Decision::Confirm`];
//! 5. otherwise [`Decision::Allow`].
//!
//! `allow` never waives the catalog's own soft blacklist: `vm.destroy: allow` still needs
//! `yes destroy N`. It exists to carve exceptions out of a glob (`"*": deny` + `vm.status:
//! allow`). Specificity: an exact id beats any glob; among globs the one with more literal
//! (non-`*`) characters wins; between equally specific globs the stricter action wins
//! (deny > confirm > allow), so the outcome never depends on key order.
//!
//! Commands inside guests (issue 6) add three things. The map form of a rule takes `limits`
//! (rate limits, see [`crate::limits`]; ops that run a guest command default to 10 per
//! minute) and `commands` (an argv allowlist, see [`crate::policy::allowlist`]; without it any
//! command is allowed), both taken from the most specific rule; `action` may then be left
//! out (it is `allow`). And `allow_privileged_ct_exec: true` lets `ct exec` enter privileged
//! containers, which it refuses by default:
//!
//! ```yaml
//! policy:
//!   allow_privileged_ct_exec: false
//!   ops:
//!     vm.exec:
//!       limits: [{counter: vm_exec_rate, window: minute, max: 10}]
//!       commands:
//!         - [uname, -a]
//!         - [systemctl, status, {regex: '[a-z][a-z0-9@_.-]{0,63}'}]
//! ```
//!
//! A policy may also come from its own file (`--policy FILE`, `PXAGENT_POLICY`, or the
//! config's `policy_file:`): this section's YAML, or the MCP gateway's JSON form
//! (`{"version":"1","default":"deny","tools":{"vm_exec":{"limits":[…]}}}`, see
//! [`crate::policy::gateway`]), which compiles to the same [`PolicyConfig`] (`"*": deny` plus one
//! exact rule per listed tool).

pub mod allowlist;
pub mod gateway;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Unexpected, Visitor};

use crate::catalog::{self, Kind, OPS, Op, Risk};
use crate::error::{Error, Result};
use crate::invocation::Invocation;

/// Largest and smallest VMIDs Proxmox accepts (design §7).
const VMID_RANGE: std::ops::RangeInclusive<u64> = 100..=999_999_999;

/// PVE's tag syntax (`pve-tag` in pve-common), compared case-insensitively.
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^[a-z0-9_][a-z0-9_\-+.]*$").expect("tag regex"));

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
}

/// What a rule does with the ops it matches. Ordered by strictness (used to break ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// No objection (the catalog's own confirmation still applies).
    Allow,
    /// The op becomes soft-blacklisted: it runs only with its confirmation phrase.
    Confirm,
    /// The op is refused (exit 3).
    Deny,
}

impl Action {
    /// The name used in YAML and messages.
    pub fn name(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Confirm => "confirm",
            Action::Deny => "deny",
        }
    }

    fn parse(s: &str) -> Option<Action> {
        [Action::Allow, Action::Confirm, Action::Deny]
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
    pub limits: Option<Vec<crate::limits::Limit>>,
    /// The guest commands the matching ops may run (argv shapes).
    pub commands: Option<Vec<crate::policy::allowlist::CommandRule>>,
}

impl Rule {
    /// A rule with only an action.
    pub fn new(action: Action) -> Rule {
        Rule {
            action,
            reason: None,
            limits: None,
            commands: None,
        }
    }
}

impl<'de> Deserialize<'de> for Rule {
    // Hand-written rather than `#[serde(untagged)]` so that a typo gets a message naming
    // what was expected instead of "data did not match any variant".
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Rule, D::Error> {
        struct V;
        const EXPECTED: &str = "allow, deny or confirm";
        impl<'de> Visitor<'de> for V {
            type Value = Rule;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("allow, deny, confirm, or {action: allow|deny|confirm, reason: \"…\"}")
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
                const FIELDS: &[&str] = &["action", "reason", "limits", "commands"];
                let (mut action, mut reason, mut limits, mut commands) = (None, None, None, None);
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
                        "action" | "reason" | "limits" | "commands" => {
                            return Err(de::Error::custom(format!("duplicate field `{key}`")));
                        }
                        other => {
                            return Err(de::Error::unknown_field(other, FIELDS));
                        }
                    }
                }
                let action = match action {
                    Some(a) => a,
                    None if limits.is_some() || commands.is_some() => Action::Allow,
                    None => return Err(de::Error::missing_field("action")),
                };
                Ok(Rule {
                    action,
                    reason,
                    limits,
                    commands,
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

/// What the policy says about an invocation it does not refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The policy adds nothing (the catalog's own confirmation, if any, still applies).
    Allow,
    /// A `confirm` rule matched: the op is soft-blacklisted and needs this confirmation.
    Confirm(Confirmation),
}

/// The confirmation a `confirm` rule demands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    /// The exact phrase: the catalog's phrase when the op has one (`yes destroy 100`), else
    /// [`crate::confirm::policy_phrase`] (`yes vm start 100`), bound to the target.
    pub phrase: String,
    /// The rule that demanded it, for messages: `policy.ops.vm.* in /path/config.yaml`.
    pub rule: String,
    /// The rule's reason, if it gave one.
    pub reason: Option<String>,
}

impl Confirmation {
    /// The error when the phrase is missing (exit 4). A catalog confirm op keeps the
    /// catalog's wording (it names the consequence); any other op says the policy asks.
    pub fn refusal(&self, inv: &Invocation) -> Error {
        if let Some(e) = inv.refusal() {
            return e;
        }
        let why = match &self.reason {
            Some(r) => format!("local policy requires confirmation: {r} ({})", self.rule),
            None => format!("local policy requires confirmation ({})", self.rule),
        };
        Error::ConfirmationRequired {
            message: format!(
                "I won't run `{}` without explicit confirmation — {why}. Reply `{}` if you want me to proceed.",
                inv.display(),
                self.phrase
            ),
            phrase: self.phrase.clone(),
            hint: None,
        }
    }
}

/// One compiled `ops` entry.
#[derive(Debug, Clone)]
struct Compiled {
    key: String,
    rule: Rule,
    commands: Option<crate::policy::allowlist::Allowlist>,
    glob: bool,
    /// Literal (non-`*`) characters: the specificity of a glob.
    literals: usize,
}

/// A validated policy plus where it came from (for messages).
#[derive(Debug, Clone)]
pub struct Policy {
    read_only: bool,
    rules: Vec<Compiled>,
    protect_ids: BTreeSet<u64>,
    /// Lower-cased.
    protect_tags: Vec<String>,
    allow_privileged_ct_exec: bool,
    source: String,
}

impl Default for Policy {
    /// No policy: nothing is refused and nothing extra is confirmed.
    fn default() -> Policy {
        Policy {
            read_only: false,
            rules: Vec::new(),
            protect_ids: BTreeSet::new(),
            protect_tags: Vec::new(),
            allow_privileged_ct_exec: false,
            source: "built-in defaults".into(),
        }
    }
}

impl Policy {
    /// Validate a config section. `source` names where it came from (the config path) and
    /// appears in every refusal. Errors are [`Error::Usage`] (exit 2) and name every bad
    /// entry at once: op ids and globs that match no catalog op, malformed tags, VMIDs out of
    /// range, reasons that are not one line.
    pub fn from_config(cfg: PolicyConfig, source: &str) -> Result<Policy> {
        let mut problems = Vec::new();
        let mut rules = Vec::new();
        for (key, rule) in cfg.ops {
            if let Some(r) = &rule.reason
                && (r.trim().is_empty() || r.chars().any(char::is_control))
            {
                problems.push(format!(
                    "policy.ops.{key}: the reason must be one non-empty line"
                ));
            }
            let glob = key.contains('*');
            if !OPS.iter().any(|op| glob_match(&key, op.id)) {
                problems.push(unknown_op(&key, glob));
                continue;
            }
            let literals = key.chars().filter(|&c| c != '*').count();
            for l in rule.limits.iter().flatten() {
                if let Some(p) = l.problems() {
                    problems.push(format!("policy.ops.{key}.limits: {p}"));
                }
            }
            let commands = match &rule.commands {
                None => None,
                Some(c) => {
                    if !OPS
                        .iter()
                        .any(|op| glob_match(&key, op.id) && op.runs_guest_command())
                    {
                        problems.push(format!(
                            "policy.ops.{key}.commands: only ops that run a command in a guest (vm.exec, ct.exec) take a command allowlist"
                        ));
                    }
                    match crate::policy::allowlist::Allowlist::compile(
                        c,
                        &format!("policy.ops.{key}.commands"),
                    ) {
                        Ok(a) => Some(a),
                        Err(p) => {
                            problems.extend(p);
                            None
                        }
                    }
                }
            };
            rules.push(Compiled {
                key,
                rule,
                commands,
                glob,
                literals,
            });
        }
        let mut protect_ids = BTreeSet::new();
        let mut protect_tags = Vec::new();
        for p in cfg.protect {
            match p {
                Protect::Vmid(id) if VMID_RANGE.contains(&id) => {
                    protect_ids.insert(id);
                }
                Protect::Vmid(id) => problems.push(format!(
                    "policy.protect: {id} is not a VMID (100-999999999)"
                )),
                Protect::Tag(t) if TAG.is_match(&t) => protect_tags.push(t.to_ascii_lowercase()),
                Protect::Tag(t) => problems.push(format!(
                    "policy.protect: {t:?} is not a valid Proxmox tag (letters, digits, _ - + . ; not starting with - + .)"
                )),
            }
        }
        if !problems.is_empty() {
            return Err(Error::usage(format!(
                "config {source}: {}",
                problems.join("; ")
            )));
        }
        protect_tags.sort();
        protect_tags.dedup();
        Ok(Policy {
            read_only: cfg.read_only,
            rules,
            protect_ids,
            protect_tags,
            allow_privileged_ct_exec: cfg.allow_privileged_ct_exec,
            source: source.to_string(),
        })
    }

    /// Load a policy file: pxagent's YAML form (the config's `policy:` section) or the MCP
    /// gateway's JSON form (recognized by its `version`, `default` or `tools` keys). Errors
    /// name the file and what is wrong (exit 2).
    pub fn from_file(path: &std::path::Path) -> Result<Policy> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        let shown = path.display().to_string();
        let cfg = if crate::policy::gateway::is_gateway_form(&text) {
            crate::policy::gateway::parse(&text, &shown)?
        } else if text.trim().is_empty() {
            PolicyConfig::default()
        } else {
            yaml_serde::from_str::<PolicyConfig>(&text).map_err(|e| {
                let at = e
                    .location()
                    .map(|l| format!(":{}:{}", l.line(), l.column()))
                    .unwrap_or_default();
                Error::usage(format!("policy {shown}{at}: {e}"))
            })?
        };
        Policy::from_config(cfg, &shown)
    }

    /// The policy in force for a command: `--policy FILE` (also `PXAGENT_POLICY`) when given,
    /// else the config's (its `policy_file:` or its `policy:` section).
    pub fn effective(flag: Option<&str>, cfg: &crate::config::Config) -> Result<Policy> {
        match flag.filter(|f| !f.is_empty()) {
            Some(f) => Policy::from_file(&crate::config::expand_home(std::path::Path::new(f))),
            None => cfg.policy(),
        }
    }

    /// The rate limits of an op: the most specific rule's `limits`, else 10 per minute for
    /// ops that run a command in a guest, else none.
    pub fn limits_for(&self, op: &Op) -> Vec<crate::limits::Limit> {
        match self.compiled_for(op.id).and_then(|c| c.rule.limits.clone()) {
            Some(l) => l,
            None if op.runs_guest_command() => vec![crate::limits::Limit::exec_default(op)],
            None => Vec::new(),
        }
    }

    /// Where an op's limits were written (`None`: pxagent's default).
    pub fn limits_source(&self, op: &Op) -> Option<String> {
        let c = self.compiled_for(op.id)?;
        c.rule
            .limits
            .as_ref()
            .map(|_| format!("policy.ops.{}.limits in {}", c.key, self.source))
    }

    /// Whether the most specific rule's allowlist admits this guest command (program first).
    /// `Err` is [`Error::Policy`] (exit 3) naming the allowed shapes.
    pub fn check_command(&self, inv: &Invocation, argv: &[String]) -> Result<()> {
        let Some(c) = self.compiled_for(inv.op.id) else {
            return Ok(());
        };
        let Some(list) = &c.commands else {
            return Ok(());
        };
        if list.admits(argv) {
            return Ok(());
        }
        let target = match inv.vmid() {
            Some(id) => format!("{} on {id}", inv.op.id),
            None => inv.op.id.to_string(),
        };
        Err(Error::Policy(format!(
            "policy refuses {target}: `{}` is not one of the allowed commands ({}) (policy.ops.{}.commands in {})",
            crate::catalog::kind::printable(&crate::invocation::quote_argv(argv)),
            crate::catalog::kind::printable(&list.describe()),
            c.key,
            self.source
        )))
    }

    /// Whether `ct exec` may enter privileged containers.
    pub fn allow_privileged_ct_exec(&self) -> bool {
        self.allow_privileged_ct_exec
    }

    fn compiled_for(&self, op_id: &str) -> Option<&Compiled> {
        self.rules
            .iter()
            .filter(|c| glob_match(&c.key, op_id))
            .max_by_key(|c| (!c.glob, c.literals, c.rule.action))
    }

    /// Where this policy came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether `read_only` is on.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The rule that applies to an op id and the key it was written under (for dry-run
    /// output and, later, rate limits): the most specific match, as the module doc says.
    pub fn rule_for(&self, op_id: &str) -> Option<(&str, &Rule)> {
        self.compiled_for(op_id).map(|c| (c.key.as_str(), &c.rule))
    }

    /// Decide before anything is sent. `guest_tags` are the tags of the guest named by the
    /// op's `vmid` as `/cluster/resources` reports them (see [`parse_tags`]): `Some(&[])` when
    /// it has none or does not exist yet, `None` when they were not looked up. When tags are
    /// protected and a state-changing op's guest has unknown tags, the op is refused — the
    /// policy fails closed rather than guess.
    ///
    /// `Err` is always [`Error::Policy`] (exit 3) with a one-line reason.
    pub fn check(&self, inv: &Invocation, guest_tags: Option<&[String]>) -> Result<Decision> {
        let op = inv.op;
        let target = match inv.vmid() {
            Some(id) => format!("{} on {id}", op.id),
            None => op.id.to_string(),
        };
        let refuse = |why: String, key: &str| {
            Err(Error::Policy(format!(
                "policy refuses {target}: {why} ({key} in {})",
                self.source
            )))
        };
        let rule = self.rule_for(op.id);
        if let Some((key, r)) = rule
            && r.action == Action::Deny
        {
            let why = r
                .reason
                .clone()
                .unwrap_or_else(|| format!("{} is denied", op.id));
            return refuse(why, &format!("policy.ops.{key}"));
        }
        if self.read_only && op.risk != Risk::Read {
            return refuse(
                format!("read_only is on and {} {}", op.id, what_it_does(op.risk)),
                "policy.read_only",
            );
        }
        if op.risk != Risk::Read {
            if let Some(id) = guest_ids(inv)
                .into_iter()
                .find(|id| self.protect_ids.contains(id))
            {
                return refuse(format!("guest {id} is protected"), "policy.protect");
            }
            if let (false, Some(id)) = (self.protect_tags.is_empty(), inv.vmid()) {
                match guest_tags {
                    None => {
                        return refuse(
                            format!(
                                "cannot tell whether guest {id} carries a protected tag ({}): its tags are unknown",
                                self.protect_tags.join(", ")
                            ),
                            "policy.protect",
                        );
                    }
                    Some(tags) => {
                        if let Some(t) = tags
                            .iter()
                            .find(|t| self.protect_tags.iter().any(|p| p.eq_ignore_ascii_case(t)))
                        {
                            return refuse(
                                format!("guest {id} carries the protected tag '{t}'"),
                                "policy.protect",
                            );
                        }
                    }
                }
            }
        }
        match rule {
            Some((key, r)) if r.action == Action::Confirm => Ok(Decision::Confirm(Confirmation {
                phrase: inv
                    .phrase()
                    .unwrap_or_else(|| crate::confirm::policy_phrase(inv)),
                rule: format!("policy.ops.{key} in {}", self.source),
                reason: r.reason.clone(),
            })),
            _ => Ok(Decision::Allow),
        }
    }

    /// Whether [`Policy::check`] needs the guest's tags (some protect entry is a tag). The
    /// caller then reads them from the guest's `/cluster/resources` entry — the same lookup
    /// that finds the guest's node.
    pub fn needs_guest_tags(&self) -> bool {
        !self.protect_tags.is_empty()
    }

    /// Whether an op should be offered at all (MCP tool listing): false when a `deny` rule or
    /// `read_only` refuses it whatever its arguments. Protection depends on the arguments, so
    /// it does not hide an op.
    pub fn allows_listing(&self, op: &Op) -> bool {
        let denied = self
            .rule_for(op.id)
            .is_some_and(|(_, r)| r.action == Action::Deny);
        let read_only_blocks = self.read_only && op.risk != Risk::Read;
        !(denied || read_only_blocks)
    }
}

/// Split a guest's `tags` field as Proxmox writes it (`;`-separated in `/cluster/resources`;
/// `,` and spaces are accepted on input too) into tags, dropping empty pieces.
pub fn parse_tags(s: &str) -> Vec<String> {
    s.split([';', ',', ' ', '\t'])
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// What an op of this risk does, for the read-only refusal.
fn what_it_does(risk: Risk) -> &'static str {
    match risk {
        Risk::Read => "only reads",
        Risk::Change | Risk::Confirm => "changes state",
        Risk::Exec => "runs a command inside a guest",
    }
}

/// Every VMID the invocation names (every parameter of kind VMID: the guest, and a clone's
/// or restore's target).
fn guest_ids(inv: &Invocation) -> Vec<u64> {
    inv.values
        .iter()
        .filter(|(name, _)| {
            inv.op
                .param(name)
                .is_some_and(|p| matches!(p.kind, Kind::Vmid))
        })
        .filter_map(|(_, v)| v.parse().ok())
        .collect()
}

/// `*` matches any run of characters (dots included); everything else is literal.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was and the text position it currently stands for.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The message for an `ops` key that matches no op, with a suggestion when one is close.
fn unknown_op(key: &str, glob: bool) -> String {
    let shown = key.escape_debug();
    if glob {
        return format!("policy.ops: \"{shown}\" matches no op (`pxagent catalog` lists the ids)");
    }
    let suggestion = catalog::OPS
        .iter()
        .find(|op| op.tool_name() == key)
        .or_else(|| {
            OPS.iter()
                .map(|op| (edit_distance(key, op.id), op))
                .filter(|(d, _)| *d <= 2)
                .min_by_key(|(d, _)| *d)
                .map(|(_, op)| op)
        });
    match suggestion {
        Some(op) => format!(
            "policy.ops: unknown op \"{shown}\" (did you mean {}?)",
            op.id
        ),
        None => format!("policy.ops: unknown op \"{shown}\" (`pxagent catalog` lists the ids)"),
    }
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "/root/.config/pxagent/config.yaml";

    fn policy(yaml: &str) -> Result<Policy> {
        let cfg: PolicyConfig =
            yaml_serde::from_str(yaml).map_err(|e| Error::usage(e.to_string()))?;
        Policy::from_config(cfg, SRC)
    }

    fn inv(id: &str, kv: &[(&'static str, &str)]) -> Invocation {
        let op = catalog::find(id).unwrap_or_else(|| panic!("no op {id}"));
        Invocation::new(op, kv.iter().map(|(k, v)| (*k, v.to_string())).collect()).unwrap()
    }

    fn refusal(p: &Policy, i: &Invocation, tags: Option<&[String]>) -> String {
        let e = p.check(i, tags).unwrap_err();
        assert_eq!(e.exit_code(), 3, "{e}");
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "one line: {msg}");
        msg
    }

    fn tags(s: &str) -> Vec<String> {
        parse_tags(s)
    }

    #[test]
    fn no_policy_allows_everything_and_keeps_the_catalog_phrase() {
        let p = Policy::default();
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        // The catalog's soft blacklist is not the policy's business: still Allow here,
        // the confirmation gate asks for `yes destroy 100`.
        assert_eq!(
            p.check(&inv("vm.destroy", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        assert!(OPS.iter().all(|op| p.allows_listing(op)));
        assert!(!p.needs_guest_tags());
    }

    #[test]
    fn deny_with_and_without_reason() {
        let p = policy(
            "ops:\n  vm.destroy: deny\n  vm.stop: {action: deny, reason: \"use vm shutdown\"}\n",
        )
        .unwrap();
        assert_eq!(
            refusal(&p, &inv("vm.destroy", &[("vmid", "100")]), None),
            format!(
                "policy refuses vm.destroy on 100: vm.destroy is denied (policy.ops.vm.destroy in {SRC})"
            )
        );
        assert_eq!(
            refusal(&p, &inv("vm.stop", &[("vmid", "101")]), None),
            format!("policy refuses vm.stop on 101: use vm shutdown (policy.ops.vm.stop in {SRC})")
        );
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        assert!(!p.allows_listing(catalog::find("vm.destroy").unwrap()));
        assert!(p.allows_listing(catalog::find("vm.start").unwrap()));
    }

    #[test]
    fn confirm_turns_any_op_into_a_soft_blacklisted_one() {
        let p = policy(
            "ops:\n  vm.start: {action: confirm, reason: production}\n  vm.destroy: confirm\n",
        )
        .unwrap();
        let i = inv("vm.start", &[("vmid", "100")]);
        let Decision::Confirm(c) = p.check(&i, None).unwrap() else {
            panic!("expected confirm")
        };
        assert_eq!(c.phrase, "yes vm start 100");
        assert_eq!(c.rule, format!("policy.ops.vm.start in {SRC}"));
        let e = c.refusal(&i);
        assert_eq!(e.exit_code(), 4);
        assert_eq!(
            e.to_string(),
            format!(
                "I won't run `vm start 100` without explicit confirmation — local policy requires confirmation: production (policy.ops.vm.start in {SRC}). Reply `yes vm start 100` if you want me to proceed."
            )
        );
        // A catalog confirm op keeps its own phrase and wording.
        let d = inv("vm.destroy", &[("vmid", "100")]);
        let Decision::Confirm(c) = p.check(&d, None).unwrap() else {
            panic!("expected confirm")
        };
        assert_eq!(c.phrase, "yes destroy 100");
        assert!(c.refusal(&d).to_string().contains("irrecoverably"));
        // Confirm does not hide the op.
        assert!(p.allows_listing(catalog::find("vm.start").unwrap()));
    }

    #[test]
    fn allow_never_waives_the_catalog_phrase() {
        let p = policy("ops:\n  vm.destroy: allow\n").unwrap();
        let i = inv("vm.destroy", &[("vmid", "100")]);
        assert_eq!(p.check(&i, None).unwrap(), Decision::Allow);
        assert_eq!(i.phrase().as_deref(), Some("yes destroy 100"));
    }

    #[test]
    fn exact_beats_glob_and_longer_glob_beats_shorter() {
        let p = policy("ops:\n  \"*\": deny\n  vm.*: confirm\n  vm.s*: allow\n  vm.stop: deny\n")
            .unwrap();
        assert_eq!(p.rule_for("vm.destroy").unwrap().0, "vm.*");
        assert_eq!(p.rule_for("vm.start").unwrap().0, "vm.s*");
        assert_eq!(p.rule_for("vm.stop").unwrap().0, "vm.stop");
        assert_eq!(p.rule_for("ct.start").unwrap().0, "*");
        assert!(matches!(
            p.check(&inv("vm.destroy", &[("vmid", "100")]), None),
            Ok(Decision::Confirm(_))
        ));
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "100")]), None).unwrap(),
            Decision::Allow
        );
        assert!(
            refusal(&p, &inv("vm.stop", &[("vmid", "100")]), None).contains("policy.ops.vm.stop")
        );
        assert!(
            refusal(&p, &inv("ct.start", &[("vmid", "200")]), None).contains("(policy.ops.* in")
        );
        assert!(!p.allows_listing(catalog::find("ct.start").unwrap()));
    }

    #[test]
    fn equally_specific_globs_pick_the_stricter_action_whatever_the_order() {
        // `vm.*` and `*.stop` both have three literal characters.
        for yaml in [
            "ops:\n  vm.*: allow\n  \"*.stop\": deny\n",
            "ops:\n  \"*.stop\": deny\n  vm.*: allow\n",
        ] {
            let p = policy(yaml).unwrap();
            assert_eq!(p.rule_for("vm.stop").unwrap().1.action, Action::Deny);
            assert_eq!(p.rule_for("vm.start").unwrap().1.action, Action::Allow);
        }
    }

    #[test]
    fn read_only_refuses_everything_but_reads() {
        let p = policy("read_only: true\n").unwrap();
        assert_eq!(
            refusal(&p, &inv("vm.start", &[("vmid", "100")]), None),
            format!(
                "policy refuses vm.start on 100: read_only is on and vm.start changes state (policy.read_only in {SRC})"
            )
        );
        assert_eq!(
            p.check(&inv("vm.status", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        for op in OPS {
            assert_eq!(p.allows_listing(op), op.risk == Risk::Read, "{}", op.id);
        }
        // An explicit allow does not lift read_only.
        let p = policy("read_only: true\nops:\n  vm.start: allow\n").unwrap();
        assert!(p.check(&inv("vm.start", &[("vmid", "100")]), None).is_err());
    }

    #[test]
    fn protected_vmids_refuse_changes_but_not_reads() {
        let p = policy("protect: [100, 105]\n").unwrap();
        assert_eq!(
            refusal(&p, &inv("vm.destroy", &[("vmid", "100")]), None),
            format!(
                "policy refuses vm.destroy on 100: guest 100 is protected (policy.protect in {SRC})"
            )
        );
        assert!(refusal(&p, &inv("vm.start", &[("vmid", "105")]), None).contains("guest 105"));
        assert_eq!(
            p.check(&inv("vm.start", &[("vmid", "101")]), None).unwrap(),
            Decision::Allow
        );
        assert_eq!(
            p.check(&inv("vm.status", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        // Protection depends on the target, so it never hides an op.
        assert!(OPS.iter().all(|op| p.allows_listing(op)));
    }

    #[test]
    fn every_vmid_parameter_is_checked() {
        // Ops with a second VMID (clone / restore targets) are checked on both; this runs
        // on whichever such ops the catalog has, and on the helper directly.
        let p = policy("protect: [105]\n").unwrap();
        for op in OPS.iter().filter(|op| op.risk != Risk::Read) {
            let vmid_params: Vec<&str> = op
                .params
                .iter()
                .filter(|pa| matches!(pa.kind, Kind::Vmid))
                .map(|pa| pa.name)
                .collect();
            if vmid_params.len() < 2 {
                continue;
            }
            let mut values = catalog::example_values(op);
            for (i, name) in vmid_params.iter().enumerate() {
                values.insert(name, if i == 0 { "101" } else { "105" }.to_string());
            }
            let i = Invocation::new(op, values).unwrap();
            assert!(p.check(&i, Some(&[])).is_err(), "{}", op.id);
        }
        let i = inv("vm.start", &[("vmid", "105")]);
        assert_eq!(guest_ids(&i), vec![105]);
    }

    #[test]
    fn protected_tags_are_case_insensitive_and_fail_closed_when_unknown() {
        let p = policy("protect: [Keep, prod-db]\n").unwrap();
        assert!(p.needs_guest_tags());
        let start = inv("vm.start", &[("vmid", "100")]);
        assert_eq!(
            refusal(&p, &start, Some(&tags("web;KEEP"))),
            format!(
                "policy refuses vm.start on 100: guest 100 carries the protected tag 'KEEP' (policy.protect in {SRC})"
            )
        );
        assert!(refusal(&p, &start, Some(&tags("a,prod-db b"))).contains("'prod-db'"));
        assert_eq!(
            p.check(&start, Some(&tags("web;keeper"))).unwrap(),
            Decision::Allow
        );
        assert_eq!(p.check(&start, Some(&[])).unwrap(), Decision::Allow);
        let msg = refusal(&p, &start, None);
        assert!(msg.contains("its tags are unknown"), "{msg}");
        // Reads and guest-less ops need no tags.
        assert_eq!(
            p.check(&inv("vm.status", &[("vmid", "100")]), None)
                .unwrap(),
            Decision::Allow
        );
        assert_eq!(
            p.check(&inv("vm.list", &[]), None).unwrap(),
            Decision::Allow
        );
    }

    #[test]
    fn parse_tags_splits_like_proxmox() {
        assert_eq!(tags("a;b;c"), ["a", "b", "c"]);
        assert_eq!(tags("a, b  c;;"), ["a", "b", "c"]);
        assert!(tags("").is_empty());
    }

    #[test]
    fn unknown_ops_and_bad_entries_are_usage_errors_naming_them() {
        let e = policy("ops:\n  vm.destory: deny\n  vn.*: deny\n  vm_start: deny\n").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("config {SRC}: ")), "{msg}");
        assert!(
            msg.contains("unknown op \"vm.destory\" (did you mean vm.destroy?)"),
            "{msg}"
        );
        assert!(msg.contains("\"vn.*\" matches no op"), "{msg}");
        assert!(
            msg.contains("unknown op \"vm_start\" (did you mean vm.start?)"),
            "{msg}"
        );

        let msg = policy("protect: [99, 1000000000, \"-bad\", \"a b\"]\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("99 is not a VMID"), "{msg}");
        assert!(msg.contains("1000000000 is not a VMID"), "{msg}");
        assert!(msg.contains("\"-bad\" is not a valid Proxmox tag"), "{msg}");
        assert!(msg.contains("\"a b\" is not a valid Proxmox tag"), "{msg}");

        let msg = policy("ops:\n  vm.stop: {action: deny, reason: \"two\\nlines\"}\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("one non-empty line"), "{msg}");
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
        assert!(e("ops:\n  vm.stop: {action: nope}\n").contains("allow, deny or confirm"));
        assert!(e("ops:\n  vm.stop: {deny: why}\n").contains("unknown field `deny`"));
        assert!(e("ops:\n  vm.stop: {reason: why}\n").contains("missing field `action`"));
        assert!(e("readonly: true\n").contains("unknown field `readonly`"));
        assert!(e("protect: [\"100\"]\n").contains("without quotes"));
        assert!(e("protect: [-5]\n").contains("VMID"));
    }

    #[test]
    fn yaml_round_trip_from_a_config_snippet() {
        let yaml = r#"
read_only: false
ops:
  "*": allow
  vm.destroy: deny
  vm.stop: {action: deny, reason: "use `vm shutdown` instead"}
  "ct.*": confirm
  vm.start:
    action: confirm
    reason: production host
protect: [100, 105, keep]
"#;
        let cfg: PolicyConfig = yaml_serde::from_str(yaml).unwrap();
        assert_eq!(
            cfg,
            PolicyConfig {
                read_only: false,
                ops: BTreeMap::from([
                    (
                        "*".into(),
                        Rule {
                            action: Action::Allow,
                            reason: None,
                            limits: None,
                            commands: None
                        }
                    ),
                    (
                        "vm.destroy".into(),
                        Rule {
                            action: Action::Deny,
                            reason: None,
                            limits: None,
                            commands: None
                        }
                    ),
                    (
                        "vm.stop".into(),
                        Rule {
                            action: Action::Deny,
                            reason: Some("use `vm shutdown` instead".into()),
                            limits: None,
                            commands: None
                        }
                    ),
                    (
                        "ct.*".into(),
                        Rule {
                            action: Action::Confirm,
                            reason: None,
                            limits: None,
                            commands: None
                        }
                    ),
                    (
                        "vm.start".into(),
                        Rule {
                            action: Action::Confirm,
                            reason: Some("production host".into()),
                            limits: None,
                            commands: None
                        }
                    ),
                ]),
                protect: vec![
                    Protect::Vmid(100),
                    Protect::Vmid(105),
                    Protect::Tag("keep".into())
                ],
                allow_privileged_ct_exec: false,
            }
        );
        let p = Policy::from_config(cfg, SRC).unwrap();
        assert_eq!(p.source(), SRC);
        assert!(!p.read_only());
        assert!(p.needs_guest_tags());
        assert!(matches!(
            p.check(&inv("ct.start", &[("vmid", "200")]), Some(&[])),
            Ok(Decision::Confirm(_))
        ));
        // An empty section is the default.
        assert_eq!(
            yaml_serde::from_str::<PolicyConfig>("{}").unwrap(),
            PolicyConfig::default()
        );
    }

    #[test]
    fn glob_matching() {
        assert!(glob_match("*", "vm.start"));
        assert!(glob_match("vm.*", "vm.start"));
        assert!(glob_match("*.start", "ct.start"));
        assert!(glob_match("v*.s*t", "vm.start"));
        assert!(glob_match("vm.start", "vm.start"));
        assert!(!glob_match("vm.*", "ct.start"));
        assert!(!glob_match("vm.star", "vm.start"));
        assert!(!glob_match("*.stop", "vm.start"));
        assert!(glob_match("**", ""));
    }
}
