//! What runs or lands on the Proxmox host: the sudoers file pxagent renders and the lint that
//! reads hand-written ones ([`sudoers`]), and the preflight that proves a host's setup.
//! It may use the catalog and the transport; nothing in the core depends on it.

pub mod preflight;
pub mod sudoers;
