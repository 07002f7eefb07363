//! `pxagent sudoers lint` on hostile text: the lexer (logical lines, comments, escapes,
//! continuations), the parser (Defaults, aliases, user specs, commands with globs and
//! `^…$` regex arguments) and every check after them, including the regex-to-DFA walk. Also
//! the single-command entry point `sudo -l` output goes through and the command splitter.
//! Inputs are capped at 4 KiB: each rule is compiled and walked against the danger table, so
//! time grows with the number of rules times their regex size, and a bigger file only makes
//! each execution slower without reaching new code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pxagent::host::sudoers::lint::{self, Principal};

fuzz_target!(|data: &[u8]| {
    if data.len() > 4096 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let findings = lint::lint(text);
    let _ = lint::has_errors(&findings);
    let who = Principal::new("zen-agent").with_groups(["sudo".to_string(), "adm".to_string()]);
    let _ = lint::lint_for(text, &who);
    for line in text.lines().take(8) {
        let _ = lint::check_command(line);
        let _ = lint::split_commands(line);
    }
});
