use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::util::{Cmd, TestDir, data, run_file, run_stdin};

fn records(name: &str) -> Vec<Value> {
    std::fs::read_to_string(data(name))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn real_mooncake_traces_pass_byte_identical() {
    for name in ["conversation_trace.jsonl", "synthetic_trace.jsonl"] {
        let run = run_file("trace-validate", &[], data(name));
        run.ok();
        assert!(
            run.stdout == std::fs::read(data(name)).unwrap(),
            "{name} changed"
        );
    }
}

fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.max(1) - 1]
}

/// LRU over block ids, written differently from the tool's (a use counter
/// per id and a scan for the oldest), to check its hit rate.
fn lru_hit_rate(recs: &[Value], capacity: usize) -> f64 {
    let mut last_use: HashMap<u64, u64> = HashMap::new();
    let mut by_age: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut tick, mut hits, mut blocks) = (0u64, 0u64, 0u64);
    for r in recs {
        let ids: Vec<u64> = r["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        blocks += ids.len() as u64;
        let mut prefix = true;
        for id in &ids {
            if prefix && last_use.contains_key(id) {
                hits += 1;
                tick += 1;
                let old = last_use.insert(*id, tick).unwrap();
                by_age.remove(&old);
                by_age.insert(tick, *id);
            } else {
                prefix = false;
            }
        }
        for id in &ids {
            tick += 1;
            if let Some(old) = last_use.insert(*id, tick) {
                by_age.remove(&old);
            } else if last_use.len() > capacity {
                let (&age, &oldest) = by_age.iter().next().unwrap();
                by_age.remove(&age);
                last_use.remove(&oldest);
            }
            by_age.insert(tick, *id);
        }
    }
    hits as f64 / blocks as f64
}

#[test]
fn report_figures_match_an_independent_computation() {
    let recs = records("conversation_trace.jsonl");
    let run = run_file(
        "trace-validate",
        &["--report-format", "json", "--cache-blocks", "5000"],
        data("conversation_trace.jsonl"),
    );
    run.ok();
    let report = run.json();

    let n = recs.len() as u64;
    assert_eq!(report["records"]["total"], n);
    assert_eq!(report["records"]["valid"], n);
    let ts: Vec<f64> = recs
        .iter()
        .map(|r| r["timestamp"].as_f64().unwrap())
        .collect();
    let (first, last) = (ts[0], *ts.last().unwrap());
    assert_eq!(
        report["time"]["duration_ms"].as_f64().unwrap(),
        last - first
    );
    let mean_rate = (n - 1) as f64 / ((last - first) / 1000.0);
    assert!((report["time"]["mean_rate_per_s"].as_f64().unwrap() - mean_rate).abs() < 1e-9);
    let mut per_second: HashMap<i64, u64> = HashMap::new();
    for t in &ts {
        *per_second
            .entry(((t - first) / 1000.0).floor() as i64)
            .or_default() += 1;
    }
    assert_eq!(
        report["time"]["peak_rate_per_s"],
        *per_second.values().max().unwrap()
    );

    for field in ["input_length", "output_length"] {
        let mut v: Vec<u64> = recs.iter().map(|r| r[field].as_u64().unwrap()).collect();
        v.sort_unstable();
        let total: u64 = v.iter().sum();
        let got = &report[field];
        assert_eq!(got["count"], n);
        assert_eq!(got["min"], v[0]);
        assert_eq!(got["max"], *v.last().unwrap());
        assert_eq!(got["total"], total);
        assert!((got["mean"].as_f64().unwrap() - total as f64 / n as f64).abs() < 1e-9);
        for p in [50.0, 90.0, 99.0] {
            assert_eq!(got[format!("p{p}")], nearest_rank(&v, p), "{field} p{p}");
        }
    }

    let mut seen = HashSet::new();
    let (mut blocks, mut reused) = (0u64, 0u64);
    for r in &recs {
        for id in r["hash_ids"].as_array().unwrap() {
            blocks += 1;
            if !seen.insert(id.as_u64().unwrap()) {
                reused += 1;
            }
        }
    }
    let prefix = &report["prefix"];
    assert_eq!(prefix["blocks"], blocks);
    assert_eq!(prefix["unique_blocks"], seen.len() as u64);
    assert!(
        (prefix["reuse_ratio"].as_f64().unwrap() - reused as f64 / blocks as f64).abs() < 1e-12
    );
    let lru = lru_hit_rate(&recs, 5000);
    assert!(
        (prefix["lru"]["hit_rate"].as_f64().unwrap() - lru).abs() < 1e-12,
        "lru {lru}"
    );
    assert_eq!(report["sessions"]["count"], 0);
}

#[test]
fn report_counts_sessions_and_turns() {
    let recs = records("sessions.jsonl");
    let mut turns: HashMap<&str, u64> = HashMap::new();
    for r in &recs {
        if let Some(s) = r["session_id"].as_str() {
            *turns.entry(s).or_default() += 1;
        }
    }
    let run = run_file(
        "trace-validate",
        &["--report-format", "json"],
        data("sessions.jsonl"),
    );
    run.ok();
    let s = &run.json()["sessions"];
    assert_eq!(s["count"], turns.len() as u64);
    assert_eq!(s["records"], turns.values().sum::<u64>());
    assert_eq!(s["turns_min"], *turns.values().min().unwrap());
    assert_eq!(s["turns_max"], *turns.values().max().unwrap());
}

#[test]
fn text_report_of_a_small_trace() {
    // Worked out by hand: 4 records over 2.5 s, 3 gaps -> 1.2 requests/s;
    // seconds 0, 0, 1, 2 -> peak 2; blocks 1+2+2+1, ids 0,0,1,0,2,3 seen
    // before: 2nd 0, 3rd 0 (of [0,1]), ... = 0 | 0,1 | 0,2 | 3.
    let dir = TestDir::new("text-report");
    dir.write(
        "t.jsonl",
        concat!(
            r#"{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [0]}"#, "\n",
            r#"{"timestamp": 500, "input_length": 600, "output_length": 20, "hash_ids": [0, 1], "session_id": "a"}"#, "\n",
            r#"{"timestamp": 1500, "input_length": 1000, "output_length": 30, "hash_ids": [0, 2], "session_id": "a"}"#, "\n",
            r#"{"timestamp": 2500, "input_length": 200, "output_length": 40, "hash_ids": [3]}"#, "\n",
        ),
    );
    let run = dir
        .cmd("trace-validate")
        .args(["--report", "--cache-blocks", "2", "t.jsonl"])
        .run();
    run.ok();
    // Reuse: block 0 seen before in records 2 and 3 -> 2 of 6 = 0.3333.
    // LRU of 2: r1 miss [0]; r2 0 hit, then cache {0,1}; r3 0 hit, then
    // {0,2}; r4 3 miss -> 2 hits of 6.
    crate::util::assert_text_eq(
        "\
records        4 (4 valid, 0 invalid)
problems       0 errors, 0 warnings
time           0 to 2500 ms (2.5s)
request rate   1.2/s mean, 2/s peak (1 s window)
input_length   min 100 mean 475 p50 200 p90 1000 p99 1000 max 1000 total 1900 (4 records)
output_length  min 10 mean 25 p50 20 p90 40 p99 40 max 40 total 100 (4 records)
sessions       1 (2 records), turns per session min 2 mean 2 max 2
prefix blocks  6 blocks of 512 tokens, 4 unique
prefix reuse   0.3333 (share of blocks seen earlier: an infinite prefix cache's hit rate)
lru cache      0.3333 hit rate with 2 blocks
",
        &run.stdout_str(),
    );
}

#[test]
fn invalid_records_are_dropped_and_exit_1() {
    let dir = TestDir::new("invalid");
    dir.write(
        "t.jsonl",
        "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n\
         {\"timestamp\": 1, \"input_length\": -5, \"output_length\": 1}\n\
         {\"timestamp\": 2, \"input_length\": 5, \"output_length\": 1}\n",
    );
    let run = dir.cmd("trace-validate").arg("t.jsonl").run();
    run.code(1);
    assert_eq!(run.lines().len(), 2);
    assert_eq!(
        run.stderr,
        "trace-validate: t.jsonl:2: error: field `input_length`: expected an integer ≥ 0, found -5\n"
    );
    let run = dir.cmd("trace-validate").args(["--check", "t.jsonl"]).run();
    run.code(1);
    assert!(run.stdout.is_empty());
}

#[test]
fn max_errors_limits_what_is_printed() {
    let dir = TestDir::new("max-errors");
    dir.write("t.jsonl", "x\n".repeat(5));
    let run = dir
        .cmd("trace-validate")
        .args(["--max-errors", "2", "t.jsonl"])
        .run();
    run.code(1).stderr_is(
        "trace-validate: t.jsonl:1:1: error: invalid JSON: expected a JSON value, near `x`\n\
         trace-validate: t.jsonl:2:1: error: invalid JSON: expected a JSON value, near `x`\n\
         trace-validate: note: 3 more errors and warnings not shown (--max-errors 2)\n",
    );
}

#[test]
fn dependency_graphs_are_described_and_delta_turns_need_a_parent() {
    // c0 fans out to c1, c2, c3; c4 joins c1 and c3; c5 follows c4:
    // depth 4 (c0, c1, c4, c5), widest fan-out 3 (c0's).
    let input = [
        r#"{"id": "c0", "timestamp": 0, "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c1", "after": ["c0"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c2", "after": ["c0"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c3", "after": ["c0"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c4", "after": ["c1", "c3"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c5", "after": ["c4"], "delay": 3, "input_length": 1, "output_length": 1}"#,
    ]
    .map(|l| format!("{l}\n"))
    .concat();
    let run = run_stdin(
        "trace-validate",
        &["--report-format", "json"],
        input.clone(),
    );
    run.ok();
    assert_eq!(
        run.json()["dependencies"],
        serde_json::json!({"records_with_after": 5, "depth_max": 4, "fan_out_max": 3})
    );
    let run = Cmd::new("trace-validate")
        .arg("--report")
        .stdin(input)
        .run();
    run.ok();
    assert!(
        run.stderr
            .contains("5 records wait for others (`after`); deepest chain 4, widest fan-out 3")
            || run
                .stdout_str()
                .contains("5 records wait for others (`after`); deepest chain 4, widest fan-out 3"),
        "{}{}",
        run.stdout_str(),
        run.stderr
    );

    // A delta turn with nothing to continue; one continuing `a` with a
    // text prompt is fine (AIPerf's delta turns may carry any input).
    let input = [
        r#"{"id": "a", "timestamp": 0, "message_mode": "delta", "messages": [{"role": "user", "content": "hi"}], "output_length": 1}"#,
        r#"{"id": "b", "after": ["a"], "message_mode": "delta", "text_input": "x", "output_length": 1}"#,
    ]
    .map(|l| format!("{l}\n"))
    .concat();
    let run = run_stdin("trace-validate", &[], input);
    run.code(1).stderr_is(
        "trace-validate: <stdin>:1: error: field `message_mode`: \"delta\" continues a \
         conversation, but this record has no `after` and no earlier turn of its `session_id`\n",
    );
}
