//! `pxagent setup render|revoke`: print the root script for the host (table mode: the script
//! itself, ready for `> setup.sh`; JSON mode: the script in `data.script`). Nothing is sent.

use serde_json::json;

use crate::base::error::Result;
use crate::host::setup::{self, RevokeOptions, SetupOptions};
use crate::output::{self, Format, Output};

/// Print the setup script for these options.
pub fn setup_render(opts: &SetupOptions, out: &Output) -> Result<u8> {
    let script = setup::render(opts)?;
    print(
        out,
        "setup.render",
        json!({"user": opts.user(), "profile": opts.sudoers.profile.name(), "script": script}),
        &script,
    );
    Ok(0)
}

/// Print the revoke script for this account.
pub fn setup_revoke(opts: &RevokeOptions, out: &Output) -> Result<u8> {
    let script = setup::revoke(opts);
    print(
        out,
        "setup.revoke",
        json!({"user": opts.user, "script": script}),
        &script,
    );
    Ok(0)
}

fn print(out: &Output, op: &str, data: serde_json::Value, script: &str) {
    match out.format {
        Format::Json => out.success(op, data, |_| String::new()),
        Format::Table => output::write_raw(script),
    }
}
