//! The command-line front end: the only user of clap. Parsing is two steps (ripgrep's model):
//! [`args`] shapes the words (the command tree, generated from the catalog), [`settings`]
//! types them once into [`settings::Settings`] and a [`settings::Cmd`]; the commands in
//! [`commands`] then work on typed values through a [`crate::config::context::Context`] and the
//! engine. Nothing outside this folder names clap; nothing here is global, so [`run`] can be
//! called any number of times in one process.
//!
//! Layer: cli. May import: `approval`, `audit`, `base`, `batch`, `catalog`, `config`, `engine`,
//! `host`, `mcp`, `output`, `persist`, `remote`, `ssh`, `views`.

pub mod args;
mod commands;
pub mod fleet;
pub mod logging;
pub mod settings;

pub use args::command;

use std::ffi::OsString;
use std::time::Instant;

use clap::ArgMatches;

use crate::audit;
use crate::base::error::Error;
use crate::catalog;
use crate::engine::Trail;
use crate::output::{self, Format, Output};
use settings::Settings;

/// An error plus optional data for the JSON error document.
pub type Failure = (Error, Option<serde_json::Value>);

/// Run pxagent with these arguments (program name first) and return the exit code.
pub fn run(args: Vec<OsString>) -> u8 {
    let format = prescan_format(&args);
    let (mut tree, whole) = args::command_for(&args);
    let matches = match tree.try_get_matches_from_mut(&args) {
        Ok(m) => m,
        Err(_) if !whole => {
            tree = command();
            match tree.try_get_matches_from_mut(&args) {
                Ok(m) => m,
                Err(e) => return clap_error(e, format),
            }
        }
        Err(e) => return clap_error(e, format),
    };
    let verbose = matches.get_count("verbose");
    crate::cli::logging::init(verbose);
    let (name, is_op) = path_name(&matches);
    let mut out = Output {
        format: matches
            .get_one::<String>("output")
            .and_then(|s| Format::parse(s))
            .unwrap_or(Format::Table),
        host: matches.get_one::<String>("host").cloned(),
    };
    let started = Instant::now();
    let mut trail = Trail {
        // Everything meant for a host is audited, also when its arguments are refused.
        audited: is_op,
        ..Trail::default()
    };
    let parsed = Settings::from_matches(&matches, &tree, args)
        .and_then(|s| settings::command(&matches, &s).map(|c| (s, c)));
    // Colour is decided once, before anything is written: never in JSON, never for the MCP
    // server (its stdout is the protocol).
    let color = match &parsed {
        Ok((_, settings::Cmd::Mcp { .. })) => output::style::ColorChoice::Never,
        Ok((s, _)) => s.color,
        Err(_) => matches
            .get_one::<String>("color")
            .and_then(|c| output::style::ColorChoice::parse(c))
            .unwrap_or_default(),
    };
    output::style::configure(color, out.format == Format::Json);
    if let Ok((
        _,
        settings::Cmd::Version {
            client_only: true, ..
        },
    )) = &parsed
    {
        // `version --client` reaches no host: nothing to audit.
        trail.audited = false;
    }
    // A panic is a bug, but it still ends as exit 10 with the op's audit record.
    let result = guarded(|| match parsed {
        Ok((s, cmd)) => commands::execute(&s, &cmd, &mut out, &mut trail),
        Err(e) => Err((e, None)),
    });
    let code = match &result {
        Ok(code) => *code,
        Err((err, _)) => err.exit_code(),
    };
    let took = started.elapsed();
    if trail.audited {
        if trail.host.is_none() {
            trail.host = out.host.clone();
        }
        trail.record(
            &name,
            audit::Via::Cli,
            result.as_ref().err().map(|(e, _)| e),
            code,
            took,
        );
    }
    tracing::info!(
        target: "pxagent",
        op = %name,
        host = trail.host.as_deref().unwrap_or("-"),
        account = trail.account.as_deref().unwrap_or("-"),
        exit = code,
        result = match &result { Ok(_) => "ok", Err((e, _)) => e.kind() },
        ms = took.as_millis() as u64,
        "{name}"
    );
    let code = match result {
        Ok(code) => code,
        Err((err, data)) => {
            out.failure(&name, &err, data);
            err.exit_code()
        }
    };
    // What we wrote must have arrived: a full disk or a closed file is exit 10; a reader that
    // went away (`| head`) is not an error.
    match output::take_write_error() {
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Some(e) => {
            output::note(format!("cannot write the output to stdout: {e}"));
            10
        }
        None => code,
    }
}

/// clap's error as one message: its first line, plus the arguments it lists (every missing
/// required one is named at once), without the usage and "for more information" lines.
fn clap_message(rendered: &str) -> String {
    let mut lines = rendered.lines();
    let first = lines
        .next()
        .unwrap_or("invalid usage")
        .trim_start_matches("error: ")
        .trim_end_matches(':')
        .to_string();
    let listed: Vec<&str> = lines
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if listed.is_empty() {
        first
    } else {
        format!("{first}: {}", listed.join(", "))
    }
}

/// Run `f`, turning a panic into [`Error::Internal`] (exit 10) instead of an abort, so the
/// caller still records and reports the run. The panic's own message and location went to
/// stderr through the default hook.
fn guarded(f: impl FnOnce() -> Result<u8, Failure>) -> Result<u8, Failure> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err((
                Error::Internal(format!(
                    "pxagent panicked ({}); this is a bug: please report it",
                    crate::base::text::printable(&what)
                )),
                None,
            ))
        }
    }
}

/// The name a run is reported under, from the command's path alone (so that even a refused
/// argument is reported under its op), and whether that path is a catalog op.
fn path_name(m: &ArgMatches) -> (String, bool) {
    let Some((top, sub)) = m.subcommand() else {
        return ("pxagent".into(), false);
    };
    let mut path = vec![top];
    let mut at = sub;
    while let Some((word, next)) = at.subcommand() {
        path.push(word);
        at = next;
    }
    match catalog::ops_at(&path).first() {
        Some(op) => (op.id.to_string(), true),
        None => (
            path.join("."),
            matches!(
                top,
                "preflight" | "status" | "freeze" | "thaw" | "grant" | "undo"
            ),
        ),
    }
}

/// Before clap has parsed anything, find out whether the caller wants JSON, so even a
/// usage error comes back as one JSON document.
fn prescan_format(args: &[OsString]) -> Format {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    for (i, w) in words.iter().enumerate() {
        let value = match w.as_str() {
            "-o" | "--output" => words.get(i + 1).map(String::as_str),
            _ => w.strip_prefix("--output=").or_else(|| w.strip_prefix("-o")),
        };
        if let Some(f) = value.and_then(Format::parse) {
            return f;
        }
    }
    std::env::var("PXAGENT_OUTPUT")
        .ok()
        .and_then(|v| Format::parse(&v))
        .unwrap_or(Format::Table)
}

fn clap_error(e: clap::Error, format: Format) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            output::write_raw(&e.render().to_string());
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `pxagent` or `pxagent vm` alone: show help on stderr, it is a usage error.
            output::write_stderr(&e.render().to_string());
            2
        }
        _ => {
            let msg = e.render().to_string();
            let err = Error::usage(clap_message(&msg));
            match format {
                Format::Json => Output { format, host: None }.failure("pxagent", &err, None),
                Format::Table => output::write_stderr(&msg),
            }
            err.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_after_sending_began_is_exit_10_and_completes_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        let mut trail = Trail {
            audited: true,
            log: Some(log.clone()),
            ..Trail::default()
        };
        let r = guarded(|| {
            trail
                .begin(&crate::catalog::ops::VM_START)
                .map_err(|e| (e, None))?;
            panic!("boom");
        });
        let (err, _) = r.unwrap_err();
        assert_eq!(err.exit_code(), 10);
        assert!(err.to_string().contains("panicked (boom)"), "{err}");
        trail.record(
            "vm.start",
            audit::Via::Cli,
            Some(&err),
            10,
            std::time::Duration::ZERO,
        );
        drop(trail);
        let recs = audit::read(&log, None).unwrap();
        assert_eq!(recs.len(), 2, "{recs:?}");
        assert_eq!(recs[0].phase, Some(audit::Phase::Started));
        assert_eq!(recs[1].phase, Some(audit::Phase::Done));
        assert_eq!((recs[1].started, recs[1].exit_code), (Some(1), 10));
        assert!(recs[1].error.as_deref().unwrap().contains("panicked"));
        assert_eq!(audit::verify(&log).unwrap().first_broken, None);
    }
}
