//! What a `--dry-run` shows of the approval an op would need: the statement a gate whose
//! policy says `approve` would issue, with the parts only the gate knows left as placeholders.
//!
//! Layer: approval. Imports the catalog's invocation and [`super::statement`].

use super::statement::Statement;
use crate::catalog::invocation::Invocation;

/// The statement a gate whose policy says `approve` would issue for `inv`, for `--dry-run`:
/// the host's name, the nonce and the expiry are the gate's to fill in (and a node that is
/// looked up at run time is bound too), so this shows the shape, not signable bytes.
pub fn preview(inv: &Invocation) -> String {
    let st = Statement {
        host: "HOST".into(),
        machine_id: "0".repeat(32),
        account: "ACCOUNT".to_lowercase(),
        op: inv.op.id.to_string(),
        args: inv
            .values
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        nonce: "0".repeat(32),
        expires: 0,
    };
    st.text()
        .lines()
        .map(|l| {
            if l.starts_with("host: ") {
                "host: <the host's name>".to_string()
            } else if l.starts_with("machine-id: ") {
                "machine-id: <the host's /etc/machine-id>".to_string()
            } else if l.starts_with("account: ") {
                "account: <the gated account>".to_string()
            } else if l.starts_with("nonce: ") {
                "nonce: <issued by the gate>".to_string()
            } else if l.starts_with("expires: ") {
                "expires: <issued by the gate>".to_string()
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect()
}
