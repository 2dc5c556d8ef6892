//! The random laws of a generated workload: a seeded generator, the
//! arrival laws of the gaps between requests and the laws of token lengths,
//! each parsed from its flag's text.

use std::f64::consts::PI;

use crate::hash::{mix, unit_interval};
use crate::record::MAX_TOKENS;

/// SplitMix64: a small generator whose sequence depends on the seed only,
/// the same on every machine and Rust version (`--seed` promises the same
/// trace, byte for byte).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// The generator of stream `stream` of `seed`: the arrivals, the lengths
    /// and the sessions each draw from their own stream, so that another
    /// length law leaves the arrival times as they were.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(mix(seed ^ mix(stream)))
    }

    fn next_u64(&mut self) -> u64 {
        let out = mix(self.0);
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        out
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        unit_interval(self.next_u64())
    }

    /// Uniform in (0, 1]: safe under a logarithm.
    fn open_unit(&mut self) -> f64 {
        1.0 - self.unit()
    }

    /// Uniform integer in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        let span = (hi - lo) as u128 + 1;
        // Multiply-shift: no modulo bias worth a thought at 64 bits.
        lo + ((u128::from(self.next_u64()) * span) >> 64) as u64
    }

    /// Exponential with mean 1.
    pub fn exponential(&mut self) -> f64 {
        -self.open_unit().ln()
    }

    /// Standard normal (Box-Muller, one value per pair of draws).
    pub fn normal(&mut self) -> f64 {
        let r = (-2.0 * self.open_unit().ln()).sqrt();
        r * (2.0 * PI * self.unit()).cos()
    }

    /// Gamma with this shape and scale 1 (Marsaglia and Tsang; a shape
    /// under 1 is boosted by one and scaled back by U^(1/shape)).
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.open_unit().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.open_unit();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
}

/// How the gaps between arrivals are drawn (`--arrival`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// Exponential gaps: a Poisson process (vLLM's `--burstiness 1`).
    Poisson,
    /// Every gap exactly 1/rate.
    Constant,
    /// Gamma gaps with this coefficient of variation (standard deviation
    /// over mean): vLLM's `--burstiness B` is CV = 1/√B.
    Gamma(f64),
}

impl Arrival {
    /// A gap, in ms, at `rate` requests/s.
    pub fn gap_ms(self, rate: f64, rng: &mut Rng) -> f64 {
        let mean = 1000.0 / rate;
        match self {
            Arrival::Poisson => mean * rng.exponential(),
            Arrival::Constant => mean,
            Arrival::Gamma(cv) => {
                // Shape 1/CV² gives the CV; scale mean/shape the mean.
                let shape = 1.0 / (cv * cv);
                mean / shape * rng.gamma(shape)
            }
        }
    }
}

/// The smallest coefficient of variation of `gamma:CV`.
const MIN_CV: f64 = 0.001;

/// clap value parser for `--arrival`.
pub fn arrival(text: &str) -> Result<Arrival, String> {
    match text {
        "poisson" => Ok(Arrival::Poisson),
        "constant" => Ok(Arrival::Constant),
        _ => match text.strip_prefix("gamma:").map(str::parse::<f64>) {
            // Past CV 100 the shape (1e-4) makes gaps of 0 and the odd
            // hour-long one: not a load anyone means. Below CV 0.001 the
            // shape (over 1e6) is past what the sampler computes (at 1e-160
            // it is infinite and no draw is ever accepted), and the gaps
            // are constant to within 0.1 %.
            Some(Ok(cv)) if (MIN_CV..=100.0).contains(&cv) => Ok(Arrival::Gamma(cv)),
            _ => Err(format!(
                "`{text}` is not an arrival law: use poisson, constant or gamma:CV \
                 (CV from 0.001 to 100, the gaps' standard deviation over their mean; \
                 vLLM's --burstiness B is gamma:CV with CV = 1/√B; for gaps all alike, \
                 constant)"
            )),
        },
    }
}

/// A law of token lengths (`--input-len`, `--output-len`).
#[derive(Clone, Debug, PartialEq)]
pub enum Law {
    /// Always this many.
    Fixed(u64),
    /// Uniform in `lo..=hi`.
    Uniform(u64, u64),
    /// Normal with this mean and standard deviation, rounded.
    Normal { mean: f64, sd: f64 },
    /// Lognormal whose lengths have this mean and standard deviation,
    /// rounded: the log's parameters are derived from them.
    LogNormal { mean: f64, sd: f64 },
    /// The lengths of the records of a trace, each as likely (read by the
    /// tool, which owns the input).
    From(String),
}

impl Law {
    /// A length of this law at least `min`, at most [`MAX_TOKENS`]; `from`
    /// draws a record of the trace of a `From` law.
    pub fn sample(&self, min: u64, rng: &mut Rng, from: impl FnOnce(&mut Rng) -> u64) -> u64 {
        let n = match *self {
            Law::Fixed(n) => n,
            Law::Uniform(lo, hi) => rng.between(lo, hi),
            Law::Normal { mean, sd } => round(mean + sd * rng.normal()),
            Law::LogNormal { mean, sd } => {
                let sigma2 = (1.0 + (sd * sd) / (mean * mean)).ln();
                let mu = mean.ln() - sigma2 / 2.0;
                round((mu + sigma2.sqrt() * rng.normal()).exp())
            }
            Law::From(_) => from(rng),
        };
        n.clamp(min, MAX_TOKENS)
    }
}

/// `x` rounded to a count (negative to 0, past the limit to the limit).
fn round(x: f64) -> u64 {
    // `as` saturates: a huge draw is MAX, then clamped.
    x.round().max(0.0) as u64
}

/// clap value parser for a length law.
pub fn law(text: &str) -> Result<Law, String> {
    let bad = |why: &str| {
        format!(
            "`{text}` is not a length law{why}: give a number of tokens (1024), uniform:A..B, \
             normal:MEAN,SD, lognormal:MEAN,SD or from:TRACE"
        )
    };
    let count = |s: &str| -> Result<u64, String> {
        match s.trim().parse::<u64>() {
            Ok(n) if n <= MAX_TOKENS => Ok(n),
            Ok(_) => Err(bad(&format!(
                " ({s} is over the limit of {MAX_TOKENS} tokens)"
            ))),
            Err(_) => Err(bad(&format!(" (`{s}` is not a whole number of tokens)"))),
        }
    };
    let pair = |s: &str| -> Result<(f64, f64), String> {
        let (m, sd) = s.split_once(',').ok_or_else(|| bad(" (MEAN,SD)"))?;
        match (m.trim().parse::<f64>(), sd.trim().parse::<f64>()) {
            (Ok(m), Ok(sd)) if m > 0.0 && m <= MAX_TOKENS as f64 && sd >= 0.0 && sd.is_finite() => {
                Ok((m, sd))
            }
            _ => Err(bad(" (MEAN from 1 token to the limit, SD ≥ 0)")),
        }
    };
    if let Some(rest) = text.strip_prefix("uniform:") {
        let (a, b) = rest
            .split_once("..")
            .ok_or_else(|| bad(" (uniform:A..B)"))?;
        let (a, b) = (count(a)?, count(b)?);
        if a > b {
            return Err(bad(&format!(" ({a} is above {b})")));
        }
        return Ok(Law::Uniform(a, b));
    }
    if let Some(rest) = text.strip_prefix("normal:") {
        let (mean, sd) = pair(rest)?;
        return Ok(Law::Normal { mean, sd });
    }
    if let Some(rest) = text.strip_prefix("lognormal:") {
        let (mean, sd) = pair(rest)?;
        return Ok(Law::LogNormal { mean, sd });
    }
    if let Some(path) = text.strip_prefix("from:") {
        if path.is_empty() {
            return Err(bad(" (from: needs a trace file)"));
        }
        return Ok(Law::From(path.to_string()));
    }
    count(text).map(Law::Fixed)
}

/// An integer range `A..B` (or one number) of `--turns`.
pub fn turns(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("`{text}` is not a number of turns: give N or A..B, each from 1 to 10000");
    let one = |s: &str| match s.trim().parse::<u64>() {
        Ok(n) if (1..=10_000).contains(&n) => Ok(n),
        _ => Err(bad()),
    };
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (one(a)?, one(b)?),
        None => (one(text)?, one(text)?),
    };
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laws_parse() {
        assert_eq!(law("1024"), Ok(Law::Fixed(1024)));
        assert_eq!(law("uniform:10..20"), Ok(Law::Uniform(10, 20)));
        assert_eq!(
            law("normal:100,10"),
            Ok(Law::Normal {
                mean: 100.0,
                sd: 10.0
            })
        );
        assert_eq!(law("from:t.jsonl"), Ok(Law::From("t.jsonl".into())));
        assert!(
            law("uniform:20..10")
                .unwrap_err()
                .contains("20 is above 10")
        );
        assert!(
            law("12k")
                .unwrap_err()
                .contains("`12k` is not a whole number")
        );
        assert!(law("99999999999").unwrap_err().contains("over the limit"));
        assert!(law("normal:-1,3").is_err());
        assert_eq!(arrival("gamma:0.5"), Ok(Arrival::Gamma(0.5)));
        assert!(arrival("gamma:0").is_err());
        // Shape 1e320 would be infinite: refused, not drawn for ever.
        assert!(arrival("gamma:1e-160").is_err());
        assert!(arrival("gamma:0.0009").is_err());
        assert_eq!(arrival("gamma:0.001"), Ok(Arrival::Gamma(0.001)));
        // The smallest CV draws: shape 1e6, mean 1, and the gaps within
        // a few CVs of it.
        let mut rng = Rng::new(1, 0);
        for _ in 0..1000 {
            let g = Arrival::Gamma(0.001).gap_ms(1000.0, &mut rng);
            assert!((g - 1.0).abs() < 0.01, "{g}");
        }
        assert!(arrival("bursty").unwrap_err().contains("burstiness"));
        assert_eq!(turns("3"), Ok((3, 3)));
        assert_eq!(turns("2..5"), Ok((2, 5)));
        assert!(turns("5..2").is_err());
        assert!(turns("0").is_err());
    }

    #[test]
    fn draws_stay_in_their_range() {
        let mut rng = Rng::new(1, 0);
        for _ in 0..10_000 {
            let n = rng.between(3, 5);
            assert!((3..=5).contains(&n));
            assert!(rng.gamma(0.3) >= 0.0);
        }
        // A normal far below the minimum is clamped to it, a huge one to the limit.
        let low = Law::Normal { mean: 1.0, sd: 0.0 };
        assert_eq!(low.sample(5, &mut rng, |_| 0), 5);
        assert_eq!(
            Law::Fixed(MAX_TOKENS).sample(1, &mut rng, |_| 0),
            MAX_TOKENS
        );
    }
}
