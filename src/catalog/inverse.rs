//! The inverse of [`Op::argv`]: from a command line back to the one catalog op and the wire
//! values that produce it. The host gate (`pxagent gate`) uses it to accept exactly the command
//! lines the catalog builds and nothing else.
//!
//! Matching is word by word over the op's template (a literal word must be equal, a word with
//! placeholders is matched literal by literal, each placeholder taking the shortest text, an
//! [`Arg::Opt`] group may be present or absent, an [`Arg::List`] takes its elements).
//! Every captured value must then be a valid wire value of its kind ([`Kind::from_wire`]), and
//! the op must rebuild *exactly* the received argv from those values: the final equality is
//! what makes the answer trustworthy, whatever the matcher got wrong. Uses the catalog only.

use std::collections::BTreeMap;

use super::{Arg, OPS, Op, split_part};

/// Why a command line is not a catalog operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAnOp {
    /// No op runs this tool with these words.
    NoMatch,
    /// The words have the shape of an op, but a value is not valid for its kind.
    BadValue {
        /// The op whose shape matched.
        op: &'static str,
        /// Which value, and why.
        why: String,
    },
}

impl std::fmt::Display for NotAnOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAnOp::NoMatch => write!(f, "it is not a command line of any catalog operation"),
            NotAnOp::BadValue { op, why } => write!(f, "it looks like {op} but {why}"),
        }
    }
}

/// One op that rebuilds a command line exactly, with its wire values.
pub type Match = (&'static Op, BTreeMap<&'static str, String>);

/// Every op whose command line is exactly `argv` (absolute tool path first, no `sudo`), with
/// its wire values, in catalog order. Several ops may send the same line (`vm list`,
/// `ct list` and `cluster resources` all read `/cluster/resources --type vm` and filter on
/// the client): the host cannot tell them apart, so a caller deciding on it must treat the
/// line as each of them (the gate takes the strictest verdict).
pub fn parse_argv(argv: &[String]) -> Result<Vec<Match>, NotAnOp> {
    let Some((tool, args)) = argv.split_first() else {
        return Err(NotAnOp::NoMatch);
    };
    let mut found: Vec<Match> = Vec::new();
    let mut bad: Option<NotAnOp> = None;
    for op in OPS.iter().copied().filter(|o| o.tool.path() == tool) {
        let Some(raw) = match_op(op, args) else {
            continue;
        };
        match wire_values(op, raw) {
            Ok(mut values) if op.argv(&values) == argv => {
                // A variant's selecting switch is literal words of its template (`--vmstate
                // 1`): matching the shape means it was given. A switch the client keeps
                // (`local`: `vm status --brief`, answered from the guest map) never travels,
                // so the line is never that variant's.
                for sel in op.select {
                    if let super::Select::Flag(f) = sel
                        && !op.local.contains(f)
                    {
                        values.insert(f, "1".to_string());
                    }
                }
                found.push((op, values))
            }
            Ok(_) => {}
            Err(why) => {
                bad.get_or_insert(NotAnOp::BadValue { op: op.id, why });
            }
        }
    }
    // A variant shares its base op's shape only when its selectors hold (`vm snapshot
    // --vmstate`); then it is the variant, as `catalog::select` would choose.
    found.retain(|(op, v)| op.selected(v));
    let most = found.iter().map(|(op, _)| op.select.len()).max();
    found.retain(|(op, _)| Some(op.select.len()) == most);
    if found.is_empty() {
        return Err(bad.unwrap_or(NotAnOp::NoMatch));
    }
    Ok(found)
}

/// What one placeholder captured: the parameter, which `:` part of it (if any), the text.
type CaptureList = Vec<(String, Option<usize>, String)>;

/// Match the template words against `args`; `None` when the shape differs.
fn match_op(op: &'static Op, args: &[String]) -> Option<CaptureList> {
    let mut caps = Vec::new();
    walk(op.args, args, &mut caps).then_some(caps)
}

/// Backtracking walk: an optional group is tried present first, then absent.
fn walk(template: &'static [Arg], words: &[String], caps: &mut CaptureList) -> bool {
    let Some((first, rest)) = template.split_first() else {
        return words.is_empty();
    };
    match first {
        Arg::Word(w) => {
            let Some((word, tail)) = words.split_first() else {
                return false;
            };
            let mark = caps.len();
            if match_word(w, word, caps) && walk(rest, tail, caps) {
                return true;
            }
            caps.truncate(mark);
            false
        }
        Arg::Opt(name, group) => {
            let mark = caps.len();
            if words.len() >= group.len()
                && group
                    .iter()
                    .zip(words)
                    .all(|(w, word)| match_word(w, word, caps))
            {
                // A group without its own placeholder (`--purge 1`) says the switch is on.
                if !group.iter().any(|w| w.contains(&format!("{{{name}"))) {
                    caps.push((name.to_string(), None, "1".to_string()));
                }
                if walk(rest, &words[group.len()..], caps) {
                    return true;
                }
            }
            caps.truncate(mark);
            walk(rest, words, caps)
        }
        Arg::List(name, flag) => {
            let mark = caps.len();
            let mut items = Vec::new();
            let mut i = 0;
            match flag {
                // Each element after the flag: take (flag, element) pairs while they come.
                Some(f) => {
                    while i + 1 < words.len() && words[i] == *f {
                        items.push(words[i + 1].clone());
                        i += 2;
                    }
                    if items.is_empty() || !push_list(name, &items, caps) {
                        return false;
                    }
                    if walk(rest, &words[i..], caps) {
                        return true;
                    }
                }
                // Bare elements: as many as leave the rest of the template a match, most first.
                None => {
                    for take in (1..=words.len()).rev() {
                        if push_list(name, &words[..take], caps) && walk(rest, &words[take..], caps)
                        {
                            return true;
                        }
                        caps.truncate(mark);
                    }
                }
            }
            caps.truncate(mark);
            false
        }
    }
}

/// Record a guest argv list as its wire value (a JSON array of strings).
fn push_list(name: &str, items: &[String], caps: &mut CaptureList) -> bool {
    match serde_json::to_string(items) {
        Ok(json) => {
            caps.push((name.to_string(), None, json));
            true
        }
        Err(_) => false,
    }
}

/// Match one template word (`/nodes/{node}/qemu/{vmid}/status/start`) against one argv word.
fn match_word(template: &str, word: &str, caps: &mut CaptureList) -> bool {
    let mut segs = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let Some(len) = rest[start..].find('}') else {
            return false;
        };
        segs.push(Piece::Lit(&rest[..start]));
        segs.push(Piece::Param(&rest[start + 1..start + len]));
        rest = &rest[start + len + 1..];
    }
    segs.push(Piece::Lit(rest));
    let mark = caps.len();
    if match_pieces(&segs, word, caps) {
        return true;
    }
    caps.truncate(mark);
    false
}

/// A piece of a template word.
enum Piece<'a> {
    Lit(&'a str),
    Param(&'a str),
}

/// Literals must appear as written; a placeholder takes the shortest text that lets the rest
/// match (the value's kind and the final rebuild decide whether that was right).
fn match_pieces(pieces: &[Piece], text: &str, caps: &mut CaptureList) -> bool {
    let Some((first, rest)) = pieces.split_first() else {
        return text.is_empty();
    };
    match first {
        Piece::Lit(l) => text
            .strip_prefix(l)
            .is_some_and(|t| match_pieces(rest, t, caps)),
        Piece::Param(p) => {
            let (name, part) = split_part(p);
            for (end, _) in text.char_indices().chain([(text.len(), ' ')]) {
                caps.push((name.to_string(), part, text[..end].to_string()));
                if match_pieces(rest, &text[end..], caps) {
                    return true;
                }
                caps.pop();
            }
            false
        }
    }
}

/// Assemble captured texts into wire values (parts joined with `:`), check that a parameter
/// seen twice says the same both times, and validate each value as its kind's wire form.
fn wire_values(op: &Op, caps: CaptureList) -> Result<BTreeMap<&'static str, String>, String> {
    let mut parts: BTreeMap<String, BTreeMap<usize, String>> = BTreeMap::new();
    let mut whole: BTreeMap<String, String> = BTreeMap::new();
    for (name, part, text) in caps {
        let slot = match part {
            Some(i) => parts
                .entry(name.clone())
                .or_default()
                .insert(i, text.clone()),
            None => whole.insert(name.clone(), text.clone()),
        };
        if slot.is_some_and(|old| old != text) {
            return Err(format!("'{name}' appears twice with different values"));
        }
    }
    for (name, ps) in parts {
        let joined = ps.into_values().collect::<Vec<_>>().join(":");
        if whole.insert(name.clone(), joined).is_some() {
            return Err(format!("'{name}' appears both whole and in parts"));
        }
    }
    let mut values = BTreeMap::new();
    for (name, text) in whole {
        let p = op
            .param(&name)
            .ok_or_else(|| format!("the template names an unknown parameter '{name}'"))?;
        let v = p.kind.from_wire(p.name, &text).map_err(|e| e.to_string())?;
        values.insert(p.name, v);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::testing::words;
    use crate::catalog::samples;

    #[test]
    fn every_sample_line_parses_back_to_its_own_op_and_values() {
        let mut n = 0;
        for op in OPS.iter().copied() {
            for raw in samples(op) {
                let inv = crate::catalog::invocation::Invocation::new(op, raw).unwrap();
                let argv = inv.argv();
                let found = parse_argv(&argv)
                    .unwrap_or_else(|e| panic!("{}: {argv:?} does not parse back: {e}", op.id));
                // An op the wire cannot name sends another op's line, of the same risk.
                assert_eq!(
                    found.iter().any(|(o, _)| o.id == op.id),
                    op.on_the_wire(),
                    "{}: {argv:?}",
                    op.id
                );
                for (o, values) in &found {
                    assert_eq!(o.argv(values), argv);
                    assert_eq!(o.risk, op.risk, "{} and {} share a line", o.id, op.id);
                }
                n += 1;
            }
        }
        assert!(n > OPS.len(), "only {n} sample lines");
    }

    #[test]
    fn anything_else_is_refused() {
        for line in [
            "/usr/bin/pvesh get /version --output-format json --extra",
            "/usr/bin/pvesh get /version",
            "/usr/bin/pvesh get /version --output-format yaml",
            "/usr/sbin/qm start 99",
            "/usr/sbin/qm start 100 100",
            "/usr/sbin/qm start 100;id",
            "/usr/sbin/qm set 100 --hookscript local:snippets/x",
            "/bin/sh -c id",
            "qm start 100",
            "/usr/sbin/qm",
            "",
        ] {
            assert!(parse_argv(&words(line)).is_err(), "{line}");
        }
    }

    #[test]
    fn a_bad_value_in_a_known_shape_says_which() {
        let e = parse_argv(&words(
            "/usr/bin/pvesh get /nodes/bad_node!/qemu/100/status/current --output-format json",
        ))
        .unwrap_err();
        assert!(matches!(e, NotAnOp::BadValue { .. }), "{e:?}");
        assert!(e.to_string().contains("node"), "{e}");
    }

    #[test]
    fn switches_and_lists_come_back() {
        let found = parse_argv(&words(
            "/usr/bin/pvesh delete /nodes/pve1/qemu/100 --purge 1 --output-format json",
        ))
        .unwrap();
        let (op, v) = &found[0];
        assert_eq!(op.id, "vm.destroy");
        assert_eq!(v.get("purge").map(String::as_str), Some("1"));
        let argv: Vec<String> = [
            "/usr/sbin/pct",
            "exec",
            "200",
            "--",
            "sh",
            "-c",
            "echo a; id",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let found = parse_argv(&argv).unwrap();
        let (op, v) = &found[0];
        assert_eq!(op.id, "ct.exec");
        assert_eq!(v["command"], r#"["sh","-c","echo a; id"]"#);
    }
}
