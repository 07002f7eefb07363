//! Every example in the docs is one the tests run (the convention: docs/testing.md, "Examples
//! in the docs").
//!
//! README.md and docs/*.md show commands in fenced blocks. A ```` ```console ```` block is a
//! transcript that runs here: its `$ ` lines are commands (a line ending in `\` continues one),
//! the lines after a command are its output (stdout and stderr as one stream), `[..]` in an
//! output line matches any text, a line `…` any number of lines, and a command ending in
//! `# exit N` must exit N (any other, 0). The HTML comment just before a block says where it
//! runs: none, on this machine alone; `<!-- run: bed -->`, on the sandbox host;
//! `<!-- run: gated -->` (optionally `; host policy: YAML`, installed for the block), on the
//! gated one. Any other block that runs `pxagent` says why not: `<!-- not run: REASON -->`.
//!
//! Decisions: one `bash` per block runs its commands in order, like a terminal session (cd,
//! variables, `$?` and files carry from one command to the next), in a fresh home that is also
//! the working directory, with the repository's top-level entries linked into it (so
//! `examples/…` reads as in a checkout) and pxagent first on PATH. Host blocks get the bed's
//! `PXAGENT_*` variables (what `eval "$(scripts/testbed.sh env)"` sets) and a config file
//! naming the bed `pve1`; their outputs are compared after the bed's account and port are
//! rewritten to those of `scripts/test.sh`'s beds (`zen-agent@127.0.0.1:2222`, gated
//! `zen-gate@127.0.0.1:2223`), so the docs read the same whichever bed ran them. Host blocks hold
//! the host [`lock`] and FAIL without their bed (like every live test). Every problem of every
//! block is collected and reported at once.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::{self, Home, bed, gated, lock};

/// Where a runnable block runs.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    /// This machine alone: no `PXAGENT_*` variables, no config file.
    Local,
    /// The sandbox host (`scripts/testbed.sh up`).
    Bed,
    /// The gated bed (`scripts/testbed.sh up --gate`), with this host policy for the block.
    Gated { policy: Option<String> },
}

/// The comment just before a block.
#[derive(Debug, Clone, PartialEq)]
enum Mark {
    Run(Place),
    NotRun(String),
}

/// One fenced block of a markdown file.
#[derive(Debug)]
struct Block {
    file: String,
    /// The opening fence's line (1-based).
    line: usize,
    /// The info string's first word, lower case (`console`, `sh`; empty for none).
    lang: String,
    mark: Option<Mark>,
    body: Vec<String>,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// Where a console block runs (no mark: locally).
    fn place(&self) -> Place {
        match &self.mark {
            Some(Mark::Run(p)) => p.clone(),
            _ => Place::Local,
        }
    }
}

/// One command of a console block and what it must do.
#[derive(Debug)]
struct Step {
    /// The command's line in the file.
    line: usize,
    command: String,
    exit: i32,
    expected: Vec<String>,
}

const TOKEN: &str = "@@pxdoc-step-end@@";

/// The markdown files whose examples run: README.md and docs/*.md.
fn doc_files() -> Vec<(String, String)> {
    let root = repo();
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(root.join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A `run:` or `not run:` comment; `None` for any other line (other comments included).
fn directive(line: &str) -> Option<Result<Mark, String>> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if let Some(reason) = inner.strip_prefix("not run:") {
        let reason = reason.trim();
        return Some(if reason.is_empty() {
            Err("`not run:` needs a reason".into())
        } else {
            Ok(Mark::NotRun(reason.to_string()))
        });
    }
    if let Some(rest) = inner.strip_prefix("run:") {
        let (place, extra) = match rest.split_once(';') {
            Some((p, e)) => (p.trim(), Some(e.trim())),
            None => (rest.trim(), None),
        };
        return Some(match (place, extra) {
            ("bed", None) => Ok(Mark::Run(Place::Bed)),
            ("gated", None) => Ok(Mark::Run(Place::Gated { policy: None })),
            ("gated", Some(e)) => match e.strip_prefix("host policy:") {
                Some(y) if !y.trim().is_empty() => Ok(Mark::Run(Place::Gated {
                    policy: Some(y.trim().to_string()),
                })),
                _ => Err(format!(
                    "after `run: gated;` only `host policy: YAML` may follow, not `{e}`"
                )),
            },
            _ => Err(format!(
                "unknown `run:` place `{}`: `run: bed` or `run: gated` (no mark: this machine alone)",
                rest.trim()
            )),
        });
    }
    if inner.starts_with("not run") || inner.starts_with("run") {
        return Some(Err(format!(
            "`{inner}`: write `<!-- not run: REASON -->` or `<!-- run: bed|gated -->`"
        )));
    }
    None
}

/// The fenced blocks of one file, each with the mark just before it; bad or stray marks go to
/// `problems`.
fn parse(file: &str, text: &str, problems: &mut Vec<String>) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut pending: Option<(usize, Mark)> = None;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        if let Some(info) = l.strip_prefix("```") {
            let start = i + 1;
            // A block in a list item is indented like its fence.
            let indent = lines[i].len() - l.len();
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                let b = lines[i];
                let cut = b.len() - b.trim_start().len();
                body.push(b[cut.min(indent)..].to_string());
                i += 1;
            }
            if i == lines.len() {
                problems.push(format!("{file}:{start}: the block is never closed"));
            }
            blocks.push(Block {
                file: file.to_string(),
                line: start,
                lang: info.split_whitespace().next().unwrap_or("").to_lowercase(),
                mark: pending.take().map(|(_, m)| m),
                body,
            });
        } else if let Some(d) = directive(l) {
            match d {
                Ok(m) => {
                    if let Some((at, _)) = pending.replace((i + 1, m)) {
                        problems.push(format!("{file}:{at}: this mark is not just before a block"));
                    }
                }
                Err(e) => problems.push(format!("{file}:{}: {e}", i + 1)),
            }
        } else if !l.is_empty()
            && let Some((at, _)) = pending.take()
        {
            problems.push(format!("{file}:{at}: this mark is not just before a block"));
        }
        i += 1;
    }
    if let Some((at, _)) = pending {
        problems.push(format!("{file}:{at}: this mark is not just before a block"));
    }
    blocks
}

/// Whether a line runs `pxagent`: the word at the start or after a space, `|`, `;`, `&`, `(`
/// or a backtick, and followed by a space or the end (not `pxagent-approval/2`, `"pxagent"`).
fn runs_pxagent(line: &str) -> bool {
    line.match_indices("pxagent").any(|(i, w)| {
        let before = line[..i].chars().next_back();
        let after = line[i + w.len()..].chars().next();
        before.is_none_or(|c| c.is_whitespace() || "|;&(`".contains(c))
            && after.is_none_or(char::is_whitespace)
    })
}

/// The exit status a command states with a trailing `# exit N` (else 0).
fn stated_exit(command: &str) -> i32 {
    let mut exit = 0;
    for (i, _) in command.match_indices('#') {
        if i > 0 && !command[..i].ends_with(char::is_whitespace) {
            continue;
        }
        if let Some(rest) = command[i + 1..].trim_start().strip_prefix("exit ") {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                exit = n;
            }
        }
    }
    exit
}

/// A console block's commands and expected outputs.
fn steps(b: &Block) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut k = 0;
    while k < b.body.len() {
        let l = &b.body[k];
        if let Some(c) = l.strip_prefix("$ ") {
            let line = b.line + 1 + k;
            let mut command = c.to_string();
            while command.ends_with('\\') && k + 1 < b.body.len() {
                k += 1;
                command.push('\n');
                command.push_str(&b.body[k]);
            }
            steps.push(Step {
                line,
                exit: stated_exit(&command),
                command,
                expected: Vec::new(),
            });
        } else if let Some(s) = steps.last_mut() {
            s.expected.push(l.clone());
        } else {
            return Err(format!(
                "{}: a console block starts with a `$ ` command",
                b.at()
            ));
        }
        k += 1;
    }
    if steps.is_empty() {
        return Err(format!(
            "{}: a console block without a `$ ` command",
            b.at()
        ));
    }
    Ok(steps)
}

/// The problems of one block's marking: a console block always runs; any other block that
/// runs pxagent must say why it is not run.
fn check_marks(b: &Block, problems: &mut Vec<String>) {
    let console = b.lang == "console";
    match (&b.mark, console) {
        (Some(Mark::NotRun(_)), true) => problems.push(format!(
            "{}: a ```console block always runs; show an example that cannot run as ```sh with `<!-- not run: REASON -->`",
            b.at()
        )),
        (Some(Mark::Run(_)), false) => problems.push(format!(
            "{}: `run:` marks only ```console blocks (this one is `{}`)",
            b.at(),
            b.lang
        )),
        (None, false) => {
            if let Some(l) = b.body.iter().find(|l| runs_pxagent(l)) {
                problems.push(format!(
                    "{}: runs pxagent (`{}`) but is neither a ```console example the tests run nor marked `<!-- not run: REASON -->`",
                    b.at(),
                    l.trim()
                ));
            }
        }
        _ => {}
    }
    if console && let Err(e) = steps(b) {
        problems.push(e);
    }
}

/// Every block of the docs, and the problems of their marks.
fn all_blocks() -> (Vec<Block>, Vec<String>) {
    let mut problems = Vec::new();
    let mut blocks = Vec::new();
    for (name, text) in doc_files() {
        blocks.extend(parse(&name, &text, &mut problems));
    }
    for b in &blocks {
        check_marks(b, &mut problems);
    }
    (blocks, problems)
}

/// Whether an output line matches an expected one, `[..]` matching any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

/// Whether the output lines match the expected ones, a line `…` matching any number of lines.
fn output_matches(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "…" => {
            (0..=actual.len()).any(|k| output_matches(rest, &actual[k..]))
        }
        Some((e, rest)) => {
            !actual.is_empty()
                && line_matches(e.trim_end(), &actual[0])
                && output_matches(rest, &actual[1..])
        }
    }
}

/// What a block runs with: variables, a config file, the bed's coordinates to rewrite, and
/// the host policy installed for it (put back on drop).
struct Setting {
    vars: Vec<(String, String)>,
    config: Option<String>,
    rewrite: Vec<(String, String)>,
    _policy: Option<support::PolicySwap>,
}

/// Rewrite a bed's account and port to the ones the docs show.
fn rewrites(user: &str, host: &str, port: &str, to: (&str, &str, &str)) -> Vec<(String, String)> {
    let (u, h, p) = to;
    vec![
        (format!("{user}@{host}:{port}"), format!("{u}@{h}:{p}")),
        (format!("{user}-{port}"), format!("{u}-{p}")),
        (format!("{host}:{port}"), format!("{h}:{p}")),
        (user.to_string(), u.to_string()),
    ]
}

impl Setting {
    fn for_place(place: &Place) -> Setting {
        match place {
            Place::Local => Setting {
                vars: Vec::new(),
                config: None,
                rewrite: Vec::new(),
                _policy: None,
            },
            Place::Bed => {
                let b = bed();
                Setting {
                    vars: vec![
                        ("PXAGENT_HOST".into(), b.host.clone()),
                        ("PXAGENT_PORT".into(), b.port.clone()),
                        ("PXAGENT_USER".into(), b.user.clone()),
                        ("PXAGENT_IDENTITY".into(), b.identity.clone()),
                        ("PXAGENT_KNOWN_HOSTS".into(), b.known_hosts.clone()),
                        // The sandbox's own knobs (`pve-sim net-cut` stops this sshd).
                        (
                            "PXAGENT_TESTBED_SSHD_PIDFILE".into(),
                            std::env::var("PXAGENT_TESTBED_SSHD_PIDFILE").unwrap_or_default(),
                        ),
                    ],
                    config: Some(format!(
                        "hosts:\n  pve1: {{address: '{}', port: {}, user: '{}', identity: '{}', known_hosts: '{}'}}\n",
                        b.host, b.port, b.user, b.identity, b.known_hosts
                    )),
                    rewrite: rewrites(
                        &b.user,
                        &b.host,
                        &b.port,
                        ("zen-agent", "127.0.0.1", "2222"),
                    ),
                    _policy: None,
                }
            }
            Place::Gated { policy } => {
                let g = gated();
                let mut vars: Vec<(String, String)> = g
                    .env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect();
                vars.push((
                    "PXAGENT_TESTBED_APPROVER_KEY".into(),
                    g.approver_key.display().to_string(),
                ));
                // The bed's kill switch, which the freeze example sets and removes as root.
                vars.push((
                    "PXAGENT_TESTBED_FREEZE".into(),
                    std::env::var("PXAGENT_GATED_TESTBED_FREEZE").unwrap_or_default(),
                ));
                let get = |k: &str| {
                    vars.iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                let rewrite = rewrites(
                    &g.user,
                    &get("PXAGENT_HOST"),
                    &get("PXAGENT_PORT"),
                    ("zen-gate", "127.0.0.1", "2223"),
                );
                Setting {
                    _policy: policy.as_ref().map(|y| g.policy(&format!("{y}\n"))),
                    vars,
                    config: None,
                    rewrite,
                }
            }
        }
    }

    fn rewrite(&self, text: &str) -> String {
        let mut t = text.to_string();
        for (from, to) in &self.rewrite {
            if from != to {
                t = t.replace(from, to);
            }
        }
        t
    }
}

/// The shell script of a block: every command, each followed by a marker with its status
/// (which gives `$?` back to the next command).
fn script(steps: &[Step]) -> String {
    let mut s = format!(
        "exec 2>&1\n__pxdoc_end() {{ local s=$?; printf '%s %d\\n' '{TOKEN}' \"$s\"; return \"$s\"; }}\n"
    );
    for st in steps {
        s.push_str(&st.command);
        s.push_str("\n__pxdoc_end\n");
    }
    s
}

/// Run a console block and add what does not hold to `problems`.
fn run_block(b: &Block, problems: &mut Vec<String>) {
    let steps = match steps(b) {
        Ok(s) => s,
        Err(e) => return problems.push(e),
    };
    let setting = Setting::for_place(&b.place());
    let home = Home::new();
    let bin = home.path().join(".bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(support::bin(), bin.join("pxagent")).unwrap();
    // The repository's top-level entries, so that `examples/…` reads as in a checkout; files
    // the examples write stay in the home.
    for e in std::fs::read_dir(repo()).unwrap() {
        let name = e.unwrap().file_name();
        if name == ".git" || name == "target" || home.path().join(&name).exists() {
            continue;
        }
        std::os::unix::fs::symlink(repo().join(&name), home.path().join(&name)).unwrap();
    }
    if let Some(c) = &setting.config {
        let dir = home.config_dir().join("pxagent");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.yaml"), c).unwrap();
    }
    let mut cmd = Command::new("timeout");
    cmd.args([
        "--kill-after=10",
        "300",
        "bash",
        "--noprofile",
        "--norc",
        "-c",
    ])
    .arg(script(&steps));
    support::isolate(&mut cmd, home.path());
    cmd.env("PATH", format!("{}:{}", bin.display(), support::PATH))
        .env("XDG_RUNTIME_DIR", home.path().join("run"))
        .stdin(Stdio::null());
    std::fs::create_dir(home.path().join("run")).unwrap();
    for (k, v) in &setting.vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("bash");
    let all = setting.rewrite(&String::from_utf8_lossy(&out.stdout));

    let mut rest = all.as_str();
    for st in &steps {
        let Some(p) = rest.find(TOKEN) else {
            problems.push(format!(
                "{}:{}: `{}` did not finish (the block was killed after 300 s, or a command ended the shell); the output since the last command:\n{}",
                b.file, st.line, st.command, rest
            ));
            return;
        };
        let output = &rest[..p];
        let after = &rest[p + TOKEN.len()..];
        let (code, next) = after.split_once('\n').unwrap_or((after, ""));
        rest = next;
        let code: i32 = code.trim().parse().unwrap_or(-1);
        let actual: Vec<String> = output.lines().map(|l| l.trim_end().to_string()).collect();
        let mut wrong = Vec::new();
        if code != st.exit {
            wrong.push(format!(
                "exit {code}, the block says {} (a command that should exit N ends in `# exit N`)",
                st.exit
            ));
        }
        if !output_matches(&st.expected, &actual) {
            wrong.push("the output differs".into());
        }
        if !wrong.is_empty() {
            problems.push(format!(
                "{}:{}: `{}`: {}\n--- the block says:\n{}\n--- it printed:\n{}",
                b.file,
                st.line,
                st.command,
                wrong.join("; "),
                st.expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
}

/// Run every console block that runs at `place`.
fn run_place(want: fn(&Place) -> bool) {
    let (blocks, _) = all_blocks();
    let chosen: Vec<&Block> = blocks
        .iter()
        .filter(|b| b.lang == "console" && want(&b.place()))
        .collect();
    assert!(!chosen.is_empty(), "no docs example runs here");
    let mut problems = Vec::new();
    for b in chosen {
        run_block(b, &mut problems);
    }
    assert!(
        problems.is_empty(),
        "{} docs example command(s) do not hold:\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );
}

#[test]
fn every_block_that_runs_pxagent_is_run_or_says_why_not() {
    let (blocks, problems) = all_blocks();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // What runs where and what does not, and why (`--nocapture` shows it).
    let mut run = std::collections::BTreeMap::<String, usize>::new();
    let mut excused = Vec::new();
    for b in &blocks {
        match &b.mark {
            Some(Mark::NotRun(why)) => excused.push(format!("{}: {why}", b.at())),
            _ if b.lang == "console" => *run.entry(format!("{:?}", b.place())).or_default() += 1,
            _ => {}
        }
    }
    eprintln!("docs examples run: {run:?}; not run: {}", excused.len());
    for e in &excused {
        eprintln!("  {e}");
    }
    assert!(
        !run.is_empty() && !excused.is_empty(),
        "{run:?} run, {excused:?} excused"
    );
}

#[test]
fn local_examples_hold() {
    run_place(|p| *p == Place::Local);
}

#[test]
fn bed_examples_hold() {
    let _g = lock();
    run_place(|p| *p == Place::Bed);
}

#[test]
fn gated_examples_hold() {
    let _g = lock();
    run_place(|p| matches!(p, Place::Gated { .. }));
}

/// The checker itself: marks, placeholders, exit statuses, on made-up docs.
#[test]
fn the_checker_finds_unmarked_blocks_wrong_exits_and_wrong_output() {
    let md = "\
```sh
pxagent vm list
```

<!-- not run: needs a real cluster -->
```sh
pxagent vm list
```

```json
{\"command\":\"pxagent\"}
```

<!-- run: nowhere -->
```console
$ pxagent version --client
```

<!-- run: bed -->
Text between.

```console
$ pxagent version --client
Client: pxagent [..] (linux [..])
$ pxagent version --client   # exit 0
Client: pxagent 9.9.9
$ false
$ pxagent frobnicate   # exit 2
error: [..]
…
$ echo $?
2
```
";
    let mut problems = Vec::new();
    let blocks = parse("x.md", md, &mut problems);
    for b in &blocks {
        check_marks(b, &mut problems);
    }
    let text = problems.join("\n");
    assert!(text.contains("x.md:1: runs pxagent"), "{text}");
    assert!(!text.contains("x.md:6:"), "{text}");
    assert!(!text.contains("x.md:10:"), "{text}");
    assert!(
        text.contains("x.md:14: unknown `run:` place `nowhere`"),
        "{text}"
    );
    assert!(
        text.contains("x.md:19: this mark is not just before a block"),
        "{text}"
    );
    assert_eq!(problems.len(), 3, "{text}");

    let console = blocks.last().unwrap();
    assert_eq!(console.place(), Place::Local);
    let mut problems = Vec::new();
    run_block(console, &mut problems);
    assert_eq!(problems.len(), 2, "{}", problems.join("\n\n"));
    assert!(problems[0].contains("x.md:25:") && problems[0].contains("the output differs"));
    assert!(problems[1].contains("x.md:27:") && problems[1].contains("exit 1, the block says 0"));
}

#[test]
fn placeholders_match_within_a_line_and_across_lines() {
    let v = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(line_matches("a [..] c", "a b b c"));
    assert!(line_matches("[..]", ""));
    assert!(line_matches("x[..]y[..]z", "xAyByCz"));
    assert!(!line_matches("x[..]y[..]z", "xzy"));
    assert!(!line_matches("ab[..]ba", "aba"));
    assert!(line_matches("literal … stays", "literal … stays"));
    assert!(output_matches(&v(&["a", "…", "z"]), &v(&["a", "z"])));
    assert!(output_matches(
        &v(&["a", "…", "z"]),
        &v(&["a", "b", "c", "z"])
    ));
    assert!(!output_matches(&v(&["a", "…", "z"]), &v(&["a", "b"])));
    assert!(!output_matches(&v(&["a"]), &v(&["a", "b"])));
    assert!(output_matches(&v(&["…"]), &v(&[])));
    assert_eq!(stated_exit("pxagent vm destroy 100   # exit 4"), 4);
    assert_eq!(stated_exit("pxagent x   # exit 4: no phrase"), 4);
    assert_eq!(stated_exit("pxagent vm start 100   # already running"), 0);
    assert_eq!(stated_exit("echo a#exit 3"), 0);
    assert!(runs_pxagent("pxagent vm list"));
    assert!(runs_pxagent("x | pxagent -H pve1 batch"));
    assert!(runs_pxagent("UPID=$(pxagent --no-wait vm snapshot 100 x)"));
    assert!(!runs_pxagent("pxagent-approval/2"));
    assert!(!runs_pxagent("{\"command\":\"pxagent\",\"args\":[]}"));
    assert!(!runs_pxagent(
        "cargo install   # installs the `pxagent` binary"
    ));
}
