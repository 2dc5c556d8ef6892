//! Small text helpers every layer uses: numbers of milliseconds as output
//! writes them, plurals in messages, messages on one line.

/// Format milliseconds for output: rounded to the microsecond, no
/// trailing zeros, an integer when whole.
pub fn format_ms(ms: f64) -> String {
    let rounded = (ms * 1000.0).round() / 1000.0;
    if rounded == 0.0 {
        return "0".to_string();
    }
    if rounded.fract() == 0.0 && rounded.abs() < 9.0e15 {
        format!("{}", rounded as i64)
    } else {
        format!("{rounded}")
    }
}

/// "s" unless `n == 1`.
pub fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A message on one line, short (300 bytes at most), for a result's
/// `error` field.
pub fn one_line(msg: &str) -> String {
    let mut s: String = msg.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.len() > 300 {
        let mut cut = 300;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_ms_is_short_and_exact() {
        assert_eq!(format_ms(2.0), "2");
        assert_eq!(format_ms(1.5), "1.5");
        assert_eq!(format_ms(0.1 + 0.2), "0.3");
        assert_eq!(format_ms(-0.0), "0");
        assert_eq!(format_ms(1234.0004), "1234");
        assert_eq!(format_ms(1234.0006), "1234.001");
    }
}
