//! Gemma 2's forward (`modeling_gemma2.py`, transformers 5.17) in libtorch: the decoder of
//! [`super::Decoder`] with Gemma's differences, in a layer loop of its own.
//!
//! - embedding times `sqrt(hidden)` rounded to the model's dtype
//!   (`Gemma2TextScaledWordEmbedding`: `embed_scale.to(weight.dtype)`);
//! - every RMSNorm is `Gemma2RMSNorm`: float32 statistics times `1 + weight` in float32, then
//!   the cast (Llama casts first, then multiplies);
//! - sandwich norms: the attention output goes through `post_attention_layernorm` before the
//!   residual add; the feed-forward has `pre_feedforward_layernorm` and
//!   `post_feedforward_layernorm` around it;
//! - attention scale `query_pre_attn_scalar^-0.5`; the scores `q·kᵀ·scale` are soft-capped,
//!   `tanh(s / cap) · cap` in the activations' dtype, before the mask is added
//!   (`eager_attention_forward`), then softmax in float32 and the cast, then `· v`: written
//!   out rather than `scaled_dot_product_attention`, which has no soft cap;
//! - feed-forward `down(gelu_tanh(gate(x)) · up(x))` (`gelu_pytorch_tanh`);
//! - the logits soft-capped with `final_logit_softcapping` the same way.
//!
//! Windows (every other layer from the first, or `layer_types`), the rotary tables, the
//! stacked q/k/v and gate/up and the static cache are [`super::Decoder`]'s.

use super::{err, Cache, Decoder, Step};
use lab::decoder::{DecoderSpec, Gemma};
use std::collections::HashMap;
use tch::{Device, Kind, Tensor};

/// The `embed_scale` buffer: `sqrt(hidden)` rounded to float32 (`torch.tensor(embed_scale)`)
/// and then to `kind`, one element on `device`.
pub fn embed_scale(spec: &DecoderSpec, kind: Kind, device: Device) -> Step<Tensor> {
    let value = f64::from((spec.hidden as f64).sqrt() as f32);
    Tensor::f_full(&[] as &[i64], value, (kind, device)).map_err(err)
}

/// `Gemma2RMSNorm` over the last dimension: `(x·rsqrt(mean(x²) + eps)) · (1 + w)` in
/// float32, cast back to `x`'s dtype.
pub fn norm(x: &Tensor, weight: &Tensor, eps: f64) -> Step<Tensor> {
    let width = x.size().last().copied().unwrap_or(0);
    let one_plus = weight
        .f_to_dtype(Kind::Float, false, false)
        .map_err(err)?
        .f_add_scalar(1.0)
        .map_err(err)?;
    x.f_to_dtype(Kind::Float, false, false)
        .map_err(err)?
        .f_rms_norm([width], Some(&one_plus), eps)
        .map_err(err)?
        .f_to_dtype(x.kind(), false, false)
        .map_err(err)
}

/// `tanh(x / cap) · cap`, or `x` without a cap.
fn softcap(x: Tensor, cap: Option<f64>) -> Step<Tensor> {
    match cap {
        None => Ok(x),
        Some(c) => x
            .f_div_scalar(c)
            .map_err(err)?
            .f_tanh()
            .map_err(err)?
            .f_mul_scalar(c)
            .map_err(err),
    }
}

/// Gemma 2's logits of `ids` at `positions`, writing keys and values into `cache`; the
/// contract of [`Decoder::forward`].
pub fn forward(
    m: &Decoder,
    g: &Gemma,
    ids: &Tensor,
    positions: &Tensor,
    cache: &mut Cache,
    all: bool,
) -> Step<Tensor> {
    let size = ids.size();
    let (b, t) = (size[0], size[1]);
    let s = &m.spec;
    let dim = super::dim;
    let (h, kvh, d) = (dim(s.heads)?, dim(s.kv_heads)?, dim(s.head_dim)?);
    let inter = dim(s.intermediate)?;
    let eps = s.rms_norm_eps;
    let group = h / kvh;
    let scale = 1.0 / g.query_pre_attn_scalar.sqrt();
    let embed_scale = m
        .embed_scale
        .as_ref()
        .ok_or("Gemma without its embedding scale")?;
    let mut x = Tensor::f_embedding(&m.embed, ids, -1, false, false)
        .map_err(err)?
        .f_mul(embed_scale)
        .map_err(err)?;
    let table = |tab: &Tensor| -> Step<Tensor> {
        tab.f_index_select(0, positions)
            .map_err(err)?
            .f_view([1, t, 1, d])
            .map_err(err)
    };
    let (cos, sin) = (table(&cache.cos)?, table(&cache.sin)?);
    // Additive masks [group·tokens, context] (0 or -inf) per window, as `Decoder::forward`.
    let q_pos = positions.f_unsqueeze(1).map_err(err)?;
    let kv_pos = cache.kv_index.f_unsqueeze(0).map_err(err)?;
    let causal = kv_pos.f_le_tensor(&q_pos).map_err(err)?;
    let mut masks: HashMap<Option<i64>, Tensor> = HashMap::new();
    for layer in &m.layers {
        if masks.contains_key(&layer.window) {
            continue;
        }
        let allowed = match layer.window {
            None => causal.shallow_clone(),
            Some(w) => causal
                .f_logical_and(
                    &kv_pos
                        .f_gt_tensor(&q_pos.f_sub_scalar(w).map_err(err)?)
                        .map_err(err)?,
                )
                .map_err(err)?,
        };
        let mask = Tensor::f_zeros(allowed.size(), (m.kind, m.device))
            .map_err(err)?
            .f_masked_fill(&allowed.f_logical_not().map_err(err)?, f64::NEG_INFINITY)
            .map_err(err)?
            .f_repeat([group, 1])
            .map_err(err)?;
        masks.insert(layer.window, mask);
    }
    for (i, layer) in m.layers.iter().enumerate() {
        let (pre_ffn, post_ffn) = layer
            .sandwich
            .as_ref()
            .ok_or("Gemma layer without its feed-forward norms")?;
        let residual = x;
        let hidden = norm(&residual, &layer.input_norm, eps)?;
        let qkv = layer
            .qkv
            .forward(&hidden)?
            .f_view([b, t, h + 2 * kvh, d])
            .map_err(err)?;
        drop(hidden);
        let v = qkv.f_narrow(2, h + kvh, kvh).map_err(err)?;
        let qk = Decoder::rotate(&qkv.f_narrow(2, 0, h + kvh).map_err(err)?, &cos, &sin)?;
        let k = qk.f_narrow(2, h, kvh).map_err(err)?;
        let _ = cache.keys[i]
            .f_index_copy_(2, positions, &k.f_transpose(1, 2).map_err(err)?)
            .map_err(err)?;
        let _ = cache.values[i]
            .f_index_copy_(2, positions, &v.f_transpose(1, 2).map_err(err)?)
            .map_err(err)?;
        drop((k, v, qkv));
        // [b, t, h, d] -> [b, kvh, group·t, d]: head kv·group + r reads key/value head kv.
        let q = qk
            .f_narrow(2, 0, h)
            .map_err(err)?
            .f_transpose(1, 2)
            .map_err(err)?
            .f_reshape([b, kvh, group * t, d])
            .map_err(err)?;
        drop(qk);
        let scores = q
            .f_matmul(&cache.keys[i].f_transpose(2, 3).map_err(err)?)
            .map_err(err)?
            .f_mul_scalar(scale)
            .map_err(err)?;
        drop(q);
        let mask = masks.get(&layer.window).ok_or("mask missing")?;
        let probs = softcap(scores, g.attn_softcap)?
            .f_add(mask)
            .map_err(err)?
            .f_softmax(-1, Kind::Float)
            .map_err(err)?
            .f_to_dtype(m.kind, false, false)
            .map_err(err)?;
        let attn = probs
            .f_matmul(&cache.values[i])
            .map_err(err)?
            .f_reshape([b, h, t, d])
            .map_err(err)?
            .f_transpose(1, 2)
            .map_err(err)?
            .f_reshape([b, t, h * d])
            .map_err(err)?;
        drop(probs);
        let out = norm(&layer.o.forward(&attn)?, &layer.post_norm, eps)?;
        drop(attn);
        x = residual.f_add(&out).map_err(err)?;
        drop((residual, out));
        let residual = x;
        let hidden = norm(&residual, pre_ffn, eps)?;
        let gate_up = layer.gate_up.forward(&hidden)?;
        drop(hidden);
        let act = gate_up
            .f_narrow(-1, 0, inter)
            .map_err(err)?
            .f_gelu("tanh")
            .map_err(err)?
            .f_mul(&gate_up.f_narrow(-1, inter, inter).map_err(err)?)
            .map_err(err)?;
        drop(gate_up);
        let out = norm(&layer.down.forward(&act)?, post_ffn, eps)?;
        drop(act);
        x = residual.f_add(&out).map_err(err)?;
    }
    let x = if all {
        x
    } else {
        x.f_narrow(1, t - 1, 1).map_err(err)?
    };
    let x = norm(&x, &m.norm, eps)?;
    let head = m.lm_head.as_ref().unwrap_or(&m.embed);
    softcap(
        x.f_linear(head, None::<Tensor>).map_err(err)?,
        g.final_softcap,
    )
}
