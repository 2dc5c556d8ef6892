//! The replay's settings (`RESULTS.run.json`) in the spreadsheet and the
//! comparison, and the reports' line for results that have none.

use calamine::{Data, Reader, Xlsx, open_workbook};

use crate::util::{Cmd, TestDir, bin, run_stdin};

/// `r.ndjson` in `dir`, replayed on the simulator with `--model m1` and
/// `-o`, so with its settings beside it.
fn recorded(dir: &TestDir) {
    dir.write(
        "t.jsonl",
        "{\"timestamp\":0,\"input_length\":20,\"output_length\":3}\n\
         {\"timestamp\":5,\"input_length\":20,\"output_length\":3}\n",
    );
    Cmd::new("trace-replay")
        .args([
            "--sim", "--quiet", "--model", "m1", "-o", "r.ndjson", "t.jsonl",
        ])
        .current_dir(&dir.path)
        .run()
        .code(0);
}

fn summarize(dir: &TestDir, args: &[&str]) -> String {
    let run = Cmd::new("trace-summarize")
        .args(args)
        .current_dir(&dir.path)
        .run();
    run.ok();
    run.stdout_str()
}

const NOT_RECORDED_FILE: &str = "no copy.ndjson.run.json beside the results: they went through a pipe, as to tee, or another tool wrote them; trace-replay -o FILE keeps them in FILE.run.json)";

#[test]
fn the_spreadsheet_has_the_settings() {
    let dir = TestDir::new("settings-xlsx");
    recorded(&dir);
    summarize(&dir, &["--format", "xlsx", "-o", "r.xlsx", "r.ndjson"]);
    let mut book: Xlsx<_> = open_workbook(dir.join("r.xlsx")).unwrap();
    let summary = book.worksheet_range("summary").unwrap();
    let value = |figure: &str| {
        summary
            .rows()
            .find(|r| r[0] == Data::String(figure.into()))
            .unwrap_or_else(|| panic!("no row {figure}"))[2]
            .clone()
    };
    assert_eq!(value("run.tool"), Data::String("trace-replay".into()));
    assert_eq!(value("run.model"), Data::String("m1".into()));
    assert_eq!(value("run.endpoint"), Data::String("chat".into()));
    // The command as run: the binary's path, as the test gave it.
    assert_eq!(
        value("run.command"),
        Data::String(format!(
            "{} --sim --quiet --model m1 -o r.ndjson t.jsonl",
            bin("trace-replay").display()
        ))
    );
}

#[test]
fn the_comparison_has_each_setups_settings() {
    let dir = TestDir::new("settings-compare");
    recorded(&dir);
    std::fs::copy(dir.join("r.ndjson"), dir.join("copy.ndjson")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&summarize(
        &dir,
        &["--compare", "--format", "json", "r.ndjson", "copy.ndjson"],
    ))
    .unwrap();
    let setups = json["setups"].as_array().unwrap();
    assert_eq!(setups[0]["run_settings"][0]["model"], "m1");
    assert_eq!(setups[0]["run_settings"][0]["endpoint"], "chat");
    assert_eq!(setups[1]["run_settings"], serde_json::json!([]));
    let text = summarize(&dir, &["--compare", "r.ndjson", "copy.ndjson"]);
    assert!(text.contains("endpoint chat, model m1"), "{text}");
    let want = format!("settings: not recorded ({NOT_RECORDED_FILE}");
    assert!(text.lines().any(|l| l == want), "{text}");
}

#[test]
fn results_with_no_settings_say_so() {
    let dir = TestDir::new("settings-none");
    recorded(&dir);
    std::fs::copy(dir.join("r.ndjson"), dir.join("copy.ndjson")).unwrap();
    // A file with none beside it: written through a pipe (`| tee`).
    let text = summarize(&dir, &["copy.ndjson"]);
    let want = format!("settings: not recorded ({NOT_RECORDED_FILE}");
    assert_eq!(text.lines().nth(1), Some(want.as_str()), "{text}");
    // Markdown the same, as a note.
    let md = summarize(&dir, &["--format", "markdown", "copy.ndjson"]);
    assert!(md.contains(&format!("\n_{want}_\n")), "{md}");
    // Results read from a pipe.
    let piped = run_stdin(
        "trace-summarize",
        &[],
        std::fs::read(dir.join("r.ndjson")).unwrap(),
    );
    piped.ok();
    assert_eq!(
        piped.stdout_str().lines().nth(1),
        Some(
            "settings: not recorded (the results came through a pipe; trace-replay -o FILE keeps them in FILE.run.json)"
        )
    );
    // Of two files, the one with none is named; the other's are shown.
    let both = summarize(&dir, &["r.ndjson", "copy.ndjson"]);
    assert!(
        both.lines()
            .any(|l| l.starts_with("run (r.ndjson): ") && l.ends_with("-o r.ndjson t.jsonl")),
        "{both}"
    );
    assert!(
        both.lines()
            .any(|l| l == format!("settings (copy.ndjson): not recorded ({NOT_RECORDED_FILE}")),
        "{both}"
    );
    // With settings: no such line.
    assert!(!summarize(&dir, &["r.ndjson"]).contains("not recorded"));
    // Machine-readable reports are unchanged: no `run`.
    let json: serde_json::Value =
        serde_json::from_str(&summarize(&dir, &["--format", "json", "copy.ndjson"])).unwrap();
    assert!(json.get("run").is_none());
}
