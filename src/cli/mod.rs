//! The command-line front end: the only user of clap. It turns argv into typed settings and
//! hands them to the engine; nothing outside this folder names clap.

pub mod args;
mod commands;
pub mod settings;

pub use args::command;

use std::ffi::OsString;

use clap::ArgMatches;

use crate::error::Error;
use crate::invocation::Invocation;
use crate::output::{self, Format, Output};
use crate::{audit, catalog, mcp};

/// Run pxagent with these arguments (program name first) and return the exit code.
pub fn run(args: Vec<OsString>) -> u8 {
    let _ = commands::ARGS.set(args.clone());
    let format = prescan_format(&args);
    let matches = match command().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return clap_error(e, format),
    };
    let out = Output {
        format: matches
            .get_one::<String>("output")
            .and_then(|s| Format::parse(s))
            .unwrap_or(Format::Table),
        host: matches.get_one::<String>("host").cloned(),
    };
    let started = std::time::Instant::now();
    let mut trail = commands::Trail::default();
    let (op_name, result) = dispatch(&matches, &out, &mut trail);
    let code = match &result {
        Ok(code) => *code,
        Err((err, _)) => err.exit_code(),
    };
    if trail.audited {
        if trail.host.is_none() {
            trail.host = matches.get_one::<String>("host").cloned();
        }
        trail.record(
            &op_name,
            audit::Via::Cli,
            result.as_ref().err().map(|(e, _)| e),
            code,
            started.elapsed(),
        );
    }
    match result {
        Ok(code) => code,
        Err((err, data)) => {
            out.failure(&op_name, &err, data);
            err.exit_code()
        }
    }
}

use commands::Failure;

fn dispatch(
    m: &ArgMatches,
    out: &Output,
    trail: &mut commands::Trail,
) -> (String, std::result::Result<u8, Failure>) {
    let Some((top, sub)) = m.subcommand() else {
        return (
            "pxagent".into(),
            Err((Error::usage("no command given"), None)),
        );
    };
    match top {
        "catalog" => (
            "catalog".into(),
            commands::catalog(out).map_err(|e| (e, None)),
        ),
        "preflight" => ("preflight".into(), commands::preflight(m, sub, out, trail)),
        "audit" => match sub.subcommand() {
            Some(("show", a)) => (
                "audit.show".into(),
                commands::audit_show(a, out).map_err(|e| (e, None)),
            ),
            Some(("verify", _)) => ("audit.verify".into(), commands::audit_verify(out)),
            _ => (
                "audit".into(),
                Err((
                    Error::usage("expected `audit show` or `audit verify`"),
                    None,
                )),
            ),
        },
        "mcp" => ("mcp".into(), mcp::serve(m, sub).map_err(|e| (e, None))),
        "status" => (
            "status".into(),
            commands::status(m, out, trail).map_err(|e| (e, None)),
        ),
        "sudoers" => match sub.subcommand() {
            Some(("render", r)) => (
                "sudoers.render".into(),
                commands::sudoers_render(m, r, out).map_err(|e| (e, None)),
            ),
            Some(("lint", l)) => ("sudoers.lint".into(), commands::sudoers_lint(l, out)),
            _ => (
                "sudoers".into(),
                Err((
                    Error::usage("expected `sudoers render` or `sudoers lint`"),
                    None,
                )),
            ),
        },
        _ => {
            // A catalog op: find its path (one or two words).
            let (path, leaf): (Vec<&str>, &ArgMatches) = match sub.subcommand() {
                Some((second, leaf)) => (vec![top, second], leaf),
                None => (vec![top], sub),
            };
            let op_id = catalog::ops_at(&path)
                .first()
                .map(|o| o.id.to_string())
                .unwrap_or_else(|| path.join("."));
            // Commands inside guests run their own flow (several remote steps, file sync).
            if let Some(op) = catalog::ops_at(&path)
                .into_iter()
                .find(|o| o.risk == catalog::Risk::Exec)
            {
                return (op_id, crate::exec::cli(m, leaf, op, out, trail));
            }
            trail.audited = true;
            let result = Invocation::from_matches(&path, leaf)
                .and_then(|inv| commands::run_op(m, &inv, out, trail));
            (op_id, result.map_err(|e| (e, None)))
        }
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
            eprint!("{}", e.render());
            2
        }
        _ => {
            let msg = e.render().to_string();
            let first = msg
                .lines()
                .next()
                .unwrap_or("invalid usage")
                .trim_start_matches("error: ")
                .to_string();
            let err = Error::usage(first);
            match format {
                Format::Json => Output { format, host: None }.failure("pxagent", &err, None),
                Format::Table => eprint!("{msg}"),
            }
            err.exit_code()
        }
    }
}
