//! trace-summarize on the peers' own result files (`tests/data/peers/`,
//! written from the public formats, see its SOURCES.md): AIPerf's
//! `profile_export.jsonl`, vLLM's `--save-detailed` JSON and GuideLLM's
//! `benchmarks.json`, recognised by content and read as result records.
//!
//! Each file holds the requests of `tests/data/results/conventions.ndjson`
//! (times in ms from the first send):
//!
//! | # | status | sent | ttft | gaps       | last token | end | tokens | prompt |
//! |---|--------|------|------|------------|------------|-----|--------|--------|
//! | a | ok     | 0    | 40   | 20, 20, 20 | 100        | 110 | 4      | 10     |
//! | b | ok     | 10   | 30   | 10, 30     | 70         | 75  | 6      | 12     |
//! | c | ok     | 20   | 50   | -          | 50         | 55  | 1      | 10     |
//! | d | ok     | 30   | 20   | 40         | 60         | 62  | 2      | 8      |
//! | e | error  | 40   | -    | -          | -          | 45  | -      | 9      |
//!
//! AIPerf's and vLLM's latency ends at the last token (a 100, not 110);
//! GuideLLM's at the request's end, and it keeps no gaps (b's are spread
//! evenly: 20, 20) and d has no usage.

use serde_json::Value;

use crate::conventions::{
    AIPERF_ROWS, TTFT_LINEAR, e2e_to_last_token_linear, figures, guidellm_figures, linear_figures,
};
use crate::util::{Cmd, TestDir, assert_rows, close, data, run_file, run_stdin};

/// trace-summarize `args…` on a peer file: its exit 0 and its output.
fn summarize(args: &[&str], file: &str) -> String {
    let run = run_file("trace-summarize", args, data(file));
    run.code(0);
    run.stdout_str()
}

/// `--format json --convention NAME` on a peer file.
fn summary(convention: &str, file: &str) -> Value {
    let out = summarize(&["--format", "json", "--convention", convention], file);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `--requests csv` of a peer file: the result records it was read as,
/// and the warning.
fn requests(file: &str) -> (Vec<String>, String) {
    let run = run_file("trace-summarize", &["--requests", "csv"], data(file));
    run.code(0);
    (run.lines(), run.stderr.clone())
}

const HEADER: &str = "index,id,session_id,model,shard,warmup,status,http_status,error,\
scheduled_ms,sent_ms,lag_ms,ttft_ms,first_chunk_ms,tpot_ms,e2e_ms,itl_count,itl_mean_ms,\
itl_max_ms,input_length,prompt_tokens,output_length,completion_tokens,cached_tokens,finish_reason";

#[test]
fn aiperf_records_become_results() {
    // AIPerf 0.13.0, aiperf/common/models/record_models.py (MetricRecordInfo:
    // metadata, metrics as {value, unit}, error): request_start_ns and
    // request_end_ns are epoch ns; time_to_first_token, request_latency
    // and inter_chunk_latency are in their unit (ms here);
    // output_sequence_length is the output tokens with reasoning; a failed
    // record has only error_isl. Records come in completion order: e, c,
    // b, d, a. The error's end is request_end_ns − start = 5.
    let (lines, stderr) = requests("peers/profile_export.jsonl");
    assert_eq!(
        lines,
        [
            HEADER,
            "0,e,c-e,,,false,error,500,ServerError: Internal Server Error,,40,,,,,5,0,,,,9,,,,",
            "1,c,c-c,,,false,ok,,,,20,,50,,,50,0,,,,10,,1,,",
            "2,b,c-b,,,false,ok,,,,10,,30,,8,70,2,20,30,,12,,6,,",
            "3,d,c-d,,,false,ok,,,,30,,20,,40,60,1,40,40,,8,,2,,",
            "4,a,c-a,,,false,ok,,,,0,,40,,20,100,3,20,20,,10,,4,,",
        ]
    );
    assert_eq!(
        stderr,
        format!(
            "trace-summarize: warning: {}: read as AIPerf's profile_export.jsonl (5 records): \
             sent_ms is each request_start_ns from the first; AIPerf records no schedule, so \
             scheduled_ms is null (no dispatch lag); prompt_tokens and completion_tokens are \
             AIPerf's input and output sequence lengths (its tokenizer's count unless it ran \
             with --use-server-token-count); first_chunk_ms, cached_tokens and finish_reason \
             are null\n",
            data("peers/profile_export.jsonl").display()
        )
    );
}

/// What AIPerf printed for this run, from its formulas (AIPerf 0.13.0,
/// src/aiperf/metrics/types/: ttft_metric.py, request_latency_metric.py,
/// inter_token_latency_metric.py = (latency − TTFT) / (OSL − 1),
/// inter_chunk_latency_metric.py, output_sequence_length_metric.py,
/// request_throughput_metric.py and output_token_throughput_metric.py over
/// the benchmark duration, from the first request's start to the last
/// response, 0 to 100 ms here; metrics/metric_dicts.py: linear percentiles,
/// population std).
#[test]
fn aiperf_export_summarizes_as_aiperf_printed_it() {
    let j = summary("aiperf", "peers/profile_export.jsonl");
    assert_eq!(j["follows"], "AIPerf 0.13.0");
    assert_eq!(j["requests"]["ok"], 4);
    assert_eq!(j["requests"]["error"], 1);
    // Time to First Token, Request Latency (to the last token), Inter
    // Token Latency (as the export's own inter_token_latency says) and
    // Inter Chunk Latency: as conventions.rs works them out.
    linear_figures(&j);
    // Output Sequence Length 4 + 6 + 1 + 2; Request Throughput 4 / 0.1 s;
    // Output Token Throughput 13 / 0.1 s.
    assert_eq!(j["output_tokens"], 13);
    close(&j["duration_s"], 0.1);
    close(&j["throughput"]["requests_per_s"], 40.0);
    close(&j["throughput"]["output_tokens_per_s"], 130.0);
    // No schedule: no dispatch lag rather than an invented one.
    assert_eq!(j["dispatch_lag"]["count"], 0);

    // The table names each figure as AIPerf does.
    let text = summarize(&["--convention", "aiperf"], "peers/profile_export.jsonl");
    assert_rows(&text, &AIPERF_ROWS);
}

#[test]
fn vllm_detailed_results_become_results() {
    // vLLM, vllm/benchmarks/serve.py (`benchmark`'s result: input_lens,
    // output_lens, ttfts, itls, latencies, start_times, errors, one per
    // request in send order, seconds; start_times from perf_counter) and
    // lib/endpoint_request_func.py (an empty error on success).
    let (lines, stderr) = requests("peers/vllm-detailed.json");
    assert_eq!(
        lines,
        [
            HEADER,
            "0,,,m,,false,ok,,,,0,,40,,20,100,3,20,20,10,10,,4,,",
            "1,,,m,,false,ok,,,,10,,30,,8,70,2,20,30,12,12,,6,,",
            "2,,,m,,false,ok,,,,20,,50,,,50,0,,,10,10,,1,,",
            "3,,,m,,false,ok,,,,30,,20,,40,60,1,40,40,8,8,,2,,",
            "4,,,m,,false,error,,Internal Server Error,,40,,,,,,0,,,9,9,,,,",
        ]
    );
    assert!(
        stderr.contains(
            "read as vLLM bench serve's detailed result (5 requests): sent_ms is each \
             start_times value from the first; vLLM records no schedule"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // vLLM's figures for it (calculate_metrics: TPOT = (latency − TTFT) /
    // (output_len − 1), np.percentile), as in conventions.rs.
    let j = summary("vllm", "peers/vllm-detailed.json");
    figures(&j["ttft"], 4, TTFT_LINEAR);
    figures(&j["e2e"], 4, e2e_to_last_token_linear());
    close(&j["tpot"]["mean"], 68.0 / 3.0);
    close(&j["itl"]["p90"], 35.0);
    assert_eq!(j["output_tokens"], 13);
    // Request throughput: 4 ok over 0 to 100 ms.
    close(&j["throughput"]["requests_per_s"], 40.0);
}

#[test]
fn older_vllm_results_say_what_is_missing() {
    // Without start_times and latencies: every send at 0 (said), and the
    // latency rebuilt as TTFT + Σ ITL, which is how vLLM measures it.
    let (lines, stderr) = requests("peers/vllm-detailed-old.json");
    assert_eq!(
        lines[1..],
        [
            "0,,,m,,false,ok,,,,0,,40,,20,100,3,20,20,10,10,,4,,",
            "1,,,m,,false,ok,,,,0,,30,,8,70,2,20,30,12,12,,6,,",
            "2,,,m,,false,ok,,,,0,,50,,,50,0,,,10,10,,1,,",
            "3,,,m,,false,ok,,,,0,,20,,40,60,1,40,40,8,8,,2,,",
            "4,,,m,,false,error,,Internal Server Error,,0,,,,,,0,,,9,9,,,,",
        ]
    );
    assert!(
        stderr.contains(
            "vLLM's detailed results have no send times (start_times, written by later \
             releases): sent_ms is left at 0 for every request, so the duration and \
             throughputs are not the run's; no latencies: e2e_ms is rebuilt as TTFT plus \
             every gap, vLLM's own latency, for 4;"
        ),
        "{stderr}"
    );
}

#[test]
fn guidellm_report_becomes_results() {
    // GuideLLM 0.8.1, guidellm/schemas/info.py (RequestTimings, epoch
    // seconds: targeted_start, request_start, first_token_iteration,
    // last_token_iteration, token_iterations, request_end) and
    // guidellm/schemas/request_stats.py (input_metrics and output_metrics
    // total_tokens). Every targeted_start is 1 ms before its start, so
    // the sends are 1 ms later than the table's and each lag is 1. The
    // tracekit TPOT (first column) of a is (110 − 40) / 3.
    let (lines, stderr) = requests("peers/benchmarks.json");
    assert_eq!(
        lines,
        [
            HEADER,
            "0,a,,,,false,ok,,,0,1,1,40,,23.333,110,3,20,20,,10,,4,,",
            "1,b,,,,false,ok,,,10,11,1,30,,9,75,2,20,20,,12,,6,,",
            "2,c,,,,false,ok,,,20,21,1,50,,,55,0,,,,10,,1,,",
            "3,d,,,,false,ok,,,30,31,1,20,,,62,1,40,40,,8,,,,",
            "4,e,,,,false,error,,HTTP 500: boom,40,41,1,,,,5,0,,,,9,,,,",
        ]
    );
    assert!(
        stderr.contains(
            "read as GuideLLM's benchmark report (5 requests, the ones GuideLLM kept of each \
             benchmark): GuideLLM keeps no chunk times, so the itl_ms gaps are spread evenly"
        ),
        "{stderr}"
    );

    // GuideLLM's own figures for it are those of conventions.rs: its
    // formulas need only the first and last token and the iterations.
    let j = summary("guidellm", "peers/benchmarks.json");
    guidellm_figures(&j);
    // The targeted starts give a dispatch lag of 1 ms each.
    close(&j["dispatch_lag"]["max"], 1.0);
    // From the first send (1) to the last end (a: 1 + 110).
    close(&j["duration_s"], 0.11);
}

#[test]
fn peer_files_are_recognised_by_content_from_a_pipe_and_beside_results() {
    // Standard input, no name to go by.
    let bytes = std::fs::read(data("peers/profile_export.jsonl")).unwrap();
    let run = run_stdin("trace-summarize", &["--format", "json"], bytes);
    run.code(0);
    run.stderr_has("<stdin>: read as AIPerf's");
    assert_eq!(run.json()["requests"]["total"], 5);

    // A peer's run beside tracekit's, each drawn as its own run; --by
    // reads the converted records like any other.
    let dir = TestDir::new("peers-mixed");
    let run = Cmd::new("trace-summarize")
        .args(["--format", "json", "--by", "status", "--plot"])
        .arg(dir.join("runs.svg"))
        .arg(data("results/conventions.ndjson"))
        .arg(data("peers/vllm-detailed.json"))
        .run();
    run.code(0);
    let j = run.json();
    assert_eq!(j["overall"]["requests"]["total"], 10);
    assert_eq!(j["groups"]["ok"]["requests"]["total"], 8);
    assert_eq!(j["groups"]["error"]["requests"]["total"], 2);
    assert!(dir.join("runs.svg").exists());
}

#[test]
fn broken_peer_files_are_named_precisely() {
    let dir = TestDir::new("peers-broken");
    // A unit AIPerf does not write, on the second line.
    let text = std::fs::read_to_string(data("peers/profile_export.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[1] = lines[1].replacen(
        r#""value": 50.0, "unit": "ms""#,
        r#""value": 50.0, "unit": "fortnights""#,
        1,
    );
    let path = dir.write("export.jsonl", lines.join("\n") + "\n");
    let run = Cmd::new("trace-summarize").arg(&path).run();
    run.code(2);
    run.stderr_is(format!(
        "trace-summarize: {}:2: error: field `metrics.time_to_first_token.unit`: expected a \
             unit of time (ns, us, ms, s), found \"fortnights\"\n",
        path.display()
    ));

    // vLLM's result saved without --save-detailed.
    let path = dir.write(
        "vllm.json",
        r#"{"duration": 1.0, "completed": 1, "total_output_tokens": 5, "request_throughput": 1.0}"#,
    );
    let run = Cmd::new("trace-summarize").arg(&path).run();
    run.code(2);
    run.stderr_is(format!(
        "trace-summarize: error: {}: vLLM's result has no per-request figures (ttfts, itls, \
             errors): save the run with --save-result --save-detailed\n",
        path.display()
    ));

    // Arrays of different lengths.
    let path = dir.write(
        "short.json",
        r#"{"ttfts": [0.1, 0.2], "itls": [[], []], "errors": [""], "output_lens": [1, 1]}"#,
    );
    let run = Cmd::new("trace-summarize").arg(&path).run();
    run.code(2);
    run.stderr_is(format!(
        "trace-summarize: {}:1: error: field `errors`: has 1 values where ttfts has 2: one \
             per request is expected\n",
        path.display()
    ));
}
