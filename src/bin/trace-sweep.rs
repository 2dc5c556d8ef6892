use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-sweep", tracekit::sweep::run)
}
