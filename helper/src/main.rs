//! `pxagent-helper`: see the library's documentation. Exit codes: 0 done (one JSON object on
//! stdout), 1 a system error, 2 a malformed command line, 3 refused (the storage cannot take an
//! image; nothing pending, no such armed change), 4 the bytes did not arrive as declared, 5
//! the name is taken or a network change is already armed, 6 the image would fill the file
//! system over the limit.

use std::process::ExitCode;

use std::io::Read;

use pxagent_helper::Command;
use pxagent_helper::chain::{self, Chain};
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
        Command::AuditAppend => {
            let mut record = Vec::new();
            std::io::Read::take(std::io::stdin().lock(), chain::RECORD_MAX as u64 + 1)
                .read_to_end(&mut record)
                .map_err(|e| pxagent_helper::Failure::Failed(format!("cannot read stdin: {e}")))
                .and_then(|_| Chain::host().append(&sudo_account()?, &record))
        }
        Command::AuditVerify(at) => Chain::host().verify(at),
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

/// The account sudo runs the helper for: `SUDO_UID` (set by sudo, not by the caller) named by
/// `/etc/passwd`.
fn sudo_account() -> Result<String, pxagent_helper::Failure> {
    let uid = std::env::var("SUDO_UID")
        .ok()
        .filter(|u| !u.is_empty() && u.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            pxagent_helper::Failure::Usage("audit-append runs under sudo (no SUDO_UID)".into())
        })?;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    Ok(passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
        })
        .next()
        .unwrap_or(format!("uid {uid}")))
}
