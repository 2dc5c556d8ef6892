use super::*;

use crate::api::testing::{self, Seen, seen};

fn read(text: &str) -> Seen {
    testing::read(&Messages, text)
}

fn render(chat: Value) -> Value {
    testing::render(&Messages, &chat)
}

#[test]
fn a_chat_body_becomes_a_messages_body() {
    let chat = json!({
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
            {"role": "assistant", "content": "I will read it.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "ls", "arguments": "not json"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "a.rs"}]},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [{"type": "function", "function": {"name": "read", "description": "Read a file",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
                  {"type": "function", "function": {"name": "ls"}}],
        "max_tokens": 64,
        "stream": true,
        "stream_options": {"include_usage": true},
        "temperature": 0,
    });
    let want = json!({
        "model": "m",
        "system": "be brief",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I will read it."},
                {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.rs"}},
                {"type": "tool_use", "id": "call_2", "name": "ls", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "fn main() {}"},
                {"type": "tool_result", "tool_use_id": "call_2",
                 "content": [{"type": "text", "text": "a.rs"}]}]},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [{"name": "read", "description": "Read a file",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
                  {"name": "ls", "input_schema": {"type": "object", "properties": {}}}],
        "max_tokens": 64,
        "stream": true,
        "temperature": 0,
    });
    let got = render(chat);
    assert_eq!(got, want);
    // In this order.
    let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["model", "system", "messages", "tools", "max_tokens", "stream", "temperature"]
    );
}

#[test]
fn two_system_messages_are_blocks_and_max_tokens_is_always_given() {
    let chat = json!({"messages": [
        {"role": "system", "content": "one"}, {"role": "developer", "content": "two"},
        {"role": "user", "content": "hi"}], "stream": false});
    assert_eq!(
        render(chat),
        json!({
            "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            "messages": [{"role": "user", "content": "hi"}],
            "stream": false,
            "max_tokens": DEFAULT_MAX_TOKENS,
        })
    );
    assert_eq!(Messages.render(b"[1]"), None);
}

/// llama.cpp's stream (tools/server/server-task.cpp,
/// `to_json_anthropic_stream`), event by event.
#[test]
fn a_stream_reads_event_by_event() {
    let start = r#"{"type":"message_start","message":{"id":"chatcmpl-x","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"cache_read_input_tokens":8,"input_tokens":3,"output_tokens":0}}}"#;
    assert_eq!(
        read(start),
        (None, Some(0), false, None, Some([Some(11), Some(0), Some(8)]), false)
    );
    let block = r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
    assert_eq!(read(block), (None, Some(1), false, None, None, false));
    for delta in [
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}"#,
    ] {
        assert_eq!(read(delta), (None, Some(1), true, None, None, false), "{delta}");
    }
    let signature = r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":""}}"#;
    assert_eq!(read(signature), (None, Some(1), false, None, None, false));
    let stop = r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":5}}"#;
    assert_eq!(
        read(stop),
        (None, None, false, Some("max_tokens".into()), Some([None, Some(5), None]), false)
    );
    assert_eq!(
        read(r#"{"type":"message_stop"}"#),
        (None, None, false, None, None, true)
    );
    assert_eq!(read(r#"{"type": "ping"}"#), (None, None, false, None, None, false));
    let error = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    assert_eq!(
        read(error).0,
        Some(json!({"type": "overloaded_error", "message": "Overloaded"}))
    );
}

/// Anthropic's documented whole answer, with the three parts of the prompt.
#[test]
fn a_whole_message_reads_its_blocks_stop_reason_and_usage() {
    let whole = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a"}}],"model":"claude","stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":7}}"#;
    assert_eq!(
        read(whole),
        (None, Some(2), true, Some("tool_use".into()), Some([Some(60), Some(7), Some(30)]), false)
    );
    let empty = r#"{"type":"message","content":[],"usage":{"output_tokens":0}}"#;
    assert_eq!(read(empty), (None, Some(0), false, None, Some([None, Some(0), None]), false));
    assert!(Messages.read(b"{\"type\":").is_err());
}

const SHAPES: [&str; 4] = [
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"h\u00e9 \"x\""}}"#,
    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
    r#" { "delta" : { "thinking" : "t" , "type" : "thinking_delta" } , "type" : "content_block_delta" } "#,
    r#"{"type":"ping"}"#,
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
    let (events, data) = testing::stream(&Messages, &[("a ", false), ("b ", true)]);
    assert_eq!(
        data,
        [
            (None, Some(0), false, None, Some([Some(10), Some(0), Some(6)]), false),
            (None, Some(1), false, None, None, false),
            (None, Some(1), true, None, None, false),
            (None, Some(1), true, None, None, false),
            (None, None, false, None, None, false),
            (None, None, false, Some("max_tokens".into()), Some([None, Some(2), None]), false),
            (None, None, false, None, None, true),
        ]
    );
    assert!(events[0].starts_with("event: message_start\ndata: {"));
}

#[test]
fn the_server_reads_the_prompt_of_system_messages_and_tool_results() {
    let body = json!({"system": [{"type": "text", "text": "sys"}], "messages": [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "two"}]},
    ]});
    assert_eq!(
        Messages.read_prompt(&body),
        Some(vec![Piece::Text("sys"), Piece::Text("one"), Piece::Text("two")])
    );
}
