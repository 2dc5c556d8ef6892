//! `trace-sweep --offline --profile FILE`: each run through the twin
//! ([`crate::twin::offline`]) in virtual time instead of against a
//! server, its results written and folded as a replay's are.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::{Args, RunRecords};
use crate::cli::Outcome;
use crate::engine::Sink;
use crate::error::{Error, Result};
use crate::simulator::profile::Profile;
use crate::twin::offline;

/// The profile every run is served by, and the Ctrl-C flag they share.
pub(super) struct Twin {
    profile: Profile,
    stop: Arc<AtomicBool>,
}

impl Twin {
    /// With --offline: its profile, read and checked, once the flags that
    /// need a server or a wall clock are refused by name. `None` without.
    pub(super) fn new(args: &Args) -> Result<Option<Twin>> {
        let Some(path) = args.profile.as_deref().filter(|_| args.offline) else {
            return Ok(None);
        };
        let refused = [
            (
                args.metrics.is_some(),
                "--metrics",
                "there is no server to scrape",
            ),
            (
                !args.replay_args.is_empty(),
                "--replay-arg",
                "no replay runs (give the model's parameters in the profile)",
            ),
            (
                args.between.is_some(),
                "--between",
                "there is no server to reset: every run starts with an empty cache",
            ),
            (
                args.cooldown > 0.0,
                "--cooldown",
                "every run starts with an empty batch",
            ),
            (
                args.warmup > 0,
                "--warmup",
                "every run starts with an empty cache and nothing to warm",
            ),
        ];
        if let Some((_, flag, why)) = refused.iter().find(|(given, _, _)| *given) {
            return Err(Error::usage(format!(
                "{flag} does not apply with --offline: {why}"
            )));
        }
        Ok(Some(Twin {
            profile: Profile::read(path)?,
            stop: offline::stop_on_ctrl_c(),
        }))
    }

    /// One run at `speed`, in virtual time: every result given to `sink`
    /// as it completes; how the run ended.
    pub(super) fn run(
        &self,
        args: &Args,
        mut records: RunRecords,
        speed: f64,
        mut sink: impl Sink,
    ) -> Result<Outcome> {
        // The run's settings beside its results, as a replay's: no URL,
        // the twin for an endpoint (the command line names the profile).
        sink.settings(&crate::run_info::RunInfo::now(
            None,
            "offline",
            args.model.as_deref(),
        ));
        let mut take = |r: &crate::result::ResultRecord| sink.take(r);
        let outcome = offline::run(
            &mut records,
            offline::Run {
                profile: self.profile.clone(),
                model: args.model.clone(),
                speed,
                emit: &mut take,
                in_memory: true,
                stop: self.stop.clone(),
            },
        );
        // What was written stays written, whatever stopped the run.
        let finished = Box::new(sink).finish();
        let outcome = outcome?;
        finished?;
        Ok(outcome)
    }
}
