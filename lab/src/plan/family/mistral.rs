//! Mistral (`MistralConfig`, `modeling_mistral.py`): Llama's layer; with a `sliding_window`
//! every layer keeps at most that many tokens (unless the config lists `layer_types`).
//! `MistralConfig` defaults (transformers 5.17) where a config is silent:
//! `num_key_value_heads` 8 and `sliding_window` 4096; an explicit null is "the attention
//! heads" and "no window", as `__post_init__` reads it.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms};
use super::{Architecture, Attention, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

/// `MistralConfig` defaults for absent keys.
const DEFAULTS: [(&str, u64); 2] = [("num_key_value_heads", 8), ("sliding_window", 4096)];

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
    arch.layer_kinds = dense(attention_pattern(&f, arch.layers, every)?);
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
