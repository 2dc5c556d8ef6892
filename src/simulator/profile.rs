//! A profile: the iteration-level model's parameters in a small JSON
//! file, with what they were fitted from and how well they fit.
//!
//! ```json
//! {"tracekit_profile": 1, "alpha_ms": 4.95, "beta_ms": 0.02, "gamma_ms": 0.05,
//!  "delta_ms": 0, "epsilon_ms": 15.05, "zeta_ms": 0.00001, "slots": 4,
//!  "prefill_chunk": 2048, "cache_blocks": 10000, "block_size": 512,
//!  "fitted_from": {...}, "quality": {...}}
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{Error, Location, Result};

/// The format's version, the file's first key.
pub const VERSION: u64 = 1;

/// The longest a term may be, ms (a day): larger is a mistake.
const MAX_TERM_MS: f64 = 86_400_000.0;

/// The most quantiles `step_spread` may hold, and its largest ratio.
const MAX_SPREAD: usize = 1001;
const MAX_RATIO: f64 = 1e6;

/// The model's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The format's version ([`VERSION`]).
    pub tracekit_profile: u64,
    /// α: ms every step takes.
    pub alpha_ms: f64,
    /// β: ms per prompt token prefilled in the step.
    pub beta_ms: f64,
    /// γ: ms per request decoding in the step.
    pub gamma_ms: f64,
    /// δ: ms per context token the decoding requests attend to.
    pub delta_ms: f64,
    /// ε: ms per request whose prompt is prefilled in the step.
    pub epsilon_ms: f64,
    /// ζ: ms per prefill token per token before it (the prefill's
    /// attention, which grows with the prompt's square). Absent: 0, as
    /// profiles written before it were.
    #[serde(default)]
    pub zeta_ms: f64,
    /// η: ms per prompt token before a request reaches the scheduler
    /// (tokenizing it, the API server's work), beside the steps: it delays
    /// the request's own prefill, not the batch's other requests. Absent:
    /// 0, as profiles written before it were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub eta_ms: f64,
    /// Requests running at most; the others wait. 0: no limit.
    pub slots: usize,
    /// Prompt tokens prefilled per step at most (chunked prefill).
    pub prefill_chunk: u64,
    /// Prefix cache size in blocks; 0 turns it off.
    pub cache_blocks: usize,
    /// Tokens per block.
    pub block_size: u64,
    /// How step times spread around the model: each step takes the
    /// model's time times a ratio drawn (from a fixed seed) between these,
    /// the fitted run's observed / model ratios at evenly spaced quantiles
    /// (lowest to highest). Empty: exactly the model's time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_spread: Vec<f64>,
    /// The same for steps that prefill (their spread is a prompt's, not a
    /// token's); empty: `step_spread`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill_spread: Vec<f64>,
    /// Where the parameters came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fitted_from: Option<Source>,
    /// How well the fit explains the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    /// The seed of the step spread's draws (`--seed`): a run's setting,
    /// not the server's, so never in the file.
    #[serde(skip, default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    super::batch::DEFAULT_SEED
}

/// What a profile was made from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The results files (or `flags`, for a profile the flags describe).
    pub results: Vec<String>,
    /// The server's scrapes, where given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<String>,
    /// The flags, for a profile written from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<String>,
    /// Results read, and those with an answer the fit could use.
    pub requests: u64,
    pub used: u64,
    /// Step times observed (inter-token gaps and prefill steps).
    pub observations: u64,
    /// The most requests seen generating at once.
    pub max_running: u64,
    /// Mean request rate of the run, per second.
    pub rate_per_s: f64,
}

/// The fit's quality.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quality {
    /// Median and 90th percentile of |observed − model| / observed, %.
    pub median_error_pct: f64,
    pub p90_error_pct: f64,
    /// Share of the step times' variance the model explains.
    pub r2: f64,
    /// What the run could not tell, one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// The fitted run as the profile predicts it: each figure real and
    /// twin (trace-sim --fit runs the model over the run's own arrivals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fitted_run: Vec<Figure>,
    /// Why the fit refused this profile, kept when `--force` wrote it
    /// anyway: a reader of the profile sees what its writer was told.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One figure of a run, real and as the twin predicts it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figure {
    /// `TTFT p50`, `E2E p90`, ...
    pub name: String,
    pub real_ms: f64,
    pub twin_ms: f64,
    /// |twin − real| / real, %.
    pub error_pct: f64,
}

impl Default for Profile {
    /// The profile trace-sim's default flags describe.
    fn default() -> Self {
        Profile::from_flags(20.0, 20.0, 5.0, 0.01)
    }
}

impl Profile {
    /// No time at all, the rest as by default.
    fn untimed() -> Profile {
        Profile {
            tracekit_profile: VERSION,
            alpha_ms: 0.0,
            beta_ms: 0.0,
            gamma_ms: 0.0,
            delta_ms: 0.0,
            epsilon_ms: 0.0,
            zeta_ms: 0.0,
            eta_ms: 0.0,
            slots: 0,
            prefill_chunk: 2048,
            cache_blocks: 10_000,
            block_size: crate::record::DEFAULT_BLOCK_SIZE,
            step_spread: Vec::new(),
            prefill_spread: Vec::new(),
            fitted_from: None,
            quality: None,
            seed: default_seed(),
        }
    }
}

impl Profile {
    /// The spread of a step that prefills or not.
    pub fn spread(&self, prefills: bool) -> &[f64] {
        if prefills && !self.prefill_spread.is_empty() {
            &self.prefill_spread
        } else {
            &self.step_spread
        }
    }

    /// The ratio at `u` (from 0 to 1) of a spread's quantiles `q`, by
    /// linear interpolation; 1 without any.
    pub fn spread_at(q: &[f64], u: f64) -> f64 {
        match q.len() {
            0 => 1.0,
            1 => q[0],
            n => {
                let x = u.clamp(0.0, 1.0) * (n - 1) as f64;
                let i = (x.floor() as usize).min(n - 2);
                q[i] + (q[i + 1] - q[i]) * (x - i as f64)
            }
        }
    }

    /// The profile of trace-sim's per-request flags: a request alone takes
    /// `ttft` + `prefill` × its uncached tokens to its first token, then
    /// `itl` × (1 + `slope` × (requests decoding − 1)) per token (exact
    /// for a slope up to 1).
    pub fn from_flags(ttft_ms: f64, prefill_us: f64, itl_ms: f64, slope: f64) -> Profile {
        let alpha = (itl_ms * (1.0 - slope)).max(0.0);
        Profile {
            alpha_ms: alpha,
            beta_ms: prefill_us / 1000.0,
            gamma_ms: itl_ms - alpha,
            delta_ms: 0.0,
            epsilon_ms: (ttft_ms - alpha).max(0.0),
            ..Profile::untimed()
        }
    }

    /// Read and check a profile file.
    pub fn read(path: &str) -> Result<Profile> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Profile::parse(&text, path)
    }

    /// Parse and check a profile's text; errors name `path`, the line and
    /// the field.
    pub fn parse(text: &str, path: &str) -> Result<Profile> {
        let at = |line: usize, column: Option<u64>| Location {
            source: path.into(),
            line: line.max(1) as u64,
            column,
        };
        let p: Profile = serde_json::from_str(text).map_err(|e| Error::Record {
            loc: at(e.line(), Some(e.column() as u64)),
            // A value of the wrong kind: the key it is the value of.
            field: if e.to_string().starts_with("invalid ") {
                key_before(text, e.line(), e.column())
            } else {
                String::new()
            },
            msg: {
                let text = e.to_string();
                // serde_json's position is in the location already.
                text.rfind(" at line ")
                    .map_or(text.clone(), |i| text[..i].to_string())
            },
        })?;
        // The line a key is on, for a value that parses but is out of range.
        let line_of = |key: &str| {
            let quoted = format!("\"{key}\"");
            text.lines().position(|l| l.contains(&quoted)).unwrap_or(0) + 1
        };
        let bad = |key: &str, msg: String| Error::Record {
            loc: at(line_of(key), None),
            field: key.to_string(),
            msg,
        };
        if p.tracekit_profile != VERSION {
            return Err(bad(
                "tracekit_profile",
                format!("version {} is not {VERSION}", p.tracekit_profile),
            ));
        }
        for (key, v) in [
            ("alpha_ms", p.alpha_ms),
            ("beta_ms", p.beta_ms),
            ("gamma_ms", p.gamma_ms),
            ("delta_ms", p.delta_ms),
            ("epsilon_ms", p.epsilon_ms),
            ("zeta_ms", p.zeta_ms),
            ("eta_ms", p.eta_ms),
        ] {
            if !(0.0..=MAX_TERM_MS).contains(&v) {
                return Err(bad(
                    key,
                    format!("{v} is not a time from 0 to {MAX_TERM_MS} ms"),
                ));
            }
        }
        // A step prefilling one token, and one decoding one request, must
        // take time.
        if p.alpha_ms + p.beta_ms + p.epsilon_ms <= 0.0 && p.gamma_ms + p.alpha_ms <= 0.0 {
            return Err(bad(
                "alpha_ms",
                "every term is 0: steps would take no time".into(),
            ));
        }
        for (key, q) in [
            ("step_spread", &p.step_spread),
            ("prefill_spread", &p.prefill_spread),
        ] {
            if q.len() > MAX_SPREAD
                || !q.windows(2).all(|w| w[0] <= w[1])
                || q.iter().any(|r| !(0.0..=MAX_RATIO).contains(r))
            {
                return Err(bad(
                    key,
                    format!("give at most {MAX_SPREAD} ratios from 0 to {MAX_RATIO}, lowest first"),
                ));
            }
        }
        for (key, v, max) in [
            ("slots", p.slots as u64, 1_000_000),
            ("prefill_chunk", p.prefill_chunk, crate::record::MAX_TOKENS),
            ("cache_blocks", p.cache_blocks as u64, 1 << 32),
            ("block_size", p.block_size, crate::record::MAX_TOKENS),
        ] {
            let min = u64::from(matches!(key, "prefill_chunk" | "block_size"));
            if !(min..=max).contains(&v) {
                return Err(bad(key, format!("{v} is not from {min} to {max}")));
            }
        }
        Ok(p)
    }

    /// The profile as the file holds it: pretty JSON and a newline.
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a profile serializes");
        s.push('\n');
        s
    }
}

/// The key whose value ends at `line`:`column` (1-based, as serde_json
/// gives them): the last `"key":` before it on that line; empty if none.
fn key_before(text: &str, line: usize, column: usize) -> String {
    let Some(l) = text.lines().nth(line.saturating_sub(1)) else {
        return String::new();
    };
    let head = l.get(..column.min(l.len())).unwrap_or(l);
    let Some(colon) = head.rfind("\":") else {
        return String::new();
    };
    let start = head[..colon].rfind('"').map_or(0, |i| i + 1);
    head[start..colon].to_string()
}

/// A term left out of a written profile when 0 (so profiles without it
/// read the same).
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_reads_back_what_it_wrote() {
        let p = Profile {
            slots: 4,
            quality: Some(Quality {
                median_error_pct: 1.5,
                p90_error_pct: 4.0,
                r2: 0.99,
                unknown: vec!["x".into()],
                fitted_run: vec![Figure {
                    name: "TTFT p50".into(),
                    real_ms: 10.0,
                    twin_ms: 11.0,
                    error_pct: 10.0,
                }],
                warnings: vec!["y".into()],
            }),
            ..Profile::default()
        };
        assert_eq!(Profile::parse(&p.to_text(), "p.json").unwrap(), p);
    }

    #[test]
    fn bad_profiles_name_the_file_line_and_field() {
        for (from, to, want) in [
            (
                "\"delta_ms\": 0.0",
                "\"delta_ms\": -1.0",
                "p.json:6: error: field `delta_ms`: -1 is not a time from 0 to 86400000 ms",
            ),
            (
                "\"slots\": 0",
                "\"slots\": -2",
                "p.json:9:13: error: field `slots`: invalid value: integer `-2`, expected usize",
            ),
            (
                "\"block_size\": 512",
                "\"block_size\": 0",
                "p.json:12: error: field `block_size`: 0 is not from 1 to 16777216",
            ),
        ] {
            let text = Profile::default().to_text().replace(from, to);
            let e = Profile::parse(&text, "p.json").unwrap_err().to_string();
            assert_eq!(e, want);
        }
        let e = Profile::parse("{\"tracekit_profile\": 1, \"alpha\": 1}", "p.json")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.json:1:"), "{e}");
        assert!(e.contains("unknown field `alpha`"), "{e}");
    }
}
