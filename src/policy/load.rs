//! Loading a policy: reading it from where it is stated — a config's
//! `policy:` section, or its own file in pxagent's YAML form or the MCP gateway's JSON form
//! ([`super::gateway`]) — then validating it against the catalog and compiling it into a
//! [`Policy`] that [`super::eval`] decides with. Uses the [`schema`](super::schema) types,
//! the [`gateway`](super::gateway) reader, the [`allowlist`](super::allowlist) compiler and the
//! catalog; never the config: which source is in force (`--policy FILE`, `PXAGENT_POLICY`, the
//! config's `policy_file:` or `policy:`) is the config's call
//! ([`crate::config::Config::policy_source`]), handed over as a [`PolicySource`].
//!
//! Validation names every bad entry at once (exit 2): op ids and globs that match no catalog
//! op (with a "did you mean"), malformed tags, VMIDs out of range, reasons that are not one
//! line, bad limits and allowlists.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::allowlist::Allowlist;
use super::eval::{Compiled, Policy, glob_match, key_matches};
use super::gateway;
use super::schema::{PolicyConfig, PolicySource, Protect};
use crate::base::error::{Error, Result};
use crate::catalog::OPS;

/// Largest and smallest VMIDs Proxmox accepts.
const VMID_RANGE: std::ops::RangeInclusive<u64> = 100..=999_999_999;

/// PVE's tag syntax (`pve-tag` in pve-common), compared case-insensitively.
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^[a-z0-9_][a-z0-9_\-+.]*$").expect("tag regex"));

impl Policy {
    /// Validate a config section. `source` names where it came from (the config path) and
    /// appears in every refusal. Errors are [`Error::Usage`] (exit 2) and name every bad
    /// entry at once: op ids and globs that match no catalog op, malformed tags, VMIDs out of
    /// range, reasons that are not one line.
    pub fn from_config(cfg: PolicyConfig, source: &str) -> Result<Policy> {
        Policy::compile(cfg, source, false)
    }

    /// Load the host policy (`/etc/pxagent/policy.yaml`, read by `pxagent gate`): the same
    /// YAML as a client policy, plus the action `approve`. Errors as [`Policy::from_file`].
    pub fn from_host_file(path: &Path) -> Result<Policy> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        Policy::from_host_text(&text, &path.display().to_string())
    }

    fn compile(cfg: PolicyConfig, source: &str, host: bool) -> Result<Policy> {
        let mut problems = Vec::new();
        let mut rules = Vec::new();
        if !host && (cfg.runaway.is_some() || cfg.budget.is_some() || cfg.grants.is_some()) {
            problems.push(
                "`runaway`, `budget` and `grants` are keys of the host policy (/etc/pxagent/policy.yaml), where `pxagent gate` counts every client's calls and checks grants; a client's own would be the agent's to reset"
                    .to_string(),
            );
        }
        for pattern in &cfg.snapshot_before {
            // A glob may name reads and creates too; it must name at least one change of an
            // existing guest, the only ops a snapshot is taken before.
            if !OPS
                .iter()
                .any(|op| glob_match(pattern, op.id) && op.snapshots().is_some())
            {
                problems.push(format!(
                    "snapshot_before: `{pattern}` names no change of an existing VM or container (a snapshot can be taken only of those)"
                ));
            }
        }
        for (key, rule) in cfg.ops {
            if matches!(
                rule.action,
                super::schema::Action::Approve | super::schema::Action::Grantable
            ) && !host
            {
                problems.push(format!(
                    "policy.ops.{key}: `{}` is an action of the host policy (/etc/pxagent/policy.yaml), where `pxagent gate` checks the signature; a client cannot check it (use `confirm` here)",
                    rule.action.name()
                ));
            }
            if let Some(r) = &rule.reason
                && (r.trim().is_empty() || r.chars().any(char::is_control))
            {
                problems.push(format!(
                    "policy.ops.{key}: the reason must be one non-empty line"
                ));
            }
            let glob = key.contains('*');
            let group = key.starts_with('@');
            if group && super::groups::find(&key).is_none() {
                problems.push(format!(
                    "policy.ops.{key}: no such group; the groups are {}",
                    super::groups::GROUPS
                        .iter()
                        .map(|g| g.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                continue;
            }
            if !group && !OPS.iter().any(|op| glob_match(&key, op.id)) {
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
                        .any(|op| key_matches(&key, op.id) && op.runs_guest_command())
                    {
                        problems.push(format!(
                            "policy.ops.{key}.commands: only ops that run a command in a guest (vm.exec, ct.exec) take a command allowlist"
                        ));
                    }
                    match Allowlist::compile(c, &format!("policy.ops.{key}.commands")) {
                        Ok(a) => Some(a),
                        Err(p) => {
                            problems.extend(p);
                            None
                        }
                    }
                }
            };
            for (what, list) in [("push", &rule.push), ("pull", &rule.pull)] {
                let Some(list) = list else { continue };
                if !OPS
                    .iter()
                    .any(|op| key_matches(&key, op.id) && op.runs_guest_command())
                {
                    problems.push(format!(
                        "policy.ops.{key}.{what}: only ops that run a command in a guest (vm.exec, ct.exec) move files"
                    ));
                }
                for g in list {
                    if !g.starts_with('/')
                        || g.split('/').any(|s| s == "..")
                        || g.chars().any(char::is_control)
                    {
                        problems.push(format!(
                            "policy.ops.{key}.{what}: {g:?} is not an absolute path glob (no '..', no control characters)"
                        ));
                    }
                }
            }
            rules.push(Compiled {
                key,
                rule,
                commands,
                glob,
                group,
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
            download_hosts: cfg
                .download_hosts
                .map(|l| l.iter().map(|h| h.to_ascii_lowercase()).collect()),
            nfs_servers: cfg
                .nfs_servers
                .map(|l| l.iter().map(|h| h.to_ascii_lowercase()).collect()),
            iso_max_used: match cfg.iso_max_used {
                Some(n) if !(1..=99).contains(&n) => {
                    return Err(Error::usage(format!(
                        "{source}: iso_max_used: {n} is not a percentage 1-99"
                    )));
                }
                n => n,
            },
            allow_ssh_lockout: cfg.allow_ssh_lockout,
            runaway: cfg.runaway.unwrap_or_default(),
            budget: cfg.budget,
            grant_max_for: cfg
                .grants
                .map_or(super::schema::Grants::DEFAULT_MAX_FOR, |g| g.max_for),
            snapshot_before: cfg.snapshot_before,
            taint_after_exec: cfg.taint == Some(super::schema::TaintMode::AfterExec),
            also: Vec::new(),
        })
    }

    /// Load a policy file: pxagent's YAML form (the config's `policy:` section) or the MCP
    /// gateway's JSON form (recognized by its `version`, `default` or `tools` keys). Errors
    /// name the file and what is wrong (exit 2).
    pub fn from_file(path: &Path) -> Result<Policy> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        Policy::from_text(&text, &path.display().to_string())
    }

    /// Check and compile a policy file's text (see [`Policy::from_file`]); `shown` names
    /// where the text came from in every error.
    pub fn from_text(text: &str, shown: &str) -> Result<Policy> {
        let cfg = if gateway::is_gateway_form(text) {
            gateway::parse(text, shown)?
        } else {
            parse_yaml(text, shown)?
        };
        Policy::from_config(cfg, shown)
    }

    /// Check and compile a host policy's text (see [`Policy::from_host_file`]). `setup
    /// render` validates the host policy it embeds with this, so what it installs is exactly
    /// the text that was checked.
    pub fn from_host_text(text: &str, shown: &str) -> Result<Policy> {
        Policy::compile(parse_yaml(text, shown)?, shown, true)
    }

    /// Load the policy a [`PolicySource`] names: the built-in default, a config section, or a
    /// file (see [`Policy::from_file`]).
    pub fn load(source: PolicySource) -> Result<Policy> {
        match source {
            PolicySource::Default => Ok(Policy::default()),
            PolicySource::Section { policy, source } => Policy::from_config(policy, &source),
            PolicySource::File(path) => Policy::from_file(&path),
        }
    }
}

/// A policy in pxagent's YAML form (empty text is the empty policy).
fn parse_yaml(text: &str, shown: &str) -> Result<PolicyConfig> {
    if text.trim().is_empty() {
        return Ok(PolicyConfig::default());
    }
    yaml_serde::from_str::<PolicyConfig>(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        Error::usage(format!("policy {shown}{at}: {e}"))
    })
}

/// The message for an `ops` key that matches no op, with a suggestion when one is close.
fn unknown_op(key: &str, glob: bool) -> String {
    let shown = key.escape_debug();
    if glob {
        return format!("policy.ops: \"{shown}\" matches no op (`pxagent catalog` lists the ids)");
    }
    let suggestion = OPS.iter().find(|op| op.tool_name() == key).or_else(|| {
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
    use std::collections::BTreeMap;

    use super::*;
    use crate::catalog::testing::inv;
    use crate::policy::Decision;
    use crate::policy::schema::{Action, Rule};

    const SRC: &str = "/root/.config/pxagent/config.yaml";

    fn policy(yaml: &str) -> Result<Policy> {
        let cfg: PolicyConfig =
            yaml_serde::from_str(yaml).map_err(|e| Error::usage(e.to_string()))?;
        Policy::from_config(cfg, SRC)
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn snapshot_before_names_changes_of_existing_guests() {
        let p = Policy::from_text("snapshot_before: [vm.resize, \"ct.*\"]\n", "c").unwrap();
        assert!(p.snapshot_before(&crate::catalog::ops::VM_RESIZE));
        assert!(p.snapshot_before(&crate::catalog::ops::CT_SET));
        assert!(!p.snapshot_before(&crate::catalog::ops::VM_SET));
        for bad in ["[vm.create]", "[vm.status]", "[nope]", "[vm.snapshot]"] {
            let e = Policy::from_text(&format!("snapshot_before: {bad}\n"), "c").unwrap_err();
            assert!(e.to_string().contains("snapshot_before"), "{bad}: {e}");
        }
    }

    #[test]
    fn runaway_and_budget_are_the_host_policys_and_default_to_twenty_in_two_minutes() {
        use crate::policy::limits::CapKind;
        let inv = |op: &'static crate::catalog::Op, vmid: &str, digest: &str| {
            let mut values = std::collections::BTreeMap::from([("vmid", vmid.to_string())]);
            if !digest.is_empty() {
                values.insert("digest", digest.to_string());
            }
            crate::catalog::invocation::Invocation {
                op,
                values,
                keep_type: None,
                attach: Default::default(),
            }
        };
        let line = inv(&crate::catalog::ops::VM_START, "100", "");
        let host = Policy::from_host_text("ops: {}\n", "h").unwrap();
        let caps = host.caps_for(&line);
        assert_eq!(caps.len(), 1);
        assert_eq!(
            (caps[0].kind, caps[0].max, caps[0].window),
            (CapKind::Runaway, 20, 120)
        );
        // Reads are not counted unless the policy says so.
        assert!(
            host.caps_for(&inv(&crate::catalog::ops::VM_STATUS, "100", ""))
                .is_empty()
        );
        let set = Policy::from_host_text(
            "runaway: {max: 5, window: 1m, reads: true}\nbudget: {changes: 50}\n",
            "h",
        )
        .unwrap();
        let caps = set.caps_for(&line);
        assert_eq!(caps.len(), 2);
        assert_eq!((caps[0].max, caps[0].window), (5, 60));
        assert_eq!(
            (caps[1].kind, caps[1].max, caps[1].window),
            (CapKind::Budget, 50, 3600)
        );
        assert_eq!(
            set.caps_for(&inv(&crate::catalog::ops::VM_STATUS, "100", ""))
                .len(),
            1
        );
        let off = Policy::from_host_text("runaway: {max: 0}\n", "h").unwrap();
        assert!(off.caps_for(&line).is_empty());
        // Identical calls share a counter, whatever digest pins them; another guest has its own.
        let set = |vmid, digest| inv(&crate::catalog::ops::VM_SET, vmid, digest);
        let key = |i| host.caps_for(&i)[0].key.clone();
        let pinned = "a".repeat(40);
        assert_eq!(key(set("100", "")), key(set("100", &pinned)));
        assert_ne!(key(set("100", "")), key(set("101", "")));
        // A client's policy cannot hold them; a bad window is named.
        let e = Policy::from_text("runaway: {max: 5}\n", "c").unwrap_err();
        assert!(e.to_string().contains("host policy"), "{e}");
        let e = Policy::from_host_text("budget: {changes: 5, window: soon}\n", "h").unwrap_err();
        assert!(e.to_string().contains("soon"), "{e}");
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
                            commands: None,
                            push: None,
                            pull: None
                        }
                    ),
                    (
                        "vm.destroy".into(),
                        Rule {
                            action: Action::Deny,
                            reason: None,
                            limits: None,
                            commands: None,
                            push: None,
                            pull: None
                        }
                    ),
                    (
                        "vm.stop".into(),
                        Rule {
                            action: Action::Deny,
                            reason: Some("use `vm shutdown` instead".into()),
                            limits: None,
                            commands: None,
                            push: None,
                            pull: None
                        }
                    ),
                    (
                        "ct.*".into(),
                        Rule {
                            action: Action::Confirm,
                            reason: None,
                            limits: None,
                            commands: None,
                            push: None,
                            pull: None
                        }
                    ),
                    (
                        "vm.start".into(),
                        Rule {
                            action: Action::Confirm,
                            reason: Some("production host".into()),
                            limits: None,
                            commands: None,
                            push: None,
                            pull: None
                        }
                    ),
                ]),
                protect: vec![
                    Protect::Vmid(100),
                    Protect::Vmid(105),
                    Protect::Tag("keep".into())
                ],
                allow_privileged_ct_exec: false,
                download_hosts: None,
                nfs_servers: None,
                iso_max_used: None,
                allow_ssh_lockout: false,
                runaway: None,
                budget: None,
                grants: None,
                snapshot_before: Vec::new(),
                taint: None,
            }
        );
        let p = Policy::from_config(cfg, SRC).unwrap();
        assert_eq!(p.source(), SRC);
        assert!(!p.read_only());
        assert!(p.needs_guest_tags());
        assert!(matches!(
            p.check(
                &inv("ct.start", &[("vmid", "200")]),
                Some(&crate::policy::GuestTags::default())
            ),
            Ok(Decision::Confirm(_))
        ));
        // An empty section is the default.
        assert_eq!(
            yaml_serde::from_str::<PolicyConfig>("{}").unwrap(),
            PolicyConfig::default()
        );
    }

    #[test]
    fn every_source_loads() {
        let p = Policy::load(PolicySource::Default).unwrap();
        assert_eq!(p.source(), "built-in defaults");
        let p = Policy::load(PolicySource::Section {
            policy: yaml_serde::from_str("read_only: true\n").unwrap(),
            source: SRC.into(),
        })
        .unwrap();
        assert!(p.read_only());
        assert_eq!(p.source(), SRC);
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policies/diagnostics.yaml");
        let p = Policy::load(PolicySource::File(path.clone())).unwrap();
        assert_eq!(p.source(), path.display().to_string());
        let e = Policy::load(PolicySource::File(path.with_file_name("no-such.yaml"))).unwrap_err();
        assert!(e.to_string().contains("no-such.yaml"), "{e}");
    }

    fn example(name: &str) -> Policy {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples/policies")
            .join(name);
        Policy::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn verdict(p: &Policy, op: &str, words: &[&str]) -> bool {
        let op = crate::catalog::find(op).unwrap();
        let vmid = if op.area == crate::catalog::Area::Ct {
            "200"
        } else {
            "100"
        };
        let inv = crate::catalog::invocation::Invocation::new(
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
