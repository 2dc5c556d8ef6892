//! SIGTERM and SIGHUP stop a replay as Ctrl-C does: every record gets its
//! result, and the exit status says which signal it was.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use crate::util::{TestDir, spawn_sim_replay};

/// `n` text records, `gap_ms` apart.
fn trace(n: usize, gap_ms: u64) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{{\"timestamp\":{},\"text_input\":\"request {i}\",\"output_length\":2}}\n",
                i as u64 * gap_ms
            )
        })
        .collect()
}

/// Wait (boundedly) until `path` has `lines` lines.
fn wait_for_lines(path: &std::path::Path, lines: usize) {
    for _ in 0..500 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} never had {lines} lines", path.display());
}

/// Statuses of the results in `out`, checking one result per record.
fn statuses(dir: &TestDir, n: usize) -> Vec<String> {
    let text = String::from_utf8(dir.read("out.ndjson")).unwrap();
    let mut seen = BTreeSet::new();
    let mut statuses = Vec::new();
    for line in text.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(seen.insert(r["index"].as_u64().unwrap()), "twice: {line}");
        statuses.push(r["status"].as_str().unwrap().to_string());
    }
    assert_eq!(seen.len(), n, "one result per record");
    statuses
}

#[test]
fn sigterm_and_sighup_stop_like_ctrl_c_with_their_own_status() {
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        let dir = TestDir::new(&format!("signal-{sig}"));
        dir.write("t.jsonl", trace(100, 100));
        let child = spawn_sim_replay(&dir, "t.jsonl");
        wait_for_lines(&dir.join("out.ndjson"), 3);
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on the child this test started.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let out = child.wait_with_output().unwrap();
        crate::util::assert_exit(&out, code);
        let s = statuses(&dir, 100);
        let ok = s.iter().filter(|s| *s == "ok").count();
        let cancelled = s.iter().filter(|s| *s == "cancelled").count();
        assert!(ok >= 3 && cancelled >= 50, "{ok} ok, {cancelled} cancelled");
        assert_eq!(ok + cancelled, 100);
    }
}

/// Wait (boundedly) until process `pid` catches `sig`: its handler is in.
fn wait_for_handler(pid: u32, sig: i32) {
    for _ in 0..500 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or(0);
        if caught & (1 << (sig - 1)) != 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("process {pid} never caught signal {sig}");
}

#[test]
fn ctrl_c_while_the_input_has_not_ended_stops_at_once() {
    use std::io::Write;
    let dir = TestDir::new("signal-open-input");
    let mut child = dir.spawn_fed("trace-replay", "--sim --quiet -o out.ndjson");
    // Three records, and the input left open, as `(cat t; sleep 100) |`.
    let mut input = child.stdin.take().unwrap();
    input.write_all(trace(3, 10).as_bytes()).unwrap();
    input.flush().unwrap();
    wait_for_handler(child.id(), libc::SIGINT);
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    drop(input);
    crate::util::assert_exit(&out, 130);
    assert_eq!(statuses(&dir, 3), vec!["cancelled"; 3]);
}

/// trace-replay --sim reading its records from a pipe the test holds.
fn replay_from_a_pipe(dir: &TestDir) -> std::process::Child {
    dir.spawn_fed("trace-replay", "--sim --quiet --grace 2s -o out.ndjson")
}

/// Send `sig` to `child`.
fn signal(child: &std::process::Child, sig: i32) {
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on a child this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// Wait (generously) for `child` to end; kill it and fail if it does not.
fn ends_within(mut child: std::process::Child, secs: u64) -> std::process::Output {
    for _ in 0..secs * 50 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "still running {secs} s after the signal: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The indices of the results in `out`, checking each comes once.
fn indices(dir: &TestDir) -> Vec<u64> {
    let text = String::from_utf8(dir.read("out.ndjson")).unwrap();
    let mut seen: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    seen.sort_unstable();
    seen
}

#[test]
fn a_signal_stops_reading_an_input_that_keeps_flowing() {
    use std::io::Write;
    // One signal, and two in a row: either ends the run, although its
    // input never stops.
    for (signals, code) in [
        (&[libc::SIGTERM][..], 143),
        (&[libc::SIGINT, libc::SIGINT], 130),
    ] {
        let dir = TestDir::new(&format!("signal-flowing-{}", signals.len()));
        let mut child = replay_from_a_pipe(&dir);
        let mut input = child.stdin.take().unwrap();
        // A record every 100 ms for as long as the replay reads (60 s at
        // most); the run waits for its read-ahead, which never fills.
        let producer = std::thread::spawn(move || {
            for line in trace(600, 100).lines() {
                if writeln!(input, "{line}")
                    .and_then(|()| input.flush())
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        wait_for_handler(child.id(), signals[0]);
        std::thread::sleep(Duration::from_millis(1000));
        for &sig in signals {
            signal(&child, sig);
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = ends_within(child, 10);
        crate::util::assert_exit(&out, code);
        // Every record read has its line, and they are the first ones.
        let seen = indices(&dir);
        assert!(seen.len() >= 3, "{seen:?}");
        assert_eq!(seen, (0..seen.len() as u64).collect::<Vec<_>>());
        assert_eq!(statuses(&dir, seen.len()), vec!["cancelled"; seen.len()]);
        producer.join().unwrap();
    }
}

#[test]
fn every_record_read_from_an_open_input_gets_its_line() {
    use std::io::Write;
    // Twenty records written at once to an input that stays open: the run
    // waits for more before it starts. At 1.5 s, SIGINT: each of the
    // twenty, read and waiting, is cancelled with its line.
    for round in 0..5 {
        let dir = TestDir::new(&format!("signal-open-twenty-{round}"));
        let mut child = replay_from_a_pipe(&dir);
        let mut input = child.stdin.take().unwrap();
        input.write_all(trace(20, 1000).as_bytes()).unwrap();
        input.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        signal(&child, libc::SIGINT);
        let out = ends_within(child, 10);
        drop(input);
        crate::util::assert_exit(&out, 130);
        assert_eq!(statuses(&dir, 20), vec!["cancelled"; 20], "round {round}");
    }
}

#[test]
fn a_signal_during_the_server_check_gives_every_record_its_result() {
    // A server that accepts connections and never answers: the check
    // waits for it (up to 3 s).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let dir = TestDir::new("signal-preflight");
    dir.write("t.jsonl", trace(3, 10));
    let args = format!("--url {url} -o out.ndjson t.jsonl");
    let child = dir.spawn("trace-replay", &args, Stdio::null());
    // The check has connected: it waits for an answer.
    let (_connection, _) = listener.accept().unwrap();
    signal(&child, libc::SIGTERM);
    let out = ends_within(child, 10);
    crate::util::assert_exit(&out, 143);
    assert_eq!(statuses(&dir, 3), vec!["cancelled"; 3]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cancelled 3"), "{stderr}");
}

#[test]
fn the_end_of_the_grace_does_not_cut_short_the_rest_of_an_input_file() {
    // With --grace 0 the requests in flight are cancelled as the stop
    // comes; the records of the file still to read get their lines all
    // the same (only a second signal reads no further).
    let dir = TestDir::new("signal-no-grace");
    dir.write("t.jsonl", trace(100_000, 100));
    let args = "--sim --quiet --grace 0s -o out.ndjson t.jsonl";
    let child = dir.spawn("trace-replay", args, Stdio::null());
    wait_for_lines(&dir.join("out.ndjson"), 3);
    signal(&child, libc::SIGTERM);
    let out = ends_within(child, 20);
    crate::util::assert_exit(&out, 143);
    let s = statuses(&dir, 100_000);
    let ok = s.iter().filter(|s| *s == "ok").count();
    assert!(ok >= 3, "{ok} ok");
    assert_eq!(s.iter().filter(|s| *s == "cancelled").count(), 100_000 - ok);
}
