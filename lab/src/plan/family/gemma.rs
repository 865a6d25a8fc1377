//! Gemma (`GemmaConfig`, `modeling_gemma.py`): Llama's layer with `head_dim` 256 and tied
//! embeddings by default, and the embedding scale kept as a buffer. Every layer attends in
//! full, unless the config lists `layer_types`.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms};
use super::{Architecture, Attention, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    // GemmaConfig (transformers 5.17): 16 key/value heads where the config is silent.
    let f = Fields::new(top, family.model_type()).with_defaults(&[("num_key_value_heads", 16)]);
    let defaults = ClassDefaults {
        head_dim: Some(256),
        tied: true,
        kv_nullable: false,
        head_dim_nullable: false,
        attention_bias: true,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let full = |_, count| Ok(vec![Attention::Full; count]);
    arch.layer_kinds = dense(attention_pattern(&f, arch.layers, full)?);
    arch.embedding_scale = true;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
