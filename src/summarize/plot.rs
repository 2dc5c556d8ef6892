//! `trace-summarize --plot`: one picture of one or more runs: every
//! request's latency over time, requests in flight and output tokens/s,
//! and latency percentiles, runs overlaid.
//!
//! Large runs are thinned for drawing per pixel column, keeping each
//! column's minimum and maximum, so spikes are never dropped.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::{Seconds, token_arrivals};
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
    /// peak counts them.
    tokens_per_second: Seconds,
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
            seconds.add((t.max(0.0) / 1000.0) as u64, n);
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
    for (second, n) in run.tokens_per_second.iter() {
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

/// The plot is SVG, or a web page drawing the same figures: a name
/// promising another format (`run.png`) would get a file its viewers
/// cannot open.
pub fn check_name(path: &Path) -> Result<()> {
    crate::io::check_plot_name(path, "trace-summarize")
}

/// Whether `path` names the web page rather than the SVG.
pub fn is_html(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

/// What the plot draws besides the runs.
#[derive(Clone, Debug, Default)]
pub struct PlotOptions {
    /// Clip the time axis at this percentile of the completion times.
    pub clip: Option<f64>,
    /// Latency bounds drawn as horizontal lines: (label, ms).
    pub slo_lines: Vec<(String, f64)>,
}

/// The server's series from `--metrics`, each (name, (s, value) points):
/// request counts, and shares in percent (KV-cache usage, prefix-cache
/// hit rate), each on a panel of its own.
#[derive(Clone, Debug, Default)]
pub struct ServerSeries {
    pub requests: Vec<(String, Vec<(f64, f64)>)>,
    pub shares: Vec<(String, Vec<(f64, f64)>)>,
}

/// A number on an axis, without noise: 10000, 2.5, 0.125.
pub fn axis_number(v: &f64) -> String {
    crate::report::number(Some(*v), 3)
}

/// The label of x = 1/(1 − p) on a percentile axis: p90 at 10, p99 at
/// 100, p99.9 at 1000.
pub fn percentile_label(x: &f64) -> String {
    format!("p{}", axis_number(&(100.0 * (1.0 - 1.0 / x))))
}

/// The ticks of a percentile axis ending at `x_max`: the percentiles
/// people quote (p50 … p99.99) that the data reaches, never a p66.667.
pub fn percentile_ticks(x_max: f64) -> Vec<f64> {
    [2.0, 10.0, 100.0, 1000.0, 10000.0]
        .into_iter()
        .filter(|x| *x <= x_max)
        .collect()
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

/// One run's series, as drawn: thinned, within the time axis.
#[derive(Clone, Debug, Default)]
pub struct RunFigure {
    pub name: String,
    /// (send time s, ms) of each ok request.
    pub ttft: Vec<(f64, f64)>,
    pub e2e: Vec<(f64, f64)>,
    /// (send time s, the latency axis's floor) of each failed request.
    pub errors: Vec<(f64, f64)>,
    /// (bucket start s, mean requests in flight).
    pub flight: Vec<(f64, f64)>,
    /// (bucket start s, output tokens/s).
    pub tokens: Vec<(f64, f64)>,
    /// (1 / (1 − p), ms).
    pub ttft_by_percentile: Vec<(f64, f64)>,
    pub e2e_by_percentile: Vec<(f64, f64)>,
}

/// Everything the plot shows, worked out once for the SVG and the page.
#[derive(Clone, Debug, Default)]
pub struct Figure {
    /// End of the time axis, s (from 0).
    pub t_end: f64,
    /// `--plot-clip`: (percentile, the time it clips at).
    pub clip: Option<(f64, f64)>,
    /// The latency axes' range, ms.
    pub lat: (f64, f64),
    /// End of the percentile axis (x = 1 / (1 − p)).
    pub x_max: f64,
    pub runs: Vec<RunFigure>,
    pub server: ServerSeries,
    pub slo_lines: Vec<(String, f64)>,
}

/// Columns the web page thins each run's requests to: 8 per pixel of the
/// SVG, so that zooming in on the time axis still shows the requests.
pub const PAGE_COLUMNS: usize = 8 * WIDTH as usize;

/// Work out the figure of `runs`, each run's requests thinned to
/// `columns` columns over the time axis.
pub fn figure(
    runs: &[Series],
    opts: &PlotOptions,
    server: &ServerSeries,
    columns: usize,
) -> Figure {
    let server_end = server
        .requests
        .iter()
        .chain(&server.shares)
        .flat_map(|(_, points)| points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    let t_end = runs
        .iter()
        .flat_map(|r| {
            r.points
                .iter()
                .map(|p| p.end_s as f64)
                .chain(r.errors.iter().map(|e| e.0 as f64))
        })
        .fold(1.0f64, f64::max)
        .max(server_end);
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
    let lat = if lat_hi > 0.0 {
        log_range(lat_lo, lat_hi)
    } else {
        (0.1, 1000.0)
    };

    let (width, buckets) = time_buckets(t_end);
    let width_s = width as f64;
    let mut out = Vec::new();
    for run in runs {
        // One latency of each point sent by `t_end`, against its send time.
        let series = |ms: fn(&Point) -> f32| -> Vec<(f64, f64)> {
            run.points
                .iter()
                .filter(|p| p.sent_s as f64 <= t_end)
                .map(|p| (p.sent_s as f64, ms(p) as f64))
                .collect()
        };
        let ttft = series(|p| p.ttft_ms);
        let e2e = series(|p| p.e2e_ms);
        let floor = lat.0 * 1.2;
        let errors: Vec<(f64, f64)> = run
            .errors
            .iter()
            .filter(|e| e.0 as f64 <= t_end)
            .map(|e| (e.0 as f64, floor))
            .collect();
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
        let mut ttft_ms: Vec<f64> = run.points.iter().map(|p| p.ttft_ms as f64).collect();
        let mut e2e_ms: Vec<f64> = run.points.iter().map(|p| p.e2e_ms as f64).collect();
        out.push(RunFigure {
            name: run.name.clone(),
            ttft: thin(&ttft, 0.0, t_end, columns),
            e2e: thin(&e2e, 0.0, t_end, columns),
            errors: thin(&errors, 0.0, t_end, columns),
            flight: busy
                .iter()
                .enumerate()
                .map(|(k, t)| (k as f64 * width_s, t / width_s))
                .collect(),
            tokens: tokens_series(run, t_end),
            ttft_by_percentile: percentile_curve(&mut ttft_ms),
            e2e_by_percentile: percentile_curve(&mut e2e_ms),
        });
    }
    let x_max = out
        .iter()
        .flat_map(|r| r.ttft_by_percentile.iter().chain(&r.e2e_by_percentile))
        .map(|p| p.0)
        .fold(10.0f64, f64::max);
    Figure {
        t_end,
        clip,
        lat,
        x_max,
        runs: out,
        server: server.clone(),
        slo_lines: opts.slo_lines.clone(),
    }
}

/// The SVG picture of `runs`.
pub fn svg(runs: &[Series], opts: &PlotOptions, server: &ServerSeries) -> Result<String> {
    let mut svg = String::new();
    draw(&mut svg, &figure(runs, opts, server, WIDTH as usize))?;
    Ok(svg)
}

/// Room right of each panel's data area for its legend, pixels.
const LEGEND_WIDTH: u32 = 260;

fn draw(svg: &mut String, fig: &Figure) -> Result<()> {
    let server = &fig.server;
    let count = 4 + u32::from(!server.requests.is_empty()) + u32::from(!server.shares.is_empty());
    let root = SVGBackend::with_string(svg, (WIDTH, PANEL_HEIGHT * count)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((count as usize, 1));
    let t_end = fig.t_end;
    let (lat_lo, lat_hi) = fig.lat;
    let slo = &fig.slo_lines;

    // 1. Every request's TTFT and E2E at its send time; errors on the floor.
    {
        let caption = match fig.clip {
            None => "latency of each request (ms, log) by send time (s)".to_string(),
            Some((p, end)) => format!(
                "latency of each request (ms, log) by send time (s), clipped at the p{} completion time ({} s)",
                axis_number(&p),
                axis_number(&end)
            ),
        };
        let mut chart = panel(&panels[0], caption)
            .build_cartesian_2d(0.0..t_end, (lat_lo..lat_hi).log_scale())
            .map_err(plot_error)?;
        grid(&mut chart, &axis_number)?;
        let mut entries = Vec::new();
        slo_lines(&mut chart, slo, 0.0, t_end, &mut entries)?;
        for (i, run) in fig.runs.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(run.ttft.iter().map(|p| Circle::new(*p, 2, color.filled())))
                .map_err(plot_error)?;
            entries.push((format!("{} TTFT", run.name), Mark::Dot(color)));
            chart
                .draw_series(run.e2e.iter().map(|p| Cross::new(*p, 3, color)))
                .map_err(plot_error)?;
            entries.push((format!("{} E2E", run.name), Mark::Cross(color)));
            if !run.errors.is_empty() {
                chart
                    .draw_series(
                        run.errors
                            .iter()
                            .map(|p| TriangleMarker::new(*p, 4, RED.filled())),
                    )
                    .map_err(plot_error)?;
                entries.push((format!("{} errors", run.name), Mark::Triangle(RED)));
            }
        }
        legend(&panels[0], &entries)?;
    }

    // 2 and 3. Requests in flight and output tokens/s, per bucket of time;
    // then the server's requests running and waiting, and its cache
    // shares, on the same time axis (scrapes before the run's start drawn
    // at 0).
    let flight: Vec<(String, Vec<(f64, f64)>)> = fig
        .runs
        .iter()
        .map(|r| (r.name.clone(), r.flight.clone()))
        .collect();
    let tokens: Vec<(String, Vec<(f64, f64)>)> = fig
        .runs
        .iter()
        .map(|r| (r.name.clone(), r.tokens.clone()))
        .collect();
    let mut line_panels = vec![
        (
            "requests in flight (mean over each bucket) by time (s)",
            &flight,
            None,
        ),
        ("output tokens/s by time (s)", &tokens, None),
    ];
    if !server.requests.is_empty() {
        line_panels.push((
            "server: requests running and waiting (scraped) by time (s)",
            &server.requests,
            None,
        ));
    }
    if !server.shares.is_empty() {
        line_panels.push((
            "server: KV-cache usage and prefix-cache hit rate (%, scraped) by time (s)",
            &server.shares,
            Some(100.0),
        ));
    }
    for (area, (title, data, fixed_top)) in panels[1..].iter().zip(line_panels) {
        let top = fixed_top.unwrap_or_else(|| {
            data.iter()
                .flat_map(|(_, points)| points.iter().map(|p| p.1))
                .fold(1.0f64, f64::max)
                * 1.1
        });
        let mut chart = panel(area, title)
            .build_cartesian_2d(0.0..t_end, 0.0..top)
            .map_err(plot_error)?;
        grid(&mut chart, &axis_number)?;
        let mut entries = Vec::new();
        for (i, (name, series)) in data.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(
                    series.iter().copied().filter(|p| p.0 <= t_end),
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?;
            entries.push((name.clone(), Mark::Line(color.stroke_width(2))));
        }
        legend(area, &entries)?;
    }

    // Last. Latency by percentile, HDR style: x = 1 / (1 − p), log.
    let area = &panels[count as usize - 1];
    let mut chart = panel(area, "latency (ms, log) by percentile (x = 1/(1-p), log)")
        .build_cartesian_2d(
            (1.0..fig.x_max)
                .log_scale()
                .with_key_points(percentile_ticks(fig.x_max)),
            (lat_lo..lat_hi).log_scale(),
        )
        .map_err(plot_error)?;
    grid(&mut chart, &percentile_label)?;
    let mut entries = Vec::new();
    slo_lines(&mut chart, slo, 1.0, fig.x_max, &mut entries)?;
    for (i, run) in fig.runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                run.ttft_by_percentile.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(plot_error)?;
        entries.push((
            format!("{} TTFT", run.name),
            Mark::Line(color.stroke_width(2)),
        ));
        let dashed = color.mix(0.5).stroke_width(1);
        chart
            .draw_series(LineSeries::new(
                run.e2e_by_percentile.iter().copied(),
                dashed,
            ))
            .map_err(plot_error)?;
        entries.push((format!("{} E2E", run.name), Mark::Line(dashed)));
    }
    legend(area, &entries)?;
    root.present().map_err(plot_error)?;
    drop(root);
    Ok(())
}

/// The chart of one panel, under `caption`, with room for the legend on
/// its right.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: impl AsRef<str>,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut chart = ChartBuilder::on(area);
    chart
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .margin_right(LEGEND_WIDTH)
        .x_label_area_size(30)
        .y_label_area_size(60);
    chart
}

/// The grid and axes of a panel, the x labels written by `x_label`.
fn grid<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    x_label: &dyn Fn(&f64) -> String,
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_label_formatter(x_label)
        .y_label_formatter(&axis_number)
        .draw()
        .map_err(plot_error)
}

/// The SLO bounds as horizontal lines across [x0, x1].
fn slo_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    slo: &[(String, f64)],
    x0: f64,
    x1: f64,
    entries: &mut Vec<(String, Mark)>,
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (label, bound) in slo {
        let style = BLACK.mix(0.6).stroke_width(1);
        chart
            .draw_series(LineSeries::new([(x0, *bound), (x1, *bound)], style))
            .map_err(plot_error)?;
        entries.push((label.clone(), Mark::Line(style)));
    }
    Ok(())
}

/// How a legend entry shows its series.
#[derive(Clone, Copy)]
enum Mark {
    Dot(RGBColor),
    Cross(RGBColor),
    Triangle(RGBColor),
    Line(ShapeStyle),
}

/// The longest series name a legend shows whole; longer ones keep their
/// end (a path's file name), after an ellipsis.
const LEGEND_CHARS: usize = 34;

fn legend_name(name: &str) -> String {
    let n = name.chars().count();
    if n <= LEGEND_CHARS {
        return name.to_string();
    }
    let tail: String = name.chars().skip(n - (LEGEND_CHARS - 1)).collect();
    format!("\u{2026}{tail}")
}

/// The legend of a panel, right of its data area (in the margin kept for
/// it), so that it never hides a point.
fn legend(panel: &DrawingArea<SVGBackend<'_>, Shift>, entries: &[(String, Mark)]) -> Result<()> {
    let (width, _) = panel.dim_in_pixel();
    let x = width as i32 - LEGEND_WIDTH as i32 + 10;
    for (k, (name, mark)) in entries.iter().enumerate() {
        let y = 44 + 18 * k as i32;
        match *mark {
            Mark::Dot(c) => panel.draw(&Circle::new((x + 10, y), 3, c.filled())),
            Mark::Cross(c) => panel.draw(&Cross::new((x + 10, y), 3, c)),
            Mark::Triangle(c) => panel.draw(&TriangleMarker::new((x + 10, y), 4, c.filled())),
            Mark::Line(style) => panel.draw(&PathElement::new(vec![(x, y), (x + 20, y)], style)),
        }
        .map_err(plot_error)?;
        panel
            .draw(&Text::new(
                legend_name(name),
                (x + 28, y - 7),
                ("sans-serif", 13),
            ))
            .map_err(plot_error)?;
    }
    Ok(())
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

    /// The series of `tests/data/results/streamed.ndjson`.
    fn streamed() -> Series {
        let mut run = Series::new("run");
        let mut itl = Vec::new();
        for line in include_str!("../../tests/data/results/streamed.ndjson").lines() {
            let view = ResultView::read(line, &mut itl).unwrap();
            run.add(&view, &itl, view.ttft_ms);
        }
        run
    }

    /// The answers of `tests/data/results/streamed.ndjson` (worked out in
    /// tests/cli/summarize.rs): tokens by second 0, 4, 4, 6, 2, 0, 0, as
    /// the summary's windows count them.
    #[test]
    fn tokens_per_second_follow_the_chunks() {
        let run = streamed();
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
        // Ticks only where people quote percentiles, up to what the data
        // reaches: 3 results never get a p66.667.
        assert_eq!(percentile_ticks(10.0), [2.0, 10.0]);
        assert_eq!(percentile_ticks(5000.0), [2.0, 10.0, 100.0, 1000.0]);
        assert_eq!(percentile_ticks(1e6).len(), 5);
        assert_eq!(legend_name("A.ndjson TTFT"), "A.ndjson TTFT");
        assert_eq!(
            legend_name("/a/long/path/to/the/results/of/run-17.ndjson TTFT"),
            "\u{2026}the/results/of/run-17.ndjson TTFT"
        );
    }

    #[test]
    fn clipping_at_a_percentile_of_completion() {
        // Completions at 3.5 and 4.85 s (the error does not count).
        let run = streamed();
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
