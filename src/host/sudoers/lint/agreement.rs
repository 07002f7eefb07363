//! Validation equals the rule: for every op and every parameter that reaches its command
//! line, generated values (valid examples mutated with the characters that matter to sudo,
//! the SSH line and the PVE tools, and random strings of them) go through the three checks
//! that decide whether a line runs, and the test fails on any disagreement:
//!
//! - the client: [`Kind::parse`], what the CLI, MCP and batch front ends call, and the op
//!   these values choose at the op's CLI path ([`crate::catalog::select`]);
//! - sudo: the rules `sudoers render` writes, read back by this lint's own parser (the way
//!   sudo's lexer reads them) and matched as sudo 1.9.10+ matches a `^…$` argument: the
//!   arguments joined by single spaces, against the ERE as regcomp reads it
//!   ([`super::regex::ere_to_regex`]: `.` matches a newline, escapes as POSIX has them);
//! - the gate: `protocol::parse_command` of the quoted SSH line, then the catalog's inverse
//!   parse ([`crate::catalog::inverse::parse_argv`]).
//!
//! What must hold, for a value `c` of parameter `p` of op `o`:
//! 1. the client accepts `c` (wire form `w`) ⇒ sudo and the gate accept `o`'s line for `w`,
//!    and the gate reads it back as `o` with `p = w`;
//! 2. the gate reads `o`'s line built from `c` as `o` with `p = c` ⇒ the client sends `c`
//!    for `o` (`c` is a wire value of the kind, and those values choose `o` at its CLI path);
//!    a line another value also builds may still pass: it is that value's line;
//! 3. on every line built, sudo accepts ⇔ the gate accepts, with two named exceptions where
//!    sudo, by its nature, admits more than the gate, each checked to be that exception:
//!    - a kind's checks beyond its regex ([`NARROWED`]: reserved names, numeric ranges, total
//!      lengths, `..`, guest paths and commands), which POSIX ERE under sudo's pattern limits
//!      cannot express; the value must then match the kind's own regex;
//!    - a directory storage's path below no storage root of the render ([`outside_the_roots`]):
//!      the client and the gate cannot know the host's roots (`sudoers render
//!      --storage-roots`), so they take every path that is no system directory, and sudo
//!      alone fences the roots, like a VMID fence; this holds in properties 1 and 3; an NFS
//!      server the render does not name (`--nfs-servers`) is the same exception;
//!    - a word holding a space where the kind allows none: sudo sees only the joined line,
//!      so it cannot tell `["100 --timeout 5"]` from `["100", "--timeout", "5"]`; the line
//!      re-split at its spaces (what sudo judged) must then be a catalog line the gate
//!      accepts, and the tool receives the one odd word as it is (no shell on the host).

use std::collections::BTreeMap;

use ::regex::Regex;

use super::lexer::logical_lines;
use super::parser::{Args, Cmnd, Entry, parse_entry};
use super::regex::ere_to_regex;
use crate::base::gate_protocol::{GateRequest, parse_command};
use crate::base::text::quote_argv;
use crate::catalog::inverse::parse_argv;
use crate::catalog::kind::Kind;
use crate::catalog::{Arg, OPS, Op, samples, select};
use crate::host::sudoers::ranges::Ranges;
use crate::host::sudoers::render::{RenderOptions, render};

/// Kinds whose client check is narrower than their regex, and why the regex cannot say it.
const NARROWED: &[(Kind, &str)] = &[
    (
        Kind::SnapName,
        "`current`, `pending`, `vzdump` in any case are reserved (ERE has no negation)",
    ),
    (
        Kind::Text,
        "at most 200 characters in all (a bound over the words' bounds)",
    ),
    (Kind::Mebibytes, "16 to 4194304"),
    (Kind::MebibytesOrOff, "0, or 16 to 4194304"),
    (Kind::Cores, "1 to 512"),
    (Kind::Gibibytes, "1 to 65536"),
    (Kind::GuestName, "at most 253 characters"),
    (Kind::FileName, "no `..` anywhere"),
    (Kind::TemplateName, "no `..` anywhere"),
    (
        Kind::GuestPath,
        "`.`, `..`, `//`, control characters, a trailing `/`, over 4096 bytes",
    ),
    (Kind::GuestData, "no NUL, at most 64 KiB"),
    (Kind::ImageFile, "no `..` anywhere"),
    (Kind::ImportVolume, "no `..` anywhere"),
    (Kind::IsoVolume, "no `..` anywhere"),
    (
        Kind::SshKeys,
        "each key's type, base64 body and blob type, its comment, at most 16 keys and 16 KiB",
    ),
    (
        Kind::IpConfig,
        "each address part 0-255 without leading zeros, the gateway inside the address's network",
    ),
    (Kind::Nameservers, "IPv4 and IPv6 addresses exactly"),
    (Kind::FwPorts, "ports 1-65535, a range from low to high"),
    (
        Kind::FwAddr,
        "each address and prefix length exactly, one family per list",
    ),
    (Kind::IpAddr, "the address exactly, in its usual form"),
    (Kind::ContentList, "no content type twice"),
    (Kind::HaSids, "no resource twice"),
    (Kind::HaNodes, "no node twice"),
    (Kind::VmidList, "no VMID twice"),
    (Kind::Retention, "no keep option twice"),
    (
        Kind::Calendar,
        "weekdays, date and time fields in range, ranges from low to high, repetitions over 0",
    ),
    (Kind::Server, "at most 253 characters"),
    (
        Kind::GuestArgv,
        "a JSON array, a non-empty program, at most 256 words and 32 KiB",
    ),
];

/// The characters that change how a word is read somewhere on its way: sudo's joined line
/// and lexer, the SSH line's quoting, option parsing by the PVE tools, paths, encodings.
const EDGE: &[&str] = &[
    " ", "-", "--", "=", ",", ":", "/", "..", ".", "\"", "'", "\t", "\n", "\r", "\0", "\x1b",
    "\x7f", "\u{85}", "é", "Ω", "\u{2028}", "\u{feff}", "#", "$", "\\", "*", "[", "]", "{", "}",
    "(", ")", "?", "+", "|", "^", "%", "&", ";", "<", ">", "`", "~", "!", "@", "_", "0", "9", "a",
    "Z", " -", "%00", "${IFS}", "-x", "1",
];

/// A small deterministic generator (xorshift64*): the same values on every run, so a
/// failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn edge(&mut self) -> &'static str {
        EDGE[self.below(EDGE.len())]
    }
}

/// A char boundary of `s`, at random.
fn boundary(rng: &mut Rng, s: &str) -> usize {
    let cuts: Vec<usize> = (0..=s.len()).filter(|i| s.is_char_boundary(*i)).collect();
    cuts[rng.below(cuts.len())]
}

/// One mutation of `s`.
fn mutate(rng: &mut Rng, s: &str) -> String {
    let mut out = s.to_string();
    match rng.below(9) {
        0 | 1 => out.insert_str(boundary(rng, s), rng.edge()),
        2 => {
            let at = boundary(rng, s);
            if let Some(c) = out[at..].chars().next() {
                out.replace_range(at..at + c.len_utf8(), rng.edge());
            }
        }
        3 => {
            let at = boundary(rng, s);
            if let Some(c) = out[at..].chars().next() {
                out.replace_range(at..at + c.len_utf8(), "");
            }
        }
        4 => out.insert_str(0, if rng.below(2) == 0 { "-" } else { "--" }),
        5 => out.truncate(boundary(rng, s)),
        6 => out = format!("{s}{s}"),
        7 => out = out.to_ascii_uppercase(),
        _ => {
            let at = boundary(rng, s);
            let digits = ["0", "9", "00", "99999999", "5"][rng.below(5)];
            out.insert_str(at, digits);
        }
    }
    out
}

/// A string of edge characters and letters, up to 12 pieces.
fn random(rng: &mut Rng) -> String {
    (0..rng.below(13)).map(|_| rng.edge()).collect()
}

/// Values to try for a parameter of `kind` whose valid sample is `valid`.
fn values(rng: &mut Rng, kind: Kind, valid: &str, n: usize) -> Vec<String> {
    // Two valid values with a space between: where the kind allows no space, sudo's joined
    // line may still read as a catalog line (the second exception above).
    let mut seeds = vec![
        valid.to_string(),
        kind.example().to_string(),
        format!("{valid} {valid}"),
        format!("{valid} --output-format json"),
    ];
    if let Kind::Choice(choices) = kind {
        for c in choices {
            seeds.push(c.cli.to_string());
            seeds.push(c.wire.to_string());
        }
    }
    let mut out = seeds.clone();
    while out.len() < n {
        let v = match rng.below(5) {
            0 => random(rng),
            _ => {
                let mut v = seeds[rng.below(seeds.len())].clone();
                for _ in 0..=rng.below(3) {
                    v = mutate(rng, &v);
                }
                v
            }
        };
        out.push(v);
    }
    if kind == Kind::GuestArgv {
        // A command is a JSON array: the edge characters go into its words, and a few raw
        // mutations of the JSON text check that what does not parse is refused.
        let words = |rng: &mut Rng| -> Vec<String> {
            (0..rng.below(4))
                .map(|_| {
                    let word = ["uname", "-a", "/bin/cat", ""][rng.below(4)];
                    mutate(rng, word)
                })
                .collect()
        };
        out = out
            .iter()
            .enumerate()
            .map(|(i, raw)| match i % 4 {
                0 => raw.clone(),
                _ => serde_json::to_string(&words(rng)).unwrap(),
            })
            .collect();
        out.push(valid.to_string());
    }
    out
}

/// One rendered rule: the tool path and its argument regex as sudo matches it.
struct Rule {
    path: String,
    args: Regex,
}

/// Every rule of the broadest render (profile `full`, container exec for every id), read
/// back by the lint's parser.
fn rendered_rules() -> Vec<Rule> {
    let mut opts = RenderOptions::new("zen-agent").unwrap();
    opts.ct_exec = Some(Ranges::parse("--ct-exec", "100-999999999").unwrap());
    opts.nfs_servers = vec![Kind::Server.example().to_string()];
    // The render's bound on how full an upload may leave a storage is the admin's narrowing
    // (default 90): rendered at the kind's own bound, the rule and the client agree.
    opts.iso_max_used = 99;
    let text = render(&opts);
    let mut rules = Vec::new();
    for l in logical_lines(&text) {
        let Ok(Entry::CmndAlias(defs)) = parse_entry(&l.text) else {
            continue;
        };
        for (_, items) in defs {
            for item in items {
                match item.cmnd {
                    Cmnd::Path {
                        path,
                        args: Args::Regex(re),
                    } => rules.push(Rule {
                        path,
                        args: Regex::new(&ere_to_regex(&re))
                            .unwrap_or_else(|e| panic!("{re}: {e}")),
                    }),
                    other => panic!("a rendered rule that is not `PATH ^…$`: {other:?}"),
                }
            }
        }
    }
    assert!(rules.len() > 40, "only {} rules read back", rules.len());
    rules
}

/// Whether sudo runs `argv` (tool path first) under these rules.
fn sudo_admits(rules: &[Rule], argv: &[String]) -> bool {
    let joined = argv[1..].join(" ");
    rules
        .iter()
        .any(|r| r.path == argv[0] && r.args.is_match(&joined))
}

/// What the gate makes of `sudo -n argv…` sent as pxagent sends it.
fn gate_admits(argv: &[String]) -> Option<Vec<crate::catalog::inverse::Match>> {
    let mut words = vec!["sudo".to_string(), "-n".to_string()];
    words.extend(argv.iter().cloned());
    match parse_command(Some(&quote_argv(&words))) {
        Ok(GateRequest::Plain(w)) if w == words => parse_argv(&w[2..]).ok(),
        _ => None,
    }
}

/// The parameters whose value reaches `op`'s command line.
fn on_the_line(op: &Op) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    let mut add = |name: &str| {
        let base = name.split(':').next().unwrap_or(name);
        if let Some(p) = op.param(base)
            && !names.contains(&p.name)
        {
            names.push(p.name);
        }
    };
    for arg in op.args {
        let words: &[&str] = match arg {
            Arg::Word(w) => std::slice::from_ref(w),
            Arg::Opt(_, words) => words,
            Arg::List(name, _) => {
                add(name);
                continue;
            }
        };
        for w in words {
            for piece in w.split('{').skip(1) {
                if let Some((name, _)) = piece.split_once('}') {
                    add(name);
                }
            }
        }
    }
    names
}

/// Keep the first disagreements (enough to see the pattern, not a flood).
fn fail(failures: &mut Vec<String>, msg: String) {
    if failures.len() < 40 {
        failures.push(msg);
    }
}

/// Whether `value` of a parameter of `kind` is a directory storage's path below none of the
/// default storage roots (the render this test reads has the default ones): sudo refuses it
/// where the client and the gate take it, by design (see the module doc).
fn outside_the_roots(kind: Kind, value: &str) -> bool {
    (kind == Kind::StoragePath
        && !crate::catalog::kind::STORAGE_ROOTS_DEFAULT
            .iter()
            .any(|r| value.starts_with(&format!("{r}/"))))
        // Likewise an NFS server the render does not name (`--nfs-servers`, here the kind's
        // example alone): sudo alone fences the admin's servers (the gate by its host policy).
        || (kind == Kind::Server && value != Kind::Server.example())
}

#[derive(Default, Debug)]
struct Tally {
    roots: usize,
    samples: usize,
    accepted: usize,
    refused: usize,
    narrowed: usize,
    joined: usize,
    other_line: usize,
}

#[test]
fn client_sudoers_and_gate_accept_the_same_values() {
    let rules = rendered_rules();
    let mut rng = Rng(0x5eed_a110_0fca_7a00);
    let mut tally = Tally::default();
    let mut failures: Vec<String> = Vec::new();
    let mut covered_kinds: Vec<Kind> = Vec::new();
    for op in OPS.iter().copied() {
        for name in on_the_line(op) {
            let p = op.param(name).unwrap();
            if p.kind == Kind::Flag {
                // A switch is a literal word of the template: nothing to generate.
                continue;
            }
            if !covered_kinds.contains(&p.kind) {
                covered_kinds.push(p.kind);
            }
            let Some(base) = samples(op).into_iter().find(|v| v.contains_key(name)) else {
                panic!("{}: no sample gives {name}", op.id);
            };
            for c in values(&mut rng, p.kind, &base[name], 80) {
                tally.samples += 1;
                let with = |v: &str| -> BTreeMap<&'static str, String> {
                    let mut m = base.clone();
                    m.insert(p.name, v.to_string());
                    m
                };
                // 1: what the client accepts, sudo and the gate accept, as this op. The
                // client's check is the kind's, and that these values choose this op among
                // the ops at its path (a container archive selects the container restore).
                let chosen = select(op.cli, &with(&c)).is_ok_and(|o| o.id == op.id);
                let client = p.kind.parse(name, &c).ok().filter(|_| chosen);
                if let Some(w) = &client {
                    tally.accepted += 1;
                    let argv = op.argv(&with(w));
                    if outside_the_roots(p.kind, w) && !sudo_admits(&rules, &argv) {
                        tally.roots += 1;
                    } else if !sudo_admits(&rules, &argv) {
                        fail(
                            &mut failures,
                            format!(
                                "{} {name}={c:?}: client accepts, sudo refuses {argv:?}",
                                op.id
                            ),
                        );
                    }
                    let back = gate_admits(&argv);
                    if !back.iter().flatten().any(|(o, v)| {
                        o.id == op.id && v.get(name).map(String::as_str) == Some(w.as_str())
                    }) {
                        fail(
                            &mut failures,
                            format!(
                                "{} {name}={c:?}: client accepts, the gate reads {back:?}",
                                op.id
                            ),
                        );
                    }
                } else {
                    tally.refused += 1;
                }
                // 2 and 3: the line built from the value as given, checked or not.
                let argv = op.argv(&with(&c));
                let sudo = sudo_admits(&rules, &argv);
                let gate = gate_admits(&argv);
                if let Some(found) = &gate {
                    let as_given = found.iter().any(|(o, v)| {
                        o.id == op.id && v.get(name).map(String::as_str) == Some(c.as_str())
                    });
                    // On the wire a choice is its wire value (`none` is sent as `0`): what
                    // the gate takes must be what some client input becomes.
                    if as_given && (p.kind.from_wire(name, &c).is_err() || !chosen) {
                        fail(
                            &mut failures,
                            format!(
                                "{} {name}={c:?}: the client never sends it, the gate accepts {argv:?}",
                                op.id
                            ),
                        );
                    }
                    if !as_given {
                        tally.other_line += 1;
                    }
                }
                match (sudo, gate.is_some()) {
                    (true, true) | (false, false) => {}
                    (false, true) if outside_the_roots(p.kind, &c) => tally.roots += 1,
                    (false, true) => fail(
                        &mut failures,
                        format!(
                            "{} {name}={c:?}: the gate accepts, sudo refuses {argv:?}",
                            op.id
                        ),
                    ),
                    (true, false) => {
                        let kind_re = Regex::new(&format!("^(?s:{})$", p.kind.regex())).unwrap();
                        let resplit: Vec<String> =
                            argv[1..].join(" ").split(' ').map(str::to_string).collect();
                        let mut sudo_view = vec![argv[0].clone()];
                        sudo_view.extend(resplit);
                        if NARROWED.iter().any(|(k, _)| *k == p.kind)
                            && (kind_re.is_match(&c) || p.kind == Kind::GuestArgv)
                        {
                            tally.narrowed += 1;
                        } else if c.contains(' ') && gate_admits(&sudo_view).is_some() {
                            tally.joined += 1;
                        } else {
                            fail(
                                &mut failures,
                                format!(
                                    "{} {name}={c:?}: sudo accepts, the gate refuses {argv:?}",
                                    op.id
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
    eprintln!("{tally:?}; kinds covered: {covered_kinds:?}");
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(tally.accepted > 1000 && tally.refused > 1000, "{tally:?}");
}
