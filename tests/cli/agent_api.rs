//! The APIs coding agents speak (`--endpoint messages`, `responses`), tool
//! results under the live answer's call ids, `--live-answers` on every
//! generating endpoint, and the sessions' figures of agentic runs.

use serde_json::{Value, json};

use crate::servers::{Answer, Scripted, Sim};
use crate::util::{
    self, Run, close, close_at, columns, live_answer_session, replay, summary_json, trace,
};

/// Results by index, one per record, of a run that exits 0.
fn by_index(run: &Run, n: usize) -> Vec<Value> {
    run.code(0);
    util::by_index(run, n).into_values().collect()
}

/// The results of `input`'s `n` records replayed to `server` as
/// `--endpoint messages`, with `flags`.
fn to_messages(server: &Scripted, flags: &[&str], input: &str, n: usize) -> Vec<Value> {
    to_endpoint(server, "messages", flags, input, n)
}

/// The same, to `endpoint`.
fn to_endpoint(
    server: &Scripted,
    endpoint: &str,
    flags: &[&str],
    input: &str,
    n: usize,
) -> Vec<Value> {
    let mut args = vec!["--url", server.url.as_str(), "--endpoint", endpoint];
    args.extend(flags);
    by_index(&replay(&args, input), n)
}

/// What each result says of its answer's end and tokens.
fn ends(results: &[Value]) -> Vec<Value> {
    columns(
        results,
        "status prompt_tokens completion_tokens cached_tokens finish_reason error",
    )
}

/// The bodies POSTed, each to `path`, in the order they came.
fn bodies(server: &Scripted, path: &str) -> Vec<Value> {
    let seen = server.seen.lock().unwrap();
    seen.iter()
        .filter(|s| s.head.starts_with("POST"))
        .map(|s| {
            assert!(s.head.starts_with(&format!("POST {path} ")), "{}", s.head);
            serde_json::from_str(&s.body).unwrap()
        })
        .collect()
}

/// The bodies POSTed, each to `path`, in their text's order: requests sent
/// a millisecond apart may arrive in either order.
fn sorted_bodies(server: &Scripted, path: &str) -> Vec<Value> {
    let mut b = bodies(server, path);
    b.sort_by_key(|v| v.to_string());
    b
}

/// Two records: a system message and a user message; a text prompt.
fn two_records() -> String {
    trace(&[
        json!({"timestamp": 0, "output_length": 3, "messages": [
            {"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]}),
        json!({"timestamp": 1, "output_length": 3, "text_input": "whole"}),
    ])
}

/// llama.cpp's `/v1/messages` answers (tools/server/server-task.cpp:
/// `to_json_anthropic`, `_stream`; its JSON has sorted keys, and its first
/// streamed write carries the opening events with the first token): five
/// prompt tokens not cached and four cached, three generated.
fn llama_messages(body: &str) -> Answer {
    if body.contains(r#""stream":true"#) && !body.contains("whole") {
        let events = [
            (
                "message_start",
                r#"{"message":{"content":[],"id":"chatcmpl-7","model":"tiny","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_read_input_tokens":4,"input_tokens":5,"output_tokens":0}},"type":"message_start"}"#,
            ),
            (
                "content_block_start",
                r#"{"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}"#,
            ),
            (
                "content_block_delta",
                r#"{"delta":{"text":" a","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
            ),
            (
                "content_block_delta",
                r#"{"delta":{"text":" b","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
            ),
            (
                "content_block_delta",
                r#"{"delta":{"text":" c","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
            ),
            (
                "content_block_stop",
                r#"{"index":0,"type":"content_block_stop"}"#,
            ),
            (
                "message_delta",
                r#"{"delta":{"stop_reason":"max_tokens","stop_sequence":null},"type":"message_delta","usage":{"output_tokens":3}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ];
        return Answer::events(&events, 11);
    }
    Answer::json(
        "200 OK",
        r#"{"content":[{"text":" a b c","type":"text"}],"id":"chatcmpl-8","model":"tiny","role":"assistant","stop_reason":"max_tokens","stop_sequence":null,"type":"message","usage":{"cache_read_input_tokens":4,"input_tokens":5,"output_tokens":3}}"#,
    )
}

#[test]
fn messages_are_sent_translated_and_their_answers_read() {
    let server = Scripted::start(llama_messages);
    let r = to_messages(&server, &["--model", "m"], &two_records(), 2);
    // The prompt is 5 + 4 tokens, 4 of them cached; the stream's text
    // deltas are its three content chunks (two gaps).
    let ok = json!(["ok", 9, 3, 4, "max_tokens", null]);
    assert_eq!(ends(&r), [ok.clone(), ok]);
    assert_eq!(r[0]["itl_ms"].as_array().unwrap().len(), 2, "{}", r[0]);
    assert!(r[0]["ttft_ms"].as_f64().unwrap() >= r[0]["first_chunk_ms"].as_f64().unwrap());
    assert_eq!(
        sorted_bodies(&server, "/v1/messages"),
        [
            json!({"model": "m", "messages": [{"role": "user", "content": "whole"}],
                   "max_tokens": 3, "stream": true}),
            json!({"model": "m", "system": "sys", "messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": 3, "stream": true}),
        ]
    );
    // Whole answers: no TTFT.
    let server = Scripted::start(llama_messages);
    let r = to_messages(&server, &["--no-stream"], &two_records(), 2);
    assert_eq!(
        columns(
            &r,
            "status prompt_tokens cached_tokens ttft_ms finish_reason"
        ),
        [
            json!(["ok", 9, 4, null, "max_tokens"]),
            json!(["ok", 9, 4, null, "max_tokens"])
        ]
    );
}

/// A stream without its `message_stop` is cut off.
fn cut_messages(_: &str) -> Answer {
    Answer::sse(
        b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":2}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
        5,
    )
}

#[test]
fn a_messages_stream_without_message_stop_is_an_error() {
    let server = Scripted::start(cut_messages);
    let r = to_messages(&server, &[], &two_records(), 2);
    assert_eq!(
        columns(&r, "status prompt_tokens error"),
        [
            json!(["error", 2, "stream ended without message_stop"]),
            json!(["error", 2, "stream ended without message_stop"])
        ]
    );
}

/// llama.cpp's `/v1/responses` answers (tools/server/server-task.cpp:
/// `to_json_oaicompat_resp`, `_stream`): nine prompt tokens, four cached,
/// three generated.
fn llama_responses(body: &str) -> Answer {
    if body.contains(r#""stream":true"#) {
        let events = [
            (
                "response.created",
                r#"{"response":{"id":"resp_1","object":"response","status":"in_progress"},"type":"response.created"}"#,
            ),
            (
                "response.in_progress",
                r#"{"response":{"id":"resp_1","object":"response","status":"in_progress"},"type":"response.in_progress"}"#,
            ),
            (
                "response.output_item.added",
                r#"{"item":{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"},"type":"response.output_item.added"}"#,
            ),
            (
                "response.content_part.added",
                r#"{"item_id":"msg_1","part":{"text":"","type":"output_text"},"type":"response.content_part.added"}"#,
            ),
            (
                "response.output_text.delta",
                r#"{"delta":" a","item_id":"msg_1","type":"response.output_text.delta"}"#,
            ),
            (
                "response.output_text.delta",
                r#"{"delta":" b","item_id":"msg_1","type":"response.output_text.delta"}"#,
            ),
            (
                "response.output_text.delta",
                r#"{"delta":" c","item_id":"msg_1","type":"response.output_text.delta"}"#,
            ),
            (
                "response.output_text.done",
                r#"{"item_id":"msg_1","text":" a b c","type":"response.output_text.done"}"#,
            ),
            (
                "response.completed",
                r#"{"response":{"created_at":1795454079,"id":"resp_1","model":"tiny","object":"response","output":[{"content":[{"annotations":[],"logprobs":[],"text":" a b c","type":"output_text"}],"id":"msg_1","role":"assistant","status":"completed","type":"message"}],"status":"completed","usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":3,"total_tokens":12}},"type":"response.completed"}"#,
            ),
        ];
        return Answer::events(&events, 13);
    }
    Answer::json(
        "200 OK",
        r#"{"completed_at":1795454079,"created_at":1795454079,"id":"resp_2","model":"tiny","object":"response","output":[{"content":[{"annotations":[],"logprobs":[],"text":" a b c","type":"output_text"}],"id":"msg_2","role":"assistant","status":"completed","type":"message"}],"status":"completed","usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":3,"total_tokens":12}}"#,
    )
}

#[test]
fn responses_are_sent_as_input_items_and_their_answers_read() {
    for (flags, ttft, stream) in [(&[][..], true, true), (&["--no-stream"][..], false, false)] {
        let server = Scripted::start(llama_responses);
        let mut args = vec!["--model", "m"];
        args.extend_from_slice(flags);
        let r = to_endpoint(&server, "responses", &args, &two_records(), 2);
        let ok = json!(["ok", 9, 3, 4, "completed", null]);
        assert_eq!(ends(&r), [ok.clone(), ok], "{flags:?}");
        assert_eq!(r[0]["ttft_ms"].is_number(), ttft, "{}", r[0]);
        if ttft {
            assert_eq!(r[0]["itl_ms"].as_array().unwrap().len(), 2, "{}", r[0]);
        }
        assert_eq!(
            sorted_bodies(&server, "/v1/responses"),
            [
                json!({"model": "m", "input": [{"role": "system", "content": "sys"},
                                               {"role": "user", "content": "hi"}],
                       "max_output_tokens": 3, "stream": stream}),
                json!({"model": "m", "input": [{"role": "user", "content": "whole"}],
                       "max_output_tokens": 3, "stream": stream}),
            ]
        );
    }
}

#[test]
fn the_simulator_serves_messages_and_responses_streamed_and_not() {
    let sim = Sim::start(&["--itl-ms", "0"]);
    let input = trace(&[json!({"timestamp": 0, "output_length": 4, "messages": [
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "one two three"}]})]);
    for endpoint in ["messages", "responses"] {
        for stream in [true, false] {
            let mut args = vec!["--url", sim.url.as_str(), "--endpoint", endpoint];
            if !stream {
                args.push("--no-stream");
            }
            let r = by_index(&replay(&args, &input), 1);
            let finish = if endpoint == "messages" {
                "max_tokens"
            } else {
                "completed"
            };
            // Five words of prompt (the system's two, the user's three).
            assert_eq!(
                columns(&r, "status prompt_tokens completion_tokens finish_reason"),
                [json!(["ok", 5, 4, finish])],
                "{endpoint} {stream}"
            );
            assert_eq!(r[0]["ttft_ms"].is_number(), stream, "{}", r[0]);
            if stream {
                assert_eq!(r[0]["itl_ms"].as_array().unwrap().len(), 3, "{}", r[0]);
            }
        }
    }
}

/// Chat answers: the first turn calls two tools, under ids of its own.
fn tool_calling_answer(body: &str) -> Answer {
    let message = if body.contains("\"role\":\"tool\"") || body.contains("tool_result") {
        json!({"role": "assistant", "content": "done"})
    } else {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "live_1", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}},
            {"id": "live_2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
    };
    let answer = json!({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
    Answer::json("200 OK", &answer.to_string())
}

/// Anthropic's answers to the same turns.
fn tool_using_message(body: &str) -> Answer {
    let content = if body.contains("tool_result") {
        json!([{"type": "text", "text": "done"}])
    } else {
        json!([{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": 1}},
               {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}])
    };
    let answer = json!({"type": "message", "role": "assistant", "content": content,
                        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 2}});
    Answer::json("200 OK", &answer.to_string())
}

/// A recorded session: the first turn asks; the second (a delta turn)
/// answers the two calls the trace recorded, `rec_b` first.
fn tool_session() -> String {
    trace(&[
        json!({"id": "t1", "session_id": "s", "timestamp": 0, "output_length": 5,
               "messages": [{"role": "user", "content": "look"}],
               "tools": [{"type": "function", "function": {"name": "read"}}]}),
        json!({"id": "t2", "session_id": "s", "message_mode": "delta", "output_length": 5,
               "messages": [
                   {"role": "tool", "tool_call_id": "rec_b", "content": "listing"},
                   {"role": "tool", "tool_call_id": "rec_a", "content": "contents"}]}),
    ])
}

#[test]
fn recorded_tool_results_are_sent_under_the_live_call_ids() {
    let chat = json!([
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "live_1", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}},
            {"id": "live_2", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "live_1", "content": "listing"},
        {"role": "tool", "tool_call_id": "live_2", "content": "contents"},
    ]);
    // The same over the Messages API: the live `tool_use` ids answer.
    let messages = json!([
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": 1}},
            {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "listing"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "contents"}]},
    ]);
    let mut sent = Vec::new();
    for (answer, endpoint, path, want) in [
        (
            tool_calling_answer as fn(&str) -> Answer,
            "chat",
            "/v1/chat/completions",
            chat,
        ),
        (tool_using_message, "messages", "/v1/messages", messages),
    ] {
        let server = Scripted::start(answer);
        let r = to_endpoint(&server, endpoint, &["--no-stream"], &tool_session(), 2);
        assert_eq!(columns(&r, "status"), [json!(["ok"]), json!(["ok"])]);
        sent = bodies(&server, path);
        assert_eq!(sent[1]["messages"], want, "{endpoint}");
    }
    assert_eq!(
        sent[0]["tools"],
        json!([{"name": "read",
        "input_schema": {"type": "object", "properties": {}}}])
    );
}

#[test]
fn live_answers_on_completions_carry_the_previous_prompt_and_answer() {
    // As the chat test in replay_sessions.rs: turn 2 shares turn 1's two blocks and
    // asks for 2,048 tokens; turn 1's answer is 512 tokens.
    let cached = |flags: &[&str]| live_answer_session(&["--endpoint", "completions"], flags);
    assert_eq!(cached(&[]), [(1024, 0), (2048, 1024)]);
    // Live: turn 1's prompt (1,024 words), its answer (512), then 512 new
    // words: trace-sim finds the first three blocks cached.
    assert_eq!(cached(&["--live-answers"]), [(1024, 0), (2048, 1536)]);
}

#[test]
fn live_answers_are_refused_where_nothing_is_generated() {
    let run = replay(
        &["--sim", "--endpoint", "embeddings", "--live-answers"],
        "{\"timestamp\":0,\"text_input\":\"a\"}\n",
    );
    run.code(2);
    assert!(
        run.stderr
            .contains("--live-answers: --endpoint embeddings generates no answers to carry"),
        "{}",
        run.stderr
    );
}

/// Two agent sessions, worked out by hand (`big` is the main model,
/// `small` a subagent's):
///
/// | session | turn | model | sent | e2e | ttft | status | prompt | completion | cached |
/// |---------|------|-------|------|-----|------|--------|--------|------------|--------|
/// | a       | 1    | big   | 0    | 100 | 50   | ok     | 100    | 10         | 0      |
/// | a       | 2    | big   | 200  | 100 | 20   | ok     | 200    | 10         | 150    |
/// | a       | 3    | small | 150  | 50  | 10   | ok     | 50     | 5          | 25     |
/// | b       | 1    | big   | 0    | 400 | 40   | ok     | 100    | 20         | 0      |
/// | b       | 2    | big   | 500  | 10  | -    | error  | -      | -          | -      |
///
/// a: 3 turns, 0 to 300 ms, 375 tokens, 175 / 350 = 0.5 cached; b: 2
/// turns, 0 to 510 ms, 120 tokens, 0 / 100 = 0 cached. TTFT of first turns
/// [50, 40] (mean 45), of later turns [20, 10] (mean 15; b's second turn
/// failed); by model: big [50, 20, 40] (mean 110 / 3), small [10].
/// Session, turn, model, sent, e2e, TTFT, usage (prompt, completion,
/// cached).
type Row = (
    &'static str,
    u64,
    &'static str,
    f64,
    f64,
    Option<f64>,
    Option<[u64; 3]>,
);

fn agent_results() -> String {
    let rows: [Row; 5] = [
        ("a", 1, "big", 0.0, 100.0, Some(50.0), Some([100, 10, 0])),
        (
            "a",
            2,
            "big",
            200.0,
            100.0,
            Some(20.0),
            Some([200, 10, 150]),
        ),
        ("a", 3, "small", 150.0, 50.0, Some(10.0), Some([50, 5, 25])),
        ("b", 1, "big", 0.0, 400.0, Some(40.0), Some([100, 20, 0])),
        ("b", 2, "big", 500.0, 10.0, None, None),
    ];
    rows.iter()
        .enumerate()
        .map(|(i, (s, turn, model, sent, e2e, ttft, usage))| {
            let mut r = json!({"index": i, "session_id": s, "turn": turn, "model": model,
                "scheduled_ms": sent, "sent_ms": sent, "start_time": "2026-11-27T00:00:00Z",
                "ttft_ms": ttft, "e2e_ms": e2e, "itl_ms": [],
                "status": if ttft.is_some() { "ok" } else { "error" }});
            if let Some([p, c, k]) = usage {
                r["prompt_tokens"] = json!(p);
                r["completion_tokens"] = json!(c);
                r["cached_tokens"] = json!(k);
            }
            format!("{r}\n")
        })
        .collect()
}

#[test]
fn summarize_gives_each_agent_sessions_tokens_cache_and_ttft_by_turn_and_model() {
    let dir = crate::util::TestDir::new("agent-sessions");
    dir.write("r.ndjson", agent_results());
    let report = summary_json(&[], dir.join("r.ndjson"));
    let s = &report["sessions"];
    assert_eq!((&s["count"], &s["completed"]), (&json!(2), &json!(1)));
    close_at(
        s,
        &[
            ("/turns/mean", 2.5),
            ("/duration_ms/min", 300.0),
            ("/duration_ms/max", 510.0),
            ("/tokens/mean", 247.5),
            ("/tokens/max", 375.0),
            ("/cache_hit_rate/mean", 0.25),
            ("/cache_hit_rate/max", 0.5),
            ("/cache_hit_rate/min", 0.0),
            ("/ttft_first_turn_ms/mean", 45.0),
            ("/ttft_later_turns_ms/mean", 15.0),
            ("/ttft_by_model_ms/big/mean", 110.0 / 3.0),
            ("/ttft_by_model_ms/small/max", 10.0),
        ],
    );
    assert_eq!(s["ttft_first_turn_ms"]["count"], 2);
    assert_eq!(s["ttft_later_turns_ms"]["count"], 2);
    // By session: each stands alone.
    let by_session = summary_json(&["--by", "session"], dir.join("r.ndjson"));
    let groups = &by_session["groups"];
    let a = &groups["a"]["sessions"];
    assert_eq!(a["count"], 1);
    close(&a["turns"]["max"], 3.0);
    close(&a["cache_hit_rate"]["mean"], 0.5);
    close(&a["tokens"]["max"], 375.0);
    close(&a["ttft_later_turns_ms"]["mean"], 15.0);
    let b = &groups["b"]["sessions"];
    close(&b["duration_ms"]["max"], 510.0);
    close(&b["cache_hit_rate"]["max"], 0.0);
    assert_eq!(b["ttft_later_turns_ms"]["count"], 0);
    // A gate on the turns that carry a history.
    dir.cmd("trace-summarize")
        .args([
            "--fail-if",
            "sessions.ttft_later_turns_ms.mean>10",
            "r.ndjson",
        ])
        .run()
        .code(1);
    // The table.
    let run = dir.cmd("trace-summarize").arg("r.ndjson").run();
    run.ok();
    let out = run.stdout_str();
    assert!(
        out.contains("mean 247.5, max 375; prefix cache hit rate per session mean 0.25, min 0"),
        "{out}"
    );
}
