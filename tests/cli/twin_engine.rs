//! The twin as the replay engine's executor: an offline run stopped by a
//! signal accounts for every record as a replay does, with the same texts
//! and exit statuses; replay's flags apply to it.

use std::process::Stdio;

use crate::util::{TestDir, file_lines};

/// α 10 ms a step and nothing else, no slot limit.
const TEN_MS: &str = r#"{"tracekit_profile": 1, "alpha_ms": 10.0, "beta_ms": 0.0,
    "gamma_ms": 0.0, "delta_ms": 0.0, "epsilon_ms": 0.0, "slots": 0,
    "prefill_chunk": 2048, "cache_blocks": 0, "block_size": 512}"#;

/// `n` requests 1 ms apart, 2 output tokens each.
fn trace(n: usize) -> String {
    (0..n)
        .map(|k| format!("{{\"timestamp\":{k},\"input_length\":10,\"output_length\":2}}\n"))
        .collect()
}

/// Every index of `0..n` once in `lines`; the statuses and errors of the
/// results not ok.
fn account(lines: &[String], n: usize) -> Vec<(String, String)> {
    assert_eq!(lines.len(), n);
    let mut seen = vec![false; n];
    let mut not_ok = Vec::new();
    for line in lines {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let i = r["index"].as_u64().unwrap() as usize;
        assert!(!seen[i], "index {i} twice");
        seen[i] = true;
        if r["status"] != "ok" {
            let status = r["status"].as_str().unwrap().to_string();
            let error = r["error"].as_str().unwrap_or_default().to_string();
            not_ok.push((status, error));
        }
    }
    not_ok
}

#[test]
fn a_signal_ends_an_offline_run_with_a_result_for_every_record() {
    let n = 200_000;
    let dir = TestDir::new("twin-engine-signals");
    dir.write("p.json", TEN_MS);
    dir.write("trace.jsonl", trace(n));
    for (sig, code) in [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ] {
        let out_path = dir.join(&format!("out-{sig}.ndjson"));
        let out = std::fs::File::create(&out_path).unwrap();
        let child = dir.spawn(
            "trace-sim",
            "--offline --profile p.json trace.jsonl",
            Stdio::from(out),
        );
        for _ in 0..1000 {
            if std::fs::metadata(&out_path).is_ok_and(|m| m.len() > 0) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on a child the test started.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert_eq!(done.status.code(), Some(code), "{stderr}");
        assert!(stderr.contains("interrupted: sending stopped"), "{stderr}");
        // The rest of the file is read and given `cancelled`, with the
        // replay's text; the requests in the model finish within --grace.
        let not_ok = account(&file_lines(&out_path), n);
        assert!(!not_ok.is_empty(), "signal {sig} came after the end");
        for (status, error) in &not_ok {
            assert_eq!(status, "cancelled");
            assert_eq!(error, "not sent: the run was stopped");
        }
    }
}

#[test]
fn replay_flags_apply_to_the_twin() {
    // --concurrency 1: one request at a time, each sent when the one
    // before it is done: 10 ms a step, two steps (prefill, one decode) a
    // request, so request k is sent at 20k ms whatever its timestamp.
    let dir = TestDir::new("twin-engine-closed");
    dir.write("p.json", TEN_MS);
    dir.write("trace.jsonl", trace(4));
    let run = dir
        .cmd("trace-sweep")
        .args([
            "--offline",
            "--profile",
            "p.json",
            "--slo",
            "ttft=1s",
            "--speeds",
            "1",
            "--replay-arg=--concurrency=1",
            "-o",
            "runs",
            "trace.jsonl",
        ])
        .run();
    run.code(0);
    let mut sent: Vec<(u64, f64)> = file_lines(dir.join("runs/speed-1.ndjson"))
        .iter()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            (r["index"].as_u64().unwrap(), r["sent_ms"].as_f64().unwrap())
        })
        .collect();
    sent.sort_by_key(|(i, _)| *i);
    assert_eq!(sent, vec![(0, 0.0), (1, 20.0), (2, 40.0), (3, 60.0)]);
}
