//! `pxagent persist status|stop`: the persistent connections of `--persist` (placeholder).

use crate::cli::settings::Settings;
use crate::context::Context;
use crate::error::Result;
use crate::output::Output;

/// List the holders.
pub fn status(_out: &Output) -> Result<u8> {
    Ok(0)
}

/// End the holders.
pub fn stop(_s: &Settings, _ctx: &Context, _out: &Output) -> Result<u8> {
    Ok(0)
}
