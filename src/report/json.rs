//! The report's JSON value read by path: the CSV columns, `--fail-if`
//! paths and the spreadsheet's rows.

use serde_json::Value;

/// The columns of a window of the time series, in the report's key order.
pub(super) const WINDOW_COLUMNS: [&str; 9] = [
    "start_s",
    "started",
    "completed",
    "errors",
    "output_tokens_per_s",
    "ttft_p50",
    "ttft_p99",
    "e2e_p50",
    "e2e_p99",
];

/// Flatten a report into (column, value) pairs for CSV: nested keys are
/// joined with dots; the per-status HTTP map, the errors by message and
/// the windows are left out so that every run of the same command has the
/// same columns.
pub fn flatten(j: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if prefix.is_empty()
                        && matches!(k.as_str(), "http_status" | "errors" | "windows")
                    {
                        continue;
                    }
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            Value::Null => out.push((prefix.to_string(), String::new())),
            Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", j, &mut out);
    out
}

/// The time series as CSV rows (header first).
pub fn windows_csv(j: &Value, header: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    if header {
        rows.push(WINDOW_COLUMNS.iter().map(|s| s.to_string()).collect());
    }
    for w in j["windows"].as_array().into_iter().flatten() {
        rows.push(
            WINDOW_COLUMNS
                .iter()
                .map(|k| match &w[*k] {
                    Value::Null => String::new(),
                    v => v.to_string(),
                })
                .collect(),
        );
    }
    rows
}

/// Look up `a.b.c` in a report; a key may itself contain dots (`p99.9`).
pub fn lookup<'v>(j: &'v Value, path: &str) -> Option<&'v Value> {
    if let Some(v) = j.get(path) {
        return Some(v);
    }
    path.match_indices('.').find_map(|(i, _)| {
        let (head, rest) = (&path[..i], &path[i + 1..]);
        j.get(head).and_then(|v| lookup(v, rest))
    })
}
