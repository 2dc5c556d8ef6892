//! trace-replay against scripted servers: what the bodies carry, answers
//! at the edges of the protocol, connections, TLS and proxies.

use serde_json::{Value, json};

use crate::replay::{ms, text_trace};
use crate::servers::{Answer, BODY_LIMIT, Scripted, Tls};
use crate::util::{Cmd, by_index, data, replay, trace};

pub(crate) fn scripted_answer(body: &str) -> Answer {
    let usage = r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#;
    if body.contains("case-split") {
        // Byte by byte, CRLF, a comment, `data:` without a space,
        // reasoning, a tool call, a usage-only final chunk.
        let stream = format!(
            ": keep-alive\r\n\r\ndata:{{\"choices\":[{{\"delta\":{{\"role\":\"assistant\"}}}}]}}\r\n\r\n\
data: {{\"choices\":[{{\"delta\":{{\"reasoning_content\":\"hm\"}}}}]}}\r\n\r\n\
data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"name\":\"f\"}}}}]}}}}]}}\n\n\
data: {{\"choices\":[{{\"delta\":{{\"content\":\"é\"}},\"finish_reason\":\"tool_calls\"}}]}}\n\n\
data: {usage}\n\ndata: [DONE]\n\n"
        );
        Answer::sse(stream.as_bytes(), 1)
    } else if body.contains("case-429") {
        Answer::json(
            "429 Too Many Requests",
            r#"{"error":{"message":"slow down","type":"rate_limit"}}"#,
        )
    } else if body.contains("case-redirect") {
        Answer::json("307 Temporary Redirect", "")
    } else if body.contains("case-continue") {
        // An interim 100 head first; then chunks with an extension and a
        // trailer, byte by byte.
        let events = [
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n".to_string(),
            "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n".to_string(),
            format!("data: {usage}\n\ndata: [DONE]\n\n"),
        ];
        let mut body: String = events
            .iter()
            .map(|e| format!("{:X};x=1\r\n{e}\r\n", e.len()))
            .collect();
        body.push_str("0\r\nx-trailer: done\r\n\r\n");
        Answer {
            head: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\
                   content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                .into(),
            body: body.into_bytes(),
            piece: 1,
            close_on_next: false,
        }
    } else if body.contains("case-cut") {
        Answer::cut_chunked("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n")
    } else if body.contains("case-nodone") {
        Answer::sse(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            1000,
        )
    } else if body.contains("case-bad") {
        Answer::sse(b"data: {\"choices\":[{\"delta\"\n\ndata: [DONE]\n\n", 1000)
    } else if body.contains("case-error-event") {
        Answer::sse(
            b"data: {\"error\":{\"message\":\"out of memory\"}}\n\ndata: [DONE]\n\n",
            1000,
        )
    } else {
        // No usage: token counts stay null.
        Answer::sse(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            1000,
        )
    }
}

#[test]
fn scripted_answers_edge_cases_and_request_bodies() {
    let server = Scripted::start(scripted_answer);
    let cases = [
        "case-split",
        "case-429",
        "case-cut",
        "case-nodone",
        "case-bad",
        "case-error-event",
        "case-nousage",
        "case-redirect",
        "case-continue",
    ];
    let recs: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = json!({"timestamp": i, "text_input": c, "output_length": 3});
            if i == 0 {
                r["extra"] = json!({"temperature": 0.5, "top_k": 1});
            }
            r
        })
        .collect();
    let run = Cmd::new("trace-replay")
        .args([
            "--quiet",
            "--url",
            &format!("{}/v1", server.url),
            "--model",
            "m",
            "--header",
            "X-Team: serving",
            "--extra",
            r#"{"temperature": 0, "seed": 3}"#,
            "--ignore-eos",
            "--min-tokens",
        ])
        .env("OPENAI_API_KEY", "sk-secret-key")
        .stdin(trace(&recs))
        .run();
    run.code(0);
    assert!(!run.stdout_str().contains("sk-secret") && !run.stderr.contains("sk-secret"));
    let r = by_index(&run, cases.len());
    let split = &r[&0];
    assert_eq!(split["status"], "ok", "{split}");
    assert_eq!(
        (
            &split["prompt_tokens"],
            &split["completion_tokens"],
            &split["cached_tokens"]
        ),
        (&json!(7), &json!(3), &json!(4))
    );
    assert_eq!(split["finish_reason"], "tool_calls");
    assert_eq!(split["itl_ms"].as_array().unwrap().len(), 2, "{split}");
    assert!(
        ms(&split["first_chunk_ms"]) < ms(&split["ttft_ms"]),
        "{split}"
    );

    let want_errors = [
        (1, Some(429u16), "HTTP 429: slow down"),
        (2, Some(200), "response cut off"),
        (3, Some(200), "stream ended without [DONE]"),
        (
            4,
            Some(200),
            "malformed SSE event: {\"choices\":[{\"delta\"",
        ),
        (5, Some(200), "out of memory"),
        // Redirects are not followed: that would time two requests as one.
        (7, Some(307), "HTTP 307"),
    ];
    for (i, http, msg) in want_errors {
        let x = &r[&i];
        assert_eq!(x["status"], "error", "{x}");
        assert_eq!(x["http_status"].as_u64(), http.map(u64::from), "{x}");
        assert!(x["error"].as_str().unwrap().starts_with(msg), "{x}");
    }
    let continued = &r[&8];
    assert_eq!(
        (
            &continued["status"],
            &continued["http_status"],
            &continued["completion_tokens"]
        ),
        (&json!("ok"), &json!(200), &json!(3)),
        "{continued}"
    );
    assert_eq!(continued["itl_ms"].as_array().unwrap().len(), 1);
    let nousage = &r[&6];
    assert_eq!(nousage["status"], "ok", "{nousage}");
    assert_eq!(nousage["completion_tokens"], Value::Null);
    assert_eq!(nousage["finish_reason"], "stop");

    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), cases.len());
    let first = seen.iter().find(|s| s.body.contains("case-split")).unwrap();
    assert!(
        first
            .head
            .starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{}",
        first.head
    );
    let head = first.head.to_ascii_lowercase();
    assert!(
        head.contains("\r\nauthorization: bearer sk-secret-key\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nx-team: serving\r\n"), "{head}");
    let host = server.url.strip_prefix("http://").unwrap();
    assert!(head.contains(&format!("\r\nhost: {host}\r\n")), "{head}");
    assert_eq!(
        head.matches("\r\ncontent-type: application/json\r\n")
            .count(),
        1,
        "{head}"
    );
    let body: Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(
        body,
        json!({"model": "m", "messages": [{"role": "user", "content": "case-split"}],
               "max_tokens": 3, "min_tokens": 3, "ignore_eos": true, "stream": true,
               "stream_options": {"include_usage": true},
               "temperature": 0.5, "seed": 3, "top_k": 1})
    );
}

#[test]
fn connections_closed_unannounced_are_never_errors_directly_or_through_a_proxy() {
    fn answer(_: &str) -> Answer {
        Answer::json_unannounced_close(
            r#"{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        )
    }
    let server = Scripted::start(answer);
    // Sent one after another, each on the connection the server closed
    // after the previous answer; the proxy run goes through reqwest.
    let input = text_trace(30, 2, 1);
    for proxy in [None, Some(server.url.as_str())] {
        let mut cmd =
            Cmd::new("trace-replay").args(["--quiet", "--no-stream", "--url", &server.url]);
        if let Some(p) = proxy {
            cmd = cmd.env("http_proxy", p);
        }
        let run = cmd.stdin(input.clone()).run();
        run.code(0);
        let results = by_index(&run, 30);
        let errors: Vec<&Value> = results.values().filter(|x| x["status"] != "ok").collect();
        assert!(errors.is_empty(), "proxy {proxy:?}: {errors:?}");
    }
}

#[test]
fn an_answer_sent_before_the_body_was_read_is_the_result() {
    // The server answers 413 after the head, and closes with most of the
    // 16 MB body unread, which fails the write, or keeps the connection
    // open unread, which stalls it. The result gives the server's answer,
    // directly and through reqwest (a proxy); except that hyper, under
    // reqwest, sometimes reports the reset write before it reads the
    // answer left on a closed connection (about 1 run in 20).
    let server = Scripted::start(scripted_answer);
    let prompt = "x".repeat(16 * BODY_LIMIT);
    let input = trace(&[
        json!({"timestamp": 0, "text_input": prompt, "output_length": 1}),
        json!({"timestamp": 1, "text_input": "case-nousage", "output_length": 1}),
    ]);
    for proxy in [None, Some(server.url.as_str())] {
        for open in ["close", "keep-open"] {
            let mut cmd = Cmd::new("trace-replay").args([
                "--quiet",
                "--timeout",
                "20s",
                "--url",
                &server.url,
                "--header",
                &format!("x-early: {open}"),
            ]);
            if let Some(p) = proxy {
                cmd = cmd.env("http_proxy", p);
            }
            let run = cmd.stdin(input.clone()).run();
            run.code(0);
            let r = by_index(&run, 2);
            let early = &r[&0];
            let got = (&early["status"], &early["http_status"], &early["error"]);
            let answer = (
                &json!("error"),
                &json!(413),
                &json!("HTTP 413: request body too large"),
            );
            let reset = (
                &json!("error"),
                &Value::Null,
                &json!("request failed: Connection reset by peer (os error 104)"),
            );
            if proxy.is_some() && open == "close" {
                assert!(
                    got == answer || got == reset,
                    "proxy {proxy:?}, {open}: {got:?}"
                );
            } else {
                assert_eq!(got, answer, "proxy {proxy:?}, {open}");
            }
            assert_eq!(r[&1]["status"], "ok", "proxy {proxy:?}: {}", r[&1]);
        }
    }
}

#[test]
fn https_servers_are_trusted_through_a_ca_file_or_with_insecure() {
    let server = Tls::start(
        r#"{"choices":[{"text":"a","finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    );
    let input = text_trace(3, 1, 1);
    // A private CA's certificate is refused, with the reason, before the
    // run starts.
    let run = replay(&["--no-stream", "--url", &server.url], &input);
    run.code(2);
    assert_eq!(run.stdout_str(), "");
    assert_eq!(
        run.stderr,
        format!(
            "trace-replay: error: cannot reach the server at {}: invalid peer certificate: UnknownIssuer\n",
            server.url
        )
    );
    let ca = data("tls/ca.pem");
    for flag in [
        ["--cacert", ca.to_str().unwrap()].as_slice(),
        &["--insecure"],
    ] {
        let mut args = vec!["--no-stream", "--url", &server.url];
        args.extend(flag);
        let run = replay(&args, &input);
        run.code(0);
        for x in by_index(&run, 3).values() {
            assert_eq!(
                (&x["status"], &x["http_status"], &x["completion_tokens"]),
                (&json!("ok"), &json!(200), &json!(1)),
                "{flag:?}: {x}"
            );
        }
    }
}

#[test]
fn a_ca_file_without_certificates_is_a_usage_error() {
    let missing = replay(
        &["--url", "https://127.0.0.1:9", "--cacert", "no-such.pem"],
        &text_trace(1, 1, 1),
    );
    missing
        .code(2)
        .stderr_is("trace-replay: error: no-such.pem: no such file or directory\n");
    let trace = data("sessions.jsonl");
    let trace = trace.to_str().unwrap();
    let not_pem = replay(
        &["--url", "https://127.0.0.1:9", "--cacert", trace],
        &text_trace(1, 1, 1),
    );
    not_pem.code(2).stderr_is(format!(
        "trace-replay: error: --cacert {trace}: no certificate in it (a PEM file has \"-----BEGIN CERTIFICATE-----\" blocks)\n"
    ));
}

#[test]
fn a_proxy_in_the_environment_is_used() {
    // The scripted server plays the proxy: it gets the request in
    // absolute form, for a host that does not exist.
    let proxy = Scripted::start(scripted_answer);
    let run = Cmd::new("trace-replay")
        .args(["--quiet", "--url", "http://tracekit.invalid:9/v1"])
        .env("http_proxy", &proxy.url)
        .stdin(text_trace(2, 1, 2))
        .run();
    run.code(0);
    for x in by_index(&run, 2).values() {
        assert_eq!(x["status"], "ok", "{x}");
    }
    let seen = proxy.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for s in seen {
        assert!(
            s.head
                .starts_with("POST http://tracekit.invalid:9/v1/chat/completions HTTP/1.1\r\n"),
            "{}",
            s.head
        );
    }
}

#[test]
fn payloads_go_verbatim_and_token_ids_as_the_prompt() {
    let server = Scripted::start(scripted_answer);
    let payload = r#"{"model":"x","prompt":"case-nousage","max_tokens":2,"stream":true,"n":1}"#;
    let input = format!(
        "{{\"timestamp\":0,\"payload\":{payload}}}\n{}\n",
        json!({"timestamp": 1, "prompt_token_ids": [5, 6, 7], "input_length": 3, "output_length": 2})
    );
    let run = replay(&["--url", &server.url, "--endpoint", "completions"], &input);
    run.code(0);
    by_index(&run, 2);
    let seen = server.seen.lock().unwrap().clone();
    let bodies: Vec<&str> = seen.iter().map(|s| s.body.as_str()).collect();
    assert!(bodies.contains(&payload), "{bodies:?}");
    let ids = bodies.iter().find(|b| !b.contains("case")).unwrap();
    let v: Value = serde_json::from_str(ids).unwrap();
    assert_eq!(v["prompt"], json!([5, 6, 7]));
    assert!(
        seen.iter()
            .all(|s| s.head.starts_with("POST /v1/completions "))
    );
}
