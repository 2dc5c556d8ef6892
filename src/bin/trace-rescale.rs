use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-rescale", tracekit::rescale::run)
}
