//! Integration tests: the real binaries on real data.

mod convert;
mod golden;
mod man;
mod pipes;
mod replay;
mod rescale;
mod servers;
mod slice;
mod summarize;
mod synth;
mod util;
mod validate;
