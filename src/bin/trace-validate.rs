use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-validate", tracekit::validate::run)
}
