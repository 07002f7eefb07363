//! The one calendar of the crate (proleptic Gregorian, Hinnant's day algorithms; no time
//! crate): the exact RFC 3339 form of approval statements ([`format_rfc3339`] and its inverse
//! [`parse_rfc3339`]: seconds, `Z`, one spelling per instant), the audit trail's millisecond
//! stamps ([`format_millis`]) and the looser times people type ([`parse_time`],
//! [`parse_since`]), table dates ([`human_utc`]), and the `--ttl` durations (`30m`, `1h`).
//!
//! Layer: base. Imports only [`super::error`].

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;

/// Now, in Unix seconds (0 for a clock before 1970).
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

use super::error::{Error, Result};
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

/// Parse `--since`: an RFC 3339 time (`2026-11-30T06:00:00Z`, `…+01:00`, fractions allowed),
/// a date (`2026-11-30`, midnight UTC), or an age before `now` (`90s`, `30m`, `1h`, `2d`,
/// `1w`). Anything else is a usage error (exit 2).
pub fn parse_since(s: &str, now: SystemTime) -> Result<SystemTime> {
    static AGE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^([0-9]{1,9})([smhdw])$").expect("age regex"));
    let s = s.trim();
    let bad = || {
        Error::usage(format!(
            "--since {s:?}: expected an RFC 3339 time such as 2026-11-30T06:00:00Z, a date such as 2026-11-30, or an age such as 30m, 1h, 2d"
        ))
    };
    if let Some(c) = AGE.captures(s) {
        let n: u64 = c[1].parse().map_err(|_| bad())?;
        let unit = match &c[2] {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => 7 * 86_400,
        };
        return now
            .checked_sub(Duration::from_secs(n.checked_mul(unit).ok_or_else(bad)?))
            .filter(|t| *t >= UNIX_EPOCH)
            .ok_or_else(bad);
    }
    parse_time(s).ok_or_else(bad)
}

/// Format a time as RFC 3339 UTC with milliseconds: `2026-11-30T06:00:00.123Z`. Times
/// before 1970 (a badly wrong clock) are written as the epoch.
pub fn format_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = d.as_secs();
    let (y, m, day) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_millis()
    )
}

/// Parse RFC 3339 (`T`, `t` or a space between date and time; `Z` or an offset), or a bare
/// date as midnight UTC. `None` for anything else, including times before 1970.
pub fn parse_time(s: &str) -> Option<SystemTime> {
    static RFC3339: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2})))?$",
        )
        .expect("rfc3339 regex")
    });
    let c = RFC3339.captures(s)?;
    let num = |i: usize| -> i64 { c.get(i).map_or(0, |m| m.as_str().parse().unwrap_or(0)) };
    let (y, mo, d) = (num(1), num(2), num(3));
    let (h, mi, sec) = (num(4), num(5), num(6));
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return None;
    }
    // 60 is a leap second; it is read as the next second.
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let offset = match c.get(9).map(|m| m.as_str()) {
        Some(sign) => {
            let (oh, om) = (num(10), num(11));
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if sign == "-" { -o } else { o }
        }
        None => 0,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let nanos = c.get(7).map_or(0, |f| {
        let digits = f.as_str();
        digits.parse::<u32>().unwrap_or(0) * 10u32.pow(9 - digits.len() as u32)
    });
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Whether `y` is a leap year (proleptic Gregorian).
pub fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

/// The days of month `m` (1–12) of year `y`.
pub fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01 (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS UTC`, as tables show it.
pub fn human_utc(t: u64) -> String {
    let (y, m, d) = civil_from_days(i64::try_from(t / 86_400).unwrap_or(i64::MAX / 2));
    let secs = t % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
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

    #[test]
    fn time_formatting_against_known_epochs() {
        let at =
            |secs: u64, ms: u32| format_millis(UNIX_EPOCH + Duration::new(secs, ms * 1_000_000));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_700_000_000, 5), "2023-11-14T22:13:20.005Z");
        assert_eq!(at(1_796_018_400, 123), "2026-11-30T06:00:00.123Z");
        assert_eq!(at(4_102_444_800, 0), "2100-01-01T00:00:00.000Z");
        assert_eq!(at(253_402_300_799, 999), "9999-12-31T23:59:59.999Z");
        // Sub-millisecond digits are cut, not rounded up into the next second.
        assert_eq!(
            format_millis(UNIX_EPOCH + Duration::new(59, 999_999_999)),
            "1970-01-01T00:00:59.999Z"
        );
        assert_eq!(
            format_millis(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00.000Z"
        );
        for secs in (0..4_000_000_000u64).step_by(7_777_777) {
            let t = UNIX_EPOCH + Duration::new(secs, 250_000_000);
            assert_eq!(parse_time(&format_millis(t)), Some(t), "{secs}");
        }
    }

    #[test]
    fn rfc3339_parsing() {
        let t = |secs: u64| Some(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(parse_time("2026-11-30T06:00:00Z"), t(1_796_018_400));
        assert_eq!(parse_time("2026-11-30t06:00:00z"), t(1_796_018_400));
        assert_eq!(parse_time("2026-11-30 07:30:00+01:30"), t(1_796_018_400));
        assert_eq!(parse_time("2026-11-30T01:00:00-05:00"), t(1_796_018_400));
        assert_eq!(parse_time("2026-11-30"), t(1_795_996_800));
        assert_eq!(
            parse_time("1970-01-01T00:00:00.5Z"),
            Some(UNIX_EPOCH + Duration::from_millis(500))
        );
        for bad in [
            "",
            "2026-11-30T06:00:00",
            "2026-13-01",
            "2026-02-29",
            "2026-11-31",
            "2026-11-30T24:00:00Z",
            "2026-11-30T06:00:00+24:00",
            "1969-12-31T23:59:59Z",
            "2026-11-30T06:00Z",
            "yesterday",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        assert!(parse_time("2024-02-29").is_some());
    }

    #[test]
    fn since_accepts_times_and_ages() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_018_400);
        let ago = |secs: u64| now - Duration::from_secs(secs);
        assert_eq!(parse_since("90s", now).unwrap(), ago(90));
        assert_eq!(parse_since("30m", now).unwrap(), ago(1800));
        assert_eq!(parse_since("1h", now).unwrap(), ago(3600));
        assert_eq!(parse_since(" 2d ", now).unwrap(), ago(172_800));
        assert_eq!(parse_since("1w", now).unwrap(), ago(604_800));
        assert_eq!(parse_since("2026-11-30T05:00:00Z", now).unwrap(), ago(3600));
        for bad in ["", "1", "1y", "-1h", "1.5h", "h", "999999999w", "soon"] {
            let e = parse_since(bad, now).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("--since"), "{e}");
        }
    }

    #[test]
    fn human_utc_reads_as_a_calendar_date() {
        assert_eq!(human_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(human_utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
