//! N reads over ONE pxagent SSH connection, for `scripts/bench.sh` (design §9).
//!
//! Why this exists: the CLI opens one connection per process, and the path that reuses one
//! connection for many reads (the MCP server, issue 7) does not exist yet. This example drives
//! the same library transport the CLI uses, [`pxagent::ssh::Session`], so the benchmark can
//! measure "50 reads over one connection" honestly today: one process, one TCP connection,
//! one handshake and authentication, then N × `sudo -n /usr/bin/pvesh get /version
//! --output-format json`, each on its own channel.
//!
//! Usage: `bench_reads [N] [--sequential]` (default N = 50). Without `--sequential` the reads
//! run concurrently through `Session::exec_many` (at most 8 channels at once); with it, one
//! after another, as a client that waits for each answer would send them.
//!
//! Connection settings come from the same variables the CLI reads (`eval "$(scripts/testbed.sh
//! env)"`): PXAGENT_HOST, PXAGENT_PORT, PXAGENT_USER, PXAGENT_IDENTITY, PXAGENT_KNOWN_HOSTS.
//! Only that identity file is used (no agent), and the host key is checked strictly.
//!
//! Prints `N/N reads ok` on stdout and exits 0 only if every read exited 0 and printed a JSON
//! object with a `version` field; anything else exits 1, so a benchmark never times failures.

use std::path::PathBuf;
use std::process::ExitCode;

use pxagent::ssh::{Session, Target};

const READ: [&str; 7] = [
    "sudo",
    "-n",
    "/usr/bin/pvesh",
    "get",
    "/version",
    "--output-format",
    "json",
];

fn env(name: &str) -> Result<String, String> {
    std::env::var(name)
        .map_err(|_| format!("{name} is not set (eval \"$(scripts/testbed.sh env)\")"))
}

fn target() -> Result<Target, String> {
    let port = env("PXAGENT_PORT")?
        .parse::<u16>()
        .map_err(|e| format!("PXAGENT_PORT: {e}"))?;
    let mut t = Target::new(env("PXAGENT_HOST")?, port, env("PXAGENT_USER")?);
    t.identities = vec![PathBuf::from(env("PXAGENT_IDENTITY")?)];
    t.identities_only = true;
    t.use_agent = false;
    t.known_hosts = PathBuf::from(env("PXAGENT_KNOWN_HOSTS")?);
    Ok(t)
}

fn is_version(out: &pxagent::ssh::Output) -> bool {
    out.success()
        && serde_json::from_str::<serde_json::Value>(&out.stdout_text())
            .is_ok_and(|v| v.get("version").is_some())
}

async fn run(n: usize, sequential: bool) -> Result<usize, String> {
    let session = Session::connect(&target()?)
        .await
        .map_err(|e| e.to_string())?;
    let argv: Vec<String> = READ.iter().map(|s| s.to_string()).collect();
    let results = if sequential {
        let mut results = Vec::with_capacity(n);
        for _ in 0..n {
            results.push(session.exec(&argv).await);
        }
        results
    } else {
        session.exec_many(vec![argv; n]).await
    };
    session.close().await;
    let mut ok = 0;
    for r in results {
        match r {
            Ok(out) if is_version(&out) => ok += 1,
            Ok(out) => eprintln!(
                "bench_reads: a read failed: exit {}: {}",
                out.exit_status,
                out.stderr_text().trim()
            ),
            Err(e) => eprintln!("bench_reads: a read failed: {e}"),
        }
    }
    Ok(ok)
}

fn main() -> ExitCode {
    let mut n = 50;
    let mut sequential = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--sequential" => sequential = true,
            s => match s.parse::<usize>() {
                Ok(v) if v > 0 => n = v,
                _ => {
                    eprintln!("usage: bench_reads [N] [--sequential]");
                    return ExitCode::from(2);
                }
            },
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench_reads: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(n, sequential)) {
        Ok(ok) => {
            println!("{ok}/{n} reads ok");
            if ok == n {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("bench_reads: {e}");
            ExitCode::FAILURE
        }
    }
}
