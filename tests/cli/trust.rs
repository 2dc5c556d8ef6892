//! What one tool writes, the next accepts; converters write what the log
//! means: Langfuse end times, duplicates, wrappers and one-call sessions;
//! the containers users have (the OpenTelemetry console exporter, AgentOps
//! trace exports, LiteLLM SpendLogs as a PostgreSQL dump); token counts a
//! summary cannot take.

use serde_json::{Value, json};

use crate::servers::{Answer, Scripted};
use crate::util::{Cmd, Run, TestDir, data, run_stdin};

fn fixture(name: &str) -> String {
    data(&format!("convert/{name}"))
        .to_string_lossy()
        .into_owned()
}

/// `trace-convert ARGS…`, exit 0, its output accepted by
/// `trace-validate --strict`.
#[track_caller]
fn convert_valid(args: &[&str]) -> Run {
    let run = Cmd::new("trace-convert").args(args).run();
    run.code(0);
    run_stdin("trace-validate", &["--strict"], run.stdout.clone()).code(0);
    run
}

/// A shared fixture converted `--from` the source named (checked as for
/// [`convert_valid`]): the run and its records.
fn converted(source: &str, name: &str) -> (Run, Vec<Value>) {
    let run = convert_valid(&["--from", source, &fixture(name)]);
    let records = run.json_lines();
    (run, records)
}

/// `(id, timestamp, after, delay, session_id)` of each record written.
fn shape(run: &Run) -> Vec<(Value, Value, Value, Value, Value)> {
    run.json_lines()
        .into_iter()
        .map(|r| {
            (
                r["id"].clone(),
                r["timestamp"].clone(),
                r["after"].clone(),
                r["delay"].clone(),
                r["session_id"].clone(),
            )
        })
        .collect()
}

#[test]
fn langfuse_end_before_start_is_no_end_and_no_edge() {
    // gen-2 ends at 09:00:00, an hour before it started: no end. gen-1
    // (0–1707 ms) and gen-3 (3000 ms) keep theirs; gen-3 waits for gen-1
    // (the only call ended before it started), 3000 − 1707 = 1293 ms.
    // gen-2, outside the graph, is a later turn of the session: 2000 −
    // 1707 = 293 ms after gen-1's end.
    for name in [
        "langfuse/langfuse_endtime_before_start.json",
        // An end of 24 (epoch seconds: 1970) is the same impossible end.
        "langfuse/langfuse_endtime_numeric.json",
    ] {
        let run = convert_valid(&["--from", "langfuse", &fixture(name)]);
        let s = json!("chat-42");
        assert_eq!(
            shape(&run),
            [
                (
                    json!("gen-1"),
                    json!(0),
                    Value::Null,
                    Value::Null,
                    s.clone()
                ),
                (
                    json!("gen-2"),
                    json!(2000),
                    Value::Null,
                    json!(293),
                    s.clone()
                ),
                (
                    json!("gen-3"),
                    json!(3000),
                    json!(["gen-1"]),
                    json!(1293),
                    s.clone()
                ),
            ],
            "{name}"
        );
        run.stderr_has("field `endTime`: ")
            .stderr_has("is before startTime; ignored (no end time for this generation");
    }
}

#[test]
fn langfuse_observations_given_twice_are_read_once() {
    // The same download twice: gen-1, span-1, gen-2 and gen-3 again.
    let run = convert_valid(&[
        "--from",
        "langfuse",
        &fixture("langfuse/langfuse_duplicate_observations.json"),
    ]);
    let ids: Vec<Value> = run.json_lines().iter().map(|r| r["id"].clone()).collect();
    assert_eq!(ids, [json!("gen-1"), json!("gen-2"), json!("gen-3")]);
    run.stderr_has("left out 4 duplicates (an observation id read before)");
}

#[test]
fn langfuse_wrappers_leave_their_inner_calls_and_one_call_sessions_stay() {
    // ai.generateText (300/40 tokens) holds, through a span, the two
    // doGenerate calls that report usage (100/15, 200/25): it is left out.
    // Times from 08:00:00.020: the inner calls at 0 and 980 ms (the second
    // 100 ms after the first ended at 900), the one-call session chat-2 at
    // 08:00:05.000, 4980 ms.
    let (run, out) = converted("langfuse", "langfuse/wrapper_generations.constructed.json");
    assert_eq!(
        shape(&run),
        [
            (
                json!("obs-inner-1"),
                json!(0),
                Value::Null,
                Value::Null,
                json!("chat-1")
            ),
            (
                json!("obs-inner-2"),
                json!(980),
                json!(["obs-inner-1"]),
                json!(100),
                json!("chat-1")
            ),
            (
                json!("obs-solo"),
                json!(4980),
                Value::Null,
                Value::Null,
                json!("chat-2")
            ),
        ]
    );
    assert_eq!(
        (&out[0]["input_length"], &out[0]["output_length"]),
        (&json!(100), &json!(15))
    );
    assert_eq!(
        (&out[1]["input_length"], &out[1]["output_length"]),
        (&json!(200), &json!(25))
    );
    run.stderr_has("left out 1 wrapper of another generation")
        .stderr_has("2 sessions");
}

#[test]
fn otel_console_exporter_output_is_read() {
    // Two chat spans of one trace and session (0x ids read without the
    // 0x): 09:30:00.000–01.250 and 09:30:02.000–02.800; the second waits
    // for the first, 2000 − 1250 = 750 ms. The agent span is no call.
    let (run, out) = converted("otel", "containers/otel_console_exporter.constructed.txt");
    assert_eq!(
        shape(&run),
        [
            (
                json!("00f067aa0ba902b7"),
                json!(0),
                Value::Null,
                Value::Null,
                json!("sess-7")
            ),
            (
                json!("1a2b3c4d5e6f7081"),
                json!(2000),
                json!(["00f067aa0ba902b7"]),
                json!(750),
                json!("sess-7")
            ),
        ]
    );
    assert_eq!(out[0]["model"], json!("gpt-4o-mini-2024-07-18"));
    assert_eq!(
        out[0]["observed"],
        json!({"prompt_tokens": 120, "completion_tokens": 30, "e2e_ms": 1250, "status": "ok"})
    );
    assert_eq!(
        (&out[1]["input_length"], &out[1]["output_length"]),
        (&json!(180), &json!(12))
    );
    // Recognised without --from.
    Cmd::new("trace-convert")
        .arg(fixture("containers/otel_console_exporter.constructed.txt"))
        .run()
        .code(0)
        .stderr_has("recognised as otel input");
}

#[test]
fn agentops_trace_export_is_read() {
    // Only the spans of AgentOps kind `llm` are calls: not the workflow
    // span, whose usage (481/496) sums the two it holds. LLM 1: 15:12:27.411626–39.463414, 210/83 tokens.
    // LLM 2: from 39.483743, no end_time, duration 16728402000 ns: ends
    // 56.212145; 271/413 tokens. It starts 12072.117 ms after LLM 1, which
    // ended 20.329 ms before it. Counts are strings; the trace id is the
    // export's, given as the session of the two calls.
    let (run, out) = converted("otel", "containers/agentops_trace.constructed.json");
    let trace = json!("b520ab60214d54b570cf701c7ad28faf");
    assert_eq!(
        shape(&run),
        [
            (
                json!("27ef04df3fea3e34"),
                json!(0),
                Value::Null,
                Value::Null,
                trace.clone()
            ),
            (
                json!("4c25a4c6bfca0f5b"),
                json!(12072.117),
                json!(["27ef04df3fea3e34"]),
                json!(20.329),
                trace
            ),
        ]
    );
    assert_eq!(
        out[0]["observed"],
        json!({"prompt_tokens": 210, "completion_tokens": 83, "e2e_ms": 12051.788, "status": "ok"})
    );
    assert_eq!(out[1]["observed"]["e2e_ms"], json!(16728.402));
    assert_eq!(out[1]["model"], json!("ollama/llama3:latest"));
    // The prompt (system and user messages) is hashed: one block.
    assert_eq!(out[0]["hash_ids"].as_array().map(Vec::len), Some(1));
}

#[test]
fn litellm_spend_logs_pg_dump_reads_as_the_csv_export() {
    // The same four rows as the CSV export, in COPY's text format (`\N`
    // for the empty cells): the same records, byte for byte.
    let csv = convert_valid(&[&fixture("spend_logs.psql_csv_export.constructed.csv")]);
    let dump = convert_valid(&[&fixture("containers/spend_logs.pg_dump.constructed.sql")]);
    dump.stderr_has("recognised as litellm input");
    assert_eq!(dump.stdout_str(), csv.stdout_str());
    assert_eq!(dump.lines().len(), 4);
    // A dump without the table says so.
    let dir = TestDir::new("pg-dump-other-table");
    dir.write(
        "d.sql",
        "--\n-- PostgreSQL database dump\n--\nCOPY public.\"LiteLLM_TeamTable\" (team_id) FROM stdin;\nteam-a\n\\.\n",
    );
    dir.cmd("trace-convert")
        .args(["--from", "litellm", "d.sql"])
        .run()
        .code(2)
        .stderr_has("d.sql: a SQL dump without the table LiteLLM_SpendLogs");
}

#[test]
fn usage_beyond_what_a_summary_takes_is_null_with_a_warning() {
    fn answer(body: &str) -> Answer {
        // 2^32 + 1 prompt tokens in the first answer, 2^33 completion
        // tokens in the second: neither is a count a summary sums.
        let usage = if body.contains("hello there 0") {
            r#"{"prompt_tokens":4294967297,"completion_tokens":3}"#
        } else {
            r#"{"prompt_tokens":5,"completion_tokens":8589934592}"#
        };
        let stream = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"a\"}},\"finish_reason\":\"stop\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n"
        );
        Answer::sse(stream.as_bytes(), 1000)
    }
    let server = Scripted::start(answer);
    let dir = TestDir::new("huge-usage");
    dir.write(
        "t.jsonl",
        "{\"timestamp\": 0, \"text_input\": \"hello there 0\", \"output_length\": 8}\n\
         {\"timestamp\": 50, \"text_input\": \"hello there 1\", \"output_length\": 8}\n",
    );
    let url = format!("{}/v1", server.url);
    let run = dir
        .cmd("trace-replay")
        .args(["--quiet", "--url", &url, "--model", "m"])
        .args(["-o", "r.ndjson", "t.jsonl"])
        .run();
    run.code(0).stderr_has(
        "record 1: the server reported `usage.prompt_tokens` 4294967297, over the 2^32 a \
         summary takes: written as null (and so for any later count beyond it)",
    );
    assert_eq!(
        run.stderr.matches("over the 2^32").count(),
        1,
        "{}",
        run.stderr
    );
    let results: Vec<Value> = String::from_utf8(dir.read("r.ndjson"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"index\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut counts: Vec<(Value, Value, Value)> = results
        .iter()
        .map(|r| {
            (
                r["index"].clone(),
                r["prompt_tokens"].clone(),
                r["completion_tokens"].clone(),
            )
        })
        .collect();
    counts.sort_by_key(|c| c.0.as_u64());
    assert_eq!(
        counts,
        [
            (json!(0), Value::Null, json!(3)),
            (json!(1), json!(5), Value::Null)
        ]
    );
    assert!(results.iter().all(|r| r["status"] == "ok"));
    // And the results summarize: 3 completion tokens, 5 prompt tokens.
    let sum = dir
        .cmd("trace-summarize")
        .args(["--format", "json", "r.ndjson"])
        .run();
    sum.code(0);
    let report = sum.json();
    assert_eq!(report["requests"]["ok"], json!(2), "{report}");
}

/// A session's first record skipped under --skip-invalid (untimed in a
/// timed trace) does not make its next record a later turn: that one starts
/// the session, and is untimed too, so it is skipped as well. Both lines are
/// named; the output is the first record alone, which trace-validate takes.
#[test]
fn a_skipped_first_turn_leaves_its_session_unstarted() {
    let input = "{\"timestamp\":10,\"input_length\":5,\"output_length\":2,\"id\":\"b\",\"session_id\":\"s1\"}\n\
                 {\"input_length\":12,\"output_length\":4,\"session_id\":\"s0\",\"delay\":7}\n\
                 {\"input_length\":12,\"output_length\":4,\"session_id\":\"s0\",\"delay\":7}\n";
    let run = Cmd::new("trace-convert")
        .args(["--from", "mooncake", "--skip-invalid"])
        .stdin(input)
        .run();
    run.code(0);
    assert_eq!(
        run.stdout_str(),
        "{\"timestamp\":0,\"input_length\":5,\"output_length\":2,\"id\":\"b\",\"session_id\":\"s1\"}\n"
    );
    run.stderr_has("<stdin>:2: warning: field `timestamp`: missing")
        .stderr_has("<stdin>:3: warning: field `timestamp`: missing");
}

/// Several Mooncake inputs make one trace: timestamps on all records or
/// none across them, an `after` id may name a record of an earlier input,
/// and a `"delta"` turn may continue a session begun in one.
#[test]
fn mooncake_rules_across_records_span_the_inputs() {
    let dir = TestDir::new("mooncake-inputs");
    dir.write(
        "a.jsonl",
        "{\"timestamp\":0,\"input_length\":10,\"output_length\":2,\"id\":\"x\"}\n\
         {\"timestamp\":100,\"input_length\":20,\"output_length\":2,\"session_id\":\"s\"}\n",
    );
    dir.write("b.jsonl", "{\"input_length\":30,\"output_length\":2}\n");
    dir.write(
        "c.jsonl",
        "{\"timestamp\":50,\"input_length\":40,\"output_length\":2,\"after\":[\"x\"]}\n\
         {\"timestamp\":200,\"input_length\":50,\"output_length\":2,\"session_id\":\"s\",\"message_mode\":\"delta\"}\n",
    );
    let run = dir.run(
        "trace-convert",
        &[
            "--from",
            "mooncake",
            "--skip-invalid",
            "a.jsonl",
            "b.jsonl",
            "c.jsonl",
        ],
    );
    run.code(0);
    run.stderr_has("b.jsonl:1: warning: field `timestamp`: missing");
    run.lines_are(&[
        "{\"timestamp\":0,\"input_length\":10,\"output_length\":2,\"id\":\"x\"}",
        "{\"timestamp\":50,\"input_length\":40,\"output_length\":2,\"after\":[\"x\"]}",
        "{\"timestamp\":100,\"input_length\":20,\"output_length\":2,\"session_id\":\"s\"}",
        "{\"timestamp\":200,\"input_length\":50,\"output_length\":2,\"session_id\":\"s\",\"message_mode\":\"delta\"}",
    ]);
    dir.write("out.jsonl", &run.stdout);
    dir.run("trace-validate", &["--strict", "out.jsonl"]).ok();
}
