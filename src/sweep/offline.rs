//! `trace-sweep --offline --profile FILE`: each run served by the twin
//! (the replay engine on a virtual clock, with the profile's model for its
//! server), its results written and folded as a replay's are.

use super::Args;
use crate::error::{Error, Result};
use crate::simulator::profile::Profile;

/// With --offline: its profile, read and checked, once the flags that
/// need a server between runs are refused by name. `None` without.
pub(super) fn profile(args: &Args) -> Result<Option<Profile>> {
    let Some(path) = args.twin.profile.as_deref().filter(|_| args.offline) else {
        return Ok(None);
    };
    let refused = [
        (
            args.metrics.is_some(),
            "--metrics",
            "there is no server to scrape",
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
    let mut profile = Profile::read(&path.to_string_lossy())?;
    profile.seed = args.seed;
    Ok(Some(profile))
}
