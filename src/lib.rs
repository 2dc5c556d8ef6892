//! tracekit: Unix filters for LLM-serving traffic traces.
//!
//! Every tool is a module here with an `Args` (its flags) and a `run`
//! function; the binaries in `src/bin/` only call [`cli::main`]. The record
//! formats and conventions are described in `man/tracekit.7`.

pub mod cli;
pub mod convert;
pub mod duration;
pub mod error;
pub mod hash;
pub mod io;
pub mod json;
pub mod record;
pub mod replay;
pub mod rescale;
pub mod result;
pub mod sim;
pub mod slice;
pub mod stats;
pub mod summarize;
pub mod synth;
pub mod time;
pub mod tokenizer;
pub mod validate;
