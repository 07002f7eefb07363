//! `pxagent completions SHELL` and `pxagent man [COMMAND…]`: shell
//! completions (clap_complete) and manual pages in roff (clap_mangen), generated from the very
//! command tree that parses the command line, so they cannot drift from it. Local: nothing is
//! sent, no host needed.

use crate::base::error::{Error, Result};
use crate::cli::command;
use crate::output;

/// Print the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut cmd = command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "pxagent", &mut buf);
    output::write_raw(&String::from_utf8_lossy(&buf));
    Ok(0)
}

/// Print pxagent's manual page, or the page of the command at `path` (`["vm", "start"]`).
/// pxagent's own page ends with every command of the tree, each with its usage and purpose.
pub fn man(path: &[String]) -> Result<u8> {
    let mut root = command();
    root.build();
    let mut cmd = &root;
    for word in path {
        cmd = cmd.find_subcommand(word).ok_or_else(|| {
            Error::usage(format!(
                "no command `pxagent {}`: see `pxagent --help`",
                crate::base::text::printable(&path.join(" "))
            ))
        })?;
    }
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut buf)
        .map_err(|e| Error::Internal(format!("cannot render the manual page: {e}")))?;
    let mut page = String::from_utf8_lossy(&buf).into_owned();
    if path.is_empty() {
        page.push_str(&all_commands(&root));
    }
    output::write_raw(&page);
    Ok(0)
}

/// A roff section listing every runnable command (the leaves of the tree).
fn all_commands(root: &clap::Command) -> String {
    fn walk(cmd: &clap::Command, words: &mut Vec<String>, out: &mut String) {
        for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            words.push(sub.get_name().to_string());
            if sub.has_subcommands() {
                walk(sub, words, out);
            } else {
                let args: Vec<String> = sub
                    .get_positionals()
                    .map(|a| {
                        let name = a
                            .get_value_names()
                            .and_then(|v| v.first())
                            .map_or_else(|| a.get_id().to_string(), |v| v.to_string());
                        format!("<{name}>")
                    })
                    .collect();
                out.push_str(&format!(
                    ".TP\n\\fBpxagent {}\\fR {}\n{}\n",
                    roff(&words.join(" ")),
                    roff(&args.join(" ")),
                    roff(&sub.get_about().map(|a| a.to_string()).unwrap_or_default())
                ));
            }
            words.pop();
        }
    }
    let mut out = String::from(
        ".SH \"ALL COMMANDS\"\nEach has its own page: \\fBpxagent man\\fR \\fICOMMAND\\fR…\n",
    );
    walk(root, &mut Vec::new(), &mut out);
    out
}

/// Text made safe for roff: backslashes and hyphens escaped, no line starting a request.
fn roff(s: &str) -> String {
    let escaped = s.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_text_cannot_start_a_request() {
        assert_eq!(roff(".SH x\n'y -z \\"), "\\&.SH x\n\\&'y \\-z \\e");
    }

    #[test]
    fn every_leaf_is_in_the_manual() {
        let mut root = command();
        root.build();
        let all = all_commands(&root);
        for op in crate::catalog::OPS.iter().filter(|o| !o.is_step()) {
            let words = op.cli.join(" ").replace('-', "\\-");
            assert!(
                all.contains(&format!("\\fBpxagent {words}\\fR")),
                "{}",
                op.id
            );
        }
        assert!(all.contains("\\fBpxagent sudoers render\\fR"));
    }
}
