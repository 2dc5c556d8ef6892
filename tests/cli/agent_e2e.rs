//! End to end: a real coding session (the bundled kv-cache-tester slice:
//! a parent and the two subagents it spawned) converted, sped up 100×
//! and replayed against trace-sim on each API coding agents speak, with
//! and without `--live-answers`: one ok result per call, and most of each
//! prompt found in the simulated prefix cache. And `--dry-run`'s body
//! sizes, which are those of the bodies each endpoint sends.

use serde_json::{Value, json};

use crate::convert::fixture;
use crate::servers::Sim;
use crate::util::{Cmd, by_index};

/// The slice converted and sped up 100×: its three minutes of calls and
/// think time in under two seconds.
fn session() -> String {
    let converted = Cmd::new("trace-convert")
        .arg(fixture("kv_cache_tester_trace_0291.requests15-19.json"))
        .run();
    converted.code(0);
    let fast = Cmd::new("trace-rescale")
        .args(["--speed", "100"])
        .stdin(converted.stdout.clone())
        .run();
    fast.code(0);
    fast.stdout_str()
}

/// The session's records, parsed.
fn records(session: &str) -> Vec<Value> {
    session
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sum(results: &[Value], field: &str) -> u64 {
    results
        .iter()
        .map(|r| r[field].as_u64().unwrap_or_else(|| panic!("{field}: {r}")))
        .sum()
}

/// Replay the session against a fresh trace-sim (instant answers: no
/// prefill or token time, so the run takes the trace's own think time).
fn replay(session: &str, flags: &[&str]) -> Vec<Value> {
    replay_with_stderr(session, flags).0
}

/// [`replay`], and what the replay wrote to standard error.
fn replay_with_stderr(session: &str, flags: &[&str]) -> (Vec<Value>, String) {
    let sim = Sim::start(&["--itl-ms", "0", "--prefill-us", "0"]);
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", sim.url.as_str()])
        .args(flags)
        .stdin(session)
        .run();
    run.code(0);
    let results: Vec<Value> = by_index(&run, CALLS).into_values().collect();
    for r in &results {
        assert_eq!(r["status"], json!("ok"), "{flags:?}: {r}");
        assert_eq!(r["session_id"], json!("trace_0291"), "{r}");
    }
    (results, run.stderr.clone())
}

/// Calls in the slice: the parent's three, agent_001's five, agent_002's
/// seven.
const CALLS: usize = 15;

/// Whole 512-token blocks of each call's prompt that trace-sim is sure to
/// hold when the call arrives, worked out from the source's 64-token
/// `hash_ids` (a block of the converted trace is eight of them, and an id
/// stands for its whole prefix): a call finds its leading whole blocks
/// (floor(in / 512)) whose first 8(k+1) ids a call sent before it had.
/// The calls surely sent before it are its ancestors in the `after`
/// graph, and no other call that may come first shares more with it, but
/// for one pair: the subagents' first calls share their first 174 ids
/// (floor(174 / 8) = 21 blocks, the agents' common prompt), so whichever
/// of them comes second finds 21 blocks, the other none (`None` here).
/// E.g. agent_001's second call begins with all 22 whole blocks of its
/// first (11353 tokens); the parent's second call with the 179 of its
/// first (91853 tokens, 1435 ids), its third with the 190 of its second.
const FOUND: [(&str, Option<u64>); CALLS] = [
    ("trace_0291:0", Some(0)),
    ("trace_0291/agent_001:0", None),
    ("trace_0291/agent_001:1", Some(22)),
    ("trace_0291/agent_001:2", Some(121)),
    ("trace_0291/agent_001:3", Some(122)),
    ("trace_0291/agent_001:4", Some(128)),
    ("trace_0291/agent_002:0", None),
    ("trace_0291/agent_002:1", Some(22)),
    ("trace_0291/agent_002:2", Some(120)),
    ("trace_0291/agent_002:3", Some(120)),
    ("trace_0291/agent_002:4", Some(124)),
    ("trace_0291/agent_002:5", Some(129)),
    ("trace_0291:1", Some(179)),
    ("trace_0291/agent_002:6", Some(136)),
    ("trace_0291:2", Some(190)),
];

/// The prompts' tokens in all: the `in` of the 15 calls.
const PROMPT_TOKENS: u64 = 967_165;

#[test]
fn a_coding_session_replayed_finds_its_growing_context_cached() {
    let session = session();
    let records = records(&session);
    let ids: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, FOUND.map(|(id, _)| id));
    assert_eq!(sum(&records, "input_length"), PROMPT_TOKENS);
    for endpoint in ["chat", "messages", "responses"] {
        let results = replay(&session, &["--endpoint", endpoint]);
        let mut firsts = Vec::new();
        for (r, (id, found)) in results.iter().zip(FOUND) {
            assert_eq!(r["id"], json!(id), "{endpoint}");
            // Every word of a synthesized prompt is one simulated token.
            assert_eq!(r["prompt_tokens"], r_input(&records, id), "{endpoint}: {r}");
            match found {
                Some(blocks) => {
                    assert_eq!(r["cached_tokens"], json!(blocks * 512), "{endpoint}: {r}")
                }
                None => firsts.push(r["cached_tokens"].as_u64().unwrap()),
            }
        }
        firsts.sort_unstable();
        assert_eq!(firsts, [0, 21 * 512], "{endpoint}");
        // Sum of the blocks found (1,413 + the 21) × 512 = 734,208 of
        // 967,165 prompt tokens: a hit rate of 0.759.
        assert_eq!(sum(&results, "cached_tokens"), 734_208, "{endpoint}");
    }
}

/// The `input_length` of the record with `id`.
fn r_input(records: &[Value], id: &str) -> Value {
    records
        .iter()
        .find(|r| r["id"] == id)
        .map(|r| r["input_length"].clone())
        .unwrap()
}

#[test]
fn with_live_answers_each_agent_continues_its_own_conversation() {
    // A later call continues the call it names first in `after`, its
    // conversation parent: that call's prompt, the answer trace-sim really
    // gave (its `output_length` tokens: the simulated model never stops
    // early), then the words of its own prompt past them. So a continuing
    // call finds its parent's prompt and answer cached to their last whole
    // block. The subagents' first calls (11353 and 11341 tokens) are
    // shorter than the prompt of the parent call they follow (91853): they
    // start conversations of their own, as a subagent does. The parent's
    // third call (100198) is shorter than the second's prompt and answer
    // (97317 + 3035 = 100352) but not than its prompt: it is sent with
    // that conversation and no new tokens, 100352 tokens. Every other
    // prompt is as long as recorded.
    let session = session();
    let records = records(&session);
    for endpoint in ["chat", "messages", "responses"] {
        let (results, stderr) =
            replay_with_stderr(&session, &["--endpoint", endpoint, "--live-answers"]);
        assert!(
            stderr.contains(
                "--live-answers: 1 later turn asked for fewer prompt tokens than the conversation"
            ),
            "{endpoint}: {stderr}"
        );
        assert!(
            stderr
                .contains("--live-answers: 2 later turns asked for fewer prompt tokens than even"),
            "{endpoint}: {stderr}"
        );
        let first = &results[0];
        assert_eq!(
            (
                &first["prompt_tokens"],
                &first["cached_tokens"],
                &first["completion_tokens"]
            ),
            (&json!(91853), &json!(0), &json!(795)),
            "{endpoint}"
        );
        let by_id = |id: &Value| {
            results
                .iter()
                .find(|r| &r["id"] == id)
                .unwrap_or_else(|| panic!("{id}"))
        };
        let mut continued = 0;
        for (r, rec) in results.iter().zip(&records) {
            let sent = match rec["id"].as_str() {
                Some("trace_0291:2") => json!(100352),
                _ => rec["input_length"].clone(),
            };
            assert_eq!(r["prompt_tokens"], sent, "{endpoint}: {r}");
            assert_eq!(
                r["completion_tokens"], rec["output_length"],
                "{endpoint}: {r}"
            );
            let Some(parent) = rec["after"].get(0) else {
                continue;
            };
            let p = by_id(parent);
            let history =
                p["prompt_tokens"].as_u64().unwrap() + p["completion_tokens"].as_u64().unwrap();
            if p["prompt_tokens"].as_u64().unwrap() <= rec["input_length"].as_u64().unwrap() {
                continued += 1;
                assert!(
                    r["cached_tokens"].as_u64().unwrap() >= history / 512 * 512,
                    "{endpoint}: {r} after {p}"
                );
            }
        }
        // Every later call but the two subagents' first ones.
        assert_eq!(continued, CALLS - 3, "{endpoint}");
    }
}

#[test]
fn dry_run_body_bytes_are_the_size_of_the_body_each_endpoint_sends() {
    let input = "{\"timestamp\":0,\"output_length\":3,\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"hi\"}]}\n";
    let system = json!({"role": "system", "content": "sys"});
    let user = json!({"role": "user", "content": "hi"});
    // The bodies as sent (see agent_api.rs): chat's form, Anthropic's
    // with `system` split out, OpenAI Responses' `input` items.
    let cases = [
        (
            "chat",
            json!({"model": "m", "messages": [system, user], "max_tokens": 3, "stream": true,
                   "stream_options": {"include_usage": true}}),
        ),
        (
            "messages",
            json!({"model": "m", "system": "sys", "messages": [user], "max_tokens": 3,
                   "stream": true}),
        ),
        (
            "responses",
            json!({"model": "m", "input": [system, user], "max_output_tokens": 3,
                   "stream": true}),
        ),
    ];
    for (endpoint, body) in cases {
        let run = Cmd::new("trace-replay")
            .args(["--dry-run", "--model", "m", "--endpoint", endpoint])
            .stdin(input)
            .run();
        run.code(0);
        let line = &run.json_lines()[0];
        assert_eq!(
            line["body_bytes"],
            json!(body.to_string().len()),
            "{endpoint}: {line}"
        );
    }
}
