//! Reading measurement documents back: tables per phase, the analytic prediction, Markdown and
//! an SVG chart.
//!
//! The documents are read by [`crate::document::read`] (the one reader, shared with `lab
//! record`); this module only renders them.
//!
//! The prediction ([`predict`]) is `lab measure`'s own ([`SyntheticModel`]'s
//! `predicted_*` methods: tensors rounded to the allocator's 512-byte blocks, cuBLAS workspace
//! left out), added to each row's measured baseline: weights for `model_load`, the input for
//! `inputs`, one output at the end of a forward and the forward's predicted peak extra at its
//! peak. The cold forward typically ends above it by the cuBLAS workspace.
//!
//! A document with a `graph` object (the CUDA-graph floor, docs/PROTOCOL.md §4.6) adds its
//! lines after the tables: those of `lab measure`'s own summary ([`graph::summary_text`]),
//! one set per file, the eager time being the median GPU time of the file's `warm_forward`
//! rows. Without any `graph` object the report is exactly as before.

use crate::document::graph::{self, GraphSection};
use crate::document::{
    median, Configuration, Document, LoadedMeasurement, Phase, PhaseRow, SyntheticModel,
};
use crate::text::one_line;
use crate::units::{gib, mib};
use crate::{Error, Result};
use serde::Serialize;
use std::fmt::Write as _;

/// A short label of the configuration: `rust float32 b1 c16 w64`.
pub fn label(document: &Document) -> String {
    let c = &document.configuration;
    format!(
        "{} {} b{} c{} w{}",
        document.tool.implementation,
        c.dtype.name(),
        c.batch,
        c.context,
        c.width
    )
}

/// The analytic prediction of allocated bytes for one phase row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Prediction {
    /// Predicted allocated bytes at the end of the step.
    pub end_allocated_bytes: u64,
    /// Predicted peak allocated bytes during the step.
    pub peak_allocated_bytes: u64,
}

/// Predicts allocated bytes for a row of `phase` that started at `baseline_allocated` bytes,
/// from `lab measure`'s analytic model (see the module documentation). Saturates rather than
/// overflows on absurd inputs.
pub fn predict(model: &SyntheticModel, phase: Phase, baseline_allocated: u64) -> Prediction {
    let (end_extra, peak_extra) = match phase {
        Phase::ModelLoad => {
            let w = model.predicted_weight_allocation();
            (w, w)
        }
        Phase::Inputs => {
            let i = model.predicted_input_allocation();
            (i, i)
        }
        Phase::ColdForward | Phase::Warmup | Phase::WarmForward => (
            model.predicted_output_allocation(),
            model.predicted_forward_peak_extra(),
        ),
    };
    Prediction {
        end_allocated_bytes: baseline_allocated.saturating_add(end_extra),
        peak_allocated_bytes: baseline_allocated.saturating_add(peak_extra),
    }
}

/// One row of a phase table: a measured row of one file with its prediction.
#[derive(Debug, Clone, Serialize)]
pub struct ReportRow {
    /// 1-based index of the file in the report.
    pub file_index: usize,
    /// The measured row.
    #[serde(flatten)]
    pub measured: PhaseRow,
    /// Predicted end allocated bytes.
    pub predicted_end_allocated_bytes: u64,
    /// Predicted peak allocated bytes.
    pub predicted_peak_allocated_bytes: u64,
    /// Measured peak allocated minus predicted peak allocated, bytes (may be negative).
    pub peak_allocated_minus_predicted_bytes: i128,
    /// FLOP/s from the GPU time (forward phases with a GPU time only).
    pub achieved_flops_per_second: Option<f64>,
}

/// One file in a report.
#[derive(Debug, Clone, Serialize)]
pub struct ReportFile {
    /// 1-based index, as used in the tables and the chart legend.
    pub index: usize,
    /// The file name.
    pub file: String,
    /// SHA-256 of the file.
    pub sha256: String,
    /// Short configuration label.
    pub label: String,
    /// `rust` or `python`.
    pub implementation: String,
    /// Device name.
    pub device_name: String,
    /// Total device memory, bytes.
    pub total_memory_bytes: u64,
    /// Configuration of the run.
    pub configuration: Configuration,
    /// Model sizes.
    pub synthetic_model: SyntheticModel,
    /// The CUDA-graph floor (docs/PROTOCOL.md §4.6), when the document has one; left out of
    /// the JSON otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphSection>,
}

/// Rows of one phase over all files.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseTable {
    /// The phase.
    pub phase: Phase,
    /// One row per file (per repetition for `warm_forward`).
    pub rows: Vec<ReportRow>,
}

/// A report over one or several measurement files.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The files, in the order given.
    pub files: Vec<ReportFile>,
    /// One table per phase, in protocol order.
    pub phases: Vec<PhaseTable>,
    /// What the prediction leaves out.
    pub prediction_note: &'static str,
}

/// How [`predict`] works and what it leaves out, as shown under the tables.
pub const PREDICTION_NOTE: &str = "pred = the row's measured baseline + the tensors the step \
creates, from synthetic_model (weights; input; one output at the end of a forward, two hidden \
activations at its peak), each rounded to the allocator's 512-byte blocks; the cuBLAS \
workspace is left out, so the cold forward ends above it by that workspace";

/// Builds the report of some loaded measurements.
pub fn build_report(measurements: &[LoadedMeasurement]) -> Report {
    let files = measurements
        .iter()
        .enumerate()
        .map(|(i, m)| ReportFile {
            index: i + 1,
            file: m.file_name(),
            sha256: m.sha256.clone(),
            label: label(&m.document),
            implementation: m.document.tool.implementation.clone(),
            device_name: m.document.environment.device_name.clone(),
            total_memory_bytes: m.document.environment.total_memory_bytes,
            configuration: m.document.configuration.clone(),
            synthetic_model: m.document.synthetic_model.clone(),
            graph: m.document.graph.clone(),
        })
        .collect();
    let phases = Phase::ALL
        .iter()
        .map(|&phase| PhaseTable {
            phase,
            rows: measurements
                .iter()
                .enumerate()
                .flat_map(|(i, m)| {
                    let model = &m.document.synthetic_model;
                    let per_forward = model.flops_per_forward as f64;
                    m.document.rows_of(phase).map(move |r| {
                        let prediction = predict(model, phase, r.baseline_allocated_bytes);
                        let flops =
                            (r.forward_passes > 0).then_some(per_forward * r.forward_passes as f64);
                        ReportRow {
                            file_index: i + 1,
                            measured: r.clone(),
                            predicted_end_allocated_bytes: prediction.end_allocated_bytes,
                            predicted_peak_allocated_bytes: prediction.peak_allocated_bytes,
                            peak_allocated_minus_predicted_bytes: i128::from(
                                r.peak_allocated_bytes,
                            ) - i128::from(
                                prediction.peak_allocated_bytes,
                            ),
                            achieved_flops_per_second: match (flops, r.gpu_seconds) {
                                (Some(f), Some(g)) if g > 0.0 => Some(f / g),
                                _ => None,
                            },
                        }
                    })
                })
                .collect(),
        })
        .collect();
    Report {
        files,
        phases,
        prediction_note: PREDICTION_NOTE,
    }
}

fn seconds_ms(seconds: f64) -> String {
    format!("{:.3}", seconds * 1e3)
}

fn optional_ms(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "-".to_string(), seconds_ms)
}

fn tflops(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{:.3}", v / 1e12))
}

const COLUMNS: [&str; 13] = [
    "file",
    "rep",
    "wall ms",
    "GPU ms",
    "base alloc",
    "base res",
    "end alloc",
    "end res",
    "peak alloc",
    "peak res",
    "pred end alloc",
    "pred peak alloc",
    "TFLOP/s",
];

fn row_cells(row: &ReportRow) -> Vec<String> {
    let m = &row.measured;
    let b = |v: u64| mib(v, 3).to_string();
    vec![
        format!("[{}]", row.file_index),
        m.repetition
            .map_or_else(|| "-".to_string(), |r| r.to_string()),
        seconds_ms(m.wall_seconds),
        optional_ms(m.gpu_seconds),
        b(m.baseline_allocated_bytes),
        b(m.baseline_reserved_bytes),
        b(m.end_allocated_bytes),
        b(m.end_reserved_bytes),
        b(m.peak_allocated_bytes),
        b(m.peak_reserved_bytes),
        b(row.predicted_end_allocated_bytes),
        b(row.predicted_peak_allocated_bytes),
        tflops(row.achieved_flops_per_second),
    ]
}

/// One line per file. The file name and the document's texts are printed through
/// [`one_line`]: a control or format character in them (an ESC sequence in `device_name`)
/// is shown escaped, never sent to the terminal.
fn file_lines(report: &Report) -> Vec<String> {
    report
        .files
        .iter()
        .map(|f| {
            format!(
                "[{}] {} — {} on {} ({} GiB), sha256 {}",
                f.index,
                one_line(&f.file),
                one_line(&f.label),
                one_line(&f.device_name),
                gib(f.total_memory_bytes, 2),
                f.sha256
            )
        })
        .collect()
}

/// Median GPU time of the `warm_forward` rows of file `index`, seconds: the eager time that
/// `lab measure`'s summary holds against the graph floor.
fn eager_gpu_seconds(report: &Report, index: usize) -> Option<f64> {
    let gpu: Vec<f64> = report
        .phases
        .iter()
        .filter(|t| t.phase == Phase::WarmForward)
        .flat_map(|t| t.rows.iter())
        .filter(|r| r.file_index == index)
        .filter_map(|r| r.measured.gpu_seconds)
        .collect();
    median(&gpu)
}

/// Title of the graph-floor section, in text and Markdown.
const GRAPH_TITLE: &str = "CUDA graph (docs/PROTOCOL.md §4.6)";

/// The graph-floor lines of the report: for each file, the lines of
/// [`graph::summary_text`] (the one formatting of the graph floor, shared with `lab
/// measure`) prefixed by the file's index and passed through [`one_line`]; a file without a
/// `graph` object gets one line saying so. Empty when no file has one, so that such reports
/// stay exactly as they were.
fn graph_lines(report: &Report) -> Vec<String> {
    if report.files.iter().all(|f| f.graph.is_none()) {
        return Vec::new();
    }
    let mut lines = Vec::new();
    for f in &report.files {
        match &f.graph {
            Some(g) => {
                let summary = graph::summary_text(
                    g,
                    eager_gpu_seconds(report, f.index),
                    f.synthetic_model.flops_per_forward,
                );
                lines.extend(
                    summary
                        .lines()
                        .map(|line| format!("[{}] {}", f.index, one_line(line))),
                );
            }
            None => lines.push(format!(
                "[{}] no graph object (measured without --graph-replays)",
                f.index
            )),
        }
    }
    lines
}

/// The report as aligned plain-text tables (memory in MiB, times in milliseconds), then the
/// graph floor of the files that have one.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for line in file_lines(report) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "memory in MiB (2^20 bytes), times in ms; TFLOP/s from the GPU time"
    );
    for table in &report.phases {
        let _ = writeln!(out, "\n{}", table.phase.as_str());
        let mut rows: Vec<Vec<String>> = vec![COLUMNS.iter().map(|c| c.to_string()).collect()];
        rows.extend(table.rows.iter().map(row_cells));
        for line in crate::table::align(&rows, |i| i < 2) {
            let _ = writeln!(out, "  {line}");
        }
    }
    let _ = writeln!(out, "\n{}", report.prediction_note);
    let graph = graph_lines(report);
    if !graph.is_empty() {
        let _ = writeln!(out, "\n{GRAPH_TITLE}");
        for line in graph {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// The report as Markdown: a file list, one pipe table per phase, then the graph floor of the
/// files that have one as a list.
pub fn render_markdown(report: &Report) -> String {
    let mut out = String::from("## Measurement report\n\n");
    for line in file_lines(report) {
        let _ = writeln!(out, "- {line}");
    }
    let _ = writeln!(
        out,
        "\nMemory in MiB (2^20 bytes), times in milliseconds, TFLOP/s from the GPU time."
    );
    for table in &report.phases {
        let _ = writeln!(out, "\n### `{}`\n", table.phase.as_str());
        let _ = writeln!(out, "| {} |", COLUMNS.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            COLUMNS
                .iter()
                .enumerate()
                .map(|(i, _)| if i < 2 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for row in &table.rows {
            let _ = writeln!(out, "| {} |", row_cells(row).join(" | "));
        }
    }
    let _ = writeln!(out, "\n{}.", capitalise(report.prediction_note));
    let graph = graph_lines(report);
    if !graph.is_empty() {
        let _ = writeln!(out, "\n### {}\n", capitalise(GRAPH_TITLE));
        for line in graph {
            let _ = writeln!(out, "- {line}");
        }
    }
    out
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Renders the SVG chart: peak allocated and reserved per phase (one pair of bars per file),
/// and warm-forward wall and GPU times per repetition, with one legend for both in a column on
/// the right.
///
/// Series are ordered by configuration, numerically: implementation, dtype, batch, context,
/// width (then the order given); files with the same configuration share a colour. Up to 10
/// configurations get distinct colours; beyond, the colours run along a dark-blue-to-green
/// gradient in that order, so that they follow size. The legend lists at most
/// [`SVG_LEGEND_MAX`] files, then "… and K more" (the text report lists them all). The memory
/// axis ends just above the largest bar (log scale when the bars span more than a factor 50).
pub fn render_svg(report: &Report) -> Result<String> {
    chart::render(report).map_err(|e| Error::runtime(format!("cannot draw the chart: {e}")))
}

/// Most files named in the SVG legend; the others are counted in one last line.
pub const SVG_LEGEND_MAX: usize = 40;

/// The order of the chart's series: indices into `report.files`, sorted by implementation,
/// dtype, batch, context and width (numbers compared as numbers), then by position.
pub fn chart_order(report: &Report) -> Vec<usize> {
    let mut order: Vec<usize> = (0..report.files.len()).collect();
    order.sort_by_key(|&i| config_key(&report.files[i]));
    order
}

fn config_key(file: &ReportFile) -> (String, &'static str, u64, u64, u64) {
    let c = &file.configuration;
    (
        file.implementation.clone(),
        c.dtype.name(),
        c.batch,
        c.context,
        c.width,
    )
}

/// A chart tick label: no useless decimals, thousands grouped with commas (`0.05`, `1.5`,
/// `20`, `100,000`).
pub fn tick_label(value: f64) -> String {
    if !value.is_finite() {
        return String::new();
    }
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        let digits = format!("{:.0}", magnitude);
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        return if value < 0.0 {
            format!("-{grouped}")
        } else {
            grouped
        };
    }
    let decimals = if magnitude >= 1.0 || magnitude == 0.0 {
        2
    } else {
        // three significant digits at most
        (2.0 - magnitude.log10().floor()).clamp(0.0, 12.0) as usize
    };
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// The memory axis of the chart, MiB: `(low, high, log scale)`. Linear from 0 when the bars
/// span at most a factor 50, else logarithmic from the power of ten below the smallest
/// non-zero bar; either way it ends at 1.2 × the largest bar (1 MiB when every bar is 0).
pub fn memory_axis(values: &[f64]) -> (f64, f64, bool) {
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    let min_positive = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    if max <= 0.0 {
        return (0.0, 1.0, false);
    }
    let high = max * 1.2;
    if min_positive.is_finite() && max / min_positive > 50.0 {
        let mut low = 10f64.powf(min_positive.log10().floor());
        if low >= min_positive * 0.999 {
            // the smallest bar would have no height
            low /= 10.0;
        }
        (low, high, true)
    } else {
        (0.0, high, false)
    }
}

mod chart {
    use super::{chart_order, memory_axis, tick_label, Phase, Report, ReportRow, SVG_LEGEND_MAX};
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
                    super::one_line(&report.files[i].label)
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
            allocated = allocated.max(row.measured.peak_allocated_bytes);
            reserved = reserved.max(row.measured.peak_reserved_bytes);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::parse as parse_document;
    use crate::document::tests::sample_json;
    use std::path::PathBuf;

    #[test]
    fn parses_and_predicts() {
        let doc = parse_document(sample_json(64, 4).as_bytes()).expect("valid");
        let model = &doc.synthetic_model;
        assert_eq!(model.parameter_bytes, 132_352);
        let load = predict(model, Phase::ModelLoad, 0);
        // the four tensors each rounded to 512 bytes: the 256-byte bias becomes 512
        assert_eq!(load.end_allocated_bytes, 65_536 + 1_024 + 65_536 + 512);
        let inputs = predict(model, Phase::Inputs, 1_000);
        assert_eq!(inputs.end_allocated_bytes, 1_000 + 4_096);
        let forward = predict(model, Phase::WarmForward, 10_000);
        assert_eq!(forward.end_allocated_bytes, 10_000 + 4_096);
        assert_eq!(forward.peak_allocated_bytes, 10_000 + 2 * 16 * 256 * 4);
        assert_eq!(doc.peak_reserved_bytes(), 2_097_152);
        assert_eq!(doc.peak_allocated_bytes(), 132_352 + 7 * 4096);
        let median = doc.warm_forward_median_wall_seconds().unwrap();
        assert!((median - 0.00115).abs() < 1e-12, "{median}");
        assert_eq!(label(&doc), "rust float32 b1 c16 w64");
    }

    #[test]
    fn absurd_sizes_in_a_document_saturate() {
        // A document is user input: sizes no GPU could hold must not panic or wrap.
        let mut doc = parse_document(sample_json(64, 4).as_bytes()).unwrap();
        doc.synthetic_model.width = u64::MAX / 2;
        doc.synthetic_model.hidden = u64::MAX / 2;
        doc.synthetic_model.input_bytes = u64::MAX;
        doc.synthetic_model.output_bytes = u64::MAX;
        for phase in Phase::ALL {
            let p = predict(&doc.synthetic_model, phase, u64::MAX - 1);
            assert_eq!(p.peak_allocated_bytes, u64::MAX, "{phase:?}");
        }
        let report = build_report(&loaded(vec![doc]));
        assert!(render_text(&report).contains("model_load"));
    }

    fn loaded(docs: Vec<Document>) -> Vec<LoadedMeasurement> {
        docs.into_iter()
            .enumerate()
            .map(|(i, document)| LoadedMeasurement {
                path: PathBuf::from(format!("m{i}.json")),
                sha256: "0".repeat(64),
                document,
            })
            .collect()
    }

    #[test]
    fn renders_text_markdown_and_svg() {
        let a = parse_document(sample_json(64, 4).as_bytes()).unwrap();
        let b = parse_document(sample_json(64, 2).as_bytes()).unwrap();
        let report = build_report(&loaded(vec![a, b]));
        assert_eq!(report.phases.len(), 5);
        assert_eq!(report.phases[4].rows.len(), 4);
        assert_eq!(report.phases[0].rows[0].achieved_flops_per_second, None);
        let flops = report.phases[2].rows[0].achieved_flops_per_second.unwrap();
        assert!((flops - 1_048_576.0 / 0.0005).abs() < 1.0, "{flops}");
        let text = render_text(&report);
        assert!(text.contains("warm_forward"));
        assert!(text.contains("[2] m1.json"));
        let md = render_markdown(&report);
        assert!(md.contains("### `cold_forward`"));
        assert!(md.contains("| file | rep |"));
        let svg = render_svg(&report).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("model_load"));
        // one legend for both charts, in configuration order: bfloat16 before float32
        let legend = legend_entries(&svg);
        assert_eq!(
            legend,
            [
                "[2] rust bfloat16 b1 c16 w64",
                "[1] rust float32 b1 c16 w64"
            ]
        );
    }

    /// The text of every `<text>` element of an SVG, unescaped.
    fn svg_texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|rest| {
                let start = rest.find('>')? + 1;
                let end = rest.find("</text>")?;
                Some(
                    rest[start..end]
                        .trim()
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&quot;", "\"")
                        .replace("&amp;", "&"),
                )
            })
            .collect()
    }

    /// The legend's file lines (`[i] label`) and its overflow line, in drawing order.
    fn legend_entries(svg: &str) -> Vec<String> {
        svg_texts(svg)
            .into_iter()
            .filter(|t| t.starts_with('[') || t.starts_with('…'))
            .collect()
    }

    /// The numeric tick labels of an SVG (commas removed).
    fn numeric_labels(svg: &str) -> Vec<(String, f64)> {
        svg_texts(svg)
            .into_iter()
            .filter_map(|t| t.replace(',', "").parse::<f64>().ok().map(|v| (t, v)))
            .collect()
    }

    /// Largest peak (allocated or reserved) of a report, MiB.
    fn data_max_mib(report: &Report) -> f64 {
        report
            .phases
            .iter()
            .flat_map(|t| t.rows.iter())
            .map(|r| {
                r.measured
                    .peak_allocated_bytes
                    .max(r.measured.peak_reserved_bytes)
            })
            .max()
            .unwrap() as f64
            / 1_048_576.0
    }

    #[test]
    fn memory_axis_ends_just_above_the_data() {
        // 24 small files: 0.06 MiB to 34 MiB, log scale from 0.01 to 1.2 x 34
        let (low, high, log) = memory_axis(&[0.0625, 2.0, 34.0, 0.0]);
        assert!(log);
        assert!((low - 0.01).abs() < 1e-12, "{low}");
        assert!((high - 40.8).abs() < 1e-9, "{high}");
        // a sweep: 16 MiB to 140,000 MiB; a smallest bar on a power of ten keeps a height
        assert_eq!(memory_axis(&[10.0, 140_000.0]), (1.0, 168_000.0, true));
        // within a factor 50: linear from 0
        assert_eq!(memory_axis(&[10.0, 20.0]), (0.0, 24.0, false));
        assert_eq!(memory_axis(&[0.0, 0.0]), (0.0, 1.0, false));
        assert_eq!(memory_axis(&[]), (0.0, 1.0, false));
    }

    #[test]
    fn tick_labels_are_plain() {
        for (value, text) in [
            (0.0, "0"),
            (0.1, "0.1"),
            (0.01, "0.01"),
            (0.30000000000000004, "0.3"),
            (0.125, "0.125"),
            (1.0, "1"),
            (1.5, "1.5"),
            (10.0, "10"),
            (250.0, "250"),
            (1000.0, "1,000"),
            (100_000.0, "100,000"),
            (12_345_678.0, "12,345,678"),
            (-2500.0, "-2,500"),
            (-0.0, "0"),
        ] {
            assert_eq!(tick_label(value), text, "{value}");
        }
    }

    #[test]
    fn svg_axis_and_labels_follow_the_data() {
        for widths in [
            vec![64, 64],
            vec![16, 4096],
            vec![16, 64, 256, 1024, 4096, 8192],
        ] {
            let docs = widths
                .iter()
                .map(|w| parse_document(sample_json(*w, 4).as_bytes()).unwrap())
                .collect();
            let report = build_report(&loaded(docs));
            let svg = render_svg(&report).unwrap();
            let max = data_max_mib(&report);
            let labels = numeric_labels(&svg);
            let top = labels.iter().map(|(_, v)| *v).fold(0.0, f64::max);
            // the memory axis ends at 1.2 x the data: no label far above it, one not far below
            assert!(
                top <= 1.2 * max,
                "{widths:?}: label {top} above 1.2 x {max}"
            );
            assert!(
                top >= max / 10.0,
                "{widths:?}: top label {top} for data up to {max}"
            );
            for (text, _) in &labels {
                assert!(!text.ends_with(".0"), "{widths:?}: label {text}");
                assert!(text.chars().count() <= 9, "{widths:?}: label {text}");
            }
            assert_eq!(legend_entries(&svg).len(), widths.len());
        }
    }

    #[test]
    fn svg_series_follow_configuration_size_not_text_order() {
        // given in text order, as a shell glob gives them
        let widths = [1024, 128, 16384, 256, 64];
        let docs = widths
            .iter()
            .map(|w| parse_document(sample_json(*w, 4).as_bytes()).unwrap())
            .collect();
        let report = build_report(&loaded(docs));
        assert_eq!(chart_order(&report), [4, 1, 3, 0, 2]);
        let svg = render_svg(&report).unwrap();
        assert_eq!(
            legend_entries(&svg),
            [
                "[5] rust float32 b1 c16 w64",
                "[2] rust float32 b1 c16 w128",
                "[4] rust float32 b1 c16 w256",
                "[1] rust float32 b1 c16 w1024",
                "[3] rust float32 b1 c16 w16384",
            ]
        );
    }

    #[test]
    fn a_long_legend_is_capped_beside_the_plots() {
        let count = SVG_LEGEND_MAX + 10;
        let docs = (0..count)
            .map(|i| parse_document(sample_json(64 + i as u64, 4).as_bytes()).unwrap())
            .collect();
        let svg = render_svg(&build_report(&loaded(docs))).unwrap();
        let legend = legend_entries(&svg);
        assert_eq!(legend.len(), SVG_LEGEND_MAX);
        assert_eq!(legend[0], "[1] rust float32 b1 c16 w64");
        assert_eq!(
            legend[SVG_LEGEND_MAX - 1],
            "… and 11 more (all in the text report)"
        );
        // the legend has its own column right of the 1100 px plots
        let width: u32 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .unwrap();
        assert!(width >= 1100 + 240, "{width}");
        let xs: Vec<f64> = svg
            .split("<text")
            .skip(1)
            .filter(|t| t.contains(">[") || t.contains(">…"))
            .map(|t| {
                t.split("x=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(xs.iter().all(|x| *x >= 1100.0), "{xs:?}");
    }

    #[test]
    fn svg_switches_to_log_scale_for_wide_ranges() {
        let small = parse_document(sample_json(16, 4).as_bytes()).unwrap();
        let large = parse_document(sample_json(4096, 4).as_bytes()).unwrap();
        let svg = render_svg(&build_report(&loaded(vec![small, large]))).unwrap();
        assert!(svg.contains("log scale"));
    }
}

#[cfg(test)]
mod extremes {
    //! A document is user input: every numeric field at its extremes must still give a
    //! report, and an SVG that is well-formed XML, in bounded time.
    use super::*;
    use crate::document::tests::sample_json;
    use serde_json::Value;

    /// Every numeric field of a document, as a JSON pointer (`*`: every row; `warm`: every
    /// `warm_forward` row).
    const FIELDS: [&str; 27] = [
        "/environment/total_memory_bytes",
        "/environment/multiprocessor_count",
        "/environment/device_count",
        "/configuration/batch",
        "/configuration/context",
        "/configuration/width",
        "/configuration/warmup",
        "/configuration/repeats",
        "/configuration/seed",
        "/synthetic_model/width",
        "/synthetic_model/hidden",
        "/synthetic_model/parameters",
        "/synthetic_model/dtype_bytes",
        "/synthetic_model/parameter_bytes",
        "/synthetic_model/input_bytes",
        "/synthetic_model/output_bytes",
        "/synthetic_model/flops_per_forward",
        "/phases/warm/repetition",
        "/phases/*/forward_passes",
        "/phases/*/wall_seconds",
        "/phases/*/gpu_seconds",
        "/phases/*/baseline_allocated_bytes",
        "/phases/*/baseline_reserved_bytes",
        "/phases/*/end_allocated_bytes",
        "/phases/*/end_reserved_bytes",
        "/phases/*/peak_allocated_bytes",
        "/phases/*/peak_reserved_bytes",
    ];

    /// The values every numeric field is set to: integers at their extremes, and floats from
    /// the smallest subnormal to `f64::MAX`.
    fn extreme_values() -> Vec<Value> {
        vec![
            Value::from(0u64),
            Value::from(1u64),
            Value::from(u64::MAX),
            serde_json::json!(5e-324),
            serde_json::json!(2.2250738585072014e-308),
            serde_json::json!(1e-300),
            serde_json::json!(1e306),
            serde_json::json!(1e308),
            serde_json::json!(f64::MAX),
        ]
    }

    /// Sets the field at `pointer` (`/phases/*/x`: every row; `/phases/warm/x`: every
    /// `warm_forward` row; `/a/b/*`: every element of an array or every value of an object).
    fn set(document: &mut Value, pointer: &str, value: &Value) {
        if let Some(container) = pointer.strip_suffix("/*") {
            match document.pointer_mut(container).unwrap() {
                Value::Array(items) => items.iter_mut().for_each(|v| *v = value.clone()),
                Value::Object(fields) => fields.values_mut().for_each(|v| *v = value.clone()),
                other => panic!("{container} is {other}"),
            }
        } else if let Some(field) = pointer.strip_prefix("/phases/*/") {
            for row in document["phases"].as_array_mut().unwrap() {
                row[field] = value.clone();
            }
        } else if let Some(field) = pointer.strip_prefix("/phases/warm/") {
            for row in document["phases"].as_array_mut().unwrap() {
                if row["phase"] == "warm_forward" {
                    row[field] = value.clone();
                }
            }
        } else {
            *document.pointer_mut(pointer).unwrap() = value.clone();
        }
    }

    /// Renders all formats on another thread; a render that has not ended after two minutes
    /// (a data-dependent loop that does not end: the class this test guards) fails the test
    /// instead of hanging it. Not a speed test: each render takes milliseconds.
    fn render_all(report: Report) -> (String, String, String) {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let svg = render_svg(&report).expect("the chart draws");
            let _ = tx.send((render_text(&report), render_markdown(&report), svg));
        });
        rx.recv_timeout(std::time::Duration::from_secs(120))
            .expect("rendering did not end")
    }

    #[test]
    fn control_characters_in_document_text_are_escaped_everywhere() {
        let mut doc: Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
        doc["environment"]["device_name"] = Value::from("GPU\u{1b}[2J\u{7}\r\nline");
        // (tool.implementation, also shown, can only be "rust" or "python": parse refuses others)
        let document = crate::document::parse(doc.to_string().as_bytes()).unwrap();
        let loaded = vec![LoadedMeasurement {
            path: "m\nn\u{1b}.json".into(),
            sha256: "0".repeat(64),
            document,
        }];
        let report = build_report(&loaded);
        let (text, markdown, svg) = render_all(report.clone());
        for output in [&text, &markdown, &svg] {
            assert!(
                !output.chars().any(|c| c.is_control() && c != '\n'),
                "{output:?}"
            );
        }
        assert!(
            text.starts_with(
                "[1] m\\nn\\u{1b}.json — rust float32 b1 c16 w64 on \
                 GPU\\u{1b}[2J\\u{7}\\r\\nline (139.80 GiB)"
            ),
            "{text}"
        );
        let xml = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let legend: Vec<&str> = xml
            .descendants()
            .filter(|n| n.is_text())
            .filter_map(|n| n.text())
            .map(str::trim)
            .filter(|t| t.starts_with("[1]"))
            .collect();
        assert_eq!(legend, ["[1] rust float32 b1 c16 w64"], "{svg}");
        // The JSON keeps the text as it was; serde_json escapes it.
        let json = serde_json::to_string(&report).unwrap();
        assert!(
            json.contains(r#""device_name":"GPU\u001b[2J\u0007\r\nline""#),
            "{json}"
        );
    }

    #[test]
    fn every_numeric_field_at_its_extremes_renders_a_well_formed_svg() {
        let base: Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
        let mut rendered = 0;
        for field in FIELDS {
            for value in &extreme_values() {
                let mut doc = base.clone();
                set(&mut doc, field, value);
                // Values the field's type refuses (a float in a counter, repetition 0) are
                // refused by the reader; everything it accepts must render.
                let Ok(document) = crate::document::parse(doc.to_string().as_bytes()) else {
                    let zeroth = field.ends_with("repetition") && value == &Value::from(0u64);
                    assert!(value.is_f64() || zeroth, "{field} = {value} refused");
                    continue;
                };
                let loaded = vec![LoadedMeasurement {
                    path: "m.json".into(),
                    sha256: "0".repeat(64),
                    document,
                }];
                let (text, markdown, svg) = render_all(build_report(&loaded));
                assert!(text.contains("warm_forward"), "{field} = {value}");
                assert!(markdown.contains("warm_forward"), "{field} = {value}");
                if let Err(e) = roxmltree::Document::parse(&svg) {
                    panic!("{field} = {value}: the SVG is not well-formed XML: {e}");
                }
                rendered += 1;
            }
        }
        // 27 fields x 3 integers (less repetition 0), and 2 time fields x 6 floats
        assert_eq!(rendered, 27 * 3 - 1 + 2 * 6);
    }

    /// `sample_json(64, 4)` with the `graph` object of
    /// examples/h200/graph/rust-small-float32.json (the same configuration).
    fn graph_document() -> Value {
        let mut doc: Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
        let counters = |base: u64, base_res: u64, end: u64, end_res: u64, peak: u64| {
            serde_json::json!({
                "baseline_allocated_bytes": base, "baseline_reserved_bytes": base_res,
                "end_allocated_bytes": end, "end_reserved_bytes": end_res,
                "peak_allocated_bytes": peak, "peak_reserved_bytes": end_res
            })
        };
        doc["graph"] = serde_json::json!({
            "memory_pool": "private",
            "capture_warmup_forwards": 3,
            "replays": 1000,
            "batches": 5,
            "batch_gpu_seconds_per_forward": [
                7.592991828918457e-06, 7.580480098724365e-06, 7.579328060150147e-06,
                7.580448150634766e-06, 7.579232215881348e-06
            ],
            "median_gpu_seconds_per_forward": 7.580448150634766e-06,
            "min_gpu_seconds_per_forward": 7.579232215881348e-06,
            "max_gpu_seconds_per_forward": 7.592991828918457e-06,
            "synchronised_wall_seconds_median": 1.2915e-05,
            "synchronised_wall_seconds_min": 1.2763e-05,
            "synchronised_wall_seconds_max": 2.3448e-05,
            "capture_wall_seconds": 0.008089602,
            "capture": counters(34_739_712, 35_651_584, 69_347_840, 73_400_320, 69_376_512),
            "replay": counters(69_347_840, 73_400_320, 69_347_840, 73_400_320, 69_347_840),
        });
        doc
    }

    /// What the reader accepts in a group of graph fields.
    #[derive(Clone, Copy)]
    enum Accepts {
        /// Any number (`u64` values read as floats).
        Float,
        /// An unsigned integer.
        Count,
        /// 1 to `MAX_REPLAYS`: of the extreme values, 1 only.
        Replays,
        /// Nothing else than the number of batch times (5): none of the extreme values.
        Batches,
    }

    /// The numeric fields of the `graph` object, in groups set together so that the reader's
    /// checks (min ≤ median ≤ max, allocated ≤ reserved) still hold and the value reaches the
    /// report.
    const GRAPH_FIELDS: [(&[&str], Accepts); 8] = [
        (&["/graph/capture_warmup_forwards"], Accepts::Count),
        (&["/graph/replays"], Accepts::Replays),
        (&["/graph/batches"], Accepts::Batches),
        (
            &[
                "/graph/batch_gpu_seconds_per_forward/*",
                "/graph/median_gpu_seconds_per_forward",
                "/graph/min_gpu_seconds_per_forward",
                "/graph/max_gpu_seconds_per_forward",
            ],
            Accepts::Float,
        ),
        (
            &[
                "/graph/synchronised_wall_seconds_median",
                "/graph/synchronised_wall_seconds_min",
                "/graph/synchronised_wall_seconds_max",
            ],
            Accepts::Float,
        ),
        (&["/graph/capture_wall_seconds"], Accepts::Float),
        (&["/graph/capture/*"], Accepts::Count),
        (&["/graph/replay/*"], Accepts::Count),
    ];

    /// The graph section of a rendered report: the lines after its title.
    fn graph_section<'a>(output: &'a str, title: &str) -> Vec<&'a str> {
        output
            .split_once(title)
            .map_or_else(Vec::new, |(_, rest)| rest.lines().collect())
    }

    #[test]
    fn graph_fields_at_their_extremes_render_one_line_each() {
        let base = graph_document();
        // The graph fields, and the phase fields too (the eager time is the warm_forward
        // rows' median GPU time), each group at every extreme value.
        let groups = GRAPH_FIELDS.iter().copied().chain(FIELDS.iter().map(|f| {
            let accepts = if f.ends_with("_seconds") {
                Accepts::Float
            } else {
                Accepts::Count
            };
            (std::slice::from_ref(f), accepts)
        }));
        let mut rendered = 0;
        for (fields, accepts) in groups {
            for value in &extreme_values() {
                let mut doc = base.clone();
                for field in fields {
                    set(&mut doc, field, value);
                }
                let zeroth = fields[0].ends_with("repetition") && value == &Value::from(0u64);
                let expected = match accepts {
                    Accepts::Float => true,
                    Accepts::Count => !value.is_f64() && !zeroth,
                    Accepts::Replays => value == &Value::from(1u64),
                    Accepts::Batches => false,
                };
                let parsed = crate::document::parse(doc.to_string().as_bytes());
                assert_eq!(parsed.is_ok(), expected, "{fields:?} = {value}: {parsed:?}");
                let Ok(document) = parsed else { continue };
                let graph = document.graph.clone().expect("a graph object");
                let loaded = vec![LoadedMeasurement {
                    path: "m.json".into(),
                    sha256: "0".repeat(64),
                    document,
                }];
                let (text, markdown, svg) = render_all(build_report(&loaded));
                // One line per summary line, in order; the achieved line only with a
                // positive graph time.
                let mut starts = vec!["[1] graph floor: ", "[1] eager vs graph: "];
                if graph.median_gpu_seconds_per_forward > 0.0 {
                    starts.push("[1] achieved by graph time: ");
                }
                starts.push("[1] graph memory: ");
                for (output, title, indent) in [
                    (&text, "\nCUDA graph (docs/PROTOCOL.md §4.6)\n", "  "),
                    (
                        &markdown,
                        "\n### CUDA graph (docs/PROTOCOL.md §4.6)\n\n",
                        "- ",
                    ),
                ] {
                    let lines = graph_section(output, title);
                    assert_eq!(lines.len(), starts.len(), "{fields:?} = {value}: {output}");
                    for (line, start) in lines.iter().zip(&starts) {
                        assert!(
                            line.starts_with(&format!("{indent}{start}")),
                            "{fields:?} = {value}: {line}"
                        );
                        assert!(!line.chars().any(char::is_control), "{line:?}");
                    }
                }
                assert!(
                    roxmltree::Document::parse(&svg).is_ok(),
                    "{fields:?} = {value}"
                );
                rendered += 1;
            }
        }
        // graph: warm-up forwards and the two counter groups 3 integers each, replays 1,
        // batches none, the three time groups all 9 values; phases as in the test above
        assert_eq!(rendered, 3 * 3 + 1 + 3 * 9 + (27 * 3 - 1 + 2 * 6));
    }
}
