//! Mixtral (`MixtralConfig`, `modeling_mixtral.py`): Mistral's attention and window; every
//! layer's feed-forward is `num_local_experts` experts of width `intermediate_size`, the
//! router `E x H` assigned before the stacked experts. `MixtralConfig` defaults
//! (transformers 5.17) where a config is silent: `num_key_value_heads` 8, no window,
//! `num_local_experts` 8, `num_experts_per_tok` 2.

use super::{attention, attention_pattern, check_experts, decoder, gated_mlp, layer_norms};
use super::{stacked_experts, Architecture, Attention, ClassDefaults, Experts, Family};
use super::{FeedForward, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

/// `MixtralConfig` defaults for absent keys.
const DEFAULTS: [(&str, u64); 3] = [
    ("num_key_value_heads", 8),
    ("num_local_experts", 8),
    ("num_experts_per_tok", 2),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(&DEFAULTS);
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
        kv_nullable: false,
        head_dim_nullable: true,
        attention_bias: false,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let every = |w, count| Ok(vec![Attention::Sliding(w); count]);
    let pattern = attention_pattern(&f, arch.layers, every)?;
    let experts = Experts {
        // MixtralConfig's attribute_map reads num_experts as num_local_experts.
        routed: f.required_any(&["num_local_experts", "num_experts"])?,
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
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    match (layer.feed_forward, &arch.experts) {
        (FeedForward::Experts, Some(e)) => {
            t.other(&[e.routed, arch.hidden]);
            stacked_experts(arch, e, t);
        }
        _ => gated_mlp(arch, arch.intermediate, arch.mlp_bias, t),
    }
    layer_norms(arch, t);
}
