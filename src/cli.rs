//! What every binary shares: flag groups, diagnostics on standard error, and
//! the one place where a result becomes an exit status.
//!
//! A binary is `fn main() -> ExitCode { cli::main("trace-x", x::run) }`.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Exit 130: interrupted by Ctrl-C after every result was flushed.
    Interrupted,
}

static TOOL: OnceLock<&'static str> = OnceLock::new();
static WARNINGS: AtomicU64 = AtomicU64::new(0);

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
    let args = match A::try_parse() {
        Ok(args) => args,
        Err(err) if err.use_stderr() => {
            // clap's message starts "error: "; diagnostics start with the tool.
            eprint_line(format!("{name}: {}", err.render()).trim_end());
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

/// Map a tool's result to its exit status, printing the error if any.
pub fn finish(result: Result<Outcome>) -> ExitCode {
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Negative) => ExitCode::from(1),
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Err(err) if err.is_broken_pipe() => ExitCode::SUCCESS,
        Err(err) => {
            eprint_line(&format!("{}: {err}", tool()));
            ExitCode::from(2)
        }
    }
}

/// Write one line to standard error, ignoring failure: there is nowhere
/// left to report a broken stderr.
fn eprint_line(line: &str) {
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

/// clap value parser for counts that must be at least 1.
pub fn positive_u64(text: &str) -> std::result::Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{text}` is not an integer ≥ 1")),
    }
}
