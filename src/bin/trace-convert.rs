use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-convert", tracekit::convert::run)
}
