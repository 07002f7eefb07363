//! Numbers as people read them: sizes in binary units, fractions as
//! percentages, seconds as `3d 4h`, Unix times as local times. Every human view uses these
//! and nothing else, so no raw byte count, fraction or epoch reaches human output (`-o json`
//! keeps the raw values). Shared by every view, including those other areas add.

use chrono::{Local, LocalResult, TimeZone};

/// Bytes in binary units: `512 B`, `1.5 KiB`, `2.0 GiB`.
pub fn bytes(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n.max(0.0);
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", units[i])
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// Mebibytes (a guest config's `memory`, `swap`) in the unit that reads best.
pub fn mebibytes(n: f64) -> String {
    bytes(n * 1024.0 * 1024.0)
}

/// A fraction (0..1) as a percentage: `0.35` → `35.0%`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// `used / total (pct)`; `- / total` when nothing is used or known.
pub fn usage(used: Option<f64>, total: Option<f64>) -> String {
    match (used, total) {
        (Some(u), Some(t)) if t > 0.0 => {
            format!("{} / {} ({:.0}%)", bytes(u), bytes(t), u / t * 100.0)
        }
        (_, Some(t)) => format!("- / {}", bytes(t)),
        (Some(u), None) => bytes(u),
        _ => String::new(),
    }
}

/// Seconds as `3d 4h`, `5h 2m`, `4m 10s`, `42s`; `-` for zero (not running).
pub fn duration(secs: u64) -> String {
    match secs {
        0 => "-".into(),
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
        s if s >= 3600 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m {}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// A Unix time as local wall-clock time, `2026-12-02 04:30:12` (the zone from `TZ`, else
/// `/etc/localtime`). Times Proxmox cannot mean (before 1970, after 9999) stay as numbers.
pub fn local_time(epoch: i64) -> String {
    if !(0..=253_402_300_799).contains(&epoch) {
        return epoch.to_string();
    }
    match Local.timestamp_opt(epoch, 0) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
            t.format("%Y-%m-%d %H:%M:%S").to_string()
        }
        LocalResult::None => epoch.to_string(),
    }
}

/// An RFC 3339 time (the audit trail's `2026-11-30T06:00:00.123Z`) as local time; the text
/// itself when it does not parse.
pub fn local_rfc3339(s: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| {
            t.with_timezone(&Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_fractions() {
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(2_147_483_648.0), "2.0 GiB");
        assert_eq!(bytes(100.0), "100 B");
        assert_eq!(mebibytes(2048.0), "2.0 GiB");
        assert_eq!(percent(0.35), "35.0%");
        assert_eq!(
            usage(Some(1_073_741_824.0), Some(2_147_483_648.0)),
            "1.0 GiB / 2.0 GiB (50%)"
        );
        assert_eq!(usage(None, Some(1024.0)), "- / 1.0 KiB");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(90_061), "1d 1h");
        assert_eq!(duration(3_720), "1h 2m");
        assert_eq!(duration(250), "4m 10s");
        assert_eq!(duration(0), "-");
    }

    #[test]
    fn times_are_local_and_bounded() {
        // Whatever the zone, the shape is fixed and the epoch is gone.
        let t = local_time(1_700_000_000);
        assert_eq!(t.len(), 19, "{t}");
        assert!(!t.contains("1700000000"));
        assert_eq!(local_time(-5), "-5");
        assert_eq!(local_rfc3339("not a time"), "not a time");
        assert_eq!(local_rfc3339("2026-11-30T06:00:00.123Z").len(), 19);
    }
}
