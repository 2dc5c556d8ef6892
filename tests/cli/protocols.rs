//! Each protocol by its own rules: a Messages or Responses stream is read
//! as that protocol says (where it opens, where it ends, what a failure
//! is), a stream of another shape is an error saying what came, tool calls
//! without a usable id go back under unique ones, and a server gone silent
//! is a timeout after --idle-timeout. The streams are those of the scripted
//! server behind the third trust campaign (its modes `failed_no_error`,
//! `chat_shape`, `stop_only`, `after_stop_garbage`, `tool_missing_ids`,
//! `tool_empty_ids`, `tool_nonstring_ids`, `stall_after_start`), written
//! here byte for byte.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::servers::{Answer, Raw, Scripted, hold_open};
use crate::util::run_stdin;

/// One SSE event, named.
fn ev(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A Messages stream: message_start, one text block of `words`, the end.
fn messages_ok(words: &[&str]) -> String {
    let mut s = ev(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "m", "stop_reason": null,
            "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 4,
                      "cache_creation_input_tokens": 0}}}),
    );
    s += &text_block(0, words);
    s += &messages_end("end_turn");
    s
}

fn text_block(index: u64, words: &[&str]) -> String {
    let mut s = ev(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}}),
    );
    for w in words {
        s += &ev(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": w}}),
        );
    }
    s + &ev(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

fn messages_end(stop: &str) -> String {
    ev(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 6}}),
    ) + &ev("message_stop", &json!({"type": "message_stop"}))
}

fn created() -> String {
    ev(
        "response.created",
        &json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
    )
}

fn text_item(words: &[&str]) -> String {
    let mut s = ev(
        "response.output_item.added",
        &json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
    );
    for w in words {
        s += &ev(
            "response.output_text.delta",
            &json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                    "content_index": 0, "delta": w}),
        );
    }
    s
}

fn completed(output: &Value) -> String {
    ev(
        "response.completed",
        &json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
            "output": output, "usage": {"input_tokens": 10, "output_tokens": 6,
            "input_tokens_details": {"cached_tokens": 4}}}}),
    )
}

/// A chat stream, as a chat server sends it whatever the path.
const CHAT_SHAPE: &str = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
data: [DONE]\n\n";

/// The errors of a chat stream sent for a typed one: what came, its first
/// 80 bytes (the first chunk's data cut after `"role"`).
const CHAT_SHOWN_MESSAGES: &str = "not a /v1/messages stream: an event without a type: \
    {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\"";
const CHAT_SHOWN_RESPONSES: &str = "not a /v1/responses stream: an event without a type: \
    {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\"";

/// The answer for a request whose text names a case, on either API.
fn by_case(head: &str, body: &str) -> Answer {
    if head.starts_with("POST /v1/chat") {
        return Answer::sse(CHAT_SHAPE.as_bytes(), usize::MAX);
    }
    let messages = head.starts_with("POST /v1/messages");
    let case = |c: &str| body.contains(c);
    let stream = if case("case-failed-no-error") {
        // Responses only: a failure without an error object.
        if !body.contains("\"stream\":true") {
            return Answer::json(
                "200 OK",
                r#"{"id":"resp_1","object":"response","status":"failed","error":null,"output":[]}"#,
            );
        }
        created()
            + &ev(
                "response.failed",
                &json!({"type": "response.failed", "response": {"status": "failed", "error": null, "output": []}}),
            )
    } else if case("case-chat-shape") {
        CHAT_SHAPE.to_string()
    } else if case("case-reorder") {
        // Messages only: the usage and stop reason before the start.
        let ok = messages_ok(&["Hello"]);
        let at = ok.find("event: message_delta").unwrap();
        let end = ok.find("event: message_stop").unwrap();
        format!("{}{}{}", &ok[at..end], &ok[..at], &ok[end..])
    } else if case("case-stop-only") && messages {
        ev("message_stop", &json!({"type": "message_stop"}))
    } else if case("case-stop-only") {
        completed(&json!([]))
    } else if case("case-after-stop") && messages {
        messages_ok(&["Hello"])
            + "data: {not json\n\n"
            + &ev(
                "error",
                &json!({"type": "error", "error": {"type": "api_error", "message": "late error"}}),
            )
    } else if case("case-after-stop") {
        created()
            + &text_item(&["Hello"])
            + &completed(&json!([]))
            + "data: {not json\n\n"
            + &ev(
                "error",
                &json!({"type": "error", "code": "x", "message": "late"}),
            )
    } else if messages {
        messages_ok(&["Hello", " there"])
    } else {
        created() + &text_item(&["Hello", " there"]) + &completed(&json!([]))
    };
    Answer::sse(stream.as_bytes(), usize::MAX)
}

/// (status, error, finish_reason, prompt_tokens, completion_tokens) of each
/// result, in record order.
fn outcomes(results: &[Value]) -> Vec<(String, String, String, Value, Value)> {
    let mut results = results.to_vec();
    results.sort_by_key(|r| r["index"].as_u64());
    results
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap().to_string(),
                r["error"].as_str().unwrap_or("").to_string(),
                r["finish_reason"].as_str().unwrap_or("").to_string(),
                r["prompt_tokens"].clone(),
                r["completion_tokens"].clone(),
            )
        })
        .collect()
}

fn cases_trace(cases: &[&str]) -> String {
    cases
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{{\"timestamp\":{i},\"text_input\":\"{c}\",\"output_length\":2}}\n"))
        .collect()
}

fn o(
    status: &str,
    error: &str,
    finish: &str,
    prompt: Value,
    completion: Value,
) -> (String, String, String, Value, Value) {
    (
        status.into(),
        error.into(),
        finish.into(),
        prompt,
        completion,
    )
}

#[test]
fn a_messages_stream_is_read_by_its_own_rules() {
    let server = Scripted::start_with_head(Arc::new(by_case));
    let trace = cases_trace(&[
        "case-chat-shape",
        "case-stop-only",
        "case-after-stop",
        "case-fine",
        "case-reorder",
    ]);
    let run = run_stdin(
        "trace-replay",
        &["--quiet", "--url", &server.url, "--endpoint", "messages"],
        trace,
    );
    run.code(0);
    // Usage of a good stream: prompt 10 + 4 cached + 0 created = 14, 6 out.
    assert_eq!(
        outcomes(&run.json_lines()),
        [
            o("error", CHAT_SHOWN_MESSAGES, "", Value::Null, Value::Null),
            o(
                "error",
                "not a /v1/messages stream: message_stop before message_start",
                "",
                Value::Null,
                Value::Null
            ),
            // What follows message_stop is not read: the answer is whole.
            o("ok", "", "end_turn", json!(14), json!(6)),
            o("ok", "", "end_turn", json!(14), json!(6)),
            o(
                "error",
                "not a /v1/messages stream: an event before message_start: \
                 {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_toke",
                // The delta came first and was read (end_turn, 6 out: a
                // server may leave the opening event out); message_start
                // after it is the reorder, and is not read: no prompt.
                "end_turn",
                Value::Null,
                json!(6)
            ),
        ]
    );
}

#[test]
fn a_responses_stream_is_read_by_its_own_rules() {
    let server = Scripted::start_with_head(Arc::new(by_case));
    let trace = cases_trace(&[
        "case-failed-no-error",
        "case-chat-shape",
        "case-stop-only",
        "case-after-stop",
        "case-fine",
    ]);
    let run = run_stdin(
        "trace-replay",
        &["--quiet", "--url", &server.url, "--endpoint", "responses"],
        trace.clone(),
    );
    run.code(0);
    assert_eq!(
        outcomes(&run.json_lines()),
        [
            o(
                "error",
                "the response failed (status \"failed\") without an error object",
                "failed",
                Value::Null,
                Value::Null
            ),
            o("error", CHAT_SHOWN_RESPONSES, "", Value::Null, Value::Null),
            // A lone response.completed carries the whole response: it is
            // the answer (llama.cpp sends no response.created when it holds
            // its first token back, part of a character): 10 in, 6 out.
            o("ok", "", "completed", json!(10), json!(6)),
            // Usage of response.completed: 10 in (4 cached), 6 out.
            o("ok", "", "completed", json!(10), json!(6)),
            o("ok", "", "completed", json!(10), json!(6)),
        ]
    );
    // The whole answer of a failure without an error object says the same.
    let run = run_stdin(
        "trace-replay",
        &[
            "--quiet",
            "--url",
            &server.url,
            "--endpoint",
            "responses",
            "--no-stream",
        ],
        cases_trace(&["case-failed-no-error"]),
    );
    run.code(0);
    assert_eq!(
        outcomes(&run.json_lines()),
        [o(
            "error",
            "the response failed (status \"failed\") without an error object",
            "failed",
            Value::Null,
            Value::Null
        )]
    );
}

/// The ids a tool-call answer gives its two calls, as a server without
/// proper ids sends them: none, empty, or numbers.
#[derive(Clone, Copy)]
enum Ids {
    Missing,
    Empty,
    Numbers,
}

impl Ids {
    fn of(self, k: u64) -> Option<Value> {
        match self {
            Ids::Missing => None,
            Ids::Empty => Some(json!("")),
            Ids::Numbers => Some(json!(100 + k)),
        }
    }
}

/// A streamed answer of some text and two `get_file` calls, on the API
/// the request's path names.
fn tool_answer(head: &str, ids: Ids) -> String {
    let args = r#"{"path": "a.py"}"#;
    if head.starts_with("POST /v1/messages") {
        let mut s = ev(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        );
        s += &text_block(0, &["Let", " me", " look"]);
        for k in 1..=2 {
            let mut block = json!({"type": "tool_use", "name": "get_file", "input": {}});
            if let Some(id) = ids.of(k) {
                block["id"] = id;
            }
            s += &ev(
                "content_block_start",
                &json!({"type": "content_block_start", "index": k, "content_block": block}),
            );
            s += &ev(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": k,
                        "delta": {"type": "input_json_delta", "partial_json": args}}),
            );
            s += &ev(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": k}),
            );
        }
        return s + &messages_end("tool_use");
    }
    if head.starts_with("POST /v1/responses") {
        let mut s = created() + &text_item(&["Let", " me", " look"]);
        for k in 1..=2 {
            let mut item = json!({"type": "function_call", "id": format!("fc_{k}"), "name": "get_file", "arguments": ""});
            if let Some(id) = ids.of(k) {
                item["call_id"] = id;
            }
            s += &ev(
                "response.output_item.added",
                &json!({"type": "response.output_item.added", "output_index": k, "item": item}),
            );
            s += &ev(
                "response.function_call_arguments.delta",
                &json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{k}"),
                        "output_index": k, "delta": args}),
            );
        }
        return s + &completed(&json!([]));
    }
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut s = chunk(
        json!({"role": "assistant", "content": "Let me look"}),
        Value::Null,
    );
    for k in 0..2 {
        let mut call = json!({"index": k, "type": "function",
                              "function": {"name": "get_file", "arguments": args}});
        if let Some(id) = ids.of(k) {
            call["id"] = id;
        }
        s += &chunk(json!({"tool_calls": [call]}), Value::Null);
    }
    s + &chunk(json!({}), json!("tool_calls")) + "data: [DONE]\n\n"
}

/// The ids of the tool calls and of the tool results a request body sends,
/// in order, whatever its API.
fn call_and_result_ids(body: &Value) -> (Vec<Value>, Vec<Value>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    let items = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .unwrap();
    for m in items {
        // chat
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            calls.push(c["id"].clone());
        }
        if m["role"] == "tool" {
            results.push(m["tool_call_id"].clone());
        }
        // messages
        for b in m["content"].as_array().into_iter().flatten() {
            match b["type"].as_str() {
                Some("tool_use") => calls.push(b["id"].clone()),
                Some("tool_result") => results.push(b["tool_use_id"].clone()),
                _ => {}
            }
        }
        // responses
        match m["type"].as_str() {
            Some("function_call") => calls.push(m["call_id"].clone()),
            Some("function_call_output") => results.push(m["call_id"].clone()),
            _ => {}
        }
    }
    (calls, results)
}

#[test]
fn live_tool_calls_without_a_usable_id_go_back_under_unique_made_up_ids() {
    // A first turn, answered with two calls; a delta turn whose recorded
    // tool results answer the trace's calls rec_1 and rec_2.
    let trace = concat!(
        r#"{"id":"plan","session_id":"s1","timestamp":0,"messages":[{"role":"user","content":"go"}],"output_length":20}"#,
        "\n",
        r#"{"id":"read","session_id":"s1","after":["plan"],"message_mode":"delta","messages":[{"role":"tool","tool_call_id":"rec_1","content":"one"},{"role":"tool","tool_call_id":"rec_2","content":"two"}],"output_length":20}"#,
        "\n",
    );
    for ids in [Ids::Missing, Ids::Empty, Ids::Numbers] {
        for endpoint in ["chat", "messages", "responses"] {
            let server = Scripted::start_with_head(Arc::new(move |head: &str, body: &str| {
                // The delta turn carries the recorded results: a plain answer.
                if body.contains("rec_") || body.contains("call_tracekit") {
                    by_case(head, "case-fine")
                } else {
                    Answer::sse(tool_answer(head, ids).as_bytes(), usize::MAX)
                }
            }));
            let run = run_stdin(
                "trace-replay",
                &["--quiet", "--url", &server.url, "--endpoint", endpoint],
                trace,
            );
            run.code(0);
            // One process, one answer without ids: its two calls are the
            // run's first two made-up ids, and the recorded results rec_1
            // and rec_2 go under them, in order.
            run.stderr_has(
                "trace-replay: warning: record 1: the answer's tool calls came without a usable \
                 id (none, empty, not a string, or repeated): sent back under made-up ids \
                 (call_tracekit_N), with the tool results that answer them; later answers like \
                 it are not named\n",
            );
            let statuses: Vec<Value> = run
                .json_lines()
                .iter()
                .map(|r| r["status"].clone())
                .collect();
            assert_eq!(statuses, [json!("ok"), json!("ok")], "{endpoint}");
            let seen = server.seen.lock().unwrap().clone();
            assert_eq!(seen.len(), 2, "{endpoint}");
            let second: Value = serde_json::from_str(&seen[1].body).unwrap();
            let made_up = vec![json!("call_tracekit_1"), json!("call_tracekit_2")];
            assert_eq!(
                call_and_result_ids(&second),
                (made_up.clone(), made_up),
                "{endpoint}: {second}"
            );
        }
    }
}

/// A server that reads a request and then sends nothing more: at once
/// (`silent-head`), or after the head and one event (`silent-body`).
fn silent(_head: &str, body: &str, mut conn: TcpStream) {
    if body.contains("silent-body") {
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n";
        let _ = conn.write_all(head.as_bytes());
        let _ = conn.write_all(first.as_bytes());
        let _ = conn.flush();
    }
    hold_open(conn);
}

#[test]
fn a_server_gone_silent_is_a_timeout_after_idle_timeout_on_both_transports() {
    let server = Raw::start(Arc::new(silent));
    let port = server.url.rsplit(':').next().unwrap();
    // Plain http:// takes the lean HTTP/1 path; credentials in the URL
    // take reqwest's.
    let reqwest_url = format!("http://u:p@127.0.0.1:{port}");
    for url in [server.url.as_str(), reqwest_url.as_str()] {
        let run = run_stdin(
            "trace-replay",
            &[
                "--quiet",
                "--url",
                url,
                "--idle-timeout",
                "1s",
                "--timeout",
                "10m",
            ],
            cases_trace(&["silent-head", "silent-body"]),
        );
        run.code(0);
        let mut results = run.json_lines();
        results.sort_by_key(|r| r["index"].as_u64());
        for r in &results {
            assert_eq!(r["status"], "timeout", "{url}: {r}");
            assert_eq!(
                r["error"], "no byte from the server for 1s (--idle-timeout)",
                "{url}: {r}"
            );
        }
        // The event that came before the silence was timed.
        assert!(results[0]["first_chunk_ms"].is_null(), "{}", results[0]);
        assert!(results[1]["ttft_ms"].is_f64(), "{}", results[1]);
    }
}

#[test]
fn a_whole_answer_whose_body_goes_silent_is_a_timeout_after_idle_timeout() {
    // --no-stream: the head's wait is --timeout's alone; once it came, the
    // body's reads are --idle-timeout's too, though the timer was set for
    // --timeout's 10 minutes while the head was awaited.
    let server = Raw::start(Arc::new(silent));
    let run = run_stdin(
        "trace-replay",
        &[
            "--quiet",
            "--no-stream",
            "--url",
            &server.url,
            "--idle-timeout",
            "1s",
            "--timeout",
            "10m",
        ],
        cases_trace(&["silent-body"]),
    );
    run.code(0);
    let r = &run.json_lines()[0];
    assert_eq!(r["status"], "timeout", "{r}");
    assert_eq!(
        r["error"], "no byte from the server for 1s (--idle-timeout)",
        "{r}"
    );
}

/// A stream of five events 400 ms apart, then its end: 2 s in all.
fn trickle(_head: &str, _body: &str, mut conn: TcpStream) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let _ = conn.write_all(head.as_bytes());
    for _ in 0..5 {
        let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        let _ = conn.write_all(event.as_bytes());
        let _ = conn.flush();
        std::thread::sleep(std::time::Duration::from_millis(400));
    }
    let _ = conn.write_all(b"data: [DONE]\n\n");
}

#[test]
fn a_slow_stream_whose_bytes_keep_coming_is_not_idle() {
    // --idle-timeout 1s over a stream 2 s long whose gaps are 400 ms:
    // the limit runs from the last byte, not from the request.
    let server = Raw::start(Arc::new(trickle));
    let run = run_stdin(
        "trace-replay",
        &["--quiet", "--url", &server.url, "--idle-timeout", "1s"],
        cases_trace(&["trickle"]),
    );
    run.code(0);
    let results = run.json_lines();
    assert_eq!(results[0]["status"], "ok", "{}", results[0]);
    assert!(
        results[0]["e2e_ms"].as_f64().unwrap() >= 2000.0,
        "{}",
        results[0]
    );
}

#[test]
fn bytes_that_keep_coming_do_not_hold_off_the_timeout() {
    // The same 2 s stream under --timeout 1s: one timer watches both
    // limits, and the idle one moving on must not move --timeout's.
    let server = Raw::start(Arc::new(trickle));
    let run = run_stdin(
        "trace-replay",
        &[
            "--quiet",
            "--url",
            &server.url,
            "--timeout",
            "1s",
            "--idle-timeout",
            "1.5s",
        ],
        cases_trace(&["trickle"]),
    );
    let results = run.json_lines();
    assert_eq!(results[0]["status"], "timeout", "{}", results[0]);
    assert_eq!(
        results[0]["error"], "no complete answer within --timeout",
        "{}",
        results[0]
    );
}
