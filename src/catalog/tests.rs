//! Invariants of the catalog table: the things that would let the client and sudoers drift.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

fn matches(op: &Op, argv: &[String]) -> bool {
    if argv[0] != op.tool.path() {
        return false;
    }
    let re = regex::Regex::new(&op.args_regex(None)).unwrap();
    re.is_match(&argv[1..].join(" "))
}

#[test]
fn ids_are_unique_and_well_formed() {
    let mut seen = BTreeSet::new();
    let id_re = regex::Regex::new(r"^[a-z]+(\.[a-z-]+)+$").unwrap();
    for op in OPS {
        assert!(seen.insert(op.id), "duplicate id {}", op.id);
        assert!(id_re.is_match(op.id), "{}", op.id);
        assert!(
            !op.about.is_empty() && !op.about.ends_with('.'),
            "{}",
            op.id
        );
    }
}

#[test]
fn the_values_select_exactly_the_op_they_were_made_for() {
    for op in OPS {
        for v in samples(op) {
            let chosen = select(op.cli, &v).unwrap_or_else(|e| panic!("{}: {e}", op.id));
            assert_eq!(chosen.id, op.id, "{v:?}");
        }
        // Same-named params at one path must be identical so the CLI can merge them.
        for other in ops_at(op.cli) {
            for p in op.params {
                if let Some(q) = other.param(p.name) {
                    assert_eq!(
                        (p.kind, p.how),
                        (q.kind, q.how),
                        "{} / {}: {}",
                        op.id,
                        other.id,
                        p.name
                    );
                }
            }
        }
    }
}

#[test]
fn variants_name_their_base_and_bases_share_the_path() {
    // At a CLI path shared by several ops, the op named after the path is the base and
    // every other op there is a variant reaching it, so that a policy entry for the base
    // covers them all.
    for op in OPS {
        let shared = ops_at(op.cli).len() > 1;
        let is_base = op.id == op.cli.join(".");
        assert_eq!(!op.variant_of.is_empty(), shared && !is_base, "{}", op.id);
        for base in op.variant_of {
            assert_eq!(base.cli, op.cli, "{} / {}", op.id, base.id);
        }
        if shared {
            let path_id = op.cli.join(".");
            assert!(
                op.lineage().iter().any(|(id, _)| *id == path_id),
                "{} does not reach {path_id}",
                op.id
            );
        }
    }
    let ids = |op: &Op| op.lineage();
    assert_eq!(
        ids(&ops::VM_SNAPSHOT_VMSTATE),
        [("vm.snapshot-vmstate", 0), ("vm.snapshot", 1)]
    );
    assert_eq!(
        ids(&ops::BACKUP_RESTORE_CT_OVERWRITE),
        [
            ("backup.restore-ct-overwrite", 0),
            ("backup.restore-ct", 1),
            ("backup.restore-overwrite", 1),
            ("backup.restore", 2)
        ]
    );
    assert_eq!(ids(&ops::VM_START), [("vm.start", 0)]);
}

#[test]
fn confirm_data_exactly_on_confirm_ops() {
    for op in OPS {
        assert_eq!(op.confirm.is_some(), op.risk == Risk::Confirm, "{}", op.id);
        if let Some(c) = op.confirm {
            assert!(c.phrase.starts_with("yes "), "{}", op.id);
            // The phrase is bound to the target: the guest when there is one, else every
            // positional parameter.
            let target: Vec<&Param> = match op.param("vmid") {
                Some(v) => vec![v],
                None => op
                    .params
                    .iter()
                    .filter(|p| p.how == How::Positional)
                    .collect(),
            };
            for p in target {
                assert!(
                    c.phrase.contains(&format!("{{{}}}", p.name)),
                    "{} phrase must name {}",
                    op.id,
                    p.name
                );
            }
        }
    }
}

#[test]
fn every_placeholder_is_a_param_and_every_param_is_used() {
    for op in OPS {
        let mut used = BTreeSet::new();
        let mut words: Vec<&str> = Vec::new();
        for a in op.args {
            match a {
                Arg::Word(w) => words.push(w),
                Arg::Opt(name, ws) => {
                    assert!(op.param(name).is_some(), "{} opt {name}", op.id);
                    used.insert(*name);
                    words.extend(ws.iter());
                }
                Arg::List(name, _) => {
                    assert_eq!(op.param(name).map(|p| p.kind), Some(Kind::GuestArgv));
                    used.insert(*name);
                }
            }
        }
        for w in words {
            let mut rest = w;
            while let Some(s) = rest.find('{') {
                let e = rest[s..].find('}').unwrap() + s;
                let name = rest[s + 1..e].split(':').next().unwrap();
                assert!(op.param(name).is_some(), "{}: {{{name}}}", op.id);
                used.insert(name);
                rest = &rest[e + 1..];
            }
        }
        // A filter the client applies never travels; every other parameter does.
        for l in op.local {
            assert!(!used.contains(l), "{}: local {l} is in the template", op.id);
            assert!(op.param(l).is_some(), "{}: local {l} is no param", op.id);
            used.insert(l);
        }
        // Parameters that travel only in a follow-up step are used there.
        for t in op.then {
            used.extend(t.params());
        }
        // A variant's selector is used by its presence: the variant's template carries it.
        for p in op
            .params
            .iter()
            .filter(|p| !op.selecting_flags().any(|f| f == p.name))
        {
            assert!(used.contains(p.name), "{}: param {} unused", op.id, p.name);
        }
    }
}

#[test]
fn argv_matches_its_own_rule_for_every_option_combination() {
    for op in OPS {
        let samples = samples(op);
        assert!(!samples.is_empty(), "{}", op.id);
        for v in samples {
            let argv = op.argv(&v);
            assert!(
                matches(op, &argv),
                "{}: {argv:?} vs {}",
                op.id,
                op.args_regex(None)
            );
        }
    }
}

/// What `pxagent catalog` shows as an op's remote command is admitted by the op's own rule
/// (`vm.cloudinit-set`'s showed `10.0.0.5/24` where it sends `ip=10.0.0.5/24`).
#[test]
fn every_ops_catalog_example_is_admitted_by_its_own_rule() {
    for op in OPS {
        let argv = crate::catalog::example_argv(op);
        assert!(
            matches(op, &argv),
            "{}: {argv:?} vs {}",
            op.id,
            op.args_regex(None)
        );
    }
}

#[test]
fn no_less_risky_rule_matches_a_riskier_ops_command() {
    for riskier in OPS {
        for v in samples(riskier) {
            let argv = riskier.argv(&v);
            for other in OPS.iter().filter(|o| o.risk < riskier.risk) {
                assert!(
                    !matches(other, &argv),
                    "{}'s rule admits {}'s command {argv:?}",
                    other.id,
                    riskier.id
                );
            }
        }
    }
}

/// A regex with each bracket expression replaced by `[]` (inside one, `*`, `=`, `,` … are
/// literal characters, e.g. in a snapshot description).
fn without_brackets(re: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in re.chars() {
        match (inside, c) {
            (false, '[') => {
                inside = true;
                out.push_str("[]");
            }
            (true, ']') => inside = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

#[test]
fn rules_are_anchored_absolute_and_never_use_a_wildcard() {
    for op in OPS {
        let rule = op.sudoers_rule(None);
        assert!(rule.starts_with('/'), "{rule}");
        let args = op.args_regex(None);
        assert!(args.starts_with('^') && args.ends_with('$'), "{args}");
        // sudo refuses (never matches) what its pre-check refuses; `$` ends the argument.
        crate::catalog::kind::tests::sudo_check_pattern(&args)
            .unwrap_or_else(|e| panic!("{}: {e}: {args}", op.id));
        assert!(!args[..args.len() - 1].contains(['$', '#']), "{args}");
        let args = without_brackets(&args);
        // Exec ops carry a guest's argv and data: `.*` only after their fixed
        // prefix (verb, endpoint, fenced VMID), which the prefix check below pins.
        let args = if op.risk == Risk::Exec {
            let fixed = args.split(".*").next().unwrap_or_default();
            assert!(
                fixed.contains("{2,8}") && fixed.len() > 10,
                "{}: `.*` before the fixed prefix: {args}",
                op.id
            );
            args.replace("/.*", "/").replace(".*", "")
        } else {
            args
        };
        assert!(!args.contains(".*") && !args.contains('*'), "{args}");
        assert!(!args.replace("\\=", "").contains('='), "{args}");
        assert!(
            !args
                .replace("\\,", "")
                .replace(|c: char| c != ',' && c != '{' && c != '}', "")
                .contains("},"),
            "{args}"
        );
    }
}

#[test]
fn every_op_that_names_a_guest_has_a_fence() {
    for op in OPS.iter().filter(|o| {
        o.params
            .iter()
            .any(|p| p.kind == Kind::Vmid && !o.local.contains(&p.name))
    }) {
        assert!(op.fence_area().is_some(), "{}", op.id);
    }
}

#[test]
fn free_text_cannot_smuggle_vmstate_into_a_plain_snapshot() {
    let op = find("vm.snapshot").unwrap();
    let re = regex::Regex::new(&op.args_regex(None)).unwrap();
    // What raw ssh could send: the description's words joined into the line.
    let line = "create /nodes/pve1/qemu/100/snapshot --snapname s1 --description x --vmstate 1 --output-format json";
    assert!(!re.is_match(line));
    assert!(Kind::Text.parse("description", "x --vmstate 1").is_err());
}

#[test]
fn phrases_fill_in_the_target() {
    let op = find("vm.destroy").unwrap();
    let mut v = BTreeMap::new();
    v.insert("vmid", "100".to_string());
    assert_eq!(op.phrase(&v).as_deref(), Some("yes destroy 100"));
    assert_eq!(find("vm.start").unwrap().phrase(&v), None);
}

#[test]
fn usage_lines_read_well() {
    assert_eq!(
        find("vm.shutdown").unwrap().usage(),
        "vm shutdown <vmid> [--shutdown-timeout <shutdown-timeout>] [--node <node>]"
    );
}

#[test]
fn every_row_fills_its_required_fields() {
    for op in OPS {
        assert!(!op.cli.is_empty() && !op.args.is_empty(), "{}", op.id);
        // `risk` and `view` have placeholders in ROW: an action left at `Read`, or a change
        // shown as an object, is a row that forgot one of them. (Exec ops show an object.)
        let action_view = matches!(
            op.view,
            View::Task | View::Done | View::Upload | View::Applied | View::JobRun
        );
        let action_risk = matches!(op.risk, Risk::Change | Risk::Confirm);
        assert!(
            action_view == action_risk,
            "{}: risk {:?} with view {:?}",
            op.id,
            op.risk,
            op.view
        );
        if op.tool == Tool::Pvesh {
            let tail: Vec<String> = op.args[op.args.len() - 2..]
                .iter()
                .map(|a| format!("{a:?}"))
                .collect();
            assert_eq!(
                tail,
                [r#"Word("--output-format")"#, r#"Word("json")"#],
                "{}",
                op.id
            );
        }
    }
}

#[test]
fn no_op_states_and_yields_are_well_formed() {
    // An `already` row is a guest action whose read takes the same guest and node,
    // of the same kind; a `yields` row is a task whose value names one of its parameters.
    for op in OPS.iter().copied() {
        if let Some(a) = op.already {
            assert!(op.runs_task() && op.risk != Risk::Read, "{}", op.id);
            assert_eq!(a.read.risk, Risk::Read, "{}", op.id);
            assert_eq!(a.read.area, op.area, "{}: read of the same kind", op.id);
            assert_eq!(
                op.area.guest_types().len(),
                1,
                "{}: one kind of guest",
                op.id
            );
            for p in ["vmid", "node"] {
                assert!(
                    op.param(p).is_some() && a.read.param(p).is_some(),
                    "{}",
                    op.id
                );
            }
            assert!(
                op.params
                    .iter()
                    .any(|p| p.how == How::Node(NodeFrom::Guest)),
                "{}",
                op.id
            );
        }
        match op.yields {
            Some(Yield::Archive(p) | Yield::Snapshot(p)) => {
                assert!(op.runs_task() && op.param(p).is_some(), "{}", op.id);
            }
            Some(Yield::Guest(p)) => {
                assert!(
                    op.param(p).is_some_and(|q| q.kind == Kind::Vmid),
                    "{}",
                    op.id
                );
            }
            Some(Yield::Volume(_, name)) => {
                assert!(
                    op.param(name).is_some() && op.param("storage").is_some(),
                    "{}",
                    op.id
                );
            }
            None => {}
        }
    }
    // Results name what they made: every op that makes a guest (a new
    // VMID: create, clone, restore), a snapshot or a downloaded volume says which.
    for op in OPS.iter().filter(|o| o.risk != Risk::Read) {
        let makes_guest = op
            .params
            .iter()
            .any(|p| p.kind == Kind::Vmid && (p.how == How::NextId || p.name == "newid"))
            || op
                .prechecks
                .iter()
                .any(|c| matches!(c, crate::catalog::Precheck::NewVmid(_)));
        let snapshots = op.id.ends_with(".snapshot") || op.id.ends_with(".snapshot-vmstate");
        let downloads = op.id.ends_with(".download");
        if makes_guest || snapshots || downloads {
            assert!(
                op.yields.is_some(),
                "{} makes something and does not name it",
                op.id
            );
        }
    }
    let noop: Vec<&str> = OPS
        .iter()
        .filter(|o| o.already.is_some())
        .map(|o| o.id)
        .collect();
    assert_eq!(
        noop,
        [
            "vm.start",
            "vm.shutdown",
            "vm.suspend",
            "vm.resume",
            "vm.stop",
            "ct.start",
            "ct.shutdown",
            "ct.stop"
        ]
    );
    assert_eq!(ops::BACKUP_CREATE.area.guest_types(), ["qemu", "lxc"]);
}

#[test]
fn handles_are_the_rows_find_returns() {
    let pairs: [(&Op, &str); 5] = [
        (&ops::PVE_VERSION, "pve.version"),
        (&ops::VM_STATUS, "vm.status"),
        (
            &ops::BACKUP_RESTORE_CT_OVERWRITE,
            "backup.restore-ct-overwrite",
        ),
        (&ops::VM_FILE_READ, "vm.file-read"),
        (&ops::CT_EXEC, "ct.exec"),
    ];
    for (handle, id) in pairs {
        assert!(std::ptr::eq(handle, find(id).unwrap()), "{id}");
        assert!(OPS.iter().any(|o| std::ptr::eq(*o, handle)), "{id}");
    }
    let steps: Vec<&str> = OPS.iter().filter(|o| o.is_step()).map(|o| o.id).collect();
    assert_eq!(
        steps,
        [
            "storage.config",
            "audit.host-verify",
            "network.confirm",
            "vm.file-write",
            "vm.file-read"
        ]
    );
    assert!(ops::VM_START.runs_task() && !ops::VM_EXEC.runs_task());
    assert!(!ops::BACKUP_REMOVE.runs_task() && !ops::VM_STATUS.runs_task());
    assert_ne!(ops::BACKUP_RESTORE, ops::BACKUP_RESTORE_CT);
}

#[test]
fn zz_dump_ops_debug() {
    if let Ok(p) = std::env::var("PX_DUMP_OPS") {
        std::fs::write(p, format!("{OPS:#?}")).unwrap();
    }
}

#[test]
fn samples_of_many_options_cover_each_option_present_and_absent() {
    let s = samples(&ops::VM_SET);
    // none (refused: needs one), all, 8 alone (the digest alone is refused: needs one of the
    // 7 settings), 7 all-but-one (all but the digest is "all" again)
    assert_eq!(s.len(), 16);
    for name in ops::VM_SET.needs_one_of {
        assert!(s.iter().any(|v| v.contains_key(name)), "{name}");
        assert!(s.iter().any(|v| !v.contains_key(name)), "{name}");
    }
    assert!(s.iter().all(|v| ops::VM_SET.has_one_of(v)));
    // Ops with few options keep every combination.
    assert_eq!(samples(&ops::VM_SHUTDOWN).len(), 2);
}

/// Every op that makes root-run Proxmox code trust a storage's files
/// (restore from it, import or boot from it, write a guest's data or a download to it) marks
/// each such parameter [`Precheck::Trusted`], so a policy's `nfs_servers` judges it. Ops that
/// only remove or list a storage's files, and the storage ops themselves, trust nothing.
#[test]
fn every_op_that_trusts_a_storage_marks_it() {
    let storage_kinds = [
        Kind::StorageId,
        Kind::Archive,
        Kind::IsoVolume,
        Kind::TemplateVolume,
        Kind::ImportVolume,
    ];
    let trusts_nothing = [
        "backup.remove",
        "backup.prune",
        "iso.remove",
        "template.remove",
        "image.remove",
    ];
    let mut marked = 0;
    for op in OPS {
        if op.risk == Risk::Read || op.id.starts_with("storage.") || trusts_nothing.contains(&op.id)
        {
            continue;
        }
        for p in op.params.iter().filter(|p| storage_kinds.contains(&p.kind)) {
            marked += 1;
            assert!(
                op.prechecks
                    .iter()
                    .any(|c| matches!(c, Precheck::Trusted(n) if *n == p.name)),
                "{} does not mark {} as trusted",
                op.id,
                p.name
            );
        }
    }
    // restores (4 × 2), creates (3 × 2), backup create, a backup job's create and run,
    // 3 downloads, the ISO upload
    assert_eq!(marked, 21);
}

#[test]
fn the_guest_map_says_an_action_is_needed_only_when_it_surely_is() {
    use ops::{CT_SHUTDOWN, CT_START, VM_RESUME, VM_SHUTDOWN, VM_START, VM_SUSPEND};
    let needed = |op: &Op, status: &str| op.already.expect(op.id).needed_by(status);
    // A stopped guest is surely not running, nor paused.
    for op in [&VM_START, &CT_START, &VM_SUSPEND, &VM_RESUME] {
        assert!(needed(op, "stopped"), "{}", op.id);
    }
    // A running one is not stopped.
    for op in [&VM_SHUTDOWN, &CT_SHUTDOWN, &CT_START] {
        assert_eq!(needed(op, "running"), op.id != CT_START.id, "{}", op.id);
    }
    // "running" in /cluster/resources may be a paused VM (qmpstatus): it proves nothing
    // for start, suspend or resume; nor does "unknown" (no RRD data), nor another word.
    for op in [&VM_START, &VM_SUSPEND, &VM_RESUME] {
        assert!(!needed(op, "running"), "{}", op.id);
    }
    for op in [&VM_START, &VM_SHUTDOWN, &CT_START, &CT_SHUTDOWN] {
        for word in ["unknown", "", "Stopped", "paused"] {
            assert!(!needed(op, word), "{} {word}", op.id);
        }
    }
    // Already there: never "needed" (the status read confirms a no-op).
    assert!(!needed(&VM_SHUTDOWN, "stopped"));
    assert!(!needed(&CT_SHUTDOWN, "stopped"));
}
