//! Sharding: how a trace is dealt over N machines, by session (a session's
//! turns stay together) or else by position.

use std::collections::HashMap;

use crate::hash;

/// Parse `K/N` with 1 ≤ K ≤ N.
pub fn parse_shard(text: &str) -> std::result::Result<(u64, u64), String> {
    let bad = || format!("`{text}` is not a shard: give K/N with 1 ≤ K ≤ N, e.g. 2/4");
    let (k, n) = text.split_once('/').ok_or_else(bad)?;
    let k: u64 = k.trim().parse().map_err(|_| bad())?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    if k == 0 || n == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

/// Which shard (0-based, of `n`) a record belongs to: by session when it has
/// one, else by its 0-based position in the input: trace-slice --shard and
/// trace-replay --shard deal records alike.
pub fn shard_of(session_id: Option<&str>, index: u64, n: u64) -> u64 {
    match session_id {
        Some(s) => hash::stable_hash(SHARD_SEED, s.as_bytes()) % n,
        None => index % n,
    }
}

// Fixed so that every machine deals the same shards.
const SHARD_SEED: u64 = 0x0074_7261_636b_6974;

/// Deals a trace's records over `n` shards in input order, keeping every
/// dependency graph whole: a session's records go where its first record
/// went, and a record that names earlier records in `after` goes where the
/// first of them went; any other record is dealt as [`shard_of`] deals it.
/// A trace without `after` is dealt exactly as `shard_of` deals it.
/// Memory: one entry per `id` and per session seen.
pub struct Dealer {
    n: u64,
    ids: HashMap<String, u64>,
    sessions: HashMap<String, u64>,
}

impl Dealer {
    pub fn new(n: u64) -> Dealer {
        Dealer {
            n,
            ids: HashMap::new(),
            sessions: HashMap::new(),
        }
    }

    /// The shard (0-based) of the record at `index` (0-based).
    pub fn deal(
        &mut self,
        id: Option<&str>,
        session: Option<&str>,
        after: &[String],
        index: u64,
    ) -> u64 {
        let known = |s: &Option<&u64>| s.copied();
        let shard = session
            .and_then(|s| known(&self.sessions.get(s)))
            .or_else(|| after.iter().find_map(|a| known(&self.ids.get(a.as_str()))))
            .unwrap_or_else(|| shard_of(session, index, self.n));
        if let Some(s) = session {
            self.sessions.entry(s.to_string()).or_insert(shard);
        }
        if let Some(id) = id {
            self.ids.insert(id.to_string(), shard);
        }
        shard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_parsing() {
        assert_eq!(parse_shard("2/4"), Ok((2, 4)));
        assert!(parse_shard("0/4").is_err());
        assert!(parse_shard("5/4").is_err());
        assert!(parse_shard("2").is_err());
    }

    #[test]
    fn shards_by_session_or_position() {
        assert_eq!(shard_of(None, 5, 4), 1);
        let a = shard_of(Some("conv-1"), 0, 4);
        assert_eq!(shard_of(Some("conv-1"), 99, 4), a);
    }

    #[test]
    fn a_dealer_keeps_sessions_and_dependency_graphs_whole() {
        let mut d = Dealer::new(4);
        let after = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Without `after`: exactly shard_of.
        assert_eq!(d.deal(None, None, &[], 5), 1);
        assert_eq!(
            d.deal(Some("x"), Some("conv-1"), &[], 0),
            shard_of(Some("conv-1"), 0, 4)
        );
        // A graph without sessions: c0 at index 2 goes to shard 2; its
        // dependents follow it whatever their index.
        assert_eq!(d.deal(Some("c0"), None, &[], 2), 2);
        assert_eq!(d.deal(Some("c1"), None, &after(&["c0"]), 3), 2);
        assert_eq!(d.deal(Some("c2"), None, &after(&["gone", "c1"]), 4), 2);
        // A session that starts after a call joins the call's shard, and
        // its later turns follow the session.
        assert_eq!(d.deal(Some("t1"), Some("sub"), &after(&["c2"]), 9), 2);
        assert_eq!(d.deal(Some("t2"), Some("sub"), &[], 10), 2);
    }
}
