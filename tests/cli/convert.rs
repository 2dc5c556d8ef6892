//! trace-convert on every fixture: each converts, its output passes
//! trace-validate, and chosen records have the values worked out by hand
//! from the source files.

use std::io::Write;

use serde_json::{Value, json};

use crate::util::{Cmd, Run, TestDir, data, run_stdin};

pub(crate) fn fixture(name: &str) -> String {
    data(&format!("convert/{name}"))
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn convert(args: &[&str]) -> Run {
    let run = Cmd::new("trace-convert").args(args).run();
    run.code(0);
    run
}

/// `trace-convert` of a fixture, exit 0.
pub(crate) fn convert_fixture(name: &str) -> Run {
    convert(&[&fixture(name)])
}

/// `trace-convert --keep-messages` of a fixture, exit 0.
pub(crate) fn convert_kept(name: &str) -> Run {
    convert(&["--keep-messages", &fixture(name)])
}

/// The output passes trace-validate with no error and no warning.
#[track_caller]
pub(crate) fn valid(run: &Run) {
    let v = run_stdin(
        "trace-validate",
        &["--check", "--strict"],
        run.stdout.clone(),
    );
    v.code(0);
}

/// Each fixture under the format it is recognised as, with the number of
/// records it converts to.
const EVERY_FIXTURE: &[(&str, &[(&str, usize)])] = &[
    ("mooncake", &[("synthetic_trace.jsonl", 3993)]),
    (
        "kv-cache-tester",
        &[
            ("kv_cache_tester_trace_0504.json", 3),
            ("kv_cache_tester_trace_0291.requests15-19.json", 15),
        ],
    ),
    ("tracelab", &[("tracelab_sanitized_round_trace.jsonl", 19)]),
    (
        "dynamo",
        &[("dynamo_agentic_mooncake.constructed.jsonl", 3)],
    ),
    (
        "servegen",
        &[
            ("servegen_offline_trace_a.head12.jsonl", 12),
            ("servegen_offline_trace_d.head12.jsonl", 12),
        ],
    ),
    (
        "azure",
        &[
            ("AzureLLMInferenceTrace_code.head300.csv", 300),
            ("AzureLLMInferenceTrace_conv.head300.csv", 300),
            (
                "AzureLLMInferenceTrace_code_1week.head5_tail5.reconstructed.csv",
                10,
            ),
            (
                "AzureLLMInferenceTrace_conv_1week.head5_tail5.reconstructed.csv",
                10,
            ),
        ],
    ),
    (
        "burstgpt",
        &[
            ("BurstGPT_v1_6col.constructed.csv", 10),
            ("BurstGPT_v3_8col.constructed.csv", 6),
        ],
    ),
    (
        "litellm",
        &[
            ("standard_logging_payload.bedrock_captured.json", 1),
            ("spend_logs_payload.gcs_pubsub_fixture.json", 1),
            ("standard_logging_payloads.constructed.jsonl", 4),
            ("spend_logs.psql_csv_export.constructed.csv", 4),
            ("spend_logs_api_response.constructed.json", 2),
            ("real_proxy_standard_logging_payloads.jsonl", 52),
            ("real_proxy_spend_logs_payloads.jsonl", 52),
        ],
    ),
    (
        "langfuse",
        &[
            ("observations_v2_api_response.constructed.json", 2),
            ("observations_v1_api_response.constructed.json", 2),
            ("traces_api_response.constructed.json", 0),
            ("ui_batch_export_observations.constructed.csv", 2),
            ("blob_export_observations.constructed.jsonl", 2),
            ("blob_export_traces.constructed.jsonl", 0),
            ("ui_trace_download.autogen-2025-06-06.json", 1),
            ("ui_trace_download.langgraph-python-2025-08-22.json", 2),
            ("ui_trace_download.openai-agents-2025-09-30.json", 2),
        ],
    ),
];

#[test]
fn every_fixture_converts_recognised_and_valid() {
    let cases = EVERY_FIXTURE
        .iter()
        .flat_map(|&(format, files)| files.iter().map(move |&(name, n)| (name, format, n)));
    for (name, format, records) in cases {
        let path = fixture(name);
        for from in ["auto", format] {
            for extra in [
                &[][..],
                &["--keep-failed", "--keep-cache-hits"][..],
                &["--keep-messages"][..],
            ] {
                let run = convert(&[&["--from", from, &path][..], extra].concat());
                if from == "auto" {
                    assert!(
                        run.stderr.contains(&format!(
                            "trace-convert: note: {path}: recognised as {format} input"
                        )),
                        "{name}: {}",
                        run.stderr
                    );
                }
                let out = run.json_lines();
                if extra.is_empty() {
                    assert_eq!(out.len(), records, "{name}");
                }
                if records == 0 {
                    continue;
                }
                assert_eq!(out[0]["timestamp"], json!(0), "{name}");
                let ts: Vec<f64> = out
                    .iter()
                    .map(|r| r["timestamp"].as_f64().unwrap())
                    .collect();
                assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{name}: not sorted");
                valid(&run);
            }
        }
    }
    // The Mooncake conversation trace too, the largest real file.
    let run = convert(&[
        "--from",
        "mooncake",
        &data("conversation_trace.jsonl").to_string_lossy(),
    ]);
    assert_eq!(run.lines().len(), 12031);
    valid(&run);
}

#[test]
fn mooncake_is_sorted_rebased_and_passed_through() {
    let input = "{\"timestamp\": 2000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [7, 8], \"note\": 1.50}\n\
                 {\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [9]}\n";
    let run = run_stdin("trace-convert", &["--from", "mooncake"], input);
    run.code(0);
    assert_eq!(
        run.lines(),
        [
            r#"{"timestamp":0,"input_length":10,"output_length":2,"hash_ids":[9]}"#,
            r#"{"timestamp":1000,"input_length":600,"output_length":5,"hash_ids":[7, 8],"note":1.50}"#,
        ]
    );
    let run = run_stdin(
        "trace-convert",
        &["--from", "mooncake", "--absolute"],
        input,
    );
    assert_eq!(run.json_lines()[0]["timestamp"], json!(1000));
}

#[test]
fn mooncake_record_breaking_the_contract_is_an_error() {
    let input =
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1]}\n";
    let run = run_stdin("trace-convert", &["--from", "mooncake"], input);
    run.code(2);
    run.stderr_has("trace-convert: <stdin>:1: error: field `hash_ids`: has 1 block, but input_length 600 needs ceil(600 / 512) = 2 (Mooncake blocks are 512 tokens)");
}

#[test]
fn azure_2023_naive_times_with_crlf() {
    let path = fixture("AzureLLMInferenceTrace_conv.head300.csv");
    let run = convert(&[&path]);
    let out = run.json_lines();
    // Rows 1 and 2: 18:15:46.6805900 and 18:15:50.9951690, 374/44 and 396/109.
    assert_eq!(
        out[0],
        json!({"timestamp": 0, "input_length": 374, "output_length": 44})
    );
    assert_eq!(
        out[1],
        json!({"timestamp": 4314.579, "input_length": 396, "output_length": 109})
    );
    // Said once, on the first data row (line 2: the header is line 1).
    assert_eq!(run.stderr.matches("warning").count(), 1, "{}", run.stderr);
    run.stderr_has(&format!(
        "trace-convert: {path}:2: warning: field `TIMESTAMP`: \"2023-11-16 18:15:46.6805900\" has no time zone; naive date-times are taken as UTC"
    ));
    // --absolute: epoch ms of 2023-11-16T18:15:46.6805900Z.
    let abs = convert(&["--absolute", &path]).json_lines();
    assert_eq!(abs[0]["timestamp"], json!(1700158546680.59));
}

#[test]
fn azure_2024_offsets_and_a_week_long_span() {
    let run = convert_fixture("AzureLLMInferenceTrace_conv_1week.head5_tail5.reconstructed.csv");
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    let out = run.json_lines();
    // 00:00:00.041683 − 00:00:00.001163.
    assert_eq!(out[1]["timestamp"], json!(40.52));
    // 2024-05-18 23:59:59.995460 − 2024-05-12 00:00:00.001163.
    assert_eq!(out[9]["timestamp"], json!(604799994.297));
    assert_eq!(out[9]["output_length"], json!(366));
    assert!(run.stderr.ends_with(
        "trace-convert: note: 10 records read, 10 written; 0 sessions; time span 604799.994 s\n"
    ));
}

#[test]
fn azure_2025_multimodal_layout_is_read_by_column_name() {
    // The 2025 multimodal trace's documented header adds NumImages.
    let input = "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n\
                 2025-05-01 00:00:00.250000+00:00,2,1500,40\n\
                 2025-05-01 00:00:01+00:00,0,300,12\n";
    let run = Cmd::new("trace-convert").stdin(input).run();
    run.code(0);
    run.stderr_has("recognised as azure input");
    assert_eq!(
        run.lines(),
        [
            r#"{"timestamp":0,"input_length":1500,"output_length":40}"#,
            r#"{"timestamp":750,"input_length":300,"output_length":12}"#,
        ]
    );
}

#[test]
fn burstgpt_v1_drops_failures_and_keeps_ties_in_order() {
    let path = fixture("BurstGPT_v1_6col.constructed.csv");
    let run = convert(&[&path]);
    assert!(
        run.stderr.ends_with(
            "trace-convert: note: 12 records read, 10 written, 2 dropped (2 failed); 0 sessions; time span 86397 s\n"
        ),
        "{}",
        run.stderr
    );
    let out = run.lines();
    assert_eq!(
        out[0],
        r#"{"timestamp":0,"input_length":472,"output_length":18}"#
    );
    assert_eq!(
        out[1],
        r#"{"timestamp":40000,"input_length":1087,"output_length":230}"#
    );
    // The duplicated row at 121 s is two requests.
    assert_eq!(
        out[3],
        r#"{"timestamp":116000,"input_length":96,"output_length":512}"#
    );
    assert_eq!(out[4], out[3]);
    assert_eq!(
        out[9],
        r#"{"timestamp":86397000,"input_length":1204,"output_length":433}"#
    );

    let kept = convert(&["--keep-failed", &path]).lines();
    assert_eq!(kept.len(), 12);
    // 118,ChatGPT,1532,0: after the GPT-4 row of the same second.
    assert_eq!(
        kept[3],
        r#"{"timestamp":113000,"input_length":1532,"output_length":1,"observed":{"status":"error"}}"#
    );
}

#[test]
fn burstgpt_v3_sessions_and_delays() {
    let run = convert_fixture("BurstGPT_v3_8col.constructed.csv");
    run.stderr_has("7 records read, 6 written, 1 dropped (1 failed); 3 sessions");
    let out = run.json_lines();
    let a = "3f2b8c1e-6d4a-4e1f-9a7b-0c5d2e8f1a10";
    let b = "7a9e4d22-1b3c-4f5e-8d6a-9c0b1e2f3a20";
    assert_eq!(
        out[0],
        json!({"timestamp": 0, "input_length": 903, "output_length": 441, "hash_ids": [0, 1],
               "session_id": a, "observed": {"e2e_ms": 41000, "status": "ok"}})
    );
    // Turn 2 of a: 19440190 − (19440110 + 41) s.
    assert_eq!(out[2]["timestamp"], json!(80000));
    assert_eq!(out[2]["delay"], json!(39000));
    // Turn 3 of a: 19440302 − (19440190 + 9) s.
    assert_eq!(out[4]["delay"], json!(103000));
    // Turn 2 of b: 19440315 − (19440160 + 2) s.
    assert_eq!(out[5]["session_id"], json!(b));
    assert_eq!(out[5]["delay"], json!(153000));
    // An id seen once is a session all the same (of one call).
    assert_eq!(out[3]["timestamp"], json!(141000));
    assert_eq!(
        out[3]["session_id"],
        json!("c4d5e6f7-0a1b-4c2d-9e3f-4a5b6c7d8e30")
    );
}

#[test]
fn litellm_payloads_mapped_per_the_spec() {
    let path = fixture("standard_logging_payloads.constructed.jsonl");
    let run = convert(&[&path]);
    run.stderr_has("6 records read, 4 written, 2 dropped (1 cache hit, 1 failed); 1 session; time span 30.899 s");
    let out = run.json_lines();
    // startTime 1750615200.101234, completionStartTime .412345, endTime 201.734567.
    assert_eq!(out[0]["session_id"], json!("sess-7f3a"));
    assert_eq!(out[0]["id"], json!("5b0e9c1e-0001-4f1f-9d2a-000000000001"));
    assert_eq!(out[0]["model"], json!("gpt-4o"));
    assert_eq!(
        out[0]["observed"],
        json!({"prompt_tokens": 31, "completion_tokens": 54, "ttft_ms": 311.111,
               "e2e_ms": 1633.333, "status": "ok"})
    );
    // Turn 2: 209.880001 − 200.101234; delay 209.880001 − 201.734567.
    assert_eq!(out[1]["timestamp"], json!(9778.767));
    assert_eq!(out[1]["delay"], json!(8145.434));
    // Not streamed (completionStartTime == endTime): no TTFT; its random
    // trace id is not a session.
    assert_eq!(out[2]["timestamp"], json!(12398.766));
    assert!(out[2]["observed"].get("ttft_ms").is_none());
    assert!(out[2].get("session_id").is_none());
    // The Anthropic call: model group, 4112 prompt tokens → 9 blocks.
    assert_eq!(out[3]["timestamp"], json!(30898.866));
    assert_eq!(out[3]["model"], json!("claude-sonnet"));
    assert_eq!(out[3]["input_length"], json!(4112));
    assert_eq!(out[3]["hash_ids"].as_array().unwrap().len(), 9);
    assert_eq!(out[3]["observed"]["ttft_ms"], json!(620));
    // No prompt text without --keep-messages.
    assert!(!run.stdout_str().contains("Hamlet"));

    let all = convert(&["--keep-failed", "--keep-cache-hits", &path]).json_lines();
    assert_eq!(all.len(), 6);
    // The 429: 214.01 − 200.101234; max_tokens 64.
    assert_eq!(all[3]["timestamp"], json!(13908.766));
    assert_eq!(all[3]["output_length"], json!(64));
    assert_eq!(all[3]["observed"]["status"], json!("error"));
    assert_eq!(all[4]["timestamp"], json!(20329.766));
    assert_eq!(all[4]["observed"]["status"], json!("cache_hit"));
}

#[test]
fn litellm_spend_logs_csv_and_api_json() {
    let csv = convert_fixture("spend_logs.psql_csv_export.constructed.csv");
    assert_eq!(csv.stderr.matches("no time zone").count(), 1);
    let out = csv.json_lines();
    // 18:00:00.101 → 18:00:09.88; ttft 18:00:00.412; request_duration_ms.
    assert_eq!(
        out[0],
        json!({"timestamp": 0, "input_length": 31, "output_length": 54, "session_id": "sess-7f3a",
               "model": "gpt-4o", "id": "chatcmpl-c0n5-0001",
               "observed": {"prompt_tokens": 31, "completion_tokens": 54, "ttft_ms": 311,
                            "e2e_ms": 1633, "status": "ok"}})
    );
    assert_eq!(out[1]["timestamp"], json!(9779));
    assert_eq!(out[1]["delay"], json!(8145));
    assert_eq!(out[3]["timestamp"], json!(30899));

    let api = convert_fixture("spend_logs_api_response.constructed.json");
    let out = api.json_lines();
    assert_eq!(out.len(), 2);
    assert_eq!(out[1]["timestamp"], json!(9779));
    // The prompt is in proxy_server_request: hashed, not written.
    assert_eq!(out[0]["hash_ids"], json!([0]));
    assert!(!api.stdout_str().contains("Hamlet"));
    let kept = convert_kept("spend_logs_api_response.constructed.json");
    let out = kept.json_lines();
    assert_eq!(
        out[0]["messages"][1]["content"],
        json!("Summarize the plot of Hamlet in two sentences.")
    );
    assert!(out[0].get("input_length").is_none() && out[0].get("hash_ids").is_none());
    assert_eq!(out[0]["observed"]["prompt_tokens"], json!(31));
    valid(&kept);
}

#[test]
fn litellm_real_capture_sessions_and_ttft() {
    let run = convert_fixture("real_proxy_standard_logging_payloads.jsonl");
    run.stderr_has("57 records read, 52 written, 5 dropped (2 cache hits, 3 failed); 3 sessions");
    let out = run.json_lines();
    // The first call: startTime 1795328364.866575, completionStartTime
    // 1795328365.157737, endTime 1795328365.2174, streamed.
    assert_eq!(out[0]["id"], json!("f2b0ad9c-df27-4071-baa0-bf25cdbb9cf4"));
    assert_eq!(out[0]["observed"]["ttft_ms"], json!(291.162));
    assert_eq!(out[0]["observed"]["e2e_ms"], json!(350.825));
    assert_eq!(out[0]["model"], json!("tiny"));
    // Sessions of 3, 5 and 3 turns.
    let mut turns = std::collections::BTreeMap::new();
    for r in &out {
        if let Some(s) = r["session_id"].as_str() {
            *turns.entry(s.to_string()).or_insert(0) += 1;
        }
    }
    let mut counts: Vec<i32> = turns.values().copied().collect();
    counts.sort();
    assert_eq!(counts, [3, 3, 5]);
    // The spend tracker's rows of the same calls give the same arrivals.
    let spend = convert_fixture("real_proxy_spend_logs_payloads.jsonl").json_lines();
    let ts = |v: &[Value]| v.iter().map(|r| r["timestamp"].clone()).collect::<Vec<_>>();
    assert_eq!(ts(&out), ts(&spend));
}

/// A LiteLLM payload with the given prompt, as JSONL.
pub(crate) fn payload(
    id: &str,
    start: f64,
    system: &str,
    user: &str,
    prompt_tokens: u64,
) -> String {
    let v = json!({
        "id": id, "trace_id": format!("t-{id}"), "call_type": "acompletion", "status": "success",
        "prompt_tokens": prompt_tokens, "completion_tokens": 10,
        "startTime": start, "endTime": start + 1.0, "completionStartTime": start + 1.0,
        "model": "m", "model_group": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "model_parameters": {}
    });
    format!("{v}\n")
}

#[test]
fn shared_prompt_prefixes_share_hash_ids() {
    // About 1,500 tokens of shared system prompt: two whole blocks shared.
    let system = "hello ".repeat(1500);
    let input = payload("a", 1750000000.0, &system, "first question", 1600)
        + &payload(
            "b",
            1750000001.0,
            &system,
            "another question entirely",
            1600,
        )
        + &payload("c", 1750000002.0, &system, "first question", 1600);
    let run = Cmd::new("trace-convert").stdin(input).run();
    run.code(0);
    let out = run.json_lines();
    assert_eq!(out[0]["hash_ids"], json!([0, 1, 2, 3]));
    assert_eq!(out[1]["hash_ids"], json!([0, 1, 4, 5]));
    assert_eq!(out[2]["hash_ids"], json!([0, 1, 2, 3]));
    valid(&run);
    // Another tokenizer gives the same structure.
    let run = run_stdin(
        "trace-convert",
        &["--tokenizer", "r50k_base"],
        payload("a", 1750000000.0, &system, "x", 1600)
            + &payload("b", 1750000001.0, &system, "y", 1600),
    );
    let out = run.json_lines();
    assert_eq!(out[0]["hash_ids"], json!([0, 1, 2, 3]));
    assert_eq!(out[1]["hash_ids"], json!([0, 1, 4, 5]));
}

#[test]
fn container_shapes_directories_and_gzip() {
    let dir = TestDir::new("convert-shapes");
    let lines: Vec<String> =
        std::fs::read_to_string(fixture("standard_logging_payloads.constructed.jsonl"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
    let objects: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want = convert_fixture("standard_logging_payloads.constructed.jsonl").stdout;

    // A JSON array, pretty-printed.
    dir.write(
        "array.json",
        serde_json::to_string_pretty(&objects).unwrap(),
    );
    // A directory of single pretty objects, as the S3 logger writes them,
    // one of them gzipped and in a subdirectory.
    std::fs::create_dir_all(dir.join("logs/2025-06-22")).unwrap();
    for (i, o) in objects.iter().enumerate() {
        let text = serde_json::to_string_pretty(o).unwrap();
        if i == 2 {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(text.as_bytes()).unwrap();
            dir.write(&format!("logs/2025-06-22/{i}.json"), gz.finish().unwrap());
        } else {
            dir.write(&format!("logs/{i}.json"), text);
        }
    }
    // Concatenated pretty objects.
    let concat: String = objects
        .iter()
        .map(|o| serde_json::to_string_pretty(o).unwrap() + "\n")
        .collect();
    dir.write("concat.json", &concat);
    for args in [
        &["array.json"][..],
        &["--from", "litellm", "logs"],
        &["concat.json"],
    ] {
        let run = dir.cmd("trace-convert").args(args).run();
        run.code(0);
        assert_eq!(
            run.stdout_str(),
            String::from_utf8(want.clone()).unwrap(),
            "{args:?}"
        );
    }
    // Gzip on standard input.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(lines.join("\n").as_bytes()).unwrap();
    let run = Cmd::new("trace-convert").stdin(gz.finish().unwrap()).run();
    run.code(0);
    assert_eq!(run.stdout, want);
}

#[test]
fn bad_records_name_file_line_field_and_value() {
    let dir = TestDir::new("convert-bad");
    let good =
        std::fs::read_to_string(fixture("standard_logging_payloads.constructed.jsonl")).unwrap();
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
    lines[1] = lines[1].replace(
        "\"startTime\": 1750615209.880001",
        "\"startTime\": \"yesterday\"",
    );
    assert!(lines[1].contains("yesterday"));
    lines[3] = "{\"startTime\": 1750615214.01, ".to_string();
    dir.write("bad.jsonl", lines.join("\n") + "\n");

    // Leading blank lines count.
    dir.write("blank-first.jsonl", format!("\n\n{}", lines.join("\n")));
    let run = dir.cmd("trace-convert").arg("blank-first.jsonl").run();
    run.code(2);
    run.stderr_has("trace-convert: blank-first.jsonl:4: error: field `startTime`");

    let run = dir.cmd("trace-convert").arg("bad.jsonl").run();
    run.code(2);
    assert!(run.stdout.is_empty());
    run.stderr_has("trace-convert: bad.jsonl:2: error: field `startTime`: expected epoch seconds or a date-time (YYYY-MM-DD HH:MM:SS[.fff][zone]), found \"yesterday\"");

    let run = dir.run("trace-convert", &["--skip-invalid", "bad.jsonl"]);
    run.code(0);
    run.stderr_has("trace-convert: bad.jsonl:2: warning: field `startTime`");
    run.stderr_has("trace-convert: bad.jsonl:4:");
    run.stderr_has("trace-convert: warning: skipped 2 invalid records");
    run.stderr_has("6 records read, 3 written, 1 dropped (1 cache hit), 2 invalid");
    assert_eq!(run.lines().len(), 3);

    // A CSV cell.
    dir.write(
        "bad.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2024-05-12 00:00:00+00:00,12,3\r\n2024-05-12 00:00:01+00:00,1k,3\r\n",
    );
    let run = dir.cmd("trace-convert").arg("bad.csv").run();
    run.code(2);
    run.stderr_has("trace-convert: bad.csv:3: error: field `ContextTokens`: expected an integer ≥ 0, found \"1k\"");
}

#[test]
fn unrecognised_input_lists_the_formats() {
    let run = Cmd::new("trace-convert").stdin("hello, world\n").run();
    run.code(2);
    run.stderr_is("trace-convert: error: <stdin>: cannot recognise the format; give --from with one of: claude-code, codex, gemini-cli, litellm, otel, langfuse, kv-cache-tester, dynamo, tracelab, copilot, servegen, mooncake, azure, burstgpt, bailian, openai-batch, sharegpt (what each reads: `trace-convert --help`, or trace-convert(1))\n");
}

#[test]
fn closed_pipe_exits_quietly() {
    let path = data("conversation_trace.jsonl");
    let mut child = std::process::Command::new(crate::util::bin("trace-convert"))
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("error"), "{stderr}");
}
