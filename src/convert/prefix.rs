//! Prefix chains for traces that give no block hashes but say how much of
//! each prompt was shared (TraceLab's prefix/append split, a count of
//! cached tokens): a call's prompt begins with the blocks of the call it
//! continues, as far as the shared tokens reach, and goes on with blocks
//! no other call has.
//!
//! The rule, in 512-token blocks: a call with `shared` tokens keeps
//! floor(shared / 512) leading blocks, taken from the previous call of its
//! session (at most that call's full blocks: a partial last block is not
//! the same block once the prompt grows); the session's first call takes
//! them from a chain common to every session of its model (the system
//! prompt and tool definitions a coding agent sends every time). The rest
//! of the prompt is new blocks, chained from the last kept one.

use std::collections::HashMap;

use super::hashing::BLOCK;
use crate::hash::stable_hash;

/// The last prompt of each session, and a counter that makes new blocks
/// unique.
#[derive(Default)]
pub struct Chains {
    last: HashMap<String, Last>,
    fresh: u64,
}

struct Last {
    blocks: Vec<u64>,
    input: u64,
}

impl Chains {
    /// The block hashes of a prompt of `input` tokens in `session`, of
    /// which the first `shared` tokens continue what went before (see the
    /// module's rule). The prompt becomes the session's last.
    pub fn blocks(&mut self, session: &str, model: &str, input: u64, shared: u64) -> Vec<u64> {
        let want = input.div_ceil(BLOCK as u64) as usize;
        let shared_blocks = ((shared.min(input)) / BLOCK as u64) as usize;
        let mut blocks: Vec<u64> = match self.last.get(session) {
            Some(prev) => {
                let full = (prev.input / BLOCK as u64) as usize;
                prev.blocks[..shared_blocks.min(full).min(prev.blocks.len())].to_vec()
            }
            None => common(model, shared_blocks),
        };
        let mut prev = blocks
            .last()
            .copied()
            .unwrap_or_else(|| stable_hash(0x5e55, session.as_bytes()));
        while blocks.len() < want {
            self.fresh += 1;
            prev = stable_hash(prev, &self.fresh.to_le_bytes());
            blocks.push(prev);
        }
        self.last.insert(
            session.to_string(),
            Last {
                blocks: blocks.clone(),
                input,
            },
        );
        blocks
    }

    /// The block hashes of a prompt of `input` tokens that carries its
    /// session's conversation so far (a chat log's growing context): it
    /// begins with the session's previous prompt, unless it is shorter
    /// than that one (the conversation was cut or begun again), when it
    /// shares nothing.
    pub fn grown(&mut self, session: &str, input: u64) -> Vec<u64> {
        let shared = match self.last.get(session) {
            Some(prev) if prev.input <= input => prev.input,
            _ => 0,
        };
        self.blocks(session, "", input, shared)
    }
}

/// The first `n` blocks of the prefix every session of `model` shares.
fn common(model: &str, n: usize) -> Vec<u64> {
    let mut prev = stable_hash(0xc0, model.as_bytes());
    (0..n)
        .map(|_| {
            prev = stable_hash(prev, b"tracekit: shared prefix");
            prev
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_keeps_the_full_shared_blocks_of_the_one_before() {
        let mut c = Chains::default();
        // 1,300 tokens: 3 blocks, the third partial.
        let a = c.blocks("s", "m", 1300, 0);
        assert_eq!(a.len(), 3);
        // 2,100 tokens sharing 1,250: floor(1250 / 512) = 2 blocks kept.
        let b = c.blocks("s", "m", 2100, 1250);
        assert_eq!(b.len(), 5);
        assert_eq!(b[..2], a[..2]);
        assert!(b[2..].iter().all(|x| !a.contains(x)));
        // Sharing all 2,100: only its 4 full blocks carry on, not the
        // partial fifth.
        let d = c.blocks("s", "m", 2600, 2100);
        assert_eq!(d[..4], b[..4]);
        assert_ne!(d[4], b[4]);
    }

    #[test]
    fn a_grown_prompt_begins_with_the_one_before_and_a_shorter_one_anew() {
        let mut c = Chains::default();
        let a = c.grown("s", 1100);
        assert_eq!(a.len(), 3);
        // 1,600 tokens after 1,100: its floor(1100 / 512) = 2 full blocks.
        let b = c.grown("s", 1600);
        assert_eq!(b.len(), 4);
        assert_eq!(b[..2], a[..2]);
        assert!(b[2..].iter().all(|x| !a.contains(x)));
        // 700 tokens after 1,600: a new context, nothing shared.
        let d = c.grown("s", 700);
        assert!(d.iter().all(|x| !a.contains(x) && !b.contains(x)));
        // A session's first prompt shares nothing, not even a common prefix.
        let e = c.grown("t", 1100);
        assert!(e.iter().all(|x| !a.contains(x)));
    }

    #[test]
    fn first_calls_share_their_model_s_common_prefix() {
        let mut c = Chains::default();
        let a = c.blocks("s1", "m", 3000, 1100);
        let b = c.blocks("s2", "m", 2000, 1600);
        let other = c.blocks("s3", "n", 2000, 1600);
        // floor(1100 / 512) = 2 and floor(1600 / 512) = 3 common blocks.
        assert_eq!(a[..2], b[..2]);
        assert_ne!(a[2], b[2]);
        assert!(other.iter().all(|x| !b.contains(x)));
        // Nothing shared: nothing in common with anyone.
        let lone = c.blocks("s4", "m", 600, 0);
        assert!(lone.iter().all(|x| !a.contains(x) && !b.contains(x)));
    }
}
