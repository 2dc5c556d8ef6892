//! trace-replay's schedule and sessions: turns, warmup, shards,
//! dependencies, conversations, live answers, Ctrl-C and embeddings.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::replay::{ms, statuses, text_trace};
use crate::replay_answers::scripted_answer;
use crate::servers::{Answer, Scripted, Sim};
use crate::util::{
    Run, TestDir, bin, by_index, columns, live_answer_session, prompt_and_cached, replay,
    run_stdin, spawn_sim_replay, trace,
};

#[test]
fn later_turns_wait_for_the_previous_turn_and_its_delay() {
    let mut recs = Vec::new();
    for turn in 0..3 {
        for s in 0..3 {
            let mut r = json!({"timestamp": turn * 10 + s, "session_id": format!("s{s}"),
                               "text_input": "a b c", "output_length": 3});
            if turn > 0 {
                r["delay"] = json!(40);
            }
            recs.push(r);
        }
    }
    let run = replay(&["--sim"], &trace(&recs));
    run.code(0);
    let r = by_index(&run, 9);
    for s in 0..3u64 {
        for turn in 1..3u64 {
            let prev = &r[&((turn - 1) * 3 + s)];
            let this = &r[&(turn * 3 + s)];
            let prev_end = ms(&prev["sent_ms"]) + ms(&prev["e2e_ms"]);
            // Due 40 ms after the previous turn completed, not at its timestamp.
            assert!(
                ms(&this["scheduled_ms"]) >= prev_end + 40.0 - 0.01,
                "{prev}\n{this}"
            );
            assert!(ms(&this["sent_ms"]) >= ms(&this["scheduled_ms"]), "{this}");
        }
    }
}

#[test]
fn warmup_limit_and_closed_loop() {
    let run = replay(
        &["--sim", "--warmup", "2", "--limit", "3"],
        &text_trace(10, 1, 2),
    );
    run.code(0);
    let r = by_index(&run, 5);
    let warm: Vec<bool> = r.values().map(|x| x.get("warmup").is_some()).collect();
    assert_eq!(warm, [true, true, false, false, false]);
    assert!(
        run.stderr.starts_with("trace-replay: sent 3, ok 3,"),
        "{}",
        run.stderr
    );
    // The run's schedule starts at the first record after the warmup.
    assert_eq!(r[&2]["scheduled_ms"], 0.0);

    let run = replay(&["--sim", "--concurrency", "2"], &text_trace(6, 100_000, 2));
    run.code(0);
    assert_eq!(statuses(&by_index(&run, 6))["ok"], 6);
}

#[test]
fn the_model_flag_wins_and_the_map_renames_records_models() {
    let input = trace(&[
        json!({"timestamp": 0, "text_input": "a", "output_length": 1, "model": "small"}),
        json!({"timestamp": 1, "text_input": "b", "output_length": 1, "model": "big"}),
        json!({"timestamp": 2, "text_input": "c", "output_length": 1}),
    ]);
    let sent_models = |args: &[&str]| {
        let server = Scripted::start(scripted_answer);
        let mut all = vec!["--url", server.url.as_str()];
        all.extend(args);
        let run = replay(&all, &input);
        run.code(0);
        let results: Vec<Value> = by_index(&run, 3)
            .into_values()
            .map(|x| x["model"].clone())
            .collect();
        let mut bodies: Vec<(String, Value)> = server
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| {
                let v: Value = serde_json::from_str(&s.body).unwrap();
                let text = v["messages"][0]["content"].as_str().unwrap().to_string();
                (text, v["model"].clone())
            })
            .collect();
        bodies.sort_by(|a, b| a.0.cmp(&b.0));
        let sent: Vec<Value> = bodies.into_iter().map(|(_, m)| m).collect();
        assert_eq!(sent, results, "{args:?}");
        sent
    };
    assert_eq!(
        sent_models(&["--model-map", "small=tiny", "--model-map", "huge=x"]),
        [json!("tiny"), json!("big"), Value::Null]
    );
    assert_eq!(
        sent_models(&["--model", "m", "--model-map", "small=tiny"]),
        [json!("m"), json!("m"), json!("m")]
    );
    let run = replay(&["--dry-run", "--model-map", "small"], &input);
    run.code(2);
    run.stderr_has("`small` is not FROM=TO (a model name, `=`, its new name)");
}

#[test]
fn sim_args_set_the_in_process_simulators_model() {
    let run = replay(
        &[
            "--sim",
            "--sim-arg=--error-rate=1",
            "--sim-arg",
            "--seed",
            "--sim-arg",
            "4",
        ],
        &text_trace(3, 1, 2),
    );
    run.code(0);
    for x in by_index(&run, 3).values() {
        assert_eq!(
            (&x["status"], &x["error"]),
            (&json!("error"), &json!("HTTP 500: simulated server error")),
            "{x}"
        );
    }
    let run = replay(&["--sim", "--sim-arg=--port=1"], &text_trace(1, 1, 2));
    run.code(2).stderr_is(
        "trace-replay: error: --sim-arg: unexpected argument '--port' found (give trace-sim's flags)\n",
    );
    let run = replay(&["--url", "http://127.0.0.1:9", "--sim-arg=--seed=1"], "");
    run.code(2)
        .stderr_is("trace-replay: error: --sim-arg applies to --sim only\n");
}

#[test]
fn dry_run_prints_the_schedule() {
    let input = trace(&[
        json!({"timestamp": 500, "input_length": 3, "output_length": 2, "session_id": "s", "id": "x"}),
        json!({"timestamp": 520.25, "text_input": "hi", "output_length": 1, "model": "m"}),
        json!({"timestamp": 900, "text_input": "again", "output_length": 1, "session_id": "s", "delay": 30}),
    ]);
    let run = replay(&["--dry-run", "--endpoint", "completions"], &input);
    run.ok();
    // The bodies, built by hand: the prompt of record 0 is the one
    // trace-synth writes for it (same tokenizer and seed).
    let synthesized = run_stdin("trace-synth", &[], input.clone());
    synthesized.ok();
    let prompt0 = synthesized.json_lines()[0]["text_input"].clone();
    let usage = json!({"include_usage": true});
    let bodies = [
        json!({"prompt": prompt0, "max_tokens": 2, "stream": true, "stream_options": usage}),
        json!({"model": "m", "prompt": "hi", "max_tokens": 1, "stream": true, "stream_options": usage}),
        json!({"prompt": "again", "max_tokens": 1, "stream": true, "stream_options": usage}),
    ]
    .map(|b| b.to_string().len());
    assert_eq!(
        run.stdout_str(),
        format!(
            "{}\n{}\n{}\n",
            format_args!(
                r#"{{"index":0,"scheduled_ms":0.0,"id":"x","session_id":"s","input_length":3,"output_length":2,"stream":true,"body_bytes":{}}}"#,
                bodies[0]
            ),
            format_args!(
                r#"{{"index":1,"scheduled_ms":20.25,"model":"m","input_length":null,"output_length":1,"stream":true,"body_bytes":{}}}"#,
                bodies[1]
            ),
            format_args!(
                r#"{{"index":2,"scheduled_ms":null,"after_previous_turn_ms":30.0,"session_id":"s","input_length":null,"output_length":1,"stream":true,"body_bytes":{}}}"#,
                bodies[2]
            ),
        )
    );
}

#[test]
fn bad_records_stop_the_run_before_it_starts() {
    let dir = TestDir::new("replay-bad");
    dir.write(
        "t.jsonl",
        "{\"timestamp\": 0, \"text_input\": \"a\", \"output_length\": 1}\n{\"timestamp\": 1, \"output_length\": -3, \"text_input\": \"b\"}\n",
    );
    let run = dir.cmd("trace-replay").args(["--sim", "t.jsonl"]).run();
    run.code(2);
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("trace-replay: t.jsonl:2: error:")
            && run.stderr.contains("output_length"),
        "{}",
        run.stderr
    );
    // --skip-invalid replays the rest.
    let run = dir
        .cmd("trace-replay")
        .args(["--sim", "--quiet", "--skip-invalid", "t.jsonl"])
        .run();
    run.code(0);
    assert_eq!(run.lines().len(), 1);
}

/// Spawn trace-replay writing to a file, with a slow trace.
fn slow_replay(dir: &TestDir, n: usize, gap_ms: u64) -> std::process::Child {
    dir.write("slow.jsonl", text_trace(n, gap_ms, 2));
    spawn_sim_replay(dir, "slow.jsonl")
}

/// Wait for `after` results of a `slow_replay`, interrupt it with SIGINT,
/// check that it exits 130, and return its results, one per record of `n`.
fn interrupt(
    dir: &TestDir,
    child: std::process::Child,
    after: usize,
    n: usize,
) -> BTreeMap<u64, Value> {
    for _ in 0..500 {
        let text = std::fs::read_to_string(dir.join("out.ndjson")).unwrap_or_default();
        if text.lines().count() >= after {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    crate::util::assert_exit(&out, 130);
    let run = Run {
        desc: "trace-replay".into(),
        code: 130,
        stdout: std::fs::read(dir.join("out.ndjson")).unwrap(),
        stderr: String::new(),
    };
    by_index(&run, n)
}

#[test]
fn ctrl_c_writes_a_result_for_every_record_and_exits_130() {
    let dir = TestDir::new("replay-sigint");
    let child = slow_replay(&dir, 100, 100);
    let r = interrupt(&dir, child, 3, 100);
    let c = statuses(&r);
    assert!(c["ok"] >= 3 && c["cancelled"] >= 50, "{c:?}");
    for x in r.values().filter(|x| x["status"] == "cancelled") {
        assert!(x["error"].as_str().unwrap().contains("stopped"), "{x}");
    }
}

#[test]
fn ctrl_c_between_two_distant_requests_stops_before_the_second_is_due() {
    // The dispatcher sleeps until the second request is due, two minutes
    // on, and does not listen for completions meanwhile: Ctrl-C must
    // still wake it.
    let dir = TestDir::new("replay-sigint-gap");
    let child = slow_replay(&dir, 2, 120_000);
    let r = interrupt(&dir, child, 1, 2);
    assert_eq!(r[&0]["status"], "ok", "{}", r[&0]);
    let second = &r[&1];
    assert_eq!(second["status"], "cancelled", "{second}");
    assert!(
        ms(&second["sent_ms"]) < ms(&second["scheduled_ms"]),
        "stopped only when it was due: {second}"
    );
}

#[test]
fn a_closed_output_stops_the_run_and_says_how_many_results_it_lost() {
    let dir = TestDir::new("replay-pipe");
    dir.write("slow.jsonl", text_trace(100, 100, 2));
    // The reader is dropped after one line: the next write fails and the
    // run stops. Of the 100 records, the one read is the only one written.
    let (first, out) = crate::util::head_one(
        Command::new(bin("trace-replay"))
            .current_dir(&dir.path)
            .args(["--sim", "--quiet", "slow.jsonl"]),
    );
    assert!(first.starts_with("{\"index\":0,"), "{first}");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "trace-replay: error: the output closed (nobody reads it any more): 99 results could \
         not be written; --keep FILE keeps every result on disk as well\n"
    );
}

#[test]
fn with_keep_a_closed_output_loses_nothing() {
    let dir = TestDir::new("replay-pipe-keep");
    dir.write("slow.jsonl", text_trace(20, 50, 2));
    let (first, out) = crate::util::head_one(
        Command::new(bin("trace-replay"))
            .current_dir(&dir.path)
            .args(["--sim", "--quiet", "--keep", "kept.ndjson", "slow.jsonl"]),
    );
    assert!(first.starts_with("{\"index\":0,"), "{first}");
    // The run went on to its end in the file: 20 results, 19 of them after
    // the one the output took.
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(
            "trace-replay: warning: the output closed: 19 results went to kept.ndjson only\n\
             trace-replay: sent 20, ok 20, errors 0, timeouts 0, cancelled 0 in "
        ),
        "{stderr}"
    );
    let kept = String::from_utf8(dir.read("kept.ndjson")).unwrap();
    let statuses: Vec<Value> = kept
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["status"].clone())
        .collect();
    assert_eq!(statuses, vec![json!("ok"); 20]);
    assert_eq!(kept.lines().next().unwrap(), first.trim_end());
}

#[test]
fn shards_replay_every_record_once_and_merge_into_one_run() {
    let dir = TestDir::new("replay-shards");
    let recs: Vec<Value> = (0..120)
        .map(|i| {
            let mut r = json!({"timestamp": 5 + i * 5, "text_input": "a b", "output_length": 2});
            if i % 3 == 0 {
                r["session_id"] = json!(format!("s{}", i % 7));
            }
            r
        })
        .collect();
    dir.write("trace.jsonl", trace(&recs));
    let sim = Sim::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let at = tracekit::time::rfc3339(std::time::SystemTime::now() + Duration::from_secs(3));
    let children: Vec<_> = (1..=4)
        .map(|k| {
            let args = format!(
                "--quiet --url {} --start-at {at} --shard {k}/4 -o shard{k}.ndjson trace.jsonl",
                sim.url
            );
            dir.spawn("trace-replay", &args, Stdio::inherit())
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        crate::util::assert_exit(&out, 0);
    }
    let mut all = Vec::new();
    for k in 1..=4 {
        let text = String::from_utf8(dir.read(&format!("shard{k}.ndjson"))).unwrap();
        for line in text.lines() {
            let r: Value = serde_json::from_str(line).unwrap();
            assert_eq!(r["shard"], format!("{k}/4"), "{r}");
            // Scheduled from the whole trace's first record, not the shard's.
            let i = r["index"].as_u64().unwrap();
            assert_eq!(ms(&r["scheduled_ms"]), (i * 5) as f64, "{r}");
            all.push(line.to_string());
        }
    }
    let run = Run {
        desc: "shards".into(),
        code: 0,
        stdout: all.join("\n").into_bytes(),
        stderr: String::new(),
    };
    let r = by_index(&run, 120);
    // A session stays on one shard.
    let mut shard_of_session = BTreeMap::new();
    for x in r.values().filter(|x| x.get("session_id").is_some()) {
        let prev = shard_of_session.insert(x["session_id"].to_string(), x["shard"].clone());
        assert!(prev.is_none_or(|p| p == x["shard"]), "{x}");
    }
    let merged = dir
        .cmd("trace-summarize")
        .args([
            "--format",
            "json",
            "shard1.ndjson",
            "shard2.ndjson",
            "shard3.ndjson",
            "shard4.ndjson",
        ])
        .run();
    merged.ok();
    assert_eq!(merged.json()["requests"]["total"], 120);
    assert_eq!(merged.json()["requests"]["ok"], 120);

    let past = dir
        .cmd("trace-replay")
        .args(["--sim", "--start-at", "2020-01-01T00:00:00Z", "trace.jsonl"])
        .run();
    past.code(2);
    assert!(past.stdout.is_empty());
    past.stderr_has("--start-at 2020-01-01T00:00:00.000000Z is already past");
}

#[test]
fn http2_without_tls() {
    let sim = Sim::start(&["--ttft-ms", "1", "--itl-ms", "1"]);
    let run = replay(&["--http2", "--url", &sim.url], &text_trace(20, 1, 4));
    run.code(0);
    for x in by_index(&run, 20).values() {
        assert_eq!(x["status"], "ok", "{x}");
        assert_eq!(x["completion_tokens"], 4, "{x}");
        assert_eq!(x["itl_ms"].as_array().unwrap().len(), 3, "{x}");
    }
}

/// On a terminal, progress is an indicatif bar on standard error (run in a
/// pseudo-terminal by util-linux's `script`); the results are unchanged.
#[test]
fn a_progress_bar_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: no `script` command to make a pseudo-terminal");
        return;
    }
    let dir = TestDir::new("replay-bar");
    dir.write("t.jsonl", text_trace(50, 20, 2));
    let command = format!(
        "{} --sim -o out.ndjson t.jsonl",
        bin("trace-replay").display()
    );
    let out = Command::new("script")
        .current_dir(&dir.path)
        .args(["-qec", &command, "typescript"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let screen = std::fs::read_to_string(dir.join("typescript")).unwrap();
    // The bar, with the total known (all 50 records read before the start).
    assert!(screen.contains("] "), "{screen}");
    assert!(screen.contains("% sent "), "{screen}");
    assert!(screen.contains(", in flight "), "{screen}");
    assert!(
        screen.contains("trace-replay: sent 50, ok 50, errors 0"),
        "{screen}"
    );
    let text = std::fs::read_to_string(dir.join("out.ndjson")).unwrap();
    assert_eq!(text.lines().count(), 50);
}

#[test]
fn dependencies_fan_out_and_join_after_the_calls_they_name() {
    // An agent's calls: c0, then c1 and c2 in parallel after it, then c3
    // after both; c4 has a timestamp and no dependency.
    let input = trace(&[
        json!({"id": "c0", "timestamp": 0, "text_input": "plan the work", "output_length": 8}),
        json!({"id": "c1", "after": ["c0"], "delay": 15, "text_input": "tool one", "output_length": 4}),
        json!({"id": "c2", "after": ["c0"], "text_input": "tool two", "output_length": 12}),
        json!({"id": "c3", "after": ["c1", "c2"], "delay": 5, "text_input": "join", "output_length": 2}),
        json!({"id": "c4", "timestamp": 10, "text_input": "other user", "output_length": 2}),
    ]);
    let run = replay(&["--sim"], &input);
    run.code(0);
    let r = by_index(&run, 5);
    let end = |i: u64| ms(&r[&i]["sent_ms"]) + ms(&r[&i]["e2e_ms"]);
    let scheduled = |i: u64| ms(&r[&i]["scheduled_ms"]);
    // Due from the dependency's completion plus the delay (the completion
    // is seen a little after the last byte: never before it).
    assert!(scheduled(1) >= end(0) + 15.0 - 0.01, "{r:?}");
    assert!(scheduled(2) >= end(0) - 0.01, "{r:?}");
    assert!(scheduled(2) < scheduled(1), "{r:?}");
    assert!(scheduled(3) >= end(1).max(end(2)) + 5.0 - 0.01, "{r:?}");
    assert_eq!(scheduled(4), 10.0);
    for x in r.values() {
        assert!(ms(&x["sent_ms"]) >= ms(&x["scheduled_ms"]), "{x}");
    }

    let run = replay(&["--dry-run"], &input);
    run.ok();
    let lines = run.json_lines();
    let pick = |i: usize, k: &str| lines[i].get(k).cloned().unwrap_or(Value::Null);
    assert_eq!(pick(0, "scheduled_ms"), json!(0.0));
    assert_eq!(pick(1, "scheduled_ms"), Value::Null);
    assert_eq!(
        (pick(1, "after"), pick(1, "after_ms")),
        (json!(["c0"]), json!(15.0))
    );
    assert_eq!(
        (pick(2, "after"), pick(2, "after_ms")),
        (json!(["c0"]), json!(0.0))
    );
    assert_eq!(
        (pick(3, "after"), pick(3, "after_ms")),
        (json!(["c1", "c2"]), json!(5.0))
    );
    assert_eq!(pick(4, "scheduled_ms"), json!(10.0));
}

#[test]
fn an_after_id_missing_from_the_trace_is_warned_of_and_ignored() {
    let input = trace(&[
        json!({"id": "b", "timestamp": 0, "after": ["a"], "text_input": "x", "output_length": 1}),
    ]);
    let run = replay(&["--sim"], &input);
    run.code(0);
    assert!(
        run.stderr.starts_with(
            "trace-replay: warning: record 1: `after` names `a`, which no earlier record of this \
             run has (sliced away?): it is scheduled as if it had no such dependency\n"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(by_index(&run, 1)[&0]["status"], "ok");
}

/// Answers by the conversation's last message: the first turn gets text
/// and a tool call, in pieces when streamed; the second and third text.
fn conversation_answer(body: &str) -> Answer {
    let stream = body.contains(r#""stream":true"#);
    let (pieces, whole): (Vec<Value>, Value) = if body.contains("turn three") {
        (
            vec![json!({"content": "Bye"})],
            json!({"role": "assistant", "content": "Bye"}),
        )
    } else if body.contains("sunny") {
        (
            vec![json!({"content": "It is "}), json!({"content": "sunny"})],
            json!({"role": "assistant", "content": "It is sunny"}),
        )
    } else {
        let call = |args: &str, first: bool| {
            let mut c = json!({"index": 0, "function": {"arguments": args}});
            if first {
                c["id"] = json!("call_1");
                c["type"] = json!("function");
                c["function"]["name"] = json!("get_weather");
            }
            json!({"tool_calls": [c]})
        };
        (
            vec![
                json!({"role": "assistant", "content": ""}),
                json!({"reasoning_content": "the user wants weather"}),
                json!({"content": "Hel"}),
                json!({"content": "lo"}),
                call("{\"city\":", true),
                call("\"Paris\"}", false),
            ],
            json!({"role": "assistant", "content": "Hello", "reasoning_content": "hm",
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}),
        )
    };
    if !stream {
        let answer = json!({"choices": [{"index": 0, "message": whole, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
        return Answer::json("200 OK", &answer.to_string());
    }
    let mut sse = String::new();
    for delta in pieces {
        let event = json!({"choices": [{"index": 0, "delta": delta}]});
        sse.push_str(&format!("data: {event}\n\n"));
    }
    sse.push_str("data: [DONE]\n\n");
    Answer::sse(sse.as_bytes(), 7)
}

#[test]
fn delta_turns_continue_the_conversation_as_sent_and_answered() {
    let input = trace(&[
        json!({"id": "t1", "session_id": "s", "timestamp": 0, "output_length": 5,
               "messages": [{"role": "user", "content": "turn one"}]}),
        json!({"id": "t2", "session_id": "s", "message_mode": "delta", "output_length": 5,
               "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]}),
        json!({"id": "t3", "after": ["t2"], "message_mode": "delta", "output_length": 5,
               "messages": [{"role": "user", "content": "turn three"}]}),
    ]);
    let user1 = json!({"role": "user", "content": "turn one"});
    let answer1 = json!({"role": "assistant", "content": "Hello", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]});
    let tool2 = json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"});
    let answer2 = json!({"role": "assistant", "content": "It is sunny"});
    let user3 = json!({"role": "user", "content": "turn three"});
    for flags in [&[][..], &["--no-stream"][..]] {
        let server = Scripted::start(conversation_answer);
        let mut args = vec!["--url", &server.url, "--model", "m"];
        args.extend_from_slice(&["--session-header", "X-Session-Affinity"]);
        args.extend_from_slice(flags);
        let run = replay(&args, &input);
        run.code(0);
        let r = by_index(&run, 3);
        assert_eq!(statuses(&r)["ok"], 3, "{flags:?} {r:?}");
        // Results carry the turn's position in its session and `after`.
        let turns: Vec<&Value> = r.values().map(|x| &x["turn"]).collect();
        assert_eq!(turns, [&json!(1), &json!(2), &Value::Null]);
        let after: Vec<&Value> = r.values().map(|x| &x["after"]).collect();
        assert_eq!(after, [&Value::Null, &Value::Null, &json!(["t2"])]);
        let seen = server.seen.lock().unwrap().clone();
        let sent: Vec<Value> = seen
            .iter()
            .map(|s| serde_json::from_str::<Value>(&s.body).unwrap()["messages"].clone())
            .collect();
        assert_eq!(
            sent,
            [
                json!([user1]),
                json!([user1, answer1, tool2]),
                json!([user1, answer1, tool2, answer2, user3]),
            ],
            "{flags:?}"
        );
        // Sticky routing: the session's turns carry its id; t3 has none.
        let affinity: Vec<bool> = seen
            .iter()
            .map(|s| s.head.contains("\r\nx-session-affinity: s\r\n"))
            .collect();
        assert_eq!(affinity, [true, true, false]);
    }
}

/// Each result's (prompt_tokens, cached_tokens), of a run that exits 0
/// with `n` results.

#[test]
fn the_simulator_caches_its_own_answers_for_the_turns_that_carry_them() {
    let sim = Sim::start(&["--itl-ms", "0"]);
    // 1,024 distinct words: two full 512-token blocks of trace-sim's cache.
    let long: Vec<String> = (0..1024).map(|i| format!("w{i}")).collect();
    let first = json!({"id": "t1", "session_id": "s", "timestamp": 0, "output_length": 512,
                       "messages": [{"role": "user", "content": long.join(" ")}]});
    let next = json!({"role": "user", "content": "one two three"});
    // The live answer: turn 2 carries the 512 words the server gave.
    let live = trace(&[
        first.clone(),
        json!({"session_id": "s", "message_mode": "delta", "output_length": 1, "messages": [next]}),
    ]);
    // A recorded answer instead: the server never produced it.
    let recorded: Vec<String> = (0..512).map(|i| format!("r{i}")).collect();
    let history = trace(&[
        first,
        json!({"session_id": "s", "delay": 0, "output_length": 1, "messages": [
            {"role": "user", "content": long.join(" ")},
            {"role": "assistant", "content": recorded.join(" ")}, next]}),
    ]);
    let cached = |input: &str| prompt_and_cached(&replay(&["--url", &sim.url], input), 2);
    // Turn 2: 1,024 + 512 + 3 words; with the live answer its first three
    // blocks (the prompt's two, the answer's one) are cached.
    assert_eq!(cached(&live), [(1024, 0), (1539, 1536)]);
    // The same conversation with the recorded answer: the prompt's blocks
    // (cached by the first run too) and nothing of the answer's.
    assert_eq!(cached(&history), [(1024, 1024), (1539, 1024)]);
}

#[test]
fn live_answers_put_the_servers_own_answer_in_later_synthesized_turns() {
    // Turn 2 shares turn 1's two blocks (hash ids 1, 2) and asks for 2,048
    // tokens in all; turn 1's answer is 512 tokens.
    let cached = |flags: &[&str]| live_answer_session(&[], flags);
    // As recorded: turn 2's third block is the trace's, not the answer the
    // server gave, so only the two shared prompt blocks are cached.
    assert_eq!(cached(&[]), [(1024, 0), (2048, 1024)]);
    // Live: turn 1's prompt (1,024), its answer (512), then 2,048 - 1,536 =
    // 512 synthesized tokens; trace-sim has the first three blocks cached.
    assert_eq!(cached(&["--live-answers"]), [(1024, 0), (2048, 1536)]);
}

#[test]
fn ctrl_c_mid_graph_cancels_every_call_still_waiting_for_a_dependency() {
    let dir = TestDir::new("replay-sigint-graph");
    let input = trace(&[
        json!({"id": "c0", "timestamp": 0, "text_input": "a", "output_length": 2}),
        // Due a minute after c0 completes: waiting when Ctrl-C comes.
        json!({"id": "c1", "after": ["c0"], "delay": 60000, "text_input": "b", "output_length": 2}),
        json!({"id": "c2", "after": ["c1"], "text_input": "c", "output_length": 2}),
        json!({"id": "c3", "after": ["c1", "c2"], "text_input": "d", "output_length": 2}),
        json!({"id": "t", "timestamp": 120000, "text_input": "e", "output_length": 2}),
    ]);
    dir.write("slow.jsonl", &input);
    let child = spawn_sim_replay(&dir, "slow.jsonl");
    let r = interrupt(&dir, child, 1, 5);
    assert_eq!(r[&0]["status"], "ok", "{}", r[&0]);
    for i in 1..5 {
        assert_eq!(r[&i]["status"], "cancelled", "{}", r[&i]);
    }
    // Each keeps the record's `after`.
    assert_eq!(r[&1]["after"], json!(["c0"]));
}

/// `n` text records at the given timestamps.
fn trace_at(timestamps: impl Iterator<Item = u64>) -> String {
    let recs: Vec<Value> = timestamps
        .enumerate()
        .map(|(i, t)| json!({"timestamp": t, "text_input": format!("r{i}"), "output_length": 1}))
        .collect();
    trace(&recs)
}

#[test]
fn timestamps_that_look_like_seconds_are_warned_of_before_the_run() {
    const SECONDS: &str = "trace-replay: warning: timestamps look like seconds, not milliseconds: \
        the trace would replay at 22111 requests/s on average over its 200 records, more than one \
        replay process sends (about 10,000/s); if they are seconds, convert with trace-rescale \
        --speed 0.001\n";
    // 200 records, twenty to each whole "ms" from 0 to 9: 199 gaps in 9 ms
    // is 22,111/s, past what one process sends. The whole trace is weighed.
    let input = trace_at((0..200).map(|i| i / 20));
    let run = replay(&["--sim"], &input);
    run.code(0);
    assert_eq!(run.lines().len(), 200);
    assert!(
        run.stderr.starts_with(SECONDS),
        "the warning comes before the run's own lines:\n{}",
        run.stderr
    );
    let run = replay(&["--dry-run"], &input);
    run.code(0).stderr_is(SECONDS);
    // Closed loop ignores timestamps: no warning.
    let run = replay(&["--dry-run", "--concurrency", "2"], &input);
    run.code(0).stderr_is("");
    // A longer trace is judged from the read-ahead: records 0 to 1023 at
    // ten to a "ms", 1023 gaps in 102 ms.
    let run = replay(&["--dry-run"], &trace_at((0..2000).map(|i| i / 10)));
    run.code(0).stderr_is(
        "trace-replay: warning: timestamps look like seconds, not milliseconds: the trace would \
         replay at 10029 requests/s on average over its 1024 records, more than one replay process \
         sends (about 10,000/s); if they are seconds, convert with trace-rescale --speed 0.001 \
         (judged from the first 1024 records)\n",
    );
    // A short burst (20 records 2 ms apart, 500/s) and milliseconds: nothing to say.
    let run = replay(&["--dry-run"], &trace_at((0..20).map(|i| i * 2)));
    run.code(0).stderr_is("");
    let run = replay(&["--dry-run"], &trace_at((0..20).map(|i| i * 200)));
    run.code(0).stderr_is("");
}

/// `/v1/embeddings` against trace-sim: whole answers, the prompt's tokens
/// counted, nothing generated: no TTFT, no ITL, no output length asked.
#[test]
fn embeddings_are_whole_answers_with_their_prompt_counted() {
    let input = [
        r#"{"timestamp": 0, "text_input": "one two three", "output_length": 5}"#,
        r#"{"timestamp": 1, "prompt_token_ids": [7, 8]}"#,
    ]
    .join("\n");
    let run = replay(&["--sim", "--endpoint", "embeddings"], &input);
    run.code(0);
    let r = by_index(&run, 2);
    for (i, prompt) in [(0, 3), (1, 2)] {
        let r = &r[&i];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(
            (&r["ttft_ms"], &r["itl_ms"], &r["output_length"]),
            (&Value::Null, &json!([]), &Value::Null),
            "{r}"
        );
        assert_eq!(r["first_chunk_ms"], r["e2e_ms"], "{r}");
        assert_eq!(
            (
                &r["prompt_tokens"],
                &r["completion_tokens"],
                &r["finish_reason"]
            ),
            (&json!(prompt), &json!(0), &Value::Null),
            "{r}"
        );
    }
}

/// vLLM's answer to /v1/embeddings, byte for byte (EmbeddingResponse of
/// vllm/entrypoints/pooling/embed/protocol.py as Starlette writes it).
const VLLM_EMBEDDING: &str = r#"{"id":"embd-9f2c61b0","object":"list","created":1732000000,"model":"BAAI/bge-small-en-v1.5","data":[{"index":0,"object":"embedding","embedding":[-0.05364990234375,0.0103912353515625,0.0421142578125,-0.0033473968505859375]}],"usage":{"prompt_tokens":7,"total_tokens":7,"completion_tokens":0,"prompt_tokens_details":null}}"#;

fn embeddings_answer(body: &str) -> Answer {
    if body.contains("empty") {
        Answer::json(
            "200 OK",
            r#"{"object":"list","data":[],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}"#,
        )
    } else {
        Answer::json("200 OK", VLLM_EMBEDDING)
    }
}

#[test]
fn embeddings_send_an_input_and_read_vllms_answer() {
    let server = Scripted::start(embeddings_answer);
    let input = [
        r#"{"timestamp": 0, "text_input": "a \"b\"", "output_length": 5}"#,
        r#"{"timestamp": 1, "text_input": "empty"}"#,
    ]
    .join("\n");
    let run = replay(
        &[
            "--url",
            &server.url,
            "--model",
            "m",
            "--endpoint",
            "embeddings",
            "--ignore-eos",
        ],
        &input,
    );
    run.code(0);
    let r = by_index(&run, 2);
    let rows: Vec<Value> = r.values().cloned().collect();
    assert_eq!(
        columns(
            &rows,
            "status prompt_tokens completion_tokens ttft_ms error"
        ),
        [
            json!(["ok", 7, 0, null, null]),
            // The empty answer's usage counts its prompt.
            json!(["error", 1, null, null, "no embeddings in the answer"])
        ]
    );
    // The preflight's GET /v1/models aside, every request is a POST to
    // /v1/embeddings with the model and the input, nothing else.
    let seen = server.seen.lock().unwrap();
    let posts: Vec<_> = seen.iter().filter(|s| s.head.starts_with("POST")).collect();
    assert!(
        posts
            .iter()
            .all(|s| s.head.starts_with("POST /v1/embeddings ")),
        "{posts:?}"
    );
    let mut bodies: Vec<&str> = posts.iter().map(|s| s.body.as_str()).collect();
    bodies.sort();
    assert_eq!(
        bodies,
        [
            r#"{"model":"m","input":"a \"b\""}"#,
            r#"{"model":"m","input":"empty"}"#
        ]
    );
}

#[test]
fn keep_refuses_the_output_file_itself() {
    let dir = TestDir::new("replay-keep-same");
    dir.write("t.jsonl", text_trace(2, 10, 2));
    let run = dir.run(
        "trace-replay",
        &["--sim", "--keep", "r.ndjson", "-o", "r.ndjson", "t.jsonl"],
    );
    run.code(2);
    run.stderr_is(
        "trace-replay: error: --keep r.ndjson: the same file as --output; give --keep another file\n",
    );
    assert!(!dir.join("r.ndjson").exists());
}
