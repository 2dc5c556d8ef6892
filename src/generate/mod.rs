//! trace-gen: a generated workload written as a canonical trace, the
//! synthetic loads of vLLM's `bench serve`, GuideLLM and AIPerf said once.

mod laws;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use clap::Parser;

use crate::cli::{self, Outcome, OutputArgs};
use crate::error::{Error, Result};
use crate::io::{self, Lines, Output};
use crate::record::{DEFAULT_BLOCK_SIZE, MAX_TIMESTAMP_MS, MAX_TOKENS, Record, blocks_for};
use crate::text::format_ms;

pub use laws::{Arrival, Law, Rng};

const EXAMPLES: &str = "\
Exit status: 0 on success, 2 on trouble (bad usage, an unreadable from:
trace, timestamps past 10^13 ms, checked before anything is written).

Examples:
  vLLM's `bench serve --dataset-name random --random-input-len 1024
  --random-output-len 128 --request-rate 10 --num-prompts 500`, replayed as
  vLLM sends it (completions, prompts in the model's own tokens):
    trace-gen --count 500 --rate 10 --input-len 1024 --output-len 128 \\
      | trace-replay --url http://127.0.0.1:8000 --model my-org/my-model \\
          --endpoint completions --tokenizer my-org/my-model | trace-summarize

  Ten minutes of bursty traffic (CV 2) with a shared 2k-token system prompt:
    trace-gen --duration 10m --rate 5 --arrival gamma:2 --shared-prefix 2048 \\
      --input-len lognormal:800,400 --output-len normal:200,50 > load.jsonl

  Chats of 2 to 6 turns, 3 s of thought between them, against the simulator:
    trace-gen --sessions 20 --rate 2 --turns 2..6 --think 3s --seed 7 \\
      | trace-replay --sim | trace-summarize

  The lengths of a real trace at a rate ramped from 1 to 20 requests/s:
    trace-gen --count 200 --rate 20 --ramp-up linear --ramp-from 1 \\
      --input-len from:trace.jsonl --output-len from:trace.jsonl";

/// Write a generated workload as a canonical trace.
///
/// Arrivals: --count N records, or those arriving within --duration D, or
/// --sessions N conversations; the gaps between arrivals follow --arrival
/// at --rate requests (or sessions) per second, optionally ramped from
/// --ramp-from to --rate as vLLM's --ramp-up-strategy does. The first record
/// is at timestamp 0.
///
/// Prompts: --input-len tokens (after the --shared-prefix every prompt
/// shares), answers of --output-len tokens, each a number or a law. The
/// prompts are `hash_ids`: blocks shared where prompts share text (the
/// prefix; a turn's whole previous prompt), new ids elsewhere; trace-synth
/// or trace-replay turn them into text.
///
/// The same flags and --seed give the same trace, byte for byte. Memory
/// does not grow with the trace (a from: law holds its trace's lengths,
/// sessions the turns not yet written).
#[derive(Parser, Debug)]
#[command(name = "trace-gen", version, after_long_help = EXAMPLES)]
#[command(group(clap::ArgGroup::new("size").required(true).args(["count", "duration", "sessions"])))]
pub struct Args {
    #[command(flatten)]
    pub output: OutputArgs,

    /// Generate N records (vLLM's --num-prompts).
    #[arg(long, value_name = "N", value_parser = cli::positive_u64)]
    pub count: Option<u64>,

    /// Generate the records arriving within D (90s, 10m).
    #[arg(long, value_name = "D", value_parser = crate::duration::parse_positive_ms)]
    pub duration: Option<f64>,

    /// Generate N sessions (conversations) of --turns turns: each turn's
    /// prompt is the previous turn's prompt, its answer and --input-len new
    /// tokens; a later turn is sent --think after the previous one
    /// completes. --rate is then sessions per second.
    #[arg(long, value_name = "N", value_parser = cli::positive_u64)]
    pub sessions: Option<u64>,

    /// Arrivals per second; all at timestamp 0 when not given (vLLM's
    /// default, `inf`), which --duration cannot have.
    #[arg(long, value_name = "R", value_parser = cli::positive_number)]
    pub rate: Option<f64>,

    /// The law of the gaps between arrivals: poisson (exponential gaps),
    /// constant (every gap 1/R), or gamma:CV (gamma gaps whose standard
    /// deviation is CV times their mean, CV from 0.001 to 100: vLLM's
    /// --burstiness B is gamma:CV with CV = 1/√B; poisson is gamma:1).
    #[arg(long, value_name = "LAW", default_value = "poisson", value_parser = laws::arrival)]
    pub arrival: Arrival,

    /// Ramp the rate from --ramp-from up to --rate: linear or exponential,
    /// as vLLM's --ramp-up-strategy (the rate of arrival i of N is
    /// A + (R − A)·i/(N − 1), or A·(R/A)^(i/(N − 1)); with --duration,
    /// t/D takes the place of i/(N − 1)).
    #[arg(long, value_name = "HOW", value_enum, requires_all = ["ramp_from", "rate"])]
    pub ramp_up: Option<Ramp>,

    /// The rate the ramp starts at, arrivals per second (vLLM's
    /// --ramp-up-start-rps; --rate is its --ramp-up-end-rps).
    #[arg(long, value_name = "A", value_parser = cli::positive_number, requires = "ramp_up")]
    pub ramp_from: Option<f64>,

    /// Prompt tokens of a record (after the shared prefix), or of each
    /// turn's new message: N, uniform:A..B, normal:MEAN,SD,
    /// lognormal:MEAN,SD (the lengths' mean and standard deviation), or
    /// from:TRACE (a record of TRACE drawn at random: its `input_length`,
    /// else its `observed.prompt_tokens`).
    #[arg(long, value_name = "LAW", default_value = "1024", value_parser = laws::law)]
    pub input_len: Law,

    /// Tokens to generate (`output_length`, at least 1): a law as for
    /// --input-len. from:TRACE of the same TRACE as --input-len draws both
    /// lengths from the same record, keeping their pairing.
    #[arg(long, value_name = "LAW", default_value = "128", value_parser = laws::law)]
    pub output_len: Law,

    /// A prefix of TOKENS every prompt starts with (a system prompt, for
    /// prefix caching), before its --input-len tokens. Shared by whole
    /// blocks: the first TOKENS / --block-size blocks have the same ids
    /// in every record.
    #[arg(long, value_name = "TOKENS", default_value_t = 0)]
    pub shared_prefix: u64,

    /// Turns of a session: N, or A..B (uniform); 1 when not given.
    #[arg(long, value_name = "A..B", value_parser = laws::turns)]
    pub turns: Option<(u64, u64)>,

    /// The pause between a turn's answer and the next turn (its `delay`);
    /// 0 when not given.
    #[arg(long, value_name = "D", value_parser = crate::duration::parse_ms_arg)]
    pub think: Option<f64>,

    /// Tokens per `hash_ids` block.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BLOCK_SIZE,
          value_parser = cli::positive_u64)]
    pub block_size: u64,

    /// Seed of every draw: the same seed and flags, the same trace.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
}

/// `--ramp-up` strategies, vLLM's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Ramp {
    /// The rate grows by the same step each arrival.
    Linear,
    /// The rate grows by the same factor each arrival.
    Exponential,
}

/// Where the arrivals stop.
#[derive(Clone, Copy, Debug)]
enum Size {
    Count(u64),
    Within(f64),
}

/// The arrival times: the law, the rate and its ramp, and the end.
#[derive(Clone)]
struct Clock {
    arrival: Arrival,
    rate: Option<f64>,
    ramp: Option<(Ramp, f64)>,
    size: Size,
    index: u64,
    t: f64,
    rng: Rng,
}

impl Clock {
    /// The next arrival's time, ms, or `None` past the end.
    fn next(&mut self) -> Option<f64> {
        let i = self.index;
        if i > 0 {
            let gap = match self.rate {
                Some(r) => self.arrival.gap_ms(self.rate_at(i, r), &mut self.rng),
                None => 0.0,
            };
            self.t += gap;
        }
        let done = match self.size {
            Size::Count(n) => i >= n,
            Size::Within(d) => self.t >= d,
        };
        if done {
            return None;
        }
        self.index += 1;
        Some(self.t)
    }

    /// The rate of arrival `i`, ramped as vLLM does.
    fn rate_at(&self, i: u64, end: f64) -> f64 {
        let Some((how, start)) = self.ramp else {
            return end;
        };
        let progress = match self.size {
            Size::Count(n) => i as f64 / n.saturating_sub(1).max(1) as f64,
            Size::Within(d) => (self.t / d).min(1.0),
        };
        match how {
            // At the end of the ramp the rate is --rate itself: computed,
            // a start far above it (1e308) would cancel to 0.
            Ramp::Linear if progress >= 1.0 => end,
            Ramp::Linear => start + (end - start) * progress,
            Ramp::Exponential => start * (end / start).powf(progress),
        }
    }
}

/// What the lengths are drawn from.
struct Lengths {
    input: Law,
    output: Law,
    /// The (input, output) lengths of each from: trace, by path.
    traces: HashMap<String, Vec<(u64, u64)>>,
    /// Both from the same trace: one record gives both.
    paired: bool,
    rng: Rng,
}

impl Lengths {
    fn new(args: &Args) -> Result<Lengths> {
        let mut traces = HashMap::new();
        for law in [&args.input_len, &args.output_len] {
            if let Law::From(path) = law {
                if !traces.contains_key(path) {
                    traces.insert(path.clone(), read_lengths(path)?);
                }
            }
        }
        let paired = matches!((&args.input_len, &args.output_len),
            (Law::From(a), Law::From(b)) if a == b);
        Ok(Lengths {
            input: args.input_len.clone(),
            output: args.output_len.clone(),
            traces,
            paired,
            rng: Rng::new(args.seed, 1),
        })
    }

    /// (new prompt tokens, output tokens).
    fn draw(&mut self) -> (u64, u64) {
        let traces = &self.traces;
        let rng = &mut self.rng;
        if self.paired {
            return pick(traces, &self.input, rng);
        }
        let i = self
            .input
            .sample(0, rng, |r| pick(traces, &self.input, r).0);
        let o = self
            .output
            .sample(1, rng, |r| pick(traces, &self.output, r).1);
        (i, o)
    }
}

/// The (input, output) lengths of a record of a `from:` law's trace,
/// drawn at random.
fn pick(traces: &HashMap<String, Vec<(u64, u64)>>, law: &Law, rng: &mut Rng) -> (u64, u64) {
    match law {
        Law::From(path) => {
            let all = &traces[path];
            all[rng.between(0, all.len() as u64 - 1) as usize]
        }
        _ => (0, 0),
    }
}

/// The lengths of every record of the trace at `path` that gives both.
fn read_lengths(path: &str) -> Result<Vec<(u64, u64)>> {
    let specs = io::input_specs(&[path.to_string()])?;
    let mut lines = Lines::new(&specs);
    let mut out = Vec::new();
    while let Some((loc, line)) = lines.next_line()? {
        let rec = Record::parse_at(line, &loc)?;
        let input = match rec.input_length().map_err(|e| e.at(&loc))? {
            Some(n) => Some(n),
            None => observed_prompt_tokens(&rec),
        };
        let output = rec.output_length().map_err(|e| e.at(&loc))?;
        if let (Some(i), Some(o)) = (input, output) {
            out.push((i, o));
        }
    }
    if out.is_empty() {
        return Err(Error::usage(format!(
            "{path}: no record gives both `input_length` (or `observed.prompt_tokens`) and \
             `output_length`: from: needs a trace with lengths"
        )));
    }
    Ok(out)
}

fn observed_prompt_tokens(rec: &Record) -> Option<u64> {
    let observed: serde_json::Value = serde_json::from_str(rec.get("observed")?.get()).ok()?;
    observed.get("prompt_tokens")?.as_u64()
}

/// Gives out block ids: the shared prefix's first, then new ones.
struct Blocks {
    size: u64,
    shared: u64,
    next: u64,
}

impl Blocks {
    /// Extend `ids` with new blocks to cover `tokens` tokens.
    fn cover(&mut self, ids: &mut Vec<u64>, tokens: u64) {
        let want = blocks_for(tokens, self.size);
        while (ids.len() as u64) < want {
            ids.push(self.next);
            self.next += 1;
        }
    }

    /// A fresh prompt of `tokens` tokens: the shared blocks, then new ones.
    fn prompt(&mut self, tokens: u64) -> Vec<u64> {
        let shared = self.shared.min(blocks_for(tokens, self.size));
        let mut ids: Vec<u64> = (0..shared).collect();
        self.cover(&mut ids, tokens);
        ids
    }
}

/// One record's JSON line.
fn line(
    t: f64,
    input: u64,
    output: u64,
    ids: &[u64],
    session: Option<(u64, Option<f64>)>,
) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "{{\"timestamp\":{},\"input_length\":{input},\"output_length\":{output},\"hash_ids\":[",
        format_ms(t)
    );
    for (k, id) in ids.iter().enumerate() {
        if k > 0 {
            s.push(',');
        }
        let _ = write!(s, "{id}");
    }
    s.push(']');
    if let Some((n, delay)) = session {
        let _ = write!(s, ",\"session_id\":\"s{n}\"");
        if let Some(d) = delay {
            let _ = write!(s, ",\"delay\":{}", format_ms(d));
        }
    }
    s.push('}');
    s
}

/// Run trace-gen.
pub fn run(args: &Args) -> Result<Outcome> {
    if args.duration.is_some() && args.rate.is_none() {
        return Err(Error::usage(
            "--duration needs --rate: without one every record arrives at 0, and there is no end",
        ));
    }
    if args.sessions.is_none() && (args.turns.is_some() || args.think.is_some()) {
        return Err(Error::usage(
            "--turns and --think describe sessions: give --sessions N (and --rate, sessions per second)",
        ));
    }
    if args.shared_prefix > MAX_TOKENS {
        return Err(Error::usage(format!(
            "--shared-prefix {} is over the limit of {MAX_TOKENS} tokens",
            args.shared_prefix
        )));
    }
    let size = match (args.count.or(args.sessions), args.duration) {
        (Some(n), _) => Size::Count(n),
        (None, Some(d)) => Size::Within(d),
        (None, None) => unreachable!("clap requires one of --count, --duration, --sessions"),
    };
    let mut clock = Clock {
        arrival: args.arrival,
        rate: args.rate,
        ramp: args.ramp_up.zip(args.ramp_from),
        size,
        index: 0,
        t: 0.0,
        rng: Rng::new(args.seed, 0),
    };
    check_times(args, clock.clone())?;
    let mut lengths = Lengths::new(args)?;
    let mut blocks = Blocks {
        size: args.block_size,
        shared: args.shared_prefix / args.block_size,
        next: args.shared_prefix / args.block_size,
    };
    let mut out = Output::open(args.output.output.as_deref())?;
    match args.sessions {
        None => {
            while let Some(t) = clock.next() {
                let (draw, output) = lengths.draw();
                let input = (args.shared_prefix + draw).min(MAX_TOKENS);
                let ids = blocks.prompt(input);
                out.write_line(line(t, input, output, &ids, None).as_bytes())?;
            }
        }
        Some(_) => {
            let mut sessions = Sessions {
                turns: args.turns.unwrap_or((1, 1)),
                think: args.think.unwrap_or(0.0),
                shared_prefix: args.shared_prefix,
                rng: Rng::new(args.seed, 2),
                pending: BinaryHeap::new(),
                seq: 0,
            };
            let mut n = 0;
            while let Some(t) = clock.next() {
                sessions.start(n, t, &mut lengths, &mut blocks)?;
                sessions.flush(Some(t), &mut out)?;
                n += 1;
            }
            sessions.flush(None, &mut out)?;
        }
    }
    out.finish()?;
    Ok(Outcome::Success)
}

/// Refuse, before writing anything, a trace whose timestamps a record
/// cannot hold: the arrivals are drawn once without writing (the same
/// draws as the run's), and the last one, with a session's later turns,
/// must be a number within [`MAX_TIMESTAMP_MS`].
fn check_times(args: &Args, mut clock: Clock) -> Result<()> {
    let think = args.think.unwrap_or(0.0);
    let later = args.turns.map_or(0, |(_, most)| most.saturating_sub(1)) as f64 * think;
    let what = if args.sessions.is_some() {
        "session"
    } else {
        "record"
    };
    while let Some(t) = clock.next() {
        // Written as a number, within the limit (not NaN, not inf).
        if t + later <= MAX_TIMESTAMP_MS {
            continue;
        }
        let turns = if later > 0.0 {
            format!(" (its last turn {} ms later)", format_ms(later))
        } else {
            String::new()
        };
        return Err(Error::usage(format!(
            "{what} {} would arrive at {} ms{turns}, past the largest timestamp a trace holds \
             ({} ms, 317 years): give a higher --rate{} or fewer {what}s",
            clock.index,
            // Past 10^15 ms (or inf), an exponent reads better than digits.
            if t < 1e15 {
                format_ms(t)
            } else {
                format!("{t:e}")
            },
            format_ms(MAX_TIMESTAMP_MS),
            if args.ramp_up.is_some() {
                " or --ramp-from"
            } else {
                ""
            },
        )));
    }
    Ok(())
}

/// The turns of the sessions started, written in the order of their
/// nominal times: a later turn's timestamp is its session's start plus the
/// think times before it (as if answers took no time); replay sends it
/// `delay` after the previous turn's answer.
struct Sessions {
    turns: (u64, u64),
    think: f64,
    shared_prefix: u64,
    rng: Rng,
    /// (nominal time in µs, sequence, line), earliest first.
    pending: BinaryHeap<Reverse<(u64, u64, String)>>,
    seq: u64,
}

impl Sessions {
    /// Draw session `n`, starting at `t`, and queue its turns.
    fn start(&mut self, n: u64, t: f64, lengths: &mut Lengths, blocks: &mut Blocks) -> Result<()> {
        let turns = self.rng.between(self.turns.0, self.turns.1);
        let mut ids: Vec<u64> = Vec::new();
        let mut prompt = 0u64;
        let mut answer = 0u64;
        for k in 0..turns {
            let (draw, output) = lengths.draw();
            let at = t + k as f64 * self.think;
            let rec = if k == 0 {
                prompt = self.shared_prefix + draw;
                ids = blocks.prompt(prompt.min(MAX_TOKENS));
                line(at, prompt.min(MAX_TOKENS), output, &ids, Some((n, None)))
            } else {
                // The conversation so far, then the new message: every
                // block of the previous prompt again, its last one now full.
                prompt += answer + draw;
                if prompt > MAX_TOKENS {
                    return Err(Error::usage(format!(
                        "session s{n}'s turn {} would have a prompt of {prompt} tokens, over the \
                         limit of {MAX_TOKENS}: give fewer --turns or shorter lengths",
                        k + 1
                    )));
                }
                blocks.cover(&mut ids, prompt);
                line(at, prompt, output, &ids, Some((n, Some(self.think))))
            };
            answer = output;
            self.seq += 1;
            // µs, as written: equal written times keep generation order.
            let key = (at * 1000.0).round() as u64;
            self.pending.push(Reverse((key, self.seq, rec)));
        }
        Ok(())
    }

    /// Write the queued turns due up to `until` (all when `None`).
    fn flush(&mut self, until: Option<f64>, out: &mut Output) -> Result<()> {
        let limit = until.map_or(u64::MAX, |t| (t * 1000.0).round() as u64);
        while let Some(Reverse((key, _, _))) = self.pending.peek() {
            if *key > limit {
                break;
            }
            let Reverse((_, _, rec)) = self.pending.pop().expect("peeked");
            out.write_line(rec.as_bytes())?;
        }
        Ok(())
    }
}
