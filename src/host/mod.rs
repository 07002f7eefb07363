//! What runs or lands on the Proxmox host: the sudoers file pxagent renders and the lint that
//! reads hand-written ones ([`sudoers`]), the root scripts that set up and revoke a gated agent
//! account ([`setup`]), the preflight that proves a host's setup, and the gate that enforces
//! the catalog and the host policy as the key's forced command ([`gate`]).
//! It may use the catalog and the transport; nothing in the core depends on it.

pub mod gate;
pub mod preflight;
pub mod setup;
pub mod sudoers;
