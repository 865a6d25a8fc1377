//! The decoder that `lab measure --model` runs in the torch worker: the architecture facts of
//! a model folder turned into one [`DecoderSpec`] (shapes, norms, rotary embedding, windows)
//! and the list of its tensors in the order `transformers` materialises them.
//!
//! The facts come from [`crate::plan::model::read`] (the folder read once, as `lab plan`
//! reads it: [`crate::plan::family::Architecture`], with each configuration class's defaults
//! for shapes, tying and windows); this module adds only what a forward needs beyond memory:
//! `rms_norm_eps`, the rotary base and scaling. Those are read from the same parsed
//! `config.json` and never defaulted: a config without `rms_norm_eps` or `rope_theta` is
//! refused by name (real checkpoints state both).
//!
//! Families run: Llama, Mistral, Qwen2, Qwen3, Phi-3 (dense, grouped-query attention,
//! SwiGLU, RMSNorm; Phi-3's q/k/v and gate/up are fused in the checkpoint itself) and
//! Mixtral (Mistral's attention, every feed-forward a mixture of SwiGLU experts: [`Routing`])
//! and Gemma 2 (`(1 + weight)` RMSNorms, sandwich norms, GeGLU, the scaled embedding, soft
//! caps, `query_pre_attn_scalar`, alternating windows: [`Gemma`]). Any other `model_type` —
//! including those `lab plan` knows (Gemma 1 and 3, DeepSeek, Qwen-MoE) — is refused by name
//! before any GPU work ([`MEASURED_FAMILIES`]).
//!
//! Mixtral's tensors are listed as `transformers` 5 materialises them (`MixtralSparseMoeBlock`
//! in `modeling_mixtral.py`, 5.17: the router `mlp.gate.weight` `[E, H]`, then
//! `MixtralExperts`' `mlp.experts.gate_up_proj` `[E, 2I, H]` (per expert the gate rows, then
//! the up rows) and `mlp.experts.down_proj` `[E, H, I]`); a checkpoint stores them per expert
//! (`block_sparse_moe.experts.{e}.w1/w3/w2.weight`), which [`weights::locate`] maps onto those
//! tensors as `transformers`' `conversion_mapping.py` does.
//!
//! Module structure and forward follow `transformers` 5.x `modeling_llama.py`,
//! `modeling_mistral.py`, `modeling_qwen2.py` and `modeling_qwen3.py`: Qwen2 always has
//! q/k/v biases and no output bias; Qwen3 normalises each query and key head (RMSNorm over
//! `head_dim`) before the rotary embedding; Llama's `attention_bias` adds biases to q, k, v
//! and o, `mlp_bias` to the three MLP projections. The numerics test
//! (`lab/tests/numerics/decoder_numerics.py`) holds the worker's logits against
//! `transformers`' for each family.

pub mod fused;
pub mod weights;

use crate::plan::family::{self, Architecture, Attention, Family};
use crate::plan::model::Model;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `model_type`s `lab measure --model` runs.
pub const MEASURED_FAMILIES: [&str; 7] = [
    "llama", "mistral", "qwen2", "qwen3", "phi3", "mixtral", "gemma2",
];

/// What Gemma 2's forward adds (`Gemma2Config`, `modeling_gemma2.py`, transformers 5.17);
/// the sandwich norms, the `(1 + weight)` norms, GeGLU and the embedding scale come with it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gemma {
    /// `attn_logit_softcapping`: attention scores become `tanh(s / cap) · cap`; `None` when
    /// the config sets it null.
    pub attn_softcap: Option<f64>,
    /// `final_logit_softcapping`, the same on the logits.
    pub final_softcap: Option<f64>,
    /// `query_pre_attn_scalar`: the attention scale is its inverse square root.
    pub query_pre_attn_scalar: f64,
}

/// `Gemma2Config` defaults (transformers 5.17) for absent keys: `attn_logit_softcapping`
/// 50, `final_logit_softcapping` 30, `query_pre_attn_scalar` 256.
const GEMMA2_DEFAULTS: [(&str, f64); 3] = [
    ("attn_logit_softcapping", 50.0),
    ("final_logit_softcapping", 30.0),
    ("query_pre_attn_scalar", 256.0),
];

/// The router of a mixture-of-experts feed-forward (Mixtral): every token's `[E]` router
/// logits (`x · gateᵀ`, in the activations' dtype) go through a float32 softmax, the
/// `per_token` largest probabilities are kept and renormalised to sum to one, and the
/// token's output is the sum of those experts' SwiGLU outputs weighted by them
/// (`MixtralTopKRouter` and `MixtralExperts.forward`, transformers 5.17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// Experts per layer (`num_local_experts`), `E`.
    pub experts: u64,
    /// Experts each token is sent to (`num_experts_per_tok`), `k`.
    pub per_token: u64,
}

/// How rotary frequencies are scaled (`rope_scaling.rope_type`, or `rope_parameters` in
/// `transformers` 5 configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "snake_case")]
pub enum RopeScaling {
    /// `inv_freq = 1 / theta^(2i/d)`.
    Default,
    /// `inv_freq / factor` (position interpolation).
    Linear {
        /// `factor`.
        factor: f64,
    },
    /// Llama 3.1's frequency-dependent scaling (`_compute_llama3_parameters` in
    /// `transformers.modeling_rope_utils`).
    Llama3 {
        /// `factor`.
        factor: f64,
        /// `low_freq_factor`.
        low_freq_factor: f64,
        /// `high_freq_factor`.
        high_freq_factor: f64,
        /// `original_max_position_embeddings`.
        original_max_position_embeddings: f64,
    },
}

/// One tensor of the model: its `transformers` state-dict name and shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// State-dict name (`model.layers.0.self_attn.q_proj.weight`).
    pub name: String,
    /// Shape, outermost first.
    pub shape: Vec<u64>,
    /// What a random initialisation gives it.
    pub init: Init,
}

/// Random initialisation of a tensor, as `transformers`' `_init_weights` does it for these
/// families (`PreTrainedModel._init_weights`: linear and embedding weights normal with
/// `initializer_range`, biases zero, RMSNorm weights one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    /// Normal(0, initializer_range).
    Normal,
    /// All zeros.
    Zeros,
    /// All ones.
    Ones,
}

/// Everything the worker needs to build and run the decoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecoderSpec {
    /// `model_type`: one of [`MEASURED_FAMILIES`].
    pub family: String,
    /// Residual width.
    pub hidden: u64,
    /// Decoder layers.
    pub layers: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads (grouped-query attention when fewer).
    pub kv_heads: u64,
    /// Width of one head.
    pub head_dim: u64,
    /// MLP intermediate width.
    pub intermediate: u64,
    /// Vocabulary.
    pub vocab: u64,
    /// The output head is the embedding matrix.
    pub tied_embeddings: bool,
    /// `rms_norm_eps`.
    pub rms_norm_eps: f64,
    /// `rope_theta`.
    pub rope_theta: f64,
    /// Rotary scaling.
    pub rope_scaling: RopeScaling,
    /// Biases on q, k and v.
    pub qkv_bias: bool,
    /// Bias on the attention output projection.
    pub o_bias: bool,
    /// Biases on the MLP projections.
    pub mlp_bias: bool,
    /// Per-head RMSNorm of queries and keys (Qwen3).
    pub qk_norm: bool,
    /// Per layer: the sliding window, `None` for full attention.
    pub windows: Vec<Option<u64>>,
    /// Every layer's feed-forward is this mixture of experts of width [`Self::intermediate`]
    /// (Mixtral); `None`: the dense gated MLP.
    #[serde(default)]
    pub experts: Option<Routing>,
    /// Gemma 2's forward ([`Gemma`]); `None` for the Llama-like families.
    #[serde(default)]
    pub gemma: Option<Gemma>,
    /// `initializer_range` for random weights (0.02 when the config does not say, the value of
    /// every one of the four configuration classes).
    pub initializer_range: f64,
    /// The parameters in materialisation order (buffers are computed, not listed).
    pub tensors: Vec<TensorSpec>,
}

impl DecoderSpec {
    /// Parameters (elements of [`Self::tensors`]), saturating.
    pub fn parameters(&self) -> u64 {
        self.tensors.iter().fold(0u64, |acc, t| {
            acc.saturating_add(t.shape.iter().fold(1u64, |a, d| a.saturating_mul(*d)))
        })
    }

    /// Bytes of one sequence position's keys and values over all layers in `element_bytes`.
    pub fn kv_bytes_per_position(&self, element_bytes: u64) -> u64 {
        2u64.saturating_mul(self.layers)
            .saturating_mul(self.kv_heads)
            .saturating_mul(self.head_dim)
            .saturating_mul(element_bytes)
    }
}

/// The decoder of a model folder read once by [`crate::plan::model::read`].
///
/// # Errors
/// [`Error::Usage`] (exit 2) for a family outside [`MEASURED_FAMILIES`] (named), a
/// `hidden_act` other than `silu` (Gemma 2: a `hidden_activation` other than
/// `gelu_pytorch_tanh`), a rope type other than default, linear or llama3 (named), a missing
/// `rms_norm_eps` or `rope_theta`, an odd `head_dim`, experts other than Mixtral's, Gemma 2's
/// bidirectional attention, and a pre-quantized checkpoint.
pub fn from_model(model: &Model) -> Result<DecoderSpec> {
    build(&model.architecture, &model.config)
}

/// Reads a decoder from `config.json` text (the tests' and the CPU probe's way in; a folder
/// is read with [`from_model`]).
///
/// # Errors
/// [`Error::Usage`] (exit 2) for text that is not one JSON object, anything
/// [`family::read`] refuses (an unknown `model_type` included), and as [`from_model`].
pub fn from_config(text: &str) -> Result<DecoderSpec> {
    let value: Value = serde_json::from_str(text.strip_prefix('\u{feff}').unwrap_or(text))
        .map_err(|e| Error::usage(format!("config.json is not valid JSON: {e}")))?;
    let arch = family::read(&value)?;
    build(&arch, &value)
}

/// The decoder of `arch`, with the forward's own fields read from `value` (the same config).
fn build(arch: &Architecture, value: &Value) -> Result<DecoderSpec> {
    let family = arch.family;
    if !matches!(
        family,
        Family::Llama
            | Family::Mistral
            | Family::Qwen2
            | Family::Qwen3
            | Family::Phi3
            | Family::Mixtral
            | Family::Gemma2
    ) {
        return Err(Error::usage(format!(
            "lab measure --model runs {} only: model_type \"{}\" is not supported by the measurement (lab plan can still plan it)",
            MEASURED_FAMILIES.join(", "),
            arch.model_type()
        )));
    }
    if let Some(method) = &arch.quantization {
        return Err(Error::usage(format!(
            "config.json describes a pre-quantized checkpoint ({method}): lab measure --model runs unquantized weights only"
        )));
    }
    let field = |key: &str| value.get(key).filter(|v| !v.is_null());
    // The activation each modeling file reads: Gemma 2's MLP `hidden_activation` (default
    // `gelu_pytorch_tanh`; its configs' `hidden_act` is not read), the others' `hidden_act`.
    let (act_key, act_wanted) = if family == Family::Gemma2 {
        ("hidden_activation", "gelu_pytorch_tanh")
    } else {
        ("hidden_act", "silu")
    };
    if let Some(act) = field(act_key) {
        if act.as_str() != Some(act_wanted) {
            return Err(Error::usage(format!(
                "config.json: {act_key} {} is not supported (model_type \"{}\" runs {act_wanted})",
                crate::text::excerpt(&act.to_string()),
                arch.model_type()
            )));
        }
    }
    let rope_parameters = field("rope_parameters");
    let number = |key: &str, scopes: &[Option<&Value>]| -> Result<Option<f64>> {
        for scope in scopes.iter().flatten() {
            match scope.get(key) {
                None | Some(Value::Null) => continue,
                Some(v) => {
                    return match v.as_f64() {
                        Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                        _ => Err(Error::usage(format!(
                            "config.json: \"{key}\" must be a positive number, found {}",
                            crate::text::excerpt(&v.to_string())
                        ))),
                    }
                }
            }
        }
        Ok(None)
    };
    let required = |key: &str, scopes: &[Option<&Value>]| -> Result<f64> {
        number(key, scopes)?.ok_or_else(|| {
            Error::usage(format!(
                "config.json has no \"{key}\": the forward needs it (lab does not assume a default)"
            ))
        })
    };
    let top = Some(value);
    let rms_norm_eps = required("rms_norm_eps", &[top])?;
    let rope_theta = required("rope_theta", &[rope_parameters, top])?;
    let scaling = rope_parameters.or_else(|| field("rope_scaling"));
    let rope_scaling = rope_scaling_of(scaling, &number)?;
    // The bias flags as `modeling_<family>.py` (transformers 5.17) builds the projections:
    // Qwen2 always on q, k and v and never on o; Mistral never (its projections are
    // `bias=False` whatever the config says); Llama and Qwen3 on q, k, v and o with
    // `attention_bias`; only Llama's MLP reads `mlp_bias`.
    // Phi-3's fused projections are `bias=False` whatever the config says.
    // Mixtral's attention is Mistral's (`bias=False`).
    let (qkv_bias, o_bias) = match family {
        Family::Qwen2 => (true, false),
        Family::Mistral | Family::Phi3 | Family::Mixtral => (false, false),
        _ => (arch.attention_bias, arch.attention_bias),
    };
    // `Phi3Config` rotates the first `head_dim × partial_rotary_factor` dimensions only
    // (default 1.0); the worker rotates whole heads, so any other factor is refused.
    if let Some(factor) = number("partial_rotary_factor", &[rope_parameters, top])? {
        if factor != 1.0 {
            return Err(Error::usage(format!(
                "config.json: partial_rotary_factor {factor} is not supported by lab measure --model (whole-head rotary only)"
            )));
        }
    }
    let mlp_bias = family == Family::Llama && arch.mlp_bias;
    let initializer_range = number("initializer_range", &[top])?.unwrap_or(0.02);
    let windows = arch
        .layer_kinds
        .iter()
        .map(|l| match l.attention {
            Attention::Full => Ok(None),
            Attention::Sliding(w) => Ok(Some(w)),
            Attention::Chunked(_) => Err(Error::usage(
                "config.json: chunked attention is not supported by lab measure --model",
            )),
            // No measured family builds latent attention; refused, not guessed.
            Attention::Latent => Err(Error::usage(
                "config.json: latent attention is not supported by lab measure --model",
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    let experts = match (&arch.experts, family) {
        (None, _) => None,
        // Mixtral: every layer routed, no shared expert, experts as wide as `intermediate`
        // (what `plan/family/mixtral.rs` reads; held here so that a change there is noticed).
        (Some(e), Family::Mixtral)
            if e.shared_intermediate == 0
                && e.intermediate == arch.intermediate
                && arch
                    .layer_kinds
                    .iter()
                    .all(|l| l.feed_forward == family::FeedForward::Experts) =>
        {
            Some(Routing {
                experts: e.routed,
                per_token: e.per_token,
            })
        }
        (Some(_), _) => {
            return Err(Error::usage(format!(
                "config.json: the mixture-of-experts layers of model_type \"{}\" are not supported by lab measure --model (Mixtral's are)",
                arch.model_type()
            )))
        }
    };
    let gemma = if family == Family::Gemma2 {
        Some(gemma_of(value, &number)?)
    } else {
        None
    };
    let mut spec = DecoderSpec {
        family: arch.model_type().to_owned(),
        hidden: arch.hidden,
        layers: arch.layers,
        heads: arch.heads,
        kv_heads: arch.kv_heads,
        head_dim: arch.head_dim,
        intermediate: arch.intermediate,
        vocab: arch.vocab,
        tied_embeddings: arch.tied_embeddings,
        rms_norm_eps,
        rope_theta,
        rope_scaling,
        qkv_bias,
        o_bias,
        mlp_bias,
        qk_norm: arch.qk_norm,
        windows,
        experts,
        gemma,
        initializer_range,
        tensors: Vec::new(),
    };
    if !spec.head_dim.is_multiple_of(2) {
        return Err(Error::usage(format!(
            "config.json: head_dim {} is odd; the rotary embedding needs an even width",
            spec.head_dim
        )));
    }
    spec.tensors = tensors(arch, &spec);
    Ok(spec)
}

type Number<'a> = dyn Fn(&str, &[Option<&Value>]) -> Result<Option<f64>> + 'a;

/// Gemma 2's forward facts: each field as written, a null cap as no cap, an absent field as
/// the class default ([`GEMMA2_DEFAULTS`]); `use_bidirectional_attention: true` is refused.
fn gemma_of(value: &Value, number: &Number) -> Result<Gemma> {
    if value
        .get("use_bidirectional_attention")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return Err(Error::usage(
            "config.json: use_bidirectional_attention is not supported by lab measure --model (causal decoders only)",
        ));
    }
    let read = |key: &str| -> Result<Option<f64>> {
        let default = GEMMA2_DEFAULTS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v);
        match value.get(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(_) => number(key, &[Some(value)]),
        }
    };
    Ok(Gemma {
        attn_softcap: read("attn_logit_softcapping")?,
        final_softcap: read("final_logit_softcapping")?,
        query_pre_attn_scalar: read("query_pre_attn_scalar")?.ok_or_else(|| {
            Error::usage("config.json: query_pre_attn_scalar must be a positive number, found null")
        })?,
    })
}

fn rope_scaling_of(scaling: Option<&Value>, number: &Number) -> Result<RopeScaling> {
    let Some(scaling) = scaling else {
        return Ok(RopeScaling::Default);
    };
    let kind = scaling
        .get("rope_type")
        .or_else(|| scaling.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let s = Some(scaling);
    let need = |key: &str| -> Result<f64> {
        number(key, &[s])?.ok_or_else(|| {
            Error::usage(format!(
                "config.json: rope scaling \"{kind}\" has no \"{key}\""
            ))
        })
    };
    match kind {
        "default" => Ok(RopeScaling::Default),
        "linear" => Ok(RopeScaling::Linear {
            factor: need("factor")?,
        }),
        "llama3" => Ok(RopeScaling::Llama3 {
            factor: need("factor")?,
            low_freq_factor: need("low_freq_factor")?,
            high_freq_factor: need("high_freq_factor")?,
            original_max_position_embeddings: need("original_max_position_embeddings")?,
        }),
        other => Err(Error::usage(format!(
            "config.json: rope scaling \"{}\" is not supported by lab measure --model (supported: default, linear, llama3)",
            crate::text::excerpt(other)
        ))),
    }
}

/// The parameters in `transformers`' materialisation order: the embedding; per layer the
/// attention (q, k, v with their biases, o, Qwen3's q/k norms), the MLP (gate, up, down; for
/// Mixtral the router, then the stacked experts' gate-up and down), the two norms; the final norm; the untied output head last. The same order as
/// [`Architecture::tensors`] lists them for the plan (a test holds them together).
fn tensors(arch: &Architecture, spec: &DecoderSpec) -> Vec<TensorSpec> {
    let (h, d, i, v) = (spec.hidden, spec.head_dim, spec.intermediate, spec.vocab);
    let q = spec.heads.saturating_mul(d);
    let kv = spec.kv_heads.saturating_mul(d);
    let mut out = Vec::new();
    let mut push =
        |name: String, shape: Vec<u64>, init: Init| out.push(TensorSpec { name, shape, init });
    push("model.embed_tokens.weight".into(), vec![v, h], Init::Normal);
    for l in 0..arch.layers {
        let p = format!("model.layers.{l}");
        if arch.family == Family::Phi3 {
            // `Phi3Attention` assigns `o_proj` before the fused `qkv_proj`; `Phi3MLP` has the
            // fused `gate_up_proj` (gate rows first, `chunk(2)`), then `down_proj`; no biases.
            let qkv = q.saturating_add(kv.saturating_mul(2));
            for (name, shape) in [
                ("self_attn.o_proj", vec![h, q]),
                ("self_attn.qkv_proj", vec![qkv, h]),
                ("mlp.gate_up_proj", vec![i.saturating_mul(2), h]),
                ("mlp.down_proj", vec![h, i]),
            ] {
                push(format!("{p}.{name}.weight"), shape, Init::Normal);
            }
            push(format!("{p}.input_layernorm.weight"), vec![h], Init::Ones);
            push(
                format!("{p}.post_attention_layernorm.weight"),
                vec![h],
                Init::Ones,
            );
            continue;
        }
        for (name, rows) in [("q_proj", q), ("k_proj", kv), ("v_proj", kv)] {
            push(
                format!("{p}.self_attn.{name}.weight"),
                vec![rows, h],
                Init::Normal,
            );
            if spec.qkv_bias {
                push(
                    format!("{p}.self_attn.{name}.bias"),
                    vec![rows],
                    Init::Zeros,
                );
            }
        }
        push(
            format!("{p}.self_attn.o_proj.weight"),
            vec![h, q],
            Init::Normal,
        );
        if spec.o_bias {
            push(format!("{p}.self_attn.o_proj.bias"), vec![h], Init::Zeros);
        }
        if spec.qk_norm {
            push(format!("{p}.self_attn.q_norm.weight"), vec![d], Init::Ones);
            push(format!("{p}.self_attn.k_norm.weight"), vec![d], Init::Ones);
        }
        if let Some(r) = spec.experts {
            // `MixtralSparseMoeBlock` assigns the router, then `MixtralExperts`; the experts'
            // initialisation is normal (`MixtralPreTrainedModel._init_weights`).
            let e = r.experts;
            push(format!("{p}.mlp.gate.weight"), vec![e, h], Init::Normal);
            for (name, shape) in [
                ("gate_up_proj", vec![e, i.saturating_mul(2), h]),
                ("down_proj", vec![e, h, i]),
            ] {
                push(format!("{p}.mlp.experts.{name}"), shape, Init::Normal);
            }
            push(format!("{p}.input_layernorm.weight"), vec![h], Init::Ones);
            push(
                format!("{p}.post_attention_layernorm.weight"),
                vec![h],
                Init::Ones,
            );
            continue;
        }
        for (name, rows, cols) in [("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)] {
            push(
                format!("{p}.mlp.{name}.weight"),
                vec![rows, cols],
                Init::Normal,
            );
            if spec.mlp_bias {
                push(format!("{p}.mlp.{name}.bias"), vec![rows], Init::Zeros);
            }
        }
        // `Gemma2RMSNorm` weights are zeros (the norm multiplies by `1 + weight`,
        // `Gemma2PreTrainedModel._init_weights`); Gemma 2 has four per layer.
        let norm_init = if spec.gemma.is_some() {
            Init::Zeros
        } else {
            Init::Ones
        };
        push(format!("{p}.input_layernorm.weight"), vec![h], norm_init);
        push(
            format!("{p}.post_attention_layernorm.weight"),
            vec![h],
            norm_init,
        );
        if spec.gemma.is_some() {
            for name in ["pre_feedforward_layernorm", "post_feedforward_layernorm"] {
                push(format!("{p}.{name}.weight"), vec![h], norm_init);
            }
        }
    }
    let norm_init = if spec.gemma.is_some() {
        Init::Zeros
    } else {
        Init::Ones
    };
    push("model.norm.weight".into(), vec![h], norm_init);
    if !spec.tied_embeddings {
        push("lm_head.weight".into(), vec![v, h], Init::Normal);
    }
    out
}

#[cfg(test)]
mod tests;
