//! `trace-summarize --compare`, on runs of one request each whose figures
//! are worked out by hand: setup a ran three times, with TTFT 100, 200 and
//! 300 ms; setup b once, with TTFT 250 ms. Every request takes 1 s and
//! answers 4 tokens.
//!
//! a's TTFT: mean 200, sample standard deviation sqrt((100² + 0 + 100²) /
//! 2) = 100, min 100, max 300; b − a = 250 − 200 = +50, +25 %.

use serde_json::{Value, json};

use crate::util::TestDir;

fn result(ttft: u32, model: &str) -> String {
    format!(
        r#"{{"index":0,"model":"{model}","scheduled_ms":0,"sent_ms":0,"start_time":"2026-11-23T10:00:00Z","ttft_ms":{ttft},"first_chunk_ms":{ttft},"e2e_ms":1000,"itl_ms":[100,100,100],"input_length":5,"output_length":4,"prompt_tokens":5,"completion_tokens":4,"cached_tokens":0,"finish_reason":"length","status":"ok","http_status":200}}"#
    ) + "\n"
}

fn setups() -> TestDir {
    let dir = TestDir::new("compare");
    dir.write("a1.ndjson", result(100, "m"));
    dir.write("a2.ndjson", result(200, "m"));
    dir.write("a3.ndjson", result(300, "m"));
    dir.write("b.ndjson", result(250, "m"));
    dir.write("c.ndjson", result(100, "m1") + &result(150, "m2"));
    dir
}

const A: &str = "a1.ndjson,a2.ndjson,a3.ndjson";

/// `trace-summarize --compare FLAGS… A b.ndjson` in `dir`: its output,
/// after exit 0 with nothing on stderr.
fn compare_a_b(dir: &TestDir, flags: &[&str]) -> String {
    let run = dir
        .cmd("trace-summarize")
        .arg("--compare")
        .args(flags)
        .args([A, "b.ndjson"])
        .run();
    run.ok();
    run.stdout_str()
}

/// The line of `text` that starts with `start`.
fn row<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn repeated_runs_as_mean_and_spread_with_the_difference() {
    let dir = setups();
    let j: Value = serde_json::from_str(&compare_a_b(&dir, &["--format", "json"])).unwrap();
    assert_eq!(j["baseline"], A);
    let s = j["setups"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["runs"], 3);
    assert_eq!(
        s[0]["files"],
        json!(["a1.ndjson", "a2.ndjson", "a3.ndjson"])
    );
    assert_eq!(
        s[0]["figures"]["ttft.mean"],
        json!({"runs": 3, "mean": 200.0, "std": 100.0, "min": 100.0, "max": 300.0,
               "diff": 0.0, "diff_pct": 0.0})
    );
    assert_eq!(
        s[1]["figures"]["ttft.mean"],
        json!({"runs": 1, "mean": 250.0, "std": null, "min": 250.0, "max": 250.0,
               "diff": 50.0, "diff_pct": 25.0})
    );
    // Each run is its own run: 1 request in 1 s, not 3 in 1 s.
    assert_eq!(
        s[0]["figures"]["throughput.requests_per_s"]["mean"],
        Value::from(1.0)
    );
    // The whole report of each run is there for jq.
    assert_eq!(s[0]["reports"][2]["ttft"]["p50"], Value::from(300.0));

    let text = compare_a_b(&dir, &[]);
    let cells: Vec<&str> = row(&text, "ttft.mean ")
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        vec!["ttft.mean", "200 ± 100 (100 … 300)", "250", "+50 (+25%)"]
    );

    let text = compare_a_b(&dir, &["--format", "csv"]);
    assert!(text.starts_with("setup,figure,runs,mean,std,min,max,diff,diff_pct\n"));
    assert!(
        text.contains("\"a1.ndjson,a2.ndjson,a3.ndjson\",ttft.mean,3,200,100,100,300,0,0\n"),
        "{text}"
    );
    assert!(
        text.contains("b.ndjson,ttft.mean,1,250,,250,250,50,25\n"),
        "{text}"
    );

    let text = compare_a_b(&dir, &["--format", "markdown"]);
    let cells: Vec<&str> = row(&text, "| ttft.mean ")
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(
        cells,
        vec![
            "",
            "ttft.mean",
            "200 ± 100 (100 … 300)",
            "250",
            "+50 (+25%)",
            ""
        ]
    );
}

#[test]
fn groups_of_one_file_compare_side_by_side() {
    let dir = setups();
    let run = dir.run(
        "trace-summarize",
        &["--compare", "--by", "model", "--format", "json", "c.ndjson"],
    );
    run.ok();
    let j = run.json();
    let s = j["setups"].as_array().unwrap();
    let names: Vec<&Value> = s.iter().map(|s| &s["name"]).collect();
    assert_eq!(names, vec!["m1", "m2"]);
    assert_eq!(s[1]["figures"]["ttft.p50"]["diff"], Value::from(50.0));
    assert_eq!(s[1]["figures"]["ttft.p50"]["diff_pct"], Value::from(50.0));
}
