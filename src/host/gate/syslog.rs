//! The gate's audit trail: one line per decision to the local syslog socket (`/dev/log`,
//! facility authpriv), which the agent account can write to but never rewrite; journald or
//! rsyslog keep it. The line is `pxagent-gate[PID]: ` then a JSON object, so it stays one
//! greppable record with argv boundaries intact.

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use serde_json::Value;

/// authpriv (10) × 8 + info (6): an allowed request.
const ALLOWED: u8 = 10 * 8 + 6;
/// authpriv × 8 + warning (4): a refusal.
const REFUSED: u8 = 10 * 8 + 4;

/// The largest record sent (a datagram socket refuses oversized messages; syslog daemons
/// truncate near 8 KiB anyway). Longer records are cut and say so.
const MAX_RECORD: usize = 8000;

/// Write one record. `Err` says why it could not be written.
pub fn record(socket: &Path, allowed: bool, fields: &Value) -> Result<(), String> {
    let mut body = fields.to_string();
    if body.len() > MAX_RECORD {
        let mut cut = MAX_RECORD;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
        body.push_str("…(truncated)");
    }
    let pri = if allowed { ALLOWED } else { REFUSED };
    let line = format!("<{pri}>pxagent-gate[{}]: {body}", std::process::id());
    let sock = UnixDatagram::unbound().map_err(|e| format!("cannot open a socket: {e}"))?;
    sock.send_to(line.as_bytes(), socket)
        .map_err(|e| format!("cannot write to {}: {e}", socket.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reach_a_datagram_listener_as_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let listener = UnixDatagram::bind(&path).unwrap();
        record(
            &path,
            false,
            &serde_json::json!({"op": "vm.start", "why": "a\nb"}),
        )
        .unwrap();
        let mut buf = [0u8; 9000];
        let n = listener.recv(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("<84>pxagent-gate["), "{text}");
        assert!(
            text.ends_with(r#"{"op":"vm.start","why":"a\nb"}"#),
            "{text}"
        );
        let big = "x".repeat(20_000);
        record(&path, true, &serde_json::json!({ "big": big })).unwrap();
        let n = listener.recv(&mut buf).unwrap();
        assert!(n < 8200 && String::from_utf8_lossy(&buf[..n]).ends_with("(truncated)"));
        assert!(record(&dir.path().join("none"), true, &Value::Null).is_err());
    }
}
