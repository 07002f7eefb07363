//! What runs or lands on the Proxmox host: the sudoers file pxagent renders and the lint that
//! reads hand-written ones ([`sudoers`]), the root scripts that set up and revoke a gated agent
//! account ([`setup`]), the preflight that proves a host's setup, and the gate that enforces
//! the catalog and the host policy as the key's forced command ([`gate`]).
//! Nothing below it imports it: the client never needs the host side to build or run an op.
//!
//! Layer: host. May import: `approval`, `base`, `catalog`, `output`, `policy`, `remote`, `ssh`.

pub mod gate;
pub mod preflight;
pub mod setup;
pub mod sudoers;
