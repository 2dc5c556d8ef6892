//! Every example of every man page runs as printed, on the bundled data:
//! in a directory where `tests/` is the repository's and every file the
//! examples name (`trace.jsonl`, `results.ndjson`, `logs/`, `export/`,
//! `traces/`, ...) is bundled data or made from it by the real binaries,
//! with the built binaries first on PATH. The examples of a page run in
//! order, so a file one writes (`server.json`, `run.otlp.json`) is there
//! for the next; the pages run at once, each in its own copy of that
//! directory (about a minute in all on a busy 2-core machine).
//!
//! What the test changes, and only that:
//! - every `http://HOST:PORT` (`127.0.0.1:8000`, `gpu-1:8000`, `lb:8000`)
//!   becomes the URL of one trace-sim the test starts on a free loopback
//!   port: the machine's port 8000 may be taken, and the other hosts do
//!   not exist here;
//! - an example that starts a server (`trace-sim` serving until stopped)
//!   gets `--port 0`; the test checks it answers `GET /v1/models`, then
//!   stops it;
//! - the runs meant to last minutes are shortened (see [`SHORTER`]);
//! - `--start-at` (a fixed instant, past by now) becomes 10 s from now;
//! - `trace-sim --fit` gets `--force`: the results it fits come from the
//!   test's trace-sim, whose per-request model the twin's step model does
//!   not explain, so the fit's own check rightly refuses the profile.
//!
//! An example that needs what the test cannot give (a database) is named
//! as not run, with the reason; `jq` and `curl` are used where installed.
//! The count that must run is asserted: all but [`NOT_HERE`] (and the
//! lines of `jq` or `curl` where they are missing).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::servers::Sim;
use crate::util::{TestDir, bin, data};

/// The examples that cannot run here, with why: the only ones skipped.
const NOT_HERE: &[(&str, &str)] = &[("psql ", "needs a PostgreSQL database ($DB)")];

/// Long runs made short: (flag, as printed, as run). A replay of five or
/// ten minutes, or cooldowns of 30 s between four runs, would take the
/// test past its time; the same flags with smaller values run the same
/// code.
const SHORTER: &[(&str, &str, &str)] = &[
    ("--duration", "5m", "2s"),
    ("--loop", "10m", "2s"),
    ("--cooldown", "30s", "1s"),
];

/// The commands of a page's EXAMPLES section: the lines after `.IP`
/// (`.br` between commands, a line starting `|` continuing the one
/// before) and `.nf` blocks (continuation lines ending `\e` joined, `#`
/// comments dropped), roff escapes undone.
fn examples(page: &str) -> Vec<String> {
    let Some(section) = page.split("\n.SH EXAMPLES\n").nth(1) else {
        return Vec::new();
    };
    let section = section.split("\n.SH ").next().unwrap_or_default();
    let unescape = |l: &str| {
        l.replace("\\-", "-")
            .replace("\\e", "\\")
            .replace("\\(aq", "'")
            .replace("\\\\", "\\")
    };
    let mut out: Vec<String> = Vec::new();
    let mut lines = section.lines().peekable();
    while let Some(line) = lines.next() {
        match line.trim() {
            ".IP" => {
                while let Some(l) = lines.next_if(|l| !l.starts_with('.') || l.trim() == ".br") {
                    let l = unescape(l);
                    let l = l.trim();
                    if l == ".br" || l.is_empty() {
                        continue;
                    }
                    match (l.starts_with('|'), out.last_mut()) {
                        (true, Some(last)) => {
                            last.push(' ');
                            last.push_str(l);
                        }
                        _ => out.push(l.to_string()),
                    }
                }
            }
            ".nf" => {
                let mut cmd = String::new();
                for l in lines.by_ref() {
                    if l.trim() == ".fi" {
                        break;
                    }
                    let l = unescape(l);
                    let l = l.split(" #").next().unwrap_or_default().trim();
                    if l.is_empty() {
                        continue;
                    }
                    match l.strip_suffix('\\') {
                        Some(part) => {
                            cmd.push_str(part.trim_end());
                            cmd.push(' ');
                        }
                        None => {
                            cmd.push_str(l);
                            out.push(std::mem::take(&mut cmd));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// What the test does with an example.
#[derive(Debug, PartialEq)]
enum Plan {
    /// Run this command line (the example, changed as the module says).
    Run(String),
    /// Start this server, check it answers, stop it.
    Serve(Vec<String>),
    /// Not run, for this reason.
    Skip(String),
}

fn plan(cmd: &str, dir: &Path, url: &str) -> Plan {
    if let Some((_, why)) = NOT_HERE.iter().find(|(start, _)| cmd.starts_with(start)) {
        return Plan::Skip(why.to_string());
    }
    for tool in ["jq", "curl"] {
        if cmd.contains(&format!("{tool} ")) && !installed(tool) {
            return Plan::Skip(format!("{tool} is not installed"));
        }
    }
    if let Some(path) = missing_input(cmd, dir) {
        return Plan::Skip(format!("names `{path}`, which is not there"));
    }
    let words: Vec<&str> = cmd.split_whitespace().collect();
    if words[0] == "trace-sim" && !words.iter().any(|w| ["--fit", "--offline"].contains(w)) {
        let mut args: Vec<String> = Vec::new();
        let mut it = words[1..].iter();
        while let Some(w) = it.next() {
            if *w == "--port" {
                it.next();
            } else {
                args.push(w.to_string());
            }
        }
        args.extend(["--port".to_string(), "0".to_string()]);
        return Plan::Serve(args);
    }
    let cmd = if words[0] == "trace-sim" && words.contains(&"--fit") && !words.contains(&"--force")
    {
        cmd.replacen("--fit", "--force --fit", 1)
    } else {
        cmd.to_string()
    };
    Plan::Run(start_soon(&shorter(&local_urls(&cmd, url))))
}

/// Every `http://HOST:PORT` of `cmd` as `url` (the path kept).
fn local_urls(cmd: &str, url: &str) -> String {
    let mut out = String::new();
    let mut rest = cmd;
    while let Some(i) = rest.find("http://") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "http://".len()..];
        let end = after
            .find(|c: char| c == '/' || c == '\'' || c == '"' || c.is_whitespace())
            .unwrap_or(after.len());
        if after[..end].contains(':') {
            out.push_str(url);
        } else {
            out.push_str(&rest[i..i + "http://".len() + end]);
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// `cmd` with the runs of [`SHORTER`] shortened.
fn shorter(cmd: &str) -> String {
    let replays = cmd.contains("trace-replay") || cmd.contains("trace-sweep");
    let mut words: Vec<String> = cmd.split(' ').map(str::to_string).collect();
    for i in 1..words.len() {
        for (flag, long, short) in SHORTER {
            if replays && words[i - 1] == *flag && words[i] == *long {
                words[i] = short.to_string();
            }
        }
    }
    words.join(" ")
}

/// `--start-at TIME` as 10 s from when the command starts (time for the
/// replay to start and read ahead on a busy machine).
fn start_soon(cmd: &str) -> String {
    let mut words: Vec<String> = cmd.split(' ').map(str::to_string).collect();
    for i in 1..words.len() {
        if words[i - 1] == "--start-at" {
            words[i] = "$(date -u -d @$(($(date +%s) + 10)) +%Y-%m-%dT%H:%M:%SZ)".into();
        }
    }
    words.join(" ")
}

fn installed(tool: &str) -> bool {
    Command::new("which")
        .arg(tool)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A file or folder `cmd` reads that is not in `dir`.
fn missing_input(cmd: &str, dir: &Path) -> Option<String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let prev = if i > 0 { words[i - 1] } else { "" };
        let written = matches!(
            prev,
            ">" | ">>" | "-o" | "--output" | "--plot" | "--metrics-out" | "tee"
        );
        let w = w.trim_matches('\'');
        let looks_like_file = [".jsonl", ".json", ".csv", ".ndjson", ".gz", ".parquet"]
            .iter()
            .any(|e| w.ends_with(e))
            || (w.ends_with('/') && !w.contains("://"));
        if looks_like_file && !written && !w.starts_with('-') {
            let path = w.strip_prefix("from:").unwrap_or(w);
            let present = |p: &str| {
                if p.contains('*') {
                    glob_matches(dir, p)
                } else {
                    dir.join(p).exists()
                }
            };
            if !path.split(',').all(present) {
                return Some(path.to_string());
            }
        }
    }
    None
}

/// Whether the glob `pattern` (one `*`, in the last part) names a file.
fn glob_matches(dir: &Path, pattern: &str) -> bool {
    let (folder, name) = pattern.rsplit_once('/').unwrap_or(("", pattern));
    let (start, end) = name.split_once('*').unwrap_or((name, ""));
    std::fs::read_dir(dir.join(folder)).is_ok_and(|d| {
        d.flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(start) && n.ends_with(end) && n.len() >= start.len() + end.len()
        })
    })
}

/// Start trace-sim with `args` (which hold `--port 0`), check that
/// `GET /v1/models` answers 200 with a model list, stop it.
fn serve_and_stop(args: &[String]) -> Result<(), String> {
    let mut child = Command::new(bin("trace-sim"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let answer = line
        .trim()
        .strip_prefix("http://")
        .ok_or_else(|| format!("no URL first on stdout: {line:?}"))
        .and_then(|addr| get(addr, "/v1/models"));
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer?;
    if answer.starts_with("HTTP/1.1 200") && answer.contains("\"data\"") {
        Ok(())
    } else {
        Err(format!("GET /v1/models answered {answer:?}"))
    }
}

/// A plain HTTP/1.1 GET of `path` at `addr` (`host:port`): the whole
/// answer.
fn get(addr: &str, path: &str) -> Result<String, String> {
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    Ok(answer)
}

/// `tool args` in `dir`, stdin from `input` (a file there) when given,
/// stdout to the file `output` there; it must succeed.
fn make(dir: &Path, tool: &str, args: &[&str], input: Option<&str>, output: &str) {
    let stdin = match input {
        Some(f) => Stdio::from(std::fs::File::open(dir.join(f)).unwrap()),
        None => Stdio::null(),
    };
    let out = Command::new(bin(tool))
        .args(args)
        .current_dir(dir)
        .stdin(stdin)
        .stdout(std::fs::File::create(dir.join(output)).unwrap())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "making {output}: {tool} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copy the bundled `tests/data/NAME` to `to` in `dir` (folders made).
fn bundle(dir: &Path, name: &str, to: &str) {
    let to = dir.join(to);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(data(name), to).unwrap();
}

/// `dir/from` gzipped as `dir/to`.
fn gzip(dir: &Path, from: &str, to: &str) {
    let bytes = std::fs::read(dir.join(from)).unwrap();
    let mut z = flate2::write::GzEncoder::new(
        std::fs::File::create(dir.join(to)).unwrap(),
        flate2::Compression::default(),
    );
    z.write_all(&bytes).unwrap();
    z.finish().unwrap();
}

/// The directory the examples run in: `tests` is the repository's, and
/// every file the pages name is there.
fn sandbox() -> TestDir {
    let dir = TestDir::new("man-examples");
    let d = &dir.path;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::os::unix::fs::symlink(repo.join("tests"), d.join("tests")).unwrap();
    // The bundled trace's first 40 records (1.5 s at this speed), prompts
    // capped, answers cut: quick to replay on the simulator.
    bundle(d, "conversation_trace.jsonl", "conversation_trace.jsonl");
    make(
        d,
        "trace-slice",
        &["--head", "40", "conversation_trace.jsonl"],
        None,
        "head.jsonl",
    );
    let quick = [
        "--max-input",
        "2048",
        "--output-scale",
        "0.05",
        "--speed",
        "8",
    ];
    for name in ["trace.jsonl", "mooncake.jsonl", "small.jsonl"] {
        make(d, "trace-rescale", &quick, Some("head.jsonl"), name);
    }
    gzip(d, "trace.jsonl", "trace.jsonl.gz");
    bundle(d, "wordlevel-tokenizer.json", "tokenizer.json");
    // Logs of every kind the convert examples name.
    let logs = [
        (
            "real_proxy_standard_logging_payloads.jsonl",
            "logs/payloads.jsonl",
        ),
        (
            "standard_logging_payload.bedrock_captured.json",
            "logs.json",
        ),
        ("spend_logs_payload.gcs_pubsub_fixture.json", "spend.json"),
        (
            "AzureLLMInferenceTrace_conv.head300.csv",
            "AzureLLMInferenceTrace_conv.csv",
        ),
        (
            "blob_export_observations.constructed.jsonl",
            "export/observations/part-0.jsonl",
        ),
        (
            "blob_export_traces.constructed.jsonl",
            "export/traces/part-0.jsonl",
        ),
        (
            "blob_export_observations.parquet",
            "export/observations/part-0.parquet",
        ),
        ("blob_export_traces.parquet", "export/traces/part-0.parquet"),
        (
            "otel/litellm-migrated.naturalquestions-2165-aider.traces.jsonl",
            "traces.jsonl",
        ),
        ("batch_input.constructed.jsonl", "batch_input.jsonl"),
        ("batch_output.constructed.jsonl", "batch_output.jsonl"),
        ("batch_errors.constructed.jsonl", "batch_errors.jsonl"),
        (
            "litellm_langchain_messages.constructed.jsonl",
            "payloads.jsonl",
        ),
        ("kv_cache_tester_trace_0504.json", "traces/trace_0504.json"),
        (
            "kv_cache_tester_trace_0291.requests15-19.json",
            "traces/trace_0291.json",
        ),
        ("servegen_offline_trace_d.head12.jsonl", "trace_d.jsonl"),
    ];
    for (from, to) in logs {
        bundle(d, &format!("convert/{from}"), to);
    }
    gzip(d, "payloads.jsonl", "payloads.jsonl.gz");
    // The psql export's rows 2 to 4: 2.6 s of calls (the whole export
    // replays for 31 s).
    let export =
        std::fs::read_to_string(data("convert/spend_logs.psql_csv_export.constructed.csv"))
            .unwrap();
    let rows: Vec<&str> = export.lines().collect();
    std::fs::write(
        d.join("spend.csv"),
        [&rows[..1], &rows[2..5]].concat().join("\n") + "\n",
    )
    .unwrap();
    // An earlier AIPerf run.
    bundle(d, "peers/profile_export.jsonl", "profile_export.jsonl");
    bundle(
        d,
        "peers/profile_export.jsonl",
        "artifacts/run/profile_export.jsonl",
    );
    // Results of real replays on the simulator, each with its settings
    // beside it: setup a the default server, setup b one of 4 places; the
    // shards of a four-machine replay. At once: they mostly wait. The
    // third run of a setup is a copy of the first (a replay takes seconds
    // on a busy machine).
    let a = ["--sim", "--quiet"];
    let b = ["--sim", "--quiet", "--sim-arg=--max-batch=4"];
    let mut runs: Vec<(String, Vec<&str>)> = vec![
        ("a1.ndjson".into(), a.to_vec()),
        ("a2.ndjson".into(), a.to_vec()),
        ("b1.ndjson".into(), b.to_vec()),
        ("b2.ndjson".into(), b.to_vec()),
    ];
    for (i, shard) in ["1/4", "2/4", "3/4", "4/4"].iter().enumerate() {
        runs.push((
            format!("shard-{}.ndjson", i + 1),
            [&a[..], &["--shard", shard]].concat(),
        ));
    }
    let children: Vec<_> = runs
        .iter()
        .map(|(out, args)| {
            let child = Command::new(bin("trace-replay"))
                .args(args)
                .args(["-o", out, "trace.jsonl"])
                .current_dir(d)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    for (out, child) in children {
        let done = child.wait_with_output().unwrap();
        assert!(
            done.status.success(),
            "making {out}: {}",
            String::from_utf8_lossy(&done.stderr)
        );
    }
    let copies = [
        ("a1", "a3"),
        ("a1", "run"),
        ("a1", "run1"),
        ("a1", "before"),
        ("a1", "results"),
        ("b1", "b3"),
        ("b1", "run2"),
        ("b1", "after"),
    ];
    for (from, to) in copies {
        for suffix in [".ndjson", ".ndjson.run.json"] {
            std::fs::copy(
                d.join(format!("{from}{suffix}")),
                d.join(format!("{to}{suffix}")),
            )
            .unwrap();
        }
    }
    dir
}

fn bin_dir() -> PathBuf {
    bin("trace-gen").parent().unwrap().to_path_buf()
}

#[test]
fn every_man_page_example_runs_as_printed() {
    let started = std::time::Instant::now();
    let dir = sandbox();
    let sim = Sim::start(&[]);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut pages: Vec<PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("man"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    pages.sort();
    // The pages at once, each in a copy of the sandbox (a page's examples
    // in order, in one folder): the replays mostly wait.
    let outcomes: Vec<Page> = std::thread::scope(|scope| {
        let runs: Vec<_> = pages
            .iter()
            .map(|page| {
                let name = page.file_name().unwrap().to_string_lossy().into_owned();
                let copy = TestDir::new(&format!("man-examples-{name}"));
                copy_dir(&dir.path, &copy.path);
                let (path, url) = (&path, &sim.url);
                scope.spawn(move || run_page(page, &name, &copy.path, url, path))
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let total: usize = outcomes.iter().map(|p| p.total).sum();
    let ran: usize = outcomes.iter().map(|p| p.ran).sum();
    let failed: Vec<String> = outcomes.iter().flat_map(|p| p.failed.clone()).collect();
    let skipped: Vec<String> = outcomes.iter().flat_map(|p| p.skipped.clone()).collect();
    println!(
        "{ran} of {total} examples ran in {:.0?}; not run:\n{}",
        started.elapsed(),
        skipped.join("\n")
    );
    assert!(
        failed.is_empty(),
        "examples that failed:\n{}",
        failed.join("\n")
    );
    // All run but the lines of NOT_HERE, and those of jq or curl where
    // they are not installed.
    let no_tool = skipped
        .iter()
        .filter(|s| s.ends_with("is not installed)"))
        .count();
    assert_eq!(
        total - ran,
        NOT_HERE.len() + no_tool,
        "examples not run:\n{}",
        skipped.join("\n")
    );
    assert!(total >= 60, "only {total} examples read");
}

/// What became of a page's examples.
struct Page {
    total: usize,
    ran: usize,
    failed: Vec<String>,
    skipped: Vec<String>,
}

/// The examples of the man page `page`, in order, in `dir`.
fn run_page(page: &Path, name: &str, dir: &Path, url: &str, path: &str) -> Page {
    let text = std::fs::read_to_string(page).unwrap();
    let mut out = Page {
        total: 0,
        ran: 0,
        failed: Vec::new(),
        skipped: Vec::new(),
    };
    for cmd in examples(&text) {
        out.total += 1;
        let result = match plan(&cmd, dir, url) {
            Plan::Skip(why) => {
                out.skipped.push(format!("{name}: {cmd}  ({why})"));
                continue;
            }
            Plan::Serve(args) => serve_and_stop(&args),
            Plan::Run(line) => run(&line, dir, path),
        };
        out.ran += 1;
        if let Err(why) = result {
            out.failed.push(format!("{name}: {cmd}\n  {why}"));
        }
    }
    out
}

/// A copy of the folder `from` as `to` (which exists), symbolic links as
/// links.
fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), dst).unwrap();
        } else if kind.is_dir() {
            std::fs::create_dir(&dst).unwrap();
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, dst).unwrap();
        }
    }
}

/// Run `line` with bash (pipefail) in `dir`, a minute at most: an
/// example is quick on the bundled data.
fn run(line: &str, dir: &Path, path: &str) -> Result<(), String> {
    let out = Command::new("timeout")
        .args(["60", "bash", "-c", &format!("set -o pipefail; {line}")])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ran as: {line}\n  exit {:?}\n  {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).replace('\n', "\n  ")
        ))
    }
}

#[test]
fn examples_are_read_from_both_layouts() {
    let page = "\n.SH EXAMPLES\nOne:\n.IP\ntrace-gen \\-\\-count 3 | trace-validate\n.br\n  | trace-summarize\n.br\ntrace-slice a.jsonl\n.PP\nTwo:\n.nf\n    trace-slice \\-\\-head 2 \\e\n        t.jsonl   # here\n.fi\n.SH SEE ALSO\n";
    assert_eq!(
        examples(page),
        [
            "trace-gen --count 3 | trace-validate | trace-summarize",
            "trace-slice a.jsonl",
            "trace-slice --head 2 t.jsonl"
        ]
    );
}

#[test]
fn examples_are_pointed_at_the_test_server() {
    let url = "http://127.0.0.1:4321";
    assert_eq!(
        local_urls(
            "trace-sweep --url http://127.0.0.1:8000 --between 'curl -X POST http://lb:8000/reset_prefix_cache' see http://example.org/x",
            url
        ),
        "trace-sweep --url http://127.0.0.1:4321 --between 'curl -X POST http://127.0.0.1:4321/reset_prefix_cache' see http://example.org/x"
    );
    assert_eq!(
        plan("trace-sim --port 8000 --seed 3", Path::new("."), url),
        Plan::Serve(["--seed", "3", "--port", "0"].map(str::to_string).to_vec())
    );
    assert_eq!(
        plan(
            "trace-replay --url http://gpu-1:8000 --concurrency 32 --duration 5m",
            Path::new("."),
            url
        ),
        Plan::Run("trace-replay --url http://127.0.0.1:4321 --concurrency 32 --duration 2s".into())
    );
    assert_eq!(
        plan("trace-rescale --duration 5m", Path::new("."), url),
        Plan::Run("trace-rescale --duration 5m".into())
    );
}
