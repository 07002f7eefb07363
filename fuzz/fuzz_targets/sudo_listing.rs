//! The preflight's parser of `sudo -n -l` output (`preflight::parse_listing`: sections,
//! wrapped lines, runas, tags, command lists), and the checks the preflight runs on every
//! command it lists (`lint::check_command`). Inputs are capped at 16 KiB, several times the
//! longest real listing (fixtures/sudo/); each listed command is linted, so the time per
//! input grows with its commands.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pxagent::host::preflight::parse_listing;
use pxagent::host::sudoers::lint;

fuzz_target!(|data: &[u8]| {
    if data.len() > 16 * 1024 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let listing = parse_listing(text);
    for (_, _, cmd) in listing.commands.iter().take(16) {
        let _ = lint::check_command(cmd);
    }
});
