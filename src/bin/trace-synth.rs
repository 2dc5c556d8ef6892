use std::process::ExitCode;

fn main() -> ExitCode {
    tracekit::cli::main("trace-synth", tracekit::synth::run)
}
