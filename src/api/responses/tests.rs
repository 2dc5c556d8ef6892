use super::*;

use crate::api::testing::{self, REPLY, Seen, seen};

fn read(text: &str) -> Seen {
    testing::read(&Responses, text)
}

#[test]
fn a_chat_body_becomes_a_responses_body() {
    let chat = json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
            {"role": "assistant", "content": "Done."},
        ],
        "tools": [{"type": "function", "function": {"name": "read",
                   "parameters": {"type": "object"}}}],
        "max_tokens": 64,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    let got = testing::render(&Responses, &chat);
    let want = json!({
        "model": "m",
        "input": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "https://x/y.png"}]},
            {"type": "function_call", "call_id": "call_1", "name": "read",
             "arguments": "{\"path\":\"a.rs\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "fn main() {}"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Done."}]},
        ],
        "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
        "max_output_tokens": 64,
        "stream": true,
    });
    assert_eq!(got, want);
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["model", "input", "tools", "max_output_tokens", "stream"]);
}

/// llama.cpp's stream (tools/server/server-task.cpp) and OpenAI's
/// documented events.
#[test]
fn a_stream_reads_event_by_event() {
    let created = r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#;
    assert_eq!(read(created), (None, Some(0), false, None, None, false));
    let added = r#"{"type":"response.output_item.added","item":{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"}}"#;
    assert_eq!(read(added), (None, None, false, None, None, false));
    for delta in [
        r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":" the"}"#,
        r#"{"type":"response.function_call_arguments.delta","delta":"{\"a","item_id":"fc_1"}"#,
        r#"{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"hm","sequence_number":4}"#,
    ] {
        assert_eq!(read(delta), (None, Some(1), true, None, None, false), "{delta}");
    }
    let empty = r#"{"type":"response.output_text.delta","item_id":"msg_1","delta":""}"#;
    assert_eq!(read(empty), (None, Some(1), false, None, None, false));
    let completed = r#"{"type":"response.completed","response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[],"usage":{"input_tokens":12,"output_tokens":5,"total_tokens":17,"input_tokens_details":{"cached_tokens":8}}},"timings":{}}"#;
    assert_eq!(
        read(completed),
        (None, None, false, Some("completed".into()), Some([Some(12), Some(5), Some(8)]), true)
    );
    let incomplete = r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":2}}}"#;
    assert_eq!(
        read(incomplete),
        (None, None, false, Some("max_output_tokens".into()), Some([Some(3), Some(2), None]), true)
    );
    let failed = r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#;
    assert_eq!(read(failed).0, Some(json!({"code": "server_error", "message": "boom"})));
    let error = r#"{"type":"error","code":"rate_limit","message":"slow down"}"#;
    assert_eq!(
        read(error).0,
        Some(json!({"type": "error", "code": "rate_limit", "message": "slow down"}))
    );
}

#[test]
fn a_whole_response_reads_its_output_status_and_usage() {
    let whole = r#"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":""}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":1}}"#;
    assert_eq!(
        read(whole),
        (None, Some(2), true, Some("completed".into()), Some([Some(9), Some(1), Some(0)]), false)
    );
    let calls = r#"{"object":"response","status":"completed","output":[{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"}]}"#;
    assert_eq!(read(calls), (None, Some(1), true, Some("completed".into()), None, false));
    let refused = r#"{"error":{"message":"bad input","type":"invalid_request_error"}}"#;
    assert_eq!(
        read(refused),
        (Some(json!({"message": "bad input", "type": "invalid_request_error"})), None, false, None, None, false)
    );
}

const SHAPES: [&str; 4] = [
    r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"h\u00e9 \"x\"","sequence_number":7}"#,
    r#"{"type":"response.function_call_arguments.delta","delta":"","item_id":"fc_1"}"#,
    r#" { "delta" : "t" , "type" : "response.reasoning_summary_text.delta" , "logprobs" : [ ] } "#,
    r#"{"type":"response.output_text.delta","delta":"x","obfuscation":"abc"}"#,
];

/// The single pass reads what serde reads, on the events of every token
/// and on their mangled variants.
#[test]
fn the_single_pass_reads_what_serde_reads() {
    let slow = |b: &[u8]| by_value(b).ok().map(seen);
    crate::json::differential::hold_usual(&SHAPES, |b| scan(b).map(seen), slow, 3);
}

#[test]
fn the_simulated_stream_reads_as_the_engine_reads_it() {
    let (_, data) = testing::stream(&Responses, &[("a ", false)]);
    assert_eq!(
        data,
        [
            (None, Some(0), false, None, None, false),
            (None, None, false, None, None, false),
            (None, Some(1), true, None, None, false),
            (None, None, false, Some("completed".into()), Some([Some(10), Some(2), Some(6)]), true),
        ]
    );
    let whole = Responses.answer(&Reply {
        text: "a b",
        ..REPLY
    });
    assert_eq!(
        seen(Responses.read(whole.to_string().as_bytes()).unwrap()),
        (None, Some(1), true, Some("completed".into()), Some([Some(10), Some(2), Some(6)]), false)
    );
}

#[test]
fn the_server_reads_the_prompt_of_instructions_and_items() {
    let body = json!({"instructions": "sys", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "one"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "two"},
    ]});
    assert_eq!(
        Responses.read_prompt(&body),
        Some(vec![Piece::Text("sys"), Piece::Text("one"), Piece::Text("two")])
    );
    assert_eq!(
        Responses.read_prompt(&json!({"input": "hi"})),
        Some(vec![Piece::Text("hi")])
    );
    assert_eq!(Responses.read_prompt(&json!({"messages": []})), None);
}
