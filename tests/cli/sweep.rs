//! trace-sweep against trace-sim with a fixed capacity: the answer is
//! where the simulator's model says it is, and it holds when the same
//! speed is replayed through the ordinary pipeline.

use crate::util::*;

/// The simulator: a batch of 8, TTFT 50 ms, 100 ms between tokens, the
/// gaps independent of load (`--batch-slope 0`). A request of 3 output
/// tokens and 10 prompt tokens holds its place for 50 + 10 × 0.02 (prefill)
/// + 2 × 100 = 250.2 ms.
const SIM: [&str; 5] = [
    "--sim-arg=--max-batch=8",
    "--sim-arg=--ttft-ms=50",
    "--sim-arg=--itl-ms=100",
    "--sim-arg=--batch-slope=0",
    "--sim-arg=--cache-blocks=0",
];
const BATCH: usize = 8;
const SERVICE_MS: f64 = 250.2;
const TTFT_MS: f64 = 50.2;
const RECORDS: usize = 48;
const GAP_MS: f64 = 50.0;
const SLO_TTFT_MS: f64 = 150.0;

/// A fresh directory for one test, holding `trace()` as trace.jsonl.
fn dir_with_trace(name: &str) -> TestDir {
    let dir = TestDir::new(name);
    dir.write("trace.jsonl", trace());
    dir
}

/// 48 requests 50 ms apart (20/s at speed 1).
fn trace() -> String {
    (0..RECORDS)
        .map(|k| {
            format!(
                "{{\"timestamp\":{},\"input_length\":10,\"output_length\":3}}\n",
                k as f64 * GAP_MS
            )
        })
        .collect()
}

/// The simulator's model of the trace at `speed` with places held for
/// `service_ms`: each request waits for the first free place, then its
/// TTFT is the wait plus the model's TTFT.
fn model_ttfts(speed: f64, service_ms: f64) -> Vec<f64> {
    let mut free = [0.0f64; BATCH];
    (0..RECORDS)
        .map(|k| {
            let arrive = k as f64 * GAP_MS / speed;
            let (i, at) = free
                .iter()
                .copied()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            let start = arrive.max(at);
            free[i] = start + service_ms;
            start - arrive + TTFT_MS
        })
        .collect()
}

/// Whether the model meets the SLO at `speed`: at most 1 % of requests
/// (none of 48) over the TTFT bound.
fn model_passes(speed: f64, service_ms: f64) -> bool {
    model_ttfts(speed, service_ms)
        .iter()
        .filter(|&&t| t > SLO_TTFT_MS)
        .count()
        == 0
}

fn sweep(dir: &TestDir, extra: &[&str]) -> Run {
    dir.write("trace.jsonl", trace());
    dir.cmd("trace-sweep")
        .args(["--sim", "--slo", "ttft=150ms", "-o", "runs"])
        .args(SIM)
        .args(extra)
        .arg("trace.jsonl")
        .run()
}

#[test]
fn the_answer_of_a_sweep_holds_when_replayed_and_fails_at_a_quarter_more() {
    // The model: 8 places of 250.2 ms serve 31.97 requests/s, speed 1.6
    // of this trace; below it nobody waits (TTFT 50.2 ms). At 1.8 (36/s)
    // arrivals outrun the places: from request 32 on each waits 140 ms
    // (TTFT 190.1 ms), 16 of 48 over the bound. So of 1.2, 1.5 and 1.8 the
    // answer is 1.5, with room for a slower machine (1.5 still passes
    // with places held 6 % longer). The simulator cannot be faster than
    // its model (a timer never fires early), so 1.8 and 1.875 fail.
    assert!(model_passes(1.2, SERVICE_MS) && model_passes(1.5, SERVICE_MS));
    assert!(model_passes(1.5, SERVICE_MS * 1.06));
    assert!(!model_passes(1.8, SERVICE_MS) && !model_passes(1.875, SERVICE_MS));
    let ttfts = model_ttfts(1.8, SERVICE_MS);
    assert_eq!(ttfts.iter().filter(|&&t| t > SLO_TTFT_MS).count(), 16);
    assert!((ttfts[47] - 190.09).abs() < 0.01, "{}", ttfts[47]);

    let dir = TestDir::new("sweep-list");
    let run = sweep(&dir, &["--speeds", "1.2,1.5,1.8", "--format", "json"]);
    run.code(0);
    let j = run.json();
    assert_eq!(j["max_speed"], 1.5, "{}", run.stderr);
    let runs = j["runs"].as_array().unwrap();
    let speeds: Vec<f64> = runs.iter().map(|r| r["speed"].as_f64().unwrap()).collect();
    assert_eq!(speeds, vec![1.2, 1.5, 1.8]);
    let passed: Vec<bool> = runs
        .iter()
        .map(|r| r["passed"].as_bool().unwrap())
        .collect();
    assert_eq!(passed, vec![true, true, false]);
    // Offered rates: 47 gaps of 50 ms / speed.
    assert_eq!(runs[0]["offered_rps"], 24.0);
    assert_eq!(runs[1]["offered_rps"], 30.0);
    assert_eq!(runs[0]["requests"], 48);
    assert_eq!(runs[1]["attainment"], 1.0);
    assert_eq!(runs[1]["error_rate"], 0.0);
    // Without --metrics, no server figures.
    assert_eq!(runs[1]["server"], serde_json::Value::Null);
    // Each run is an ordinary results file.
    for (run, label) in runs.iter().zip(["1.2", "1.5", "1.8"]) {
        let file = format!("runs/speed-{label}.ndjson");
        assert_eq!(run["file"], file);
        assert!(dir.join(&file).exists(), "{file}");
    }
    let summary = dir
        .cmd("trace-summarize")
        .args(["--format", "json", "runs/speed-1.5.ndjson"])
        .run();
    summary.code(0);
    assert_eq!(summary.json()["requests"]["ok"], 48);
    // No scaled copy of the trace is left behind.
    let left: Vec<String> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // The answer through the ordinary pipeline, and a quarter more.
    for (speed, want) in [("1.5", 0), ("1.875", 1)] {
        let scaled = dir
            .cmd("trace-rescale")
            .args(["--speed", speed, "trace.jsonl"])
            .run();
        scaled.code(0);
        let results = dir
            .cmd("trace-replay")
            .arg("--sim")
            .args(SIM)
            .stdin(scaled.stdout.clone())
            .run();
        results.code(0);
        dir.cmd("trace-summarize")
            .args(["--slo", "ttft=150ms", "--fail-if", "slo.met.all<0.99"])
            .stdin(results.stdout.clone())
            .run()
            .code(want);
    }
}

#[test]
fn a_search_lands_where_the_model_says() {
    // The model's boundary: the highest speed (to 0.01) with no TTFT over
    // 150 ms, for places held 250.2 ms, and 3 % longer (a slower machine).
    let boundary = |service: f64| {
        (100..400)
            .map(|s| s as f64 / 100.0)
            .take_while(|&s| model_passes(s, service))
            .last()
            .unwrap()
    };
    let (hi, lo) = (boundary(SERVICE_MS), boundary(SERVICE_MS * 1.03));
    assert!(lo < hi && hi < 1.8, "{lo} {hi}");
    let dir = TestDir::new("sweep-search");
    let run = sweep(&dir, &["--search", "1..4", "--format", "json"]);
    run.code(0);
    let j = run.json();
    let answer = j["max_speed"].as_f64().unwrap();
    // A search ends with its last pass within 5 % of its first fail.
    assert!(
        answer >= lo / 1.05 && answer <= hi,
        "answer {answer} outside [{}, {hi}]\n{}",
        lo / 1.05,
        run.stderr
    );
    let speeds: Vec<f64> = j["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["speed"].as_f64().unwrap())
        .collect();
    // Doubling from 1: 1 passes, 2 fails; then bisection from 1.5. Rows
    // are in speed order.
    assert_eq!((speeds[0], speeds[1]), (1.0, 1.5), "{speeds:?}");
    assert_eq!(speeds.last(), Some(&2.0), "{speeds:?}");
}

/// trace-sweep at speeds 1 and 2 with a TTFT SLO no run meets, in `dir`.
fn sweep_at_1_and_2_with_an_slo_of_1ms(dir: &TestDir, extra: &[&str]) -> Run {
    dir.cmd("trace-sweep")
        .args([
            "--sim", "--slo", "ttft=1ms", "-o", "runs", "--speeds", "1,2",
        ])
        .args(extra)
        .arg("trace.jsonl")
        .run()
}

#[test]
fn no_speed_meeting_the_slo_is_a_negative_answer() {
    let dir = dir_with_trace("sweep-none");
    let between = ["--format", "json", "--between", "echo ran >> between.log"];
    let run = sweep_at_1_and_2_with_an_slo_of_1ms(&dir, &between);
    run.code(1);
    let j = run.json();
    assert_eq!(j["max_speed"], serde_json::Value::Null);
    for r in j["runs"].as_array().unwrap() {
        assert_eq!(r["passed"], false);
        // The first result already misses (none of 48 may): the run stops
        // early and what was not sent is cancelled.
        assert!(r["note"].as_str().unwrap().contains("stopped early"), "{r}");
    }
    // Between the two runs, once.
    assert_eq!(dir.read("between.log"), b"ran\n");
    run.stderr_has("no speed met the SLO");
}

#[test]
fn a_failing_between_command_stops_the_sweep() {
    let dir = dir_with_trace("sweep-between");
    let run = sweep_at_1_and_2_with_an_slo_of_1ms(&dir, &["--between", "exit 3"]);
    run.code(2);
    run.stderr_has("trace-sweep: error: --between `exit 3` failed (exit status: 3)");
}

#[test]
fn bad_flags_are_refused_before_any_run() {
    let dir = dir_with_trace("sweep-usage");
    let cases: [(&[&str], &str); 5] = [
        (
            &["--sim", "--replay-arg=--no-such-flag"],
            "--replay-arg: unexpected argument '--no-such-flag' found (give trace-replay's flags)",
        ),
        (
            &["--url", "http://127.0.0.1:9", "--sim-arg=--max-batch=2"],
            "--sim-arg applies to --sim only",
        ),
        (
            &["--sim", "--plot", "x.png"],
            "--plot x.png: the name asks for .png, which trace-sweep cannot draw; give a name \
             ending in .svg",
        ),
        (&["--sim", "--speeds", "1,0"], "`0` is not a speed"),
        (&["--sim", "--search", "4..1"], "`4..1`: 4 is above 1"),
    ];
    for (flags, want) in cases {
        let run = dir
            .cmd("trace-sweep")
            .args(["--slo", "ttft=1s", "-o", "runs"])
            .args(flags)
            .arg("trace.jsonl")
            .run();
        run.code(2);
        assert!(run.stderr.contains(want), "{flags:?}: {}", run.stderr);
    }
    assert!(!dir.join("runs").exists());
}

#[test]
fn ctrl_c_stops_the_run_and_prints_the_rows_so_far() {
    use std::process::Stdio;
    let dir = TestDir::new("sweep-ctrl-c");
    // 100 requests 100 ms apart: the second run (speed 2) lasts 5 s.
    let trace: String = (0..100)
        .map(|k| {
            format!(
                "{{\"timestamp\":{},\"input_length\":10,\"output_length\":2}}\n",
                k * 100
            )
        })
        .collect();
    dir.write("trace.jsonl", trace);
    let args = "--sim --slo ttft=1s --speeds 4,2 --format json -o runs trace.jsonl";
    let child = dir.spawn("trace-sweep", args, Stdio::piped());
    // Ctrl-C once the second run has its first results.
    let second = dir.join("runs/speed-2.ndjson");
    let out = interrupt_when(child, || {
        let text = std::fs::read_to_string(&second).unwrap_or_default();
        text.lines().count() >= 3
    });
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = j["runs"].as_array().unwrap();
    // By speed: the interrupted run at 2, the whole run at 4.
    assert_eq!(runs.len(), 2, "{j}");
    assert_eq!(
        (&runs[0]["speed"], &runs[0]["passed"]),
        (&2.0.into(), &false.into())
    );
    assert_eq!(runs[0]["note"], "interrupted");
    assert_eq!(
        (&runs[1]["speed"], &runs[1]["passed"]),
        (&4.0.into(), &true.into())
    );
    assert_eq!(j["max_speed"], 4.0);
    // The interrupted run still has one result per record.
    let lines = std::fs::read_to_string(&second).unwrap().lines().count();
    assert_eq!(lines, 100);
}

#[test]
fn each_run_keeps_its_server_scrape_and_the_sweep_is_a_spreadsheet() {
    use calamine::{Reader, Xlsx, open_workbook};
    let dir = dir_with_trace("sweep-xlsx");
    let run = dir
        .cmd("trace-sweep")
        .args(["--sim", "--slo", "ttft=1s", "-o", "runs", "--speeds", "4,2"])
        .args([
            "--metrics",
            "--metrics-every",
            "100ms",
            "--xlsx",
            "sweep.xlsx",
        ])
        .arg("trace.jsonl")
        .run();
    run.code(0);
    for label in ["2", "4"] {
        let scrapes =
            String::from_utf8(dir.read(&format!("runs/speed-{label}.metrics.ndjson"))).unwrap();
        let first: serde_json::Value =
            serde_json::from_str(scrapes.lines().next().unwrap()).unwrap();
        assert!(
            first["samples"]
                .as_object()
                .unwrap()
                .keys()
                .any(|k| k.starts_with("vllm:num_requests_running")),
            "{first}"
        );
    }
    let mut book: Xlsx<_> = open_workbook(dir.join("sweep.xlsx")).unwrap();
    assert_eq!(book.sheet_names(), vec!["sweep", "speed-2", "speed-4"]);
    let sweep = book.worksheet_range("sweep").unwrap();
    let rows: Vec<Vec<calamine::Data>> = sweep.rows().map(|r| r.to_vec()).collect();
    assert_eq!(rows[0][0], calamine::Data::String("speed".into()));
    assert_eq!(rows[0][2], calamine::Data::String("offered_rps".into()));
    // By speed; 47 gaps of 50 ms at 2× and 4×: 40/s and 80/s.
    assert_eq!(rows[1][0], calamine::Data::Float(2.0));
    assert_eq!(rows[1][2], calamine::Data::Float(40.0));
    assert_eq!(rows[2][2], calamine::Data::Float(80.0));
    // With --metrics, the server's figures of each run.
    let header: Vec<String> = rows[0].iter().map(|c| c.to_string()).collect();
    let at = header.iter().position(|h| h == "server.scrapes").unwrap();
    assert_eq!(
        header[at..at + 9].to_vec(),
        [
            "server.scrapes",
            "server.running.mean",
            "server.running.max",
            "server.waiting.mean",
            "server.waiting.max",
            "server.kv_cache_usage.mean",
            "server.kv_cache_usage.max",
            "server.prefix_cache_hit_rate",
            "server.preemptions",
        ]
    );
    assert_eq!(header[at + 9], "passed");
    // The simulator never preempts.
    assert_eq!(rows[1][at + 8], calamine::Data::Float(0.0));
    let per_run = book.worksheet_range("speed-2").unwrap();
    let figures: Vec<Vec<calamine::Data>> = per_run.rows().map(|r| r.to_vec()).collect();
    let ok = figures
        .iter()
        .find(|r| r[0] == calamine::Data::String("requests.ok".into()))
        .unwrap();
    assert_eq!(ok[1], calamine::Data::Float(48.0));
    assert!(
        figures
            .iter()
            .any(|r| r[0] == calamine::Data::String("server.waiting.max".into())),
        "{figures:?}"
    );
}

/// Requests waiting for a place at `t_ms` in the simulator's model of the
/// trace at `speed`: arrived, not yet started.
fn model_waiting(speed: f64, service_ms: f64, t_ms: f64) -> usize {
    let ttfts = model_ttfts(speed, service_ms);
    (0..RECORDS)
        .filter(|&k| {
            let arrive = k as f64 * GAP_MS / speed;
            // The wait, less rounding: a request that did not wait has
            // none.
            let wait = ttfts[k] - TTFT_MS;
            wait > 1e-9 && arrive <= t_ms && t_ms < arrive + wait
        })
        .count()
}

#[test]
fn each_row_says_what_the_server_was_doing() {
    // The model at speed 1 (20/s): a place is held 250.2 ms and requests
    // come 50 ms apart, so at most 6 are in flight and none ever waits for
    // one of the 8 places (nor would they with places held 50 % longer).
    // At speed 4 (80/s) the first 8 fill the batch by 87.5 ms; from the
    // 9th (100 ms) until the last starts (87.5 + 5 × 250.2 ms) someone
    // always waits, up to 25 at once (at 500 ms: 41 arrived, 16 started).
    for t in 0..3000 {
        assert_eq!(model_waiting(1.0, SERVICE_MS * 1.5, t as f64), 0, "{t}");
    }
    for t in 100..1338 {
        assert!(model_waiting(4.0, SERVICE_MS, t as f64) >= 1, "{t}");
    }
    let most = (0..3000)
        .map(|t| model_waiting(4.0, SERVICE_MS, t as f64))
        .max()
        .unwrap();
    assert_eq!(most, 25);
    let worst = model_ttfts(4.0, SERVICE_MS).into_iter().fold(0.0, f64::max);
    assert!((worst - 801.2).abs() < 0.01, "{worst}");

    // An SLO both runs meet (the model's worst TTFT at 4 is 801.2 ms), so
    // that neither stops early.
    let dir = dir_with_trace("sweep-server");
    let run = dir
        .cmd("trace-sweep")
        .args(["--sim", "--slo", "ttft=2s", "-o", "runs", "--speeds", "1,4"])
        .args(SIM)
        .args(["--metrics", "--metrics-every", "100ms", "--format", "json"])
        .args(["--plot", "sweep.svg", "trace.jsonl"])
        .run();
    run.code(0);
    let j = run.json();
    let runs = j["runs"].as_array().unwrap();
    let (calm, busy) = (&runs[0]["server"], &runs[1]["server"]);
    assert_eq!(runs[0]["speed"], 1.0);
    // Scraped before the first request, every 100 ms, and after the last.
    for s in [calm, busy] {
        assert!(s["scrapes"].as_u64().unwrap() >= 3, "{s}");
        // No prefix cache (--cache-blocks=0): usage 0, no lookup to hit;
        // the simulator never preempts.
        assert_eq!(
            s["kv_cache_usage"],
            serde_json::json!({"mean": 0.0, "max": 0.0})
        );
        assert_eq!(s["prefix_cache_hit_rate"], serde_json::Value::Null);
        assert_eq!(s["preemptions"], 0.0);
    }
    assert_eq!(
        calm["waiting"],
        serde_json::json!({"mean": 0.0, "max": 0.0}),
        "{calm}"
    );
    assert!(calm["running"]["max"].as_f64().unwrap() <= 6.0, "{calm}");
    let waiting = &busy["waiting"];
    let max = waiting["max"].as_f64().unwrap();
    assert!((1.0..=40.0).contains(&max), "{busy}");
    assert!(waiting["mean"].as_f64().unwrap() > 0.0, "{busy}");
    // The batch is full from 87.5 ms until the last batch ends.
    assert_eq!(busy["running"]["max"], 8.0, "{busy}");
    let svg = String::from_utf8(dir.read("sweep.svg")).unwrap();
    assert!(
        svg.contains(
            "server (scraped): requests waiting and KV-cache usage, by offered requests/s"
        ),
        "{svg}"
    );
    assert!(svg.contains("waiting max"), "{svg}");
}

#[test]
fn traces_and_flags_a_sweep_cannot_run_are_refused_up_front() {
    let dir = dir_with_trace("sweep-edges");
    // Three records at one instant: no speed changes their schedule.
    dir.write(
        "same.jsonl",
        "{\"timestamp\":0,\"input_length\":5,\"output_length\":2}\n".repeat(3),
    );
    dir.write(
        "untimed.jsonl",
        "{\"input_length\":5,\"output_length\":2}\n".repeat(2),
    );
    // 700,000 s between two records: over a week at speed 1.
    dir.write(
        "long.jsonl",
        "{\"timestamp\":0,\"output_length\":2}\n{\"timestamp\":700000000,\"output_length\":2}\n",
    );
    let cases: [(&[&str], &str, &str); 7] = [
        (
            &[],
            "same.jsonl",
            "same.jsonl: trace-sweep needs records at different times, as trace-rescale --rate \
             does; this trace spans 0 ms, so its speed changes nothing",
        ),
        (
            &[],
            "untimed.jsonl",
            "untimed.jsonl: trace-sweep needs records at different times",
        ),
        (
            &["--replay-arg=--dry-run"],
            "trace.jsonl",
            "--replay-arg=--dry-run: a sweep sends its runs",
        ),
        (
            &["--slo", "ttft=1ms,ttft=1h"],
            "trace.jsonl",
            "`ttft` is given twice: give each SLO once",
        ),
        (
            &["--search", "1e-300..1"],
            "trace.jsonl",
            "`1e-300` is not a speed: give a number from 0.001 to 1000000",
        ),
        (
            &["--speeds", "0.0000001"],
            "trace.jsonl",
            "`0.0000001` is not a speed",
        ),
        (
            &["--speeds", "2,1"],
            "long.jsonl",
            "at speed 1 the trace's 194h26m40s would last 194h26m40s: give higher speeds, or \
             --duration (a run lasts at most 168h)",
        ),
    ];
    for (flags, trace, want) in cases {
        let slo: &[&str] = if flags.contains(&"--slo") {
            &[]
        } else {
            &["--slo", "ttft=1s"]
        };
        let run = dir
            .cmd("trace-sweep")
            .args(["--sim", "-o", "runs"])
            .args(slo)
            .args(flags)
            .arg(trace)
            .run();
        run.code(2);
        assert!(run.stderr.contains(want), "{flags:?}: {}", run.stderr);
    }
    assert!(!dir.join("runs").exists());
}
