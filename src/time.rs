//! Date-times: as logs write them, to epoch nanoseconds (trace-convert),
//! and wall-clock instants as RFC 3339 text (trace-replay).
//!
//! Parsed by hand: `YYYY-MM-DD[ T]HH:MM:SS[.fraction][zone]`, with any
//! number of fraction digits (Azure 2023 has seven; digits past the
//! nanosecond are cut), and a zone of `Z`, `±HH:MM`, `±HHMM` or `±HH`, or
//! none (a naive time, which the caller takes as UTC and says so).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A parsed date-time: epoch nanoseconds, and whether it named a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateTime {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    pub epoch_ns: i64,
    /// False for a naive time (no zone), taken as UTC.
    pub has_zone: bool,
}

/// Parse a date-time; `None` when `text` is not one.
pub fn parse_datetime(text: &str) -> Option<DateTime> {
    let b = text.trim().as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = b.get(range)?;
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(s).ok()?.parse().ok()
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: i64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..9 {
            nanos *= 10;
        }
    }
    let (offset_s, has_zone) = match b.get(i) {
        None => (0, false),
        Some(b'Z' | b'z') if i + 1 == b.len() => (0, true),
        Some(&sign @ (b'+' | b'-')) => {
            let rest = &b[i + 1..];
            let (h, m) = match rest.len() {
                2 => (num(i + 1..i + 3)?, 0),
                4 => (num(i + 1..i + 3)?, num(i + 3..i + 5)?),
                5 if rest[2] == b':' => (num(i + 1..i + 3)?, num(i + 4..i + 6)?),
                _ => return None,
            };
            if h > 23 || m > 59 {
                return None;
            }
            let s = h * 3600 + m * 60;
            (if sign == b'+' { s } else { -s }, true)
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Some(DateTime {
        epoch_ns: secs.checked_mul(1_000_000_000)?.checked_add(nanos)?,
        has_zone,
    })
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `2026-11-22T10:00:00.123456Z`. Written digit by digit: replay stamps
/// every request with one, and `format!` cost it more than the rest of the
/// result's fields.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (y, mo, da) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    if !(0..=9999).contains(&y) {
        return format!(
            "{y:04}-{mo:02}-{da:02}T{:02}:{:02}:{:02}.{:06}Z",
            s / 3600,
            s / 60 % 60,
            s % 60,
            d.subsec_micros()
        );
    }
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    let fields = [
        (0, 4, y),
        (5, 2, mo),
        (8, 2, da),
        (11, 2, s / 3600),
        (14, 2, s / 60 % 60),
        (17, 2, s % 60),
        (20, 6, i64::from(d.subsec_micros())),
    ];
    for (at, width, mut value) in fields {
        for digit in text[at..at + width].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    text.iter().map(|&b| char::from(b)).collect()
}

/// A wall-clock instant given with its zone (`Z` or an offset), at or
/// after 1970, for flags such as `--start-at`.
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, String> {
    parse_datetime(text)
        .filter(|d| d.has_zone && d.epoch_ns >= 0)
        .map(|d| UNIX_EPOCH + Duration::from_nanos(d.epoch_ns as u64))
        .ok_or_else(|| format!("`{text}` is not an RFC 3339 time such as 2026-11-22T10:00:00Z"))
}

/// Seconds (a float, as LiteLLM and BurstGPT write them) to nanoseconds,
/// rounded to the microsecond: the digits the sources carry.
pub fn seconds_to_ns(secs: f64) -> Option<i64> {
    let us = (secs * 1e6).round();
    if !us.is_finite() || us.abs() > 9.0e15 {
        return None;
    }
    Some(us as i64 * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_and_offsets() {
        let t = parse_rfc3339("2026-11-22T10:00:00.5Z").unwrap();
        assert_eq!(rfc3339(t), "2026-11-22T10:00:00.500000Z");
        assert_eq!(parse_rfc3339("2026-11-22T11:00:00.5+01:00").unwrap(), t);
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::new(253_402_300_799, 999_999_999)),
            "9999-12-31T23:59:59.999999Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::new(253_402_300_800, 0)),
            "10000-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            rfc3339(parse_rfc3339("2000-02-29T23:59:59Z").unwrap()),
            "2000-02-29T23:59:59.000000Z"
        );
        assert!(parse_rfc3339("2026-11-22 10:00").is_err());
        assert!(parse_rfc3339("2026-11-22T10:00:00").is_err(), "no zone");
        assert!(parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn formats_the_logs_use() {
        // 2025-06-22 18:00:00 UTC = 1750615200.
        let base = 1_750_615_200_000_000_000;
        let p = |s: &str| parse_datetime(s).unwrap();
        assert_eq!(p("2025-06-22 18:00:00").epoch_ns, base);
        assert!(!p("2025-06-22 18:00:00").has_zone);
        assert_eq!(p("2025-06-22 18:00:00.101").epoch_ns, base + 101_000_000);
        assert_eq!(
            p("2025-06-22T18:00:00.101000Z").epoch_ns,
            base + 101_000_000
        );
        assert!(p("2025-06-22T18:00:00Z").has_zone);
        assert_eq!(
            p("2025-06-22 18:00:00.5+00:00").epoch_ns,
            base + 500_000_000
        );
        assert_eq!(p("2025-06-22T10:00:00-08:00").epoch_ns, base);
        assert_eq!(p("2025-06-22T20:00:00+0200").epoch_ns, base);
        // Seven digits (100 ns), as Azure 2023 writes them.
        assert_eq!(
            p("2025-06-22 18:00:00.6805900").epoch_ns,
            base + 680_590_000
        );
        assert_eq!(p("1970-01-01 00:00:00").epoch_ns, 0);
        assert_eq!(p("2024-02-29 00:00:00").epoch_ns, 1_709_164_800_000_000_000);
        for bad in [
            "",
            "2025-06-22",
            "2025-13-01 00:00:00",
            "2025-02-30 00:00:00",
            "2025-06-22 18:00:00.",
            "2025-06-22 18:00:00 UTC",
            "1750615200.5",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
    }

    #[test]
    fn float_seconds_keep_microseconds() {
        assert_eq!(
            seconds_to_ns(1750615200.101234),
            Some(1_750_615_200_101_234_000)
        );
        assert_eq!(seconds_to_ns(f64::NAN), None);
    }
}
