//! The bounded GPU measurement of docs/PROTOCOL.md §4, without libtorch: flag validation, the analytic
//! numbers of the synthetic model, the measurement document (schema
//! `iteragpu-lab/measurement/v1`, `lab/schema/measurement.schema.json`), its atomic writing
//! (through [`crate::output`]), and the human summary. The GPU work itself runs in the `lab-torch-worker` child process
//! (see [`crate::worker`]); this module never links libtorch, so CI tests it without a GPU.
//!
//! What the memory counters of a phase row mean (whose memory, allocated vs reserved, peaks)
//! is defined once, in docs/PROTOCOL.md §4.3.

use crate::environment::MeasurementEnvironment;
use crate::units::mib;
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// The `schema` value of every measurement document.
pub const SCHEMA_ID: &str = "iteragpu-lab/measurement/v1";

/// The `tool.name` value of every measurement document.
pub const TOOL_NAME: &str = "iteragpu-lab";

/// Granularity of the caching allocator's blocks, in bytes: every tensor's storage is rounded
/// up to a multiple of 512 (PyTorch `c10/cuda/CUDACachingAllocator.cpp`, `kMinBlockSize`).
pub const ALLOCATOR_BLOCK_BYTES: u64 = 512;

/// Median GPU time per forward (seconds) under which a warm forward is flagged launch-bound:
/// the CUDA events then mostly time the GPU waiting for the host's kernel launches, not the
/// arithmetic. Chosen from the H200 benchmark (BENCHMARKS.md): every configuration whose
/// eager forward costs several times its CUDA-graph replay showed under 60 µs of event time
/// (e.g. 1x16x64 float32: 37–49 µs against a 7 µs replay), the arithmetic-bound one
/// (2x128x1024 float32) 178–189 µs against a 164 µs replay.
pub const LAUNCH_BOUND_GPU_SECONDS: f64 = 100e-6;

/// Element type of weights and input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE 754 single precision, 4 bytes.
    Float32,
    /// IEEE 754 half precision, 2 bytes.
    Float16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa), 2 bytes.
    Bfloat16,
}

impl Dtype {
    /// The name used on the command line and in the document (`float32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Float32 => "float32",
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Float32 => 4,
            Dtype::Float16 | Dtype::Bfloat16 => 2,
        }
    }

    /// Parses `float32`, `float16` or `bfloat16`; anything else is a usage error (exit 2).
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim() {
            "float32" => Ok(Dtype::Float32),
            "float16" => Ok(Dtype::Float16),
            "bfloat16" => Ok(Dtype::Bfloat16),
            other => Err(Error::usage(format!(
                "--dtype must be one of float32, float16, bfloat16, got '{other}'"
            ))),
        }
    }
}

/// Returns the GPU index of a `cuda:N` device string. `cpu`, `mps`, a bare `cuda` and anything
/// else are usage errors (exit 2) that say what to write instead: the measurement never falls
/// back to the CPU. ROCm builds of PyTorch also call their GPUs `cuda:N`.
pub fn parse_device(text: &str) -> Result<u32> {
    let text = text.trim();
    if let Some(index) = text.strip_prefix("cuda:") {
        if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
            return index
                .parse::<u32>()
                .ok()
                .filter(|i| *i <= i32::MAX as u32)
                .ok_or_else(|| {
                    Error::usage(format!("device index '{index}' is too large: write cuda:N"))
                });
        }
        return Err(Error::usage(format!(
            "unrecognised device '{text}': write cuda:N with N a GPU index, e.g. --device cuda:0"
        )));
    }
    Err(Error::usage(match text {
        "cuda" => "name the GPU index explicitly, e.g. --device cuda:0 (a bare 'cuda' is refused)"
            .to_owned(),
        "cpu" => "'cpu' is not a GPU: lab measures a GPU and never falls back to the CPU; \
                  use --device cuda:N"
            .to_owned(),
        t if t == "mps" || t.starts_with("mps:") => format!(
            "'{t}' (Apple Metal) is not supported: the measurement needs a CUDA or ROCm GPU named cuda:N"
        ),
        t => format!(
            "unrecognised device '{t}': write cuda:N, e.g. --device cuda:0 (ROCm GPUs are cuda:N too)"
        ),
    }))
}

/// Parses a whole number flag `name` with `minimum <= value <= maximum`; a usage error otherwise.
pub fn parse_count(name: &str, text: &str, minimum: u64, maximum: u64) -> Result<u64> {
    let trimmed = text.trim();
    let digits = trimmed.strip_prefix('+').unwrap_or(trimmed);
    let value = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse::<u64>().ok()
    } else {
        None
    };
    match value {
        Some(v) if v >= minimum && v <= maximum => Ok(v),
        Some(_) if maximum < u64::MAX => Err(Error::usage(format!(
            "{name} must be a whole number from {minimum} to {maximum}, got '{trimmed}'"
        ))),
        _ => Err(Error::usage(format!(
            "{name} must be a whole number >= {minimum}, got '{trimmed}'"
        ))),
    }
}

/// What the user asked to measure (`configuration` in the document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    /// The GPU, `cuda:N`.
    pub device: String,
    /// Batch size (sequences), >= 1.
    pub batch: u64,
    /// Positions per sequence, >= 1 (no attention, no KV cache).
    pub context: u64,
    /// Model width; hidden = 4 × width.
    pub width: u64,
    /// Element type of weights and input.
    pub dtype: Dtype,
    /// Warm-up passes, measured together as one row; may be 0.
    pub warmup: u64,
    /// Measured warm passes, one row each, >= 1.
    pub repeats: u64,
    /// Seed of the weights (CPU generator) and the input (GPU generator).
    pub seed: u64,
}

/// Largest batch × context × 4·width element count accepted: libtorch sizes are signed 64-bit.
const MAX_ELEMENTS: u64 = i64::MAX as u64 / 8;

impl Configuration {
    /// Validates raw flag values (as typed) into a configuration. Every error is a usage error
    /// (exit 2) naming the flag. Checked before any worker is started.
    #[allow(clippy::too_many_arguments)]
    pub fn from_flags(
        device: &str,
        batch: &str,
        context: &str,
        width: &str,
        dtype: &str,
        warmup: &str,
        repeats: &str,
        seed: &str,
    ) -> Result<Self> {
        let index = parse_device(device)?;
        let batch = parse_count("--batch", batch, 1, u64::MAX)?;
        let context = parse_count("--context", context, 1, u64::MAX)?;
        let width = parse_count("--width", width, 1, u64::MAX)?;
        let dtype = Dtype::parse(dtype)?;
        let warmup = parse_count("--warmup", warmup, 0, u32::MAX as u64)?;
        let repeats = parse_count("--repeats", repeats, 1, u32::MAX as u64)?;
        let seed = parse_count("--seed", seed, 0, i64::MAX as u64)?;
        let config = Configuration {
            device: format!("cuda:{index}"),
            batch,
            context,
            width,
            dtype,
            warmup,
            repeats,
            seed,
        };
        config.sizes()?;
        Ok(config)
    }

    /// The device index N of `cuda:N`.
    pub fn device_index(&self) -> Result<u32> {
        parse_device(&self.device)
    }

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

/// The autograd mode of every forward, recorded as `synthetic_model.autograd`. Inference mode
/// is PyTorch's recommended mode for code that never needs gradients ("Inference Mode",
/// https://docs.pytorch.org/docs/stable/notes/autograd.html#inference-mode).
pub const AUTOGRAD_MODE: &str = "inference_mode";

/// Analytic sizes of the synthetic MLP `Linear(width → 4·width) → GELU(erf) → Linear(4·width →
/// width)`, both with bias (`synthetic_model` in the document). Nothing here is measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticModel {
    /// Human-readable layer list.
    pub architecture: String,
    /// Autograd mode the forwards run under: `"inference_mode"` (`c10::InferenceMode` in Rust,
    /// `torch.inference_mode()` in Python: no gradients, no autograd bookkeeping). `None` in
    /// documents written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autograd: Option<String>,
    /// Model width.
    pub width: u64,
    /// Hidden width = 4 × width.
    pub hidden: u64,
    /// Weights and biases: width·hidden + hidden + hidden·width + width.
    pub parameters: u64,
    /// Bytes per element of the chosen dtype (4 or 2).
    pub dtype_bytes: u64,
    /// parameters × dtype_bytes.
    pub parameter_bytes: u64,
    /// batch × context × width × dtype_bytes.
    pub input_bytes: u64,
    /// Output of one forward, same shape as the input, in bytes.
    pub output_bytes: u64,
    /// Floating-point operations of one forward: 2 × tokens × (width·hidden + hidden·width),
    /// the two matrix products only (a multiply-add counts 2; biases and GELU left out).
    pub flops_per_forward: u64,
}

impl SyntheticModel {
    /// The analytic numbers for a configuration; `None` on 64-bit overflow.
    pub fn new(batch: u64, context: u64, width: u64, dtype: Dtype) -> Option<Self> {
        let hidden = width.checked_mul(4)?;
        let matrix = width.checked_mul(hidden)?;
        let parameters = matrix
            .checked_mul(2)?
            .checked_add(hidden)?
            .checked_add(width)?;
        let dtype_bytes = dtype.bytes();
        let tokens = batch.checked_mul(context)?;
        let io_bytes = tokens.checked_mul(width)?.checked_mul(dtype_bytes)?;
        Some(SyntheticModel {
            architecture: format!(
                "Linear({width}->{hidden}, bias) -> GELU(erf) -> Linear({hidden}->{width}, bias)"
            ),
            autograd: Some(AUTOGRAD_MODE.to_owned()),
            width,
            hidden,
            parameters,
            dtype_bytes,
            parameter_bytes: parameters.checked_mul(dtype_bytes)?,
            input_bytes: io_bytes,
            output_bytes: io_bytes,
            flops_per_forward: tokens.checked_mul(matrix.checked_mul(2)?)?.checked_mul(2)?,
        })
    }

    /// Tokens (batch × context) implied by `input_bytes`.
    fn tokens(&self) -> u64 {
        self.input_bytes / self.width.saturating_mul(self.dtype_bytes).max(1)
    }

    /// Bytes the allocator is predicted to hand out for the weights: each of the four tensors
    /// (weight 1, bias 1, weight 2, bias 2) rounded up to [`ALLOCATOR_BLOCK_BYTES`].
    ///
    /// The `predicted_*` methods saturate at `u64::MAX`: `lab report` calls them on sizes read
    /// from a document, which may be absurd, and must not panic or wrap.
    pub fn predicted_weight_allocation(&self) -> u64 {
        let b = self.dtype_bytes;
        let matrix = self.width.saturating_mul(self.hidden).saturating_mul(b);
        [
            matrix,
            self.hidden.saturating_mul(b),
            matrix,
            self.width.saturating_mul(b),
        ]
        .into_iter()
        .map(round_to_block)
        .fold(0, u64::saturating_add)
    }

    /// Bytes predicted for the input (one tensor, rounded up to a block).
    pub fn predicted_input_allocation(&self) -> u64 {
        round_to_block(self.input_bytes)
    }

    /// Bytes predicted for one output (one tensor, rounded up to a block).
    pub fn predicted_output_allocation(&self) -> u64 {
        round_to_block(self.output_bytes)
    }

    /// Predicted peak extra bytes of one forward over its baseline, cuBLAS workspace left out:
    /// the hidden activation and its GELU coexist (2 × tokens × hidden), then the GELU output
    /// and the output coexist; the larger of the two.
    pub fn predicted_forward_peak_extra(&self) -> u64 {
        let hidden_act = round_to_block(
            self.tokens()
                .saturating_mul(self.hidden)
                .saturating_mul(self.dtype_bytes),
        );
        hidden_act
            .saturating_mul(2)
            .max(hidden_act.saturating_add(self.predicted_output_allocation()))
    }
}

/// `bytes` rounded up to the allocator's 512-byte block size (`u64::MAX` when that overflows).
pub fn round_to_block(bytes: u64) -> u64 {
    bytes
        .div_ceil(ALLOCATOR_BLOCK_BYTES)
        .saturating_mul(ALLOCATOR_BLOCK_BYTES)
}

/// One row of `phases`: one protocol step (docs/PROTOCOL.md §4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRow {
    /// A phase name: one of [`crate::report::Phase`]'s, `model_load` ... `warm_forward`.
    pub phase: String,
    /// 1-based index for `warm_forward`, `None` (JSON null) for the other phases.
    pub repetition: Option<u64>,
    /// Forward passes run inside the step (0 for model_load and inputs).
    pub forward_passes: u64,
    /// Host clock around the whole step (synchronize, counter reads, work, synchronize), s.
    pub wall_seconds: f64,
    /// Time between two CUDA events recorded on the current stream around the work, s;
    /// `None` where not measured. Includes the GPU waiting for the host's launches.
    pub gpu_seconds: Option<f64>,
    /// Allocated bytes after the first synchronize, before the work.
    pub baseline_allocated_bytes: u64,
    /// Reserved bytes after the first synchronize, before the work.
    pub baseline_reserved_bytes: u64,
    /// Allocated bytes after the final synchronize (the step's result still alive).
    pub end_allocated_bytes: u64,
    /// Reserved bytes after the final synchronize.
    pub end_reserved_bytes: u64,
    /// Highest allocated bytes during the step (peak reset at its start).
    pub peak_allocated_bytes: u64,
    /// Highest reserved bytes during the step (peak reset at its start).
    pub peak_reserved_bytes: u64,
}

/// `tool` in the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// Always [`TOOL_NAME`].
    pub name: String,
    /// The crate version of `lab`.
    pub version: String,
    /// `rust` for `lab`, `python` for `mesure_memoire.py`.
    pub implementation: String,
}

impl Tool {
    /// The `tool` object written by `lab`.
    pub fn rust() -> Self {
        Tool {
            name: TOOL_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            implementation: "rust".to_owned(),
        }
    }
}

/// A whole measurement document (schema `iteragpu-lab/measurement/v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Always [`SCHEMA_ID`].
    pub schema: String,
    /// Who wrote it.
    pub tool: Tool,
    /// UTC time the measurement started, `YYYY-MM-DDTHH:MM:SSZ`.
    pub created_utc: String,
    /// Software and GPU the numbers come from.
    pub environment: MeasurementEnvironment,
    /// What was asked.
    pub configuration: Configuration,
    /// Analytic sizes of the model.
    pub synthetic_model: SyntheticModel,
    /// One row per step, in order.
    pub phases: Vec<PhaseRow>,
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// Writes `document` as pretty JSON (final newline) to the new file `path`, atomically and
/// never over an existing file ([`crate::output::write_new`]).
///
/// # Errors
/// As [`crate::output::write_new`]: usage (exit 2) when `path` exists or its folder does not,
/// runtime (exit 1) when writing fails; no file is left behind.
pub fn write_new_document(path: &Path, document: &Document) -> Result<()> {
    let mut text = serde_json::to_string_pretty(document)
        .map_err(|e| Error::runtime(format!("cannot encode the measurement: {e}")))?;
    text.push('\n');
    crate::output::write_new(path, text.as_bytes())
}

/// Median of `values` (mean of the two middle values for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
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
        .filter(|r| r.phase == "warm_forward")
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

/// The readable report printed by `lab measure` after writing the file: the phase table, the
/// analytic predictions held against the measured counters, and the achieved FLOP/s.
pub fn summary_text(document: &Document) -> String {
    let mut out = String::new();
    let c = &document.configuration;
    let e = &document.environment;
    let _ = writeln!(
        out,
        "{} on {} ({}), batch {} × context {} × width {}, {}, warm-up {}, repeats {}, seed {}",
        document.synthetic_model.architecture,
        c.device,
        e.device_name,
        c.batch,
        c.context,
        c.width,
        c.dtype.name(),
        c.warmup,
        c.repeats,
        c.seed
    );
    let _ = writeln!(
        out,
        "{:<13}{:>4}{:>12}{:>12}{:>15}{:>15}{:>15}{:>15}{:>15}",
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
    for row in &document.phases {
        let rep = row.repetition.map(|r| r.to_string()).unwrap_or_default();
        let gpu = row
            .gpu_seconds
            .map(|g| format!("{:.4}", g * 1e3))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{:<13}{:>4}{:>12.4}{:>12}{:>15}{:>15}{:>15}{:>15}{:>15}",
            row.phase,
            rep,
            row.wall_seconds * 1e3,
            gpu,
            row.baseline_allocated_bytes,
            row.end_allocated_bytes,
            row.peak_allocated_bytes,
            row.end_reserved_bytes,
            row.peak_reserved_bytes
        );
    }
    let m = &document.synthetic_model;
    let _ = writeln!(out, "predicted (analytic) vs measured (allocated bytes):");
    let find = |name: &str| document.phases.iter().find(|r| r.phase == name);
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
        find("model_load").map(|r| signed_delta(r.end_allocated_bytes, r.baseline_allocated_bytes)),
    );
    compare(
        "input (inputs end - base)",
        m.predicted_input_allocation(),
        find("inputs").map(|r| signed_delta(r.end_allocated_bytes, r.baseline_allocated_bytes)),
    );
    let warm = find("warm_forward");
    compare(
        "output (warm_forward end - base)",
        m.predicted_output_allocation(),
        warm.map(|r| signed_delta(r.end_allocated_bytes, r.baseline_allocated_bytes)),
    );
    compare(
        "forward peak (warm peak - base)",
        m.predicted_forward_peak_extra(),
        warm.map(|r| signed_delta(r.peak_allocated_bytes, r.baseline_allocated_bytes)),
    );
    if let Some(cold) = find("cold_forward") {
        // Exact and signed: the cold forward may end below the prediction.
        let extra = Decimal::from(cold.end_allocated_bytes)
            - Decimal::from(cold.baseline_allocated_bytes)
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_model_numbers() {
        let m = SyntheticModel::new(1, 16, 64, Dtype::Float32).unwrap();
        assert_eq!(m.hidden, 256);
        assert_eq!(m.parameters, 64 * 256 + 256 + 256 * 64 + 64);
        assert_eq!(m.parameters, 33_088);
        assert_eq!(m.autograd.as_deref(), Some("inference_mode"));
        assert_eq!(m.parameter_bytes, 132_352);
        assert_eq!(m.input_bytes, 4_096);
        assert_eq!(m.output_bytes, 4_096);
        assert_eq!(m.flops_per_forward, 2 * 16 * (64 * 256 * 2));
        assert_eq!(m.flops_per_forward, 1_048_576);
        assert_eq!(
            m.architecture,
            "Linear(64->256, bias) -> GELU(erf) -> Linear(256->64, bias)"
        );
    }

    #[test]
    fn large_model_numbers() {
        let m = SyntheticModel::new(2, 128, 1024, Dtype::Bfloat16).unwrap();
        assert_eq!(m.hidden, 4096);
        assert_eq!(m.parameters, 8_393_728);
        assert_eq!(m.dtype_bytes, 2);
        assert_eq!(m.parameter_bytes, 16_787_456);
        assert_eq!(m.input_bytes, 2 * 128 * 1024 * 2);
        assert_eq!(m.flops_per_forward, 2 * 256 * 2 * 1024 * 4096);
        assert_eq!(m.flops_per_forward, 4_294_967_296);
    }

    #[test]
    fn predicted_allocations_round_to_blocks() {
        let m = SyntheticModel::new(1, 16, 64, Dtype::Float32).unwrap();
        // 65536 + 1024 + 65536 + 256 -> 256 rounds up to 512.
        assert_eq!(
            m.predicted_weight_allocation(),
            65_536 + 1_024 + 65_536 + 512
        );
        assert_eq!(m.predicted_input_allocation(), 4_096);
        // hidden activation 16 × 256 × 4 = 16384; twice that beats 16384 + 4096.
        assert_eq!(m.predicted_forward_peak_extra(), 32_768);
        assert_eq!(round_to_block(1), 512);
        assert_eq!(round_to_block(512), 512);
        assert_eq!(round_to_block(0), 0);
        assert_eq!(round_to_block(u64::MAX), u64::MAX);
    }

    #[test]
    fn overflow_is_none() {
        assert!(SyntheticModel::new(u64::MAX, 2, 2, Dtype::Float32).is_none());
        assert!(SyntheticModel::new(1, 1, u64::MAX / 2, Dtype::Float32).is_none());
    }

    #[test]
    fn devices() {
        assert_eq!(parse_device("cuda:0").unwrap(), 0);
        assert_eq!(parse_device("cuda:7").unwrap(), 7);
        for bad in [
            "cpu",
            "mps",
            "mps:0",
            "cuda",
            "cuda:",
            "cuda:-1",
            "cuda:x",
            "gpu",
            "",
            "cuda:99999999999",
        ] {
            let err = parse_device(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
        }
        assert!(parse_device("cpu")
            .unwrap_err()
            .to_string()
            .contains("never falls back"));
    }

    #[test]
    fn counts_and_flags() {
        assert_eq!(parse_count("--batch", "3", 1, u64::MAX).unwrap(), 3);
        assert_eq!(parse_count("--batch", "+3", 1, u64::MAX).unwrap(), 3);
        for bad in ["0", "-1", "1.5", "abc", "", "1e3"] {
            assert!(parse_count("--batch", bad, 1, u64::MAX).is_err(), "{bad}");
        }
        assert_eq!(parse_count("--warmup", "0", 0, 10).unwrap(), 0);
        let c =
            Configuration::from_flags("cuda:0", "1", "16", "64", "float16", "1", "2", "0").unwrap();
        assert_eq!(c.dtype, Dtype::Float16);
        assert!(
            Configuration::from_flags("cuda:0", "1", "16", "64", "float64", "1", "2", "0").is_err()
        );
        let huge = Configuration::from_flags(
            "cuda:0",
            "4294967296",
            "4294967296",
            "64",
            "float32",
            "1",
            "2",
            "0",
        );
        assert_eq!(huge.unwrap_err().exit_code(), 2);
    }

    #[test]
    fn summary_shows_exact_mib() {
        let json = crate::report::tests::sample_json(64, 4);
        let document = crate::report::parse_document(json.as_bytes()).unwrap();
        let text = summary_text(&document);
        // 65,536 + 1,024 + 65,536 + 512 = 132,608 B = 0.12646... MiB
        assert!(
            text.contains("predicted        132608 B (     0.126 MiB)"),
            "{text}"
        );
        assert!(text.contains("left 0 B (0.000 MiB)"), "{text}");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
