//! Times in statements: Unix seconds ⇄ RFC 3339 UTC with seconds precision
//! (`2026-12-01T12:10:00Z`), and the `--ttl` durations people type (`30m`, `1h`, `600`).
//!
//! One exact spelling per instant, so a statement's text has one canonical form: no fractions,
//! no offsets, no lower-case `t`/`z`, no leap second. The proleptic Gregorian calendar comes
//! from [`crate::audit`] (no time crate is needed).

use std::time::Duration;

// The calendar is the audit trail's (Hinnant's day algorithms), one copy in the crate.
use crate::audit::{civil_from_days, days_from_civil, days_in_month};

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let (y, m, d) = civil_from_days(days);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The exact inverse of [`format_rfc3339`]: `None` for any other spelling, an impossible
/// date or time, a time before 1970 or a year past 9999.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[19] != b'Z' {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = &text[from..to];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, s) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    u64::try_from(secs).ok()
}

/// Parse a duration as people write one for `--ttl`: whole seconds (`600`) or a number with
/// a unit `s`, `m` or `h` (`90s`, `30m`, `1h`). Zero is not a duration here.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (i, 's') => (&text[..i], 1),
        (i, 'm') => (&text[..i], 60),
        (i, 'h') => (&text[..i], 3600),
        _ => (text, 1),
    };
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n > 0).then(|| Duration::from_secs(n * unit))
}

/// A duration for people: `1h`, `10m`, `1h 30m`, `45s`.
pub fn describe_duration(d: Duration) -> String {
    let s = d.as_secs();
    let mut parts = Vec::new();
    if s >= 3600 {
        parts.push(format!("{}h", s / 3600));
    }
    if s % 3600 >= 60 {
        parts.push(format!("{}m", s % 3600 / 60));
    }
    if !s.is_multiple_of(60) || s == 0 {
        parts.push(format!("{}s", s % 60));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants_format_and_parse_back() {
        // Values checked with `date -u -d @SECS +%FT%TZ`.
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (951_868_799, "2000-02-29T23:59:59Z"),
            (951_868_800, "2000-03-01T00:00:00Z"),
            (1_709_208_000, "2024-02-29T12:00:00Z"),
            (1_735_689_599, "2024-12-31T23:59:59Z"),
            (1_796_127_000, "2026-12-01T12:10:00Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
            (253_402_300_799, "9999-12-31T23:59:59Z"),
        ];
        for (secs, text) in cases {
            assert_eq!(format_rfc3339(secs), text);
            assert_eq!(parse_rfc3339(text), Some(secs), "{text}");
        }
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        let mut secs = 0u64;
        while secs < 13_000_000_000 {
            assert_eq!(parse_rfc3339(&format_rfc3339(secs)), Some(secs));
            secs += 86_400 - 7;
        }
    }

    #[test]
    fn other_spellings_and_impossible_dates_are_refused() {
        for bad in [
            "2026-12-01T12:10:00",
            "2026-12-01t12:10:00Z",
            "2026-12-01T12:10:00z",
            "2026-12-01 12:10:00Z",
            "2026-12-01T12:10:00.0Z",
            "2026-12-01T12:10:00+00:00",
            "2026-12-1T12:10:00Z",
            "2026-12-01T12:10:60Z",
            "2026-12-01T24:00:00Z",
            "2026-13-01T12:10:00Z",
            "2026-00-01T12:10:00Z",
            "2025-02-29T12:00:00Z",
            "2100-02-29T12:00:00Z",
            "2026-04-31T12:00:00Z",
            "1969-12-31T23:59:59Z",
            "+026-12-01T12:10:00Z",
            "2026-12-01T1 :10:00Z",
            "",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
        assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("600"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 2h "), Some(Duration::from_secs(7200)));
        for bad in [
            "",
            "0",
            "0m",
            "m",
            "1d",
            "-5",
            "1.5h",
            "1h30m",
            "9999999999",
            "1 h",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(describe_duration(Duration::from_secs(600)), "10m");
        assert_eq!(describe_duration(Duration::from_secs(5430)), "1h 30m 30s");
        assert_eq!(describe_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(describe_duration(Duration::from_secs(0)), "0s");
    }
}
