//! SIGTERM and SIGHUP stop a replay as Ctrl-C does: every record gets its
//! result, and the exit status says which signal it was.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{TestDir, bin, spawn_sim_replay};

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
    let mut child = Command::new(bin("trace-replay"))
        .current_dir(&dir.path)
        .args(["--sim", "--quiet", "-o", "out.ndjson"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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
