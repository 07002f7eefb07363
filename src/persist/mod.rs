//! Persistent connections (issue 14, placeholder until the holder lands).

use std::time::Duration;

use crate::error::Result;
use crate::remote::Remote;
use crate::ssh::{Session, Target};

/// A connected host for `target`: a connection of this process.
pub async fn connect(target: &Target, _persist: Option<Duration>) -> Result<Remote> {
    let session = Session::connect(target).await?;
    if let Some(note) = session.recorded_host_key() {
        crate::output::note(note);
    }
    Ok(Remote::new(
        session,
        target.display(),
        target.command_timeout,
    ))
}

/// `pxagent persist serve`.
pub fn serve() -> Result<u8> {
    Ok(0)
}
