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

/// A rescaled time, if it stays within the limit every tool reads.
pub fn within(field: &str, old: f64, new: f64, max: f64) -> Result<f64, FieldError> {
    if new <= max {
        return Ok(new);
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
