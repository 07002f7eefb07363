//! The statement a human signs: the exact operation, its parameters, where it may run (the
//! host's name, the host's stable identity — its machine id — and the gated account), a
//! one-time nonce and an expiry, as one canonical text. Two hosts both called `pve` differ in
//! their machine id, and an approval for one account is no approval for another.
//!
//! Canonical means one spelling per statement: [`Statement::text`] renders it and
//! [`Statement::parse`] accepts only text that renders back to the same bytes (a missing final
//! newline is the one tolerance, because editors and `printf` drop it). So what the human read
//! is what was signed, and what was signed is what the gate compares. Arg values are JSON
//! strings, which makes any value (spaces, quotes, newlines) unambiguous on one line; values
//! with the invisible characters that can make text read differently than it compares
//! ("Trojan Source": bidi overrides, zero-width joiners) are refused, since a human reads this
//! text before signing it. Uses std, serde_json, regex and [`super::time`].

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use super::{MAX_TTL, VERSION_LINE};
use crate::base::error::{Error, Result};
use crate::base::time::{format_rfc3339, parse_rfc3339};

/// What a human approves: this op, with these parameters, on this host as this account,
/// once, until then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The host's name, as the gate's `uname -n` reports it.
    pub host: String,
    /// The host's `/etc/machine-id`: 32 lowercase hex characters, stable across renames.
    pub machine_id: String,
    /// The gated account the operation runs as.
    pub account: String,
    /// The catalog op id (`vm.destroy`).
    pub op: String,
    /// Every parameter of the op by name (sorted by the map).
    pub args: BTreeMap<String, String>,
    /// 32 lowercase hex characters (128 random bits): makes each approval single-use.
    pub nonce: String,
    /// Unix seconds after which the approval is void.
    pub expires: u64,
}

static HOST: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$").expect("host regex"));
static ACCOUNT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z_][a-z0-9_-]{0,31}$").expect("account regex"));
static OP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z][a-z0-9_.-]*$").expect("op regex"));
static ARG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z][a-z0-9_]*$").expect("arg regex"));

/// Longest host name (a DNS name) and op id accepted.
const MAX_NAME: usize = 253;

/// Whether `host` can appear in a statement.
pub fn valid_host(host: &str) -> bool {
    host.len() <= MAX_NAME && HOST.is_match(host)
}

/// Whether `account` can appear in a statement (a POSIX account name, as useradd makes them).
pub fn valid_account(account: &str) -> bool {
    ACCOUNT.is_match(account)
}

/// Whether `id` has a machine id's one form: 32 lowercase hex characters.
pub fn valid_machine_id(id: &str) -> bool {
    valid_nonce(id)
}

/// Where an approval may be used: one account on one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place<'a> {
    /// The host's name.
    pub host: &'a str,
    /// The host's machine id.
    pub machine_id: &'a str,
    /// The gated account.
    pub account: &'a str,
}

/// Whether `op` can appear in a statement.
pub fn valid_op(op: &str) -> bool {
    op.len() <= MAX_NAME && OP.is_match(op)
}

/// Whether `name` can be an arg name in a statement.
pub fn valid_arg_name(name: &str) -> bool {
    name.len() <= 64 && ARG.is_match(name)
}

/// Whether `nonce` has the nonce's one form: 32 lowercase hex characters.
pub fn valid_nonce(nonce: &str) -> bool {
    nonce.len() == 32
        && nonce
            .bytes()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// Characters that change how text reads without showing: bidi embeddings, overrides and
/// isolates, zero-width characters, the byte-order mark.
fn invisible(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Why an arg value cannot be in a statement, if it cannot.
fn bad_value(value: &str) -> Option<String> {
    value.chars().find(|c| invisible(*c)).map(|c| {
        format!(
            "contains the invisible character U+{:04X}, which would make the statement read differently than it is",
            u32::from(c)
        )
    })
}

impl Statement {
    /// A statement for `op` with `args` at `place`, valid for `ttl` from `now` (Unix
    /// seconds), with a fresh random nonce. Invalid names or values and a `ttl` of zero or
    /// over [`MAX_TTL`] are usage errors.
    pub fn new(
        place: Place,
        op: &str,
        args: BTreeMap<String, String>,
        ttl: Duration,
        now: u64,
    ) -> Result<Statement> {
        let st = Statement {
            host: place.host.to_string(),
            machine_id: place.machine_id.to_string(),
            account: place.account.to_string(),
            op: op.to_string(),
            args,
            nonce: random_nonce()?,
            expires: expiry(ttl, now)?,
        };
        st.validate().map_err(Error::Usage)?;
        Ok(st)
    }

    /// The same statement (same nonce) with a new expiry: `ttl` from `now`.
    pub fn with_ttl(&self, ttl: Duration, now: u64) -> Result<Statement> {
        Ok(Statement {
            expires: expiry(ttl, now)?,
            ..self.clone()
        })
    }

    /// The canonical text: the exact bytes that are signed.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{VERSION_LINE}\nhost: {}\nmachine-id: {}\naccount: {}\nop: {}\n",
            self.host, self.machine_id, self.account, self.op
        );
        for (name, value) in &self.args {
            s.push_str(&format!("arg {name}: {}\n", json_string(value)));
        }
        s.push_str(&format!(
            "nonce: {}\nexpires: {}\n",
            self.nonce,
            format_rfc3339(self.expires)
        ));
        s
    }

    /// Parse a statement strictly: it must be exactly what [`Statement::text`] renders (a
    /// missing final newline is tolerated). The error names the line that is wrong.
    pub fn parse(text: &str) -> std::result::Result<Statement, String> {
        let body = text.strip_suffix('\n').unwrap_or(text);
        if body.is_empty() {
            return Err("the statement is empty".into());
        }
        if let Some(i) = body.find('\r') {
            let line = body[..i].matches('\n').count() + 1;
            return Err(format!(
                "line {line}: carriage return (CRLF line ends?): a statement's lines end with \\n only"
            ));
        }
        let lines: Vec<&str> = body.split('\n').collect();
        let bad = |n: usize, why: String| format!("line {}: {why}", n + 1);
        let field = |n: usize, key: &str| -> std::result::Result<&str, String> {
            let line = lines.get(n).copied().unwrap_or("");
            line.strip_prefix(key)
                .and_then(|l| l.strip_prefix(": "))
                .ok_or_else(|| {
                    if n >= lines.len() {
                        bad(n, format!("missing; expected `{key}: …`"))
                    } else {
                        bad(
                            n,
                            format!("expected `{key}: …`, found {:?}", printable(line)),
                        )
                    }
                })
        };
        if lines[0] != VERSION_LINE {
            return Err(bad(
                0,
                format!(
                    "expected `{VERSION_LINE}`, found {:?}: not a pxagent approval statement (or another version)",
                    printable(lines[0])
                ),
            ));
        }
        let host = field(1, "host")?;
        if !valid_host(host) {
            return Err(bad(1, format!("invalid host name {:?}", printable(host))));
        }
        let machine_id = field(2, "machine-id")?;
        if !valid_machine_id(machine_id) {
            return Err(bad(
                2,
                format!(
                    "invalid machine id {:?}: expected 32 lowercase hex characters",
                    printable(machine_id)
                ),
            ));
        }
        let account = field(3, "account")?;
        if !valid_account(account) {
            return Err(bad(3, format!("invalid account {:?}", printable(account))));
        }
        let op = field(4, "op")?;
        if !valid_op(op) {
            return Err(bad(4, format!("invalid op id {:?}", printable(op))));
        }
        let mut args: BTreeMap<String, String> = BTreeMap::new();
        let mut n = 5;
        while let Some(rest) = lines.get(n).and_then(|l| l.strip_prefix("arg ")) {
            let (name, value) = parse_arg(rest).map_err(|why| bad(n, why))?;
            if let Some((last, _)) = args.last_key_value()
                && name.as_str() <= last.as_str()
            {
                return Err(bad(
                    n,
                    format!(
                        "arg `{name}` is out of order or repeated: args are sorted by name, each once"
                    ),
                ));
            }
            args.insert(name, value);
            n += 1;
        }
        let nonce = field(n, "nonce")?;
        if !valid_nonce(nonce) {
            return Err(bad(
                n,
                format!(
                    "invalid nonce {:?}: expected 32 lowercase hex characters",
                    printable(nonce)
                ),
            ));
        }
        let expires_text = field(n + 1, "expires")?;
        let expires = parse_rfc3339(expires_text).ok_or_else(|| {
            bad(
                n + 1,
                format!(
                    "invalid expiry {:?}: expected RFC 3339 UTC to the second, e.g. 2026-12-01T12:10:00Z",
                    printable(expires_text)
                ),
            )
        })?;
        if lines.len() > n + 2 {
            return Err(bad(
                n + 2,
                format!(
                    "unexpected line {:?} after `expires`",
                    printable(lines[n + 2])
                ),
            ));
        }
        let st = Statement {
            host: host.to_string(),
            machine_id: machine_id.to_string(),
            account: account.to_string(),
            op: op.to_string(),
            args,
            nonce: nonce.to_string(),
            expires,
        };
        // Every line was checked against its own canonical form above; this is the guard
        // that the whole is canonical too.
        if st.text().trim_end_matches('\n') != body {
            return Err("the statement is not in canonical form".into());
        }
        Ok(st)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if !valid_host(&self.host) {
            return Err(format!(
                "invalid host name {:?} for a statement",
                printable(&self.host)
            ));
        }
        if !valid_machine_id(&self.machine_id) {
            return Err(format!(
                "invalid machine id {:?} for a statement (32 lowercase hex characters)",
                printable(&self.machine_id)
            ));
        }
        if !valid_account(&self.account) {
            return Err(format!(
                "invalid account {:?} for a statement",
                printable(&self.account)
            ));
        }
        if !valid_op(&self.op) {
            return Err(format!(
                "invalid op id {:?} for a statement",
                printable(&self.op)
            ));
        }
        for (name, value) in &self.args {
            if !valid_arg_name(name) {
                return Err(format!(
                    "invalid arg name {:?} for a statement",
                    printable(name)
                ));
            }
            if let Some(why) = bad_value(value) {
                return Err(format!("arg `{name}` {why}"));
            }
        }
        Ok(())
    }
}

/// `name: "value"` of an `arg` line: the value must be a JSON string in serde_json's own
/// spelling, so that it has one form.
fn parse_arg(rest: &str) -> std::result::Result<(String, String), String> {
    let (name, json) = rest
        .split_once(": ")
        .ok_or_else(|| "expected `arg NAME: \"VALUE\"`".to_string())?;
    if !valid_arg_name(name) {
        return Err(format!("invalid arg name {:?}", printable(name)));
    }
    let value: String = serde_json::from_str(json)
        .map_err(|_| format!("arg `{name}`: the value is not one JSON string"))?;
    if json_string(&value) != json {
        return Err(format!(
            "arg `{name}`: the value is not in canonical JSON form (expected {})",
            json_string(&value)
        ));
    }
    if let Some(why) = bad_value(&value) {
        return Err(format!("arg `{name}` {why}"));
    }
    Ok((name.to_string(), value))
}

fn json_string(value: &str) -> String {
    serde_json::Value::String(value.to_string()).to_string()
}

fn printable(s: &str) -> String {
    let cut: String = s.chars().take(80).collect();
    crate::base::text::printable(&cut)
}

fn expiry(ttl: Duration, now: u64) -> Result<u64> {
    if ttl.as_secs() == 0 || ttl > MAX_TTL {
        return Err(Error::usage(format!(
            "an approval lasts from 1 second to {}; {} is not allowed",
            crate::base::time::describe_duration(MAX_TTL),
            crate::base::time::describe_duration(ttl)
        )));
    }
    Ok(now.saturating_add(ttl.as_secs()))
}

/// 128 bits from the kernel's random source, as 32 lowercase hex characters.
fn random_nonce() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::Internal(format!("cannot read /dev/urandom for a nonce: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_126_400; // 2026-12-01T12:00:00Z

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sample() -> Statement {
        Statement {
            host: "pve1".into(),
            machine_id: MID.into(),
            account: "zen-agent".into(),
            op: "vm.destroy".into(),
            args: args(&[("vmid", "100"), ("purge", "1")]),
            nonce: "0123456789abcdef0123456789abcdef".into(),
            expires: NOW + 600,
        }
    }

    const MID: &str = "5c4b3a2918f7e6d5c4b3a2918f7e6d5c";
    const PLACE: Place = Place {
        host: "pve1",
        machine_id: MID,
        account: "zen-agent",
    };

    const SAMPLE: &str = "pxagent-approval/2\nhost: pve1\nmachine-id: 5c4b3a2918f7e6d5c4b3a2918f7e6d5c\naccount: zen-agent\nop: vm.destroy\narg purge: \"1\"\narg vmid: \"100\"\nnonce: 0123456789abcdef0123456789abcdef\nexpires: 2026-12-01T12:10:00Z\n";

    #[test]
    fn text_is_the_documented_form_and_parses_back() {
        assert_eq!(sample().text(), SAMPLE);
        assert_eq!(Statement::parse(SAMPLE).unwrap(), sample());
        assert_eq!(
            Statement::parse(SAMPLE.trim_end_matches('\n')).unwrap(),
            sample(),
            "a missing final newline is tolerated"
        );
    }

    #[test]
    fn any_value_round_trips_on_one_line() {
        let mut st = sample();
        st.args = args(&[
            ("a", "two words"),
            ("b", "quote \" and backslash \\"),
            ("c", "line\nbreak\tand\u{7f}"),
            ("d", ""),
            ("e", "ünïcødé ✓"),
        ]);
        let text = st.text();
        assert_eq!(text.lines().count(), 12, "{text}");
        assert!(
            text.contains("arg c: \"line\\nbreak\\tand\u{7f}\"\n"),
            "{text}"
        );
        assert_eq!(Statement::parse(&text).unwrap(), st);
    }

    #[test]
    fn zero_args_are_allowed() {
        let mut st = sample();
        st.args.clear();
        assert_eq!(Statement::parse(&st.text()).unwrap(), st);
    }

    fn refused(text: &str, expect: &str) {
        let err = Statement::parse(text).expect_err(text);
        assert!(err.contains(expect), "{err:?} should contain {expect:?}");
    }

    #[test]
    fn strict_parse_names_the_wrong_line() {
        let swap = SAMPLE.replace(
            "host: pve1\nmachine-id: ",
            "machine-id: 5c4b3a2918f7e6d5c4b3a2918f7e6d5c\nhost: ",
        );
        refused(&swap, "line 2: expected `host: …`");
        refused(
            &SAMPLE.replace("\nmachine-id: 5c4b3a2918f7e6d5c4b3a2918f7e6d5c", ""),
            "line 3: expected `machine-id: …`",
        );
        refused(
            &SAMPLE.replace(
                "5c4b3a2918f7e6d5c4b3a2918f7e6d5c",
                "5C4B3A2918F7E6D5C4B3A2918F7E6D5C",
            ),
            "line 3: invalid machine id",
        );
        refused(
            &SAMPLE.replace("account: zen-agent", "account: zen agent"),
            "line 4: invalid account",
        );
        refused(
            &SAMPLE.replace("account: zen-agent", "account: root\u{2028}"),
            "line 4: invalid account",
        );
        refused(
            &SAMPLE.replace("account: zen-agent\n", ""),
            "line 4: expected `account: …`",
        );
        let unsorted = SAMPLE.replace(
            "arg purge: \"1\"\narg vmid: \"100\"\n",
            "arg vmid: \"100\"\narg purge: \"1\"\n",
        );
        refused(&unsorted, "line 7: arg `purge` is out of order");
        let repeated = SAMPLE.replace(
            "arg vmid: \"100\"\n",
            "arg vmid: \"100\"\narg vmid: \"101\"\n",
        );
        refused(&repeated, "line 8: arg `vmid` is out of order or repeated");
        refused(&format!("{SAMPLE}extra: 1\n"), "line 10: unexpected line");
        refused(&format!("{SAMPLE}\n"), "line 10: unexpected line");
        refused(
            &SAMPLE.replace(
                "0123456789abcdef0123456789abcdef",
                "0123456789ABCDEF0123456789abcdef",
            ),
            "line 8: invalid nonce",
        );
        refused(
            &SAMPLE.replace("0123456789abcdef0123456789abcdef", "0123456789abcdef"),
            "line 8: invalid nonce",
        );
        refused(&SAMPLE.replace('\n', "\r\n"), "line 1: carriage return");
        refused(
            &SAMPLE.replace("\"100\"", "100"),
            "line 7: arg `vmid`: the value is not one JSON string",
        );
        refused(
            &SAMPLE.replace("\"100\"", "\"\\u0031\\u00300\""),
            "not in canonical JSON form",
        );
        refused(&SAMPLE.replace("arg vmid: ", "arg vmid:  "), "line 7");
        refused(
            &SAMPLE.replace("arg vmid", "arg VMID"),
            "line 7: invalid arg name",
        );
        refused(
            &SAMPLE.replace("host: pve1", "host: pve1 "),
            "line 2: invalid host name",
        );
        refused(
            &SAMPLE.replace("host: pve1", "host:pve1"),
            "line 2: expected `host: …`",
        );
        refused(
            &SAMPLE.replace("op: vm.destroy", "op: vm destroy"),
            "line 5: invalid op id",
        );
        refused(
            &SAMPLE.replace("2026-12-01T12:10:00Z", "2026-12-01T12:10:00.000Z"),
            "line 9: invalid expiry",
        );
        refused(
            &SAMPLE.replace("pxagent-approval/2", "pxagent-approval/1"),
            "line 1: expected `pxagent-approval/2`",
        );
        refused(
            &SAMPLE.replace("\nexpires: 2026-12-01T12:10:00Z\n", "\n"),
            "line 9: missing; expected `expires: …`",
        );
        refused(
            &SAMPLE.replace("\"100\"", "\"1\u{202E}00\""),
            "invisible character U+202E",
        );
        refused("", "empty");
    }

    #[test]
    fn new_validates_and_makes_fresh_nonces() {
        let a = Statement::new(
            PLACE,
            "vm.destroy",
            args(&[("vmid", "100")]),
            super::super::DEFAULT_TTL,
            NOW,
        )
        .unwrap();
        let b = Statement::new(
            PLACE,
            "vm.destroy",
            args(&[("vmid", "100")]),
            super::super::DEFAULT_TTL,
            NOW,
        )
        .unwrap();
        assert!(valid_nonce(&a.nonce));
        assert_ne!(a.nonce, b.nonce);
        assert_eq!(a.expires, NOW + 600);
        assert_eq!(Statement::parse(&a.text()).unwrap(), a);
        for (host, op, name) in [
            ("-pve", "vm.destroy", "vmid"),
            ("pve1", "VM.destroy", "vmid"),
            ("pve1", "vm.destroy", "vm-id"),
            ("pve 1", "vm.destroy", "vmid"),
        ] {
            let place = Place { host, ..PLACE };
            let err = Statement::new(place, op, args(&[(name, "1")]), MAX_TTL, NOW).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
        }
        for place in [
            Place {
                account: "uid 1001",
                ..PLACE
            },
            Place {
                account: "",
                ..PLACE
            },
            Place {
                machine_id: "",
                ..PLACE
            },
            Place {
                machine_id: "xyz",
                ..PLACE
            },
        ] {
            let err = Statement::new(place, "vm.start", BTreeMap::new(), MAX_TTL, NOW);
            assert_eq!(err.unwrap_err().exit_code(), 2, "{place:?}");
        }
        let err = Statement::new(
            PLACE,
            "vm.destroy",
            args(&[("vmid", "1\u{200B}")]),
            MAX_TTL,
            NOW,
        )
        .unwrap_err();
        assert!(err.to_string().contains("U+200B"), "{err}");
    }

    #[test]
    fn ttl_bounds() {
        let st = sample();
        let longer = st.with_ttl(MAX_TTL, NOW + 5).unwrap();
        assert_eq!(longer.expires, NOW + 5 + 3600);
        assert_eq!(longer.nonce, st.nonce);
        assert_eq!(longer.args, st.args);
        assert!(st.with_ttl(MAX_TTL + Duration::from_secs(1), NOW).is_err());
        assert!(st.with_ttl(Duration::ZERO, NOW).is_err());
        assert!(st.with_ttl(Duration::from_millis(500), NOW).is_err());
        let err = Statement::new(
            PLACE,
            "vm.start",
            BTreeMap::new(),
            Duration::from_secs(7200),
            NOW,
        )
        .unwrap_err();
        assert!(err.to_string().contains("from 1 second to 1h"), "{err}");
    }
}
