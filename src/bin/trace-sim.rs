use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-sim", tracekit::sim::run)
}
