//! Conventions every tool keeps: stdin equals file input, gzip in and out
//! (multi-member too), a closed pipe ends quietly, file arguments concatenate.

use std::io::{Read, Write};
use std::process::Command;

use flate2::Compression;
use flate2::read::MultiGzDecoder;
use flate2::write::GzEncoder;

use crate::util::{Cmd, TestDir, bin, data, run_file, run_stdin};

const FILTERS: &[(&str, &[&str])] = &[
    ("trace-validate", &[]),
    ("trace-slice", &["--from", "1m", "--to", "30m"]),
    ("trace-rescale", &["--speed", "2"]),
];

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    MultiGzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn stdin_file_and_gzip_inputs_agree() {
    let trace = std::fs::read(data("conversation_trace.jsonl")).unwrap();
    let dir = TestDir::new("inputs");
    // Two gzip members, split mid-file, under a name that does not say gzip.
    let mid = trace.len() / 2;
    let mut two_members = gzip(&trace[..mid]);
    two_members.extend(gzip(&trace[mid..]));
    dir.write("members.jsonl", &two_members);
    for (tool, args) in FILTERS {
        let from_file = Cmd::new(tool)
            .args(*args)
            .arg(data("conversation_trace.jsonl"))
            .run();
        from_file.ok();
        let from_stdin = Cmd::new(tool).args(*args).stdin(trace.clone()).run();
        from_stdin.ok();
        let from_dash = Cmd::new(tool)
            .args(*args)
            .arg("-")
            .stdin(trace.clone())
            .run();
        let from_gzip = dir.cmd(tool).args(*args).arg("members.jsonl").run();
        from_gzip.ok();
        let from_gzip_stdin = Cmd::new(tool).args(*args).stdin(two_members.clone()).run();
        assert!(!from_file.stdout.is_empty());
        for other in [&from_stdin, &from_dash, &from_gzip, &from_gzip_stdin] {
            assert!(
                from_file.stdout == other.stdout,
                "{tool}: {} differs",
                other.desc
            );
        }
    }
}

#[test]
fn gzip_output_by_name() {
    let dir = TestDir::new("gz-out");
    for (tool, args) in FILTERS {
        let plain = run_file(tool, args, data("synthetic_trace.jsonl"));
        let write = |out: &str| {
            dir.cmd(tool)
                .args(*args)
                .arg(data("synthetic_trace.jsonl"))
                .args(["-o", out])
                .run()
                .ok();
        };
        write("out.jsonl.gz");
        let written = dir.read("out.jsonl.gz");
        assert_eq!(&written[..2], &[0x1f, 0x8b], "{tool} did not compress");
        assert!(
            gunzip(&written) == plain.stdout,
            "{tool}: gzip output differs"
        );
        write("out.jsonl");
        assert!(dir.read("out.jsonl") == plain.stdout);
    }
}

#[test]
fn several_files_are_read_in_turn() {
    let a = data("sessions.jsonl");
    let b = data("synthetic_trace.jsonl");
    let run = Cmd::new("trace-validate").arg(&a).arg(&b).run();
    // The second file starts again at 0 ms: that is out of order.
    run.code(0);
    let mut want = std::fs::read(&a).unwrap();
    want.extend(std::fs::read(&b).unwrap());
    assert!(run.stdout == want);
    run.stderr_has("synthetic_trace.jsonl:1: warning: field `timestamp`");
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    for (tool, args) in FILTERS {
        // The reader is gone after one line: like `| head -1`.
        let (first, out) = crate::util::head_one(
            Command::new(bin(tool))
                .args(*args)
                .arg(data("conversation_trace.jsonl")),
        );
        assert!(first.starts_with('{'));
        assert_eq!(out.status.code(), Some(0), "{tool}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{tool}");
    }
}

#[test]
fn stdin_may_be_named_once() {
    let run = run_stdin("trace-slice", &["-", "-"], "");
    run.code(2);
    run.stderr_is("trace-slice: error: standard input (`-`) can be given only once\n");
}

#[test]
fn a_missing_file_is_named() {
    let run = Cmd::new("trace-rescale")
        .args(["--speed", "2", "nope.jsonl"])
        .run();
    run.code(2);
    run.stderr_is("trace-rescale: error: nope.jsonl: no such file or directory\n");
}

#[test]
fn results_given_as_a_trace_are_refused_by_every_tool_that_reads_traces() {
    let dir = TestDir::new("results-as-trace");
    dir.write(
        "run.ndjson",
        concat!(
            r#"{"index":0,"scheduled_ms":0,"sent_ms":1,"input_length":5,"output_length":2,"status":"ok","http_status":200}"#,
            "\n",
            r#"{"index":1,"scheduled_ms":10,"sent_ms":11,"input_length":5,"output_length":2,"status":"error","http_status":500}"#,
            "\n",
        ),
    );
    let why = "error: this looks like trace-replay results (has `scheduled_ms`, `status`), not a \
               trace; give it to trace-summarize";
    for (tool, args) in [
        ("trace-replay", &["--dry-run"][..]),
        ("trace-slice", &["--head", "1"][..]),
        ("trace-slice", &["--from", "0s"][..]),
        ("trace-rescale", &["--speed", "2"][..]),
        ("trace-synth", &[][..]),
    ] {
        let run = dir.cmd(tool).args(args).arg("run.ndjson").run();
        run.code(2);
        assert_eq!(run.stdout_str(), "", "{tool} {args:?}");
        assert_eq!(
            run.stderr,
            format!("{tool}: run.ndjson:1: {why}\n"),
            "{args:?}"
        );
    }
    // The checker counts every such line, and gives the hint once per input.
    let run = dir.cmd("trace-validate").arg("run.ndjson").run();
    run.code(1);
    assert!(
        run.stderr.starts_with(&format!(
            "trace-validate: run.ndjson:1: {why}\ntrace-validate: note: run.ndjson: 2 result records in all, each an error (not a trace)\n"
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn no_records_at_the_end_is_said_with_what_to_give() {
    let empty = "warning: no records in the input: it is empty; give a trace, one JSON object \
                 per line (trace-convert makes one from logs)";
    for tool in [
        "trace-validate",
        "trace-slice",
        "trace-rescale",
        "trace-synth",
    ] {
        let run = Cmd::new(tool).stdin("").run();
        run.code(0);
        assert_eq!(run.stdout_str(), "");
        run.stderr_is(format!("{tool}: {empty}\n"));
    }
    let run = run_stdin("trace-replay", &["--sim", "--quiet"], "");
    run.code(0);
    assert_eq!(run.stdout_str(), "");
    run.stderr_ends(
        "trace-replay: warning: no requests replayed: the input has no records (or \
         --skip-invalid skipped them all); give a trace, one JSON object per line \
         (trace-convert makes one from logs)\n",
    );
    // A window past the end of the trace.
    run_file("trace-slice", &["--from", "100h"], data("sessions.jsonl"))
        .code(0)
        .stderr_is(
            "trace-slice: warning: 0 records written of 60 read: none was selected; check the \
             selection against the trace (trace-validate --report shows its span and sessions)\n",
        );
    // Langfuse traces without their observations.
    let langfuse = data("convert/traces_api_response.constructed.json");
    run_file("trace-convert", &[], langfuse)
        .code(0)
        .stderr_ends(
            "trace-convert: warning: 0 records written: the input holds 3 Langfuse traces but \
             no observations; give the observations too (their GENERATION observations are \
             the requests)\n",
        );
    // A --from that reads nothing in the input.
    run_file(
        "trace-convert",
        &["--from", "langfuse"],
        data("sessions.jsonl"),
    )
    .code(0)
    .stderr_is(
        "trace-convert: note: 0 records read, 0 written; 0 sessions; time span 0 s\n\
         trace-convert: warning: 0 records written: nothing in the input reads as langfuse \
         records; check --from (without it the format is recognised from the content)\n",
    );
}
