//! Content hashing: a prompt becomes `hash_ids` without its text leaving
//! the converter.
//!
//! The prompt is rendered to one deterministic string (tool definitions
//! first, then each message as a role line and its content), tokenized,
//! and cut into blocks of 512 tokens. Block k's hash is a stable hash of
//! its tokens seeded with block k−1's hash, so a hash stands for the whole
//! prefix up to its block, as Mooncake's ids do. The hashes are renumbered
//! densely (0, 1, 2, …) in order of first appearance in the output.
//!
//! The log's prompt size (`prompt_tokens`, which counts the model's chat
//! template with the model's own tokenizer) rarely equals the token count
//! of the rendered string; the contract wants ceil(input_length / 512) ids,
//! so the chain is cut, or extended with blocks chained from the last one
//! (identical prompts of equal size still get identical ids).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use serde_json::Value;

use super::Prompt;
use crate::error::{Error, Result};
use crate::hash::stable_hash;
use crate::tokenizer::Tokenizer;

/// Tokens per block.
pub const BLOCK: usize = 512;

/// The tokenizer used for hashing, and the token ids of recent messages.
///
/// Conversations resend their history: turn n carries the n−1 turns before
/// it. Where the tokenizer allows it (see
/// [`Tokenizer::splits_after_newlines`]) each message is tokenized on its
/// own and its ids kept, so a conversation costs the tokenizing of each
/// message once rather than of every turn whole. The ids are the same as
/// the whole prompt's (a test checks it).
pub struct Hasher {
    tok: Tokenizer,
    cache: Option<Mutex<SegmentCache>>,
}

impl Hasher {
    /// Hash with `tok`.
    pub fn new(tok: Tokenizer) -> Hasher {
        let cache = tok
            .splits_after_newlines()
            .then(|| Mutex::new(SegmentCache::default()));
        Hasher { tok, cache }
    }

    /// The tokenizer it hashes with.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tok
    }

    /// Token ids of a prompt, rendered as [`render`] does.
    pub fn tokenize(&self, prompt: &Prompt) -> Result<Vec<u32>> {
        let (text, cuts) = render_with_cuts(prompt);
        let Some(cache) = &self.cache else {
            return self.tok.encode(&text);
        };
        let bytes = text.as_bytes();
        // Only where a newline meets text other than whitespace or `/` is
        // a cut sure to fall between pre-tokenizer pieces.
        let cuts = cuts
            .into_iter()
            .filter(|&c| c > 0 && c < bytes.len() && bytes[c - 1] == b'\n')
            .filter(|&c| !text[c..].starts_with(|ch: char| ch.is_whitespace() || ch == '/'));
        let mut tokens = Vec::new();
        let mut start = 0;
        for end in cuts.chain([text.len()]) {
            let part = &text[start..end];
            start = end;
            if part.is_empty() {
                continue;
            }
            let key = xxhash_rust::xxh3::xxh3_128(part.as_bytes());
            if let Some(ids) = lock(cache).get(key) {
                tokens.extend_from_slice(&ids);
                continue;
            }
            let ids = self.tok.encode(part)?;
            tokens.extend_from_slice(&ids);
            lock(cache).insert(key, ids.into());
        }
        Ok(tokens)
    }
}

fn lock(cache: &Mutex<SegmentCache>) -> std::sync::MutexGuard<'_, SegmentCache> {
    // The cache holds no invariant a panicking thread could break.
    cache.lock().unwrap_or_else(|e| e.into_inner())
}

/// Token ids of message texts, bounded: entries live in two generations,
/// the older dropped whole when the newer fills, and a hit in the older
/// moves to the newer (an approximation of least-recently-used). Texts are
/// known by a 128-bit hash, not kept: a collision is as likely as one
/// between two random 128-bit numbers.
#[derive(Default)]
struct SegmentCache {
    new: HashMap<u128, Arc<[u32]>>,
    old: HashMap<u128, Arc<[u32]>>,
    new_bytes: usize,
}

/// Bytes of ids the newer generation holds before it ages (so at most
/// twice this in all): thousands of long conversations.
const SEGMENT_CACHE_BYTES: usize = 32 << 20;

impl SegmentCache {
    fn get(&mut self, key: u128) -> Option<Arc<[u32]>> {
        if let Some(ids) = self.new.get(&key) {
            return Some(ids.clone());
        }
        let ids = self.old.remove(&key)?;
        self.insert(key, ids.clone());
        Some(ids)
    }

    fn insert(&mut self, key: u128, ids: Arc<[u32]>) {
        self.new_bytes += 16 + 4 * ids.len();
        self.new.insert(key, ids);
        if self.new_bytes > SEGMENT_CACHE_BYTES {
            self.old = std::mem::take(&mut self.new);
            self.new_bytes = 0;
        }
    }
}

/// The prompt as one string: the same prompt always renders the same, and
/// a conversation that extends another renders to an extension of it.
pub fn render(prompt: &Prompt) -> String {
    render_with_cuts(prompt).0
}

/// The rendered prompt and the offsets where one message ends and the next
/// part begins.
fn render_with_cuts(prompt: &Prompt) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut cuts = Vec::new();
    if let Some(tools) = &prompt.tools {
        out.push_str("<|tools|>\n");
        out.push_str(&tools.to_string());
        out.push('\n');
        cuts.push(out.len());
    }
    match &prompt.messages {
        Some(Value::Array(messages)) => {
            for m in messages {
                render_message(m, &mut out);
                cuts.push(out.len());
            }
        }
        Some(other) => render_content(other, &mut out),
        None => {}
    }
    if let Some(text) = &prompt.text {
        out.push_str(text);
    }
    (out, cuts)
}

fn render_message(m: &Value, out: &mut String) {
    let Value::Object(obj) = m else {
        render_content(m, out);
        out.push('\n');
        return;
    };
    let role = obj.get("role").and_then(Value::as_str).unwrap_or("user");
    out.push_str("<|");
    out.push_str(role);
    out.push_str("|>\n");
    if let Some(content) = obj.get("content") {
        render_content(content, out);
    }
    for (key, value) in obj {
        if key != "role" && key != "content" && !value.is_null() {
            out.push_str(&format!("\n<|{key}|>{value}"));
        }
    }
    out.push('\n');
}

fn render_content(content: &Value, out: &mut String) {
    match content {
        Value::String(s) => out.push_str(s),
        Value::Null => {}
        Value::Array(parts) => {
            for part in parts {
                match part.get("text").and_then(Value::as_str) {
                    Some(text) => out.push_str(text),
                    None => match part {
                        Value::String(s) => out.push_str(s),
                        other => out.push_str(&other.to_string()),
                    },
                }
            }
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Chained hashes of `tokens` in blocks of `block` tokens (the last block
/// may be partial).
pub fn chain(tokens: &[u32], block: usize) -> Vec<u64> {
    let mut prev = 0u64;
    let mut bytes = Vec::with_capacity(block * 4);
    tokens
        .chunks(block)
        .map(|chunk| {
            bytes.clear();
            for t in chunk {
                bytes.extend_from_slice(&t.to_le_bytes());
            }
            prev = stable_hash(prev, &bytes);
            prev
        })
        .collect()
}

/// Cut or extend `hashes` to `want` blocks; extra blocks continue the chain.
pub fn fit(mut hashes: Vec<u64>, want: usize) -> Vec<u64> {
    hashes.truncate(want);
    let mut prev = hashes.last().copied().unwrap_or(0);
    while hashes.len() < want {
        prev = stable_hash(prev, b"tracekit: block beyond the rendered prompt");
        hashes.push(prev);
    }
    hashes
}

/// Block ids of a trace with `source_block`-token blocks (Bailian's 16,
/// the coding traces' 64) as canonical 512-token blocks: each run of
/// 512 / `source_block` ids becomes one block whose hash chains those ids
/// with the previous block's, so equal 512-token prefixes keep equal ids;
/// fitted to the blocks `input` tokens need. `scope` seeds the chain:
/// ids that are local to one file do not match another file's. More ids
/// than `input` (the source's `length` field) needs is an error.
pub fn from_source_blocks(
    ids: &[u64],
    source_block: u64,
    (length, input): (&str, u64),
    scope: u64,
) -> Result<Vec<u64>, crate::error::FieldError> {
    let want = input.div_ceil(source_block);
    if ids.len() as u64 > want {
        return Err(crate::error::FieldError::new(
            "hash_ids",
            format!(
                "has {} blocks, but {length} {input} needs ceil({input} / {source_block}) = {want}",
                ids.len()
            ),
        ));
    }
    let per = (BLOCK as u64 / source_block.clamp(1, BLOCK as u64)) as usize;
    Ok(fit(
        reblock(ids, per, scope),
        crate::record::blocks_for(input, BLOCK as u64) as usize,
    ))
}

/// Group `per` source ids into one block, chained with the previous one
/// (the first with `seed`).
fn reblock(ids: &[u64], per: usize, seed: u64) -> Vec<u64> {
    let mut prev = seed;
    let mut bytes = Vec::with_capacity(per * 8);
    ids.chunks(per)
        .map(|group| {
            bytes.clear();
            for id in group {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            prev = stable_hash(prev ^ 0xb1, &bytes);
            prev
        })
        .collect()
}

/// Dense ids for hashes, in order of first appearance.
#[derive(Debug, Default)]
pub struct Renumber {
    ids: HashMap<u64, u64>,
}

impl Renumber {
    /// The id of `hash`, a new one if it was not seen before.
    pub fn id(&mut self, hash: u64) -> u64 {
        let next = self.ids.len() as u64;
        *self.ids.entry(hash).or_insert(next)
    }
}

/// Hashing on worker threads that live as long as the conversion, one per
/// core: the reading thread goes on parsing while batches are hashed, and
/// batches come back in the order they were sent. Long-lived threads also
/// matter for speed: the tokenizer's regex keeps per-thread caches, and a
/// new thread per batch finds them owned by threads that have gone (which
/// cost about a third of tokenizing time).
pub struct Workers<T> {
    jobs: Option<mpsc::SyncSender<(u64, Vec<T>)>>,
    done: mpsc::Receiver<(u64, Result<Vec<T>>)>,
    threads: Vec<JoinHandle<()>>,
    sent: u64,
    next: u64,
    early: BTreeMap<u64, Result<Vec<T>>>,
}

impl<T: Send + 'static> Workers<T> {
    /// Start one worker per core, each calling `work` on every item of the
    /// batches it takes.
    pub fn start(hasher: Hasher, work: fn(&Hasher, &mut T) -> Result<()>) -> Workers<T> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        // Two batches per worker queued at most: memory stays bounded when
        // reading outpaces hashing.
        let (jobs, queue) = mpsc::sync_channel::<(u64, Vec<T>)>(2 * threads);
        let (results, done) = mpsc::channel();
        let queue = Arc::new(Mutex::new(queue));
        let hasher = Arc::new(hasher);
        let threads = (0..threads)
            .map(|_| {
                let (queue, results, hasher) = (queue.clone(), results.clone(), hasher.clone());
                std::thread::spawn(move || {
                    loop {
                        let job = queue.lock().map(|q| q.recv());
                        let Ok(Ok((seq, mut batch))) = job else {
                            return;
                        };
                        let hashed = batch.iter_mut().try_for_each(|item| work(&hasher, item));
                        if results.send((seq, hashed.map(|()| batch))).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Workers {
            jobs: Some(jobs),
            done,
            threads,
            sent: 0,
            next: 0,
            early: BTreeMap::new(),
        }
    }

    /// Queue a batch (waiting while the queue is full), and append to
    /// `out` the batches done so far, in order.
    pub fn submit(&mut self, batch: Vec<T>, out: &mut Vec<T>) -> Result<()> {
        let jobs = self.jobs.as_ref().expect("not finished");
        jobs.send((self.sent, batch))
            .map_err(|_| Error::msg("a hashing thread failed"))?;
        self.sent += 1;
        while let Ok((seq, batch)) = self.done.try_recv() {
            self.early.insert(seq, batch);
        }
        self.take_ready(out)
    }

    /// Wait for every batch, append them to `out` in order, and stop the
    /// workers.
    pub fn finish(&mut self, out: &mut Vec<T>) -> Result<()> {
        self.jobs = None;
        while self.next < self.sent {
            match self.done.recv() {
                Ok((seq, batch)) => {
                    self.early.insert(seq, batch);
                    self.take_ready(out)?;
                }
                Err(_) => return Err(Error::msg("a hashing thread failed")),
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        Ok(())
    }

    /// Whether every batch sent has come back.
    pub fn idle(&self) -> bool {
        self.next == self.sent
    }

    fn take_ready(&mut self, out: &mut Vec<T>) -> Result<()> {
        while let Some(batch) = self.early.remove(&self.next) {
            out.append(&mut batch?);
            self.next += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::mix;

    #[test]
    fn reblocking_keeps_shared_prefixes() {
        let a: Vec<u64> = (0..70).collect();
        let mut b = a[..64].to_vec();
        b.extend([999, 1000]);
        let (ra, rb) = (reblock(&a, 32, 0), reblock(&b, 32, 0));
        assert_eq!(ra.len(), 3);
        assert_eq!(ra[..2], rb[..2]);
        assert_ne!(ra[2], rb[2]);
        // One differing id in the first group changes every block.
        let mut c = a.clone();
        c[3] = 500;
        let rc = reblock(&c, 32, 0);
        assert!(ra.iter().zip(&rc).all(|(x, y)| x != y));
        // Another scope shares nothing.
        assert!(reblock(&a, 32, 7).iter().all(|x| !ra.contains(x)));
    }

    #[test]
    fn source_blocks_become_the_blocks_the_prompt_needs() {
        // 64-token blocks, 8 to a canonical block: 17 ids (1,088 tokens,
        // the last block full) make ceil(17 / 8) = 3 groups; a prompt of
        // 1,100 tokens needs ceil(1100 / 512) = 3 blocks, one of 1,600
        // needs 4 (the fourth continues the chain).
        let ids: Vec<u64> = (1..=17).collect();
        let three = from_source_blocks(&ids, 64, ("in", 1100), 0).unwrap();
        assert_eq!(three, reblock(&ids, 8, 0));
        let four = from_source_blocks(&ids, 64, ("in", 1600), 0).unwrap();
        assert_eq!(four.len(), 4);
        assert_eq!(four[..3], three[..]);
        // 1,000 tokens need ceil(1000 / 64) = 16 blocks, not 17.
        let err = from_source_blocks(&ids, 64, ("in", 1000), 0).unwrap_err();
        assert_eq!(
            err.msg,
            "has 17 blocks, but in 1000 needs ceil(1000 / 64) = 16"
        );
    }

    /// A seeded generator (SplitMix64), so every run tests the same cases.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(1);
            mix(self.0)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn prefix_property_holds_for_random_prompts() {
        let mut rng = Rng(20261123);
        for case in 0..300 {
            let block = [1usize, 4, 16, 512][rng.below(4) as usize];
            let blocks = 1 + rng.below(6) as usize;
            let len = block * blocks - rng.below(block as u64) as usize;
            let a: Vec<u32> = (0..len).map(|_| rng.below(50_000) as u32).collect();

            // Prompts sharing k whole blocks share exactly their first k ids.
            let k = rng.below(blocks as u64 + 1) as usize;
            let mut b: Vec<u32> = a[..(k * block).min(len)].to_vec();
            let extra = rng.below(3 * block as u64) as usize + 1;
            b.extend((0..extra).map(|_| 50_000 + rng.below(1000) as u32));
            let (ha, hb) = (chain(&a, block), chain(&b, block));
            let shared = ha.iter().zip(&hb).take_while(|(x, y)| x == y).count();
            let whole = k.min(len / block);
            assert_eq!(shared, whole, "case {case}: block {block}, k {k}");

            // Changing one token in block j changes the ids from j on only.
            let pos = rng.below(len as u64) as usize;
            let mut c = a.clone();
            c[pos] = c[pos].wrapping_add(1 + rng.below(10) as u32);
            let hc = chain(&c, block);
            let j = pos / block;
            assert_eq!(ha[..j], hc[..j], "case {case}");
            for i in j..ha.len() {
                assert_ne!(ha[i], hc[i], "case {case}: block {i} of {}", ha.len());
            }
        }
    }

    #[test]
    fn fit_cuts_or_extends_the_chain() {
        let h = chain(&[1, 2, 3, 4, 5], 2);
        assert_eq!(h.len(), 3);
        assert_eq!(fit(h.clone(), 2), h[..2]);
        let longer = fit(h.clone(), 5);
        assert_eq!(longer[..3], h[..]);
        assert_eq!(longer, fit(h.clone(), 5));
        assert_ne!(longer[3], longer[4]);
    }

    #[test]
    fn renumbering_is_dense_in_order_of_appearance() {
        let mut r = Renumber::default();
        assert_eq!([r.id(99), r.id(7), r.id(99), r.id(5)], [0, 1, 0, 2]);
    }

    #[test]
    fn a_longer_conversation_renders_to_an_extension() {
        let turn1 = serde_json::json!([{"role": "user", "content": "hi"}]);
        let turn2 = serde_json::json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}
        ]);
        let r1 = render(&Prompt {
            messages: Some(turn1),
            ..Prompt::default()
        });
        let r2 = render(&Prompt {
            messages: Some(turn2),
            ..Prompt::default()
        });
        assert_eq!(r1, "<|user|>\nhi\n");
        assert!(r2.starts_with(&r1));
        assert_eq!(r2, "<|user|>\nhi\n<|assistant|>\nhello\n");
    }

    #[test]
    fn workers_return_batches_in_the_order_sent() {
        fn double(_: &Hasher, n: &mut u64) -> Result<()> {
            if *n == 999_999 {
                return Err(Error::msg("bad item"));
            }
            *n *= 2;
            Ok(())
        }
        let hasher = || Hasher::new(crate::tokenizer::Tokenizer::load("r50k_base").unwrap());
        let mut workers = Workers::start(hasher(), double);
        let mut out = Vec::new();
        let mut next = 0u64;
        for size in (0..200).map(|i| 1 + (i * 37) % 50) {
            let batch: Vec<u64> = (next..next + size).collect();
            next += size;
            workers.submit(batch, &mut out).unwrap();
            assert!(out.iter().enumerate().all(|(i, &n)| n == 2 * i as u64));
        }
        workers.finish(&mut out).unwrap();
        assert!(workers.idle());
        assert_eq!(out, (0..next).map(|n| 2 * n).collect::<Vec<_>>());

        // An error comes back in its batch's turn.
        let mut workers = Workers::start(hasher(), double);
        let mut out = Vec::new();
        workers.submit(vec![1, 2], &mut out).unwrap();
        let failed = workers
            .submit(vec![999_999], &mut out)
            .and_then(|()| workers.finish(&mut out));
        assert_eq!(failed.unwrap_err().to_string(), "error: bad item");
        assert_eq!(out, [2, 4]);
    }

    #[test]
    fn messages_tokenized_apart_give_the_whole_prompts_ids() {
        // Pieces that meet at a cut: whitespace runs, newlines, CRs,
        // punctuation that takes trailing newlines, contractions, digits,
        // letters of several scripts.
        const PIECES: &[&str] = &[
            " ", "  ", "\n", "\n\n", "\r\n", " \n", "\t", ".", "!\n", "'s", "'LL", "123", "4567",
            "word", "Word", "WORDS", "é", "中文", "🙂", "<|", "|>", "/", "/\n", "\r", "\u{a0}",
        ];
        let mut rng = Rng(7);
        let text = |rng: &mut Rng| -> String {
            let n = rng.below(12) as usize;
            (0..n)
                .map(|_| PIECES[rng.below(PIECES.len() as u64) as usize])
                .collect()
        };
        for name in ["o200k_base", "cl100k_base"] {
            let tok = crate::tokenizer::Tokenizer::load(name).unwrap();
            let whole = crate::tokenizer::Tokenizer::load(name).unwrap();
            let hasher = Hasher::new(tok);
            assert!(hasher.cache.is_some());
            for case in 0..400 {
                let messages: Vec<Value> = (0..1 + rng.below(5))
                    .map(|_| match rng.below(4) {
                        0 => Value::String(text(&mut rng)),
                        _ => serde_json::json!({"role": "user", "content": text(&mut rng)}),
                    })
                    .collect();
                let prompt = Prompt {
                    messages: Some(Value::Array(messages)),
                    text: (rng.below(4) == 0).then(|| text(&mut rng)),
                    tools: (rng.below(4) == 0).then(|| serde_json::json!([text(&mut rng)])),
                };
                // Twice: the second time from the cache.
                for _ in 0..2 {
                    assert_eq!(
                        hasher.tokenize(&prompt).unwrap(),
                        whole.encode(&render(&prompt)).unwrap(),
                        "{name}, case {case}: {:?}",
                        render(&prompt)
                    );
                }
            }
        }
        let r50k = crate::tokenizer::Tokenizer::load("r50k_base").unwrap();
        assert!(Hasher::new(r50k).cache.is_none());
    }
}
