use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-summarize", tracekit::summarize::run)
}
