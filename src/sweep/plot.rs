//! `trace-sweep --plot`: the runs against offered load: attainment with its
//! target, goodput and achieved rate, latency percentiles with the SLO
//! lines, and with --metrics the server's requests waiting and KV-cache
//! usage; the answer marked on each.

use std::path::Path;

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::search::Answer;
use super::{Args, Row, speed_label};
use crate::error::{Error, Result};
use crate::metrics::SloMetric;
use crate::report::{Report, Stats};

/// A figure of a run's report.
type Figure = fn(&Report) -> Option<f64>;
/// A latency distribution of a run's report.
type Latency = fn(&Report) -> &Stats;

const WIDTH: u32 = 1000;
const PANEL_HEIGHT: u32 = 300;
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const PURPLE: RGBColor = RGBColor(148, 103, 189);
const GREY: RGBColor = RGBColor(120, 120, 120);

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::msg(format!("cannot draw the plot: {e}"))
}

/// The plot is SVG, alone or inline in HTML; other names are refused
/// before the sweep starts.
pub fn check_name(path: &Path) -> Result<()> {
    crate::io::check_plot_name(path, "trace-sweep")
}

/// The x of a run: its offered request rate, or its speed when the trace
/// has no rate (untimed records).
fn x_of(row: &Row, by_rate: bool) -> f64 {
    if by_rate {
        row.offered_rps.unwrap_or(0.0)
    } else {
        row.speed
    }
}

pub fn write(path: &Path, args: &Args, rows: &[Row], answer: Answer) -> Result<()> {
    let mut svg = String::new();
    draw(&mut svg, args, rows, answer)?;
    let html = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
    let text = if html {
        format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>trace-sweep</title></head>\n<body>\n{svg}\n</body></html>\n"
        )
    } else {
        svg
    };
    std::fs::write(path, text).map_err(|e| Error::io(path.display().to_string(), e))
}

fn draw(svg: &mut String, args: &Args, rows: &[Row], found: Answer) -> Result<()> {
    let answer = found.speed;
    let mut rows: Vec<&Row> = rows.iter().collect();
    let by_rate = rows.iter().all(|r| r.offered_rps.is_some());
    rows.sort_by(|a, b| x_of(a, by_rate).total_cmp(&x_of(b, by_rate)));
    let x_name = if by_rate {
        "offered requests/s"
    } else {
        "speed (× the trace's rate)"
    };
    let xs = rows.iter().map(|r| x_of(r, by_rate));
    let (x_min, x_max) = xs.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let pad = ((x_max - x_min) * 0.05).max(x_max * 0.02).max(1e-3);
    let (x_lo, x_hi) = ((x_min - pad).max(0.0), x_max + pad);
    let best = answer.and_then(|a| rows.iter().find(|r| r.speed == a).copied());

    // With --metrics, a fourth panel: the server's side.
    let server = rows.iter().any(|r| r.server.is_some());
    let count = if server { 4 } else { 3 };
    let root =
        SVGBackend::with_string(svg, (WIDTH, PANEL_HEIGHT * count as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((count, 1));
    // The server panel's right axis: the same margin on every panel, so
    // that their x axes line up.
    let right = if server { 50 } else { 0 };

    // 1. Attainment, with the target.
    {
        let mut chart = panel(
            &panels[0],
            format!("share of requests meeting the SLO, by {x_name}"),
            right,
        )
        .build_cartesian_2d(x_lo..x_hi, 0.0..105.0)
        .map_err(plot_error)?;
        grid(&mut chart).draw().map_err(plot_error)?;
        let points: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (x_of(r, by_rate), r.attainment.unwrap_or(0.0) * 100.0))
            .collect();
        line(&mut chart, points, "attainment %", BLUE, 4)?;
        let target = args.attainment * 100.0;
        chart
            .draw_series(LineSeries::new(
                vec![(x_lo, target), (x_hi, target)],
                GREY.stroke_width(1),
            ))
            .map_err(plot_error)?
            .label(format!("target {target}%"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY));
        mark(&mut chart, best.map(|b| x_of(b, by_rate)), 0.0, 105.0)?;
        legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
    }

    // 2. Goodput and the achieved rate.
    {
        let hi = rows
            .iter()
            .flat_map(|r| {
                [
                    r.report.throughput.requests_per_s,
                    r.report.slo.as_ref().and_then(|s| s.goodput_per_s),
                ]
            })
            .flatten()
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.1;
        let mut chart = panel(
            &panels[1],
            format!("ok requests/s and goodput, by {x_name}"),
            right,
        )
        .build_cartesian_2d(x_lo..x_hi, 0.0..hi)
        .map_err(plot_error)?;
        grid(&mut chart).draw().map_err(plot_error)?;
        let figures: [(Figure, &str, RGBColor); 2] = [
            (|r| r.throughput.requests_per_s, "ok requests/s", GREEN),
            (
                |r| r.slo.as_ref().and_then(|s| s.goodput_per_s),
                "goodput/s",
                ORANGE,
            ),
        ];
        for (figure, name, color) in figures {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| figure(&r.report).map(|v| (x_of(r, by_rate), v)))
                .collect();
            line(&mut chart, points, name, color, 3)?;
        }
        mark(&mut chart, best.map(|b| x_of(b, by_rate)), 0.0, hi)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }

    // 3. Latency percentiles, with the SLO bounds.
    {
        let series: [(Latency, f64, &str, RGBColor); 4] = [
            (|r| &r.ttft, 50.0, "TTFT p50", BLUE),
            (|r| &r.ttft, 99.0, "TTFT p99", PURPLE),
            (|r| &r.tpot, 99.0, "TPOT p99", GREEN),
            (|r| &r.e2e, 99.0, "E2E p99", ORANGE),
        ];
        let values = rows.iter().flat_map(|r| {
            series
                .iter()
                .filter_map(|(m, p, _, _)| m(&r.report).percentile(*p))
        });
        let bounds = args.slo.bounds.iter().map(|(_, b)| *b);
        let (lo, hi) = values
            .chain(bounds)
            .filter(|v| *v > 0.0 && v.is_finite())
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        let (lo, hi) = if hi > 0.0 {
            // Headroom above the curves for the legend.
            (lo / 1.5, hi * 6.0)
        } else {
            (0.1, 1000.0)
        };
        let mut chart = panel(
            &panels[2],
            format!("latency percentiles (ms, log) and the SLO, by {x_name}"),
            right,
        )
        .build_cartesian_2d(x_lo..x_hi, (lo..hi).log_scale())
        .map_err(plot_error)?;
        grid(&mut chart).draw().map_err(plot_error)?;
        for (metric, p, name, color) in series {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| {
                    metric(&r.report)
                        .percentile(p)
                        .filter(|v| *v > 0.0)
                        .map(|v| (x_of(r, by_rate), v))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            line(&mut chart, points, name, color, 3)?;
        }
        for (metric, bound) in &args.slo.bounds {
            let color = match metric {
                SloMetric::Ttft => PURPLE,
                SloMetric::Tpot => GREEN,
                SloMetric::E2e => ORANGE,
                SloMetric::Itl => GREY,
            };
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x_lo, *bound), (x_hi, *bound)],
                    6,
                    4,
                    color.stroke_width(1),
                ))
                .map_err(plot_error)?
                .label(format!(
                    "SLO {} {}",
                    metric.name(),
                    crate::duration::human(*bound)
                ))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        mark(&mut chart, best.map(|b| x_of(b, by_rate)), lo, hi)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    // 4. What the server was doing: requests waiting (left axis) and
    // KV-cache usage (right axis, %).
    if server {
        let waiting = |r: &Row| r.server.as_ref().and_then(|s| s.waiting);
        let hi = rows
            .iter()
            .filter_map(|r| waiting(r).map(|l| l.max))
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.25;
        let mut chart = panel(
            &panels[3],
            format!("server (scraped): requests waiting and KV-cache usage, by {x_name}"),
            right,
        )
        .build_cartesian_2d(x_lo..x_hi, 0.0..hi)
        .map_err(plot_error)?
        .set_secondary_coord(x_lo..x_hi, 0.0..105.0);
        grid(&mut chart)
            .y_desc("requests waiting")
            .draw()
            .map_err(plot_error)?;
        chart
            .configure_secondary_axes()
            .y_label_formatter(&short)
            .y_desc("KV cache %")
            .draw()
            .map_err(plot_error)?;
        for (name, pick, color) in [("waiting mean", true, BLUE), ("waiting max", false, PURPLE)] {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| {
                    waiting(r).map(|l| (x_of(r, by_rate), if pick { l.mean } else { l.max }))
                })
                .collect();
            line(&mut chart, points, name, color, 3)?;
        }
        for (name, pick, color) in [
            ("KV cache mean %", true, ORANGE),
            ("KV cache max %", false, GREEN),
        ] {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| {
                    let l = r.server.as_ref().and_then(|s| s.kv_cache_usage)?;
                    Some((x_of(r, by_rate), 100.0 * if pick { l.mean } else { l.max }))
                })
                .collect();
            chart
                .draw_secondary_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_secondary_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(plot_error)?;
        }
        mark(&mut chart, best.map(|b| x_of(b, by_rate)), 0.0, hi)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    if let Some(b) = best {
        root.draw(&Text::new(
            format!(
                "answer: {}{}× (dashed vertical line)",
                if found.beyond { "at least " } else { "" },
                speed_label(b.speed)
            ),
            (WIDTH as i32 - 260, 8),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// An axis number without noise: 10, not 10.0; 2.5, not 2.50.
fn short(v: &f64) -> String {
    crate::report::number(Some(*v), 2)
}

/// The chart of one panel, under `caption`, with `right` pixels for a
/// right axis.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: String,
    right: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut chart = ChartBuilder::on(area);
    chart
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .right_y_label_area_size(right);
    chart
}

/// The grid and axes of a panel, labelled in short numbers: drawn by the
/// caller, after what it adds.
fn grid<'a, 'b, Y>(
    chart: &'b mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
) -> MeshStyle<'a, 'b, RangedCoordf64, Y, SVGBackend<'a>>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&short).y_label_formatter(&short);
    mesh
}

/// A series as a line with a dot at each point, named in the legend.
fn line<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    points: Vec<(f64, f64)>,
    name: &str,
    color: RGBColor,
    dot: u32,
) -> Result<()>
where
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
        .map_err(plot_error)?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, dot, color.filled())))
        .map_err(plot_error)?;
    Ok(())
}

/// The answer, as a dashed vertical line.
fn mark<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    x: Option<f64>,
    lo: f64,
    hi: f64,
) -> Result<()>
where
    Y: Ranged<ValueType = f64>,
{
    if let Some(x) = x {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, lo), (x, hi)],
                6,
                4,
                BLACK.stroke_width(1),
            ))
            .map_err(plot_error)?;
    }
    Ok(())
}

fn legend<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    at: SeriesLabelPosition,
) -> Result<()>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.8))
        .border_style(GREY)
        .draw()
        .map_err(plot_error)
}
