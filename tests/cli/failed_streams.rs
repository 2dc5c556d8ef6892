//! A stream that fails midway says so in a choice (vLLM, OpenRouter):
//! `finish_reason` "error", with or without a choice-level `error`
//! object. The result is an error with the engine's message, not ok.

use serde_json::Value;

use crate::servers::{Answer, Scripted};
use crate::util::run_stdin;

/// Each case's stream: some content, then the failing chunk, then `[DONE]`.
fn failing(body: &str) -> Answer {
    let first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n";
    let last = if body.contains("case-object") {
        // The choice carries the engine's error.
        "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"error\",\"error\":{\"message\":\"EngineCore encountered an issue\",\"code\":500}}]}"
    } else if body.contains("case-reason") {
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}"
    } else if body.contains("case-openrouter") {
        // OpenRouter: the error at the top, the choice ended by it.
        "{\"id\":\"gen-1\",\"object\":\"chat.completion.chunk\",\"error\":{\"code\":\"server_error\",\"message\":\"Provider disconnected unexpectedly\"},\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"error\"}]}"
    } else {
        "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\",\"error\":null}]}"
    };
    let stream = format!("{first}data: {last}\n\ndata: [DONE]\n\n");
    Answer::sse(stream.as_bytes(), 1000)
}

#[test]
fn a_choice_ended_by_an_error_is_an_error_with_the_engines_message() {
    let server = Scripted::start(failing);
    let trace: String = ["case-object", "case-reason", "case-openrouter", "case-fine"]
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{{\"timestamp\":{i},\"text_input\":\"{c}\",\"output_length\":2}}\n"))
        .collect();
    let run = run_stdin("trace-replay", &["--quiet", "--url", &server.url], trace);
    run.code(0);
    let mut results = run.json_lines();
    results.sort_by_key(|r| r["index"].as_u64());
    let seen: Vec<(&str, &str, &str)> = results
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap(),
                r["error"].as_str().unwrap_or(""),
                r["finish_reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("error", "EngineCore encountered an issue", "error"),
            (
                "error",
                "the server ended the answer with finish_reason \"error\"",
                "error"
            ),
            ("error", "Provider disconnected unexpectedly", "error"),
            ("ok", "", "stop"),
        ]
    );
    // The content before the failure was timed.
    assert!(results[0]["ttft_ms"].is_f64(), "{}", results[0]);
    assert_eq!(results[3]["error"], Value::Null);
}
