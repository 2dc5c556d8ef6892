//! Traces as users bring them: converter outputs checked by trace-validate,
//! whose advice must rest on evidence.

use crate::util::{Cmd, data, run_file, run_stdin};

#[test]
fn burstgpt_absolute_output_draws_no_unit_advice() {
    // 20 days into BurstGPT: 1728000000 ms looks like epoch seconds by
    // magnitude alone, but every gap is whole seconds: already milliseconds.
    let run = Cmd::new("trace-convert")
        .arg("--absolute")
        .arg(data("convert/BurstGPT_day20.constructed.csv"))
        .run();
    run.code(0);
    assert_eq!(
        run.lines()[..2],
        [
            r#"{"timestamp":1728000000,"input_length":472,"output_length":18}"#,
            r#"{"timestamp":1728000000,"input_length":90,"output_length":12}"#,
        ]
    );
    let check = run_stdin(
        "trace-validate",
        &["--check", "--strict"],
        run.stdout.clone(),
    );
    check.ok();
}

#[test]
fn langfuse_latency_unit_follows_the_observation_times() {
    // pydantic-ai's UI download gives latency and timeToFirstToken in ms:
    // gen-1 ran 1.707 s (latency 1707), gen-2 912 ms with its first
    // token at 240 ms; gen-3's latency 5 fits its 1.2 s neither way.
    // Sessions come from trace.sessionId: the observations carry none.
    // Each call waits for the one before it: gen-1 ended at 1707, 293 ms
    // before gen-2 started; gen-2 at 2912, 88 ms before gen-3.
    let run = run_file(
        "trace-convert",
        &[],
        data("convert/ui_trace_download.pydantic-ai.constructed.json"),
    );
    run.code(0);
    assert_eq!(
        run.lines(),
        [
            r#"{"timestamp":0,"input_length":120,"output_length":30,"session_id":"chat-42","model":"gpt-4o","id":"gen-1","observed":{"prompt_tokens":120,"completion_tokens":30,"e2e_ms":1707,"status":"ok"}}"#,
            r#"{"timestamp":2000,"input_length":180,"output_length":12,"session_id":"chat-42","model":"gpt-4o","id":"gen-2","observed":{"prompt_tokens":180,"completion_tokens":12,"ttft_ms":240,"e2e_ms":912,"status":"ok"},"after":["gen-1"],"delay":293}"#,
            r#"{"timestamp":3000,"input_length":200,"output_length":8,"session_id":"chat-42","model":"gpt-4o","id":"gen-3","observed":{"prompt_tokens":200,"completion_tokens":8,"e2e_ms":5000,"status":"ok"},"after":["gen-2"],"delay":88}"#,
        ]
    );
    let file = data("convert/ui_trace_download.pydantic-ai.constructed.json");
    run.stderr_has(&format!(
        "trace-convert: {}:1: warning: field `latency`: 5 agrees with the observation's times \
         (1200 ms from startTime to endTime) neither as seconds nor as milliseconds; taken as seconds\n",
        file.display()
    ));
}

#[test]
fn litellm_ttft_only_for_streamed_calls_and_embeddings_are_not_failures() {
    // call-1: Bedrock, not streamed (model_parameters.stream false) though
    // the top-level `stream` says true and completionStartTime is 1 ms
    // before the end; call-2 streamed (first token at 250 ms); call-3 an
    // embedding (no output tokens by design); call-4 a real failure.
    let run = Cmd::new("trace-convert")
        .arg("--keep-failed")
        .arg(data(
            "convert/litellm_stream_and_embedding.constructed.jsonl",
        ))
        .run();
    run.code(0);
    assert_eq!(
        run.lines(),
        [
            r#"{"timestamp":0,"input_length":12,"output_length":20,"model":"claude-haiku","id":"call-1","observed":{"prompt_tokens":12,"completion_tokens":20,"e2e_ms":500,"status":"ok"}}"#,
            r#"{"timestamp":1000,"input_length":15,"output_length":30,"model":"gpt-4o","id":"call-2","observed":{"prompt_tokens":15,"completion_tokens":30,"ttft_ms":250,"e2e_ms":1000,"status":"ok"}}"#,
            r#"{"timestamp":3000,"input_length":8,"output_length":1,"hash_ids":[0],"model":"embed","id":"call-3","observed":{"prompt_tokens":8,"completion_tokens":0,"e2e_ms":100,"status":"ok"}}"#,
            r#"{"timestamp":4000,"input_length":0,"output_length":64,"model":"gpt-4o","id":"call-4","observed":{"prompt_tokens":0,"completion_tokens":0,"e2e_ms":200,"status":"error"}}"#,
        ]
    );
}

/// A Langfuse `generation-create` event of trace tr-1 as LiteLLM's logger
/// sends it: the event's id and time, the generation's id, its start,
/// first-token and end times, its stream flag, its prompt and output tokens.
fn generation(
    event: &str,
    at: &str,
    id: &str,
    times: [&str; 3],
    stream: serde_json::Value,
    tokens: [u32; 2],
) -> serde_json::Value {
    serde_json::json!({"id": event, "type": "generation-create", "timestamp": at, "body": {
        "id": id, "traceId": "tr-1", "name": "litellm-acompletion",
        "startTime": times[0], "completionStartTime": times[1], "endTime": times[2],
        "model": "anthropic.claude-3-haiku", "level": "DEFAULT", "modelParameters": {"stream": stream},
        "usage": {"input": tokens[0], "output": tokens[1], "unit": "TOKENS"}}})
}

#[test]
fn langfuse_logger_bodies_of_calls_not_streamed_have_no_ttft() {
    // LiteLLM's Langfuse logger: a non-streamed Bedrock call has
    // completionStartTime equal to endTime; another says stream "false".
    // Both are calls of trace tr-1: gen-c waits for gen-b, which ended
    // at 237 ms, 1601 ms before gen-c started.
    let batch = serde_json::json!({
        "batch": [
            {"id": "e1", "type": "trace-create", "timestamp": "2025-06-22T16:59:08Z",
             "body": {"id": "tr-1", "name": "litellm-acompletion"}},
            generation(
                "e2",
                "2025-06-22T16:59:08Z",
                "gen-b",
                ["2025-06-22T18:59:08.162000+02:00", "2025-06-22T18:59:08.399000+02:00", "2025-06-22T18:59:08.399000+02:00"],
                serde_json::json!(false),
                [10, 5],
            ),
            generation(
                "e3",
                "2025-06-22T16:59:10Z",
                "gen-c",
                ["2025-06-22T16:59:10.000000Z", "2025-06-22T16:59:10.400000Z", "2025-06-22T16:59:10.500000Z"],
                serde_json::json!("false"),
                [20, 6],
            ),
        ]
    });
    let run = run_stdin("trace-convert", &[], batch.to_string());
    run.code(0);
    assert_eq!(
        run.lines(),
        [
            r#"{"timestamp":0,"input_length":10,"output_length":5,"session_id":"tr-1","model":"anthropic.claude-3-haiku","id":"gen-b","observed":{"prompt_tokens":10,"completion_tokens":5,"e2e_ms":237,"status":"ok"}}"#,
            r#"{"timestamp":1838,"input_length":20,"output_length":6,"session_id":"tr-1","model":"anthropic.claude-3-haiku","id":"gen-c","observed":{"prompt_tokens":20,"completion_tokens":6,"e2e_ms":500,"status":"ok"},"after":["gen-b"],"delay":1601}"#,
        ]
    );
}

#[test]
fn zstd_and_xz_inputs_are_recognised_and_zst_outputs_written() {
    use std::io::Write;
    let plain = std::fs::read(data("aiperf_mooncake/fixed_schedule.jsonl")).unwrap();
    let text = String::from_utf8(plain.clone()).unwrap();
    let (first, rest) = text.split_at(text.find('\n').unwrap() + 1);
    // Two zstd frames, as `cat a.zst b.zst` leaves them.
    let mut zst = zstd::encode_all(first.as_bytes(), 3).unwrap();
    zst.extend(zstd::encode_all(rest.as_bytes(), 3).unwrap());
    // Two xz streams, likewise.
    let mut xz = Vec::new();
    for part in [first, rest] {
        let mut enc = liblzma::write::XzEncoder::new(Vec::new(), 6);
        enc.write_all(part.as_bytes()).unwrap();
        xz.extend(enc.finish().unwrap());
    }
    let dir = crate::util::TestDir::new("compressed-inputs");
    // Names that do not say how they are compressed: the content does.
    let zst_file = dir.write("trace-zst.jsonl", &zst);
    let xz_file = dir.write("trace-xz.jsonl", &xz);
    for (file, bytes) in [(&zst_file, &zst), (&xz_file, &xz)] {
        let run = run_file("trace-validate", &[], file);
        run.ok();
        assert_eq!(run.stdout, plain, "{}", file.display());
        let run = run_stdin("trace-validate", &[], bytes.clone());
        run.ok();
        assert_eq!(run.stdout, plain, "stdin");
        let run = run_file("trace-convert", &["--from", "mooncake"], file);
        run.code(0);
        assert_eq!(run.stdout, plain, "{}", file.display());
    }
    let out = dir.join("sliced.jsonl.zst");
    let run = Cmd::new("trace-slice")
        .args(["--head", "2", "-o"])
        .arg(&out)
        .arg(&xz_file)
        .run();
    run.ok();
    let written = std::fs::read(&out).unwrap();
    assert_eq!(written[..4], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    let lines: Vec<&str> = text.lines().take(2).collect();
    assert_eq!(
        String::from_utf8(zstd::decode_all(&written[..]).unwrap()).unwrap(),
        format!("{}\n{}\n", lines[0], lines[1])
    );
}
