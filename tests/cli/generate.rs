//! trace-gen: the laws it draws from, checked on 10,000 records against
//! figures worked out by hand; its determinism; its sessions.

use serde_json::Value;

use crate::util::{Cmd, TestDir};

fn generate(args: &[&str]) -> Vec<Value> {
    Cmd::new("trace-gen").args(args).run().ok().json_lines()
}

fn timestamps(recs: &[Value]) -> Vec<f64> {
    recs.iter()
        .map(|r| r["timestamp"].as_f64().unwrap())
        .collect()
}

/// The timestamps of `--arrival constant` with `args` (words apart).
fn constant(args: &str) -> Vec<f64> {
    let mut all: Vec<&str> = args.split_whitespace().collect();
    all.extend(["--arrival", "constant"]);
    timestamps(&generate(&all))
}

fn field(recs: &[Value], name: &str) -> Vec<f64> {
    recs.iter().map(|r| r[name].as_f64().unwrap()).collect()
}

/// Mean and (population) standard deviation.
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

fn gaps(ts: &[f64]) -> Vec<f64> {
    ts.windows(2).map(|w| w[1] - w[0]).collect()
}

#[track_caller]
fn near(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: {got}, want {want} ± {tolerance}"
    );
}

#[test]
fn poisson_arrivals_have_the_rate_and_a_cv_of_one() {
    let recs = generate(&["--count", "10000", "--rate", "10", "--seed", "1"]);
    assert_eq!(recs.len(), 10_000);
    let ts = timestamps(&recs);
    assert_eq!(ts[0], 0.0);
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "in timestamp order");
    // 9,999 exponential gaps of mean 100 ms: their sum is 999,900 ms with a
    // standard deviation of 100·√9999 ≈ 10,000 ms (1 %); 4 % is 4σ.
    let rate = 9999.0 / (ts[9999] / 1000.0);
    near("rate", rate, 10.0, 0.4);
    // An exponential's CV is 1; the sample CV's standard error at n = 9999
    // is about √((9 − 1)/(4n)) ≈ 0.014 (kurtosis 9): ± 0.06 is 4σ.
    let (m, sd) = mean_sd(&gaps(&ts));
    near("CV", sd / m, 1.0, 0.06);
}

#[test]
fn gamma_arrivals_have_the_cv_asked_for() {
    // (law, seed, tolerance of the mean gap of 20 ms, of the CV).
    // CV 0.5 is shape 4, kurtosis 3 + 6/4 = 4.5: the CV's standard error is
    // about 0.5·√(3.5/(4·9999)) ≈ 0.005, the mean's 20·0.5/100 = 0.1.
    // CV 2 is shape 0.25, kurtosis 27: the CV's standard error is about
    // 2·√(26/(4·9999)) ≈ 0.05, the mean's 20·2/100 = 0.4.
    for (law, seed, cv, mean_tol, cv_tol) in [
        ("gamma:0.5", "2", 0.5, 0.4, 0.03),
        ("gamma:2", "3", 2.0, 1.6, 0.25),
    ] {
        let args = [
            "--count",
            "10000",
            "--rate",
            "50",
            "--arrival",
            law,
            "--seed",
            seed,
        ];
        let (m, sd) = mean_sd(&gaps(&timestamps(&generate(&args))));
        near("mean gap", m, 20.0, mean_tol);
        near("CV", sd / m, cv, cv_tol);
    }
}

#[test]
fn constant_arrivals_are_exact() {
    assert_eq!(
        constant("--count 5 --rate 4"),
        [0.0, 250.0, 500.0, 750.0, 1000.0]
    );
    // No rate: all at once, as vLLM's default `inf`.
    let ts = timestamps(&generate(&["--count", "3"]));
    assert_eq!(ts, [0.0, 0.0, 0.0]);
    // --duration 1s at 4/s: 0, 250, 500, 750 (1000 is not within 1 s).
    assert_eq!(
        constant("--duration 1s --rate 4"),
        [0.0, 250.0, 500.0, 750.0]
    );
}

#[test]
fn ramps_follow_vllm() {
    // Linear from 10 to 20 over 3 arrivals: arrival 1 at 10 + 10·1/2 = 15/s
    // (a gap of 66.667 ms), arrival 2 at 20/s (50 ms).
    assert_eq!(
        constant("--count 3 --rate 20 --ramp-up linear --ramp-from 10"),
        [0.0, 66.667, 116.667]
    );
    // Exponential from 5 to 20: arrival 1 at 5·4^(1/2) = 10/s (100 ms),
    // arrival 2 at 20/s (50 ms).
    assert_eq!(
        constant("--count 3 --rate 20 --ramp-up exponential --ramp-from 5"),
        [0.0, 100.0, 150.0]
    );
}

#[test]
fn length_laws_have_their_mean_and_spread() {
    let recs = generate(&[
        "--count",
        "10000",
        "--input-len",
        "uniform:100..200",
        "--output-len",
        "normal:1000,100",
        "--seed",
        "4",
    ]);
    let input = field(&recs, "input_length");
    assert!(input.iter().all(|&n| (100.0..=200.0).contains(&n)));
    // Uniform on 101 integers: mean 150, sd √((101² − 1)/12) = 29.155; the
    // mean's standard error is 0.29: ± 1.5.
    let (m, sd) = mean_sd(&input);
    near("uniform mean", m, 150.0, 1.5);
    near("uniform sd", sd, 29.155, 1.0);
    // Normal(1000, 100): the mean's standard error is 1, the sd's 0.7.
    let (m, sd) = mean_sd(&field(&recs, "output_length"));
    near("normal mean", m, 1000.0, 4.0);
    near("normal sd", sd, 100.0, 4.0);

    // Lognormal with mean 500 and sd 250: σ² = ln(1 + 0.25) = 0.22314,
    // μ = ln 500 − σ²/2 = 6.10304, median e^μ = 447.2. The mean's standard
    // error is 2.5 (± 12); the median's is about
    // e^μ·σ·√(2π)/(2·√n) = 2.65 (± 12).
    let mut out = field(
        &generate(&[
            "--count",
            "10000",
            "--output-len",
            "lognormal:500,250",
            "--seed",
            "5",
        ]),
        "output_length",
    );
    let (m, sd) = mean_sd(&out);
    near("lognormal mean", m, 500.0, 12.0);
    near("lognormal sd", sd, 250.0, 25.0);
    out.sort_by(f64::total_cmp);
    near("lognormal median", out[5000], 447.2, 12.0);
}

#[test]
fn from_a_trace_draws_its_records_pairs() {
    let dir = TestDir::new("gen-from");
    let trace = dir.write(
        "three.jsonl",
        "{\"timestamp\":0,\"input_length\":10,\"output_length\":1}\n\
         {\"timestamp\":1,\"input_length\":20,\"output_length\":2}\n\
         {\"timestamp\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"output_length\":3,\"observed\":{\"prompt_tokens\":30}}\n",
    );
    let from = format!("from:{}", trace.display());
    let recs = generate(&[
        "--count",
        "9000",
        "--input-len",
        &from,
        "--output-len",
        &from,
        "--seed",
        "6",
    ]);
    let mut counts = [0u32; 3];
    for r in &recs {
        let (i, o) = (
            r["input_length"].as_u64().unwrap(),
            r["output_length"].as_u64().unwrap(),
        );
        assert_eq!(i, o * 10, "the lengths of one record: {r}");
        counts[o as usize - 1] += 1;
    }
    // Each record 1/3 of the time: 3000 ± √(9000·(1/3)·(2/3)) = 44.7; ± 200.
    for c in counts {
        near("draws of a record", f64::from(c), 3000.0, 200.0);
    }
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let arrivals = ["--count", "500", "--rate", "7", "--arrival", "gamma:1.5"];
    let lengths = [
        "--input-len",
        "lognormal:300,200",
        "--output-len",
        "uniform:1..64",
        "--shared-prefix",
        "1024",
    ];
    let seeded = |seed: &str| {
        Cmd::new("trace-gen")
            .args(arrivals)
            .args(lengths)
            .args(["--seed", seed])
            .run()
    };
    let (a, b, c) = (seeded("9"), seeded("9"), seeded("10"));
    a.ok();
    assert_eq!(a.stdout, b.stdout);
    assert_ne!(a.stdout, c.stdout);
    // Another length law leaves the arrivals as they were.
    let d = Cmd::new("trace-gen")
        .args(arrivals)
        .args(["--seed", "9"])
        .run();
    assert_eq!(timestamps(&a.json_lines()), timestamps(&d.json_lines()));
}

#[test]
fn a_shared_prefix_is_the_same_blocks_and_the_rest_is_new() {
    // 1100 tokens of prefix: 2 whole blocks of 512 shared (ids 0 and 1); a
    // prompt of 1100 + 100 = 1200 tokens is 3 blocks, its third new.
    let recs = generate(&[
        "--count",
        "3",
        "--shared-prefix",
        "1100",
        "--input-len",
        "100",
    ]);
    let ids: Vec<Vec<u64>> = recs
        .iter()
        .map(|r| {
            r["hash_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(ids, [vec![0, 1, 2], vec![0, 1, 3], vec![0, 1, 4]]);
    assert!(recs.iter().all(|r| r["input_length"] == 1200));
}

#[test]
fn session_turns_continue_the_conversation() {
    let recs = generate(&[
        "--sessions",
        "50",
        "--rate",
        "5",
        "--turns",
        "2..4",
        "--think",
        "2s",
        "--input-len",
        "100",
        "--output-len",
        "uniform:10..600",
        "--shared-prefix",
        "1024",
        "--seed",
        "8",
    ]);
    let ts = timestamps(&recs);
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "in timestamp order");
    let mut by_session: std::collections::BTreeMap<String, Vec<&Value>> = Default::default();
    for r in &recs {
        by_session
            .entry(r["session_id"].as_str().unwrap().to_string())
            .or_default()
            .push(r);
    }
    assert_eq!(by_session.len(), 50);
    for (s, turns) in &by_session {
        assert!((2..=4).contains(&turns.len()), "{s}: {} turns", turns.len());
        let first = turns[0];
        assert!(first.get("delay").is_none());
        assert_eq!(first["input_length"], 1124, "{s}: prefix + 100");
        for w in turns.windows(2) {
            let (prev, next) = (w[0], w[1]);
            // The previous prompt, its answer, then 100 new tokens.
            let want = prev["input_length"].as_u64().unwrap()
                + prev["output_length"].as_u64().unwrap()
                + 100;
            assert_eq!(next["input_length"], want, "{s}");
            assert_eq!(next["delay"], 2000, "{s}");
            near(
                "a later turn's timestamp",
                next["timestamp"].as_f64().unwrap(),
                prev["timestamp"].as_f64().unwrap() + 2000.0,
                0.002,
            );
            let p = prev["hash_ids"].as_array().unwrap();
            let n = next["hash_ids"].as_array().unwrap();
            assert_eq!(
                &n[..p.len()],
                &p[..],
                "{s}: the previous prompt's blocks first"
            );
            assert_eq!(n.len() as u64, want.div_ceil(512));
        }
        let ids = first["hash_ids"].as_array().unwrap();
        assert_eq!(ids[..2], [0, 1], "{s}: the shared prefix");
    }
}

#[test]
fn generated_traces_validate_and_replay() {
    let dir = TestDir::new("gen-pipe");
    let sessions = Cmd::new("trace-gen")
        .args([
            "--sessions",
            "6",
            "--rate",
            "20",
            "--turns",
            "1..3",
            "--think",
            "10ms",
            "--input-len",
            "uniform:50..300",
            "--output-len",
            "8",
            "--shared-prefix",
            "600",
        ])
        .run();
    sessions.ok();
    Cmd::new("trace-validate")
        .arg("--strict")
        .stdin(sessions.stdout.clone())
        .run()
        .ok();
    let synth = Cmd::new("trace-synth").stdin(sessions.stdout.clone()).run();
    synth.ok();
    let results = Cmd::new("trace-replay")
        .arg("--sim")
        .stdin(synth.stdout)
        .run();
    results.code(0);
    let lines = results.json_lines();
    assert_eq!(lines.len(), sessions.lines().len());
    assert!(
        lines.iter().all(|r| r["status"] == "ok"),
        "{}",
        results.stdout_str()
    );
    dir.write("results.ndjson", &results.stdout);
    Cmd::new("trace-summarize")
        .arg(dir.join("results.ndjson"))
        .run()
        .ok();
}

#[test]
fn bad_flags_say_what_to_give() {
    Cmd::new("trace-gen")
        .args(["--count", "3", "--input-len", "12k"])
        .run()
        .code(2)
        .stderr_has("`12k` is not a whole number of tokens")
        .stderr_has("uniform:A..B");
    Cmd::new("trace-gen")
        .args(["--duration", "10s"])
        .run()
        .code(2)
        .stderr_has("--duration needs --rate");
    Cmd::new("trace-gen")
        .args(["--count", "3", "--turns", "2"])
        .run()
        .code(2)
        .stderr_has("--sessions");
    Cmd::new("trace-gen")
        .args(["--count", "3", "--input-len", "from:/nonexistent/t.jsonl"])
        .run()
        .code(2)
        .stderr_has("/nonexistent/t.jsonl");
    Cmd::new("trace-gen").run().code(2).stderr_has("--count");
}
