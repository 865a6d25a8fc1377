//! Gemma 2 (`Gemma2Config`, `modeling_gemma2.py`): Gemma's defaults (`head_dim` 256, tied
//! embeddings, the embedding scale buffer) with four RMSNorms per layer; with a
//! `sliding_window`, every other layer slides, from the first (unless `layer_types` lists
//! them).

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms, slide_where};
use super::{Architecture, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

/// `Gemma2Config` defaults (transformers 5.17) for absent keys.
const DEFAULTS: [(&str, u64); 2] = [("num_key_value_heads", 4), ("sliding_window", 4096)];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(&DEFAULTS);
    let defaults = ClassDefaults {
        head_dim: Some(256),
        tied: true,
        kv_nullable: false,
        head_dim_nullable: false,
        attention_bias: true,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let alternate = |w, count| Ok(slide_where(w, count, |i| i % 2 == 0));
    arch.layer_kinds = dense(attention_pattern(&f, arch.layers, alternate)?);
    arch.norms_per_layer = 4;
    arch.embedding_scale = true;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
