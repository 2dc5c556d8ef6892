//! The server's metrics beside the client's: trace-sim's /metrics,
//! trace-replay --metrics-url, trace-summarize --metrics.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::servers::{MetricsEndpoint, Sim, Tls, http_get};
use crate::util::{Cmd, Run, TestDir, data, run_file};

/// A prompt of `n` words: `n` prompt tokens for the simulated server.
fn words(n: usize) -> String {
    (0..n)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Two records with the same 1,024-word prompt, 4 tokens each, the second
/// sent long after the first ended.
fn two_same_prompts() -> String {
    let p = words(1024);
    format!(
        "{{\"timestamp\":0,\"text_input\":\"{p}\",\"output_length\":4}}\n\
         {{\"timestamp\":500,\"text_input\":\"{p}\",\"output_length\":4}}\n"
    )
}

/// After two requests with one prompt of two 512-token blocks, with a
/// cache of 10 blocks: 2,048 prompt tokens queried, the second request's
/// 1,024 found; 8 tokens generated; the cache holds the prompt's 2 blocks
/// (the answers' 4 tokens fill no block): usage 2/10.
#[test]
fn sim_metrics_follow_its_model() {
    let sim = Sim::start(&["--cache-blocks", "10", "--model", "m\"x"]);
    let dir = TestDir::new("sim-metrics");
    let trace = dir.write("trace.jsonl", two_same_prompts());
    let run = run_file(
        "trace-replay",
        &["--url", &sim.url, "--endpoint", "completions", "--quiet"],
        &trace,
    );
    run.code(0);
    let results = run.json_lines();
    assert_eq!(results[1]["cached_tokens"], 1024);
    let l = r#"{engine="0",model_name="m\"x"}"#;
    let want = format!(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{l} 0\n\
         # HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n\
         # TYPE vllm:num_requests_waiting gauge\n\
         vllm:num_requests_waiting{l} 0\n\
         # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n\
         # TYPE vllm:kv_cache_usage_perc gauge\n\
         vllm:kv_cache_usage_perc{l} 0.2\n\
         # HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.\n\
         # TYPE vllm:prefix_cache_queries_total counter\n\
         vllm:prefix_cache_queries_total{l} 2048\n\
         # HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n\
         # TYPE vllm:prefix_cache_hits_total counter\n\
         vllm:prefix_cache_hits_total{l} 1024\n\
         # HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.\n\
         # TYPE vllm:num_preemptions_total counter\n\
         vllm:num_preemptions_total{l} 0\n\
         # HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n\
         # TYPE vllm:prompt_tokens_total counter\n\
         vllm:prompt_tokens_total{l} 2048\n\
         # HELP vllm:generation_tokens_total Number of generation tokens processed.\n\
         # TYPE vllm:generation_tokens_total counter\n\
         vllm:generation_tokens_total{l} 8\n\
         # HELP vllm:request_success_total Count of successfully processed requests.\n\
         # TYPE vllm:request_success_total counter\n\
         vllm:request_success_total{{engine=\"0\",model_name=\"m\\\"x\",finished_reason=\"length\"}} 2\n\
         # HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n\
         # TYPE vllm:cache_config_info gauge\n\
         vllm:cache_config_info{{block_size=\"512\",engine=\"0\",num_gpu_blocks=\"10\"}} 1\n"
    );
    crate::util::assert_text_eq(&want, &http_get(&format!("{}/metrics", sim.url)));
}

/// The samples of a scrape line, by key.
fn samples(line: &Value) -> &serde_json::Map<String, Value> {
    line["samples"].as_object().expect("samples")
}

#[test]
fn replay_scrapes_before_during_and_after() {
    let dir = TestDir::new("replay-metrics");
    // One request of 100 tokens at 10 ms each (about a second), scraped
    // every 50 ms.
    let trace = dir.write(
        "trace.jsonl",
        format!(
            "{{\"timestamp\":0,\"text_input\":\"{}\",\"output_length\":100}}\n",
            words(1024)
        ),
    );
    let out = dir.join("metrics.ndjson");
    let run = Cmd::new("trace-replay")
        .args([
            "--sim",
            "--sim-arg=--itl-ms=10",
            "--endpoint",
            "completions",
        ])
        .args(["--metrics-every", "50ms", "--metrics-out"])
        .arg(&out)
        .arg(&trace)
        .run();
    run.code(0);
    assert_eq!(run.json_lines()[0]["status"], "ok");
    run.stderr_has("scrapes of http://127.0.0.1:");
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 3, "{text}");
    let l = r#"{engine="0",model_name="sim"}"#;
    let key = |name: &str| format!("{name}{l}");
    // Before the first request: nothing done yet, at or before the start.
    let first = &lines[0];
    assert!(first["t_ms"].as_f64().unwrap() <= 0.0, "{first}");
    assert_eq!(samples(first)[&key("vllm:prompt_tokens_total")], 0.0);
    assert_eq!(samples(first)[&key("vllm:num_requests_running")], 0.0);
    // After the last result: the whole run, exactly.
    let last = lines.last().unwrap();
    let want = json!({
        key("vllm:num_requests_running"): 0.0,
        key("vllm:num_requests_waiting"): 0.0,
        key("vllm:kv_cache_usage_perc"): 0.0002,
        key("vllm:prefix_cache_queries_total"): 1024.0,
        key("vllm:prefix_cache_hits_total"): 0.0,
        key("vllm:num_preemptions_total"): 0.0,
        key("vllm:prompt_tokens_total"): 1024.0,
        key("vllm:generation_tokens_total"): 100.0,
        r#"vllm:request_success_total{engine="0",model_name="sim",finished_reason="length"}"#: 1.0,
        // The default cache: 10,000 blocks of 512 tokens.
        r#"vllm:cache_config_info{block_size="512",engine="0",num_gpu_blocks="10000"}"#: 1.0,
    });
    assert_eq!(last["samples"], want);
    // During the run the request was seen running.
    let running = lines
        .iter()
        .map(|s| {
            samples(s)[&key("vllm:num_requests_running")]
                .as_f64()
                .unwrap()
        })
        .fold(0.0, f64::max);
    assert_eq!(running, 1.0, "{text}");
    // Times are in order, on the results' clock.
    let times: Vec<f64> = lines.iter().map(|s| s["t_ms"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn metrics_match_keeps_the_matching_series() {
    let dir = TestDir::new("replay-metrics-match");
    let trace = one_request(&dir);
    let out = dir.join("m.ndjson");
    let only_tokens = ["--metrics-match", "^vllm:(prompt|generation)_tokens_total"];
    replay_with_metrics(&only_tokens, &out, &trace).code(0);
    let text = std::fs::read_to_string(&out).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        last["samples"],
        json!({
            r#"vllm:prompt_tokens_total{engine="0",model_name="sim"}"#: 3.0,
            r#"vllm:generation_tokens_total{engine="0",model_name="sim"}"#: 2.0,
        })
    );
}

/// `trace-replay --sim --quiet --endpoint completions flags --metrics-out
/// out trace`.
fn replay_with_metrics(flags: &[&str], out: &Path, trace: &Path) -> Run {
    Cmd::new("trace-replay")
        .args(["--sim", "--quiet", "--endpoint", "completions"])
        .args(flags)
        .arg("--metrics-out")
        .arg(out)
        .arg(trace)
        .run()
}

fn one_request(dir: &TestDir) -> std::path::PathBuf {
    dir.write(
        "trace.jsonl",
        "{\"timestamp\":0,\"text_input\":\"a b c\",\"output_length\":2}\n",
    )
}

/// A failing, malformed or slow metrics endpoint is a warning and a
/// count: the replay runs and exits 0 with every result.
#[test]
fn a_bad_metrics_endpoint_never_fails_the_replay() {
    let cases: [(super::servers::MetricsAnswer, &str); 3] = [
        (
            |_| ("500 Internal Server Error", "oops".into(), Duration::ZERO),
            "failed: HTTP 500 Internal Server Error",
        ),
        (
            |_| ("200 OK", "<html>metrics</html>\n".into(), Duration::ZERO),
            "failed: not the Prometheus text format: line 1: `<html>metrics</html>` does not start with a metric name",
        ),
        // Slower than the scrape's timeout (1 s).
        (
            |_| ("200 OK", "a 1\n".into(), Duration::from_secs(3)),
            "failed: error sending request",
        ),
    ];
    for (answer, reason) in cases {
        let endpoint = MetricsEndpoint::start(answer);
        let dir = TestDir::new("replay-metrics-bad");
        let trace = one_request(&dir);
        let out = dir.join("m.ndjson");
        let url = format!("{}/metrics", endpoint.url);
        let run = replay_with_metrics(&["--metrics-url", &url], &out, &trace);
        run.code(0);
        assert_eq!(run.json_lines()[0]["status"], "ok");
        run.stderr_has(&format!(
            "warning: --metrics-url: the scrape of {url} at 0ms {reason}"
        ));
        let n = endpoint.requests.load(std::sync::atomic::Ordering::SeqCst);
        run.stderr_has(&format!(
            "warning: --metrics-url: {n} of {n} scrapes of {url} failed; 0 written to"
        ));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    }
}

/// An https metrics endpoint whose certificate a private CA signed is
/// trusted as the requests' server would be: through --cacert or with
/// --insecure; without either, every scrape fails (and the replay still
/// runs).
#[test]
fn an_https_scrape_trusts_what_the_requests_trust() {
    let endpoint = Tls::start("vllm:num_requests_running 2\n");
    let ca = data("tls/ca.pem");
    let ca = ca.to_str().unwrap();
    let cases: [(&[&str], bool); 3] = [
        (&[], false),
        (&["--cacert", ca], true),
        (&["--insecure"], true),
    ];
    for (flags, trusted) in cases {
        let dir = TestDir::new("replay-metrics-tls");
        let trace = one_request(&dir);
        let out = dir.join("m.ndjson");
        let metrics_flags = [&["--metrics-url", endpoint.url.as_str()], flags].concat();
        let run = replay_with_metrics(&metrics_flags, &out, &trace);
        run.code(0);
        assert_eq!(run.json_lines()[0]["status"], "ok");
        let text = std::fs::read_to_string(&out).unwrap();
        let stderr = run.stderr.clone();
        if trusted {
            // Before the first request and after the last, at least.
            assert!(text.lines().count() >= 2, "{flags:?}: {text}");
            for line in text.lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                assert_eq!(
                    v["samples"],
                    json!({"vllm:num_requests_running": 2.0}),
                    "{flags:?}"
                );
            }
            assert!(!stderr.contains("failed"), "{flags:?}: {stderr}");
        } else {
            assert_eq!(text, "", "{flags:?}");
            run.stderr_has(&format!(
                "warning: --metrics-url: the scrape of {}/metrics at 0ms failed: error sending request: invalid peer certificate: UnknownIssuer\n",
                endpoint.url
            ));
        }
    }
}

#[test]
fn metrics_flags_are_checked_before_sending() {
    let dir = TestDir::new("replay-metrics-usage");
    let trace = one_request(&dir);
    let run = run_file(
        "trace-replay",
        &["--sim", "--metrics-url", "http://127.0.0.1:9/metrics"],
        &trace,
    );
    run.code(2);
    let run = Cmd::new("trace-replay")
        .args(["--url", "http://127.0.0.1:9", "--metrics-out"])
        .arg(dir.join("m.ndjson"))
        .arg(&trace)
        .run();
    run.code(2)
        .stderr_has("--metrics-out needs --metrics-url URL");
    let run = Cmd::new("trace-replay")
        .args([
            "--sim",
            "--metrics-url",
            "ftp://127.0.0.1/m",
            "--metrics-out",
        ])
        .arg(dir.join("m.ndjson"))
        .arg(&trace)
        .run();
    run.code(2);
}

/// Scrapes at 0, 1, 2 and 3 s: running 0, 4, 2, 0 (mean 1.5, p99 and max
/// 4); prompt tokens 0, 3000, 5000, 6000 (6,000 over 3 s). In 2 s windows:
/// [0, 2 s) has running 0 and 4, and 3,000 tokens from 0 to 1 s; [2 s, 4 s)
/// has running 2 and 0, and 3,000 tokens from the 1 s scrape to the 3 s one.
const SCRAPES: &str = r#"{"t_ms":0,"samples":{"vllm:num_requests_running{engine=\"0\"}":0,"vllm:prompt_tokens_total{engine=\"0\"}":0,"unknown_metric":7}}
{"t_ms":1000,"samples":{"vllm:num_requests_running{engine=\"0\"}":4,"vllm:prompt_tokens_total{engine=\"0\"}":3000}}
{"t_ms":2000,"samples":{"vllm:num_requests_running{engine=\"0\"}":2,"vllm:prompt_tokens_total{engine=\"0\"}":5000}}
{"t_ms":3000,"samples":{"vllm:num_requests_running{engine=\"0\"}":0,"vllm:prompt_tokens_total{engine=\"0\"}":6000}}
"#;

/// A fresh directory for one test, holding SCRAPES as m.ndjson.
fn dir_with_scrapes(name: &str) -> (TestDir, PathBuf) {
    let dir = TestDir::new(name);
    let m = dir.write("m.ndjson", SCRAPES);
    (dir, m)
}

/// `trace-summarize args --metrics scrapes results/small.ndjson`.
fn summarize_with_scrapes(args: &[&str], scrapes: &Path) -> Run {
    Cmd::new("trace-summarize")
        .args(args)
        .arg("--metrics")
        .arg(scrapes)
        .arg(data("results/small.ndjson"))
        .run()
}

#[test]
fn summarize_adds_the_server_section() {
    let (dir, m) = dir_with_scrapes("summarize-metrics");
    let run = summarize_with_scrapes(&["--format", "json", "--window", "2s"], &m);
    run.ok();
    assert_eq!(
        run.json()["server"],
        json!({
            "scrapes": 4,
            "running": {"mean": 1.5, "p99": 4.0, "max": 4.0, "metric": "vllm:num_requests_running"},
            "prompt_tokens": {"increase": 6000.0, "per_s": 2000.0, "metric": "vllm:prompt_tokens_total"},
            "windows": [
                {"start_s": 0.0, "running": {"mean": 2.0, "p99": 4.0, "max": 4.0},
                 "prompt_tokens": {"increase": 3000.0, "per_s": 3000.0}},
                {"start_s": 2.0, "running": {"mean": 1.0, "p99": 2.0, "max": 2.0},
                 "prompt_tokens": {"increase": 3000.0, "per_s": 1500.0}},
            ],
        })
    );
    let run = summarize_with_scrapes(&[], &m);
    run.ok();
    let text = run.stdout_str();
    let server = &text[text.find("\nserver (").expect("a server section")..];
    crate::util::assert_text_eq(
        "\nserver (4 scrapes)\n\
         gauge    metric                     mean  p99  max\n\
         running  vllm:num_requests_running   1.5    4    4\n\
         \n\
         counter        metric                    increase  per s\n\
         prompt_tokens  vllm:prompt_tokens_total      6000   2000\n",
        server,
    );
    // A CSV row gains the server's columns.
    let run = summarize_with_scrapes(&["--format", "csv"], &m);
    run.ok();
    let lines = run.lines();
    assert!(lines[0].ends_with(",server.scrapes,server.running.mean,server.running.p99,server.running.max,server.running.metric,server.prompt_tokens.increase,server.prompt_tokens.per_s,server.prompt_tokens.metric"), "{}", lines[0]);
    assert!(
        lines[1].ends_with(
            ",4,1.5,4.0,4.0,vllm:num_requests_running,6000.0,2000.0,vllm:prompt_tokens_total"
        ),
        "{}",
        lines[1]
    );
    // The plot gains a server panel on the client's time axis.
    let plot = dir.join("run.svg");
    summarize_with_scrapes(&["--plot", plot.to_str().unwrap()], &m).ok();
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("server: requests running and waiting (scraped) by time (s)"),
        "{svg}"
    );
    assert!(svg.contains("server running"), "{svg}");
    // --fail-if reads the server's figures too.
    summarize_with_scrapes(&["--fail-if", "server.running.max>3"], &m).code(1);
}

/// The CSV time series gains the server's figures per window (as in the
/// JSON `server.windows`, see SCRAPES), joined to the requests' windows by
/// start; the 2 s window only the scrapes reach has no request figures.
#[test]
fn summarize_csv_windows_carry_the_server_figures() {
    let (dir, m) = dir_with_scrapes("summarize-metrics-csv-windows");
    let run = summarize_with_scrapes(&["--format", "csv", "--window", "2s"], &m);
    run.ok();
    crate::util::assert_text_eq(
        "start_s,started,completed,errors,output_tokens_per_s,ttft_p50,ttft_p99,e2e_p50,e2e_p99,\
         server.running.mean,server.running.p99,server.running.max,\
         server.prompt_tokens.increase,server.prompt_tokens.per_s\n\
         0.0,6,6,2,9.0,100.0,300.0,300.0,1100.0,2.0,4.0,4.0,3000.0,3000.0\n\
         2.0,,,,,,,,,1.0,2.0,2.0,3000.0,1500.0\n",
        &run.stdout_str(),
    );
    // 1 s windows: [0, 1 s) has one scrape, too few for a rate.
    let run = summarize_with_scrapes(&["--format", "csv", "--no-header", "--window", "1s"], &m);
    run.ok();
    crate::util::assert_text_eq(
        "0.0,6,5,2,15.8,200.0,300.0,300.0,700.0,0.0,0.0,0.0,,\n\
         1.0,0,1,0,2.2,100.0,100.0,1100.0,1100.0,4.0,4.0,4.0,3000.0,3000.0\n\
         2.0,,,,,,,,,2.0,2.0,2.0,2000.0,2000.0\n\
         3.0,,,,,,,,,0.0,0.0,0.0,1000.0,1000.0\n",
        &run.stdout_str(),
    );
    // The spreadsheet's windows sheet has the same rows, numbers as
    // numbers, units in the headers; the summary sheet no text cell of
    // the server's windows.
    use calamine::{Data, Reader, Xlsx, open_workbook};
    let book_path = dir.join("r.xlsx");
    let book = book_path.to_str().unwrap();
    summarize_with_scrapes(&["--format", "xlsx", "--window", "2s", "-o", book], &m).ok();
    let mut book: Xlsx<_> = open_workbook(&book_path).unwrap();
    let windows: Vec<Vec<Data>> = book
        .worksheet_range("windows")
        .unwrap()
        .rows()
        .map(|r| r.to_vec())
        .collect();
    let header: Vec<String> = windows[0].iter().map(|c| c.to_string()).collect();
    assert_eq!(
        header[9..],
        [
            "server.running.mean",
            "server.running.p99",
            "server.running.max",
            "server.prompt_tokens.increase (tokens)",
            "server.prompt_tokens.per_s (tokens/s)",
        ]
    );
    let f = Data::Float;
    assert_eq!(
        windows[2],
        [
            vec![f(2.0)],
            vec![Data::Empty; 8],
            vec![f(1.0), f(2.0), f(2.0), f(3000.0), f(1500.0)]
        ]
        .concat()
    );
    assert_eq!(windows[1][0..2], [f(0.0), f(6.0)]);
    assert_eq!(
        windows[1][9..],
        [f(2.0), f(4.0), f(4.0), f(3000.0), f(3000.0)]
    );
    let summary = book.worksheet_range("summary").unwrap();
    assert!(
        summary
            .rows()
            .all(|r| r[0] != Data::String("server.windows".into())),
        "the server's windows in the summary"
    );
    assert!(
        summary
            .rows()
            .any(|r| r[0] == Data::String("server.running.max".into()))
    );

    // Without --metrics, the requests' series alone, as before.
    let run = run_file(
        "trace-summarize",
        &["--format", "csv", "--window", "2s"],
        data("results/small.ndjson"),
    );
    run.ok();
    crate::util::assert_text_eq(
        "start_s,started,completed,errors,output_tokens_per_s,ttft_p50,ttft_p99,e2e_p50,e2e_p99\n\
         0.0,6,6,2,9.0,100.0,300.0,300.0,1100.0\n",
        &run.stdout_str(),
    );
}

#[test]
fn summarize_names_a_bad_scrape_line() {
    let dir = TestDir::new("summarize-metrics-bad");
    let m = dir.write(
        "m.ndjson",
        "{\"t_ms\":0,\"samples\":{}}\n{\"t_ms\":\"soon\",\"samples\":{}}\n",
    );
    summarize_with_scrapes(&[], &m).code(2).stderr_has(&format!(
        "{}:2: error: field `t_ms`: `\"soon\"` is not a number",
        m.display()
    ));
}

/// With --window, the table and Markdown reports end with the server's
/// windows (see SCRAPES): a gauge by its mean, a counter by its rate.
#[test]
fn summarize_prints_the_server_windows() {
    let dir = TestDir::new("summarize-metrics-window-table");
    let m = dir.write("m.ndjson", SCRAPES);
    // The last table of each form: the requests' windows come before.
    for (format, last, table) in [
        (
            "table",
            "start_s  ",
            "start_s  running mean  prompt_tokens/s\n      \
                   0             2             3000\n      \
                   2             1             1500\n",
        ),
        (
            "markdown",
            "| start_s",
            "| start_s | running mean | prompt_tokens/s |\n\
             | ------: | -----------: | --------------: |\n\
             |       0 |            2 |            3000 |\n\
             |       2 |            1 |            1500 |\n",
        ),
    ] {
        let run = Cmd::new("trace-summarize")
            .args(["--format", format, "--window", "2s", "--metrics"])
            .arg(&m)
            .arg(data("results/small.ndjson"))
            .run();
        run.ok();
        let text = run.stdout_str();
        let at = text.rfind(last).expect("the server's windows");
        crate::util::assert_text_eq(table, &text[at..]);
    }
}
