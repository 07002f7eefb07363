//! `pxagent-helper`: see the library's documentation. Exit codes: 0 done (one JSON object on
//! stdout), 1 a system error, 2 a malformed command line, 3 refused (the storage cannot take an
//! image; nothing pending, no such armed change), 4 the bytes did not arrive as declared, 5
//! the name is taken or a network change is already armed, 6 the image would fill the file
//! system over the limit.

use std::process::ExitCode;

use pxagent_helper::Command;
use pxagent_helper::net::Net;

fn main() -> ExitCode {
    let args: Vec<String> = match std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect::<Result<_, _>>()
    {
        Ok(a) => a,
        Err(_) => {
            eprintln!("pxagent-helper: an argument is not UTF-8");
            return ExitCode::from(2);
        }
    };
    let done = pxagent_helper::parse_command(&args).and_then(|cmd| match cmd {
        Command::IsoReceive(req) => pxagent_helper::iso_receive(&req, &mut std::io::stdin().lock())
            .map(|volid| format!("{{\"volid\":\"{volid}\"}}")),
        Command::NetPending => Net::host().pending(),
        Command::NetArm(seconds) => Net::host().arm(seconds),
        Command::NetConfirm(token) => Net::host().confirm(&token),
        Command::NetRevert(None) => Net::host().revert(None, "reverted by root"),
        // The systemd timer's call at the deadline.
        Command::NetRevert(Some(id)) => Net::host().revert(
            Some(&id),
            "no confirm arrived within the window: the previous configuration is back",
        ),
        Command::NetWatch(id) => Net::host().watch(&id),
    });
    match done {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("pxagent-helper: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}
