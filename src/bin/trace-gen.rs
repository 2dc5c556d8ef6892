use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-gen", tracekit::generate::run)
}
