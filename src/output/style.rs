//! Colour where it helps: guest, node and task states, and the `pxagent:`
//! prefix of errors — never in JSON, never on a stream that is not a terminal unless forced.
//!
//! The decision ([`wanted`]) follows the common conventions, most explicit first: `--color
//! always|never`; then `NO_COLOR` (any non-empty value: no colour, <https://no-color.org>);
//! `CLICOLOR_FORCE` (non-empty and not `0`: colour even into a pipe); `TERM=dumb` and
//! `CLICOLOR=0` (no colour); else colour exactly when the stream is a terminal. The front end
//! decides once per run ([`configure`]); JSON mode and the MCP server never colour.
//!
//! Views do not write escape sequences themselves: [`paint`] wraps text in private-use marker
//! characters, which the output layer turns into SGR sequences (or drops) as it writes
//! ([`render`]). Host data is escaped before it is painted ([`super::escape`] escapes these
//! markers too), so the only markers that reach [`render`] are pxagent's own, and the only
//! escape sequences that reach the terminal are the few SGR colours below.

use super::escape::is_marker;
use std::sync::atomic::{AtomicBool, Ordering};

/// `--color`: when to colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorChoice {
    /// Colour a stream that is a terminal, unless the environment says otherwise.
    #[default]
    Auto,
    /// Always colour (also into a pipe), whatever the environment says.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// The values `--color` takes.
    pub const NAMES: [&'static str; 3] = ["auto", "always", "never"];

    /// Parse `auto`, `always` or `never`.
    pub fn parse(s: &str) -> Option<ColorChoice> {
        match s {
            "auto" => Some(ColorChoice::Auto),
            "always" => Some(ColorChoice::Always),
            "never" => Some(ColorChoice::Never),
            _ => None,
        }
    }
}

/// What a painted text means; each maps to one SGR colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Running, online, OK (green).
    Good,
    /// Failed, error, offline (red).
    Bad,
    /// Paused, warnings, in between (yellow).
    Warn,
    /// Stopped, absent, not in use (grey).
    Dim,
    /// Headings (bold).
    Strong,
}

const TONES: [(Tone, &str); 5] = [
    (Tone::Good, "\u{1b}[32m"),
    (Tone::Bad, "\u{1b}[31m"),
    (Tone::Warn, "\u{1b}[33m"),
    (Tone::Dim, "\u{1b}[90m"),
    (Tone::Strong, "\u{1b}[1m"),
];
const RESET: &str = "\u{1b}[0m";
/// Ends a painted span.
const END: char = '\u{e000}';
/// The first tone's marker; tone `i` of [`TONES`] is `FIRST + i`.
const FIRST: u32 = 0xe001;

static STDOUT: AtomicBool = AtomicBool::new(false);
static STDERR: AtomicBool = AtomicBool::new(false);

/// Whether a stream gets colour, from the choice, the environment (`env` looks a variable up)
/// and whether the stream is a terminal. Pure, so every rule is tested.
pub fn wanted(choice: ColorChoice, env: impl Fn(&str) -> Option<String>, terminal: bool) -> bool {
    match choice {
        ColorChoice::Never => false,
        ColorChoice::Always => true,
        ColorChoice::Auto => {
            let set = |k: &str| env(k).filter(|v| !v.is_empty());
            if set("NO_COLOR").is_some() {
                return false;
            }
            if set("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
                return true;
            }
            if set("TERM").as_deref() == Some("dumb") || set("CLICOLOR").as_deref() == Some("0") {
                return false;
            }
            terminal
        }
    }
}

/// Decide colour for this run's stdout and stderr (JSON mode: never). Called once by each
/// front end before it writes anything.
pub fn configure(choice: ColorChoice, json: bool) {
    use std::io::IsTerminal;
    let env = |k: &str| std::env::var(k).ok();
    let out = !json && wanted(choice, env, std::io::stdout().is_terminal());
    let err = !json && wanted(choice, env, std::io::stderr().is_terminal());
    STDOUT.store(out, Ordering::Relaxed);
    STDERR.store(err, Ordering::Relaxed);
}

/// Whether stdout is coloured in this run.
pub fn stdout_colored() -> bool {
    STDOUT.load(Ordering::Relaxed)
}

/// `text` in `tone` on stdout, as markers for [`render`] (unchanged when stdout gets no
/// colour). `text` must already be escaped if it carries host data.
pub fn paint(tone: Tone, text: &str) -> String {
    if !stdout_colored() || text.is_empty() {
        return text.to_string();
    }
    let i = TONES.iter().position(|(t, _)| *t == tone).unwrap_or(0) as u32;
    let start = char::from_u32(FIRST + i).unwrap_or(END);
    format!("{start}{text}{END}")
}

/// `text` in `tone` for stderr: the SGR sequence itself when stderr gets colour.
pub fn paint_stderr(tone: Tone, text: &str) -> String {
    if !STDERR.load(Ordering::Relaxed) {
        return text.to_string();
    }
    let sgr = TONES
        .iter()
        .find(|(t, _)| *t == tone)
        .map_or("", |(_, s)| s);
    format!("{sgr}{text}{RESET}")
}

/// The tone of a state word Proxmox reports (guest, node, storage, HA and task states), or
/// an audit record's decision.
pub fn tone_of(state: &str) -> Option<Tone> {
    let s = state.trim();
    Some(match s.to_ascii_lowercase().as_str() {
        "running" | "online" | "ok" | "available" | "active" | "started" | "yes" | "allowed"
        | "confirmed" => Tone::Good,
        "stopped" | "disabled" | "ignored" | "inactive" | "no" | "dry_run" => Tone::Dim,
        "paused" | "suspended" | "prelaunch" | "migrate" | "relocate" | "request_stop"
        | "maintenance" | "freeze" => Tone::Warn,
        "error" | "failed" | "offline" | "fence" | "unknown" | "io-error" | "internal-error"
        | "refused" => Tone::Bad,
        _ if s.starts_with("WARNINGS") => Tone::Warn,
        _ => return None,
    })
}

/// A state word, painted by its meaning (escaped first: it comes from the host).
pub fn state(word: &str) -> String {
    let shown = super::escape::cell(word);
    match tone_of(word) {
        Some(t) => paint(t, &shown),
        None => shown.into_owned(),
    }
}

/// A task's exit status: `OK` good, `WARNINGS: N` a warning, anything else (the error text)
/// bad; empty while it runs.
pub fn exit_status(status: &str) -> String {
    let shown = super::escape::cell(status);
    let tone = match status {
        "" => return String::new(),
        "OK" => Tone::Good,
        s if s.starts_with("WARNINGS") => Tone::Warn,
        _ => Tone::Bad,
    };
    paint(tone, &shown)
}

/// The width of `s` on the screen, markers left out.
pub fn visible_width(s: &str) -> usize {
    s.chars().filter(|c| !is_marker(*c)).count()
}

/// Turn markers into SGR sequences (`colour`) or drop them.
pub fn render(text: &str, colour: bool) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_marker) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_marker(c) {
            out.push(c);
        } else if colour {
            match c {
                END => out.push_str(RESET),
                c => {
                    let i = (c as u32).saturating_sub(FIRST) as usize;
                    out.push_str(TONES.get(i).map_or(RESET, |(_, s)| s));
                }
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_flag_beats_the_environment() {
        let no = [("NO_COLOR", "1")];
        assert!(wanted(ColorChoice::Always, env(&no), false));
        assert!(!wanted(ColorChoice::Never, env(&[]), true));
        assert!(!wanted(
            ColorChoice::Never,
            env(&[("CLICOLOR_FORCE", "1")]),
            true
        ));
    }

    #[test]
    fn auto_follows_the_conventions() {
        assert!(wanted(ColorChoice::Auto, env(&[]), true));
        assert!(!wanted(ColorChoice::Auto, env(&[]), false), "a pipe");
        assert!(!wanted(ColorChoice::Auto, env(&[("NO_COLOR", "1")]), true));
        assert!(
            wanted(ColorChoice::Auto, env(&[("NO_COLOR", "")]), true),
            "an empty NO_COLOR is unset"
        );
        assert!(wanted(
            ColorChoice::Auto,
            env(&[("CLICOLOR_FORCE", "1")]),
            false
        ));
        assert!(!wanted(
            ColorChoice::Auto,
            env(&[("CLICOLOR_FORCE", "0")]),
            false
        ));
        assert!(!wanted(
            ColorChoice::Auto,
            env(&[("NO_COLOR", "x"), ("CLICOLOR_FORCE", "1")]),
            true
        ));
        assert!(!wanted(ColorChoice::Auto, env(&[("TERM", "dumb")]), true));
        assert!(wanted(
            ColorChoice::Auto,
            env(&[("TERM", "dumb"), ("CLICOLOR_FORCE", "1")]),
            true
        ));
        assert!(!wanted(ColorChoice::Auto, env(&[("CLICOLOR", "0")]), true));
    }

    #[test]
    fn markers_become_sgr_or_nothing() {
        let painted = format!("a {}run{} b", '\u{e001}', END);
        assert_eq!(render(&painted, false), "a run b");
        assert_eq!(render(&painted, true), "a \u{1b}[32mrun\u{1b}[0m b");
        assert_eq!(visible_width(&painted), 7);
    }

    #[test]
    fn states_have_tones() {
        assert_eq!(tone_of("running"), Some(Tone::Good));
        assert_eq!(tone_of("stopped"), Some(Tone::Dim));
        assert_eq!(tone_of("paused"), Some(Tone::Warn));
        assert_eq!(tone_of("offline"), Some(Tone::Bad));
        assert_eq!(tone_of("WARNINGS: 2"), Some(Tone::Warn));
        assert_eq!(tone_of("web"), None);
    }
}
