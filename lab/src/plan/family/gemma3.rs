//! Gemma 3 (`Gemma3TextConfig` and, for the multimodal `gemma3`, `Gemma3Config` with its
//! `SiglipVisionConfig`; `modeling_gemma3.py`, `modeling_siglip.py`).
//!
//! The decoder is Gemma 2's (four RMSNorms per layer, tied embeddings, the embedding scale
//! buffer) with query and key norms; with a window, five sliding layers then one full
//! (`sliding_window_pattern`, default 6) unless `layer_types` lists them; rotary frequencies
//! once per attention kind used. A multimodal config nests the decoder under `text_config`
//! and the tower under `vision_config`; every `Gemma3TextConfig` default a config leaves out
//! is taken, as the public multimodal configs (gemma-3-4b-it...) rely on.

use super::{attention, attention_pattern, decoder, dense, gated_mlp, layer_norms, qk_norms};
use super::{slide_where, Architecture, ClassDefaults, Family, Layer, Tower, Vision};
use crate::plan::config::{Fields, MAX_LAYERS};
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// `Gemma3TextConfig` defaults (transformers 5.x), used where a Gemma 3 config leaves a field
/// out, as transformers does.
const TEXT_DEFAULTS: [(&str, u64); 8] = [
    ("vocab_size", 262_208),
    ("hidden_size", 2304),
    ("intermediate_size", 9216),
    ("num_hidden_layers", 26),
    ("num_attention_heads", 8),
    ("num_key_value_heads", 4),
    ("head_dim", 256),
    ("sliding_window", 4096),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let label = family.model_type();
    let (text, vision) = if family == Family::Gemma3 {
        let Some(Value::Object(text)) = top.get("text_config") else {
            return Err(Error::usage(format!(
                "config.json (model_type {label}) has no \"text_config\" object"
            )));
        };
        let Some(Value::Object(v)) = top.get("vision_config") else {
            return Err(Error::usage(format!(
                "config.json (model_type {label}) has no \"vision_config\" object"
            )));
        };
        let vision = vision_facts(v)?;
        projector_fits(top)?;
        (text, Some(Tower::Siglip(vision)))
    } else {
        (top, None)
    };
    let f = Fields::new(text, label).with_defaults(&TEXT_DEFAULTS);
    let defaults = ClassDefaults {
        head_dim: Some(256),
        tied: true,
        kv_nullable: false,
        head_dim_nullable: false,
        attention_bias: true,
        mlp_bias: false,
    };
    let mut arch = decoder(family, &f, top, defaults)?;
    let pattern = attention_pattern(&f, arch.layers, |w, count| {
        // Popped from the keyword arguments with 6; null is refused (the class divides by it).
        let every = match f.get("sliding_window_pattern") {
            None => 6,
            Some(_) => f.required("sliding_window_pattern")?,
        };
        Ok(slide_where(w, count, |i| {
            !(i as u64 + 1).is_multiple_of(every)
        }))
    })?;
    arch.layer_kinds = dense(pattern);
    if family == Family::Gemma3 {
        // Gemma3ForConditionalGeneration ties by the top level (Gemma3Config's field, default
        // true): text_config's own tie_word_embeddings does not untie it.
        arch.tied_embeddings = Fields::new(top, label)
            .boolean("tie_word_embeddings")?
            .unwrap_or(true);
    }
    arch.vision = vision;
    arch.norms_per_layer = 4;
    arch.qk_norm = true;
    arch.embedding_scale = true;
    arch.rotary_per_attention_kind = true;
    Ok(arch)
}

pub(super) fn layer(arch: &Architecture, _layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    qk_norms(arch, t);
    gated_mlp(arch, arch.intermediate, arch.mlp_bias, t);
    layer_norms(arch, t);
}

/// The SigLIP tower's facts, with `SiglipVisionConfig`'s defaults where the config is silent.
fn vision_facts(v: &Map<String, Value>) -> Result<Vision> {
    let f = Fields::new(v, "gemma3 vision_config");
    let layers = f.optional("num_hidden_layers")?.unwrap_or(12);
    if layers > MAX_LAYERS {
        return Err(Error::usage(format!(
            "config.json: vision_config num_hidden_layers {layers} is not a plausible layer count"
        )));
    }
    let image_size = f.optional("image_size")?.unwrap_or(224);
    let patch_size = f.optional("patch_size")?.unwrap_or(16);
    if patch_size > image_size {
        return Err(Error::usage(format!(
            "config.json: vision_config patch_size {patch_size} is larger than image_size {image_size} (no patch would fit)"
        )));
    }
    let hidden = f.optional("hidden_size")?.unwrap_or(768);
    // `SiglipAttention` divides the width by the heads and refuses a remainder; a null
    // reaches that division too (SiglipVisionConfig's default is 12).
    if v.get("num_attention_heads").is_some_and(Value::is_null) {
        return Err(Error::usage(
            "config.json: vision_config num_attention_heads is null; SigLIP divides its width by it: give the head count",
        ));
    }
    let heads = f.optional("num_attention_heads")?.unwrap_or(12);
    if hidden % heads != 0 {
        return Err(Error::usage(format!(
            "config.json: vision_config hidden_size {hidden} is not a multiple of num_attention_heads {heads} (SiglipAttention refuses it)"
        )));
    }
    Ok(Vision {
        hidden,
        layers,
        intermediate: f.optional("intermediate_size")?.unwrap_or(3072),
        image_size,
        patch_size,
        channels: f.optional("num_channels")?.unwrap_or(3),
        head: f.boolean("vision_use_head")?.unwrap_or(true),
    })
}

/// `Gemma3MultiModalProjector` divides the patch grid by `isqrt(mm_tokens_per_image)`
/// (`Gemma3Config` default 256) when it is built: zero tokens, a text or a fraction cannot be
/// built and are refused by name. (More tokens than the grid holds builds, with a pooling
/// kernel 0 wide that fails only in the forward; the plan, which counts what is built,
/// accepts it as transformers does.)
fn projector_fits(top: &Map<String, Value>) -> Result<()> {
    match top.get("mm_tokens_per_image") {
        None => Ok(()),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|t| (1..=1 << 40).contains(&t)) => Ok(()),
        Some(other) => Err(Error::usage(format!(
            "config.json: \"mm_tokens_per_image\" must be a whole number from 1 to 2^40, found {}",
            crate::text::excerpt(&other.to_string())
        ))),
    }
}

/// The SigLIP tower and the Gemma 3 projector into the decoder's width `text_hidden`:
/// embeddings, encoder layers, post norm, the pooling head when built, the projector.
pub(super) fn vision_tower(vt: &Vision, text_hidden: u64, t: &mut Sink) {
    let (vh, vi, p) = (vt.hidden, vt.intermediate, vt.patch_size);
    let side = vt.image_size.checked_div(p).unwrap_or(0);
    let patches = side.saturating_mul(side);
    t.vision(&[vh, vt.channels, p, p]);
    t.vision(&[vh]);
    t.vision(&[patches, vh]);
    t.buffer(8, &[patches]);
    // Every Linear has a bias and every LayerNorm a bias: each is a pair of tensors.
    let mut pair = |dims: &[u64]| {
        t.vision(dims);
        t.vision(&dims[..1]);
    };
    for _ in 0..vt.layers {
        pair(&[vh]);
        for _ in 0..4 {
            pair(&[vh, vh]); // k, v, q, then the output projection
        }
        pair(&[vh]);
        pair(&[vi, vh]);
        pair(&[vh, vi]);
    }
    pair(&[vh]);
    if vt.head {
        // The pooling head: attention's output projection (a child module) before its
        // packed q/k/v, then the LayerNorm and the MLP; the head's own probe comes last.
        pair(&[vh, vh]);
        pair(&[vh.saturating_mul(3), vh]);
        pair(&[vh]);
        pair(&[vi, vh]);
        pair(&[vh, vi]);
        t.vision(&[vh]);
    }
    t.vision(&[vh]);
    t.vision(&[vh, text_hidden]);
}
