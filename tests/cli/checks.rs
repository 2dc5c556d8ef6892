//! Nothing silently wrong in what is sent, and what a user reads (issue
//! 45): trace-gen refuses what a trace cannot hold, the seconds alarm is
//! judged on the records sent at their timestamp (in trace-validate and,
//! before it sends, trace-replay), replay refuses timestamps on some
//! records only and warns when the server counted other prompt lengths,
//! every convert source keeps trace-validate's rules on `after`, `-o` is
//! never left empty or partial, promptflow's model calls are found,
//! summarize lists the errors by message, and https:// to a plain server
//! says so.

use std::path::Path;

use calamine::{Data, Reader, Xlsx, open_workbook};
use serde_json::{Value, json};

use crate::servers::{Answer, Raw, Scripted, hold_open};
use crate::util::{Cmd, TestDir, columns, data, run_file, run_stdin, trace};

// ---- trace-gen ----

#[test]
fn gen_refuses_a_gamma_law_it_could_never_draw() {
    // CV 1e-160: shape 1/CV² is infinite, and the sampler would loop for
    // ever; refused by the flag's parser (exit 2, clap's usage error).
    let run = Cmd::new("trace-gen")
        .args(["--count", "2", "--rate", "10", "--arrival", "gamma:1e-160"])
        .run();
    run.code(2)
        .stderr_has("`gamma:1e-160` is not an arrival law")
        .stderr_has("CV from 0.001 to 100");
    assert!(run.stdout.is_empty());
}

#[test]
fn gen_refuses_timestamps_a_trace_cannot_hold_before_writing() {
    // 5e-324 requests/s: a gap of 1000 / 5e-324 = inf ms, which JSON cannot
    // write; the second record is the first one past the limit.
    let run = Cmd::new("trace-gen")
        .args(["--count", "3", "--rate", "5e-324", "--arrival", "constant"])
        .run();
    run.code(2).stderr_is(
        "trace-gen: error: record 2 would arrive at inf ms, past the largest timestamp a trace \
         holds (10000000000000 ms, 317 years): give a higher --rate or fewer records\n",
    );
    assert!(run.stdout.is_empty(), "nothing written");
    // 1e-300 requests/s: the second record at 1000 / 1e-300 = 1e303 ms.
    let run = Cmd::new("trace-gen")
        .args(["--count", "50", "--rate", "1e-300", "--arrival", "constant"])
        .run();
    run.code(2).stderr_has("record 2 would arrive at 1e303 ms");
    assert!(run.stdout.is_empty());
    // 10^-7 requests/s, a gap of 1000 / 10^-7 = 10^10 ms: 1001 records end
    // at 1000 gaps, 10^13 ms, the limit itself; with 1002, record 1002 is at
    // 1001 gaps, 1.001·10^13 ms, past it.
    Cmd::new("trace-gen")
        .args(["--count", "1001", "--rate", "1e-7", "--arrival", "constant"])
        .run()
        .code(0);
    Cmd::new("trace-gen")
        .args(["--count", "1002", "--rate", "1e-7", "--arrival", "constant"])
        .run()
        .code(2)
        .stderr_has("record 1002 would arrive at 10010000000000 ms");
    // Sessions: the last turn of session 2 is 32 thinks of 3.125·10^11 ms
    // after its start at 1 s: 10^13 + 1000 ms, past the limit (session 1's,
    // at 10^13, is not).
    Cmd::new("trace-gen")
        .args(["--sessions", "2", "--rate", "1", "--arrival", "constant"])
        .args(["--turns", "33", "--think", "312500000000ms"])
        .run()
        .code(2)
        .stderr_has(
            "session 2 would arrive at 1000 ms (its last turn 10000000000000 ms later), past the \
             largest timestamp",
        );
}

#[test]
fn gen_ramp_from_a_huge_rate_ends_at_the_rate() {
    // Linear from 1e308 to 10/s over 3 records: arrival 1 at 1e308 +
    // (10 − 1e308)·0.5 = 5e307/s (a gap of 2e-305 ms, written 0), arrival 2
    // at 10/s (100 ms), where computing the ramp cancelled to 0/s (an
    // infinite gap) before.
    let run = Cmd::new("trace-gen")
        .args(["--count", "3", "--rate", "10", "--arrival", "constant"])
        .args(["--ramp-up", "linear", "--ramp-from", "1e308"])
        .run();
    run.code(0);
    let ts: Vec<Value> = run
        .json_lines()
        .iter()
        .map(|r| r["timestamp"].clone())
        .collect();
    assert_eq!(ts, vec![json!(0), json!(0), json!(100)]);
}

// ---- the seconds alarm ----

/// Sessions of `turns` turns at 100 sessions/s, every turn at its
/// session's start (no think time): trace-gen's sessions.
fn sessions_trace(turns: u32) -> Vec<u8> {
    let run = Cmd::new("trace-gen")
        .args(["--sessions", "2", "--rate", "100", "--arrival", "constant"])
        .args([
            "--turns",
            &turns.to_string(),
            "--input-len",
            "1",
            "--output-len",
            "1",
        ])
        .run();
    run.code(0);
    run.stdout
}

#[test]
fn validate_strict_judges_the_unit_only_on_records_sent_at_their_timestamp() {
    // 2 sessions of 600 turns: 1,200 records at 0 and 10 ms, which counted
    // all together would be 1,199 / 0.01 s = 119,900 requests/s, "seconds".
    // Every later turn has a `delay` (sent after its previous turn), so
    // only the two first turns are sent at their timestamps: too few (under
    // 100) to judge, and no alarm.
    let input = sessions_trace(600);
    run_stdin("trace-validate", &["--strict", "--check"], input).ok();
    // A trace whose own timestamps are seconds still draws it: 3,000
    // records, 20 to each whole unit from 0 to 149: 2,999 / 0.149 s =
    // 20,128 requests/s.
    let secs: String = (0..3000)
        .map(|i| {
            format!(
                "{{\"timestamp\":{},\"input_length\":1,\"output_length\":1}}\n",
                i / 20
            )
        })
        .collect();
    run_stdin("trace-validate", &["--strict", "--check"], secs)
        .code(1)
        .stderr_has("would replay at 20128 requests/s on average over its 3000 records");
}

#[test]
fn replay_gives_the_seconds_alarm_before_sending_on_the_same_records() {
    // The same 3,000 records: replay judges the first 1,024 (to unit 51,
    // 1,023 / 0.051 s = 20,059 requests/s) before its clock starts.
    let secs: String = (0..3000)
        .map(|i| {
            format!(
                "{{\"timestamp\":{},\"input_length\":1,\"output_length\":1}}\n",
                i / 20
            )
        })
        .collect();
    let run = Cmd::new("trace-replay")
        .args(["--sim", "--quiet", "--limit", "1024"])
        .stdin(secs)
        .run();
    run.code(0).stderr_has(
        "warning: timestamps look like seconds, not milliseconds: the trace would replay at \
         20059 requests/s on average over its 1024 records",
    );
    // trace-gen's sessions: no alarm (the turns are sent after their
    // previous turn; the simulated server answers at once).
    let run = Cmd::new("trace-replay")
        .args([
            "--sim",
            "--quiet",
            "--sim-arg=--ttft-ms=0",
            "--sim-arg=--itl-ms=0",
        ])
        .stdin(sessions_trace(600))
        .run();
    run.code(0);
    assert!(!run.stderr.contains("seconds"), "{}", run.stderr);
    assert_eq!(run.json_lines().len(), 1200);
}

#[test]
fn whole_seconds_at_a_few_requests_a_second_are_said_before_sending() {
    // 300 records, three to each whole unit from 0 to 99 (a trace in
    // seconds at 3 requests/s): as milliseconds, 299 / 0.099 s = 3,020
    // requests/s, under the seconds warning's 10,000. validate notes it
    // (and passes --strict); replay warns before it sends.
    let secs: String = (0..300)
        .map(|i| {
            format!(
                "{{\"timestamp\":{},\"input_length\":1,\"output_length\":1}}\n",
                i / 3
            )
        })
        .collect();
    let note = "timestamps are whole numbers, 3020 requests/s on average over 300 records read \
                as milliseconds: if they are seconds, trace-rescale --speed 0.001 converts them";
    run_stdin("trace-validate", &["--strict", "--check"], secs.clone())
        .code(0)
        .stderr_is(format!("trace-validate: note: {note}\n"));
    let run = Cmd::new("trace-replay")
        .args([
            "--sim",
            "--quiet",
            "--sim-arg=--ttft-ms=0",
            "--sim-arg=--itl-ms=0",
        ])
        .stdin(secs)
        .run();
    run.code(0)
        .stderr_has(&format!("trace-replay: warning: {note}\n"));
}

// ---- timestamps on some records only ----

#[test]
fn replay_refuses_timestamps_on_some_records_only_before_sending() {
    // Line 1 has no timestamp, line 2 one at 9999999999999 ms: validate
    // refuses line 2, and replay refuses it the same way, before it sends
    // (it waited 317 years for it before).
    let file = data("checks/replay_mixed_timestamps_1e13.jsonl");
    let name = file.display().to_string();
    run_file("trace-validate", &["--check"], &file)
        .code(1)
        .stderr_has(&format!(
            "{name}:2: error: field `timestamp`: present, but the first record (line 1) has none"
        ));
    let run = run_file("trace-replay", &["--sim", "--quiet"], &file);
    run.code(2).stderr_has(&format!(
        "trace-replay: {name}:2: error: field `timestamp`: present, but the first record (line \
         1) has none: give every record a timestamp, or none"
    ));
    assert!(run.stdout.is_empty(), "nothing sent: {}", run.stdout_str());
    // --skip-invalid: line 2 is skipped, line 1 is sent.
    let run = run_file(
        "trace-replay",
        &["--sim", "--quiet", "--skip-invalid"],
        &file,
    );
    run.code(0);
    assert_eq!(
        columns(&run.json_lines(), "index status"),
        vec![json!([0, "ok"])]
    );
}

// ---- prompt lengths ----

#[test]
fn replay_warns_when_the_server_counts_other_prompt_lengths() {
    // The server reports 1333 prompt tokens for each of 3 records that
    // asked for 1024: +309 each, 3 of 3 ok results differ.
    let server = Scripted::start(|_| {
        Answer::json(
            "200 OK",
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1333,"completion_tokens":2}}"#,
        )
    });
    let records: Vec<Value> = (0..3)
        .map(|i| json!({"timestamp": i, "input_length": 1024, "output_length": 2}))
        .collect();
    let run = Cmd::new("trace-replay")
        .args([
            "--quiet",
            "--no-stream",
            "--url",
            &server.url,
            "--model",
            "m",
        ])
        .stdin(trace(&records))
        .run();
    run.code(0).stderr_has(
        "trace-replay: warning: the server counted other prompt lengths than the trace's \
         input_length in 3 of 3 ok results (prompt_tokens - input_length: +309, mean +309.0): \
         the load sent is not the one asked for. Synthesized prompts are exact in the tokenizer \
         they are made for (--tokenizer, o200k_base unless given: give the served model's), and \
         a chat endpoint adds its chat template's tokens (--endpoint completions sends the \
         prompt alone); trace-summarize reports the difference as input_length_error\n",
    );
    // The simulated server counts the prompts as asked: no warning.
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--sim"])
        .stdin(trace(&records))
        .run();
    run.code(0);
    assert!(!run.stderr.contains("prompt lengths"), "{}", run.stderr);
}

// ---- convert: the rules on `after` ----

#[test]
fn dynamo_wait_for_cycles_and_unknown_ids_are_refused() {
    // parent-1 (line 1) waits for parent-2, a later row (which waits for
    // it): a cycle, refused at line 1.
    let file = data("checks/dynamo_wait_for_cycle.jsonl");
    let name = file.display().to_string();
    let run = run_file("trace-convert", &["--from", "dynamo"], &file);
    run.code(2).stderr_has(&format!(
        "{name}:1: error: field `wait_for`: \"parent-2\" is the request_id of no row before this \
         one: a row waits only for earlier rows (a cycle, or a row not in the trace)"
    ));
    assert!(run.stdout.is_empty());
    // Skipped instead, each row that waits for a skipped one goes too, as
    // trace-validate would refuse them: nothing is left to write.
    let run = run_file(
        "trace-convert",
        &["--from", "dynamo", "--skip-invalid"],
        &file,
    );
    run.code(0);
    assert!(run.stdout.is_empty());
    // A row that waits for one that starts after it.
    let dir = TestDir::new("dynamo-later");
    let rows = "{\"request_id\":\"a\",\"session_id\":\"s\",\"input_length\":10,\"output_length\":2,\"timestamp\":500}\n\
                {\"request_id\":\"b\",\"session_id\":\"s\",\"input_length\":10,\"output_length\":2,\"timestamp\":100,\"wait_for\":[\"a\"]}\n";
    let input = dir.write("later.jsonl", rows);
    run_file("trace-convert", &["--from", "dynamo"], &input)
        .code(2)
        .stderr_has(
            "later.jsonl:2: error: field `wait_for`: \"a\" starts 400 ms after this row: written \
             in order of arrival, this row would come before what it waits for",
        );
}

/// `trace-convert args file`, which must succeed; its records, which
/// trace-validate must pass.
fn converted(args: &[&str], file: &Path) -> Vec<u8> {
    let run = run_file("trace-convert", args, file);
    run.code(0);
    run_stdin("trace-validate", &["--check"], run.stdout.clone()).code(0);
    run.stdout
}

#[test]
fn kv_cache_tester_calls_listed_out_of_time_order_convert_as_in_order() {
    // The real excerpt with agent_001's first two calls listed in swapped
    // order (t 5 before t 0): taken in order of t, the session converts to
    // the very records of the excerpt as listed, and trace-validate passes
    // them (before, `after` named a later record).
    let unsorted = converted(
        &["--from", "kv-cache-tester"],
        &data("checks/kv_cache_tester_subagent_calls_unsorted.json"),
    );
    let sorted = converted(
        &["--from", "kv-cache-tester"],
        &data("convert/kv_cache_tester_trace_0291.requests15-19.json"),
    );
    crate::util::assert_text_eq(
        &String::from_utf8(sorted).unwrap(),
        &String::from_utf8(unsorted).unwrap(),
    );
}

#[test]
fn tracelab_rounds_in_reverse_file_order_are_chained_by_arrival() {
    // The real file's lines reversed: each session's rounds are chained in
    // order of arrival all the same, and the records are those of the file
    // as it is.
    let reversed = converted(
        &["--from", "tracelab"],
        &data("checks/tracelab_rounds_reversed.jsonl"),
    );
    let in_order = converted(
        &["--from", "tracelab"],
        &data("convert/tracelab_sanitized_round_trace.jsonl"),
    );
    crate::util::assert_text_eq(
        &String::from_utf8(in_order).unwrap(),
        &String::from_utf8(reversed).unwrap(),
    );
    // Each later round waits for the round before it (by round_index).
    let rows: Vec<Value> = std::fs::read_to_string(data("checks/tracelab_rounds_reversed.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let run = run_file(
        "trace-convert",
        &["--from", "tracelab"],
        data("checks/tracelab_rounds_reversed.jsonl"),
    );
    for r in run.json_lines() {
        let id = r["id"].as_str().unwrap();
        let row = rows.iter().find(|x| x["round_id"] == id).unwrap();
        let k = row["round_index"].as_u64().unwrap();
        let before = rows
            .iter()
            .find(|x| x["session_id"] == row["session_id"] && x["round_index"] == k.wrapping_sub(1))
            .map(|x| json!([x["round_id"]]));
        assert_eq!(r.get("after").cloned(), before, "{r}");
    }
}

// ---- convert -o ----

#[test]
fn convert_output_is_written_whole_or_not_at_all() {
    let dir = TestDir::new("convert-o");
    dir.copy_data("cycle.jsonl", "checks/dynamo_wait_for_cycle.jsonl");
    dir.copy_data(
        "ok.jsonl",
        "convert/dynamo_agentic_mooncake.constructed.jsonl",
    );
    // A conversion that fails leaves no FILE, and no temporary file.
    dir.run(
        "trace-convert",
        &["--from", "dynamo", "-o", "out.jsonl", "cycle.jsonl"],
    )
    .code(2);
    assert_eq!(listing(&dir.path), vec!["cycle.jsonl", "ok.jsonl"]);
    // One that succeeds writes FILE, and leaves nothing else.
    dir.run(
        "trace-convert",
        &["--from", "dynamo", "-o", "out.jsonl", "ok.jsonl"],
    )
    .code(0);
    assert_eq!(
        listing(&dir.path),
        vec!["cycle.jsonl", "ok.jsonl", "out.jsonl"]
    );
    let whole = std::fs::read(dir.join("out.jsonl")).unwrap();
    assert!(!whole.is_empty());
    // A failed one leaves an earlier FILE as it was.
    dir.run(
        "trace-convert",
        &["--from", "dynamo", "-o", "out.jsonl", "cycle.jsonl"],
    )
    .code(2);
    assert_eq!(std::fs::read(dir.join("out.jsonl")).unwrap(), whole);
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn convert_killed_by_sigterm_leaves_no_empty_output() {
    // A conversion reading a pipe that has not ended, killed with SIGTERM:
    // FILE was never created, and the partial file is removed before the
    // signal ends the process as it would have.
    let dir = TestDir::new("convert-sigterm");
    let mut child = std::process::Command::new(crate::util::bin("trace-convert"))
        .args(["--from", "mooncake", "-o", "out.jsonl"])
        .current_dir(&dir.path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    stdin
        .write_all(b"{\"timestamp\":0,\"input_length\":10,\"output_length\":2}\n")
        .unwrap();
    // The partial file is made when the output is opened, at the start.
    for _ in 0..1000 {
        if !listing(&dir.path).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on a child the test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    drop(stdin);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    assert_eq!(listing(&dir.path), Vec::<String>::new());
}

// ---- promptflow ----

#[test]
fn promptflow_llm_spans_are_model_calls() {
    // promptflow's own example span (a real file of its tests): span_type
    // LLM, usage as text under llm.usage.*, the answer's model under
    // llm.response.model. 06:37:22.332582 to 06:37:26.445007 is 4112.425 ms.
    let file = data("convert/promptflow.large-data-span-example.json");
    let run = run_file("trace-convert", &["--from", "otel"], &file);
    run.code(0);
    let recs = run.json_lines();
    assert_eq!(
        columns(
            &recs,
            "timestamp input_length output_length model id observed.e2e_ms"
        ),
        vec![json!([0, 1497, 14, "gpt-4", "3a3596a19efef900", 4112.425])]
    );
    // The console exporter's output of a promptflow flow: 6 spans (Flow,
    // Function, Embedding, Retrieval, LLM, Function), one model call; the
    // Flow's cumulative counts and the embedding call are not one. 120
    // prompt and 30 completion tokens, 09:30:00.250 to 09:30:01.650.
    let file = data("convert/containers/promptflow_console_exporter.constructed.txt");
    let run = run_file("trace-convert", &["--from", "otel"], &file);
    run.code(0).stderr_has("6 spans read, 1 model call");
    assert_eq!(
        columns(
            &run.json_lines(),
            "timestamp input_length output_length model id observed.e2e_ms"
        ),
        vec![json!([
            0,
            120,
            30,
            "gpt-4o-mini-2024-07-18",
            "5e4d3c2b1a0f9b84",
            1400
        ])]
    );
}

// ---- summarize: errors by message ----

/// Two ok results, three context-overflow 400s, a timeout and a 503.
fn errors_results(dir: &TestDir) -> std::path::PathBuf {
    let ok = |i: u64| {
        json!({"index": i, "sent_ms": i, "ttft_ms": 10.0, "e2e_ms": 20.0, "itl_ms": [],
               "prompt_tokens": 5, "completion_tokens": 1, "status": "ok", "http_status": 200})
    };
    let failed = |i: u64, status: &str, http: Option<u16>, error: &str| {
        json!({"index": i, "sent_ms": i, "e2e_ms": 5.0, "itl_ms": [], "status": status,
               "http_status": http, "error": error})
    };
    let overflow = "HTTP 400: This model's maximum context length is 4096 tokens";
    let lines = [
        ok(0),
        failed(1, "error", Some(400), overflow),
        failed(2, "timeout", None, "no answer within 10s"),
        failed(3, "error", Some(400), overflow),
        ok(4),
        failed(5, "error", Some(503), "HTTP 503: overloaded"),
        failed(6, "error", Some(400), overflow),
    ];
    dir.write("results.ndjson", trace(&lines))
}

#[test]
fn summarize_lists_the_errors_by_message_and_status() {
    let dir = TestDir::new("summarize-errors");
    let results = errors_results(&dir);
    // Counted by hand: the 400 three times, then the 503 and the timeout
    // once each (equal counts in the order of status, then HTTP status).
    let j = crate::util::summary_json(&[], &results);
    assert_eq!(
        j["errors"],
        json!([
            {"count": 3, "status": "error", "http_status": 400,
             "message": "HTTP 400: This model's maximum context length is 4096 tokens"},
            {"count": 1, "status": "error", "http_status": 503, "message": "HTTP 503: overloaded"},
            {"count": 1, "status": "timeout", "http_status": null, "message": "no answer within 10s"}
        ])
    );
    let text = crate::util::summary_text(&[], &results);
    let table = &text[text.find("not ok").expect("the errors table")..];
    crate::util::assert_text_eq(
        "not ok  status   HTTP  error\n\
         3       error    400   HTTP 400: This model's maximum context length is 4096 tokens\n\
         1       error    503   HTTP 503: overloaded\n\
         1       timeout  -     no answer within 10s\n",
        &table[..=table.find("\n\n").expect("a blank line after it")],
    );
    // The CSV keeps its columns (the list is not one of them).
    let csv = run_file("trace-summarize", &["--format", "csv"], &results);
    csv.code(0);
    assert!(!csv.stdout_str().contains("maximum context"));
    // The web page (the plot's) shows the table.
    dir.run(
        "trace-summarize",
        &["--plot", "page.html", "results.ndjson"],
    )
    .code(0);
    let page = std::fs::read_to_string(dir.join("page.html")).unwrap();
    assert!(
        page.contains("HTTP 503: overloaded"),
        "the page lists the errors"
    );
    // The spreadsheet has them on a sheet of their own.
    dir.run(
        "trace-summarize",
        &["--format", "xlsx", "-o", "r.xlsx", "results.ndjson"],
    )
    .code(0);
    let mut book: Xlsx<_> = open_workbook(dir.join("r.xlsx")).unwrap();
    assert_eq!(book.sheet_names(), ["summary", "requests", "errors"]);
    let rows: Vec<Vec<Data>> = book
        .worksheet_range("errors")
        .unwrap()
        .rows()
        .map(|r| r.to_vec())
        .collect();
    let text = |t: &str| Data::String(t.to_string());
    assert_eq!(
        rows,
        vec![
            vec![
                text("count"),
                text("status"),
                text("http_status"),
                text("message")
            ],
            vec![
                Data::Float(3.0),
                text("error"),
                Data::Float(400.0),
                text("HTTP 400: This model's maximum context length is 4096 tokens")
            ],
            vec![
                Data::Float(1.0),
                text("error"),
                Data::Float(503.0),
                text("HTTP 503: overloaded")
            ],
            vec![
                Data::Float(1.0),
                text("timeout"),
                Data::Empty,
                text("no answer within 10s")
            ],
        ]
    );
}

// ---- https:// to a plain-HTTP server ----

#[test]
fn https_to_a_plain_http_server_says_the_server_may_not_speak_tls() {
    // A plain server that waits for a request line (the TLS greeting has
    // none) and answers plain HTTP: the handshake never ends, and the
    // replay says why at the start instead of timing out each request.
    let server = Raw::start(std::sync::Arc::new(|_, _, conn| hold_open(conn)));
    let port = server.url.rsplit(':').next().unwrap().to_string();
    let url = format!("https://127.0.0.1:{port}");
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", &url, "--model", "m"])
        .stdin("{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\n")
        .run();
    run.code(2).stderr_has(&format!(
        "but it answers plain HTTP: the server may not speak TLS; give --url http://127.0.0.1:{port}"
    ));
}

// ---- scripts/install-extras.sh ----

#[test]
fn install_extras_says_it_builds_and_uses_the_release_profile() {
    // A `cargo` on PATH that only notes how it was called: the script's
    // own words and the build it asks for, without building.
    let dir = TestDir::new("install-extras");
    std::fs::create_dir(dir.join("bin")).unwrap();
    let fake = dir.write(
        "bin/cargo",
        "#!/bin/sh\nprintf '%s\\n' \"$*\" > \"$CARGO_CALLED\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prefix = dir.join("prefix");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-extras.sh");
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let out = std::process::Command::new("sh")
        .arg(&script)
        .arg(&prefix)
        .env("PATH", &path)
        .env("CARGO_CALLED", dir.join("called"))
        .output()
        .unwrap();
    let run = crate::util::Run {
        desc: "sh scripts/install-extras.sh".into(),
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    run.code(0)
        .stderr_has("building the completions writer (cargo, release profile");
    assert_eq!(
        std::fs::read_to_string(dir.join("called")).unwrap(),
        format!(
            "run --quiet --release --locked --example completions -- {}/share\n",
            prefix.display()
        )
    );
    assert!(prefix.join("share/man/man1/trace-replay.1").is_file());
}
