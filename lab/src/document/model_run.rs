//! The model-measurement document, schema `iteragpu-lab/model-measurement/v1`
//! (`lab/schema/model-measurement.schema.json`; `docs/PROTOCOL.md §4.9`): what
//! `lab measure --model` writes.
//!
//! A sibling of the synthetic measurement (`iteragpu-lab/measurement/v1`), not an extension
//! of it: that document is written by both twins (`lab` and the Python kit, which stays as
//! is) and is built around the synthetic MLP's width. This one shares its `tool`,
//! `environment` and the six allocator counters of every row (`docs/PROTOCOL.md §4.3`), and
//! adds the `model` (family, config digest, parameters, weights source), the `workload`, the
//! phases of a decoder run ([`ModelPhase`]) and `prediction`: `lab plan`'s figures for the
//! same model and workload, each beside its measured counterpart with the error.

use super::{MeasurementEnvironment, Tool};
use serde::{Deserialize, Serialize};

/// The `schema` value of every model-measurement document.
pub const MODEL_SCHEMA_ID: &str = "iteragpu-lab/model-measurement/v1";

/// The phases of a decoder run, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelPhase {
    /// The weights, one tensor at a time in materialisation order, and the rotary buffers.
    ModelLoad,
    /// The prompt token ids on the GPU (seeded random ids below the vocabulary), the prompt
    /// positions and the key positions of the cache (int64).
    Inputs,
    /// The static KV cache for the whole context, allocated once (zeros): the keys and values
    /// only, what `lab plan` counts as `kv_cache_bytes`.
    KvCache,
    /// The first prefill of the prompt.
    ColdPrefill,
    /// All warm-up prefills together (one row).
    Warmup,
    /// One timed prefill after warm-up (one row per repetition).
    WarmPrefill,
    /// One decode step: one token per sequence, written into the cache in place (one row per
    /// step).
    Decode,
    /// Warm-up on a side stream and capture of one decode step into a CUDA graph (`--graph`).
    GraphCapture,
    /// One replay of the captured decode step (one row per step, `--graph`).
    GraphDecode,
}

impl ModelPhase {
    /// The document name (`model_load`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ModelPhase::ModelLoad => "model_load",
            ModelPhase::Inputs => "inputs",
            ModelPhase::KvCache => "kv_cache",
            ModelPhase::ColdPrefill => "cold_prefill",
            ModelPhase::Warmup => "warmup",
            ModelPhase::WarmPrefill => "warm_prefill",
            ModelPhase::Decode => "decode",
            ModelPhase::GraphCapture => "graph_capture",
            ModelPhase::GraphDecode => "graph_decode",
        }
    }
}

impl std::fmt::Display for ModelPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One measured step: the same timing and counters as a synthetic phase row
/// ([`super::PhaseRow`]), with the tokens processed instead of forward passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPhaseRow {
    /// The step.
    pub phase: ModelPhase,
    /// 1-based index for `warm_prefill`, `decode` and `graph_decode`; `None` otherwise.
    pub repetition: Option<u64>,
    /// Token positions processed per sequence inside the step (0 for load, inputs, cache).
    pub tokens: u64,
    /// Host clock around the whole step, seconds.
    pub wall_seconds: f64,
    /// CUDA-event time around the work, seconds; `None` where not measured.
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

/// Where the weights came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightsSource {
    /// The folder's safetensors, read one tensor at a time.
    Safetensors,
    /// Seeded random tensors of the config's shapes (`--random-weights`).
    Random,
}

/// `model` in the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// `model_type` of the config.
    pub family: String,
    /// SHA-256 of the `config.json` bytes, lowercase hex.
    pub config_sha256: String,
    /// Parameters built (embedding, layers, norms, untied head).
    pub parameters: u64,
    /// Where the weights came from.
    pub weights_source: WeightsSource,
    /// The safetensors files read (file names), empty for random weights.
    pub weights_files: Vec<String>,
    /// Decoder layers.
    pub layers: u64,
    /// Layers with a sliding window (masked, with a full-length cache).
    pub sliding_window_layers: u64,
}

/// `workload` in the document: what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelWorkload {
    /// The GPU, `cuda:N`.
    pub device: String,
    /// Sequences.
    pub batch: u64,
    /// Prompt tokens per sequence.
    pub input_tokens: u64,
    /// Decode steps (generated tokens per sequence).
    pub output_tokens: u64,
    /// Cache length: input plus output tokens.
    pub context: u64,
    /// Element type of weights, activations and cache.
    pub dtype: super::Dtype,
    /// Warm-up prefills.
    pub warmup: u64,
    /// Timed prefills.
    pub repeats: u64,
    /// Seed of the random weights and of the prompt ids.
    pub seed: u64,
    /// Whether decode was also measured by CUDA-graph replay.
    pub graph: bool,
}

/// One predicted figure beside its measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compared {
    /// What is compared (`weights_allocated_bytes`, ...).
    pub figure: String,
    /// `lab plan`'s value, bytes.
    pub predicted_bytes: u64,
    /// Where the measured value comes from (`model_load end - baseline allocated`, ...).
    pub measured_from: String,
    /// The measured value, bytes.
    pub measured_bytes: u64,
    /// measured - predicted, bytes (signed).
    pub error_bytes: i64,
    /// error / predicted × 100, rounded half-to-even to 3 decimals, as an exact decimal
    /// string; `None` when the prediction is 0.
    pub error_percent: Option<rust_decimal::Decimal>,
}

/// `prediction` in the document: `lab plan`'s memory for the same model and workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    /// Always `lab plan` with the same batch, context and element type.
    pub source: String,
    /// The memory figures beside their measurements.
    pub memory: Vec<Compared>,
    /// The time model's seconds for the document's GPU beside the measured medians; `None`
    /// when the device is not one catalog GPU or the time model cannot price the workload
    /// (a note says why), and in documents written before the time model.
    pub time: Option<TimePrediction>,
    /// Why a figure is absent or how to read one.
    pub notes: Vec<String>,
}

/// `prediction.time`: the time model (`lab plan`'s, `docs/PLANNING.md`) for the document's
/// GPU, batch, prompt and output length on one GPU, beside the measured steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimePrediction {
    /// Catalog GPU id of the document's device (`crate::gpu_name::catalog_gpu`).
    pub gpu: String,
    /// Where that GPU's efficiency factors come from: `measured`, `carried over` (the H200's
    /// measured fractions transferred) or `assumed` (`data/gpu-perf.csv`).
    pub factors: String,
    /// What the two predicted figures are, in words.
    pub label: String,
    /// One entry per measured phase that has rows: `warm_prefill`, `decode` (eager profile),
    /// `graph_decode` (cuda-graphs profile).
    pub phases: Vec<ComparedTime>,
}

/// One phase's predicted seconds beside its measured median. Every figure is an exact
/// decimal string rounded half-to-even; the errors are computed from the figures as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparedTime {
    /// The measured phase (`warm_prefill`, `decode`, `graph_decode`).
    pub phase: ModelPhase,
    /// Engine profile of the expected figure (`eager`, `cuda-graphs`).
    pub profile: String,
    /// Datasheet peaks at 100 %, no launch cost, seconds, 9 decimals.
    pub ceiling_seconds: rust_decimal::Decimal,
    /// transformers' operators with the GPU's efficiency factors, seconds, 9 decimals.
    pub expected_seconds: rust_decimal::Decimal,
    /// Where the measured value comes from (`median gpu_seconds of 128 decode rows`, ...).
    pub measured_from: String,
    /// Median of the rows' `gpu_seconds` (`wall_seconds` where a row has none), seconds,
    /// 9 decimals.
    pub measured_seconds: rust_decimal::Decimal,
    /// measured − expected, seconds (signed).
    pub error_seconds: rust_decimal::Decimal,
    /// error / expected × 100, 3 decimals; `None` when the expected figure is 0.
    pub error_percent: Option<rust_decimal::Decimal>,
}

/// A whole model-measurement document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDocument {
    /// Always [`MODEL_SCHEMA_ID`].
    pub schema: String,
    /// Who wrote it.
    pub tool: Tool,
    /// UTC time the measurement started.
    pub created_utc: String,
    /// Software and GPU.
    pub environment: MeasurementEnvironment,
    /// The model.
    pub model: ModelFacts,
    /// What was asked.
    pub workload: ModelWorkload,
    /// One row per step, in order.
    pub phases: Vec<ModelPhaseRow>,
    /// `lab plan`'s figures beside the measured ones.
    pub prediction: Prediction,
}

impl ModelDocument {
    /// The first row of `phase`.
    pub fn first_row(&self, phase: ModelPhase) -> Option<&ModelPhaseRow> {
        self.phases.iter().find(|r| r.phase == phase)
    }
}

/// `predicted` beside `measured`, with the error.
pub fn compare(figure: &str, predicted: u64, measured_from: &str, measured: u64) -> Compared {
    let error = i128::from(measured) - i128::from(predicted);
    let error_percent = (predicted > 0).then(|| {
        (rust_decimal::Decimal::from_i128_with_scale(error, 0) * rust_decimal::Decimal::ONE_HUNDRED
            / rust_decimal::Decimal::from(predicted))
        .round_dp_with_strategy(3, rust_decimal::RoundingStrategy::MidpointNearestEven)
    });
    Compared {
        figure: figure.to_owned(),
        predicted_bytes: predicted,
        measured_from: measured_from.to_owned(),
        measured_bytes: measured,
        error_bytes: i64::try_from(error).unwrap_or(if error < 0 { i64::MIN } else { i64::MAX }),
        error_percent,
    }
}

/// Checks a model document: its `created_utc` and environment as the schema has them
/// ([`super::check_created_utc`], [`MeasurementEnvironment::check`]), then its rows: phases in protocol order, the single phases once
/// each, the repeated ones numbered 1, 2, …, peaks at least the end and baseline values.
///
/// # Errors
/// One line naming the first problem.
pub fn check_rows(document: &ModelDocument) -> std::result::Result<(), String> {
    super::check_created_utc(&document.created_utc)?;
    document.environment.check()?;
    let mut last = None;
    let mut counts = std::collections::BTreeMap::new();
    for (index, row) in document.phases.iter().enumerate() {
        if last.is_some_and(|p| p > row.phase) {
            return Err(format!("phase {} comes after a later phase", row.phase));
        }
        last = Some(row.phase);
        let n = counts.entry(row.phase).or_insert(0u64);
        *n += 1;
        let repeated = matches!(
            row.phase,
            ModelPhase::WarmPrefill | ModelPhase::Decode | ModelPhase::GraphDecode
        );
        match (repeated, row.repetition) {
            (true, Some(r)) if r == *n => {}
            (false, None) if *n == 1 => {}
            _ => return Err(format!("phase {} has a wrong repetition", row.phase)),
        }
        if row.peak_allocated_bytes < row.end_allocated_bytes.max(row.baseline_allocated_bytes)
            || row.peak_reserved_bytes < row.end_reserved_bytes.max(row.baseline_reserved_bytes)
        {
            return Err(format!(
                "phase {}: a peak is below its end or baseline",
                row.phase
            ));
        }
        let at = |e: String| format!("phases[{index}] ({}): {e}", row.phase);
        super::phase::check_seconds("wall_seconds", row.wall_seconds, false).map_err(at)?;
        if let Some(g) = row.gpu_seconds {
            super::phase::check_seconds("gpu_seconds", g, true).map_err(at)?;
        }
    }
    let w = &document.workload;
    let expect = [
        (ModelPhase::ModelLoad, 1),
        (ModelPhase::Inputs, 1),
        (ModelPhase::KvCache, 1),
        (ModelPhase::ColdPrefill, 1),
        (ModelPhase::Warmup, 1),
        (ModelPhase::WarmPrefill, w.repeats),
        (ModelPhase::Decode, w.output_tokens),
        (ModelPhase::GraphCapture, u64::from(w.graph)),
        (
            ModelPhase::GraphDecode,
            if w.graph { w.output_tokens } else { 0 },
        ),
    ];
    for (phase, n) in expect {
        let got = counts.get(&phase).copied().unwrap_or(0);
        if got != n {
            return Err(format!("{got} {phase} rows, expected {n}"));
        }
    }
    Ok(())
}
