//! PVE calendar events (`pve-calendar-event`, proxmox-time's subset of systemd's), as a
//! backup job's schedule: the check behind [`super::Kind::Calendar`]. A keyword (`daily`,
//! `weekly`, …) or up to three words in this order, each at most once: weekdays (`mon..fri`,
//! `sat,sun`), a date (`[YEAR-]MONTH-DAY`) and a time (`HOUR:MINUTE[:SECOND]`, or a minute
//! alone: `30`, `0/15`). A field is a list joined by `,` of values, ranges `LOW..HIGH` and
//! repetitions `START/STEP` or `LOW..HIGH/STEP`. `*` is never taken (sudoers' rules carry none):
//! `0/15` says what `*/15` does, and a left-out field means every value.

const KEYWORDS: &[&str] = &[
    "minutely",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "quarterly",
    "semiannually",
    "semi-annually",
];
const DAYS: &[&str] = &["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// Why `raw` is not a calendar event pxagent passes on, or `None`.
pub fn problem(raw: &str) -> Option<String> {
    if KEYWORDS.contains(&raw) {
        return None;
    }
    let words: Vec<&str> = raw.split(' ').collect();
    if words.len() > 3 || words.iter().any(|w| w.is_empty()) {
        return Some("at most three words, one space apart".into());
    }
    // Weekdays, then a date, then a time: each at most once, in that order.
    let mut stage = 0;
    for w in &words {
        let (at, why) = if w.starts_with(|c: char| c.is_ascii_lowercase()) {
            (1, weekdays(w))
        } else if w.contains('-') {
            (2, date(w))
        } else {
            (3, time(w))
        };
        if at <= stage {
            return Some(format!(
                "'{w}': weekdays, a date and a time come in that order, each once"
            ));
        }
        if let Some(why) = why {
            return Some(format!("'{w}': {why}"));
        }
        stage = at;
    }
    None
}

fn weekdays(w: &str) -> Option<String> {
    for part in w.split(',') {
        let (a, b) = part.split_once("..").unwrap_or((part, part));
        let (Some(x), Some(y)) = (
            DAYS.iter().position(|d| *d == a),
            DAYS.iter().position(|d| *d == b),
        ) else {
            return Some(format!(
                "weekdays are {} and ranges of them (mon..fri)",
                DAYS.join(", ")
            ));
        };
        if x > y {
            return Some(format!("the range {part} runs backwards"));
        }
    }
    None
}

fn date(w: &str) -> Option<String> {
    let parts: Vec<&str> = w.split('-').collect();
    let ranges: &[(&str, u32, u32)] = match parts.len() {
        2 => &[("month", 1, 12), ("day", 1, 31)],
        3 => &[("year", 1970, 9999), ("month", 1, 12), ("day", 1, 31)],
        _ => return Some("a date is [YEAR-]MONTH-DAY".into()),
    };
    parts
        .iter()
        .zip(ranges)
        .find_map(|(p, (name, lo, hi))| field(p, name, *lo, *hi))
}

fn time(w: &str) -> Option<String> {
    let parts: Vec<&str> = w.split(':').collect();
    let ranges: &[(&str, u32, u32)] = match parts.len() {
        1 => &[("minute", 0, 59)],
        2 => &[("hour", 0, 23), ("minute", 0, 59)],
        3 => &[("hour", 0, 23), ("minute", 0, 59), ("second", 0, 59)],
        _ => return Some("a time is HOUR:MINUTE[:SECOND] or a minute".into()),
    };
    parts
        .iter()
        .zip(ranges)
        .find_map(|(p, (name, lo, hi))| field(p, name, *lo, *hi))
}

/// One field: values, ranges and repetitions joined by `,`, each inside `lo..=hi`.
fn field(p: &str, name: &str, lo: u32, hi: u32) -> Option<String> {
    let num = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.len() <= 4 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
            .filter(|n| (lo..=hi).contains(n))
    };
    for item in p.split(',') {
        let (span, step) = match item.split_once('/') {
            Some((s, r)) => (s, Some(r)),
            None => (item, None),
        };
        let (a, b) = span.split_once("..").unwrap_or((span, span));
        let (Some(x), Some(y)) = (num(a), num(b)) else {
            return Some(format!(
                "a {name} is {lo}-{hi}, a range LOW..HIGH or START/STEP"
            ));
        };
        if x > y {
            return Some(format!("the {name} range {span} runs backwards"));
        }
        let bad_step = step.is_some_and(|r| {
            !r.bytes().all(|b| b.is_ascii_digit())
                || r.parse::<u32>().map_or(true, |r| r == 0 || r > hi)
        });
        if bad_step {
            return Some(format!("a {name} step is 1-{hi}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn pve_examples_pass_and_wrong_ones_say_why() {
        // PVE's admin guide, "Schedule Format" (without `*`).
        for ok in [
            "daily",
            "semi-annually",
            "mon,tue,wed,thu,fri",
            "mon..fri",
            "sat,sun",
            "mon,wed,fri",
            "12:05",
            "0/5",
            "mon..wed 30/10",
            "mon..fri 8..17,22:0/15",
            "fri 12..13:5/20",
            "12,14,16,18,20,22:5",
            "sat 02:00",
            "2026-12-24 02:00",
            "12-24 02:00:30",
            "mon..fri 21:30",
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
        for (bad, says) in [
            ("*/15", "minute"),
            ("24:00", "hour"),
            ("02:60", "minute"),
            ("fri..mon", "backwards"),
            ("funday", "weekdays"),
            ("02:00 sat", "order"),
            ("sat 02:00 03:00", "order"),
            ("13-01", "month"),
            ("0/0", "step"),
            ("a b c d", "three words"),
            ("sat  02:00", "three words"),
            ("10..5", "backwards"),
            ("", "three words"),
        ] {
            let why = problem(bad).unwrap_or_else(|| panic!("{bad} passed"));
            assert!(why.contains(says), "{bad}: {why}");
        }
    }
}
