//! Time and cost of a workload on each catalog GPU: the time half of `lab plan`
//! (`docs/PLANNING.md`, "Time and cost").
//!
//! - [`gpu_perf`]: bandwidth, tensor throughput, link and efficiency factors per GPU
//!   (`data/gpu-perf.csv`);
//! - [`engine`]: what the measured engine (`transformers`) runs and its measured factors;
//! - [`operators`]: the architecture as per-layer operators ([`operators::from_architecture`]
//!   is the one adapter to the plan's architecture struct) and one step's FLOPs and bytes;
//! - [`roofline`]: per-operator roofline, ceiling and expected, tensor parallel;
//! - [`workload`]: requests or training tokens, and the training method;
//! - [`calibration`]: `lab plan --calibration`, measured step times over expected ones;
//! - [`decision`]: setups per lot, batch, times, the cheapest way to finish, predicted costs;
//! - [`picture`]: the decision drawn (hours against cost to finish) as SVG and as an HTML page.
//!
//! Times and rates are decimals, rounded half-to-even once when shown (seconds to 6 places,
//! tokens per second to 1, hours to 2, USD as stated per field); counts stay integers.

pub mod calibration;
pub mod decision;
pub mod engine;
pub mod gpu_perf;
pub mod operators;
pub mod picture;
pub mod roofline;
pub mod workload;

#[cfg(test)]
mod validation;

#[cfg(test)]
mod ceiling_bound;

use crate::catalog::Catalog;
pub use crate::plan::family::Architecture;
use crate::plan::gpu_memory::GpuMemory;
use crate::plan::{self, packages::Need, Mode, Plan, Request, WeightsFormat};
use crate::{Error, Result};
use gpu_perf::{Format, GpuPerf};
use operators::Widths;
use roofline::Profile;
use rust_decimal::Decimal;
use serde::Serialize;
use workload::{Method, Workload};

/// The time answer (`time` in `lab plan --json`).
#[derive(Debug, Clone, Serialize)]
pub struct TimePlan {
    /// The workload.
    pub workload: Workload,
    /// Engine profile of the expected figures.
    pub profile: Profile,
    /// The products' format asked by the model (`bf16`, `fp16`, `fp8`).
    pub format: Format,
    /// Trained parameters (training), all or the adapters.
    pub trained_parameters: Option<u64>,
    /// Memory per sequence-batch for the method (LoRA: frozen base, adapters trained), at
    /// batch 1, bytes.
    pub need_bytes_batch_1: u64,
    /// Network bandwidth assumed between lots, GB/s.
    #[serde(with = "rust_decimal::serde::str")]
    pub network_gb_s: Decimal,
    /// Expected training MFU (assumed), when training.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub training_mfu: Option<Decimal>,
    /// Rows, cheapest finish first.
    pub rows: Vec<decision::Row>,
    /// Notes (context beyond the config's positions...).
    pub notes: Vec<String>,
    /// What the figures are: predictions, not observed costs.
    pub label: String,
}

/// What `lab plan` gives the time model.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The memory request (mode, batch and context are set here from the workload).
    pub request: Request,
    /// The workload.
    pub workload: Workload,
    /// `--batch` when given.
    pub batch: Option<u64>,
    /// Durations.
    pub days: Vec<u32>,
    /// GPUs (empty: all).
    pub gpus: Vec<String>,
    /// Profile.
    pub profile: Profile,
    /// Network between lots, GB/s.
    pub network_gb_s: Decimal,
}

/// The memory plan at batch 1 for the workload (what `lab plan` shows above the time rows),
/// and the time answer.
///
/// # Errors
/// As [`plan::plan`]; [`Error::Usage`] for fp32 weights (no fp32 rate in the data), a
/// workload no GPU can run.
pub fn estimate(
    ask: &Ask,
    catalog: &Catalog,
    memory: &[GpuMemory],
    perf: &[GpuPerf],
) -> Result<(Plan, TimePlan)> {
    estimate_calibrated(ask, catalog, memory, perf, &[])
}

/// [`estimate`] with `lab plan --calibration` documents ([`calibration`]): the expected
/// decode and prefill times of each measured GPU model scaled by measured / expected.
///
/// # Errors
/// As [`estimate`]; as [`calibration::read`]; [`Error::Usage`] for a training workload, a
/// document of another element type than the plan's products, a GPU without performance
/// data, a document whose measured decode step or prefill is faster than the ceiling of its
/// own workload on its GPU (no engine beats the datasheet peaks: it measures something else).
pub fn estimate_calibrated(
    ask: &Ask,
    catalog: &Catalog,
    memory: &[GpuMemory],
    perf: &[GpuPerf],
    documents: &[std::path::PathBuf],
) -> Result<(Plan, TimePlan)> {
    ask.workload.check()?;
    if !documents.is_empty() && matches!(ask.workload, Workload::Training { .. }) {
        return Err(Error::usage(
            "--calibration documents time inference (prefill and decode steps): give an inference workload, or leave --calibration out",
        ));
    }
    with_inputs(ask, catalog, memory, |built| {
        let Built {
            shown,
            mut inputs,
            notes,
            trained,
            model,
        } = built;
        if !documents.is_empty() {
            let text = plan::model::read(&model)?.config_text;
            let measured = calibration::read(documents, &text, catalog, ask.profile)?;
            inputs.calibration = calibrate(&inputs, perf, &measured)?;
        }
        let rows = decision::decide(&inputs, catalog, perf, memory)?;
        let needs = inputs.needs;
        let format = inputs.format;
        let one_need = needs.one.sharded + needs.one.kv + needs.one.whole;
        Ok((
            shown,
            TimePlan {
                workload: ask.workload,
                profile: ask.profile,
                format,
                trained_parameters: matches!(ask.workload, Workload::Training { .. })
                    .then(|| u64::try_from(trained).unwrap_or(u64::MAX)),
                need_bytes_batch_1: u64::try_from(one_need).unwrap_or(u64::MAX),
                network_gb_s: ask.network_gb_s,
                training_mfu: matches!(ask.workload, Workload::Training { .. })
                    .then(|| decision::TRAINING_MFU.parse().unwrap_or(Decimal::ONE)),
                rows,
                notes,
                label: if matches!(ask.workload, Workload::Training { .. }) {
                    "all predictions, never a cost per accepted result: ceiling = datasheet peaks at 100 %; expected = the stated model-FLOPs utilisation (assumed) over the GPU's dense rate, plus the AdamW step (docs/PLANNING.md)"
                } else {
                    "all predictions, never a cost per accepted result: ceiling = datasheet peaks at 100 % and an engine's largest batch; expected = transformers with the GPU's efficiency factors (docs/PLANNING.md); a paged-attention engine (vLLM, TensorRT-LLM) lands between"
                }
                .to_string(),
            },
        ))
    })
}

/// The time model's seconds of one `lab measure --model` workload on one catalog GPU
/// (no tensor parallel): `(prefill, decode step)` pairs as [`decision::one_gpu_steps`]
/// gives them, unrounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneGpuSteps {
    /// Catalog GPU id.
    pub gpu: String,
    /// Where its efficiency factors come from ([`gpu_perf::LABELS`]).
    pub factors: String,
    /// Datasheet peaks at 100 %, the ideal engine's operators, no launch cost.
    pub ceiling: (Decimal, Decimal),
    /// transformers' operators with the GPU's factors, eager launches.
    pub eager: (Decimal, Decimal),
    /// The same with CUDA-graph replays.
    pub graphs: (Decimal, Decimal),
}

/// Prices one prefill of `batch` × `input` tokens and one decode step at the middle length
/// of `output` on catalog GPU `gpu`, with the weights, cache and products in `format`
/// (`bf16`, `fp16`): the same model reading and operators as `lab plan` and
/// `lab plan --calibration` ([`decision::expected_steps`]).
///
/// # Errors
/// As [`estimate`] (an unknown family, fp32 weights); [`Error::Usage`] when `gpu` has no
/// row in `perf` or no rate for the format.
#[allow(clippy::too_many_arguments)]
pub fn one_gpu_steps(
    model: &std::path::Path,
    format: &str,
    gpu: &str,
    (batch, input, output): (u64, u64, u64),
    catalog: &Catalog,
    memory: &[GpuMemory],
    perf: &[GpuPerf],
) -> Result<OneGpuSteps> {
    let ask = Ask {
        request: Request {
            model: model.to_path_buf(),
            batch,
            context: 1,
            weights: WeightsFormat::Named(format.to_owned()),
            kv_dtype: Some(format.to_owned()),
            mode: Mode::Inference,
            checkpointing: false,
            fixed: Default::default(),
        },
        workload: Workload::Inference {
            requests: batch,
            input_tokens: input,
            output_tokens: output,
        },
        batch: Some(batch),
        days: vec![7],
        gpus: vec![gpu.to_owned()],
        profile: Profile::Eager,
        network_gb_s: Decimal::new(125, 1),
    };
    ask.workload.check()?;
    let row = perf
        .iter()
        .find(|p| p.gpu == gpu)
        .ok_or_else(|| Error::usage(format!("GPU {gpu} has no row in the GPU performance data")))?;
    with_inputs(&ask, catalog, memory, |built| {
        let mut inputs = built.inputs;
        let none = || Error::usage(format!("GPU {gpu} has no {format} rate"));
        let at = |inputs: &decision::Inputs, basis| {
            decision::one_gpu_steps(inputs, row, basis, batch, input, output).ok_or_else(none)
        };
        let ceiling = at(&inputs, roofline::Basis::Ceiling)?;
        let eager = at(&inputs, roofline::Basis::Expected)?;
        inputs.profile = Profile::CudaGraphs;
        let graphs = at(&inputs, roofline::Basis::Expected)?;
        Ok(OneGpuSteps {
            gpu: gpu.to_owned(),
            factors: row.efficiency_label.clone(),
            ceiling,
            eager,
            graphs,
        })
    })
}

/// What [`with_inputs`] hands on: the memory plan shown, the time model's inputs, the
/// notes, the trained parameters and the model path.
struct Built<'a> {
    shown: Plan,
    inputs: decision::Inputs<'a>,
    notes: Vec<String>,
    trained: u128,
    model: std::path::PathBuf,
}

/// Plans the memory of the workload and builds the time model's inputs (the one reading of
/// the model that [`estimate_calibrated`] and [`one_gpu_steps`] share), then calls `then`.
fn with_inputs<T>(
    ask: &Ask,
    catalog: &Catalog,
    memory: &[GpuMemory],
    then: impl FnOnce(Built<'_>) -> Result<T>,
) -> Result<T> {
    if let plan::model::Reading::Unknown(u) = plan::model::read_any(&ask.request.model)? {
        return Err(Error::usage(format!(
            "model_type \"{}\" is not one lab plan knows: its memory is a lower bound from its safetensors headers (lab plan without a workload shows it), and a workload's time needs its layers' layout, which only a known family gives",
            crate::text::excerpt(&u.model_type)
        )));
    }
    let mut request = ask.request.clone();
    let (mode, context) = match ask.workload {
        Workload::Inference {
            input_tokens,
            output_tokens,
            ..
        } => (
            Mode::Inference,
            input_tokens
                .checked_add(output_tokens)
                .ok_or_else(|| Error::usage("--input-tokens plus --output-tokens overflows"))?,
        ),
        Workload::Training {
            sequence, method, ..
        } => {
            if method == Method::Qlora {
                request.weights = WeightsFormat::Named("int4".to_string());
            }
            (Mode::Training, sequence)
        }
    };
    request.mode = mode;
    request.context = context;
    let days = ask.days.first().copied().unwrap_or(7);
    request.batch = ask.batch.unwrap_or(1);
    // The memory table shows the GPUs the time table shows: one filter for both.
    let shown = plan::plan(&request, catalog, memory, days, None, &ask.gpus)?;
    request.batch = 1;
    let one = plan::plan(&request, catalog, memory, days, None, &[])?;
    request.batch = 2;
    let two = plan::plan(&request, catalog, memory, days, None, &[])?;
    let arch = architecture_of(&request.model)?;
    let shape = operators::from_architecture(&arch);
    let trained = match ask.workload {
        Workload::Training {
            method: Method::Full,
            ..
        } => u128::from(one.parameters),
        Workload::Training { rank, targets, .. } => {
            workload::lora_parameters(&shape, rank, targets)
        }
        Workload::Inference { .. } => 0,
    };
    let need = |p: &Plan| need_of(p, &ask.workload, trained, arch.latent.is_none());
    let needs = decision::Needs {
        one: need(&one),
        two: need(&two),
    };
    let (widths, format) = widths(&one)?;
    let mut notes = context_notes(&request.model, context)?;
    if let Workload::Training {
        method: Method::Lora | Method::Qlora,
        ..
    } = ask.workload
    {
        notes.push(format!(
            "{}: the base is frozen (no gradients or optimizer state for it); {trained} adapter parameters trained at 16 bytes each",
            if matches!(ask.workload, Workload::Training { method: Method::Qlora, .. }) { "QLoRA with a 4-bit base" } else { "LoRA" }
        ));
    }
    let inputs = decision::Inputs {
        arch: &arch,
        shape,
        widths,
        format,
        needs,
        workload: ask.workload,
        trained_parameters: trained,
        batch: ask.batch,
        network_gb_s: ask.network_gb_s,
        profile: ask.profile,
        days: ask.days.clone(),
        gpus: ask.gpus.clone(),
        fixed: request.fixed,
        calibration: Vec::new(),
    };
    then(Built {
        shown,
        inputs,
        notes,
        trained,
        model: request.model.clone(),
    })
}

/// The ratios per GPU model of the documents (medians where several share one).
fn calibrate(
    inputs: &decision::Inputs,
    perf: &[GpuPerf],
    measured: &[calibration::Measured],
) -> Result<Vec<calibration::Calibrated>> {
    /// One GPU model's documents and ratios: files, decode ratios, prefill ratios, and the
    /// measured (batch, input, output) workloads.
    type Group = (Vec<String>, Vec<Decimal>, Vec<Decimal>, Vec<[u64; 3]>);
    let mut per_gpu: Vec<(String, Group)> = Vec::new();
    for m in measured {
        let refuse = |why: String| Error::usage(format!("--calibration {}: {why}", m.file));
        let plan_dtype = match inputs.format {
            Format::Bf16 => crate::document::Dtype::Bfloat16,
            Format::Fp16 => crate::document::Dtype::Float16,
            Format::Fp8 | Format::Int8 => {
                return Err(refuse(
                    "the plan's products are 8-bit and lab measure --model times bf16 or fp16: plan with the measured element type".into(),
                ))
            }
        };
        if m.dtype != plan_dtype {
            return Err(refuse(format!(
                "measured in {} but the plan's weights are {}: plan with --weights-dtype matching the measurement",
                m.dtype.name(),
                plan_dtype.name()
            )));
        }
        let gpu = perf.iter().find(|p| p.gpu == m.gpu).ok_or_else(|| {
            refuse(format!(
                "GPU {} has no row in the GPU performance data",
                m.gpu
            ))
        })?;
        let (prefill, decode) =
            decision::expected_steps(inputs, gpu, m.batch, m.input_tokens, m.output_tokens)
                .ok_or_else(|| refuse(format!("GPU {} has no rate for the format", m.gpu)))?;
        // A measurement faster than the ceiling of its own workload (datasheet peaks at
        // 100 %, the least bytes and FLOPs of the model) is not one of this model on this
        // GPU: the plausible ratios start at ceiling / expected, and have no upper end (a
        // slower engine breaks no bound).
        let (top_prefill, top_decode) = decision::one_gpu_steps(
            inputs,
            gpu,
            roofline::Basis::Ceiling,
            m.batch,
            m.input_tokens,
            m.output_tokens,
        )
        .ok_or_else(|| refuse(format!("GPU {} has no rate for the format", m.gpu)))?;
        let beats = |phase: &str, measured: Decimal, top: Decimal, expected: Decimal| {
            refuse(format!(
                "measures a {phase} of {} s at batch {} x ({} + {}) tokens, faster than the ceiling of {} s for that workload on one {} (datasheet peaks at 100 %, the least bytes and FLOPs the model needs): no engine beats it, so this is not a measurement of this model on this GPU (another GPU or model, or a broken timing); a plausible {phase} ratio there is {} or more, this one is {}",
                decision::round(measured, 6),
                m.batch,
                m.input_tokens,
                m.output_tokens,
                decision::round(top, 6),
                m.gpu,
                calibration::ratio(top, expected).unwrap_or_default(),
                calibration::ratio(measured, expected).unwrap_or_default(),
            ))
        };
        if m.decode_s < top_decode {
            return Err(beats("decode step", m.decode_s, top_decode, decode));
        }
        if let Some(p) = m.prefill_s.filter(|p| *p < top_prefill) {
            return Err(beats("prefill", p, top_prefill, prefill));
        }
        let decode_ratio = calibration::ratio(m.decode_s, decode)
            .ok_or_else(|| refuse("the expected decode time is zero".into()))?;
        let prefill_ratio = m.prefill_s.and_then(|p| calibration::ratio(p, prefill));
        let i = match per_gpu.iter().position(|g| g.0 == m.gpu) {
            Some(i) => i,
            None => {
                per_gpu.push((m.gpu.clone(), Default::default()));
                per_gpu.len() - 1
            }
        };
        let g = &mut per_gpu[i].1;
        g.0.push(m.file.clone());
        g.1.push(decode_ratio);
        g.2.extend(prefill_ratio);
        g.3.push([m.batch, m.input_tokens, m.output_tokens]);
    }
    Ok(per_gpu
        .into_iter()
        .map(|(gpu, (files, mut decode, mut prefill, workloads))| {
            let range = |i: usize| {
                let v = workloads.iter().map(|w| w[i]);
                [v.clone().min().unwrap_or(0), v.max().unwrap_or(0)]
            };
            let d = calibration::median_of(&mut decode).unwrap_or(Decimal::ONE);
            let d = decision::round(d, 4);
            let p = calibration::median_of(&mut prefill).map(|p| decision::round(p, 4));
            calibration::Calibrated {
                label: calibration::label(&files, d, p),
                gpu,
                files,
                decode_ratio: d,
                prefill_ratio: p,
                measured_batch: range(0),
                measured_input_tokens: range(1),
                measured_output_tokens: range(2),
                extrapolated: false,
            }
        })
        .collect())
}

/// The memory split of a plan for the workload: inference and full training as `lab plan`
/// splits them; LoRA and QLoRA: the frozen weights and the adapters' 16 bytes per parameter
/// (2 weights + 2 gradients + 4 fp32 master + 8 moments) split, the activations whole.
pub fn need_of(p: &Plan, w: &Workload, trained: u128, kv_split: bool) -> Need {
    let m = &p.memory;
    let weights = u128::from(m.weights_allocated_bytes);
    match w {
        Workload::Inference { .. } => Need {
            sharded: weights,
            kv: u128::from(m.kv_cache_bytes.max(m.prefill_kv_cache_bytes)),
            kv_split,
            whole: u128::from(m.activation_bytes).saturating_sub(p.workspace_split.at(1, 1)),
            workspace: p.workspace_split,
        },
        Workload::Training {
            method: Method::Full,
            ..
        } => {
            let state =
                weights + u128::from(m.master_weights_bytes) + u128::from(m.optimizer_bytes);
            let rest = u128::from(m.total_bytes).saturating_sub(state);
            let gradients = u128::from(m.gradients_bytes);
            Need {
                sharded: state + gradients.min(rest),
                kv: 0,
                kv_split,
                whole: rest.saturating_sub(gradients),
                workspace: Default::default(),
            }
        }
        Workload::Training { .. } => Need {
            sharded: weights + 16 * trained,
            kv: 0,
            kv_split,
            whole: u128::from(m.activation_bytes),
            workspace: Default::default(),
        },
    }
}

/// Byte widths and product format from the plan's weights.
fn widths(p: &Plan) -> Result<(Widths, Format)> {
    let f = p.weights_format.as_str();
    if f.starts_with("fp32") {
        return Err(Error::usage(
            "fp32 weights: data/gpu-perf.csv has no fp32 or TF32 rates, so the time model does not cover them; give --weights-dtype bf16 (or fp16)",
        ));
    }
    let quantized = f.contains("bits per matrix weight") || f.starts_with("as stored");
    let params = Decimal::from(p.parameters);
    let total = Decimal::from(p.memory.weights_bytes);
    let linear = Decimal::from(p.parameter_breakdown.map_or(0, |c| c.linear));
    let (matrix, head) = if quantized && linear > Decimal::ZERO && !f.starts_with("as stored") {
        (
            (total - Decimal::TWO * (params - linear)) / linear,
            Decimal::TWO,
        )
    } else {
        (total / params, total / params)
    };
    let kv = Decimal::from(match p.kv_dtype.as_str() {
        "fp32" => 4,
        "bf16" | "fp16" => 2,
        _ => 1,
    });
    let format = if f.starts_with("fp8") {
        Format::Fp8
    } else if f.starts_with("fp16") {
        Format::Fp16
    } else {
        Format::Bf16
    };
    Ok((
        Widths {
            matrix,
            head,
            activation: Decimal::TWO,
            kv,
        },
        format,
    ))
}

/// A note when `context` passes the config's `max_position_embeddings` (read from the model
/// folder or `config.json`; under `text_config` for Gemma 3), naming its `rope_scaling`
/// (type, factor, original length) or its absence. Empty when within, absent, or unreadable
/// (the plan reports unreadable configs itself).
///
/// # Errors
/// [`crate::Error::Usage`] naming the field when it is there but not a whole number (a
/// string, a fraction, a boolean, null, a negative number...): transformers 5.17's config
/// classes refuse each of these but the negative (`StrictDataclassFieldValidationError`), and
/// a note silently left out would say the context is within the model's positions.
pub fn context_notes(model: &std::path::Path, context: u64) -> Result<Vec<String>> {
    notes_of_context(model, context).map_err(|got| {
        crate::Error::usage(format!(
            "{}: max_position_embeddings must be a whole number of positions, got {}",
            crate::text::one_line(&model.display().to_string()),
            crate::text::excerpt(&got)
        ))
    })
}

/// [`context_notes`], or the mistyped `max_position_embeddings` value as JSON text.
fn notes_of_context(
    model: &std::path::Path,
    context: u64,
) -> std::result::Result<Vec<String>, String> {
    let path = if model.is_dir() {
        model.join("config.json")
    } else {
        model.to_path_buf()
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text.trim_start_matches('\u{feff}'))
    else {
        return Ok(Vec::new());
    };
    let scope = v.get("text_config").unwrap_or(&v);
    let max = match scope.get("max_position_embeddings") {
        None => return Ok(Vec::new()),
        Some(given) => given.as_u64().ok_or_else(|| given.to_string())?,
    };
    if context <= max {
        return Ok(Vec::new());
    }
    // transformers 5 names it rope_parameters; older configs rope_scaling.
    let scaling = ["rope_scaling", "rope_parameters"]
        .iter()
        .filter_map(|k| scope.get(*k))
        .find(|s| s.is_object() && s.get("factor").is_some());
    let allows = match scaling {
        None => "no rope_scaling: positions past it were never trained and quality is not assured"
            .to_string(),
        Some(s) => {
            let kind = s
                .get("rope_type")
                .or_else(|| s.get("type"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("unnamed");
            let number = |key: &str| {
                s.get(key)
                    .filter(|v| v.is_number())
                    .and_then(|v| v.to_string().parse::<Decimal>().ok())
            };
            let factor = s
                .get("factor")
                .map_or_else(|| "no".into(), |f| f.to_string());
            let original = s
                .get("original_max_position_embeddings")
                .map_or_else(|| "unstated".into(), |f| f.to_string());
            // YaRN, linear and dynamic scaling stretch the original positions by the factor
            // (YaRN, Peng et al. 2023, §2: s = L'/L); llama3's and others' reach is what
            // max_position_embeddings states.
            let reach = match (
                kind,
                number("factor"),
                number("original_max_position_embeddings"),
            ) {
                ("yarn" | "linear" | "dynamic", Some(f), Some(o)) => {
                    u64::try_from((f * o).floor()).ok()
                }
                _ => None,
            };
            match reach {
                Some(r) if context <= r => format!(
                    "rope_scaling {} stretches the {original} original positions by {factor} to {r}: the context is within that, but past the positions config.json states",
                    crate::text::excerpt(kind)
                ),
                Some(r) => format!(
                    "rope_scaling {} stretches the {original} original positions by {factor} to {r}: the context is beyond that too, and quality is not assured",
                    crate::text::excerpt(kind)
                ),
                None => format!(
                    "rope_scaling {} with factor {factor} (original {original} positions) is already in the {max} positions config.json states: quality past them is not assured",
                    crate::text::excerpt(kind)
                ),
            }
        }
    };
    Ok(vec![format!(
        "context {context} exceeds config.json's max_position_embeddings {max}; {allows}"
    )])
}

/// The plan's architecture of the model at `path` (the one place, with
/// [`operators::from_architecture`], that knows how the plan reads a model).
///
/// # Errors
/// As [`plan::model::read`].
pub fn architecture_of(path: &std::path::Path) -> Result<Architecture> {
    Ok(plan::model::read(path)?.architecture)
}

/// The architecture of a `config.json` text, for tests.
#[cfg(test)]
pub(crate) fn parse_config(text: &str) -> Architecture {
    crate::plan::family::read(&serde_json::from_str(text).unwrap()).unwrap()
}
