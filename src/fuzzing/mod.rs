//! The bodies of the fuzz targets in `fuzz/`: one function per parser of untrusted input,
//! each taking the fuzzer's raw bytes. `fuzz/fuzz_targets/<name>.rs` is one line that calls
//! `<name>` here, so a rename in the library breaks `cargo clippy --all-targets` and the unit
//! tests below, not only the nightly fuzz build. The tests run every body over a sample of
//! its committed corpus (`fuzz/corpus/<name>/`) on the stable toolchain.
//!
//! Compiled for tests and with the `fuzzing` feature (which `fuzz/Cargo.toml` turns on);
//! never part of the binary.
//!
//! Layer: fuzzing. May import: `approval`, `base`, `batch`, `catalog`, `config`, `host`,
//! `policy`, `views`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::approval::{self, Approvers, NonceStore, Statement};
use crate::base::gate_protocol::{self as protocol, GateRequest as Request};
use crate::batch::request;
use crate::catalog::inverse::parse_argv;
use crate::catalog::{OPS, View};
use crate::host::preflight::parse_listing;
use crate::host::sudoers::lint::{self, Principal};
use crate::policy::Policy;
use crate::views::{self, status};

/// The input as text, when it is UTF-8 of at most `max` bytes (longer inputs only slow a
/// target down without reaching new code).
fn text_within(data: &[u8], max: usize) -> Option<&str> {
    (data.len() <= max)
        .then(|| std::str::from_utf8(data).ok())
        .flatten()
}

/// The gate's first look at a request: `SSH_ORIGINAL_COMMAND` through
/// `protocol::parse_command` (canonical plain lines and `pxagent-gate/1` envelopes), then what
/// the gate does with the words: the catalog's inverse parse, and the envelope's approval
/// text. The same input is also read as NUL-separated words straight into `parse_argv`,
/// because a random line is rarely in canonical quoting and would otherwise never reach the
/// inverse parse. Inputs are capped at the gate's own line limit (the parser refuses longer
/// ones first thing).
pub fn gate_command(data: &[u8]) {
    fn inverse(words: &[String]) {
        if let Ok(found) = parse_argv(words) {
            assert!(!found.is_empty());
            for (op, values) in &found {
                // What the gate accepts is exactly a line the op itself builds.
                assert_eq!(op.tool.path(), words[0]);
                let _ = op.argv(values);
            }
        }
    }
    let Some(line) = text_within(data, protocol::MAX_LINE + 16) else {
        return;
    };
    match protocol::parse_command(Some(line)) {
        Ok(Request::Plain(words)) => {
            assert_eq!(crate::base::text::quote_argv(&words), line);
            if let [sudo, n, rest @ ..] = words.as_slice()
                && sudo == "sudo"
                && n == "-n"
            {
                inverse(rest);
            }
        }
        Ok(Request::Envelope(env)) => {
            if let Some(argv) = &env.argv {
                inverse(argv.get(2..).unwrap_or_default());
            }
            if let Some(a) = &env.approval {
                let _ = approval::parse_approval(a);
            }
            // What the client sends for this envelope reads back as the same envelope.
            let again = env.to_command().join(" ");
            if again.len() <= protocol::MAX_LINE {
                assert_eq!(
                    protocol::parse_command(Some(&again)).ok(),
                    Some(Request::Envelope(env))
                );
            }
        }
        Err(r) => {
            let _ = r.to_line();
        }
    }
    let _ = protocol::Refusal::from_output(protocol::REFUSED_EXIT, line);
    let words: Vec<String> = line.split('\0').map(str::to_string).collect();
    inverse(&words);
}

const APPROVER: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnWfVD/d91OTlCmeNSfvZdxyiJKvPg/1TReVYy0hhlF alice@example";

/// Approvals as an agent hands them to the gate (or a user to `--approval FILE`): the text
/// split by `parse_approval`, the statement parsed by `Statement::parse`, the armored SSHSIG
/// decoded and checked by `approval::check` against a fixed approvers file (the signature
/// decoder, namespace and key lookup run; a forged signature never verifies), and the
/// approvers file parser itself on the same bytes. Inputs are capped at 64 KiB, well above
/// any approval (about 1 KiB) and the gate's envelope.
pub fn approval(data: &[u8]) {
    // The approvers file and the nonce store, once per process. The store's directory is an
    // empty private one under the temporary directory: a forged signature never verifies,
    // so no nonce is ever written.
    static FIXTURE: OnceLock<(Approvers, NonceStore)> = OnceLock::new();
    let Some(text) = text_within(data, 64 * 1024) else {
        return;
    };
    let (approvers, nonces) = FIXTURE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pxagent-fuzz-nonces-{}", std::process::id()));
        let approvers = Approvers::parse(APPROVER, "approvers").expect("the fixed key parses");
        let nonces = NonceStore::open(&dir).expect("a private nonce directory");
        (approvers, nonces)
    });
    if let Ok(st) = Statement::parse(text) {
        // The canonical text of a parsed statement parses back to the same statement.
        assert_eq!(Statement::parse(&st.text()).as_ref(), Ok(&st));
    }
    let _ = Approvers::parse(text, "fuzz");
    let Ok(a) = approval::parse_approval(text) else {
        return;
    };
    let _ = a.to_text();
    let args: BTreeMap<String, String> = BTreeMap::new();
    let req = approval::Requested {
        place: approval::Place {
            host: "pve1",
            machine_id: "0123456789abcdef0123456789abcdef",
            account: "zen-agent",
        },
        op: "vm.start",
        args: &args,
    };
    let statement = a.statement.as_deref().unwrap_or("");
    if let Err(r) = approval::check(approvers, nonces, &req, statement, &a.signature, 0) {
        let _ = (r.code(), r.to_string());
    }
}

/// `pxagent sudoers lint` on hostile text: the lexer (logical lines, comments, escapes,
/// continuations), the parser (Defaults, aliases, user specs, commands with globs and `^…$`
/// regex arguments) and every check after them, including the regex-to-DFA walk. Also the
/// single-command entry point `sudo -l` output goes through and the command splitter. Inputs
/// are capped at 4 KiB: each rule is compiled and walked against the danger table, so time
/// grows with the number of rules times their regex size, and a bigger file only makes each
/// execution slower without reaching new code.
pub fn sudoers_lint(data: &[u8]) {
    let Some(text) = text_within(data, 4096) else {
        return;
    };
    let findings = lint::lint(text);
    let _ = lint::has_errors(&findings);
    let who = Principal::new("zen-agent").with_groups(["sudo".to_string(), "adm".to_string()]);
    let _ = lint::lint_for(text, &who);
    for line in text.lines().take(8) {
        let _ = lint::check_command(line);
        let _ = lint::split_commands(line);
    }
}

/// The preflight's parser of `sudo -n -l` output (`preflight::parse_listing`: sections,
/// wrapped lines, runas, tags, command lists), and the checks the preflight runs on every
/// command it lists (`lint::check_command`). Inputs are capped at 16 KiB, several times the
/// longest real listing; each listed command is linted, so the time per input grows with its
/// commands.
pub fn sudo_listing(data: &[u8]) {
    let Some(text) = text_within(data, 16 * 1024) else {
        return;
    };
    let listing = parse_listing(text);
    for (_, _, cmd) in listing.commands.iter().take(16) {
        let _ = lint::check_command(cmd);
    }
}

/// The YAML loaders: a client policy (`Policy::from_text`, YAML or the gateway form), a host
/// policy (`Policy::from_host_text`, stricter) and the config file (`config::parse`). Inputs
/// are capped at 64 KiB: YAML anchors and aliases can expand a small text a lot, and the YAML
/// parser's own limits are what this target should exercise, not the fuzzer's memory.
pub fn policy_config(data: &[u8]) {
    let Some(text) = text_within(data, 64 * 1024) else {
        return;
    };
    let _ = Policy::from_text(text, "fuzz.yaml");
    let _ = Policy::from_host_text(text, "/etc/pxagent/policy.yaml");
    if let Ok(cfg) = crate::config::parse(text, std::path::Path::new("config.yaml")) {
        let _ = cfg.persist();
        let _ = cfg.policy_sources(None);
    }
}

/// `pxagent batch` input: the line reader (`request::read_line`: length limit, UTF-8) over
/// the raw bytes, then every line through `request::parse` (JSON, `id`/`op`/`args`, the MCP
/// argument validation of the op), under the default policy and one that asks for phrases.
/// Inputs are capped at 256 KiB (a line over the 1 MiB limit is refused by length alone).
pub fn batch_line(data: &[u8]) {
    static CONFIRMING: OnceLock<Policy> = OnceLock::new();
    if data.len() > 256 * 1024 {
        return;
    }
    let confirming = CONFIRMING.get_or_init(|| {
        Policy::from_text("ops:\n  '*': confirm\n", "fuzz.yaml").expect("a valid policy")
    });
    let default = Policy::default();
    let mut input = std::io::Cursor::new(data);
    let mut n = 0;
    while let Some(read) = request::read_line(&mut input) {
        n += 1;
        let Ok(Ok(line)) = read else {
            continue;
        };
        for policy in [&default, confirming] {
            match request::parse(n, &line, policy) {
                Ok(req) => {
                    let _ = request::success(&req.id, req.op, serde_json::Value::Null, &[]);
                }
                Err(bad) => {
                    let _ = request::failure(&bad.id, bad.op, bad.line, &bad.error);
                }
            }
        }
    }
}

/// What turns pvesh JSON into typed views and tables: `views::normalize` for every view the
/// catalog uses (lenient numbers, resource/node/storage/content/snapshot lists, task logs,
/// guest-agent interfaces, RRD rows), then `views::human` of the result, and the object
/// layouts of `views::status`. Inputs are capped at 64 KiB of JSON.
pub fn pvesh_views(data: &[u8]) {
    // Each distinct view of the catalog once.
    static VIEWS: OnceLock<Vec<View>> = OnceLock::new();
    if data.len() > 64 * 1024 {
        return;
    }
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let all = VIEWS.get_or_init(|| {
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for op in OPS.iter() {
            let key = format!("{:?}", op.view);
            if !seen.contains(&key) {
                seen.push(key);
                out.push(op.view);
            }
        }
        out
    });
    for &view in all {
        if let Ok(v) = views::normalize(view, &json, None) {
            let _ = views::human(view, &v);
        }
    }
    for which in [
        status::Layout::Guest,
        status::Layout::Node,
        status::Layout::Task,
    ] {
        let _ = status::layout(which, &json);
    }
    let _ = status::config(&json);
    let _ = status::tasks(&json);
    let _ = views::normalize(View::Resources(None), &json, Some("qemu"));
}

/// A fuzz target's body: the fuzzer's bytes in, a panic on a broken invariant.
pub type Body = fn(&[u8]);

/// Every target by the name of its file in `fuzz/fuzz_targets/` and its corpus folder.
pub const TARGETS: &[(&str, Body)] = &[
    ("approval", approval),
    ("batch_line", batch_line),
    ("gate_command", gate_command),
    ("policy_config", policy_config),
    ("pvesh_views", pvesh_views),
    ("sudo_listing", sudo_listing),
    ("sudoers_lint", sudoers_lint),
];

#[cfg(test)]
mod tests {
    use super::TARGETS;
    use std::path::PathBuf;

    fn fuzz_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz")
    }

    /// Every file of `fuzz/fuzz_targets/` is one of [`TARGETS`], calls its body here and
    /// nothing else, and every target has a file and a corpus.
    #[test]
    fn every_fuzz_target_is_one_call_into_this_module() {
        let mut files: Vec<String> = std::fs::read_dir(fuzz_dir().join("fuzz_targets"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let names: Vec<String> = TARGETS.iter().map(|(n, _)| format!("{n}.rs")).collect();
        assert_eq!(files, names, "fuzz/fuzz_targets/ and fuzzing::TARGETS");
        let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
        for (name, _) in TARGETS {
            let file = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
            let code = std::fs::read_to_string(&file).unwrap();
            let call = format!("pxagent::fuzzing::{name}(data)");
            assert!(
                code.contains(&call),
                "{} does not call {call}",
                file.display()
            );
            assert!(
                manifest.contains(&format!("path = \"fuzz_targets/{name}.rs\"")),
                "fuzz/Cargo.toml has no [[bin]] for {name}"
            );
            assert!(
                fuzz_dir().join("corpus").join(name).is_dir(),
                "no corpus for {name}"
            );
        }
    }

    /// Each body over the first inputs of its committed corpus (sorted by name, which is
    /// the SHA-1 of the input, so a fair sample): none panics. The fuzzer runs the rest.
    #[test]
    fn every_target_takes_its_committed_corpus() {
        const SAMPLE: usize = 60;
        for (name, body) in TARGETS {
            let dir = fuzz_dir().join("corpus").join(name);
            let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            inputs.sort();
            assert!(
                inputs.len() >= SAMPLE,
                "{name}: corpus under {SAMPLE} inputs"
            );
            for path in inputs.iter().take(SAMPLE) {
                body(&std::fs::read(path).unwrap());
            }
        }
    }
}
