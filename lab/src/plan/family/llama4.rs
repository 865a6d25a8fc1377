//! Llama 4 (`Llama4TextConfig`, `Llama4Config` with its `Llama4VisionConfig`;
//! `modeling_llama4.py`, transformers 5.17): `llama4_text` is the decoder alone
//! (`Llama4ForCausalLM`), `llama4` the multimodal checkpoint (`Llama4ForConditionalGeneration`:
//! the vision tower and projector, then the decoder), whose decoder fields sit in
//! `text_config` and tower fields in `vision_config`.
//!
//! Per layer: attention (q, k, v, o, biases with `attention_bias`; the query/key norm of
//! `use_qk_norm` is an L2 norm without weights), then either the mixture of experts
//! (`Llama4TextMoe`: stacked experts `[E, H, 2I]` and `[E, I, H]` of width
//! `intermediate_size`, the router `[E, H]`, one shared expert of width `intermediate_size`)
//! or a dense MLP of width `intermediate_size_mlp`; two RMSNorms. A layer has experts when it
//! is listed in `moe_layers`, or without that list when `interleave_moe_layer_step` divides its
//! 1-based index (`Llama4TextConfig.__post_init__`).
//!
//! Attention per layer: `layer_types` when listed, else chunked on the layers that use rotary
//! positions (`no_rope_layers[i]` = 1; an absent, null or empty list is every layer but each
//! `no_rope_layer_interval`-th, default 4) and full on the others. A chunked layer's cache is
//! a sliding window of `attention_chunk_size` tokens (`get_layer_types_and_kwargs`,
//! `cache_utils.py`); a null chunk with chunked layers is refused by name (transformers would
//! have no chunk to cache or mask with).
//!
//! `Llama4TextConfig` defaults for absent keys: vocabulary 202048, hidden 5120,
//! intermediate 8192, `intermediate_size_mlp` 16384, 48 layers, 40 heads, 8 key/value heads,
//! `head_dim` 128, 16 experts (`num_local_experts`), 1 per token, step 1, chunk 8192,
//! untied embeddings; null `head_dim` and `num_key_value_heads` are refused, as its strict
//! validation refuses them. A multimodal config without its `text_config` or
//! `vision_config` object is refused by name (transformers would build the default 109B
//! model and tower, which such a config is unlikely to mean).

use super::{attention, decoder, gated_mlp, layer_count, layer_norms, stacked_experts};
use super::{check_experts, Architecture, Attention, ClassDefaults, Experts, Family};
use super::{FeedForward, Layer, Llama4Vision, Tower};
use crate::plan::config::{Fields, MAX_LAYERS};
use crate::plan::layout::Sink;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// `Llama4TextConfig` defaults (transformers 5.17) for the fields read here.
const TEXT_DEFAULTS: [(&str, u64); 12] = [
    ("vocab_size", 202_048),
    ("hidden_size", 5120),
    ("intermediate_size", 8192),
    ("intermediate_size_mlp", 16_384),
    ("num_hidden_layers", 48),
    ("num_attention_heads", 40),
    ("num_key_value_heads", 8),
    ("head_dim", 128),
    ("num_experts_per_tok", 1),
    ("interleave_moe_layer_step", 1),
    ("no_rope_layer_interval", 4),
    ("attention_chunk_size", 8192),
];

pub(super) fn architecture(family: Family, top: &Map<String, Value>) -> Result<Architecture> {
    let label = family.model_type();
    let (text, vision) = if family == Family::Llama4 {
        let object = |key: &str| {
            match top.get(key) {
            Some(Value::Object(m)) => Ok(m),
            _ => Err(Error::usage(format!(
                "config.json (model_type {label}) has no \"{key}\" object: transformers would build its default Llama 4 in its place; give the checkpoint's {key}"
            ))),
        }
        };
        let text = object("text_config")?;
        let v = object("vision_config")?;
        (text, Some(vision_facts(v)?))
    } else {
        (top, None)
    };
    let f = Fields::new(text, label).with_defaults(&TEXT_DEFAULTS);
    for key in ["head_dim", "num_key_value_heads", "num_local_experts"] {
        if f.get(key) == Some(&Value::Null) {
            return Err(Error::usage(format!(
                "config.json (model_type {label}): \"{key}\" is null, which Llama4TextConfig refuses; give the number, or leave it out for the class default"
            )));
        }
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
    let count = layer_count(arch.layers)?;
    let expert_width = arch.intermediate;
    arch.intermediate = f.required("intermediate_size_mlp")?;
    let experts = Experts {
        routed: f.optional("num_local_experts")?.unwrap_or(16),
        per_token: f.required("num_experts_per_tok")?,
        intermediate: expert_width,
        shared_intermediate: expert_width,
    };
    check_experts(&experts)?;
    let moe = match f.layer_indices("moe_layers", arch.layers)? {
        Some(listed) => listed,
        None => {
            let step = f.required("interleave_moe_layer_step")?;
            (0..arch.layers)
                .filter(|i| (i + 1).is_multiple_of(step))
                .collect()
        }
    };
    let attention = attention_kinds(&f, count)?;
    arch.layer_kinds = attention
        .into_iter()
        .enumerate()
        .map(|(i, attention)| Layer {
            attention,
            feed_forward: if moe.contains(&(i as u64)) {
                FeedForward::Experts
            } else {
                FeedForward::Dense
            },
        })
        .collect();
    if arch
        .layer_kinds
        .iter()
        .any(|l| l.feed_forward == FeedForward::Experts)
    {
        arch.experts = Some(experts);
    }
    arch.vision = vision.map(Tower::Llama4);
    Ok(arch)
}

/// Each layer's attention: `layer_types`, else chunked where `no_rope_layers` says the layer
/// uses rotary positions.
fn attention_kinds(f: &Fields, count: usize) -> Result<Vec<Attention>> {
    let chunk = f.optional("attention_chunk_size")?;
    let chunked = || {
        chunk.map(Attention::Chunked).ok_or_else(|| {
            Error::usage(
                "config.json: \"attention_chunk_size\" is null but layers use chunked_attention (layer_types, or the rotary layers of no_rope_layers): give the chunk, or list every layer as full_attention in layer_types",
            )
        })
    };
    let listed = |key: &str| match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) if items.is_empty() => Ok(None),
        Some(Value::Array(items)) if items.len() == count => Ok(Some(items)),
        Some(Value::Array(items)) => Err(Error::usage(format!(
            "config.json: \"{key}\" lists {} layers but num_hidden_layers is {count}",
            items.len()
        ))),
        Some(other) => Err(Error::usage(format!(
            "config.json: \"{key}\" must be a list with one entry per layer, found {}",
            crate::text::excerpt(&other.to_string())
        ))),
    };
    if let Some(types) = listed("layer_types")? {
        return types
            .iter()
            .map(|t| match t.as_str() {
                Some("full_attention") => Ok(Attention::Full),
                Some("chunked_attention") => chunked(),
                _ => Err(Error::usage(format!(
                    "config.json: unknown layer type {} in \"layer_types\" (Llama 4 knows full_attention, chunked_attention)",
                    crate::text::excerpt(&t.to_string())
                ))),
            })
            .collect();
    }
    let rope: Vec<bool> = match listed("no_rope_layers")? {
        Some(flags) => flags
            .iter()
            .map(|v| match v.as_u64() {
                Some(0) => Ok(false),
                Some(1) => Ok(true),
                _ => Err(Error::usage(format!(
                    "config.json: \"no_rope_layers\" must hold 1 (rotary, chunked) or 0 (no rotary, full) per layer, found {}",
                    crate::text::excerpt(&v.to_string())
                ))),
            })
            .collect::<Result<_>>()?,
        None => {
            let every = f.required("no_rope_layer_interval")?;
            (0..count as u64)
                .map(|i| !(i + 1).is_multiple_of(every))
                .collect()
        }
    };
    rope.into_iter()
        .map(|r| if r { chunked() } else { Ok(Attention::Full) })
        .collect()
}

pub(super) fn layer(arch: &Architecture, layer: &Layer, t: &mut Sink) {
    attention(arch, arch.attention_bias, arch.attention_bias, t);
    match (layer.feed_forward, &arch.experts) {
        // Llama4TextMoe assigns its experts, the router, then the shared expert.
        (FeedForward::Experts, Some(e)) => {
            stacked_experts(arch, e, t);
            t.other(&[e.routed, arch.hidden]);
            gated_mlp(arch, e.shared_intermediate, false, t);
        }
        _ => gated_mlp(arch, arch.intermediate, false, t),
    }
    layer_norms(arch, t);
}

/// The tower's facts, with `Llama4VisionConfig`'s defaults where the config is silent.
fn vision_facts(v: &Map<String, Value>) -> Result<Llama4Vision> {
    let f = Fields::new(v, "llama4 vision_config");
    let layers = f.optional("num_hidden_layers")?.unwrap_or(34);
    if layers > MAX_LAYERS {
        return Err(Error::usage(format!(
            "config.json: vision_config num_hidden_layers {layers} is not a plausible layer count"
        )));
    }
    let image_size = f.optional("image_size")?.unwrap_or(448);
    let patch_size = f.optional("patch_size")?.unwrap_or(14);
    if patch_size > image_size {
        return Err(Error::usage(format!(
            "config.json: vision_config patch_size {patch_size} is larger than image_size {image_size} (no patch would fit)"
        )));
    }
    Ok(Llama4Vision {
        hidden: f.optional("hidden_size")?.unwrap_or(768),
        layers,
        heads: f.optional("num_attention_heads")?.unwrap_or(16),
        intermediate: f.optional("intermediate_size")?.unwrap_or(5632),
        image_size,
        patch_size,
        channels: f.optional("num_channels")?.unwrap_or(3),
        projector_input: f.optional("projector_input_dim")?.unwrap_or(4096),
        projector_output: f.optional("projector_output_dim")?.unwrap_or(4096),
        output: f.optional("vision_output_dim")?.unwrap_or(7680),
    })
}

/// `Llama4VisionModel` then the projector into the decoder's width `text_hidden`, as
/// assigned: the unfold patch embedding (a bias-free linear), the 2-D rotary table
/// (`freqs_ci`, complex64), the pre and post LayerNorms, the encoder layers, the
/// pixel-shuffle adapter, then the model's own class and position embeddings; the
/// projector `linear_1` (no bias).
pub(super) fn vision_tower(vt: &Llama4Vision, text_hidden: u64, t: &mut Sink) {
    let (vh, vi, p) = (vt.hidden, vt.intermediate, vt.patch_size);
    let side = vt.image_size.checked_div(p).unwrap_or(0);
    let positions = side.saturating_mul(side).saturating_add(1);
    t.vision(&[vh, vt.channels.saturating_mul(p).saturating_mul(p)]);
    // freqs_ci: one complex64 per position and half of each rotary pair of a head.
    let freq = vh.checked_div(vt.heads).unwrap_or(0) / 2;
    t.buffer(8, &[positions, 2 * (freq / 2)]);
    // Every Linear of the encoder has a bias and every LayerNorm one: pairs of tensors.
    let mut pair = |dims: &[u64]| {
        t.vision(dims);
        t.vision(&dims[..1]);
    };
    pair(&[vh]);
    pair(&[vh]);
    for _ in 0..vt.layers {
        for _ in 0..4 {
            pair(&[vh, vh]); // q, k, v, o
        }
        pair(&[vi, vh]);
        pair(&[vh, vi]);
        pair(&[vh]);
        pair(&[vh]);
    }
    t.vision(&[vt.projector_input, vi]);
    t.vision(&[vt.projector_output, vt.projector_output]);
    t.vision(&[vh]);
    t.vision(&[positions, vh]);
    t.vision(&[text_hidden, vt.output]);
}
