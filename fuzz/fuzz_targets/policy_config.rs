//! The body is `pxagent::fuzzing::policy_config` (src/fuzzing/mod.rs), where its doc says what it covers.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pxagent::fuzzing::policy_config(data));
