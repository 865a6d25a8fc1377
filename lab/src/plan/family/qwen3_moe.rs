//! Qwen3-MoE (`Qwen3MoeConfig`, `modeling_qwen3_moe.py`, transformers 5.17): Qwen3's
//! attention (query and key norms, biases with `attention_bias`) and, per layer, either a
//! mixture of `num_experts` experts of width `moe_intermediate_size` (the stacked experts,
//! then the router `E x H`) or the dense MLP of width `intermediate_size`.
//!
//! A layer is a mixture of experts unless it is listed in `mlp_only_layers`, or
//! `decoder_sparse_step` does not divide its 1-based index (transformers'
//! `Qwen3MoeDecoderLayer`). Class defaults taken where a config is silent:
//! `num_key_value_heads` 4, `num_experts` (or `num_local_experts`) 128, `num_experts_per_tok` 8,
//! `moe_intermediate_size` 768, `decoder_sparse_step` 1, `sliding_window` 4096, `head_dim` `hidden_size /
//! num_attention_heads`, untied embeddings. `sliding_window` counts only with
//! `use_sliding_window` (`Qwen3MoeConfig.__post_init__` clears it otherwise), on every layer.

use super::sparse_step_layers;
use super::{attention, attention_pattern, check_experts, decoder, gated_mlp, layer_norms};
use super::{qk_norms, stacked_experts, Architecture, Attention, ClassDefaults, Experts};
use super::{Family, FeedForward, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// `Qwen3MoeConfig` defaults for the fields read here that a config may leave out.
const DEFAULTS: [(&str, u64); 5] = [
    ("num_key_value_heads", 4),
    ("sliding_window", 4096),
    ("num_experts_per_tok", 8),
    ("moe_intermediate_size", 768),
    ("decoder_sparse_step", 1),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(&DEFAULTS);
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
        kv_nullable: false,
        head_dim_nullable: false,
        attention_bias: true,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let on = f.boolean("use_sliding_window")?.unwrap_or(false);
    let pattern = attention_pattern(&f, arch.layers, |w, count| {
        Ok(vec![
            if on {
                Attention::Sliding(w)
            } else {
                Attention::Full
            };
            count
        ])
    })?;
    // The class's field is num_experts, stored as num_local_experts (its attribute map):
    // transformers writes the latter, public configs the former. Both, differently, say
    // two things.
    let named = match f.get("num_experts") {
        None => None,
        Some(_) => Some(f.required("num_experts")?),
    };
    let routed = match (named, f.optional("num_local_experts")?) {
        (Some(a), Some(b)) if a != b => {
            return Err(Error::usage(format!(
                "config.json: num_experts {a} and num_local_experts {b} disagree (Qwen3MoeConfig reads them as one field)"
            )))
        }
        (_, Some(n)) | (Some(n), None) => n,
        (None, None) if f.get("num_local_experts").is_some() => {
            f.required("num_local_experts")?
        }
        (None, None) => 128,
    };
    let experts = Experts {
        routed,
        per_token: f.required("num_experts_per_tok")?,
        intermediate: f.required("moe_intermediate_size")?,
        shared_intermediate: 0,
    };
    check_experts(&experts)?;
    arch.layer_kinds = sparse_step_layers(&f, pattern, arch.layers)?;
    arch.experts = Some(experts);
    arch.qk_norm = true;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    qk_norms(arch, t);
    match (layer.feed_forward, &arch.experts) {
        // Qwen3MoeSparseMoeBlock assigns its experts before its router.
        (FeedForward::Experts, Some(e)) => {
            stacked_experts(arch, e, t);
            t.other(&[e.routed, arch.hidden]);
        }
        // Qwen3MoeMLP is built with bias=False.
        _ => gated_mlp(arch, arch.intermediate, false, t),
    }
    layer_norms(arch, t);
}
