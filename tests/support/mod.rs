//! What every topic module of the integration-test binary shares: running the real `pxagent`
//! binary in an isolated environment ([`px`], [`Home`], [`Run`]), the sandbox host (the "bed":
//! [`bed`], the simulator, fault injection, sudo's log, the sudoers swap, the one process-wide
//! [`lock`] for tests that change the host) and what the simulated Proxmox holds ([`backups`],
//! [`node_of`], [`running_task`]).
//!
//! Decisions: nothing a developer's shell exports reaches pxagent (the environment is cleared,
//! then PATH, HOME and the XDG dirs point into a temp dir, and a test adds only what it means
//! to); a test that needs the bed and finds no `PXAGENT_*` variables FAILS with what to run,
//! it never skips. May use the `pxagent` library, std, serde_json and tempfile; never reads
//! `/work/shared` (fixtures live in `tests/fixtures/`).

mod bed;
mod pve;
mod run;

pub use bed::*;
pub use pve::*;
pub use run::*;
