//! `pxagent batch` input: the line reader (`request::read_line`: length limit, UTF-8) over
//! the raw bytes, then every line through `request::parse` (JSON, `id`/`op`/`args`, the MCP
//! argument validation of the op), under the default policy and one that asks for phrases.
//! Inputs are capped at 256 KiB (a line over the 1 MiB limit is refused by length alone).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pxagent::batch::request;
use pxagent::policy::Policy;

fn confirming() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        Policy::from_text("ops:\n  '*': confirm\n", "fuzz.yaml").expect("a valid policy")
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 256 * 1024 {
        return;
    }
    let default = Policy::default();
    let mut input = std::io::Cursor::new(data);
    let mut n = 0;
    while let Some(read) = request::read_line(&mut input) {
        n += 1;
        let Ok(Ok(line)) = read else {
            continue;
        };
        for policy in [&default, confirming()] {
            match request::parse(n, &line, policy) {
                Ok(req) => {
                    let _ = request::success(&req.id, req.op, serde_json::Value::Null, &[]);
                }
                Err(bad) => {
                    let _ = request::failure(&bad.id, bad.op, bad.line, &bad.error);
                }
            }
        }
    }
});
