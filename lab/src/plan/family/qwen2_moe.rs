//! Qwen2-MoE (`Qwen2MoeConfig`, `modeling_qwen2_moe.py`, transformers 5.17; Qwen1.5-MoE):
//! Qwen2's attention (biases on q, k, v with `qkv_bias`, default true; none on the output)
//! and, per layer, either a mixture of experts or the dense MLP of width
//! `intermediate_size`. The mixture assigns its router `E x H`, the stacked experts of width
//! `moe_intermediate_size`, one shared expert of width `shared_expert_intermediate_size` and
//! that expert's gate `1 x H`, in that order.
//!
//! A layer is a mixture of experts unless it is listed in `mlp_only_layers`, or
//! `decoder_sparse_step` does not divide its 1-based index. Windows: only with
//! `use_sliding_window`, on the even layers below `max_window_layers` (or the layers
//! `layer_types` lists as sliding); without it the class sets the window to 0, so a
//! `layer_types` that still lists sliding layers is refused. Class defaults where a config
//! is silent: `num_key_value_heads` 16, `num_experts` 60, `num_experts_per_tok` 4,
//! `moe_intermediate_size` 1408, `shared_expert_intermediate_size` 5632,
//! `decoder_sparse_step` 1, `sliding_window` 4096, `max_window_layers` 28.

use super::sparse_step_layers;
use super::{attention, attention_pattern, check_experts, decoder, gated_mlp, layer_norms};
use super::{slide_where, stacked_experts, Architecture, Attention, ClassDefaults, Experts};
use super::{Family, FeedForward, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// `Qwen2MoeConfig` defaults for the fields read here that a config may leave out.
const DEFAULTS: [(&str, u64); 8] = [
    ("num_key_value_heads", 16),
    ("num_experts", 60),
    ("num_experts_per_tok", 4),
    ("moe_intermediate_size", 1408),
    ("shared_expert_intermediate_size", 5632),
    ("decoder_sparse_step", 1),
    ("sliding_window", 4096),
    ("max_window_layers", 28),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(&DEFAULTS);
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
        // The class leaves a null num_key_value_heads null (no __post_init__ fill): it
        // cannot build that model.
        kv_nullable: false,
        head_dim_nullable: false,
        attention_bias: false,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let on = f.boolean("use_sliding_window")?.unwrap_or(false);
    let listed = matches!(f.get("layer_types"), Some(Value::Array(_)));
    let pattern = attention_pattern(&f, arch.layers, |w, count| {
        let until = f.required("max_window_layers")?;
        Ok(slide_where(w, count, |i| {
            on && i % 2 == 0 && (i as u64) < until
        }))
    })?;
    let sliding = pattern.iter().any(|a| matches!(a, Attention::Sliding(_)));
    if listed && sliding && !on {
        return Err(Error::usage(
            "config.json: \"layer_types\" lists sliding_attention layers but use_sliding_window is not true (Qwen2MoeConfig then gives them a window of 0): set use_sliding_window or list full_attention",
        ));
    }
    let qkv_bias = f.boolean("qkv_bias")?.unwrap_or(true);
    let experts = Experts {
        routed: f.required("num_experts")?,
        per_token: f.required("num_experts_per_tok")?,
        intermediate: f.required("moe_intermediate_size")?,
        shared_intermediate: f.required("shared_expert_intermediate_size")?,
    };
    check_experts(&experts)?;
    arch.layer_kinds = sparse_step_layers(&f, pattern, arch.layers)?;
    arch.experts = Some(experts);
    // The q, k, v biases are the attention biases of this family.
    arch.attention_bias = qkv_bias;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, false, t);
    match (layer.feed_forward, &arch.experts) {
        (FeedForward::Experts, Some(e)) => {
            t.other(&[e.routed, arch.hidden]);
            stacked_experts(arch, e, t);
            gated_mlp(arch, e.shared_intermediate, false, t);
            t.other(&[1, arch.hidden]);
        }
        // Qwen2MoeMLP is built with bias=False.
        _ => gated_mlp(arch, arch.intermediate, false, t),
    }
    layer_norms(arch, t);
}
