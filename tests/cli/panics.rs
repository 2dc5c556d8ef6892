//! A bug inside trace-replay (a panic) loses no record's line: every
//! record taken on and not yet answered gets an `error` result naming the
//! internal error, and the run ends with status 2 and one line saying so.
//!
//! The panics are provoked by `TRACEKIT_PANIC_AT=STAGE:N`, a hook that
//! only debug builds (the ones tests run) carry: release builds have no
//! such variable.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;

use crate::servers::{Raw, hold_open};
use crate::util::Cmd;

/// Answers the record whose prompt says `answered` with a short stream;
/// holds every other request open, unanswered, so that it is in flight
/// whenever the panic comes.
fn answer_one(_head: &str, body: &str, mut conn: TcpStream) {
    if body.contains("answered") {
        let _ = conn.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
              data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n\
              data: [DONE]\n\n",
        );
    } else {
        hold_open(conn);
    }
}

/// Six records due at once; the third (index 2) is the one answered.
fn trace() -> String {
    (0..6)
        .map(|i| {
            let prompt = if i == 2 { "answered" } else { "held" };
            format!("{{\"timestamp\":0,\"text_input\":\"{prompt} {i}\",\"output_length\":2,\"id\":\"r{i}\"}}\n")
        })
        .collect()
}

/// Per index, the end of its result's `error`, after the internal error's
/// own text (`Some(None)`: that text alone), or `None`: no line at all.
type Want = [Option<Option<&'static str>>; 6];

const NOT_SENT: &str = "not sent: the run was stopped";
const CUT: &str = "the run stopped before the answer completed";

#[test]
fn a_panic_anywhere_in_replay_leaves_one_error_line_per_record() {
    if !cfg!(debug_assertions) {
        // Release builds carry no TRACEKIT_PANIC_AT.
        return;
    }
    let server = Raw::start(Arc::new(answer_one));
    // What most lines say: cut short in flight, or never sent.
    const C: Option<Option<&str>> = Some(Some(CUT));
    const N: Option<Option<&str>> = Some(Some(NOT_SENT));
    // (stage, the file where it panics, what each index's line says).
    let cases: [(&str, &str, Want); 5] = [
        // Launching record 2: 0 and 1 are in flight, the rest unsent.
        ("dispatch", "src/engine/dispatch.rs", [C, C, N, N, N, N]),
        // Taking record 2 into the schedule, before the clock starts:
        // nothing was sent; record 2 is known by its index only.
        (
            "accept",
            "src/engine/dispatch.rs",
            [N, N, Some(Some("not sent")), N, N, N],
        ),
        // The reader, preparing record 2: 2 and later are never taken on.
        ("read", "src/engine/feed.rs", [N, N, None, None, None, None]),
        // Record 2's task, once answered: the others are cut short.
        ("task", "src/engine/network.rs", [C, C, Some(None), C, C, C]),
        // Writing record 2's result: it is written in its simplest form.
        ("write", "src/engine/output.rs", [C, C, Some(None), C, C, C]),
    ];
    for (stage, file, want) in cases {
        for output in ["pipe", "file"] {
            let what = format!("injected panic (TRACEKIT_PANIC_AT={stage}:2)");
            let dir = crate::util::TestDir::new(&format!("panic-{stage}"));
            let mut cmd = dir
                .cmd("trace-replay")
                .args(["--quiet", "--url", &server.url])
                .env("TRACEKIT_PANIC_AT", &format!("{stage}:2"));
            if output == "file" {
                // Results written by the runtime's own thread.
                cmd = cmd.args(["-o", "out.ndjson"]);
            }
            let run = cmd.stdin(trace()).run();
            run.code(2);
            let text = match output {
                "file" => String::from_utf8(dir.read("out.ndjson")).unwrap(),
                _ => run.stdout_str(),
            };
            let mut results: Vec<serde_json::Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            results.sort_by_key(|r| r["index"].as_u64());
            let wanted: Vec<(usize, Option<&str>)> = want
                .iter()
                .enumerate()
                .filter_map(|(i, w)| w.map(|w| (i, w)))
                .collect();
            assert_eq!(results.len(), wanted.len(), "{stage} {output}: {text}");
            for (r, (i, tail)) in results.iter().zip(wanted) {
                assert_eq!(r["index"], i, "{stage} {output}: {r}");
                assert_eq!(r["status"], "error", "{stage} {output}: {r}");
                let error = r["error"].as_str().unwrap();
                assert!(
                    error.starts_with(&format!("internal error at {file}:")),
                    "{stage} {output}: {error}"
                );
                let end = match tail {
                    Some(tail) => format!("{what}: {tail}"),
                    None => what.clone(),
                };
                assert!(error.ends_with(&end), "{stage} {output}: {error}");
                if !(stage == "accept" && i == 2) {
                    assert_eq!(r["id"], format!("r{i}"), "{stage} {output}: {r}");
                }
            }
            // One line says what happened; no panic message, no backtrace.
            let errors: Vec<&str> = run
                .stderr
                .lines()
                .filter(|l| l.starts_with("trace-replay: error: "))
                .collect();
            assert_eq!(errors.len(), 1, "{stage} {output}: {}", run.stderr);
            assert!(
                errors[0].starts_with(&format!("trace-replay: error: internal error at {file}:")),
                "{}",
                errors[0]
            );
            assert!(
                errors[0].contains(&format!(
                    "{what}: the run stopped; every record taken on has its result"
                )),
                "{}",
                errors[0]
            );
            assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
            assert!(!run.stderr.contains("RUST_BACKTRACE"), "{}", run.stderr);
        }
    }
}

#[test]
fn a_panic_in_an_exchange_fails_that_request_only() {
    if !cfg!(debug_assertions) {
        return;
    }
    let server = Raw::start(Arc::new(answer_one));
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", &server.url, "--timeout", "300ms"])
        .env("TRACEKIT_PANIC_AT", "exchange:2")
        .stdin(trace())
        .run();
    run.code(0);
    let mut results = run.json_lines();
    results.sort_by_key(|r| r["index"].as_u64());
    let statuses: Vec<&str> = results
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "timeout", "timeout", "error", "timeout", "timeout", "timeout"
        ]
    );
    let error = results[2]["error"].as_str().unwrap();
    assert!(
        error.starts_with("internal error at src/engine/exchange.rs:")
            && error.ends_with(": injected panic (TRACEKIT_PANIC_AT=exchange:2)"),
        "{error}"
    );
    run.stderr_has(&format!(
        "trace-replay: warning: record 3: {error} (its result is an error; the run goes on)\n"
    ));
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn a_panic_in_the_metrics_scraper_stops_the_scrapes_only() {
    if !cfg!(debug_assertions) {
        return;
    }
    let dir = crate::util::TestDir::new("panic-scrape");
    let trace = dir.write(
        "t.jsonl",
        "{\"timestamp\":0,\"input_length\":10,\"output_length\":20}\n",
    );
    let out = dir.join("m.ndjson");
    // The second scrape panics as it is written: the first is in the file, the
    // request is answered, the run ends 0 with one line about the scraper.
    let run = Cmd::new("trace-replay")
        .env("TRACEKIT_PANIC_AT", "scrape:2")
        .args(["--sim", "--quiet", "--sim-arg=--itl-ms=20"])
        .args(["--metrics-every", "50ms", "--metrics-out"])
        .arg(&out)
        .arg(&trace)
        .run();
    run.code(0);
    let results = run.json_lines();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["status"], "ok");
    assert!(
        run.stderr.contains(
            "trace-replay: warning: --metrics-url: the scrapes stopped: internal error at \
             src/engine/scrape.rs:"
        ) && run
            .stderr
            .contains("injected panic (TRACEKIT_PANIC_AT=scrape:2)"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
}
