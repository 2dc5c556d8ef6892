//! The one fold of results, and what it reads of a result line or record.

use super::aggregate::Aggregate;
use super::options::SummaryOptions;
use crate::result::{Labels, ResultRecord, ResultView};

/// Fold one result into `agg`: its figures and, for a result of a
/// session (`session`: its `session_id` and `turn`), its session's. The
/// one fold of results: trace-summarize folds each line it reads through
/// it (with [`session_of`]), trace-sweep each result of a run as it comes
/// (with [`view_of`]).
pub fn fold(
    agg: &mut Aggregate,
    r: &ResultView,
    itl: &[f64],
    session: Option<(&str, Option<u64>, Option<&str>)>,
    opts: &SummaryOptions,
) {
    fold_call(agg, r, itl, session.map(|(s, t, m)| (s, t, m, None)), opts);
}

/// [`fold`], with the result's `id` among its session's figures (which
/// tells a subagent's call from its main agent's: see
/// [`super::Sessions::add`]).
pub fn fold_call(
    agg: &mut Aggregate,
    r: &ResultView,
    itl: &[f64],
    session: Option<SessionRef>,
    opts: &SummaryOptions,
) {
    agg.add(r, itl, opts);
    if let (false, Some((session, turn, model, id))) = (r.warmup, session) {
        agg.sessions.add(session, turn, model, id, r);
    }
}

/// A result line's `session_id`, `turn`, `model` and `id`, when it has a
/// session. Only lines that name one are read again, which keeps the
/// common path as it is.
pub fn session_of(line: &str) -> Option<SessionOf> {
    memchr::memmem::find(line.as_bytes(), b"\"session_id\"")?;
    let [session, turn, model, id] =
        crate::json::peek(line, ["session_id", "turn", "model", "id"])?;
    let session = crate::record::string("session_id", session?)
        .ok()?
        .into_owned();
    let turn = turn.and_then(|t| crate::record::integer("turn", t).ok());
    let model = model.and_then(|m| {
        crate::record::string("model", m)
            .ok()
            .map(|m| m.into_owned())
    });
    let id = id.and_then(|i| crate::record::string("id", i).ok().map(|i| i.into_owned()));
    Some((session, turn, model, id))
}

/// A result's session as [`fold_call`] takes it: `session_id`, `turn`,
/// `model`, `id`.
pub type SessionRef<'a> = (&'a str, Option<u64>, Option<&'a str>, Option<&'a str>);

/// What [`session_of`] reads: `session_id`, `turn`, `model`, `id`.
pub type SessionOf = (String, Option<u64>, Option<String>, Option<String>);

/// A result record as its line reads for the fold (its gaps are
/// `r.measure.itl_ms`): what a results file gives, without writing and
/// reading it.
pub fn view_of(r: &ResultRecord) -> ResultView<'_> {
    let m = &r.measure;
    ResultView {
        scheduled_ms: Some(r.scheduled_ms),
        sent_ms: r.sent_ms,
        ttft_ms: m.ttft_ms,
        first_chunk_ms: m.first_chunk_ms,
        e2e_ms: m.e2e_ms,
        itl_ms: None,
        input_length: r.input_length,
        output_length: r.output_length,
        prompt_tokens: m.prompt_tokens,
        completion_tokens: m.completion_tokens,
        cached_tokens: m.cached_tokens,
        observed_cached_tokens: r.observed_cached_tokens,
        status: m.status,
        http_status: m.http_status,
        warmup: r.warmup,
        labels: Labels::default(),
    }
}
