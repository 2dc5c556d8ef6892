//! How figures are defined: tracekit's own, or a peer's, and the
//! distributions each convention keeps.

use crate::result::ResultView;
use crate::stats::{Dist, PercentileRule};

/// How the figures are defined: tracekit's own, or those a peer prints for
/// the same requests. Each peer's rules follow its source, at the release
/// named in [`Convention::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Convention {
    /// tracekit's own (the default): TTFT at the first content; TPOT =
    /// (E2E − TTFT) / (tokens − 1); ITL = the gaps between content chunks,
    /// pooled; E2E to the last byte; nearest-rank percentiles.
    Tracekit,
    /// AIPerf's: TTFT at the first content; request latency to the last
    /// content chunk; "inter token latency" per request = (latency − TTFT)
    /// / (tokens − 1); "inter chunk latency" = the gaps, pooled; numpy's
    /// linear percentiles.
    Aiperf,
    /// vLLM bench serve's: TTFT at the first content, reasoning or tool-call
    /// delta; E2E to the last token chunk; TPOT = (E2E − TTFT) / (tokens
    /// − 1); ITL = the gaps, pooled; numpy's linear percentiles.
    Vllm,
    /// GuideLLM's: TPOT = (last token − start) / tokens, weighted by
    /// tokens; ITL = (last − first token) / (tokens − 1), weighted by
    /// tokens − 1; GuideLLM's cumulative-share percentiles.
    Guidellm,
}

/// What one convention's figures are called by the tool that defines them,
/// in the order TTFT, TPOT, ITL, E2E.
pub struct Names {
    /// Time to first token.
    pub ttft: &'static str,
    /// The per-request average time per token.
    pub tpot: &'static str,
    /// Inter-token latency: pooled gaps, or per request under guidellm.
    pub itl: &'static str,
    /// Request latency.
    pub e2e: &'static str,
}

impl Convention {
    /// The name printed and used as a JSON key.
    pub fn name(self) -> &'static str {
        match self {
            Convention::Tracekit => "tracekit",
            Convention::Aiperf => "aiperf",
            Convention::Vllm => "vllm",
            Convention::Guidellm => "guidellm",
        }
    }

    /// The peer release whose source the rules follow.
    pub fn release(self) -> Option<&'static str> {
        match self {
            Convention::Tracekit => None,
            Convention::Aiperf => Some("AIPerf 0.13.0"),
            Convention::Vllm => Some("vLLM 0.33.0 (vllm bench serve)"),
            Convention::Guidellm => Some("GuideLLM 0.8.1"),
        }
    }

    /// The names the figures go by under this convention: TTFT, TPOT,
    /// ITL and E2E, as the peer's report spells them.
    pub fn names(self) -> Names {
        let [ttft, tpot, itl, e2e] = match self {
            Convention::Tracekit => ["TTFT", "TPOT", "ITL", "E2E"],
            Convention::Aiperf => [
                "Time to First Token",
                "Inter Token Latency",
                "Inter Chunk Latency",
                "Request Latency",
            ],
            Convention::Vllm => ["TTFT", "TPOT", "ITL", "E2EL"],
            Convention::Guidellm => [
                "time_to_first_token_ms",
                "time_per_output_token_ms",
                "inter_token_latency_ms",
                "request_latency",
            ],
        };
        Names {
            ttft,
            tpot,
            itl,
            e2e,
        }
    }

    /// How percentiles are read.
    pub fn percentile_rule(self) -> PercentileRule {
        match self {
            Convention::Tracekit => PercentileRule::NearestRank,
            Convention::Aiperf | Convention::Vllm => PercentileRule::Linear,
            Convention::Guidellm => PercentileRule::CumulativeShare,
        }
    }

    /// TTFT of one result under this convention. Every convention takes it
    /// at the first content, reasoning or tool-call chunk (`ttft_ms`): a
    /// chunk carrying only the role is not a token.
    pub fn ttft(self, r: &ResultView) -> Option<f64> {
        r.ttft_ms
    }

    /// Output tokens: the server's usage; under a peer's convention, an
    /// answer without usage counts one token per content chunk, as the
    /// peers do without a tokenizer (results carry no text to tokenize).
    pub fn output_tokens(self, r: &ResultView, itl: &[f64]) -> Option<u64> {
        match (r.completion_tokens, self) {
            (Some(n), _) => Some(n),
            (None, Convention::Tracekit) => None,
            (None, _) => r.ttft_ms.map(|_| itl.len() as u64 + 1),
        }
    }

    /// When the last token arrived, from the send: the last content chunk
    /// (TTFT plus every gap), or the end for an answer that did not stream.
    fn last_token(r: &ResultView, itl: &[f64]) -> Option<f64> {
        match r.ttft_ms {
            Some(t) => Some(t + itl.iter().sum::<f64>()),
            None => r.e2e_ms,
        }
    }

    /// E2E of one result: to the last byte (tracekit, GuideLLM's request
    /// end), or to the last token chunk (AIPerf, vLLM: the usage chunk and
    /// `[DONE]` do not count).
    pub fn e2e(self, r: &ResultView, itl: &[f64]) -> Option<f64> {
        match self {
            Convention::Tracekit | Convention::Guidellm => r.e2e_ms,
            Convention::Aiperf | Convention::Vllm => {
                r.e2e_ms?;
                Self::last_token(r, itl)
            }
        }
    }

    /// TPOT of one result, when it has one.
    pub fn tpot(self, r: &ResultView, itl: &[f64]) -> Option<f64> {
        let tokens = self.output_tokens(r, itl)?;
        match self {
            Convention::Guidellm => {
                r.e2e_ms?;
                let last = Self::last_token(r, itl)?;
                (tokens >= 1).then(|| last / tokens as f64)
            }
            _ => {
                let e2e = self.e2e(r, itl)?;
                let ttft = self.ttft(r)?;
                (tokens > 1).then(|| (e2e - ttft) / (tokens - 1) as f64)
            }
        }
    }
}

/// TTFT, TPOT, ITL and E2E under one convention.
#[derive(Clone, Debug, Default)]
pub struct ConventionDists {
    /// Time to first token.
    pub ttft: Dist,
    /// Time per output token.
    pub tpot: Dist,
    /// Inter-token latency.
    pub itl: Dist,
    /// End-to-end latency.
    pub e2e: Dist,
    /// Σ output tokens of ok results, as this convention counts them.
    pub output_tokens: u64,
    /// Ok results without usage whose tokens were counted as content
    /// chunks.
    pub tokens_from_chunks: u64,
}

impl ConventionDists {
    pub(super) fn merge(&mut self, o: &ConventionDists) {
        merge_fields!(self, o; merge: ttft, tpot, itl, e2e; add: output_tokens, tokens_from_chunks);
    }

    /// Fold in one ok result under convention `c`.
    pub(super) fn add(&mut self, c: Convention, r: &ResultView, itl: &[f64]) {
        let tokens = c.output_tokens(r, itl);
        self.output_tokens += tokens.unwrap_or(0);
        if r.completion_tokens.is_none() && tokens.is_some() {
            self.tokens_from_chunks += 1;
        }
        if let Some(e) = c.e2e(r, itl) {
            self.e2e.record(e);
        }
        if c != Convention::Guidellm {
            if let Some(t) = c.ttft(r) {
                self.ttft.record(t);
            }
            if let Some(t) = c.tpot(r, itl) {
                self.tpot.record(t);
            }
            for &gap in itl {
                self.itl.record(gap);
            }
            return;
        }
        // GuideLLM (guidellm/benchmark/schemas/generative/metrics.py) counts
        // a missing TTFT as 0, weights TPOT by tokens and ITL by tokens − 1
        // (a missing ITL as 0 too); weight 0 drops a value.
        self.ttft.record(c.ttft(r).unwrap_or(0.0));
        let n = tokens.unwrap_or(0);
        if let Some(t) = c.tpot(r, itl) {
            self.tpot.record_weighted(t, n);
        }
        // ITL = (last − first token) / (tokens − 1): the gaps' sum.
        let itl_value = match (r.ttft_ms, n > 1) {
            (Some(_), true) => itl.iter().sum::<f64>() / (n - 1) as f64,
            _ => 0.0,
        };
        self.itl.record_weighted(itl_value, n.saturating_sub(1));
    }
}
