//! trace-summarize on `tests/data/results/small.ndjson`, whose figures are
//! worked out by hand below. The file holds (warmup excluded):
//!
//! | # | status | sched | sent | ttft | 1st chunk | e2e  | itl           | tokens (prompt/out) | asked | cached |
//! |---|--------|-------|------|------|-----------|------|---------------|---------------------|-------|--------|
//! | 0 | ok     | 0     | 1    | 100  | 80        | 1100 | 250 ×4        | 50 / 11             | 50/11 | 0      |
//! | 1 | ok     | 100   | 102  | 200  | 150       | 700  | 100, 400      | 40 / 6              | 40/6  | 20     |
//! | 2 | ok     | 200   | 200  | 300  | 300       | 300  | -             | 30 / 1              | 32/1  | 30     |
//! | 3 | error  | 300   | 305  | -    | -         | 20   | -             | -                   | 10/5  | -      |
//! | 4 | timeout| 400   | 400  | -    | -         | -    | -             | -                   | 10/5  | -      |
//! | 6 | ok     | 500   | 501  | 50   | 40        | 250  | 200           | no usage            | 10/5  | -      |
//!
//! Result 5 is a warmup and counts nowhere.

use serde_json::Value;

use crate::util::{
    TestDir, assert_text_eq, close, close_at, data, run_file, run_stdin, summary_json, summary_text,
};

fn summarize(args: &[&str]) -> Value {
    summary_json(args, data("results/small.ndjson"))
}

#[test]
fn counts_duration_and_throughput() {
    let j = summarize(&[]);
    assert_eq!(j["convention"], "tracekit");
    assert_eq!(j["precision"], "exact");
    let r = &j["requests"];
    assert_eq!(
        (r["total"].as_u64(), r["ok"].as_u64(), r["error"].as_u64()),
        (Some(6), Some(4), Some(1))
    );
    assert_eq!(
        (r["timeout"].as_u64(), r["cancelled"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(
        (
            r["warmup_excluded"].as_u64(),
            r["ok_without_usage"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(
        j["http_status"],
        serde_json::json!({"200": 4, "503": 1, "none": 1})
    );
    // First send 1 ms; last completion 1 + 1100 = 1101 ms: 1.1 s.
    close(&j["duration_s"], 1.1);
    // 4 ok / 1.1 s; 11 + 6 + 1 output tokens; prompt 50 + 40 + 30.
    close(&j["throughput"]["requests_per_s"], 4.0 / 1.1);
    assert_eq!(j["output_tokens"], 18);
    assert_eq!(j["prompt_tokens"], 120);
    close(&j["throughput"]["output_tokens_per_s"], 18.0 / 1.1);
    close(&j["throughput"]["total_tokens_per_s"], 138.0 / 1.1);
}

#[test]
fn latencies_under_the_default_convention() {
    let j = summarize(&[]);
    // TTFT of ok results: 100, 200, 300, 50.
    let t = &j["ttft"];
    assert_eq!(t["count"], 4);
    close(&t["mean"], 162.5);
    // Deviations -112.5, -62.5, 37.5, 137.5: variance 36875 / 4.
    close(&t["std"], (36875.0f64 / 4.0).sqrt());
    close(&t["min"], 50.0);
    // Nearest rank: p50 = 2nd of 4, p90 = 4th.
    close(&t["p50"], 100.0);
    close(&t["p90"], 300.0);
    close(&t["max"], 300.0);
    // TPOT: (1100-100)/10 = 100, (700-200)/5 = 100; the 1-token answer and
    // the answer without usage have none.
    assert_eq!(j["tpot"]["count"], 2);
    close(&j["tpot"]["mean"], 100.0);
    // ITL pooled: 250 ×4, 100, 400, 200 = 1700 / 7.
    let i = &j["itl"];
    assert_eq!(i["count"], 7);
    close(&i["mean"], 1700.0 / 7.0);
    close(&i["p50"], 250.0);
    close(&i["p90"], 400.0);
    // E2E: 1100, 700, 300, 250.
    close(&j["e2e"]["mean"], 587.5);
    close(&j["e2e"]["p50"], 300.0);
    // Tokens per second per request: 11/1.1, 6/0.7, 1/0.3.
    let tps = &j["output_tokens_per_s_per_request"];
    assert_eq!(tps["count"], 3);
    close(&tps["mean"], (10.0 + 6.0 / 0.7 + 1.0 / 0.3) / 3.0);
    // Lag of every result: 1, 2, 0, 5, 0, 1.
    let lag = &j["dispatch_lag"];
    assert_eq!(lag["count"], 6);
    close(&lag["mean"], 1.5);
    close(&lag["p50"], 1.0);
    close(&lag["max"], 5.0);
}

#[test]
fn fidelity_cache_and_peaks() {
    let j = summarize(&[]);
    // prompt − asked: 0, 0, 30 − 32; completion − asked: 0, 0, 0.
    let f = &j["input_length_error"];
    assert_eq!(
        (f["count"].as_u64(), f["exact"].as_u64()),
        (Some(3), Some(2))
    );
    close(&f["mean"], -2.0 / 3.0);
    assert_eq!((f["min"].as_i64(), f["max"].as_i64()), (Some(-2), Some(0)));
    let f = &j["output_length_error"];
    assert_eq!(
        (f["count"].as_u64(), f["exact"].as_u64(), f["max"].as_i64()),
        (Some(3), Some(3), Some(0))
    );
    // Cached 0 + 20 + 30 of 50 + 40 + 30 prompt tokens.
    close(&j["prefix_cache"]["hit_rate"], 50.0 / 120.0);
    // In flight at 305-325 ms: results 0, 1, 2 and 3.
    assert_eq!(j["peak"]["in_flight"], 4);
    // Second 0: 11 tokens over 5 chunks at 101, 351, 601, 851 (4 × 2.2),
    // 6 over 3 chunks at 302, 402, 802, 1 at 500: 8.8 + 6 + 1.
    close(&j["peak"]["output_tokens_per_s"], 15.8);
}

#[test]
fn other_conventions() {
    // The peers' own figures for this file are worked out in
    // conventions.rs; here, only that they are reachable and named.
    let j = summarize(&["--convention", "vllm"]);
    assert_eq!(j["convention"], "vllm");
    // TTFT at the first content: 100, 200, 300, 50; TPOT (1100-100)/10,
    // (700-200)/5, and result 6 without usage: 2 chunks, (250-50)/1.
    close(&j["ttft"]["mean"], 162.5);
    close(&j["tpot"]["mean"], 400.0 / 3.0);
    let j = summarize(&["--convention", "guidellm"]);
    // TPOT = last token / tokens, weighted by tokens: (1100 + 700 + 300 +
    // 250) / (11 + 6 + 1 + 2).
    assert_eq!(j["tpot"]["count"], 4);
    close(&j["tpot"]["mean"], 117.5);
    // ITL = (last - first) / (n - 1), weighted by n - 1: (1000 + 500 + 200)
    // / (10 + 5 + 1); the one-token answer weighs 0.
    assert_eq!(j["itl"]["count"], 3);
    close(&j["itl"]["mean"], 106.25);
    // Both beside the default.
    let j = summarize(&["--convention", "tracekit,guidellm"]);
    close(&j["tpot"]["mean"], 100.0);
    close(&j["conventions"]["guidellm"]["tpot"]["mean"], 117.5);
}

#[test]
fn slo_goodput_and_from_scheduled() {
    let j = summarize(&["--slo", "ttft=150ms,tpot=100ms", "--from-scheduled"]);
    // TTFT ≤ 150: results 0 and 6. TPOT ≤ 100: 0 and 1, and 2 and 6 have
    // none, which meets it. All: 0 and 6. Shares of the 6 requests.
    let s = &j["slo"];
    close(&s["met"]["ttft"], 2.0 / 6.0);
    close(&s["met"]["tpot"], 4.0 / 6.0);
    close(&s["met"]["all"], 2.0 / 6.0);
    close(&s["goodput_per_s"], 2.0 / 1.1);
    close(&s["bounds"]["ttft_ms"], 150.0);
    // TTFT + lag: 101, 202, 300, 51; E2E + lag: 1101, 702, 300, 251.
    close(&j["from_scheduled"]["ttft"]["mean"], 654.0 / 4.0);
    close(&j["from_scheduled"]["e2e"]["mean"], 2354.0 / 4.0);
}

#[test]
fn windows_and_groups() {
    let j = summarize(&["--window", "500ms"]);
    let w = j["windows"].as_array().unwrap();
    assert_eq!(w.len(), 3);
    // Sent before 500 ms: results 0-4; ended: 3 at 325, 4 (no e2e) at 400.
    assert_eq!(
        (
            w[0]["started"].as_u64(),
            w[0]["completed"].as_u64(),
            w[0]["errors"].as_u64()
        ),
        (Some(5), Some(2), Some(2))
    );
    // Tokens arrive with their chunks: before 500 ms, 0's at 101 and 351
    // (2.2 each) and 1's at 302 and 402 (2 each): 8.4 tokens / 0.5 s.
    close(&w[0]["output_tokens_per_s"], 16.8);
    // 500-1000 ms: 6 sent; 1 (802), 2 (500), 6 (751) end. Tokens: 0's at
    // 601 and 851, 1's at 802, 2's one at 500: 7.4 / 0.5 s.
    assert_eq!(
        (w[1]["started"].as_u64(), w[1]["completed"].as_u64()),
        (Some(1), Some(3))
    );
    close(&w[1]["output_tokens_per_s"], 14.8);
    close(&w[1]["ttft_p50"], 200.0);
    close(&w[1]["e2e_p99"], 700.0);
    // 0's last chunk at 1101.
    close(&w[2]["output_tokens_per_s"], 4.4);

    let j = summarize(&["--by", "model"]);
    assert_eq!(j["by"], "model");
    let g = &j["groups"];
    // m1: results 0, 2, 6 (all ok); m2: 1 (ok), 3 (error); (none): 4.
    assert_eq!(g["m1"]["requests"]["ok"], 3);
    assert_eq!(g["m2"]["requests"]["total"], 2);
    assert_eq!(g["(none)"]["requests"]["timeout"], 1);
    close(&g["m1"]["ttft"]["mean"], 150.0);
    assert_eq!(j["overall"]["requests"]["total"], 6);
}

#[test]
fn several_files_are_one_run() {
    let all = std::fs::read_to_string(data("results/small.ndjson")).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    let dir = TestDir::new("summarize-split");
    dir.write("a.ndjson", lines[..3].join("\n"));
    dir.write("b.ndjson.gz", {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(lines[3..].join("\n").as_bytes()).unwrap();
        enc.finish().unwrap()
    });
    let split = dir
        .cmd("trace-summarize")
        .args([
            "--format",
            "json",
            "--window",
            "500ms",
            "b.ndjson.gz",
            "a.ndjson",
        ])
        .run();
    split.ok();
    assert_eq!(split.json(), summarize(&["--window", "500ms"]));
}

/// `tests/data/results/streamed.ndjson`, worked out by hand:
///
/// | # | status | sent | ttft | itl                   | e2e  | end  | tokens |
/// |---|--------|------|------|-----------------------|------|------|--------|
/// | 0 | ok     | 0    | -    | -                     | 3500 | 3500 | 6      |
/// | 1 | ok     | 500  | 700  | 300, 1100, 100, 2100  | 4350 | 4850 | 10     |
/// | 2 | error  | 6200 | -    | -                     | 100  | 6300 | -      |
///
/// 0 did not stream: its 6 tokens arrive at its end, 3500. 1's 10 tokens
/// arrive 2 per chunk at 1200, 1500, 2600, 2700 and 4800. By second: 0, 4,
/// 4, 6, 2, 0, 0; counted at completion, second 4 would have had 10.
#[test]
fn tokens_per_second_follow_the_chunks() {
    let run = |args: &[&str]| summary_json(args, data("results/streamed.ndjson"));
    let j = run(&["--window", "1s"]);
    close(&j["peak"]["output_tokens_per_s"], 6.0);
    let w = j["windows"].as_array().unwrap();
    let column = |key: &str| -> Vec<Value> { w.iter().map(|w| w[key].clone()).collect() };
    let nums = |v: &[f64]| -> Vec<Value> { v.iter().map(|&x| Value::from(x)).collect() };
    let ints = |v: &[u64]| -> Vec<Value> { v.iter().map(|&x| Value::from(x)).collect() };
    // Seconds 0-6, second 5 empty but there.
    assert_eq!(
        column("start_s"),
        nums(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    );
    assert_eq!(
        column("output_tokens_per_s"),
        nums(&[0.0, 4.0, 4.0, 6.0, 2.0, 0.0, 0.0])
    );
    assert_eq!(column("started"), ints(&[2, 0, 0, 0, 0, 0, 1]));
    assert_eq!(column("completed"), ints(&[0, 0, 0, 1, 1, 0, 1]));
    assert_eq!(column("errors"), ints(&[0, 0, 0, 0, 0, 0, 1]));
    assert_eq!(
        column("e2e_p50"),
        vec![
            Value::Null,
            Value::Null,
            Value::Null,
            Value::from(3500.0),
            Value::from(4350.0),
            Value::Null,
            Value::Null
        ]
    );

    // 2-second windows: 4 tokens, 4 + 6, 2, none.
    let j = run(&["--window", "2s"]);
    let w = j["windows"].as_array().unwrap();
    let tps: Vec<f64> = w
        .iter()
        .map(|w| w["output_tokens_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(tps, vec![2.0, 5.0, 1.0, 0.0]);

    // The same rows in the table and in CSV, the empty window included.
    let text = summary_text(&["--window", "1s"], data("results/streamed.ndjson"));
    let series = &text[text.find("start_s").unwrap()..];
    assert_text_eq(
        "\
start_s  started  completed  errors  output_tokens_per_s  ttft_p50  ttft_p99  e2e_p50  e2e_p99
0              2          0       0                    0         -         -        -        -
1              0          0       0                    4         -         -        -        -
2              0          0       0                    4         -         -        -        -
3              0          1       0                    6         -         -     3500     3500
4              0          1       0                    2       700       700     4350     4350
5              0          0       0                    0         -         -        -        -
6              1          1       1                    0         -         -        -        -
",
        series,
    );
    let csv = run_file(
        "trace-summarize",
        &["--window", "1s", "--format", "csv"],
        data("results/streamed.ndjson"),
    );
    csv.ok();
    assert_text_eq(
        "\
start_s,started,completed,errors,output_tokens_per_s,ttft_p50,ttft_p99,e2e_p50,e2e_p99
0.0,2,0,0,0.0,,,,
1.0,0,0,0,4.0,,,,
2.0,0,0,0,4.0,,,,
3.0,0,1,0,6.0,,,3500.0,3500.0
4.0,0,1,0,2.0,700.0,700.0,4350.0,4350.0
5.0,0,0,0,0.0,,,,
6.0,1,1,1,0.0,,,,
",
        &csv.stdout_str(),
    );
}

#[test]
fn a_window_too_narrow_for_the_run_is_refused() {
    let run = run_file(
        "trace-summarize",
        &["--window", "0.01ms"],
        data("results/streamed.ndjson"),
    );
    run.code(2);
    assert_text_eq(
        "trace-summarize: error: --window 0.01ms: the run spans 630001 windows of that width, \
         more than the 100000 a time series may have; give a wider window\n",
        &run.stderr,
    );
}

#[test]
fn csv_rows_append() {
    let run = run_file(
        "trace-summarize",
        &["--format", "csv", "--by", "status"],
        data("results/small.ndjson"),
    );
    run.ok();
    let mut rdr = csv::Reader::from_reader(run.stdout.as_slice());
    let header = rdr.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    assert_eq!(&header[0], "group");
    let groups: Vec<&str> = rows.iter().map(|r| &r[0]).collect();
    assert_eq!(groups, vec!["all", "error", "ok", "timeout"]);
    assert_eq!(&rows[0][col("requests.total")], "6");
    assert_eq!(&rows[0][col("ttft.p50")], "100.0");
    assert_eq!(&rows[2][col("requests.ok")], "4");
    // A figure with no value is an empty cell.
    assert_eq!(&rows[1][col("ttft.mean")], "");
    let again = run_file(
        "trace-summarize",
        &["--format", "csv", "--no-header"],
        data("results/small.ndjson"),
    );
    again.ok();
    assert_eq!(again.lines().len(), 1);
    assert!(
        again.lines()[0].starts_with("all,tracekit,exact,6,4,1,1,0,1,1,"),
        "{}",
        again.lines()[0]
    );
}

#[test]
fn fail_if_gates() {
    let run = run_file(
        "trace-summarize",
        &[
            "--format",
            "json",
            "--fail-if",
            "ttft.p99>250ms",
            "--fail-if",
            "requests.error>0",
            "--fail-if",
            "e2e.max<2s",
        ],
        data("results/small.ndjson"),
    );
    run.code(1).stderr_is(
        "trace-summarize: warning: threshold crossed: ttft.p99 is 300 (--fail-if 'ttft.p99>250ms')\n\
         trace-summarize: warning: threshold crossed: requests.error is 1 (--fail-if 'requests.error>0')\n\
         trace-summarize: warning: threshold crossed: e2e.max is 1100 (--fail-if 'e2e.max<2s')\n",
    );
    let run = run_file(
        "trace-summarize",
        &[
            "--fail-if",
            "ttft.p99<=0.3s",
            "--fail-if",
            "throughput.requests_per_s>=3",
        ],
        data("results/small.ndjson"),
    );
    run.code(1);
    let run = run_file(
        "trace-summarize",
        &[
            "--fail-if",
            "ttft.p99>300ms",
            "--fail-if",
            "requests.cancelled!=0",
        ],
        data("results/small.ndjson"),
    );
    run.ok();
}

#[test]
fn edge_cases_of_results() {
    let dir = TestDir::new("summarize-edges");
    // Only failures: no latency figures, no throughput over a zero span.
    dir.write(
        "failed.ndjson",
        "{\"sent_ms\":5,\"scheduled_ms\":5,\"status\":\"error\",\"http_status\":500,\"e2e_ms\":null}\n",
    );
    let run = dir
        .cmd("trace-summarize")
        .args(["--format", "json", "failed.ndjson"])
        .run();
    // No ok result is a negative answer; the report is still printed.
    run.code(1).stderr_is(
        "trace-summarize: warning: no result is ok: 1 error, 0 timeout, 0 cancelled of 1 (see their `error`)\n",
    );
    let j = run.json();
    assert_eq!(j["ttft"]["count"], 0);
    assert_eq!(j["ttft"]["p99"], Value::Null);
    assert_eq!(j["duration_s"], Value::Null);
    assert_eq!(j["throughput"]["requests_per_s"], Value::Null);
    // A null figure crosses any threshold on it.
    let run = dir
        .cmd("trace-summarize")
        .args(["--fail-if", "ttft.p99>1s", "failed.ndjson"])
        .run();
    run.code(1);
    run.stderr_has("ttft.p99 has no value");
    // No input at all.
    let run = run_stdin("trace-summarize", &["--format", "json"], "");
    run.code(1).stderr_is(
        "trace-summarize: warning: no results to summarize: the input is empty (give trace-replay's output)\n",
    );
    assert_eq!(run.json()["requests"]["total"], 0);
    // Only warmup results.
    let run = run_stdin(
        "trace-summarize",
        &["--format", "json"],
        "{\"sent_ms\":5,\"scheduled_ms\":5,\"status\":\"ok\",\"warmup\":true}\n",
    );
    run.code(1).stderr_is(
        "trace-summarize: warning: no results to summarize: warmup results are left out, and there are only those (1)\n",
    );
}

#[test]
fn table_for_people() {
    let dir = TestDir::new("summarize-table");
    dir.write(
        "r.ndjson",
        concat!(
            r#"{"sent_ms":0,"scheduled_ms":0,"ttft_ms":10,"first_chunk_ms":10,"e2e_ms":40,"itl_ms":[10,20],"prompt_tokens":7,"completion_tokens":4,"status":"ok","http_status":200}"#, "\n",
            r#"{"sent_ms":1000,"scheduled_ms":1000,"ttft_ms":30,"first_chunk_ms":30,"e2e_ms":1000,"itl_ms":[],"prompt_tokens":3,"completion_tokens":1,"status":"ok","http_status":200}"#, "\n",
        ),
    );
    let run = dir
        .cmd("trace-summarize")
        .args(["--percentiles", "50,99.9", "r.ndjson"])
        .run();
    run.ok();
    // Duration 0 → 2000 ms; 5 output and 10 prompt tokens. TPOT (40-10)/3.
    // Tokens per second: 4 at 0.01, 0.02, 0.04 s (second 0), 1 at 1.03 s.
    // Per request: 4 / 0.04 s = 100 and 1 / 1 s = 1: mean 50.5, std 49.5.
    // Written by hand, not by trace-replay -o: no settings beside it.
    assert_text_eq(
        "\
trace-summarize: 2 requests: 2 ok, 0 error, 0 timeout, 0 cancelled (HTTP 200: 2)
settings: not recorded (no r.ndjson.run.json beside the results: they went through a pipe, as to tee, or another tool wrote them; trace-replay -o FILE keeps them in FILE.run.json)
convention tracekit: TTFT at the first content chunk; TPOT = (E2E - TTFT) / (output tokens - 1); ITL = gaps between content chunks
percentiles exact (nearest rank); warmup results excluded (0)

duration                 2 s
request throughput       1 requests/s
output token throughput  2.5 tokens/s (5 tokens)
total token throughput   7.5 tokens/s (10 prompt + 5 output tokens: 66.7% prompt)
peak output tokens/s     4 (1 s buckets)
peak requests in flight  1

latency (ms)  count  mean  std  min  p50  p99.9   max
TTFT              2    20   10   10   10     30    30
TPOT              1    10    0   10   10     10    10
ITL               2    15    5   10   10     20    20
E2E               2   520  480   40   40   1000  1000
dispatch lag      2     0    0    0    0      0     0

output tokens/s  count  mean   std  min  p50  p99.9  max
per request          2  50.5  49.5    1    1    100  100
",
        &run.stdout_str(),
    );
    let md = dir
        .cmd("trace-summarize")
        .args(["--format", "markdown", "r.ndjson"])
        .run();
    md.ok();
    assert!(
        md.stdout_str().contains("| TTFT         |     2 |   20 |"),
        "{}",
        md.stdout_str()
    );
    assert!(
        md.stdout_str()
            .starts_with("### trace-summarize: 2 requests")
    );
}

#[test]
fn one_row_per_request_for_spreadsheets() {
    let input = concat!(
        r#"{"index":0,"id":"a","scheduled_ms":10.0,"sent_ms":10.5,"start_time":"2026-11-23T10:00:00.010500Z","ttft_ms":100.0,"first_chunk_ms":50.0,"e2e_ms":400.0,"itl_ms":[100.0,200.0],"input_length":5,"output_length":3,"prompt_tokens":6,"completion_tokens":4,"cached_tokens":null,"finish_reason":"stop","status":"ok","http_status":200}"#,
        "\n",
        r#"{"index":1,"session_id":"s","scheduled_ms":20.0,"sent_ms":20.0,"start_time":"2026-11-23T10:00:00.020000Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":null,"output_length":null,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":500,"error":"HTTP 500: boom, really"}"#,
        "\n"
    );
    let run = run_stdin("trace-summarize", &["--requests", "csv"], input);
    run.ok();
    // Worked out by hand: lag = sent - scheduled; TPOT = (400 - 100) / (4 - 1).
    assert_text_eq(
        &run.stdout_str(),
        "index,id,session_id,model,shard,warmup,status,http_status,error,scheduled_ms,sent_ms,lag_ms,ttft_ms,first_chunk_ms,tpot_ms,e2e_ms,itl_count,itl_mean_ms,itl_max_ms,input_length,prompt_tokens,output_length,completion_tokens,cached_tokens,finish_reason\n\
         0,a,,,,false,ok,200,,10,10.5,0.5,100,50,100,400,2,150,200,5,6,3,4,,stop\n\
         1,,s,,,false,error,500,\"HTTP 500: boom, really\",20,20,0,,,,,0,,,,,,,,\n",
    );
    let mut rows = csv::Reader::from_reader(run.stdout.as_slice());
    assert_eq!(rows.records().count(), 2);

    let run = run_stdin(
        "trace-summarize",
        &["--requests", "json", "--convention", "vllm"],
        input,
    );
    run.ok();
    let first: Value = serde_json::from_str(run.lines()[0].as_str()).unwrap();
    assert_eq!(first["id"], "a");
    // Under vLLM's convention E2E ends at the last token chunk, 100 + 100 +
    // 200 = 400: (400 - 100) / 3.
    assert_eq!(first["tpot_ms"], 100.0);
    assert_eq!(
        (
            &first["lag_ms"],
            &first["itl_count"],
            &first["itl_mean_ms"],
            &first["itl_max_ms"]
        ),
        (
            &Value::from(0.5),
            &Value::from(2),
            &Value::from(150.0),
            &Value::from(200.0)
        )
    );
}

/// Rows whose labels the one-pass reader leaves to serde (an escaped text
/// in a line with an exponent, a label given twice) are what serde reads,
/// and a line serde refuses is refused in its words.
#[test]
fn rows_with_unusual_labels_are_read_as_serde_reads_them() {
    let input = concat!(
        r#"{"index":0,"id":"a\"b\u00e9","model":"m","sent_ms":1.05e1,"status":"ok","itl_ms":[1.5,2.5],"completion_tokens":3,"e2e_ms":20}"#,
        "\n",
        r#"{"index":1,"id":"x","id":"y","sent_ms":5,"status":"ok"}"#,
        "\n",
        r#"{"index":2,"turn":1,"turn":2,"sent_ms":5,"status":"error","finish_reason":"length"}"#,
        "\n"
    );
    let run = run_stdin(
        "trace-summarize",
        &["--requests", "csv", "--skip-invalid"],
        input,
    );
    run.code(0);
    // Row 0: sent 1.05e1 = 10.5, gaps 1.5 and 2.5 (mean 2, max 2.5), no
    // TTFT so no TPOT. Line 2 names `id` twice; a `turn` given twice is
    // not shown, and its line is kept.
    assert_text_eq(
        &run.stdout_str(),
        "index,id,session_id,model,shard,warmup,status,http_status,error,scheduled_ms,sent_ms,lag_ms,ttft_ms,first_chunk_ms,tpot_ms,e2e_ms,itl_count,itl_mean_ms,itl_max_ms,input_length,prompt_tokens,output_length,completion_tokens,cached_tokens,finish_reason\n\
         0,\"a\"\"bé\",,m,,false,ok,,,,10.5,,,,,20,2,2,2.5,,,,3,,\n\
         2,,,,,false,error,,,,5,,,,,,0,,,,,,,,length\n",
    );
    assert_text_eq(
        &run.stderr,
        "trace-summarize: <stdin>:2: warning: is not a result record: duplicate field `id` at line 1 column 24 (skipped)\n\
         trace-summarize: warning: skipped 1 invalid record\n",
    );
}

#[test]
fn plots_overlay_runs_and_keep_the_spike() {
    let dir = TestDir::new("summarize-plot");
    let result = |i: u64, e2e: f64| {
        format!(
            r#"{{"index":{i},"scheduled_ms":{s},"sent_ms":{s},"start_time":"2026-11-23T10:00:00Z","ttft_ms":20.0,"first_chunk_ms":10.0,"e2e_ms":{e2e},"itl_ms":[1.0],"input_length":5,"output_length":2,"prompt_tokens":5,"completion_tokens":2,"cached_tokens":0,"finish_reason":"length","status":"ok","http_status":200}}"#,
            s = i * 10
        )
    };
    // 20,000 requests in run A, one of them 50 s long; 100 in run B.
    let a: String = (0..20_000u64)
        .map(|i| {
            result(
                i,
                if i == 12_345 {
                    50_000.0
                } else {
                    100.0 + (i % 10) as f64
                },
            ) + "\n"
        })
        .collect();
    let b: String = (0..100u64).map(|i| result(i, 300.0) + "\n").collect();
    dir.write("A.ndjson", a);
    dir.write("B.ndjson", b);
    // The web page draws the same figures from its data (tests/cli/html.rs
    // renders it), thinned to 8 columns per pixel for zooming: the spike is
    // among A's thinned points.
    dir.cmd("trace-summarize")
        .args([
            "--plot",
            "plot.html",
            "-o",
            "summary.txt",
            "A.ndjson",
            "B.ndjson",
        ])
        .run()
        .ok();
    let page = String::from_utf8(dir.read("plot.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    let blob = page
        .split_once("<script type=\"application/json\" id=\"data\">")
        .and_then(|(_, rest)| rest.split_once("</script>"))
        .unwrap()
        .0;
    let data: serde_json::Value = serde_json::from_str(blob).unwrap();
    let e2e = data["runs"][0]["e2e"].as_array().unwrap();
    assert!(e2e.len() <= 2 * 8 * 1200, "{}", e2e.len());
    assert!(e2e.len() < 20_000, "{}", e2e.len());
    assert!(e2e.contains(&serde_json::json!([123.45, 50000.0])));
    assert_eq!(data["runs"][1]["e2e"].as_array().unwrap().len(), 100);
    for name in ["plot.svg"] {
        dir.cmd("trace-summarize")
            .args(["--plot", name, "-o", "summary.txt", "A.ndjson", "B.ndjson"])
            .run()
            .ok();
        let svg = String::from_utf8(dir.read(name)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.is_element())
            .filter_map(|n| n.text())
            .collect();
        let count = |s: &str| texts.iter().filter(|t| t.trim() == s).count();
        // Latency by time and by percentile: one legend entry per run and metric.
        for run in ["A.ndjson", "B.ndjson"] {
            assert_eq!(count(&format!("{run} TTFT")), 2, "{run}");
            assert_eq!(count(&format!("{run} E2E")), 2, "{run}");
            assert_eq!(count(run), 2, "{run}: in flight and tokens/s");
        }
        // The 50 s spike sets the latency axes: their top label is 10^4+ ms
        // (without a ".0").
        assert!(texts.iter().any(|t| t.trim() == "10000"), "{texts:?}");
        assert!(!texts.iter().any(|t| t.trim() == "10000.0"), "{texts:?}");
        assert!(svg.len() < 3_000_000, "{} bytes", svg.len());
    }
    // Standard input is one run, named "run".
    let b = String::from_utf8(dir.read("B.ndjson")).unwrap();
    dir.cmd("trace-summarize")
        .args(["--plot", "stdin.svg", "-o", "summary.txt"])
        .stdin(b)
        .run()
        .ok();
    let svg = String::from_utf8(dir.read("stdin.svg")).unwrap();
    assert_eq!(svg.lines().filter(|l| l.trim() == "run TTFT").count(), 2);
}

#[test]
fn plots_draw_slo_lines_percentile_labels_and_clip_the_time_axis() {
    let dir = TestDir::new("summarize-plot-slo");
    dir.write(
        "run.ndjson",
        std::fs::read(data("results/streamed.ndjson")).unwrap(),
    );
    dir.cmd("trace-summarize")
        .args(["--plot", "p.svg", "--slo", "ttft=500ms,tpot=10ms,e2e=4s"])
        .args(["--plot-clip", "50", "-o", "summary.txt", "run.ndjson"])
        .run()
        .ok();
    let svg = String::from_utf8(dir.read("p.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.is_element())
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    let count = |s: &str| texts.iter().filter(|t| **t == s).count();
    // TTFT and E2E bounds on both latency panels; TPOT has no axis there.
    assert_eq!(count("SLO ttft 500 ms"), 2, "{texts:?}");
    assert_eq!(count("SLO e2e 4000 ms"), 2, "{texts:?}");
    assert!(!texts.iter().any(|t| t.contains("tpot")), "{texts:?}");
    assert!(count("p50") >= 1 && count("p90") >= 1, "{texts:?}");
    // Completions at 3.5 and 4.85 s: the median is 3.5.
    assert_eq!(
        count(
            "latency of each request (ms, log) by send time (s), clipped at the p50 completion time (3.5 s)"
        ),
        1,
        "{texts:?}"
    );
}

/// Two sessions, worked out by hand:
///
/// | session | turn | sent | e2e | end | status | prompt | cached |
/// |---------|------|------|-----|-----|--------|--------|--------|
/// | s1      | 1    | 0    | 100 | 100 | ok     | 100    | 0      |
/// | s2      | 1    | 10   | 30  | 40  | ok     | 100    | 20     |
/// | s2      | 2    | 50   | -   | 50  | error  | -      | -      |
/// | s1      | 2    | 150  | 50  | 200 | ok     | 200    | 150    |
///
/// s1: 2 turns, 0 to 200 = 200 ms, every turn ok; s2: 2 turns, 10 to 50 =
/// 40 ms, one error. Durations [40, 200]: mean 120, p50 (nearest rank,
/// the 1st of 2) 40, max 200. Cache by turn: turn 1 (0 + 20) / (100 +
/// 100) = 0.1; turn 2 150 / 200 = 0.75 (the error reported no usage).
#[test]
fn sessions_turns_durations_and_the_cache_by_turn() {
    let dir = TestDir::new("summarize-sessions");
    let line =
        |s: &str, turn: u64, sent: f64, e2e: Option<f64>, ok: bool, usage: Option<(u64, u64)>| {
            let mut r = serde_json::json!({"index": 0, "session_id": s, "turn": turn,
            "scheduled_ms": sent, "sent_ms": sent, "start_time": "2026-11-24T00:00:00Z",
            "ttft_ms": e2e.map(|e| e / 2.0), "e2e_ms": e2e, "itl_ms": [],
            "status": if ok { "ok" } else { "error" }});
            if let Some((p, c)) = usage {
                r["prompt_tokens"] = p.into();
                r["cached_tokens"] = c.into();
                r["completion_tokens"] = 2.into();
            }
            format!("{r}\n")
        };
    let text = [
        line("s1", 1, 0.0, Some(100.0), true, Some((100, 0))),
        line("s2", 1, 10.0, Some(30.0), true, Some((100, 20))),
        line("s2", 2, 50.0, None, false, None),
        line("s1", 2, 150.0, Some(50.0), true, Some((200, 150))),
    ]
    .concat();
    let report = summary_json(&[], dir.write("r.ndjson", &text));
    let s = &report["sessions"];
    assert_eq!(
        (&s["count"], &s["completed"]),
        (&Value::from(2), &Value::from(1))
    );
    close_at(
        s,
        &[
            ("/turns/mean", 2.0),
            ("/turns/max", 2.0),
            ("/duration_ms/mean", 120.0),
            ("/duration_ms/p50", 40.0),
            ("/duration_ms/max", 200.0),
            ("/cache_hit_rate_by_turn/1", 0.1),
            ("/cache_hit_rate_by_turn/2", 0.75),
        ],
    );

    let run = dir.cmd("trace-summarize").arg("r.ndjson").run();
    run.ok();
    let out = run.stdout_str();
    assert!(
        out.contains("sessions") && out.contains("2 (1 with every turn ok); turns per session mean 2, max 2; duration p50 40 ms, max 200 ms"),
        "{out}"
    );
    assert!(
        out.contains("prefix cache hit rate by turn  1: 0.1, 2: 0.75\n"),
        "{out}"
    );

    // A gate on a later turn's hit rate.
    let run = dir
        .cmd("trace-summarize")
        .args([
            "--fail-if",
            "sessions.cache_hit_rate_by_turn.2<0.8",
            "r.ndjson",
        ])
        .run();
    run.code(1);
    let run = dir
        .cmd("trace-summarize")
        .args(["--fail-if", "sessions.completed<1", "r.ndjson"])
        .run();
    run.ok();
}

#[test]
fn a_plot_name_for_a_format_that_is_not_drawn_is_refused() {
    let dir = TestDir::new("summarize-plot-name");
    for (name, what) in [
        (
            "run.png",
            "asks for .png, which trace-summarize cannot draw",
        ),
        ("run", "has no extension"),
    ] {
        let run = dir
            .cmd("trace-summarize")
            .args(["--plot", name])
            .arg(data("results/small.ndjson"))
            .run();
        run.code(2).stderr_is(format!(
            "trace-summarize: error: --plot {name}: the name {what}; give a name ending in \
             .svg (the plot) or .html (the plot in a web page)\n"
        ));
        assert_eq!(run.stdout_str(), "");
        assert!(!dir.join(name).exists());
    }
}

/// `--by` groups of different shapes under one CSV header: model `a` has a
/// session (s1, turn 1: 100 prompt tokens, 20 cached), model `b` none, so
/// the run and group `a` have the `sessions.*` columns and group `b` leaves
/// them empty (it used to stop on a row shorter than the header).
#[test]
fn csv_groups_without_sessions_leave_those_cells_empty() {
    let dir = TestDir::new("summarize-csv-shapes");
    let line = |model: &str, session: Option<&str>, sent: f64| {
        let mut r = serde_json::json!({"index": 0, "model": model,
            "scheduled_ms": sent, "sent_ms": sent, "start_time": "2026-11-24T00:00:00Z",
            "ttft_ms": 10.0, "e2e_ms": 20.0, "itl_ms": [], "prompt_tokens": 100,
            "completion_tokens": 1, "cached_tokens": 20, "status": "ok"});
        if let Some(s) = session {
            r["session_id"] = s.into();
            r["turn"] = 1.into();
        }
        format!("{r}\n")
    };
    dir.write(
        "r.ndjson",
        [line("a", Some("s1"), 0.0), line("b", None, 10.0)].concat(),
    );
    let run = dir
        .cmd("trace-summarize")
        .args(["--format", "csv", "--by", "model", "r.ndjson"])
        .run();
    run.ok();
    let text = run.stdout_str();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
    let cells =
        |name: &str| -> Vec<String> { rows.iter().map(|r| r[at(name)].to_string()).collect() };
    assert_eq!(cells("group"), ["all", "a", "b"]);
    assert_eq!(cells("sessions.count"), ["1", "1", ""]);
    assert_eq!(
        cells("sessions.cache_hit_rate_by_turn.1"),
        ["0.2", "0.2", ""]
    );
    assert_eq!(cells("requests.ok"), ["2", "1", "1"]);
}

#[test]
fn an_slo_given_twice_is_refused() {
    let run = run_file(
        "trace-summarize",
        &["--slo", "ttft=1ms,ttft=1h"],
        data("results/streamed.ndjson"),
    );
    run.code(2);
    run.stderr_has("`ttft` is given twice: give each SLO once");
}
