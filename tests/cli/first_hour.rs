//! What a new user meets in the first hour: no false alarm on tracekit's
//! own output, and each mix-up of tools answered with the right tool.

use crate::util::{Cmd, TestDir, data};

#[test]
fn a_short_fast_slice_validates_strictly() {
    // The bundled trace's first 20 records at 4x: ten at 0, ten at 750 ms.
    // Its mean rate (19 gaps in 0.75 s, 25.3/s) once read as "seconds".
    let slice = Cmd::new("trace-slice")
        .args(["--head", "20"])
        .arg(data("conversation_trace.jsonl"))
        .run();
    slice.ok();
    let fast = Cmd::new("trace-rescale")
        .args(["--speed", "4"])
        .stdin(slice.stdout)
        .run();
    fast.ok();
    let check = Cmd::new("trace-validate")
        .arg("--strict")
        .stdin(fast.stdout.clone())
        .run();
    check.code(0);
    assert_eq!(check.stderr, "");
    // Its report: a mean of 25.333/s, and a peak never below it (all 20
    // records fall in the first second, whose count alone says 20/s).
    let report = Cmd::new("trace-validate")
        .args(["--report-format", "json"])
        .stdin(fast.stdout)
        .run();
    let j = report.json();
    let mean = j["time"]["mean_rate_per_s"].as_f64().unwrap();
    assert!((mean - 19.0 / 0.75).abs() < 1e-9, "{mean}");
    assert_eq!(j["time"]["peak_rate_per_s"], 26);
}

#[test]
fn one_record_is_not_one_records() {
    let run = Cmd::new("trace-validate")
        .arg("--report")
        .stdin(r#"{"timestamp": 0, "input_length": 5, "output_length": 2, "session_id": "s"}"#)
        .run();
    run.ok()
        .stdout_has("problems       0 errors, 0 warnings")
        .stdout_has("total 5 (1 record)")
        .stdout_has("sessions       1 (1 record)");
}

#[test]
fn time_scaling_flags_name_trace_rescale() {
    Cmd::new("trace-replay")
        .args(["--sim", "--speed", "2"])
        .run()
        .code(2)
        .stderr_has("trace-replay: error: unexpected argument '--speed': time scaling is trace-rescale's: trace-rescale --speed F TRACE | trace-replay ...");
    // trace-sweep scales time itself: clap's own answer there.
    let sweep = Cmd::new("trace-sweep").args(["--speed", "2"]).run();
    sweep.code(2);
    assert!(!sweep.stderr.contains("trace-rescale"), "{}", sweep.stderr);
}

#[test]
fn a_trace_given_to_summarize_is_named_a_trace() {
    Cmd::new("trace-summarize")
        .arg(data("sessions.jsonl"))
        .run()
        .code(2)
        .stderr_has(
            "sessions.jsonl:1: error: this looks like a trace (has `timestamp`, `hash_ids`), not \
             trace-replay results: replay it first, as in trace-replay --sim TRACE | trace-summarize",
        );
}

#[test]
fn results_given_to_validate_get_the_hint_once_per_input() {
    let dir = TestDir::new("results-to-validate");
    let line = r#"{"index":0,"scheduled_ms":0,"sent_ms":0,"status":"ok"}"#;
    let results = dir.write("r.ndjson", format!("{line}\n{line}\n{line}\n"));
    let run = Cmd::new("trace-validate").arg(&results).run();
    run.code(1);
    assert_eq!(
        run.stderr
            .matches("this looks like trace-replay results")
            .count(),
        1,
        "{}",
        run.stderr
    );
    run.stderr_has("r.ndjson:1: error:")
        .stderr_has("r.ndjson: 3 result records in all, each an error (not a trace)");
    assert!(!run.stderr.contains("r.ndjson:2:"), "{}", run.stderr);
}

#[test]
fn the_endpoint_help_names_every_endpoint() {
    let help = Cmd::new("trace-replay").arg("--help").run();
    help.ok();
    for endpoint in <tracekit::api::Endpoint as clap::ValueEnum>::value_variants() {
        let name = clap::ValueEnum::to_possible_value(endpoint)
            .unwrap()
            .get_name()
            .to_string();
        help.stdout_has(&format!("{name}:"));
    }
    assert!(!help.stdout_str().contains("or `/v1/completions`."));
}

#[test]
fn the_run_settings_travel_with_its_results() {
    let dir = TestDir::new("run-settings");
    let trace = dir.write(
        "t.jsonl",
        "{\"timestamp\":0,\"input_length\":20,\"output_length\":3}\n\
         {\"timestamp\":5,\"input_length\":20,\"output_length\":3}\n",
    );
    let results = dir.join("r.ndjson");
    Cmd::new("trace-replay")
        .args([
            "--sim",
            "--quiet",
            "--model",
            "m1",
            "--header",
            "Authorization: Bearer sk-abcdef",
        ])
        .arg("-o")
        .arg(&results)
        .arg(&trace)
        .run()
        .code(0);
    // Every line of the results is a result; the settings are beside them.
    let lines = std::fs::read_to_string(&results).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.ndjson.run.json")).unwrap())
            .unwrap();
    assert_eq!(sidecar["tool"], "trace-replay");
    assert_eq!(sidecar["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(sidecar["endpoint"], "chat");
    assert_eq!(sidecar["model"], "m1");
    let url = sidecar["url"].as_str().unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/v1/chat/completions"),
        "{url}"
    );
    let command = sidecar["command"].as_str().unwrap();
    assert!(
        command.contains("--header 'Authorization: [REDACTED]'"),
        "{command}"
    );
    assert!(!command.contains("sk-abcdef"), "{command}");
    // Every report shows them.
    let text = Cmd::new("trace-summarize").arg(&results).run();
    text.ok()
        .stdout_has("run: ")
        .stdout_has("endpoint chat, model m1");
    let json = Cmd::new("trace-summarize")
        .args(["--format", "json"])
        .arg(&results)
        .run();
    assert_eq!(json.json()["run"]["model"], "m1");
    let csv = Cmd::new("trace-summarize")
        .args(["--format", "csv"])
        .arg(&results)
        .run();
    csv.code(0).stdout_has("run.command").stdout_has("run.url");
    let compare = Cmd::new("trace-summarize")
        .arg("--compare")
        .arg(&results)
        .arg(&results)
        .run();
    compare.code(0).stdout_has("endpoint chat, model m1");
    let page = dir.join("run.html");
    Cmd::new("trace-summarize")
        .arg("--plot")
        .arg(&page)
        .arg(&results)
        .run()
        .code(0);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("run command"),
        "the page's settings name the run"
    );
    assert!(!html.contains("sk-abcdef"));
}
