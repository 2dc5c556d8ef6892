//! What every binary shares: flag groups, diagnostics on standard error, and
//! the one place where a result becomes an exit status.
//!
//! A binary is `fn main() -> ExitCode { cli::main("trace-x", x::run) }`.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use clap::{Args, Parser};

use crate::error::{Error, Location, Result};
use crate::text::plural;

/// How a tool finished when nothing went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: the tool ran to the end and the answer is "no" (invalid
    /// records found, a threshold crossed).
    Negative,
    /// Exit 3: a replay stopped early because its first requests all
    /// failed, after every result was flushed.
    Aborted,
    /// Exit 130: interrupted by Ctrl-C after every result was flushed.
    Interrupted,
    /// Exit 128 + the signal (143 for SIGTERM, 129 for SIGHUP): stopped by
    /// that signal after every result was flushed.
    Signalled(u8),
}

static TOOL: OnceLock<&'static str> = OnceLock::new();

/// Credentials no output may show: every run's, added as each starts
/// (a process may run the engine several times, with other headers).
static SECRETS: std::sync::RwLock<Option<Arc<Secrets>>> = std::sync::RwLock::new(None);

/// The credentials hidden so far.
fn secrets() -> Option<Arc<Secrets>> {
    SECRETS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// The credentials to hide, as [`hide_secrets`] sorted them.
struct Secrets {
    /// Every credential given so far, as given.
    given: Vec<String>,
    /// Hidden wherever they occur, longest first, each as given and as it
    /// reads inside a JSON string (`"` and `\` escaped).
    long: Vec<String>,
    /// Shorter ones, hidden only where they are a credential header's
    /// value or follow `Bearer`/`Basic`.
    short: Option<regex::Regex>,
}

/// Secrets shorter than this are hidden only where they stand as a
/// credential: replacing every `ab` in every message would hide more
/// than it protects.
const MIN_SECRET_LEN: usize = 4;

/// Hide these credentials, besides those hidden already, from every line
/// this module writes to standard error and from whatever a tool passes
/// to [`redact`].
pub fn hide_secrets(secrets: impl IntoIterator<Item = String>) {
    let mut slot = SECRETS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut given: Vec<String> = slot.as_ref().map(|s| s.given.clone()).unwrap_or_default();
    given.extend(secrets.into_iter().filter(|s| !s.is_empty()));
    given.sort();
    given.dedup();
    if given.is_empty() {
        return;
    }
    let mut long = Vec::new();
    let mut short = Vec::new();
    for s in given.iter().cloned() {
        if s.is_empty() {
            continue;
        }
        // Inside a result line (JSON) the secret reads escaped.
        let quoted = serde_json::to_string(&s).expect("a string serializes");
        let escaped = quoted[1..quoted.len() - 1].to_string();
        let forms = if escaped != s {
            vec![s, escaped]
        } else {
            vec![s]
        };
        for form in forms {
            if form.len() >= MIN_SECRET_LEN {
                long.push(form);
            } else {
                short.push(form);
            }
        }
    }
    // Longest first: `Bearer KEY` goes whole before `KEY` alone.
    long.sort_by_key(|s| std::cmp::Reverse(s.len()));
    long.dedup();
    *slot = Some(Arc::new(Secrets {
        given,
        long,
        short: short_secrets(&short),
    }));
}

/// The pattern of short secrets where they stand as a credential: after a
/// header (or JSON key, or cookie) name that says it holds one, as in
/// `X-Api-Key: ab`, `"x-api-key":"ab"` or `token=ab`, or after `Bearer `
/// or `Basic `; and not followed by more of a token.
fn short_secrets(short: &[String]) -> Option<regex::Regex> {
    if short.is_empty() {
        return None;
    }
    let mut values: Vec<String> = short.iter().map(|s| regex::escape(s)).collect();
    values.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let pattern = format!(
        r#"(?i)((?:bearer|basic)\s+|[a-z0-9_-]*(?:auth|key|token|secret|cookie|password|session|credential)[a-z0-9_-]*\\?"?\s*[:=]\s*\\?"?\s*(?:(?:bearer|basic)\s+)?)(?:{})([^a-z0-9._~+/=-]|$)"#,
        values.join("|")
    );
    regex::Regex::new(&pattern).ok()
}

/// `text` with every hidden credential replaced by `[REDACTED]`.
pub fn redact(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out = std::borrow::Cow::Borrowed(text);
    let Some(secrets) = secrets() else {
        return out;
    };
    for s in &secrets.long {
        if out.contains(s.as_str()) {
            out = std::borrow::Cow::Owned(out.replace(s.as_str(), "[REDACTED]"));
        }
    }
    if let Some(short) = &secrets.short {
        if let std::borrow::Cow::Owned(hidden) = short.replace_all(&out, "${1}[REDACTED]${2}") {
            out = std::borrow::Cow::Owned(hidden);
        }
    }
    out
}

/// How far past a cut to look so that no credential is cut in two
/// unredacted: the longest hidden credential, or, with short ones, the
/// longest header name that may precede one (0 when none).
pub fn longest_secret() -> usize {
    secrets().map_or(0, |s| {
        let long = s.long.first().map_or(0, String::len);
        if s.short.is_some() {
            long.max(64)
        } else {
            long
        }
    })
}
static WARNINGS: AtomicU64 = AtomicU64::new(0);

/// The tools that read records from a pipe and do their job at its end,
/// with no signal handling of their own (trace-replay, trace-sim and
/// trace-sweep have theirs; trace-gen reads nothing).
const PIPE_READERS: [&str; 6] = [
    "trace-convert",
    "trace-validate",
    "trace-slice",
    "trace-rescale",
    "trace-synth",
    "trace-summarize",
];

/// A Ctrl-C came while reading a pipe (see [`read_on_after_ctrl_c`]).
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_first_ctrl_c(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Ctrl-C reaches every process of a pipeline at once. A tool reading a
/// pipe lets the first one pass: the tools upstream are finishing (a
/// replay writes its cancelled results), so it reads on to the end of its
/// input, does its job on what came, and exits 130. The second Ctrl-C
/// stops it at once, by the signal's default action (the handler is
/// reset as it runs). Nothing changes when standard input is not a pipe,
/// or when SIGINT is ignored (a background job).
fn read_on_after_ctrl_c() {
    // SAFETY: fstat(2) on descriptor 0 into a zeroed stat, and
    // sigaction(2) with a zeroed, then filled, action whose handler only
    // stores to an atomic (async-signal-safe).
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(0, &raw mut st) != 0 {
            return;
        }
        let kind = st.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
            return;
        }
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGINT, std::ptr::null(), &raw mut old) != 0
            || old.sa_sigaction == libc::SIG_IGN
        {
            return;
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_first_ctrl_c as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
        libc::sigemptyset(&raw mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &raw const action, std::ptr::null_mut());
    }
}

/// The running tool's name, for the `TOOL: ` prefix of diagnostics.
pub fn tool() -> &'static str {
    TOOL.get().copied().unwrap_or("tracekit")
}

/// Parse the flags of `A`, run the tool and map its result to an exit status.
///
/// Usage errors exit 2 (clap's convention), `--help` and `--version` exit 0,
/// a closed output pipe exits 0 silently, any other error prints
/// `TOOL: error: …` and exits 2.
pub fn main<A: Parser>(name: &'static str, run: fn(&A) -> Result<Outcome>) -> ExitCode {
    let _ = TOOL.set(name);
    if PIPE_READERS.contains(&name) {
        read_on_after_ctrl_c();
    }
    let args = match A::try_parse() {
        Ok(args) => args,
        Err(err) if err.use_stderr() => {
            // clap's message starts "error: "; diagnostics start with the tool.
            let text = match other_tools_flag(&err) {
                Some(hint) => format!("{name}: error: {hint}"),
                None => format!("{name}: {}", err.render()),
            };
            eprint_line(text.trim_end());
            return ExitCode::from(2);
        }
        Err(err) => {
            // --help and --version; a closed pipe is not worth a complaint.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
    };
    finish(run(&args))
}

/// Flags a user may look for in the wrong tool, and the tool that has
/// them: clap's own suggestion is a flag that merely looks alike
/// (`--speed` → `--seed`).
const OTHER_TOOLS_FLAGS: &[(&str, &str)] = &[
    (
        "--speed",
        "time scaling is trace-rescale's: trace-rescale --speed F TRACE | {tool} ...",
    ),
    (
        "--rate",
        "a target rate is trace-rescale's: trace-rescale --rate R TRACE | {tool} ...",
    ),
    (
        "--loop",
        "repeating a trace is trace-rescale's: trace-rescale --loop D TRACE | {tool} ...",
    ),
];

/// The hint for an unknown flag that another tool has, if it is one.
fn other_tools_flag(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    // trace-sweep scales time itself (--speeds), trace-gen makes it.
    let reads_a_trace = !matches!(tool(), "trace-sweep" | "trace-rescale" | "trace-gen");
    if err.kind() != ErrorKind::UnknownArgument || !reads_a_trace {
        return None;
    }
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split('=').next().unwrap_or(arg);
    let (_, hint) = OTHER_TOOLS_FLAGS.iter().find(|(f, _)| *f == flag)?;
    Some(format!(
        "unexpected argument '{arg}': {}",
        hint.replace("{tool}", tool())
    ))
}

/// Map a tool's result to its exit status, printing the error if any.
pub fn finish(result: Result<Outcome>) -> ExitCode {
    ExitCode::from(status(result))
}

/// As [`finish`], then exit the process at once, whatever other threads
/// are doing (one blocked reading an input that has not ended).
pub fn exit(result: Result<Outcome>) -> ! {
    std::process::exit(i32::from(status(result)))
}

fn status(result: Result<Outcome>) -> u8 {
    // Interrupted while reading a pipe: the job is done on what came, and
    // the status says it was cut short (a closed output too: the tool
    // downstream is stopping as well).
    if INTERRUPTED.load(Ordering::SeqCst) {
        match &result {
            Ok(_) => return 130,
            Err(err) if err.is_broken_pipe() => return 130,
            Err(_) => {}
        }
    }
    match result {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::Negative) => 1,
        Ok(Outcome::Aborted) => 3,
        Ok(Outcome::Interrupted) => 130,
        Ok(Outcome::Signalled(sig)) => 128u8.saturating_add(sig),
        Err(err) if err.is_broken_pipe() => 0,
        Err(err) => {
            eprint_line(&format!("{}: {err}", tool()));
            2
        }
    }
}

/// Write one line to standard error, ignoring failure: there is nowhere
/// left to report a broken stderr.
fn eprint_line(line: &str) {
    let line = redact(line);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// `TOOL: warning: msg`.
pub fn warn(msg: impl Display) {
    WARNINGS.fetch_add(1, Ordering::Relaxed);
    eprint_line(&format!("{}: warning: {msg}", tool()));
}

/// `TOOL: SOURCE:LINE: warning: msg`.
pub fn warn_at(loc: &Location, msg: impl Display) {
    WARNINGS.fetch_add(1, Ordering::Relaxed);
    eprint_line(&format!("{}: {loc}: warning: {msg}", tool()));
}

/// `TOOL: msg` for an error that does not stop the tool (a checker's
/// finding); `err` is already formatted with its location.
pub fn report_error(err: &Error) {
    eprint_line(&format!("{}: {err}", tool()));
}

/// `TOOL: note: msg`, for facts a user may want to know (chosen defaults,
/// counts), never for problems.
pub fn note(msg: impl Display) {
    eprint_line(&format!("{}: note: {msg}", tool()));
}

/// The warning for an input without a single record: an empty output
/// says nothing by itself, and an empty input is rarely what was meant.
pub fn warn_empty_input() {
    warn(
        "no records in the input: it is empty; give a trace, one JSON object per line \
         (trace-convert makes one from logs)",
    );
}

/// How many warnings this process has printed.
pub fn warning_count() -> u64 {
    WARNINGS.load(Ordering::Relaxed)
}

/// Input files, shared by every tool that reads records.
#[derive(Args, Clone, Debug, Default)]
pub struct InputArgs {
    /// Input files; standard input when none is given or for `-`.
    /// Gzip is detected from the content, whatever the name.
    #[arg(value_name = "FILE")]
    pub files: Vec<String>,
}

/// Output file, shared by every tool that writes records.
#[derive(Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Write to FILE instead of standard output; a name ending in `.gz`
    /// is gzip-compressed, one ending in `.zst` zstd-compressed.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What a transforming tool does with a record it cannot process.
#[derive(Args, Clone, Debug, Default)]
pub struct SkipArgs {
    /// Skip malformed records, with a warning for each and a count at the
    /// end, instead of stopping at the first one.
    #[arg(long)]
    pub skip_invalid: bool,
}

/// Counts records skipped under `--skip-invalid`, or turns the first bad
/// record into the tool's error.
#[derive(Debug, Default)]
pub struct Skipper {
    enabled: bool,
    skipped: u64,
}

impl Skipper {
    /// A skipper honouring `--skip-invalid`.
    pub fn new(args: &SkipArgs) -> Skipper {
        Skipper {
            enabled: args.skip_invalid,
            skipped: 0,
        }
    }

    /// Handle a bad record: a warning and `Ok` when skipping, else the error.
    pub fn skip(&mut self, err: Error) -> Result<()> {
        if !self.enabled {
            return Err(err);
        }
        self.skipped += 1;
        let msg = format!("{} (skipped)", err.message());
        match err.location() {
            Some(loc) => warn_at(loc, msg),
            None => warn(msg),
        }
        Ok(())
    }

    /// Print the final count, if anything was skipped.
    pub fn finish(&self) {
        if self.skipped > 0 {
            warn(format!(
                "skipped {} invalid record{}",
                self.skipped,
                plural(self.skipped)
            ));
        }
    }

    /// How many records were skipped.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
}

/// clap value parser for a size in bytes ≥ 1: a count, or one with a
/// K, M or G suffix (powers of 1024: 64M is 67108864).
pub fn byte_size(text: &str) -> std::result::Result<u64, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&text[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(unit)) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "`{text}` is not a size in bytes ≥ 1 (a count, or with a K, M or G suffix)"
        )),
    }
}

/// clap value parser for a finite number > 0 (a rate, a factor).
pub fn positive_number(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("`{text}` is not a number > 0")),
    }
}

/// clap value parser for counts that must be at least 1.
pub fn positive_u64(text: &str) -> std::result::Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{text}` is not an integer ≥ 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runs_credentials_are_hidden_besides_the_earlier_ones() {
        // Two runs of one process (a sweep, a library user), each with a
        // key of its own: the second's is hidden too, and the first's
        // still is.
        hide_secrets(["sk-first-run-0001".to_string()]);
        hide_secrets(["sk-second-run-0002".to_string()]);
        assert_eq!(
            redact("a sk-first-run-0001 b sk-second-run-0002 c"),
            "a [REDACTED] b [REDACTED] c"
        );
    }
}
