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
    /// The same as the recorded session had them: Σ
    /// observed_cached_tokens and Σ input_length of the turns with both.
    recorded_cached: u64,
    recorded_prompt: u64,
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
        self.recorded_cached = self.recorded_cached.saturating_add(o.recorded_cached);
        self.recorded_prompt = self.recorded_prompt.saturating_add(o.recorded_prompt);
    }
}

/// Results of sessions: see the module's text.
#[derive(Clone, Debug, Default)]
pub struct Sessions {
    runs: HashMap<String, SessionRun>,
    /// Per turn position: Σ cached_tokens and Σ prompt_tokens of the
    /// results that reported both.
    cache_by_turn: BTreeMap<u64, (u64, u64)>,
    /// Per turn position: Σ observed_cached_tokens and Σ input_length of
    /// the results whose trace recorded both.
    recorded_by_turn: BTreeMap<u64, (u64, u64)>,
    /// The main agents' calls, then the subagents' (a result whose `id` is
    /// `SESSION/AGENT:N`, as the coding-agent sources name them).
    agents: [Side; 2],
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
    /// Per session: observed_cached_tokens / input_length, as recorded
    /// (sessions whose trace recorded cached tokens).
    pub recorded_cache_hit_rate: Dist,
    /// (turn, recorded cached tokens, recorded prompt tokens), by turn.
    pub recorded_by_turn: Vec<(u64, u64, u64)>,
    /// The main agents' calls and the subagents', when any result is a
    /// subagent's.
    pub agents: Option<[Side; 2]>,
}

/// The calls of one side (main agents or subagents).
#[derive(Clone, Debug, Default)]
pub struct Side {
    pub calls: u64,
    pub ok: u64,
    /// Σ cached_tokens, Σ prompt_tokens of the results with both.
    pub cached: u64,
    pub prompt: u64,
    /// Σ observed_cached_tokens, Σ input_length of the results with both.
    pub recorded_cached: u64,
    pub recorded_prompt: u64,
    pub ttft: Dist,
}

impl Side {
    fn merge(&mut self, o: &Side) {
        self.calls += o.calls;
        self.ok += o.ok;
        self.cached = self.cached.saturating_add(o.cached);
        self.prompt = self.prompt.saturating_add(o.prompt);
        self.recorded_cached = self.recorded_cached.saturating_add(o.recorded_cached);
        self.recorded_prompt = self.recorded_prompt.saturating_add(o.recorded_prompt);
        self.ttft.merge(&o.ttft);
    }
}

/// Whether a result's `id` is a subagent's call in `session`:
/// `SESSION/AGENT:N`.
fn is_subagent(session: &str, id: Option<&str>) -> bool {
    id.and_then(|i| i.strip_prefix(session))
        .is_some_and(|rest| rest.starts_with('/'))
}

impl Sessions {
    /// Count one result of `session` (its `turn` and `model`, when known).
    /// Warmup results are left out by the caller.
    pub fn add(
        &mut self,
        session: &str,
        turn: Option<u64>,
        model: Option<&str>,
        id: Option<&str>,
        r: &ResultView,
    ) {
        let ok = r.status == Status::Ok;
        let tokens = r
            .prompt_tokens
            .unwrap_or(0)
            .saturating_add(r.completion_tokens.unwrap_or(0));
        let (cached, prompt) = match (r.cached_tokens, r.prompt_tokens) {
            (Some(c), Some(p)) => (c, p),
            _ => (0, 0),
        };
        let (recorded_cached, recorded_prompt) = match (r.observed_cached_tokens, r.input_length) {
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
            recorded_cached,
            recorded_prompt,
        };
        if let (Some(turn), Some(c), Some(p)) = (turn, r.observed_cached_tokens, r.input_length) {
            let e = self.recorded_by_turn.entry(turn).or_insert((0, 0));
            e.0 = e.0.saturating_add(c);
            e.1 = e.1.saturating_add(p);
        }
        let side = &mut self.agents[usize::from(is_subagent(session, id))];
        side.calls += 1;
        side.ok += u64::from(ok);
        if let (Some(c), Some(p)) = (r.cached_tokens, r.prompt_tokens) {
            side.cached = side.cached.saturating_add(c);
            side.prompt = side.prompt.saturating_add(p);
        }
        side.recorded_cached = side.recorded_cached.saturating_add(recorded_cached);
        side.recorded_prompt = side.recorded_prompt.saturating_add(recorded_prompt);
        if let (true, Some(ttft)) = (ok, r.ttft_ms) {
            side.ttft.record(ttft);
        }
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
        for (turn, (c, p)) in &o.recorded_by_turn {
            let e = self.recorded_by_turn.entry(*turn).or_insert((0, 0));
            e.0 = e.0.saturating_add(*c);
            e.1 = e.1.saturating_add(*p);
        }
        for (mine, theirs) in self.agents.iter_mut().zip(&o.agents) {
            mine.merge(theirs);
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
            if r.recorded_prompt > 0 {
                f.recorded_cache_hit_rate
                    .record(r.recorded_cached as f64 / r.recorded_prompt as f64);
            }
        }
        f.recorded_by_turn = self
            .recorded_by_turn
            .iter()
            .map(|(t, (c, p))| (*t, *c, *p))
            .collect();
        if self.agents[1].calls > 0 {
            f.agents = Some(self.agents.clone());
        }
        f.cache_by_turn = self
            .cache_by_turn
            .iter()
            .map(|(t, (c, p))| (*t, *c, *p))
            .collect();
        f
    }
}
