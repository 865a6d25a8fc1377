//! Parameter counts from architecture facts, per family, as `transformers` builds the model.
//!
//! Per decoder layer (H hidden, A heads, K key/value heads, d head width, I intermediate):
//! - attention: Q `H x A d`, K and V `H x K d` each, output `A d x H`; Phi-3 fuses Q, K and V
//!   into one matrix of the same total; biases on Q, K, V for Qwen2 (always) and on Q, K, V
//!   and output when `attention_bias` is true (Llama, Qwen3, Gemma);
//!   Qwen3 and Gemma 3 add a `d`-wide RMSNorm on queries and one on keys;
//! - gated feed-forward: gate, up and down, `3 H I` (Phi-3 fuses gate and up, same total);
//!   Mixtral: E experts of `3 H I` plus the router `H x E`; DeepSeek: routed experts,
//!   shared experts and a router on MoE layers, a dense MLP on the first layers;
//! - norms: 2 RMSNorms of H per layer (4 for Gemma 2/3), one final norm;
//! - embedding `V x H`, and an output head `H x V` unless tied (Gemma ties by default);
//! - multi-head latent attention (DeepSeek-V2/V3): q (`H x A(n+r)`, or `H x q` + norm `q` +
//!   `q x A(n+r)` with a query rank q), `kv_a` `H x (c + r)`, norm `c`, `kv_b`
//!   `c x A(n + v)`, output `A v x H`.
//!
//! Sources: the `modeling_*.py` files of `transformers` 5.x for each family; cross-checked
//! with the tensors a real build allocates on the H200 (`scripts/plan_h200.py`).

use super::config::Architecture;
use super::sat::Sat;
use serde::Serialize;

/// Parameters by role: quantizers convert `linear` (decoder matrices), and keep the rest
/// (embeddings, output head, norms, biases, routers) in 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ParameterCounts {
    /// Token embedding `V x H`.
    pub embedding: u64,
    /// Output head `H x V` (0 when tied to the embedding).
    pub output_head: u64,
    /// Weight matrices of the decoder layers (attention, feed-forward, experts).
    pub linear: u64,
    /// Norms, biases and routers.
    pub other: u64,
    /// Vision tower and projector of a multimodal checkpoint (0 otherwise).
    pub vision: u64,
}

impl ParameterCounts {
    /// All parameters.
    pub fn total(&self) -> u128 {
        u128::from(self.embedding)
            + u128::from(self.output_head)
            + u128::from(self.linear)
            + u128::from(self.other)
            + u128::from(self.vision)
    }
}

/// Counts the parameters of `arch`, in saturating u128 ([`Sat`]): a count past 2^128 stays
/// `u128::MAX`, which [`Counts128::narrow`] refuses.
///
/// `attention_bias` and `mlp_bias` come from the config (`false` when absent).
pub fn count(arch: &Architecture, attention_bias: bool, mlp_bias: bool) -> Counts128 {
    let h = Sat::from(arch.hidden);
    let a = Sat::from(arch.heads);
    let k = Sat::from(arch.kv_heads);
    let d = Sat::from(arch.head_dim);
    let i = Sat::from(arch.intermediate);
    let v = Sat::from(arch.vocab);
    let layers = Sat::from(arch.layers);
    let family = arch.model_type.as_str();
    let is_gemma23 = matches!(family, "gemma2" | "gemma3_text" | "gemma3");

    let mut linear_per_layer: Sat;
    let mut other_per_layer: Sat = if is_gemma23 { 4 * h } else { 2 * h };
    let mut linear_total = Sat(0);
    let mut other_total = Sat(0);

    match &arch.latent {
        Some(l) => {
            let n = Sat::from(l.qk_nope_head_dim);
            let r = Sat::from(l.qk_rope_head_dim);
            let c = Sat::from(l.kv_lora_rank);
            let vd = Sat::from(l.v_head_dim);
            linear_per_layer = match l.q_lora_rank {
                None => h * a * (n + r),
                Some(q) => {
                    let q = Sat::from(q);
                    other_per_layer += q;
                    h * q + q * a * (n + r)
                }
            };
            linear_per_layer += h * (c + r) + c * a * (n + vd) + a * vd * h;
            other_per_layer += c;
        }
        None => {
            linear_per_layer = h * a * d + 2 * h * k * d + a * d * h;
            if family == "qwen2" {
                other_per_layer += a * d + 2 * k * d;
            } else if attention_bias {
                other_per_layer += a * d + 2 * k * d + h;
            }
            if matches!(family, "qwen3" | "gemma3_text" | "gemma3") {
                other_per_layer += 2 * d;
            }
        }
    }

    match &arch.experts {
        None => {
            linear_per_layer += 3 * h * i;
            if mlp_bias {
                other_per_layer += 2 * i + h;
            }
            linear_total += layers * linear_per_layer;
            other_total += layers * other_per_layer;
        }
        Some(e) => {
            let routed = Sat::from(e.routed);
            let ei = Sat::from(e.intermediate);
            let shared = Sat::from(e.shared_intermediate);
            let dense = Sat::from(e.dense_layers);
            let moe_layers = Sat::from(arch.layers.saturating_sub(e.dense_layers));
            // Dense layers: the plain gated MLP of width I.
            linear_total += dense * (linear_per_layer + 3 * h * i);
            other_total += dense * other_per_layer;
            // MoE layers: routed experts, shared experts, router (H x E, kept in 16 bits);
            // DeepSeek-V3 also stores a per-expert score-correction bias.
            linear_total += moe_layers * (linear_per_layer + routed * 3 * h * ei + 3 * h * shared);
            let correction = if family == "deepseek_v3" {
                routed
            } else {
                Sat(0)
            };
            other_total += moe_layers * (other_per_layer + h * routed + correction);
        }
    }
    other_total += h; // final norm

    let vision = match &arch.vision {
        None => Sat(0),
        Some(vt) => {
            let vh = Sat::from(vt.hidden);
            let vi = Sat::from(vt.intermediate);
            let p = Sat::from(vt.patch_size);
            let side = Sat::from(vt.image_size / vt.patch_size.max(1));
            let patches = side * side;
            let embeddings = Sat::from(vt.channels) * p * p * vh + vh + patches * vh;
            // q, k, v, out with biases; two LayerNorms (weight + bias); fc1, fc2 with biases.
            let per_layer = 4 * (vh * vh + vh) + 4 * vh + (vh * vi + vi) + (vi * vh + vh);
            let post_norm = 2 * vh;
            // Gemma 3 projector: vision-to-text matrix and an RMSNorm of the vision width.
            let projector = vh * h + vh;
            // SigLIP's attention-pooling head, when built: a probe, multi-head attention
            // (packed q/k/v and the output, with biases), a LayerNorm and an MLP.
            let head = if vt.head {
                vh + (3 * vh * vh + 3 * vh)
                    + (vh * vh + vh)
                    + 2 * vh
                    + (vh * vi + vi)
                    + (vi * vh + vh)
            } else {
                Sat(0)
            };
            embeddings + Sat::from(vt.layers) * per_layer + post_norm + head + projector
        }
    };

    Counts128 {
        embedding: (v * h).get(),
        output_head: if arch.tied_embeddings {
            0
        } else {
            (v * h).get()
        },
        linear: linear_total.get(),
        other: other_total.get(),
        vision: vision.get(),
    }
}

/// [`ParameterCounts`] before the check that each fits in 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts128 {
    /// See [`ParameterCounts::embedding`].
    pub embedding: u128,
    /// See [`ParameterCounts::output_head`].
    pub output_head: u128,
    /// See [`ParameterCounts::linear`].
    pub linear: u128,
    /// See [`ParameterCounts::other`].
    pub other: u128,
    /// See [`ParameterCounts::vision`].
    pub vision: u128,
}

impl Counts128 {
    /// The counts as `u64`, or `None` when the total does not fit (no real model comes near).
    pub fn narrow(&self) -> Option<ParameterCounts> {
        let total = self
            .embedding
            .checked_add(self.output_head)?
            .checked_add(self.linear)?
            .checked_add(self.other)?
            .checked_add(self.vision)?;
        u64::try_from(total).ok()?;
        Some(ParameterCounts {
            embedding: u64::try_from(self.embedding).ok()?,
            output_head: u64::try_from(self.output_head).ok()?,
            linear: u64::try_from(self.linear).ok()?,
            other: u64::try_from(self.other).ok()?,
            vision: u64::try_from(self.vision).ok()?,
        })
    }
}
