//! Records edited in place: time played faster.

use super::*;
use crate::error::FieldError;

/// What a transforming tool made of one record.
pub enum Edit {
    /// Changed: write the record.
    Changed,
    /// Untouched: write the input line as it was, byte for byte.
    Unchanged,
}

/// Time played `speed` times as fast, as trace-rescale --speed and
/// trace-sweep play it: offsets from the first timestamp, and delays,
/// divided by the speed.
#[derive(Debug, Clone, Copy)]
pub struct Speedup {
    /// Offsets and delays are divided by this.
    pub speed: f64,
    /// The first timestamp, once seen (or known beforehand).
    pub origin: Option<f64>,
}

impl Speedup {
    /// `speed` times as fast, from the first timestamp it will see.
    pub fn new(speed: f64) -> Speedup {
        Speedup {
            speed,
            origin: None,
        }
    }

    /// Scale a record's `timestamp` (already read: `timestamp`) and
    /// `delay`. Returns whether it had a timestamp.
    pub fn apply(&mut self, rec: &mut Record, timestamp: Option<f64>) -> Result<bool, FieldError> {
        if let Some(t) = timestamp {
            let origin = *self.origin.get_or_insert(t);
            let new = origin + (t - origin) / self.speed;
            rec.set_ms("timestamp", within("timestamp", t, new, MAX_TIMESTAMP_MS)?);
        }
        if let Some(d) = rec.delay()? {
            rec.set_ms("delay", within("delay", d, d / self.speed, MAX_SPAN_MS)?);
        }
        Ok(timestamp.is_some())
    }
}

/// A rescaled time, if it stays within the limit every tool reads and is
/// not negative (a record before the trace's first one, slowed down, would
/// be placed before 0).
pub fn within(field: &str, old: f64, new: f64, max: f64) -> Result<f64, FieldError> {
    if (0.0..=max).contains(&new) {
        return Ok(new);
    }
    if new < 0.0 {
        return Err(FieldError::new(
            field,
            format!(
                "{} rescaled is {}, before 0: the record is earlier than the trace's first \
                 (sort the trace first; trace-validate warns where it is out of order)",
                crate::text::format_ms(old),
                crate::text::format_ms(new)
            ),
        ));
    }
    Err(FieldError::new(
        field,
        format!(
            "{} rescaled is {}, over the limit of {} ms",
            crate::text::format_ms(old),
            if new.is_finite() {
                crate::text::format_ms(new)
            } else {
                "infinite".to_string()
            },
            crate::text::format_ms(max)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record before the first one, slowed down, would land before 0:
    /// 1e13 + (0 - 1e13) / 0.5 = -1e13. It is refused, naming the field.
    #[test]
    fn a_record_before_the_first_slowed_down_is_refused() {
        let mut speed = Speedup::new(0.5);
        let mut first = Record::parse(r#"{"timestamp":9999999999000}"#).unwrap();
        speed.apply(&mut first, Some(9_999_999_999_000.0)).unwrap();
        let mut early = Record::parse(r#"{"timestamp":0}"#).unwrap();
        let err = speed.apply(&mut early, Some(0.0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `timestamp`: 0 rescaled is -9999999999000, before 0: the record is earlier \
             than the trace's first (sort the trace first; trace-validate warns where it is out \
             of order)"
        );
        // Sped up, it stays after 0: 1e13 + (0 - 1e13) / 2.
        let mut speed = Speedup::new(2.0);
        speed.apply(&mut first, Some(9_999_999_999_000.0)).unwrap();
        speed.apply(&mut early, Some(0.0)).unwrap();
        assert_eq!(early.get("timestamp").unwrap().get(), "4999999999500");
    }
}
