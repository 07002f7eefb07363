//! Writing bash safely: single-quoted words, a values block, and quoted here-documents whose
//! delimiter cannot be forged by their content. Used by the render and revoke scripts only.

use std::fmt::Write as _;

/// The delimiter every here-document starts from.
const DELIMITER: &str = "PXAGENT_EOF";

/// `value` as one single-quoted shell word. Every value a user gave is written this way (even
/// where the validation already excludes quotes), so a reviewer sees at a glance that nothing
/// in the values block is expanded.
pub fn sq(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// A delimiter for a quoted here-document (`<<'D'`) that no line of `content` equals. bash ends
/// such a document only at a line that is exactly the delimiter, and expands nothing inside
/// it, so with this delimiter the document is exactly `content`: `PXAGENT_EOF` when that is
/// free, else the first free `PXAGENT_EOF_<n>` (content has finitely many lines, so one is).
pub fn heredoc_delimiter(content: &str) -> String {
    let taken = |d: &str| content.split('\n').any(|line| line == d);
    if !taken(DELIMITER) {
        return DELIMITER.to_string();
    }
    (1u64..)
        .map(|n| format!("{DELIMITER}_{n}"))
        .find(|d| !taken(d))
        .unwrap_or_else(|| DELIMITER.to_string())
}

/// The script being built: header, values, fixed logic, data functions, then `main`.
#[derive(Debug, Default)]
pub struct Script(String);

impl Script {
    /// Start with the shebang, the comment header (`#` is added to each line) and the shell
    /// options every script runs with.
    pub fn new(header: &str) -> Script {
        let mut s = String::from("#!/bin/bash\n");
        for line in header.lines() {
            if line.is_empty() {
                s.push_str("#\n");
            } else {
                let _ = writeln!(s, "# {line}");
            }
        }
        s.push_str(concat!(
            "\n",
            "set -euo pipefail\n",
            "umask 022\n",
            "export LC_ALL=C\n",
            "export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n",
        ));
        Script(s)
    }

    /// A section heading.
    pub fn section(&mut self, title: &str) {
        let rule = "-".repeat(93);
        let _ = write!(self.0, "\n# {rule}\n# {title}\n# {rule}\n\n");
    }

    /// `readonly NAME='value'` with a comment naming what it is.
    pub fn value(&mut self, name: &str, value: &str, what: &str) {
        let _ = writeln!(self.0, "readonly {name}={}  # {what}", sq(value));
    }

    /// Fixed text, as is.
    pub fn text(&mut self, text: &str) {
        self.0.push_str(text);
    }

    /// A function `name` that prints `content` (a newline is added when it has none at the
    /// end), through a quoted here-document.
    pub fn data(&mut self, name: &str, what: &str, content: &str) {
        let mut body = content.to_string();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        let d = heredoc_delimiter(&body);
        let _ = write!(
            self.0,
            "# {what}\n{name}() {{\n    cat <<'{d}'\n{body}{d}\n}}\n\n"
        );
    }

    /// End with the call of `main`: a script cut short in transfer defines functions only
    /// and runs nothing.
    pub fn finish(mut self) -> String {
        self.0.push_str("main\n");
        self.0
    }
}
