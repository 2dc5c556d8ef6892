//! trace-convert on every fixture: each converts, its output passes
//! trace-validate, and chosen records have the values worked out by hand
//! from the source files.

use std::io::Write;

use serde_json::{Value, json};

use crate::util::{Cmd, Run, TestDir, columns, data, run_stdin};

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
fn convert_fixture(name: &str) -> Run {
    convert(&[&fixture(name)])
}

/// `trace-convert --keep-messages` of a fixture, exit 0.
fn convert_kept(name: &str) -> Run {
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
fn payload(id: &str, start: f64, system: &str, user: &str, prompt_tokens: u64) -> String {
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
    run.stderr_is("trace-convert: error: <stdin>: cannot recognise the format; give --from with one of: litellm, otel, langfuse, kv-cache-tester, dynamo, tracelab, copilot, servegen, mooncake, azure, burstgpt, bailian, openai-batch, sharegpt\n");
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

#[test]
fn langfuse_api_responses_and_exports() {
    // v2: sessionId on the row; SPAN and the ERROR generation left out.
    let run = convert_fixture("observations_v2_api_response.constructed.json");
    run.stderr_has("4 records read, 2 written, 2 dropped (1 failed, 1 not model calls); 1 session; time span 36.876 s");
    let v2 = run.json_lines();
    // startTime 14:57:54.131Z; timeToFirstToken 0.48 s; latency 2.267 s;
    // usageDetails input 40, output 31.
    assert_eq!(
        v2[0],
        json!({"timestamp": 0, "input_length": 40, "output_length": 31, "hash_ids": [0],
               "session_id": "chat-42", "model": "gpt-4o-mini", "id": "obs-0002-gen",
               "observed": {"prompt_tokens": 40, "completion_tokens": 31, "ttft_ms": 480,
                            "e2e_ms": 2267, "status": "ok"}})
    );
    // 14:58:31.007 − 14:57:54.131; delay after the end at 14:57:56.398;
    // input 24 + input_cached_tokens 64.
    assert_eq!(v2[1]["timestamp"], json!(36876));
    assert_eq!(v2[1]["delay"], json!(34609));
    assert_eq!(v2[1]["input_length"], json!(88));
    valid(&run);

    // v1 has no sessionId: joined from the traces response; the same
    // records as v2.
    let v1 = convert(&[
        &fixture("observations_v1_api_response.constructed.json"),
        &fixture("traces_api_response.constructed.json"),
    ]);
    assert_eq!(v1.json_lines(), v2);
    let alone = convert_fixture("observations_v1_api_response.constructed.json").json_lines();
    assert!(alone[1].get("session_id").is_none());

    // Blob export: naive times (UTC, said once), the traces table joined.
    let blob = convert(&[
        &fixture("blob_export_observations.constructed.jsonl"),
        &fixture("blob_export_traces.constructed.jsonl"),
    ]);
    assert_eq!(blob.json_lines(), v2);
    assert_eq!(blob.stderr.matches("no time zone").count(), 1);

    // The same export as Parquet (ClickHouse's own writer: see
    // langfuse_parquet.py): the same records, and times that are UTC.
    let parquet = convert(&[
        &fixture("blob_export_observations.parquet"),
        &fixture("blob_export_traces.parquet"),
    ]);
    assert_eq!(parquet.json_lines(), v2);
    assert!(
        !parquet.stderr.contains("no time zone"),
        "{}",
        parquet.stderr
    );
    let messages = |files: [&str; 2]| {
        convert(&["--keep-messages", &fixture(files[0]), &fixture(files[1])]).json_lines()
    };
    assert_eq!(
        messages([
            "blob_export_observations.parquet",
            "blob_export_traces.parquet"
        ]),
        messages([
            "blob_export_observations.constructed.jsonl",
            "blob_export_traces.constructed.jsonl"
        ])
    );

    // UI CSV export: dates JSON-quoted inside the cells.
    let csv = convert_fixture("ui_batch_export_observations.constructed.csv").json_lines();
    assert_eq!(csv[1]["timestamp"], json!(36876));
    assert_eq!(csv[1]["observed"]["ttft_ms"], json!(426));

    // The failed generation kept: max_tokens "512" from modelParameters.
    let all = convert(&[
        "--keep-failed",
        &fixture("observations_v2_api_response.constructed.json"),
    ])
    .json_lines();
    assert_eq!(all.len(), 3);
    // 14:59:02.500 − 14:57:54.131.
    assert_eq!(all[2]["timestamp"], json!(68369));
    assert_eq!(all[2]["output_length"], json!(512));
    assert_eq!(all[2]["observed"]["status"], json!("error"));

    // --keep-messages: the conversation from `input`.
    let kept = convert_kept("observations_v2_api_response.constructed.json");
    let out = kept.json_lines();
    assert_eq!(
        out[0]["messages"][0]["content"],
        json!("You are a support bot for ACME routers.")
    );
    valid(&kept);
}

#[test]
fn langfuse_ui_downloads() {
    // langgraph: two generations among spans, no TTFT recorded; the
    // second starts 09:38:57.089, the first 09:38:56.232.
    let run = convert(&[&fixture(
        "ui_trace_download.langgraph-python-2025-08-22.json",
    )]);
    run.stderr_has("9 records read, 2 written, 7 dropped (7 not model calls)");
    let out = run.json_lines();
    assert_eq!(out[1]["timestamp"], json!(857));
    assert_eq!(out[1]["input_length"], json!(108));
    assert_eq!(out[1]["output_length"], json!(51));
    assert!(out[1]["observed"].get("ttft_ms").is_none());
    // The autogen trace has sessionId "session_abc", on one generation: a
    // session of one call, written.
    let out = convert_fixture("ui_trace_download.autogen-2025-06-06.json").json_lines();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["session_id"], json!("session_abc"));
    assert_eq!(out[0]["model"], json!("gpt-4o"));
}

#[test]
fn openai_batch_joins_input_output_and_errors() {
    let files = [
        fixture("batch_input.constructed.jsonl"),
        fixture("batch_output.constructed.jsonl"),
        fixture("batch_errors.constructed.jsonl"),
    ];
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let run = convert(&files);
    run.stderr_has("3 records read, 2 written, 1 dropped (1 failed)");
    let out = run.json_lines();
    // Input order, not output order; usage from the output lines.
    assert_eq!(
        out[0],
        json!({"timestamp": 0, "input_length": 20, "output_length": 9, "hash_ids": [0],
               "model": "gpt-4o-mini", "id": "request-1",
               "observed": {"prompt_tokens": 20, "completion_tokens": 9, "status": "ok"}})
    );
    assert_eq!(out[1]["id"], json!("request-2"));
    assert_eq!(out[1]["timestamp"], json!(0));
    assert_eq!(out[1]["output_length"], json!(2));
    valid(&run);

    // --rate 4: 250 ms apart; the 400 kept, with max_completion_tokens.
    let run = convert(&[&["--rate", "4", "--keep-failed"][..], &files].concat());
    let out = run.json_lines();
    assert_eq!(out[2]["timestamp"], json!(500));
    assert_eq!(out[2]["output_length"], json!(200));
    assert_eq!(out[2]["observed"]["status"], json!("error"));
    valid(&run);

    // The input file alone: the requests' own max_tokens.
    let out = convert(&[files[0]]).json_lines();
    assert_eq!(out[0]["output_length"], json!(1000));
    // --keep-messages: the conversation and tools of the body.
    let out = convert(&["--keep-messages", files[0]]).json_lines();
    assert_eq!(out[2]["tools"][0]["function"]["name"], json!("get_weather"));
    assert_eq!(
        out[2]["messages"][0]["content"],
        json!("What is the weather in Paris?")
    );

    // --rate is for batches only.
    let run = Cmd::new("trace-convert")
        .args(["--rate", "2", &fixture("BurstGPT_v1_6col.constructed.csv")])
        .run();
    run.code(2);
    run.stderr_has("trace-convert: error: --rate applies to servegen, openai-batch and sharegpt input only; burstgpt input has its own arrival times");
}

#[test]
fn bailian_sessions_and_reblocking() {
    // Constructed from the schema in alibaba-edu/qwen-bailian-usagetraces-anon's
    // README (the data files are Git LFS objects): 16-token blocks.
    let ids = |r: std::ops::Range<u64>| r.collect::<Vec<u64>>();
    let mut third = ids(10..42);
    third.extend([900, 901]);
    let recs = [
        json!({"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40,
               "output_length": 10, "type": "text", "turn": 1, "hash_ids": [1, 2, 3]}),
        json!({"chat_id": 2, "parent_chat_id": -1, "timestamp": 1.25, "input_length": 600,
               "output_length": 5, "type": "search", "turn": 1, "hash_ids": ids(10..48)}),
        json!({"chat_id": 3, "parent_chat_id": 2, "timestamp": 61.114, "input_length": 530,
               "output_length": 7, "type": "text", "turn": 2, "hash_ids": third}),
        json!({"chat_id": 4, "parent_chat_id": 3, "timestamp": 90, "input_length": 16,
               "output_length": 1, "type": "text", "turn": 3, "hash_ids": [10]}),
    ];
    let input: String = recs.iter().map(|r| format!("{r}\n")).collect();
    let run = Cmd::new("trace-convert").stdin(input).run();
    run.code(0);
    run.stderr_has("recognised as bailian input");
    run.stderr_has("4 records read, 4 written; 1 session; time span 89.5 s");
    assert_eq!(
        run.lines(),
        [
            // ceil(40 / 512) = 1 block; chat 1 has no later turn: no session.
            r#"{"timestamp":0,"input_length":40,"output_length":10,"hash_ids":[0],"id":"1"}"#,
            // 38 source blocks → 2 canonical ones.
            r#"{"timestamp":750,"input_length":600,"output_length":5,"hash_ids":[1,2],"session_id":"2","id":"2"}"#,
            // The first 32 source ids equal chat 2's: the first 512 tokens are shared.
            r#"{"timestamp":60614,"input_length":530,"output_length":7,"hash_ids":[1,3],"session_id":"2","id":"3"}"#,
            // Turn 3 (parent 3, whose root is 2).
            r#"{"timestamp":89500,"input_length":16,"output_length":1,"hash_ids":[4],"session_id":"2","id":"4"}"#,
        ]
    );
    valid(&run);

    // A later turn listed before its parent (and the parent before its
    // own): the sessions follow the chain all the same.
    let reordered: String = [3, 2, 0, 1]
        .iter()
        .map(|&i| format!("{}\n", recs[i]))
        .collect();
    let again = run_stdin("trace-convert", &["--from", "bailian"], reordered);
    again.code(0);
    assert_eq!(again.lines(), run.lines());

    // Short hash_ids are fitted with a warning (AIPerf loads such rows);
    // too many are an error.
    let short = r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 10, "hash_ids": [1]}"#;
    let run = run_stdin("trace-convert", &["--from", "bailian"], short);
    run.code(0);
    assert_eq!(
        run.lines(),
        [r#"{"timestamp":0,"input_length":40,"output_length":10,"hash_ids":[0],"id":"1"}"#]
    );
    assert!(
        run.stderr.starts_with(
            "trace-convert: <stdin>:1: warning: field `hash_ids`: has 1 block, but input_length 40 needs \
             ceil(40 / 16) = 3; the missing blocks are taken as content no other request shares\n"
        ),
        "{}",
        run.stderr
    );
    let bad = r#"{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 40, "output_length": 10, "hash_ids": [1, 2, 3, 4]}"#;
    let run = run_stdin("trace-convert", &["--from", "bailian"], bad);
    run.code(2);
    run.stderr_is("trace-convert: <stdin>:1: error: field `hash_ids`: has 4 blocks, but input_length 40 needs ceil(40 / 16) = 3\n");
}

/// The real capture, checked against the client's own records of the same
/// 57 calls (not against the logs): which calls are kept, their order,
/// output lengths, streaming, sessions.
#[test]
fn litellm_real_capture_agrees_with_the_client() {
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("real_proxy_expected.json")).unwrap(),
    )
    .unwrap();
    let requests = expected["requests"].as_array().unwrap();
    for file in [
        "real_proxy_standard_logging_payloads.jsonl",
        "real_proxy_spend_logs_payloads.jsonl",
    ] {
        let all = convert(&["--keep-cache-hits", &fixture(file)]).json_lines();
        // Every call that succeeded, and only those, in the client's send order.
        let sent_ok: Vec<&Value> = requests.iter().filter(|r| r["ok"] == json!(true)).collect();
        let ids: Vec<&Value> = all.iter().map(|r| &r["id"]).collect();
        let want: Vec<&Value> = sent_ok.iter().map(|r| &r["litellm_call_id"]).collect();
        assert_eq!(ids, want, "{file}");
        for (rec, req) in all.iter().zip(&sent_ok) {
            let what = format!("{file}: request {}", req["idx"]);
            if let Some(n) = req["completion_tokens"].as_u64() {
                assert_eq!(rec["output_length"], json!(n), "{what}");
            }
            if let Some(n) = req["prompt_tokens"].as_u64() {
                assert_eq!(rec["input_length"], json!(n), "{what}");
            }
            // TTFT exactly for the calls that streamed.
            let streamed = req["stream"] == json!(true);
            assert_eq!(rec["observed"].get("ttft_ms").is_some(), streamed, "{what}");
            let session = req["session_id"].as_str();
            assert_eq!(rec["session_id"].as_str(), session, "{what}");
        }
        // The two repeats of the cache opt-in call are LiteLLM cache hits.
        let hits: Vec<u64> = all
            .iter()
            .zip(&sent_ok)
            .filter(|(rec, _)| rec["observed"]["status"] == json!("cache_hit"))
            .map(|(_, req)| req["idx"].as_u64().unwrap())
            .collect();
        let cache_calls: Vec<u64> = sent_ok
            .iter()
            .filter(|r| r["cache_opt_in"] == json!(true))
            .map(|r| r["idx"].as_u64().unwrap())
            .collect();
        assert_eq!(hits, cache_calls[1..], "{file}");
    }
}

#[test]
fn langfuse_ingestion_batch_with_offsets() {
    // The shape of LiteLLM's Langfuse logger payload (generation times in
    // the host's offset, legacy usage); values made up.
    let batch = json!({
        "batch": [
            {"id": "e1", "type": "trace-create", "timestamp": "2025-01-16T19:44:15Z",
             "body": {"id": "tr-1", "sessionId": "s-9", "name": "litellm-acompletion"}},
            {"id": "e2", "type": "generation-create", "timestamp": "2025-01-16T19:44:15Z",
             "body": {"id": "gen-1", "traceId": "tr-1", "name": "litellm-acompletion",
                      "startTime": "2025-01-16T11:44:14.500000-08:00",
                      "completionStartTime": "2025-01-16T11:44:14.750000-08:00",
                      "endTime": "2025-01-16T11:44:15.000000-08:00",
                      "model": "gpt-3.5-turbo", "level": "DEFAULT",
                      "modelParameters": {"stream": true},
                      "input": {"messages": [{"role": "user", "content": "Hello!"}]},
                      "usage": {"input": 9, "output": 7, "unit": "TOKENS"}}},
            {"id": "e3", "type": "generation-create", "timestamp": "2025-01-16T19:44:21Z",
             "body": {"id": "gen-2", "traceId": "tr-1", "name": "litellm-acompletion",
                      "startTime": "2025-01-16T19:44:20.500000Z",
                      "endTime": "2025-01-16T19:44:21.000000Z",
                      "model": "gpt-3.5-turbo", "level": "DEFAULT",
                      "usage": {"input": 30, "output": 4, "unit": "TOKENS"}}}
        ],
        "metadata": {"batch_size": 3, "sdk_integration": "litellm"}
    });
    let run = Cmd::new("trace-convert").stdin(batch.to_string()).run();
    run.code(0);
    run.stderr_has("recognised as langfuse input");
    let out = run.json_lines();
    // 11:44:14.5−08:00 is 19:44:14.5Z; TTFT 0.25 s; the second call 6 s
    // later, 5.5 s after the first ended.
    assert_eq!(
        out[0],
        json!({"timestamp": 0, "input_length": 9, "output_length": 7, "hash_ids": [0],
               "session_id": "s-9", "model": "gpt-3.5-turbo", "id": "gen-1",
               "observed": {"prompt_tokens": 9, "completion_tokens": 7, "ttft_ms": 250,
                            "e2e_ms": 500, "status": "ok"}})
    );
    assert_eq!(out[1]["timestamp"], json!(6000));
    assert_eq!(out[1]["delay"], json!(5500));
    assert!(out[1].get("hash_ids").is_none());
    valid(&run);
}

#[test]
fn keep_messages_maps_otel_and_langchain_messages_to_openai() {
    let file = fixture("langfuse_otel_langchain_messages.constructed.json");
    let run = convert(&["--keep-messages", &file]);
    let out = run.json_lines();
    assert_eq!(out.len(), 2);
    // OTel GenAI parts: text joined, the tool call and its answer in
    // OpenAI's places (arguments as JSON text).
    assert_eq!(
        out[0]["messages"],
        json!([
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}
        ])
    );
    // LangChain's serialized messages, and a tool's answer under the
    // tool's name as its role: it answers the call of that name.
    assert_eq!(
        out[1]["messages"],
        json!([
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "content": "rain, 8 C", "tool_call_id": "call_2"}
        ])
    );
    // An image given by URI has no OpenAI form here: left out, said why.
    run.stderr_has(&format!(
            "trace-convert: {file}:25: warning: field `messages[0].parts[1].type`: \"uri\" parts are not \
             mapped to OpenAI chat content; record left out (--keep-messages writes only messages \
             an OpenAI-compatible server takes)"
        ));
    run.stderr_has("3 records read, 2 written, 1 dropped (1 with messages no server takes)");
    valid(&run);
    // Without --keep-messages no message is written, and none is dropped.
    let run = convert(&[&file]);
    assert_eq!(run.json_lines().len(), 3);

    // LiteLLM: LangChain's message dicts, OpenAI tool calls under
    // additional_kwargs, LangChain's extra keys left out.
    let run = convert_kept("litellm_langchain_messages.constructed.jsonl");
    assert_eq!(
        run.json_lines()[0]["messages"],
        json!([
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_3", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
            {"role": "tool", "content": "clear, 25 C", "tool_call_id": "call_3"}
        ])
    );
    valid(&run);
}

#[test]
fn keep_messages_lifts_tool_definitions_logged_as_messages() {
    // Langfuse's LangChain handler lists the call's tools as `tool`
    // messages, and OpenAI's tool calls under `additional_kwargs`.
    let run = convert_kept("ui_trace_download.langgraph-python-2025-08-22.json");
    let out = run.json_lines();
    let tool = json!({"type": "function", "function": {"name": "Web-Search",
        "description": "Dummy web search tool.",
        "parameters": {"properties": {"query": {"type": "string"}}, "required": ["query"], "type": "object"}}});
    assert_eq!(out[0]["tools"], json!([tool]));
    assert_eq!(
        out[0]["messages"],
        json!([{"role": "user", "content": "Be helpful!"},
               {"role": "user", "content": "Search the web for 'example' and summarize."}])
    );
    assert_eq!(
        out[1]["messages"][2],
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1oGK863sxQHlPreFhDdEs3yl", "type": "function",
             "function": {"name": "Web-Search", "arguments": "{\"query\":\"example\"}"}}]})
    );
    assert_eq!(
        out[1]["messages"][3]["tool_call_id"],
        json!("call_1oGK863sxQHlPreFhDdEs3yl")
    );
    assert_eq!(out[1]["messages"].as_array().unwrap().len(), 4);
    valid(&run);
}

#[test]
fn calls_without_token_counts_are_counted_from_their_text_and_marked() {
    // A word-level tokenizer: one token per word, so the counts are the
    // words of the logged text; the prompt's count is of the rendered
    // conversation, "<|user|>\nWeather in Rome please\n": "<|", "user",
    // "|>" and four words, 7.
    let tok = data("wordlevel-tokenizer.json");
    let tok = tok.to_str().unwrap();
    let file = fixture("litellm_no_output_count.constructed.jsonl");
    let run = convert(&["--tokenizer", tok, &file]);
    run.stderr_has(
        "3 records read, 2 written, 1 dropped (1 with no output count or output text in the log)",
    );
    let out = run.json_lines();
    // "Sunny and mild today": 4.
    assert_eq!(
        out[0],
        json!({"timestamp": 0, "input_length": 12, "output_length": 4, "model": "m",
               "id": "counted-output",
               "observed": {"prompt_tokens": 12, "e2e_ms": 1000, "counted": ["output_length"],
                            "status": "ok"}})
    );
    assert_eq!(out[1]["input_length"], json!(7));
    assert_eq!(out[1]["observed"]["counted"], json!(["input_length"]));
    valid(&run);
    let run = convert(&["--tokenizer", tok, "--keep-messages", &file]);
    let out = run.json_lines();
    assert_eq!(
        out[1]["observed"],
        json!({"prompt_tokens": 7, "completion_tokens": 3, "e2e_ms": 1000,
               "counted": ["observed.prompt_tokens"], "status": "ok"})
    );
    valid(&run);

    // Langfuse: the output as text, and as OTel parts ("Rain" " later": 2).
    let run = convert(&[
        "--tokenizer",
        tok,
        &fixture("langfuse_no_output_count.constructed.jsonl"),
    ]);
    let out = run.json_lines();
    assert_eq!(out[0]["output_length"], json!(4));
    assert_eq!(out[1]["output_length"], json!(2));
    assert_eq!(out[1]["observed"]["counted"], json!(["output_length"]));
    run.stderr_has("1 dropped (1 with no output count or output text in the log)");
}

#[test]
fn litellm_calls_of_one_session_become_their_dependency_graph() {
    // Session sess-a: c1 runs 0-1000 ms; c2 (1100-2000) and c3
    // (1100-2500) both start after c1 ended, so both wait for it (fan-out,
    // 100 ms after its end); c4 starts at 2600, after both ended: it joins
    // them, c3 first as the one that ended last, 100 ms after c3's end.
    let path = data("convert/litellm_session_fanout.constructed.jsonl");
    let run = Cmd::new("trace-convert").arg(&path).run();
    run.code(0);
    let graph = columns(&run.json_lines(), "id timestamp session_id after delay");
    assert_eq!(
        graph,
        [
            json!(["c1", 0, "sess-a", null, null]),
            json!(["c2", 1100, "sess-a", ["c1"], 100]),
            json!(["c3", 1100, "sess-a", ["c1"], 100]),
            json!(["c4", 2600, "sess-a", ["c3", "c2"], 100]),
        ]
    );
    // --no-graph: the chain of turns, each `delay` after the previous
    // turn's end in start order, never negative (c3 started before c2's
    // end at 2000: 0; c4 100 ms after c3's end at 2500).
    let chain = Cmd::new("trace-convert").arg("--no-graph").arg(&path).run();
    chain.code(0);
    let delays: Vec<Value> = chain
        .lines()
        .iter()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            assert!(r.get("after").is_none(), "{l}");
            r["delay"].clone()
        })
        .collect();
    assert_eq!(delays, [json!(null), json!(100), json!(0), json!(100)]);
}

#[test]
fn a_damaged_parquet_file_is_an_error_naming_it_never_a_panic() {
    let dir = TestDir::new("convert-parquet-damaged");
    let good = std::fs::read(data("convert/blob_export_observations.parquet")).unwrap();
    let path = dir.path.join("obs.parquet");
    std::fs::write(&path, &good[..5000]).unwrap();
    let run = Cmd::new("trace-convert").arg(&path).run();
    run.code(2);
    run.stderr_has(&format!(
        "trace-convert: error: {}: not a Parquet file this reader can read: ",
        path.display()
    ));
    // Bytes changed all over the file (pages, footer, the index's lengths):
    // each run ends with records or an error, never a panic.
    for k in 0..48 {
        let mut bad = good.clone();
        let at = (k * 7919 + 13) % bad.len();
        bad[at] ^= 0x5a;
        let second = (at * 31) % bad.len();
        bad[second] = 0xff;
        std::fs::write(&path, &bad).unwrap();
        let run = Cmd::new("trace-convert").arg(&path).run();
        assert!(
            matches!(run.code, 0 | 2),
            "byte {at}: exit {}\n{}",
            run.code,
            run.stderr
        );
        assert!(
            !run.stderr.contains("panicked"),
            "byte {at}: {}",
            run.stderr
        );
    }
}

/// ShareGPT (ShareGPT_V3's layout): each conversation a session of its
/// answered turns, each turn's prompt every message before its answer.
#[test]
fn sharegpt_conversations_are_sessions_of_their_real_messages() {
    let dir = TestDir::new("sharegpt");
    let real = fixture("ShareGPT_V3_unfiltered_cleaned_split.entry0-head6.json");
    // A second input (JSONL), written here: a system message, a question
    // left unanswered at the end, and an unknown speaker in a third entry.
    let second = dir.write(
        "more.jsonl",
        concat!(
            r#"{"id": "c2", "conversations": [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello there"}, {"from": "human", "value": "Bye"}]}"#,
            "\n"
        ),
    );
    let run = convert(&[
        "--from",
        "sharegpt",
        "--keep-messages",
        "--rate",
        "2",
        &real,
        second.to_str().unwrap(),
    ]);
    valid(&run);
    let recs = run.json_lines();
    assert_eq!(recs.len(), 4, "{}", run.stdout_str());
    let source: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    let turns = source[0]["conversations"].as_array().unwrap();
    let o200k = tracekit::tokenizer::Tokenizer::load("o200k_base").unwrap();
    for (k, rec) in recs[..3].iter().enumerate() {
        // Conversation 0 starts at 0; its turns follow each other at once.
        assert_eq!(rec["timestamp"], 0);
        assert_eq!(rec["session_id"], "QWJhYvA_0");
        assert_eq!(rec["id"], format!("QWJhYvA_0/{}", k + 1));
        if k > 0 {
            assert_eq!(rec["delay"], 0);
        }
        // Turn k's prompt: the 2k + 1 messages before its answer.
        let messages = rec["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2 * k + 1);
        for (m, t) in messages.iter().zip(turns) {
            let role = if t["from"] == "human" {
                "user"
            } else {
                "assistant"
            };
            assert_eq!(m["role"], role);
            assert_eq!(m["content"], t["value"]);
        }
        let answer = turns[2 * k + 1]["value"].as_str().unwrap();
        assert_eq!(rec["output_length"], o200k.count(answer).unwrap() as u64);
    }
    // Conversation 1 at 1 / 2 s: one answered turn, its system message kept.
    let c2 = &recs[3];
    assert_eq!(c2["timestamp"], 500);
    assert_eq!(c2["id"], "c2/1");
    assert_eq!(
        c2["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    );
    // A speaker ShareGPT does not have: the entry, the field and the value.
    let bad = dir.write(
        "bad.json",
        r#"[{"id": "x", "conversations": [{"from": "human", "value": "a"}, {"from": "robot", "value": "b"}]}]"#,
    );
    Cmd::new("trace-convert")
        .args(["--from", "sharegpt", bad.to_str().unwrap()])
        .run()
        .code(2)
        .stderr_has("field `conversations[1].from`: expected \"human\", \"gpt\" or \"system\", found \"robot\"");
    // Found by its content, too.
    let auto = convert(&["--keep-messages", &real]);
    assert_eq!(auto.json_lines().len(), 3);
}
