//! `pve-sim`: the multi-call Proxmox VE CLI simulator of the pxagent test bed (never shipped).
//! All logic is in the library (`pve_sim::run`) so tests can drive it in-process; this file only
//! wires the real process identity, environment and stdio to it.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let env = pve_sim::Env::from_process();
    let out = pve_sim::run(&argv, &env);
    // Ignore EPIPE and the like: the real tools die silently on a closed pipe too.
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    ExitCode::from(u8::try_from(out.code & 0xff).unwrap_or(255))
}
