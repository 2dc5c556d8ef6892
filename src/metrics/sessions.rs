//! Results of sessions (agentic and multi-turn traces): each session's
//! span, turns, tokens and prefix cache, the prefix cache by turn
//! position, and TTFT by turn position and by model (a coding agent's
//! main model against its subagents'). Memory grows with the number of
//! sessions (one small entry each) and of models, not with results.

use std::collections::{BTreeMap, HashMap};

use crate::result::{ResultView, Status};
use crate::stats::Dist;

/// One session's run so far.
#[derive(Clone, Copy, Debug)]
struct SessionRun {
    first_sent_ms: f64,
    last_end_ms: f64,
    turns: u64,
    /// Turns that did not end `ok`.
    failed: u64,
    /// Σ prompt and completion tokens the server reported.
    tokens: u64,
    /// Σ cached_tokens and Σ prompt_tokens of the turns that reported both.
    cached: u64,
    prompt: u64,
}

impl SessionRun {
    fn merge(&mut self, o: &SessionRun) {
        self.first_sent_ms = self.first_sent_ms.min(o.first_sent_ms);
        self.last_end_ms = self.last_end_ms.max(o.last_end_ms);
        self.turns += o.turns;
        self.failed += o.failed;
        self.tokens = self.tokens.saturating_add(o.tokens);
        self.cached = self.cached.saturating_add(o.cached);
        self.prompt = self.prompt.saturating_add(o.prompt);
    }
}

/// Results of sessions: see the module's text.
#[derive(Clone, Debug, Default)]
pub struct Sessions {
    runs: HashMap<String, SessionRun>,
    /// Per turn position: Σ cached_tokens and Σ prompt_tokens of the
    /// results that reported both.
    cache_by_turn: BTreeMap<u64, (u64, u64)>,
    /// TTFT of ok results of a session's first turn, and of its later ones.
    ttft_first_turn: Dist,
    ttft_later_turns: Dist,
    /// TTFT of ok results of sessions, by the model they named.
    ttft_by_model: BTreeMap<String, Dist>,
}

/// What a report says of the sessions.
#[derive(Clone, Debug, Default)]
pub struct SessionFigures {
    pub count: u64,
    /// Sessions every turn of which ended `ok`.
    pub completed: u64,
    pub turns: Dist,
    /// First send to last completion, ms.
    pub duration_ms: Dist,
    /// Prompt and completion tokens per session, as the server counted.
    pub tokens: Dist,
    /// Per session: cached / prompt tokens (sessions whose turns reported
    /// both, with a prompt).
    pub cache_hit_rate: Dist,
    /// (turn, cached tokens, prompt tokens), by turn position.
    pub cache_by_turn: Vec<(u64, u64, u64)>,
    pub ttft_first_turn: Dist,
    pub ttft_later_turns: Dist,
    pub ttft_by_model: Vec<(String, Dist)>,
}

impl Sessions {
    /// Count one result of `session` (its `turn` and `model`, when known).
    /// Warmup results are left out by the caller.
    pub fn add(&mut self, session: &str, turn: Option<u64>, model: Option<&str>, r: &ResultView) {
        let ok = r.status == Status::Ok;
        let tokens = r
            .prompt_tokens
            .unwrap_or(0)
            .saturating_add(r.completion_tokens.unwrap_or(0));
        let (cached, prompt) = match (r.cached_tokens, r.prompt_tokens) {
            (Some(c), Some(p)) => (c, p),
            _ => (0, 0),
        };
        let run = SessionRun {
            first_sent_ms: r.sent_ms,
            last_end_ms: r.sent_ms + r.e2e_ms.unwrap_or(0.0),
            turns: 1,
            failed: u64::from(!ok),
            tokens,
            cached,
            prompt,
        };
        match self.runs.get_mut(session) {
            Some(s) => s.merge(&run),
            None => {
                self.runs.insert(session.to_string(), run);
            }
        }
        if let (Some(turn), Some(cached), Some(prompt)) = (turn, r.cached_tokens, r.prompt_tokens) {
            let c = self.cache_by_turn.entry(turn).or_insert((0, 0));
            c.0 = c.0.saturating_add(cached);
            c.1 = c.1.saturating_add(prompt);
        }
        if let (true, Some(ttft)) = (ok, r.ttft_ms) {
            match turn {
                Some(1) => self.ttft_first_turn.record(ttft),
                Some(_) => self.ttft_later_turns.record(ttft),
                None => {}
            }
            if let Some(m) = model {
                match self.ttft_by_model.get_mut(m) {
                    Some(d) => d.record(ttft),
                    None => {
                        let mut d = Dist::default();
                        d.record(ttft);
                        self.ttft_by_model.insert(m.to_string(), d);
                    }
                }
            }
        }
    }

    /// Fold in another group's sessions (a session split over groups is
    /// one session).
    pub fn merge(&mut self, o: &Sessions) {
        for (id, r) in &o.runs {
            match self.runs.get_mut(id) {
                Some(s) => s.merge(r),
                None => {
                    self.runs.insert(id.clone(), *r);
                }
            }
        }
        for (turn, (c, p)) in &o.cache_by_turn {
            let e = self.cache_by_turn.entry(*turn).or_insert((0, 0));
            e.0 = e.0.saturating_add(*c);
            e.1 = e.1.saturating_add(*p);
        }
        self.ttft_first_turn.merge(&o.ttft_first_turn);
        self.ttft_later_turns.merge(&o.ttft_later_turns);
        for (m, d) in &o.ttft_by_model {
            self.ttft_by_model.entry(m.clone()).or_default().merge(d);
        }
    }

    /// No result had a session.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The figures.
    pub fn figures(&self) -> SessionFigures {
        let mut f = SessionFigures {
            count: self.runs.len() as u64,
            ttft_first_turn: self.ttft_first_turn.clone(),
            ttft_later_turns: self.ttft_later_turns.clone(),
            ttft_by_model: self
                .ttft_by_model
                .iter()
                .map(|(m, d)| (m.clone(), d.clone()))
                .collect(),
            ..SessionFigures::default()
        };
        // In id order: the map's order changes from run to run, and with it
        // the last digits of the sums behind the mean and the deviation.
        let mut runs: Vec<(&String, &SessionRun)> = self.runs.iter().collect();
        runs.sort_unstable_by_key(|&(id, _)| id);
        for (_, r) in runs {
            f.completed += u64::from(r.failed == 0);
            f.turns.record(r.turns as f64);
            f.duration_ms.record(r.last_end_ms - r.first_sent_ms);
            f.tokens.record(r.tokens as f64);
            if r.prompt > 0 {
                f.cache_hit_rate.record(r.cached as f64 / r.prompt as f64);
            }
        }
        f.cache_by_turn = self
            .cache_by_turn
            .iter()
            .map(|(t, (c, p))| (*t, *c, *p))
            .collect();
        f
    }
}
