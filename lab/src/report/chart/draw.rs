//! Drawing the SVG chart with plotters: the memory bars, the warm-forward times and the legend.

use super::{chart_order, memory_axis, tick_label, SVG_LEGEND_MAX};
use crate::document::Phase;
use crate::report::{Report, ReportRow};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Width of the plots; the legend column comes on its right.
const PLOT_WIDTH: u32 = 1100;
/// Smallest image height; it grows with the legend.
const MIN_HEIGHT: u32 = 900;
/// Height of one legend line, px.
const LINE: u32 = 18;
/// Legend text size, px.
const LEGEND_FONT: u32 = 13;

type DrawResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Qualitative colours (Tableau 10) for up to 10 configurations.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Stops of the gradient used beyond 10 configurations (viridis, without its pale end).
const GRADIENT: [(f64, f64, f64); 5] = [
    (68.0, 1.0, 84.0),
    (59.0, 82.0, 139.0),
    (33.0, 145.0, 140.0),
    (53.0, 183.0, 121.0),
    (122.0, 209.0, 81.0),
];

/// The colour of configuration `rank` out of `count`.
fn color(rank: usize, count: usize) -> RGBColor {
    if count <= COLORS.len() {
        return COLORS[rank % COLORS.len()];
    }
    let t = rank as f64 / (count - 1).max(1) as f64 * (GRADIENT.len() - 1) as f64;
    let i = (t.floor() as usize).min(GRADIENT.len() - 2);
    let f = t - i as f64;
    let (a, b) = (GRADIENT[i], GRADIENT[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round().clamp(0.0, 255.0) as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// One series per file, in chart order.
struct Series {
    /// 1-based file index (as in the tables).
    index: usize,
    label: String,
    color: RGBColor,
}

fn series(report: &Report) -> Vec<Series> {
    let order = chart_order(report);
    // rank of each file's configuration among the distinct configurations, in order
    let mut ranks = Vec::with_capacity(order.len());
    let mut rank = 0;
    for (n, &i) in order.iter().enumerate() {
        if n > 0 {
            let previous = &report.files[order[n - 1]];
            if super::config_key(previous) != super::config_key(&report.files[i]) {
                rank += 1;
            }
        }
        ranks.push(rank);
    }
    let count = rank + 1;
    order
        .iter()
        .zip(ranks)
        .map(|(&i, rank)| Series {
            index: report.files[i].index,
            // Escaped: the label holds the document's text, and a control character
            // would make the SVG ill-formed XML.
            label: format!(
                "[{}] {}",
                report.files[i].index,
                crate::text::one_line(&report.files[i].label)
            ),
            color: color(rank, count),
        })
        .collect()
}

// Chart coordinates only: plotting needs floating point; the tables keep exact bytes.
fn to_mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Peak allocated and peak reserved (max over the phase's rows) of a file, MiB.
fn peaks(report: &Report, phase: Phase, file_index: usize) -> (f64, f64) {
    let rows = report
        .phases
        .iter()
        .filter(|t| t.phase == phase)
        .flat_map(|t| t.rows.iter())
        .filter(|r| r.file_index == file_index);
    let (mut allocated, mut reserved) = (0u64, 0u64);
    for row in rows {
        allocated = allocated.max(row.measured.counters.peak_allocated_bytes);
        reserved = reserved.max(row.measured.counters.peak_reserved_bytes);
    }
    (to_mib(allocated), to_mib(reserved))
}

/// Legend lines shown: the files (at most [`SVG_LEGEND_MAX`], the last line then counting
/// the rest).
fn legend_lines(series: &[Series]) -> Vec<(Option<RGBColor>, String)> {
    let mut lines: Vec<(Option<RGBColor>, String)> = Vec::new();
    if series.len() <= SVG_LEGEND_MAX {
        lines.extend(series.iter().map(|s| (Some(s.color), s.label.clone())));
    } else {
        let shown = SVG_LEGEND_MAX - 1;
        lines.extend(
            series[..shown]
                .iter()
                .map(|s| (Some(s.color), s.label.clone())),
        );
        lines.push((
            None,
            format!(
                "… and {} more (all in the text report)",
                series.len() - shown
            ),
        ));
    }
    lines
}

/// Lines of the key above the file list.
const KEY: [&str; 3] = [
    "Files, by configuration",
    "bars: solid = allocated, pale = reserved",
    "lines: thick/circles = wall, thin/squares = GPU",
];

pub(super) fn render(report: &Report) -> DrawResult<String> {
    let series = series(report);
    let lines = legend_lines(&series);
    let longest = lines
        .iter()
        .map(|(_, l)| l.chars().count())
        .chain(KEY.iter().map(|k| k.chars().count()))
        .max()
        .unwrap_or(0);
    // about 7 px per character at 13 px
    let legend_width = (longest as u32 * 7 + 50).clamp(240, 520);
    let legend_height = 30 + (KEY.len() as u32 + 1 + lines.len() as u32) * LINE;
    let width = PLOT_WIDTH + legend_width;
    let height = MIN_HEIGHT.max(legend_height);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let (plots, legend) = root.split_horizontally(PLOT_WIDTH);
        let (top, bottom) = plots.split_vertically(height / 2 + 30);
        memory_chart(report, &series, &top)?;
        time_chart(report, &series, &bottom)?;
        draw_legend(&legend, &lines)?;
        root.present()?;
    }
    Ok(svg)
}

fn draw_legend(area: &Area<'_>, lines: &[(Option<RGBColor>, String)]) -> DrawResult<()> {
    let text = ("sans-serif", LEGEND_FONT).into_font().color(&BLACK);
    let bold = ("sans-serif", LEGEND_FONT)
        .into_font()
        .style(FontStyle::Bold)
        .color(&BLACK);
    let mut y = 30i32;
    for (n, key) in KEY.iter().enumerate() {
        let style = if n == 0 { &bold } else { &text };
        area.draw(&Text::new(key.to_string(), (10, y), style.clone()))?;
        y += LINE as i32;
    }
    y += LINE as i32 / 2;
    for (color, label) in lines {
        if let Some(c) = color {
            area.draw(&Rectangle::new([(10, y + 1), (22, y + 13)], c.filled()))?;
            area.draw(&Rectangle::new(
                [(24, y + 1), (36, y + 13)],
                c.mix(0.3).filled(),
            ))?;
            area.draw(&Rectangle::new([(24, y + 1), (36, y + 13)], *c))?;
        }
        area.draw(&Text::new(label.clone(), (42, y), text.clone()))?;
        y += LINE as i32;
    }
    Ok(())
}

/// One bar: x range, height, colour, solid (allocated) or pale (reserved).
struct Bar {
    x0: f64,
    x1: f64,
    value: f64,
    color: RGBColor,
    solid: bool,
}

fn bars(report: &Report, series: &[Series]) -> Vec<Bar> {
    let files = series.len().max(1);
    let group = 0.84;
    let width = group / (2 * files) as f64;
    let mut out = Vec::new();
    for (si, s) in series.iter().enumerate() {
        for (pi, phase) in Phase::ALL.iter().enumerate() {
            let (allocated, reserved) = peaks(report, *phase, s.index);
            let x0 = pi as f64 - group / 2.0 + (2 * si) as f64 * width;
            out.push(Bar {
                x0,
                x1: x0 + width,
                value: allocated,
                color: s.color,
                solid: true,
            });
            out.push(Bar {
                x0: x0 + width,
                x1: x0 + 2.0 * width,
                value: reserved,
                color: s.color,
                solid: false,
            });
        }
    }
    out
}

fn phase_label(x: &f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < Phase::ALL.len() {
        Phase::ALL[i as usize].as_str().to_string()
    } else {
        String::new()
    }
}

/// Room for the y labels: about 8 px per character of the widest label, plus the title.
fn label_area(high: f64) -> u32 {
    (tick_label(high).chars().count() as u32 * 8 + 40).max(60)
}

fn memory_chart(report: &Report, series: &[Series], area: &Area<'_>) -> DrawResult<()> {
    let bars = bars(report, series);
    let values: Vec<f64> = bars.iter().map(|b| b.value).collect();
    let (low, high, log) = memory_axis(&values);
    if log {
        // A hair below `low` so that its power of ten still gets a tick label.
        draw_memory(
            area,
            &bars,
            (low * (1.0 - 1e-9)..high).log_scale(),
            low,
            high,
            "Peak allocated (solid) and reserved (pale) per phase, MiB, log scale",
        )
    } else {
        draw_memory(
            area,
            &bars,
            low..high,
            low,
            high,
            "Peak allocated (solid) and reserved (pale) per phase, MiB",
        )
    }
}

fn draw_memory<Y>(
    area: &Area<'_>,
    bars: &[Bar],
    y: Y,
    floor: f64,
    high: f64,
    title: &str,
) -> DrawResult<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(label_area(high))
        .build_cartesian_2d(-0.5f64..(Phase::ALL.len() as f64 - 0.5), y)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(Phase::ALL.len())
        .x_label_formatter(&phase_label)
        .y_label_formatter(&|v| tick_label(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 14))
        .y_desc("MiB")
        .draw()?;
    chart.draw_series(bars.iter().filter(|b| b.value > floor).map(|b| {
        let style = if b.solid {
            b.color.filled()
        } else {
            b.color.mix(0.3).filled()
        };
        Rectangle::new([(b.x0, floor), (b.x1, b.value.min(high))], style)
    }))?;
    Ok(())
}

/// Longest time the chart can show, ms (about 32 years): the plotting library's tick
/// search does not end on an infinite or astronomically large axis, and a document is
/// user input. Longer times are drawn at the top; the tables keep the exact values.
const MAX_TIME_MS: f64 = 1e12;
/// Smallest top of the time axis, ms (1 ns).
const MIN_TIME_TOP_MS: f64 = 1e-6;

/// Seconds as chart milliseconds, within `0..=MAX_TIME_MS`.
fn time_ms(seconds: f64) -> f64 {
    let ms = seconds * 1e3;
    if ms.is_nan() {
        0.0
    } else {
        ms.clamp(0.0, MAX_TIME_MS)
    }
}

/// The top of the time axis for a largest time `max_ms`: 10 % above it, never below
/// [`MIN_TIME_TOP_MS`] (1 ms when nothing took time).
pub(super) fn time_axis_top(max_ms: f64) -> f64 {
    if max_ms > 0.0 {
        (max_ms * 1.1).clamp(MIN_TIME_TOP_MS, MAX_TIME_MS * 1.1)
    } else {
        1.0
    }
}

fn time_chart(report: &Report, series: &[Series], area: &Area<'_>) -> DrawResult<()> {
    let rows: Vec<&ReportRow> = report
        .phases
        .iter()
        .filter(|t| t.phase == Phase::WarmForward)
        .flat_map(|t| t.rows.iter())
        .collect();
    let max_rep = rows
        .iter()
        .filter_map(|r| r.measured.repetition)
        .max()
        .unwrap_or(1)
        .max(2);
    let max_ms = rows
        .iter()
        .flat_map(|r| [Some(r.measured.wall_seconds), r.measured.gpu_seconds])
        .flatten()
        .map(time_ms)
        .fold(0.0_f64, f64::max);
    let top = time_axis_top(max_ms);
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Warm forward per repetition, ms: wall (thick, circles), GPU events (thin, squares)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(label_area(top))
        .build_cartesian_2d(0.5f64..(max_rep as f64 + 0.5), 0f64..top)?;
    chart
        .configure_mesh()
        .x_labels((max_rep as usize).min(20))
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{}", x.round() as i64)
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| tick_label(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 14))
        .x_desc("repetition")
        .y_desc("ms")
        .draw()?;
    for s in series {
        let c = s.color;
        let mine: Vec<&&ReportRow> = rows.iter().filter(|r| r.file_index == s.index).collect();
        let wall: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|r| {
                r.measured
                    .repetition
                    .map(|rep| (rep as f64, time_ms(r.measured.wall_seconds)))
            })
            .collect();
        let gpu: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|r| match (r.measured.repetition, r.measured.gpu_seconds) {
                (Some(rep), Some(g)) => Some((rep as f64, time_ms(g))),
                _ => None,
            })
            .collect();
        chart.draw_series(LineSeries::new(wall.clone(), c.stroke_width(3)))?;
        chart.draw_series(wall.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        if !gpu.is_empty() {
            chart.draw_series(LineSeries::new(gpu.clone(), c.stroke_width(1)))?;
            chart.draw_series(gpu.iter().map(|&(x, y)| {
                EmptyElement::at((x, y)) + Rectangle::new([(-3, -3), (3, 3)], c.filled())
            }))?;
        }
    }
    Ok(())
}
