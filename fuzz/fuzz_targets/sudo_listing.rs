//! The body is `pxagent::fuzzing::sudo_listing` (src/fuzzing/mod.rs), where its doc says what it covers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pxagent::fuzzing::sudo_listing(data));
