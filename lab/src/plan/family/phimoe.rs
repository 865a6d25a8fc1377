//! Phi-3.5-MoE (`PhimoeConfig`, `modeling_phimoe.py`, transformers 5.17): separate q, k, v, o
//! projections with biases when `attention_bias`; every layer a mixture of
//! `num_local_experts` experts of width `intermediate_size` (the router `E x H` assigned
//! before the stacked experts); its norms are `nn.LayerNorm`s, each a weight and a bias (the
//! two per layer and the final one); the output head has a `vocab`-wide bias when
//! `lm_head_bias`. With a `sliding_window` every layer slides. `PhimoeConfig` defaults where
//! a config is silent: `num_key_value_heads` 8, `num_local_experts` 16,
//! `num_experts_per_tok` 2, no window, untied embeddings; the class refuses null for each of
//! these integers, and so does lab.

use super::{attention, attention_pattern, check_experts, decoder, layer_norms};
use super::{stacked_experts, Architecture, Attention, ClassDefaults, Experts, Family};
use super::{FeedForward, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

/// `PhimoeConfig` defaults for absent keys.
const DEFAULTS: [(&str, u64); 3] = [
    ("num_key_value_heads", 8),
    ("num_local_experts", 16),
    ("num_experts_per_tok", 2),
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
    let every = |w, count| Ok(vec![Attention::Sliding(w); count]);
    let pattern = attention_pattern(&f, arch.layers, every)?;
    let experts = Experts {
        routed: f.required("num_local_experts")?,
        per_token: f.required("num_experts_per_tok")?,
        intermediate: arch.intermediate,
        shared_intermediate: 0,
    };
    check_experts(&experts)?;
    arch.experts = Some(experts);
    arch.layer_kinds = pattern
        .into_iter()
        .map(|attention| Layer {
            attention,
            feed_forward: FeedForward::Experts,
        })
        .collect();
    arch.norm_bias = true;
    arch.head_bias = f.boolean("lm_head_bias")?.unwrap_or(false);
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    if let Some(e) = &arch.experts {
        t.other(&[e.routed, arch.hidden]);
        stacked_experts(arch, e, t);
    }
    layer_norms(arch, t);
}
