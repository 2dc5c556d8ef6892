//! The iteration-level model: the loop real engines run (vLLM's and
//! SGLang's schedulers, llama.cpp's slots), as a pure function of virtual
//! time. No clock and no thread: the served simulator drives it from the
//! wall clock, the offline twin from a virtual one, and tests at exact
//! times.
//!
//! Each step serves every running request's next token and a budget of
//! prefill tokens (chunked prefill, first come first served), and takes
//! α + β·(prefill tokens) + γ·(decoding requests) + δ·(context tokens
//! attended) + ε·(requests prefilling) + ζ·(tokens each prefill token
//! attends to: attention over a prompt grows with its square). At most `slots` requests run;
//! the others wait, first come first served, and are admitted at a step's
//! start. A request's prefix is looked up in the block cache when it is
//! admitted. The step that finishes a request's prefill gives its first
//! token (as engines sample it there); every later step one more. A request
//! arriving while a step runs waits for the next one.

use std::collections::VecDeque;

use super::cache::BlockCache;
use super::profile::Profile;

/// The seed of the step spread's draws when none is given: every run of
/// a profile gives the same times; another seed, other draws.
pub const DEFAULT_SEED: u64 = 1;

/// A request given to the batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// The caller's name for it, returned with its events.
    pub key: u64,
    /// Prompt tokens.
    pub prompt: u64,
    /// Tokens to generate; 0 for an answer given after the prefill alone
    /// (embeddings).
    pub output: u64,
    /// The prompt's blocks (each id standing for its whole prefix), for
    /// the prefix cache; empty: nothing is cached.
    pub blocks: Vec<u64>,
    /// Prompt tokens the caller found cached itself (the served
    /// simulator looks its own cache up as a request arrives).
    pub known_cached: u64,
}

/// What a step's end gave a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub key: u64,
    /// The step's end, ms.
    pub at: f64,
    /// Tokens generated so far (1 for the first token; 0 for an answer
    /// without tokens).
    pub tokens: u64,
    /// The request is done and has left the batch.
    pub done: bool,
    /// Prompt tokens found in the prefix cache (known from admission; the
    /// same in every event of the request).
    pub cached: u64,
}

/// A request admitted to a slot.
#[derive(Debug)]
struct Running {
    key: u64,
    prompt: u64,
    output: u64,
    cached: u64,
    /// Prompt tokens still to prefill.
    prefill_left: u64,
    /// Tokens generated.
    generated: u64,
}

/// What a step does, fixed when it starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub start: f64,
    pub end: f64,
    /// Prompt tokens prefilled.
    pub prefill_tokens: u64,
    /// Requests prefilling (a chunk of their prompt).
    pub prefilling: u64,
    /// Requests decoding one token each.
    pub decoding: u64,
    /// Context tokens the decoding requests attend to.
    pub context: u64,
    /// Tokens before each prefill token, summed: what the prefill's
    /// attention reads ([`attended`]).
    pub prefill_attended: u64,
}

impl Step {
    /// How long the step takes under `p`'s terms, ms (before the spread).
    pub fn ms(&self, p: &Profile) -> f64 {
        p.alpha_ms
            + p.beta_ms * self.prefill_tokens as f64
            + p.gamma_ms * self.decoding as f64
            + p.delta_ms * self.context as f64
            + p.epsilon_ms * self.prefilling as f64
            + p.zeta_ms * self.prefill_attended as f64
    }
}

/// The tokens before each of `n` prompt tokens from position `from`,
/// summed: n·from + n(n−1)/2. A chunk's attention reads that many.
pub fn attended(from: u64, n: u64) -> u64 {
    n * from + n * n.saturating_sub(1) / 2
}

/// The engine's state.
pub struct Batch {
    profile: Profile,
    cache: BlockCache,
    waiting: VecDeque<(f64, Job)>,
    /// Admitted and under way (prefilling or decoding), in the order they
    /// were admitted.
    running: Vec<Running>,
    /// Admitted, their prefill not started yet (no budget reached them),
    /// in the order they were admitted: after every one in `running`.
    /// Kept apart so that a step costs what it serves, not every request
    /// admitted (with no slot limit, an overloaded trace admits them all).
    admitted: VecDeque<Running>,
    /// The step under way.
    step: Option<Step>,
    /// Each running request's share of the step's prefill budget, in
    /// `running`'s order.
    shares: Vec<u64>,
    /// Steps cannot start before this: the last step's end.
    free_at: f64,
    /// The state of the draws of the step spread (splitmix64).
    draws: u64,
}

impl Batch {
    /// The batch of `profile`, its step spread drawn from the profile's
    /// seed ([`Profile::seed`]).
    pub fn new(profile: Profile) -> Batch {
        let seed = profile.seed;
        Batch::seeded(profile, seed)
    }

    /// The batch of `profile`, its step spread drawn from `seed`: the same
    /// seed gives the same times, another seed other draws.
    pub fn seeded(profile: Profile, seed: u64) -> Batch {
        Batch {
            cache: BlockCache::new(profile.cache_blocks),
            profile,
            waiting: VecDeque::new(),
            running: Vec::new(),
            admitted: VecDeque::new(),
            step: None,
            shares: Vec::new(),
            free_at: f64::NEG_INFINITY,
            // Seeds next to each other start far apart in the draws.
            draws: crate::hash::mix(seed),
        }
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// A request arrives at `at` (after [`Batch::advance`] to `at`): it
    /// reaches the scheduler η × its prompt tokens later (tokenized beside
    /// the steps), then joins the step that starts then if none is under
    /// way, else waits for the next. Requests wait in the order they
    /// reached the scheduler.
    pub fn arrive(&mut self, at: f64, job: Job) {
        let ready = at + self.profile.eta_ms * job.prompt as f64;
        let place = self.waiting.partition_point(|(t, _)| *t <= ready);
        self.waiting.insert(place, (ready, job));
    }

    /// Requests admitted and not done.
    pub fn running(&self) -> usize {
        self.running.len() + self.admitted.len()
    }

    /// Requests waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Requests whose prefill has not started: waiting for a slot, or
    /// admitted and waiting for the prefill budget.
    pub fn queued(&self) -> usize {
        self.waiting.len() + self.admitted.len()
    }

    /// The blocks held by the prefix cache.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// The step under way or, when idle with work, the one that starts
    /// now: when it ends. `None` when there is nothing to do.
    pub fn next_end(&mut self) -> Option<f64> {
        self.form();
        self.step.as_ref().map(|s| s.end)
    }

    /// The step under way, if any.
    pub fn current(&mut self) -> Option<Step> {
        self.form();
        self.step
    }

    /// Run every step that ends at or before `until`, appending what they
    /// gave to `out`.
    pub fn advance(&mut self, until: f64, out: &mut Vec<Event>) {
        while let Some(end) = self.next_end() {
            if end > until {
                break;
            }
            self.finish(out);
        }
    }

    /// Start a step if none is under way and there is work: admit waiting
    /// requests into free slots, give the prefill budget out in order.
    fn form(&mut self) {
        if self.step.is_some() {
            return;
        }
        let Some(start) = self.start_time() else {
            return;
        };
        let slots = self.profile.slots;
        while slots == 0 || self.running.len() + self.admitted.len() < slots {
            match self.waiting.front() {
                Some((at, _)) if *at <= start => {}
                _ => break,
            }
            let (_, job) = self.waiting.pop_front().expect("front exists");
            let cached = self
                .cache
                .admit(&job.blocks, self.profile.block_size, job.prompt)
                .max(job.known_cached)
                .min(job.prompt);
            self.admitted.push_back(Running {
                key: job.key,
                prompt: job.prompt,
                output: job.output,
                cached,
                // An engine computes at least the last prompt token to
                // sample the first output token.
                prefill_left: (job.prompt - cached).max(1),
                generated: 0,
            });
        }
        if self.running.is_empty() && self.admitted.is_empty() {
            return;
        }
        // The decoding requests' tokens take their places in the step's
        // token budget first (llama.cpp fills its n_batch with them before
        // any prompt token, vLLM its max_num_batched_tokens); the prompts
        // share the rest, first come first served.
        let decoding = self.running.iter().filter(|r| r.prefill_left == 0).count() as u64;
        let mut budget = self.profile.prefill_chunk.saturating_sub(decoding);
        self.shares.clear();
        let mut step = Step {
            start,
            end: start,
            prefill_tokens: 0,
            prefilling: 0,
            decoding: 0,
            context: 0,
            prefill_attended: 0,
        };
        for r in &self.running {
            if r.prefill_left > 0 {
                let share = r.prefill_left.min(budget);
                budget -= share;
                if share > 0 {
                    step.prefilling += 1;
                    step.prefill_tokens += share;
                    step.prefill_attended += attended(r.prompt - r.prefill_left, share);
                }
                self.shares.push(share);
            } else {
                step.decoding += 1;
                step.context += r.prompt + r.generated;
                self.shares.push(0);
            }
        }
        // Then the prompts not started, first come first served, while the
        // budget lasts: each that gets a share is under way.
        while budget > 0 {
            let Some(r) = self.admitted.pop_front() else {
                break;
            };
            let share = r.prefill_left.min(budget);
            budget -= share;
            step.prefilling += 1;
            step.prefill_tokens += share;
            step.prefill_attended += attended(r.prompt - r.prefill_left, share);
            self.shares.push(share);
            self.running.push(r);
        }
        step.end = start + step.ms(&self.profile) * self.spread(step.prefilling > 0);
        self.step = Some(step);
    }

    /// The next step's ratio to the model's time: 1 without a spread,
    /// else drawn from it.
    fn spread(&mut self, prefills: bool) -> f64 {
        if self.profile.spread(prefills).is_empty() {
            return 1.0;
        }
        self.draws = self.draws.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.draws;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        Profile::spread_at(self.profile.spread(prefills), u)
    }

    /// When the next step can start, if there is work: now for running
    /// requests, else at the first waiting request's arrival.
    fn start_time(&self) -> Option<f64> {
        let first = if self.running.is_empty() && self.admitted.is_empty() {
            self.waiting.front().map(|(at, _)| *at)?
        } else {
            f64::NEG_INFINITY
        };
        Some(first.max(self.free_at))
    }

    /// End the step under way.
    fn finish(&mut self, out: &mut Vec<Event>) {
        let Some(step) = self.step.take() else {
            return;
        };
        self.free_at = step.end;
        let at = step.end;
        for (r, &share) in self.running.iter_mut().zip(&self.shares) {
            if r.prefill_left > 0 {
                if share == 0 {
                    continue;
                }
                r.prefill_left -= share;
                if r.prefill_left > 0 {
                    continue;
                }
            }
            if r.output > 0 {
                r.generated += 1;
            }
            out.push(Event {
                key: r.key,
                at,
                tokens: r.generated,
                done: r.generated >= r.output,
                cached: r.cached,
            });
        }
        self.running
            .retain(|r| r.prefill_left > 0 || r.generated < r.output);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// α 10 ms, β 0.01 ms per prefill token, γ 1 ms per decoding request,
    /// no δ or ε; two slots, a prefill budget of 1000 tokens, no cache.
    pub(crate) fn profile() -> Profile {
        Profile {
            alpha_ms: 10.0,
            beta_ms: 0.01,
            gamma_ms: 1.0,
            delta_ms: 0.0,
            epsilon_ms: 0.0,
            slots: 2,
            prefill_chunk: 1000,
            cache_blocks: 0,
            ..Profile::default()
        }
    }

    fn job(key: u64, prompt: u64, output: u64) -> Job {
        Job {
            key,
            prompt,
            output,
            blocks: Vec::new(),
            known_cached: 0,
        }
    }

    fn bare_step(prefill_tokens: u64, prefilling: u64, decoding: u64) -> Step {
        Step {
            start: 0.0,
            end: 0.0,
            prefill_tokens,
            prefilling,
            decoding,
            context: 0,
            prefill_attended: 0,
        }
    }

    #[test]
    fn the_flags_profile_gives_their_ttft_and_itl() {
        let p = Profile::from_flags(20.0, 20.0, 5.0, 0.01);
        // A request alone: 20 ms + 20 µs × 1000 tokens = 40 ms.
        assert!((bare_step(1000, 1, 0).ms(&p) - 40.0).abs() < 1e-9);
        // One decoding: 5 ms; eleven: 5 × 1.1 = 5.5 ms.
        assert!((bare_step(0, 0, 1).ms(&p) - 5.0).abs() < 1e-9);
        assert!((bare_step(0, 0, 11).ms(&p) - 5.5).abs() < 1e-9);
    }

    /// (key, at, tokens, done) of every event up to `until`.
    fn run(b: &mut Batch, until: f64) -> Vec<(u64, f64, u64, bool)> {
        let mut out = Vec::new();
        b.advance(until, &mut out);
        out.iter()
            .map(|e| (e.key, e.at, e.tokens, e.done))
            .collect()
    }

    #[test]
    fn one_request_prefills_then_decodes_one_token_a_step() {
        let mut b = Batch::new(profile());
        b.arrive(100.0, job(0, 500, 3));
        // Prefill step: 10 + 0.01 × 500 = 15 ms, first token at 115.
        // Decode steps: 10 + 1 × 1 = 11 ms each: 126, 137.
        assert_eq!(b.next_end(), Some(115.0));
        assert_eq!(
            run(&mut b, 1000.0),
            vec![
                (0, 115.0, 1, false),
                (0, 126.0, 2, false),
                (0, 137.0, 3, true)
            ]
        );
        assert_eq!(b.next_end(), None);
        assert_eq!(b.running(), 0);
    }

    #[test]
    fn a_request_reaches_the_scheduler_eta_per_prompt_token_later() {
        let p = Profile {
            eta_ms: 0.01,
            ..profile()
        };
        // 500 tokens: at the scheduler 5 ms after its arrival (105), its
        // prefill step 15 ms (120), then 11 ms a token.
        let mut b = Batch::new(p.clone());
        b.arrive(100.0, job(0, 500, 3));
        assert_eq!(b.next_end(), Some(120.0));
        let at: Vec<f64> = run(&mut b, 1000.0).iter().map(|e| e.1).collect();
        assert_eq!(at, vec![120.0, 131.0, 142.0]);
        // A long prompt (ready at 9) and a short one sent after it (ready
        // at 1 + 1 = 2): the short one is prefilled first, 2 to 2 + 10 +
        // 1 = 13; the long one, ready during that step, joins the next:
        // 10 + 9 (its 900 tokens) + 1 (the short one decoding) = 20 ms,
        // 13 to 33, which gives each its last token.
        let mut b = Batch::new(p);
        b.arrive(0.0, job(0, 900, 1));
        b.arrive(1.0, job(1, 100, 2));
        assert_eq!(
            run(&mut b, 1000.0),
            vec![(1, 13.0, 1, false), (1, 33.0, 2, true), (0, 33.0, 1, true)]
        );
    }

    #[test]
    fn a_spread_scales_each_step_and_prefill_steps_have_their_own() {
        // Every ratio 2: the prefill step takes 2 × 15 = 30 ms (130), each
        // decode step 2 × 11 = 22 ms (152, 174).
        let mut b = Batch::new(Profile {
            step_spread: vec![2.0, 2.0],
            ..profile()
        });
        b.arrive(100.0, job(0, 500, 3));
        let at: Vec<f64> = run(&mut b, 1000.0).iter().map(|e| e.1).collect();
        assert_eq!(at, vec![130.0, 152.0, 174.0]);
        // Prefill steps at ratio 1: 115, then 137 and 159.
        let mut b = Batch::new(Profile {
            step_spread: vec![2.0],
            prefill_spread: vec![1.0],
            ..profile()
        });
        b.arrive(100.0, job(0, 500, 3));
        let at: Vec<f64> = run(&mut b, 1000.0).iter().map(|e| e.1).collect();
        assert_eq!(at, vec![115.0, 137.0, 159.0]);
        // Between quantiles, linearly: a quarter of the way from 1 to 3.
        assert_eq!(Profile::spread_at(&[1.0, 3.0], 0.25), 1.5);
        assert_eq!(Profile::spread_at(&[], 0.25), 1.0);
    }

    #[test]
    fn an_arrival_during_a_step_joins_the_next_and_slows_it() {
        let mut b = Batch::new(profile());
        b.arrive(0.0, job(0, 200, 3));
        // Step 1: prefill 200: 10 + 2 = 12.
        assert_eq!(run(&mut b, 5.0), vec![]);
        b.arrive(5.0, job(1, 300, 2));
        // Step 2 (12 → 26): request 0 decodes (γ 1), request 1 prefills
        // 300 (β 3): 10 + 3 + 1 = 14.
        // Step 3 (26 → 38): both decode: 10 + 2 = 12; request 0's third
        // token and request 1's second end them both.
        assert_eq!(
            run(&mut b, 100.0),
            vec![
                (0, 12.0, 1, false),
                (0, 26.0, 2, false),
                (1, 26.0, 1, false),
                (0, 38.0, 3, true),
                (1, 38.0, 2, true),
            ]
        );
    }

    #[test]
    fn a_full_batch_makes_later_requests_wait_in_order() {
        let mut b = Batch::new(Profile {
            slots: 1,
            ..profile()
        });
        b.arrive(0.0, job(0, 100, 2));
        b.arrive(0.0, job(1, 100, 1));
        b.arrive(1.0, job(2, 100, 1));
        assert_eq!((b.running(), b.waiting()), (0, 3));
        // 0: prefill 0–11, decode 11–22. 1 waits for the slot: 22–33.
        // 2 after 1: 33–44.
        assert_eq!(
            run(&mut b, 100.0),
            vec![
                (0, 11.0, 1, false),
                (0, 22.0, 2, true),
                (1, 33.0, 1, true),
                (2, 44.0, 1, true),
            ]
        );
    }

    #[test]
    fn a_long_prompt_is_prefilled_in_chunks_beside_decoding() {
        let mut b = Batch::new(profile());
        b.arrive(0.0, job(0, 100, 4));
        b.arrive(0.0, job(1, 2500, 1));
        // Step 1: nothing decodes; the budget of 1000 goes 100 to 0, 900
        //   to 1: 10 + 0.01 × 1000 = 20.
        // Step 2: 0 decodes, its token taking one place of the budget: 1
        //   prefills 999: 10 + 9.99 + 1 = 20.99 → 40.99.
        // Step 3: 0 decodes, 1 prefills its last 601: 10 + 6.01 + 1 =
        //   17.01 → 58, 1's first (and only) token.
        // Step 4: 0 decodes alone: 11 → 69, its fourth token.
        let got = run(&mut b, 1000.0);
        let want = [
            (0, 20.0, 1, false),
            (0, 40.99, 2, false),
            (0, 58.0, 3, false),
            (1, 58.0, 1, true),
            (0, 69.0, 4, true),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.2, g.3), (w.0, w.2, w.3), "{got:?}");
            assert!((g.1 - w.1).abs() < 1e-9, "{got:?}");
        }
    }

    #[test]
    fn decoding_tokens_take_their_places_in_the_budget() {
        // A budget of 3 with two requests decoding leaves one prompt token
        // a step: request 2's 3-token prompt takes three steps.
        let mut b = Batch::new(Profile {
            slots: 3,
            prefill_chunk: 3,
            beta_ms: 0.0,
            ..profile()
        });
        b.arrive(0.0, job(0, 1, 10));
        b.arrive(0.0, job(1, 1, 10));
        // Step 1 (0 → 10): both prefill their one token; 2 comes during it.
        assert_eq!(run(&mut b, 5.0), vec![]);
        b.arrive(5.0, job(2, 3, 1));
        // Steps 2, 3, 4: two decoding (γ 2): 12 ms each, 1 prefill token
        // each; 2's first token at 10 + 3 × 12 = 46.
        let firsts: Vec<f64> = run(&mut b, 100.0)
            .iter()
            .filter(|e| e.0 == 2)
            .map(|e| e.1)
            .collect();
        assert_eq!(firsts, vec![46.0]);
    }

    #[test]
    fn the_seed_sets_the_draws() {
        let spread: Vec<f64> = (0..=100).map(|k| 0.5 + f64::from(k) / 100.0).collect();
        let p = Profile {
            step_spread: spread,
            ..profile()
        };
        let times = |b: &mut Batch| {
            b.arrive(0.0, job(0, 100, 20));
            run(b, 1e9).iter().map(|e| e.1).collect::<Vec<f64>>()
        };
        let one = times(&mut Batch::seeded(p.clone(), 1));
        // The same seed, the same times; Batch::new takes the profile's.
        assert_eq!(times(&mut Batch::seeded(p.clone(), 1)), one);
        assert_eq!(times(&mut Batch::new(p.clone())), one);
        let two = times(&mut Batch::seeded(p.clone(), 2));
        assert_ne!(two, one);
        assert_eq!(
            times(&mut Batch::new(Profile {
                seed: 2,
                ..p.clone()
            })),
            two
        );
    }

    #[test]
    fn context_and_per_request_prefill_terms_add_to_the_step() {
        let mut b = Batch::new(Profile {
            delta_ms: 0.001,
            epsilon_ms: 2.0,
            ..profile()
        });
        b.arrive(0.0, job(0, 1000, 2));
        // Prefill: 10 + 10 + ε 2 = 22. Decode: context 1000 + 1 generated:
        // 10 + 1 + 1.001 = 12.001 → 34.001.
        assert_eq!(
            run(&mut b, 100.0),
            vec![(0, 22.0, 1, false), (0, 34.001, 2, true)]
        );
    }

    #[test]
    fn a_prefill_reads_every_token_before_it() {
        assert_eq!(attended(0, 1), 0);
        assert_eq!(attended(0, 1000), 499_500);
        // 100 tokens after a cached 200: 100 × 200 + 100 × 99 / 2.
        assert_eq!(attended(200, 100), 24_950);
        let mut b = Batch::new(Profile {
            zeta_ms: 0.00001,
            ..profile()
        });
        b.arrive(0.0, job(0, 2500, 1));
        // Chunks of 1000 from 0, 1000 and 2000 read 499,500, 1,499,500 and
        // 500 × 2000 + 124,750 = 1,124,750 tokens, in all 2500 × 2499 / 2:
        // 10 + 10 + 4.995 = 24.995, 10 + 10 + 14.995 = 34.995 and
        // 10 + 5 + 11.2475 = 26.2475, the first token at 86.2375.
        let mut out = Vec::new();
        b.advance(1000.0, &mut out);
        assert_eq!(out.len(), 1);
        assert!((out[0].at - 86.2375).abs() < 1e-9, "{}", out[0].at);
    }

    #[test]
    fn a_cached_prefix_is_not_prefilled_again() {
        let mut b = Batch::new(Profile {
            cache_blocks: 10,
            block_size: 100,
            ..profile()
        });
        let with = |key, blocks: &[u64]| Job {
            blocks: blocks.to_vec(),
            ..job(key, 300, 1)
        };
        b.arrive(0.0, with(0, &[1, 2, 3]));
        // 10 + 3 = 13.
        assert_eq!(run(&mut b, 13.0), vec![(0, 13.0, 1, true)]);
        // Shares blocks 1 and 2: 100 tokens left, 10 + 1 = 11 → 111.
        b.arrive(100.0, with(1, &[1, 2, 4]));
        let mut out = Vec::new();
        b.advance(200.0, &mut out);
        assert_eq!((out[0].at, out[0].cached), (111.0, 200));
        // A whole prompt cached still computes its last token: 10.01.
        b.arrive(200.0, with(2, &[1, 2, 4]));
        out.clear();
        b.advance(300.0, &mut out);
        assert_eq!((out[0].at, out[0].cached), (210.01, 300));
    }

    #[test]
    fn an_answer_without_tokens_ends_with_its_prefill() {
        let mut b = Batch::new(profile());
        b.arrive(0.0, job(0, 100, 0));
        assert_eq!(run(&mut b, 100.0), vec![(0, 11.0, 0, true)]);
    }
}
