//! Local policy: what this pxagent installation refuses before anything is sent.
//!
//! The host's sudoers decides what the agent account *can* run; this policy narrows what this
//! client *will* run: deny an op, demand a confirmation phrase for an op the catalog does not
//! soft-blacklist, protect guests, go read-only, rate-limit guest commands and allow only some
//! command shapes. It is the weakest layer (see ARCHITECTURE.md) — anyone holding the key and
//! a plain `ssh` walks past it — so it guards against a mistaken, looping or prompt-injected
//! agent, not against a thief. Refusals are exit 3 and one line that says what was refused,
//! why, and which config key did it.
//!
//! A policy is the config's `policy:` section, or its own file (`--policy FILE`,
//! `PXAGENT_POLICY`, or the config's `policy_file:`): that section's YAML, or the MCP gateway's
//! JSON form (`{"version":"1","default":"deny","tools":{"vm_exec":{"limits":[…]}}}`), which
//! compiles to the same [`PolicyConfig`] (`"*": deny` plus one exact rule per listed tool).
//!
//! The files, each using only those listed before it:
//!
//! - [`schema`]: the types as written (rules, protect entries, limits, command rules) — serde,
//!   no I/O, no decisions;
//! - [`allowlist`]: compiles and matches argv allowlists of guest commands;
//! - [`groups`]: the named effect groups a key may name (`@power-off`, `@data-loss` …);
//! - [`eval`]: the compiled [`Policy`] and its decisions ([`Policy::check`], [`Decision`]);
//! - [`gateway`]: reads the MCP gateway's form into a [`PolicyConfig`];
//! - [`load`]: reads a policy from a section or a file, validates it against the catalog and
//!   compiles it ([`Policy::load`], [`Policy::from_config`], [`Policy::from_file`]).
//!
//! Outside users: the config holds a [`PolicyConfig`] and says which [`PolicySource`] is in
//! force; the rate limiter counts a policy's [`Limit`]s. Neither is imported from here: the
//! policy knows nothing of the config file or of the counters' state file.
//!
//! Layer: policy. May import: `audit`, `base`, `catalog`.

pub mod allowlist;
pub mod confirm;
pub mod eval;
pub mod gateway;
pub mod groups;
pub mod limits;
pub mod load;
pub mod schema;

pub use confirm::{Ask, Taint};
pub use eval::{Confirmation, Decision, GuestTags, Policy, Transfer, parse_tags};
pub use schema::{Action, Limit, PolicyConfig, PolicySource, Protect, Rule, Scope, Window};
