//! The labelled corpus: every dangerous file of `tests/fixtures/sudoers/corpus/`
//! yields an error-severity finding on the line its README row names, every safe file none;
//! and pxagent's own renders, of every profile and fence and `--ct-exec`, lint clean.

use super::*;
use crate::catalog::Profile;
use crate::host::sudoers::ranges::Ranges;
use crate::host::sudoers::render::{RenderOptions, render};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sudoers/corpus");

/// One README row.
struct Row {
    file: String,
    dangerous: bool,
    line: Option<usize>,
    groups: Vec<String>,
    why: String,
}

fn rows() -> Vec<Row> {
    let readme = std::fs::read_to_string(format!("{DIR}/README.md")).expect("corpus README");
    readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            assert!(cells.len() >= 5, "README row: {l}");
            Row {
                file: cells[0].trim_end_matches('`').to_string(),
                dangerous: match cells[1] {
                    "dangerous" => true,
                    "safe" => false,
                    v => panic!("verdict {v} in {l}"),
                },
                line: cells[2].parse().ok(),
                groups: match cells[3] {
                    "-" => Vec::new(),
                    g => g.split(',').map(|x| x.trim().to_string()).collect(),
                },
                why: cells[4..].join(" | ").trim_end_matches(" |").to_string(),
            }
        })
        .collect()
}

fn dump(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| format!("{}: {} [{}] {}\n", f.line, f.severity, f.code, f.why))
        .collect()
}

#[test]
fn every_file_has_a_row_and_every_row_a_file() {
    let rows = rows();
    let mut on_disk = Vec::new();
    for sub in ["dangerous", "safe"] {
        for e in std::fs::read_dir(format!("{DIR}/{sub}")).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            on_disk.push(format!("{sub}/{name}"));
        }
    }
    for f in &on_disk {
        assert!(rows.iter().any(|r| &r.file == f), "{f} has no README row");
    }
    for r in &rows {
        assert!(
            on_disk.contains(&r.file),
            "README names {} which is missing",
            r.file
        );
        assert_eq!(r.file.starts_with("dangerous/"), r.dangerous, "{}", r.file);
        assert_eq!(
            r.line.is_some(),
            r.dangerous,
            "{}: a line for dangerous files only",
            r.file
        );
        assert!(!r.why.trim().is_empty(), "{}: say why", r.file);
    }
    let dangerous = rows.iter().filter(|r| r.dangerous).count();
    assert!(dangerous >= 100, "{dangerous} dangerous files");
    assert!(rows.len() - dangerous >= 12, "safe files");
}

#[test]
fn dangerous_files_are_errors_on_their_rule_and_safe_ones_clean() {
    let mut failures = Vec::new();
    for r in rows() {
        let text = std::fs::read_to_string(format!("{DIR}/{}", r.file)).unwrap();
        let who = Principal::new("zen-agent").with_groups(r.groups.clone());
        let f = lint_for(&text, &who);
        match r.line {
            Some(line) => {
                let hit = f
                    .iter()
                    .any(|x| x.severity == Severity::Error && x.line == line);
                if !hit {
                    failures.push(format!(
                        "{} (line {line}): no error there\n{}",
                        r.file,
                        dump(&f)
                    ));
                }
                // Each finding says why and what to do.
                assert!(
                    f.iter().all(|x| !x.why.is_empty() && !x.fix.is_empty()),
                    "{}",
                    r.file
                );
            }
            None => {
                if has_errors(&f) {
                    failures.push(format!("{}: errors in a safe file\n{}", r.file, dump(&f)));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `pxagent sudoers render … | pxagent sudoers lint -` stays clean for every profile, fence
/// and `--ct-exec` combination: no errors, and no warnings but the one container exec rule's
/// (which says what `pct exec` grants). Ops other engineers add are rendered here too.
#[test]
fn every_render_lints_clean() {
    /// `--vmids`, `--ctids`, `--ct-exec`, `--unfenced-ops`.
    type Fences<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>, bool);
    let fences: [Fences; 6] = [
        (None, None, None, false),
        (Some("100-199,250"), None, None, false),
        (Some("100-199"), Some("200-299"), None, false),
        (None, Some("1000-1999"), Some("1000-1009"), false),
        (Some("100-199"), None, Some("200-209"), true),
        (None, None, Some("200"), false),
    ];
    for profile in Profile::ALL {
        for (vmids, ctids, ct_exec, unfenced) in fences {
            let mut o = RenderOptions::new("zen-agent").unwrap();
            o.profile = profile;
            o.vmids = vmids.map(|v| Ranges::parse("--vmids", v).unwrap());
            o.ctids = ctids.map(|v| Ranges::parse("--ctids", v).unwrap());
            o.ct_exec = ct_exec.map(|v| Ranges::parse("--ct-exec", v).unwrap());
            o.unfenced_ops = unfenced;
            let text = render(&o);
            let f = lint(&text);
            let loud: Vec<&Finding> = f
                .iter()
                .filter(|x| x.severity == Severity::Error)
                .chain(
                    f.iter()
                        .filter(|x| x.severity == Severity::Warning && x.code != "guest-exec"),
                )
                .collect();
            assert!(
                loud.is_empty(),
                "{profile:?} {vmids:?} {ctids:?} {ct_exec:?} {unfenced}: {loud:#?}"
            );
        }
    }
}
