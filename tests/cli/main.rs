//! Integration tests: the real binaries on real data.

mod convert;
mod deploy;
mod golden;
mod layers;
mod man;
mod otel;
mod pipes;
mod real_server;
mod replay;
mod rescale;
mod servers;
mod slice;
mod summarize;
mod synth;
mod util;
mod validate;
