//! Approvals as an agent hands them to the gate (or a user to `--approval FILE`): the text
//! split by `parse_approval`, the statement parsed by `Statement::parse`, the armored SSHSIG
//! decoded and checked by `approval::check` against a fixed approvers file (the signature
//! decoder, namespace and key lookup run; a forged signature never verifies), and the
//! approvers file parser itself on the same bytes. Inputs are capped at 64 KiB, well above
//! any approval (about 1 KiB) and the gate's envelope.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pxagent::approval::{self, Approvers, NonceStore, Statement};

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGnWfVD/d91OTlCmeNSfvZdxyiJKvPg/1TReVYy0hhlF alice@example";

/// The approvers file and the nonce store, once per process. The store's directory is an
/// empty private one under the temporary directory: a forged signature never verifies, so
/// no nonce is ever written.
fn fixture() -> &'static (Approvers, NonceStore) {
    static F: OnceLock<(Approvers, NonceStore)> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pxagent-fuzz-nonces-{}", std::process::id()));
        let approvers = Approvers::parse(KEY, "approvers").expect("the fixed key parses");
        let nonces = NonceStore::open(&dir).expect("a private nonce directory");
        (approvers, nonces)
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 64 * 1024 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (approvers, nonces) = fixture();
    if let Ok(st) = Statement::parse(text) {
        // The canonical text of a parsed statement parses back to the same statement.
        assert_eq!(Statement::parse(&st.text()).as_ref(), Ok(&st));
    }
    let _ = Approvers::parse(text, "fuzz");
    let Ok(a) = approval::parse_approval(text) else {
        return;
    };
    let _ = a.to_text();
    let args: BTreeMap<String, String> = BTreeMap::new();
    let req = approval::Requested {
        place: approval::Place {
            host: "pve1",
            machine_id: "0123456789abcdef0123456789abcdef",
            account: "zen-agent",
        },
        op: "vm.start",
        args: &args,
    };
    let statement = a.statement.as_deref().unwrap_or("");
    if let Err(r) = approval::check(approvers, nonces, &req, statement, &a.signature, 0) {
        let _ = (r.code(), r.to_string());
    }
});
