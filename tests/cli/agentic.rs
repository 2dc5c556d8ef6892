//! Agentic and batch traces: kv-cache-tester coding sessions with
//! subagents, TraceLab rounds, ServeGen offline batches; and the time caps
//! of trace-rescale that such traces need. Every value checked here is
//! worked out by hand from the source files in `tests/data/convert/`.

use serde_json::{Value, json};

use crate::convert::{fixture as path, valid};
use crate::util::{Run, hash_ids, run_stdin};

/// `trace-convert ARGS`, exit 0, its output accepted by
/// `trace-validate --check --strict`.
fn convert(args: &[&str]) -> Run {
    let run = crate::convert::convert(args);
    valid(&run);
    run
}

/// A bundled file converted, its source recognised as `source`: the run
/// and its records.
fn recognised(file: &str, source: &str) -> (Run, Vec<Value>) {
    let run = convert(&[&path(file)]);
    run.stderr_has(&format!("recognised as {source} input"));
    let out = run.json_lines();
    (run, out)
}

fn by_id<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record {id}"))
}

#[test]
fn coding_session_subagents_fan_out_from_their_spawner_and_join_the_parent() {
    // trace_0291, requests[15..=19]: the parent call at t 1085 s
    // (api_time 15.64, so it ends at 1100.64), subagent agent_001 spawned
    // at 1148.013 (calls at +0, 5, 11, 15, 20 s; the last takes 24.84 s:
    // it ends at 1192.853), agent_002 at 1180.553 (calls at +0, 5, 11, 16,
    // 22, 27, 54 s; the last takes 21.6 s: it ends at 1256.153), then the
    // parent's calls at 1209 (api_time 49.06: ends 1258.06) and 1269.
    let (_, out) = recognised(
        "kv_cache_tester_trace_0291.requests15-19.json",
        "kv-cache-tester",
    );
    assert_eq!(out.len(), 1 + 5 + 7 + 2);
    let ids: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    // Sorted by arrival, rebased to the first call (1085 s).
    assert_eq!(
        ids,
        [
            "trace_0291:0",
            "trace_0291/agent_001:0",
            "trace_0291/agent_001:1",
            "trace_0291/agent_001:2",
            "trace_0291/agent_001:3",
            "trace_0291/agent_001:4",
            "trace_0291/agent_002:0",
            "trace_0291/agent_002:1",
            "trace_0291/agent_002:2",
            "trace_0291/agent_002:3",
            "trace_0291/agent_002:4",
            "trace_0291/agent_002:5",
            "trace_0291:1",
            "trace_0291/agent_002:6",
            "trace_0291:2",
        ]
    );
    let parent = by_id(&out, "trace_0291:0");
    assert_eq!(parent["timestamp"], json!(0));
    assert_eq!(parent["input_length"], json!(91853));
    assert_eq!(parent["output_length"], json!(795));
    assert_eq!(parent["model"], json!("claude-opus-4-5-20251101"));
    assert_eq!(parent["session_id"], json!("trace_0291"));
    assert_eq!(parent["observed"], json!({"e2e_ms": 15640, "status": "ok"}));
    assert!(parent.get("after").is_none() && parent.get("delay").is_none());

    // Fan-out: both subagents' first calls wait for the call that spawned
    // them, from its end: 1148.013 - 1100.64 = 47.373 s and
    // 1180.553 - 1100.64 = 79.913 s.
    let a0 = by_id(&out, "trace_0291/agent_001:0");
    assert_eq!(a0["timestamp"], json!(63013));
    assert_eq!(a0["after"], json!(["trace_0291:0"]));
    assert_eq!(a0["delay"], json!(47373));
    assert_eq!(a0["model"], json!("claude-haiku-4-5-20251001"));
    assert_eq!(a0["session_id"], json!("trace_0291"));
    let b0 = by_id(&out, "trace_0291/agent_002:0");
    assert_eq!(b0["timestamp"], json!(95553));
    assert_eq!(b0["after"], json!(["trace_0291:0"]));
    assert_eq!(b0["delay"], json!(79913));
    // Within a subagent: the call before, its think_time.
    let a1 = by_id(&out, "trace_0291/agent_001:1");
    assert_eq!(a1["after"], json!(["trace_0291/agent_001:0"]));
    assert_eq!(a1["delay"], json!(3000));
    let b6 = by_id(&out, "trace_0291/agent_002:6");
    assert_eq!(b6["after"], json!(["trace_0291/agent_002:5"]));
    assert_eq!(b6["delay"], json!(24000));

    // Joins: the parent's call at 1209 is its first to start after
    // agent_001 ended (1192.853); 1209 - 1192.853 = 16.147 s. agent_002
    // ended at 1256.153, after 1209 + 1 s: the call at 1269 joins it,
    // from the later of 1258.06 and 1256.153: 10.94 s.
    for (id, timestamp, after, delay) in [
        (
            "trace_0291:1",
            124000,
            ["trace_0291:0", "trace_0291/agent_001:4"],
            16147,
        ),
        (
            "trace_0291:2",
            184000,
            ["trace_0291:1", "trace_0291/agent_002:6"],
            10940,
        ),
    ] {
        let p = by_id(&out, id);
        assert_eq!(
            (&p["timestamp"], &p["after"], &p["delay"]),
            (&json!(timestamp), &json!(after), &json!(delay)),
            "{id}"
        );
    }

    // Blocks: the subagents' first prompts share their first 174 64-token
    // ids, so floor(174 / 8) = 21 blocks of 512; 11353 tokens need
    // ceil(11353 / 512) = 23. The parent's next prompt begins with all
    // 1435 ids of its last: 179 whole blocks of 8 (the 180th had 3).
    let (a, b) = (hash_ids(a0), hash_ids(b0));
    assert_eq!((a.len(), b.len()), (23, 23));
    assert_eq!(a[..21], b[..21]);
    assert_ne!(a[21], b[21]);
    let (p, q) = (hash_ids(parent), hash_ids(by_id(&out, "trace_0291:1")));
    assert_eq!((p.len(), q.len()), (180, 191));
    assert_eq!(p[..179], q[..179]);
    assert_ne!(p[179], q[179]);
    assert!(a.iter().all(|x| !p.contains(x)));
}

#[test]
fn coding_session_think_time_and_unknown_ttft() {
    // trace_0504: three calls; only the third streamed (`ttft` 1.75 s).
    let out = convert(&[&path("kv_cache_tester_trace_0504.json")]).json_lines();
    let want = [
        (0, None, None, 8790, None),
        (13000, Some("trace_0504:0"), Some(4000), 3090, None),
        (
            3075000,
            Some("trace_0504:1"),
            Some(3058000),
            3380,
            Some(1750),
        ),
    ];
    assert_eq!(out.len(), 3);
    for (rec, (ts, after, delay, e2e, ttft)) in out.iter().zip(want) {
        assert_eq!(rec["timestamp"], json!(ts));
        assert_eq!(rec["after"], after.map_or(Value::Null, |a| json!([a])));
        assert_eq!(rec["delay"], delay.map_or(Value::Null, |d| json!(d)));
        assert_eq!(rec["observed"]["e2e_ms"], json!(e2e));
        assert_eq!(
            rec["observed"]["ttft_ms"],
            ttft.map_or(Value::Null, |t| json!(t))
        );
    }
    // 11133 tokens: ceil(11133 / 512) = 22 blocks; the next prompt keeps
    // all 173 ids and adds 3, so its first floor(173 / 8) = 21 blocks.
    let (a, b) = (hash_ids(&out[0]), hash_ids(&out[1]));
    assert_eq!(a.len(), 22);
    assert_eq!(a[..21], b[..21]);
    assert_ne!(a[21], b[21]);
}

/// Each input, converted `--from` a source, is refused (exit 2) with its
/// message.
fn refused(from: &str, cases: &[(&str, &str)]) {
    for (input, message) in cases {
        run_stdin("trace-convert", &["--from", from], *input)
            .code(2)
            .stderr_has(message);
    }
}

#[test]
fn coding_session_errors_name_the_call_and_field() {
    // Each bad session and the message it gets (exit 2).
    let cases = [
        (
            r#"{"id":"x","block_size":64,"requests":[{"t":0,"in":10,"out":1},{"t":1,"in":"many","out":1}]}"#,
            "trace-convert: <stdin>:1: error: field `requests[1].in`: expected an integer ≥ 0, found \"many\"",
        ),
        (
            r#"{"id":"x","block_size":64,"requests":[{"t":0,"type":"subagent","requests":[{"t":-1,"in":1,"out":1}]}]}"#,
            "field `requests[0].requests[0].t`: expected seconds ≥ 0, found -1",
        ),
        (
            r#"{"id":"x","block_size":64,"requests":[{"t":0,"in":64,"out":1,"hash_ids":[1,2]}]}"#,
            "field `requests[0].hash_ids`: has 2 blocks, but in 64 needs ceil(64 / 64) = 1",
        ),
        (
            r#"{"id":"x","block_size":64,"requests":[{"t":0,"in":1,"out":1},{"t":1,"in":1,"out":1,"think_time":1e300}]}"#,
            "field `delay`: 1e303 ms is over the limit of",
        ),
        (
            r#"{"id":"x","block_size":100,"requests":[]}"#,
            "field `block_size`: expected a divisor of 512, found 100",
        ),
    ];
    refused("kv-cache-tester", &cases);
}

#[test]
fn tracelab_rounds_chain_with_tool_time_and_share_their_cached_prefix() {
    let (_, out) = recognised("tracelab_sanitized_round_trace.jsonl", "tracelab");
    assert_eq!(out.len(), 19);
    // The Codex session (2026-03-21) comes first; its first round arrives
    // at its user message, 10:05:59.328, and ends at its last event,
    // usage_report 10:06:05.542: 6214 ms.
    let c0 = by_id(&out, "491f65ac-7464-29f5-68e0-92f973978ce5:0");
    assert_eq!(c0["timestamp"], json!(0));
    assert_eq!(c0["model"], json!("gpt-5.4"));
    assert_eq!(
        c0["observed"],
        json!({"e2e_ms": 6214, "cached_tokens": 6912, "status": "ok"})
    );
    // The next round arrives at its last tool result, 10:06:06.704, and
    // waits for the first from its end: 1162 ms of tool time.
    let c1 = by_id(&out, "491f65ac-7464-29f5-68e0-92f973978ce5:1");
    assert_eq!(c1["timestamp"], json!(7376));
    assert_eq!(
        c1["after"],
        json!(["491f65ac-7464-29f5-68e0-92f973978ce5:0"])
    );
    assert_eq!(c1["delay"], json!(1162));
    assert_eq!(
        c1["session_id"],
        json!("codex:a611041f-625d-6fad-5e59-845850dc6543")
    );
    // Claude's second round: the WebSearch's 19291 ms (05:40:31.647 to
    // 05:40:50.938), arrival to end 05:40:50.938 to 05:41:04.862.
    let m1 = by_id(&out, "msg_8d1986c8b1e483eb421ec3b2");
    assert_eq!(m1["after"], json!(["msg_3e0cf83dc2523801f59077fd"]));
    assert_eq!(m1["delay"], json!(19291));
    assert_eq!(m1["observed"]["e2e_ms"], json!(13924));
    assert_eq!(m1["input_length"], json!(35740));
    assert_eq!(m1["output_length"], json!(1016));
    // Prefix chains: round 1 shares 29380 tokens, floor(29380 / 512) = 57
    // blocks of round 0 (which has 63 whole ones); round 0 shares 27217,
    // 53 blocks of the model's common prefix; Codex's model is another.
    let m0 = by_id(&out, "msg_3e0cf83dc2523801f59077fd");
    let (a, b) = (hash_ids(m0), hash_ids(m1));
    assert_eq!((a.len(), b.len()), (64, 70));
    assert_eq!(a[..57], b[..57]);
    assert!(b[57..].iter().all(|x| !a.contains(x)));
    let c = hash_ids(c0);
    assert_eq!(c.len(), 19);
    assert!(c.iter().all(|x| !a.contains(x)));
}

#[test]
fn servegen_offline_batches_at_0_or_spaced_by_rate() {
    let (_, out) = recognised("servegen_offline_trace_d.head12.jsonl", "servegen");
    assert_eq!(out.len(), 12);
    assert!(out.iter().all(|r| r["timestamp"] == json!(0)));
    assert_eq!(out[0]["id"], json!("0"));
    assert_eq!(out[0]["input_length"], json!(61));
    assert_eq!(out[0]["output_length"], json!(2370));
    assert_eq!(out[0]["observed"], json!({"e2e_ms": 14000, "status": "ok"}));
    // --rate 4: request N at N / 4 s.
    let out = convert(&[
        "--rate",
        "4",
        &path("servegen_offline_trace_a.head12.jsonl"),
    ])
    .json_lines();
    let ts: Vec<Value> = out.iter().map(|r| r["timestamp"].clone()).collect();
    let want: Vec<Value> = (0..12).map(|n| json!(n * 250)).collect();
    assert_eq!(ts, want);
    // No output length in a content-hash trace: 1 token. 271 tokens are
    // one block; its 17 ids of 16 tokens are one group.
    assert_eq!(out[0]["output_length"], json!(1));
    assert_eq!(hash_ids(&out[0]).len(), 1);
    assert_eq!(hash_ids(&out[9]).len(), 2);
}

#[test]
fn dynamo_agentic_rows_keep_their_waits_and_add_tool_time_to_delay() {
    // Constructed (see SOURCES.md): 64-token blocks, 16, 10 and 24 ids.
    let (_, out) = recognised("dynamo_agentic_mooncake.constructed.jsonl", "dynamo");
    let ids: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["parent-1", "child-1", "parent-2"]);
    // 1024 tokens in 16 ids: blocks of 64 (16 * 32 < 1024), 2 of 512.
    assert_eq!(out[0]["hash_ids"], json!([0, 1]));
    assert_eq!(out[0]["session_id"], json!("root"));
    assert!(out[0].get("after").is_none());
    // The subagent's call waits for its spawner, 100 ms; its trajectory
    // is a session of its own, one call long (a session the trace names
    // is one whatever its length).
    assert_eq!(out[1]["after"], json!(["parent-1"]));
    assert_eq!(out[1]["delay"], json!(100));
    assert_eq!(out[1]["hash_ids"], json!([2, 3]));
    assert_eq!(out[1]["session_id"], json!("child"));
    // The join: 100 ms of delay + 100 ms of tool time.
    assert_eq!(out[2]["timestamp"], json!(500));
    assert_eq!(out[2]["after"], json!(["parent-1", "child-1"]));
    assert_eq!(out[2]["delay"], json!(200));
    assert_eq!(out[2]["hash_ids"], json!([0, 1, 4]));
}

fn rescale(args: &[&str], input: &str) -> Vec<String> {
    let run = run_stdin("trace-rescale", args, input);
    run.code(0);
    run.lines()
}

const GAPPY: &str = "\
{\"timestamp\":0}
{\"timestamp\":100,\"session_id\":\"s\",\"delay\":8000}
{\"timestamp\":1100}
{\"timestamp\":1150,\"session_id\":\"s\",\"delay\":20}
{\"timestamp\":61150}
";

#[test]
fn max_gap_shortens_idle_stretches_and_max_delay_caps_think_time() {
    // Gaps 100, 1000, 50, 60000 with a 300 ms cap: the 1000 loses 700,
    // the 60000 loses 59700 more (60400 in all): 1100 -> 400,
    // 1150 -> 450, 61150 -> 750. The delay of 8000 becomes 5000.
    assert_eq!(
        rescale(&["--max-gap", "300ms", "--max-delay", "5s"], GAPPY),
        [
            "{\"timestamp\":0}",
            "{\"timestamp\":100,\"session_id\":\"s\",\"delay\":5000}",
            "{\"timestamp\":400}",
            "{\"timestamp\":450,\"session_id\":\"s\",\"delay\":20}",
            "{\"timestamp\":750}",
        ]
    );
    // After --speed 2 (times 0, 50, 550, 575, 30575; delays 4000, 10):
    // the 500 gap loses 200, the 30000 gap 29700 more: 350, 375, 675.
    assert_eq!(
        rescale(
            &["--speed", "2", "--max-gap", "300ms", "--max-delay", "5s"],
            GAPPY
        ),
        [
            "{\"timestamp\":0}",
            "{\"timestamp\":50,\"session_id\":\"s\",\"delay\":4000}",
            "{\"timestamp\":350}",
            "{\"timestamp\":375,\"session_id\":\"s\",\"delay\":10}",
            "{\"timestamp\":675}",
        ]
    );
    // 0 removes think time.
    assert_eq!(
        rescale(&["--max-delay", "0s"], GAPPY)[1],
        "{\"timestamp\":100,\"session_id\":\"s\",\"delay\":0}"
    );
    run_stdin("trace-rescale", &["--max-gap", "0s"], GAPPY)
        .code(2)
        .stderr_has("--max-gap <D>': `0s`: the duration must be more than 0");
}

#[test]
fn copilot_sessions_are_graphs_of_their_calls_with_cached_prefix_chains() {
    // Constructed from the dataset's schema (see SOURCES.md): session
    // 5f0c… has two turns, calls c1, c2, c3 (the edit model), c4, then
    // c5 and a cancelled call; session b8e4… one call, at 09:01:00.
    let (run, out) = recognised("copilot_coding_agent_2026.constructed.jsonl", "copilot");
    run.stderr_has("7 records read, 6 written, 1 dropped (1 failed); 2 sessions");
    let ids: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let (c1, c2, c3, c4, other, c5) = (
        "0e9d4c3b2a1f5e60",
        "7b6a5f4e3d2c1b09",
        "c3b2a19f8e7d6c5b",
        "1d2e3f4a5b6c7d8e",
        "e1d2c3b4a5968778",
        "9f8e7d6c5b4a3928",
    );
    // In arrival order: 09:00:00, :05.7, :08.8, :10, 09:01:00, 09:02:10.
    assert_eq!(ids, [c1, c2, c3, c4, other, c5]);
    let first = by_id(&out, c1);
    assert_eq!(first["timestamp"], json!(0));
    assert_eq!(first["input_length"], json!(12000));
    assert_eq!(first["output_length"], json!(300));
    assert_eq!(first["model"], json!("Model A"));
    assert_eq!(first["session_id"], json!("5f0c2a9e7d41b386"));
    assert_eq!(
        first["observed"],
        json!({"e2e_ms": 4000, "cached_tokens": 4608, "status": "ok"})
    );
    assert!(first.get("after").is_none());
    // c2 at 5.7 s waits for c1 (ended at 4 s): the 1.5 s tool batch
    // and the agent's own time between them are its delay.
    let wait = |id: &str| {
        (
            by_id(&out, id)["after"].clone(),
            by_id(&out, id)["delay"].clone(),
        )
    };
    assert_eq!(wait(c2), (json!([c1]), json!(1700)));
    // The edit model's call at 8.8 s, after c2 (ended 8.7 s); c4 at 10 s
    // after it (ended 9.7 s): c2 is waited for already.
    assert_eq!(wait(c3), (json!([c2]), json!(100)));
    assert_eq!(wait(c4), (json!([c3]), json!(300)));
    // The next turn, after the user's pause: 130 s − 12.5 s.
    assert_eq!(wait(c5), (json!([c4]), json!(117500)));
    assert_eq!(by_id(&out, other)["timestamp"], json!(60000));
    assert!(by_id(&out, other).get("after").is_none());

    // Prefix chains, in 512-token blocks. c1: 12000 tokens, 24 blocks,
    // 4608 cached: floor(4608 / 512) = 9 blocks of Model A's common
    // prefix, which the other session's first call shares 8 of (4096).
    // c2 (12900: 26 blocks, 12032 cached) keeps 23, all of c1's whole
    // blocks; c4 (13600: 27, 12800 cached) 25 of c2's; c5 (14200: 28,
    // 13312 cached) 26 of c4's. The edit model's call shares nothing.
    let h = |id: &str| hash_ids(by_id(&out, id));
    let (h1, h2, h3, h4, h5, ho) = (h(c1), h(c2), h(c3), h(c4), h(c5), h(other));
    assert_eq!(
        [h1.len(), h2.len(), h3.len(), h4.len(), h5.len(), ho.len()],
        [24, 26, 5, 27, 28, 18]
    );
    assert_eq!(ho[..8], h1[..8]);
    assert_ne!(ho[8], h1[8]);
    assert_eq!(h2[..23], h1[..23]);
    assert!(!h1.contains(&h2[23]));
    assert_eq!(h4[..25], h2[..25]);
    assert!(!h2.contains(&h4[25]));
    assert_eq!(h5[..26], h4[..26]);
    assert!(!h4.contains(&h5[26]));
    assert!(
        h3.iter()
            .all(|x| ![&h1, &h2, &h4, &h5, &ho].iter().any(|o| o.contains(x)))
    );
}

#[test]
fn copilot_errors_name_the_call_and_field() {
    let cases = [
        (
            r#"{"session_id":"s","turns":[{"llm_calls":[{"timestamp":"2026-06-01T09:00:00","tokens":{"prompt":"many","completion":1}}]}]}"#,
            "field `turns[0].llm_calls[0].tokens.prompt`: expected an integer ≥ 0, found \"many\"",
        ),
        (
            r#"{"session_id":"s","turns":[{"llm_calls":[{"timestamp":"2026-06-01T09:00:00","tokens":{"prompt":10,"completion":1,"cached":11}}]}]}"#,
            "field `turns[0].llm_calls[0].tokens.cached`: 11 is more than the prompt's 10 tokens",
        ),
        (
            r#"{"session_id":"s","turns":[{"llm_calls":[{"timestamp":"2026-06-01T09:00:00","duration_ms":-5,"tokens":{"prompt":10,"completion":1}}]}]}"#,
            "field `turns[0].llm_calls[0].duration_ms`: expected milliseconds from 0 to 315360000000, found -5",
        ),
        (
            r#"{"session_id":"s","turns":[{"llm_calls":[{"timestamp":"2026-06-01T09:00:00","duration_ms":1e300,"tokens":{"prompt":10,"completion":1}}]}]}"#,
            "field `turns[0].llm_calls[0].duration_ms`: expected milliseconds from 0 to 315360000000, found 1e+300",
        ),
        (
            r#"{"session_id":"s","turns":[{"llm_calls":[{"tokens":{"prompt":10,"completion":1}}]}]}"#,
            "field `turns[0].llm_calls[0].timestamp`: is missing",
        ),
        (
            r#"{"session_id":"s","turns":{}}"#,
            "field `turns`: is missing: expected an array of turns",
        ),
    ];
    refused("copilot", &cases);
}

#[test]
fn burstgpt_conversations_grow_their_context_as_prefix_chains() {
    // BurstGPT_v3_8col: session 3f2b… asks 903, 1391 and 1562 tokens;
    // each request carries the conversation so far, so each prompt
    // begins with the whole blocks of the one before: floor(903 / 512)
    // = 1, then floor(1391 / 512) = 2.
    let out = convert(&[&path("BurstGPT_v3_8col.constructed.csv")]).json_lines();
    let a: Vec<Vec<u64>> = out
        .iter()
        .filter(|r| r["session_id"] == "3f2b8c1e-6d4a-4e1f-9a7b-0c5d2e8f1a10")
        .map(hash_ids)
        .collect();
    assert_eq!(a.iter().map(Vec::len).collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(a[1][..1], a[0][..1]);
    assert!(!a[0].contains(&a[1][1]));
    assert_eq!(a[2][..2], a[1][..2]);
    assert!(!a[1].contains(&a[2][2]));
    // 38 then 79 tokens: one block each, the first not whole: nothing
    // shared.
    let b: Vec<Vec<u64>> = out
        .iter()
        .filter(|r| r["session_id"] == "7a9e4d22-1b3c-4f5e-8d6a-9c0b1e2f3a20")
        .map(hash_ids)
        .collect();
    assert_eq!(b.len(), 2);
    assert_ne!(b[0], b[1]);
    // A request shorter than the one before begins a new context: 1500,
    // then 700 (shares nothing), then 2000 (shares the 700's one whole
    // block). Rows without a session get no hash_ids.
    let csv = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
               0,x,1,GPT-4,1500,10,1510,Conversation log\n\
               10,x,1,GPT-4,700,10,710,Conversation log\n\
               20,x,1,GPT-4,2000,10,2010,Conversation log\n\
               30,,1,GPT-4,2000,10,2010,API log\n";
    let run = run_stdin("trace-convert", &[], csv);
    run.code(0);
    let out = run.json_lines();
    let (p, q, r) = (hash_ids(&out[0]), hash_ids(&out[1]), hash_ids(&out[2]));
    assert_eq!((p.len(), q.len(), r.len()), (3, 2, 4));
    assert!(q.iter().all(|x| !p.contains(x)));
    assert_eq!(r[..1], q[..1]);
    assert!(r[1..].iter().all(|x| !p.contains(x) && !q.contains(x)));
    assert!(out[3].get("hash_ids").is_none());
}
