//! Integration tests: the real binaries on real data.

mod aiperf_mooncake;
mod compare;
mod completions;
mod conventions;
mod convert;
mod deploy;
mod fuzz;
mod golden;
mod layers;
mod limits;
mod man;
mod otel;
mod pipes;
mod real_server;
mod real_traces;
mod replay;
mod rescale;
mod server_metrics;
mod servers;
mod signals;
mod slice;
mod summarize;
mod sweep;
mod synth;
mod util;
mod validate;
