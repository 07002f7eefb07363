//! Helpers the unit tests of every layer share (compiled only for tests).
//!
//! Layer: base. Imports nothing of the crate.

/// A file of `tests/fixtures/` (e.g. `pve/cluster_resources_vm.json`), whole.
pub fn fixture(rel: &str) -> String {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// A command line written with single spaces, as its words.
pub fn words(line: &str) -> Vec<String> {
    line.split(' ').map(String::from).collect()
}
