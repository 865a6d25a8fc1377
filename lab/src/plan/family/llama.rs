//! Llama (`LlamaConfig`, `modeling_llama.py`): grouped-query attention with optional biases
//! (`attention_bias` on q, k, v and o), a gated MLP (`mlp_bias`), two RMSNorms per layer.
//! Defaults where a config is silent: `num_key_value_heads` the attention heads, `head_dim`
//! `hidden_size / num_attention_heads`, untied embeddings. Every layer attends in full,
//! unless the config lists `layer_types`.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms};
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
        head_dim_nullable: true,
        attention_bias: true,
        mlp_bias: true,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let full = |_, count| Ok(vec![Attention::Full; count]);
    arch.layer_kinds = dense(attention_pattern(&f, arch.layers, full)?);
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
