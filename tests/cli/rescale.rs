use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::util::{Cmd, data, file_lines, hash_ids as ids, run_stdin};

fn parse(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn rescale(args: &[&str], input: &[u8]) -> Vec<String> {
    let run = run_stdin("trace-rescale", args, input.to_vec());
    run.ok();
    run.lines()
}

/// The bundled conversation trace, as bytes and as records.
fn conversation_trace() -> (Vec<u8>, Vec<Value>) {
    let input = std::fs::read(data("conversation_trace.jsonl")).unwrap();
    (input, parse(&file_lines(data("conversation_trace.jsonl"))))
}

#[test]
fn speed_k_then_1_over_k_gives_the_input_back() {
    let input = std::fs::read(data("sessions.jsonl")).unwrap();
    let orig = file_lines(data("sessions.jsonl"));
    for k in [2.0f64, 3.0, 0.7] {
        let there = rescale(&["--speed", &k.to_string()], &input);
        let back = rescale(
            &["--speed", &(1.0 / k).to_string()],
            there.join("\n").as_bytes(),
        );
        for (o, b) in parse(&orig).iter().zip(parse(&back)) {
            for field in ["timestamp", "delay"] {
                if let Some(t) = o[field].as_f64() {
                    // Each pass rounds to the microsecond.
                    assert!(
                        (b[field].as_f64().unwrap() - t).abs() <= 0.002 * k.max(1.0),
                        "{field} {t} -> {}",
                        b[field]
                    );
                }
            }
            for field in [
                "input_length",
                "output_length",
                "hash_ids",
                "session_id",
                "user_field",
            ] {
                assert_eq!(o[field], b[field]);
            }
        }
    }
}

#[test]
fn speed_divides_offsets_and_delays() {
    let got = rescale(
        &["--speed", "4"],
        b"{\"timestamp\": 1000, \"x\": 1.50}\n{\"timestamp\": 1010, \"session_id\": \"a\", \"delay\": 250}\n{\"timestamp\": 3000}\n",
    );
    assert_eq!(
        got,
        vec![
            "{\"timestamp\":1000,\"x\":1.50}",
            "{\"timestamp\":1002.5,\"session_id\":\"a\",\"delay\":62.5}",
            "{\"timestamp\":1500}",
        ]
    );
}

fn report(lines: &[String]) -> Value {
    let run = run_stdin(
        "trace-validate",
        &["--report-format", "json"],
        lines.join("\n"),
    );
    run.ok();
    run.json()
}

#[test]
fn rate_and_duration_are_met() {
    let input = std::fs::read(data("conversation_trace.jsonl")).unwrap();
    let r = report(&rescale(&["--rate", "7.5"], &input));
    assert!(
        (r["time"]["mean_rate_per_s"].as_f64().unwrap() - 7.5).abs() < 1e-3,
        "{}",
        r["time"]
    );
    let r = report(&rescale(&["--duration", "5m"], &input));
    assert!(
        (r["time"]["duration_ms"].as_f64().unwrap() - 300_000.0).abs() < 1e-3,
        "{}",
        r["time"]
    );
}

#[test]
fn shrinking_prompts_keeps_leading_blocks() {
    let (input, orig) = conversation_trace();
    let got = parse(&rescale(
        &["--input-scale", "0.3", "--max-input", "3000"],
        &input,
    ));
    for (o, g) in orig.iter().zip(&got) {
        let want_len = ((o["input_length"].as_f64().unwrap() * 0.3).round() as u64).min(3000);
        assert_eq!(g["input_length"], want_len);
        let n = want_len.div_ceil(512) as usize;
        assert_eq!(ids(g), ids(o)[..n].to_vec());
    }
}

#[test]
fn growing_prompts_adds_fresh_blocks_and_keeps_sharing() {
    let (input, orig) = conversation_trace();
    let out = rescale(&["--input-scale", "2.5"], &input);
    // Still valid: block counts follow the new lengths.
    Cmd::new("trace-validate")
        .arg("--check")
        .stdin(out.join("\n"))
        .run()
        .ok();
    let got = parse(&out);
    let input_ids: HashSet<u64> = orig.iter().flat_map(ids).collect();
    let mut by_prompt: HashMap<(Vec<u64>, u64), Vec<u64>> = HashMap::new();
    for (o, g) in orig.iter().zip(&got) {
        let (old, new) = (ids(o), ids(g));
        assert_eq!(new[..old.len()], old[..], "the old blocks stay in front");
        for id in &new[old.len()..] {
            assert!(!input_ids.contains(id), "new id {id} collides");
            assert!(*id < (1 << 53));
        }
        // Records that shared their whole prompt (same ids, same length)
        // still share it.
        let key = (old.clone(), o["input_length"].as_u64().unwrap());
        if let Some(prev) = by_prompt.insert(key, new.clone()) {
            assert_eq!(prev, new);
        }
    }
    assert!(
        by_prompt.len() < orig.len(),
        "the trace has repeated prompts"
    );
}

#[test]
fn output_lengths_scale_and_clamp() {
    let got = rescale(
        &["--output-scale", "0.5", "--min-output", "3", "--max-output", "100"],
        b"{\"input_length\": 1, \"output_length\": 1000}\n{\"input_length\": 1, \"output_length\": 5}\n{\"input_length\": 1, \"output_length\": 61}\n",
    );
    let out: Vec<u64> = parse(&got)
        .iter()
        .map(|v| v["output_length"].as_u64().unwrap())
        .collect();
    // 500 -> 100 (max); 2.5 -> 3 (rounded, and the min); 30.5 -> 31.
    assert_eq!(out, vec![100, 3, 31]);
}

#[test]
fn fixed_prompts_pass_through_with_one_warning() {
    let input = b"{\"text_input\": \"hi\", \"output_length\": 10}\n{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"output_length\": 10}\n{\"input_length\": 10, \"output_length\": 10}\n";
    let run = run_stdin("trace-rescale", &["--output-scale", "2"], input.to_vec());
    run.code(0);
    let lines = run.lines();
    assert_eq!(lines[0], "{\"text_input\":\"hi\",\"output_length\":10}");
    assert_eq!(lines[2], "{\"input_length\":10,\"output_length\":20}");
    assert_eq!(
        run.stderr,
        "trace-rescale: warning: 2 records with a fixed prompt (`text_input`, `messages`, `payload` or `prompt_token_ids`) passed through with their lengths unchanged\n"
    );
}

#[test]
fn changed_lengths_drop_the_observed_figures_they_made_stale() {
    let input = concat!(
        // Both lengths change: every length-bound figure goes, status stays.
        r#"{"timestamp":0,"input_length":600,"output_length":10,"hash_ids":[1,2],"observed":{"prompt_tokens":600,"completion_tokens":10,"ttft_ms":12.5,"e2e_ms":300,"status":"ok","x":1}}"#,
        "\n",
        // Only the output changes (10 → 20 is over --max-output 15 → 15):
        // the prompt's figures and the TTFT still describe the record.
        r#"{"timestamp":1000,"input_length":0,"output_length":10,"hash_ids":[],"observed":{"prompt_tokens":0,"completion_tokens":10,"ttft_ms":7,"e2e_ms":90}}"#,
        "\n",
        // Nothing left: `observed` goes. New block ids start above the
        // largest (3), at 4 + last id × 1 (the most blocks added to one prompt).
        r#"{"timestamp":2000,"input_length":512,"output_length":4,"hash_ids":[3],"observed":{"prompt_tokens":512,"completion_tokens":4}}"#,
        "\n",
        // Neither length changes: `observed` is kept, text and all.
        r#"{"timestamp":3000,"input_length":0,"output_length":15,"observed":{"prompt_tokens":0, "e2e_ms":1.50}}"#,
        "\n",
    );
    let got = rescale(
        &[
            "--speed",
            "2",
            "--input-scale",
            "2",
            "--output-scale",
            "2",
            "--max-output",
            "15",
        ],
        input.as_bytes(),
    );
    assert_eq!(
        got,
        vec![
            r#"{"timestamp":0,"input_length":1200,"output_length":15,"hash_ids":[1,2,6],"observed":{"status":"ok","x":1}}"#,
            r#"{"timestamp":500,"input_length":0,"output_length":15,"hash_ids":[],"observed":{"prompt_tokens":0,"ttft_ms":7}}"#,
            r#"{"timestamp":1000,"input_length":1024,"output_length":8,"hash_ids":[3,7]}"#,
            r#"{"timestamp":1500,"input_length":0,"output_length":15,"observed":{"prompt_tokens":0, "e2e_ms":1.50}}"#,
        ]
    );
}

#[test]
fn time_alone_leaves_the_observed_latencies() {
    let line = r#"{"timestamp":100,"input_length":5,"output_length":2,"observed":{"ttft_ms":40,"e2e_ms":90}}"#;
    let got = rescale(&["--speed", "4"], format!("{line}\n{line}\n").as_bytes());
    assert_eq!(got[1], line);
}

#[test]
fn loop_tiles_copies_with_unique_ids_and_kept_blocks() {
    let input = concat!(
        r#"{"timestamp":100,"id":"a","input_length":5,"output_length":2,"hash_ids":[1]}"#,
        "\n",
        r#"{"timestamp":200,"id":"b","session_id":"s","input_length":5,"output_length":2,"hash_ids":[1]}"#,
        "\n",
        r#"{"session_id":"s","delay":50,"input_length":5,"output_length":1}"#,
        "\n",
        r#"{"after":["b"],"input_length":1,"output_length":1}"#,
        "\n",
        r#"{"timestamp":400,"id":"c","input_length":1,"output_length":1}"#,
        "\n",
    );
    // Span 300 ms over 5 records: a mean gap of 75 ms, copies 375 ms
    // apart, at 0, 375 and 750 ms (1125 is past 800). In the third copy
    // `b` (850 ms after the first record) is past 800: its later turn and
    // the record after it go with it, and so does `c`.
    let got = rescale(&["--loop", "800ms"], input.as_bytes());
    let mut want: Vec<&str> = input.lines().collect();
    want.extend([
        r#"{"timestamp":475,"id":"a#2","input_length":5,"output_length":2,"hash_ids":[1]}"#,
        r#"{"timestamp":575,"id":"b#2","session_id":"s#2","input_length":5,"output_length":2,"hash_ids":[1]}"#,
        r#"{"session_id":"s#2","delay":50,"input_length":5,"output_length":1}"#,
        r#"{"after":["b#2"],"input_length":1,"output_length":1}"#,
        r#"{"timestamp":775,"id":"c#2","input_length":1,"output_length":1}"#,
        r#"{"timestamp":850,"id":"a#3","input_length":5,"output_length":2,"hash_ids":[1]}"#,
    ]);
    assert_eq!(got, want);
    // After the time options: at twice the speed the span is 150 ms, the
    // period 187.5 ms.
    let got = rescale(&["--speed", "2", "--loop", "200ms"], input.as_bytes());
    assert_eq!(got.len(), 6);
    assert_eq!(
        got[5],
        r#"{"timestamp":287.5,"id":"a#2","input_length":5,"output_length":2,"hash_ids":[1]}"#
    );
}

#[test]
fn loop_needs_a_span() {
    let one_instant = "{\"timestamp\":5,\"input_length\":1,\"output_length\":1}\n";
    run_stdin("trace-rescale", &["--loop", "1m"], one_instant)
        .code(2)
        .stderr_is("trace-rescale: error: --loop needs records at different times; this trace spans 0 ms\n");
}
