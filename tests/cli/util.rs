//! Running the real binaries from tests: a per-test directory, a command
//! builder that writes stdin from a thread, and assertions that show the
//! command, status and stderr when they fail.

// Helpers shared by every test module; not each one uses all of them.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Path of one of the package's binaries.
pub fn bin(name: &str) -> PathBuf {
    let path = match name {
        "trace-convert" => env!("CARGO_BIN_EXE_trace-convert"),
        "trace-validate" => env!("CARGO_BIN_EXE_trace-validate"),
        "trace-slice" => env!("CARGO_BIN_EXE_trace-slice"),
        "trace-rescale" => env!("CARGO_BIN_EXE_trace-rescale"),
        "trace-summarize" => env!("CARGO_BIN_EXE_trace-summarize"),
        "trace-synth" => env!("CARGO_BIN_EXE_trace-synth"),
        "trace-replay" => env!("CARGO_BIN_EXE_trace-replay"),
        "trace-sim" => env!("CARGO_BIN_EXE_trace-sim"),
        "trace-sweep" => env!("CARGO_BIN_EXE_trace-sweep"),
        "trace-gen" => env!("CARGO_BIN_EXE_trace-gen"),
        other => panic!("unknown binary {other}"),
    };
    PathBuf::from(path)
}

/// Path of a file under `tests/data/`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A fresh directory for one test, under cargo's target tmpdir.
pub struct TestDir {
    pub path: PathBuf,
}

impl TestDir {
    pub fn new(name: &str) -> TestDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("cli")
            .join(format!("{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TestDir { path }
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    pub fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.join(name)).unwrap()
    }

    /// A command for `tool`, run in this directory.
    pub fn cmd(&self, tool: &str) -> Cmd {
        Cmd::new(tool).current_dir(&self.path)
    }

    /// `tool` started in this directory with `args` (split at spaces: none
    /// holds one), in the background: its standard error piped, its output
    /// as `stdout` says; for tests that signal it or wait on it.
    pub fn spawn(&self, tool: &str, args: &str, stdout: Stdio) -> std::process::Child {
        Command::new(bin(tool))
            .current_dir(&self.path)
            .args(args.split_whitespace())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// [`TestDir::spawn`] with its input a pipe the test holds and its
    /// output dropped.
    pub fn spawn_fed(&self, tool: &str, args: &str) -> std::process::Child {
        Command::new(bin(tool))
            .current_dir(&self.path)
            .args(args.split_whitespace())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// What a finished command left behind.
#[derive(Debug)]
pub struct Run {
    pub desc: String,
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn stdout_str(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    pub fn lines(&self) -> Vec<String> {
        self.stdout_str().lines().map(str::to_string).collect()
    }

    /// Each stdout line parsed as JSON.
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.lines()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", self.stdout_str()))
    }

    #[track_caller]
    pub fn code(&self, want: i32) -> &Run {
        assert_eq!(
            self.code,
            want,
            "\n{}\nexit status {} (want {want})\n--- stderr ---\n{}\n--- stdout (first 2000 bytes) ---\n{}",
            self.desc,
            self.code,
            self.stderr,
            String::from_utf8_lossy(&self.stdout[..self.stdout.len().min(2000)])
        );
        self
    }

    /// Stderr holds `want` somewhere; the assertion shows all of it.
    #[track_caller]
    pub fn stderr_has(&self, want: &str) -> &Run {
        assert!(
            self.stderr.contains(want),
            "\n{}\nstderr lacks {want:?}\n--- stderr ---\n{}",
            self.desc,
            self.stderr
        );
        self
    }

    /// Stdout holds `want` somewhere; the assertion shows all of it.
    #[track_caller]
    pub fn stdout_has(&self, want: &str) -> &Run {
        let out = self.stdout_str();
        assert!(
            out.contains(want),
            "\n{}\nstdout lacks {want:?}\n--- stdout ---\n{out}",
            self.desc
        );
        self
    }

    /// Exit 0 with nothing on stderr.
    #[track_caller]
    pub fn ok(&self) -> &Run {
        self.code(0);
        assert_eq!(self.stderr, "", "\n{}\nunexpected stderr", self.desc);
        self
    }
}

/// A command under construction.
pub struct Cmd {
    cmd: Command,
    desc: String,
    stdin: Option<Vec<u8>>,
}

const PROXY_VARS: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
];

impl Cmd {
    pub fn new(tool: &str) -> Cmd {
        Cmd::hermetic(Command::new(bin(tool)), tool.to_string())
    }

    /// The tool run by `sh` after `script` (say, a `ulimit`).
    pub fn after_sh(script: &str, tool: &str) -> Cmd {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{script} && exec \"$0\" \"$@\""))
            .arg(bin(tool));
        Cmd::hermetic(cmd, format!("sh -c '{script}' {tool}"))
    }

    /// `cmd` without the environment that would change what a tool does
    /// in a test: no backtraces, and replays go to loopback servers, never
    /// through a proxy.
    fn hermetic(mut cmd: Command, desc: String) -> Cmd {
        cmd.env_remove("RUST_BACKTRACE");
        for v in PROXY_VARS {
            cmd.env_remove(v);
        }
        Cmd {
            cmd,
            desc,
            stdin: None,
        }
    }

    pub fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.desc.push(' ');
        self.desc.push_str(&a.as_ref().to_string_lossy());
        self.cmd.arg(a);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Cmd {
        self.cmd.current_dir(dir);
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Cmd {
        self.cmd.env(k, v);
        self
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Cmd {
        self.stdin = Some(bytes.into());
        self
    }

    pub fn run(mut self) -> Run {
        self.cmd
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self
            .cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", self.desc));
        // Writing stdin from another thread: a child that fills its stdout
        // pipe before reading all its input would otherwise deadlock.
        let writer = self.stdin.take().map(|bytes| {
            let mut pipe = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            })
        });
        let out = child.wait_with_output().unwrap();
        if let Some(w) = writer {
            w.join().unwrap();
        }
        Run {
            desc: self.desc,
            code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Assert two texts are equal, showing both between rulers when not.
#[track_caller]
pub fn assert_text_eq(want: &str, got: &str) {
    if want != got {
        panic!("\ntexts differ\n==== want ====\n{want}\n==== got =====\n{got}\n==============");
    }
}

/// trace-replay against its in-process simulator in the background,
/// replaying `trace` (a file in `dir`) into `dir/out.ndjson`, with a grace
/// of 2 s: for tests that signal it.
pub fn spawn_sim_replay(dir: &TestDir, trace: &str) -> std::process::Child {
    let args = format!("--sim --quiet --grace 2s -o out.ndjson {trace}");
    dir.spawn("trace-replay", &args, Stdio::null())
}

/// A record's `hash_ids`.
pub fn hash_ids(v: &serde_json::Value) -> Vec<u64> {
    v["hash_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// Read a spawned child's stdout and stderr to their ends on two threads
/// (a full pipe would stall the child); join them for the text.
pub fn drain(
    child: &mut std::process::Child,
) -> (
    std::thread::JoinHandle<String>,
    std::thread::JoinHandle<String>,
) {
    fn read_all(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut s = String::new();
            pipe.read_to_string(&mut s).unwrap();
            s
        })
    }
    (
        read_all(child.stdout.take().unwrap()),
        read_all(child.stderr.take().unwrap()),
    )
}

/// Run `cmd` as `cmd | head -1` would: its first line read, then its
/// output closed; returns that line and how the command ended.
pub fn head_one(cmd: &mut Command) -> (String, std::process::Output) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    (first, child.wait_with_output().unwrap())
}

/// Each of `names` begins a line of `text` (a row of a printed table).
pub fn assert_rows(text: &str, names: &[&str]) {
    for name in names {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "no row {name} in\n{text}"
        );
    }
}

// The idioms the integration tests repeat, each written once: a tool run
// on stdin or on a file, an exact stderr, a file's lines, a JSON summary.

/// `tool args` with `input` on stdin, run to its end.
pub fn run_stdin(tool: &str, args: &[&str], input: impl Into<Vec<u8>>) -> Run {
    Cmd::new(tool).args(args).stdin(input).run()
}

/// `tool args file`, run to its end.
pub fn run_file(tool: &str, args: &[&str], file: impl AsRef<std::ffi::OsStr>) -> Run {
    Cmd::new(tool).args(args).arg(file).run()
}

impl Run {
    /// Stderr is `want`, to the byte.
    #[track_caller]
    pub fn stderr_is(&self, want: impl AsRef<str>) -> &Run {
        assert_eq!(self.stderr, want.as_ref(), "\n{}", self.desc);
        self
    }
}

/// The lines of a text file.
pub fn file_lines(path: impl AsRef<Path>) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `trace-summarize args results`, which must exit 0 with a quiet
/// stderr: its report for people.
pub fn summary_text(args: &[&str], results: impl AsRef<std::ffi::OsStr>) -> String {
    let run = run_file("trace-summarize", args, results);
    run.ok();
    run.stdout_str()
}

/// `trace-summarize --format json args results`, which must exit 0 with a
/// quiet stderr: its report.
pub fn summary_json(args: &[&str], results: impl AsRef<std::ffi::OsStr>) -> serde_json::Value {
    let run = Cmd::new("trace-summarize")
        .args(["--format", "json"])
        .args(args)
        .arg(results)
        .run();
    run.ok();
    run.json()
}

/// A spawned command ended with status `want`; the assertion shows its
/// stderr.
#[track_caller]
/// Wait (boundedly: 20 s) until `ready`, then send `child` SIGINT, as
/// Ctrl-C does: its output, once it exited 130 (asserted).
pub fn interrupt_when(
    child: std::process::Child,
    ready: impl Fn() -> bool,
) -> std::process::Output {
    for _ in 0..1000 {
        if ready() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on a child the test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    out
}

pub fn assert_exit(out: &std::process::Output, want: i32) {
    assert_eq!(
        out.status.code(),
        Some(want),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Run {
    /// Stderr ends with `want`.
    #[track_caller]
    pub fn stderr_ends(&self, want: &str) -> &Run {
        let ends = self.stderr.ends_with(want);
        assert!(
            ends,
            "\n{}\nstderr does not end with {want:?}\n--- stderr ---\n{}",
            self.desc, self.stderr
        );
        self
    }

    /// Stdout's lines are `want`.
    #[track_caller]
    pub fn lines_are<S: AsRef<str>>(&self, want: &[S]) -> &Run {
        let want: Vec<&str> = want.iter().map(AsRef::as_ref).collect();
        assert_eq!(self.lines(), want, "\n{}", self.desc);
        self
    }
}

impl TestDir {
    /// `tool args…`, run in this directory.
    pub fn run(&self, tool: &str, args: &[&str]) -> Run {
        self.cmd(tool).args(args).run()
    }

    /// A copy of `tests/data/<src>` in this directory, as `name`.
    pub fn copy_data(&self, name: &str, src: &str) -> PathBuf {
        self.write(name, std::fs::read(data(src)).unwrap())
    }
}

/// Each record's values at `fields` (names apart by spaces; a nested one
/// as `observed.e2e_ms`), as one JSON array a record; null where absent.
pub fn columns(records: &[serde_json::Value], fields: &str) -> Vec<serde_json::Value> {
    let at = |r, f: &str| {
        f.split('.')
            .fold(r, |v: &serde_json::Value, k| &v[k])
            .clone()
    };
    records
        .iter()
        .map(|r| fields.split_whitespace().map(|f| at(r, f)).collect())
        .collect()
}

/// A trace of `records`, one JSON line each.
pub fn trace(records: &[serde_json::Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

/// trace-replay `--quiet` with `args`, reading the trace `input`.
pub fn replay(args: &[&str], input: &str) -> Run {
    Cmd::new("trace-replay")
        .args(["--quiet"])
        .args(args)
        .stdin(input)
        .run()
}

/// A replay's results by index, checking that each index from 0 to `n`
/// appears exactly once.
pub fn by_index(run: &Run, n: usize) -> std::collections::BTreeMap<u64, serde_json::Value> {
    let mut out = std::collections::BTreeMap::new();
    for r in run.json_lines() {
        let i = r["index"].as_u64().unwrap();
        assert!(out.insert(i, r).is_none(), "index {i} twice");
    }
    assert_eq!(
        out.keys().copied().collect::<Vec<_>>(),
        (0..n as u64).collect::<Vec<_>>(),
        "one result per record"
    );
    out
}

/// A replay's prompt and cached tokens of each of its `n` results, by
/// index (the replay must exit 0).
pub fn prompt_and_cached(run: &Run, n: usize) -> Vec<(u64, u64)> {
    run.code(0);
    by_index(run, n)
        .values()
        .map(|r| {
            let count = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"));
            (count("prompt_tokens"), count("cached_tokens"))
        })
        .collect()
}

/// The prompt and cached tokens of a session replayed to trace-sim with
/// `endpoint` and `flags`: turn 2 shares turn 1's two blocks (hash ids 1,
/// 2) and asks for 2,048 tokens in all; turn 1's answer is 512 tokens.
pub fn live_answer_session(endpoint: &[&str], flags: &[&str]) -> Vec<(u64, u64)> {
    let input = trace(&[
        serde_json::json!({"session_id": "s", "timestamp": 0, "input_length": 1024,
                           "hash_ids": [1, 2], "output_length": 512}),
        serde_json::json!({"session_id": "s", "delay": 0, "input_length": 2048,
                           "hash_ids": [1, 2, 3, 4], "output_length": 1}),
    ]);
    let sim = crate::servers::Sim::start(&["--itl-ms", "0"]);
    let mut args = vec!["--url", sim.url.as_str()];
    args.extend_from_slice(endpoint);
    args.extend_from_slice(flags);
    prompt_and_cached(&replay(&args, &input), 2)
}

/// `got` is the number `want`, to 1e-9.
#[track_caller]
pub fn close(got: &serde_json::Value, want: f64) {
    let g = got
        .as_f64()
        .unwrap_or_else(|| panic!("{got} is not a number"));
    assert!((g - want).abs() < 1e-9, "got {g}, want {want}");
}

/// Each number at a JSON pointer of `v` is the one wanted, to 1e-9.
#[track_caller]
pub fn close_at(v: &serde_json::Value, want: &[(&str, f64)]) {
    for (pointer, w) in want {
        let got = v
            .pointer(pointer)
            .unwrap_or_else(|| panic!("no {pointer} in {v}"));
        let g = got
            .as_f64()
            .unwrap_or_else(|| panic!("{pointer}: {got} is not a number"));
        assert!((g - w).abs() < 1e-9, "{pointer}: got {g}, want {w}");
    }
}
