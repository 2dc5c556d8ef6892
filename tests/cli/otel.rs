//! trace-convert --from otel: the shared span files of real producers
//! (values from the files themselves, checked by hand: offsets, durations,
//! token counts, and `after`/`delay` as end-to-start gaps), and one small
//! file of our own per attribute variant and per kind of bad input.

use serde_json::{Value, json};

use crate::util::{Cmd, Run, TestDir, columns, data, run_stdin};

fn fixture(name: &str) -> String {
    data(&format!("convert/otel/{name}"))
        .to_string_lossy()
        .into_owned()
}

/// `trace-convert` of one of the shared span files.
fn convert_fixture(name: &str) -> Run {
    Cmd::new("trace-convert").arg(fixture(name)).run()
}

/// `trace-convert` of a shared span file gives the records `want`
/// (`hash_ids` aside): the run, for its stderr.
#[track_caller]
fn converts_to(name: &str, want: &[Value]) -> Run {
    let run = convert_fixture(name);
    assert_records(&records(&run), want);
    run
}

/// Convert, expect success and valid output, and return the records
/// without `hash_ids` (checked apart).
#[track_caller]
fn records(run: &Run) -> Vec<Value> {
    run.code(0);
    let v = run_stdin(
        "trace-validate",
        &["--check", "--strict"],
        run.stdout.clone(),
    );
    v.code(0);
    run.json_lines()
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("hash_ids");
            r
        })
        .collect()
}

#[track_caller]
fn assert_records(got: &[Value], want: &[Value]) {
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w);
    }
}

#[test]
fn bifrost_gateway_tree_keeps_the_one_llm_call_with_its_nanosecond_ttft() {
    let run = converts_to(
        "bifrost.bigcodebench-0-zerostack.traces.jsonl",
        &[
            json!({"timestamp": 0, "input_length": 4061, "output_length": 116,
            "model": "azure/gpt-5.4", "id": "c813277cabaa4730",
            "observed": {"prompt_tokens": 4061, "completion_tokens": 116,
                "ttft_ms": 4.825, "e2e_ms": 4129.673, "status": "ok"}}),
        ],
    );
    run.stderr_has("recognised as otel input");
    run.stderr_has(": 15 spans read, 1 model call\n");
}

#[test]
fn bifrost_collector_export_out_of_order_parallel_calls() {
    let run = convert_fixture("bifrost.gaia-0-claude-code.traces.jsonl");
    let obs = |i: u64, o: u64, ttft: f64, e2e: f64, cached: Option<u64>| {
        let mut v = json!({"prompt_tokens": i, "completion_tokens": o,
            "ttft_ms": ttft, "e2e_ms": e2e});
        if let Some(c) = cached {
            v["cached_tokens"] = c.into();
        }
        v["status"] = "ok".into();
        v
    };
    let rec = |t: Value, id: &str, i: u64, o: u64, observed: Value| {
        json!({"timestamp": t, "input_length": i, "output_length": o,
            "model": "azure/gpt-5.4", "id": id, "observed": observed})
    };
    // Each call is its own trace: no dependencies.
    assert_records(
        &records(&run),
        &[
            rec(
                json!(0),
                "02efa845dc2246c1",
                11247,
                1016,
                obs(11247, 1016, 165.212, 36470.447, None),
            ),
            rec(
                json!(2.144),
                "9bfba7da476f4f2a",
                10474,
                1056,
                obs(10474, 1056, 11.663, 33230.587, None),
            ),
            rec(
                json!(69312.101),
                "d490d6d77d754b01",
                24372,
                2837,
                obs(24372, 2837, 24.798, 56461.573, Some(4224)),
            ),
            rec(
                json!(69313.403),
                "8daeb27a13bc48d8",
                10383,
                934,
                obs(10383, 934, 368.551, 22621.791, Some(4224)),
            ),
            rec(
                json!(125790.552),
                "fbef875edd5e4af4",
                25687,
                525,
                obs(25687, 525, 163.157, 15189.954, Some(21888)),
            ),
        ],
    );
    run.stderr_has(": 8 spans read, 5 model calls\n");
}

#[test]
fn exgentic_flat_spans_duplicates_left_out_and_a_chain_in_the_session() {
    let run = converts_to(
        "exgentic.tau2_retail_claude_code_315397.json",
        &[
            json!({"timestamp": 0, "input_length": 1690, "output_length": 161,
                "session_id": "6c59de4e", "model": "openai/gpt-oss-120b", "id": "3279bd88e74c0780",
                "observed": {"prompt_tokens": 1690, "completion_tokens": 161, "e2e_ms": 16.725, "status": "ok"}}),
            // 10:27:24.044838 - 10:27:22.608792 = 1436.046 ms.
            json!({"timestamp": 1452.771, "input_length": 1780, "output_length": 54,
                "session_id": "6c59de4e", "model": "openai/gpt-oss-120b", "id": "76d76fb8524c7ed3",
                "observed": {"prompt_tokens": 1780, "completion_tokens": 54, "e2e_ms": 8.945, "status": "ok"},
                "after": ["3279bd88e74c0780"], "delay": 1436.046}),
        ],
    );
    run.stderr_has(": 7 spans read, 4 model calls (2 duplicates left out)\n");
    run.stderr_has("has no time zone; naive date-times are taken as UTC");
}

#[test]
fn inference_perf_predecessor_parents_are_turns_not_wrappers() {
    let run = convert_fixture("inference-perf.prefix_sharing_example.json");
    let rec = |t: u64, id: &str, i: u64, o: u64, e2e: u64| {
        json!({"timestamp": t, "input_length": i, "output_length": o, "model": "gpt-4o", "id": id,
            "observed": {"prompt_tokens": i, "completion_tokens": o, "e2e_ms": e2e, "status": "ok"}})
    };
    // Turn k's parent is turn k-1: one trace, one session, a chain.
    let conv = |r: Value| {
        let mut m = r.as_object().unwrap().clone();
        let mut out = serde_json::Map::new();
        for (k, v) in m.iter_mut() {
            if k == "model" {
                out.insert("session_id".into(), json!("conversation_trace"));
            }
            out.insert(k.clone(), v.clone());
        }
        Value::Object(out)
    };
    let after = |r: Value, id: &str, delay: u64| {
        let mut r = conv(r);
        r["after"] = json!([id]);
        r["delay"] = delay.into();
        r
    };
    assert_records(
        &records(&run),
        &[
            rec(0, "span_independent_1", 50, 20, 1000),
            rec(2000, "span_independent_2", 45, 15, 1000),
            conv(rec(4000, "span_conv_turn1", 100, 50, 1000)),
            after(
                rec(6000, "span_conv_turn2", 180, 60, 1500),
                "span_conv_turn1",
                1000,
            ),
            after(
                rec(8000, "span_conv_turn3", 270, 70, 1800),
                "span_conv_turn2",
                500,
            ),
            after(
                rec(10000, "span_conv_turn4", 380, 55, 1500),
                "span_conv_turn3",
                200,
            ),
            rec(12000, "span_independent_3", 40, 10, 1000),
        ],
    );
}

/// The word-level tokenizer of the counting tests: one token per word
/// and per run of punctuation.
fn wordlevel() -> String {
    data("wordlevel-tokenizer.json")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn spans_without_token_counts_are_counted_from_their_text_and_marked() {
    // inference-perf's chain has no usage at all: the prompt (the rendered
    // conversation) and `gen_ai.output.text` are counted, and marked so.
    let path = fixture("inference-perf.simple_chain.json");
    let run = Cmd::new("trace-convert")
        .args(["--tokenizer", &wordlevel(), &path])
        .run();
    let got = records(&run);
    // "<|user|>\nWhat is the capital of France?\n": "<|", "user", "|>",
    // six words, "?": 10. The answer, "The capital of France is Paris.
    // Paris is not only the capital but also the largest city in France,
    // known for its art, fashion, gastronomy, and culture.": 26 words and 7
    // punctuation marks, 33.
    let counted = json!(["input_length", "output_length"]);
    assert_eq!(got[0]["input_length"], json!(10));
    assert_eq!(got[0]["output_length"], json!(33));
    assert_eq!(
        got[0]["observed"],
        json!({"e2e_ms": 2500, "counted": counted, "status": "ok"})
    );
    let lengths: Vec<_> = got
        .iter()
        .map(|r| {
            (
                r["timestamp"].clone(),
                r["output_length"].as_u64().unwrap() > 0,
                r["observed"]["counted"].clone(),
            )
        })
        .collect();
    assert_eq!(
        lengths,
        vec![
            (json!(0), true, counted.clone()),
            (json!(3000), true, counted.clone()),
            (json!(6000), true, counted.clone()),
        ]
    );
    assert_eq!(got[1]["after"], json!(["capital_question"]));
    assert_eq!(got[1]["delay"], json!(500));
    assert_eq!(got[2]["after"], json!(["landmarks_question"]));
    assert_eq!(got[2]["delay"], json!(1000));
    assert_eq!(got[0]["session_id"], json!("session"));
    // The text is there: max_tokens (500) is not used, and not warned of.
    assert!(!run.stderr.contains("max_tokens"), "{}", run.stderr);
    // The default tokenizer counts the prompt too (o200k_base: 12).
    let run = Cmd::new("trace-convert").arg(&path).run();
    assert_eq!(records(&run)[0]["input_length"], json!(12));
}

#[test]
fn each_output_attribute_is_counted_and_a_span_without_one_takes_max_tokens() {
    let dir = TestDir::new("otel-output-text");
    let chat = |extra: Value| {
        let mut attrs = json!({"gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 5, "gen_ai.request.max_tokens": 64});
        attrs
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        attrs
    };
    let parts = json!([{"role": "assistant", "parts": [{"type": "text", "content": "Rain later"}],
        "finish_reason": "stop"}]);
    let choices =
        json!({"choices": [{"message": {"role": "assistant", "content": "one two three"}}]});
    let variants = [
        // OTel output messages, as JSON text ("Rain", "later": 2).
        (
            "parts",
            json!({"gen_ai.output.messages": parts.to_string()}),
        ),
        // OpenInference: the response as JSON text, and indexed messages.
        ("value", json!({"output.value": choices.to_string()})),
        (
            "indexed",
            json!({"llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "a b c d"}),
        ),
        // OpenLLMetry's completions; the Vercel SDK's text.
        ("completion", json!({"gen_ai.completion.0.content": "x, y"})),
        ("vercel", json!({"ai.response.text": "hello"})),
        // No output text: max_tokens stands for it.
        ("bare", json!({})),
        ("bare2", json!({})),
    ];
    let spans: Vec<Value> = variants
        .iter()
        .enumerate()
        .map(|(i, (id, extra))| {
            let at = i as u64 * 10_000_000;
            span(
                "t",
                id,
                "",
                &ns(at),
                &ns(at + 1_000_000),
                chat(extra.clone()),
            )
        })
        .collect();
    // A failed call's text is not counted: it is left out as failed.
    let mut failed = span(
        "t",
        "failed",
        "",
        &ns(100_000_000),
        &ns(101_000_000),
        chat(json!({"ai.response.text": "partial", "error.type": "Timeout"})),
    );
    failed["status"] = json!({"code": 2});
    let mut all = spans;
    all.push(failed);
    let path = dir.write("t.jsonl", otlp(&all));
    let run = Cmd::new("trace-convert")
        .args(["--tokenizer", &wordlevel()])
        .arg(&path)
        .run();
    let got = records(&run);
    let lengths: Vec<(String, u64, Value)> = got
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["output_length"].as_u64().unwrap(),
                r["observed"]["counted"].clone(),
            )
        })
        .collect();
    let counted = json!(["output_length"]);
    assert_eq!(
        lengths,
        vec![
            ("parts".to_string(), 2, counted.clone()),
            ("value".to_string(), 3, counted.clone()),
            ("indexed".to_string(), 4, counted.clone()),
            // "x", ",", "y".
            ("completion".to_string(), 3, counted.clone()),
            ("vercel".to_string(), 1, counted.clone()),
            ("bare".to_string(), 64, Value::Null),
            ("bare2".to_string(), 64, Value::Null),
        ]
    );
    run.stderr_has(&format!(
            "{}:1: warning: span bare: no output token count; output_length is its gen_ai.request.max_tokens (64), and so for 1 more",
            path.display()
        ));
    run.stderr_has("8 records read, 7 written, 1 dropped (1 failed)");
}

#[test]
fn jaeger_download_microseconds_and_the_model_name_behind_unknown() {
    let run = convert_fixture("ioa-observe.jaeger.get-inventory.json");
    let got = records(&run);
    let summary: Vec<_> = columns(
        &got,
        "timestamp id input_length output_length observed.e2e_ms observed.cached_tokens after delay",
    );
    // Delays: 7389.553 - 7200.834; 10275.387 - (7389.553 + 1833.146);
    // 16818.745 - (10275.387 + 6483.561).
    assert_eq!(
        summary,
        vec![
            json!([0, "b33911a87194bf22", 806, 84, 7200.834, 0, null, null]),
            json!([
                7389.553,
                "2c89ebdbd82e0db3",
                3412,
                39,
                1833.146,
                0,
                ["b33911a87194bf22"],
                188.719
            ]),
            json!([
                10275.387,
                "e394c29c193051ea",
                3702,
                386,
                6483.561,
                0,
                ["2c89ebdbd82e0db3"],
                1052.688
            ]),
            json!([
                16818.745,
                "8c7cedce9613157e",
                1224,
                271,
                6832.569,
                0,
                ["e394c29c193051ea"],
                59.797
            ]),
        ]
    );
    for r in &got {
        assert_eq!(r["model"], "anthropic/claude-opus-4-5-20251101");
        assert_eq!(
            r["session_id"],
            "packetpanic.supervisor_bbc6ca13-1267-47cd-849a-795ff50a7874"
        );
    }
    run.stderr_has(": 77 spans read, 4 model calls\n");
}

#[test]
fn litellm_shaped_otlp_errors_dropped_unless_kept() {
    let path = fixture("litellm-migrated.naturalquestions-2165-aider.traces.jsonl");
    let run = Cmd::new("trace-convert").arg(&path).run();
    let got = records(&run);
    let io: Vec<_> = columns(&got, "timestamp input_length output_length model");
    // 1 ns apart: every timestamp rounds to 0, the order is the file's.
    assert_eq!(
        io,
        vec![
            json!([0, 137, 10, "azure/gpt-5.4"]),
            json!([0, 2655, 47, "azure/gpt-5.4"]),
            json!([0, 2747, 7, "azure/gpt-5.4"]),
        ]
    );
    run.stderr_has("5 records read, 3 written, 2 dropped (2 failed)");
    let kept = Cmd::new("trace-convert")
        .args(["--keep-failed", &path])
        .run();
    let got = records(&kept);
    assert_eq!(got.len(), 5);
    assert_eq!(got[3]["observed"]["status"], "error");
    assert_eq!(got[3]["observed"]["prompt_tokens"], 0);
}

#[test]
fn openinference_protojson_span_without_times_or_ids() {
    let run = Cmd::new("trace-convert")
        .arg(fixture(
            "openinference-openai.chat-streaming-detailed-usage.span.json",
        ))
        .run();
    assert_records(
        &records(&run),
        &[
            json!({"timestamp": 0, "input_length": 12, "output_length": 100,
            "model": "gpt-5-nano-2025-08-07",
            "observed": {"prompt_tokens": 12, "completion_tokens": 100, "cached_tokens": 0, "status": "ok"}}),
        ],
    );
}

#[test]
fn vercel_provider_calls_only_with_ms_ttft() {
    let m = "gpt-4o-mini-2024-07-18";
    let run = converts_to(
        "vercel-ai-sdk-v6.all-spans.json",
        &[
            json!({"timestamp": 0, "input_length": 14, "output_length": 20, "model": m, "id": "39d6e9b3ddec9996",
                "observed": {"prompt_tokens": 14, "completion_tokens": 20, "e2e_ms": 1779.416, "status": "ok"}}),
            json!({"timestamp": 1781, "input_length": 50, "output_length": 9, "model": m, "id": "6c0201026326855d",
                "observed": {"prompt_tokens": 50, "completion_tokens": 9, "e2e_ms": 3034.286, "status": "ok"}}),
            json!({"timestamp": 4824, "input_length": 63, "output_length": 156, "model": m, "id": "bf098ec12458e605",
                "observed": {"prompt_tokens": 63, "completion_tokens": 156, "e2e_ms": 3519.813, "status": "ok"}}),
            json!({"timestamp": 8356, "input_length": 15, "output_length": 112, "model": m, "id": "5a81ef3ffb5d8603",
                "observed": {"prompt_tokens": 15, "completion_tokens": 112, "ttft_ms": 426.854,
                    "e2e_ms": 5386.307, "cached_tokens": 0, "status": "ok"}}),
        ],
    );
    run.stderr_has(": 10 spans read, 4 model calls\n");
}

// ---- Small files of our own: one per attribute variant. ----

/// An OTLP attribute list from a JSON object: integers as protojson's
/// strings, fractions as doubles.
fn kvs(attrs: &Value) -> Value {
    let list: Vec<Value> = attrs
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let value = match v {
                Value::String(s) => json!({"stringValue": s}),
                Value::Number(n) if n.is_i64() => json!({"intValue": n.to_string()}),
                Value::Number(n) => json!({"doubleValue": n}),
                Value::Bool(b) => json!({"boolValue": b}),
                other => other.clone(),
            };
            json!({"key": k, "value": value})
        })
        .collect();
    Value::Array(list)
}

fn span(trace: &str, id: &str, parent: &str, start: &str, end: &str, attrs: Value) -> Value {
    json!({"traceId": trace, "spanId": id, "parentSpanId": parent, "name": "chat",
        "kind": 3, "startTimeUnixNano": start, "endTimeUnixNano": end,
        "attributes": kvs(&attrs), "status": {}})
}

/// One collector line holding these spans.
fn otlp(spans: &[Value]) -> String {
    json!({"resourceSpans": [{"resource": {"attributes": []},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]})
    .to_string()
}

const T0: u64 = 1_781_627_099_248_209_120;

fn ns(offset: u64) -> String {
    (T0 + offset).to_string()
}

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

/// The attributes of an OTLP span as one object (typed values unwrapped).
fn attrs_of(span: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for kv in span["attributes"].as_array().unwrap() {
        let v = kv["value"].as_object().unwrap();
        assert_eq!(v.len(), 1, "{kv}");
        let (kind, inner) = v.iter().next().unwrap();
        let inner = match kind.as_str() {
            "arrayValue" => Value::Array(
                inner["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["stringValue"].clone())
                    .collect(),
            ),
            _ => inner.clone(),
        };
        out.insert(kv["key"].as_str().unwrap().to_string(), inner);
    }
    Value::Object(out)
}

/// A span's attributes (typed values unwrapped), then its status.
#[track_caller]
fn assert_span(span: &Value, attrs: Value, status: Value) {
    assert_eq!(attrs_of(span), attrs);
    assert_eq!(span["status"], status);
}

fn is_hex(s: &Value, len: usize) -> bool {
    let s = s.as_str().unwrap();
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()) && s.bytes().any(|b| b != b'0')
}

#[test]
fn summarize_requests_otlp_writes_one_genai_client_span_per_result() {
    let input = concat!(
        r#"{"index":0,"id":"a","session_id":"s","model":"m","scheduled_ms":10.0,"sent_ms":10.5,"start_time":"2026-11-23T10:00:00.010500Z","ttft_ms":100.0,"first_chunk_ms":50.0,"e2e_ms":400.0,"itl_ms":[100.0,200.0],"input_length":5,"output_length":3,"prompt_tokens":6,"completion_tokens":4,"cached_tokens":2,"finish_reason":"stop","status":"ok","http_status":200}"#,
        "\n",
        // Its wall clock is 1 µs ahead of the run's: the span keeps the run's.
        r#"{"index":1,"session_id":"s","after":["a"],"scheduled_ms":420.0,"sent_ms":420.25,"start_time":"2026-11-23T10:00:00.420251Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":7,"output_length":2,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":500,"error":"HTTP 500: boom"}"#,
        "\n",
        r#"{"index":2,"id":"t","scheduled_ms":500.0,"sent_ms":500.0,"start_time":"2026-11-23T10:00:00.500000Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":1,"output_length":1,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"timeout","http_status":null,"error":"no answer within 1s","shard":"1/2"}"#,
        "\n"
    );
    let run = run_stdin("trace-summarize", &["--requests", "otlp"], input);
    run.ok();
    // One document on one line, as the Collector's file exporter writes.
    assert_eq!(run.lines().len(), 1);
    let doc = run.json();
    let rs = doc["resourceSpans"].as_array().unwrap();
    assert_eq!(rs.len(), 1);
    assert_eq!(
        attrs_of(&rs[0]["resource"]),
        json!({"service.name": "trace-replay",
               "tracekit.run.start": "2026-11-23T10:00:00.000000Z"})
    );
    assert_eq!(rs[0]["scopeSpans"][0]["scope"]["name"], "tracekit");
    let spans = rs[0]["scopeSpans"][0]["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 3);
    for s in spans {
        assert!(is_hex(&s["traceId"], 32) && is_hex(&s["spanId"], 16), "{s}");
        assert_eq!(s["kind"], 3, "{s}");
    }
    // 10:00:00Z is 1795428000 s since the epoch; the run starts there
    // (start_time 10.5 ms after it, at sent_ms 10.5).
    let t0: u64 = 1_795_428_000_000_000_000;
    let times = |s: &Value| {
        [&s["startTimeUnixNano"], &s["endTimeUnixNano"]]
            .map(|t| t.as_str().unwrap().parse::<u64>().unwrap() - t0)
    };
    assert_eq!(times(&spans[0]), [10_500_000, 410_500_000]);
    assert_eq!(times(&spans[1]), [420_250_000, 420_250_000]);
    assert_eq!(times(&spans[2]), [500_000_000, 500_000_000]);
    assert_eq!(spans[0]["name"], "chat m");
    assert_span(
        &spans[0],
        json!({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
               "gen_ai.request.max_tokens": "3", "gen_ai.conversation.id": "s",
               "gen_ai.usage.input_tokens": "6", "gen_ai.usage.output_tokens": "4",
               "gen_ai.usage.cache_read.input_tokens": "2",
               "gen_ai.response.finish_reasons": ["stop"],
               "gen_ai.response.time_to_first_chunk": 0.1,
               "http.response.status_code": "200", "tracekit.index": "0",
               "tracekit.record.id": "a"}),
        json!({}),
    );
    assert!(spans[0].get("links").is_none());
    // Missing counts stay missing; the error's HTTP status is its type.
    assert_span(
        &spans[1],
        json!({"gen_ai.operation.name": "chat", "gen_ai.request.max_tokens": "2",
               "gen_ai.conversation.id": "s", "http.response.status_code": "500",
               "error.type": "500", "tracekit.index": "1"}),
        json!({"code": 2, "message": "HTTP 500: boom"}),
    );
    // One session, one trace; the turn links to the one it waited for.
    assert_eq!(spans[1]["traceId"], spans[0]["traceId"]);
    assert_eq!(
        spans[1]["links"],
        json!([{"traceId": spans[0]["traceId"], "spanId": spans[0]["spanId"]}])
    );
    assert_span(
        &spans[2],
        json!({"gen_ai.operation.name": "chat", "gen_ai.request.max_tokens": "1",
               "error.type": "timeout", "tracekit.index": "2",
               "tracekit.record.id": "t", "tracekit.shard": "1/2"}),
        json!({"code": 2, "message": "no answer within 1s"}),
    );
    assert_ne!(spans[2]["traceId"], spans[0]["traceId"]);
    // The same results give the same ids.
    let again = run_stdin("trace-summarize", &["--requests", "otlp"], input);
    assert_eq!(again.stdout, run.stdout);

    // trace-convert reads it back: the errors are dropped and counted; the
    // conversation id is a session, one call long.
    let back = Cmd::new("trace-convert").stdin(run.stdout.clone()).run();
    let got: Vec<Value> = records(&back).iter().map(numbers_as_f64).collect();
    assert_eq!(
        got,
        vec![numbers_as_f64(
            &json!({"timestamp": 0, "input_length": 6, "output_length": 4,
            "session_id": "s", "model": "m", "id": spans[0]["spanId"],
            "observed": {"prompt_tokens": 6, "completion_tokens": 4, "ttft_ms": 100,
                "e2e_ms": 400, "cached_tokens": 2, "status": "ok"}})
        )]
    );
    back.stderr_has("3 records read, 1 written, 2 dropped (2 failed)");
}

#[test]
fn an_empty_results_file_is_an_empty_otlp_document_and_a_bad_start_time_is_named() {
    let run = run_stdin("trace-summarize", &["--requests", "otlp"], "");
    run.ok();
    assert_eq!(run.stdout_str(), "{\"resourceSpans\":[]}\n");
    let bad = r#"{"index":0,"scheduled_ms":0,"sent_ms":0,"start_time":"yesterday","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":1,"output_length":1,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":null}"#;
    let run = run_stdin("trace-summarize", &["--requests", "otlp"], bad);
    run.code(2);
    run.stderr_is("trace-summarize: <stdin>:1: error: field `start_time`: \"yesterday\" is not an RFC 3339 time\n");
}

/// Replay a trace of a session (a fan-out and a join) and a lone request
/// on the simulator, export the results as OTLP and convert them back:
/// the replayed trace returns, its times those the run measured.
#[test]
fn a_replay_exported_as_otlp_converts_back_to_the_replayed_trace() {
    let dir = TestDir::new("otlp-round-trip");
    // b and c both wait for a and start together, so they overlap (each
    // lasts at least the simulator's 20 ms TTFT); d joins them.
    let trace = [
        json!({"timestamp": 0, "input_length": 600, "hash_ids": [1, 2], "output_length": 4, "session_id": "s1", "id": "a"}),
        json!({"timestamp": 5, "input_length": 100, "hash_ids": [7], "output_length": 2, "id": "x"}),
        json!({"input_length": 700, "hash_ids": [1, 3], "output_length": 3, "session_id": "s1", "id": "b", "after": ["a"]}),
        json!({"input_length": 50, "hash_ids": [9], "output_length": 2, "session_id": "s1", "id": "c", "after": ["a"]}),
        json!({"input_length": 1100, "hash_ids": [1, 3, 4], "output_length": 5, "session_id": "s1", "id": "d", "after": ["b", "c"], "delay": 10}),
    ];
    let text: String = trace.iter().map(|r| format!("{r}\n")).collect();
    let trace_path = dir.write("trace.jsonl", &text);
    let replay = Cmd::new("trace-replay").arg("--sim").arg(&trace_path).run();
    replay.code(0);
    let results = replay.json_lines();
    assert_eq!(results.len(), 5);
    let otlp = run_stdin(
        "trace-summarize",
        &["--requests", "otlp"],
        replay.stdout.clone(),
    );
    otlp.ok();
    // Span id to record id, from the export.
    let doc = otlp.json();
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    let record_of: std::collections::HashMap<String, String> = spans
        .iter()
        .map(|s| {
            (
                s["spanId"].as_str().unwrap().to_string(),
                attrs_of(s)["tracekit.record.id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let back = run_stdin("trace-convert", &["--from", "otel"], otlp.stdout.clone());
    let got = records(&back);
    assert_eq!(got.len(), 5);

    // Expected, from the results: microseconds as integers.
    let us = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
    let result: std::collections::HashMap<&str, &Value> = results
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r))
        .collect();
    let sent = |id: &str| us(&result[id]["sent_ms"]);
    let end = |id: &str| sent(id) + us(&result[id]["e2e_ms"]);
    let first = ["a", "x", "b", "c", "d"]
        .map(sent)
        .into_iter()
        .min()
        .unwrap();
    let mut order = vec!["a", "x", "b", "c", "d"];
    order.sort_by_key(|id| sent(id));
    // d waits for the one of b and c that ended last first.
    let mut joined = vec!["b", "c"];
    joined.sort_by_key(|id| std::cmp::Reverse(end(id)));
    let ms = |us: i64| json!(us as f64 / 1000.0);
    for (r, id) in got.iter().zip(&order) {
        let want_id = &record_of[r["id"].as_str().unwrap()];
        assert_eq!(want_id, id, "{r}");
        let rec = &trace.iter().find(|t| t["id"] == *id).unwrap();
        let res = result[id];
        let mut want = json!({
            "timestamp": ms(sent(id) - first),
            "input_length": rec["input_length"],
            "output_length": rec["output_length"],
        });
        if let Some(s) = rec.get("session_id") {
            want["session_id"] = s.clone();
        }
        want["id"] = r["id"].clone();
        want["observed"] = json!({
            "prompt_tokens": rec["input_length"],
            "completion_tokens": rec["output_length"],
            "ttft_ms": res["ttft_ms"],
            "e2e_ms": res["e2e_ms"],
            "cached_tokens": res["cached_tokens"],
            "status": "ok",
        });
        let waited: Vec<&str> = match *id {
            "b" | "c" => vec!["a"],
            "d" => joined.clone(),
            _ => vec![],
        };
        if let Some(last) = waited.first() {
            let after: Vec<Value> = r["after"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| json!(record_of[s.as_str().unwrap()]))
                .collect();
            assert_eq!(after, waited.iter().map(|w| json!(w)).collect::<Vec<_>>());
            want["after"] = r["after"].clone();
            want["delay"] = ms(sent(id) - end(last));
        }
        assert_eq!(numbers_as_f64(r), numbers_as_f64(&want));
    }
}

/// Numbers compared by value (2 and 2.0 are one number).
fn numbers_as_f64(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_f64).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), numbers_as_f64(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A small protobuf encoder for the tests: OTLP JSON documents as the
/// binary `TracesData` of opentelemetry-proto (trace.proto field numbers),
/// so that each .pb input has a JSON twin to be compared with.
mod pb {
    use serde_json::Value;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn tag(out: &mut Vec<u8>, field: u64, wire: u64) {
        varint(out, field << 3 | wire);
    }

    fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
        tag(out, field, 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    fn fixed64(out: &mut Vec<u8>, field: u64, v: u64) {
        tag(out, field, 1);
        out.extend_from_slice(&v.to_le_bytes());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn any(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
            return out;
        };
        match kind.as_str() {
            "stringValue" => bytes(&mut out, 1, inner.as_str().unwrap().as_bytes()),
            "boolValue" => {
                tag(&mut out, 2, 0);
                varint(&mut out, inner.as_bool().unwrap() as u64);
            }
            "intValue" => {
                let n: i64 = match inner {
                    Value::String(s) => s.parse().unwrap(),
                    n => n.as_i64().unwrap(),
                };
                tag(&mut out, 3, 0);
                varint(&mut out, n as u64);
            }
            "doubleValue" => {
                tag(&mut out, 4, 1);
                out.extend_from_slice(&inner.as_f64().unwrap().to_le_bytes());
            }
            "arrayValue" => {
                let mut arr = Vec::new();
                for item in inner["values"].as_array().unwrap() {
                    bytes(&mut arr, 1, &any(item));
                }
                bytes(&mut out, 5, &arr);
            }
            other => panic!("no encoding for {other}"),
        }
        out
    }

    fn kvs(out: &mut Vec<u8>, field: u64, list: Option<&Value>) {
        for kv in list.and_then(Value::as_array).into_iter().flatten() {
            let mut m = Vec::new();
            bytes(&mut m, 1, kv["key"].as_str().unwrap().as_bytes());
            bytes(&mut m, 2, &any(&kv["value"]));
            bytes(out, field, &m);
        }
    }

    fn span(s: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        for (field, key) in [(1, "traceId"), (2, "spanId"), (4, "parentSpanId")] {
            if let Some(id) = s[key].as_str().filter(|id| !id.is_empty()) {
                bytes(&mut out, field, &hex(id));
            }
        }
        bytes(&mut out, 5, s["name"].as_str().unwrap().as_bytes());
        tag(&mut out, 6, 0);
        varint(&mut out, s["kind"].as_u64().unwrap());
        for (field, key) in [(7, "startTimeUnixNano"), (8, "endTimeUnixNano")] {
            fixed64(&mut out, field, s[key].as_str().unwrap().parse().unwrap());
        }
        kvs(&mut out, 9, s.get("attributes"));
        for e in s
            .get("events")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut m = Vec::new();
            fixed64(
                &mut m,
                1,
                e["timeUnixNano"].as_str().unwrap().parse().unwrap(),
            );
            bytes(&mut m, 2, e["name"].as_str().unwrap().as_bytes());
            kvs(&mut m, 3, e.get("attributes"));
            bytes(&mut out, 11, &m);
        }
        if let Some(code) = s["status"].get("code").and_then(Value::as_u64) {
            let mut m = Vec::new();
            tag(&mut m, 3, 0);
            varint(&mut m, code);
            bytes(&mut out, 15, &m);
        }
        out
    }

    /// One `{"resourceSpans": …}` document as a `TracesData` message.
    pub fn traces_data(doc: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        for r in doc["resourceSpans"].as_array().unwrap() {
            let mut rs = Vec::new();
            let mut res = Vec::new();
            kvs(&mut res, 1, r["resource"].get("attributes"));
            bytes(&mut rs, 1, &res);
            for s in r["scopeSpans"].as_array().unwrap() {
                let mut ss = Vec::new();
                let mut scope = Vec::new();
                bytes(
                    &mut scope,
                    1,
                    s["scope"]["name"].as_str().unwrap().as_bytes(),
                );
                bytes(&mut ss, 1, &scope);
                for sp in s["spans"].as_array().unwrap() {
                    bytes(&mut ss, 2, &span(sp));
                }
                bytes(&mut rs, 2, &ss);
            }
            bytes(&mut out, 1, &rs);
        }
        out
    }
}

#[test]
fn otlp_protobuf_converts_to_the_same_trace_as_its_json_twin() {
    let dir = TestDir::new("otel-pb");
    for name in [
        "bifrost.gaia-0-claude-code.traces.jsonl",
        "bifrost.bigcodebench-0-zerostack.traces.jsonl",
    ] {
        let json_run = Cmd::new("trace-convert").arg(fixture(name)).run();
        json_run.code(0);
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        let docs: Vec<Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // One message (encoded messages concatenated are one message with
        // every resource's spans), and the Collector's framing: each
        // message after its size, 4 bytes big-endian.
        let single: Vec<u8> = docs.iter().flat_map(pb::traces_data).collect();
        let mut framed = Vec::new();
        for d in &docs {
            let m = pb::traces_data(d);
            framed.extend_from_slice(&(m.len() as u32).to_be_bytes());
            framed.extend_from_slice(&m);
        }
        for (file, bytes) in [("single.pb", &single), ("framed.bin", &framed)] {
            let path = dir.write(file, bytes);
            // By content, whatever the name.
            let run = Cmd::new("trace-convert").arg(&path).run();
            run.code(0);
            assert_eq!(run.stdout_str(), json_run.stdout_str(), "{name} as {file}");
            run.stderr_has("recognised as otel input");
            let spans = json_run
                .stderr
                .lines()
                .find(|l| l.contains("spans read"))
                .unwrap();
            let spans = spans.split(".jsonl").nth(1).unwrap();
            assert!(run.stderr.contains(spans), "{spans}\n{}", run.stderr);
        }
    }
}

#[test]
fn bad_otlp_protobuf_names_the_file_and_byte_and_never_panics() {
    let dir = TestDir::new("otel-pb-bad");
    let doc: Value = serde_json::from_str(
        std::fs::read_to_string(fixture("bifrost.bigcodebench-0-zerostack.traces.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let whole = pb::traces_data(&doc);
    let cut = dir.write("cut.pb", &whole[..whole.len() / 2]);
    let run = Cmd::new("trace-convert").arg(&cut).run();
    run.code(2);
    let want = format!(
        "trace-convert: {}:1: error: malformed OTLP protobuf (byte 0): failed to decode Protobuf message: ",
        cut.display()
    );
    run.stderr_has(&want);
    // A frame that claims more bytes than are left.
    let mut framed = (whole.len() as u32 + 10).to_be_bytes().to_vec();
    framed.extend_from_slice(&whole);
    let path = dir.write("framed.pb", &framed);
    let run = Cmd::new("trace-convert").arg(&path).run();
    run.code(2);
    let want = format!(
        "trace-convert: {}:1: error: malformed OTLP protobuf (byte 0): a message of {} bytes, but {} are left\n",
        path.display(),
        whole.len() + 10,
        whole.len()
    );
    run.stderr_has(&want);
}

#[test]
fn collector_file_exports_framed_and_compressed_as_the_fileexporter_writes_them() {
    // opentelemetry-collector-contrib exporter/fileexporter: with `format:
    // proto` each message follows its size, 4 bytes big-endian
    // (file_writer.go, exportMessageAsBuffer); with `compression: zstd`
    // each message, protobuf or JSON, is one zstd frame after its size;
    // with the native compression feature gate the file is one zstd stream
    // (of the same frames for protobuf). Two messages: the two llm.call
    // lines of Bifrost's export (lines 2 and 3), whose JSON twin is those
    // two lines.
    let dir = TestDir::new("otel-collector-files");
    let text = std::fs::read_to_string(fixture("bifrost.gaia-0-claude-code.traces.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().skip(1).take(2).collect();
    let twin = dir.write("twin.jsonl", lines.join("\n") + "\n");
    let want = Cmd::new("trace-convert").arg(&twin).run();
    want.code(0);
    assert_eq!(want.json_lines().len(), 2);
    let framed = |bodies: Vec<Vec<u8>>| -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(&b);
        }
        out
    };
    let proto: Vec<Vec<u8>> = lines
        .iter()
        .map(|l| pb::traces_data(&serde_json::from_str(l).unwrap()))
        .collect();
    let zstd = |b: &[u8]| zstd::stream::encode_all(b, 3).unwrap();
    let files = [
        ("proto.bin", framed(proto.clone())),
        (
            "proto-zstd.bin",
            framed(proto.iter().map(|b| zstd(b)).collect()),
        ),
        (
            "json-zstd.bin",
            framed(lines.iter().map(|l| zstd(l.as_bytes())).collect()),
        ),
        ("proto-native.zst", zstd(&framed(proto.clone()))),
    ];
    for (name, bytes) in files {
        let path = dir.write(name, &bytes);
        // Recognised by content.
        let run = Cmd::new("trace-convert").arg(&path).run();
        run.code(0);
        assert_eq!(run.stdout_str(), want.stdout_str(), "{name}");
        assert!(
            run.stderr
                .contains(&format!("{}: recognised as otel input", path.display())),
            "{name}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains(": 2 spans read, 2 model calls\n"),
            "{name}: {}",
            run.stderr
        );
    }
    // A compressed frame that is not zstd inside is named by its offset.
    let mut bad = framed(vec![proto[0].clone()]);
    let second = {
        let mut z = zstd(&proto[1]);
        z.truncate(z.len() - 3);
        z
    };
    let at = bad.len() + 4;
    bad.extend_from_slice(&(second.len() as u32).to_be_bytes());
    bad.extend_from_slice(&second);
    let path = dir.write("cut-zstd.bin", &bad);
    let run = Cmd::new("trace-convert")
        .args(["--from", "otel"])
        .arg(&path)
        .run();
    run.code(2);
    run.stderr_has(&format!(
        "{}:1: error: malformed zstd frame (byte {at}): ",
        path.display()
    ));
}
