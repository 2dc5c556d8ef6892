//! trace-convert --from otel on small files of our own: one per attribute
//! variant, and one per kind of bad input.

use serde_json::{Value, json};

use crate::otel::{assert_records, ns, otlp, records, span};
use crate::util::{Cmd, TestDir, columns, data, run_stdin};

#[test]
fn nineteen_digit_nanoseconds_are_read_exactly() {
    let dir = TestDir::new("otel-ns");
    // As doubles both times would be 256 ns apart at best: 1000501 ns
    // would come out as 1000448 (1.000 ms, not 1.001).
    let a = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 2});
    let path = dir.write(
        "t.jsonl",
        otlp(&[
            span("t1", "a", "", &ns(0), &ns(1_000_501), a.clone()),
            span("t2", "b", "", &ns(1_000_501), &ns(3_000_000), a),
        ]),
    );
    let got = records(&Cmd::new("trace-convert").arg(&path).run());
    assert_eq!(got[0]["observed"]["e2e_ms"], json!(1.001));
    assert_eq!(got[1]["timestamp"], json!(1.001));
    assert_eq!(got[1]["observed"]["e2e_ms"], json!(1.999));
}

#[test]
fn old_and_new_usage_names_cache_reads_and_ttft_units() {
    let dir = TestDir::new("otel-names");
    let spans = [
        // Current names, TTFT in seconds, a conversation id.
        span(
            "t1",
            "new",
            "",
            &ns(0),
            &ns(2_000_000_000),
            json!({
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m-req",
            "gen_ai.response.model": "m-resp",
            "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
            "gen_ai.usage.cache_read.input_tokens": 512,
            "gen_ai.response.time_to_first_chunk": 0.25,
            "gen_ai.conversation.id": "c1"}),
        ),
        // Older names; a gateway's TTFT in integer nanoseconds.
        span(
            "t2",
            "old",
            "",
            &ns(3_000_000_000),
            &ns(4_000_000_000),
            json!({
            "gen_ai.request.model": "m-req",
            "gen_ai.usage.prompt_tokens": 700, "gen_ai.usage.completion_tokens": 7,
            "gen_ai.response.time_to_first_token": 123_456_789,
            "gen_ai.conversation.id": "c1"}),
        ),
        // OpenInference names, session.id.
        span(
            "t3",
            "oi",
            "",
            &ns(5_000_000_000),
            &ns(6_000_000_000),
            json!({
            "openinference.span.kind": "LLM", "llm.model_name": "m-oi",
            "llm.token_count.prompt": 300, "llm.token_count.completion": 30,
            "llm.token_count.prompt_details.cache_read": 256,
            "session.id": "s9"}),
        ),
        span(
            "t4",
            "oi2",
            "",
            &ns(7_000_000_000),
            &ns(8_000_000_000),
            json!({
            "openinference.span.kind": "LLM", "llm.model_name": "m-oi",
            "llm.token_count.prompt": 30, "llm.token_count.completion": 3,
            "session.id": "s9"}),
        ),
    ];
    let path = dir.write("t.jsonl", otlp(&spans));
    let got = records(&Cmd::new("trace-convert").arg(&path).run());
    assert_records(
        &got,
        &[
            json!({"timestamp": 0, "input_length": 1000, "output_length": 50, "session_id": "c1",
                "model": "m-resp", "id": "new",
                "observed": {"prompt_tokens": 1000, "completion_tokens": 50, "ttft_ms": 250,
                    "e2e_ms": 2000, "cached_tokens": 512, "status": "ok"}}),
            json!({"timestamp": 3000, "input_length": 700, "output_length": 7, "session_id": "c1",
                "model": "m-req", "id": "old",
                "observed": {"prompt_tokens": 700, "completion_tokens": 7, "ttft_ms": 123.457,
                    "e2e_ms": 1000, "status": "ok"},
                "after": ["new"], "delay": 1000}),
            json!({"timestamp": 5000, "input_length": 300, "output_length": 30, "session_id": "s9",
                "model": "m-oi", "id": "oi",
                "observed": {"prompt_tokens": 300, "completion_tokens": 30, "e2e_ms": 1000,
                    "cached_tokens": 256, "status": "ok"}}),
            json!({"timestamp": 7000, "input_length": 30, "output_length": 3, "session_id": "s9",
                "model": "m-oi", "id": "oi2",
                "observed": {"prompt_tokens": 30, "completion_tokens": 3, "e2e_ms": 1000, "status": "ok"},
                "after": ["oi"], "delay": 1000}),
        ],
    );
}

#[test]
fn enum_names_and_numbers_status_error_and_first_token_event() {
    let dir = TestDir::new("otel-enums");
    let usage = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5,
        "gen_ai.usage.output_tokens": 1});
    let mut by_name = span("t1", "named", "", &ns(0), &ns(10_000_000), usage.clone());
    by_name["kind"] = json!("SPAN_KIND_CLIENT");
    by_name["status"] = json!({"code": "STATUS_CODE_ERROR"});
    let mut by_number = span(
        "t2",
        "numbered",
        "",
        &ns(20_000_000),
        &ns(30_000_000),
        usage.clone(),
    );
    by_number["status"] = json!({"code": 2});
    let mut typed = span(
        "t3",
        "errtype",
        "",
        &ns(40_000_000),
        &ns(50_000_000),
        usage.clone(),
    );
    typed["attributes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "error.type", "value": {"stringValue": "timeout"}}));
    let mut ok = span("t4", "fine", "", &ns(60_000_000), &ns(70_000_000), usage);
    ok["status"] = json!({"code": "STATUS_CODE_OK"});
    ok["events"] = json!([{"name": "gen_ai.content.first_token", "timeUnixNano": ns(62_500_000)}]);
    let path = dir.write("t.jsonl", otlp(&[by_name, by_number, typed, ok]));
    let run = Cmd::new("trace-convert").arg(&path).run();
    let got = records(&run);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], "fine");
    assert_eq!(got[0]["observed"]["ttft_ms"], json!(2.5));
    run.stderr_has("4 records read, 1 written, 3 dropped (3 failed)");
}

#[test]
fn wrappers_and_double_exports_are_one_call() {
    let dir = TestDir::new("otel-wrap");
    let usage = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 4, "gen_ai.response.id": "r1"});
    let spans = [
        // The client's span, over the gateway's span (its grandchild).
        span("t1", "client", "", &ns(0), &ns(100_000_000), usage.clone()),
        span(
            "t1",
            "http",
            "client",
            &ns(1_000_000),
            &ns(99_000_000),
            json!({"http.method": "POST"}),
        ),
        span(
            "t1",
            "gateway",
            "http",
            &ns(2_000_000),
            &ns(98_000_000),
            usage.clone(),
        ),
        // The gateway's span exported again under another id.
        span(
            "t1",
            "gateway-again",
            "http",
            &ns(2_000_000),
            &ns(98_000_000),
            usage,
        ),
    ];
    let path = dir.write("t.jsonl", otlp(&spans));
    let run = Cmd::new("trace-convert").arg(&path).run();
    let got = records(&run);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], "gateway");
    run.stderr_has(&format!(
        "{path}: 4 spans read, 3 model calls (1 wrapper of another call, 1 duplicate left out)\n",
        path = path.display()
    ));
}

#[test]
fn one_trace_becomes_a_graph_fan_out_and_join() {
    let dir = TestDir::new("otel-graph");
    let u = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 1});
    let ms = |m: u64| ns(m * 1_000_000);
    let spans = [
        span("t", "plan", "", &ms(0), &ms(100), u.clone()),
        span("t", "left", "", &ms(120), &ms(300), u.clone()),
        span("t", "right", "", &ms(130), &ms(250), u.clone()),
        span("t", "join", "", &ms(320), &ms(400), u.clone()),
        span("other", "alone", "", &ms(350), &ms(360), u),
    ];
    let path = dir.write("t.jsonl", otlp(&spans));
    let got = records(&Cmd::new("trace-convert").arg(&path).run());
    let deps: Vec<_> = got
        .iter()
        .map(|r| json!([r["id"], r["timestamp"], r["after"], r["delay"]]))
        .collect();
    assert_eq!(
        deps,
        vec![
            json!(["plan", 0, null, null]),
            json!(["left", 120, ["plan"], 20]),
            json!(["right", 130, ["plan"], 30]),
            json!(["join", 320, ["left", "right"], 20]),
            json!(["alone", 350, null, null]),
        ]
    );
}

#[test]
fn keep_messages_maps_otel_parts_to_openai_messages() {
    let dir = TestDir::new("otel-parts");
    let input = json!([
        {"role": "user", "parts": [{"type": "text", "content": "weather in Paris?"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "weather",
            "arguments": {"city": "Paris"}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18C"}]},
    ]);
    let attrs = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.system_instructions": "[{\"type\":\"text\",\"content\":\"Be brief.\"}]",
        "gen_ai.input.messages": input.to_string()});
    let old = json!({"gen_ai.usage.prompt_tokens": 9, "gen_ai.usage.completion_tokens": 2,
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "S",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "U"});
    let path = dir.write(
        "t.jsonl",
        otlp(&[
            span("t1", "a", "", &ns(0), &ns(1_000_000), attrs),
            span("t2", "b", "", &ns(2_000_000), &ns(3_000_000), old),
        ]),
    );
    let got = records(
        &Cmd::new("trace-convert")
            .args(["--keep-messages"])
            .arg(&path)
            .run(),
    );
    assert_eq!(
        got[0]["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        ])
    );
    assert_eq!(got[0]["observed"]["prompt_tokens"], 40);
    assert_eq!(
        got[1]["messages"],
        json!([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    );
    // Without the flag no text leaves: hash_ids instead.
    let run = Cmd::new("trace-convert").arg(&path).run();
    run.code(0);
    assert!(!run.stdout_str().contains("Paris"));
    assert_eq!(run.json_lines()[0]["hash_ids"], json!([0]));
}

#[test]
fn media_parts_of_prompts_are_left_out_and_counted_in_the_note() {
    let dir = TestDir::new("otel-media");
    let media = json!([
        {"role": "user", "parts": [
            {"type": "text", "content": "what is on these?"},
            {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "aGk="},
            {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
            {"type": "blob", "mime_type": "audio/wav", "content": "aGk="}]},
    ]);
    let text = json!([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]);
    let attrs = |messages: &Value| {
        json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 40,
            "gen_ai.usage.output_tokens": 4, "gen_ai.input.messages": messages.to_string()})
    };
    let path = dir.write(
        "t.jsonl",
        otlp(&[
            span("t1", "a", "", &ns(0), &ns(1_000_000), attrs(&media)),
            span("t2", "b", "", &ns(2_000_000), &ns(3_000_000), attrs(&text)),
        ]),
    );
    // Two images (one by its modality, one by URI) and an audio part (by
    // its MIME type), all in the first call; its text is kept.
    let note = "2 spans read, 2 model calls; 3 media parts (1 audio, 2 image) left out of \
                the prompts of 1 call: only text is hashed or sent";
    let run = Cmd::new("trace-convert")
        .args(["--keep-messages"])
        .arg(&path)
        .run();
    let got = records(&run);
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0]["messages"],
        json!([{"role": "user", "content": "what is on these?"}])
    );
    run.stderr_has(note);
    let run = Cmd::new("trace-convert").arg(&path).run();
    assert_eq!(records(&run).len(), 2);
    run.stderr_has(note);
}

// ---- Bad input. ----

#[test]
fn malformed_line_names_file_and_line_and_skip_invalid_goes_on() {
    let dir = TestDir::new("otel-bad");
    let u = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 1});
    let good = otlp(&[span("t", "a", "", &ns(0), &ns(1_000_000), u)]);
    let path = dir.write("bad.jsonl", format!("{good}\n{{\"resourceSpans\": [\n"));
    let run = Cmd::new("trace-convert")
        .current_dir(&dir.join(""))
        .arg("bad.jsonl")
        .run();
    run.code(2);
    run.stderr_has("trace-convert: bad.jsonl:2:");
    run.stderr_has("error: malformed JSON");
    let run = Cmd::new("trace-convert")
        .args(["--skip-invalid"])
        .arg(&path)
        .run();
    run.code(0);
    assert_eq!(run.json_lines().len(), 1);
}

#[test]
fn unknown_attribute_type_names_the_attribute_and_the_span() {
    let dir = TestDir::new("otel-type");
    let mut s = span(
        "t",
        "abc123",
        "",
        &ns(0),
        &ns(1_000_000),
        json!({"gen_ai.operation.name": "chat"}),
    );
    s["attributes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "gen_ai.usage.input_tokens", "value": {"bigValue": "7"}}));
    dir.write("t.jsonl", format!("\n{}\n", otlp(&[s])));
    let run = Cmd::new("trace-convert")
        .current_dir(&dir.join(""))
        .arg("t.jsonl")
        .run();
    run.code(2);
    assert_eq!(
        run.stderr.lines().last().unwrap(),
        "trace-convert: t.jsonl:2: error: field `gen_ai.usage.input_tokens`: span abc123: unknown attribute type `bigValue`"
    );
}

#[test]
fn bad_time_and_bad_count_name_span_field_and_value() {
    let dir = TestDir::new("otel-time");
    let u = json!({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 1});
    let mut s = span("t", "s1", "", "17816270992482091200000", &ns(1), u);
    s["startTimeUnixNano"] = json!("soon");
    let mut c = span(
        "t",
        "s2",
        "",
        &ns(0),
        &ns(1),
        json!({"gen_ai.operation.name": "chat"}),
    );
    c["attributes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "gen_ai.usage.output_tokens", "value": {"stringValue": "many"}}));
    // A pretty-printed document: each span's line is where its id is.
    let doc = serde_json::to_string_pretty(
        &json!({"resourceSpans": [{"scopeSpans": [{"spans": [s, c]}]}]}),
    )
    .unwrap();
    dir.write("t.json", &doc);
    let run = Cmd::new("trace-convert")
        .current_dir(&dir.join(""))
        .args(["--skip-invalid", "--from", "otel", "t.json"])
        .run();
    let line_of = |id: &str| {
        doc.lines()
            .position(|l| l.contains(&format!("\"{id}\"")))
            .unwrap()
            + 1
    };
    run.stderr_has(&format!(
            "t.json:{}: warning: field `startTimeUnixNano`: span s1: expected a time, found \"soon\" (skipped)",
            line_of("s1")
        ));
    run.stderr_has(&format!(
            "t.json:{}: warning: field `gen_ai.usage.output_tokens`: span s2: expected an integer ≥ 0, found \"many\" (skipped)",
            line_of("s2")
        ));
    run.stderr_has("t.json: 2 spans read, 0 model calls\n");
    run.stderr_has("2 records read, 0 written, 2 invalid");
}

#[test]
fn a_document_of_no_spans_is_an_error() {
    let run = run_stdin("trace-convert", &["--from", "otel"], "{\"hello\": 1}\n");
    run.code(2);
    run.stderr_has(
        "trace-convert: <stdin>:1: error: not an OpenTelemetry document or span (keys: hello)",
    );
}

#[test]
fn phoenix_span_json_nested_attributes_and_error_status() {
    let dir = TestDir::new("otel-phoenix");
    let span = |id: &str, start: &str, end: &str, status: &str, prompt: u64| {
        json!({"name": "ChatCompletion", "span_kind": "LLM", "parent_id": null,
            "context": {"trace_id": "tr", "span_id": id},
            "start_time": start, "end_time": end, "status_code": status,
            "attributes": {"llm": {"model_name": "gpt-4o",
                    "token_count": {"prompt": prompt, "completion": 5,
                        "prompt_details": {"cache_read": 64}}},
                "session": {"id": "sess-1"}}})
    };
    let doc = json!([
        span(
            "p1",
            "2026-02-03T10:00:00.000000+00:00",
            "2026-02-03T10:00:01.250000+00:00",
            "OK",
            100
        ),
        span(
            "p2",
            "2026-02-03T10:00:02.000000+00:00",
            "2026-02-03T10:00:03.000000+00:00",
            "ERROR",
            120
        ),
        span(
            "p3",
            "2026-02-03T10:00:04.000000+00:00",
            "2026-02-03T10:00:05.000000+00:00",
            "UNSET",
            140
        ),
    ]);
    let path = dir.write("phoenix.json", serde_json::to_string_pretty(&doc).unwrap());
    let run = Cmd::new("trace-convert").arg(&path).run();
    // The failed call is dropped, but it still ended before p3 started:
    // p3 waits for p1 only among the records written.
    let summary = columns(
        &records(&run),
        "id timestamp input_length session_id observed.cached_tokens after delay",
    );
    assert_eq!(
        summary,
        vec![
            json!(["p1", 0, 100, "sess-1", 64, null, null]),
            json!(["p3", 4000, 140, "sess-1", 64, ["p1"], 2750]),
        ]
    );
    run.stderr_has("3 records read, 2 written, 1 dropped (1 failed)");
}

#[test]
fn a_call_with_no_output_count_and_no_max_tokens_is_dropped_and_counted() {
    let dir = TestDir::new("otel-nousage");
    let spans = [
        span(
            "t",
            "counted",
            "",
            &ns(0),
            &ns(1_000_000),
            json!({"gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 1}),
        ),
        span(
            "t",
            "bare",
            "",
            &ns(2_000_000),
            &ns(3_000_000),
            json!({"gen_ai.operation.name": "chat"}),
        ),
    ];
    let path = dir.write("t.jsonl", otlp(&spans));
    let run = Cmd::new("trace-convert").arg(&path).run();
    let got = records(&run);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], "counted");
    run.stderr_has("2 records read, 1 written, 1 dropped (1 with no output tokens)");
}

#[test]
fn langfuse_observations_of_one_trace_get_their_dependencies() {
    let path = data("convert/ui_trace_download.openai-agents-2025-09-30.json");
    let chain = Cmd::new("trace-convert").arg("--no-graph").arg(&path).run();
    chain.code(0);
    assert!(!chain.stdout_str().contains("\"after\""));
    // The graph is the default; `--graph` says so.
    let run = Cmd::new("trace-convert").arg(&path).run();
    assert_eq!(
        Cmd::new("trace-convert")
            .arg("--graph")
            .arg(&path)
            .run()
            .stdout,
        run.stdout
    );
    // 98870087af69bf06 ends at 09:04:00.999, 90d94774e8e3724d starts at
    // 09:04:01.001 (1038 ms after the first started).
    let summary = columns(&records(&run), "id timestamp session_id after delay");
    assert_eq!(
        summary,
        vec![
            json!([
                "98870087af69bf06",
                0,
                "fee618f96dc31e0ca38b2f7b26eb8b29",
                null,
                null
            ]),
            json!([
                "90d94774e8e3724d",
                1038,
                "fee618f96dc31e0ca38b2f7b26eb8b29",
                ["98870087af69bf06"],
                2
            ]),
        ]
    );
}
