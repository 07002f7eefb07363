//! The `pxagent` binary: a thin wrapper around [`pxagent::run`].

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(pxagent::run(std::env::args_os().collect()))
}
