//! Logical lines (comments, continuations, includes) and the small lexing helpers
//! shared by the parser: a byte cursor, alias names, unescaped searches and splits.

use super::*;

/// One entry of the file: physical lines joined at `\`-newline, comment removed.
#[derive(Debug, Clone)]
pub(super) struct Logical {
    /// 1-based line the entry starts on.
    pub(super) line: usize,
    pub(super) text: String,
    pub(super) include: bool,
}

pub(super) fn logical_lines(text: &str) -> Vec<Logical> {
    static INCLUDE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(#include|#includedir|@include|@includedir)(\s|$)").expect("static regex")
    });
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if buf.is_empty() {
            start = i + 1;
            if INCLUDE.is_match(raw) {
                out.push(Logical {
                    line: start,
                    text: raw.trim().to_string(),
                    include: true,
                });
                continue;
            }
        }
        let part = strip_comment(raw).trim_end();
        let trailing = part.len() - part.trim_end_matches('\\').len();
        let continued = trailing % 2 == 1;
        let part = if continued {
            &part[..part.len() - 1]
        } else {
            part
        };
        // sudo treats `\`-newline as a blank between words; indentation of the next line
        // is layout. (Inside a regex sudo inserts nothing; no sane rule splits one there.)
        if !buf.is_empty() && !part.trim().is_empty() {
            buf.push(' ');
        }
        buf.push_str(if buf.is_empty() {
            part.trim_start()
        } else {
            part.trim()
        });
        if continued {
            continue;
        }
        let t = buf.trim().to_string();
        buf.clear();
        if !t.is_empty() {
            out.push(Logical {
                line: start,
                text: t,
                include: false,
            });
        }
    }
    let t = buf.trim();
    if !t.is_empty() {
        out.push(Logical {
            line: start,
            text: t.to_string(),
            include: false,
        });
    }
    out
}

/// Cut a `#` comment. As in sudo's lexer, `#` followed by a digit (or `-digit`) is a uid or
/// gid, not a comment; an escaped `\#` and a `#` inside double quotes are literal.
pub(super) fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    let mut quoted = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => quoted = !quoted,
            b'#' if !quoted => {
                let next = b.get(i + 1).copied();
                let uid = matches!(next, Some(b'0'..=b'9'))
                    || (next == Some(b'-') && matches!(b.get(i + 2), Some(b'0'..=b'9')));
                if !uid {
                    return &line[..i];
                }
            }
            _ => {}
        }
        i += 1;
    }
    line
}

/// A byte cursor over ASCII-delimited text. It only stops at ASCII bytes, so every slice
/// taken at its position is on a char boundary.
pub(super) struct Cursor<'a> {
    pub(super) s: &'a str,
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(s: &'a str) -> Cursor<'a> {
        Cursor { s, pos: 0 }
    }
    pub(super) fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }
    pub(super) fn peek_at(&self, n: usize) -> Option<u8> {
        self.s.as_bytes().get(self.pos + n).copied()
    }
    pub(super) fn rest(&self) -> &'a str {
        &self.s[self.pos.min(self.s.len())..]
    }
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }
    pub(super) fn bump(&mut self) {
        if self.pos < self.s.len() {
            self.pos += 1;
        }
    }
    pub(super) fn skip_blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }
    /// Advance to the first byte satisfying `stop` (or the end), honouring `\` escapes.
    pub(super) fn take_until(&mut self, stop: impl Fn(u8) -> bool) {
        while let Some(b) = self.peek() {
            if b == b'\\' {
                self.pos = (self.pos + 2).min(self.s.len());
                continue;
            }
            if stop(b) {
                break;
            }
            self.pos += 1;
        }
    }
}

pub(super) fn is_alias_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|f| f.is_ascii_uppercase())
        && b.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

pub(super) fn find_unescaped(s: &str, from: usize, needle: u8) -> Option<usize> {
    let b = s.as_bytes();
    let mut quoted = false;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'"' => quoted = !quoted,
            c if c == needle && !quoted => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

pub(super) fn split_unquoted(s: &str, sep: u8) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut from = 0;
    while let Some(i) = find_unescaped(s, from, sep) {
        out.push(&s[start..i]);
        start = i + 1;
        from = i + 1;
    }
    out.push(&s[start..]);
    out
}

pub(super) fn split_unescaped_blanks(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut start = None;
    let mut i = 0;
    while i < b.len() {
        let blank = matches!(b[i], b' ' | b'\t');
        if blank {
            if let Some(st) = start.take() {
                out.push(&s[st..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    if let Some(st) = start {
        out.push(&s[st..b.len().min(s.len())]);
    }
    out
}
