//! Progress notifications from a task's log: what each line the task prints becomes.
//!
//! MCP's `notifications/progress` carries a `progress` number that must grow with every
//! notification, an optional `total`, and a message. Proxmox logs say how far a long task
//! is in two shapes (tests/fixtures/pve/vzdump_qemu_snapshot_local_zstd_fragment_pve9.txt,
//! qmrestore_vma_zst_pve8.txt): vzdump's `INFO:  45% (14.4 GiB of 32.0 GiB) in 6s, …` and
//! qmrestore's `progress 45% (read 171835392 bytes, duration 1 sec)`. From the first such
//! line on, `progress` counts percent and `total` is 100; a line without a percentage moves
//! the count on by a thousandth, so it still grows. The UPID pvesh prints last (bare or as a
//! JSON string, FORMATS.md §1.3) is not progress and is never sent. Uses nothing else.

use std::sync::LazyLock;

use regex::Regex;

/// A task's progress as notifications: feed it the log's lines in order.
#[derive(Debug, Default)]
pub struct Progress {
    last: f64,
    total: Option<f64>,
}

/// One notification: progress, total, message.
pub type Notice = (f64, Option<f64>, String);

static PERCENT: LazyLock<Regex> = LazyLock::new(|| {
    // vzdump: `INFO:  45% (…)`, `INFO: 100% (…)`; qmrestore: `progress 45% (…)`.
    Regex::new(r"^(?:INFO:\s+|progress\s+)([0-9]{1,3}(?:\.[0-9]+)?)%(?:\s|$)")
        .expect("static regex")
});

static UPID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"^"?(?:{})"?$"#,
        crate::catalog::Kind::Upid.regex()
    ))
    .expect("static regex")
});

/// The percentage a log line reports, if it is one of the shapes above.
pub fn percent(line: &str) -> Option<f64> {
    let p: f64 = PERCENT
        .captures(line.trim())?
        .get(1)?
        .as_str()
        .parse()
        .ok()?;
    (0.0..=100.0).contains(&p).then_some(p)
}

impl Progress {
    /// The notification for the next line, or `None` for a line that is not progress (the
    /// task's UPID, an empty line).
    pub fn line(&mut self, line: &str) -> Option<Notice> {
        let line = line.trim();
        if line.is_empty() || UPID.is_match(line) {
            return None;
        }
        let step = self.last + 0.001;
        let value = match percent(line) {
            Some(p) => {
                self.total = Some(100.0);
                p.max(step)
            }
            None => step,
        };
        // Three decimals, so that a client sees 45 rather than 45.00000000001.
        let value = (value * 1000.0).round() / 1000.0;
        self.last = value;
        Some((value, self.total, line.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::testing::fixture;

    fn notices(text: &str) -> Vec<Notice> {
        let mut p = Progress::default();
        text.lines().filter_map(|l| p.line(l)).collect()
    }

    #[test]
    fn vzdump_percentages_become_progress_of_100() {
        let n = notices(&fixture(
            "pve/vzdump_qemu_snapshot_local_zstd_fragment_pve9.txt",
        ));
        let with_total: Vec<f64> = n
            .iter()
            .filter(|(_, t, m)| t.is_some() && percent(m).is_some())
            .map(|(p, _, _)| *p)
            .collect();
        assert_eq!(with_total, [10.0, 80.0, 100.0]);
        // Before the first percentage: no total; after it, total 100.
        assert_eq!(n[0].1, None);
        assert!(n.last().unwrap().1 == Some(100.0));
        assert!(n.windows(2).all(|w| w[1].0 > w[0].0), "{n:?}");
    }

    #[test]
    fn qmrestore_percentages_and_the_upid_line() {
        let mut text = fixture("pve/qmrestore_vma_zst_pve8.txt");
        // What pvesh prints last: the UPID, as a JSON string.
        text.push_str("\"UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:qmrestore:500:root@pam:\"\n");
        text.push_str("UPID:pve1:0000A1B2:00C0FFEE:6752F0A1:qmrestore:500:root@pam:\n");
        let n = notices(&text);
        assert!(n.iter().all(|(_, _, m)| !m.contains("UPID:")), "{n:?}");
        assert!(
            n.iter()
                .any(|(p, t, m)| *p == 3.0 && *t == Some(100.0) && m.starts_with("progress 3%"))
        );
        assert!(n.iter().any(|(p, _, _)| *p == 100.0));
        assert!(n.windows(2).all(|w| w[1].0 > w[0].0), "{n:?}");
        assert_eq!(
            percent("INFO:  45% (14.4 GiB of 32.0 GiB) in 6s, read: 2.4 GiB/s"),
            Some(45.0)
        );
        assert_eq!(
            percent("INFO: backup is sparse: 30.78 GiB (96%) total zero data"),
            None
        );
        assert_eq!(percent("space reduction due to 4K zero blocks 2.95%"), None);
    }
}
