use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::servers::{Answer, BODY_LIMIT, Scripted, Sim, Tls};
use crate::util::{Cmd, Run, TestDir, bin, columns, data, run_stdin, spawn_sim_replay};

fn trace(records: &[Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

/// `n` text records, `gap_ms` apart.
fn text_trace(n: usize, gap_ms: u64, output_length: u64) -> String {
    let recs: Vec<Value> = (0..n)
        .map(|i| {
            json!({"timestamp": i as u64 * gap_ms, "text_input": format!("request {i} says hello"),
                   "output_length": output_length, "id": format!("r{i}")})
        })
        .collect();
    trace(&recs)
}

fn replay(args: &[&str], input: &str) -> Run {
    Cmd::new("trace-replay")
        .args(["--quiet"])
        .args(args)
        .stdin(input)
        .run()
}

/// Results by index, checking that each index appears exactly once.
fn by_index(run: &Run, n: usize) -> BTreeMap<u64, Value> {
    let mut out = BTreeMap::new();
    for r in run.json_lines() {
        let i = r["index"].as_u64().unwrap();
        assert!(out.insert(i, r).is_none(), "index {i} twice");
    }
    assert_eq!(
        out.keys().copied().collect::<Vec<_>>(),
        (0..n as u64).collect::<Vec<_>>(),
        "one result per record"
    );
    out
}

fn statuses(results: &BTreeMap<u64, Value>) -> BTreeMap<String, usize> {
    let mut c = BTreeMap::new();
    for r in results.values() {
        *c.entry(r["status"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    c
}

fn ms(v: &Value) -> f64 {
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

fn scripted_answer(body: &str) -> Answer {
    let usage = r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#;
    if body.contains("case-split") {
        // Byte by byte, CRLF, a comment, `data:` without a space,
        // reasoning, a tool call, a usage-only final chunk.
        let stream = format!(
            ": keep-alive\r\n\r\ndata:{{\"choices\":[{{\"delta\":{{\"role\":\"assistant\"}}}}]}}\r\n\r\n\
data: {{\"choices\":[{{\"delta\":{{\"reasoning_content\":\"hm\"}}}}]}}\r\n\r\n\
data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"name\":\"f\"}}}}]}}}}]}}\n\n\
data: {{\"choices\":[{{\"delta\":{{\"content\":\"é\"}},\"finish_reason\":\"tool_calls\"}}]}}\n\n\
data: {usage}\n\ndata: [DONE]\n\n"
        );
        Answer::sse(stream.as_bytes(), 1)
    } else if body.contains("case-429") {
        Answer::json(
            "429 Too Many Requests",
            r#"{"error":{"message":"slow down","type":"rate_limit"}}"#,
        )
    } else if body.contains("case-redirect") {
        Answer::json("307 Temporary Redirect", "")
    } else if body.contains("case-continue") {
        // An interim 100 head first; then chunks with an extension and a
        // trailer, byte by byte.
        let events = [
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n".to_string(),
            "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n".to_string(),
            format!("data: {usage}\n\ndata: [DONE]\n\n"),
        ];
        let mut body: String = events
            .iter()
            .map(|e| format!("{:X};x=1\r\n{e}\r\n", e.len()))
            .collect();
        body.push_str("0\r\nx-trailer: done\r\n\r\n");
        Answer {
            head: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\
                   content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                .into(),
            body: body.into_bytes(),
            piece: 1,
            close_on_next: false,
        }
    } else if body.contains("case-cut") {
        Answer::cut_chunked("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
    } else if body.contains("case-nodone") {
        Answer::sse(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            1000,
        )
    } else if body.contains("case-bad") {
        Answer::sse(b"data: {\"choices\":[{\"delta\"\n\ndata: [DONE]\n\n", 1000)
    } else if body.contains("case-error-event") {
        Answer::sse(
            b"data: {\"error\":{\"message\":\"out of memory\"}}\n\ndata: [DONE]\n\n",
            1000,
        )
    } else {
        // No usage: token counts stay null.
        Answer::sse(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            1000,
        )
    }
}

#[test]
fn scripted_answers_edge_cases_and_request_bodies() {
    let server = Scripted::start(scripted_answer);
    let cases = [
        "case-split",
        "case-429",
        "case-cut",
        "case-nodone",
        "case-bad",
        "case-error-event",
        "case-nousage",
        "case-redirect",
        "case-continue",
    ];
    let recs: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = json!({"timestamp": i, "text_input": c, "output_length": 3});
            if i == 0 {
                r["extra"] = json!({"temperature": 0.5, "top_k": 1});
            }
            r
        })
        .collect();
    let run = Cmd::new("trace-replay")
        .args([
            "--quiet",
            "--url",
            &format!("{}/v1", server.url),
            "--model",
            "m",
            "--header",
            "X-Team: serving",
            "--extra",
            r#"{"temperature": 0, "seed": 3}"#,
            "--ignore-eos",
            "--min-tokens",
        ])
        .env("OPENAI_API_KEY", "sk-secret-key")
        .stdin(trace(&recs))
        .run();
    run.code(0);
    assert!(!run.stdout_str().contains("sk-secret") && !run.stderr.contains("sk-secret"));
    let r = by_index(&run, cases.len());
    let split = &r[&0];
    assert_eq!(split["status"], "ok", "{split}");
    assert_eq!(
        (
            &split["prompt_tokens"],
            &split["completion_tokens"],
            &split["cached_tokens"]
        ),
        (&json!(7), &json!(3), &json!(4))
    );
    assert_eq!(split["finish_reason"], "tool_calls");
    assert_eq!(split["itl_ms"].as_array().unwrap().len(), 2, "{split}");
    assert!(
        ms(&split["first_chunk_ms"]) < ms(&split["ttft_ms"]),
        "{split}"
    );

    let want_errors = [
        (1, Some(429u16), "HTTP 429: slow down"),
        (2, Some(200), "response cut off"),
        (3, Some(200), "stream ended without [DONE]"),
        (
            4,
            Some(200),
            "malformed SSE event: {\"choices\":[{\"delta\"",
        ),
        (5, Some(200), "out of memory"),
        // Redirects are not followed: that would time two requests as one.
        (7, Some(307), "HTTP 307"),
    ];
    for (i, http, msg) in want_errors {
        let x = &r[&i];
        assert_eq!(x["status"], "error", "{x}");
        assert_eq!(x["http_status"].as_u64(), http.map(u64::from), "{x}");
        assert!(x["error"].as_str().unwrap().starts_with(msg), "{x}");
    }
    let continued = &r[&8];
    assert_eq!(
        (
            &continued["status"],
            &continued["http_status"],
            &continued["completion_tokens"]
        ),
        (&json!("ok"), &json!(200), &json!(3)),
        "{continued}"
    );
    assert_eq!(continued["itl_ms"].as_array().unwrap().len(), 1);
    let nousage = &r[&6];
    assert_eq!(nousage["status"], "ok", "{nousage}");
    assert_eq!(nousage["completion_tokens"], Value::Null);
    assert_eq!(nousage["finish_reason"], "stop");

    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), cases.len());
    let first = seen.iter().find(|s| s.body.contains("case-split")).unwrap();
    assert!(
        first
            .head
            .starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{}",
        first.head
    );
    let head = first.head.to_ascii_lowercase();
    assert!(
        head.contains("\r\nauthorization: bearer sk-secret-key\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-team: serving\r\n"), "{head}");
    let host = server.url.strip_prefix("http://").unwrap();
    assert!(head.contains(&format!("\r\nhost: {host}\r\n")), "{head}");
    assert_eq!(
        head.matches("\r\ncontent-type: application/json\r\n")
            .count(),
        1,
        "{head}"
    );
    let body: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(
        body,
        json!({"model": "m", "messages": [{"role": "user", "content": "case-split"}],
               "max_tokens": 3, "min_tokens": 3, "ignore_eos": true, "stream": true,
               "stream_options": {"include_usage": true},
               "temperature": 0.5, "seed": 3, "top_k": 1})
    );
}

#[test]
fn connections_closed_unannounced_are_never_errors_directly_or_through_a_proxy() {
    fn answer(_: &str) -> Answer {
        Answer::json_unannounced_close(
            r#"{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        )
    }
    let server = Scripted::start(answer);
    // Sent one after another, each on the connection the server closed
    // after the previous answer; the proxy run goes through reqwest.
    let input = text_trace(30, 2, 1);
    for proxy in [None, Some(server.url.as_str())] {
        let mut cmd =
            Cmd::new("trace-replay").args(["--quiet", "--no-stream", "--url", &server.url]);
        if let Some(p) = proxy {
            cmd = cmd.env("http_proxy", p);
        }
        let run = cmd.stdin(input.clone()).run();
        run.code(0);
        let results = by_index(&run, 30);
        let errors: Vec<&Value> = results.values().filter(|x| x["status"] != "ok").collect();
        assert!(errors.is_empty(), "proxy {proxy:?}: {errors:?}");
    }
}

#[test]
fn an_answer_sent_before_the_body_was_read_is_the_result() {
    // The server answers 413 after the head, and closes with most of the
    // 16 MB body unread, which fails the write, or keeps the connection
    // open unread, which stalls it. The result gives the server's answer,
    // directly and through reqwest (a proxy); except that hyper, under
    // reqwest, sometimes reports the reset write before it reads the
    // answer left on a closed connection (about 1 run in 20).
    let server = Scripted::start(scripted_answer);
    let prompt = "x".repeat(16 * BODY_LIMIT);
    let input = trace(&[
        json!({"timestamp": 0, "text_input": prompt, "output_length": 1}),
        json!({"timestamp": 1, "text_input": "case-nousage", "output_length": 1}),
    ]);
    for proxy in [None, Some(server.url.as_str())] {
        for open in ["close", "keep-open"] {
            let mut cmd = Cmd::new("trace-replay").args([
                "--quiet",
                "--timeout",
                "20s",
                "--url",
                &server.url,
                "--header",
                &format!("x-early: {open}"),
            ]);
            if let Some(p) = proxy {
                cmd = cmd.env("http_proxy", p);
            }
            let run = cmd.stdin(input.clone()).run();
            run.code(0);
            let r = by_index(&run, 2);
            let early = &r[&0];
            let got = (&early["status"], &early["http_status"], &early["error"]);
            let answer = (
                &json!("error"),
                &json!(413),
                &json!("HTTP 413: request body too large"),
            );
            let reset = (
                &json!("error"),
                &Value::Null,
                &json!("request failed: Connection reset by peer (os error 104)"),
            );
            if proxy.is_some() && open == "close" {
                assert!(
                    got == answer || got == reset,
                    "proxy {proxy:?}, {open}: {got:?}"
                );
            } else {
                assert_eq!(got, answer, "proxy {proxy:?}, {open}");
            }
            assert_eq!(r[&1]["status"], "ok", "proxy {proxy:?}: {}", r[&1]);
        }
    }
}

#[test]
fn https_servers_are_trusted_through_a_ca_file_or_with_insecure() {
    let server = Tls::start(
        r#"{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    );
    let input = text_trace(3, 1, 1);
    // A private CA's certificate is refused, with the reason, before the
    // run starts.
    let run = replay(&["--no-stream", "--url", &server.url], &input);
    run.code(2);
    assert_eq!(run.stdout_str(), "");
    assert_eq!(
        run.stderr,
        format!(
            "trace-replay: error: cannot reach the server at {}: invalid peer certificate: UnknownIssuer\n",
            server.url
        )
    );
    let ca = data("tls/ca.pem");
    for flag in [
        ["--cacert", ca.to_str().unwrap()].as_slice(),
        &["--insecure"],
    ] {
        let mut args = vec!["--no-stream", "--url", &server.url];
        args.extend(flag);
        let run = replay(&args, &input);
        run.code(0);
        for x in by_index(&run, 3).values() {
            assert_eq!(
                (&x["status"], &x["http_status"], &x["completion_tokens"]),
                (&json!("ok"), &json!(200), &json!(1)),
                "{flag:?}: {x}"
            );
        }
    }
}

#[test]
fn a_ca_file_without_certificates_is_a_usage_error() {
    let missing = replay(
        &["--url", "https://127.0.0.1:9", "--cacert", "no-such.pem"],
        &text_trace(1, 1, 1),
    );
    missing
        .code(2)
        .stderr_is("trace-replay: error: no-such.pem: no such file or directory\n");
    let trace = data("sessions.jsonl");
    let trace = trace.to_str().unwrap();
    let not_pem = replay(
        &["--url", "https://127.0.0.1:9", "--cacert", trace],
        &text_trace(1, 1, 1),
    );
    not_pem.code(2).stderr_is(format!(
        "trace-replay: error: --cacert {trace}: no certificate in it (a PEM file has \"-----BEGIN CERTIFICATE-----\" blocks)\n"
    ));
}

#[test]
fn a_proxy_in_the_environment_is_used() {
    // The scripted server plays the proxy: it gets the request in
    // absolute form, for a host that does not exist.
    let proxy = Scripted::start(scripted_answer);
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", "http://tracekit.invalid:9/v1"])
        .env("http_proxy", &proxy.url)
        .stdin(text_trace(2, 1, 2))
        .run();
    run.code(0);
    for x in by_index(&run, 2).values() {
        assert_eq!(x["status"], "ok", "{x}");
    }
    let seen = proxy.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for s in seen {
        assert!(
            s.head
                .starts_with("POST http://tracekit.invalid:9/v1/chat/completions HTTP/1.1\r\n"),
            "{}",
            s.head
        );
    }
}

#[test]
fn payloads_go_verbatim_and_token_ids_as_the_prompt() {
    let server = Scripted::start(scripted_answer);
    let payload = r#"{"model":"x","prompt":"case-nousage","max_tokens":2,"stream":true,"n":1}"#;
    let input = format!(
        "{{\"timestamp\":0,\"payload\":{payload}}}\n{}\n",
        json!({"timestamp": 1, "prompt_token_ids": [5, 6, 7], "input_length": 3, "output_length": 2})
    );
    let run = replay(&["--url", &server.url, "--endpoint", "completions"], &input);
    run.code(0);
    by_index(&run, 2);
    let seen = server.seen.lock().unwrap().clone();
    let bodies: Vec<&str> = seen.iter().map(|s| s.body.as_str()).collect();
    assert!(bodies.contains(&payload), "{bodies:?}");
    let ids = bodies.iter().find(|b| !b.contains("case")).unwrap();
    let v: Value = serde_json::from_str(ids).unwrap();
    assert_eq!(v["prompt"], json!([5, 6, 7]));
    assert!(
        seen.iter()
            .all(|s| s.head.starts_with("POST /v1/completions "))
    );
}

#[test]
fn later_turns_wait_for_the_previous_turn_and_its_delay() {
    let mut recs = Vec::new();
    for turn in 0..3 {
        for s in 0..3 {
            let mut r = json!({"timestamp": turn * 10 + s, "session_id": format!("s{s}"),
                               "text_input": "a b c", "output_length": 3});
            if turn > 0 {
                r["delay"] = json!(40);
            }
            recs.push(r);
        }
    }
    let run = replay(&["--sim"], &trace(&recs));
    run.code(0);
    let r = by_index(&run, 9);
    for s in 0..3u64 {
        for turn in 1..3u64 {
            let prev = &r[&((turn - 1) * 3 + s)];
            let this = &r[&(turn * 3 + s)];
            let prev_end = ms(&prev["sent_ms"]) + ms(&prev["e2e_ms"]);
            // Due 40 ms after the previous turn completed, not at its timestamp.
            assert!(
                ms(&this["scheduled_ms"]) >= prev_end + 40.0 - 0.01,
                "{prev}\n{this}"
            );
            assert!(ms(&this["sent_ms"]) >= ms(&this["scheduled_ms"]), "{this}");
        }
    }
}

#[test]
fn warmup_limit_and_closed_loop() {
    let run = replay(
        &["--sim", "--warmup", "2", "--limit", "3"],
        &text_trace(10, 1, 2),
    );
    run.code(0);
    let r = by_index(&run, 5);
    let warm: Vec<bool> = r.values().map(|x| x.get("warmup").is_some()).collect();
    assert_eq!(warm, [true, true, false, false, false]);
    assert!(
        run.stderr.starts_with("trace-replay: sent 3, ok 3,"),
        "{}",
        run.stderr
    );
    // The run's schedule starts at the first record after the warmup.
    assert_eq!(r[&2]["scheduled_ms"], 0.0);

    let run = replay(&["--sim", "--concurrency", "2"], &text_trace(6, 100_000, 2));
    run.code(0);
    assert_eq!(statuses(&by_index(&run, 6))["ok"], 6);
}

#[test]
fn the_model_flag_wins_and_the_map_renames_records_models() {
    let input = trace(&[
        json!({"timestamp": 0, "text_input": "a", "output_length": 1, "model": "small"}),
        json!({"timestamp": 1, "text_input": "b", "output_length": 1, "model": "big"}),
        json!({"timestamp": 2, "text_input": "c", "output_length": 1}),
    ]);
    let sent_models = |args: &[&str]| {
        let server = Scripted::start(scripted_answer);
        let mut all = vec!["--url", server.url.as_str()];
        all.extend(args);
        let run = replay(&all, &input);
        run.code(0);
        let results: Vec<Value> = by_index(&run, 3)
            .into_values()
            .map(|x| x["model"].clone())
            .collect();
        let mut bodies: Vec<(String, Value)> = server
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| {
                let v: Value = serde_json::from_str(&s.body).unwrap();
                let text = v["messages"][0]["content"].as_str().unwrap().to_string();
                (text, v["model"].clone())
            })
            .collect();
        bodies.sort_by(|a, b| a.0.cmp(&b.0));
        let sent: Vec<Value> = bodies.into_iter().map(|(_, m)| m).collect();
        assert_eq!(sent, results, "{args:?}");
        sent
    };
    assert_eq!(
        sent_models(&["--model-map", "small=tiny", "--model-map", "huge=x"]),
        [json!("tiny"), json!("big"), Value::Null]
    );
    assert_eq!(
        sent_models(&["--model", "m", "--model-map", "small=tiny"]),
        [json!("m"), json!("m"), json!("m")]
    );
    let run = replay(&["--dry-run", "--model-map", "small"], &input);
    run.code(2);
    run.stderr_has("`small` is not FROM=TO (a model name, `=`, its new name)");
}

#[test]
fn sim_args_set_the_in_process_simulators_model() {
    let run = replay(
        &[
            "--sim",
            "--sim-arg=--error-rate=1",
            "--sim-arg",
            "--seed",
            "--sim-arg",
            "4",
        ],
        &text_trace(3, 1, 2),
    );
    run.code(0);
    for x in by_index(&run, 3).values() {
        assert_eq!(
            (&x["status"], &x["error"]),
            (&json!("error"), &json!("HTTP 500: simulated server error")),
            "{x}"
        );
    }
    let run = replay(&["--sim", "--sim-arg=--port=1"], &text_trace(1, 1, 2));
    run.code(2).stderr_is(
        "trace-replay: error: --sim-arg: unexpected argument '--port' found (give trace-sim's flags)\n",
    );
    let run = replay(&["--url", "http://127.0.0.1:9", "--sim-arg=--seed=1"], "");
    run.code(2)
        .stderr_is("trace-replay: error: --sim-arg applies to --sim only\n");
}

#[test]
fn dry_run_prints_the_schedule() {
    let input = trace(&[
        json!({"timestamp": 500, "input_length": 3, "output_length": 2, "session_id": "s", "id": "x"}),
        json!({"timestamp": 520.25, "text_input": "hi", "output_length": 1, "model": "m"}),
        json!({"timestamp": 900, "text_input": "again", "output_length": 1, "session_id": "s", "delay": 30}),
    ]);
    let run = replay(&["--dry-run", "--endpoint", "completions"], &input);
    run.ok();
    // The bodies, built by hand: the prompt of record 0 is the one
    // trace-synth writes for it (same tokenizer and seed).
    let synthesized = run_stdin("trace-synth", &[], input.clone());
    synthesized.ok();
    let prompt0 = synthesized.json_lines()[0]["text_input"].clone();
    let usage = json!({"include_usage": true});
    let bodies = [
        json!({"prompt": prompt0, "max_tokens": 2, "stream": true, "stream_options": usage}),
        json!({"model": "m", "prompt": "hi", "max_tokens": 1, "stream": true, "stream_options": usage}),
        json!({"prompt": "again", "max_tokens": 1, "stream": true, "stream_options": usage}),
    ]
    .map(|b| b.to_string().len());
    assert_eq!(
        run.stdout_str(),
        format!(
            "{}\n{}\n{}\n",
            format_args!(
                r#"{{"index":0,"scheduled_ms":0.0,"id":"x","session_id":"s","input_length":3,"output_length":2,"stream":true,"body_bytes":{}}}"#,
                bodies[0]
            ),
            format_args!(
                r#"{{"index":1,"scheduled_ms":20.25,"model":"m","input_length":null,"output_length":1,"stream":true,"body_bytes":{}}}"#,
                bodies[1]
            ),
            format_args!(
                r#"{{"index":2,"scheduled_ms":null,"after_previous_turn_ms":30.0,"session_id":"s","input_length":null,"output_length":1,"stream":true,"body_bytes":{}}}"#,
                bodies[2]
            ),
        )
    );
}

#[test]
fn bad_records_stop_the_run_before_it_starts() {
    let dir = TestDir::new("replay-bad");
    dir.write(
        "t.jsonl",
        "{\"timestamp\": 0, \"text_input\": \"a\", \"output_length\": 1}\n{\"timestamp\": 1, \"output_length\": -3, \"text_input\": \"b\"}\n",
    );
    let run = dir.cmd("trace-replay").args(["--sim", "t.jsonl"]).run();
    run.code(2);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("trace-replay: t.jsonl:2: error:")
            && run.stderr.contains("output_length"),
        "{}",
        run.stderr
    );
    // --skip-invalid replays the rest.
    let run = dir
        .cmd("trace-replay")
        .args(["--sim", "--quiet", "--skip-invalid", "t.jsonl"])
        .run();
    run.code(0);
    assert_eq!(run.lines().len(), 1);
}

/// Spawn trace-replay writing to a file, with a slow trace.
fn slow_replay(dir: &TestDir, n: usize, gap_ms: u64) -> std::process::Child {
    dir.write("slow.jsonl", text_trace(n, gap_ms, 2));
    spawn_sim_replay(dir, "slow.jsonl")
}

/// Wait for `after` results of a `slow_replay`, interrupt it with SIGINT,
/// check that it exits 130, and return its results, one per record of `n`.
fn interrupt(
    dir: &TestDir,
    child: std::process::Child,
    after: usize,
    n: usize,
) -> BTreeMap<u64, Value> {
    for _ in 0..500 {
        let text = std::fs::read_to_string(dir.join("out.ndjson")).unwrap_or_default();
        if text.lines().count() >= after {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    crate::util::assert_exit(&out, 130);
    let run = Run {
        desc: "trace-replay".into(),
        code: 130,
        stdout: std::fs::read(dir.join("out.ndjson")).unwrap(),
        stderr: String::new(),
    };
    by_index(&run, n)
}

#[test]
fn ctrl_c_writes_a_result_for_every_record_and_exits_130() {
    let dir = TestDir::new("replay-sigint");
    let child = slow_replay(&dir, 100, 100);
    let r = interrupt(&dir, child, 3, 100);
    let c = statuses(&r);
    assert!(c["ok"] >= 3 && c["cancelled"] >= 50, "{c:?}");
    for x in r.values().filter(|x| x["status"] == "cancelled") {
        assert!(x["error"].as_str().unwrap().contains("stopped"), "{x}");
    }
}

#[test]
fn ctrl_c_between_two_distant_requests_stops_before_the_second_is_due() {
    // The dispatcher sleeps until the second request is due, two minutes
    // on, and does not listen for completions meanwhile: Ctrl-C must
    // still wake it.
    let dir = TestDir::new("replay-sigint-gap");
    let child = slow_replay(&dir, 2, 120_000);
    let r = interrupt(&dir, child, 1, 2);
    assert_eq!(r[&0]["status"], "ok", "{}", r[&0]);
    let second = &r[&1];
    assert_eq!(second["status"], "cancelled", "{second}");
    assert!(
        ms(&second["sent_ms"]) < ms(&second["scheduled_ms"]),
        "stopped only when it was due: {second}"
    );
}

#[test]
fn a_closed_output_ends_the_run_quietly() {
    let dir = TestDir::new("replay-pipe");
    dir.write("slow.jsonl", text_trace(100, 100, 2));
    // The reader is dropped after one line: the next write fails and the
    // run stops.
    let (first, out) = crate::util::head_one(
        Command::new(bin("trace-replay"))
            .current_dir(&dir.path)
            .args(["--sim", "--quiet", "slow.jsonl"]),
    );
    assert!(first.starts_with("{\"index\":0,"), "{first}");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn shards_replay_every_record_once_and_merge_into_one_run() {
    let dir = TestDir::new("replay-shards");
    let recs: Vec<Value> = (0..120)
        .map(|i| {
            let mut r = json!({"timestamp": 5 + i * 5, "text_input": "a b", "output_length": 2});
            if i % 3 == 0 {
                r["session_id"] = json!(format!("s{}", i % 7));
            }
            r
        })
        .collect();
    dir.write("trace.jsonl", trace(&recs));
    let sim = Sim::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let at = tracekit::time::rfc3339(std::time::SystemTime::now() + Duration::from_secs(3));
    let children: Vec<_> = (1..=4)
        .map(|k| {
            Command::new(bin("trace-replay"))
                .current_dir(&dir.path)
                .args(["--quiet", "--url", &sim.url, "--start-at", &at])
                .args([
                    "--shard",
                    &format!("{k}/4"),
                    "-o",
                    &format!("shard{k}.ndjson"),
                ])
                .arg("trace.jsonl")
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        crate::util::assert_exit(&out, 0);
    }
    let mut all = Vec::new();
    for k in 1..=4 {
        let text = String::from_utf8(dir.read(&format!("shard{k}.ndjson"))).unwrap();
        for line in text.lines() {
            let r: Value = serde_json::from_str(line).unwrap();
            assert_eq!(r["shard"], format!("{k}/4"), "{r}");
            // Scheduled from the whole trace's first record, not the shard's.
            let i = r["index"].as_u64().unwrap();
            assert_eq!(ms(&r["scheduled_ms"]), (i * 5) as f64, "{r}");
            all.push(line.to_string());
        }
    }
    let run = Run {
        desc: "shards".into(),
        code: 0,
        stdout: all.join("\n").into_bytes(),
        stderr: String::new(),
    };
    let r = by_index(&run, 120);
    // A session stays on one shard.
    let mut shard_of_session = BTreeMap::new();
    for x in r.values().filter(|x| x.get("session_id").is_some()) {
        let prev = shard_of_session.insert(x["session_id"].to_string(), x["shard"].clone());
        assert!(prev.is_none_or(|p| p == x["shard"]), "{x}");
    }
    let merged = dir
        .cmd("trace-summarize")
        .args([
            "--format",
            "json",
            "shard1.ndjson",
            "shard2.ndjson",
            "shard3.ndjson",
            "shard4.ndjson",
        ])
        .run();
    merged.ok();
    assert_eq!(merged.json()["requests"]["total"], 120);
    assert_eq!(merged.json()["requests"]["ok"], 120);

    let past = dir
        .cmd("trace-replay")
        .args(["--sim", "--start-at", "2020-01-01T00:00:00Z", "trace.jsonl"])
        .run();
    past.code(2);
    assert!(past.stdout.is_empty());
    past.stderr_has("--start-at 2020-01-01T00:00:00.000000Z is already past");
}

#[test]
fn http2_without_tls() {
    let sim = Sim::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let run = replay(&["--http2", "--url", &sim.url], &text_trace(20, 1, 4));
    run.code(0);
    for x in by_index(&run, 20).values() {
        assert_eq!(x["status"], "ok", "{x}");
        assert_eq!(x["completion_tokens"], 4, "{x}");
        assert_eq!(x["itl_ms"].as_array().unwrap().len(), 3, "{x}");
    }
}

/// On a terminal, progress is an indicatif bar on standard error (run in a
/// pseudo-terminal by util-linux's `script`); the results are unchanged.
#[test]
fn a_progress_bar_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` command to make a pseudo-terminal");
        return;
    }
    let dir = TestDir::new("replay-bar");
    dir.write("t.jsonl", text_trace(50, 20, 2));
    let command = format!(
        "{} --sim -o out.ndjson t.jsonl",
        bin("trace-replay").display()
    );
    let out = Command::new("script")
        .current_dir(&dir.path)
        .args(["-qec", &command, "typescript"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let screen = std::fs::read_to_string(dir.join("typescript")).unwrap();
    // The bar, with the total known (all 50 records read before the start).
    assert!(screen.contains("] "), "{screen}");
    assert!(screen.contains("% sent "), "{screen}");
    assert!(screen.contains(", in flight "), "{screen}");
    assert!(
        screen.contains("trace-replay: sent 50, ok 50, errors 0"),
        "{screen}"
    );
    let text = std::fs::read_to_string(dir.join("out.ndjson")).unwrap();
    assert_eq!(text.lines().count(), 50);
}

#[test]
fn dependencies_fan_out_and_join_after_the_calls_they_name() {
    // An agent's calls: c0, then c1 and c2 in parallel after it, then c3
    // after both; c4 has a timestamp and no dependency.
    let input = trace(&[
        json!({"id": "c0", "timestamp": 0, "text_input": "plan the work", "output_length": 8}),
        json!({"id": "c1", "after": ["c0"], "delay": 15, "text_input": "tool one", "output_length": 4}),
        json!({"id": "c2", "after": ["c0"], "text_input": "tool two", "output_length": 12}),
        json!({"id": "c3", "after": ["c1", "c2"], "delay": 5, "text_input": "join", "output_length": 2}),
        json!({"id": "c4", "timestamp": 10, "text_input": "other user", "output_length": 2}),
    ]);
    let run = replay(&["--sim"], &input);
    run.code(0);
    let r = by_index(&run, 5);
    let end = |i: u64| ms(&r[&i]["sent_ms"]) + ms(&r[&i]["e2e_ms"]);
    let scheduled = |i: u64| ms(&r[&i]["scheduled_ms"]);
    // Due from the dependency's completion plus the delay (the completion
    // is seen a little after the last byte: never before it).
    assert!(scheduled(1) >= end(0) + 15.0 - 0.01, "{r:?}");
    assert!(scheduled(2) >= end(0) - 0.01, "{r:?}");
    assert!(scheduled(2) < scheduled(1), "{r:?}");
    assert!(scheduled(3) >= end(1).max(end(2)) + 5.0 - 0.01, "{r:?}");
    assert_eq!(scheduled(4), 10.0);
    for x in r.values() {
        assert!(ms(&x["sent_ms"]) >= ms(&x["scheduled_ms"]), "{x}");
    }

    let run = replay(&["--dry-run"], &input);
    run.ok();
    let lines = run.json_lines();
    let pick = |i: usize, k: &str| lines[i].get(k).cloned().unwrap_or(Value::Null);
    assert_eq!(pick(0, "scheduled_ms"), json!(0.0));
    assert_eq!(pick(1, "scheduled_ms"), Value::Null);
    assert_eq!(
        (pick(1, "after"), pick(1, "after_ms")),
        (json!(["c0"]), json!(15.0))
    );
    assert_eq!(
        (pick(2, "after"), pick(2, "after_ms")),
        (json!(["c0"]), json!(0.0))
    );
    assert_eq!(
        (pick(3, "after"), pick(3, "after_ms")),
        (json!(["c1", "c2"]), json!(5.0))
    );
    assert_eq!(pick(4, "scheduled_ms"), json!(10.0));
}

#[test]
fn an_after_id_missing_from_the_trace_is_warned_of_and_ignored() {
    let input = trace(&[
        json!({"id": "b", "timestamp": 0, "after": ["a"], "text_input": "x", "output_length": 1}),
    ]);
    let run = replay(&["--sim"], &input);
    run.code(0);
    assert!(
        run.stderr.starts_with(
            "trace-replay: warning: record 1: `after` names `a`, which no earlier record of this \
             run has (sliced away?): it is scheduled as if it had no such dependency\n"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(by_index(&run, 1)[&0]["status"], "ok");
}

/// Answers by the conversation's last message: the first turn gets text
/// and a tool call, in pieces when streamed; the second and third text.
fn conversation_answer(body: &str) -> Answer {
    let stream = body.contains(r#""stream":true"#);
    let (pieces, whole): (Vec<Value>, Value) = if body.contains("turn three") {
        (
            vec![json!({"content": "Bye"})],
            json!({"role": "assistant", "content": "Bye"}),
        )
    } else if body.contains("sunny") {
        (
            vec![json!({"content": "It is "}), json!({"content": "sunny"})],
            json!({"role": "assistant", "content": "It is sunny"}),
        )
    } else {
        let call = |args: &str, first: bool| {
            let mut c = json!({"index": 0, "function": {"arguments": args}});
            if first {
                c["id"] = json!("call_1");
                c["type"] = json!("function");
                c["function"]["name"] = json!("get_weather");
            }
            json!({"tool_calls": [c]})
        };
        (
            vec![
                json!({"role": "assistant", "content": ""}),
                json!({"reasoning_content": "the user wants weather"}),
                json!({"content": "Hel"}),
                json!({"content": "lo"}),
                call("{\"city\":", true),
                call("\"Paris\"}", false),
            ],
            json!({"role": "assistant", "content": "Hello", "reasoning_content": "hm",
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
        )
    };
    if !stream {
        let answer = json!({"choices": [{"index": 0, "message": whole, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
        return Answer::json("200 OK", &answer.to_string());
    }
    let mut sse = String::new();
    for delta in pieces {
        let event = json!({"choices": [{"index": 0, "delta": delta}]});
        sse.push_str(&format!("data: {event}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    Answer::sse(sse.as_bytes(), 7)
}

#[test]
fn delta_turns_continue_the_conversation_as_sent_and_answered() {
    let input = trace(&[
        json!({"id": "t1", "session_id": "s", "timestamp": 0, "output_length": 5,
               "messages": [{"role": "user", "content": "turn one"}]}),
        json!({"id": "t2", "session_id": "s", "message_mode": "delta", "output_length": 5,
               "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]}),
        json!({"id": "t3", "after": ["t2"], "message_mode": "delta", "output_length": 5,
               "messages": [{"role": "user", "content": "turn three"}]}),
    ]);
    let user1 = json!({"role": "user", "content": "turn one"});
    let answer1 = json!({"role": "assistant", "content": "Hello", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]});
    let tool2 = json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"});
    let answer2 = json!({"role": "assistant", "content": "It is sunny"});
    let user3 = json!({"role": "user", "content": "turn three"});
    for flags in [&[][..], &["--no-stream"][..]] {
        let server = Scripted::start(conversation_answer);
        let mut args = vec!["--url", &server.url, "--model", "m"];
        args.extend_from_slice(&["--session-header", "X-Session-Affinity"]);
        args.extend_from_slice(flags);
        let run = replay(&args, &input);
        run.code(0);
        let r = by_index(&run, 3);
        assert_eq!(statuses(&r)["ok"], 3, "{flags:?} {r:?}");
        // Results carry the turn's position in its session and `after`.
        let turns: Vec<&Value> = r.values().map(|x| &x["turn"]).collect();
        assert_eq!(turns, [&json!(1), &json!(2), &Value::Null]);
        let after: Vec<&Value> = r.values().map(|x| &x["after"]).collect();
        assert_eq!(after, [&Value::Null, &Value::Null, &json!(["t2"])]);
        let seen = server.seen.lock().unwrap().clone();
        let sent: Vec<Value> = seen
            .iter()
            .map(|s| serde_json::from_str::<Value>(&s.body).unwrap()["messages"].clone())
            .collect();
        assert_eq!(
            sent,
            [
                json!([user1]),
                json!([user1, answer1, tool2]),
                json!([user1, answer1, tool2, answer2, user3]),
            ],
            "{flags:?}"
        );
        // Sticky routing: the session's turns carry its id; t3 has none.
        let affinity: Vec<bool> = seen
            .iter()
            .map(|s| s.head.contains("\r\nx-session-affinity: s\r\n"))
            .collect();
        assert_eq!(affinity, [true, true, false]);
    }
}

/// Each result's (prompt_tokens, cached_tokens), of a run that exits 0
/// with `n` results.
fn prompt_and_cached(run: &Run, n: usize) -> Vec<(u64, u64)> {
    run.code(0);
    by_index(run, n)
        .values()
        .map(|r| {
            let count = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"));
            (count("prompt_tokens"), count("cached_tokens"))
        })
        .collect()
}

#[test]
fn the_simulator_caches_its_own_answers_for_the_turns_that_carry_them() {
    let sim = Sim::start(&["--itl-ms", "0"]);
    // 1,024 distinct words: two full 512-token blocks of trace-sim's cache.
    let long: Vec<String> = (0..1024).map(|i| format!("w{i}")).collect();
    let first = json!({"id": "t1", "session_id": "s", "timestamp": 0, "output_length": 512,
                       "messages": [{"role": "user", "content": long.join(" ")}]});
    let next = json!({"role": "user", "content": "one two three"});
    // The live answer: turn 2 carries the 512 words the server gave.
    let live = trace(&[
        first.clone(),
        json!({"session_id": "s", "message_mode": "delta", "output_length": 1, "messages": [next]}),
    ]);
    // A recorded answer instead: the server never produced it.
    let recorded: Vec<String> = (0..512).map(|i| format!("r{i}")).collect();
    let history = trace(&[
        first,
        json!({"session_id": "s", "delay": 0, "output_length": 1, "messages": [
            {"role": "user", "content": long.join(" ")},
            {"role": "assistant", "content": recorded.join(" ")}, next]}),
    ]);
    let cached = |input: &str| prompt_and_cached(&replay(&["--url", &sim.url], input), 2);
    // Turn 2: 1,024 + 512 + 3 words; with the live answer its first three
    // blocks (the prompt's two, the answer's one) are cached.
    assert_eq!(cached(&live), [(1024, 0), (1539, 1536)]);
    // The same conversation with the recorded answer: the prompt's blocks
    // (cached by the first run too) and nothing of the answer's.
    assert_eq!(cached(&history), [(1024, 1024), (1539, 1024)]);
}

#[test]
fn live_answers_put_the_servers_own_answer_in_later_synthesized_turns() {
    // Turn 2 shares turn 1's two blocks (hash ids 1, 2) and asks for 2,048
    // tokens in all; turn 1's answer is 512 tokens.
    let input = trace(&[
        json!({"session_id": "s", "timestamp": 0, "input_length": 1024, "hash_ids": [1, 2],
               "output_length": 512}),
        json!({"session_id": "s", "delay": 0, "input_length": 2048, "hash_ids": [1, 2, 3, 4],
               "output_length": 1}),
    ]);
    let cached = |flags: &[&str]| -> Vec<(u64, u64)> {
        let sim = Sim::start(&["--itl-ms", "0"]);
        let mut args = vec!["--url", sim.url.as_str()];
        args.extend_from_slice(flags);
        prompt_and_cached(&replay(&args, &input), 2)
    };
    // As recorded: turn 2's third block is the trace's, not the answer the
    // server gave, so only the two shared prompt blocks are cached.
    assert_eq!(cached(&[]), [(1024, 0), (2048, 1024)]);
    // Live: turn 1's prompt (1,024), its answer (512), then 2,048 - 1,536 =
    // 512 synthesized tokens; trace-sim has the first three blocks cached.
    assert_eq!(cached(&["--live-answers"]), [(1024, 0), (2048, 1536)]);
}

#[test]
fn ctrl_c_mid_graph_cancels_every_call_still_waiting_for_a_dependency() {
    let dir = TestDir::new("replay-sigint-graph");
    let input = trace(&[
        json!({"id": "c0", "timestamp": 0, "text_input": "a", "output_length": 2}),
        // Due a minute after c0 completes: waiting when Ctrl-C comes.
        json!({"id": "c1", "after": ["c0"], "delay": 60000, "text_input": "b", "output_length": 2}),
        json!({"id": "c2", "after": ["c1"], "text_input": "c", "output_length": 2}),
        json!({"id": "c3", "after": ["c1", "c2"], "text_input": "d", "output_length": 2}),
        json!({"id": "t", "timestamp": 120000, "text_input": "e", "output_length": 2}),
    ]);
    dir.write("slow.jsonl", &input);
    let child = spawn_sim_replay(&dir, "slow.jsonl");
    let r = interrupt(&dir, child, 1, 5);
    assert_eq!(r[&0]["status"], "ok", "{}", r[&0]);
    for i in 1..5 {
        assert_eq!(r[&i]["status"], "cancelled", "{}", r[&i]);
    }
    // Each keeps the record's `after`.
    assert_eq!(r[&1]["after"], json!(["c0"]));
}

/// `n` text records at the given timestamps.
fn trace_at(timestamps: impl Iterator<Item = u64>) -> String {
    let recs: Vec<Value> = timestamps
        .enumerate()
        .map(|(i, t)| json!({"timestamp": t, "text_input": format!("r{i}"), "output_length": 1}))
        .collect();
    trace(&recs)
}

#[test]
fn timestamps_that_look_like_seconds_are_warned_of_before_the_run() {
    const SECONDS: &str = "trace-replay: warning: timestamps look like seconds, not milliseconds: \
        the trace would replay at 22111 requests/s on average over its 200 records, more than one \
        replay process sends (about 10,000/s); if they are seconds, convert with trace-rescale \
        --speed 0.001\n";
    // 200 records, twenty to each whole "ms" from 0 to 9: 199 gaps in 9 ms
    // is 22,111/s, past what one process sends. The whole trace is weighed.
    let input = trace_at((0..200).map(|i| i / 20));
    let run = replay(&["--sim"], &input);
    run.code(0);
    assert_eq!(run.lines().len(), 200);
    assert!(
        run.stderr.starts_with(SECONDS),
        "the warning comes before the run's own lines:\n{}",
        run.stderr
    );
    let run = replay(&["--dry-run"], &input);
    run.code(0).stderr_is(SECONDS);
    // Closed loop ignores timestamps: no warning.
    let run = replay(&["--dry-run", "--concurrency", "2"], &input);
    run.code(0).stderr_is("");
    // A longer trace is judged from the read-ahead: records 0 to 1023 at
    // ten to a "ms", 1023 gaps in 102 ms.
    let run = replay(&["--dry-run"], &trace_at((0..2000).map(|i| i / 10)));
    run.code(0).stderr_is(
        "trace-replay: warning: timestamps look like seconds, not milliseconds: the trace would \
         replay at 10029 requests/s on average over its 1024 records, more than one replay process \
         sends (about 10,000/s); if they are seconds, convert with trace-rescale --speed 0.001 \
         (judged from the first 1024 records)\n",
    );
    // A short burst (20 records 2 ms apart, 500/s) and milliseconds: nothing to say.
    let run = replay(&["--dry-run"], &trace_at((0..20).map(|i| i * 2)));
    run.code(0).stderr_is("");
    let run = replay(&["--dry-run"], &trace_at((0..20).map(|i| i * 200)));
    run.code(0).stderr_is("");
}

/// `/v1/embeddings` against trace-sim: whole answers, the prompt's tokens
/// counted, nothing generated: no TTFT, no ITL, no output length asked.
#[test]
fn embeddings_are_whole_answers_with_their_prompt_counted() {
    let input = [
        r#"{"timestamp": 0, "text_input": "one two three", "output_length": 5}"#,
        r#"{"timestamp": 1, "prompt_token_ids": [7, 8]}"#,
    ]
    .join("\n");
    let run = replay(&["--sim", "--endpoint", "embeddings"], &input);
    run.code(0);
    let r = by_index(&run, 2);
    for (i, prompt) in [(0, 3), (1, 2)] {
        let r = &r[&i];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(
            (&r["ttft_ms"], &r["itl_ms"], &r["output_length"]),
            (&Value::Null, &json!([]), &Value::Null),
            "{r}"
        );
        assert_eq!(r["first_chunk_ms"], r["e2e_ms"], "{r}");
        assert_eq!(
            (
                &r["prompt_tokens"],
                &r["completion_tokens"],
                &r["finish_reason"]
            ),
            (&json!(prompt), &json!(0), &Value::Null),
            "{r}"
        );
    }
}

/// vLLM's answer to /v1/embeddings, byte for byte (EmbeddingResponse of
/// vllm/entrypoints/pooling/embed/protocol.py as Starlette writes it).
const VLLM_EMBEDDING: &str = r#"{"id":"embd-9f2c61b0","object":"list","created":1732000000,"model":"BAAI/bge-small-en-v1.5","data":[{"index":0,"object":"embedding","embedding":[-0.05364990234375,0.0103912353515625,0.0421142578125,-0.0033473968505859375]}],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}}"#;

fn embeddings_answer(body: &str) -> Answer {
    if body.contains("empty") {
        Answer::json(
            "200 OK",
            r#"{"object":"list","data":[],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}"#,
        )
    } else {
        Answer::json("200 OK", VLLM_EMBEDDING)
    }
}

#[test]
fn embeddings_send_an_input_and_read_vllms_answer() {
    let server = Scripted::start(embeddings_answer);
    let input = [
        r#"{"timestamp": 0, "text_input": "a \"b\"", "output_length": 5}"#,
        r#"{"timestamp": 1, "text_input": "empty"}"#,
    ]
    .join("\n");
    let run = replay(
        &[
            "--url",
            &server.url,
            "--model",
            "m",
            "--endpoint",
            "embeddings",
            "--ignore-eos",
        ],
        &input,
    );
    run.code(0);
    let r = by_index(&run, 2);
    let rows: Vec<Value> = r.values().cloned().collect();
    assert_eq!(
        columns(
            &rows,
            "status prompt_tokens completion_tokens ttft_ms error"
        ),
        [
            json!(["ok", 7, 0, null, null]),
            // The empty answer's usage counts its prompt.
            json!(["error", 1, null, null, "no embeddings in the answer"])
        ]
    );
    // The preflight's GET /v1/models aside, every request is a POST to
    // /v1/embeddings with the model and the input, nothing else.
    let seen = server.seen.lock().unwrap();
    let posts: Vec<_> = seen.iter().filter(|s| s.head.starts_with("POST")).collect();
    assert!(
        posts
            .iter()
            .all(|s| s.head.starts_with("POST /v1/embeddings ")),
        "{posts:?}"
    );
    let mut bodies: Vec<&str> = posts.iter().map(|s| s.body.as_str()).collect();
    bodies.sort();
    assert_eq!(
        bodies,
        [
            r#"{"model":"m","input":"a \"b\""}"#,
            r#"{"model":"m","input":"empty"}"#
        ]
    );
}
