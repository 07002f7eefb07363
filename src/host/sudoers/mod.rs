//! Everything about sudoers text: rendering pxagent's whitelist and linting anybody's.

pub mod lint;
pub mod ranges;
pub mod render;
