//! `pxagent-helper`: see the library's documentation. Exit codes: 0 the image is published
//! (its volume id on stdout), 1 a file system error, 2 a malformed command line, 3 the storage
//! cannot take an image, 4 the bytes did not arrive as declared, 5 the name is taken, 6 the
//! image would fill the file system over the limit.

use std::process::ExitCode;

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
    let done = pxagent_helper::parse_args(&args)
        .and_then(|req| pxagent_helper::iso_receive(&req, &mut std::io::stdin().lock()));
    match done {
        Ok(volid) => {
            println!("{{\"volid\":\"{volid}\"}}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("pxagent-helper: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}
