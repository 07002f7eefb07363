//! Helpers the unit tests above the catalog share (compiled only for tests).
//!
//! Layer: catalog. Imports the catalog's table and invocations.

use super::invocation::Invocation;

/// The invocation of op `id` with these values; panics when the op or a value is invalid.
pub fn inv(id: &str, kv: &[(&'static str, &str)]) -> Invocation {
    let op = super::find(id).unwrap_or_else(|| panic!("no op {id}"));
    Invocation::new(op, kv.iter().map(|(k, v)| (*k, v.to_string())).collect()).unwrap()
}
