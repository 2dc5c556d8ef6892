//! Integration tests: the real binaries on real data.

mod aiperf_mooncake;
mod conventions;
mod convert;
mod deploy;
mod fuzz;
mod golden;
mod layers;
mod limits;
mod man;
mod otel;
mod peers;
mod pipes;
mod real_server;
mod real_traces;
mod replay;
mod rescale;
mod servers;
mod signals;
mod slice;
mod summarize;
mod synth;
mod util;
mod validate;
mod xlsx;
