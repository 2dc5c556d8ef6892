use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-replay", tracekit::replay::run)
}
