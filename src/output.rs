//! The only module that writes to stdout.
//!
//! JSON mode: exactly one JSON document per command (design §4), success or failure, so an
//! agent can always parse stdout. Table mode: tables and short messages on stdout, errors
//! and hints on stderr. Never a pager, never a prompt here.

use std::io::Write;

use serde_json::{Value, json};

use crate::error::Error;

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
                let mut stderr = std::io::stderr().lock();
                for w in warnings {
                    let _ = writeln!(stderr, "warning: {w}");
                }
                drop(stderr);
                let text = human(&data);
                if !text.is_empty() {
                    write_stdout(text.trim_end_matches('\n'));
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
                let mut stderr = std::io::stderr().lock();
                let _ = writeln!(stderr, "pxagent: {err}");
                if let Error::ConfirmationRequired { hint: Some(h), .. } = err {
                    let _ = writeln!(stderr, "hint: {h}");
                }
                if let Error::Host(r) = err
                    && let Some(a) = &r.approval_request
                {
                    let _ = writeln!(
                        stderr,
                        "statement to sign (expires {}):\n{}sign it with one of:\n  {}",
                        a.expires,
                        a.statement,
                        a.sign_with.join("\n  ")
                    );
                }
            }
        }
    }
}

/// A note for the person at the terminal (never data): one `pxagent: …` line on stderr. The
/// one place user-facing notes go through; logs go through `tracing` instead.
pub fn note(text: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "pxagent: {text}");
}

/// Relay text meant for stderr as it is (a guest command's own stderr).
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

/// The first stdout write error since the last call (issue 12: a full disk or a closed file
/// must not look like success).
pub fn take_write_error() -> Option<std::io::Error> {
    WRITE_ERROR.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Render rows as an aligned text table with a header.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c.to_string()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
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
}
