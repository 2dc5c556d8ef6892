use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::util::{data, file_lines, run_stdin};

fn lines(name: &str) -> Vec<String> {
    file_lines(data(name))
}

/// A bundled trace's lines, and the text they make.
fn trace(name: &str) -> (Vec<String>, String) {
    let all = lines(name);
    let input = all.join("\n");
    (all, input)
}

fn ts(line: &str) -> f64 {
    serde_json::from_str::<Value>(line).unwrap()["timestamp"]
        .as_f64()
        .unwrap()
}

fn slice(args: &[&str], input: &str) -> Vec<String> {
    let run = run_stdin("trace-slice", args, input.to_string());
    run.ok();
    run.lines()
}

#[test]
fn time_window_is_half_open_from_the_first_timestamp() {
    let all = lines("conversation_trace.jsonl");
    let t0 = ts(&all[0]);
    let want: Vec<&String> = all
        .iter()
        .filter(|l| {
            let off = ts(l) - t0;
            (600_000.0..1_200_000.0).contains(&off)
        })
        .collect();
    let got = slice(&["--from", "10m", "--to", "20m"], &all.join("\n"));
    assert!(!want.is_empty());
    assert_eq!(got.len(), want.len());
    // Unchanged, byte for byte.
    assert!(got.iter().zip(&want).all(|(g, w)| g == *w));
}

#[test]
fn slicing_twice_equals_one_combined_slice() {
    let all = lines("conversation_trace.jsonl").join("\n");
    let t0 = 0.0;
    let cases: [(f64, f64, f64, f64); 3] = [
        (5.0, 50.0, 3.0, 20.0),
        (0.0, 30.0, 10.0, 60.0),
        (12.5, 40.0, 0.0, 5.0),
    ];
    for (a, b, c, d) in cases {
        let first = slice(
            &["--from", &format!("{a}m"), "--to", &format!("{b}m")],
            &all,
        );
        // The second slice measures from the first record it reads.
        let t1 = ts(&first[0]) - t0;
        let twice = slice(
            &["--from", &format!("{c}m"), "--to", &format!("{d}m")],
            &first.join("\n"),
        );
        let from = t1 + c * 60_000.0;
        let to = (b * 60_000.0).min(t1 + d * 60_000.0);
        let once = slice(
            &["--from", &format!("{from}ms"), "--to", &format!("{to}ms")],
            &all,
        );
        assert_eq!(twice, once, "({a},{b}) then ({c},{d})");
    }
}

#[test]
fn skip_and_head_compose() {
    let (all, input) = trace("synthetic_trace.jsonl");
    let got = slice(&["--skip", "10", "--head", "5"], &input);
    assert_eq!(got, all[10..15].to_vec());
    let twice = slice(
        &["--skip", "3"],
        &slice(&["--skip", "7", "--head", "9"], &input).join("\n"),
    );
    assert_eq!(twice, all[10..16].to_vec());
    assert_eq!(slice(&["--head", "0"], &input), Vec::<String>::new());
}

#[test]
fn rebase_moves_the_first_kept_record_to_zero() {
    let all = lines("conversation_trace.jsonl");
    let got = slice(
        &["--from", "10m", "--head", "3", "--rebase"],
        &all.join("\n"),
    );
    let orig: Vec<&String> = all.iter().filter(|l| ts(l) >= 600_000.0).take(3).collect();
    let base = ts(orig[0]);
    for (g, o) in got.iter().zip(orig) {
        let mut want: Value = serde_json::from_str(o).unwrap();
        want["timestamp"] = Value::from((ts(o) - base) as u64);
        assert_eq!(serde_json::from_str::<Value>(g).unwrap(), want);
    }
    // Integer timestamps stay integers; other fields keep their text.
    assert!(
        got[0].starts_with("{\"timestamp\":0,\"input_length\""),
        "{}",
        got[0]
    );
}

#[test]
fn shards_are_disjoint_and_complete() {
    for name in ["conversation_trace.jsonl", "sessions.jsonl"] {
        let (all, input) = trace(name);
        let mut union: Vec<String> = Vec::new();
        let mut session_shard: HashMap<String, usize> = HashMap::new();
        for k in 1..=4 {
            let shard = slice(&["--shard", &format!("{k}/4")], &input);
            assert!(!shard.is_empty(), "{name} shard {k} is empty");
            for l in &shard {
                let v: Value = serde_json::from_str(l).unwrap();
                if let Some(s) = v["session_id"].as_str() {
                    let prev = session_shard.insert(s.to_string(), k);
                    assert!(prev.is_none_or(|p| p == k), "session {s} on two shards");
                }
            }
            union.extend(shard);
        }
        // Every line once: sort both, since shards interleave.
        let mut want = all.clone();
        want.sort();
        union.sort();
        assert_eq!(union, want, "{name}");
    }
}

#[test]
fn sample_keeps_whole_sessions_and_is_reproducible() {
    let (all, input) = trace("sessions.jsonl");
    let a = slice(&["--sample", "0.5", "--seed", "1"], &input);
    let b = slice(&["--sample", "0.5", "--seed", "1"], &input);
    let c = slice(&["--sample", "0.5", "--seed", "2"], &input);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.len() > 10 && a.len() < 50, "{}", a.len());
    let kept: HashSet<&String> = a.iter().collect();
    let mut session_kept: HashMap<String, bool> = HashMap::new();
    for l in &all {
        let v: Value = serde_json::from_str(l).unwrap();
        if let Some(s) = v["session_id"].as_str() {
            let k = kept.contains(l);
            assert_eq!(
                *session_kept.entry(s.to_string()).or_insert(k),
                k,
                "session {s} split"
            );
        }
    }
}

#[test]
fn sessions_by_id() {
    let all = lines("sessions.jsonl");
    let got = slice(&["--session", "s1", "--session", "s3"], &all.join("\n"));
    let want: Vec<String> = all
        .iter()
        .filter(|l| l.contains("\"session_id\": \"s1\"") || l.contains("\"session_id\": \"s3\""))
        .cloned()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

#[test]
fn bad_records_stop_the_slice_unless_skipped() {
    let input = "{\"timestamp\": 0, \"input_length\": 1}\n{\"timestamp\": \"soon\"}\n{\"timestamp\": 9, \"input_length\": 1}\n";
    let run = run_stdin("trace-slice", &["--from", "1ms"], input);
    run.code(2).stderr_is(
        "trace-slice: <stdin>:2: error: field `timestamp`: expected a number ≥ 0, found \"soon\"\n",
    );
    let run = run_stdin("trace-slice", &["--from", "1ms", "--skip-invalid"], input);
    run.code(0);
    assert_eq!(run.lines(), vec!["{\"timestamp\": 9, \"input_length\": 1}"]);
    assert_eq!(
        run.stderr,
        "trace-slice: <stdin>:2: warning: field `timestamp`: expected a number ≥ 0, found \"soon\" (skipped)\n\
         trace-slice: warning: skipped 1 invalid record\n"
    );
}

#[test]
fn shards_keep_dependency_graphs_whole() {
    // c0..c3 form one graph without a session; by position alone they
    // would be dealt over both shards. x and y stand alone.
    let input = [
        r#"{"id": "c0", "timestamp": 0, "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c1", "after": ["c0"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "x", "timestamp": 5, "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c2", "after": ["c0"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "c3", "after": ["c1", "c2"], "input_length": 1, "output_length": 1}"#,
        r#"{"id": "y", "timestamp": 9, "input_length": 1, "output_length": 1}"#,
    ]
    .map(|l| format!("{l}\n"))
    .concat();
    let ids = |shard: &str| -> Vec<String> {
        let run = run_stdin("trace-slice", &["--shard", shard], input.clone());
        run.ok();
        run.json_lines()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    // c0 is record 0: shard 1 of 2, and its graph with it; x (record 2)
    // too by position; y (record 5) goes to shard 2.
    assert_eq!(ids("1/2"), ["c0", "c1", "x", "c2", "c3"]);
    assert_eq!(ids("2/2"), ["y"]);
}
