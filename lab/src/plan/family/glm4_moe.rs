//! GLM-4.5 / GLM-4.6 (`Glm4MoeConfig`, `modeling_glm4_moe.py`, transformers 5.17): biases on
//! q, k and v with `attention_bias` (none on the output projection), `head_dim`-wide query and
//! key RMSNorms with `use_qk_norm`; the first `first_k_dense_replace` layers a dense MLP of
//! width `intermediate_size`, every later one `n_routed_experts` stacked experts of width
//! `moe_intermediate_size`, the router `E x H` with its fp32 score-correction buffer, then
//! shared experts of width `moe_intermediate_size x n_shared_experts`; no window. Only part of
//! each head is rotary (`partial_rotary_factor`, default 0.5 as `Glm4MoeConfig.__post_init__`
//! sets it), so the rotary buffers are `int(head_dim x factor) / 2` wide. The
//! multi-token-prediction layer (`num_nextn_predict_layers`) is not built by transformers and
//! is not counted.
//!
//! `Glm4MoeConfig` defaults where a config is silent: `num_key_value_heads` 8,
//! `n_routed_experts` (alias `num_local_experts`) 128, `num_experts_per_tok` 8,
//! `moe_intermediate_size` 1408, `n_shared_experts` 1, `first_k_dense_replace` 1,
//! `head_dim` `hidden_size / num_attention_heads`, untied embeddings; null is refused for
//! each (the class's fields are strict `int`s).

use super::{attention, check_experts, decoder, gated_mlp, layer_count, layer_norms, qk_norms};
use super::{stacked_experts, Architecture, Attention, ClassDefaults, Experts, Family};
use super::{FeedForward, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::{Error, Result};
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde_json::{Map, Value};
use std::str::FromStr;

/// `Glm4MoeConfig` defaults for absent keys.
const DEFAULTS: [(&str, u64); 6] = [
    ("num_key_value_heads", 8),
    ("n_routed_experts", 128),
    ("num_experts_per_tok", 8),
    ("moe_intermediate_size", 1408),
    ("n_shared_experts", 1),
    ("first_k_dense_replace", 1),
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
    let count = layer_count(arch.layers)?;
    // The class maps num_local_experts onto n_routed_experts; when both are given the alias
    // is the one kept, which a config stating two counts cannot be assumed to mean.
    let routed = f.required("n_routed_experts")?;
    let routed = match f.get("num_local_experts") {
        None => routed,
        Some(_) => {
            let alias = f.required("num_local_experts")?;
            if f.get("n_routed_experts").is_some() && alias != routed {
                return Err(Error::usage(format!(
                    "config.json: n_routed_experts {routed} and num_local_experts {alias} disagree (Glm4MoeConfig reads them as one field)"
                )));
            }
            alias
        }
    };
    let moe_intermediate = f.required("moe_intermediate_size")?;
    let shared = f.required("n_shared_experts")?;
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
    check_experts(&experts)?;
    let first_dense = f.required("first_k_dense_replace")?;
    arch.layer_kinds = (0..count)
        .map(|i| Layer {
            attention: Attention::Full,
            feed_forward: if (i as u64) < first_dense {
                FeedForward::Dense
            } else {
                FeedForward::Experts
            },
        })
        .collect();
    arch.experts = Some(experts);
    arch.qk_norm = f.boolean("use_qk_norm")?.unwrap_or(false);
    arch.rotary_width = Some(rotary_width(top, arch.head_dim)?);
    Ok(arch)
}

/// `int(head_dim x partial_rotary_factor)`: the factor of `rope_parameters` (or its older
/// name `rope_scaling`) when it states one, else the top-level `partial_rotary_factor`, else
/// 0.5; a null top-level factor is the whole head (transformers drops it, then rotates
/// `head_dim`).
fn rotary_width(top: &Map<String, Value>, head_dim: u64) -> Result<u64> {
    let nested = ["rope_parameters", "rope_scaling"]
        .iter()
        .find_map(|k| match top.get(*k) {
            Some(Value::Object(r)) => r.get("partial_rotary_factor"),
            _ => None,
        });
    let factor = match nested.or(top.get("partial_rotary_factor")) {
        None => Decimal::new(5, 1),
        Some(Value::Null) => Decimal::ONE,
        Some(Value::Number(n)) => Decimal::from_str(&n.to_string())
            .or_else(|_| Decimal::from_scientific(&n.to_string()))
            .ok()
            .filter(|d| *d > Decimal::ZERO && *d <= Decimal::ONE)
            .ok_or_else(|| bad_factor(&n.to_string()))?,
        Some(other) => return Err(bad_factor(&other.to_string())),
    };
    (factor * Decimal::from(head_dim))
        .floor()
        .to_u64()
        .ok_or_else(|| bad_factor(&factor.to_string()))
}

fn bad_factor(found: &str) -> Error {
    Error::usage(format!(
        "config.json: \"partial_rotary_factor\" must be a number above 0 and at most 1, found {}",
        crate::text::excerpt(found)
    ))
}

pub(super) fn layer(arch: &Architecture, layer: &Layer, t: &mut Sink) {
    // Glm4MoeAttention's output projection is built with bias=False.
    attention(arch, arch.attention_bias, false, t);
    if arch.qk_norm {
        qk_norms(arch, t);
    }
    match (layer.feed_forward, &arch.experts) {
        (FeedForward::Experts, Some(e)) => {
            // Glm4MoeMoE assigns the experts, the router (weight, then its fp32 buffer),
            // then the shared experts.
            stacked_experts(arch, e, t);
            t.other(&[e.routed, arch.hidden]);
            t.buffer(4, &[e.routed]);
            gated_mlp(arch, e.shared_intermediate, false, t);
        }
        _ => gated_mlp(arch, arch.intermediate, false, t),
    }
    layer_norms(arch, t);
}
