//! The body is `pxagent::fuzzing::pvesh_views` (src/fuzzing/mod.rs), where its doc says what it covers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pxagent::fuzzing::pvesh_views(data));
