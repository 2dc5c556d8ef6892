//! `trace-summarize --convention` on `tests/data/results/conventions.ndjson`:
//! each peer's figures worked out by hand from its published formulas.
//!
//! | # | status | sent | 1st chunk | ttft | itl        | last token | e2e | tokens      |
//! |---|--------|------|-----------|------|------------|------------|-----|-------------|
//! | a | ok     | 0    | 10 (role) | 40   | 20, 20, 20 | 100        | 110 | 4           |
//! | b | ok     | 10   | 30        | 30   | 10, 30     | 70         | 75  | 6           |
//! | c | ok     | 20   | 50        | 50   | -          | 50         | 55  | 1           |
//! | d | ok     | 30   | 5 (role)  | 20   | 40         | 60         | 62  | no usage: 2 |
//! | e | error  | 40   | -         | -    | -          | -          | 5   | -           |
//!
//! "last token" = ttft + Σ itl, the last content chunk; e2e ends later (the
//! usage chunk and `[DONE]`). a and d begin with a role-only chunk, which
//! no peer counts as a token. d has no usage: under a peer's convention its
//! tokens are its content chunks, 2. c is a one-token answer.
//!
//! Every peer takes TTFT at the first content: 40, 30, 50, 20 (sorted 20,
//! 30, 40, 50; mean 35; deviations ±5, ±15: variance 500 / 4 = 125).

use serde_json::Value;

use crate::util::{assert_rows, close, data, run_file, summary_text};

fn summarize(args: &[&str]) -> Value {
    let args = [&["--format", "json"], args].concat();
    let run = run_file("trace-summarize", &args, data("results/conventions.ndjson"));
    run.ok();
    run.json()
}

/// TTFT, latency to the last content chunk, TPOT per request and the
/// gaps pooled, with linear percentiles: AIPerf's figures, and vLLM's.
#[track_caller]
pub(crate) fn linear_figures(j: &Value) {
    figures(&j["ttft"], 4, TTFT_LINEAR);
    figures(&j["e2e"], 4, e2e_to_last_token_linear());
    figures(&j["tpot"], 3, per_request_tpot_linear());
    figures(&j["itl"], 6, pooled_gaps_linear());
}

/// AIPerf's names of TTFT, TPOT, ITL and E2E: rows of its table.
pub(crate) const AIPERF_ROWS: [&str; 4] = [
    "Time to First Token",
    "Inter Token Latency",
    "Inter Chunk Latency",
    "Request Latency",
];

/// count, mean, std, min, p50, p90, p95, p99, max.
#[track_caller]
pub(crate) fn figures(v: &Value, count: u64, want: [f64; 8]) {
    assert_eq!(v["count"].as_u64(), Some(count), "count in {v}");
    let keys = ["mean", "std", "min", "p50", "p90", "p95", "p99", "max"];
    for (k, w) in keys.iter().zip(want) {
        let g = v[*k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} is not a number in {v}"));
        assert!((g - w).abs() < 1e-9, "{k}: got {g}, want {w}");
    }
}

/// numpy's default percentile ("linear") of 20, 30, 40, 50: index
/// 3 × p/100 = 1.5, 2.7, 2.85, 2.97 → 35, 47, 48.5, 49.7.
pub(crate) const TTFT_LINEAR: [f64; 8] =
    [35.0, 11.180339887498949, 20.0, 35.0, 47.0, 48.5, 49.7, 50.0];

/// Latency to the last content chunk: 100, 70, 50, 60; sorted 50, 60, 70,
/// 100; mean 70; variance (400 + 100 + 0 + 900) / 4 = 350; p50 at 1.5: 65;
/// p90 at 2.7: 70 + 0.7 × 30 = 91; p95 at 2.85: 95.5; p99 at 2.97: 99.1.
pub(crate) fn e2e_to_last_token_linear() -> [f64; 8] {
    [70.0, 350f64.sqrt(), 50.0, 65.0, 91.0, 95.5, 99.1, 100.0]
}

/// Per request (latency − TTFT) / (tokens − 1): a (100 − 40) / 3 = 20, b
/// (70 − 30) / 5 = 8, d (60 − 20) / (2 − 1) = 40; c has none. Sorted 8,
/// 20, 40; mean 68 / 3; variance 2064 / 3 − (68 / 3)² = 1568 / 9; index
/// 2 × p/100: p50 20, p90 at 1.8: 36, p95 38, p99 39.6.
pub(crate) fn per_request_tpot_linear() -> [f64; 8] {
    [
        68.0 / 3.0,
        (1568.0f64 / 9.0).sqrt(),
        8.0,
        20.0,
        36.0,
        38.0,
        39.6,
        40.0,
    ]
}

/// The gaps pooled: 20, 20, 20, 10, 30, 40; sorted 10, 20, 20, 20, 30,
/// 40; mean 70 / 3; variance 3800 / 6 − (70 / 3)² = 800 / 9; index 5 ×
/// p/100: p50 at 2.5: 20, p90 at 4.5: 35, p95 at 4.75: 37.5, p99 at 4.95:
/// 39.5.
pub(crate) fn pooled_gaps_linear() -> [f64; 8] {
    [
        70.0 / 3.0,
        (800.0f64 / 9.0).sqrt(),
        10.0,
        20.0,
        35.0,
        37.5,
        39.5,
        40.0,
    ]
}

#[test]
fn aiperf() {
    // AIPerf 0.13.0, src/aiperf/metrics/types/: ttft_metric.py (first
    // content response), request_latency_metric.py (last content
    // response), inter_token_latency_metric.py ((latency − TTFT) / (OSL −
    // 1), OSL ≥ 2), inter_chunk_latency_metric.py (gaps between content
    // responses); metrics/metric_dicts.py: percentiles by linear
    // interpolation at index p/100 × (n − 1), std of the population.
    let j = summarize(&["--convention", "aiperf"]);
    assert_eq!(j["convention"], "aiperf");
    assert_eq!(j["follows"], "AIPerf 0.13.0");
    // TTFT; request latency, to the last content chunk; Inter Token
    // Latency (tracekit's TPOT slot), per request; Inter Chunk Latency
    // (tracekit's ITL slot): the gaps pooled.
    linear_figures(&j);
    // Output tokens 4 + 6 + 1 + 2 (d's chunks), over 0 to 110 ms.
    assert_eq!(j["output_tokens"], 13);
    assert_eq!(j["output_tokens_from_chunks"], 1);
    assert_eq!(j["requests"]["ok_without_usage"], 1);
    close(&j["throughput"]["output_tokens_per_s"], 13.0 / 0.11);
}

#[test]
fn vllm() {
    // vLLM 0.33.0, vllm/benchmarks/lib/endpoint_request_func.py (TTFT at
    // the first token delta, a gap per later token chunk, latency to the
    // last token chunk, the usage chunk not counted) and
    // vllm/benchmarks/serve.py calculate_metrics (TPOT = (latency − TTFT)
    // / (output_len − 1) for output_len > 1; np.percentile, np.std).
    let j = summarize(&["--convention", "vllm"]);
    assert_eq!(j["follows"], "vLLM 0.33.0 (vllm bench serve)");
    // TTFT not at the role-only chunks: with them a and d would be 10 and
    // 5. E2EL, to the last token chunk, as AIPerf's request latency above.
    // TPOT: d counts its 2 chunks for tokens; c (one token) has none. ITL:
    // every gap after the first token, pooled.
    linear_figures(&j);
    assert_eq!(j["output_tokens"], 13);
}

#[test]
fn guidellm() {
    // GuideLLM 0.8.1: src/guidellm/schemas/request_stats.py
    // (time_per_output_token_ms = (last token − start) / output tokens;
    // inter_token_latency_ms = (last − first token) / (output tokens − 1);
    // output tokens = token iterations without usage),
    // src/guidellm/benchmark/schemas/generative/metrics.py (TPOT weighted
    // by output tokens, ITL by output tokens − 1, a missing TTFT as 0) and
    // src/guidellm/schemas/statistics.py (equal values merged, weight 0
    // dropped, the first value whose cumulative share reaches p/100;
    // weighted mean and variance).
    let j = summarize(&["--convention", "guidellm"]);
    assert_eq!(j["follows"], "GuideLLM 0.8.1");
    guidellm_figures(&j);
}

/// GuideLLM's figures for these requests, from its formulas (see
/// [`guidellm`]): peers.rs holds its benchmarks.json to them too.
#[track_caller]
pub(crate) fn guidellm_figures(j: &Value) {
    // TTFT, weight 1 each: shares 0.25, 0.5, 0.75, 1 → p50 30, p90 50.
    figures(
        &j["ttft"],
        4,
        [35.0, 125f64.sqrt(), 20.0, 30.0, 50.0, 50.0, 50.0, 50.0],
    );
    // TPOT: a 100 / 4 = 25 (weight 4), b 70 / 6 (6), c 50 / 1 = 50 (1, the
    // one-token answer kept), d 60 / 2 = 30 (2). Mean 280 / 13; Σ w v² =
    // 2500 + 4900 / 6 + 2500 + 1800 = 45700 / 6. Sorted 70/6, 25, 30, 50
    // with shares 6/13, 10/13, 12/13, 1: p50 25, p90 30, p95 and p99 50.
    let mean = 280.0 / 13.0;
    let var = 45700.0 / 6.0 / 13.0 - mean * mean;
    figures(
        &j["tpot"],
        4,
        [mean, var.sqrt(), 70.0 / 6.0, 25.0, 30.0, 50.0, 50.0, 50.0],
    );
    // ITL: a 60 / 3 = 20 (weight 3), b 40 / 5 = 8 (5), d 40 / 1 = 40 (1);
    // c weighs 0 and is dropped. Mean 140 / 9; Σ w v² = 1200 + 320 + 1600
    // = 3120. Shares 5/9, 8/9, 1: p50 8, p90 (8/9 < 0.9) 40.
    let mean = 140.0 / 9.0;
    let var = 3120.0 / 9.0 - mean * mean;
    figures(
        &j["itl"],
        3,
        [mean, var.sqrt(), 8.0, 8.0, 40.0, 40.0, 40.0, 40.0],
    );
    // request_latency to the request's end: 110, 75, 55, 62; mean 75.5;
    // variance 24594 / 4 − 75.5² = 448.25; shares of 0.25: p50 62.
    figures(
        &j["e2e"],
        4,
        [
            75.5,
            448.25f64.sqrt(),
            55.0,
            62.0,
            110.0,
            110.0,
            110.0,
            110.0,
        ],
    );
    assert_eq!(j["output_tokens"], 13);
    assert_eq!(j["output_tokens_from_chunks"], 1);
}

#[test]
fn tracekit_default_and_names_beside_it() {
    // tracekit's own: nearest rank, E2E to the last byte, no tokens for d.
    let j = summarize(&["--convention", "tracekit,aiperf"]);
    assert_eq!(j["convention"], "tracekit");
    assert!(j.get("follows").is_none());
    // TTFT nearest rank: p50 the 2nd of 4, p90 the 4th.
    close(&j["ttft"]["p50"], 30.0);
    close(&j["ttft"]["p90"], 50.0);
    // TPOT: (110 − 40) / 3 and (75 − 30) / 5 = 9; d has no usage.
    assert_eq!(j["tpot"]["count"], 2);
    close(&j["tpot"]["mean"], (70.0 / 3.0 + 9.0) / 2.0);
    assert_eq!(j["output_tokens"], 11);
    // AIPerf's figures beside it, as in aiperf() above.
    let a = &j["conventions"]["aiperf"];
    close(&a["ttft"]["p50"], 35.0);
    close(&a["e2e"]["p90"], 91.0);
    assert_eq!(a["output_tokens"], 13);

    let text = summary_text(
        &["--convention", "aiperf,guidellm"],
        data("results/conventions.ndjson"),
    );
    // Each figure under its peer's own name.
    assert_rows(&text, &AIPERF_ROWS);
    assert_rows(
        &text,
        &[
            "time_per_output_token_ms",
            "inter_token_latency_ms",
            "request_latency",
        ],
    );
    assert!(
        text.contains(" 1 (1 of them counted one token per content chunk)\n"),
        "{text}"
    );
    assert!(
        text.contains("convention aiperf: as AIPerf 0.13.0"),
        "{text}"
    );
    assert!(
        text.contains(
            "percentiles exact (the latencies interpolated linearly, the others by nearest rank)"
        ),
        "{text}"
    );
}
