//! Every example of every man page runs as printed, on the bundled data:
//! in a directory where `tests/` is the repository's and the files the
//! examples name (`trace.jsonl`, `results.ndjson`, ...) are bundled data,
//! with the built binaries first on PATH. An example that needs what the
//! tests cannot give (a server at a URL, a file of the user's own) is
//! named in the output as not run, with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{TestDir, bin, data};

/// The commands of a page's EXAMPLES section: `.IP` lines and `.nf`
/// blocks, continuation lines (ending `\e`) joined, roff escapes undone.
fn examples(page: &str) -> Vec<String> {
    let Some(section) = page.split("\n.SH EXAMPLES\n").nth(1) else {
        return Vec::new();
    };
    let section = section.split("\n.SH ").next().unwrap_or_default();
    let mut out = Vec::new();
    let mut lines = section.lines().peekable();
    let unescape = |l: &str| {
        l.replace("\\-", "-")
            .replace("\\e", "\\")
            .replace("\\(aq", "'")
    };
    while let Some(line) = lines.next() {
        match line.trim() {
            ".IP" => {
                if let Some(cmd) = lines.next() {
                    out.push(unescape(cmd).trim().to_string());
                }
            }
            ".nf" => {
                let mut cmd = String::new();
                for l in lines.by_ref() {
                    if l.trim() == ".fi" {
                        break;
                    }
                    let l = unescape(l);
                    let l = l.trim();
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
    out.into_iter()
        .filter(|c| c.starts_with("trace-") || c.contains("| trace-"))
        .collect()
}

/// Why an example cannot run here, if it cannot.
fn not_here(cmd: &str, dir: &Path) -> Option<String> {
    if cmd.starts_with("trace-sim ") {
        return Some("starts a server that serves until stopped".into());
    }
    for needs in ["--url", "--metrics-url", "curl ", "--start-at", "jq "] {
        if cmd.contains(needs) {
            return Some(format!("needs what `{}` names", needs.trim()));
        }
    }
    let words: Vec<&str> = cmd.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let prev = if i > 0 { words[i - 1] } else { "" };
        let written = matches!(
            prev,
            ">" | ">>" | "-o" | "--output" | "--plot" | "--metrics-out"
        );
        let w = w.trim_matches('\'');
        let looks_like_file = [".jsonl", ".json", ".csv", ".ndjson", ".gz", ".parquet"]
            .iter()
            .any(|e| w.ends_with(e))
            || (w.ends_with('/') && !w.contains("://"));
        if looks_like_file && !written && !w.starts_with('-') {
            let path = w.strip_prefix("from:").unwrap_or(w);
            let missing = path.contains('*') || path.split(',').any(|p| !dir.join(p).exists());
            if missing {
                return Some(format!("names `{path}`, not bundled"));
            }
        }
    }
    None
}

/// The directory the examples run in: `tests` is the repository's, and
/// the names the pages use most are bundled data.
fn sandbox() -> TestDir {
    let dir = TestDir::new("man-examples");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::os::unix::fs::symlink(repo.join("tests"), dir.join("tests")).unwrap();
    // The bundled trace's first 40 records, prompts capped, answers cut:
    // quick to replay on the simulator.
    let head: Vec<String> = std::fs::read_to_string(data("conversation_trace.jsonl"))
        .unwrap()
        .lines()
        .take(40)
        .map(str::to_string)
        .collect();
    let trace = head.join("\n") + "\n";
    for name in ["trace.jsonl", "mooncake.jsonl", "small.jsonl"] {
        let out = Command::new(bin("trace-rescale"))
            .args([
                "--max-input",
                "2048",
                "--output-scale",
                "0.05",
                "--speed",
                "8",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(trace.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        std::fs::write(dir.join(name), out.stdout).unwrap();
    }
    dir
}

fn bin_dir() -> PathBuf {
    bin("trace-gen").parent().unwrap().to_path_buf()
}

#[test]
fn every_man_page_example_runs_as_printed() {
    let dir = sandbox();
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
    let (mut ran, mut failed, mut skipped) = (0, Vec::new(), Vec::new());
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        for cmd in examples(&text) {
            if let Some(why) = not_here(&cmd, &dir.path) {
                skipped.push(format!("{name}: {cmd}  ({why})"));
                continue;
            }
            ran += 1;
            // A minute at most: an example is quick on the bundled data.
            let out = Command::new("timeout")
                .args(["60", "bash", "-c", &format!("set -o pipefail; {cmd}")])
                .current_dir(&dir.path)
                .env("PATH", &path)
                .env_remove("RUST_BACKTRACE")
                .output()
                .unwrap();
            if !out.status.success() {
                failed.push(format!(
                    "{name}: {cmd}\n  exit {:?}\n  {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).replace('\n', "\n  ")
                ));
            }
        }
    }
    println!("{ran} examples ran; not run here:\n{}", skipped.join("\n"));
    println!("failed:\n{}", failed.join("\n"));
    assert!(ran >= 10, "only {ran} examples ran");
    assert!(
        failed.is_empty(),
        "examples that failed:\n{}",
        failed.join("\n")
    );
}

#[test]
fn examples_are_read_from_both_layouts() {
    let page = "\n.SH EXAMPLES\nOne:\n.IP\ntrace-gen \\-\\-count 3 | trace-validate\n.PP\nTwo:\n.nf\n    trace-slice \\-\\-head 2 \\e\n        t.jsonl\n.fi\n.SH SEE ALSO\n";
    assert_eq!(
        examples(page),
        [
            "trace-gen --count 3 | trace-validate",
            "trace-slice --head 2 t.jsonl"
        ]
    );
}
