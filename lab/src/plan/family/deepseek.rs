//! DeepSeek-V2 and V3 (`DeepseekV2Config`, `DeepseekV3Config`, `modeling_deepseek_v2.py`,
//! `modeling_deepseek_v3.py`): multi-head latent attention on every layer (no window); the
//! first `first_k_dense_replace` layers dense, the others a mixture of `n_routed_experts`
//! experts (routed experts, router, V3's score-correction bias, shared experts). A config
//! that leaves out `n_routed_experts` (or its alias, V2's `num_experts`, V3's
//! `num_local_experts`) or `q_lora_rank` is refused naming it (the classes would build 64 or
//! 256 experts and a 1536-wide query compression, far from a config that simply does not
//! mention them); `q_lora_rank: null` states a plain query projection, while the expert
//! counts are strict integers to the classes and null is refused.

use super::{check_experts, decoder, gated_mlp, layer_count, layer_norms, stacked_experts};
use super::{Architecture, Attention, ClassDefaults, Experts, Family, FeedForward, Latent, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// Class defaults (transformers 5.17) for absent keys that keep the architecture a config
/// describes: shared experts (`DeepseekV2Config` 2, `DeepseekV3Config` 1), dense first
/// layers (V2 0, V3 3), an expert layer every `moe_layer_freq` (1). An absent
/// `num_key_value_heads` stays the attention heads (V3's class says 128): latent attention
/// caches one latent per token whatever that count is.
fn defaults(family: Family) -> &'static [(&'static str, u64)] {
    match family {
        Family::DeepseekV3 => &[
            ("n_shared_experts", 1),
            ("first_k_dense_replace", 3),
            ("moe_layer_freq", 1),
        ],
        _ => &[
            ("n_shared_experts", 2),
            ("first_k_dense_replace", 0),
            ("moe_layer_freq", 1),
        ],
    }
}

/// Refuses a config that leaves out `key`: the class would build `built` (its default),
/// which a config that does not say so may well not mean; `null` states the feature is off.
fn stated(f: &Fields, family: Family, key: &str, built: &str, off: &str) -> Result<()> {
    if f.get(key).is_none() {
        return Err(Error::usage(format!(
            "config.json (model_type {}) has no \"{key}\": transformers would build {built}; state it (null for {off})",
            family.model_type()
        )));
    }
    Ok(())
}

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(defaults(family));
    let class = ClassDefaults {
        head_dim: None,
        tied: false,
        kv_nullable: true,
        head_dim_nullable: true,
        // The latent attention's q_a, kv_a and output projections take `attention_bias`;
        // only DeepseekV2MLP reads `mlp_bias` (V3's MLP has none).
        attention_bias: true,
        mlp_bias: family == Family::DeepseekV2,
    };
    let mut arch = decoder(family, &f, top, class)?;
    let count = layer_count(arch.layers)?;
    let routed_default = if family == Family::DeepseekV3 {
        "256"
    } else {
        "64"
    };
    // The expert count's other name (the class's attribute_map).
    let alias = if family == Family::DeepseekV3 {
        "num_local_experts"
    } else {
        "num_experts"
    };
    if f.get("n_routed_experts").is_none() && f.get(alias).is_none() {
        return Err(Error::usage(format!(
            "config.json (model_type {}) has no \"n_routed_experts\": transformers would build {routed_default} routed experts; state the count",
            family.model_type()
        )));
    }
    stated(
        &f,
        family,
        "q_lora_rank",
        "a 1536-wide query compression",
        "a plain query projection",
    )?;
    // The classes type these counts `int`: null is refused (transformers 5.17 refuses it).
    let routed = f.required_any(&["n_routed_experts", alias])?;
    let moe_intermediate = f.required("moe_intermediate_size")?;
    let shared = f.required("n_shared_experts")?;
    let freq = f.required("moe_layer_freq")?;
    if freq != 1 {
        return Err(Error::usage(format!(
            "config.json: moe_layer_freq {freq} is not supported (only every layer after first_k_dense_replace)"
        )));
    }
    let experts = Experts {
        routed,
        per_token: f.required("num_experts_per_tok")?,
        intermediate: moe_intermediate,
        shared_intermediate: moe_intermediate.checked_mul(shared).ok_or_else(|| {
            Error::usage(format!(
                "config.json: moe_intermediate_size {moe_intermediate} x n_shared_experts {shared} overflows 64 bits"
            ))
        })?,
    };
    let dense_layers = f.required("first_k_dense_replace")?.min(arch.layers);
    let experts = Some(experts);
    arch.latent = Some(Latent {
        kv_lora_rank: f.required("kv_lora_rank")?,
        q_lora_rank: f.optional("q_lora_rank")?,
        qk_rope_head_dim: f.required("qk_rope_head_dim")?,
        qk_nope_head_dim: f.required("qk_nope_head_dim")?,
        v_head_dim: f.required("v_head_dim")?,
    });
    if let Some(e) = &experts {
        check_experts(e)?;
    }
    // The class's num_mtp_layers, stored as num_nextn_predict_layers (its attribute map);
    // absent, 1 for V3. Only the headers' accounting reads it (plan::mtp).
    if family == Family::DeepseekV3 && experts.is_some() {
        arch.mtp_layers = match f.get("num_nextn_predict_layers") {
            Some(Value::Number(n)) if n.as_u64() == Some(0) => 0,
            None => f.optional("num_mtp_layers")?.unwrap_or(1),
            Some(_) => f.required("num_nextn_predict_layers")?,
        };
    }
    arch.experts = experts;
    arch.layer_kinds = (0..count)
        .map(|i| Layer {
            attention: Attention::Latent,
            feed_forward: if (i as u64) < dense_layers {
                FeedForward::Dense
            } else {
                FeedForward::Experts
            },
        })
        .collect();
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, layer: &Layer, t: &mut Sink) {
    let (h, a) = (arch.hidden, arch.heads);
    if let Some(l) = &arch.latent {
        let qk = l.qk_nope_head_dim.saturating_add(l.qk_rope_head_dim);
        match l.q_lora_rank {
            None => t.linear(&[a.saturating_mul(qk), h]),
            Some(q) => {
                t.linear(&[q, h]);
                if arch.attention_bias {
                    t.other(&[q]);
                }
                t.other(&[q]);
                t.linear(&[a.saturating_mul(qk), q]);
            }
        }
        let c = l.kv_lora_rank;
        t.linear(&[c.saturating_add(l.qk_rope_head_dim), h]);
        if arch.attention_bias {
            t.other(&[c.saturating_add(l.qk_rope_head_dim)]);
        }
        t.other(&[c]);
        let nv = l.qk_nope_head_dim.saturating_add(l.v_head_dim);
        t.linear(&[a.saturating_mul(nv), c]);
        t.linear(&[h, a.saturating_mul(l.v_head_dim)]);
        if arch.attention_bias {
            t.other(&[h]);
        }
    }
    match (layer.feed_forward, &arch.experts) {
        (FeedForward::Experts, Some(e)) => {
            // Routed experts, the router (and V3's score correction), shared experts.
            stacked_experts(arch, e, t);
            t.other(&[e.routed, h]);
            if arch.family == Family::DeepseekV3 {
                t.other(&[e.routed]);
            }
            if e.shared_intermediate > 0 {
                gated_mlp(arch, e.shared_intermediate, arch.mlp_bias, t);
            }
        }
        // DeepseekV3MLP is built with bias=False whatever the config says; V2's takes
        // mlp_bias.
        _ => gated_mlp(arch, arch.intermediate, arch.mlp_bias, t),
    }
    layer_norms(arch, t);
}
