//! The decoder forward of `lab measure --model` (Llama, Mistral, Qwen2, Qwen3) in libtorch.
//!
//! Mirrors `transformers` 5.x `modeling_llama.py` (and the Mistral/Qwen2/Qwen3 copies):
//! - RMSNorm: `x.float()`, `x * rsqrt(mean(x²) + eps)`, back to the input dtype, times the
//!   weight (`LlamaRMSNorm.forward`);
//! - rotary: `inv_freq = 1 / theta^(2i/d)` in float32 (scaled per `rope_type`),
//!   `freqs = pos × inv_freq`, `emb = cat(freqs, freqs)`, `cos`/`sin` cast to the activations'
//!   dtype, `q·cos + rotate_half(q)·sin` (`LlamaRotaryEmbedding`, `apply_rotary_pos_emb`);
//! - attention: scale `head_dim^-0.5`, causal, plus `kv > q - window` on sliding layers
//!   (`masking_utils.sliding_window_overlay`); grouped-query attention without copying the
//!   cache: the `heads / kv_heads` queries of one key/value head are laid along the query
//!   axis, so every head reads its own key/value head, as `repeat_kv` gives it;
//! - MLP: `down(silu(gate(x)) · up(x))`; residual adds around both blocks.
//!
//! The KV cache is static: two `[batch, kv_heads, context, head_dim]` tensors per layer,
//! allocated once ([`Cache::new`]) and written in place at the step's positions
//! (`index_copy_`), with the positions a device tensor. A decode step therefore has fixed
//! shapes and no host-side value in it, which is what lets it be captured in a CUDA graph
//! and replayed ([`DecodeState`]).

pub mod run;

use lab::decoder::weights::Sources;
use lab::decoder::{DecoderSpec, Init, RopeScaling};
use std::collections::HashMap;
use std::io::{Read as _, Seek as _, SeekFrom};
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
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    gate: Linear,
    up: Linear,
    down: Linear,
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
    layers: Vec<Layer>,
    norm: Tensor,
    inv_freq: Tensor,
    /// `original_inv_freq`, kept alive as `transformers` keeps it (its bytes are in the
    /// plan's replay of the allocator).
    _original_inv_freq: Tensor,
    lm_head: Option<Tensor>,
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
        let mut tensors: HashMap<String, Tensor> = HashMap::with_capacity(spec.tensors.len());
        let mut buffers: Option<(Tensor, Tensor)> = None;
        let mut files: Vec<Option<std::fs::File>> = match &from {
            WeightsFrom::Files(s) => (0..s.files.len()).map(|_| None).collect(),
            WeightsFrom::Random => Vec::new(),
        };
        let mut host: Vec<u8> = Vec::new();
        for (i, t) in spec.tensors.iter().enumerate() {
            if t.name == "lm_head.weight" {
                buffers = Some((inv_freq(spec, device)?, inv_freq(spec, device)?));
            }
            let shape: Vec<i64> = t.shape.iter().map(|d| dim(*d)).collect::<Step<_>>()?;
            let tensor = match &from {
                WeightsFrom::Random => {
                    let mut x = Tensor::f_empty(shape.as_slice(), (kind, device)).map_err(err)?;
                    let _ = match t.init {
                        Init::Normal => x.f_normal_(0.0, spec.initializer_range),
                        Init::Zeros => x.f_zero_(),
                        Init::Ones => x.f_fill_(1.0),
                    }
                    .map_err(err)?;
                    x
                }
                WeightsFrom::Files(sources) => {
                    let src = &sources.tensors[i];
                    let path = &sources.files[src.file];
                    if files[src.file].is_none() {
                        files[src.file] = Some(
                            std::fs::File::open(path)
                                .map_err(|e| format!("cannot open {}: {e}", path.display()))?,
                        );
                    }
                    let file = files[src.file].as_mut().ok_or("file not open")?;
                    let len = usize::try_from(src.end - src.begin).map_err(|e| e.to_string())?;
                    host.resize(len, 0);
                    file.seek(SeekFrom::Start(src.begin))
                        .and_then(|_| file.read_exact(&mut host))
                        .map_err(|e| {
                            format!("cannot read {} from {}: {e}", t.name, path.display())
                        })?;
                    let stored = stored_kind(&src.dtype)?;
                    let cpu = Tensor::f_from_data_size(&host, &shape, stored).map_err(err)?;
                    let cpu = if stored == kind {
                        cpu
                    } else {
                        cpu.f_to_dtype(kind, false, false).map_err(err)?
                    };
                    if device == Device::Cpu {
                        cpu
                    } else {
                        cpu.f_to(device).map_err(err)?
                    }
                }
            };
            tensors.insert(t.name.clone(), tensor);
            if t.name == "model.norm.weight" && spec.tied_embeddings {
                buffers = Some((inv_freq(spec, device)?, inv_freq(spec, device)?));
            }
        }
        drop(host);
        let (inv, original) = match buffers {
            Some(b) => b,
            None => (inv_freq(spec, device)?, inv_freq(spec, device)?),
        };
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
            let q = linear("self_attn.q_proj", spec.qkv_bias)?;
            let k = linear("self_attn.k_proj", spec.qkv_bias)?;
            let v = linear("self_attn.v_proj", spec.qkv_bias)?;
            let o = linear("self_attn.o_proj", spec.o_bias)?;
            let gate = linear("mlp.gate_proj", spec.mlp_bias)?;
            let up = linear("mlp.up_proj", spec.mlp_bias)?;
            let down = linear("mlp.down_proj", spec.mlp_bias)?;
            let (q_norm, k_norm) = if spec.qk_norm {
                (
                    Some(take(format!("{p}.self_attn.q_norm.weight"))?),
                    Some(take(format!("{p}.self_attn.k_norm.weight"))?),
                )
            } else {
                (None, None)
            };
            let window = spec.windows[l as usize].map(dim).transpose()?;
            layers.push(Layer {
                q,
                k,
                v,
                o,
                q_norm,
                k_norm,
                gate,
                up,
                down,
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
        Ok(Decoder {
            spec: spec.clone(),
            kind,
            device,
            embed,
            layers,
            norm,
            inv_freq: inv,
            _original_inv_freq: original,
            lm_head,
        })
    }

    fn rms_norm(&self, x: &Tensor, weight: &Tensor) -> Step<Tensor> {
        let f = x.f_to_dtype(Kind::Float, false, false).map_err(err)?;
        let variance = f
            .f_pow_tensor_scalar(2)
            .map_err(err)?
            .f_mean_dim(-1, true, None::<Kind>)
            .map_err(err)?;
        let normed = f
            .f_mul(
                &variance
                    .f_add_scalar(self.spec.rms_norm_eps)
                    .map_err(err)?
                    .f_rsqrt()
                    .map_err(err)?,
            )
            .map_err(err)?
            .f_to_dtype(x.kind(), false, false)
            .map_err(err)?;
        weight.f_mul(&normed).map_err(err)
    }

    /// `cos` and `sin`, `[positions, head_dim]` in the activations' dtype.
    fn rotary(&self, positions: &Tensor) -> Step<(Tensor, Tensor)> {
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
        let sin = emb
            .f_sin()
            .map_err(err)?
            .f_to_dtype(self.kind, false, false)
            .map_err(err)?;
        Ok((cos, sin))
    }

    fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Step<Tensor> {
        let half = x.size().last().copied().unwrap_or(0) / 2;
        let x1 = x.f_narrow(-1, 0, half).map_err(err)?;
        let x2 = x.f_narrow(-1, half, half).map_err(err)?;
        let rotated = Tensor::f_cat(&[&x2.f_neg().map_err(err)?, &x1], -1).map_err(err)?;
        x.f_mul(cos)
            .map_err(err)?
            .f_add(&rotated.f_mul(sin).map_err(err)?)
            .map_err(err)
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
        let size = ids.size();
        let (b, t) = (size[0], size[1]);
        let (h, kvh, d) = (
            dim(self.spec.heads)?,
            dim(self.spec.kv_heads)?,
            dim(self.spec.head_dim)?,
        );
        let group = h / kvh;
        let scale = 1.0 / (d as f64).sqrt();
        let mut x = Tensor::f_embedding(&self.embed, ids, -1, false, false).map_err(err)?;
        let (cos, sin) = self.rotary(positions)?;
        // Causal mask [tokens, context], and one per sliding window in use.
        let q_pos = positions.f_unsqueeze(1).map_err(err)?;
        let kv_pos = cache.kv_index.f_unsqueeze(0).map_err(err)?;
        let causal = kv_pos.f_le_tensor(&q_pos).map_err(err)?;
        let mut masks: HashMap<Option<i64>, Tensor> = HashMap::new();
        for layer in &self.layers {
            if masks.contains_key(&layer.window) {
                continue;
            }
            let mask = match layer.window {
                None => causal.shallow_clone(),
                Some(w) => causal
                    .f_logical_and(
                        &kv_pos
                            .f_gt_tensor(&q_pos.f_sub_scalar(w).map_err(err)?)
                            .map_err(err)?,
                    )
                    .map_err(err)?,
            };
            // The `group` queries of one key/value head are laid along the query axis.
            let mask = mask.f_repeat([group, 1]).map_err(err)?;
            masks.insert(layer.window, mask);
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let residual = x;
            let hidden = self.rms_norm(&residual, &layer.input_norm)?;
            let heads = |lin: &Linear, n: i64| -> Step<Tensor> {
                lin.forward(&hidden)?.f_view([b, t, n, d]).map_err(err)
            };
            let mut q = heads(&layer.q, h)?;
            let mut k = heads(&layer.k, kvh)?;
            let v = heads(&layer.v, kvh)?;
            if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
                q = self.rms_norm(&q, qn)?;
                k = self.rms_norm(&k, kn)?;
            }
            drop(hidden);
            let q = q.f_transpose(1, 2).map_err(err)?;
            let k = k.f_transpose(1, 2).map_err(err)?;
            let v = v.f_transpose(1, 2).map_err(err)?;
            let q = Self::rotate(&q, &cos, &sin)?;
            let k = Self::rotate(&k, &cos, &sin)?;
            let _ = cache.keys[i].f_index_copy_(2, positions, &k).map_err(err)?;
            let _ = cache.values[i]
                .f_index_copy_(2, positions, &v)
                .map_err(err)?;
            drop((k, v));
            // [b, h, t, d] -> [b, kvh, group * t, d]: head kv·group + r reads key/value head kv.
            let q = q.f_reshape([b, kvh, group * t, d]).map_err(err)?;
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
            let gate = layer.gate.forward(&hidden)?.f_silu().map_err(err)?;
            let up = layer.up.forward(&hidden)?;
            drop(hidden);
            let act = gate.f_mul(&up).map_err(err)?;
            drop((gate, up));
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

/// The static KV cache: per layer keys and values `[batch, kv_heads, context, head_dim]`,
/// zeros, allocated once.
pub struct Cache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    /// `0..context`, int64 on the device (the key positions, for the masks).
    kv_index: Tensor,
}

impl Cache {
    /// Allocates the cache for `batch` sequences of `context` positions; `kv_index` is
    /// `0..context` on the device (made by the caller beside the inputs, so that the cache's
    /// own step allocates the keys and values only, what `lab plan` counts).
    pub fn new(model: &Decoder, batch: u64, context: u64, kv_index: Tensor) -> Step<Self> {
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
        Ok(Cache {
            keys,
            values,
            kv_index,
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
