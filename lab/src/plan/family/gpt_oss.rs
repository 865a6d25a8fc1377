//! gpt-oss (`GptOssConfig`, `modeling_gpt_oss.py`, transformers 5.17): every layer a mixture
//! of `num_local_experts` experts of width `intermediate_size`, attention with biases on q, k,
//! v and o and one learned sink logit per head (`sinks`), sliding and full attention
//! alternating (`layer_types`; without it `GptOssConfig.__post_init__` makes the even layers
//! sliding, window `sliding_window` 128).
//!
//! Tensors per layer as `GptOssDecoderLayer` assigns them: the attention (q, k, v, o with
//! their biases, then `sinks` `[A]`), the MLP's router (`weight` `[E, H]`, `bias` `[E]`), then
//! its experts (`gate_up_proj` `[E, H, 2I]`, `gate_up_proj_bias` `[E, 2I]`, `down_proj`
//! `[E, I, H]`, `down_proj_bias` `[E, H]`), the two RMSNorms. (`_keep_in_fp32_modules` keeps
//! the RMSNorms in float32 only for a float16 load, `PreTrainedModel._get_dtype_plan`; lab
//! counts the bfloat16 load, where they stay bfloat16.)
//!
//! Class defaults for absent keys (every field has one): 36 layers, 128 experts
//! (`num_local_experts`, also read as `num_experts`, the class's attribute map), vocabulary
//! 201088, hidden 2880, intermediate 2880, `head_dim` 64, 64 heads, 8 key/value heads, window 128, 4 experts per token,
//! `attention_bias` true, untied embeddings. A null `head_dim` or `num_key_value_heads` is
//! refused, as the class's strict validation refuses it. The public configs' `experts_per_token` is not a
//! field of the class and is not read.
//!
//! The released checkpoints store the experts in MXFP4 (`quantization_config.quant_method`
//! "mxfp4"); what loading them allocates is in [`crate::plan::quantization::MXFP4`].

use super::{attention, attention_pattern, check_experts, decoder, layer_norms, slide_where};
use super::{Architecture, ClassDefaults, Experts, Family, FeedForward, Layer};
use crate::plan::config::Fields;
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// `GptOssConfig` defaults for the fields read here.
const DEFAULTS: [(&str, u64); 9] = [
    ("num_hidden_layers", 36),
    ("vocab_size", 201_088),
    ("hidden_size", 2880),
    ("intermediate_size", 2880),
    ("num_attention_heads", 64),
    ("num_key_value_heads", 8),
    ("head_dim", 64),
    ("sliding_window", 128),
    ("num_experts_per_tok", 4),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let f = Fields::new(top, family.model_type()).with_defaults(&DEFAULTS);
    // The class types head_dim and num_key_value_heads `int`: null is refused (its
    // validation error), absent is the default.
    if f.get("head_dim") == Some(&Value::Null) {
        return Err(Error::usage(
            "config.json (model_type gpt_oss): \"head_dim\" is null, which GptOssConfig refuses; give the number, or leave it out for the class default 64",
        ));
    }
    let defaults = ClassDefaults {
        head_dim: None,
        tied: false,
        kv_nullable: false,
        head_dim_nullable: false,
        // The attention reads `attention_bias`; the MLP (dense or expert) has no `mlp_bias`.
        attention_bias: true,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let pattern = attention_pattern(&f, arch.layers, |w, count| {
        Ok(slide_where(w, count, |i| i % 2 == 0))
    })?;
    let experts = Experts {
        routed: routed_experts(&f, 128)?,
        per_token: f.required("num_experts_per_tok")?,
        intermediate: arch.intermediate,
        shared_intermediate: 0,
    };
    check_experts(&experts)?;
    arch.layer_kinds = pattern
        .into_iter()
        .map(|attention| Layer {
            attention,
            feed_forward: FeedForward::Experts,
        })
        .collect();
    arch.experts = Some(experts);
    arch.attention_bias = f.boolean("attention_bias")?.unwrap_or(true);
    Ok(arch)
}

/// The routed experts of a class whose field `num_local_experts` is also read as
/// `num_experts` (its attribute map): either spelling, both only when they agree, else the
/// class default.
///
/// # Errors
/// [`Error::Usage`] when the two spellings disagree or one is not a whole number.
pub(super) fn routed_experts(f: &Fields, default: u64) -> Result<u64> {
    let named = match f.get("num_experts") {
        None => None,
        Some(_) => Some(f.required("num_experts")?),
    };
    let local = match f.get("num_local_experts") {
        None => None,
        Some(_) => Some(f.required("num_local_experts")?),
    };
    match (named, local) {
        (Some(a), Some(b)) if a != b => Err(Error::usage(format!(
            "config.json: num_experts {a} and num_local_experts {b} disagree (the configuration class reads them as one field)"
        ))),
        (Some(n), _) | (None, Some(n)) => Ok(n),
        (None, None) => Ok(default),
    }
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    t.other(&[arch.heads]);
    if let Some(e) = &arch.experts {
        let (h, i) = (arch.hidden, e.intermediate);
        t.other(&[e.routed, h]);
        t.other(&[e.routed]);
        t.linear(&[e.routed, h, i.saturating_mul(2)]);
        t.other(&[e.routed, i.saturating_mul(2)]);
        t.linear(&[e.routed, i, h]);
        t.other(&[e.routed, h]);
    }
    layer_norms(arch, t);
}
