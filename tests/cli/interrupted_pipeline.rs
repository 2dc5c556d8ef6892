//! Ctrl-C from a terminal reaches every process of a pipeline at once
//! (SIGINT to its process group). The tools reading a pipe read on until
//! their input ends, do their job on what came and exit 130; the replay
//! upstream writes a result for every record; nothing is lost. A second
//! Ctrl-C stops a reader at once. The processes here keep the default
//! signal dispositions, as a shell in a terminal leaves them.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{TestDir, bin, data};

/// Wait (boundedly) until process `pid` catches SIGINT: its handler is in,
/// so the signal finds it ready.
fn wait_for_handler(pid: u32) {
    for _ in 0..1000 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0);
        if caught & (1 << (libc::SIGINT - 1)) != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("process {pid} never caught SIGINT");
}

/// `cmd` with SIGINT at its default action, as a shell in a terminal
/// starts a pipeline's commands (a test harness run in the background may
/// have been given it ignored).
fn default_sigint(cmd: &mut Command) -> &mut Command {
    // SAFETY: signal(2) is async-signal-safe, as pre_exec asks.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

/// Send SIGINT to process group `pgid`, as a terminal's Ctrl-C does.
fn ctrl_c_to_group(pgid: u32) {
    let pgid = i32::try_from(pgid).unwrap();
    // SAFETY: kill(2) on the process group of the children this test started.
    assert_eq!(unsafe { libc::kill(-pgid, libc::SIGINT) }, 0);
}

/// Send SIGINT to one child.
fn ctrl_c_to(child: &Child) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on a child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
}

/// `trace-gen --count 200 --rate 50 | trace-replay --sim REPLAY… |
/// trace-summarize --format json`, its three processes in one new process
/// group; returns the group, replay and summarize, once trace-gen has
/// written the whole trace and ended, and their SIGINT handlers are in.
fn pipeline(dir: &TestDir, replay: &[&str]) -> (u32, Child, Child) {
    // 200 records of about 100 bytes: the whole trace fits in the pipe, so
    // the replay takes every one of them on whatever happens to trace-gen.
    let mut gen_ = default_sigint(&mut Command::new(bin("trace-gen")))
        .current_dir(&dir.path)
        .args(["--count", "200", "--rate", "50", "--seed", "1"])
        .args(["--input-len", "8", "--output-len", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = i32::try_from(gen_.id()).unwrap();
    let mut replay = default_sigint(&mut Command::new(bin("trace-replay")))
        .current_dir(&dir.path)
        .args(["--sim", "--quiet", "--grace", "2s"])
        .args(replay)
        .stdin(gen_.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(group)
        .spawn()
        .unwrap();
    let summarize = default_sigint(&mut Command::new(bin("trace-summarize")))
        .current_dir(&dir.path)
        .args(["--format", "json"])
        .stdin(replay.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(group)
        .spawn()
        .unwrap();
    assert!(gen_.wait().unwrap().success());
    wait_for_handler(replay.id());
    wait_for_handler(summarize.id());
    (gen_.id(), replay, summarize)
}

/// The requests a summary counts: ok, error, timeout and cancelled.
fn counted(summary: &Value) -> (u64, u64) {
    let r = &summary["requests"];
    let n = |k: &str| {
        r[k].as_u64()
            .unwrap_or_else(|| panic!("requests.{k} in {r}"))
    };
    (n("total"), n("ok") + n("cancelled"))
}

#[test]
fn ctrl_c_on_the_readmes_pipeline_summarizes_every_result() {
    let dir = TestDir::new("pipeline-ctrl-c");
    let (group, replay, summarize) = pipeline(&dir, &[]);
    ctrl_c_to_group(group);
    let replay = replay.wait_with_output().unwrap();
    let summary = summarize.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&summary.stderr);
    assert_eq!(
        replay.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(summary.status.code(), Some(130), "{stderr}");
    // Every record of the trace has its result in the summary: 200 in all,
    // each ok or cancelled (the simulated server fails none).
    let v: Value = serde_json::from_slice(&summary.stdout).unwrap();
    assert_eq!(counted(&v), (200, 200), "{v}");
}

#[test]
fn keep_holds_every_result_of_an_interrupted_pipeline() {
    let dir = TestDir::new("pipeline-keep");
    let (group, replay, summarize) = pipeline(&dir, &["--keep", "kept.ndjson"]);
    // A few results in first: the run is under way when Ctrl-C comes.
    for _ in 0..1000 {
        let text = std::fs::read_to_string(dir.join("kept.ndjson")).unwrap_or_default();
        if text.lines().count() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ctrl_c_to_group(group);
    let replay = replay.wait_with_output().unwrap();
    let summary = summarize.wait_with_output().unwrap();
    assert_eq!(
        replay.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(summary.status.code(), Some(130));
    let v: Value = serde_json::from_slice(&summary.stdout).unwrap();
    assert_eq!(counted(&v), (200, 200), "{v}");
    // The file has one result per record, 0 to 199, each once, and the
    // run's settings beside it.
    let text = String::from_utf8(dir.read("kept.ndjson")).unwrap();
    let indexes: BTreeSet<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(text.lines().count(), 200);
    assert_eq!(indexes, (0..200).collect());
    assert!(dir.join("kept.ndjson.run.json").exists());
}

/// The pipe readers and the flags they run with here, on inputs from
/// `tests/data`.
const READERS: &[(&str, &[&str], &str)] = &[
    ("trace-validate", &[], "sessions.jsonl"),
    ("trace-slice", &["--head", "1000"], "sessions.jsonl"),
    ("trace-rescale", &["--speed", "2"], "sessions.jsonl"),
    (
        "trace-synth",
        &["--tokenizer", "wordlevel-tokenizer.json"],
        "sessions.jsonl",
    ),
    ("trace-convert", &[], "sessions.jsonl"),
    (
        "trace-summarize",
        &["--format", "json"],
        "results/small.ndjson",
    ),
];

/// `tool args` reading a pipe this test holds, in the data directory.
fn fed(tool: &str, args: &[&str]) -> Child {
    default_sigint(&mut Command::new(bin(tool)))
        .current_dir(data(""))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn each_pipe_reader_reads_on_after_a_first_ctrl_c_and_exits_130() {
    for (tool, args, input) in READERS {
        let input = std::fs::read(data(input)).unwrap();
        let cut = input.len() / 2;
        // The same input read in one go, uninterrupted: what the job gives.
        let whole = {
            let mut child = fed(tool, args);
            child.stdin.take().unwrap().write_all(&input).unwrap();
            child.wait_with_output().unwrap()
        };
        assert!(whole.status.code().is_some_and(|c| c <= 1), "{tool}");
        // Half the input, Ctrl-C, the other half, the end of the input.
        let mut child = fed(tool, args);
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(&input[..cut]).unwrap();
        pipe.flush().unwrap();
        wait_for_handler(child.id());
        ctrl_c_to(&child);
        pipe.write_all(&input[cut..]).unwrap();
        drop(pipe);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{tool}: {stderr}");
        assert!(
            out.stdout == whole.stdout,
            "{tool}: the job done on all of the input"
        );
        assert_eq!(out.stderr, whole.stderr, "{tool}");
    }
}

#[test]
fn a_second_ctrl_c_stops_a_pipe_reader_at_once() {
    let mut child = fed("trace-summarize", &[]);
    let pipe = child.stdin.take().unwrap();
    wait_for_handler(child.id());
    ctrl_c_to(&child);
    // The first is caught once: the handler goes, and the second ends it.
    for _ in 0..1000 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0);
        if caught & (1 << (libc::SIGINT - 1)) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ctrl_c_to(&child);
    let out = child.wait_with_output().unwrap();
    drop(pipe);
    assert_eq!(out.status.signal(), Some(libc::SIGINT));
    assert!(out.stdout.is_empty());
}
