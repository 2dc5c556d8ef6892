//! Mutated records through every tool that reads them: whatever the
//! numbers, types and nesting, no tool panics, and what is promised as
//! JSONL is JSONL. A bounded number of cases, so that it stays quick.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::util::{Run, TestDir};

/// Records to mutate: Mooncake with sessions, a text prompt, a conversation.
const RECORDS: &[&str] = &[
    r#"{"timestamp": 7, "input_length": 2428, "output_length": 279, "hash_ids": [8, 101, 102, 103, 104], "session_id": "s0", "user_field": {"kept": [1, 2.50]}}"#,
    r#"{"timestamp": 127, "input_length": 600, "output_length": 3, "hash_ids": [40, 111], "session_id": "s0", "delay": 50}"#,
    r#"{"timestamp": 200, "text_input": "hello there", "output_length": 4, "id": "t", "observed": {"prompt_tokens": 2, "e2e_ms": 10}}"#,
    r#"{"timestamp": 300, "messages": [{"role": "user", "content": "hi"}], "output_length": 2, "model": "m"}"#,
];

/// Result lines to mutate, for trace-summarize.
const RESULTS: &[&str] = &[
    r#"{"index":0,"id":"a","scheduled_ms":0,"sent_ms":1,"start_time":"2026-11-22T10:00:00.001Z","ttft_ms":100,"first_chunk_ms":80,"e2e_ms":1100,"itl_ms":[250,250],"input_length":50,"output_length":11,"prompt_tokens":50,"completion_tokens":11,"cached_tokens":0,"finish_reason":"length","status":"ok","http_status":200}"#,
    r#"{"index":1,"scheduled_ms":100,"sent_ms":102,"start_time":"2026-11-22T10:00:00.102Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":5,"itl_ms":[],"input_length":40,"output_length":6,"prompt_tokens":null,"completion_tokens":null,"status":"error","http_status":500,"error":"HTTP 500"}"#,
];

// The record's fields as the record model states them.
const RECORD_KEYS: &[&str] = tracekit::record::KNOWN_FIELDS;

const RESULT_KEYS: &[&str] = &[
    "index",
    "scheduled_ms",
    "sent_ms",
    "ttft_ms",
    "first_chunk_ms",
    "e2e_ms",
    "itl_ms",
    "input_length",
    "output_length",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "status",
    "http_status",
    "warmup",
];

/// Values no tool should choke on: huge, negative, overflowing, of the
/// wrong type, deeply nested.
fn nasty_value() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "1e308",
        "-1e308",
        "1e400",
        "-1",
        "-0",
        "0",
        "0.5",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "9007199254740993",
        "16777217",
        "1e23",
        "null",
        "true",
        "\"\"",
        "\"1e308\"",
        "[]",
        "{}",
        "[1e308]",
        "[-1]",
        "[18446744073709551616]",
        "[[[]]]",
        "{\"a\":{\"b\":[1e400]}}",
        "[{\"role\":1e308}]",
        "{\"prompt_tokens\":1e308,\"e2e_ms\":-5}",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        4 => fixed,
        1 => any::<f64>().prop_map(|f| if f.is_finite() { format!("{f:e}") } else { "1e999".into() }),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => (1usize..400).prop_map(|d| format!("{}{}", "[".repeat(d), "]".repeat(d))),
        1 => (1usize..400).prop_map(|d| format!("{}1{}", "{\"a\":".repeat(d), "}".repeat(d))),
    ]
}

/// `line` (a sane record) with each `(key, raw JSON)` of `edits` set, the
/// last one winning; edited fields go at the end.
fn with_fields(line: &str, edits: &[(&str, String)]) -> String {
    let mut map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).unwrap();
    let mut tail: Vec<(&str, &str)> = Vec::new();
    for (key, value) in edits {
        map.remove(*key);
        tail.retain(|(k, _)| k != key);
        tail.push((key, value));
    }
    let mut fields: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::Value::from(k.as_str())))
        .collect();
    fields.extend(tail.iter().map(|(k, v)| format!("\"{k}\":{v}")));
    format!("{{{}}}", fields.join(","))
}

/// A file of lines from `base`, each with up to three fields mutated.
fn mutated(
    base: &'static [&'static str],
    keys: &'static [&'static str],
) -> impl Strategy<Value = String> {
    let line = (
        prop::sample::select(base.to_vec()),
        prop::collection::vec((prop::sample::select(keys.to_vec()), nasty_value()), 0..3),
    )
        .prop_map(|(line, edits)| with_fields(line, &edits));
    prop::collection::vec(line, 1..5).prop_map(|lines| lines.join("\n") + "\n")
}

/// No panic, a known exit status, and JSON lines where promised.
fn sound(run: &Run, jsonl: bool) -> Result<(), TestCaseError> {
    prop_assert!(run.code != 101, "{}: status 101\n{}", run.desc, run.stderr);
    prop_assert!(
        [0, 1, 2].contains(&run.code),
        "{}: status {}\n{}",
        run.desc,
        run.code,
        run.stderr
    );
    prop_assert!(
        !run.stderr.contains("panicked"),
        "{}\n{}",
        run.desc,
        run.stderr
    );
    if jsonl {
        for line in run.stdout_str().lines() {
            // serde_json stops at 128 levels and at numbers beyond f64:
            // such values passed through untouched are JSON all the same.
            let parsed = serde_json::from_str::<serde_json::Value>(line);
            prop_assert!(
                parsed.is_ok() || {
                    let e = parsed.unwrap_err().to_string();
                    e.contains("recursion limit") || e.contains("number out of range")
                },
                "{}: not JSON: {line}",
                run.desc
            );
        }
    }
    Ok(())
}

fn runner(cases: u32) -> TestRunner {
    // A fixed seed: the same cases on every run, as tests must be.
    // scripts/fuzz.sh runs longer campaigns: each from a seed of its own
    // (TRACEKIT_FUZZ_SEED, printed there to repeat a failure), with
    // TRACEKIT_FUZZ_SCALE times the cases.
    let scale = std::env::var("TRACEKIT_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    let rng = match std::env::var("TRACEKIT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(seed) => {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_le_bytes());
            prop::test_runner::TestRng::from_seed(prop::test_runner::RngAlgorithm::ChaCha, &bytes)
        }
        None => {
            prop::test_runner::TestRng::deterministic_rng(prop::test_runner::RngAlgorithm::ChaCha)
        }
    };
    TestRunner::new_with_rng(
        Config {
            cases: cases.saturating_mul(scale),
            failure_persistence: None,
            ..Config::default()
        },
        rng,
    )
}

#[test]
fn mutated_records_never_panic_a_tool() {
    let dir = TestDir::new("fuzz-records");
    let tools: &[(&str, &[&str], bool)] = &[
        ("trace-validate", &[], true),
        (
            "trace-validate",
            &["--report-format", "json", "--cache-blocks", "3"],
            false,
        ),
        ("trace-slice", &["--rebase", "--skip-invalid"], true),
        ("trace-slice", &["--from", "100ms", "--sample", "0.5"], true),
        ("trace-rescale", &["--speed", "0.5"], true),
        (
            "trace-rescale",
            &["--rate", "3", "--input-scale", "3", "--skip-invalid"],
            true,
        ),
        ("trace-convert", &["--from", "mooncake"], true),
    ];
    tools_stay_sound(&dir, 48, tools);
}

/// `cases` mutated traces, each run through every tool of `tools` (tool,
/// flags, whether its output is JSON lines) as `tool flags… t.jsonl`.
fn tools_stay_sound(dir: &TestDir, cases: u32, tools: &[(&str, &[&str], bool)]) {
    runner(cases)
        .run(&mutated(RECORDS, RECORD_KEYS), |trace| {
            dir.write("t.jsonl", &trace);
            for (tool, args, jsonl) in tools {
                sound(&dir.cmd(tool).args(*args).arg("t.jsonl").run(), *jsonl)?;
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn mutated_records_never_panic_prompt_synthesis() {
    // Slower: the first record with a prompt to synthesize loads the
    // synthesizer.
    let dir = TestDir::new("fuzz-synth");
    tools_stay_sound(
        &dir,
        6,
        &[
            ("trace-synth", &[], true),
            ("trace-replay", &["--dry-run"], true),
        ],
    );
}

#[test]
fn mutated_results_never_panic_summarize() {
    let dir = TestDir::new("fuzz-results");
    runner(48)
        .run(&mutated(RESULTS, RESULT_KEYS), |results| {
            dir.write("r.ndjson", &results);
            for args in [
                &["--format", "json", "--window", "1s", "--slo", "ttft=200ms"][..],
                &["--requests", "csv"],
                &["--by", "model", "--format", "csv"],
            ] {
                let run = dir.cmd("trace-summarize").args(args).arg("r.ndjson").run();
                sound(&run, false)?;
                prop_assert!(!run.stdout_str().contains("inf"), "{}", run.stdout_str());
            }
            Ok(())
        })
        .unwrap();
}

/// Valid traces to start from: the records above, and the seeds in
/// tests/data/fuzz (the reproducers of findings among them).
fn seeds() -> Vec<&'static str> {
    let files = [
        include_str!("../data/fuzz/agentic.jsonl"),
        include_str!("../data/fuzz/rescale_loop_near_1e13.jsonl"),
        include_str!("../data/fuzz/mooncake_after_unknown.jsonl"),
        include_str!("../data/fuzz/sweep_same_ts.jsonl"),
        include_str!("../data/fuzz/sweep_t12_head.jsonl"),
        include_str!("../data/fuzz/replay_4.jsonl"),
        include_str!("../data/fuzz/slice_from_lone_epoch.jsonl"),
    ];
    files
        .iter()
        .flat_map(|f| f.lines())
        .chain(RECORDS.iter().copied())
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// Values a valid trace may hold, near the limits and the corners of the
/// rules: what a transforming tool must keep valid.
fn edge_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "0",
        "1",
        "0.5",
        "511",
        "512",
        "513",
        "1e6",
        "9999999999999",
        "1e13",
        "4294967296",
        "\"a\"",
        "\"b\"",
        "\"s0\"",
        "[\"a\"]",
        "[\"b\",\"a\"]",
        "[\"nope\"]",
        "\"delta\"",
        "\"history\"",
        "[]",
        "[0]",
        "[1,2]",
    ])
    .prop_map(str::to_string)
}

/// A trace of seed lines in any order, each with up to two fields set to
/// edge values (or, now and then, to the nasty ones of [`nasty_value`]).
fn edged_trace() -> impl Strategy<Value = String> {
    let keys = vec![
        "timestamp",
        "input_length",
        "output_length",
        "hash_ids",
        "session_id",
        "id",
        "after",
        "delay",
        "message_mode",
    ];
    let value = prop_oneof![6 => edge_value(), 1 => nasty_value()];
    let line = (
        prop::sample::select(seeds()),
        prop::collection::vec((prop::sample::select(keys), value), 0..3),
    )
        .prop_map(|(line, edits)| with_fields(line, &edits));
    prop::collection::vec(line, 1..7).prop_map(|lines| lines.join("\n") + "\n")
}

/// Every transforming tool keeps a trace valid: where trace-validate
/// accepts the input (--strict: no warning either), it accepts what the
/// tool wrote the same way; and trace-convert, which checks what it reads,
/// writes nothing trace-validate refuses.
#[test]
fn what_a_tool_writes_the_next_accepts() {
    let dir = TestDir::new("fuzz-chain");
    let tools: &[(&str, &[&str])] = &[
        ("trace-convert", &["--from", "mooncake"]),
        ("trace-convert", &["--from", "mooncake", "--skip-invalid"]),
        ("trace-rescale", &["--speed", "2"]),
        ("trace-rescale", &["--speed", "0.5", "--input-scale", "2"]),
        ("trace-rescale", &["--loop", "5s"]),
        ("trace-slice", &["--from", "5ms"]),
        ("trace-slice", &["--sample", "0.5", "--seed", "3"]),
    ];
    runner(64)
        .run(&edged_trace(), |trace| {
            dir.write("t.jsonl", &trace);
            let valid_in = dir.cmd("trace-validate").arg("t.jsonl").run().code == 0;
            let strict_in = valid_in && strict(&dir, "t.jsonl").code == 0;
            for (tool, args) in tools {
                let run = dir.cmd(tool).args(*args).arg("t.jsonl").run();
                sound(&run, true)?;
                if run.code != 0 || run.stdout.is_empty() {
                    continue;
                }
                dir.write("out.jsonl", &run.stdout);
                let check = dir.cmd("trace-validate").arg("out.jsonl").run();
                prop_assert!(
                    check.code == 0 || (!valid_in && *tool != "trace-convert"),
                    "{}",
                    refused("trace-validate refuses", &run, &trace, &check)
                );
                if strict_in {
                    let check = strict(&dir, "out.jsonl");
                    let what = "trace-validate --strict refuses, from a trace it accepts";
                    prop_assert!(check.code == 0, "{}", refused(what, &run, &trace, &check));
                }
            }
            Ok(())
        })
        .unwrap();
}

/// trace-validate --strict of `file` in `dir`.
fn strict(dir: &TestDir, file: &str) -> Run {
    dir.cmd("trace-validate").args(["--strict", file]).run()
}

/// The failure of a property: `run` wrote, from `trace`, what `check`
/// refuses (`what` says who and how).
fn refused(what: &str, run: &Run, trace: &str, check: &Run) -> String {
    format!(
        "{} wrote what {what}:\n--- input ---\n{trace}--- output ---\n{}--- validate ---\n{}",
        run.desc,
        run.stdout_str(),
        check.stderr
    )
}

#[test]
fn a_slice_keeping_one_large_timestamp_validates_strictly() {
    // The one record left, 4294967296 ms (49 days) in, is no evidence of
    // epoch seconds: trace-validate --strict accepts it, as it accepted
    // the trace it came from.
    let dir = TestDir::new("fuzz-lone-epoch");
    dir.copy_data("t.jsonl", "fuzz/slice_from_lone_epoch.jsonl");
    dir.run("trace-validate", &["--strict", "t.jsonl"]).ok();
    let run = dir.run("trace-slice", &["--from", "5ms", "t.jsonl"]);
    run.ok();
    assert_eq!(
        run.lines(),
        [
            r#"{"id":"a","input_length":600,"output_length":3,"hash_ids":[40,111],"session_id":"s0","timestamp":4294967296}"#
        ]
    );
    dir.write("out.jsonl", &run.stdout);
    dir.run("trace-validate", &["--strict", "out.jsonl"]).ok();
}

/// trace-synth, slower (it loads the synthesizer): the same property.
#[test]
fn what_synth_writes_validates() {
    let dir = TestDir::new("fuzz-chain-synth");
    runner(6)
        .run(&edged_trace(), |trace| {
            dir.write("t.jsonl", &trace);
            let strict_in = strict(&dir, "t.jsonl").code == 0;
            let run = dir.cmd("trace-synth").arg("t.jsonl").run();
            sound(&run, true)?;
            if strict_in && run.code == 0 && !run.stdout.is_empty() {
                dir.write("out.jsonl", &run.stdout);
                let check = strict(&dir, "out.jsonl");
                let what = "trace-validate --strict refuses";
                prop_assert!(check.code == 0, "{}", refused(what, &run, &trace, &check));
            }
            Ok(())
        })
        .unwrap();
}
