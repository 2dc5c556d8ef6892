//! Durations on the command line: `250ms`, `90s`, `10m`, `1h30m`, `1.5s`.
//!
//! A bare number is refused: `--from 90` could mean seconds or
//! milliseconds, and a wrong guess silently cuts the wrong window.

/// The longest duration: ten years of 365 days, in ms. Longer is a typo,
/// and would overflow the timers it sets.
pub const MAX_MS: f64 = 10.0 * 365.0 * 86_400_000.0;

/// Parse a duration into milliseconds, at most [`MAX_MS`].
pub fn parse_ms(text: &str) -> Result<f64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration: give a number and a unit, e.g. 90s".into());
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!(
                "`{text}` is not a duration: expected a number at `{rest}`"
            ));
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| {
            format!(
                "`{text}` is not a duration: bad number `{}`",
                &rest[..num_len]
            )
        })?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let scale = match unit {
            "h" => 3_600_000.0,
            "m" | "min" => 60_000.0,
            "s" => 1_000.0,
            "ms" => 1.0,
            "us" | "µs" => 0.001,
            "" => {
                return Err(format!(
                    "`{text}` needs a unit (ms, s, m or h), e.g. {text}s or {text}ms"
                ));
            }
            other => {
                return Err(format!(
                    "`{text}` has an unknown unit `{other}`: use us, ms, s, m or h"
                ));
            }
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    if total > MAX_MS {
        return Err(format!(
            "`{text}` is longer than the limit of ten years ({} ms)",
            crate::text::format_ms(MAX_MS)
        ));
    }
    Ok(total)
}

/// clap value parser for durations, in milliseconds.
pub fn parse_ms_arg(text: &str) -> Result<f64, String> {
    parse_ms(text)
}

/// clap value parser for durations longer than 0, in milliseconds.
pub fn parse_positive_ms(text: &str) -> Result<f64, String> {
    match parse_ms(text)? {
        ms if ms > 0.0 => Ok(ms),
        _ => Err(format!("`{text}`: the duration must be more than 0")),
    }
}

/// Format milliseconds for people: `250ms`, `1.5s`, `10m`, `1h30m`.
pub fn human(ms: f64) -> String {
    if ms < 1000.0 {
        return format!("{}ms", crate::text::format_ms(ms));
    }
    let s = ms / 1000.0;
    if s < 60.0 {
        return format!("{}s", trim(s));
    }
    let total_s = s.round() as u64;
    let (h, m, sec) = (total_s / 3600, (total_s % 3600) / 60, total_s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

fn trim(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse_ms("250ms").unwrap(), 250.0);
        assert_eq!(parse_ms("90s").unwrap(), 90_000.0);
        assert_eq!(parse_ms("10m").unwrap(), 600_000.0);
        assert_eq!(parse_ms("1h30m").unwrap(), 5_400_000.0);
        assert_eq!(parse_ms("1.5s").unwrap(), 1_500.0);
        assert_eq!(parse_ms("500us").unwrap(), 0.5);
        assert_eq!(parse_ms("0s").unwrap(), 0.0);
    }

    #[test]
    fn refuses_bare_numbers_and_unknown_units() {
        assert_eq!(
            parse_ms("90").unwrap_err(),
            "`90` needs a unit (ms, s, m or h), e.g. 90s or 90ms"
        );
        assert!(parse_ms("5d").unwrap_err().contains("unknown unit `d`"));
        assert!(parse_ms("-5s").is_err());
        assert!(parse_ms("").is_err());
    }

    #[test]
    fn human_readable() {
        assert_eq!(human(250.0), "250ms");
        assert_eq!(human(1500.0), "1.5s");
        assert_eq!(human(5_400_000.0), "1h30m");
        assert_eq!(human(60_000.0), "1m");
    }
}
