//! The result record: one JSON line per replayed request (DESIGN.md), written
//! by trace-replay and read by trace-summarize.
//!
//! Field order is the struct's order. Optional measurements are written as
//! `null` when they could not be taken (`ttft_ms` of a failed request);
//! optional labels (`id`, `error`, `warmup`, `shard`) are left out when they
//! do not apply.

use serde::{Deserialize, Serialize};

/// What happened to a request.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// A complete answer.
    #[default]
    Ok,
    /// An HTTP error, a refused or reset connection, a cut stream, bad SSE.
    Error,
    /// No complete answer within `--timeout`.
    Timeout,
    /// Not sent, or stopped, because the run was interrupted.
    Cancelled,
}

impl Status {
    /// The name written in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Cancelled => "cancelled",
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One request's outcome. Times are milliseconds; `*_ms` latencies are
/// measured from `sent_ms` on a monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// 0-based position of the record in the replayed trace.
    pub index: u64,
    /// The trace record's `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The trace record's `session_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The model the request named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When the request was due, ms since the run started.
    pub scheduled_ms: f64,
    /// When it was sent, ms since the run started.
    pub sent_ms: f64,
    /// Wall-clock send time, RFC 3339, for matching server logs.
    pub start_time: String,
    /// First chunk with non-empty content (text, reasoning or tool call) − sent.
    pub ttft_ms: Option<f64>,
    /// First chunk carrying `choices`, even empty − sent (vLLM's TTFT).
    pub first_chunk_ms: Option<f64>,
    /// Last byte of the response − sent.
    pub e2e_ms: Option<f64>,
    /// Gaps between successive content chunks.
    #[serde(default)]
    pub itl_ms: Vec<f64>,
    /// Prompt tokens the trace asked for.
    pub input_length: Option<u64>,
    /// Output tokens the trace asked for (`max_tokens`).
    pub output_length: Option<u64>,
    /// `usage.prompt_tokens` as the server reported it.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens` as the server reported it.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`, where reported.
    pub cached_tokens: Option<u64>,
    /// As the server sent it.
    pub finish_reason: Option<String>,
    /// What happened.
    pub status: Status,
    /// The response's HTTP status, if one arrived.
    pub http_status: Option<u16>,
    /// A one-line reason, never a credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A warmup request, left out of summaries.
    #[serde(default, skip_serializing_if = "is_false")]
    pub warmup: bool,
    /// `K/N` when the run was one shard of a multi-machine replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

impl ResultRecord {
    /// The record as one compact JSON line (no newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("result records serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_for_missing_measurements_absent_labels() {
        let r = ResultRecord {
            index: 3,
            scheduled_ms: 10.0,
            sent_ms: 10.25,
            start_time: "2026-11-22T10:00:00.010Z".into(),
            status: Status::Error,
            http_status: Some(503),
            error: Some("HTTP 503: overloaded".into()),
            ..ResultRecord::default()
        };
        assert_eq!(
            r.to_json_line(),
            r#"{"index":3,"scheduled_ms":10.0,"sent_ms":10.25,"start_time":"2026-11-22T10:00:00.010Z","ttft_ms":null,"first_chunk_ms":null,"e2e_ms":null,"itl_ms":[],"input_length":null,"output_length":null,"prompt_tokens":null,"completion_tokens":null,"cached_tokens":null,"finish_reason":null,"status":"error","http_status":503,"error":"HTTP 503: overloaded"}"#
        );
        let back: ResultRecord = serde_json::from_str(&r.to_json_line()).unwrap();
        assert_eq!(back, r);
    }
}
