//! The twin: the simulated server's iteration-level model
//! ([`crate::simulator::batch`]) fitted to a real run's results
//! ([`fit`]), and run in virtual time over a trace ([`offline`]), writing
//! the result lines a replay would. trace-sim runs both; the offline run
//! is an engine beside the replay engine, whose schedule it shares.

mod check;
pub mod fit;
pub mod offline;
mod regress;
