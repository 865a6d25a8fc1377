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
//! lines after the tables: those of `lab measure`'s own summary ([`graph::summary_text`](crate::document::graph::summary_text)),
//! one set per file, the eager time being the median GPU time of the file's `warm_forward`
//! rows. Without any `graph` object the report is exactly as before.
//!
//! The files: this one the report and its rows ([`build_report`]); `prediction` the analytic
//! prediction; `tables` the text and Markdown tables; `graph` the graph-floor lines; `chart`
//! the SVG chart; `json` the `--json` output (the rows written by hand, in the layout serde
//! gives [`Report`]).

mod chart;
#[cfg(test)]
mod extremes;
mod graph;
mod json;
mod prediction;
mod tables;
#[cfg(test)]
mod tests;

pub use chart::{chart_order, memory_axis, render_svg, tick_label, SVG_LEGEND_MAX};
pub use json::{write_json, write_json_of};
pub use prediction::{predict, Prediction, PREDICTION_NOTE};
pub use tables::{render_markdown, render_text};

use crate::document::graph::GraphSection;
use crate::document::{
    Configuration, Document, LoadedMeasurement, Phase, PhaseRow, SyntheticModel,
};
use rust_decimal::Decimal;
use serde::Serialize;

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

/// One row of a phase table: a measured row of one file with its prediction.
///
/// JSON: `file_index`, the measured row's keys in its own order, then the prediction's and
/// `achieved_flops_per_second` (see the `Serialize` impl below: written out field by field,
/// as fast as a plain struct, where `#[serde(flatten)]` went through a map).
#[derive(Debug, Clone)]
pub struct ReportRow {
    /// 1-based index of the file in the report.
    pub file_index: usize,
    /// The measured row.
    pub measured: PhaseRow,
    /// Predicted end allocated bytes.
    pub predicted_end_allocated_bytes: u64,
    /// Predicted peak allocated bytes.
    pub predicted_peak_allocated_bytes: u64,
    /// Measured peak allocated minus predicted peak allocated, bytes (may be negative).
    pub peak_allocated_minus_predicted_bytes: i128,
    /// FLOP/s from the GPU time (forward phases with a GPU time only): the forward's FLOPs
    /// times its passes over the GPU seconds (their shortest round-trip decimal), exact,
    /// half-to-even to a whole FLOP/s ([`achieved_flops_per_second`]).
    pub achieved_flops_per_second: Option<Decimal>,
}

impl Serialize for ReportRow {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let m = &self.measured;
        let mut row = serializer.serialize_struct("ReportRow", 17)?;
        row.serialize_field("file_index", &self.file_index)?;
        row.serialize_field("phase", &m.phase)?;
        row.serialize_field("repetition", &m.repetition)?;
        row.serialize_field("forward_passes", &m.forward_passes)?;
        row.serialize_field("wall_seconds", &m.wall_seconds)?;
        row.serialize_field("gpu_seconds", &m.gpu_seconds)?;
        row.serialize_field(
            "baseline_allocated_bytes",
            &m.counters.baseline_allocated_bytes,
        )?;
        row.serialize_field(
            "baseline_reserved_bytes",
            &m.counters.baseline_reserved_bytes,
        )?;
        row.serialize_field("end_allocated_bytes", &m.counters.end_allocated_bytes)?;
        row.serialize_field("end_reserved_bytes", &m.counters.end_reserved_bytes)?;
        row.serialize_field("peak_allocated_bytes", &m.counters.peak_allocated_bytes)?;
        row.serialize_field("peak_reserved_bytes", &m.counters.peak_reserved_bytes)?;
        row.serialize_field(
            "predicted_end_allocated_bytes",
            &self.predicted_end_allocated_bytes,
        )?;
        row.serialize_field(
            "predicted_peak_allocated_bytes",
            &self.predicted_peak_allocated_bytes,
        )?;
        row.serialize_field(
            "peak_allocated_minus_predicted_bytes",
            &self.peak_allocated_minus_predicted_bytes,
        )?;
        row.serialize_field(
            "achieved_flops_per_second",
            &self.achieved_flops_per_second.map(|d| d.to_string()),
        )?;
        row.end()
    }
}

/// FLOP/s of `passes` forwards of `flops_per_forward` FLOPs in `gpu_seconds`: exact decimal
/// arithmetic on the seconds as `--json` shows them (their shortest round-trip decimal,
/// [`crate::stdout::plain_decimal`]), half-to-even to a whole FLOP/s; `None` without
/// passes, for a time that is not positive, or beyond the decimal's range.
pub fn achieved_flops_per_second(
    flops_per_forward: u64,
    passes: u64,
    gpu_seconds: Option<f64>,
) -> Option<Decimal> {
    let seconds: Decimal = crate::stdout::plain_decimal(gpu_seconds?).parse().ok()?;
    if passes == 0 || seconds <= Decimal::ZERO {
        return None;
    }
    let flops = Decimal::from(flops_per_forward).checked_mul(Decimal::from(passes))?;
    Some(
        flops
            .checked_div(seconds)?
            .round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointNearestEven),
    )
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

/// Builds the report of some loaded measurements.
pub fn build_report(measurements: &[LoadedMeasurement]) -> Report {
    Report {
        files: report_files(measurements),
        phases: Phase::ALL
            .iter()
            .map(|&phase| PhaseTable {
                phase,
                rows: report_rows(measurements, phase).collect(),
            })
            .collect(),
        prediction_note: PREDICTION_NOTE,
    }
}

/// The `files` of the report of `measurements`, in the order given.
fn report_files(measurements: &[LoadedMeasurement]) -> Vec<ReportFile> {
    measurements
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
        .collect()
}

/// The rows of `phase`'s table over `measurements`, file by file in document order, each
/// with its prediction (computed as they are taken: `--json` writes them without holding
/// the table).
fn report_rows(
    measurements: &[LoadedMeasurement],
    phase: Phase,
) -> impl Iterator<Item = ReportRow> + '_ {
    measurements.iter().enumerate().flat_map(move |(i, m)| {
        let model = &m.document.synthetic_model;
        m.document.rows_of(phase).map(move |r| {
            let prediction = predict(model, phase, r.counters.baseline_allocated_bytes);
            ReportRow {
                file_index: i + 1,
                measured: r.clone(),
                predicted_end_allocated_bytes: prediction.end_allocated_bytes,
                predicted_peak_allocated_bytes: prediction.peak_allocated_bytes,
                peak_allocated_minus_predicted_bytes: i128::from(r.counters.peak_allocated_bytes)
                    - i128::from(prediction.peak_allocated_bytes),
                achieved_flops_per_second: achieved_flops_per_second(
                    model.flops_per_forward,
                    r.forward_passes,
                    r.gpu_seconds,
                ),
            }
        })
    })
}
