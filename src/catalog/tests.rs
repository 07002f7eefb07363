//! Invariants of the catalog table: the things that would let the client and sudoers drift.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// Every combination of optional parameters (present/absent) with example values.
pub(crate) fn sample_values(op: &Op) -> Vec<BTreeMap<&'static str, String>> {
    let optional: Vec<&Param> = op
        .params
        .iter()
        .filter(|p| matches!(p.how, How::Option | How::Flag))
        .collect();
    let mut out = Vec::new();
    for mask in 0..(1u32 << optional.len()) {
        let mut v = BTreeMap::new();
        for p in op.params {
            let example = match (p.kind, op.area) {
                (Kind::Vmid, Area::Ct) => "200".to_string(),
                (k, _) => k.parse(p.name, k.example()).unwrap(),
            };
            match p.how {
                How::Positional | How::Node(_) => {
                    v.insert(p.name, example);
                }
                How::Option | How::Flag => {
                    let i = optional.iter().position(|o| o.name == p.name).unwrap();
                    if mask & (1 << i) != 0 {
                        v.insert(p.name, example);
                    }
                }
            }
        }
        // A variant is only ever built with its selector set.
        if op.selected_by.is_some_and(|sel| !v.contains_key(sel)) {
            continue;
        }
        out.push(v);
    }
    out
}

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
    let id_re = regex::Regex::new(r"^[a-z]+\.[a-z-]+$").unwrap();
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
fn shared_cli_paths_are_variants_of_one_base() {
    let mut by_path: BTreeMap<Vec<&str>, Vec<&Op>> = BTreeMap::new();
    for op in OPS {
        by_path.entry(op.cli.to_vec()).or_default().push(op);
    }
    for (path, ops) in by_path {
        let bases: Vec<_> = ops.iter().filter(|o| o.selected_by.is_none()).collect();
        assert_eq!(bases.len(), 1, "{path:?} needs exactly one base op");
        for v in ops.iter().filter(|o| o.selected_by.is_some()) {
            let sel = v.selected_by.unwrap();
            assert_eq!(v.param(sel).map(|p| p.how), Some(How::Flag), "{}", v.id);
            assert!(bases[0].param(sel).is_none(), "{}", v.id);
            // Same-named params must be identical so the CLI can merge them.
            for p in v.params {
                if let Some(b) = bases[0].param(p.name) {
                    assert_eq!((b.kind, b.how), (p.kind, p.how), "{} {}", v.id, p.name);
                }
            }
        }
    }
}

#[test]
fn confirm_data_exactly_on_confirm_ops() {
    for op in OPS {
        assert_eq!(op.confirm.is_some(), op.risk == Risk::Confirm, "{}", op.id);
        if let Some(c) = op.confirm {
            assert!(c.phrase.starts_with("yes "), "{}", op.id);
            // The phrase is bound to the target: it names every positional parameter.
            for p in op.params.iter().filter(|p| p.how == How::Positional) {
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
            }
        }
        for w in words {
            let mut rest = w;
            while let Some(s) = rest.find('{') {
                let e = rest[s..].find('}').unwrap() + s;
                let name = &rest[s + 1..e];
                assert!(op.param(name).is_some(), "{}: {{{name}}}", op.id);
                used.insert(name);
                rest = &rest[e + 1..];
            }
        }
        // A variant's selector is used by its presence: the variant's template carries it.
        for p in op.params.iter().filter(|p| Some(p.name) != op.selected_by) {
            assert!(used.contains(p.name), "{}: param {} unused", op.id, p.name);
        }
    }
}

#[test]
fn argv_matches_its_own_rule_for_every_option_combination() {
    for op in OPS {
        let samples = sample_values(op);
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

#[test]
fn no_less_risky_rule_matches_a_riskier_ops_command() {
    for riskier in OPS {
        for v in sample_values(riskier) {
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

#[test]
fn rules_are_anchored_absolute_and_never_use_a_wildcard() {
    for op in OPS {
        let rule = op.sudoers_rule(None);
        assert!(rule.starts_with('/'), "{rule}");
        let args = op.args_regex(None);
        assert!(args.starts_with('^') && args.ends_with('$'), "{args}");
        assert!(!args.contains(".*") && !args.contains('*'), "{args}");
        assert!(!args.contains('='), "{args}");
    }
}

#[test]
fn every_action_names_a_guest_and_every_guest_op_has_a_fence() {
    for op in OPS.iter().filter(|o| o.risk != Risk::Read) {
        assert!(op.param("vmid").is_some(), "{}", op.id);
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
