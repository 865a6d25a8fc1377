//! Phi-3 (`Phi3Config`, `modeling_phi3.py`): the output projection is assigned before the
//! fused query-key-value matrix `(A + 2K) d x H`; gate and up are one fused `2I x H` matrix;
//! biases with `attention_bias` and `mlp_bias`. With a `sliding_window` every layer slides.

use super::{attention_pattern, decoder, dense, layer_norms};
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
        attention_bias: false,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let every = |w, count| Ok(vec![Attention::Sliding(w); count]);
    arch.layer_kinds = dense(attention_pattern(&f, arch.layers, every)?);
    arch.fused_gate_up = true;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    let (h, d, i) = (arch.hidden, arch.head_dim, arch.intermediate);
    t.linear(&[h, arch.heads.saturating_mul(d)]);
    if arch.attention_bias {
        t.other(&[h]);
    }
    let qkv = arch
        .heads
        .saturating_add(arch.kv_heads.saturating_mul(2))
        .saturating_mul(d);
    t.linear(&[qkv, h]);
    if arch.attention_bias {
        t.other(&[qkv]);
    }
    t.linear(&[i.saturating_mul(2), h]);
    if arch.mlp_bias {
        t.other(&[i.saturating_mul(2)]);
    }
    t.linear(&[h, i]);
    if arch.mlp_bias {
        t.other(&[h]);
    }
    layer_norms(arch, t);
}
