//! The tensors of a model in the order `transformers` materialises them on a GPU.
//!
//! `from_pretrained` and `to_empty` build the model on the meta device and then give each
//! tensor its memory module by module (`torch.nn.Module._apply`: a module's children first,
//! in the order they were assigned in `__init__`, then its own parameters, then its
//! buffers). The order matters to the caching allocator ([`super::allocator`]): tensors of
//! 1–10 MiB share 20 MiB segments. Parameters tied to the embedding are not listed again.
//!
//! Source: the module order of `transformers` 5.17 for every family `lab plan` knows,
//! checked tensor by tensor against `scripts/module_order.py`'s dumps
//! (`lab/tests/data/module-order/`). The parameter totals equal [`super::params::count`]
//! (a test holds them together).

use super::config::{Architecture, LayerAttention};

/// What a tensor is, for its width: quantized formats convert the [`Role::Linear`] matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The token embedding.
    Embedding,
    /// The untied output head.
    OutputHead,
    /// A decoder weight matrix (attention, feed-forward, experts).
    Linear,
    /// Norms, biases, routers.
    Other,
    /// Vision tower and projector parameters.
    Vision,
    /// A buffer (not a parameter) of this many bytes per element: rotary frequencies (fp32),
    /// the Gemma embedding scale, position ids (int64).
    Buffer(u64),
}

/// One tensor: its role and element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tensor {
    /// What it is.
    pub role: Role,
    /// Elements.
    pub elements: u64,
}

/// Calls `visit` for every tensor of `arch` in materialisation order; `attention_bias` and
/// `mlp_bias` as in the config. Element counts saturate instead of overflowing (a config that
/// large is refused by the 64-bit parameter check anyway).
pub fn for_each(
    arch: &Architecture,
    attention_bias: bool,
    mlp_bias: bool,
    visit: &mut dyn FnMut(Tensor),
) {
    let mut emit = |role: Role, dims: &[u64]| {
        let elements = dims.iter().fold(1u64, |acc, d| acc.saturating_mul(*d));
        visit(Tensor { role, elements });
    };
    let family = arch.model_type.as_str();
    let gemma = matches!(family, "gemma" | "gemma2" | "gemma3_text" | "gemma3");
    let (h, a, k, d, i, v) = (
        arch.hidden,
        arch.heads,
        arch.kv_heads,
        arch.head_dim,
        arch.intermediate,
        arch.vocab,
    );

    if let Some(vt) = &arch.vision {
        // SigLIP: embeddings, encoder layers, post norm; then the Gemma 3 projector.
        let (vh, vi, p) = (vt.hidden, vt.intermediate, vt.patch_size);
        let side = vt.image_size.checked_div(p).unwrap_or(0);
        let patches = side.saturating_mul(side);
        emit(Role::Vision, &[vh, vt.channels, p, p]);
        emit(Role::Vision, &[vh]);
        emit(Role::Vision, &[patches, vh]);
        emit(Role::Buffer(8), &[patches]);
        // Every Linear has a bias and every LayerNorm a bias: each is a pair of tensors.
        let mut pair = |dims: &[u64]| {
            emit(Role::Vision, dims);
            emit(Role::Vision, &dims[..1]);
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
            emit(Role::Vision, &[vh]);
        }
        emit(Role::Vision, &[vh]);
        emit(Role::Vision, &[vh, h]);
    }

    emit(Role::Embedding, &[v, h]);
    if gemma {
        // The embedding scale: one element in the model's width; its 512-byte block is the
        // same at any width, so it is counted at 16 bits.
        emit(Role::Buffer(2), &[1]);
    }
    for layer in 0..arch.layers {
        match &arch.latent {
            Some(l) => {
                let qk = l.qk_nope_head_dim.saturating_add(l.qk_rope_head_dim);
                match l.q_lora_rank {
                    None => emit(Role::Linear, &[a.saturating_mul(qk), h]),
                    Some(q) => {
                        emit(Role::Linear, &[q, h]);
                        emit(Role::Other, &[q]);
                        emit(Role::Linear, &[a.saturating_mul(qk), q]);
                    }
                }
                let c = l.kv_lora_rank;
                emit(Role::Linear, &[c.saturating_add(l.qk_rope_head_dim), h]);
                emit(Role::Other, &[c]);
                let nv = l.qk_nope_head_dim.saturating_add(l.v_head_dim);
                emit(Role::Linear, &[a.saturating_mul(nv), c]);
                emit(Role::Linear, &[h, a.saturating_mul(l.v_head_dim)]);
            }
            None if family == "phi3" => {
                emit(Role::Linear, &[h, a.saturating_mul(d)]);
                if attention_bias {
                    emit(Role::Other, &[h]);
                }
                let qkv = a.saturating_add(k.saturating_mul(2)).saturating_mul(d);
                emit(Role::Linear, &[qkv, h]);
                if attention_bias {
                    emit(Role::Other, &[qkv]);
                }
            }
            None => {
                let qkv_bias = family == "qwen2" || attention_bias;
                for heads in [a, k, k] {
                    emit(Role::Linear, &[heads.saturating_mul(d), h]);
                    if qkv_bias {
                        emit(Role::Other, &[heads.saturating_mul(d)]);
                    }
                }
                emit(Role::Linear, &[h, a.saturating_mul(d)]);
                if attention_bias && family != "qwen2" {
                    emit(Role::Other, &[h]);
                }
                if matches!(family, "qwen3" | "gemma3_text" | "gemma3") {
                    emit(Role::Other, &[d]);
                    emit(Role::Other, &[d]);
                }
            }
        }
        let moe = arch.experts.filter(|e| layer >= e.dense_layers);
        match moe {
            Some(e) if family == "mixtral" => {
                emit(Role::Other, &[e.routed, h]);
                emit(
                    Role::Linear,
                    &[e.routed, e.intermediate.saturating_mul(2), h],
                );
                emit(Role::Linear, &[e.routed, h, e.intermediate]);
            }
            Some(e) => {
                // DeepSeek: routed experts, router (and V3's score correction), shared experts.
                emit(
                    Role::Linear,
                    &[e.routed, e.intermediate.saturating_mul(2), h],
                );
                emit(Role::Linear, &[e.routed, h, e.intermediate]);
                emit(Role::Other, &[e.routed, h]);
                if family == "deepseek_v3" {
                    emit(Role::Other, &[e.routed]);
                }
                if e.shared_intermediate > 0 {
                    emit(Role::Linear, &[e.shared_intermediate, h]);
                    emit(Role::Linear, &[e.shared_intermediate, h]);
                    emit(Role::Linear, &[h, e.shared_intermediate]);
                }
            }
            None if family == "phi3" => {
                emit(Role::Linear, &[i.saturating_mul(2), h]);
                if mlp_bias {
                    emit(Role::Other, &[i.saturating_mul(2)]);
                }
                emit(Role::Linear, &[h, i]);
                if mlp_bias {
                    emit(Role::Other, &[h]);
                }
            }
            None => {
                for (rows, cols) in [(i, h), (i, h), (h, i)] {
                    emit(Role::Linear, &[rows, cols]);
                    if mlp_bias {
                        emit(Role::Other, &[rows]);
                    }
                }
            }
        }
        let norms = if matches!(family, "gemma2" | "gemma3_text" | "gemma3") {
            4
        } else {
            2
        };
        for _ in 0..norms {
            emit(Role::Other, &[h]);
        }
    }
    emit(Role::Other, &[h]);
    // Rotary frequencies, fp32: `inv_freq` and `original_inv_freq`; Gemma 3 keeps one pair
    // per attention kind its layers use (full, sliding).
    let rotary = arch.latent.map_or(d, |l| l.qk_rope_head_dim) / 2;
    let pairs = if matches!(family, "gemma3_text" | "gemma3") {
        let sliding = arch
            .layer_attention
            .iter()
            .filter(|l| matches!(l, LayerAttention::Sliding(_)))
            .count();
        usize::from(sliding > 0) + usize::from(sliding < arch.layer_attention.len())
    } else {
        1
    };
    for _ in 0..2 * pairs {
        emit(Role::Buffer(4), &[rotary]);
    }
    if !arch.tied_embeddings {
        emit(Role::OutputHead, &[h, v]);
    }
}

/// Bytes of each tensor in a weights format: `parameter` bytes per element for parameters
/// other than quantized matrices; `matrix(elements)` for [`Role::Linear`]; buffers at their
/// own width.
pub fn tensor_bytes(t: Tensor, parameter: u64, matrix: &dyn Fn(u64) -> u64) -> u64 {
    match t.role {
        Role::Linear => matrix(t.elements),
        Role::Buffer(width) => t.elements.saturating_mul(width),
        _ => t.elements.saturating_mul(parameter),
    }
}
