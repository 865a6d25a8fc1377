//! Mistral 3 (`Mistral3Config`, `modeling_mistral3.py`, transformers 5.17: Mistral-Small-3.x,
//! Ministral 3): a Pixtral vision tower, the Mistral 3 projector and a text decoder under
//! `text_config`.
//!
//! The decoder is read as its own `text_config.model_type` builds it: `mistral` (the default
//! `Mistral3Config` gives it; `MistralConfig` defaults: `num_key_value_heads` 8,
//! `sliding_window` 4096, `head_dim` `hidden_size / num_attention_heads`) or `ministral3`
//! (`Ministral3Config`: `num_key_value_heads` 8, `head_dim` 128, no window); both are
//! Mistral's bias-free layer, and with a window every layer slides. Any other text model is
//! refused by name. Tying is the top-level `tie_word_embeddings` (`Mistral3Config`'s, default
//! true): transformers 5.17 ties the head for a config that does not say false at the top,
//! whatever `text_config` says.
//!
//! The tower (`PixtralVisionConfig`, `modeling_pixtral.py`): the patch convolution (no bias),
//! a pre-norm, per layer an attention norm, the bias-free gated MLP, the bias-free k, v, q, o
//! projections and a feed-forward norm, then its 2-D rotary buffers (`head_dim / 2`, fp32).
//! The projector: a norm, the patch merger (`H_v m^2 -> H_v`), then `H_v x layers -> H` and
//! `H -> H` (biases with `multimodal_projector_bias`). A config without `text_config` or
//! `vision_config` is refused naming it: transformers would build its 24B defaults.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms};
use super::{Architecture, Attention, ClassDefaults, Family, Layer, Pixtral, Tower};
use crate::plan::config::{Fields, MAX_LAYERS};
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// `MistralConfig` defaults for absent keys of a `mistral` text model.
const MISTRAL_DEFAULTS: [(&str, u64); 2] = [("num_key_value_heads", 8), ("sliding_window", 4096)];

/// `Ministral3Config` defaults for absent keys of a `ministral3` text model.
const MINISTRAL3_DEFAULTS: [(&str, u64); 2] = [("num_key_value_heads", 8), ("head_dim", 128)];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let label = family.model_type();
    let object = |key: &str| {
        match top.get(key) {
        Some(Value::Object(m)) => Ok(m),
        _ => Err(Error::usage(format!(
            "config.json (model_type {label}) has no \"{key}\" object: transformers would build its default 24B Mistral-Small; give the checkpoint's own"
        ))),
    }
    };
    let text = object("text_config")?;
    let vision = object("vision_config")?;
    let defaults: &[(&str, u64)] = match text.get("model_type") {
        None => &MISTRAL_DEFAULTS,
        Some(Value::String(t)) if t == "mistral" => &MISTRAL_DEFAULTS,
        Some(Value::String(t)) if t == "ministral3" => &MINISTRAL3_DEFAULTS,
        Some(other) => {
            return Err(Error::usage(format!(
                "config.json: text_config model_type {} is not planned under mistral3 (known: mistral, ministral3)",
                crate::text::excerpt(&other.to_string())
            )))
        }
    };
    let f = Fields::new(text, "mistral3 text_config").with_defaults(defaults);
    let class = ClassDefaults {
        head_dim: None,
        tied: true,
        kv_nullable: false,
        head_dim_nullable: false,
        attention_bias: false,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, class)?;
    arch.tied_embeddings = Fields::new(top, label)
        .boolean("tie_word_embeddings")?
        .unwrap_or(true);
    let every = |w, count| Ok(vec![Attention::Sliding(w); count]);
    arch.layer_kinds = dense(attention_pattern(&f, arch.layers, every)?);
    arch.vision = Some(Tower::Pixtral(pixtral(top, vision)?));
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, false, false, t);
    gated_mlp(arch, arch.intermediate, false, t);
    layer_norms(arch, t);
}

/// The tower's and projector's facts, with `PixtralVisionConfig`'s and `Mistral3Config`'s
/// defaults where the config is silent.
fn pixtral(top: &Map<String, Value>, v: &Map<String, Value>) -> Result<Pixtral> {
    match v.get("model_type") {
        None => {}
        Some(Value::String(t)) if t == "pixtral" => {}
        Some(other) => {
            return Err(Error::usage(format!(
                "config.json: vision_config model_type {} is not planned under mistral3 (known: pixtral)",
                crate::text::excerpt(&other.to_string())
            )))
        }
    }
    let f = Fields::new(v, "mistral3 vision_config");
    let layers = f.optional("num_hidden_layers")?.unwrap_or(24);
    if layers > MAX_LAYERS {
        return Err(Error::usage(format!(
            "config.json: vision_config num_hidden_layers {layers} is not a plausible layer count"
        )));
    }
    let hidden = f.optional("hidden_size")?.unwrap_or(1024);
    let heads = f.optional("num_attention_heads")?.unwrap_or(16);
    let head_dim = match f.optional("head_dim")? {
        Some(d) => d,
        None => hidden / heads,
    };
    let outer = Fields::new(top, "mistral3");
    let feature_layers = match top.get("vision_feature_layer") {
        Some(Value::Array(list)) if !list.is_empty() => list.len() as u64,
        None | Some(Value::Number(_)) => 1,
        Some(other) => {
            return Err(Error::usage(format!(
                "config.json: \"vision_feature_layer\" must be a layer index or a non-empty list of them, found {}",
                crate::text::excerpt(&other.to_string())
            )))
        }
    };
    Ok(Pixtral {
        hidden,
        layers,
        intermediate: f.optional("intermediate_size")?.unwrap_or(4096),
        head_dim,
        patch_size: f.optional("patch_size")?.unwrap_or(16),
        channels: f.optional("num_channels")?.unwrap_or(3),
        merge: outer.optional("spatial_merge_size")?.unwrap_or(2),
        feature_layers,
        projector_bias: outer.boolean("multimodal_projector_bias")?.unwrap_or(false),
    })
}

/// The Pixtral tower and the Mistral 3 projector into the decoder's width `text_hidden`.
pub(super) fn vision_tower(vt: &Pixtral, text_hidden: u64, t: &mut Sink) {
    let (vh, vi, p) = (vt.hidden, vt.intermediate, vt.patch_size);
    t.vision(&[vh, vt.channels, p, p]);
    t.vision(&[vh]);
    for _ in 0..vt.layers {
        t.vision(&[vh]);
        t.vision(&[vi, vh]);
        t.vision(&[vi, vh]);
        t.vision(&[vh, vi]);
        for _ in 0..4 {
            t.vision(&[vh, vh]); // k, v, q, then the output projection
        }
        t.vision(&[vh]);
    }
    // inv_freq and original_inv_freq: the 2-D frequencies, fp32.
    let rotary = vt.head_dim.div_ceil(2);
    t.buffer(4, &[rotary]);
    t.buffer(4, &[rotary]);
    let merged = vh.saturating_mul(vt.merge.saturating_mul(vt.merge));
    t.vision(&[vh]);
    t.vision(&[vh, merged]);
    t.vision(&[text_hidden, vh.saturating_mul(vt.feature_layers)]);
    if vt.projector_bias {
        t.vision(&[text_hidden]);
    }
    t.vision(&[text_hidden, text_hidden]);
    if vt.projector_bias {
        t.vision(&[text_hidden]);
    }
}
