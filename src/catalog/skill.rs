//! The agent skill (`pxagent skill [--profile P]`, the MCP prompt `pxagent-skill`): a skill document in the Agent Skills format (`SKILL.md`: YAML
//! front matter with `name` and `description`, then Markdown) generated from the catalog, so
//! it never drifts from what pxagent does: when to use it, first steps, every operation of the
//! profile grouped by area with its usage, risk and phrase, how to relay a phrase or an
//! approval, what each exit code means and what to do next, and the common workflows as
//! pxagent commands. `skills/pxagent/SKILL.md` is the committed copy (`scripts/regen.sh`).

use crate::catalog::{Area, OPS, Op, Profile, Risk};

/// The areas in the order the skill lists them, with their headings.
const AREAS: &[(Area, &str)] = &[
    (Area::Cluster, "Cluster"),
    (Area::Node, "Nodes"),
    (Area::Vm, "Virtual machines"),
    (Area::Ct, "Containers"),
    (Area::Backup, "Backups"),
    (Area::Storage, "Storage, ISOs, templates and cloud images"),
    (Area::Task, "Tasks"),
];

/// The common workflows: a title and the ops, in order, whose usage lines make it up.
pub const WORKFLOWS: &[(&str, &[&str])] = &[
    (
        "A VM from a cloud image (download once, then create with cloud-init, start, find its IP)",
        &["image.download", "vm.create-image", "vm.start", "vm.ips"],
    ),
    (
        "Snapshot before an upgrade, and roll back if it went wrong",
        &["vm.snapshot", "vm.rollback", "vm.delsnapshot"],
    ),
    (
        "Back up a guest and check the archive",
        &["backup.create", "backup.list"],
    ),
    (
        "Add a storage (a directory, an admin-approved NFS server)",
        &["storage.add-dir", "storage.add-nfs", "storage.list"],
    ),
    (
        "Run a command in a VM (through the guest agent; file push and pull with `--push` and `--pull`)",
        &["vm.exec", "vm.file-write", "vm.file-read"],
    ),
    (
        "Follow a long task",
        &["task.list", "task.status", "task.wait"],
    ),
];

/// What each exit code means for an agent, and what to do next.
const EXIT_CODES: &[(u8, &str, &str)] = &[
    (0, "ok", "Done; read `data` (JSON with `-o json`)."),
    (
        1,
        "remote_failed, not_found, locked, wrong_state, findings",
        "Proxmox refused or failed: read the message, fix the cause (a wrong id, a locked or stopped guest), do not retry blindly.",
    ),
    (
        2,
        "invalid_input",
        "Nothing was sent: correct the arguments as the message says.",
    ),
    (
        3,
        "policy_refused",
        "A policy forbids it: stop and tell the user; do not look for another way.",
    ),
    (
        4,
        "confirmation_required, confirmation_mismatch, approval required",
        "Relay the phrase or the approval request to the human (below); never make one up.",
    ),
    (
        5,
        "preflight_failed, unhealthy",
        "The host's setup is incomplete (`preflight`), or `health` found problems: show the user the findings (each names the command that shows more).",
    ),
    (
        6,
        "auth_failed",
        "The key or host key was refused: tell the user; never fall back to a password.",
    ),
    (
        7,
        "connection_failed",
        "The host did not answer. After a change was sent the outcome is unknown: check with a read (`vm status`, `task list`) before anything else.",
    ),
    (
        8,
        "rate_limited",
        "Wait for the window the message names, or ask the user.",
    ),
    (
        9,
        "sudo_refused",
        "The host's sudoers does not allow it: tell the user (the admin renders sudoers with `pxagent sudoers render`).",
    ),
    (
        10,
        "internal, audit unavailable",
        "A pxagent bug or an audit log it cannot write: tell the user; nothing was changed if the audit failed.",
    ),
];

fn usage_of(op: &Op) -> String {
    format!("pxagent {}", op.usage())
}

fn risk_note(op: &Op) -> String {
    let mut s = match op.risk {
        Risk::Read => "read".to_string(),
        Risk::Change => "change".to_string(),
        Risk::Confirm => "destructive".to_string(),
        Risk::Exec => "in the guest, rate-limited".to_string(),
    };
    if let Some(c) = op.confirm {
        s.push_str(&format!("; phrase `{}`", c.phrase));
    }
    s
}

/// The skill document for `profile`.
pub fn render(profile: Profile) -> String {
    render_narrowed(profile, None)
}

/// The skill document for `profile`, narrowed to the ops an account may run on its host
/// (`pxagent skill --from-host`): `host` names the account and host and lists those ops.
pub fn render_narrowed(profile: Profile, host: Option<(&str, &[&Op])>) -> String {
    let ops: Vec<&Op> = OPS
        .iter()
        .filter(|op| !op.is_step() && profile.allows_op(op))
        .filter(|op| host.is_none_or(|(_, may)| may.iter().any(|m| std::ptr::eq(*m, **op))))
        .copied()
        .collect();
    let mut s = String::new();
    s.push_str("---\n");
    s.push_str("name: pxagent\n");
    s.push_str(
        "description: Manage Proxmox VE hosts and clusters through pxagent, as an unprivileged account that can run only the commands its sudoers allows. Use when the user asks to look at or change Proxmox guests, snapshots, backups, storage or tasks, or to run a command in a VM. Not for hosts without pxagent set up, and not for host administration outside its catalog (reboots, packages, network, users).\n",
    );
    s.push_str("---\n\n");
    s.push_str("# pxagent\n\n");
    match host {
        None => s.push_str(&format!(
            "Generated by `pxagent skill --profile {}` from pxagent {}'s catalog: {} operations.\n\n",
            profile.name(),
            env!("CARGO_PKG_VERSION"),
            ops.len()
        )),
        Some((who, _)) => s.push_str(&format!(
            "Generated by `pxagent skill --profile {} --from-host` from pxagent {}'s catalog and what {who} may run (its sudoers rules, less what its host policy denies): {} operations. Others are refused there.\n\n",
            profile.name(),
            env!("CARGO_PKG_VERSION"),
            ops.len()
        )),
    }
    s.push_str("## When to use it, and when not\n\n");
    s.push_str("- Use it for every read and change of a Proxmox host the user asks for: it keeps an audit trail, refuses what policy and sudoers forbid, and answers in JSON with `-o json`.\n");
    s.push_str("- Do not use `ssh`, `qm`, `pct` or `pvesh` directly instead, and do not try another way when pxagent refuses: a refusal is the host owner's decision.\n");
    s.push_str("- Always pass `-o json` and read `ok`, `data` and `error.kind`.\n\n");
    s.push_str("## First steps\n\n");
    s.push_str("```\npxagent -o json preflight      # is the host set up: key-only SSH, sudo rules, audit\npxagent -o json status         # version, nodes, storages, guests by state\npxagent -o json health         # anything wrong? findings by severity; exit 5 when there are problems\n```\n\n");
    s.push_str(&format!("## Operations (profile {})\n\n", profile.name()));
    s.push_str("`<vmid>` is a guest's id; `--node` is optional (pxagent finds the guest's node); a node's reads (`node disks`, `storage list`, …) take `--all-nodes` for every online node in one call. Risk: read, change, destructive (needs the human's phrase), in the guest.\n\n");
    for (area, title) in AREAS {
        let mine: Vec<&&Op> = ops.iter().filter(|op| op.area == *area).collect();
        if mine.is_empty() {
            continue;
        }
        s.push_str(&format!("### {title}\n\n"));
        for op in mine {
            s.push_str(&format!(
                "- `{}`: {} ({}) [`{}`]\n",
                usage_of(op),
                op.about.trim_end_matches('.'),
                risk_note(op),
                op.id
            ));
        }
        s.push('\n');
    }
    s.push_str("## Confirmation phrases\n\n");
    s.push_str("A destructive operation runs only with `--confirm` set to its exact phrase (`yes destroy 100`). Run it without `--confirm` first: it exits 4 with `error.kind` `confirmation_required`, the phrase in `error.phrase` and `error.phrase_from` `user`. Show the user what will happen and ask them to type the phrase; pass their reply unchanged with `--confirm`. The phrase must come from the human, never from you, and is good for that one call. A wrong phrase exits 4 with `error.kind` `confirmation_mismatch`: ask the user again, never correct it yourself. Pass `-o json` (or `--no-input`): pxagent then never waits at a prompt.\n\n");
    s.push_str("## Approvals\n\n");
    s.push_str("A host may want a human approver's signature for an operation: the call exits 4 and `error.approval_request` holds a statement. Hand that text to the human approver; they sign it with `pxagent approve --key KEY FILE` and give you the signature, which you pass with `--approval`. Never sign, invent or reuse an approval.\n\n");
    s.push_str("## Exit codes\n\n");
    s.push_str("| exit | error.kind | what to do |\n|---|---|---|\n");
    for (code, kind, what) in EXIT_CODES {
        s.push_str(&format!("| {code} | {kind} | {what} |\n"));
    }
    s.push('\n');
    s.push_str("## Common workflows\n\n");
    for (title, ids) in WORKFLOWS {
        let steps: Vec<&&Op> = ids
            .iter()
            .filter_map(|id| ops.iter().find(|op| op.id == *id))
            .collect();
        if steps.is_empty() {
            continue;
        }
        s.push_str(&format!("{title}:\n\n```\n"));
        for op in steps {
            s.push_str(&format!("{}\n", usage_of(op)));
        }
        s.push_str("```\n\n");
    }
    s.push_str("Many requests at once: `pxagent batch` reads JSON Lines (`{\"id\":1,\"op\":\"vm.status\",\"args\":{\"vmid\":100}}`) and answers one line each over one connection.\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_has_front_matter_and_names_every_op_of_its_profile() {
        for profile in [Profile::Readonly, Profile::Operator, Profile::Full] {
            let text = render(profile);
            let rest = text.strip_prefix("---\n").expect("front matter first");
            let (front, body) = rest.split_once("\n---\n").expect("front matter ends");
            let meta: std::collections::BTreeMap<String, String> =
                yaml_serde::from_str(front).expect("front matter is YAML");
            assert_eq!(meta["name"], "pxagent");
            assert!(meta["description"].contains("Use when"));
            assert!(meta["description"].len() <= 1024);
            for op in OPS.iter().filter(|op| !op.is_step()) {
                let named = body.contains(&format!("[`{}`]", op.id));
                assert_eq!(named, profile.allows_op(op), "{:?} {}", profile, op.id);
            }
        }
    }

    #[test]
    fn every_workflow_step_is_an_op() {
        for (title, ids) in WORKFLOWS {
            for id in *ids {
                assert!(OPS.iter().any(|op| op.id == *id), "{title}: {id}");
            }
        }
    }
}
