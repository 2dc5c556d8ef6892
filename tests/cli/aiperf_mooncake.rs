//! AIPerf's `mooncake_trace` files, read as AIPerf reads them: each example
//! of its documented layouts loads and round-trips through trace-validate
//! and trace-convert, and the time tools keep later turns with their session.

use crate::util::{Cmd, data, file_lines, run_file};

/// The files in tests/data/aiperf_mooncake/ (see its SOURCES.md).
const EXAMPLES: &[&str] = &[
    "fixed_schedule.jsonl",
    "minimal.jsonl",
    "multi_turn.jsonl",
    "multi_turn_timed.jsonl",
    "delay_without_session.jsonl",
    "messages_after.jsonl",
    "payload_messages_tools.jsonl",
];

fn example(name: &str) -> std::path::PathBuf {
    data(&format!("aiperf_mooncake/{name}"))
}

fn lines(name: &str) -> Vec<String> {
    file_lines(example(name))
}

#[test]
fn aiperf_mooncake_examples_validate_and_convert_unchanged() {
    for name in EXAMPLES {
        let input = std::fs::read_to_string(example(name)).unwrap();
        let run = Cmd::new("trace-validate")
            .args(["--check", "--strict"])
            .arg(example(name))
            .run();
        assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{name}: validate");
        let run = Cmd::new("trace-validate").arg(example(name)).run();
        assert_eq!(
            run.stdout_str(),
            input,
            "{name}: validate passes it through"
        );
        // The files start at 0 and are in order: converting changes nothing.
        let run = Cmd::new("trace-convert")
            .args(["--from", "mooncake"])
            .arg(example(name))
            .run();
        run.code(0);
        assert_eq!(run.stdout_str(), input, "{name}: convert");
        let run = Cmd::new("trace-validate").stdin(run.stdout.clone()).run();
        assert_eq!(run.code, 0, "{name}: converted output validates");
        let run = Cmd::new("trace-synth").arg(example(name)).run();
        assert_eq!(run.code, 0, "{name}: synth: {}", run.stderr);
    }
}

#[test]
fn slice_window_keeps_later_turns_with_their_session() {
    let all = lines("multi_turn_timed.jsonl");
    let timed = example("multi_turn_timed.jsonl");
    let untimed = example("multi_turn.jsonl");
    // s1 starts at 0, s2 at 250; their later turns have only `delay`.
    run_file("trace-slice", &["--to", "200ms"], &timed)
        .ok()
        .lines_are(&[&all[0], &all[2]]);
    run_file("trace-slice", &["--from", "200ms", "--rebase"], &timed)
        .ok()
        .lines_are(&[
            r#"{"session_id":"s2","timestamp":0,"input_length":100,"output_length":10,"hash_ids":[7]}"#,
            all[3].as_str(),
        ]);
    // Without timestamps every record is at offset 0.
    run_file("trace-slice", &["--to", "1s"], &untimed)
        .ok()
        .lines_are(&lines("multi_turn.jsonl"));
    let run = run_file("trace-slice", &["--from", "1s"], &untimed);
    run.code(0);
    assert_eq!(run.stdout_str(), "");
    run.stderr_has("0 records written of 2 read");
}

#[test]
fn rescale_speed_scales_the_delays_of_records_without_timestamps() {
    run_file(
        "trace-rescale",
        &["--speed", "2"],
        example("multi_turn.jsonl"),
    )
    .ok()
    .lines_are(&[
        r#"{"session_id":"abc-123","input_length":300,"output_length":40}"#,
        r#"{"session_id":"abc-123","delay":1,"input_length":150,"output_length":20}"#,
    ]);
    run_file("trace-rescale", &["--speed", "2"], example("multi_turn_timed.jsonl"))
        .ok()
        .lines_are(&[
            r#"{"session_id":"s1","timestamp":0,"input_length":600,"output_length":10,"hash_ids":[1,2]}"#,
            r#"{"session_id":"s2","timestamp":125,"input_length":100,"output_length":10,"hash_ids":[7]}"#,
            r#"{"session_id":"s1","delay":500,"input_length":700,"output_length":10,"hash_ids":[1,2]}"#,
            r#"{"session_id":"s2","delay":250,"input_length":120,"output_length":10,"hash_ids":[7]}"#,
        ]);
}

#[test]
fn convert_keeps_a_later_turn_after_the_turn_it_follows() {
    // Out of order: the untimed later turn of s1 must not move before s1's
    // first turn (at 300), nor lose its place.
    let dir = crate::util::TestDir::new("aiperf-later-turn");
    let input = dir.write(
        "t.jsonl",
        concat!(
            r#"{"session_id":"s1","timestamp":300,"input_length":5,"output_length":1}"#,
            "\n",
            r#"{"session_id":"s2","timestamp":100,"input_length":5,"output_length":1}"#,
            "\n",
            r#"{"session_id":"s1","delay":7,"input_length":5,"output_length":1}"#,
            "\n",
        ),
    );
    run_file("trace-convert", &["--from", "mooncake"], &input)
        .code(0)
        .lines_are(&[
            r#"{"session_id":"s2","timestamp":0,"input_length":5,"output_length":1}"#,
            r#"{"session_id":"s1","timestamp":200,"input_length":5,"output_length":1}"#,
            r#"{"session_id":"s1","delay":7,"input_length":5,"output_length":1}"#,
        ]);
}
