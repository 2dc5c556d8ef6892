//! trace-replay against servers that misbehave in every way seen in the
//! wild or in a fuzzing run: each record gets exactly one result, saying
//! what went wrong, memory stays bounded, no credential reaches any
//! output, and the run ends as a run that completed.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::servers::{Raw, hold_open, reset};
use crate::util::bin;

const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
const EVENT: &[u8] =
    b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n";
const STREAM: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
const JSON: &str = r#"{"choices":[{"message":{"content":"a"},"finish_reason":"stop"}]}"#;

/// The behaviour each record's prompt names.
fn hostile(head: &str, body: &str, mut conn: TcpStream) {
    let stream = body.contains("\"stream\":true");
    let case = body
        .split("case-")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("");
    let _ = match case {
        // A line that never ends, as fast as the client reads.
        "endless-line" => {
            let _ = conn.write_all(SSE_HEAD);
            let _ = conn.write_all(b"data: {\"choices\":[{\"delta\":{\"content\":\"");
            let piece = [b'x'; 16384];
            while conn.write_all(&piece).is_ok() {}
            Ok(())
        }
        // Headers, then nothing, the connection kept open.
        "no-end" => {
            let _ = conn.write_all(SSE_HEAD);
            hold_open(conn);
            Ok(())
        }
        // The request's head echoed in an error body and in an error event.
        "echo-body" => {
            let text = format!("you sent: {}", head.replace("\r\n", " | "));
            conn.write_all(
                format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                )
                .as_bytes(),
            )
        }
        "echo-event" => {
            let event = serde_json::json!({"error": {"message": head.replace("\r\n", " | ")}});
            let _ = conn.write_all(SSE_HEAD);
            conn.write_all(format!("data: {event}\n\ndata: [DONE]\n\n").as_bytes())
        }
        // One event, then a reset.
        "reset" => {
            let _ = conn.write_all(SSE_HEAD);
            let _ = conn.write_all(EVENT);
            let _ = conn.flush();
            std::thread::sleep(Duration::from_millis(20));
            reset(conn);
            Ok(())
        }
        // A whole answer, one byte at a time.
        "drip" => {
            let mut all = SSE_HEAD.to_vec();
            all.extend_from_slice(STREAM);
            for b in all {
                if conn.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            Ok(())
        }
        "garbage-data" => {
            let _ = conn.write_all(SSE_HEAD);
            conn.write_all(b"data: garbage\n\ndata: [DONE]\n\n")
        }
        "no-data-field" => {
            let _ = conn.write_all(SSE_HEAD);
            conn.write_all(b"{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n[DONE]\n\n")
        }
        "invalid-utf8" => {
            let _ = conn.write_all(SSE_HEAD);
            conn.write_all(b"data: \xff\xfe{\n\ndata: [DONE]\n\n")
        }
        // A Content-Length shorter, or longer, than the body sent.
        "short-length" => conn.write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 10\r\nconnection: close\r\n\r\n{JSON}"
            )
            .as_bytes(),
        ),
        "long-length" => conn.write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\nconnection: close\r\n\r\n{JSON}"
            )
            .as_bytes(),
        ),
        // HTTP/1.0: the body ends when the connection closes.
        "http10" => {
            if stream {
                let _ = conn.write_all(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
                conn.write_all(STREAM)
            } else {
                conn.write_all(
                    format!("HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{JSON}")
                        .as_bytes(),
                )
            }
        }
        "empty-choices" => {
            if stream {
                let _ = conn.write_all(SSE_HEAD);
                conn.write_all(b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n")
            } else {
                let body = r#"{"choices": []}"#;
                conn.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
            }
        }
        "html-500" => {
            let body = "<html><body><h1>500 Internal Server Error</h1></body></html>";
            conn.write_all(
                format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
        }
        // Accepted, read, and closed without a word.
        "close-at-once" => {
            drop(conn);
            Ok(())
        }
        _ => {
            if stream {
                let _ = conn.write_all(SSE_HEAD);
                conn.write_all(STREAM)
            } else {
                conn.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{JSON}",
                        JSON.len()
                    )
                    .as_bytes(),
                )
            }
        }
    };
}

/// trace-replay run to its end; its output, standard error, exit status
/// and peak resident memory in KiB (its VmHWM, for this child alone).
fn replay(args: &[&str], env: &[(&str, &str)], input: String) -> (String, String, i32, i64) {
    let mut cmd = Command::new(bin("trace-replay"));
    cmd.args(args)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Reaped by wait4 below, which also gives its peak memory.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let pid = i32::try_from(child.id()).unwrap();
    // The child's own high-water mark, read while it runs: wait4's
    // ru_maxrss would also count this test process's peak, which the
    // child's exec inherits (the other tests of this process make it large).
    let peak = std::thread::spawn(move || {
        let mut peak = 0i64;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
            else {
                break;
            };
            peak = peak.max(kib);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        peak
    });
    let (out, err) = crate::util::drain(&mut child);
    let mut status = 0;
    // SAFETY: wait4 on the child this function started, into zeroed
    // structures of the right types.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    writer.join().unwrap();
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (
        out.join().unwrap(),
        err.join().unwrap(),
        code,
        peak.join().unwrap(),
    )
}

/// A result's status and the start of its error ("": none).
type Want = (&'static str, &'static str);

/// Each case, with what it yields streamed and not streamed.
const CASES: &[(&str, Want, Want)] = &[
    ("ok", ("ok", ""), ("ok", "")),
    (
        "endless-line",
        (
            "error",
            "an event of the answer is over --max-answer-bytes 65536 bytes",
        ),
        (
            "error",
            "an event of the answer is over --max-answer-bytes 65536 bytes",
        ),
    ),
    (
        "no-end",
        ("timeout", "no complete answer within --timeout"),
        ("timeout", "no complete answer within --timeout"),
    ),
    (
        "echo-body",
        (
            "error",
            "HTTP 401: you sent: POST /v1/chat/completions HTTP/1.1 | ",
        ),
        (
            "error",
            "HTTP 401: you sent: POST /v1/chat/completions HTTP/1.1 | ",
        ),
    ),
    (
        "echo-event",
        ("error", "POST /v1/chat/completions HTTP/1.1 | "),
        ("error", "POST /v1/chat/completions HTTP/1.1 | "),
    ),
    (
        "reset",
        ("error", "response cut off: "),
        ("error", "response cut off: "),
    ),
    ("drip", ("ok", ""), ("ok", "")),
    (
        "garbage-data",
        ("error", "malformed SSE event: garbage"),
        ("error", "malformed SSE event: garbage"),
    ),
    (
        "no-data-field",
        ("error", "stream ended without [DONE]"),
        ("error", "stream ended without [DONE]"),
    ),
    (
        "invalid-utf8",
        ("error", "malformed SSE event: \u{fffd}\u{fffd}{"),
        ("error", "malformed SSE event: \u{fffd}\u{fffd}{"),
    ),
    (
        "short-length",
        ("error", "the response body is not JSON"),
        ("error", "the response body is not JSON"),
    ),
    (
        "long-length",
        ("error", "response cut off: "),
        ("error", "response cut off: "),
    ),
    ("http10", ("ok", ""), ("ok", "")),
    (
        "empty-choices",
        ("ok", ""),
        ("error", "no choices in the answer"),
    ),
    (
        "html-500",
        (
            "error",
            "HTTP 500: <html><body><h1>500 Internal Server Error</h1></body></html>",
        ),
        (
            "error",
            "HTTP 500: <html><body><h1>500 Internal Server Error</h1></body></html>",
        ),
    ),
    (
        "close-at-once",
        (
            "error",
            "request failed: connection closed before the response head was complete",
        ),
        (
            "error",
            "request failed: connection closed before the response head was complete",
        ),
    ),
];

/// Peak resident memory a run may reach, KiB: this one peaks near 11 MB;
/// the endless line, were it not cut at --max-answer-bytes, would take
/// gigabytes within the run's second.
const MAX_RSS_KIB: i64 = 64 * 1024;

#[test]
fn every_hostile_server_behaviour_yields_one_result_per_record() {
    let server = Raw::start(Arc::new(hostile));
    let trace: String = CASES
        .iter()
        .enumerate()
        .map(|(i, (case, ..))| {
            format!(
                "{{\"timestamp\":{i},\"text_input\":\"case-{case}\",\"output_length\":2,\"id\":\"{case}\"}}\n"
            )
        })
        .collect();
    let secrets = ["sk-hostile-key", "xk-hostile-header"];
    for streamed in [true, false] {
        let mut args = vec![
            "--quiet",
            "--url",
            &server.url,
            "--timeout",
            "1s",
            "--max-answer-bytes",
            "64K",
            "--abort-after",
            "0",
            "--header",
            "X-Api-Key: xk-hostile-header",
        ];
        if !streamed {
            args.push("--no-stream");
        }
        let (out, err, code, rss_kib) = replay(
            &args,
            &[("OPENAI_API_KEY", "sk-hostile-key")],
            trace.clone(),
        );
        assert_eq!(code, 0, "streamed {streamed}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            rss_kib < MAX_RSS_KIB,
            "streamed {streamed}: peak RSS {rss_kib} KiB"
        );
        for s in secrets {
            assert!(!out.contains(s), "{out}");
            assert!(!err.contains(s), "{err}");
        }
        let mut by_id = BTreeMap::new();
        for line in out.lines() {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = r["id"].as_str().unwrap().to_string();
            assert!(by_id.insert(id, r).is_none(), "twice: {line}");
        }
        assert_eq!(by_id.len(), CASES.len(), "{out}");
        for (i, (case, s, n)) in CASES.iter().enumerate() {
            let (status, error) = if streamed { s } else { n };
            let r = &by_id[*case];
            assert_eq!(r["index"], i, "{r}");
            assert_eq!(r["status"], *status, "streamed {streamed}: {r}");
            let got = r["error"].as_str().unwrap_or("");
            assert!(
                got.starts_with(error) && (error.is_empty() == got.is_empty()),
                "streamed {streamed}: {case}: want {error:?}, got {got:?}"
            );
        }
        // The echoed credentials are shown redacted.
        for case in ["echo-body", "echo-event"] {
            let e = by_id[case]["error"].as_str().unwrap();
            assert!(e.contains("authorization: [REDACTED]"), "{e}");
        }
        assert!(
            by_id["echo-event"]["error"]
                .as_str()
                .unwrap()
                .contains("x-api-key: [REDACTED]"),
        );
    }
}
