//! The decoder forward of `lab measure --model` (Llama, Mistral, Qwen2, Qwen3, Phi-3, Mixtral,
//! Gemma 2) in libtorch (Mixtral's mixture of experts in [`moe`], Gemma 2's forward in
//! [`gemma`]).
//!
//! Computes what `transformers` 5.x `modeling_llama.py` (and the Mistral/Qwen2/Qwen3 copies)
//! compute, with fewer kernels per layer (a decode step at batch 1 is a chain of small
//! launches between matrix-vector products; `examples/h200/measure-model/run3/` times it):
//! - weights: q/k/v and gate/up stacked into one matrix each at load
//!   ([`lab::decoder::fused`]), so each is one product;
//! - RMSNorm: `at::rms_norm` (`LlamaRMSNorm`'s arithmetic; one fused kernel on CUDA);
//! - rotary: `inv_freq = 1 / theta^(2i/d)` in float32 (scaled per `rope_type`), `cos`/`sin`
//!   of `pos × inv_freq` tabulated once per context as `LlamaRotaryEmbedding` computes them
//!   per forward, gathered per step; `q·cos + rotate_half(q)·sin` as
//!   `q·cos + roll(q, d/2)·(±sin)`, queries and keys of a layer in one pass;
//! - attention: scale `head_dim^-0.5`, an additive mask (0 or -inf: causal, plus
//!   `kv > q - window` on sliding layers, `masking_utils.sliding_window_overlay`) built once
//!   per forward; grouped-query attention without copying the cache: the `heads / kv_heads`
//!   queries of one key/value head are laid along the query axis, so every head reads its
//!   own key/value head, as `repeat_kv` gives it;
//! - MLP: `down(silu(gate(x)) · up(x))` on the halves of the stacked product; residual adds
//!   around both blocks.
//!
//! On a GPU, a step of one new position per sequence (every decode step, eager or captured)
//! runs the fused kernels of [`kernels`] between the matrix products instead (residual add +
//! RMSNorm, rotary + cache write + attention, SiLU·mul: four small kernels per layer, with
//! transformers' roundings), and at batch 1 its matrix-vector products replace cuBLAS's too
//! ([`Decoder::forward_b1`]; `LAB_DECODE_KERNELS=cublas` keeps cuBLAS); `LAB_DECODE_KERNELS=libtorch`,
//! a model they do not cover or a missing NVRTC keeps the path above, and
//! [`Decoder::decode_kernels`] says which ran.
//!
//! The KV cache is static: two `[batch, kv_heads, context, head_dim]` tensors per layer,
//! allocated once ([`Cache::new`]) and written in place at the step's positions
//! (`index_copy_`), with the positions a device tensor. A decode step therefore has fixed
//! shapes and no host-side value in it, which is what lets it be captured in a CUDA graph
//! and replayed ([`DecodeState`]).

pub mod gemma;
pub mod kernels;
pub mod moe;
pub mod run;

use lab::decoder::weights::Sources;
use lab::decoder::{DecoderSpec, Init, RopeScaling};
use std::collections::HashMap;
use tch::{Device, Kind, Tensor};

/// A libtorch error as one line (the first line of its message).
pub fn err(e: tch::TchError) -> String {
    let text = e.to_string();
    text.lines()
        .next()
        .unwrap_or("libtorch error")
        .trim()
        .to_owned()
}

type Step<T> = Result<T, String>;

fn dim(v: u64) -> Step<i64> {
    i64::try_from(v).map_err(|_| format!("size {v} too large"))
}

struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Step<Tensor> {
        x.f_linear(&self.weight, self.bias.as_ref()).map_err(err)
    }
}

struct Layer {
    /// `[q; k; v]` stacked along the rows (`lab::decoder::fused`).
    qkv: Linear,
    o: Linear,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    /// `[gate; up]` stacked along the rows (undefined tensors in a mixture-of-experts layer).
    gate_up: Linear,
    down: Linear,
    /// The mixture of experts that replaces the MLP (Mixtral).
    moe: Option<moe::SparseMoe>,
    /// Gemma 2's `pre_feedforward_layernorm` and `post_feedforward_layernorm`.
    sandwich: Option<(Tensor, Tensor)>,
    input_norm: Tensor,
    post_norm: Tensor,
    window: Option<i64>,
}

/// The model on its device.
pub struct Decoder {
    spec: DecoderSpec,
    kind: Kind,
    device: Device,
    embed: Tensor,
    /// Gemma's `embed_scale` buffer: `sqrt(hidden)` in the model's dtype, 0-dimensional.
    embed_scale: Option<Tensor>,
    layers: Vec<Layer>,
    norm: Tensor,
    inv_freq: Tensor,
    /// `original_inv_freq`, kept alive as `transformers` keeps it (its bytes are in the
    /// plan's replay of the allocator).
    _original_inv_freq: Tensor,
    lm_head: Option<Tensor>,
    /// The fused decode kernels, when they run this model here.
    kernels: Option<kernels::Kernels>,
    /// What runs the decode steps' small operations, for the document.
    pub decode_kernels: String,
}

/// The fused kernels for `spec` in `kind` on `device`, or why not (`LAB_DECODE_KERNELS`,
/// the CPU, an unsupported model, NVRTC missing or failing).
fn decode_kernels(
    spec: &DecoderSpec,
    kind: Kind,
    device: Device,
) -> (Option<kernels::Kernels>, String) {
    let fallback = |why: String| (None, format!("libtorch's kernels ({why})"));
    let Device::Cuda(index) = device else {
        return fallback("CPU".into());
    };
    let switch = std::env::var(kernels::SWITCH).unwrap_or_default();
    if switch == "libtorch" {
        return fallback(format!("{}=libtorch", kernels::SWITCH));
    }
    let own_gemv = switch != "cublas";
    // The fused step is written for dense layers: Mixtral's experts and Gemma 2's own forward
    // (soft caps, sandwich norms) are not in it.
    if spec.experts.is_some() {
        return fallback("mixture of experts: the fused decode covers dense layers only".into());
    }
    if spec.gemma.is_some() {
        return fallback(
            "Gemma 2's forward: the fused decode covers Llama-like layers only".into(),
        );
    }
    if let Some(why) = kernels::Kernels::unsupported(spec.head_dim, kind) {
        return fallback(why);
    }
    let compiled = crate::compute_capability(index as i64).and_then(|(major, minor)| {
        kernels::Kernels::compile(kind, spec.head_dim, major, minor, own_gemv)
    });
    match compiled {
        Ok(k) => {
            let text = k.description.clone();
            (Some(k), text)
        }
        Err(why) => fallback(format!("fused kernels unavailable: {why}")),
    }
}

/// Rotary inverse frequencies, float32 on `device` (`_compute_default_rope_parameters`,
/// `_compute_linear_scaling_rope_parameters`, `_compute_llama3_parameters`).
fn inv_freq(spec: &DecoderSpec, device: Device) -> Step<Tensor> {
    let d = dim(spec.head_dim)?;
    let exponents = Tensor::f_arange_start_step(0, d, 2, (Kind::Int64, device))
        .map_err(err)?
        .f_to_dtype(Kind::Float, false, false)
        .map_err(err)?
        .f_div_scalar(d as f64)
        .map_err(err)?;
    // `1.0 / (base ** exponents)`: a Python scalar raised to a float32 tensor.
    let inv = Tensor::f_pow_scalar(spec.rope_theta, &exponents)
        .map_err(err)?
        .f_reciprocal()
        .map_err(err)?;
    match &spec.rope_scaling {
        RopeScaling::Default => Ok(inv),
        RopeScaling::Linear { factor } => inv.f_div_scalar(*factor).map_err(err),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings: old,
        } => {
            let low_wavelen = old / low_freq_factor;
            let high_wavelen = old / high_freq_factor;
            let wavelen = inv
                .f_reciprocal()
                .map_err(err)?
                .f_mul_scalar(2.0 * std::f64::consts::PI)
                .map_err(err)?;
            let scaled = inv.f_div_scalar(*factor).map_err(err)?;
            let low = wavelen.f_gt(low_wavelen).map_err(err)?;
            let llama = scaled.f_where_self(&low, &inv).map_err(err)?;
            let smooth = wavelen
                .f_reciprocal()
                .map_err(err)?
                .f_mul_scalar(*old)
                .map_err(err)?
                .f_sub_scalar(*low_freq_factor)
                .map_err(err)?
                .f_div_scalar(high_freq_factor - low_freq_factor)
                .map_err(err)?;
            let one_minus = smooth
                .f_neg()
                .map_err(err)?
                .f_add_scalar(1.0)
                .map_err(err)?;
            let smoothed = one_minus
                .f_mul(&llama)
                .map_err(err)?
                .f_div_scalar(*factor)
                .map_err(err)?
                .f_add(&smooth.f_mul(&llama).map_err(err)?)
                .map_err(err)?;
            let high = wavelen.f_lt(high_wavelen).map_err(err)?;
            let medium = high
                .f_logical_not()
                .map_err(err)?
                .f_logical_and(&low.f_logical_not().map_err(err)?)
                .map_err(err)?;
            smoothed.f_where_self(&medium, &llama).map_err(err)
        }
    }
}

/// Where the weights come from while loading.
pub enum WeightsFrom<'a> {
    /// Seeded random tensors (the caller seeded the generators).
    Random,
    /// Byte ranges of safetensors files.
    Files(&'a Sources),
}

fn stored_kind(dtype: &str) -> Step<Kind> {
    match dtype {
        "BF16" => Ok(Kind::BFloat16),
        "F16" => Ok(Kind::Half),
        "F32" => Ok(Kind::Float),
        other => Err(format!("stored dtype {other} is not readable")),
    }
}

impl Decoder {
    /// Builds the model on `device` in `kind`, one tensor at a time in the spec's order (the
    /// materialisation order), the rotary buffers after the final norm and before an untied
    /// output head, as `transformers` places them. Safetensors data is read into one reused
    /// host buffer, converted to `kind` on the host and then copied to the device, so that the
    /// device sees exactly one allocation per tensor.
    pub fn load(spec: &DecoderSpec, kind: Kind, device: Device, from: WeightsFrom) -> Step<Self> {
        let allocations = lab::decoder::fused::allocations(spec);
        // Per spec tensor: (its allocation, its first row there).
        let mut slot = vec![(usize::MAX, 0u64); spec.tensors.len()];
        for (a, alloc) in allocations.iter().enumerate() {
            for &(i, row) in &alloc.members {
                slot[i] = (a, row);
            }
        }
        let mut allocated: Vec<Option<Tensor>> = (0..allocations.len()).map(|_| None).collect();
        let mut buffers: Option<(Tensor, Tensor)> = None;
        let mut embed_scale: Option<Tensor> = None;
        let mut files: Vec<Option<std::fs::File>> = match &from {
            WeightsFrom::Files(s) => (0..s.files.len()).map(|_| None).collect(),
            WeightsFrom::Random => Vec::new(),
        };
        let mut host: Vec<u8> = Vec::new();
        for (i, t) in spec.tensors.iter().enumerate() {
            if t.name == "lm_head.weight" {
                buffers = Some((inv_freq(spec, device)?, inv_freq(spec, device)?));
            }
            let (a, row) = slot[i];
            let alloc = allocations.get(a).ok_or("tensor without an allocation")?;
            if allocated[a].is_none() {
                let shape: Vec<i64> = alloc.shape.iter().map(|d| dim(*d)).collect::<Step<_>>()?;
                allocated[a] =
                    Some(Tensor::f_empty(shape.as_slice(), (kind, device)).map_err(err)?);
            }
            let whole = allocated[a].as_ref().ok_or("allocation missing")?;
            let shape: Vec<i64> = t.shape.iter().map(|d| dim(*d)).collect::<Step<_>>()?;
            let rows = shape.first().copied().unwrap_or(1);
            let mut part = if alloc.members.len() > 1 {
                whole.f_narrow(0, dim(row)?, rows).map_err(err)?
            } else {
                whole.shallow_clone()
            };
            match &from {
                WeightsFrom::Random => {
                    let _ = match t.init {
                        Init::Normal => part.f_normal_(0.0, spec.initializer_range),
                        Init::Zeros => part.f_zero_(),
                        Init::Ones => part.f_fill_(1.0),
                    }
                    .map_err(err)?;
                }
                WeightsFrom::Files(sources) => {
                    let src = &sources.tensors[i];
                    // Every piece of the tensor, one after the other (`TensorSource`).
                    sources
                        .read(i, &mut files, &mut host)
                        .map_err(|e| format!("{}: {e}", t.name))?;
                    let stored = stored_kind(&src.dtype)?;
                    let cpu = Tensor::f_from_data_size(&host, &shape, stored).map_err(err)?;
                    let cpu = if stored == kind {
                        cpu
                    } else {
                        cpu.f_to_dtype(kind, false, false).map_err(err)?
                    };
                    // Straight into its rows on the device: no device-side temporary.
                    part.f_copy_(&cpu).map_err(err)?;
                }
            }
            if t.name == "model.norm.weight" && spec.tied_embeddings {
                buffers = Some((inv_freq(spec, device)?, inv_freq(spec, device)?));
            }
            if t.name == "model.embed_tokens.weight" && spec.gemma.is_some() {
                embed_scale = Some(gemma::embed_scale(spec, kind, device)?);
            }
        }
        drop(host);
        let (inv, original) = match buffers {
            Some(b) => b,
            None => (inv_freq(spec, device)?, inv_freq(spec, device)?),
        };
        let mut tensors: HashMap<String, Tensor> = HashMap::with_capacity(allocations.len());
        for (alloc, tensor) in allocations.iter().zip(allocated) {
            tensors.insert(
                alloc.name.clone(),
                tensor.ok_or_else(|| format!("{} was not built", alloc.name))?,
            );
        }
        let mut take = |name: String| -> Step<Tensor> {
            tensors
                .remove(&name)
                .ok_or_else(|| format!("tensor {name} was not built"))
        };
        let mut layers = Vec::with_capacity(spec.layers as usize);
        for l in 0..spec.layers {
            let p = format!("model.layers.{l}");
            let mut linear = |name: &str, bias: bool| -> Step<Linear> {
                Ok(Linear {
                    weight: take(format!("{p}.{name}.weight"))?,
                    bias: if bias {
                        Some(take(format!("{p}.{name}.bias"))?)
                    } else {
                        None
                    },
                })
            };
            let qkv = linear("self_attn.qkv_proj", spec.qkv_bias)?;
            let o = linear("self_attn.o_proj", spec.o_bias)?;
            let (gate_up, down, moe) = match spec.experts {
                None => (
                    linear("mlp.gate_up_proj", spec.mlp_bias)?,
                    linear("mlp.down_proj", spec.mlp_bias)?,
                    None,
                ),
                Some(routing) => {
                    let none = || Linear {
                        weight: Tensor::new(),
                        bias: None,
                    };
                    let moe = moe::SparseMoe::new(
                        routing,
                        spec.intermediate,
                        take(format!("{p}.mlp.gate.weight"))?,
                        take(format!("{p}.mlp.experts.gate_up_proj"))?,
                        take(format!("{p}.mlp.experts.down_proj"))?,
                    )?;
                    (none(), none(), Some(moe))
                }
            };
            let (q_norm, k_norm) = if spec.qk_norm {
                (
                    Some(take(format!("{p}.self_attn.q_norm.weight"))?),
                    Some(take(format!("{p}.self_attn.k_norm.weight"))?),
                )
            } else {
                (None, None)
            };
            let sandwich = match spec.gemma {
                Some(_) => Some((
                    take(format!("{p}.pre_feedforward_layernorm.weight"))?,
                    take(format!("{p}.post_feedforward_layernorm.weight"))?,
                )),
                None => None,
            };
            let window = spec.windows[l as usize].map(dim).transpose()?;
            layers.push(Layer {
                qkv,
                o,
                q_norm,
                k_norm,
                gate_up,
                down,
                moe,
                sandwich,
                input_norm: take(format!("{p}.input_layernorm.weight"))?,
                post_norm: take(format!("{p}.post_attention_layernorm.weight"))?,
                window,
            });
        }
        let embed = take("model.embed_tokens.weight".into())?;
        let norm = take("model.norm.weight".into())?;
        let lm_head = if spec.tied_embeddings {
            None
        } else {
            Some(take("lm_head.weight".into())?)
        };
        let (kernels, decode_kernels) = decode_kernels(spec, kind, device);
        Ok(Decoder {
            spec: spec.clone(),
            kind,
            device,
            embed,
            embed_scale,
            layers,
            norm,
            inv_freq: inv,
            _original_inv_freq: original,
            lm_head,
            kernels,
            decode_kernels,
        })
    }

    /// `at::rms_norm` over the last dimension: on the CPU its composite form is
    /// `LlamaRMSNorm`'s (float32 statistics, cast back, then the weight); on CUDA libtorch
    /// 2.11 runs one fused kernel (the weight applied before the cast: one rounding fewer).
    fn rms_norm(&self, x: &Tensor, weight: &Tensor) -> Step<Tensor> {
        let width = x.size().last().copied().unwrap_or(0);
        x.f_rms_norm([width], Some(weight), self.spec.rms_norm_eps)
            .map_err(err)
    }

    /// The rotary tables for positions `0..context`: `cos` and `sin` with the sign of
    /// `rotate_half` folded in (`-sin` on the first half), `[context, head_dim]` in the
    /// activations' dtype. `cos`/`sin` are computed exactly as `LlamaRotaryEmbedding` does per
    /// forward (float32 `pos × inv_freq`, `cat(freqs, freqs)`, then the cast), once.
    pub fn rope_tables(&self, context: i64) -> Step<(Tensor, Tensor)> {
        let positions = Tensor::f_arange(context, (Kind::Int64, self.device)).map_err(err)?;
        let freqs = positions
            .f_to_dtype(Kind::Float, false, false)
            .map_err(err)?
            .f_unsqueeze(1)
            .map_err(err)?
            .f_mul(&self.inv_freq.f_unsqueeze(0).map_err(err)?)
            .map_err(err)?;
        let emb = Tensor::f_cat(&[&freqs, &freqs], -1).map_err(err)?;
        let cos = emb
            .f_cos()
            .map_err(err)?
            .f_to_dtype(self.kind, false, false)
            .map_err(err)?;
        let half = freqs.size().last().copied().unwrap_or(0);
        let sign = Tensor::f_cat(
            &[
                Tensor::f_full([half], -1.0, (Kind::Float, self.device)).map_err(err)?,
                Tensor::f_ones([half], (Kind::Float, self.device)).map_err(err)?,
            ],
            0,
        )
        .map_err(err)?;
        // Negating is exact, so `rotate_half(x)·sin = roll(x, d/2)·(sign·sin)` bit for bit.
        let sin = emb
            .f_sin()
            .map_err(err)?
            .f_to_dtype(self.kind, false, false)
            .map_err(err)?
            .f_mul(&sign.f_to_dtype(self.kind, false, false).map_err(err)?)
            .map_err(err)?;
        Ok((cos, sin))
    }

    /// `x·cos + rotate_half(x)·sin` as `x·cos + roll(x, d/2)·signed_sin`: three kernels
    /// (`addcmul` rounds the last product and sum once, `transformers` twice).
    fn rotate(x: &Tensor, cos: &Tensor, signed_sin: &Tensor) -> Step<Tensor> {
        let half = x.size().last().copied().unwrap_or(0) / 2;
        let rolled = x.f_roll([half], [-1]).map_err(err)?;
        let mut out = x.f_mul(cos).map_err(err)?;
        let _ = out.f_addcmul_(&rolled, signed_sin).map_err(err)?;
        Ok(out)
    }

    /// Logits of `ids` (`[batch, tokens]`, int64) at `positions` (`[tokens]`, int64, on the
    /// device), writing their keys and values into `cache` at those positions. `all` gives
    /// `[batch, tokens, vocab]`; otherwise only the last position, `[batch, 1, vocab]` (what
    /// generation keeps).
    pub fn forward(
        &self,
        ids: &Tensor,
        positions: &Tensor,
        cache: &mut Cache,
        all: bool,
    ) -> Step<Tensor> {
        if let Some(g) = &self.spec.gemma {
            return gemma::forward(self, g, ids, positions, cache, all);
        }
        let size = ids.size();
        let (b, t) = (size[0], size[1]);
        if let (1, Some(k)) = (t, &self.kernels) {
            if b == 1 && self.b1_ready(k) {
                return self.forward_b1(k, ids, positions, cache);
            }
            return self.forward_fused(k, ids, positions, cache);
        }
        let (h, kvh, d) = (
            dim(self.spec.heads)?,
            dim(self.spec.kv_heads)?,
            dim(self.spec.head_dim)?,
        );
        let inter = dim(self.spec.intermediate)?;
        let group = h / kvh;
        let scale = 1.0 / (d as f64).sqrt();
        let mut x = Tensor::f_embedding(&self.embed, ids, -1, false, false).map_err(err)?;
        // [1, tokens, 1, head_dim]: broadcast over batch and heads.
        let table = |tab: &Tensor| -> Step<Tensor> {
            tab.f_index_select(0, positions)
                .map_err(err)?
                .f_view([1, t, 1, d])
                .map_err(err)
        };
        let (cos, sin) = (table(&cache.cos)?, table(&cache.sin)?);
        // Additive masks [group·tokens, context] in the activations' dtype (0 or -inf), one
        // per window in use: causal, plus `kv > q - window` on sliding layers.
        let q_pos = positions.f_unsqueeze(1).map_err(err)?;
        let kv_pos = cache.kv_index.f_unsqueeze(0).map_err(err)?;
        let causal = kv_pos.f_le_tensor(&q_pos).map_err(err)?;
        let mut masks: HashMap<Option<i64>, Tensor> = HashMap::new();
        for layer in &self.layers {
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
            let blocked = allowed.f_logical_not().map_err(err)?;
            let mask = Tensor::f_zeros(allowed.size(), (self.kind, self.device))
                .map_err(err)?
                .f_masked_fill(&blocked, f64::NEG_INFINITY)
                .map_err(err)?;
            // The `group` queries of one key/value head are laid along the query axis.
            let mask = mask.f_repeat([group, 1]).map_err(err)?;
            masks.insert(layer.window, mask);
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let residual = x;
            let hidden = self.rms_norm(&residual, &layer.input_norm)?;
            // [b, t, h + 2·kvh, d]: the queries, keys and values of one product.
            let qkv = layer
                .qkv
                .forward(&hidden)?
                .f_view([b, t, h + 2 * kvh, d])
                .map_err(err)?;
            drop(hidden);
            let v = qkv.f_narrow(2, h + kvh, kvh).map_err(err)?;
            let (q, k) = match (&layer.q_norm, &layer.k_norm) {
                (Some(qn), Some(kn)) => {
                    let q = self.rms_norm(&qkv.f_narrow(2, 0, h).map_err(err)?, qn)?;
                    let k = self.rms_norm(&qkv.f_narrow(2, h, kvh).map_err(err)?, kn)?;
                    (Self::rotate(&q, &cos, &sin)?, Self::rotate(&k, &cos, &sin)?)
                }
                _ => {
                    // Queries and keys are adjacent heads: rotated together.
                    let qk = Self::rotate(&qkv.f_narrow(2, 0, h + kvh).map_err(err)?, &cos, &sin)?;
                    (
                        qk.f_narrow(2, 0, h).map_err(err)?,
                        qk.f_narrow(2, h, kvh).map_err(err)?,
                    )
                }
            };
            let _ = cache.keys[i]
                .f_index_copy_(2, positions, &k.f_transpose(1, 2).map_err(err)?)
                .map_err(err)?;
            let _ = cache.values[i]
                .f_index_copy_(2, positions, &v.f_transpose(1, 2).map_err(err)?)
                .map_err(err)?;
            drop((k, v, qkv));
            // [b, t, h, d] -> [b, kvh, group * t, d]: head kv·group + r reads key/value head kv.
            let q = q
                .f_transpose(1, 2)
                .map_err(err)?
                .f_reshape([b, kvh, group * t, d])
                .map_err(err)?;
            let mask = masks.get(&layer.window).ok_or("mask missing")?;
            let attn = Tensor::f_scaled_dot_product_attention(
                &q,
                &cache.keys[i],
                &cache.values[i],
                Some(mask),
                0.0,
                false,
                scale,
                false,
            )
            .map_err(err)?;
            drop(q);
            let attn = attn
                .f_reshape([b, h, t, d])
                .map_err(err)?
                .f_transpose(1, 2)
                .map_err(err)?
                .f_reshape([b, t, h * d])
                .map_err(err)?;
            let out = layer.o.forward(&attn)?;
            drop(attn);
            x = residual.f_add(&out).map_err(err)?;
            drop((residual, out));
            let residual = x;
            let hidden = self.rms_norm(&residual, &layer.post_norm)?;
            if let Some(moe) = &layer.moe {
                x = residual.f_add(&moe.forward(&hidden)?).map_err(err)?;
                continue;
            }
            let gate_up = layer.gate_up.forward(&hidden)?;
            drop(hidden);
            let act = gate_up
                .f_narrow(-1, 0, inter)
                .map_err(err)?
                .f_silu()
                .map_err(err)?
                .f_mul(&gate_up.f_narrow(-1, inter, inter).map_err(err)?)
                .map_err(err)?;
            drop(gate_up);
            let out = layer.down.forward(&act)?;
            drop(act);
            x = residual.f_add(&out).map_err(err)?;
        }
        let x = if all {
            x
        } else {
            x.f_narrow(1, t - 1, 1).map_err(err)?
        };
        let x = self.rms_norm(&x, &self.norm)?;
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        x.f_linear(head, None::<Tensor>).map_err(err)
    }
}

impl Decoder {
    /// [`Self::forward`] for one new position per sequence with the fused kernels: per layer
    /// the four products and four small kernels (`kernels.cu`); the residual stream `x` is
    /// updated in place and `hidden` holds each norm's output.
    fn forward_fused(
        &self,
        k: &kernels::Kernels,
        ids: &Tensor,
        position: &Tensor,
        cache: &mut Cache,
    ) -> Step<Tensor> {
        let b = ids.size()[0];
        let (h, d) = (dim(self.spec.heads)?, dim(self.spec.head_dim)?);
        let inter = dim(self.spec.intermediate)?;
        let eps = self.spec.rms_norm_eps;
        let x = Tensor::f_embedding(&self.embed, ids, -1, false, false).map_err(err)?;
        let hidden = x.f_empty_like().map_err(err)?;
        let first = self.layers.first().ok_or("the model has no layers")?;
        k.add_rms_norm(&x, None, &first.input_norm, &hidden, eps)?;
        let attn = Tensor::f_empty([b, 1, h * d], (self.kind, self.device)).map_err(err)?;
        let act = Tensor::f_empty([b, 1, inter], (self.kind, self.device)).map_err(err)?;
        for (i, layer) in self.layers.iter().enumerate() {
            let qkv = layer.qkv.forward(&hidden)?;
            let qk_norm = layer.q_norm.as_ref().zip(layer.k_norm.as_ref());
            k.attention(
                &qkv,
                &cache.keys[i],
                &cache.values[i],
                (&cache.cos, &cache.sin),
                position,
                qk_norm,
                &attn,
                kernels::AttentionShape {
                    batch: b,
                    heads: h,
                    kv_heads: dim(self.spec.kv_heads)?,
                    window: layer.window,
                    scale: 1.0 / (d as f64).sqrt(),
                    eps,
                },
            )?;
            drop(qkv);
            let out = layer.o.forward(&attn)?;
            k.add_rms_norm(&x, Some(&out), &layer.post_norm, &hidden, eps)?;
            drop(out);
            let gate_up = layer.gate_up.forward(&hidden)?;
            k.silu_mul(&gate_up, &act)?;
            drop(gate_up);
            let out = layer.down.forward(&act)?;
            let next = self.layers.get(i + 1).map_or(&self.norm, |l| &l.input_norm);
            k.add_rms_norm(&x, Some(&out), next, &hidden, eps)?;
        }
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        hidden.f_linear(head, None::<Tensor>).map_err(err)
    }

    /// Whether a batch-1 step can run [`Self::forward_b1`]: the `gemv` kernels are on and take
    /// every matrix.
    fn b1_ready(&self, k: &kernels::Kernels) -> bool {
        k.own_gemv
            && k.gemv_fits(self.lm_head.as_ref().unwrap_or(&self.embed))
            && self.layers.iter().all(|l| {
                [
                    &l.qkv.weight,
                    &l.o.weight,
                    &l.gate_up.weight,
                    &l.down.weight,
                ]
                .into_iter()
                .all(|w| k.gemv_fits(w))
            })
    }

    /// [`Self::forward_fused`] for one sequence: the four products by the `gemv` kernels
    /// (SiLU·mul in the gate/up one), so seven kernels per layer: RMSNorm, q/k/v, attention,
    /// o, residual add + RMSNorm, gate/up, down.
    fn forward_b1(
        &self,
        k: &kernels::Kernels,
        ids: &Tensor,
        position: &Tensor,
        cache: &mut Cache,
    ) -> Step<Tensor> {
        let (h, d) = (dim(self.spec.heads)?, dim(self.spec.head_dim)?);
        let width = dim(self.spec.hidden)?;
        let eps = self.spec.rms_norm_eps;
        let on = (self.kind, self.device);
        let empty = |n: i64| Tensor::f_empty([1, 1, n], on).map_err(err);
        let x = Tensor::f_embedding(&self.embed, ids, -1, false, false).map_err(err)?;
        let hidden = x.f_empty_like().map_err(err)?;
        let first = self.layers.first().ok_or("the model has no layers")?;
        k.add_rms_norm(&x, None, &first.input_norm, &hidden, eps)?;
        let attn = empty(h * d)?;
        let act = empty(dim(self.spec.intermediate)?)?;
        for (i, layer) in self.layers.iter().enumerate() {
            let qkv = empty(layer.qkv.weight.size()[0])?;
            k.gemv(
                &layer.qkv.weight,
                &hidden,
                layer.qkv.bias.as_ref(),
                &qkv,
                false,
            )?;
            let qk_norm = layer.q_norm.as_ref().zip(layer.k_norm.as_ref());
            k.attention(
                &qkv,
                &cache.keys[i],
                &cache.values[i],
                (&cache.cos, &cache.sin),
                position,
                qk_norm,
                &attn,
                kernels::AttentionShape {
                    batch: 1,
                    heads: h,
                    kv_heads: dim(self.spec.kv_heads)?,
                    window: layer.window,
                    scale: 1.0 / (d as f64).sqrt(),
                    eps,
                },
            )?;
            drop(qkv);
            let out = empty(width)?;
            k.gemv(&layer.o.weight, &attn, layer.o.bias.as_ref(), &out, false)?;
            k.add_rms_norm(&x, Some(&out), &layer.post_norm, &hidden, eps)?;
            k.gemv(
                &layer.gate_up.weight,
                &hidden,
                layer.gate_up.bias.as_ref(),
                &act,
                true,
            )?;
            k.gemv(
                &layer.down.weight,
                &act,
                layer.down.bias.as_ref(),
                &out,
                false,
            )?;
            let next = self.layers.get(i + 1).map_or(&self.norm, |l| &l.input_norm);
            k.add_rms_norm(&x, Some(&out), next, &hidden, eps)?;
        }
        let logits = empty(dim(self.spec.vocab)?)?;
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        k.gemv(head, &hidden, None, &logits, false)?;
        Ok(logits)
    }
}

/// The static KV cache: per layer keys and values `[batch, kv_heads, context, head_dim]`,
/// zeros, allocated once; with the tensors made once per context beside the inputs.
pub struct Cache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    /// `0..context`, int64 on the device (the key positions, for the masks).
    kv_index: Tensor,
    /// [`Decoder::rope_tables`]: `cos`, `[context, head_dim]`.
    cos: Tensor,
    /// The signed `sin`, `[context, head_dim]`.
    sin: Tensor,
}

/// What a context needs besides the cache, made by the caller beside the inputs (so that the
/// cache's own step allocates the keys and values only, what `lab plan` counts).
pub struct ContextTensors {
    /// `0..context`, int64 on the device.
    pub kv_index: Tensor,
    /// [`Decoder::rope_tables`].
    pub rope: (Tensor, Tensor),
}

impl ContextTensors {
    /// Builds them for `context` positions on the model's device.
    pub fn new(model: &Decoder, context: i64) -> Step<Self> {
        Ok(ContextTensors {
            kv_index: Tensor::f_arange(context, (Kind::Int64, model.device)).map_err(err)?,
            rope: model.rope_tables(context)?,
        })
    }
}

impl Cache {
    /// Allocates the cache for `batch` sequences of `context` positions.
    pub fn new(model: &Decoder, batch: u64, context: u64, with: ContextTensors) -> Step<Self> {
        let s = &model.spec;
        let shape = [
            dim(batch)?,
            dim(s.kv_heads)?,
            dim(context)?,
            dim(s.head_dim)?,
        ];
        let mut keys = Vec::with_capacity(s.layers as usize);
        let mut values = Vec::with_capacity(s.layers as usize);
        for _ in 0..s.layers {
            keys.push(Tensor::f_zeros(shape, (model.kind, model.device)).map_err(err)?);
            values.push(Tensor::f_zeros(shape, (model.kind, model.device)).map_err(err)?);
        }
        let (cos, sin) = with.rope;
        Ok(Cache {
            keys,
            values,
            kv_index: with.kv_index,
            cos,
            sin,
        })
    }
}

/// The state a decode step reads and updates in place: the current token per sequence
/// (`[batch, 1]`) and the position (`[1]`), both int64 on the device. One step: the logits
/// of `ids` at `position`, `ids ← argmax`, `position += 1` — the same tensors every step, so
/// a captured step replays as the next one.
pub struct DecodeState {
    /// `[batch, 1]`.
    pub ids: Tensor,
    /// `[1]`.
    pub position: Tensor,
}

impl DecodeState {
    /// One greedy decode step; returns the step's logits `[batch, 1, vocab]` (kept alive by
    /// the caller as long as it wants them).
    pub fn step(&mut self, model: &Decoder, cache: &mut Cache) -> Step<Tensor> {
        let logits = model.forward(&self.ids, &self.position, cache, false)?;
        let next = logits.f_argmax(-1, false).map_err(err)?;
        self.ids.f_copy_(&next).map_err(err)?;
        let _ = self.position.f_add_scalar_(1).map_err(err)?;
        Ok(logits)
    }
}
