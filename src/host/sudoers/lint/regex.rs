//! Globs and POSIX EREs as sudo reads them, translated to the `regex` crate and run
//! against probe command lines; the shape analysis of a regex.

use super::*;

pub(super) fn has_star(glob: &str) -> bool {
    let b = glob.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'*' => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// The probes a rule's arguments admit (all of them when the arguments are unconstrained).
pub(super) fn admitted(args: &Args, probes: &[String]) -> Vec<String> {
    let re = match args {
        Args::Any => return probes.to_vec(),
        Args::Unterminated(_) | Args::EarlyDollar(..) => return Vec::new(),
        Args::Empty => return Vec::new(),
        Args::Glob(g) => Regex::new(&glob_to_regex(g)),
        Args::Regex(r) => Regex::new(&ere_to_regex(r)),
    };
    match re {
        Ok(re) => probes.iter().filter(|p| re.is_match(p)).cloned().collect(),
        Err(_) => Vec::new(),
    }
}

pub(super) fn glob_matches(glob: &str, text: &str) -> bool {
    Regex::new(&glob_to_regex(glob)).is_ok_and(|re| re.is_match(text))
}

/// An fnmatch pattern (no FNM_PATHNAME: `*` crosses `/` and spaces) as an anchored Rust regex.
pub(super) fn glob_to_regex(glob: &str) -> String {
    let mut out = String::from("(?s)^");
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            '\\' if i + 1 < chars.len() => {
                i += 1;
                out.push_str(&::regex::escape(&chars[i].to_string()));
            }
            '[' => match parse_bracket(&chars, i, true) {
                Some((end, set)) => {
                    out.push_str(&set.to_regex());
                    i = end;
                    continue;
                }
                None => out.push_str(r"\["),
            },
            c => out.push_str(&::regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out.push('$');
    out
}

/// A POSIX ERE as sudo's regcomp sees it, translated for the `regex` crate. Differences
/// handled: a backslash inside brackets is literal in POSIX; `.` matches newline; `\<`
/// `\>` (GNU) become `\b`; unknown escapes are the literal character.
pub(super) fn ere_to_regex(re: &str) -> String {
    let chars: Vec<char> = re.chars().collect();
    let mut out = String::from("(?s)");
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if i + 1 < chars.len() => {
                let n = chars[i + 1];
                match n {
                    'w' | 'W' | 's' | 'S' | 'b' | 'B' => {
                        out.push('\\');
                        out.push(n);
                    }
                    '<' | '>' => out.push_str(r"\b"),
                    _ => out.push_str(&::regex::escape(&n.to_string())),
                }
                i += 2;
                continue;
            }
            '[' => {
                if let Some((end, set)) = parse_bracket(&chars, i, false) {
                    out.push_str(&set.to_regex());
                    i = end;
                    continue;
                }
                out.push_str(r"\[");
            }
            '{' => {
                let rest: String = chars[i..].iter().collect();
                static INTERVAL: LazyLock<Regex> =
                    LazyLock::new(|| Regex::new(r"^\{[0-9]+(,[0-9]*)?\}").expect("static regex"));
                match INTERVAL.find(&rest) {
                    Some(m) => {
                        out.push_str(m.as_str());
                        i += m.as_str().chars().count();
                        continue;
                    }
                    None => out.push_str(r"\{"),
                }
            }
            '.' | '*' | '+' | '?' | '|' | '(' | ')' | '^' | '$' => out.push(c),
            _ => out.push_str(&::regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out
}

/// A bracket expression: ranges and POSIX classes, possibly negated.
#[derive(Debug, Clone, Default)]
pub(super) struct CharSet {
    pub(super) negated: bool,
    pub(super) ranges: Vec<(char, char)>,
    pub(super) classes: Vec<String>,
}

impl CharSet {
    pub(super) fn contains(&self, ch: char) -> bool {
        let in_class = |name: &str| match name {
            "space" | "blank" => ch == ' ',
            "punct" | "graph" => ch == '-' || ch == '=',
            "print" => ch == ' ' || ch == '-' || ch == '=',
            _ => false,
        };
        let hit = self.ranges.iter().any(|&(lo, hi)| lo <= ch && ch <= hi)
            || self.classes.iter().any(|c| in_class(c));
        hit != self.negated
    }

    pub(super) fn to_regex(&self) -> String {
        let esc = |c: char| {
            if c.is_ascii_alphanumeric() || c == ' ' || !c.is_ascii() {
                c.to_string()
            } else {
                // A hex escape is a literal in any class: `\<` and `\>` are word-boundary
                // assertions to the regex crate, which it refuses inside brackets.
                format!("\\x{{{:X}}}", c as u32)
            }
        };
        let mut s = String::from("[");
        if self.negated {
            s.push('^');
        }
        for &(lo, hi) in &self.ranges {
            s.push_str(&esc(lo));
            if hi != lo {
                s.push('-');
                s.push_str(&esc(hi));
            }
        }
        for c in &self.classes {
            s.push_str(&format!("[:{c}:]"));
        }
        if self.ranges.is_empty() && self.classes.is_empty() {
            // `[^]` cannot happen in POSIX; keep the regex valid anyway.
            s.push_str("\\x00");
        }
        s.push(']');
        s
    }
}

/// Parse `[...]` starting at `chars[start] == '['`; returns the index after `]`. In a glob
/// (`glob`), `!` also negates and `\` escapes; in an ERE `\` is literal inside brackets.
pub(super) fn parse_bracket(chars: &[char], start: usize, glob: bool) -> Option<(usize, CharSet)> {
    let mut set = CharSet::default();
    let mut i = start + 1;
    if chars.get(i) == Some(&'^') || (glob && chars.get(i) == Some(&'!')) {
        set.negated = true;
        i += 1;
    }
    let mut first = true;
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && !first {
            return Some((i + 1, set));
        }
        first = false;
        if c == '[' && matches!(chars.get(i + 1), Some(':' | '.' | '=')) {
            let kind = chars[i + 1];
            let close = (i + 2..chars.len().saturating_sub(1))
                .find(|&j| chars[j] == kind && chars[j + 1] == ']')?;
            let inner: String = chars[i + 2..close].iter().collect();
            if kind == ':' {
                set.classes.push(inner);
            } else if let Some(ch) = inner.chars().next() {
                set.ranges.push((ch, ch));
            }
            i = close + 2;
            continue;
        }
        let lo = if glob && c == '\\' && i + 1 < chars.len() {
            i += 1;
            chars[i]
        } else {
            c
        };
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&n| n != ']') {
            let hi = chars[i + 2];
            set.ranges.push((lo, hi.max(lo)));
            i += 3;
        } else {
            set.ranges.push((lo, lo));
            i += 1;
        }
    }
    None
}

/// What a regex's structure says about its breadth.
#[derive(Debug, Default)]
pub(super) struct Shape {
    /// A `|` outside any group: the regex is only half anchored.
    pub(super) top_alternation: bool,
    /// Repeated atoms that can produce an option word: `.*`, `[^ ]+`, `( [a-z-]+)*` …
    pub(super) broad: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct AtomProps {
    pub(super) space: bool,
    pub(super) dash: bool,
    pub(super) eq: bool,
    /// A class (`.`, `[…]`, `\S`), not a literal.
    pub(super) class: bool,
    /// Can begin with a class that produces `-` (a word the caller chooses can start there).
    pub(super) starts_dash: bool,
    /// Can end with a space.
    pub(super) ends_space: bool,
    /// Contains a space followed by a class that can produce `-`: a caller-chosen word
    /// that may be an option.
    pub(super) word_dash: bool,
}

/// One nesting level of an ERE while scanning it (level 0 is the whole regex).
#[derive(Debug, Default)]
pub(super) struct Level {
    pub(super) start: usize,
    pub(super) props: AtomProps,
    pub(super) first: Option<bool>,
    pub(super) after_space: bool,
    pub(super) open_after_space: bool,
    /// The next atom here is surely inside a word that began earlier: the atom before it is
    /// required (never skipped) and can match no space. A class there cannot start a new
    /// word, so `-` and `=` in it make no `--option=value` (a URL's query: `[?][a-z=&-]*`).
    pub(super) inside_word: bool,
    /// `inside_word` where the level opened: each alternative of a group starts there again.
    pub(super) opened_inside_word: bool,
}

impl Level {
    /// After an atom that may match a space, or may be skipped, the next one may start a word.
    pub(super) fn step(&mut self, space: bool, optional: bool) {
        if space {
            self.inside_word = false;
        } else if !optional {
            self.inside_word = true;
        }
    }

    pub(super) fn add(&mut self, p: AtomProps) {
        if self.first.is_none() {
            self.first = Some(p.starts_dash);
        }
        if self.after_space && p.starts_dash {
            self.props.word_dash = true;
        }
        self.props.word_dash |= p.word_dash;
        self.props.space |= p.space;
        self.props.dash |= p.dash;
        self.props.eq |= p.eq;
        self.after_space = p.ends_space;
    }
}

pub(super) fn ere_shape(re: &str) -> Shape {
    let chars: Vec<char> = re.chars().collect();
    let mut shape = Shape::default();
    let mut levels: Vec<Level> = vec![Level::default()];
    let class = |space: bool, dash: bool, eq: bool| AtomProps {
        space,
        dash,
        eq,
        class: true,
        starts_dash: dash,
        ends_space: space,
        word_dash: false,
    };
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let props = match chars[i] {
            '\\' => {
                let n = chars.get(i + 1).copied().unwrap_or('\\');
                i += 2;
                match n {
                    's' => class(true, false, false),
                    'S' => class(false, true, true),
                    c => literal_props(c),
                }
            }
            '[' => match parse_bracket(&chars, i, false) {
                Some((end, set)) => {
                    i = end;
                    class(set.contains(' '), set.contains('-'), set.contains('='))
                }
                None => {
                    i += 1;
                    literal_props('[')
                }
            },
            '.' => {
                i += 1;
                class(true, true, true)
            }
            '(' => {
                let open_after_space = levels.last().is_some_and(|l| l.after_space);
                let inside_word = levels.last().is_some_and(|l| l.inside_word);
                levels.push(Level {
                    start: i,
                    open_after_space,
                    inside_word,
                    opened_inside_word: inside_word,
                    ..Default::default()
                });
                i += 1;
                continue;
            }
            ')' if levels.len() > 1 => {
                i += 1;
                let level = levels.pop().expect("checked above");
                let (multi, end) = quantifier(&chars, i);
                let skippable = optional(&chars, i);
                i = end;
                let starts_dash = level.first.unwrap_or(false);
                // Repeated, the group's end meets its start (or what precedes it).
                let wraps = starts_dash && (level.after_space || level.open_after_space);
                if multi && (level.props.word_dash || wraps) {
                    shape.broad.push(chars[level.start..i].iter().collect());
                }
                let p = AtomProps {
                    starts_dash,
                    ends_space: level.after_space,
                    word_dash: level.props.word_dash || (multi && wraps),
                    ..level.props
                };
                let parent = levels.last_mut().expect("level 0 stays");
                parent.add(p);
                parent.step(level.props.space, skippable);
                continue;
            }
            '|' => {
                if levels.len() == 1 {
                    shape.top_alternation = true;
                }
                let level = levels.last_mut().expect("level 0 stays");
                level.inside_word = level.opened_inside_word;
                i += 1;
                continue;
            }
            '^' | '$' => {
                i += 1;
                continue;
            }
            c => {
                i += 1;
                literal_props(c)
            }
        };
        let (multi, end) = quantifier(&chars, i);
        let skippable = optional(&chars, i);
        i = end;
        let level = levels.last_mut().expect("level 0 stays");
        // `-` and `=` together make a `--option=value` only where a word can start.
        if multi && props.class && props.dash && (props.space || (props.eq && !level.inside_word)) {
            shape.broad.push(chars[start..i].iter().collect());
        }
        level.add(props);
        level.step(props.space, skippable);
    }
    shape
}

/// Whether the quantifier at `i` lets its atom match nothing (`?`, `*`, `{0,…}`).
pub(super) fn optional(chars: &[char], i: usize) -> bool {
    match chars.get(i) {
        Some('?' | '*') => true,
        Some('{') => chars.get(i + 1) == Some(&'0'),
        _ => false,
    }
}

/// A literal character: never a caller-chosen word start (`--vmid` written out is fine).
pub(super) fn literal_props(c: char) -> AtomProps {
    AtomProps {
        space: c == ' ',
        dash: c == '-',
        eq: c == '=',
        ends_space: c == ' ',
        ..Default::default()
    }
}

/// Read a quantifier at `i`: whether it allows more than one repetition, and where it ends.
pub(super) fn quantifier(chars: &[char], i: usize) -> (bool, usize) {
    match chars.get(i) {
        Some('*' | '+') => (true, i + 1),
        Some('?') => (false, i + 1),
        Some('{') => {
            let Some(close) = chars[i..].iter().position(|&c| c == '}').map(|p| p + i) else {
                return (false, i);
            };
            let inner: String = chars[i + 1..close].iter().collect();
            let (m, n) = match inner.split_once(',') {
                Some((m, n)) => (
                    m.parse::<u32>().ok(),
                    if n.is_empty() {
                        Some(u32::MAX)
                    } else {
                        n.parse().ok()
                    },
                ),
                None => {
                    let m = inner.parse::<u32>().ok();
                    (m, m)
                }
            };
            match (m, n) {
                (Some(_), Some(n)) => (n >= 2, close + 1),
                _ => (false, i),
            }
        }
        _ => (false, i),
    }
}
