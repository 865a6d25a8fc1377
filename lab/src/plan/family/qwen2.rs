//! Qwen2 (`Qwen2Config`, `modeling_qwen2.py`): biases on q, k and v always, none on the
//! output projection; a gated MLP; two RMSNorms per layer. A window applies only with
//! `use_sliding_window`, to the layers from `max_window_layers` (default 28) on, and then also on the sliding layers of
//! `layer_types`. Absent `num_key_value_heads` is 32, absent `sliding_window` 4096
//! (`Qwen2Config`, transformers 5.17).

use super::qwen_attention;
use super::{attention, decoder, dense, gated_mlp, layer_norms};
use super::{Architecture, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

/// `Qwen2Config` defaults (transformers 5.17) for absent keys: an explicit null
/// `num_key_value_heads` is the attention heads, as `__post_init__` reads it.
const DEFAULTS: [(&str, u64); 3] = [
    ("num_key_value_heads", 32),
    ("sliding_window", 4096),
    ("max_window_layers", 28),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(&DEFAULTS);
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
        kv_nullable: true,
        head_dim_nullable: false,
        attention_bias: false,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    arch.layer_kinds = dense(qwen_attention(&f, arch.layers)?);
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, true, false, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
