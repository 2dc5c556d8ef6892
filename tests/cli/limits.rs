//! Numbers beyond the limits the record and result models state: every
//! tool refuses them with a clear error, none panics or allocates by them.

use crate::servers::{Answer, Scripted};
use crate::util::{Cmd, Run, TestDir, run_stdin};

const OK: &str = r#"{"timestamp":0,"input_length":10,"output_length":5}"#;

/// No panic, and the one error line wanted.
#[track_caller]
fn refused(run: &Run, code: i32, stderr: &str) {
    run.code(code);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(
        run.stderr.contains(stderr),
        "want {stderr:?} in\n{}",
        run.stderr
    );
}

#[test]
fn validate_names_the_limit_of_each_field() {
    let cases = [
        (
            r#"{"input_length":4294967296,"output_length":5}"#,
            "t.jsonl:1: error: field `input_length`: 4294967296 is over the limit of 16777216 tokens: no real trace reaches it",
        ),
        (
            r#"{"input_length":18446744073709551615,"output_length":5}"#,
            "t.jsonl:1: error: field `input_length`: 18446744073709551615 is over the limit of 16777216 tokens",
        ),
        (
            r#"{"input_length":18446744073709551616,"output_length":5}"#,
            "t.jsonl:1: error: field `input_length`: 18446744073709551616 is over the limit of 16777216 tokens",
        ),
        (
            r#"{"input_length":5,"output_length":16777217}"#,
            "t.jsonl:1: error: field `output_length`: 16777217 is over the limit of 16777216 tokens",
        ),
        (
            r#"{"timestamp":1e23,"input_length":5}"#,
            "t.jsonl:1: error: field `timestamp`: 1e23 is over the limit of 10000000000000 ms",
        ),
        (
            r#"{"timestamp":1e400,"input_length":5}"#,
            "t.jsonl:1: error: field `timestamp`: 1e400 is over the limit of 10000000000000 ms",
        ),
        (
            r#"{"session_id":"s","delay":1e300,"input_length":5}"#,
            "t.jsonl:1: error: field `delay`: 1e300 is over the limit of 315360000000 ms",
        ),
        (
            r#"{"input_length":1024,"hash_ids":[1,9007199254740992]}"#,
            "t.jsonl:1: error: field `hash_ids`: element 1: 9007199254740992 is over the limit of 9007199254740991 (2^53 − 1)",
        ),
        (
            r#"{"input_length":5,"observed":{"prompt_tokens":4294967296,"e2e_ms":1e20}}"#,
            "t.jsonl:1: error: field `observed.prompt_tokens`: 4294967296 is over the limit of 16777216 tokens",
        ),
    ];
    let dir = TestDir::new("limits-validate");
    for (line, want) in cases {
        dir.write("t.jsonl", format!("{line}\n"));
        let run = dir.cmd("trace-validate").arg("t.jsonl").run();
        refused(&run, 1, want);
        assert_eq!(run.stdout_str(), "");
    }
    // The largest values pass.
    dir.write(
        "t.jsonl",
        r#"{"timestamp":10000000000000,"input_length":16777216,"output_length":16777216,"session_id":"s","delay":315360000000}
"#,
    );
    dir.run("trace-validate", &["--check", "t.jsonl"]).code(0);
}

#[test]
fn cache_blocks_is_bounded_and_allocated_lazily() {
    let dir = TestDir::new("limits-cache");
    dir.write("t.jsonl", format!("{OK}\n"));
    let run = dir.run(
        "trace-validate",
        &[
            "--report",
            "--cache-blocks",
            "18446744073709551615",
            "t.jsonl",
        ],
    );
    refused(
        &run,
        2,
        "`18446744073709551615` is over the limit of 4294967296 blocks",
    );
    // A cache of 2^32 blocks is not allocated up front: 1 GiB of address
    // space is plenty for the run.
    dir.write(
        "t.jsonl",
        r#"{"timestamp":0,"input_length":1024,"output_length":5,"hash_ids":[1,2]}
{"timestamp":1,"input_length":1024,"output_length":5,"hash_ids":[1,3]}
"#,
    );
    let run = Cmd::after_sh("ulimit -v 1048576", "trace-validate")
        .current_dir(&dir.path)
        .args([
            "--report-format",
            "json",
            "--cache-blocks",
            "4294967296",
            "t.jsonl",
        ])
        .run();
    run.code(0);
    assert_eq!(
        run.json()["prefix"]["lru"]["hit_rate"],
        serde_json::json!(0.25)
    );
}

#[test]
fn synth_and_dry_run_refuse_huge_prompts() {
    let dir = TestDir::new("limits-synth");
    for n in ["4294967296", "18446744073709551615", "100000000"] {
        dir.write(
            "t.jsonl",
            format!("{OK}\n{{\"timestamp\":1,\"input_length\":{n},\"output_length\":5}}\n"),
        );
        let want = format!(
            "t.jsonl:2: error: field `input_length`: {n} is over the limit of 16777216 tokens"
        );
        let run = dir.cmd("trace-synth").arg("t.jsonl").run();
        refused(&run, 2, &want);
        let run = dir.run("trace-replay", &["--dry-run", "t.jsonl"]);
        refused(&run, 2, &want);
    }
}

#[test]
fn replay_refuses_times_beyond_a_duration() {
    let dir = TestDir::new("limits-replay");
    for (line, want) in [
        (
            r#"{"timestamp":1e23,"input_length":10,"output_length":5}"#,
            "t.jsonl:2: error: field `timestamp`: 1e23 is over the limit of 10000000000000 ms",
        ),
        (
            r#"{"timestamp":1,"session_id":"s","delay":1e300,"input_length":10,"output_length":5}"#,
            "t.jsonl:2: error: field `delay`: 1e300 is over the limit of 315360000000 ms",
        ),
    ] {
        dir.write("t.jsonl", format!("{OK}\n{line}\n"));
        let run = dir.run("trace-replay", &["--dry-run", "t.jsonl"]);
        refused(&run, 2, want);
    }
}

#[test]
fn rescale_and_slice_keep_times_within_the_limit() {
    let dir = TestDir::new("limits-rescale");
    dir.write(
        "t.jsonl",
        format!("{OK}\n{{\"timestamp\":1e308,\"input_length\":10,\"output_length\":5}}\n"),
    );
    let want = "t.jsonl:2: error: field `timestamp`: 1e308 is over the limit of 10000000000000 ms";
    refused(
        &dir.run("trace-rescale", &["--speed", "0.5", "t.jsonl"]),
        2,
        want,
    );
    refused(&dir.run("trace-slice", &["--rebase", "t.jsonl"]), 2, want);

    // Within the limit, but not once doubled.
    dir.write(
        "t.jsonl",
        format!("{OK}\n{{\"timestamp\":6000000000000,\"input_length\":10,\"output_length\":5}}\n"),
    );
    refused(
        &dir.run("trace-rescale", &["--speed", "0.5", "t.jsonl"]),
        2,
        "t.jsonl:2: error: field `timestamp`: 6000000000000 rescaled is 12000000000000, over the limit of 10000000000000 ms",
    );
    dir.run(
        "trace-rescale",
        &["--speed", "0.5", "--skip-invalid", "t.jsonl"],
    )
    .code(0)
    .lines_are(&[OK]);
    refused(
        &dir.run("trace-rescale", &["--input-scale", "2000000", "t.jsonl"]),
        2,
        "t.jsonl:1: error: field `input_length`: 20000000 is over the limit of 16777216 tokens",
    );
}

const LITELLM: &str = r#"{"id":"x","call_type":"acompletion","status":"success","prompt_tokens":N,"completion_tokens":3,"startTime":1750615200.1,"endTime":1750615201.1,"model":"m","messages":[{"role":"user","content":"hello there"}]}"#;

#[test]
fn convert_bounds_litellm_numbers() {
    let dir = TestDir::new("limits-convert");
    for (n, shown) in [
        ("18446744073709551616", "1.8446744073709552e+19"),
        ("4294967296", "4294967296"),
    ] {
        dir.write("l.jsonl", format!("{}\n", LITELLM.replace('N', n)));
        let run = dir.run("trace-convert", &["--from", "litellm", "l.jsonl"]);
        refused(
            &run,
            2,
            &format!(
                "l.jsonl:1: error: field `prompt_tokens`: {shown} is over the limit of 16777216 tokens"
            ),
        );
        assert_eq!(run.stdout_str(), "");
    }
    // A 20-token prompt keeps its one block.
    dir.write("l.jsonl", format!("{}\n", LITELLM.replace('N', "20")));
    let run = dir.run("trace-convert", &["--from", "litellm", "l.jsonl"]);
    run.code(0);
    assert_eq!(run.json_lines()[0]["hash_ids"], serde_json::json!([0]));

    dir.write(
        "s.csv",
        "request_id,prompt_tokens,completion_tokens,startTime,endTime,request_duration_ms,model\n\
         r1,5,3,2025-06-22 18:00:00.101Z,2025-06-22 18:00:01.735Z,1e308,m\n\
         r2,5,3,2025-06-22 18:00:00.101Z,2025-06-22 18:00:01.735Z,100,m\n",
    );
    let want =
        "s.csv:2: error: field `request_duration_ms`: 1e308 is over the limit of 315360000000 ms";
    let run = dir.run("trace-convert", &["--from", "litellm", "s.csv"]);
    refused(&run, 2, want);
    let run = dir.run(
        "trace-convert",
        &["--from", "litellm", "--skip-invalid", "s.csv"],
    );
    run.code(0);
    assert!(!run.stderr.contains("panicked"));
    assert_eq!(
        run.lines(),
        vec![
            r#"{"timestamp":0,"input_length":5,"output_length":3,"model":"m","id":"r2","observed":{"prompt_tokens":5,"completion_tokens":3,"e2e_ms":100,"status":"ok"}}"#
        ]
    );
}

#[test]
fn summarize_bounds_times_and_buckets_by_the_data() {
    let dir = TestDir::new("limits-summarize");
    for (line, want) in [
        (
            r#"{"index":0,"scheduled_ms":0,"sent_ms":1e308,"status":"ok","ttft_ms":1,"e2e_ms":2,"completion_tokens":3}"#,
            "r.ndjson:1: error: field `sent_ms`: 1e308 is over the limit of 10000000000000 ms",
        ),
        (
            r#"{"index":0,"scheduled_ms":0,"sent_ms":1,"status":"ok","ttft_ms":1,"e2e_ms":2,"itl_ms":[1e15],"completion_tokens":3}"#,
            "r.ndjson:1: error: field `itl_ms`: 1e15 is over the limit of 315360000000 ms",
        ),
        (
            r#"{"index":0,"scheduled_ms":0,"sent_ms":1,"status":"ok","ttft_ms":1,"e2e_ms":2,"completion_tokens":4294967297}"#,
            "r.ndjson:1: error: field `completion_tokens`: 4294967297 is over the limit of 4294967296 tokens",
        ),
    ] {
        dir.write("r.ndjson", format!("{line}\n"));
        let run = dir.cmd("trace-summarize").arg("r.ndjson").run();
        refused(&run, 2, want);
        let run = dir.run("trace-summarize", &["--requests", "csv", "r.ndjson"]);
        assert_ne!(run.code, 101);
        assert!(!run.stdout_str().contains("inf"), "{}", run.stdout_str());
    }
    // Two results 31 years apart: one-second token buckets hold only the
    // seconds that saw tokens, so 256 MiB of address space is plenty.
    dir.write(
        "r.ndjson",
        "{\"index\":0,\"scheduled_ms\":0,\"sent_ms\":0,\"start_time\":\"2026-11-22T10:00:00.000Z\",\"status\":\"ok\",\"ttft_ms\":100,\"e2e_ms\":1000,\"itl_ms\":[900],\"completion_tokens\":2}\n\
         {\"index\":1,\"scheduled_ms\":978307200000,\"sent_ms\":978307200000,\"start_time\":\"2057-11-22T10:00:00.000Z\",\"status\":\"ok\",\"ttft_ms\":100,\"e2e_ms\":1000,\"itl_ms\":[900],\"completion_tokens\":2}\n",
    );
    let run = Cmd::after_sh("ulimit -v 262144", "trace-summarize")
        .current_dir(&dir.path)
        .args(["--format", "json", "r.ndjson"])
        .run();
    run.code(0);
    assert_eq!(
        run.json()["peak"]["output_tokens_per_s"],
        serde_json::json!(1.0)
    );
    let run = dir.run("trace-summarize", &["--requests", "csv", "r.ndjson"]);
    run.code(0);
    assert_eq!(
        run.lines()[2],
        "1,,,,,false,ok,,,978307200000,978307200000,0,100,,900,1000,1,900,900,,,,2,,"
    );
}

/// Answers by the case named in the prompt: a stream whose one line never
/// ends, a whole body too large, or a small stream.
fn oversized_answer(body: &str) -> Answer {
    if body.contains("case-endless-line") {
        let mut line = b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec();
        line.resize(200_000, b'x');
        Answer::sse(&line, 16_384)
    } else if body.contains("case-huge-body") {
        let text = "y".repeat(200_000);
        Answer::json(
            "200 OK",
            &format!(r#"{{"choices":[{{"message":{{"content":"{text}"}}}}]}}"#),
        )
    } else if body.contains("case-huge-error") {
        Answer::json("500 Internal Server Error", &"z".repeat(200_000))
    } else {
        Answer::sse(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            1000,
        )
    }
}

#[test]
fn an_answer_over_max_answer_bytes_fails_its_request_only() {
    let server = Scripted::start(oversized_answer);
    let trace: String = [
        "case-endless-line",
        "case-huge-body",
        "case-huge-error",
        "case-ok",
    ]
    .iter()
    .enumerate()
    .map(|(i, case)| {
        format!("{{\"timestamp\":{i},\"text_input\":\"{case}\",\"output_length\":2}}\n")
    })
    .collect();
    let want = [
        (
            "error",
            "an event of the answer is over --max-answer-bytes 65536 bytes",
        ),
        ("error", "the answer is over --max-answer-bytes 65536 bytes"),
        (
            "error",
            "the answer (HTTP 500) is over --max-answer-bytes 65536 bytes",
        ),
        ("ok", ""),
    ];
    // Straight to the server, and through reqwest (a proxy in the
    // environment takes that path).
    for proxied in [false, true] {
        let mut cmd = Cmd::new("trace-replay").args(["--quiet", "--max-answer-bytes", "64K"]);
        cmd = if proxied {
            cmd.args(["--url", "http://tracekit.invalid:9/v1"])
                .env("http_proxy", &server.url)
        } else {
            cmd.args(["--url", &server.url])
        };
        let run = cmd.stdin(trace.clone()).run();
        run.code(0);
        let mut results = run.json_lines();
        results.sort_by_key(|r| r["index"].as_u64());
        assert_eq!(results.len(), 4, "{}", run.stdout_str());
        for (r, (status, error)) in results.iter().zip(want) {
            assert_eq!(r["status"], status, "proxied {proxied}: {r}");
            assert_eq!(
                r["error"].as_str().unwrap_or(""),
                error,
                "proxied {proxied}: {r}"
            );
        }
    }
    let run = run_stdin(
        "trace-replay",
        &["--dry-run", "--max-answer-bytes", "64X"],
        trace,
    );
    refused(
        &run,
        2,
        "`64X` is not a size in bytes ≥ 1 (a count, or with a K, M or G suffix)",
    );
}

/// A server that echoes the request's head in its answers: in a 401 body,
/// and in an error event of a stream.
fn echo_head(head: &str, body: &str) -> Answer {
    let head = head.replace("\r\n", " | ");
    if body.contains("case-event") {
        let event = serde_json::json!({"error": {"message": head}});
        Answer::sse(
            format!("data: {event}\n\ndata: [DONE]\n\n").as_bytes(),
            1000,
        )
    } else {
        Answer::json(
            "401 Unauthorized",
            &format!("bad credentials, you sent: {head}"),
        )
    }
}

#[test]
fn no_credential_reaches_any_output() {
    let server = Scripted::start_with_head(std::sync::Arc::new(echo_head));
    let trace = "{\"timestamp\":0,\"text_input\":\"case-json\",\"output_length\":2,\"id\":\"a\"}\n\
                 {\"timestamp\":1,\"text_input\":\"case-event\",\"output_length\":2,\"id\":\"b\"}\n";
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", &server.url])
        .args(["--header", "X-Api-Key: xk-second-secret"])
        .args(["--header", "Cookie: session=cookie-secret"])
        .args(["--header", "X-Trace: visible-value"])
        .env("OPENAI_API_KEY", "sk-first-secret")
        .stdin(trace)
        .run();
    run.code(0);
    // The server saw every credential.
    let seen = server.seen.lock().unwrap().clone();
    assert!(
        seen[0]
            .head
            .contains("authorization: Bearer sk-first-secret\r\n")
    );
    assert!(seen[0].head.contains("x-api-key: xk-second-secret\r\n"));
    let out = run.stdout_str();
    for secret in ["sk-first-secret", "xk-second-secret", "cookie-secret"] {
        assert!(!out.contains(secret), "{out}");
        assert!(!run.stderr.contains(secret), "{}", run.stderr);
    }
    let mut results = run.json_lines();
    results.sort_by_key(|r| r["index"].as_u64());
    let json_error = results[0]["error"].as_str().unwrap();
    assert!(
        json_error.starts_with(
            "HTTP 401: bad credentials, you sent: POST /v1/chat/completions HTTP/1.1 | "
        ),
        "{json_error}"
    );
    assert!(json_error.contains("[REDACTED]"), "{json_error}");
    // The error event is shown in full: well under 200 bytes is cut.
    let event_error = results[1]["error"].as_str().unwrap();
    assert!(
        event_error.contains("authorization: [REDACTED] | "),
        "{event_error}"
    );
    assert!(
        event_error.contains("x-api-key: [REDACTED] | "),
        "{event_error}"
    );
    assert!(
        event_error.contains("cookie: [REDACTED] | "),
        "{event_error}"
    );
    assert!(
        event_error.contains("x-trace: visible-value | "),
        "{event_error}"
    );

    // A malformed --header is not quoted.
    for bad in [
        "Bearer sk-third-secret",
        "Authorization: sk-\u{1}third-secret",
    ] {
        let run = run_stdin("trace-replay", &["--url", &server.url, "--header", bad], "");
        run.code(2);
        assert!(!run.stderr.contains("third-secret"), "{}", run.stderr);
        run.stderr_has("not shown: it may hold a credential");
    }
}

fn empty_choices(body: &str) -> Answer {
    if body.contains("\"stream\":true") {
        Answer::sse(
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":0}}\n\ndata: [DONE]\n\n",
            1000,
        )
    } else {
        Answer::json("200 OK", r#"{"choices":[]}"#)
    }
}

#[test]
fn an_answer_without_choices_has_no_ttft() {
    let server = Scripted::start(empty_choices);
    let trace = "{\"timestamp\":0,\"text_input\":\"hi\",\"output_length\":2}\n";
    let run = run_stdin(
        "trace-replay",
        &["--quiet", "--no-stream", "--url", &server.url],
        trace,
    );
    run.code(0);
    let r = &run.json_lines()[0];
    assert_eq!(r["status"], "error", "{r}");
    assert_eq!(r["error"], "no choices in the answer", "{r}");
    assert_eq!(r["ttft_ms"], serde_json::Value::Null, "{r}");
    assert_eq!(r["first_chunk_ms"], r["e2e_ms"], "{r}");
    // Streamed: chunks with empty choices are vLLM's first chunk, and
    // no content means no TTFT.
    let run = run_stdin("trace-replay", &["--quiet", "--url", &server.url], trace);
    run.code(0);
    let r = &run.json_lines()[0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["ttft_ms"], serde_json::Value::Null, "{r}");
    assert!(r["first_chunk_ms"].is_f64(), "{r}");
}

#[test]
fn durations_on_the_command_line_are_bounded() {
    for (tool, flag) in [
        ("trace-replay", "--timeout"),
        ("trace-replay", "--grace"),
        ("trace-slice", "--to"),
    ] {
        let run = Cmd::new(tool)
            .args([flag, "99999999999999999h"])
            .stdin("")
            .run();
        refused(
            &run,
            2,
            "`99999999999999999h` is longer than the limit of ten years (315360000000 ms)",
        );
    }
}

/// As [`echo_head`], and for `case-headers-json` an error event whose
/// message is the request's headers as a JSON object.
fn echo_head_as_json(head: &str, body: &str) -> Answer {
    if !body.contains("case-headers-json") {
        return echo_head(head, body);
    }
    let headers: serde_json::Map<String, serde_json::Value> = head
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.into()))
        .collect();
    let message = serde_json::Value::Object(headers).to_string();
    let event = serde_json::json!({"error": {"message": message}});
    Answer::sse(
        format!("data: {event}\n\ndata: [DONE]\n\n").as_bytes(),
        1000,
    )
}

/// Each `case` of the echo server once, as a trace.
fn echo_trace(cases: &[&str]) -> String {
    cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            format!("{{\"timestamp\":{i},\"text_input\":\"case-{case}\",\"output_length\":2}}\n")
        })
        .collect()
}

#[test]
fn credentials_with_quotes_and_backslashes_are_hidden_in_json_too() {
    let server = Scripted::start_with_head(std::sync::Arc::new(echo_head_as_json));
    let dir = TestDir::new("redact-escaped");
    let run = dir
        .cmd("trace-replay")
        .args(["--quiet", "--url", &server.url, "-o", "r.ndjson"])
        .args(["--header", r#"X-Api-Key: xk-"quoted\key"#])
        .env("OPENAI_API_KEY", r#"sk-back\slash"quote"#)
        .stdin(echo_trace(&["json", "event", "headers-json"]))
        .run();
    run.code(0);
    // What the server saw, and each form it may take in an output: as is,
    // inside a JSON string, inside a CSV cell.
    let seen = server.seen.lock().unwrap()[0].head.clone();
    assert!(seen.contains(r#"x-api-key: xk-"quoted\key"#), "{seen}");
    let forms = [
        r#"xk-"quoted\key"#,
        r#"xk-\"quoted\\key"#,
        r#"xk-""quoted\key"#,
        r#"sk-back\slash"quote"#,
        r#"sk-back\\slash\"quote"#,
        r#"sk-back\slash""quote"#,
        "quoted",
        "slash",
    ];
    let results = String::from_utf8(dir.read("r.ndjson")).unwrap();
    let csv = dir.run("trace-summarize", &["--requests", "csv", "r.ndjson"]);
    let json = dir.run("trace-summarize", &["--requests", "json", "r.ndjson"]);
    for out in [&results, &csv.stdout_str(), &json.stdout_str(), &run.stderr] {
        for form in forms {
            assert!(!out.contains(form), "{form} in\n{out}");
        }
    }
    assert_eq!(results.lines().count(), 3);
    // Two credentials in each of three echoes.
    assert_eq!(results.matches("[REDACTED]").count(), 6, "{results}");
}

#[test]
fn short_credentials_are_hidden_where_they_stand_as_credentials() {
    let server = Scripted::start_with_head(std::sync::Arc::new(echo_head_as_json));
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", &server.url])
        .args(["--header", "X-Api-Key: ab"])
        .args(["--header", "X-Trace: ab"])
        .env("OPENAI_API_KEY", "xy")
        .stdin(echo_trace(&["event", "headers-json"]))
        .run();
    run.code(0);
    let mut results = run.json_lines();
    results.sort_by_key(|r| r["index"].as_u64());
    // `Name: value` in the echoed head: the credentials hidden, the same
    // two letters elsewhere kept.
    let event = results[0]["error"].as_str().unwrap();
    for want in [
        "authorization: [REDACTED] | ",
        "x-api-key: [REDACTED] | ",
        "x-trace: ab | ",
    ] {
        assert!(event.contains(want), "{want} in {event}");
    }
    // `"name":"value"` in an echoed JSON object (escaped in the line).
    let headers = results[1]["error"].as_str().unwrap();
    for want in [
        r#""authorization":"[REDACTED]""#,
        r#""x-api-key":"[REDACTED]""#,
        r#""x-trace":"ab""#,
    ] {
        assert!(headers.contains(want), "{want} in {headers}");
    }
    assert!(!run.stdout_str().contains("Bearer xy"));
}

/// Values no numeric flag should take, or that overflow every type.
const ABSURD: [&str; 4] = ["18446744073709551616", "-1", "NaN", "1e400"];

/// Every flag that takes a value, of every tool that ends by itself
/// (trace-sim serves until stopped; trace-sweep runs trace-replay, whose
/// flags are here), fed absurd values: the tool ends with status 0, 1 or
/// 2, never a panic nor an abort, and a refusal is one `error` line.
#[test]
fn no_flag_value_makes_a_tool_panic() {
    use clap::CommandFactory;
    use tracekit::{convert, replay, rescale, slice, summarize, synth, validate};
    let dir = TestDir::new("limits-flags");
    dir.write("t.jsonl", format!("{OK}\n"));
    dir.write(
        "r.ndjson",
        "{\"index\":0,\"scheduled_ms\":0,\"sent_ms\":1,\"status\":\"ok\",\"ttft_ms\":1,\"e2e_ms\":2,\"completion_tokens\":3}\n",
    );
    // Each tool, its flags, and the arguments it runs on.
    type Flags = fn() -> clap::Command;
    let tools: [(&str, Flags, &[&str]); 7] = [
        (
            "trace-convert",
            convert::Args::command,
            &["--from", "mooncake", "t.jsonl"],
        ),
        ("trace-validate", validate::Args::command, &["t.jsonl"]),
        ("trace-slice", slice::Args::command, &["t.jsonl"]),
        ("trace-rescale", rescale::Args::command, &["t.jsonl"]),
        ("trace-summarize", summarize::Args::command, &["r.ndjson"]),
        ("trace-synth", synth::Args::command, &["t.jsonl"]),
        (
            "trace-replay",
            replay::Args::command,
            &["--sim", "--quiet", "--timeout", "2s", "t.jsonl"],
        ),
    ];
    let mut runs = Vec::new();
    for (tool, cmd, rest) in &tools {
        for arg in cmd().get_arguments() {
            let (Some(long), true) = (arg.get_long(), arg.get_action().takes_values()) else {
                continue;
            };
            for value in ABSURD {
                runs.push((*tool, format!("--{long}={value}"), *rest));
            }
        }
    }
    // trace-sim's model flags, through trace-replay --sim (trace-sim
    // itself serves until stopped). Its largest prefix cache starts small.
    let replay = &["--sim", "--quiet", "--timeout", "2s", "t.jsonl"][..];
    for arg in tracekit::sim::Args::command().get_arguments() {
        let Some(long) = arg
            .get_long()
            .filter(|l| !["host", "port", "arrivals"].contains(l))
        else {
            continue;
        };
        for value in ABSURD.iter().chain(&["4294967296"]) {
            runs.push((
                "trace-replay",
                format!("--sim-arg=--{long}={value}"),
                replay,
            ));
        }
    }
    // Two at a time: the machine's cores.
    let runs = std::sync::Mutex::new(runs);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let Some((tool, flag, rest)) = runs.lock().unwrap().pop() else {
                        return;
                    };
                    let run = dir.cmd(tool).arg(&flag).args(rest).run();
                    assert!(
                        [0, 1, 2].contains(&run.code) && !run.stderr.contains("panicked"),
                        "{tool} {flag}: status {}\n{}",
                        run.code,
                        run.stderr
                    );
                    if run.code == 2 {
                        assert!(
                            run.stderr.contains(&format!("{tool}: "))
                                && run.stderr.contains("error"),
                            "{tool} {flag}: {}",
                            run.stderr
                        );
                    }
                }
            });
        }
    });
}
