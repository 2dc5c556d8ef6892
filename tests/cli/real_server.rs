//! Replay against a real server: llama.cpp's llama-server on CPU with a tiny
//! random-weight model that has GPT-2's tokenizer (so its prompt token
//! counts equal tiktoken's r50k_base). `scripts/real-server.sh` builds both
//! into a cache; without it these tests say they were skipped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Run, TestDir, trace};

/// The cached server binary and model, if scripts/real-server.sh made them.
fn cached() -> Option<(PathBuf, PathBuf)> {
    let cache = std::env::var_os("TRACEKIT_SERVER_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tracekit-real-servers"))
        })?;
    let model = cache.join("models/tiny-gpt2.gguf");
    let server = std::fs::read_dir(&cache)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/llama-server"))
        .find(|p| p.is_file())?;
    model.is_file().then_some((server, model))
}

/// A llama-server on a free loopback port, killed when dropped.
struct Llama {
    child: Child,
    url: String,
}

impl Llama {
    /// Start one with `extra` llama-server flags, and make the test's
    /// directory `name`; `None` (with a note) when the server is not built.
    fn start_in(name: &str, slots: u32, context: u32, extra: &[&str]) -> Option<(Llama, TestDir)> {
        let llama = Llama::start_with(slots, context, extra)?;
        Some((llama, TestDir::new(name)))
    }

    fn start_with(slots: u32, context: u32, extra: &[&str]) -> Option<Llama> {
        let Some((server, model)) = cached() else {
            // CI builds the server first and sets this, so a broken build
            // fails there instead of skipping.
            assert!(
                std::env::var_os("TRACEKIT_REQUIRE_REAL_SERVER").is_none(),
                "llama-server is not built: run scripts/real-server.sh"
            );
            eprintln!("skipped: run scripts/real-server.sh to build llama-server for these tests");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(server)
            .args(["-m", model.to_str().unwrap(), "--host", "127.0.0.1"])
            .args([
                "--port",
                &port.to_string(),
                "-a",
                "tiny",
                "-t",
                "1",
                "-n",
                "4096",
            ])
            .args([
                "-c",
                &context.to_string(),
                "-np",
                &slots.to_string(),
                "--no-webui",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let llama = Llama {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !llama.healthy(port) {
            assert!(
                Instant::now() < deadline,
                "llama-server did not become ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(llama)
    }

    fn healthy(&self, port: u16) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return false;
        };
        let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.1 200")
    }
}

impl Drop for Llama {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Llama {
    /// trace-synth (GPT-2 tokenizer) then trace-replay against this server,
    /// in `dir`; the results (the replay must exit 0).
    fn synth_and_replay(&self, dir: &TestDir, input: &str, replay_args: &[&str]) -> Run {
        dir.write("trace.jsonl", input);
        let synth = dir
            .cmd("trace-synth")
            .args([
                "--tokenizer",
                "r50k_base",
                "-o",
                "prompts.jsonl",
                "trace.jsonl",
            ])
            .run();
        synth.ok();
        let run = dir
            .cmd("trace-replay")
            .args(["--quiet", "--url", &self.url])
            .args(replay_args)
            .arg("prompts.jsonl")
            .run();
        run.code(0);
        run
    }
}

fn summarize(dir: &TestDir, results: &Run) -> Value {
    dir.write("results.ndjson", &results.stdout);
    let s = dir
        .cmd("trace-summarize")
        .args(["--format", "json", "results.ndjson"])
        .run();
    s.ok();
    s.json()
}

/// Records of varied lengths whose hash_ids share prefixes.
fn varied(n: u64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let len = 1 + (i * 37) % 1200;
            let blocks = len.div_ceil(512);
            let ids: Vec<u64> = (0..blocks).map(|k| if k == 0 { i % 4 } else { 100 + i * 10 + k }).collect();
            json!({"timestamp": i * 4, "input_length": len, "output_length": 1 + i % 6, "hash_ids": ids})
        })
        .collect()
}

#[test]
fn completions_prompt_and_output_tokens_are_exact() {
    let Some((llama, dir)) = Llama::start_in("real-completions", 4, 65536, &[]) else {
        return;
    };
    let run = llama.synth_and_replay(
        &dir,
        &trace(&varied(200)),
        &["--endpoint", "completions", "--ignore-eos"],
    );
    let results = run.json_lines();
    assert_eq!(results.len(), 200);
    for r in &results {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["prompt_tokens"], r["input_length"], "{r}");
        assert_eq!(r["completion_tokens"], r["output_length"], "{r}");
    }
    let s = summarize(&dir, &run);
    for key in ["input_length_error", "output_length_error"] {
        let e = &s[key];
        assert_eq!(
            (&e["mean"], &e["min"], &e["max"]),
            (&json!(0.0), &json!(0), &json!(0)),
            "{key}: {e}"
        );
    }
}

#[test]
fn chat_streams_have_timings_usage_and_a_constant_template_offset() {
    let Some((llama, dir)) = Llama::start_in("real-chat", 4, 65536, &[]) else {
        return;
    };
    let run = llama.synth_and_replay(&dir, &trace(&varied(60)), &["--ignore-eos"]);
    let results = run.json_lines();
    // llama.cpp withholds a token that is part of a multi-byte character,
    // so a very short answer may carry no content at all: no TTFT then.
    let no_content = results.iter().filter(|r| r["ttft_ms"].is_null()).count();
    assert!(
        no_content <= results.len() / 10,
        "{no_content} without content"
    );
    let offsets: std::collections::BTreeSet<i64> = results
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "ok", "{r}");
            assert!(r["first_chunk_ms"].is_f64(), "{r}");
            assert!(
                r["ttft_ms"].is_f64() || r["itl_ms"].as_array().unwrap().is_empty(),
                "{r}"
            );
            let out = r["output_length"].as_u64().unwrap();
            assert_eq!(r["completion_tokens"], out, "{r}");
            assert!(
                r["itl_ms"].as_array().unwrap().len() as u64 <= out.saturating_sub(1),
                "{r}"
            );
            r["prompt_tokens"].as_i64().unwrap() - r["input_length"].as_i64().unwrap()
        })
        .collect();
    // The tiny model's template adds the same tokens to every one-message chat.
    assert_eq!(offsets.len(), 1, "{offsets:?}");
    let offset = *offsets.iter().next().unwrap();
    assert!(offset > 0);
    let e = &summarize(&dir, &run)["input_length_error"];
    assert_eq!(
        (&e["min"], &e["max"]),
        (&json!(offset), &json!(offset)),
        "{e}"
    );
}

#[test]
fn kept_alive_streams_in_a_row_never_fail() {
    // llama-server closes the connection after each streamed answer; the
    // pooled connection is then stale, and replay must send again.
    let Some((llama, dir)) = Llama::start_in("real-keepalive", 1, 4096, &[]) else {
        return;
    };
    let recs: Vec<Value> = (0..500)
        .map(|i| json!({"timestamp": i, "input_length": 8, "output_length": 2}))
        .collect();
    let run = llama.synth_and_replay(&dir, &trace(&recs), &["--concurrency", "1"]);
    let results = run.json_lines();
    assert_eq!(results.len(), 500);
    let errors: Vec<&Value> = results.iter().filter(|r| r["status"] != "ok").collect();
    assert!(
        errors.is_empty(),
        "{} errors, first: {}",
        errors.len(),
        errors[0]
    );
}

#[test]
fn more_requests_than_slots_queue_on_the_server_not_in_the_client() {
    let Some((llama, dir)) = Llama::start_in("real-slots", 2, 8192, &[]) else {
        return;
    };
    let recs: Vec<Value> = (0..12)
        .map(|i| json!({"timestamp": 0, "input_length": 64 + i, "output_length": 48}))
        .collect();
    let run = llama.synth_and_replay(&dir, &trace(&recs), &["--ignore-eos"]);
    let results = run.json_lines();
    let mut ttft: Vec<f64> = results
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "ok", "{r}");
            // Open loop: every request is due at 0 and none waits for another.
            assert_eq!(r["scheduled_ms"], 0.0, "{r}");
            r["ttft_ms"].as_f64().unwrap()
        })
        .collect();
    ttft.sort_by(f64::total_cmp);
    // Ten of the twelve wait for a slot: their TTFT includes whole answers.
    assert!(ttft[11] > 2.0 * ttft[0], "{ttft:?}");
}

#[test]
fn a_prompt_over_the_context_is_an_error_result_and_the_run_goes_on() {
    let Some((llama, dir)) = Llama::start_in("real-context", 1, 1024, &[]) else {
        return;
    };
    let recs = [
        json!({"timestamp": 0, "input_length": 20, "output_length": 2}),
        json!({"timestamp": 1, "input_length": 3000, "output_length": 2}),
        json!({"timestamp": 2, "input_length": 20, "output_length": 2}),
    ];
    let run = llama.synth_and_replay(&dir, &trace(&recs), &["--endpoint", "completions"]);
    let mut results = run.json_lines();
    results.sort_by_key(|r| r["index"].as_u64());
    assert_eq!(results[0]["status"], "ok");
    assert_eq!(results[2]["status"], "ok");
    let big = &results[1];
    assert_eq!(big["status"], "error", "{big}");
    assert_eq!(big["http_status"], 400, "{big}");
    assert!(
        big["error"].as_str().unwrap().starts_with("HTTP 400: "),
        "{big}"
    );
}

#[test]
fn a_server_killed_mid_run_still_gives_one_result_per_record() {
    let Some((mut llama, dir)) = Llama::start_in("real-killed", 2, 4096, &[]) else {
        return;
    };
    let recs: Vec<Value> = (0..100)
        .map(|i| json!({"timestamp": i * 20, "input_length": 16, "output_length": 16}))
        .collect();
    dir.write("trace.jsonl", trace(&recs));
    let args = format!(
        "--quiet --url {} --ignore-eos -o out.ndjson trace.jsonl",
        llama.url
    );
    let child = dir.spawn("trace-replay", &args, Stdio::inherit());
    for _ in 0..500 {
        let n = std::fs::read_to_string(dir.join("out.ndjson")).map_or(0, |t| t.lines().count());
        if n >= 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    llama.child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    crate::util::assert_exit(&out, 0);
    let text = String::from_utf8(dir.read("out.ndjson")).unwrap();
    let mut seen: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    seen.sort();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let errors = text
        .lines()
        .filter(|l| l.contains("\"status\":\"error\""))
        .count();
    assert!(errors >= 50, "{errors}");
}

#[test]
fn a_delta_session_carries_the_real_answers_and_its_routing_header() {
    let Some((llama, dir)) = Llama::start_in("real-delta", 1, 4096, &[]) else {
        return;
    };
    let turn = |id: &str, text: &str, delta: bool| {
        let mut r = json!({"id": id, "session_id": "s", "output_length": 8,
                           "messages": [{"role": "user", "content": text}]});
        if delta {
            r["message_mode"] = json!("delta");
        } else {
            r["timestamp"] = json!(0);
        }
        r
    };
    dir.write(
        "trace.jsonl",
        trace(&[
            turn("t1", "Tell me a story about a lighthouse.", false),
            turn("t2", "And then what happened?", true),
            turn("t3", "How does it end?", true),
        ]),
    );
    let run = dir
        .cmd("trace-replay")
        .args(["--quiet", "--url", &llama.url, "--ignore-eos"])
        .args(["--session-header", "X-Session-Id", "trace.jsonl"])
        .run();
    run.code(0);
    let r = run.json_lines();
    assert_eq!(r.len(), 3);
    for (k, x) in r.iter().enumerate() {
        assert_eq!(x["status"], "ok", "{x}");
        assert_eq!(x["turn"], k as u64 + 1, "{x}");
        assert_eq!(x["completion_tokens"], 8, "{x}");
    }
    // Each turn's prompt holds the previous one, the answer the server
    // gave (8 tokens, re-tokenized) and a new message with its template:
    // it grows by more than the answer alone.
    let prompt = |k: usize| r[k]["prompt_tokens"].as_u64().unwrap();
    for k in 1..3 {
        assert!(prompt(k) > prompt(k - 1) + 8, "{} then {}", r[k - 1], r[k]);
    }
}

/// llama-server with --metrics, scraped every 100 ms during a run of twelve
/// requests on two slots: every scrape has llama.cpp's samples, the
/// requests-processing gauge rises above 0 during the run, and the
/// counters after the run count the answers' tokens.
#[test]
fn the_servers_metrics_are_scraped_beside_the_results() {
    let Some((llama, dir)) = Llama::start_in("real-metrics", 2, 8192, &["--metrics"]) else {
        return;
    };
    let recs: Vec<Value> = (0..12)
        .map(|i| json!({"timestamp": 0, "input_length": 64 + i, "output_length": 48}))
        .collect();
    let metrics_url = format!("{}/metrics", llama.url);
    let run = llama.synth_and_replay(
        &dir,
        &trace(&recs),
        &[
            "--ignore-eos",
            "--metrics-url",
            &metrics_url,
            "--metrics-every",
            "100ms",
            "--metrics-out",
            "metrics.ndjson",
        ],
    );
    assert!(run.json_lines().iter().all(|r| r["status"] == "ok"));
    let text = std::fs::read_to_string(dir.join("metrics.ndjson")).unwrap();
    let scrapes: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(scrapes.len() >= 2, "{text}");
    let value = |s: &Value, k: &str| s["samples"][k].as_f64();
    for s in &scrapes {
        assert!(value(s, "llamacpp:requests_processing").is_some(), "{s}");
        assert!(value(s, "llamacpp:tokens_predicted_total").is_some(), "{s}");
    }
    let busiest = scrapes
        .iter()
        .filter_map(|s| value(s, "llamacpp:requests_processing"))
        .fold(0.0, f64::max);
    assert!(busiest > 0.0, "{text}");
    // 12 answers of 48 tokens between the first scrape and the last.
    let predicted = |s: &Value| value(s, "llamacpp:tokens_predicted_total").unwrap();
    assert_eq!(
        predicted(scrapes.last().unwrap()) - predicted(&scrapes[0]),
        576.0,
        "{text}"
    );
    // The summary reads them.
    let s = dir
        .cmd("trace-summarize")
        .args(["--format", "json", "--metrics", "metrics.ndjson"])
        .stdin(run.stdout.clone())
        .run();
    s.ok();
    let server = &s.json()["server"];
    assert_eq!(
        server["running"]["metric"], "llamacpp:requests_processing",
        "{server}"
    );
    assert_eq!(server["generation_tokens"]["increase"], 576.0, "{server}");
}

/// The APIs coding agents speak, as llama.cpp serves them: every answer
/// read, streamed or not, with its usage (llama.cpp counts Anthropic's
/// `input_tokens` without the cached part, which the result adds back).
#[test]
fn messages_and_responses_streamed_and_not_read_their_usage() {
    let Some((llama, dir)) = Llama::start_in("real-agent-apis", 2, 16384, &[]) else {
        return;
    };
    for endpoint in ["messages", "responses"] {
        for stream in [true, false] {
            let mut args = vec!["--endpoint", endpoint, "--ignore-eos"];
            if !stream {
                args.push("--no-stream");
            }
            let run = llama.synth_and_replay(&dir, &trace(&varied(12)), &args);
            let results = run.json_lines();
            assert_eq!(results.len(), 12);
            let offsets: std::collections::BTreeSet<i64> = results
                .iter()
                .filter_map(|r| {
                    assert_eq!(r["status"], "ok", "{endpoint} {stream}: {r}");
                    assert_eq!(
                        r["completion_tokens"], r["output_length"],
                        "{endpoint} {stream}: {r}"
                    );
                    // A whole answer has no TTFT; a stream's first
                    // content may be withheld (a character cut in two).
                    let ttft = r["ttft_ms"].is_f64();
                    assert!(
                        ttft == stream || (stream && r["itl_ms"] == json!([])),
                        "{r}"
                    );
                    // llama.cpp states a Messages stream's prompt usage in
                    // `message_start`, which it sends with the first token
                    // only: when that token is withheld (part of a
                    // character), the stream never states it, and the
                    // result says it is unknown.
                    if endpoint == "messages" && stream && r["prompt_tokens"].is_null() {
                        assert!(r["cached_tokens"].is_null(), "{r}");
                        return None;
                    }
                    assert!(r["cached_tokens"].is_u64(), "{endpoint} {stream}: {r}");
                    assert!(r["first_chunk_ms"].is_f64(), "{r}");
                    Some(r["prompt_tokens"].as_i64().unwrap() - r["input_length"].as_i64().unwrap())
                })
                .collect();
            // One chat template around every one-message prompt.
            assert_eq!(offsets.len(), 1, "{endpoint} {stream}: {offsets:?}");
        }
    }
}

#[test]
fn the_readme_vllm_random_translation_sends_the_lengths_asked() {
    // README's `vllm bench serve --dataset-name random` as trace-gen |
    // trace-replay --endpoint completions --tokenizer MODEL: with the
    // served model's tokenizer (GPT-2's, r50k_base here), every prompt is
    // as long as asked and replay says nothing of it; through the chat
    // endpoint with the default tokenizer, the lengths differ and replay
    // warns.
    let Some((llama, dir)) = Llama::start_in("real-vllm-random", 4, 65536, &[]) else {
        return;
    };
    dir.cmd("trace-gen")
        .args(["--count", "20", "--rate", "50", "--input-len", "100"])
        .args(["--output-len", "4", "-o", "gen.jsonl"])
        .run()
        .ok();
    let exact = dir
        .cmd("trace-replay")
        .args(["--quiet", "--url", &llama.url, "--model", "m"])
        .args([
            "--endpoint",
            "completions",
            "--tokenizer",
            "r50k_base",
            "gen.jsonl",
        ])
        .run();
    exact.code(0);
    let results = exact.json_lines();
    assert_eq!(results.len(), 20);
    for r in &results {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["prompt_tokens"], r["input_length"], "{r}");
    }
    assert!(!exact.stderr.contains("prompt lengths"), "{}", exact.stderr);
    let chat = dir
        .cmd("trace-replay")
        .args(["--quiet", "--url", &llama.url, "--model", "m", "gen.jsonl"])
        .run();
    chat.code(0).stderr_has(
        "warning: the server counted other prompt lengths than the trace's input_length in ",
    );
}
