//! `lab plan`: which package fits a model, and what it costs (`docs/PLANNING.md`,
//! `docs/PROTOCOL.md §9`).
//!
//! - [`model`]: the model folder read once (config, headers); [`family`]: one file per model
//!   family, `config.json` to architecture facts and each layer's tensors; [`config`]: the
//!   strict field reader; [`layout`]: tensor roles and the parameter counts summed over them;
//! - [`safetensors`]: bounded header reading (exact counts and stored dtypes);
//! - [`memory`]: the breakdown (weights, KV cache, workspace, training state);
//! - [`gpu_memory`]: memory per catalog GPU (`data/gpu-memory.csv`);
//! - [`packages`]: GPUs needed per catalog model, lots and price;
//! - [`hub`]: `--model ORG/NAME` found in the local Hugging Face cache;
//! - [`unknown`]: a `model_type` the families do not know, from its headers (a lower bound).
//!
//! Every figure is an integer count of bytes or cents; GiB and GB are shown from them,
//! rounded once half-to-even.

pub mod allocator;
pub mod config;
pub mod family;
pub mod gpu_memory;
pub mod header;
pub mod hub;
pub mod json;
pub mod layout;
pub mod memory;
pub mod model;
pub mod packages;
pub mod quantization;
pub mod safetensors;
pub mod sat;
pub mod unknown;
pub mod weight_map;

use crate::catalog::{Catalog, CatalogInfo};
use crate::{Error, Result};
use family::Architecture;
use layout::ParameterCounts;
use memory::{bytes_for, config_dtype, format_bits, normalize_dtype};
use model::Model;
use rust_decimal::Decimal;
use serde::Serialize;
use std::path::PathBuf;

/// Inference or one training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Weights, KV cache and the prefill workspace.
    Inference,
    /// Weights, gradients, AdamW states, master weights and activations.
    Training,
}

/// How the weights are stored for the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightsFormat {
    /// As stored (safetensors headers) or configured (`dtype` in config.json).
    Stored,
    /// A named format of [`memory::FORMATS`].
    Named(String),
    /// Decoder matrices at this many bits per weight (scales included), the rest 16-bit.
    Bits(Decimal),
}

/// What the user asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Model folder or `config.json`.
    pub model: PathBuf,
    /// Sequences processed together.
    pub batch: u64,
    /// Tokens per sequence, prompt plus generation.
    pub context: u64,
    /// Weights format.
    pub weights: WeightsFormat,
    /// KV-cache element format (a [`memory::FORMATS`] name); default: the activations'.
    pub kv_dtype: Option<String>,
    /// Inference or training.
    pub mode: Mode,
    /// Training with one activation checkpoint per layer.
    pub checkpointing: bool,
    /// `--tensor-parallel N` and `--gpus N`, when given.
    pub fixed: packages::Fixed,
}

/// The safetensors facts, when headers were read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Headers {
    /// Files read.
    pub files: Vec<String>,
    /// Tensors.
    pub tensors: u64,
    /// Elements of all tensors.
    pub elements: u64,
    /// Bytes of tensor data.
    pub data_bytes: u64,
    /// Elements per stored dtype.
    pub elements_by_dtype: std::collections::BTreeMap<String, u64>,
}

/// The memory breakdown, bytes, with GiB and GB shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// Weights: the tensors' own bytes (the safetensors data when stored as is).
    pub weights_bytes: u64,
    /// Weights once on one GPU: what `torch.cuda.memory_allocated()` reports after loading,
    /// predicted by replaying PyTorch's caching allocator over the tensors in the order
    /// `transformers` materialises them ([`allocator`], [`layout`]); includes the model's
    /// buffers (rotary frequencies). Exact for the models measured on the H200; for
    /// quantized formats an estimate (their packing is library-specific).
    pub weights_allocated_bytes: u64,
    /// The segments the allocator reserves for those weights (`memory_reserved()`), bytes.
    pub weights_reserved_bytes: u64,
    /// KV cache at the full context, sliding windows applied (0 in training).
    pub kv_cache_bytes: u64,
    /// KV cache of one token of one sequence, summed over layers (full layers only; sliding
    /// layers stop growing at their window).
    pub kv_cache_bytes_per_token: u64,
    /// KV cache while the prompt is processed (every layer holds the whole prompt).
    pub prefill_kv_cache_bytes: u64,
    /// Inference: one layer's prefill workspace; training: activations kept for backward.
    pub activation_bytes: u64,
    /// Training: gradients.
    pub gradients_bytes: u64,
    /// Training: fp32 master weights (mixed precision).
    pub master_weights_bytes: u64,
    /// Training: AdamW moments, fp32.
    pub optimizer_bytes: u64,
    /// Everything above at its peak, with the weights as allocated: inference `weights
    /// allocated + max(prefill KV, KV) + workspace`; training `weights allocated + master +
    /// optimizer + max(gradients, activations + output-head gradient)` (the backward pass
    /// frees activations as it writes gradients).
    pub total_bytes: u64,
    /// Runtime reserve per GPU, not in `total_bytes` (subtracted from each GPU's memory).
    pub runtime_reserve_bytes_per_gpu: u64,
}

/// A complete plan (the `lab plan --json` object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Path given.
    pub model: String,
    /// `model_type` of the config.
    pub model_type: String,
    /// Parameters: the headers' element count when read, else the config arithmetic.
    pub parameters: u64,
    /// Parameters by the config arithmetic (null for a `model_type` lab does not know).
    pub parameters_from_config: Option<u64>,
    /// Parameters by role (config arithmetic; null for a `model_type` lab does not know).
    pub parameter_breakdown: Option<ParameterCounts>,
    /// Safetensors facts, when a header was read.
    pub headers: Option<Headers>,
    /// Differences worth knowing (header vs config, formats).
    pub notes: Vec<String>,
    /// Architecture facts used (null for a `model_type` lab does not know).
    pub architecture: Option<ArchitectureSummary>,
    /// Whether the memory is a lower bound (a `model_type` lab does not know, planned from its
    /// headers): packages then say `at_least`, never `fits`.
    pub lower_bound: bool,
    /// What a lower-bound plan leaves out, in words (empty otherwise).
    pub not_modelled: Vec<String>,
    /// The prefill workspace's parts tensor parallel splits (`memory.activation_bytes` less
    /// these at degree 1 is kept whole on every GPU); zero in training.
    pub workspace_split: packages::Workspace,
    /// Mode.
    pub mode: Mode,
    /// Batch.
    pub batch: u64,
    /// Context tokens.
    pub context: u64,
    /// Weights format shown (`bf16`, `int4`, `4.5 bits`...).
    pub weights_format: String,
    /// KV cache element format.
    pub kv_dtype: String,
    /// Activation checkpointing (training).
    pub checkpointing: bool,
    /// `--tensor-parallel N`: the only degree tried, when given.
    pub fixed_tensor_parallel: Option<u64>,
    /// `--gpus N`: the GPUs every package buys, when given.
    pub fixed_gpus: Option<u64>,
    /// The breakdown.
    pub memory: Memory,
    /// Package duration, days.
    pub days: u32,
    /// Accepted results, when given.
    pub accepted_results: Option<u64>,
    /// Per catalog GPU model, fitting ones cheapest first.
    pub packages: Vec<packages::Package>,
    /// Catalog the prices come from.
    pub catalog: CatalogInfo,
}

/// Architecture facts as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchitectureSummary {
    /// Hidden size.
    pub hidden_size: u64,
    /// Layers.
    pub layers: u64,
    /// Attention heads.
    pub attention_heads: u64,
    /// Key/value heads.
    pub key_value_heads: u64,
    /// Head width.
    pub head_dim: u64,
    /// Intermediate size.
    pub intermediate_size: u64,
    /// Vocabulary.
    pub vocab_size: u64,
    /// Tied embeddings.
    pub tied_embeddings: bool,
    /// Layers with a sliding window.
    pub sliding_window_layers: u64,
    /// The window, when any layer has one.
    pub sliding_window: Option<u64>,
    /// Layers with chunked attention (Llama 4).
    pub chunked_attention_layers: u64,
    /// The attention chunk, when any layer has one.
    pub attention_chunk: Option<u64>,
    /// Routed experts and experts per token, for a mixture of experts.
    pub experts: Option<(u64, u64)>,
    /// Layers whose feed-forward is the dense MLP of `intermediate_size`.
    pub dense_layers: u64,
    /// Layers whose feed-forward is the mixture of `experts`.
    pub expert_layers: u64,
    /// Intermediate size of one routed expert, for a mixture of experts.
    pub expert_intermediate: Option<u64>,
    /// The shared experts' combined intermediate size (0: none), for a mixture of experts.
    pub shared_expert_intermediate: Option<u64>,
    /// `kv_lora_rank + qk_rope_head_dim` for latent attention.
    pub latent_kv_width: Option<u64>,
    /// Latent attention's widths (DeepSeek-V2/V3), when the layers use it: then the heads'
    /// widths are these, not `head_dim`, and the cache is the latent, not K heads.
    pub latent: Option<LatentSummary>,
    /// Tensor-parallel degrees tried.
    pub tensor_parallel_degrees: Vec<u64>,
}

/// Multi-head latent attention's widths as the config states them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LatentSummary {
    /// `kv_lora_rank`: the cached latent's width.
    pub kv_lora_rank: u64,
    /// `q_lora_rank`: the query compression's width (null: a plain query projection).
    pub q_lora_rank: Option<u64>,
    /// `qk_rope_head_dim`: each query/key head's rotary part, cached once per token.
    pub qk_rope_head_dim: u64,
    /// `qk_nope_head_dim`: each query/key head's non-rotary part.
    pub qk_nope_head_dim: u64,
    /// `v_head_dim`: each value head's width.
    pub v_head_dim: u64,
}

/// Builds the plan for `request` against `catalog` and `gpu_memory`.
///
/// # Errors
/// As [`model::read`]; [`Error::Usage`] for a zero batch or context, an unknown format, a
/// model too large for 64-bit byte counts, or a package error (unknown GPU, duration).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    request: &Request,
    catalog: &Catalog,
    gpu_memory: &[gpu_memory::GpuMemory],
    days: u32,
    accepted_results: Option<u64>,
    only_gpus: &[String],
) -> Result<Plan> {
    if request.batch == 0 || request.context == 0 {
        return Err(Error::usage("--batch and --context must be at least 1"));
    }
    match model::read_any(&request.model)? {
        model::Reading::Known(model) => plan_model(
            &model,
            request,
            catalog,
            gpu_memory,
            days,
            accepted_results,
            only_gpus,
        ),
        model::Reading::Unknown(u) => unknown::plan(
            &u,
            request,
            catalog,
            gpu_memory,
            days,
            accepted_results,
            only_gpus,
        ),
    }
}

/// [`plan`] for a model already read ([`model::read`]); `request.model` is only named, not
/// read again (`lab measure --model` plans the folder it measures, read once).
///
/// # Errors
/// As [`plan`], except the reading of the model.
#[allow(clippy::too_many_arguments)]
pub fn plan_model(
    model: &Model,
    request: &Request,
    catalog: &Catalog,
    gpu_memory: &[gpu_memory::GpuMemory],
    days: u32,
    accepted_results: Option<u64>,
    only_gpus: &[String],
) -> Result<Plan> {
    if request.batch == 0 || request.context == 0 {
        return Err(Error::usage("--batch and --context must be at least 1"));
    }
    let arch = &model.architecture;
    packages::check_fixed(arch, &request.fixed)?;
    let summary = &model.headers;
    let too_big = || {
        Error::usage(
            "this plan's sizes overflow 64-bit byte counts: lower --batch or --context, or check config.json",
        )
    };
    let counts = arch.parameter_counts().narrow().ok_or_else(too_big)?;
    let from_config = u64::try_from(counts.total()).map_err(|_| too_big())?;
    let mut notes = Vec::new();
    let parameters = match summary {
        // A pre-quantized checkpoint stores packed integers and scales: its element count is
        // not a parameter count, its bytes are still the stored weights.
        Some(s) if arch.quantization.is_some() => {
            notes.push(format!(
                "pre-quantized checkpoint ({}): the headers hold {} packed elements; parameters from the config",
                crate::text::excerpt(arch.quantization.as_deref().unwrap_or_default()),
                s.elements
            ));
            from_config
        }
        Some(s) if u128::from(s.elements) * 2 < u128::from(from_config) => {
            return Err(Error::usage(format!(
                "the safetensors headers hold {} elements, under half of the {from_config} parameters config.json describes (an incomplete download?); give the config.json alone to plan from the config",
                s.elements
            )));
        }
        Some(s) => match loaded_difference(arch, s.elements, from_config) {
            Some((reason, _)) => {
                notes.push(reason);
                from_config
            }
            None => {
                if s.elements != from_config {
                    let diff = i128::from(s.elements) - i128::from(from_config);
                    notes.push(format!(
                        "the safetensors headers hold {} elements, the config arithmetic gives {from_config} ({diff:+}); the headers are used",
                        s.elements
                    ));
                }
                s.elements
            }
        },
        None => from_config,
    };
    // An MXFP4 checkpoint left as stored: transformers 5.17 dequantizes its experts to bf16
    // on load without the `kernels` package (plan::quantization::MXFP4).
    let mxfp4 = arch.quantization.as_deref() == Some(quantization::MXFP4)
        && matches!(request.weights, WeightsFormat::Stored);
    if mxfp4 {
        let stored = match summary {
            Some(s) => format!("the safetensors hold {} bytes", s.data_bytes),
            None => "no safetensors header was read".to_string(),
        };
        notes.push(format!(
            "MXFP4 checkpoint ({stored}): transformers 5.17 dequantizes its experts to bf16 on load unless triton >= 3.4 and the kernels package are installed on a GPU of compute capability 7.5 or more; the weights are counted so, in bf16; kept in MXFP4 they would take at least {} bytes (blocks and scales, float32 expert biases, the rest bf16; the kernels' swizzled layout not counted)",
            quantization::mxfp4_kept_bytes(arch, &counts)
        ));
    }
    // A block-scaled FP8 config without headers: planned in FP8 as transformers keeps it on
    // a GPU of compute capability 8.9 or more (plan::quantization::Fp8).
    let fp8 = match &request.weights {
        WeightsFormat::Stored => quantization::fp8(&model.config)?,
        _ => None,
    };
    if fp8.is_some() {
        let read = match summary {
            Some(s) => format!("the safetensors hold {} bytes", s.data_bytes),
            None => "no safetensors header was read".to_string(),
        };
        let mtp = if arch.mtp_layers > 0 && summary.is_some() {
            format!(
                " (the headers' {} multi-token-prediction layers, which transformers drops on load, are not counted)",
                arch.mtp_layers
            )
        } else {
            String::new()
        };
        notes.push(format!(
            "FP8 checkpoint ({read}){mtp}: counted as transformers 5.17 keeps it on GPUs of compute capability 8.9 or more (L4, L40S, RTX 4090, H100, H200, B200): float8 matrices with their scales, the rest in bf16; on older GPUs (T4, A10, A100) it dequantizes to bf16, {} bytes of weights",
            u128::from(from_config) * 2
        ));
    }
    if let (Some(method), None, WeightsFormat::Stored, false) = (
        &arch.quantization,
        summary,
        &request.weights,
        mxfp4 || fp8.is_some(),
    ) {
        // What GPTQ, AWQ or bitsandbytes allocate depends on the kernel their loader picks
        // (and on tensors only the headers state): refused by name rather than planned at the
        // config's float dtype.
        let width = quantization::scheme(&model.config)
            .filter(|q| q.matrix_bits > Decimal::ONE)
            .map(|q| {
                format!(
                    " ({}: at least {} bits per matrix weight)",
                    q.reading,
                    q.matrix_bits.normalize()
                )
            })
            .unwrap_or_default();
        return Err(Error::usage(format!(
            "config.json describes a pre-quantized \"{}\" checkpoint{width} and no safetensors header was read: what its loader allocates is not known from the config alone; give the model folder with its safetensors, or --bits or --weights-dtype to plan a width",
            crate::text::excerpt(method)
        )));
    }
    // Stored width: the headers' main dtype, else the config's dtype.
    let stored = if mxfp4 {
        Some("bf16")
    } else {
        summary
            .as_ref()
            .and_then(|s| s.main_dtype())
            .and_then(normalize_dtype)
            .or_else(|| arch.dtype.as_deref().and_then(config_dtype))
    };
    let (weights_bytes, weights_format, weight_element_bytes) = match &request.weights {
        WeightsFormat::Stored if mxfp4 => (
            whole_bytes(parameters, Decimal::from(16)).ok_or_else(too_big)?,
            "bf16 (MXFP4 experts dequantized on load)".to_string(),
            2,
        ),
        WeightsFormat::Stored if fp8.is_some() => {
            let parameter = arch
                .dtype
                .as_deref()
                .and_then(normalize_dtype)
                .filter(|d| matches!(*d, "fp32" | "bf16" | "fp16"))
                .map_or(2, element_bytes);
            let mut bytes: u128 = 0;
            arch.tensors(&mut |t| {
                bytes += u128::from(match (&fp8, t.role) {
                    (_, layout::Role::Buffer(_)) => 0,
                    (Some(f), layout::Role::Linear) => t.elements.saturating_add(f.scale_bytes_of(&t)),
                    _ => t.elements.saturating_mul(parameter),
                });
            });
            (
                u64::try_from(bytes).map_err(|_| too_big())?,
                "fp8 (as configured: float8 matrices with their block scales)".to_string(),
                parameter,
            )
        }
        WeightsFormat::Stored => match (summary, stored) {
            (Some(s), Some(name)) => (
                stored_loaded(s, arch, from_config, element_bytes(name)).ok_or_else(too_big)?,
                format!("{name} (as stored)"),
                element_bytes(name),
            ),
            (Some(s), None) => (
                stored_loaded(s, arch, from_config, 2).ok_or_else(too_big)?,
                "as stored".to_string(),
                2,
            ),
            (None, Some(name)) => {
                let bits = format_bits(name).ok_or_else(too_big)?;
                if matches!(name, "fp32" | "bf16" | "fp16") {
                    let bytes = whole_bytes(parameters, bits).ok_or_else(too_big)?;
                    (bytes, format!("{name} (as configured)"), element_bytes(name))
                } else {
                    // A quantized dtype in the config: the same rule as --weights-dtype.
                    let bytes = quantized(&counts, parameters, bits).ok_or_else(too_big)?;
                    (bytes, format!("{name} (as configured, {bits} bits per matrix weight)"), 2)
                }
            }
            (None, None) => {
                return Err(Error::usage(match &arch.dtype {
                    Some(d) => format!(
                        "config.json's dtype \"{}\" is not a weights format lab plan knows (as torch names them: float32, float, bfloat16, float16, half, float8_e4m3fn, float8_e5m2, int8, int4) and there is no safetensors header: give --weights-dtype (fp32, bf16, fp16, fp8, int8, int4) or --bits",
                        crate::text::excerpt(d)
                    ),
                    None => "config.json states no dtype and there is no safetensors header: give --weights-dtype (fp32, bf16, fp16, fp8, int8, int4) or --bits".to_string(),
                }))
            }
        },
        WeightsFormat::Named(name) => {
            let bits = format_bits(name).ok_or_else(|| {
                Error::usage(format!(
                    "unknown weights format '{}': use {}",
                    crate::text::excerpt(name),
                    memory::FORMATS.map(|f| f.0).join(", ")
                ))
            })?;
            if matches!(name.as_str(), "fp32" | "bf16" | "fp16") {
                let bytes = whole_bytes(parameters, bits).ok_or_else(too_big)?;
                (bytes, name.clone(), element_bytes(name))
            } else {
                (quantized(&counts, parameters, bits).ok_or_else(too_big)?, format!("{name} ({bits} bits per matrix weight)"), 2)
            }
        }
        WeightsFormat::Bits(bits) => (
            quantized(&counts, parameters, *bits).ok_or_else(too_big)?,
            format!("{bits} bits per matrix weight"),
            2,
        ),
    };
    let (weights_allocated_bytes, weights_reserved_bytes) = on_gpu(
        arch,
        &request.weights,
        weight_element_bytes,
        weights_bytes,
        fp8.as_ref(),
    )
    .ok_or_else(too_big)?;
    // Activations and the KV cache default to the weights' float width (16 bits for
    // quantized weights).
    let act_bytes = weight_element_bytes.max(2);
    let (kv_element, kv_dtype) = match &request.kv_dtype {
        None => (
            act_bytes,
            if act_bytes == 4 {
                "fp32"
            } else {
                stored
                    .filter(|s| matches!(*s, "bf16" | "fp16"))
                    .unwrap_or("bf16")
            }
            .to_string(),
        ),
        Some(name) => {
            let n = normalize_dtype(name)
                .filter(|n| *n != "int4")
                .ok_or_else(|| {
                    Error::usage(format!(
                        "unknown --kv-dtype '{}': use fp32, bf16, fp16, fp8 or int8",
                        crate::text::excerpt(name)
                    ))
                })?;
            (element_bytes(n), n.to_string())
        }
    };
    let b = request.batch;
    let t = request.context;
    let narrow = |v: u128| u64::try_from(v).map_err(|_| too_big());
    let per_token: u128 = memory::kv_bytes_per_token(arch, kv_element);
    let (ws_whole, ws_split) = match request.mode {
        Mode::Inference => memory::workspace_parts(arch, act_bytes, b, t),
        Mode::Training => (0, packages::Workspace::default()),
    };
    let (kv, prefill_kv, activation) = match request.mode {
        Mode::Inference => (
            memory::kv_cache_bytes(arch, kv_element, b, t, true),
            memory::kv_cache_bytes(arch, kv_element, b, t, false),
            ws_whole.saturating_add(ws_split.at(1, 1)),
        ),
        Mode::Training => (
            0,
            0,
            memory::training_activations(arch, b, t, request.checkpointing),
        ),
    };
    let (gradients, master, optimizer) = match request.mode {
        Mode::Inference => (0u128, 0u128, 0u128),
        Mode::Training => {
            let s = memory::training_state(weight_element_bytes);
            let p = u128::from(parameters);
            (
                p * u128::from(s.gradients),
                p * u128::from(s.master_weights),
                p * u128::from(s.optimizer),
            )
        }
    };
    // Training: the backward pass frees activations as it writes gradients; the peak is at
    // the loss, with every activation alive and only the output head's gradient written, or
    // at the end, with every gradient and no activation.
    let head_gradient = match request.mode {
        Mode::Training => u128::from(counts.embedding) * u128::from(weight_element_bytes),
        Mode::Inference => 0,
    };
    let total = u128::from(weights_allocated_bytes)
        .saturating_add(kv.max(prefill_kv))
        .saturating_add(master)
        .saturating_add(optimizer)
        .saturating_add(match request.mode {
            Mode::Inference => activation,
            Mode::Training => gradients.max(activation.saturating_add(head_gradient)),
        });
    let mem = Memory {
        weights_bytes,
        weights_allocated_bytes,
        weights_reserved_bytes,
        kv_cache_bytes: narrow(kv)?,
        kv_cache_bytes_per_token: narrow(per_token)?,
        prefill_kv_cache_bytes: narrow(prefill_kv)?,
        activation_bytes: narrow(activation)?,
        gradients_bytes: narrow(gradients)?,
        master_weights_bytes: narrow(master)?,
        optimizer_bytes: narrow(optimizer)?,
        total_bytes: narrow(total)?,
        runtime_reserve_bytes_per_gpu: packages::RUNTIME_RESERVE_BYTES,
    };
    let need = packages::Need {
        sharded: u128::from(weights_allocated_bytes) + master + optimizer + gradients.min(total),
        kv: kv.max(prefill_kv),
        kv_split: arch.latent.is_none(),
        whole: match request.mode {
            Mode::Inference => ws_whole,
            Mode::Training => activation
                .saturating_add(head_gradient)
                .saturating_sub(gradients),
        },
        workspace: ws_split,
    };
    let pk = packages::packages(
        catalog,
        gpu_memory,
        arch.into(),
        &need,
        days,
        accepted_results,
        only_gpus,
        &request.fixed,
    )?;
    let architecture = Some(ArchitectureSummary {
        hidden_size: arch.hidden,
        layers: arch.layers,
        attention_heads: arch.heads,
        key_value_heads: arch.kv_heads,
        head_dim: arch.head_dim,
        intermediate_size: arch.intermediate,
        vocab_size: arch.vocab,
        tied_embeddings: arch.tied_embeddings,
        sliding_window_layers: arch.sliding_layers() as u64,
        sliding_window: arch.sliding_window(),
        chunked_attention_layers: arch.chunked_layers() as u64,
        attention_chunk: arch.attention_chunk(),
        experts: arch.experts.map(|e| (e.routed, e.per_token)),
        dense_layers: arch.dense_layers() as u64,
        expert_layers: arch.layers - arch.dense_layers() as u64,
        expert_intermediate: arch.experts.map(|e| e.intermediate),
        shared_expert_intermediate: arch.experts.map(|e| e.shared_intermediate),
        latent_kv_width: arch.latent.map(|l| l.kv_lora_rank + l.qk_rope_head_dim),
        latent: arch.latent.map(|l| LatentSummary {
            kv_lora_rank: l.kv_lora_rank,
            q_lora_rank: l.q_lora_rank,
            qk_rope_head_dim: l.qk_rope_head_dim,
            qk_nope_head_dim: l.qk_nope_head_dim,
            v_head_dim: l.v_head_dim,
        }),
        tensor_parallel_degrees: packages::degrees(arch),
    });
    if arch.vision.is_some() {
        notes.push("the vision tower and projector are counted in the weights; image tokens are not in the context".to_string());
    }
    Ok(Plan {
        model: request.model.display().to_string(),
        model_type: arch.model_type().to_string(),
        parameters,
        parameters_from_config: Some(from_config),
        parameter_breakdown: Some(counts),
        headers: summary.as_ref().map(|s| Headers {
            files: s.files.clone(),
            tensors: s.tensors,
            elements: s.elements,
            data_bytes: s.data_bytes,
            elements_by_dtype: s.elements_by_dtype.clone(),
        }),
        notes,
        architecture,
        lower_bound: false,
        not_modelled: Vec::new(),
        workspace_split: ws_split,
        mode: request.mode,
        batch: b,
        context: t,
        weights_format,
        kv_dtype,
        checkpointing: request.checkpointing,
        fixed_tensor_parallel: request.fixed.tensor_parallel,
        fixed_gpus: request.fixed.gpus,
        memory: mem,
        days,
        accepted_results,
        packages: pk,
        catalog: catalog.info(),
    })
}

/// The weights' allocated and reserved bytes on one GPU: the caching allocator replayed over
/// the layout's tensors in this format, its rounding (and the buffers) added to
/// `weights_bytes` so that headers that disagree with the config keep their own total.
fn on_gpu(
    arch: &Architecture,
    format: &WeightsFormat,
    element: u64,
    weights_bytes: u64,
    fp8: Option<&quantization::Fp8>,
) -> Option<(u64, u64)> {
    // Quantized matrices at their bits; everything else (and fp8/int8 checkpoints' norms) in
    // 16 bits; float formats at their width throughout.
    let (matrix_bits, parameter) = match format {
        WeightsFormat::Named(n) if !matches!(n.as_str(), "fp32" | "bf16" | "fp16") => {
            (format_bits(n)?, 2)
        }
        WeightsFormat::Bits(bits) => (*bits, 2),
        _ => (Decimal::from(8 * element), element.max(2)),
    };
    let matrix = |n: u64| bytes_for(n, matrix_bits).unwrap_or(u64::MAX);
    let mut replay = allocator::CachingAllocator::new();
    let mut parameters: u128 = 0;
    arch.tensors(&mut |t| {
        // FP8: a float8 byte per matrix weight, then its scales as their own tensor.
        let (bytes, scales) = match fp8 {
            Some(f) if t.role == layout::Role::Linear => (t.elements, f.scale_bytes_of(&t)),
            _ => (layout::tensor_bytes(t, parameter, &matrix), 0),
        };
        if !matches!(t.role, layout::Role::Buffer(_)) {
            parameters += u128::from(bytes) + u128::from(scales);
        }
        replay.allocate(bytes);
        if scales > 0 {
            replay.allocate(scales);
        }
    });
    let rounding = replay.allocated_bytes().checked_sub(parameters)?;
    let caching = replay
        .reserved_bytes()
        .checked_sub(replay.allocated_bytes())?;
    let allocated = u128::from(weights_bytes).checked_add(rounding)?;
    Some((
        u64::try_from(allocated).ok()?,
        u64::try_from(allocated.checked_add(caching)?).ok()?,
    ))
}

/// When unquantized headers differ from the config by exactly what transformers drops or
/// adds on load, why (for the notes) and the elements the headers hold beyond what is
/// allocated (negative: fewer): DeepSeek-V3's multi-token-prediction layers (dropped,
/// [`Architecture::mtp_elements`]); a tied model whose headers also store the output head
/// (`lm_head.weight`: tied to the embedding, the copy is not allocated); an untied model whose
/// headers lack it (transformers allocates it, newly initialised, and warns).
fn loaded_difference(arch: &Architecture, held: u64, config: u64) -> Option<(String, i128)> {
    if arch.quantization.is_some() || held == config {
        return None;
    }
    let diff = i128::from(held) - i128::from(config);
    let head = i128::from(arch.vocab) * i128::from(arch.hidden);
    let mtp = i128::try_from(arch.mtp_elements()).ok()?;
    if mtp > 0 && diff == mtp {
        return Some((format!(
            "the safetensors headers hold {held} elements: the config's {config} and {mtp} of {} multi-token-prediction layer(s) (num_nextn_predict_layers), which transformers does not build and drops on load; the config's parameters are used",
            arch.mtp_layers
        ), diff));
    }
    if arch.tied_embeddings && diff == head {
        return Some((format!(
            "the safetensors headers hold {held} elements: the config's {config} and a stored output head ({} x {}), which transformers ties to the embedding and does not allocate again; the config's parameters are used",
            arch.vocab, arch.hidden
        ), diff));
    }
    if !arch.tied_embeddings && diff == -head {
        return Some((format!(
            "the safetensors headers hold {held} elements, the config's {config} less its untied output head ({} x {}): transformers allocates the head anyway (newly initialised, with a warning), so it is counted",
            arch.vocab, arch.hidden
        ), diff));
    }
    None
}

/// The stored bytes of unquantized headers, less what transformers drops on load or plus
/// what it adds ([`loaded_difference`]), at `width` bytes per element.
fn stored_loaded(
    s: &safetensors::Summary,
    arch: &Architecture,
    config: u64,
    width: u64,
) -> Option<u64> {
    let bytes = match loaded_difference(arch, s.elements, config) {
        Some((_, diff)) => i128::from(s.data_bytes) - diff * i128::from(width),
        None => i128::from(s.data_bytes),
    };
    u64::try_from(bytes).ok()
}

fn element_bytes(name: &str) -> u64 {
    match name {
        "fp32" => 4,
        "bf16" | "fp16" => 2,
        _ => 1,
    }
}

fn whole_bytes(parameters: u64, bits: Decimal) -> Option<u64> {
    bytes_for(parameters, bits)
}

/// Decoder matrices at `bits`, everything else in 16 bits. When the headers' count differs
/// from the config's, the difference is counted with the 16-bit rest.
fn quantized(counts: &ParameterCounts, parameters: u64, bits: Decimal) -> Option<u64> {
    // Headers holding fewer elements than the config's matrices (a pre-quantized
    // checkpoint): the rest is the config's.
    let rest = parameters.checked_sub(counts.linear).or_else(|| {
        u64::try_from(counts.total())
            .ok()?
            .checked_sub(counts.linear)
    })?;
    bytes_for(counts.linear, bits)?.checked_add(rest.checked_mul(2)?)
}
