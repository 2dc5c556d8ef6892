//! A run's settings (tool version, command line, URL, endpoint, model,
//! start time), kept beside its results so that every report can show
//! what was measured.
//!
//! They go to a sidecar file, `RESULTS.run.json` beside the results file
//! (`-o RESULTS`, or the file standard output is redirected to), not into
//! the results: every results line stays one result, so `wc -l`, `jq`,
//! `cat` of shards and the peers' readers keep working. trace-summarize
//! reads the sidecar of each results file it is given.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cli;

/// The suffix of the sidecar's name: `results.ndjson` → `results.ndjson.run.json`.
pub const SUFFIX: &str = ".run.json";

/// What a run was: enough to run it again and to tell runs apart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The tool that ran (`trace-replay`, `trace-sweep`).
    pub tool: String,
    /// Its version.
    pub version: String,
    /// Its command line, quoted for a shell, credentials redacted.
    pub command: String,
    /// The URL requests went to (credentials redacted).
    pub url: Option<String>,
    /// The `--endpoint`.
    pub endpoint: String,
    /// The `--model` given, if any (records may name their own).
    pub model: Option<String>,
    /// When the run started, RFC 3339.
    pub start_time: String,
}

impl RunInfo {
    /// This process's run against `url`.
    pub fn now(url: Option<&str>, endpoint: &str, model: Option<&str>) -> RunInfo {
        RunInfo {
            tool: cli::tool().to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            command: command_line(std::env::args()),
            url: url.map(|u| cli::redact(&redact_userinfo(u)).into_owned()),
            endpoint: endpoint.to_string(),
            model: model.map(str::to_string),
            start_time: crate::time::rfc3339(std::time::SystemTime::now()),
        }
    }

    /// The settings as (name, value) rows for people, absent ones left out.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let mut rows = vec![
            ("command", self.command.clone()),
            ("version", format!("{} {}", self.tool, self.version)),
        ];
        if let Some(url) = &self.url {
            rows.push(("URL", url.clone()));
        }
        rows.push(("endpoint", self.endpoint.clone()));
        if let Some(m) = &self.model {
            rows.push(("model", m.clone()));
        }
        rows.push(("started", self.start_time.clone()));
        rows
    }

    /// The settings as a JSON object (the reports' `run`).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("run settings serialize")
    }

    /// Write the sidecar of the results written to `output` (`None`:
    /// standard output, when it is redirected to a file). A sidecar that
    /// cannot be written is a warning: the results matter more.
    pub fn write_beside(&self, output: Option<&Path>) {
        let Some(results) = results_path(output) else {
            return;
        };
        let path = sidecar(&results);
        let mut text = serde_json::to_string_pretty(self).expect("run settings serialize");
        text.push('\n');
        if let Err(e) = std::fs::write(&path, cli::redact(&text).as_bytes()) {
            cli::warn(format!(
                "{}: cannot write the run's settings: {}",
                path.display(),
                crate::error::io_message(&e)
            ));
        }
    }

    /// The settings kept beside the results file `input` (`-`: standard
    /// input, when it is a file), if there are any.
    pub fn read_beside(input: &str) -> Option<RunInfo> {
        let results = if input == "-" {
            std_file(0)?
        } else {
            PathBuf::from(input)
        };
        let text = std::fs::read_to_string(sidecar(&results)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// Where the settings of the results `input` would be, for a report that
/// found none there: the sidecar's name, or `None` when `input` is
/// standard input from a pipe (no file, so no sidecar could be).
pub fn expected_sidecar(input: &str) -> Option<String> {
    let results = if input == "-" {
        std_file(0)?
    } else {
        PathBuf::from(input)
    };
    Some(sidecar(&results).display().to_string())
}

/// The sidecar's path for a results file.
pub fn sidecar(results: &Path) -> PathBuf {
    let mut name = results.as_os_str().to_owned();
    name.push(SUFFIX);
    PathBuf::from(name)
}

/// The results file: `-o PATH`, or the regular file standard output is
/// redirected to (`> results.ndjson`).
fn results_path(output: Option<&Path>) -> Option<PathBuf> {
    match output {
        Some(p) if p.as_os_str() != "-" => Some(p.to_path_buf()),
        _ => std_file(1),
    }
}

/// The regular file behind standard input (0) or output (1), where the
/// system says (Linux's /proc).
fn std_file(fd: u8) -> Option<PathBuf> {
    let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    std::fs::metadata(&path)
        .ok()
        .filter(|m| m.is_file())
        .map(|_| path)
}

/// `args` quoted as a shell would need them, the value of every
/// `--header` (`-H`) and the password of every URL redacted, and every
/// credential the tool was given.
pub fn command_line(args: impl IntoIterator<Item = String>) -> String {
    let mut out = Vec::new();
    let mut header_next = false;
    for arg in args {
        let arg = if header_next {
            header_next = false;
            redact_header(&arg)
        } else if let Some(h) = arg.strip_prefix("--header=") {
            format!("--header={}", redact_header(h))
        } else {
            header_next = arg == "--header" || arg == "-H";
            redact_userinfo(&arg)
        };
        out.push(shell_quote(&arg));
    }
    cli::redact(&out.join(" ")).into_owned()
}

/// `Name: value` → `Name: [REDACTED]`: a header may carry a credential.
fn redact_header(h: &str) -> String {
    match h.split_once(':') {
        Some((name, _)) => format!("{name}: [REDACTED]"),
        None => "[REDACTED]".to_string(),
    }
}

/// `http://user:secret@host/` → `http://user:[REDACTED]@host/`.
fn redact_userinfo(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_string();
    };
    let rest = &text[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            let user = authority[..at].split(':').next().unwrap_or_default();
            format!(
                "{}{user}:[REDACTED]{}",
                &text[..scheme_end + 3],
                &text[scheme_end + 3 + at..]
            )
        }
        None => text.to_string(),
    }
}

/// An argument as a shell reads it back.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=,:@%+-".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(args: &[&str]) -> String {
        command_line(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn credentials_never_reach_the_command_line() {
        assert_eq!(
            line(&[
                "trace-replay",
                "--header",
                "Authorization: Bearer sk-123",
                "t.jsonl"
            ]),
            "trace-replay --header 'Authorization: [REDACTED]' t.jsonl"
        );
        assert_eq!(
            line(&["trace-replay", "--header=X-Key: abc"]),
            "trace-replay '--header=X-Key: [REDACTED]'"
        );
        assert_eq!(
            line(&["trace-replay", "--url", "https://me:pw@h:8000/v1?x=1"]),
            "trace-replay --url 'https://me:[REDACTED]@h:8000/v1?x=1'"
        );
        assert_eq!(
            line(&[
                "trace-replay",
                "--url",
                "http://127.0.0.1:8000",
                "--model",
                "m"
            ]),
            "trace-replay --url http://127.0.0.1:8000 --model m"
        );
    }

    #[test]
    fn the_sidecar_is_beside_the_results() {
        assert_eq!(
            sidecar(Path::new("out/run.ndjson.gz")),
            PathBuf::from("out/run.ndjson.gz.run.json")
        );
    }
}
