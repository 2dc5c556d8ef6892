//! Whether the prompts sent were as long as the trace asked: the server's
//! `prompt_tokens` against each record's `input_length`, counted as the
//! results are written, and a warning at the end of a run where most
//! differ (prompts synthesized for another tokenizer, a chat template).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::result::{ResultRecord, Status};

/// Tokens by which a server's count may exceed the length asked and still
/// match: a beginning-of-sequence token many models' servers add to every
/// prompt (vLLM's own random dataset has it too).
const SPECIAL_TOKENS: i64 = 1;

/// The ok results that report both lengths, and how they differ.
#[derive(Default)]
pub(super) struct Lengths {
    known: AtomicU64,
    /// Of them, those whose `prompt_tokens − input_length` is not 0 or
    /// [`SPECIAL_TOKENS`].
    differ: AtomicU64,
    /// Σ, min and max of `prompt_tokens − input_length` over `differ`.
    sum: AtomicI64,
    min: AtomicI64,
    max: AtomicI64,
}

impl Lengths {
    /// Count one result (warmup ones too: they are sent the same way).
    pub(super) fn add(&self, r: &ResultRecord) {
        let m = &r.measure;
        let (Status::Ok, Some(asked), Some(got)) = (m.status, r.input_length, m.prompt_tokens)
        else {
            return;
        };
        self.known.fetch_add(1, Ordering::Relaxed);
        let d = i64::try_from(got).unwrap_or(i64::MAX) - i64::try_from(asked).unwrap_or(i64::MAX);
        if (0..=SPECIAL_TOKENS).contains(&d) {
            return;
        }
        if self.differ.fetch_add(1, Ordering::Relaxed) == 0 {
            self.min.store(d, Ordering::Relaxed);
            self.max.store(d, Ordering::Relaxed);
        }
        self.sum.fetch_add(d, Ordering::Relaxed);
        self.min.fetch_min(d, Ordering::Relaxed);
        self.max.fetch_max(d, Ordering::Relaxed);
    }

    /// The warning, when more than half the results that report both
    /// lengths differ.
    pub(super) fn warning(&self) -> Option<String> {
        let known = self.known.load(Ordering::Relaxed);
        let differ = self.differ.load(Ordering::Relaxed);
        if differ == 0 || differ * 2 <= known {
            return None;
        }
        let sum = self.sum.load(Ordering::Relaxed);
        let (min, max) = (
            self.min.load(Ordering::Relaxed),
            self.max.load(Ordering::Relaxed),
        );
        Some(warning(known, differ, sum as f64 / differ as f64, min, max))
    }
}

/// The text of the warning.
fn warning(known: u64, differ: u64, mean: f64, min: i64, max: i64) -> String {
    let signed = |x: i64| {
        if x > 0 {
            format!("+{x}")
        } else {
            x.to_string()
        }
    };
    let range = if min == max {
        signed(min)
    } else {
        format!("{} to {}", signed(min), signed(max))
    };
    format!(
        "the server counted other prompt lengths than the trace's input_length in {differ} of \
         {known} ok results (prompt_tokens - input_length: {range}, mean {}{:.1}): the load sent \
         is not the one asked for. Synthesized prompts are exact in the tokenizer they are made \
         for (--tokenizer, o200k_base unless given: give the served model's), and a chat \
         endpoint adds its chat template's tokens (--endpoint completions sends the prompt \
         alone); trace-summarize reports the difference as input_length_error",
        if mean > 0.0 { "+" } else { "" },
        mean
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Measure;

    fn result(asked: u64, got: u64, status: Status) -> ResultRecord {
        ResultRecord {
            input_length: Some(asked),
            measure: Measure {
                status,
                prompt_tokens: Some(got),
                ..Measure::default()
            },
            ..ResultRecord::default()
        }
    }

    #[test]
    fn most_results_differing_warn_with_the_figures() {
        let l = Lengths::default();
        // Two of three differ: +309 and +301, mean +305; one is exact.
        for (asked, got) in [(1024, 1333), (1024, 1325), (1024, 1024)] {
            l.add(&result(asked, got, Status::Ok));
        }
        // Not ok, or without usage: not counted.
        l.add(&result(1024, 2000, Status::Error));
        assert_eq!(
            l.warning().unwrap(),
            "the server counted other prompt lengths than the trace's input_length in 2 of 3 ok \
             results (prompt_tokens - input_length: +301 to +309, mean +305.0): the load sent is \
             not the one asked for. Synthesized prompts are exact in the tokenizer they are made \
             for (--tokenizer, o200k_base unless given: give the served model's), and a chat \
             endpoint adds its chat template's tokens (--endpoint completions sends the prompt \
             alone); trace-summarize reports the difference as input_length_error"
        );
    }

    #[test]
    fn exact_lengths_a_bos_token_or_half_differing_do_not_warn() {
        let l = Lengths::default();
        l.add(&result(100, 100, Status::Ok));
        l.add(&result(100, 101, Status::Ok));
        assert!(l.warning().is_none());
        // One of two differs: not most.
        let l = Lengths::default();
        l.add(&result(100, 100, Status::Ok));
        l.add(&result(100, 90, Status::Ok));
        assert!(l.warning().is_none());
        assert!(Lengths::default().warning().is_none());
    }
}
