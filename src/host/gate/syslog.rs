//! The gate's audit trail: one line per decision to the local syslog socket (`/dev/log`,
//! facility authpriv), which the agent account can write to but never rewrite; journald or
//! rsyslog keep it. The line is `pxagent-gate[PID]: ` then a JSON object, so it stays one
//! greppable record with argv boundaries intact.
//!
//! A record is always whole, however much a client sends: one valid JSON object of at most
//! [`MAX_RECORD`] bytes whose first keys say who asked, for what, and what became of it
//! ([`FIRST`]), so a padded argument can never push the decision off the end. A long string
//! is cut on its own and replaced by a marker object that keeps its start, its full length
//! and the SHA-256 of the whole value ([`cut_marker`]); if the record is still too long,
//! the largest of the other fields are replaced the same way. The line separators a log
//! viewer may break on (U+0085, U+2028, U+2029) and the other C1 controls are escaped.

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use serde_json::{Map, Value, json};

/// authpriv (10) × 8 + info (6): an allowed request.
const ALLOWED: u8 = 10 * 8 + 6;
/// authpriv × 8 + warning (4): a refusal.
const REFUSED: u8 = 10 * 8 + 4;

/// The largest record sent (a datagram socket refuses oversized messages; syslog daemons
/// truncate near 8 KiB anyway).
pub const MAX_RECORD: usize = 8000;

/// The keys every record starts with, in this order; the rest follow sorted.
pub const FIRST: &[&str] = &["account", "op", "decision", "kind", "reason"];

/// The longest string kept whole in a record (bytes).
const MAX_STRING: usize = 1024;

/// How much of a cut value's start its marker keeps (characters).
const KEEP: usize = 120;

/// The most characters kept of a field the client writes freely (its version string).
pub const MAX_FREE_TEXT: usize = 200;

/// Write one record. `Err` says why it could not be written.
pub fn record(socket: &Path, allowed: bool, fields: &Value) -> Result<(), String> {
    let body = render(fields);
    let pri = if allowed { ALLOWED } else { REFUSED };
    let line = format!("<{pri}>pxagent-gate[{}]: {body}", std::process::id());
    let sock = UnixDatagram::unbound().map_err(|e| format!("cannot open a socket: {e}"))?;
    sock.send_to(line.as_bytes(), socket)
        .map_err(|e| format!("cannot write to {}: {e}", socket.display()))?;
    Ok(())
}

/// A client's free text as it is recorded: at most [`MAX_FREE_TEXT`] characters, or the
/// marker of a cut value.
pub fn free_text(text: &str) -> Value {
    if text.chars().count() <= MAX_FREE_TEXT {
        Value::String(text.to_string())
    } else {
        cut_marker(text)
    }
}

/// The marker that stands for a value too long to keep: its start, its full length in bytes
/// and the SHA-256 of all of it, so the record still identifies what was sent.
pub fn cut_marker(text: &str) -> Value {
    let sum = crate::base::text::sha256_hex(text.as_bytes());
    json!({
        "cut": true,
        "start": text.chars().take(KEEP).collect::<String>(),
        "bytes": text.len(),
        "sha256": sum,
    })
}

/// The record's JSON text: [`FIRST`] keys first, every value bounded, at most [`MAX_RECORD`]
/// bytes.
pub fn render(fields: &Value) -> String {
    let map = match fields {
        Value::Object(m) => m.clone(),
        other => {
            let mut m = Map::new();
            m.insert("record".into(), other.clone());
            m
        }
    };
    let mut entries: Vec<(String, Value)> = Vec::with_capacity(map.len());
    for key in FIRST {
        if let Some(v) = map.get(*key) {
            entries.push((key.to_string(), bound(v)));
        }
    }
    for (k, v) in &map {
        if !FIRST.contains(&k.as_str()) {
            entries.push((k.clone(), bound(v)));
        }
    }
    let first = entries
        .iter()
        .filter(|(k, _)| FIRST.contains(&k.as_str()))
        .count();
    // Still too long: the largest of the other fields give way first, each to its marker;
    // then whatever is left of them goes, named in `omitted`.
    while join(&entries).len() > MAX_RECORD {
        let largest = entries
            .iter()
            .enumerate()
            .skip(first)
            .filter(|(_, (_, v))| !is_marker(v))
            .max_by_key(|(_, (_, v))| v.to_string().len())
            .map(|(i, _)| i);
        match largest {
            Some(i) => entries[i].1 = cut_marker(&entries[i].1.to_string()),
            None => break,
        }
    }
    if join(&entries).len() > MAX_RECORD {
        let omitted: Vec<String> = entries.drain(first..).map(|(k, _)| k).collect();
        entries.push(("omitted".into(), json!(omitted)));
    }
    // Only the leading fields are left, each at most MAX_STRING: in the worst case they too
    // become markers, which always fit.
    while join(&entries).len() > MAX_RECORD {
        let Some(i) = entries
            .iter()
            .position(|(k, v)| k != "omitted" && !is_marker(v) && v.to_string().len() > KEEP)
        else {
            break;
        };
        entries[i].1 = cut_marker(&entries[i].1.to_string());
    }
    join(&entries)
}

fn is_marker(v: &Value) -> bool {
    v.get("cut") == Some(&Value::Bool(true)) && v.get("sha256").is_some()
}

/// Every string in `v` longer than [`MAX_STRING`] replaced by its marker.
fn bound(v: &Value) -> Value {
    match v {
        // Measured as JSON: a control character takes six bytes there.
        Value::String(s)
            if s.len() > MAX_STRING
                || Value::from(s.as_str()).to_string().len() > MAX_STRING + 2 =>
        {
            cut_marker(s)
        }
        Value::Array(a) => Value::Array(a.iter().map(bound).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), bound(v))).collect()),
        other => other.clone(),
    }
}

/// The entries as one JSON object, in their order, with the line separators escaped.
fn join(entries: &[(String, Value)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    escape_separators(&out)
}

/// JSON text with U+0080–U+009F (U+0085 among them), U+2028 and U+2029 written as `\uXXXX`.
/// They can only occur inside strings, where the escape means the same character.
fn escape_separators(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if ('\u{80}'..='\u{9f}').contains(&c) || c == '\u{2028}' || c == '\u{2029}' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
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
            &serde_json::json!({"why": "a\nb", "op": "vm.start"}),
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
        assert!(record(&dir.path().join("none"), true, &Value::Null).is_err());
    }

    fn parsed(fields: &Value) -> (String, Map<String, Value>) {
        let text = render(fields);
        assert!(text.len() <= MAX_RECORD, "{} bytes", text.len());
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (text, v.as_object().unwrap().clone())
    }

    #[test]
    fn a_padded_record_keeps_its_decision_first_and_stays_valid_json() {
        let pad = "A".repeat(100_000);
        let fields = json!({
            "account": "zen-gate",
            "argv": ["sudo", "-n", "/usr/sbin/pct", "exec", "200", "--", "/bin/sh", "-c", pad],
            "client": "127.0.0.1",
            "client_version": "x".repeat(50_000),
            "command": "b".repeat(30_000),
            "decision": "refused",
            "kind": "not_allowed",
            "op": "ct.exec",
            "reason": format!("`{}` is refused", "c".repeat(20_000)),
        });
        let (text, rec) = parsed(&fields);
        assert!(
            text.starts_with(r#"{"account":"zen-gate","op":"ct.exec","decision":"refused","kind":"not_allowed","reason":{"#),
            "{text}"
        );
        // The long sh -c argument is cut on its own: the argv's other words stay.
        let argv = rec["argv"].as_array().unwrap();
        assert_eq!(argv[2], "/usr/sbin/pct");
        let m = &argv[8];
        assert_eq!(m["cut"], true);
        assert_eq!(m["bytes"], 100_000);
        assert_eq!(m["sha256"], crate::base::text::sha256_hex(pad.as_bytes()));
        assert!(m["start"].as_str().unwrap().starts_with("AAAA"));
        assert_eq!(rec["reason"]["bytes"], 20_000 + "`` is refused".len());
        assert_eq!(rec["client"], "127.0.0.1");
    }

    #[test]
    fn many_long_fields_give_way_largest_first_and_the_record_always_fits() {
        let mut m = Map::new();
        for k in ["account", "op", "decision", "kind", "reason"] {
            m.insert(k.into(), json!(format!("{k}-value")));
        }
        for i in 0..40 {
            m.insert(
                format!("f{i:02}"),
                json!(["\u{1}".repeat(900), "y".repeat(1000)]),
            );
        }
        let (text, rec) = parsed(&Value::Object(m));
        assert!(text.starts_with(r#"{"account":"account-value","op":"op-value","decision":"decision-value","kind":"kind-value","reason":"reason-value""#), "{text}");
        let cut = rec.values().filter(|v| is_marker(v)).count();
        assert!(cut > 0 || rec.contains_key("omitted"), "{text}");
        // Leading fields too long for any record become markers themselves.
        let mut huge = Map::new();
        for k in FIRST {
            huge.insert(k.to_string(), json!(vec!["\u{2}".repeat(1000); 8]));
        }
        let (_, rec) = parsed(&Value::Object(huge));
        assert!(FIRST.iter().all(|k| rec.contains_key(*k)));
    }

    #[test]
    fn line_separators_and_c1_controls_are_escaped() {
        let (text, rec) = parsed(&json!({"reason": "a\u{2028}b\u{2029}c\u{85}d\u{9b}e"}));
        assert!(text.contains(r"a\u2028b\u2029c\u0085d\u009be"), "{text}");
        assert!(
            !text
                .chars()
                .any(|c| ('\u{80}'..='\u{9f}').contains(&c) || c == '\u{2028}' || c == '\u{2029}')
        );
        assert_eq!(rec["reason"], "a\u{2028}b\u{2029}c\u{85}d\u{9b}e");
    }

    #[test]
    fn free_text_is_bounded() {
        assert_eq!(free_text("pxagent 0.1.0"), json!("pxagent 0.1.0"));
        let long = "é".repeat(MAX_FREE_TEXT + 1);
        let v = free_text(&long);
        assert_eq!(v["bytes"], long.len());
        assert_eq!(v["start"].as_str().unwrap().chars().count(), KEEP);
    }
}
