//! Granite (`GraniteConfig`, `modeling_granite.py`, transformers 5.17; IBM Granite 3.x): Llama's
//! layer (biases with `attention_bias` on q, k, v and o, with `mlp_bias` on the MLP), two
//! RMSNorms per layer. Its multipliers (`embedding_multiplier`, `residual_multiplier`,
//! `attention_multiplier`, `logits_scaling`) scale activations and add no tensor. Defaults
//! where a config is silent: `num_key_value_heads` the attention heads (null too),
//! `head_dim` `hidden_size / num_attention_heads`, untied embeddings; no window.

use super::{attention, decoder, dense, gated_mlp, layer_count, layer_norms};
use super::{Architecture, Attention, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type());
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
        kv_nullable: true,
        head_dim_nullable: false,
        attention_bias: true,
        mlp_bias: true,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    // GraniteAttention keeps no window and the class has no layer_types.
    arch.layer_kinds = dense(vec![Attention::Full; layer_count(arch.layers)?]);
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
