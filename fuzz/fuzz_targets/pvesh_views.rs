//! What turns pvesh JSON into typed views and tables: `views::normalize` for every view the
//! catalog uses (lenient numbers, resource/node/storage/content/snapshot lists, task logs,
//! guest-agent interfaces, RRD rows), then `views::human` of the result, and the object
//! layouts of `views::status`. Inputs are capped at 64 KiB of JSON.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pxagent::catalog::{OPS, View};
use pxagent::views::{self, status};

/// Each distinct view of the catalog once.
fn all_views() -> &'static [View] {
    static V: OnceLock<Vec<View>> = OnceLock::new();
    V.get_or_init(|| {
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for op in OPS.iter() {
            let key = format!("{:?}", op.view);
            if !seen.contains(&key) {
                seen.push(key);
                out.push(op.view);
            }
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 64 * 1024 {
        return;
    }
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for &view in all_views() {
        if let Ok(v) = views::normalize(view, &json, None) {
            let _ = views::human(view, &v);
        }
    }
    for which in [
        status::Layout::Guest,
        status::Layout::Node,
        status::Layout::Task,
    ] {
        let _ = status::layout(which, &json);
    }
    let _ = status::config(&json);
    let _ = status::tasks(&json);
    let _ = views::normalize(View::Resources(None), &json, Some("qemu"));
});
