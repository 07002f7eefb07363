//! The only module that writes to stdout.
//!
//! JSON mode: exactly one JSON document per command, success or failure, so an
//! agent can always parse stdout. Table mode: tables and short messages on stdout, errors
//! and hints on stderr. Never a pager, never a prompt here.
//!
//! The shared helpers of every human view live in this layer, so that each area's views
//! (and those added later) look alike and stay safe: [`units`] (sizes, percentages,
//! durations, local times), [`escape`] (host data cannot drive the terminal), [`style`]
//! (colour). Human text is escaped once more as it is written ([`Output::success`]), so even
//! a view that forgot to escape a host string cannot pass a control character through.
//!
//! Layer: output. May import: `base`.

pub mod escape;
pub mod style;
pub mod units;

use std::io::{IsTerminal, Write};

use serde_json::{Value, json};

use crate::base::error::Error;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Tables and messages for people.
    Table,
    /// One JSON document for programs.
    Json,
}

impl Format {
    /// Parse `table` or `json`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "table" => Some(Format::Table),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Writes results in the chosen format.
#[derive(Debug, Clone)]
pub struct Output {
    /// The chosen format.
    pub format: Format,
    /// The host the command talks to, for the JSON envelope.
    pub host: Option<String>,
}

impl Output {
    /// Print a success: `data` in JSON mode, `human` (rendered lazily) in table mode.
    pub fn success(&self, op: &str, data: Value, human: impl FnOnce(&Value) -> String) {
        self.success_with_warnings(op, data, &[], human)
    }

    /// Like [`Output::success`], with the remote command's stderr warnings (a warning on
    /// exit 0 is not a failure, FORMATS.md §1.2): a `warnings` array in JSON, stderr lines
    /// in table mode.
    pub fn success_with_warnings(
        &self,
        op: &str,
        data: Value,
        warnings: &[String],
        human: impl FnOnce(&Value) -> String,
    ) {
        match self.format {
            Format::Json => {
                let mut doc = json!({"ok": true, "op": op, "host": self.host, "data": data});
                if !warnings.is_empty() {
                    doc["warnings"] = json!(warnings);
                }
                write_stdout(&doc.to_string());
            }
            Format::Table => {
                for w in warnings {
                    let label = style::paint_stderr(style::Tone::Warn, "warning:");
                    write_stderr(&format!("{label} {}\n", escape::text(w)));
                }
                let text = human(&data);
                if !text.is_empty() {
                    // The net under every view: controls that reached here unescaped are
                    // escaped now; then pxagent's own colour markers become colour.
                    let safe = escape::net(text.trim_end_matches('\n'));
                    write_stdout(&style::render(&safe, style::stdout_colored()));
                }
            }
        }
    }

    /// Print a failure. `data` carries details some commands have (lint findings).
    pub fn failure(&self, op: &str, err: &Error, data: Option<Value>) {
        match self.format {
            Format::Json => {
                let e = err.to_json();
                let mut doc = json!({"ok": false, "op": op, "host": self.host, "error": e});
                if let Some(d) = data {
                    doc["data"] = d;
                }
                write_stdout(&doc.to_string());
            }
            Format::Table => {
                let prefix = style::paint_stderr(style::Tone::Bad, "pxagent:");
                let mut text = format!("{prefix} {}\n", escape::text(&err.to_string()));
                for line in refusal_hints(err, std::io::stderr().is_terminal()) {
                    text.push_str(&escape::text(&line));
                    text.push('\n');
                }
                write_stderr(&text);
            }
        }
    }
}

/// The lines after an error's message on stderr: its hint, the statement to sign, and — for a
/// person at a terminal — how to pass the phrase or the approval, which
/// the message itself (written for agents to relay) leaves out.
pub fn refusal_hints(err: &Error, at_terminal: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let confirm = |phrase: &str| {
        format!(
            "hint: to proceed, run the same command again with --confirm {}",
            crate::base::text::quote_word(phrase)
        )
    };
    match err {
        Error::ConfirmationRequired { hint, phrase, .. } => {
            if let Some(h) = hint {
                lines.push(format!("hint: {h}"));
            }
            if at_terminal && !phrase.is_empty() {
                lines.push(confirm(phrase));
            } else if !phrase.is_empty() {
                // No person at this terminal: whoever reads this relays to one.
                lines.push(format!("hint: {}", crate::base::error::PHRASE_INSTRUCTION));
            }
        }
        Error::ConfirmationMismatch { phrase, .. } => {
            if at_terminal {
                lines.push(confirm(phrase));
            } else {
                lines.push(format!(
                    "hint: {}",
                    crate::base::error::MISMATCH_INSTRUCTION
                ));
            }
        }
        Error::Host(r) => {
            if let Some(a) = &r.approval_request {
                lines.push(format!(
                    "statement to sign (expires {}):\n{}sign it with one of:\n  {}",
                    a.expires,
                    a.statement,
                    a.sign_with.join("\n  ")
                ));
                if at_terminal {
                    lines.push("hint: save the signature to a file, then run the same command again with --approval FILE (- reads it from stdin)".into());
                }
            } else if let (true, Some(p)) = (at_terminal, &r.phrase) {
                lines.push(confirm(p));
            }
        }
        _ => {}
    }
    lines
}

/// A note for the person at the terminal (never data): one `pxagent: …` line on stderr. The
/// one place user-facing notes go through; logs go through `tracing` instead. Escaped: notes
/// often quote the host.
pub fn note(text: impl std::fmt::Display) {
    let text = text.to_string();
    write_stderr(&format!("pxagent: {}\n", escape::text(&text)));
}

/// A guest command's stdout or stderr, relayed: at a terminal its control
/// characters are escaped — it is the user's own command, but its bytes come from an untrusted
/// guest and must not drive the terminal; into a pipe or a file it passes byte for byte (and
/// `-o json` carries it raw in the document). `to_stderr` picks the stream.
pub fn guest_output(text: &str, to_stderr: bool) {
    let terminal = if to_stderr {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    let shown = if terminal {
        escape::text(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    if to_stderr {
        write_stderr(&shown);
    } else {
        write_raw(&shown);
    }
}

/// Relay text meant for stderr as it is (help text, pxagent's own messages).
pub fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// Write one block to stdout with a trailing newline. A failed write is remembered for
/// [`take_write_error`]: the front end turns it into exit 10 (a closed pipe, `| head`, ends
/// quietly instead).
pub fn write_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let r = writeln!(out, "{text}").and_then(|_| out.flush());
    remember(r);
}

/// Write human text to stdout the way [`Output::success`] does: escaped by the last net,
/// colour markers rendered (for a command that shows its report also when it fails).
pub fn write_human(text: &str) {
    let safe = escape::net(text.trim_end_matches('\n'));
    write_stdout(&style::render(&safe, style::stdout_colored()));
}

/// Write raw text to stdout exactly as given (used for files such as a sudoers render).
pub fn write_raw(text: &str) {
    let mut out = std::io::stdout().lock();
    let r = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    remember(r);
}

/// The first stdout write error since the last [`take_write_error`]. Process-wide because
/// stdout is; taking it resets it, so every run starts clean.
static WRITE_ERROR: std::sync::Mutex<Option<std::io::Error>> = std::sync::Mutex::new(None);

fn remember(r: std::io::Result<()>) {
    if let Err(e) = r {
        let mut slot = WRITE_ERROR.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
    }
}

/// The first stdout write error since the last call (a full disk or a closed file
/// must not look like success).
pub fn take_write_error() -> Option<std::io::Error> {
    WRITE_ERROR.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Render rows as an aligned text table with a header. Cells are escaped here (host data:
/// every control character, line breaks included, so a row stays one line); a cell may carry
/// colour from [`style::paint`], which takes no width (a view paints only text it escaped
/// first, e.g. through [`style::state`]).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| escape::painted_cell(c).into_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(style::visible_width(cell));
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            out.push_str(c);
            if i < last {
                let pad = widths[i].saturating_sub(style::visible_width(c)) + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out
    };
    let mut out = line(headers.to_vec());
    for row in &rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Aligned `label  value` lines (a status view's key fields). Values are escaped as text of
/// one line; like [`table`], they may carry colour.
pub fn pairs(lines: &[(String, String)]) -> String {
    let width = lines
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    lines
        .iter()
        .map(|(k, v)| {
            let v = escape::painted_cell(v);
            if v.is_empty() {
                k.clone()
            } else {
                format!("{k:<width$}  {v}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(
            &["ID", "RISK"],
            &[
                vec!["vm.start".into(), "change".into()],
                vec!["x".into(), "read".into()],
            ],
        );
        assert_eq!(t, "ID        RISK\nvm.start  change\nx         read");
    }

    #[test]
    fn table_cells_are_escaped_and_colour_takes_no_width() {
        let painted = format!("{}running{}", '\u{e001}', '\u{e000}');
        let t = table(
            &["NAME", "STATUS", "X"],
            &[
                vec!["a\u{1b}[2Jb".into(), painted.clone(), "1".into()],
                vec!["c".into(), "stopped".into(), "2".into()],
            ],
        );
        let plain = style::render(&t, false);
        assert_eq!(
            plain,
            "NAME         STATUS   X\na\\u{1b}[2Jb  running  1\nc            stopped  2"
        );
    }

    #[test]
    fn a_terminal_refusal_names_the_flag() {
        let e = Error::ConfirmationRequired {
            message: "I won't run `vm destroy 100` …".into(),
            phrase: "yes destroy 100".into(),
            hint: None,
            scope: None,
        };
        // No person at the terminal: the phrase is the human's, and nothing says to pass it
        // on one's own.
        let agent = refusal_hints(&e, false);
        assert_eq!(agent.len(), 1, "{agent:?}");
        assert!(
            agent[0].contains("must come from the human user"),
            "{agent:?}"
        );
        assert!(!agent[0].contains("--confirm 'yes"), "{agent:?}");
        assert_eq!(
            refusal_hints(&e, true),
            ["hint: to proceed, run the same command again with --confirm 'yes destroy 100'"]
        );
    }

    #[test]
    fn a_terminal_approval_refusal_shows_the_statement_and_names_the_flag() {
        use crate::base::gate_protocol::{ApprovalRequest, Refusal, RefusalKind};
        let mut r = Refusal::new(
            RefusalKind::ApprovalRequired,
            "the host wants a signed approval",
        );
        r.approval_request = Some(ApprovalRequest {
            statement: "pxagent-approval/1\nhost: pve1\nop: vm.snapshot\n".into(),
            expires: "2026-12-02T17:00:00Z".into(),
            sign_with: vec!["pxagent approve --key KEY -".into()],
        });
        let e = Error::Host(Box::new(r));
        // Everyone gets the statement to sign; only a person at a terminal the flag to pass.
        let agent = refusal_hints(&e, false);
        assert_eq!(agent.len(), 1, "{agent:?}");
        assert!(agent[0].contains("op: vm.snapshot"), "{agent:?}");
        assert!(
            agent[0].contains("expires 2026-12-02T17:00:00Z"),
            "{agent:?}"
        );
        assert!(
            agent[0].contains("pxagent approve --key KEY -"),
            "{agent:?}"
        );
        let person = refusal_hints(&e, true);
        assert_eq!(person.len(), 2, "{person:?}");
        assert!(person[1].contains("--approval FILE"), "{person:?}");
    }
}
