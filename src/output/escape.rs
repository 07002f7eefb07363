//! Host data cannot drive the terminal: the one escaper of the output layer.
//!
//! Names, descriptions, task logs, error texts and guest output come from the Proxmox host or
//! from inside a guest, so they are untrusted: an ESC sequence in a VM's name could recolour,
//! hide or rewrite what a person sees, set the window title or reach the clipboard (OSC 52),
//! and a bidi override can make text read differently from what it is ("Trojan Source").
//! Every human view, task-log and progress line and error message that carries host data goes
//! through [`cell`] (one table cell or value: nothing but printable text) or [`text`]
//! (multi-line text: line breaks and tabs stay). JSON output needs none of this: serde_json
//! escapes every control character itself.
//!
//! What is escaped: C0 controls (U+0000–U+001F) and DEL, C1 controls (U+0080–U+009F, which
//! some terminals read as CSI and friends), the bidi embeddings, overrides, isolates and marks
//! (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), and the private-use characters the
//! colour layer uses as its own markers (U+E000–U+E00F, see [`super::style`]), so host data
//! escaped here can never carry a colour either. Each becomes Rust's escape form (`\u{1b}`,
//! `\n`, `\t`, `\r`), which is plain ASCII and says exactly which character it was. Table
//! cells and the last net ([`net`]) keep the markers (views paint text they escaped first), so
//! host text that skipped [`cell`] can at worst show in one of pxagent's colours.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as it is.
fn dangerous(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    ) || is_marker(c)
}

fn escape_with(s: &str, keep: impl Fn(char, Option<char>) -> bool) -> Cow<'_, str> {
    if !s.chars().any(dangerous) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if !dangerous(c) || keep(c, chars.peek().copied()) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    Cow::Owned(out)
}

/// One cell or value: every dangerous character escaped, line breaks and tabs included (a
/// table row stays one row).
pub fn cell(s: &str) -> Cow<'_, str> {
    escape_with(s, |_, _| false)
}

/// Multi-line text (a task log, guest output, an error message): line breaks, tabs and the CR
/// of a CRLF line end stay; every other dangerous character is escaped (a lone CR could
/// overwrite the line it ends).
pub fn text(s: &str) -> Cow<'_, str> {
    escape_with(s, |c, next| {
        c == '\n' || c == '\t' || (c == '\r' && next == Some('\n'))
    })
}

/// A table cell or value that may carry pxagent's colour: like [`cell`], but colour markers
/// stay (a state painted by [`super::style::state`] was escaped before it was painted).
pub(super) fn painted_cell(s: &str) -> Cow<'_, str> {
    escape_with(s, |c, _| is_marker(c))
}

/// The last net under a whole human answer (see [`super::Output::success`]): like [`text`],
/// but the colour markers that views put there stay for [`super::style::render`]. A host
/// string that reached this point unescaped can at worst carry one of pxagent's few colours,
/// never a terminal sequence.
pub(super) fn net(s: &str) -> Cow<'_, str> {
    escape_with(s, |c, next| {
        c == '\n' || c == '\t' || (c == '\r' && next == Some('\n')) || is_marker(c)
    })
}

/// Whether `c` is one of the colour markers of [`super::style`] (U+E000–U+E00F).
pub fn is_marker(c: char) -> bool {
    ('\u{e000}'..='\u{e00f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(cell("web-01 ünïcödé"), Cow::Borrowed(_)));
        assert_eq!(text("a\n\tb\r\n"), "a\n\tb\r\n");
    }

    #[test]
    fn terminal_sequences_are_escaped() {
        // CSI colour, OSC 52 (clipboard), a C1 CSI, DEL, a bidi override and an isolate.
        let evil = "x\u{1b}[31mred\u{1b}]52;c;aGk=\u{7}\u{9b}2J\u{7f}\u{202e}txt.exe\u{2066}";
        let shown = cell(evil);
        assert!(!shown.chars().any(dangerous), "{shown}");
        assert_eq!(
            shown,
            "x\\u{1b}[31mred\\u{1b}]52;c;aGk=\\u{7}\\u{9b}2J\\u{7f}\\u{202e}txt.exe\\u{2066}"
        );
    }

    #[test]
    fn cells_stay_on_one_line_and_text_keeps_its_lines() {
        assert_eq!(cell("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(text("a\nb\tc\rd\r\n"), "a\nb\tc\\rd\r\n");
    }

    #[test]
    fn host_data_cannot_forge_a_colour_marker() {
        let forged = format!("{}boom{}", '\u{e001}', '\u{e000}');
        assert_eq!(cell(&forged), "\\u{e001}boom\\u{e000}");
    }
}
