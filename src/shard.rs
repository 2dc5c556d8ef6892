//! Sharding: how a trace is dealt over N machines, by session (a session's
//! turns stay together) or else by position.

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
}
