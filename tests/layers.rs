//! The house rules of the source tree, read from the code itself: no import circle between
//! any two files of `src/` or of `sim/src/`, and no file of `src/` that imports a module on a
//! higher layer than its own. The layer order is written once, in ARCHITECTURE.md's `layers`
//! block (lowest first; modules on one line share a level); every top-level module of `src/`
//! must be on it. Imports are every `crate::…`, `super::…` and `self::…` path in the code (a
//! `use` with braces is expanded), outside comments and string literals, resolved to the file
//! that defines the module they name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository root (this file is `tests/layers.rs`).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The module path of a file under `root` (`a/b.rs` and `a/b/mod.rs` are `[a, b]`; `lib.rs`
/// and `main.rs` are the crate root).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "mod.rs" => {}
        "lib.rs" | "main.rs" if parts.is_empty() => {}
        other => parts.push(other.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// `code` without its `#[cfg(test)] mod … { … }` blocks: what tests import is not part of
/// the house (and their `super::` means the file itself).
fn without_test_modules(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + "#[cfg(test)]".len()..];
        let t = tail.trim_start();
        if t.starts_with("mod ")
            && let Some(open) = t.find('{')
            && !t[..open].contains(';')
        {
            let mut depth = 0;
            let mut end = t.len();
            for (i, c) in t[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            rest = &t[end..];
        } else {
            // `#[cfg(test)] mod tests;` or a single test-only item: drop up to its `;`.
            let end = t.find(';').map_or(t.len(), |i| i + 1);
            rest = &t[end..];
        }
    }
    out.push_str(rest);
    out
}

/// The code of a Rust file without its comments and the contents of its string and char
/// literals (so neither a doc link nor a message counts as an import).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&b, i) {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < b.len() {
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('a', '\n', '\u{1F}') or a lifetime ('a): skip only the former.
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\'')
            } else {
                (b.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match close {
                Some(k) => {
                    out.push_str("' '");
                    i = k + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// Every path a `use` item or an expression names that starts with `crate`, `super` or
/// `self`, as segments.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use` items, braces expanded.
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let tail = &rest[at + 3..];
        let Some(end) = tail.find(';') else { break };
        expand(tail[..end].trim(), &mut Vec::new(), &mut out);
        rest = &tail[end..];
    }
    // Paths in expressions and types.
    let re =
        regex::Regex::new(r"\b(crate|super|self)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)").unwrap();
    for c in re.captures_iter(code) {
        let mut segs = vec![c[1].to_string()];
        segs.extend(
            c[2].split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
        out.push(segs);
    }
    out
}

fn find_word(s: &str, w: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(w) {
        let at = from + i;
        let before = s[..at].chars().next_back();
        let after = s[at + w.len()..].chars().next();
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && after.is_some_and(char::is_whitespace)
        {
            return Some(at);
        }
        from = at + w.len();
    }
    None
}

/// `a::b::{c, d::{e, f}}` as its leaf paths, each prefixed with `prefix`.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        prefix.truncate(n);
    } else if !tree.is_empty() {
        let mut p = prefix.clone();
        let leaf = tree.split(" as ").next().unwrap_or(tree);
        p.extend(
            leaf.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty() && *s != "*")
                .map(String::from),
        );
        if !p.is_empty() {
            out.push(p);
        }
    }
}

/// The file that defines the longest module prefix of `path` (made absolute from `here`).
fn resolve(
    files: &BTreeMap<Vec<String>, PathBuf>,
    here: &[String],
    path: &[String],
) -> Option<PathBuf> {
    let mut abs: Vec<String> = Vec::new();
    let mut segs = path.iter().peekable();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
        }
        Some("super") | Some("self") => {
            abs = here.to_vec();
            while let Some(s) = segs.peek() {
                match s.as_str() {
                    "super" => {
                        abs.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs.next();
            }
        }
        // A path relative to this module (`use child::Thing` in a mod.rs).
        Some(_) => abs = here.to_vec(),
        None => return None,
    }
    let rest: Vec<String> = segs.cloned().collect();
    // Only a module below this one counts for a relative path: `std::…` names no file here.
    let lowest = if path
        .first()
        .is_some_and(|s| !matches!(s.as_str(), "crate" | "super" | "self"))
    {
        1
    } else {
        0
    };
    for k in (lowest..=rest.len()).rev() {
        let mut m = abs.clone();
        m.extend(rest[..k].iter().cloned());
        if let Some(f) = files.get(&m) {
            return Some(f.clone());
        }
    }
    None
}

/// The file graph of a crate rooted at `root`: file → the files it imports.
fn graph(root: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let all = rust_files(root);
    let files: BTreeMap<Vec<String>, PathBuf> = all
        .iter()
        .filter(|f| !f.ends_with("main.rs") || f.parent() != Some(root))
        .map(|f| (module_of(root, f), f.clone()))
        .collect();
    let mut g = BTreeMap::new();
    for (module, file) in &files {
        let code = without_test_modules(&code_only(&std::fs::read_to_string(file).unwrap()));
        let mut to = BTreeSet::new();
        for p in paths(&code) {
            if let Some(t) = resolve(&files, module, &p)
                && &t != file
                // A module naming its own children is the tree, not a dependency.
                && !files.iter().any(|(m, f)| f == &t && m.len() > module.len() && m.starts_with(module))
                // The crate root lists the modules; it is nobody's dependency.
                && t.file_name().is_some_and(|n| n != "lib.rs")
            {
                to.insert(t);
            }
        }
        g.insert(file.clone(), to);
    }
    g
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'a> {
        g: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        on: BTreeSet<&'a PathBuf>,
        stack: Vec<&'a PathBuf>,
        next: usize,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            if !t.g.contains_key(w) {
                continue;
            }
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(lw));
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn show(root: &Path, files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn no_file_of_src_or_sim_is_in_an_import_circle() {
    let mut problems = Vec::new();
    for root in [repo().join("src"), repo().join("sim/src")] {
        for c in circles(&graph(&root)) {
            problems.push(format!("{}: {}", root.display(), show(&root, &c)));
        }
    }
    assert!(
        problems.is_empty(),
        "import circles:\n{}",
        problems.join("\n")
    );
}

/// The layers of ARCHITECTURE.md, lowest first: each top-level module's level.
fn layers() -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let block = text
        .split("```layers\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("ARCHITECTURE.md has a ```layers block");
    let mut out = BTreeMap::new();
    for (level, line) in block
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        for m in line.split_whitespace() {
            out.insert(m.trim_end_matches('/').to_string(), level);
        }
    }
    out
}

#[test]
fn no_file_of_src_imports_a_higher_layer() {
    let root = repo().join("src");
    let levels = layers();
    let top = |f: &Path| -> Option<String> { module_of(&root, f).first().cloned() };
    let mut problems = Vec::new();
    let g = graph(&root);
    for f in g.keys() {
        if let Some(m) = top(f)
            && !levels.contains_key(&m)
        {
            problems.push(format!(
                "src/{m} is on no layer of ARCHITECTURE.md's layers block"
            ));
        }
    }
    for (from, tos) in &g {
        let Some(fm) = top(from) else { continue };
        for to in tos {
            let Some(tm) = top(to) else { continue };
            if let (Some(a), Some(b)) = (levels.get(&fm), levels.get(&tm))
                && b > a
            {
                problems.push(format!(
                    "{} (layer {fm}) imports {} (layer {tm}, higher)",
                    show(&root, std::slice::from_ref(from)),
                    show(&root, std::slice::from_ref(to)),
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_sees_what_the_code_imports() {
    // The reader itself: comments and strings are no imports; braces expand; super resolves.
    let code = code_only(
        "use crate::{a::b, c::{d, e as f}};\n// crate::x::y\nlet s = \"crate::z\"; super::q::r();",
    );
    let p = paths(&code);
    assert!(p.contains(&vec!["crate".into(), "a".into(), "b".into()]));
    assert!(p.contains(&vec!["crate".into(), "c".into(), "e".into()]));
    assert!(
        !p.iter()
            .any(|s| s.contains(&"x".to_string()) || s.contains(&"z".to_string()))
    );
    let files: BTreeMap<Vec<String>, PathBuf> = [
        (vec!["p".to_string()], PathBuf::from("p/mod.rs")),
        (
            vec!["p".to_string(), "q".to_string()],
            PathBuf::from("p/q.rs"),
        ),
    ]
    .into();
    let here = vec!["p".to_string(), "r".to_string()];
    assert_eq!(
        resolve(&files, &here, &["super".into(), "q".into(), "r".into()]),
        Some(PathBuf::from("p/q.rs"))
    );
    assert_eq!(
        resolve(&files, &here, &["crate".into(), "p".into(), "Thing".into()]),
        Some(PathBuf::from("p/mod.rs"))
    );
}

/// The top-level modules a module of `src/` may import, as its own doc says: the `//!` line
/// `Layer: NAME. May import: a, b, c.` (or `May import: nothing of the crate.`).
fn declared_imports(root: &Path, module: &str) -> Result<BTreeSet<String>, String> {
    let file = [
        root.join(module).join("mod.rs"),
        root.join(format!("{module}.rs")),
    ]
    .into_iter()
    .find(|f| f.exists())
    .ok_or_else(|| format!("src/{module}: no mod.rs"))?;
    let text = std::fs::read_to_string(&file).unwrap();
    let doc: String = text
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").trim())
        .collect::<Vec<_>>()
        .join(" ");
    let want = format!("Layer: {module}. May import: ");
    let at = doc
        .find(&want)
        .ok_or_else(|| format!("src/{module}: its doc has no `{want}…` line"))?;
    let rest = &doc[at + want.len()..];
    let list = &rest[..rest.find('.').unwrap_or(rest.len())];
    if list.trim() == "nothing of the crate" {
        return Ok(BTreeSet::new());
    }
    Ok(list
        .split(',')
        .map(|m| m.trim().trim_matches('`').trim_end_matches('/').to_string())
        .filter(|m| !m.is_empty())
        .collect())
}

#[test]
fn every_module_says_its_layer_and_imports_only_what_it_says() {
    let root = repo().join("src");
    let g = graph(&root);
    let mut actual: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in &g {
        let Some(fm) = module_of(&root, from).first().cloned() else {
            continue;
        };
        let entry = actual.entry(fm.clone()).or_default();
        for to in tos {
            if let Some(tm) = module_of(&root, to).first()
                && *tm != fm
            {
                entry.insert(tm.clone());
            }
        }
    }
    let mut problems = Vec::new();
    for (m, uses) in &actual {
        match declared_imports(&root, m) {
            Err(e) => problems.push(e),
            Ok(said) => {
                let extra: Vec<&String> = uses.difference(&said).collect();
                if !extra.is_empty() {
                    problems.push(format!(
                        "src/{m} imports {extra:?}, which its doc does not list (it imports {uses:?})"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn nothing_is_re_exported_by_glob() {
    let mut found = Vec::new();
    for f in rust_files(&repo().join("src")) {
        let code = code_only(&std::fs::read_to_string(&f).unwrap());
        for line in code.lines() {
            let t = line.trim();
            if t.starts_with("pub") && t.contains(" use ") && t.contains("::*") {
                found.push(format!("{}: {t}", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "re-export by name instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_code_map_names_every_folder_of_src_and_no_other() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let map = text
        .split("## Code map")
        .nth(1)
        .and_then(|t| t.split("\nOutside `src/`").next())
        .expect("ARCHITECTURE.md has a `## Code map` section");
    let listed: BTreeSet<String> = map
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once("/`"))
        .map(|(name, _)| name.to_string())
        .collect();
    let folders: BTreeSet<String> = std::fs::read_dir(repo().join("src"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        listed, folders,
        "ARCHITECTURE.md's code map and the folders of src/"
    );
    // The layers block names the same folders.
    let layered: BTreeSet<String> = layers().into_keys().collect();
    assert_eq!(
        layered, folders,
        "ARCHITECTURE.md's layers block and the folders of src/"
    );
}
