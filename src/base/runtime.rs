//! The async runtime every front end runs an operation on.
//!
//! Layer: base. Imports only [`super::error`].

use super::error::{Error, Result};

/// A current-thread runtime: one invocation is one connection; concurrency comes from
/// channels, not threads.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the async runtime: {e}")))
}
