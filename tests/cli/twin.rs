//! The twin: trace-sim --offline (the model in virtual time), --fit (the
//! model from a run's results) and --profile (served).

use serde_json::json;

use crate::util::*;

/// α 10 ms, β 0.01 ms per prefill token, γ 1 ms per decoding request, two
/// slots, no cache.
const PROFILE: &str = r#"{
  "tracekit_profile": 1,
  "alpha_ms": 10.0,
  "beta_ms": 0.01,
  "gamma_ms": 1.0,
  "delta_ms": 0.0,
  "epsilon_ms": 0.0,
  "slots": 2,
  "prefill_chunk": 1000,
  "cache_blocks": 0,
  "block_size": 512
}
"#;

/// The figures of each result line, in the order written.
fn figures(run: &Run) -> Vec<(u64, f64, f64, f64, Vec<f64>, f64)> {
    run.json_lines()
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "ok", "{r}");
            (
                r["index"].as_u64().unwrap(),
                r["scheduled_ms"].as_f64().unwrap(),
                r["sent_ms"].as_f64().unwrap(),
                r["ttft_ms"].as_f64().unwrap(),
                r["itl_ms"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|g| g.as_f64().unwrap())
                    .collect(),
                r["e2e_ms"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// A directory of its own holding [`PROFILE`] as `p.json` and `trace`
/// as `t.jsonl`.
fn with_profile(name: &str, trace: &str) -> TestDir {
    let dir = TestDir::new(name);
    dir.write("p.json", PROFILE);
    dir.write("t.jsonl", trace);
    dir
}

/// trace-sim `--offline` on `trace` with [`PROFILE`], in a directory of
/// its own; it must exit 0.
fn offline(name: &str, trace: &str) -> Run {
    let dir = TestDir::new(name);
    dir.write("p.json", PROFILE);
    let run = dir
        .cmd("trace-sim")
        .args(["--offline", "--profile", "p.json"])
        .stdin(trace)
        .run();
    // The replay's final line, in the twin's time.
    run.code(0).stderr_has(" of virtual time (");
    run
}

#[test]
fn offline_results_come_at_the_models_exact_times() {
    // 0 (200 tokens in, 3 out) at 0; 1 (300 in, 2 out) at 5.
    // Step 1, 0 → 12: 0's prefill, 10 + 0.01 × 200.
    // Step 2, 12 → 26: 0 decodes (1), 1 prefills 300 (3): 14.
    // Step 3, 26 → 38: both decode: 12. Both are done.
    let trace = "{\"timestamp\":1000,\"input_length\":200,\"output_length\":3}\n\
                 {\"timestamp\":1005,\"input_length\":300,\"output_length\":2}\n";
    let run = offline("twin-offline", trace);
    assert_eq!(
        figures(&run),
        vec![
            (0, 0.0, 0.0, 12.0, vec![14.0, 12.0], 38.0),
            (1, 5.0, 5.0, 21.0, vec![12.0], 33.0),
        ]
    );
    let first = &run.json_lines()[0];
    assert_eq!(first["prompt_tokens"], 200);
    assert_eq!(first["completion_tokens"], 3);
    assert_eq!(first["cached_tokens"], 0);
    // Relative timestamps: dated from when the run started (this year).
    let year = &first["start_time"].as_str().unwrap()[..4];
    assert!(year.parse::<u32>().unwrap() >= 2026, "{first}");
    run.stderr_has(
        "trace-sim: sent 2, ok 2, errors 0, timeouts 0, cancelled 0 in 38ms of virtual time (",
    );
}

#[test]
fn offline_results_of_an_epoch_trace_are_dated_from_it() {
    // 1764374400000 ms since the epoch is 2025-11-29T00:00:00Z: the run
    // starts when its trace did, and the second request 5 ms later.
    let trace = "{\"timestamp\":1764374400000,\"input_length\":200,\"output_length\":3}\n\
                 {\"timestamp\":1764374400005,\"input_length\":300,\"output_length\":2}\n";
    let run = offline("twin-offline-epoch", trace);
    let lines = run.json_lines();
    assert_eq!(lines[0]["start_time"], "2025-11-29T00:00:00.000000Z");
    assert_eq!(lines[1]["start_time"], "2025-11-29T00:00:00.005000Z");
    assert_eq!(lines[1]["scheduled_ms"], 5.0);
}

#[test]
fn offline_honours_after_delay_and_sessions() {
    // a: prefill 0 → 11 (10 + 0.01 × 100), decode 11 → 22.
    // b waits for a, then 100 ms: sent at 122, done at 133.
    // c, a session's first turn, at 200: done at 211.
    // d, its next turn, 10 ms after c is done: 221 → 232.
    let trace = r#"{"id":"a","timestamp":0,"input_length":100,"output_length":2}
{"id":"b","after":["a"],"delay":100,"input_length":100,"output_length":1}
{"session_id":"s","timestamp":200,"input_length":100,"output_length":1}
{"session_id":"s","timestamp":201,"delay":10,"input_length":100,"output_length":1}
"#;
    let run = offline("twin-offline-deps", trace);
    assert_eq!(
        figures(&run),
        vec![
            (0, 0.0, 0.0, 11.0, vec![11.0], 22.0),
            (1, 122.0, 122.0, 11.0, vec![], 11.0),
            (2, 200.0, 200.0, 11.0, vec![], 11.0),
            (3, 221.0, 221.0, 11.0, vec![], 11.0),
        ]
    );
    let lines = run.json_lines();
    assert_eq!(lines[3]["turn"], 2);
    assert_eq!(lines[1]["after"], serde_json::json!(["a"]));
}

#[test]
fn offline_bad_input_names_the_line_and_field() {
    let dir = with_profile(
        "twin-offline-bad",
        "{\"timestamp\":0,\"input_length\":10,\"output_length\":1}\n\
         {\"timestamp\":1,\"input_length\":\"12k\",\"output_length\":1}\n",
    );
    dir.cmd("trace-sim")
        .args(["--offline", "--profile", "p.json", "t.jsonl"])
        .run()
        .code(2)
        .stderr_has("trace-sim: t.jsonl:2: error: field `input_length`");
    let bad = PROFILE.replace("\"slots\": 2", "\"slots\": -2");
    dir.write("bad.json", bad);
    dir.cmd("trace-sim")
        .args(["--offline", "--profile", "bad.json", "t.jsonl"])
        .run()
        .code(2)
        .stderr_has("trace-sim: bad.json:8:");
}

/// A trace of `n` requests: prompts of 50 to 1,000 tokens, answers of 4 to
/// 60, arrivals 40 ms apart on average, from a fixed seed.
fn trace(n: u32) -> String {
    trace_spaced(n, 1)
}

/// [`trace`] with its gaps `k` times as long.
fn trace_spaced(n: u32, k: u64) -> String {
    let mut x: u64 = 7;
    let mut next = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut t = 0.0;
    let mut out = String::new();
    for _ in 0..n {
        t += (next(80) * k) as f64;
        out.push_str(&format!(
            "{{\"timestamp\":{t},\"input_length\":{},\"output_length\":{}}}\n",
            50 + next(951),
            4 + next(57)
        ));
    }
    out
}

/// Run `trace` through the model of `profile` offline, then fit a
/// profile (`fitted.json`) to the results: the fit's run.
fn offline_then_fit(dir: &TestDir, profile: &str, trace: &str) -> Run {
    dir.write("p.json", profile);
    dir.write("trace.jsonl", trace);
    let run = dir
        .cmd("trace-sim")
        .args(["--offline", "--profile", "p.json", "trace.jsonl"])
        .run();
    run.code(0).stderr_has(" of virtual time (");
    std::fs::write(dir.join("a.ndjson"), &run.stdout).unwrap();
    dir.cmd("trace-sim")
        .args(["--fit", "a.ndjson", "-o", "fitted.json"])
        .run()
}

#[test]
fn a_fit_to_the_models_own_results_gives_its_parameters_back() {
    let dir = TestDir::new("twin-fit");
    let known = r#"{"tracekit_profile": 1, "alpha_ms": 8.0, "beta_ms": 0.02,
        "gamma_ms": 1.5, "delta_ms": 0.0005, "epsilon_ms": 3.0, "zeta_ms": 0.00002, "eta_ms": 0.004, "slots": 4,
        "prefill_chunk": 100000, "cache_blocks": 0, "block_size": 512}"#;
    // Gaps 5 times the usual: some requests find the server idle (their
    // way to the scheduler, η, shows with their step), others come while
    // steps run (only their step shows), and some wait for a slot.
    let fit = offline_then_fit(&dir, known, &trace_spaced(300, 5));
    fit.code(0);
    let p: serde_json::Value = serde_json::from_slice(&dir.read("fitted.json")).unwrap();
    for (key, want) in [
        ("alpha_ms", 8.0),
        ("beta_ms", 0.02),
        ("gamma_ms", 1.5),
        ("delta_ms", 0.0005),
        ("epsilon_ms", 3.0),
        ("zeta_ms", 0.00002),
        ("eta_ms", 0.004),
    ] {
        let got = p[key].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 0.05 * want,
            "{key}: {got}, want {want} within 5 %\n{}",
            fit.stderr
        );
    }
    assert_eq!(p["slots"], 4, "{}", fit.stderr);
    assert_eq!(p["fitted_from"]["results"], serde_json::json!(["a.ndjson"]));
    fit.stderr_has("residuals");
}

/// The profile's cache: the flags' unless the scrapes state the server's
/// (vLLM's info metric here) or `--cache-blocks` is given.
#[test]
fn a_fit_takes_the_cache_size_the_scrapes_state() {
    let dir = TestDir::new("twin-fit-cache");
    let fit = offline_then_fit(&dir, PROFILE, &trace(100));
    fit.code(0).stderr_has(
        "cache_blocks: no scrape states the server's KV cache size (vLLM's cache_config_info, \
         SGLang's max_total_num_tokens): 10000 blocks, the flags'; give --cache-blocks",
    );
    // 2048 blocks of 16 tokens: 32,768 tokens, 64 blocks of 512.
    dir.write(
        "a.metrics",
        concat!(
            r#"{"t_ms":0,"samples":{"vllm:cache_config_info{block_size=\"16\",engine=\"0\","#,
            r#"num_gpu_blocks=\"2048\"}":1.0,"vllm:num_requests_running{engine=\"0\"}":0.0}}"#,
            "\n"
        ),
    );
    let fit = |extra: &[&str]| {
        let run = dir
            .cmd("trace-sim")
            .args([
                "--fit",
                "a.ndjson",
                "--metrics",
                "a.metrics",
                "-o",
                "f.json",
            ])
            .args(extra)
            .run();
        run.code(0);
        let p: serde_json::Value = serde_json::from_slice(&dir.read("f.json")).unwrap();
        (run, p["cache_blocks"].clone())
    };
    let (run, blocks) = fit(&[]);
    assert_eq!(blocks, 64);
    run.stderr_has(
        "  cache       64 blocks of 512 tokens (the scrapes: vllm:cache_config_info, 2048 \
         blocks of 16 tokens)",
    );
    assert!(!run.stderr.contains("cache_blocks:"), "{}", run.stderr);
    let (run, blocks) = fit(&["--cache-blocks", "9"]);
    assert_eq!(blocks, 9);
    run.stderr_has("  cache       9 blocks of 512 tokens (given)");
}

#[test]
fn a_fit_from_too_little_is_refused() {
    let dir = TestDir::new("twin-fit-little");
    offline_then_fit(&dir, PROFILE, &trace(3))
        .code(2)
        .stderr_has("trace-sim: error: too little to fit a profile: 3 requests with a first token");
    assert!(!dir.join("fitted.json").exists());
}

#[test]
fn a_one_at_a_time_run_is_refused_for_its_unknown_batch_terms() {
    let dir = TestDir::new("twin-fit-serial");
    // One request every second: never two at once.
    let records: Vec<_> = (0..30)
        .map(|i| json!({"timestamp": i * 1000, "input_length": 100 + 37 * i, "output_length": 5}))
        .collect();
    offline_then_fit(&dir, PROFILE, &crate::util::trace(&records))
        .code(2)
        .stderr_has("gamma_ms: never more than one request in flight")
        .stderr_has("the profile is not written (--force writes it, with this warning in it)");
    assert!(!dir.join("fitted.json").exists());
    dir.cmd("trace-sim")
        .args(["--fit", "a.ndjson", "--force", "-o", "fitted.json"])
        .run()
        .code(0)
        .stderr_has("trace-sim: warning: gamma_ms: never more than one request in flight");
    let p: serde_json::Value = serde_json::from_slice(&dir.read("fitted.json")).unwrap();
    assert_eq!(
        p["quality"]["warnings"][0],
        "gamma_ms: never more than one request in flight: the batch terms are unknown (0); \
         fit a run where requests overlap"
    );
}

/// A trace of `n` requests `gap_ms` apart, prompts of 100 to 500 tokens,
/// answers of 10 to 30, from a fixed rule.
fn spaced(n: u64, gap_ms: u64) -> String {
    let records: Vec<_> = (0..n)
        .map(|i| {
            json!({"timestamp": i * gap_ms, "input_length": 100 + (i * 37) % 401,
                   "output_length": 10 + (i * 7) % 21})
        })
        .collect();
    crate::util::trace(&records)
}

#[test]
fn a_saturated_run_is_refused_and_fits_beside_a_lighter_one() {
    let dir = TestDir::new("twin-fit-saturated");
    // A request every millisecond, two slots: the server far behind,
    // every decode step but the last request's runs two, each step's
    // time drawn from 0.5 to 1.5 times the model's.
    let noisy = PROFILE.replace(
        "\"block_size\": 512",
        "\"block_size\": 512, \"step_spread\": [0.5, 1.5]",
    );
    let sat = offline_then_fit(&dir, &noisy, &spaced(200, 1));
    sat.code(2)
        .stderr_has(
            "of the decode steps had 2 requests decoding: the run cannot tell a step's own \
             time (alpha_ms) from a decoding request's (gamma_ms ",
        )
        .stderr_has("ms); fit a run at a lighter load with it (give both results files)");
    std::fs::rename(dir.join("a.ndjson"), dir.join("sat.ndjson")).unwrap();
    // A run at a request every 150 ms beside it: one or two decoding.
    offline_then_fit(&dir, &noisy, &spaced(60, 150));
    let both = dir
        .cmd("trace-sim")
        .args(["--fit", "sat.ndjson", "a.ndjson", "-o", "both.json"])
        .run();
    both.code(0);
    let p: serde_json::Value = serde_json::from_slice(&dir.read("both.json")).unwrap();
    // The model's own runs: its terms come back (α 10, β 0.01, γ 1),
    // within the noise.
    for (key, want) in [("alpha_ms", 10.0), ("beta_ms", 0.01), ("gamma_ms", 1.0)] {
        let got = p[key].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 0.1 * want,
            "{key}: {got}, want {want}\n{}",
            both.stderr
        );
    }
    assert_eq!(p["slots"], 2, "{}", both.stderr);
}

#[test]
fn a_results_file_given_twice_is_refused_by_name() {
    let dir = TestDir::new("twin-fit-twice");
    offline_then_fit(&dir, PROFILE, &spaced(60, 150)).code(0);
    dir.cmd("trace-sim")
        .args(["--fit", "a.ndjson", "a.ndjson", "-o", "p2.json"])
        .run()
        .code(2)
        .stderr_has(
            "trace-sim: a.ndjson:1: error: this result is also a.ndjson:1: a run's results \
             given twice would count its requests twice; give each run once",
        );
    assert!(!dir.join("p2.json").exists());
}

#[test]
fn a_scrape_of_more_requests_than_a_server_has_is_refused() {
    let dir = TestDir::new("twin-fit-1e308");
    offline_then_fit(&dir, PROFILE, &spaced(60, 150)).code(0);
    dir.write(
        "m.ndjson",
        std::fs::read(crate::util::data("twin/metrics_running_1e308.ndjson")).unwrap(),
    );
    // serde_json keeps the file's order: waiting comes first.
    dir.cmd("trace-sim")
        .args([
            "--fit",
            "a.ndjson",
            "--metrics",
            "m.ndjson",
            "-o",
            "p2.json",
        ])
        .run()
        .code(2)
        .stderr_has(
            "trace-sim: m.ndjson:1: error: sample `vllm:num_requests_waiting`: 1e308 is not a \
             count of requests (0 to 1000000000)",
        );
    assert!(!dir.join("p2.json").exists());
}

#[test]
fn a_profile_that_misses_its_own_run_is_refused_and_forced_with_its_warning() {
    let dir = TestDir::new("twin-fit-check");
    // Two slots, a request every 60 ms: many wait for a place. Told 8
    // slots, the profile has none wait: its TTFTs are too short.
    offline_then_fit(&dir, PROFILE, &spaced(60, 60));
    let fit = |extra: &[&str]| {
        dir.cmd("trace-sim")
            .args(["--fit", "a.ndjson", "--max-batch", "8", "-o", "p8.json"])
            .args(extra)
            .run()
    };
    let refused = fit(&[]);
    refused
        .code(2)
        .stderr_has("the fitted run, predicted by the profile (real, twin, error):")
        .stderr_has("trace-sim: error: ")
        .stderr_has("the profile does not predict the run it was fitted to: TTFT p50 off by ")
        .stderr_has("(more than 15 %); the profile is not written");
    assert!(!dir.join("p8.json").exists());
    let forced = fit(&["--force"]);
    forced
        .code(0)
        .stderr_has("trace-sim: warning: the profile does not predict the run it was fitted to: ");
    let p: serde_json::Value = serde_json::from_slice(&dir.read("p8.json")).unwrap();
    let warnings = p["quality"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("the profile does not predict the run")),
        "{warnings:?}"
    );
    let names: Vec<&str> = p["quality"]["fitted_run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["TTFT p50", "TTFT p90", "ITL p50", "E2E p50", "E2E p90"]
    );
    // The profile forced is one its reader takes.
    dir.write("t.jsonl", spaced(5, 150));
    dir.cmd("trace-sim")
        .args(["--offline", "--profile", "p8.json", "t.jsonl"])
        .run()
        .code(0);
}

/// A directory with the bundled llama.cpp profile (`p.json`, which has a
/// step spread to draw from) and twenty requests 50 ms apart (`t.jsonl`).
fn with_bundled_profile(name: &str) -> TestDir {
    let dir = TestDir::new(name);
    dir.write(
        "p.json",
        std::fs::read(crate::util::data("twin/llama-server.profile.json")).unwrap(),
    );
    dir.write("t.jsonl", spaced(20, 50));
    dir
}

#[test]
fn the_seed_sets_the_offline_step_draws() {
    let dir = with_bundled_profile("twin-seed");
    let run = |seed: &str| {
        let r = dir
            .cmd("trace-sim")
            .args([
                "--offline",
                "--profile",
                "p.json",
                "--seed",
                seed,
                "t.jsonl",
            ])
            .run();
        r.code(0);
        // The times, not the date (start_time counts from the run's start).
        r.json_lines()
            .into_iter()
            .map(|mut l| {
                l.as_object_mut().unwrap().remove("start_time");
                l
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run("1"), run("1"));
    assert_ne!(run("1"), run("2"));
    assert_eq!(run("2"), run("2"));
}

#[test]
fn the_seed_sets_an_offline_sweeps_step_draws() {
    let dir = with_bundled_profile("twin-sweep-seed");
    let run = |seed: &str, out: &str| {
        dir.cmd("trace-sweep")
            .args(["--offline", "--profile", "p.json", "--slo", "ttft=1s"])
            .args(["--speeds", "1", "--seed", seed, "-o", out, "t.jsonl"])
            .run()
            .code(0);
        let text = std::fs::read_to_string(dir.path.join(out).join("speed-1.ndjson")).unwrap();
        text.lines()
            .map(|l| {
                let mut l: serde_json::Value = serde_json::from_str(l).unwrap();
                l.as_object_mut().unwrap().remove("start_time");
                l
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run("1", "a"), run("1", "b"));
    assert_ne!(run("1", "c"), run("2", "d"));
    // It sets the twin's draws: without --offline there are none to set.
    let refused = dir
        .cmd("trace-sweep")
        .args([
            "--sim", "--seed", "2", "--slo", "ttft=1s", "-o", "e", "t.jsonl",
        ])
        .run();
    refused.code(2);
    assert!(refused.stderr.contains("--offline"), "{}", refused.stderr);
}

#[test]
fn replay_serves_a_profile_in_process() {
    let records = [
        json!({"timestamp": 0, "input_length": 20, "output_length": 3}),
        json!({"timestamp": 5, "input_length": 20, "output_length": 2}),
    ];
    let dir = with_profile("twin-served", &crate::util::trace(&records));
    let run = dir
        .cmd("trace-replay")
        .args(["--sim", "--profile", "p.json", "--quiet", "t.jsonl"])
        .run();
    run.code(0);
    let lines = run.json_lines();
    assert_eq!(lines.len(), 2);
    for r in &lines {
        assert_eq!(r["status"], "ok", "{r}");
        // At least one step (10 ms) before the first token, on the wall clock.
        assert!(r["ttft_ms"].as_f64().unwrap() >= 10.0, "{r}");
    }
    // Lines come as requests finish: both run in one batch, so take them
    // in trace order.
    let mut done: Vec<(u64, u64)> = lines
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["completion_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    done.sort();
    assert_eq!(done, vec![(0, 3), (1, 2)]);
}

/// α 10 ms and nothing else, one slot: each request of one output token
/// holds the server for exactly one 10 ms step.
const ONE_SLOT: &str = r#"{"tracekit_profile": 1, "alpha_ms": 10.0, "beta_ms": 0.0,
    "gamma_ms": 0.0, "delta_ms": 0.0, "epsilon_ms": 0.0, "slots": 1,
    "prefill_chunk": 2048, "cache_blocks": 0, "block_size": 512}"#;

/// Six requests 100 ms apart, one output token each.
fn six_requests() -> String {
    (0..6)
        .map(|k| {
            format!(
                "{{\"timestamp\":{},\"input_length\":10,\"output_length\":1}}\n",
                k * 100
            )
        })
        .collect()
}

/// trace-sweep --offline of [`six_requests`] through [`ONE_SLOT`], TTFT
/// at most 20 ms for every request.
fn sweep_offline(dir: &TestDir, extra: &[&str]) -> Run {
    dir.write("p.json", ONE_SLOT);
    dir.write("trace.jsonl", six_requests());
    dir.cmd("trace-sweep")
        .args(["--offline", "--profile", "p.json", "--slo", "ttft=20ms"])
        .args(["--attainment", "1", "--format", "json", "-o", "runs"])
        .args(extra)
        .arg("trace.jsonl")
        .run()
}

// At speed s the requests come 100/s ms apart and each takes 10 ms, so
// request k (from 0) waits k × (10 − 100/s) ms when that is positive: its
// TTFT is 10 + k × max(0, 10 − 100/s). The last (k = 5) meets 20 ms while
// 5 × (10 − 100/s) ≤ 10, that is 100/s ≥ 8: s ≤ 12.5. At 12.5 the TTFTs
// are 10, 12, 14, 16, 18 and 20 ms; at 12.6 the last is 20.3 ms.
#[test]
fn a_sweep_offline_finds_the_speed_one_slot_allows() {
    let dir = TestDir::new("twin-sweep");
    let run = sweep_offline(&dir, &["--speeds", "10,12.5,12.6,20"]);
    run.code(0);
    let j = run.json();
    let passed: Vec<(f64, bool)> = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["speed"].as_f64().unwrap(), r["passed"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        passed,
        vec![(10.0, true), (12.5, true), (12.6, false), (20.0, false)],
        "{j}"
    );
    assert_eq!(j["max_speed"], 12.5);
    // At speed 10, 6 requests over 50 ms: 100/s offered, each TTFT 10 ms.
    let first = &j["runs"][0];
    assert_eq!(first["requests"], 6);
    assert_eq!(first["offered_rps"], 100.0);
    assert_eq!(first["ttft_p50_ms"], 10.0);
    // Each run is a results file, its TTFTs the model's.
    let ttfts: Vec<f64> = file_lines(dir.join("runs/speed-12.5.ndjson"))
        .iter()
        .map(|l| {
            let r: serde_json::Value = serde_json::from_str(l).unwrap();
            r["ttft_ms"].as_f64().unwrap()
        })
        .collect();
    assert_eq!(ttfts, vec![10.0, 12.0, 14.0, 16.0, 18.0, 20.0]);
    // Its settings beside it, as a replay's: the twin, no URL.
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("runs/speed-12.5.ndjson.run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["tool"], "trace-sweep");
    assert_eq!(settings["endpoint"], "offline");
    assert!(
        settings.get("url").is_none_or(serde_json::Value::is_null),
        "{settings}"
    );
    assert!(
        settings["command"]
            .as_str()
            .unwrap()
            .contains("--offline --profile"),
        "{settings}"
    );
}

#[test]
fn a_sweep_offline_searches_to_within_its_precision() {
    let dir = TestDir::new("twin-sweep-search");
    let run = sweep_offline(&dir, &["--search", "1..64", "--precision", "0.01"]);
    run.code(0);
    // The highest pass is at most 12.5 and within 1 % of the first fail
    // above it, which is above 12.5.
    let answer = run.json()["max_speed"].as_f64().unwrap();
    assert!((12.5 / 1.01..=12.5).contains(&answer), "{answer}");
}

#[test]
fn a_sweep_offline_refuses_flags_that_need_a_server() {
    let dir = TestDir::new("twin-sweep-usage");
    for (extra, want) in [
        (
            &["--between", "true"][..],
            "trace-sweep: error: --between does not apply with --offline: there is no server \
             to reset: every run starts with an empty cache",
        ),
        (
            &["--metrics="][..],
            "trace-sweep: error: --metrics does not apply with --offline: there is no server \
             to scrape",
        ),
        (
            &["--warmup", "2"][..],
            "trace-sweep: error: --warmup does not apply",
        ),
        (
            &["--sim-arg=--max-batch=2"][..],
            "--sim-arg applies to --sim only",
        ),
        (&["--url", "http://127.0.0.1:9"][..], "--url"),
        (&["--sim"][..], "--sim"),
    ] {
        let run = sweep_offline(&dir, &[&["--speeds", "1"][..], extra].concat());
        run.code(2).stderr_has(want);
        assert!(!dir.join("runs").exists(), "{extra:?}");
    }
    dir.cmd("trace-sweep")
        .args(["--offline", "--slo", "ttft=1s", "-o", "runs", "trace.jsonl"])
        .run()
        .code(2)
        .stderr_has("--profile");
}

#[test]
fn a_sweep_offline_with_a_bad_profile_names_its_line_and_field() {
    let dir = TestDir::new("twin-sweep-bad");
    dir.write("trace.jsonl", six_requests());
    dir.write("bad.json", PROFILE.replace("\"slots\": 2", "\"slots\": -2"));
    dir.cmd("trace-sweep")
        .args(["--offline", "--profile", "bad.json", "--slo", "ttft=1s"])
        .args(["-o", "runs", "trace.jsonl"])
        .run()
        .code(2)
        .stderr_has(
            "trace-sweep: bad.json:8:13: error: field `slots`: invalid value: integer `-2`, \
             expected usize",
        );
    assert!(!dir.join("runs").exists());
    dir.cmd("trace-sweep")
        .args(["--offline", "--profile", "none.json", "--slo", "ttft=1s"])
        .args(["-o", "runs", "trace.jsonl"])
        .run()
        .code(2)
        .stderr_has("none.json");
}

#[test]
fn ctrl_c_ends_an_offline_sweep_with_a_result_for_every_record() {
    use std::process::Stdio;
    let dir = TestDir::new("twin-sweep-ctrl-c");
    // 200,000 requests 1 ms apart, 10 ms a step, no slot limit: a run of
    // some seconds of CPU in a debug build.
    let n = 200_000;
    let trace: String = (0..n)
        .map(|k| format!("{{\"timestamp\":{k},\"input_length\":10,\"output_length\":2}}\n"))
        .collect();
    dir.write("trace.jsonl", trace);
    dir.write("p.json", ONE_SLOT.replace("\"slots\": 1", "\"slots\": 0"));
    let args = "--offline --profile p.json --slo ttft=1s --speeds 1,2 --format json \
                -o runs trace.jsonl";
    let child = dir.spawn("trace-sweep", args, Stdio::piped());
    // Ctrl-C once the first run has its first results.
    let first = dir.join("runs/speed-1.ndjson");
    let out = interrupt_when(child, || {
        std::fs::metadata(&first).is_ok_and(|m| m.len() > 0)
    });
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{j}");
    assert_eq!(runs[0]["note"], "interrupted");
    // One result per record, each index once; those never sent are
    // cancelled with the replay's text.
    let lines = file_lines(&first);
    assert_eq!(lines.len(), n);
    let mut seen = vec![false; n];
    let mut not_sent = 0;
    for line in &lines {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let i = r["index"].as_u64().unwrap() as usize;
        assert!(!seen[i], "index {i} twice");
        seen[i] = true;
        if r["status"] == "cancelled" {
            assert_eq!(r["error"], "not sent: the run was stopped", "{r}");
            not_sent += 1;
        }
    }
    assert!(not_sent > 0);
}
