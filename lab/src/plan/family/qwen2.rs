//! Qwen2 (`Qwen2Config`, `modeling_qwen2.py`): biases on q, k and v always, none on the
//! output projection; a gated MLP; two RMSNorms per layer. A window applies only with
//! `use_sliding_window`, to the layers from `max_window_layers` (default 28) on.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms, slide_where};
use super::{Architecture, ClassDefaults, Family, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::Result;
use serde_json::{Map, Value};

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type());
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let pattern = attention_pattern(&f, arch.layers, |w, count| {
        let on = f.boolean("use_sliding_window")?.unwrap_or(false);
        let from = f.optional("max_window_layers")?.unwrap_or(28);
        Ok(slide_where(w, count, |i| on && i as u64 >= from))
    })?;
    arch.layer_kinds = dense(pattern);
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, true, false, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}
