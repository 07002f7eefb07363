//! Logs on stderr through `tracing` (logs go to stderr, data to stdout).
//!
//! Nothing by default. `-v`: one line per operation (host, account, op, result, time).
//! `-vv`: also the connection, the host key's fingerprint, the auth method, and every remote
//! argv with its exit status and duration. `-vvv`: also russh's own logs (its key exchange;
//! the `log` crate, bridged) and rmcp's. `PXAGENT_LOG` (else `RUST_LOG`) takes a filter in
//! `tracing-subscriber`'s `EnvFilter` syntax and wins over `-v`.
//!
//! What is never logged: key material, approvals, pushed file contents, `--stdin` data (the
//! modules that handle them log sizes only).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::util::SubscriberInitExt;

/// The filter for a `-v` count.
pub fn filter_for(verbose: u8) -> &'static str {
    match verbose {
        0 => "off",
        1 => "pxagent=info",
        2 => "pxagent=debug",
        _ => "pxagent=trace,russh=debug,rmcp=debug",
    }
}

/// Install the stderr subscriber for this process. Later calls (a second [`crate::run`] in
/// one process) keep the first subscriber: a global one can be set once.
pub fn init(verbose: u8) {
    let spec = ["PXAGENT_LOG", "RUST_LOG"].iter().find_map(|k| {
        let v = std::env::var(k).ok().filter(|v| !v.trim().is_empty())?;
        Some((*k, v))
    });
    // A bad filter must not silence the logs the user asked for: say so and use -v's.
    let filter = match spec {
        Some((name, spec)) => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            crate::output::note(format!(
                "{name}={spec:?} is not a log filter ({e}); using -v's"
            ));
            EnvFilter::new(filter_for(verbose))
        }),
        None => EnvFilter::new(filter_for(verbose)),
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_target(true)
        .compact()
        .finish()
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_grow_with_v() {
        assert_eq!(filter_for(0), "off");
        assert!(filter_for(2).contains("debug"));
        assert!(filter_for(3).contains("russh"));
        for v in 0..5 {
            assert!(EnvFilter::try_new(filter_for(v)).is_ok());
        }
    }
}
