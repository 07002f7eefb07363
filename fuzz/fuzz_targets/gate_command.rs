//! The gate's first look at a request: `SSH_ORIGINAL_COMMAND` through `protocol::parse_command`
//! (canonical plain lines and `pxagent-gate/1` envelopes), then what the gate does with the
//! words: the catalog's inverse parse, and the envelope's approval text. The same input is
//! also read as NUL-separated words straight into `parse_argv`, because a random line is
//! rarely in canonical quoting and would otherwise never reach the inverse parse. Inputs are
//! capped at the gate's own line limit (the parser refuses longer ones first thing).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pxagent::catalog::inverse::parse_argv;
use pxagent::base::gate_protocol::{self, Request};

fn inverse(words: &[String]) {
    if let Ok(found) = parse_argv(words) {
        assert!(!found.is_empty());
        for (op, values) in &found {
            // What the gate accepts is exactly a line the op itself builds.
            assert_eq!(op.tool.path(), words[0]);
            let _ = op.argv(values);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() > protocol::MAX_LINE + 16 {
        return;
    }
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    match protocol::parse_command(Some(line)) {
        Ok(Request::Plain(words)) => {
            assert_eq!(pxagent::base::text::quote_argv(&words), line);
            if let [sudo, n, rest @ ..] = words.as_slice()
                && sudo == "sudo"
                && n == "-n"
            {
                inverse(rest);
            }
        }
        Ok(Request::Envelope(env)) => {
            if let Some(argv) = &env.argv {
                inverse(argv.get(2..).unwrap_or_default());
            }
            if let Some(a) = &env.approval {
                let _ = pxagent::approval::parse_approval(a);
            }
            // What the client sends for this envelope reads back as the same envelope.
            let again = env.to_command().join(" ");
            if again.len() <= protocol::MAX_LINE {
                assert_eq!(
                    protocol::parse_command(Some(&again)).ok(),
                    Some(Request::Envelope(env))
                );
            }
        }
        Err(r) => {
            let _ = r.to_line();
        }
    }
    let _ = protocol::Refusal::from_output(protocol::REFUSED_EXIT, line);
    let words: Vec<String> = line.split('\0').map(str::to_string).collect();
    inverse(&words);
});
