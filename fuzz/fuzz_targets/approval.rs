//! The body is `pxagent::fuzzing::approval` (src/fuzzing/mod.rs), where its doc says what it covers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pxagent::fuzzing::approval(data));
