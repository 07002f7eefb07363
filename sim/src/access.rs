//! The identity check: every PVE CLI needs root, and a non-root caller fails while reading pmxcfs
//! with exactly these lines and exit 255 (REAL
//! `pvesh_cluster_status_json_standalone_pve9.1_and_nonroot_error.transcript.txt`, FORMATS §1.1).
//!
//! The check takes the euid as a parameter so tests can exercise the refusal in-process; the
//! binary passes the real euid from `/proc/self/status`, and nothing in the environment can
//! change it.

use crate::Output;

/// What PVE prints to a non-root caller (REAL transcript above).
pub const REFUSAL: &str = "ipcc_send_rec[1] failed: Unknown error -1\n\
ipcc_send_rec[2] failed: Unknown error -1\n\
ipcc_send_rec[3] failed: Unknown error -1\n\
Unable to load access control list: Unknown error -1\n";

/// The effective uid of this process (`Uid:` line, second field), `None` if unreadable.
pub fn real_euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_euid(&status)
}

fn parse_euid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `Ok` for root; the PVE refusal (exit 255) for anyone else, including an unknown identity.
pub fn check(euid: Option<u32>) -> Result<(), Output> {
    match euid {
        Some(0) => Ok(()),
        _ => Err(Output {
            stdout: String::new(),
            stderr: REFUSAL.to_string(),
            code: 255,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_matches_the_real_transcript() {
        let fixture = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/pve/pvesh_cluster_status_json_standalone_pve9.1_and_nonroot_error.transcript.txt"
        ))
        .expect("fixture");
        // The transcript shows the four stderr lines followed by "RC=255".
        let start = fixture.find("ipcc_send_rec[1]").unwrap();
        let end = fixture.find("RC=255").unwrap();
        assert_eq!(&fixture[start..end], REFUSAL);
        let out = check(Some(1000)).unwrap_err();
        assert_eq!(
            (out.stderr.as_str(), out.code, out.stdout.as_str()),
            (REFUSAL, 255, "")
        );
        assert!(check(None).is_err());
        assert!(check(Some(0)).is_ok());
    }

    #[test]
    fn parses_effective_uid() {
        assert_eq!(parse_euid("Name:\tx\nUid:\t1000\t0\t0\t0\n"), Some(0));
        assert_eq!(parse_euid("Uid:\t0\t1000\t1000\t1000\n"), Some(1000));
        assert_eq!(parse_euid("nothing"), None);
    }
}
