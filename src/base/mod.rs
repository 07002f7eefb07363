//! The ground floor: what every layer above may use and what imports nothing above it —
//! the one error type and its exit codes ([`error`]), the gate's wire contract that both the
//! client and the host gate speak ([`gate_protocol`]), echoing, recording and quoting text
//! ([`text`]), the one calendar ([`time`]), the async runtime ([`runtime`]) and the signal
//! handling of a running operation ([`signals`]).
//!
//! `time` and `runtime` import `error`; `error` imports `gate_protocol`; `gate_protocol`
//! imports `text`.
//!
//! Layer: base. May import: nothing of the crate.

pub mod error;
pub mod gate_protocol;
pub mod runtime;
pub mod signals;
#[cfg(test)]
pub mod testing;
pub mod text;
pub mod time;
