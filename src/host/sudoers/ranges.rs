//! VMID fences: `--vmids 100-199,250` as a list of ranges and as a POSIX ERE.
//!
//! sudo matches arguments with regcomp, which has no numeric comparison, so a range must
//! become an alternation of digit patterns (`1[0-9]{2}|250`). The generator is the classic
//! split-by-digit-position construction; a brute-force test checks it against every number.

use crate::base::error::{Error, Result};
use crate::base::text::printable;
use crate::catalog::kind::{VMID_MAX, VMID_MIN};

/// A non-empty, validated list of inclusive VMID ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    /// Parse `100-199,250`: comma-separated `N` or `N-M` with 100 ≤ N ≤ M ≤ 999999999.
    pub fn parse(flag: &str, s: &str) -> Result<Ranges> {
        let bad = |why: &str| {
            Error::usage(format!(
                "invalid {flag} '{}': {why} (expected e.g. 100-199,250)",
                printable(s)
            ))
        };
        if s.trim().is_empty() {
            return Err(bad("empty"));
        }
        let num = |t: &str| -> Result<u64> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) || t.len() > 9 {
                return Err(bad(&format!("'{}' is not a VMID", printable(t))));
            }
            let n: u64 = t.parse().map_err(|_| bad("not a number"))?;
            if !(VMID_MIN..=VMID_MAX).contains(&n) || t.starts_with('0') {
                return Err(bad(&format!("{n} is outside 100-999999999")));
            }
            Ok(n)
        };
        let mut out = Vec::new();
        for item in s.split(',') {
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let n = num(item)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(bad(&format!("range {lo}-{hi} runs backwards")));
            }
            out.push((lo, hi));
        }
        out.sort();
        // Merge overlapping or adjacent ranges so the regex stays small.
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in out {
            match merged.last_mut() {
                Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Ok(Ranges(merged))
    }

    /// Both fences together.
    pub fn union(&self, other: &Ranges) -> Ranges {
        let text = format!("{},{}", self.display(), other.display());
        Ranges::parse("fence", &text).unwrap_or_else(|_| self.clone())
    }

    /// Whether `n` is inside the fence.
    pub fn contains(&self, n: u64) -> bool {
        self.0.iter().any(|&(lo, hi)| (lo..=hi).contains(&n))
    }

    /// The ranges as given back in canonical form (`100-199,250`).
    pub fn display(&self) -> String {
        self.0
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// An unanchored ERE alternation (no outer group) matching exactly these numbers.
    pub fn regex(&self) -> String {
        let mut alts = Vec::new();
        for &(lo, hi) in &self.0 {
            range_alternatives(lo, hi, &mut alts);
        }
        alts.join("|")
    }
}

/// An unanchored ERE alternation (no outer group) matching exactly the numbers `lo..=hi`, no
/// leading zeros: the fences' construction for any bound (a render's ISO fill limit,
/// `--iso-max-used`, admits `1..=N`).
pub fn number_range_regex(lo: u64, hi: u64) -> String {
    let mut alts = Vec::new();
    range_alternatives(lo, hi, &mut alts);
    alts.join("|")
}

/// Append the alternatives for `lo..=hi` (no leading zeros).
fn range_alternatives(lo: u64, hi: u64, out: &mut Vec<String>) {
    // Split at powers of ten so both ends have the same number of digits.
    let mut start = lo;
    while start <= hi {
        let digits = start.to_string().len() as u32;
        let end = hi.min(10u64.pow(digits) - 1);
        same_length(&start.to_string(), &end.to_string(), out, "");
        start = end + 1;
    }
}

/// Alternatives for `lo..=hi`, both of the same length, each prefixed with `prefix`.
fn same_length(lo: &str, hi: &str, out: &mut Vec<String>, prefix: &str) {
    let n = lo.len();
    if lo == hi {
        out.push(format!("{prefix}{lo}"));
        return;
    }
    if lo.bytes().all(|b| b == b'0') && hi.bytes().all(|b| b == b'9') {
        out.push(format!("{prefix}{}", any_digits(n)));
        return;
    }
    let (l0, h0) = (lo.as_bytes()[0] - b'0', hi.as_bytes()[0] - b'0');
    if n == 1 {
        out.push(format!("{prefix}{}", class(l0, h0)));
        return;
    }
    let (lrest, hrest) = (&lo[1..], &hi[1..]);
    if l0 == h0 {
        same_length(lrest, hrest, out, &format!("{prefix}{l0}"));
        return;
    }
    let zeros = "0".repeat(n - 1);
    let nines = "9".repeat(n - 1);
    // Lower edge: l0 followed by lrest..=99…9, unless that is the whole decade.
    let mut first_full = l0;
    if lrest != zeros {
        same_length(lrest, &nines, out, &format!("{prefix}{l0}"));
        first_full = l0 + 1;
    }
    let mut last_full = h0;
    let upper_partial = hrest != nines;
    if upper_partial {
        last_full = h0 - 1;
    }
    if first_full <= last_full {
        out.push(format!(
            "{prefix}{}{}",
            class(first_full, last_full),
            any_digits(n - 1)
        ));
    }
    if upper_partial {
        same_length(&zeros, hrest, out, &format!("{prefix}{h0}"));
    }
}

fn class(lo: u8, hi: u8) -> String {
    match (lo, hi) {
        (a, b) if a == b => a.to_string(),
        (0, 9) => "[0-9]".into(),
        (a, b) => format!("[{a}-{b}]"),
    }
}

fn any_digits(k: usize) -> String {
    match k {
        0 => String::new(),
        1 => "[0-9]".into(),
        k => format!("[0-9]{{{k}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_limits_up_to_a_render_s_bound() {
        for max in 1..=99u8 {
            let re = regex::Regex::new(&format!("^({})$", number_range_regex(1, u64::from(max))))
                .unwrap();
            for n in 0..=120u32 {
                assert_eq!(
                    re.is_match(&n.to_string()),
                    (1..=u32::from(max)).contains(&n),
                    "{max}: {n}"
                );
            }
            for bad in ["01", "090", "9 ", "+9", ""] {
                assert!(!re.is_match(bad), "{max}: {bad}");
            }
        }
    }

    fn check(spec: &str, upto: u64) {
        let r = Ranges::parse("--vmids", spec).unwrap();
        let re = regex::Regex::new(&format!("^({})$", r.regex())).unwrap();
        for n in 0..=upto {
            assert_eq!(
                re.is_match(&n.to_string()),
                r.contains(n),
                "{spec}: {n} ({})",
                r.regex()
            );
        }
        // Leading zeros never match.
        assert!(!re.is_match("0100"));
    }

    #[test]
    fn issue_edges() {
        let r = Ranges::parse("--vmids", "100-199,250").unwrap();
        let re = regex::Regex::new(&format!("^({})$", r.regex())).unwrap();
        for (n, ok) in [
            (99, false),
            (100, true),
            (199, true),
            (200, false),
            (250, true),
            (251, false),
        ] {
            assert_eq!(re.is_match(&n.to_string()), ok, "{n}");
        }
    }

    #[test]
    fn brute_force_many_ranges() {
        for spec in [
            "100-199,250",
            "100",
            "101-109",
            "123-4567",
            "100-999",
            "999-1000",
            "150-150,151-152,300-301",
            "1234-1299",
            "4000-4999,100-110",
            "105-2350",
            "990-10010",
        ] {
            check(spec, 12_000);
        }
    }

    #[test]
    fn large_values() {
        let r = Ranges::parse("--vmids", "999999990-999999999").unwrap();
        let re = regex::Regex::new(&format!("^({})$", r.regex())).unwrap();
        assert!(re.is_match("999999995"));
        assert!(!re.is_match("999999989"));
    }

    #[test]
    fn merges_and_displays() {
        let r = Ranges::parse("--vmids", "250,100-199,150-200").unwrap();
        assert_eq!(r.display(), "100-200,250");
    }

    #[test]
    fn bad_input() {
        for bad in [
            "50-20",
            "abc",
            "",
            "99",
            "100-",
            "-100",
            "100,,200",
            "1000000000",
            "0100",
            "200-100",
            "1 00",
        ] {
            let e = Ranges::parse("--vmids", bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("--vmids"), "{e}");
        }
    }
}
