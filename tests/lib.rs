//! The one integration-test binary (`cargo test --test integration`): every black-box and live
//! test of pxagent, by topic, sharing one helper module (`support`) for running the real binary
//! in an isolated environment and for the sandbox host. One binary means one build and link,
//! and one process-wide lock for the tests that change the host, whichever topic they are in.
//!
//! Filter by topic: `cargo test --test integration cli::` (and `approve::`, `mcp_wire::`,
//! `sudoers_lint::`, and `setup::`, which needs only this machine's sshd binary) runs what needs
//! no host. The live topics (`live`, `actions`, `audit`, `batch`, `exec`, `fleet`, `mcp`,
//! `newops`, `cloud_images`, `persist`, `policy`, `pve`, `robust`, `scripting`, `storage_ops`, `health`,
//! `iso_upload`, `ha`, `backup_jobs`, `sudo_rules`, `sudo_fences`, `ct_restore`, `ssh_transport`, `tasks`, `outcomes`, `gate`, `grants`, `kill_switch`, `conflicts`, `undo`, `taint`, `host_chain`, `jump`, `ux`) need
//! root and the beds that `scripts/test.sh` brings up; without them they fail with what to run.

mod support;

mod actions;
mod approve;
mod audit;
mod backup_jobs;
mod batch;
mod cli;
mod cloud_images;
mod conflicts;
mod ct_restore;
mod docs_examples;
mod exec;
mod firewall;
mod fleet;
mod gate;
mod grants;
mod guest_map;
mod ha;
mod health;
mod host_chain;
mod iso_upload;
mod jump;
mod kill_switch;
mod layers;
mod live;
mod mcp;
mod mcp_wire;
mod network;
mod newops;
mod outcomes;
mod persist;
mod policy;
mod pve;
mod pve_schema;
mod robust;
mod scripting;
mod setup;
mod ssh_transport;
mod storage_ops;
mod sudo_fences;
mod sudo_rules;
mod sudoers_lint;
mod taint;
mod tasks;
mod undo;
mod ux;
