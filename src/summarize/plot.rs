//! `trace-summarize --plot`: one picture of one or more runs: every
//! request's latency over time, requests in flight and output tokens/s,
//! and latency percentiles, runs overlaid.
//!
//! Large runs are thinned for drawing per pixel column, keeping each
//! column's minimum and maximum, so spikes are never dropped.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::token_arrivals;
use crate::result::{ResultView, Status};

/// Width of the picture, pixels; also the number of columns points are
/// thinned to.
const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 320;

/// One request, as the plot needs it (16 bytes: runs of millions fit).
#[derive(Clone, Copy, Debug)]
struct Point {
    sent_s: f32,
    end_s: f32,
    ttft_ms: f32,
    e2e_ms: f32,
}

/// The requests of one run.
#[derive(Debug, Default)]
pub struct Series {
    pub name: String,
    /// The input it was read from.
    pub source: String,
    points: Vec<Point>,
    errors: Vec<(f32, f32)>,
    /// Output tokens per second of the run (from time 0), as the summary's
    /// peak counts them; sparse.
    tokens_per_second: BTreeMap<u64, f64>,
}

impl Series {
    /// A run named `name` (its file).
    pub fn new(name: &str) -> Series {
        let shown = if name == "<stdin>" { "run" } else { name };
        Series {
            name: shown.to_string(),
            source: name.to_string(),
            ..Series::default()
        }
    }

    /// Add one result (warmup results are left out, as in the summary);
    /// `itl` holds its gaps.
    pub fn add(&mut self, r: &ResultView, itl: &[f64], ttft_ms: Option<f64>) {
        if r.warmup {
            return;
        }
        let sent_s = (r.sent_ms / 1000.0) as f32;
        let e2e = r.e2e_ms.unwrap_or(0.0);
        if r.status != Status::Ok {
            if r.status != Status::Cancelled {
                self.errors.push((sent_s, e2e as f32));
            }
            return;
        }
        self.points.push(Point {
            sent_s,
            end_s: ((r.sent_ms + e2e) / 1000.0) as f32,
            ttft_ms: ttft_ms.map_or(f32::NAN, |t| t as f32),
            e2e_ms: r.e2e_ms.map_or(f32::NAN, |t| t as f32),
        });
        let seconds = &mut self.tokens_per_second;
        token_arrivals(r, itl, |t, n| {
            *seconds.entry((t.max(0.0) / 1000.0) as u64).or_insert(0.0) += n;
        });
    }
}

/// The time axis's buckets for a run drawn to `t_end` seconds: a whole
/// number of seconds wide (so that they are sums of the summary's 1-second
/// buckets), at most one per pixel column. Returns (width, count).
pub fn time_buckets(t_end: f64) -> (u64, usize) {
    let width = ((t_end / WIDTH as f64).ceil() as u64).max(1);
    let count = ((t_end / width as f64).ceil() as usize).max(1);
    (width, count)
}

/// Output tokens/s of `run` per bucket of [`time_buckets`]`(t_end)`, as
/// (bucket start, s; tokens/s): each answer's tokens where its chunks
/// arrived, as the summary's peak and `--window` count them. Tokens after
/// `t_end` (a clipped axis) are left out.
pub fn tokens_series(run: &Series, t_end: f64) -> Vec<(f64, f64)> {
    let (width, count) = time_buckets(t_end);
    let mut sums = vec![0f64; count];
    for (&second, &n) in &run.tokens_per_second {
        if let Some(slot) = sums.get_mut((second / width) as usize) {
            *slot += n;
        }
    }
    sums.iter()
        .enumerate()
        .map(|(b, &n)| ((b as u64 * width) as f64, n / width as f64))
        .collect()
}

/// Thin (x, y) points to at most two per column of `columns` over
/// [x0, x1]: each column's lowest and highest y. NaN values are dropped.
pub fn thin(points: &[(f64, f64)], x0: f64, x1: f64, columns: usize) -> Vec<(f64, f64)> {
    if points.len() <= 2 * columns {
        return points.iter().copied().filter(|p| !p.1.is_nan()).collect();
    }
    let width = (x1 - x0).max(f64::MIN_POSITIVE);
    let mut lo: Vec<Option<(f64, f64)>> = vec![None; columns];
    let mut hi: Vec<Option<(f64, f64)>> = vec![None; columns];
    for &(x, y) in points {
        if y.is_nan() {
            continue;
        }
        let c = (((x - x0) / width) * columns as f64).clamp(0.0, columns as f64 - 1.0) as usize;
        if lo[c].is_none_or(|p| y < p.1) {
            lo[c] = Some((x, y));
        }
        if hi[c].is_none_or(|p| y > p.1) {
            hi[c] = Some((x, y));
        }
    }
    let mut out = Vec::with_capacity(2 * columns);
    for (l, h) in lo.into_iter().zip(hi) {
        out.extend(l);
        if h.is_some() && h != l {
            out.extend(h);
        }
    }
    out
}

/// Percentile curve of `values`: (1 / (1 − p), value) at log-spaced p up
/// to the maximum, as HDR histogram plots draw them.
fn percentile_curve(values: &mut Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| !v.is_nan());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut x = 1.0f64;
    while x <= n as f64 {
        let p = 1.0 - 1.0 / x;
        let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
        out.push((x, values[rank - 1]));
        x *= 1.1;
    }
    out.push((n as f64, values[n - 1]));
    out
}

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::msg(format!("cannot draw the plot: {e}"))
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];

fn log_range(lo: f64, hi: f64) -> (f64, f64) {
    let lo = lo.max(0.01);
    (lo / 1.5, (hi * 1.5).max(lo * 2.0))
}

/// Draw `runs` to `path`: `.svg`, or `.html` with the SVG inline.
/// The plot is SVG, alone or inline in HTML: a name promising another
/// format (`run.png`) would get a file its viewers cannot open.
pub fn check_name(path: &Path) -> Result<()> {
    crate::io::check_plot_name(path, "trace-summarize")
}

/// What the plot draws besides the runs.
#[derive(Clone, Debug, Default)]
pub struct PlotOptions {
    /// Clip the time axis at this percentile of the completion times.
    pub clip: Option<f64>,
    /// Latency bounds drawn as horizontal lines: (label, ms).
    pub slo_lines: Vec<(String, f64)>,
}

/// A number on an axis, without noise: 10000, 2.5, 0.125.
pub fn axis_number(v: &f64) -> String {
    crate::report::num(&serde_json::Value::from(*v), 3)
}

/// The label of x = 1/(1 − p) on a percentile axis: p90 at 10, p99 at
/// 100, p99.9 at 1000.
pub fn percentile_label(x: &f64) -> String {
    format!("p{}", axis_number(&(100.0 * (1.0 - 1.0 / x))))
}

/// The `p`-th percentile (nearest rank) of the ok requests' completion
/// times, s: where `--plot-clip` ends the time axis.
pub fn clip_end(runs: &[Series], p: f64) -> Option<f64> {
    let mut ends: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.end_s as f64))
        .collect();
    if ends.is_empty() {
        return None;
    }
    ends.sort_by(f64::total_cmp);
    let rank = ((p / 100.0 * ends.len() as f64).ceil() as usize).clamp(1, ends.len());
    Some(ends[rank - 1])
}

/// `server`: the server's request gauges (see `server::plot_series`),
/// drawn in a panel of their own under the client's, on the same time
/// axis; no panel when empty.
pub fn write(
    path: &Path,
    runs: &[Series],
    opts: &PlotOptions,
    server: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let mut svg = String::new();
    draw(&mut svg, runs, opts, server)?;
    let name = path.display().to_string();
    let html = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
    let text = if html {
        format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tracekit: {}</title></head>\n<body>\n{svg}\n</body></html>\n",
            runs.iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        svg
    };
    std::fs::write(path, text).map_err(|e| Error::io(name, e))
}

fn draw(
    svg: &mut String,
    runs: &[Series],
    opts: &PlotOptions,
    server: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let count: u32 = if server.is_empty() { 4 } else { 5 };
    let root = SVGBackend::with_string(svg, (WIDTH, PANEL_HEIGHT * count)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((count as usize, 1));

    let t_end = runs
        .iter()
        .flat_map(|r| {
            r.points
                .iter()
                .map(|p| p.end_s as f64)
                .chain(r.errors.iter().map(|e| e.0 as f64))
        })
        .fold(1.0f64, f64::max)
        .max(
            server
                .iter()
                .flat_map(|(_, points)| points.iter().map(|p| p.0))
                .fold(0.0, f64::max),
        );
    // One straggler need not squeeze the run into a corner.
    let clip = opts
        .clip
        .and_then(|p| clip_end(runs, p).map(|end| (p, end.clamp(1.0, t_end))));
    let t_end = clip.map_or(t_end, |c| c.1);
    let (lat_lo, lat_hi) = runs
        .iter()
        .flat_map(|r| {
            r.points
                .iter()
                .flat_map(|p| [p.ttft_ms as f64, p.e2e_ms as f64])
        })
        .chain(opts.slo_lines.iter().map(|l| l.1))
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let (lat_lo, lat_hi) = if lat_hi > 0.0 {
        log_range(lat_lo, lat_hi)
    } else {
        (0.1, 1000.0)
    };

    // 1. Every request's TTFT and E2E at its send time; errors on the floor.
    {
        let caption = match clip {
            None => "latency of each request (ms, log) by send time (s)".to_string(),
            Some((p, end)) => format!(
                "latency of each request (ms, log) by send time (s), clipped at the p{} completion time ({} s)",
                axis_number(&p),
                axis_number(&end)
            ),
        };
        let mut chart = ChartBuilder::on(&panels[0])
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_end, (lat_lo..lat_hi).log_scale())
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .draw()
            .map_err(plot_error)?;
        slo_lines(&mut chart, opts, 0.0, t_end)?;
        for (i, run) in runs.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let ttft: Vec<(f64, f64)> = run
                .points
                .iter()
                .filter(|p| p.sent_s as f64 <= t_end)
                .map(|p| (p.sent_s as f64, p.ttft_ms as f64))
                .collect();
            let e2e: Vec<(f64, f64)> = run
                .points
                .iter()
                .filter(|p| p.sent_s as f64 <= t_end)
                .map(|p| (p.sent_s as f64, p.e2e_ms as f64))
                .collect();
            chart
                .draw_series(
                    thin(&ttft, 0.0, t_end, WIDTH as usize)
                        .into_iter()
                        .map(|p| Circle::new(p, 2, color.filled())),
                )
                .map_err(plot_error)?
                .label(format!("{} TTFT", run.name))
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
            chart
                .draw_series(
                    thin(&e2e, 0.0, t_end, WIDTH as usize)
                        .into_iter()
                        .map(|p| Cross::new(p, 3, color)),
                )
                .map_err(plot_error)?
                .label(format!("{} E2E", run.name))
                .legend(move |(x, y)| Cross::new((x + 10, y), 3, color));
            if !run.errors.is_empty() {
                let floor = lat_lo * 1.2;
                let errs: Vec<(f64, f64)> = run
                    .errors
                    .iter()
                    .filter(|e| e.0 as f64 <= t_end)
                    .map(|e| (e.0 as f64, floor))
                    .collect();
                chart
                    .draw_series(
                        thin(&errs, 0.0, t_end, WIDTH as usize)
                            .into_iter()
                            .map(|p| TriangleMarker::new(p, 4, RED.filled())),
                    )
                    .map_err(plot_error)?
                    .label(format!("{} errors", run.name))
                    .legend(|(x, y)| TriangleMarker::new((x + 10, y), 4, RED.filled()));
            }
        }
        legend(&mut chart)?;
    }

    // 2 and 3. Requests in flight and output tokens/s, per bucket of time.
    let (width, buckets) = time_buckets(t_end);
    let width_s = width as f64;
    let mut flight: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut tokens: Vec<Vec<(f64, f64)>> = Vec::new();
    for run in runs {
        // Time-weighted: each request adds the part of each bucket it spans.
        let mut busy = vec![0f64; buckets];
        let bucket = |t: f64| ((t / width_s) as usize).min(buckets - 1);
        for p in &run.points {
            let (a, b) = (p.sent_s as f64, p.end_s as f64);
            for (k, slot) in busy
                .iter_mut()
                .enumerate()
                .take(bucket(b) + 1)
                .skip(bucket(a))
            {
                let lo = a.max(k as f64 * width_s);
                let hi = b.min((k + 1) as f64 * width_s);
                *slot += (hi - lo).max(0.0);
            }
        }
        flight.push(
            busy.iter()
                .enumerate()
                .map(|(k, t)| (k as f64 * width_s, t / width_s))
                .collect(),
        );
        tokens.push(tokens_series(run, t_end));
    }
    for (panel, (title, data)) in panels[1..3].iter().zip([
        (
            "requests in flight (mean over each bucket) by time (s)",
            &flight,
        ),
        ("output tokens/s by time (s)", &tokens),
    ]) {
        let top = data.iter().flatten().map(|p| p.1).fold(1.0f64, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_end, 0.0..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_label_formatter(&axis_number)
            .y_label_formatter(&axis_number)
            .draw()
            .map_err(plot_error)?;
        for (i, (run, series)) in runs.iter().zip(data.iter()).enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(
                    series.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?
                .label(run.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        legend(&mut chart)?;
    }

    // The server's requests running and waiting, under the client's
    // requests in flight, on the same time axis (scrapes before the
    // run's start drawn at 0).
    if !server.is_empty() {
        let top = server
            .iter()
            .flat_map(|(_, points)| points.iter().map(|p| p.1))
            .fold(1.0f64, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(&panels[3])
            .caption(
                "server: requests running and waiting (scraped) by time (s)",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_end, 0.0..top)
            .map_err(plot_error)?;
        chart.configure_mesh().draw().map_err(plot_error)?;
        for (i, (name, points)) in server.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        legend(&mut chart)?;
    }

    // 4. Latency by percentile, HDR style: x = 1 / (1 − p), log.
    let mut curves = Vec::new();
    for run in runs {
        let mut ttft: Vec<f64> = run.points.iter().map(|p| p.ttft_ms as f64).collect();
        let mut e2e: Vec<f64> = run.points.iter().map(|p| p.e2e_ms as f64).collect();
        curves.push((percentile_curve(&mut ttft), percentile_curve(&mut e2e)));
    }
    let x_max = curves
        .iter()
        .flat_map(|(a, b)| a.iter().chain(b.iter()).map(|p| p.0))
        .fold(10.0f64, f64::max);
    let mut chart = ChartBuilder::on(&panels[count as usize - 1])
        .caption(
            "latency (ms, log) by percentile (x = 1/(1-p), log)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d((1.0..x_max).log_scale(), (lat_lo..lat_hi).log_scale())
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_label_formatter(&percentile_label)
        .y_label_formatter(&axis_number)
        .draw()
        .map_err(plot_error)?;
    slo_lines(&mut chart, opts, 1.0, x_max)?;
    for (i, (run, (ttft, e2e))) in runs.iter().zip(&curves).enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(ttft.iter().copied(), color.stroke_width(2)))
            .map_err(plot_error)?
            .label(format!("{} TTFT", run.name))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        let dashed = color.mix(0.5).stroke_width(1);
        chart
            .draw_series(LineSeries::new(e2e.iter().copied(), dashed))
            .map_err(plot_error)?
            .label(format!("{} E2E", run.name))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], dashed));
    }
    legend(&mut chart)?;
    root.present().map_err(plot_error)?;
    drop(root);
    Ok(())
}

/// The SLO bounds as horizontal lines across [x0, x1].
fn slo_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    opts: &PlotOptions,
    x0: f64,
    x1: f64,
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (label, bound) in &opts.slo_lines {
        let style = BLACK.mix(0.6).stroke_width(1);
        chart
            .draw_series(LineSeries::new([(x0, *bound), (x1, *bound)], style))
            .map_err(plot_error)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    Ok(())
}

fn legend<'a, X, Y>(chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(plot_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_every_column_extreme() {
        let mut points: Vec<(f64, f64)> =
            (0..100_000).map(|i| (i as f64, (i % 7) as f64)).collect();
        points[54_321].1 = 1e6;
        points[777].1 = -5.0;
        let thin = thin(&points, 0.0, 100_000.0, 100);
        assert!(thin.len() <= 200);
        assert!(thin.contains(&(54_321.0, 1e6)));
        assert!(thin.contains(&(777.0, -5.0)));
    }

    /// The answers of `tests/data/results/streamed.ndjson` (worked out in
    /// tests/cli/summarize.rs): tokens by second 0, 4, 4, 6, 2, 0, 0, as
    /// the summary's windows count them.
    #[test]
    fn tokens_per_second_follow_the_chunks() {
        let mut run = Series::new("run");
        let mut itl = Vec::new();
        for line in include_str!("../../tests/data/results/streamed.ndjson").lines() {
            let view = ResultView::read(line, &mut itl).unwrap();
            run.add(&view, &itl, view.ttft_ms);
        }
        // The error is sent at 6.2 s: the axis ends there.
        let t_end = 6.2;
        assert_eq!(time_buckets(t_end), (1, 7));
        assert_eq!(
            tokens_series(&run, t_end),
            vec![
                (0.0, 0.0),
                (1.0, 4.0),
                (2.0, 4.0),
                (3.0, 6.0),
                (4.0, 2.0),
                (5.0, 0.0),
                (6.0, 0.0)
            ]
        );
        // A long run: 3-second buckets, their mean.
        assert_eq!(time_buckets(3000.5), (3, 1001));
        assert_eq!(
            tokens_series(&run, 3000.5)[..2],
            [(0.0, 8.0 / 3.0), (3.0, 8.0 / 3.0)]
        );
    }

    #[test]
    fn axes_read_as_people_write() {
        assert_eq!(axis_number(&10000.0), "10000");
        assert_eq!(axis_number(&2.5), "2.5");
        let labels: Vec<String> = [1.0, 2.0, 10.0, 100.0, 1000.0]
            .iter()
            .map(percentile_label)
            .collect();
        assert_eq!(labels, ["p0", "p50", "p90", "p99", "p99.9"]);
    }

    #[test]
    fn clipping_at_a_percentile_of_completion() {
        // Completions at 3.5 and 4.85 s (the error does not count).
        let mut run = Series::new("run");
        let mut itl = Vec::new();
        for line in include_str!("../../tests/data/results/streamed.ndjson").lines() {
            let view = ResultView::read(line, &mut itl).unwrap();
            run.add(&view, &itl, view.ttft_ms);
        }
        let runs = [run];
        assert_eq!(clip_end(&runs, 50.0), Some(3.5));
        assert_eq!(clip_end(&runs, 99.0), Some(4.85f32 as f64));
        assert_eq!(clip_end(&[], 99.0), None);
    }

    #[test]
    fn percentile_curve_ends_at_the_maximum() {
        let mut v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let c = percentile_curve(&mut v);
        assert_eq!(c[0], (1.0, 1.0));
        assert_eq!(*c.last().unwrap(), (1000.0, 1000.0));
        // 1 / (1 - 0.9) = 10: the p90.
        let p90 = c.iter().find(|p| p.0 >= 10.0).unwrap();
        assert!((899.0..=911.0).contains(&p90.1), "{p90:?}");
    }
}
