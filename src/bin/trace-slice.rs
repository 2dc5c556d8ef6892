use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-slice", tracekit::slice::run)
}
