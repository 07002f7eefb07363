//! Languages of argument lines as lazy DFAs, and the one question the checks ask of them:
//! does a rule admit some line that is also in a danger language (and in none of a list of
//! safe ones)? A breadth-first walk of the product of the automata answers it exactly, for
//! every shape a rule can take (a literal, a glob, any regex, `.*` anywhere), and its first
//! accepted path is the shortest such line: the witness a finding shows.
//!
//! Why automata and not sample lines ("probes"): a sample only proves what it spells. `pct
//! exec 100 -- uptime` written literally, `^exec 1[0-9]{2} -- .*$` or `^(enter|exec) [0-9]+$`
//! all admit container exec, and no fixed list of samples matches each of them.
//!
//! Semantics follow sudo: a rule's regex is a POSIX ERE searched in the arguments joined by
//! single spaces (regexec without REG_NEWLINE: a match anywhere, `^`/`$` only where written,
//! `.` matches a newline), translated to the `regex` syntax by [`ere_to_regex`]; a glob is
//! anchored at both ends. Danger languages are `regex` patterns that must match the whole
//! line. Bytes, not characters: sudo compares bytes, and any byte but NUL can be in an argv.
//! When the automata grow past their budget the answer is [`Answer::Unknown`], never a guess.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use regex_automata::hybrid::LazyStateID;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::nfa::thompson;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind};

use super::*;

/// Bytes of lazy-DFA cache per automaton; past it the walk gives up (`Unknown`).
const CACHE_BYTES: usize = 4 << 20;
/// Product states a walk may visit before it gives up.
const MAX_STATES: usize = 200_000;

/// A compiled language of argument lines.
pub(super) struct Lang {
    dfa: DFA,
    /// sudo's search semantics (a rule) rather than a whole-line match (a danger).
    search: bool,
    /// The states computed so far, kept between walks: a danger is asked about every rule of
    /// a file, and a rule about every danger of its tool.
    cache: Mutex<Cache>,
}

impl Lang {
    /// A language that must match the whole line: `pattern` in `regex` syntax, implicitly
    /// anchored at both ends.
    pub(super) fn full(pattern: &str) -> Option<Lang> {
        build(&format!("^(?:{pattern})$"), false)
    }

    /// What a rule's arguments admit, as sudo matches them, with every bounded repetition
    /// unbounded above (`{0,62}` → `{0,}`): no danger depends on a word's length or on how
    /// many words there are, and the relaxed automaton is a small fraction of the exact one.
    /// It admits more, never less, so a "no" stays a "no".
    pub(super) fn of_args(args: &Args) -> Option<Lang> {
        match args {
            Args::Any => Lang::full("(?s:.*)"),
            Args::Empty => Lang::full(""),
            Args::Glob(g) => build(&glob_to_regex(g), true),
            Args::Regex(r) => build(&unbound(&ere_to_regex(r)), true),
            Args::Unterminated(_) | Args::EarlyDollar(..) => None,
        }
    }
}

/// `{m,n}` → `{m,}` in a `regex` pattern (outside brackets and escapes).
fn unbound(re: &str) -> String {
    static BOUND: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\{([0-9]+),[0-9]+\}").expect("static regex"));
    let mut out = String::with_capacity(re.len());
    let mut rest = re;
    let mut in_class = false;
    while let Some(c) = rest.chars().next() {
        if c == '\\' {
            let n = rest[1..].chars().next().map_or(0, char::len_utf8);
            out.push_str(&rest[..1 + n]);
            rest = &rest[1 + n..];
            continue;
        }
        if !in_class
            && c == '{'
            && let Some(m) = BOUND.captures(rest)
        {
            out.push_str(&format!("{{{},}}", &m[1]));
            rest = &rest[m[0].len()..];
            continue;
        }
        match c {
            '[' => in_class = true,
            ']' => in_class = false,
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn build(pattern: &str, search: bool) -> Option<Lang> {
    let dfa = DFA::builder()
        .configure(
            DFA::config()
                .match_kind(MatchKind::All)
                .cache_capacity(CACHE_BYTES)
                .minimum_cache_clear_count(Some(0)),
        )
        .syntax(
            syntax::Config::new()
                .unicode(false)
                .utf8(false)
                .dot_matches_new_line(true),
        )
        .thompson(thompson::Config::new().utf8(false))
        .build(pattern)
        .ok()?;
    let cache = Mutex::new(dfa.create_cache());
    Some(Lang { dfa, search, cache })
}

/// A language's cache for one walk: its own, or a fresh one while another thread uses it.
enum CacheSlot<'a> {
    Shared(MutexGuard<'a, Cache>),
    Own(Box<Cache>),
}

impl CacheSlot<'_> {
    fn of(lang: &Lang) -> CacheSlot<'_> {
        match lang.cache.try_lock() {
            Ok(guard) => CacheSlot::Shared(guard),
            Err(_) => CacheSlot::Own(Box::new(lang.dfa.create_cache())),
        }
    }

    fn get(&mut self) -> &mut Cache {
        match self {
            CacheSlot::Shared(g) => g,
            CacheSlot::Own(c) => c,
        }
    }
}

/// The answer to "does the rule admit such a line?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    /// Yes; the shortest such line.
    Yes(String),
    /// No line is in all the languages.
    No,
    /// The automata outgrew their budget.
    Unknown,
}

/// Where one automaton of the product stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Live(LazyStateID),
    /// Settled for good: a search has matched, or a language to avoid can no longer match.
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Rule,
    Want,
    Avoid,
}

/// Most automata in one product: the rule, a danger, and a language to avoid.
const MAX_MACHINES: usize = 4;

/// One product state: where each automaton stands (unused places stay `Done`).
type State = [Slot; MAX_MACHINES];

/// Whether `rule` admits a line in every language of `want` and in none of `avoid`.
pub(super) fn admits(rule: &Lang, want: &[&Lang], avoid: &[&Lang]) -> Answer {
    let mut machines: Vec<(&Lang, Role)> = vec![(rule, Role::Rule)];
    machines.extend(want.iter().map(|l| (*l, Role::Want)));
    machines.extend(avoid.iter().map(|l| (*l, Role::Avoid)));
    assert!(
        machines.len() <= MAX_MACHINES,
        "too many automata in one product"
    );
    let mut caches: Vec<CacheSlot> = machines.iter().map(|(l, _)| CacheSlot::of(l)).collect();
    if let Some(answer) = walk(&machines, &mut caches) {
        return answer;
    }
    // A kept cache may have filled up over earlier walks: once more from empty caches.
    for ((lang, _), cache) in machines.iter().zip(caches.iter_mut()) {
        cache.get().reset(&lang.dfa);
    }
    walk(&machines, &mut caches).unwrap_or(Answer::Unknown)
}

fn walk(machines: &[(&Lang, Role)], caches: &mut [CacheSlot]) -> Option<Answer> {
    let mut start: State = [Slot::Done; MAX_MACHINES];
    for (i, ((lang, _), cache)) in machines.iter().zip(caches.iter_mut()).enumerate() {
        let anchored = if lang.search {
            Anchored::No
        } else {
            Anchored::Yes
        };
        let input = Input::new(&[][..]).anchored(anchored);
        start[i] = Slot::Live(lang.dfa.start_state_forward(cache.get(), &input).ok()?);
    }
    let bytes = alphabet(machines);
    // Every state reached, with the state and byte it was first reached from.
    let mut index: HashMap<State, u32> = HashMap::new();
    let mut states: Vec<(State, u32, u8)> = vec![(start, u32::MAX, 0)];
    index.insert(start, 0);
    let mut at = 0usize;
    while at < states.len() {
        let state = states[at].0;
        if accepts(machines, caches, &state)? {
            return Some(Answer::Yes(witness(&states, at)));
        }
        'bytes: for &b in &bytes {
            let mut next: State = [Slot::Done; MAX_MACHINES];
            for (i, (lang, role)) in machines.iter().enumerate() {
                let Slot::Live(sid) = state[i] else {
                    continue;
                };
                let n = lang.dfa.next_state(caches[i].get(), sid, b).ok()?;
                if n.is_quit() {
                    return None;
                }
                next[i] = match role {
                    Role::Rule if n.is_match() => Slot::Done,
                    Role::Rule | Role::Want if n.is_dead() => continue 'bytes,
                    Role::Avoid if n.is_dead() => Slot::Done,
                    _ => Slot::Live(n),
                };
            }
            if let std::collections::hash_map::Entry::Vacant(e) = index.entry(next) {
                if states.len() >= MAX_STATES {
                    return None;
                }
                e.insert(states.len() as u32);
                states.push((next, at as u32, b));
            }
        }
        at += 1;
    }
    Some(Answer::No)
}

/// Whether the line that led to `state` is accepted by the rule and every wanted language and
/// rejected by every language to avoid.
fn accepts(machines: &[(&Lang, Role)], caches: &mut [CacheSlot], state: &State) -> Option<bool> {
    for (i, (lang, role)) in machines.iter().enumerate() {
        let matched = match state[i] {
            Slot::Done => continue,
            Slot::Live(sid) => lang
                .dfa
                .next_eoi_state(caches[i].get(), sid)
                .ok()?
                .is_match(),
        };
        if matched != (*role != Role::Avoid) {
            return Some(false);
        }
    }
    Some(true)
}

fn witness(states: &[(State, u32, u8)], mut at: usize) -> String {
    let mut bytes = Vec::new();
    while states[at].1 != u32::MAX {
        bytes.push(states[at].2);
        at = states[at].1 as usize;
    }
    bytes.reverse();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One byte for each class of bytes that every automaton treats alike (NUL never: no argv
/// carries it), the most readable one of its class first: witnesses read like command lines.
fn alphabet(machines: &[(&Lang, Role)]) -> Vec<u8> {
    let readable = (b'a'..=b'z')
        .chain(b'0'..=b'9')
        .chain(*b" -/._:=")
        .chain(b'A'..=b'Z')
        .chain(0x21..=0x7e)
        .chain(1..=0xff);
    let mut seen_keys = std::collections::HashSet::new();
    let mut out = Vec::new();
    for b in readable {
        let key: Vec<u8> = machines
            .iter()
            .map(|(l, _)| l.dfa.byte_classes().get(b))
            .collect();
        if seen_keys.insert(key) {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(r: &str) -> Lang {
        Lang::of_args(&Args::Regex(r.into())).unwrap()
    }

    fn yes(r: &Lang, want: &str) -> Option<String> {
        match admits(r, &[&Lang::full(want).unwrap()], &[]) {
            Answer::Yes(w) => Some(w),
            Answer::No => None,
            Answer::Unknown => panic!("unknown for {want}"),
        }
    }

    #[test]
    fn every_shape_of_a_rule_is_decided() {
        let exec = "exec(?: .*)?";
        assert_eq!(
            yes(&rule("^exec [0-9]+ -- .*$"), exec).as_deref(),
            Some("exec 0 -- ")
        );
        assert!(yes(&rule("^(enter|exec) 1[0-9]{2}$"), exec).is_some());
        assert!(yes(&rule("^list$"), exec).is_none());
        // Half-anchored alternation: anything that ends in `stop N`.
        assert!(yes(&rule("^start [0-9]+|stop [0-9]+$"), "exec .* stop [0-9]+").is_some());
        // A literal and a glob.
        let lit = Lang::of_args(&Args::Glob("exec 100 -- uptime".into())).unwrap();
        assert_eq!(yes(&lit, exec).as_deref(), Some("exec 100 -- uptime"));
        let glob = Lang::of_args(&Args::Glob("e* 1".into())).unwrap();
        assert!(yes(&glob, exec).is_some());
        assert!(yes(&Lang::of_args(&Args::Empty).unwrap(), exec).is_none());
        assert!(yes(&Lang::of_args(&Args::Any).unwrap(), exec).is_some());
        // A newline is a byte like any other inside an argument.
        assert!(yes(&rule("^list$"), "list\n.*").is_none());
        assert!(yes(&rule("^list.$"), "list\n").is_some());
    }

    #[test]
    fn bounds_are_relaxed_outside_classes() {
        assert_eq!(unbound("a[0-9]{2,8}b{3}"), "a[0-9]{2,}b{3}");
        assert_eq!(unbound(r"x\{1,2\}[{1,2}]"), r"x\{1,2\}[{1,2}]");
    }

    #[test]
    fn languages_to_avoid_subtract() {
        let restore = Lang::full("restore .*").unwrap();
        let unpriv = Lang::full(".* --unprivileged 1(?: .*)?").unwrap();
        let closed = rule("^restore [0-9]+ local:x --unprivileged 1$");
        assert_eq!(admits(&closed, &[&restore], &[&unpriv]), Answer::No);
        let open = rule("^restore [0-9]+ local:x( --unprivileged 1)?$");
        assert_eq!(
            admits(&open, &[&restore], &[&unpriv]),
            Answer::Yes("restore 0 local:x".into())
        );
    }
}
