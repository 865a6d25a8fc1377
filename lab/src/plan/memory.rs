//! The memory breakdown of a plan, in exact bytes (integers; no floats).
//!
//! Inference (see `docs/PLANNING.md` for sources and the H200 validation):
//! - weights: the stored bytes of the safetensors headers when present and no other format
//!   is asked; else parameters x bytes per parameter of the format. Quantized formats (fp8,
//!   int8, int4 = 4 bits + one 16-bit scale per group of 128 = 4.125 bits, or `--bits X`)
//!   apply to the decoder matrices; embeddings, output head, norms, biases and routers stay
//!   in 16 bits. `ceil(matrices x bits / 8)`.
//! - KV cache, per sequence: sum over layers of kept tokens x bytes per token and layer;
//!   kept tokens = context, or `min(context, window)` on a sliding-window layer; bytes per
//!   token and layer = 2 (K and V) x key/value heads x head width x element bytes, or for
//!   multi-head latent attention `(kv_lora_rank + qk_rope_head_dim)` x element bytes. Times the
//!   batch.
//! - prefill: during the prompt's forward pass every layer's K and V of the whole prompt
//!   exist (the window is applied after), plus one layer's working tensors, see
//!   [`activation_workspace`].
//!
//! Training (AdamW, mixed precision, the ZeRO paper's accounting, Rajbhandari et al. 2020,
//! section 3.1): 16 bytes per parameter = 2 (16-bit weights) + 2 (16-bit gradients) + 4
//! (fp32 master weights) + 4 + 4 (fp32 first and second moments); with fp32 weights there is
//! no master copy and the total is the same 16 bytes. Activations: see
//! [`training_activations`].

use super::family::{Architecture, Attention, Layer};
use super::packages::Workspace;
use super::sat::Sat;
use rust_decimal::Decimal;
use serde::Serialize;

/// Element widths `lab plan` knows, by name: (name, bits). `int4` counts 4 bits plus one
/// 16-bit scale per group of 128 weights (4.125 bits); `fp8` and `int8` count 8 bits (one
/// scale per tensor or per row is negligible and not counted).
pub const FORMATS: [(&str, &str); 7] = [
    ("fp32", "32"),
    ("bf16", "16"),
    ("fp16", "16"),
    ("fp8", "8"),
    ("int8", "8"),
    ("int4", "4.125"),
    ("int4-g128", "4.125"),
];

/// The dtype name of a config or header dtype (`bfloat16`, `BF16`...), as a [`FORMATS`] name.
pub fn normalize_dtype(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "float32" | "f32" | "fp32" => "fp32",
        "bfloat16" | "bf16" => "bf16",
        "float16" | "f16" | "fp16" | "half" => "fp16",
        "float8_e4m3fn" | "f8_e4m3" | "float8_e5m2" | "f8_e5m2" | "fp8" => "fp8",
        "int8" | "i8" => "int8",
        "int4" => "int4",
        _ => return None,
    })
}

/// The dtype a config.json states (`torch_dtype` or `dtype`), as a [`FORMATS`] name.
/// transformers reads it as a `torch` attribute (5.17.0, `PreTrainedConfig.__init__`:
/// `getattr(torch, dtype)`), exact and lowercase: `half` is fp16, `float` fp32, and a name
/// torch lacks (`bf16`, `FLOAT32`) is `None`, refused rather than read as what it resembles;
/// `int4` (a torch attribute) counts like `--weights-dtype int4`.
pub fn config_dtype(name: &str) -> Option<&'static str> {
    Some(match name {
        "float32" | "float" => "fp32",
        "bfloat16" => "bf16",
        "float16" | "half" => "fp16",
        "float8_e4m3fn" | "float8_e5m2" => "fp8",
        "int8" => "int8",
        "int4" => "int4",
        _ => return None,
    })
}

/// Bits per element of a [`FORMATS`] name.
pub fn format_bits(name: &str) -> Option<Decimal> {
    FORMATS
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, b)| b.parse().ok())
}

/// `ceil(count x bits / 8)` bytes, exact (bits is a decimal such as 4.5).
pub fn bytes_for(count: u64, bits: Decimal) -> Option<u64> {
    let bytes = Decimal::from(count).checked_mul(bits)? / Decimal::from(8);
    u64::try_from(bytes.ceil()).ok()
}

/// KV-cache bytes of one token in `layer`, per sequence: `2 K d` elements (keys and values),
/// or `kv_lora_rank + qk_rope_head_dim` for latent attention.
pub fn kv_bytes_per_token_layer(arch: &Architecture, layer: &Layer, element_bytes: u64) -> u128 {
    let elements = match (layer.attention, &arch.latent) {
        (Attention::Latent, Some(l)) => u128::from(l.kv_lora_rank) + u128::from(l.qk_rope_head_dim),
        (Attention::Latent, None) => 0,
        (Attention::Full | Attention::Sliding(_) | Attention::Chunked(_), _) => {
            2 * u128::from(arch.kv_heads) * u128::from(arch.head_dim)
        }
    };
    elements * u128::from(element_bytes)
}

/// KV-cache bytes of one token of one sequence, summed over the layers.
pub fn kv_bytes_per_token(arch: &Architecture, element_bytes: u64) -> u128 {
    let sum: Sat = arch
        .layer_kinds
        .iter()
        .map(|l| Sat(kv_bytes_per_token_layer(arch, l, element_bytes)))
        .sum();
    sum.get()
}

/// KV-cache bytes for `batch` sequences of `context` tokens; with `windowed` false every layer
/// keeps every token (the prefill view, before the window is applied).
pub fn kv_cache_bytes(
    arch: &Architecture,
    element_bytes: u64,
    batch: u64,
    context: u64,
    windowed: bool,
) -> u128 {
    let per_sequence: Sat = arch
        .layer_kinds
        .iter()
        .map(|l| {
            let tokens = match (l.attention, windowed) {
                (Attention::Sliding(w) | Attention::Chunked(w), true) => context.min(w),
                _ => context,
            };
            Sat(kv_bytes_per_token_layer(arch, l, element_bytes)) * tokens
        })
        .sum();
    (per_sequence * batch).get()
}

/// Working memory of one decoder layer during prefill, bytes: the largest set of tensors
/// alive at once while one layer runs (layers run one after the other, so only one layer's
/// temporaries exist), plus the last position's logits.
///
/// Per token (e = activation element bytes): the residual stream and the normed input,
/// `2 H e`, the norm's fp32 upcast, `4 H`, and the larger of the feed-forward's
/// `3 I e` (gate, up and their product; for a mixture of experts, the tokens routed to one
/// expert, `k/E` of them, times `3 I e`, plus the router's fp32 scores and the fp32 output
/// accumulator) and the attention's queries, keys and values with their rotated copies and
/// the output, `(3 A d + 4 K d) e` (keys and values repeated to A heads when grouped).
/// Phi-3 keeps its fused gate-up output too: `4 I e`. A mixture of experts as `transformers`
/// 5.x runs it (grouped matrix products): `k (2 H + 4 I) e` per token for k experts per
/// token. Sliding-window attention past the window: one boolean `T x T` mask. Logits of the
/// last position are fp32, `4 V` per sequence.
pub fn activation_workspace(
    arch: &Architecture,
    element_bytes: u64,
    batch: u64,
    context: u64,
) -> u128 {
    let (whole, parts) = workspace_parts(arch, element_bytes, batch, context);
    whole.saturating_add(parts.at(1, 1))
}

/// [`activation_workspace`] in the parts tensor parallel treats apart: the bytes kept whole
/// on every GPU (residual stream, norm upcast, mask, logits) and the split parts
/// ([`Workspace`]); at degree 1 `whole + parts.at(1, 1)` is the workspace.
pub fn workspace_parts(
    arch: &Architecture,
    element_bytes: u64,
    batch: u64,
    context: u64,
) -> (u128, Workspace) {
    let e = Sat::from(element_bytes);
    let h = Sat::from(arch.hidden);
    let a = Sat::from(arch.heads);
    let k = Sat::from(arch.kv_heads);
    let d = Sat::from(arch.head_dim);
    let tokens = Sat::from(batch) * context;
    let (attention, kv) = match &arch.latent {
        Some(l) => {
            let qk = Sat::from(l.qk_nope_head_dim) + l.qk_rope_head_dim;
            let v = Sat::from(l.v_head_dim);
            ((3 * a * qk + 2 * a * v) * e, Sat(0))
        }
        None => (3 * a * d * e, 4 * k * d * e),
    };
    let i = Sat::from(arch.intermediate);
    let (ffn_whole, ffn) = match &arch.experts {
        // Phi-3's fused gate-up output stays alive beside the activation and the product.
        None if arch.fused_gate_up => (Sat(0), 4 * i * e),
        None => (Sat(0), 3 * i * e),
        Some(x) => {
            // Grouped experts: every (token, expert) pair gets its own copy of the hidden
            // state, unsorted and sorted, and its gate-up output, activation and product.
            let k = Sat::from(x.per_token);
            (
                k * 2 * h * e + 8 * Sat::from(x.routed),
                k * 4 * Sat::from(x.intermediate) * e + 3 * Sat::from(x.shared_intermediate) * e,
            )
        }
    };
    // Sliding-window layers attend through one boolean context x context mask (shared by the
    // batch) once the context passes the window.
    let t = Sat::from(context);
    let mask = if arch.layer_kinds.iter().any(
        |l| matches!(l.attention, Attention::Sliding(w) | Attention::Chunked(w) if w < context),
    ) {
        t * t
    } else {
        Sat(0)
    };
    let whole = (2 * h * e + 4 * h) * tokens + mask + 4 * Sat::from(arch.vocab) * batch;
    (
        whole.get(),
        Workspace {
            attention: (attention * tokens).get(),
            kv: (kv * tokens).get(),
            ffn_whole: (ffn_whole * tokens).get(),
            ffn: (ffn * tokens).get(),
        },
    )
}

/// Activations kept for the backward pass of one training step, bytes (16-bit activations).
///
/// Without checkpointing, per token and layer (Korthikanti et al. 2022, "Reducing Activation
/// Recomputation in Large Transformer Models", section 4, redone for RMSNorm, gated
/// feed-forward, grouped-query attention and a fused attention kernel that keeps no
/// `s x s` matrix): each RMSNorm keeps its fp32 input and its 16-bit normed output and
/// output, `8 H` (2 norms, 4 in Gemma 2/3); attention keeps Q, K, V, the output and its
/// reshaped copy, `6 A d + 4 K d`; the gated feed-forward keeps gate, up, activation and
/// product, `8 I` (MoE: `k` experts' share); Qwen3 and Gemma 3 query/key norms keep
/// `6 (A d + K d)`. Plus the loss at its backward peak: 16-bit logits, fp32 log-probabilities
/// and their fp32 and 16-bit gradients, `12 V` per token, and the final norm, `8 H`.
///
/// With checkpointing (one checkpoint per layer): each layer's 16-bit input, `2 H` per token
/// and layer, plus the larger of the loss peak and one layer recomputed in full.
pub fn training_activations(
    arch: &Architecture,
    batch: u64,
    context: u64,
    checkpointing: bool,
) -> u128 {
    let h = Sat::from(arch.hidden);
    let a = Sat::from(arch.heads);
    let k = Sat::from(arch.kv_heads);
    let d = Sat::from(arch.head_dim);
    let tokens = Sat::from(batch) * context;
    let norms = arch.norms_per_layer;
    let attention = match &arch.latent {
        Some(l) => {
            let qk = Sat::from(l.qk_nope_head_dim) + l.qk_rope_head_dim;
            let v = Sat::from(l.v_head_dim);
            2 * a * qk + 2 * a * qk + 2 * a * v + 4 * a * v
        }
        None => 6 * a * d + 4 * k * d,
    };
    let ffn = match &arch.experts {
        None => 8 * Sat::from(arch.intermediate),
        Some(x) => {
            8 * Sat::from(x.intermediate) * x.per_token
                + 8 * Sat::from(x.shared_intermediate)
                + 4 * Sat::from(x.routed)
        }
    };
    // Qwen3 and Gemma 3 normalise queries and keys: fp32 input and 16-bit normed copy.
    let qk_norm = if arch.qk_norm {
        6 * (a * d + k * d)
    } else {
        Sat(0)
    };
    let layer = 8 * h * norms + attention + qk_norm + ffn;
    let logits = 12 * Sat::from(arch.vocab) + 8 * h;
    let layers = Sat::from(arch.layers);
    if checkpointing {
        (tokens * (2 * h * layers + logits.max(layer))).get()
    } else {
        (tokens * (layer * layers + logits)).get()
    }
}

/// Training state bytes per parameter, with the share of each part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TrainingState {
    /// Gradients, bytes per parameter (the weights' width).
    pub gradients: u64,
    /// fp32 master weights, bytes per parameter (0 when the weights are fp32).
    pub master_weights: u64,
    /// AdamW first and second moments, fp32: 8 bytes per parameter.
    pub optimizer: u64,
}

/// [`TrainingState`] for weights of `weight_bytes` bytes per parameter (2 or 4).
pub fn training_state(weight_bytes: u64) -> TrainingState {
    TrainingState {
        gradients: weight_bytes,
        master_weights: if weight_bytes >= 4 { 0 } else { 4 },
        optimizer: 8,
    }
}
