//! OLMo 2 (`Olmo2Config`, `modeling_olmo2.py`, transformers 5.17): Llama's projections
//! (biases on q, k, v and o with `attention_bias`), then RMSNorms over the whole query
//! (`A d` wide) and the whole key (`K d` wide), not per head; a bias-free gated MLP; its two
//! RMSNorms come after the attention and after the MLP (`post_attention_layernorm`,
//! `post_feedforward_layernorm`). No window. Defaults where a config is silent:
//! `num_key_value_heads` the attention heads (null too), `head_dim` `hidden_size /
//! num_attention_heads`, untied embeddings.

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
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    arch.layer_kinds = dense(vec![Attention::Full; layer_count(arch.layers)?]);
    // Queries and keys are normalised (their activations count as Qwen3's do).
    arch.qk_norm = true;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    t.other(&[arch.heads.saturating_mul(arch.head_dim)]);
    t.other(&[arch.kv_heads.saturating_mul(arch.head_dim)]);
    // Olmo2MLP is built with bias=False.
    gated_mlp(arch, arch.intermediate, false, t);
    layer_norms(arch, t);
}
