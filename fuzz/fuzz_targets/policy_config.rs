//! The YAML loaders: a client policy (`Policy::from_text`, YAML or the gateway form), a host
//! policy (`Policy::from_host_text`, stricter) and the config file (`config::parse`). Inputs
//! are capped at 64 KiB: YAML anchors and aliases can expand a small text a lot, and the
//! YAML parser's own limits are what this target should exercise, not the fuzzer's memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pxagent::policy::Policy;

fuzz_target!(|data: &[u8]| {
    if data.len() > 64 * 1024 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Policy::from_text(text, "fuzz.yaml");
    let _ = Policy::from_host_text(text, "/etc/pxagent/policy.yaml");
    if let Ok(cfg) = pxagent::config::parse(text, std::path::Path::new("config.yaml")) {
        let _ = cfg.persist();
        let _ = cfg.policy_sources(None);
    }
});
