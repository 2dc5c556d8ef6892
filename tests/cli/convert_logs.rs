//! trace-convert on the logs of gateways and observability platforms
//! (Langfuse, OpenAI batches, Bailian, LiteLLM's real capture), with
//! messages kept, counted from their text, or read from Parquet and
//! ShareGPT.

use serde_json::{Value, json};

use crate::convert::{convert, convert_fixture, convert_kept, fixture, valid};
use crate::util::{Cmd, TestDir, columns, data, run_stdin};

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
    assert_eq!(
        columns(&v2[1..], "timestamp delay input_length"),
        [json!([36876, 34609, 88])]
    );
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
    assert_eq!(columns(&out[1..], "timestamp delay"), [json!([6000, 5500])]);
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
