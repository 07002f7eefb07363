//! `pxagent approve --key FILE [--ttl DURATION] STATEMENT`: the human side of signed
//! approvals. A local command: it reads the statement a host issued, shows on stderr what is
//! being approved, and prints the approval on stdout (the armored signature, or with `--ttl`
//! the re-dated statement followed by it). Approvals are never logged or recorded here: the
//! host's gate records what it accepts.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::approval::{self, Approval, CLOCK_SKEW, MAX_TTL, NAMESPACE, Statement, VERSION_LINE};
use crate::base::error::{Error, Result};
use crate::base::time::{describe_duration, format_rfc3339};
use crate::output::{self, Format, Output};

/// Longest statement read (a real one is a few hundred bytes).
const MAX_STATEMENT_BYTES: usize = 64 * 1024;

/// Sign `statement` (a file, `-`, or the text) with the key at `key`.
pub fn approve(key: &Path, ttl: Option<Duration>, statement: &str, out: &Output) -> Result<u8> {
    let text = read_statement(statement)?;
    let st = Statement::parse(&text)
        .map_err(|why| Error::usage(format!("not a valid approval statement: {why}")))?;
    let key = approval::load_private_key(key)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| Error::Internal("the system clock is before 1970".into()))?
        .as_secs();
    let st = match ttl {
        Some(ttl) => st.with_ttl(ttl, now)?,
        None => st,
    };
    if st.expires <= now {
        return Err(Error::usage(format!(
            "the statement expired at {}: ask for the operation again to get a fresh one, or \
             give this one a new expiry with --ttl",
            format_rfc3339(st.expires)
        )));
    }
    if st.expires > now + MAX_TTL.as_secs() + CLOCK_SKEW.as_secs() {
        return Err(Error::usage(format!(
            "the statement stays valid until {}, longer than the {} an approval may last (the \
             host would refuse it): sign with --ttl of at most {}",
            format_rfc3339(st.expires),
            describe_duration(MAX_TTL),
            describe_duration(MAX_TTL)
        )));
    }
    show(&st, now);
    let signature = approval::sign(&key, &st.text())?;
    let changed = ttl.is_some();
    let approval = Approval {
        statement: changed.then(|| st.text()),
        signature,
    };
    if changed {
        output::note(
            "--ttl changed the statement's expiry: the approval is the whole output (statement \
             and signature)",
        );
    }
    match out.format {
        Format::Json => out.success(
            "approve",
            json!({
                "host": st.host,
                "machine_id": st.machine_id,
                "account": st.account,
                "op": st.op,
                "args": st.args,
                "nonce": st.nonce,
                "expires": format_rfc3339(st.expires),
                "statement_changed": changed,
                "approval": approval.to_text(),
            }),
            |_| String::new(),
        ),
        Format::Table => output::write_raw(&approval.to_text()),
    }
    Ok(0)
}

/// What the human is approving, on stderr, before anything is signed.
pub(super) fn show(st: &Statement, now: u64) {
    output::note(format!(
        "approving `{}` on host {} as account {} (the host's machine id {}: `cat /etc/machine-id` there shows it; SSH signature, namespace {NAMESPACE})",
        st.op, st.host, st.account, st.machine_id
    ));
    for (name, value) in &st.args {
        output::note(format!(
            "  {name} = {}",
            serde_json::Value::String(value.clone())
        ));
    }
    output::note(format!(
        "  valid once, until {} ({} from now)",
        format_rfc3339(st.expires),
        describe_duration(Duration::from_secs(st.expires - now))
    ));
}

/// The statement's text: the argument itself when it is one, stdin for `-`, else a file.
fn read_statement(arg: &str) -> Result<String> {
    if arg.starts_with(VERSION_LINE) {
        return Ok(arg.to_string());
    }
    let read_err = |source| Error::ReadFile {
        path: arg.into(),
        source,
    };
    let mut bytes = Vec::new();
    let limit = (MAX_STATEMENT_BYTES + 1) as u64;
    if arg == "-" {
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::io::stdin().lock(), limit),
            &mut bytes,
        )
        .map_err(read_err)?;
    } else {
        let file = std::fs::File::open(arg).map_err(read_err)?;
        std::io::Read::read_to_end(&mut std::io::Read::take(file, limit), &mut bytes)
            .map_err(read_err)?;
    }
    if bytes.len() > MAX_STATEMENT_BYTES {
        return Err(Error::usage(format!(
            "{arg} is larger than {MAX_STATEMENT_BYTES} bytes: not an approval statement"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        Error::usage(format!(
            "{arg} is not UTF-8 text: not an approval statement"
        ))
    })
}
