//! trace-convert beyond its memory budget: the records held are sorted in
//! runs on disk and merged, and the output is the same, byte for byte, as
//! when every record fits (sessions, `delay`, `after`, hash ids and the
//! summary included).

use crate::util::{Cmd, Run, TestDir, data};

fn convert(args: &[&str], memory: Option<&str>) -> Run {
    let mut all: Vec<&str> = args.to_vec();
    if let Some(m) = memory {
        all.extend(["--memory", m]);
    }
    let run = Cmd::new("trace-convert").args(&all).run();
    run.code(0);
    run
}

/// Inputs with sessions, dependency graphs, hash ids and records passed
/// through, each as the arguments of one conversion.
fn cases() -> Vec<Vec<String>> {
    let convert = |name: &str| {
        data(&format!("convert/{name}"))
            .to_string_lossy()
            .into_owned()
    };
    let mut cases: Vec<Vec<String>> = [
        "litellm_session_fanout.constructed.jsonl",
        "real_proxy_standard_logging_payloads.jsonl",
        "real_proxy_spend_logs_payloads.jsonl",
        "standard_logging_payloads.constructed.jsonl",
        "ui_trace_download.langgraph-python-2025-08-22.json",
        "ui_trace_download.openai-agents-2025-09-30.json",
        "observations_v2_api_response.constructed.json",
        "AzureLLMInferenceTrace_conv.head300.csv",
        "BurstGPT_v3_8col.constructed.csv",
        "otel/bifrost.gaia-0-claude-code.traces.jsonl",
        "otel/exgentic.tau2_retail_claude_code_315397.json",
        "otel/inference-perf.prefix_sharing_example.json",
        "otel/litellm-migrated.naturalquestions-2165-aider.traces.jsonl",
        "otel/vercel-ai-sdk-v6.all-spans.json",
    ]
    .iter()
    .map(|name| vec![convert(name)])
    .collect();
    // Sessions from the traces table, read after the observations.
    cases.push(vec![
        convert("blob_export_observations.constructed.jsonl"),
        convert("blob_export_traces.constructed.jsonl"),
    ]);
    // Mooncake records passed through, with sessions, and the largest file.
    cases.push(vec![
        "--from".into(),
        "mooncake".into(),
        data("conversation_trace.jsonl")
            .to_string_lossy()
            .into_owned(),
    ]);
    cases.push(vec![data("sessions.jsonl").to_string_lossy().into_owned()]);
    cases
}

#[test]
fn runs_on_disk_write_what_memory_writes() {
    for case in cases() {
        for extra in [&[][..], &["--no-graph"][..], &["--keep-messages"][..]] {
            let args: Vec<&str> = extra
                .iter()
                .copied()
                .chain(case.iter().map(String::as_str))
                .collect();
            let memory = convert(&args, None);
            assert!(!memory.stdout.is_empty(), "{args:?}");
            // 1 byte: every record is a run of its own, merged in levels
            // (the largest file, 12,031 Mooncake records: runs of a few
            // hundred); 4K: runs of a few records.
            let tiny = if case[0] == "--from" { "64K" } else { "1" };
            for budget in [tiny, "4K"] {
                let runs = convert(&args, Some(budget));
                assert!(
                    runs.stdout == memory.stdout,
                    "{args:?} --memory {budget}: the output differs"
                );
                assert_eq!(runs.stderr, memory.stderr, "{args:?} --memory {budget}");
            }
        }
    }
}

#[test]
fn runs_go_to_tmpdir() {
    // A budget the input passes writes runs, in TMPDIR: one that cannot
    // be written there says so; within the budget none is needed.
    let dir = TestDir::new("runs_go_to_tmpdir");
    let missing = dir.join("missing");
    let input = data("convert/litellm_session_fanout.constructed.jsonl");
    let input = input.to_string_lossy();
    let tmpdir = missing.to_string_lossy();
    let run = Cmd::new("trace-convert")
        .args(["--memory", "1", &input])
        .env("TMPDIR", &tmpdir)
        .run();
    run.code(2);
    run.stderr_has(
        "trace-convert: error: temporary file in TMPDIR (records beyond --memory): \
         no such file or directory",
    );
    Cmd::new("trace-convert")
        .args([&*input])
        .env("TMPDIR", &tmpdir)
        .run()
        .code(0);
}

#[test]
fn memory_takes_a_size() {
    let run = Cmd::new("trace-convert").args(["--memory", "0"]).run();
    run.code(2);
    run.stderr_has("`0` is not a size in bytes ≥ 1");
}
