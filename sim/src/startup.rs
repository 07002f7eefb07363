//! What every run of a real PVE tool costs before it does anything: `pvesh`, `qm` and `pct` are
//! Perl programs that load much of PVE's API at start (hundreds of milliseconds on a real
//! host), while the simulator starts in about a millisecond. So that a benchmark can show what a
//! user of a real host feels (issue 27: tool runs per action dominate), each tool run can be made
//! to spend a fixed start-up cost first.
//!
//! The cost is read from `tool-ms` beside the state file (root-only, as the state directory is;
//! written by `pve-sim tool-ms MS`, removed by `pve-sim tool-ms 0` and `reset`), because sudo's
//! `env_reset` strips the caller's environment; `PVE_SIM_TOOL_MS` sets it for a direct run (as
//! root, in the simulator's own tests). It is spent before the state lock, as real PVE's start-up
//! runs in parallel: concurrent runs overlap their start-up, and only their work is serialised.
//! Default 0: tests pay nothing.

use std::path::{Path, PathBuf};

use crate::Env;

/// The file that holds the cost, beside the state file.
fn file(state_path: &Path) -> PathBuf {
    state_path.with_file_name("tool-ms")
}

/// The start-up cost of one tool run, in milliseconds.
pub fn cost_ms(env: &Env) -> u64 {
    if let Some(ms) = std::env::var("PVE_SIM_TOOL_MS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return ms;
    }
    std::fs::read_to_string(file(&env.state_path))
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Set the cost (0 removes the file).
pub fn set(state_path: &Path, ms: u64) -> std::io::Result<()> {
    let f = file(state_path);
    if ms == 0 {
        return match std::fs::remove_file(&f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    std::fs::write(f, format!("{ms}\n"))
}

/// Spend the start-up cost of one tool run.
pub fn pay(env: &Env) {
    let ms = cost_ms(env);
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_is_kept_beside_the_state_and_zero_removes_it() {
        let dir = std::env::temp_dir().join(format!("pve-sim-startup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let env = Env {
            euid: Some(0),
            state_path: dir.join("state.json"),
            faults_path: dir.join("faults.json"),
            now: None,
        };
        assert_eq!(cost_ms(&env), 0);
        set(&env.state_path, 250).unwrap();
        assert_eq!(cost_ms(&env), 250);
        set(&env.state_path, 0).unwrap();
        assert_eq!(cost_ms(&env), 0);
        set(&env.state_path, 0).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
