//! The bounded GPU measurement (`docs/PROTOCOL.md §4`), without libtorch: flag validation,
//! one measurement run through the worker ([`run`], used by `lab measure` and by every point of
//! `lab sweep`), and the human summary. The GPU work itself runs in the `lab-torch-worker`
//! child process (see [`crate::worker`]); this module never links libtorch, so CI tests it
//! without a GPU. The document it returns is [`crate::document`]'s.
//!
//! Memory counters are the PyTorch CUDA caching allocator's, for this process and the chosen
//! GPU only (PyTorch docs, "CUDA semantics → Memory management", `torch.cuda.memory_stats`):
//! *allocated* bytes are held by live tensors; *reserved* bytes are what the allocator holds
//! from the driver (cudaMalloc), allocated included. Peaks are separate maxima since the last
//! `reset_peak_memory_stats`: never subtract one from the other.

use crate::device::Device;
use crate::document::{
    self, median, Configuration, Document, MeasurementEnvironment, Phase, PhaseRow, SyntheticModel,
    Tool,
};
use crate::text::one_line;
use crate::units::mib;
use crate::worker::{self, WorkerEnvironment, WorkerReply, WorkerRequest};
use crate::{Error, Result};
use rust_decimal::Decimal;
use std::fmt::Write as _;
use std::path::Path;

/// Rows of the summary's phase table shown before the elision line when a run has more than
/// [`SUMMARY_HEAD_ROWS`] + [`SUMMARY_TAIL_ROWS`] rows (`--repeats 2000000`): the text stays
/// readable, the JSON keeps every row.
pub const SUMMARY_HEAD_ROWS: usize = 14;

/// Rows shown after the elision line (the last warm forwards).
pub const SUMMARY_TAIL_ROWS: usize = 6;

/// Median GPU time per forward (seconds) under which a warm forward is flagged launch-bound:
/// the CUDA events then mostly time the GPU waiting for the host's kernel launches, not the
/// arithmetic. Chosen from the H200 benchmark (BENCHMARKS.md): every configuration whose
/// eager forward costs several times its CUDA-graph replay showed under 60 µs of event time
/// (e.g. 1x16x64 float32: 37–49 µs against a 7 µs replay), the arithmetic-bound one
/// (2x128x1024 float32) 178–189 µs against a 164 µs replay.
pub const LAUNCH_BOUND_GPU_SECONDS: f64 = 100e-6;

/// Largest batch × context × 4·width element count accepted: libtorch sizes are signed 64-bit.
const MAX_ELEMENTS: u64 = i64::MAX as u64 / 8;

impl Configuration {
    /// Checks that every tensor size fits libtorch's signed 64-bit sizes; returns the model.
    pub fn sizes(&self) -> Result<SyntheticModel> {
        let too_large = || {
            Error::usage(format!(
                "batch {} × context {} × width {} is too large to describe (more than {MAX_ELEMENTS} elements)",
                self.batch, self.context, self.width
            ))
        };
        let hidden = self.width.checked_mul(4).ok_or_else(too_large)?;
        let tokens = self.batch.checked_mul(self.context).ok_or_else(too_large)?;
        let widest = tokens.checked_mul(hidden).ok_or_else(too_large)?;
        let weights = self.width.checked_mul(hidden).ok_or_else(too_large)?;
        if widest > MAX_ELEMENTS || weights > MAX_ELEMENTS {
            return Err(too_large());
        }
        SyntheticModel::new(self.batch, self.context, self.width, self.dtype).ok_or_else(too_large)
    }
}

/// Measures `configuration` on its GPU through a fresh `worker` process (the path of a
/// `lab-torch-worker`, see [`worker::locate`]) and returns the whole document, checked
/// ([`document::check`]) but not written. `lab measure` and every point of `lab sweep` go
/// through here.
///
/// # Errors
/// - [`Error::Usage`] (exit 2): sizes too large, no worker that starts, no loadable libtorch,
///   no such GPU; nothing was measured.
/// - [`Error::OutOfMemory`] (exit 1): the worker reported its `out_of_memory` kind.
/// - [`Error::Runtime`] (exit 1): any other failure during the run, a worker that ended
///   without an answer or gave an unreadable or invalid one.
pub fn run(configuration: &Configuration, worker: &Path) -> Result<Document> {
    run_with_graph(configuration, None, worker)
}

/// [`run`], followed by the CUDA-graph floor with `graph_replays` replays when given
/// (`docs/PROTOCOL.md §4.6`; the document's `graph` object). Same errors as [`run`].
pub fn run_with_graph(
    configuration: &Configuration,
    graph_replays: Option<u64>,
    worker: &Path,
) -> Result<Document> {
    run_measured(configuration, graph_replays, worker).map(|m| m.document)
}

/// A measurement and what the worker saw beside it that is not part of the document.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The checked document.
    pub document: Document,
    /// Free bytes of the GPU when the worker started (after CUDA initialisation, before the
    /// first tensor); `lab sweep` uses it as the capacity of its memory model.
    pub free_memory_bytes_at_start: Option<u64>,
}

/// [`run_with_graph`], also returning the worker's free-memory reading. Same errors.
pub fn run_measured(
    configuration: &Configuration,
    graph_replays: Option<u64>,
    worker: &Path,
) -> Result<Measured> {
    let synthetic_model = configuration.sizes()?;
    let created_utc = document::utc_now();
    let request = WorkerRequest::Measure {
        configuration: configuration.clone(),
        graph_replays,
    };
    let reply = worker::call(worker, &request).map_err(|u| Error::usage(u.message()))??;
    let measured = match reply {
        WorkerReply::Measurement(m) => m,
        WorkerReply::Error(e) => return Err(e.into_error()),
        WorkerReply::Environment(_) => {
            return Err(Error::runtime(
                "the GPU worker answered another question; no file was written",
            ))
        }
    };
    let environment = environment_of(
        &measured.environment,
        configuration.device,
        crate::environment::query_driver(),
    )?;
    let document = Document {
        schema: document::SCHEMA_ID.to_owned(),
        tool: Tool::rust(),
        created_utc,
        environment,
        configuration: configuration.clone(),
        synthetic_model,
        phases: measured.phases,
        graph: measured.graph.map(|g| *g),
    };
    document::check(&document).map_err(|e| {
        Error::runtime(format!(
            "the GPU worker's rows are not a valid measurement ({e}); no file was written"
        ))
    })?;
    Ok(Measured {
        document,
        free_memory_bytes_at_start: measured.environment.free_memory_bytes,
    })
}

/// The document's environment from the worker's report of `device`.
///
/// # Errors
/// [`Error::Runtime`] when the worker described no GPU or another one than asked.
fn environment_of(
    worker: &WorkerEnvironment,
    device: Device,
    driver: Option<document::Driver>,
) -> Result<MeasurementEnvironment> {
    let d = worker
        .device
        .as_ref()
        .ok_or_else(|| Error::runtime("the GPU worker reported no device; no file was written"))?;
    if d.index != device.index() {
        // The worker's index is any u32; shown by the device grammar when it is one.
        let measured = Device::new(d.index).map_or_else(|| d.index.to_string(), |m| m.to_string());
        return Err(Error::runtime(format!(
            "the GPU worker measured {measured} instead of {device}; no file was written"
        )));
    }
    Ok(MeasurementEnvironment {
        runtime: document::Runtime::rust(),
        libtorch: worker.libtorch.clone(),
        device,
        device_name: d.name.clone(),
        compute_capability: d.compute_capability.clone(),
        total_memory_bytes: d.total_memory_bytes,
        multiprocessor_count: d.multiprocessor_count,
        device_count: worker.device_count,
        tf32_matmul_allowed: worker.tf32_matmul_allowed.unwrap_or(false),
        driver,
    })
}
/// Summary numbers of the warm forwards of a document, used by the human summary.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmSummary {
    /// Median wall seconds per warm forward.
    pub median_wall_seconds: f64,
    /// Median CUDA-event seconds per warm forward, when measured.
    pub median_gpu_seconds: Option<f64>,
    /// Smallest and largest wall seconds.
    pub wall_range: (f64, f64),
    /// flops_per_forward / median GPU seconds (FLOP/s), when measured.
    pub achieved_flops_gpu: Option<f64>,
    /// flops_per_forward / median wall seconds (FLOP/s).
    pub achieved_flops_wall: f64,
    /// Whether the median GPU time is under [`LAUNCH_BOUND_GPU_SECONDS`].
    pub launch_bound: bool,
}

/// Warm-forward statistics of `document`; `None` when it has no warm_forward row.
pub fn warm_summary(document: &Document) -> Option<WarmSummary> {
    let rows: Vec<&PhaseRow> = document
        .phases
        .iter()
        .filter(|r| r.phase == Phase::WarmForward)
        .collect();
    let walls: Vec<f64> = rows.iter().map(|r| r.wall_seconds).collect();
    let gpus: Vec<f64> = rows.iter().filter_map(|r| r.gpu_seconds).collect();
    let median_wall = median(&walls)?;
    let median_gpu = median(&gpus);
    let flops = document.synthetic_model.flops_per_forward as f64;
    let min = walls.iter().copied().fold(f64::INFINITY, f64::min);
    let max = walls.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(WarmSummary {
        median_wall_seconds: median_wall,
        median_gpu_seconds: median_gpu,
        wall_range: (min, max),
        achieved_flops_gpu: median_gpu.filter(|g| *g > 0.0).map(|g| flops / g),
        achieved_flops_wall: if median_wall > 0.0 {
            flops / median_wall
        } else {
            0.0
        },
        launch_bound: median_gpu.unwrap_or(median_wall) < LAUNCH_BOUND_GPU_SECONDS,
    })
}

fn signed_delta(end: u64, start: u64) -> i128 {
    i128::from(end) - i128::from(start)
}

/// One row of the summary's phase table.
fn phase_line(out: &mut String, row: &PhaseRow, rep_width: usize) {
    let rep = row.repetition.map(|r| r.to_string()).unwrap_or_default();
    let gpu = row
        .gpu_seconds
        .map(|g| format!("{:.4}", g * 1e3))
        .unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "{:<13}{:>rep_width$}{:>12.4}{:>12}{:>15}{:>15}{:>15}{:>15}{:>15}",
        row.phase,
        rep,
        row.wall_seconds * 1e3,
        gpu,
        row.counters.baseline_allocated_bytes,
        row.counters.end_allocated_bytes,
        row.counters.peak_allocated_bytes,
        row.counters.end_reserved_bytes,
        row.counters.peak_reserved_bytes
    );
}

/// The readable report printed by `lab measure` after writing the file: the phase table, the
/// analytic predictions held against the measured counters, and the achieved FLOP/s.
pub fn summary_text(document: &Document) -> String {
    let mut out = String::new();
    let c = &document.configuration;
    let e = &document.environment;
    let _ = writeln!(
        out,
        "{} on {} ({}), batch {} × context {} × width {}, {}, warm-up {}, repeats {}, seed {}",
        one_line(&document.synthetic_model.architecture),
        c.device,
        one_line(&e.device_name),
        c.batch,
        c.context,
        c.width,
        c.dtype.name(),
        c.warmup,
        c.repeats,
        c.seed
    );
    // The repetition column fits the largest repetition (a space before it at least).
    let rep_width = document
        .phases
        .iter()
        .filter_map(|r| r.repetition)
        .max()
        .map_or(4, |r| (r.to_string().len() + 1).max(4));
    let _ = writeln!(
        out,
        "{:<13}{:>rep_width$}{:>12}{:>12}{:>15}{:>15}{:>15}{:>15}{:>15}",
        "phase",
        "rep",
        "wall ms",
        "gpu ms",
        "base alloc",
        "end alloc",
        "peak alloc",
        "end reserved",
        "peak reserved"
    );
    let rows = &document.phases;
    let (head, tail) = if rows.len() > SUMMARY_HEAD_ROWS + SUMMARY_TAIL_ROWS {
        (SUMMARY_HEAD_ROWS, SUMMARY_TAIL_ROWS)
    } else {
        (rows.len(), 0)
    };
    for row in &rows[..head] {
        phase_line(&mut out, row, rep_width);
    }
    if tail > 0 {
        let hidden = rows.len() - head - tail;
        let _ = writeln!(
            out,
            "… {hidden} more rows not shown here (every row is in the JSON file; the warm-forward \
             statistics below cover all {} warm forwards)",
            document.rows_of(Phase::WarmForward).count()
        );
        for row in &rows[rows.len() - tail..] {
            phase_line(&mut out, row, rep_width);
        }
    }
    let m = &document.synthetic_model;
    let _ = writeln!(out, "predicted (analytic) vs measured (allocated bytes):");
    let find = |phase: Phase| document.first_row(phase);
    let mut compare = |label: &str, predicted: u64, measured: Option<i128>| {
        let measured = measured
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {label:<34} predicted {predicted:>13} B ({:>10} MiB)   measured {measured:>13} B",
            mib(predicted, 3)
        );
    };
    compare(
        "weights (model_load end - base)",
        m.predicted_weight_allocation(),
        find(Phase::ModelLoad).map(|r| {
            signed_delta(
                r.counters.end_allocated_bytes,
                r.counters.baseline_allocated_bytes,
            )
        }),
    );
    compare(
        "input (inputs end - base)",
        m.predicted_input_allocation(),
        find(Phase::Inputs).map(|r| {
            signed_delta(
                r.counters.end_allocated_bytes,
                r.counters.baseline_allocated_bytes,
            )
        }),
    );
    let warm = find(Phase::WarmForward);
    compare(
        "output (warm_forward end - base)",
        m.predicted_output_allocation(),
        warm.map(|r| {
            signed_delta(
                r.counters.end_allocated_bytes,
                r.counters.baseline_allocated_bytes,
            )
        }),
    );
    compare(
        "forward peak (warm peak - base)",
        m.predicted_forward_peak_extra(),
        warm.map(|r| {
            signed_delta(
                r.counters.peak_allocated_bytes,
                r.counters.baseline_allocated_bytes,
            )
        }),
    );
    if let Some(cold) = find(Phase::ColdForward) {
        // Exact and signed: the cold forward may end below the prediction.
        let extra = Decimal::from(cold.counters.end_allocated_bytes)
            - Decimal::from(cold.counters.baseline_allocated_bytes)
            - Decimal::from(m.predicted_output_allocation());
        let _ = writeln!(
            out,
            "  the cold forward left {extra} B ({} MiB) allocated beyond its output (cuBLAS \
             workspace and library state; not in the prediction)",
            mib(extra, 3)
        );
    }
    if let Some(w) = warm_summary(document) {
        let gpu = w
            .median_gpu_seconds
            .map(|g| format!("{:.1} µs", g * 1e6))
            .unwrap_or_else(|| "not measured".into());
        let _ = writeln!(
            out,
            "warm forward: median wall {:.1} µs (min {:.1}, max {:.1}), median GPU events {gpu}; {} FLOP per forward",
            w.median_wall_seconds * 1e6,
            w.wall_range.0 * 1e6,
            w.wall_range.1 * 1e6,
            m.flops_per_forward
        );
        let by_gpu = w
            .achieved_flops_gpu
            .map(|f| format!("{:.3} TFLOP/s by GPU events", f / 1e12))
            .unwrap_or_else(|| "no GPU event time".into());
        let _ = writeln!(
            out,
            "achieved: {by_gpu}, {:.3} TFLOP/s by wall time",
            w.achieved_flops_wall / 1e12
        );
        if w.launch_bound {
            let _ = writeln!(
                out,
                "launch-bound: under {:.0} µs per forward the GPU mostly waits for the host's kernel \
                 launches; these times measure launch overhead, not arithmetic (see BENCHMARKS.md \
                 for the CUDA-graph floor)",
                LAUNCH_BOUND_GPU_SECONDS * 1e6
            );
        }
    }
    if let Some(graph) = &document.graph {
        let eager = warm_summary(document).and_then(|w| w.median_gpu_seconds);
        out.push_str(&document::graph::summary_text(
            graph,
            eager,
            document.synthetic_model.flops_per_forward,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Dtype;

    #[test]
    fn sizes_are_checked() {
        let c = Configuration {
            device: Device::new(0).unwrap(),
            batch: 4_294_967_296,
            context: 4_294_967_296,
            width: 64,
            dtype: Dtype::Float32,
            warmup: 1,
            repeats: 2,
            seed: 0,
        };
        assert_eq!(c.sizes().unwrap_err().exit_code(), 2);
    }

    #[test]
    fn a_long_run_keeps_a_short_readable_summary() {
        let json = crate::document::tests::sample_json(64, 4);
        let mut document = document::parse(json.as_bytes()).unwrap();
        let warm = document.first_row(Phase::WarmForward).unwrap().clone();
        let repeats = 200_000u64;
        document.phases.retain(|r| r.phase != Phase::WarmForward);
        document.phases.extend((1..=repeats).map(|r| PhaseRow {
            repetition: Some(r),
            wall_seconds: r as f64 * 1e-6,
            ..warm.clone()
        }));
        document.configuration.repeats = repeats;
        let text = summary_text(&document);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() < 40, "{} lines", lines.len());
        // the head: the four single phases and the first ten warm forwards
        assert!(lines[2].starts_with("model_load"), "{text}");
        assert!(
            lines[15].starts_with("warm_forward      10"),
            "{:?}",
            lines[15]
        );
        assert_eq!(
            lines[16],
            "… 199984 more rows not shown here (every row is in the JSON file; the warm-forward \
             statistics below cover all 200000 warm forwards)"
        );
        assert!(lines[22].starts_with("warm_forward  200000"), "{text}");
        // statistics over every warm forward: median of 1..=200000 µs
        assert!(
            text.contains("median wall 100000.5 µs (min 1.0, max 200000.0)"),
            "{text}"
        );
        // a short run is shown whole
        let short = document::parse(json.as_bytes()).unwrap();
        assert!(!summary_text(&short).contains("not shown"));
        assert_eq!(summary_text(&short).lines().count(), 2 + 6 + 6 + 2);
    }

    #[test]
    fn summary_shows_exact_mib() {
        let json = crate::document::tests::sample_json(64, 4);
        let document = document::parse(json.as_bytes()).unwrap();
        let text = summary_text(&document);
        // 65,536 + 1,024 + 65,536 + 512 = 132,608 B = 0.12646... MiB
        assert!(
            text.contains("predicted        132608 B (     0.126 MiB)"),
            "{text}"
        );
        assert!(text.contains("left 0 B (0.000 MiB)"), "{text}");
    }
}
