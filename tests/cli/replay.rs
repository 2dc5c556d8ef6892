//! trace-replay against trace-sim and unreachable or refusing servers:
//! every field of a result, one result per record under faults, early
//! stops, file limits and usage errors (`replay_answers.rs` and
//! `replay_sessions.rs` hold the rest).

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{Value, json};

use crate::servers::{Answer, Scripted, Sim};
use crate::util::{Cmd, by_index, replay, trace};

/// `n` text records, `gap_ms` apart.
pub(crate) fn text_trace(n: usize, gap_ms: u64, output_length: u64) -> String {
    let recs: Vec<Value> = (0..n)
        .map(|i| {
            json!({"timestamp": i as u64 * gap_ms, "text_input": format!("request {i} says hello"),
                   "output_length": output_length, "id": format!("r{i}")})
        })
        .collect();
    trace(&recs)
}

pub(crate) fn statuses(results: &BTreeMap<u64, Value>) -> BTreeMap<String, usize> {
    let mut c = BTreeMap::new();
    for r in results.values() {
        *c.entry(r["status"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    c
}

pub(crate) fn ms(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn results_from_the_simulator_have_every_field() {
    let input = trace(&[
        json!({"timestamp": 1000, "text_input": "one two three four five", "output_length": 3, "id": "a"}),
        json!({"timestamp": 1010, "input_length": 600, "hash_ids": [1, 2], "output_length": 4, "session_id": "s"}),
        json!({"timestamp": 1030, "input_length": 1000, "hash_ids": [1, 3], "output_length": 2, "model": "other"}),
        json!({"timestamp": 1045.5, "messages": [{"role": "user", "content": "hi there"}], "output_length": 1}),
    ]);
    let run = replay(&["--sim", "--model", "sim"], &input);
    run.code(0);
    assert!(
        run.stderr
            .starts_with("trace-replay: sent 4, ok 4, errors 0, timeouts 0, cancelled 0 in "),
        "{}",
        run.stderr
    );
    let r = by_index(&run, 4);
    let scheduled: Vec<f64> = r.values().map(|x| ms(&x["scheduled_ms"])).collect();
    assert_eq!(scheduled, [0.0, 10.0, 30.0, 45.5]);
    let want = [
        (Some("a"), None, "sim", Value::Null, 5, 3),
        (None, Some("s"), "sim", json!(600), 600, 4),
        // --model wins over the record's own.
        (None, None, "sim", json!(1000), 1000, 2),
        (None, None, "sim", Value::Null, 2, 1),
    ];
    for (i, (id, session, model, input_length, prompt, output)) in want.into_iter().enumerate() {
        let x = &r[&(i as u64)];
        assert_eq!(x["id"].as_str(), id, "{x}");
        assert_eq!(x["session_id"].as_str(), session, "{x}");
        assert_eq!(x["model"], model, "{x}");
        assert_eq!(x["input_length"], input_length, "{x}");
        assert_eq!(x["output_length"], output, "{x}");
        assert_eq!(x["prompt_tokens"], prompt, "{x}");
        assert_eq!(x["completion_tokens"], output, "{x}");
        assert_eq!(x["status"], "ok", "{x}");
        assert_eq!(x["http_status"], 200, "{x}");
        assert_eq!(x["finish_reason"], "length", "{x}");
        assert_eq!(
            x["itl_ms"].as_array().unwrap().len(),
            output as usize - 1,
            "{x}"
        );
        assert!(x.get("error").is_none() && x.get("warmup").is_none(), "{x}");
        let (first, ttft, e2e) = (
            ms(&x["first_chunk_ms"]),
            ms(&x["ttft_ms"]),
            ms(&x["e2e_ms"]),
        );
        assert!(0.0 < first && first <= ttft && ttft <= e2e, "{x}");
        assert!(ms(&x["sent_ms"]) >= ms(&x["scheduled_ms"]), "{x}");
        let t = x["start_time"].as_str().unwrap();
        assert_eq!(
            (t.len(), &t[4..5], &t[10..11], &t[26..]),
            (27, "-", "T", "Z"),
            "{t}"
        );
    }
    // Records 1 and 2 share their first 512-token block.
    assert_eq!(r[&1]["cached_tokens"], 0);
    assert_eq!(r[&2]["cached_tokens"], 512);
}

#[test]
fn whole_answers_without_streaming() {
    let run = replay(
        &["--sim", "--no-stream", "--endpoint", "completions"],
        &text_trace(3, 1, 4),
    );
    run.code(0);
    for x in by_index(&run, 3).values() {
        assert_eq!(x["status"], "ok", "{x}");
        assert_eq!(x["completion_tokens"], 4, "{x}");
        assert_eq!(x["prompt_tokens"], 4, "{x}");
        assert_eq!(x["itl_ms"], json!([]), "{x}");
        // No TTFT without a stream; the body's arrival is its first chunk.
        assert_eq!(x["ttft_ms"], Value::Null, "{x}");
        assert_eq!(x["first_chunk_ms"], x["e2e_ms"], "{x}");
    }
}

#[test]
fn exactly_one_result_per_record_under_faults() {
    let sim = Sim::start(&[
        "--error-rate",
        "0.2",
        "--disconnect-rate",
        "0.2",
        "--seed",
        "5",
        "--ttft-ms",
        "1",
        "--itl-ms",
        "1",
    ]);
    for stream in [true, false] {
        let mut args = vec!["--url", sim.url.as_str()];
        if !stream {
            args.push("--no-stream");
        }
        let run = replay(&args, &text_trace(200, 1, 6));
        run.code(0);
        let r = by_index(&run, 200);
        let c = statuses(&r);
        assert_eq!(c.values().sum::<usize>(), 200);
        assert!(c["error"] >= 20 && c["ok"] >= 80, "{c:?}");
        let http500 = r
            .values()
            .filter(|x| x["http_status"] == 500)
            .inspect(|x| assert_eq!(x["error"], "HTTP 500: simulated server error", "{x}"))
            .count();
        assert!(http500 > 10, "{http500}");
        if stream {
            // Streams cut half way: an error that keeps its partial timings.
            let cut: Vec<&Value> = r
                .values()
                .filter(|x| x["status"] == "error" && x["http_status"] == 200)
                .collect();
            assert!(cut.len() > 10, "{}", cut.len());
            for x in cut {
                assert!(x["ttft_ms"].is_f64() && x["e2e_ms"].is_f64(), "{x}");
                assert_eq!(x["itl_ms"].as_array().unwrap().len(), 2, "{x}");
                assert!(
                    x["error"].as_str().unwrap().starts_with("response cut off"),
                    "{x}"
                );
            }
        }
    }
}

#[test]
fn timeouts_keep_what_arrived() {
    let sim = Sim::start(&["--stall-ms", "5000"]);
    let run = replay(
        &["--url", &sim.url, "--timeout", "300ms"],
        &text_trace(5, 1, 3),
    );
    run.code(0);
    for x in by_index(&run, 5).values() {
        assert_eq!(x["status"], "timeout", "{x}");
        assert_eq!(x["error"], "no complete answer within --timeout", "{x}");
        assert_eq!(x["http_status"], Value::Null, "{x}");
    }
}

#[test]
fn a_server_that_cannot_be_reached_stops_the_run_before_it_starts() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let run = replay(&["--url", &url], &text_trace(4, 1, 3));
    run.code(2);
    assert_eq!(run.stdout_str(), "");
    assert_eq!(
        run.stderr,
        format!(
            "trace-replay: error: cannot reach the server at {url}: Connection refused (os error 111)\n"
        )
    );
    // Credentials in the URL stay out of the message.
    let secret = format!("http://me:hunter2@127.0.0.1:{port}/v1");
    let run = replay(&["--url", &secret], &text_trace(1, 1, 3));
    run.code(2).stderr_is(format!(
        "trace-replay: error: cannot reach the server at http://127.0.0.1:{port}/v1: Connection refused (os error 111)\n"
    ));
    // --dry-run sends nothing, so it needs no server.
    replay(&["--url", &url, "--dry-run"], &text_trace(1, 1, 3)).ok();
}

fn unauthorized(_body: &str) -> Answer {
    Answer::json(
        "401 Unauthorized",
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
    )
}

fn no_such_model(_body: &str) -> Answer {
    Answer::json(
        "404 Not Found",
        r#"{"error":{"message":"The model `nope` does not exist.","type":"NotFoundError"}}"#,
    )
}

#[test]
fn a_run_whose_first_requests_all_fail_stops_early_with_status_3() {
    let server = Scripted::start(unauthorized);
    // 1000 requests 10 ms apart: the stop comes long before the last is due.
    let run = replay(
        &[
            "--url",
            &server.url,
            "--api-key-env",
            "TRACEKIT_TEST_UNSET_KEY",
        ],
        &text_trace(1000, 10, 3),
    );
    run.code(3);
    let results = by_index(&run, 1000);
    let c = statuses(&results);
    assert!(c["error"] >= 20, "{c:?}");
    assert_eq!(c["error"] + c["cancelled"], 1000, "{c:?}");
    let advice = "the server answered 401 Unauthorized and $TRACEKIT_TEST_UNSET_KEY is not set \
                  (--api-key-env names the variable)";
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert_eq!(
        lines[0],
        format!(
            "trace-replay: error: stopped early: the first 20 requests all failed with HTTP 401: \
             Incorrect API key provided; {advice}; requests not sent are written as cancelled \
             (--abort-after 0 never stops)"
        )
    );
    assert!(lines[1].starts_with("trace-replay: sent "), "{}", lines[1]);
    assert!(
        lines[1].ends_with(&format!("; stopped early: {advice}")),
        "{}",
        lines[1]
    );
    // A wrong model: the advice names it, and the key stays out of sight.
    let server = Scripted::start(no_such_model);
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", &server.url, "--model", "nope"])
        .args(["--abort-after", "5"])
        .env("OPENAI_API_KEY", "sk-secret-test-key")
        .stdin(text_trace(30, 0, 3))
        .run();
    run.code(3);
    by_index(&run, 30);
    let line = run.stderr.lines().next().unwrap();
    assert_eq!(
        line,
        format!(
            "trace-replay: error: stopped early: the first 5 requests all failed with HTTP 404: \
             The model `nope` does not exist.; check --model `nope` and --url (requests go to \
             {}/v1/chat/completions); requests not sent are written as cancelled \
             (--abort-after 0 never stops)",
            server.url
        )
    );
    assert!(!run.stderr.contains("sk-secret") && !run.stdout_str().contains("sk-secret"));
    // --abort-after 0: the run plays to the end.
    let run = replay(
        &["--url", &server.url, "--abort-after", "0"],
        &text_trace(30, 0, 3),
    );
    run.code(0);
    assert_eq!(
        statuses(&by_index(&run, 30)),
        BTreeMap::from([("error".to_string(), 30)])
    );
}

/// The hard limit on open files a test's processes get, from `sh`.
fn open_files_hard_limit() -> u64 {
    let out = Command::new("sh")
        .args(["-c", "ulimit -H -n"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // "unlimited" is as good as any number here.
    text.trim().parse().unwrap_or(u64::MAX)
}

#[test]
fn connections_in_flight_are_not_capped_by_a_low_soft_file_limit() {
    if open_files_hard_limit() < 1000 {
        eprintln!("skipped: the hard limit on open files is below 1000");
        return;
    }
    // 150 requests all in flight at once need 150 connections; the soft
    // limit the shell gives is 48, the hard limit is left as it is.
    let sim = Sim::start(&["--ttft-ms", "400", "--itl-ms", "1"]);
    let run = Cmd::after_sh("ulimit -S -n 48", "trace-replay")
        .args(["--quiet", "--url", &sim.url])
        .stdin(text_trace(150, 0, 2))
        .run();
    run.code(0);
    assert_eq!(
        statuses(&by_index(&run, 150)),
        BTreeMap::from([("ok".to_string(), 150)])
    );
}

#[test]
fn running_out_of_files_fails_requests_with_the_reason_and_says_it_once() {
    // Both limits at 48: the connections beyond it cannot be opened.
    let sim = Sim::start(&["--ttft-ms", "400", "--itl-ms", "1"]);
    // Its first completions are all failures: --abort-after 0 lets it run.
    let run = Cmd::after_sh("ulimit -n 48", "trace-replay")
        .args(["--url", &sim.url, "--abort-after", "0"])
        .stdin(text_trace(150, 0, 2))
        .run();
    run.code(0);
    let results = by_index(&run, 150);
    let c = statuses(&results);
    assert!(c["ok"] > 0 && c["error"] > 0, "{c:?}");
    assert_eq!(c["ok"] + c["error"], 150, "{c:?}");
    for x in results.values().filter(|x| x["status"] == "error") {
        assert_eq!(
            x["error"],
            "connection failed: too many open files: the open-file limit (48) caps the \
             connections in flight",
            "{x}"
        );
    }
    let warning = "trace-replay: warning: connections fail for lack of files: the open-file \
                   limit of 48 caps the requests in flight; raise it (ulimit -Hn) or cap them \
                   with --max-concurrency\n";
    assert_eq!(run.stderr.matches(warning).count(), 1, "{}", run.stderr);
}

#[test]
fn a_schedule_this_process_cannot_keep_is_warned_of() {
    if open_files_hard_limit() < 8000 {
        eprintln!("skipped: the hard limit on open files is below 8000");
        return;
    }
    // 3000 requests due at the same instant, each on a new connection:
    // one thread cannot open them all within 5 ms.
    let sim = Sim::start(&["--ttft-ms", "1"]);
    let input = text_trace(3000, 0, 1);
    let run = replay(&["--no-stream", "--url", &sim.url], &input);
    run.code(0);
    by_index(&run, 3000);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    let (late, rest) = lines[0]
        .strip_prefix("trace-replay: warning: ")
        .and_then(|w| w.split_once(" of 3000 requests left more than 5ms late: "))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(late.parse::<u64>().unwrap() > 30, "{late}");
    assert_eq!(
        rest,
        "this process could not keep the schedule, so the results say as much about it as \
         about the server; split the trace over several processes with --shard"
    );
    assert!(lines[1].starts_with("trace-replay: sent 3000, ok 3000,"));
    // Waiting for a free slot is what --max-concurrency asks for.
    let run = replay(
        &[
            "--no-stream",
            "--max-concurrency",
            "3000",
            "--url",
            &sim.url,
        ],
        &input,
    );
    run.code(0);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn a_url_that_is_not_http_is_a_usage_error() {
    let run = replay(&["--url", "ftp://h/v1"], &text_trace(1, 1, 1));
    run.code(2)
        .stderr_is("trace-replay: error: --url: `ftp://h/v1` is not an http or https URL\n");
    let run = replay(&["--url", "http://[::1"], &text_trace(1, 1, 1));
    run.code(2).stderr_is(
        "trace-replay: error: --url: `http://[::1` is not a URL (invalid IPv6 address)\n",
    );
}
