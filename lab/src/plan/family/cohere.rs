//! Command-R (`CohereConfig`, `modeling_cohere.py`) and Command R7B / Aya (`Cohere2Config`,
//! `modeling_cohere2.py`), transformers 5.17: one weight-only LayerNorm per layer (attention
//! and MLP run in parallel on its output), biases on q, k, v and o with `attention_bias`, a
//! bias-free gated MLP, tied embeddings unless `tie_word_embeddings` is false.
//!
//! `cohere`: full attention everywhere; with `use_qk_norm` a LayerNorm over each query and key
//! head (weights `A x d` and `K x d`) after the output projection. `cohere2`: no query/key
//! norms; `layer_types` when listed, else `Cohere2Config.__post_init__`'s rule: sliding except
//! every `sliding_window_pattern`-th layer (default 4), window `sliding_window` (default 4096;
//! null: no window, every layer full). Both classes default `num_key_value_heads` to the
//! attention heads (absent or null) and `head_dim` to `hidden_size / num_attention_heads`.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_count, layer_norms};
use super::{slide_where, Architecture, Attention, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

/// `Cohere2Config` defaults for absent keys (`sliding_window_pattern` is popped from its
/// keyword arguments with 4).
const COHERE2_DEFAULTS: [(&str, u64); 2] =
    [("sliding_window", 4096), ("sliding_window_pattern", 4)];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = match family {
        Family::Cohere2 => Fields::new(top, family.model_type()).with_defaults(&COHERE2_DEFAULTS),
        _ => Fields::new(top, family.model_type()),
    };
    let defaults = ClassDefaults {
        head_dim: None,
        tied: true,
        kv_nullable: true,
        head_dim_nullable: false,
        attention_bias: true,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    arch.norms_per_layer = 1;
    if family == Family::Cohere2 {
        // The class derives layer_types from the pattern whenever none are listed, window
        // or not, so the pattern is read (and a bad one refused) in both cases.
        let every = match f.get("layer_types") {
            None | Some(Value::Null) => Some(f.required("sliding_window_pattern")?),
            Some(_) => None,
        };
        let pattern = attention_pattern(&f, arch.layers, |w, count| {
            let every = every.unwrap_or(1);
            Ok(slide_where(w, count, |i| {
                !(i as u64 + 1).is_multiple_of(every)
            }))
        })?;
        arch.layer_kinds = dense(pattern);
    } else {
        // CohereAttention keeps no window and the class has no layer_types.
        arch.layer_kinds = dense(vec![Attention::Full; layer_count(arch.layers)?]);
        // `use_qk_norm: bool | None`: null builds no norms, as false does.
        arch.qk_norm = match f.get("use_qk_norm") {
            Some(Value::Null) => false,
            _ => f.boolean("use_qk_norm")?.unwrap_or(false),
        };
    }
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    if arch.qk_norm {
        // CohereLayerNorm over (heads, head_dim): one weight per head and width.
        t.other(&[arch.heads.saturating_mul(arch.head_dim)]);
        t.other(&[arch.kv_heads.saturating_mul(arch.head_dim)]);
    }
    gated_mlp(arch, arch.intermediate, false, t);
    layer_norms(arch, t);
}
