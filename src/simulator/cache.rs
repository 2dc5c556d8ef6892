//! The prefix cache, in blocks: a block's id stands for its whole prefix
//! (as a trace's `hash_ids` do), and a prompt's cached tokens are those of
//! its leading blocks found, least recently used blocks leaving first.

use lru::LruCache;

pub struct BlockCache {
    /// Grown as blocks come (a large capacity costs nothing until it
    /// fills); `None` when the cache is off.
    blocks: Option<LruCache<u64, ()>>,
    capacity: usize,
}

impl BlockCache {
    /// A cache of `capacity` blocks; 0 turns it off.
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            blocks: (capacity > 0).then(LruCache::unbounded),
            capacity,
        }
    }

    /// Whether the cache is on.
    pub fn is_on(&self) -> bool {
        self.blocks.is_some()
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.blocks.as_ref().map_or(0, LruCache::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The share of the capacity held.
    pub fn usage(&self) -> f64 {
        self.len() as f64 / self.capacity.max(1) as f64
    }

    /// Look a prompt's blocks up and keep them: the tokens of its leading
    /// blocks already held (at most `prompt`).
    pub fn admit(&mut self, ids: &[u64], block_size: u64, prompt: u64) -> u64 {
        let Some(cache) = &mut self.blocks else {
            return 0;
        };
        let mut hits = 0u64;
        let mut prefix = true;
        for &id in ids {
            let hit = cache.get(&id).is_some();
            if prefix && hit {
                hits += block_size;
            } else {
                prefix = false;
                cache.put(id, ());
                if cache.len() > self.capacity {
                    cache.pop_lru();
                }
            }
        }
        hits.min(prompt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_blocks_found_count_and_the_oldest_leave_first() {
        let mut c = BlockCache::new(3);
        assert_eq!(c.admit(&[1, 2], 10, 20), 0);
        assert_eq!(c.admit(&[1, 2, 3], 10, 25), 20);
        // 4 evicts the least recently used block: 1.
        assert_eq!(c.admit(&[4], 10, 10), 0);
        assert_eq!(c.len(), 3);
        // 1 is gone, so nothing after it counts though 2 is held.
        assert_eq!(c.admit(&[1, 2], 10, 20), 0);
        let mut off = BlockCache::new(0);
        assert_eq!(off.admit(&[1], 10, 10), 0);
        assert_eq!(off.admit(&[1], 10, 10), 0);
        assert!(!off.is_on());
    }
}
