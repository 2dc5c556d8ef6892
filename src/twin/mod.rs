//! The twin: the simulated server's iteration-level model
//! ([`crate::simulator::batch`]) fitted to a real run's results
//! ([`fit`]). Run in virtual time over a trace, it is the replay engine's
//! server (`engine::Server::Twin`, on the engine's virtual clock): the
//! same schedule, result lines, stops and texts as a replay.

mod check;
pub mod fit;
mod regress;
