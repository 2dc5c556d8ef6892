//! Coding agents' own session logs (Claude Code, Codex CLI, Gemini CLI)
//! into traces, and trace-summarize's comparison of a replay with the
//! recorded sessions. Every expected value is worked out by hand from the
//! files in `tests/data/convert/agents/` (line numbers in the comments);
//! times are the lines' `timestamp`s, subtracted.

use serde_json::Value;

use crate::convert::{convert, fixture, valid};
use crate::util::{Cmd, TestDir, hash_ids, run_stdin};

const CLAUDE: &str = "agents/claude";
const CLAUDE_SESSION: &str = "e9fb405b-169f-40eb-9396-7e75076f045d";
const CODEX: &str = "agents/codex/2026/02/23/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl";
const CODEX_SESSION: &str = "019c8bfe-ec25-79e0-97d7-bda6a9c575ff";
const GEMINI: &str = "agents/gemini";

fn by_id<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no record {id}"))
}

/// id, timestamp, input_length, output_length, cached, after, delay.
type Row<'a> = (&'a str, f64, u64, u64, u64, &'a [&'a str], Option<f64>);

#[track_caller]
fn check(records: &[Value], session: &str, rows: &[Row]) {
    assert_eq!(records.len(), rows.len(), "{records:#?}");
    for &(id, ts, input, output, cached, after, delay) in rows {
        let r = by_id(records, id);
        assert_eq!(r["session_id"], session, "{id}");
        assert_eq!(r["timestamp"].as_f64(), Some(ts), "{id} timestamp");
        assert_eq!(r["input_length"].as_u64(), Some(input), "{id} input");
        assert_eq!(r["output_length"].as_u64(), Some(output), "{id} output");
        assert_eq!(
            r["observed"]["cached_tokens"].as_u64(),
            Some(cached),
            "{id} cached"
        );
        let got: Vec<&str> = r["after"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap()).collect())
            .unwrap_or_default();
        assert_eq!(got, after, "{id} after");
        assert_eq!(r["delay"].as_f64(), delay, "{id} delay");
        assert_eq!(hash_ids(r).len() as u64, input.div_ceil(512), "{id} blocks");
    }
}

/// How many leading blocks two records share.
fn shared(a: &Value, b: &Value) -> usize {
    hash_ids(a)
        .iter()
        .zip(hash_ids(b))
        .take_while(|(x, y)| **x == *y)
        .count()
}

#[test]
fn a_claude_code_project_folder_is_one_session_with_its_subagent() {
    // Main file: requests (Bedrock: by `message.id`) on lines 4-6, 8-10,
    // 12-13, 15-16, 18-19, 21-22, 24-25; each starts at the line before
    // its first block (3, 7, 11, 14, 17, 20, 23) and ends at its last. The
    // first starts at 19:20:03.207, timestamp 0. Input = input_tokens +
    // cache_creation + cache_read (line 4: 10 + 29367 + 0). Subagent file:
    // requests on lines 2-6 (from line 1, 19:20:13.501) and 11-15 (from
    // line 10, 19:20:20.304). The Task call (lines 4-6, tool_use on line 6)
    // is named by the result on line 7 (`agentId: a485154`); the main call
    // from line 7 (19:26:03.278) joins the subagent's last call (ended
    // 19:20:26.235): 337.043 s.
    let s = CLAUDE_SESSION;
    let main = |n: u32| format!("{s}:{n}");
    let sub = |n: u32| format!("{s}/a485154:{n}");
    let (m0, m1, m2, m3, m4, m5, m6) = (
        main(0),
        main(1),
        main(2),
        main(3),
        main(4),
        main(5),
        main(6),
    );
    let (a0, a1) = (sub(0), sub(1));
    let run = convert(&[&fixture(CLAUDE)]);
    valid(&run);
    run.stderr_has("recognised as claude-code input");
    // Lines 12-13 and 15-16 state no stop_reason: the stream's first count.
    run.stderr_has("the output_length of 2 calls is the count the stream started with");
    let out = run.json_lines();
    check(
        &out,
        s,
        &[
            (&m0, 0.0, 29377, 511, 0, &[], None),
            // 19:26:03.278 - 19:20:03.207 = 360071 ms.
            (
                &m1,
                360071.0,
                12 + 29939,
                173,
                0,
                &[&m0, &a1],
                Some(337043.0),
            ),
            // 10.864 - 08.587.
            (
                &m2,
                367657.0,
                12 + 291 + 29939,
                3,
                29939,
                &[&m1],
                Some(2277.0),
            ),
            (
                &m3,
                372852.0,
                12 + 899 + 30230,
                121,
                30230,
                &[&m2],
                Some(1296.0),
            ),
            (
                &m4,
                378803.0,
                12 + 164 + 31129,
                132,
                31129,
                &[&m3],
                Some(2207.0),
            ),
            (
                &m5,
                386072.0,
                12 + 401 + 31293,
                150,
                31293,
                &[&m4],
                Some(1186.0),
            ),
            (
                &m6,
                392103.0,
                12 + 355 + 31694,
                154,
                31694,
                &[&m5],
                Some(1097.0),
            ),
            // 13.501 - 03.207; from the spawner's end (13.378): 123 ms.
            (&a0, 10294.0, 3 + 17159, 265, 0, &[&m0], Some(123.0)),
            // 20.304 - 19.511.
            (&a1, 17097.0, 5202 + 18067, 451, 0, &[&a0], Some(793.0)),
        ],
    );
    // The conversation grows: each main prompt begins with the one before
    // (its full blocks: floor(29377 / 512) = 57); the subagent starts its
    // own.
    assert_eq!(shared(by_id(&out, &m1), by_id(&out, &m0)), 57);
    assert_eq!(shared(by_id(&out, &m2), by_id(&out, &m1)), 29951 / 512);
    assert_eq!(shared(by_id(&out, &a0), by_id(&out, &m0)), 0);
    assert_eq!(shared(by_id(&out, &a1), by_id(&out, &a0)), 17162 / 512);
    // Private by default: no text of the session.
    assert!(!run.stdout_str().contains("solution-architect"));
    assert_eq!(by_id(&out, &m0)["model"], "claude-sonnet-4-5-20250929");
}

#[test]
fn a_codex_rollout_is_one_call_per_new_token_count() {
    // token_count lines 18, 27, 36, 45, 54, 62 (21, 30, 39, 48, 57 repeat
    // the one before: same total_token_usage). Each starts at the
    // turn_context before its answer (lines 11, 20, 29, 38, 47, 56): the
    // first at 19:34:33.389, timestamp 0. Inputs sum to the last total,
    // 298373; outputs to 1123.
    let s = CODEX_SESSION;
    let id = |n: u32| format!("{s}:{n}");
    let ids: Vec<String> = (0..6).map(id).collect();
    let run = convert(&[&fixture(CODEX)]);
    valid(&run);
    run.stderr_has("recognised as codex input");
    let out = run.json_lines();
    check(
        &out,
        s,
        &[
            (&ids[0], 0.0, 42772, 204, 3456, &[], None),
            // 39.532 - 33.389; after 39.388: 144 ms.
            (&ids[1], 6143.0, 44218, 96, 42880, &[&ids[0]], Some(144.0)),
            (&ids[2], 10842.0, 48969, 245, 44288, &[&ids[1]], Some(156.0)),
            (&ids[3], 18247.0, 49326, 179, 49152, &[&ids[2]], Some(95.0)),
            (&ids[4], 22575.0, 49647, 113, 49408, &[&ids[3]], Some(65.0)),
            // 19:35:54.789 - 19:35:00.520.
            (
                &ids[5],
                81400.0,
                63441,
                286,
                49664,
                &[&ids[4]],
                Some(54269.0),
            ),
        ],
    );
    let first = by_id(&out, &ids[0]);
    assert_eq!(first["model"], "gpt-5.3-codex");
    // 39.388 - 33.389.
    assert_eq!(first["observed"]["e2e_ms"].as_f64(), Some(5999.0));
}

#[test]
fn a_gemini_cli_chat_counts_thoughts_in_the_output() {
    // Messages 1, 3-8 are answers with tokens; output = output + thoughts
    // (55 + 156 for message 1). Message 1 starts at the user's message
    // (21:45:34.362); message 3 at the user's next one (21:45:50.887);
    // 4-8 at the tool call the answer before ran (its timestamp equals
    // the answer's), so their delay is 0.
    let s = "5b959dae-8655-4cd1-b10f-720b8c336ea2";
    let ids: Vec<String> = (0..7).map(|n| format!("{s}:{n}")).collect();
    let run = convert(&[&fixture(GEMINI)]);
    valid(&run);
    run.stderr_has("recognised as gemini-cli input");
    let out = run.json_lines();
    check(
        &out,
        s,
        &[
            (&ids[0], 0.0, 2752, 55 + 156, 0, &[], None),
            // 50.887 - 34.362; after 40.110: 10777 ms.
            (
                &ids[1],
                16525.0,
                2811,
                32 + 35,
                0,
                &[&ids[0]],
                Some(10777.0),
            ),
            // 54.449 - 34.362.
            (&ids[2], 20087.0, 2902, 35 + 134, 0, &[&ids[1]], Some(0.0)),
            (&ids[3], 25917.0, 4650, 37 + 237, 0, &[&ids[2]], Some(0.0)),
            (&ids[4], 33411.0, 5875, 40 + 222, 0, &[&ids[3]], Some(0.0)),
            (
                &ids[5],
                38536.0,
                7973,
                40 + 131,
                5675,
                &[&ids[4]],
                Some(0.0),
            ),
            (
                &ids[6],
                42921.0,
                11422,
                373 + 346,
                6190,
                &[&ids[5]],
                Some(0.0),
            ),
        ],
    );
    // 21:46:25.757 - 21:46:17.283.
    assert_eq!(
        by_id(&out, &ids[6])["observed"]["e2e_ms"].as_f64(),
        Some(8474.0)
    );
}

#[test]
fn a_cut_or_damaged_rollout_says_where_and_keeps_every_good_call() {
    // The rollout with line 19 (a tool output) cut to its first 40 bytes,
    // line 15's timestamp not a date, and the file ending in the middle of
    // line 62 (the last call's token_count): calls 0-4 come out as before.
    let dir = TestDir::new("codex-damaged");
    let text = std::fs::read_to_string(fixture(CODEX)).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[18].truncate(40);
    lines[14] = lines[14].replace("2026-02-23T19:34:39.069Z", "yesterday");
    lines[61].truncate(100);
    let path = dir.write("rollout-cut.jsonl", lines[..62].join("\n"));
    let run = Cmd::new("trace-convert").arg(&path).run();
    run.code(0);
    let name = path.display().to_string();
    run.stderr_has(&format!("{name}:19: warning: not a whole JSON line"))
        .stderr_has(&format!(
            "{name}:15: warning: field `timestamp`: expected a date-time, found \"yesterday\""
        ))
        .stderr_has(&format!("{name}:62: warning: not a whole JSON line"))
        .stderr_has("3 lines could not be read and were left out");
    let out = run.json_lines();
    assert_eq!(out.len(), 5);
    let c4 = by_id(&out, &format!("{CODEX_SESSION}:4"));
    assert_eq!(c4["input_length"], 49647);
    assert_eq!(c4["delay"].as_f64(), Some(65.0));
}

#[test]
fn since_and_until_cut_by_the_calls_start() {
    // Calls start at 19:34:33.389, 39.532, 44.231, 51.636, 55.964 and
    // 19:35:54.789: from 19:34:45Z to 19:35:00Z, calls 3 and 4. Call 3's
    // parent was cut: it is placed by its timestamp.
    let run = convert(&[
        "--since",
        "2026-02-23T19:34:45Z",
        "--until",
        "2026-02-23T19:35:00Z",
        &fixture(CODEX),
    ]);
    valid(&run);
    run.stderr_has("4 calls outside --since/--until left out");
    let out = run.json_lines();
    let ids: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let s = CODEX_SESSION;
    assert_eq!(ids, [format!("{s}:3"), format!("{s}:4")]);
    assert!(out[0].get("after").is_none() && out[0].get("delay").is_none());
    // The flags are this family's only.
    Cmd::new("trace-convert")
        .args([
            "--since",
            "2026-01-01",
            &fixture("kv_cache_tester_trace_0504.json"),
        ])
        .run()
        .code(2)
        .stderr_has("--since and --until apply to claude-code, codex, gemini-cli input only");
}

#[test]
fn keep_messages_writes_each_call_s_new_messages_as_a_delta() {
    // The rollout's first call sends the developer and user messages of
    // lines 2-7 and 9 (7 messages; the text is redacted upstream), after a
    // made-up system message standing for the instructions and tools the
    // log does not hold; the second, the tool output of line 19, under its
    // call_id.
    let run = convert(&["--keep-messages", &fixture(CODEX)]);
    valid(&run);
    run.stderr_has("a made-up system message begins the first prompt of 1 conversation");
    let out = run.json_lines();
    let s = CODEX_SESSION;
    let first = by_id(&out, &format!("{s}:0"));
    assert!(first.get("message_mode").is_none());
    let messages = first["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1 + 7);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "system");
    assert_eq!(messages[3]["role"], "user");
    assert_eq!(first["observed"]["prompt_tokens"], 42772);
    assert!(first.get("input_length").is_none());
    let second = by_id(&out, &format!("{s}:1"));
    assert_eq!(second["message_mode"], "delta");
    let m = &second["messages"][0];
    assert_eq!(m["role"], "tool");
    assert_eq!(m["tool_call_id"], "call_OIMY41RetdVChp5U51mMLGOD");
}

#[test]
fn an_unrecognised_input_points_at_the_formats_read() {
    let run = run_stdin("trace-convert", &[], "{\"hello\": 1}\n");
    run.code(2)
        .stderr_has("cannot recognise the format")
        .stderr_has(
            "one of: claude-code, codex, gemini-cli, litellm, otel, langfuse, kv-cache-tester, dynamo, tracelab, copilot, servegen, mooncake, azure, burstgpt, bailian, openai-batch, sharegpt (what each reads: `trace-convert --help`",
        );
}

#[test]
fn summarize_sets_the_recorded_cache_hit_rate_beside_the_run_s() {
    // Two sessions. s: main calls s:0 (turn 1) and s:1 (turn 2), a
    // subagent call s/a:0 (turn 3); t: one call. Recorded (trace):
    // observed_cached_tokens / input_length; run: cached / prompt tokens.
    //   s:0   input 1000, recorded 0,    run 0 of 1000
    //   s:1   input 2000, recorded 1500, run 1000 of 2000
    //   s/a:0 input 1000, recorded 500,  run 0 of 1000
    //   t:0   input 4000, recorded 1000, run 2000 of 4000
    // Per session recorded: s (0+1500+500)/4000 = 0.5, t 0.25: mean 0.375.
    // By turn, recorded: 1: (0+1000)/5000 = 0.2, 2: 0.75, 3: 0.5.
    // Main: recorded 2500/7000, run 3000/7000; subagents: 0.5 and 0.
    let line = |i: u32, id: &str, session: &str, turn: u32, input: u64, rec: u64, cached: u64| {
        format!(
            "{{\"index\":{i},\"id\":\"{id}\",\"session_id\":\"{session}\",\"turn\":{turn},\
             \"scheduled_ms\":0,\"sent_ms\":{i},\"start_time\":\"2026-01-01T00:00:00Z\",\
             \"ttft_ms\":10,\"first_chunk_ms\":10,\"e2e_ms\":20,\"itl_ms\":[],\
             \"input_length\":{input},\"output_length\":2,\"prompt_tokens\":{input},\
             \"completion_tokens\":2,\"cached_tokens\":{cached},\
             \"observed_cached_tokens\":{rec},\"finish_reason\":\"length\",\
             \"status\":\"ok\",\"http_status\":200}}\n"
        )
    };
    let results = [
        line(0, "s:0", "s", 1, 1000, 0, 0),
        line(1, "s:1", "s", 2, 2000, 1500, 1000),
        line(2, "s/a:0", "s", 3, 1000, 500, 0),
        line(3, "t:0", "t", 1, 4000, 1000, 2000),
    ]
    .concat();
    let run = run_stdin("trace-summarize", &["--format", "json"], results.clone());
    run.code(0);
    let s = &run.json()["sessions"];
    assert_eq!(s["recorded_cache_hit_rate"]["mean"].as_f64(), Some(0.375));
    let by_turn = &s["recorded_cache_hit_rate_by_turn"];
    assert_eq!(by_turn["1"].as_f64(), Some(0.2));
    assert_eq!(by_turn["2"].as_f64(), Some(0.75));
    assert_eq!(by_turn["3"].as_f64(), Some(0.5));
    let a = &s["agents"];
    assert_eq!(
        (
            a["main"]["calls"].as_u64(),
            a["subagents"]["calls"].as_u64()
        ),
        (Some(3), Some(1))
    );
    assert_eq!(
        a["main"]["recorded_cache_hit_rate"].as_f64(),
        Some(2500.0 / 7000.0)
    );
    assert_eq!(a["main"]["cache_hit_rate"].as_f64(), Some(3000.0 / 7000.0));
    assert_eq!(
        a["subagents"]["recorded_cache_hit_rate"].as_f64(),
        Some(0.5)
    );
    assert_eq!(a["subagents"]["cache_hit_rate"].as_f64(), Some(0.0));
    let text = run_stdin("trace-summarize", &[], results);
    text.code(0)
        .stdout_has("recorded prefix cache hit rate")
        .stdout_has("main agents and subagents");
}

#[test]
fn a_replayed_rollout_carries_the_recorded_cached_tokens_to_its_results() {
    // A hundred times as fast: the session spans 81 s.
    let trace = convert(&[&fixture(CODEX)]);
    let fast = run_stdin("trace-rescale", &["--speed", "100"], trace.stdout.clone());
    fast.code(0);
    let replay = run_stdin("trace-replay", &["--sim"], fast.stdout.clone());
    replay.code(0);
    let results = replay.json_lines();
    let mut got: Vec<u64> = results
        .iter()
        .map(|r| r["observed_cached_tokens"].as_u64().unwrap())
        .collect();
    got.sort_unstable();
    assert_eq!(got, [3456, 42880, 44288, 49152, 49408, 49664]);
    // Recorded: 238848 of 298373 prompt tokens, all in one session.
    let sum = run_stdin(
        "trace-summarize",
        &["--format", "json"],
        replay.stdout.clone(),
    );
    let rate = sum.json()["sessions"]["recorded_cache_hit_rate"]["mean"].as_f64();
    assert_eq!(rate, Some(238848.0 / 298373.0));
}

#[test]
fn keep_messages_gives_a_claude_code_subagent_its_own_conversation() {
    // The subagent's first call (its file's lines 1-6) carries its whole
    // conversation, after a made-up system message, and waits for the
    // Task call without continuing it; its second call adds the four tool
    // results of lines 7-10, in the order written, under the ids of the
    // tool_use blocks of lines 5, 6, 3 and 4.
    let run = convert(&["--keep-messages", &fixture(CLAUDE)]);
    valid(&run);
    run.stderr_has("a made-up system message begins the first prompt of 2 conversations");
    let out = run.json_lines();
    let s = CLAUDE_SESSION;
    let a0 = by_id(&out, &format!("{s}/a485154:0"));
    assert!(a0.get("message_mode").is_none());
    assert_eq!(a0["after"][0], format!("{s}:0"));
    let roles: Vec<&str> = a0["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user"]);
    assert_eq!(a0["observed"]["prompt_tokens"], 17162);
    let a1 = by_id(&out, &format!("{s}/a485154:1"));
    assert_eq!(a1["message_mode"], "delta");
    let ids: Vec<&str> = a1["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "toolu_bdrk_01BrsVn3dprfXUudaGPQXzoN",
            "toolu_bdrk_01LMs4EbseoueRmSGCyoSfrN",
            "toolu_bdrk_01UoWJ1KSnr6MDLpHjDT9bcG",
            "toolu_bdrk_01F6FkgsnEnCEfrFV9F8NW65",
        ]
    );
    // The main agent's second call: the Task's result (line 7).
    let m1 = by_id(&out, &format!("{s}:1"));
    assert_eq!(m1["message_mode"], "delta");
    assert_eq!(
        m1["messages"][0]["tool_call_id"],
        "toolu_bdrk_019PUUtqzQg8U5ogfuyQ7yLV"
    );
}

/// One rollout line: `{timestamp, type, payload}` at 10:00:SS.mmm.
fn rollout_line(at: &str, kind: &str, payload: &str) -> String {
    format!(r#"{{"timestamp":"2026-08-18T10:00:{at}Z","type":"{kind}","payload":{payload}}}"#)
}

/// A `token_count` event: the running totals and the call's own usage
/// (input, cached, output).
fn token_count(at: &str, total: (u64, u64, u64), last: (u64, u64, u64)) -> String {
    let usage = |(i, c, o): (u64, u64, u64)| {
        format!(
            r#"{{"input_tokens":{i},"cached_input_tokens":{c},"output_tokens":{o},"total_tokens":{}}}"#,
            i + o
        )
    };
    rollout_line(
        at,
        "event_msg",
        &format!(
            r#"{{"type":"token_count","info":{{"total_token_usage":{},"last_token_usage":{}}}}}"#,
            usage(total),
            usage(last)
        ),
    )
}

#[test]
fn a_codex_subagent_is_an_agent_of_its_parents_session() {
    // Constructed in the shape codex-rs writes (SessionSource::SubAgent
    // ThreadSpawn; a fork's copy of the parent's rollout after the child's
    // session_meta). Parent: calls from 00.300 to 02.000 and from 02.100
    // to 09.000. Child, forked at 02.050: its copy of the parent's first
    // call (the token_count at 02.050) is the parent's and left out; its
    // own turn starts at 02.060 (a task_started while the copied turn t1
    // is open), its calls run 02.070-05.000 and 05.000-06.000. The child
    // fans out from the parent's call that ended last before 02.070 (the
    // one ending 02.000: delay 70 ms). Timestamps from 00.300.
    let dir = TestDir::new("codex-subagent");
    let user = r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}"#;
    let parent = [
        rollout_line(
            "00.000",
            "session_meta",
            r#"{"id":"parent-1","source":"cli"}"#,
        ),
        rollout_line("00.100", "turn_context", r#"{"model":"gpt-5-codex"}"#),
        rollout_line(
            "00.200",
            "event_msg",
            r#"{"type":"task_started","turn_id":"t1"}"#,
        ),
        rollout_line("00.300", "response_item", user),
        token_count("02.000", (1000, 0, 50), (1000, 0, 50)),
        rollout_line(
            "02.001",
            "response_item",
            r#"{"type":"function_call","name":"spawn_agent","arguments":"{}","call_id":"c1"}"#,
        ),
        rollout_line(
            "02.100",
            "response_item",
            r#"{"type":"function_call_output","call_id":"c1","output":"child-1"}"#,
        ),
        token_count("09.000", (2100, 1000, 80), (1100, 1000, 30)),
        rollout_line(
            "09.001",
            "event_msg",
            r#"{"type":"task_complete","turn_id":"t1"}"#,
        ),
    ];
    let child = [
        rollout_line(
            "02.050",
            "session_meta",
            r#"{"id":"child-1","forked_from_id":"parent-1","source":{"subagent":{"thread_spawn":{"parent_thread_id":"parent-1","depth":1}}}}"#,
        ),
        rollout_line(
            "02.050",
            "session_meta",
            r#"{"id":"parent-1","source":"cli"}"#,
        ),
        rollout_line(
            "02.050",
            "event_msg",
            r#"{"type":"task_started","turn_id":"t1"}"#,
        ),
        rollout_line("02.050", "response_item", user),
        token_count("02.050", (1000, 0, 50), (1000, 0, 50)),
        rollout_line(
            "02.060",
            "event_msg",
            r#"{"type":"task_started","turn_id":"c1"}"#,
        ),
        rollout_line("02.061", "turn_context", r#"{"model":"gpt-5-codex-mini"}"#),
        rollout_line("02.070", "response_item", user),
        token_count("05.000", (2300, 1000, 70), (1300, 1000, 20)),
        token_count("06.000", (3700, 2200, 90), (1400, 1200, 20)),
        rollout_line(
            "06.001",
            "event_msg",
            r#"{"type":"task_complete","turn_id":"c1"}"#,
        ),
    ];
    let day = "sessions/2026/08/18";
    std::fs::create_dir_all(dir.path.join(day)).unwrap();
    dir.write(
        &format!("{day}/rollout-2026-08-18T10-00-00-parent-1.jsonl"),
        parent.join("\n") + "\n",
    );
    dir.write(
        &format!("{day}/rollout-2026-08-18T10-00-02-child-1.jsonl"),
        child.join("\n") + "\n",
    );
    let run = convert(&[dir.path.join("sessions").to_str().unwrap()]);
    valid(&run);
    let out = run.json_lines();
    let s = "parent-1";
    let (p0, p1) = ("parent-1:0", "parent-1:1");
    let (c0, c1) = ("parent-1/child-1:0", "parent-1/child-1:1");
    check(
        &out,
        s,
        &[
            (p0, 0.0, 1000, 50, 0, &[], None),
            (p1, 1800.0, 1100, 30, 1000, &[p0], Some(100.0)),
            (c0, 1770.0, 1300, 20, 1000, &[p0], Some(70.0)),
            (c1, 4700.0, 1400, 20, 1200, &[c0], Some(0.0)),
        ],
    );
    assert_eq!(by_id(&out, c0)["model"], "gpt-5-codex-mini");

    // Newer releases name the root session beside the thread's id.
    let child = [
        rollout_line(
            "02.050",
            "session_meta",
            r#"{"id":"child-2","session_id":"parent-1","source":{"subagent":{"thread_spawn":{"parent_thread_id":"parent-1","depth":1}}}}"#,
        ),
        rollout_line("02.070", "response_item", user),
        token_count("05.000", (1300, 1000, 20), (1300, 1000, 20)),
    ];
    dir.write("child-2.jsonl", child.join("\n") + "\n");
    let run = convert(&[dir.path.join("child-2.jsonl").to_str().unwrap()]);
    let out = run.json_lines();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["session_id"], "parent-1");
    assert_eq!(out[0]["id"], "parent-1/child-2:0");

    // A fork of an idle thread (`codex fork`): its copied turns are all
    // closed; its own first turn, written seconds after the copy, starts
    // its calls. A session of its own: one call, from 12.000 to 13.000.
    let fork = [
        rollout_line(
            "02.050",
            "session_meta",
            r#"{"id":"fork-1","forked_from_id":"parent-1","source":"cli"}"#,
        ),
        rollout_line(
            "02.050",
            "session_meta",
            r#"{"id":"parent-1","source":"cli"}"#,
        ),
        rollout_line(
            "02.050",
            "event_msg",
            r#"{"type":"task_started","turn_id":"t1"}"#,
        ),
        token_count("02.050", (1000, 0, 50), (1000, 0, 50)),
        rollout_line(
            "02.051",
            "event_msg",
            r#"{"type":"task_complete","turn_id":"t1"}"#,
        ),
        rollout_line(
            "11.000",
            "event_msg",
            r#"{"type":"task_started","turn_id":"f1"}"#,
        ),
        rollout_line("12.000", "response_item", user),
        token_count("13.000", (1200, 1000, 10), (1200, 1000, 10)),
    ];
    dir.write("fork-1.jsonl", fork.join("\n") + "\n");
    let run = convert(&[dir.path.join("fork-1.jsonl").to_str().unwrap()]);
    let out = run.json_lines();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["id"], "fork-1:0");
    assert_eq!(out[0]["input_length"], 1200);
    assert_eq!(out[0]["observed"]["e2e_ms"], 1000.0);
}

#[test]
fn keep_messages_makes_every_later_call_grow_as_the_recorded_one_did() {
    // Each later call's new messages hold, under the default tokenizer,
    // the tokens its prompt grew by beyond the call before's prompt and
    // answer (its answer is generated live, output_length tokens): the
    // log leaves out what the agent sent beside them, so made-up words
    // end them. From the file (prompt = input + cache creation + cache
    // read; answer = output_tokens): main :1 29951 - 29377 - 511 = 63,
    // :2 30242 - 29951 - 173 = 118, :3 31141 - 30242 - 3 = 896, :4 43,
    // :5 269, :6 205; subagent :1 23269 - 17162 - 265 = 5842.
    let run = convert(&["--keep-messages", &fixture(CLAUDE)]);
    valid(&run);
    run.stderr_has("7 later calls of these conversations grew by more than");
    let out = run.json_lines();
    let tokenizer = tracekit::tokenizer::Tokenizer::load("o200k_base").unwrap();
    let s = CLAUDE_SESSION;
    let want = [
        (format!("{s}:1"), 63),
        (format!("{s}:2"), 118),
        (format!("{s}:3"), 896),
        (format!("{s}:4"), 43),
        (format!("{s}:5"), 269),
        (format!("{s}:6"), 205),
        (format!("{s}/a485154:1"), 5842),
    ];
    for (id, grown) in want {
        let r = by_id(&out, &id);
        assert_eq!(r["message_mode"], "delta", "{id}");
        let text: Vec<&str> = r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        let have = tokenizer.count(&text.join("\n")).unwrap() as i64;
        // Words joined to a message may merge with its last token.
        assert!(
            (have - grown).abs() <= 2,
            "{id}: {have} tokens, grew {grown}"
        );
    }
}

const COMPACT: &str = "agents/claude-compact";
const COMPACT_SESSION: &str = "4d5611e5-241a-462a-8d15-5122611a9569";

#[test]
fn a_real_session_s_progress_copies_count_once_and_its_compaction_restarts_the_context() {
    // In the main file's lines 1-775: 63 requests (ids :0-:62). The
    // subagent file has 12 requests; the main file's agent_progress lines
    // copy 11 of them (33 answer lines): 12 subagent calls, not 23. The
    // compaction file's one request (line 5): input 3 + 8681 + 164830 =
    // 173514, output 8. After the compact_boundary (line 754), request
    // req_011CY4orqBFAFCkvDwA9P4Hq (line 760, the 62nd: :61) has input
    // 3 + 14600 + 21478 = 36081 and shares no block with :60 (164831 on
    // line 743); it joins the compaction call.
    let run = convert(&[&fixture(COMPACT)]);
    valid(&run);
    run.stderr_has("76 records read, 76 written; 1 session");
    let out = run.json_lines();
    let s = COMPACT_SESSION;
    let count = |prefix: &str| {
        out.iter()
            .filter(|r| r["id"].as_str().unwrap().rsplit_once(':').unwrap().0 == prefix)
            .count()
    };
    assert_eq!(count(s), 63);
    assert_eq!(count(&format!("{s}/a2898e3")), 12);
    let compaction = by_id(&out, &format!("{s}/acompact-e1f845:0"));
    assert_eq!(compaction["input_length"], 173514);
    assert_eq!(compaction["output_length"], 8);
    let before = by_id(&out, &format!("{s}:60"));
    let after = by_id(&out, &format!("{s}:61"));
    assert_eq!(before["input_length"], 164831);
    assert_eq!(after["input_length"], 36081);
    assert_eq!(after["observed"]["cached_tokens"], 21478);
    assert_eq!(shared(after, before), 0);
    assert_eq!(after["after"][1], format!("{s}/acompact-e1f845:0"));

    // Without the subagent's own file, its parent's copies are all there
    // is: 11 calls, and the subagent said to be incomplete.
    let dir = TestDir::new("claude-progress-only");
    let from = std::path::Path::new(&fixture(COMPACT))
        .join("-home-marco-projects-spotter-worktrees-spotter-dov");
    let to = dir.path.join("project");
    std::fs::create_dir_all(to.join(s).join("subagents")).unwrap();
    let file = format!("{s}.jsonl");
    std::fs::copy(from.join(&file), to.join(&file)).unwrap();
    let compact = format!("{s}/subagents/agent-acompact-e1f845.jsonl");
    std::fs::copy(from.join(&compact), to.join(&compact)).unwrap();
    let run = convert(&[to.to_str().unwrap()]);
    run.stderr_has(&format!(
        "subagent a2898e3 of session {s} is incomplete: its own file was not given"
    ));
    let out = run.json_lines();
    assert_eq!(
        out.iter()
            .filter(|r| r["id"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{s}/a2898e3:")))
            .count(),
        11
    );
}
