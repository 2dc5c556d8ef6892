//! trace-convert --from otel: the shared span files of real producers
//! (values from the files themselves, checked by hand: offsets, durations,
//! token counts, and `after`/`delay` as end-to-start gaps), and the
//! helpers that write small files of our own (`otel_variants.rs` has one
//! per attribute variant and per kind of bad input, `otel_export.rs` the
//! spans trace-summarize writes).

use serde_json::{Value, json};

use crate::util::{Cmd, Run, TestDir, columns, data, run_stdin};

pub(crate) fn fixture(name: &str) -> String {
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
pub(crate) fn records(run: &Run) -> Vec<Value> {
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
pub(crate) fn assert_records(got: &[Value], want: &[Value]) {
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

// ---- Small files of our own: the helpers that write them. ----

/// An OTLP attribute list from a JSON object: integers as protojson's
/// strings, fractions as doubles.
pub(crate) fn kvs(attrs: &Value) -> Value {
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

pub(crate) fn span(
    trace: &str,
    id: &str,
    parent: &str,
    start: &str,
    end: &str,
    attrs: Value,
) -> Value {
    json!({"traceId": trace, "spanId": id, "parentSpanId": parent, "name": "chat",
        "kind": 3, "startTimeUnixNano": start, "endTimeUnixNano": end,
        "attributes": kvs(&attrs), "status": {}})
}

/// One collector line holding these spans.
pub(crate) fn otlp(spans: &[Value]) -> String {
    json!({"resourceSpans": [{"resource": {"attributes": []},
        "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]})
    .to_string()
}

pub(crate) const T0: u64 = 1_781_627_099_248_209_120;

pub(crate) fn ns(offset: u64) -> String {
    (T0 + offset).to_string()
}
