//! A model's `config.json` turned into the architecture facts `lab plan` needs.
//!
//! Field names and defaults follow the Hugging Face `transformers` configuration classes of
//! each family (5.x): `hidden_size`, `num_hidden_layers`, `num_attention_heads`,
//! `num_key_value_heads` (default: the attention heads), `head_dim` (default
//! `hidden_size / num_attention_heads`, except Gemma 256 and Qwen3 128), `intermediate_size`,
//! `vocab_size`, `tie_word_embeddings`, `sliding_window` and `layer_types`, the mixture of
//! experts fields (`num_local_experts`, `num_experts_per_tok`) and the multi-head latent
//! attention fields of DeepSeek-V2/V3 (`kv_lora_rank`, `q_lora_rank`, `qk_rope_head_dim`,
//! `qk_nope_head_dim`, `v_head_dim`). A missing required field or an unknown `model_type` is
//! an error naming it: the plan never guesses. Parameter counts per family are in
//! [`super::params`]; see `docs/PLANNING.md` for the formulas and their sources.

use crate::{Error, Result};
use serde_json::{Map, Value};

/// Largest `config.json` read, in bytes (16 MiB; real ones are a few KB).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Most decoder (or vision encoder) layers a config may state: far above any real model, low
/// enough that listing every layer's tensors stays instant.
pub const MAX_LAYERS: u64 = 100_000;

/// The model families `lab plan` knows, by their `model_type`.
pub const SUPPORTED: [&str; 12] = [
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gemma3",
    "phi3",
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
];

/// The attention of one decoder layer, as the KV cache sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerAttention {
    /// Every token of the context is kept.
    Full,
    /// At most this many tokens are kept (sliding-window attention).
    Sliding(u64),
}

/// Mixture-of-experts feed-forward facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Experts {
    /// Routed experts per MoE layer.
    pub routed: u64,
    /// Experts each token is sent to.
    pub per_token: u64,
    /// Intermediate size of one routed expert.
    pub intermediate: u64,
    /// Shared experts' combined intermediate size (DeepSeek), 0 when none.
    pub shared_intermediate: u64,
    /// Layers before the first MoE layer (DeepSeek `first_k_dense_replace`), dense MLP.
    pub dense_layers: u64,
}

/// Multi-head latent attention facts (DeepSeek-V2/V3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latent {
    /// Compressed key/value rank: the cached latent's width.
    pub kv_lora_rank: u64,
    /// Query compression rank; `None` for a plain query projection (DeepSeek-V2-Lite).
    pub q_lora_rank: Option<u64>,
    /// Rotary part of each query/key head, cached once per token beside the latent.
    pub qk_rope_head_dim: u64,
    /// Non-rotary part of each query/key head.
    pub qk_nope_head_dim: u64,
    /// Value head width.
    pub v_head_dim: u64,
}

/// The architecture facts of one model (its text decoder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Architecture {
    /// `model_type` as written in the configuration.
    pub model_type: String,
    /// Width of the residual stream.
    pub hidden: u64,
    /// Decoder layers.
    pub layers: u64,
    /// Attention (query) heads.
    pub heads: u64,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: u64,
    /// Width of one attention head.
    pub head_dim: u64,
    /// Dense feed-forward intermediate size.
    pub intermediate: u64,
    /// Vocabulary size (rows of the embedding and of the output head).
    pub vocab: u64,
    /// Whether the output head shares the embedding matrix.
    pub tied_embeddings: bool,
    /// Per layer: full or sliding-window attention.
    pub layer_attention: Vec<LayerAttention>,
    /// Mixture of experts, when the feed-forward is one.
    pub experts: Option<Experts>,
    /// Multi-head latent attention, when the config has it.
    pub latent: Option<Latent>,
    /// The configured storage dtype (`dtype` or `torch_dtype`), when stated.
    pub dtype: Option<String>,
    /// Vision tower of a multimodal checkpoint (Gemma 3): SigLIP facts.
    pub vision: Option<Vision>,
    /// `quantization_config.quant_method` of a pre-quantized checkpoint (GPTQ, AWQ...), whose
    /// safetensors hold packed storage rather than one element per parameter.
    pub quantization: Option<String>,
}

/// SigLIP vision tower facts (Gemma 3 multimodal checkpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vision {
    /// Width of the vision encoder.
    pub hidden: u64,
    /// Vision encoder layers.
    pub layers: u64,
    /// Vision feed-forward intermediate size.
    pub intermediate: u64,
    /// Input image side in pixels.
    pub image_size: u64,
    /// Patch side in pixels.
    pub patch_size: u64,
    /// Colour channels.
    pub channels: u64,
    /// Whether SigLIP's attention-pooling head is built (`vision_use_head`; transformers
    /// builds it when the field is absent, public Gemma 3 configs set it false).
    pub head: bool,
}

/// Reads the architecture from `config.json` text.
///
/// # Errors
/// [`Error::Usage`] for text that is not a JSON object, an unknown or missing `model_type`
/// (the message lists the supported ones), a missing or non-integer required field (named),
/// or inconsistent values (heads not dividing the width, zero layers...).
pub fn parse(text: &str) -> Result<Architecture> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::usage(format!("config.json is not valid JSON: {e}")))?;
    let Value::Object(top) = value else {
        return Err(Error::usage("config.json must hold one JSON object"));
    };
    let model_type = match top.get("model_type") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(Error::usage(format!(
                "config.json has no \"model_type\": cannot tell the architecture (supported: {})",
                SUPPORTED.join(", ")
            )))
        }
    };
    if !SUPPORTED.contains(&model_type.as_str()) {
        return Err(Error::usage(format!(
            "unknown model_type \"{}\": lab plan knows {} (it does not guess the layout of other architectures)",
            crate::text::excerpt(&model_type),
            SUPPORTED.join(", ")
        )));
    }
    // Gemma 3 multimodal checkpoints nest the decoder under text_config.
    let (fields, vision) = if model_type == "gemma3" {
        let text = match top.get("text_config") {
            Some(Value::Object(o)) => o,
            _ => {
                return Err(Error::usage(
                    "config.json (model_type gemma3) has no \"text_config\" object",
                ))
            }
        };
        let vision = match top.get("vision_config") {
            Some(Value::Object(v)) => Some(vision_facts(v)?),
            _ => {
                return Err(Error::usage(
                    "config.json (model_type gemma3) has no \"vision_config\" object",
                ))
            }
        };
        (text, vision)
    } else {
        (&top, None)
    };
    let f = Fields {
        map: fields,
        model_type: &model_type,
        defaults: if matches!(model_type.as_str(), "gemma3" | "gemma3_text") {
            &GEMMA3_TEXT_DEFAULTS
        } else {
            &[]
        },
    };
    let family = model_type.as_str();
    let hidden = f.required("hidden_size")?;
    let layers = f.required("num_hidden_layers")?;
    let heads = f.required("num_attention_heads")?;
    let kv_heads = f.optional("num_key_value_heads")?.unwrap_or(heads);
    let default_head_dim = match family {
        "gemma" | "gemma2" | "gemma3_text" | "gemma3" => Some(256),
        "qwen3" => Some(128),
        _ => None,
    };
    let head_dim = match f.optional("head_dim")? {
        Some(d) => d,
        None => match default_head_dim {
            Some(d) => d,
            None => {
                if hidden % heads != 0 {
                    return Err(Error::usage(format!(
                        "config.json: hidden_size {hidden} is not a multiple of num_attention_heads {heads} and no head_dim is given"
                    )));
                }
                hidden / heads
            }
        },
    };
    let intermediate = f.required("intermediate_size")?;
    let vocab = f.required("vocab_size")?;
    if kv_heads > heads || heads % kv_heads != 0 {
        return Err(Error::usage(format!(
            "config.json: num_key_value_heads {kv_heads} must divide num_attention_heads {heads}"
        )));
    }
    let tied_default = matches!(family, "gemma" | "gemma2" | "gemma3_text" | "gemma3");
    // A multimodal Gemma 3 states tying at the top level or in text_config.
    let tied_embeddings = match f.boolean("tie_word_embeddings")? {
        Some(b) => b,
        None => match top.get("tie_word_embeddings") {
            Some(Value::Bool(b)) => *b,
            _ => tied_default,
        },
    };
    let dtype = ["dtype", "torch_dtype"].iter().find_map(|k| {
        match fields.get(*k).or_else(|| top.get(*k)) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        }
    });
    let layer_attention = layer_attention(&f, family, layers)?;
    let experts = match family {
        "mixtral" => Some(Experts {
            routed: f.required("num_local_experts")?,
            per_token: f.required("num_experts_per_tok")?,
            intermediate,
            shared_intermediate: 0,
            dense_layers: 0,
        }),
        "deepseek_v2" | "deepseek_v3" => match f.optional("n_routed_experts")? {
            None | Some(0) => None,
            Some(routed) => {
                let moe_intermediate = f.required("moe_intermediate_size")?;
                let shared = f.optional("n_shared_experts")?.unwrap_or(0);
                let freq = f.optional("moe_layer_freq")?.unwrap_or(1);
                if freq != 1 {
                    return Err(Error::usage(format!(
                        "config.json: moe_layer_freq {freq} is not supported (only every layer after first_k_dense_replace)"
                    )));
                }
                Some(Experts {
                    routed,
                    per_token: f.required("num_experts_per_tok")?,
                    intermediate: moe_intermediate,
                    shared_intermediate: moe_intermediate.checked_mul(shared).ok_or_else(|| {
                        Error::usage(format!(
                            "config.json: moe_intermediate_size {moe_intermediate} x n_shared_experts {shared} overflows 64 bits"
                        ))
                    })?,
                    dense_layers: f
                        .optional("first_k_dense_replace")?
                        .unwrap_or(0)
                        .min(layers),
                })
            }
        },
        _ => None,
    };
    let latent = match family {
        "deepseek_v2" | "deepseek_v3" => Some(Latent {
            kv_lora_rank: f.required("kv_lora_rank")?,
            q_lora_rank: f.optional("q_lora_rank")?,
            qk_rope_head_dim: f.required("qk_rope_head_dim")?,
            qk_nope_head_dim: f.required("qk_nope_head_dim")?,
            v_head_dim: f.required("v_head_dim")?,
        }),
        _ => None,
    };
    if let Some(e) = &experts {
        if e.per_token == 0 || e.per_token > e.routed {
            return Err(Error::usage(format!(
                "config.json: num_experts_per_tok {} must be from 1 to the {} experts",
                e.per_token, e.routed
            )));
        }
    }
    Ok(Architecture {
        model_type,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        tied_embeddings,
        layer_attention,
        experts,
        latent,
        dtype,
        vision,
        quantization: match top.get("quantization_config") {
            Some(Value::Object(q)) => Some(match q.get("quant_method") {
                Some(Value::String(m)) => {
                    crate::text::one_line(&m.chars().take(40).collect::<String>())
                }
                _ => "unnamed".to_string(),
            }),
            _ => None,
        },
    })
}

/// `Gemma3TextConfig` defaults (transformers 5.x), used where a Gemma 3 config leaves a field
/// out, as transformers does: the public multimodal configs (gemma-3-4b-it...) state only a
/// few text fields.
const GEMMA3_TEXT_DEFAULTS: [(&str, u64); 8] = [
    ("vocab_size", 262_208),
    ("hidden_size", 2304),
    ("intermediate_size", 9216),
    ("num_hidden_layers", 26),
    ("num_attention_heads", 8),
    ("num_key_value_heads", 4),
    ("head_dim", 256),
    ("sliding_window", 4096),
];

/// Sliding window per layer, as `transformers` builds its cache: `layer_types` when given,
/// else the family's rule (Gemma 2: every other layer from the first; Gemma 3: five sliding
/// then one full, `sliding_window_pattern`; Qwen2/3: only with `use_sliding_window`, layers
/// from `max_window_layers` on; Mistral, Mixtral, Phi-3: every layer when `sliding_window` is
/// set).
fn layer_attention(f: &Fields, family: &str, layers: u64) -> Result<Vec<LayerAttention>> {
    let window = f.optional("sliding_window")?;
    let count = usize::try_from(layers)
        .ok()
        .filter(|n| *n as u64 <= MAX_LAYERS)
        .ok_or_else(|| {
            Error::usage(format!(
                "config.json: num_hidden_layers {layers} is not a plausible layer count"
            ))
        })?;
    if let Some(Value::Array(types)) = f.map.get("layer_types") {
        if types.len() != count {
            return Err(Error::usage(format!(
                "config.json: layer_types lists {} layers but num_hidden_layers is {layers}",
                types.len()
            )));
        }
        return types
            .iter()
            .map(|t| match (t.as_str(), window) {
                (Some("full_attention"), _) => Ok(LayerAttention::Full),
                (Some("sliding_attention"), Some(w)) => Ok(LayerAttention::Sliding(w)),
                (Some("sliding_attention"), None) => Err(Error::usage(
                    "config.json: layer_types has sliding_attention but no sliding_window",
                )),
                _ => Err(Error::usage(format!(
                    "config.json: unknown layer type {} in layer_types (known: full_attention, sliding_attention)",
                    crate::text::excerpt(&t.to_string())
                ))),
            })
            .collect();
    }
    let Some(w) = window else {
        return Ok(vec![LayerAttention::Full; count]);
    };
    let kind = |sliding: bool| {
        if sliding {
            LayerAttention::Sliding(w)
        } else {
            LayerAttention::Full
        }
    };
    Ok(match family {
        "gemma2" => (0..count).map(|i| kind((i + 1) % 2 != 0)).collect(),
        "gemma3_text" | "gemma3" => {
            let pattern = f.optional("sliding_window_pattern")?.unwrap_or(6).max(1);
            (0..count)
                .map(|i| kind(!(i as u64 + 1).is_multiple_of(pattern)))
                .collect()
        }
        "qwen2" | "qwen3" => {
            let on = f.boolean("use_sliding_window")?.unwrap_or(false);
            let from = f.optional("max_window_layers")?.unwrap_or(28);
            (0..count).map(|i| kind(on && i as u64 >= from)).collect()
        }
        "gemma" | "deepseek_v2" | "deepseek_v3" | "llama" => vec![LayerAttention::Full; count],
        _ => vec![LayerAttention::Sliding(w); count],
    })
}

fn vision_facts(v: &Map<String, Value>) -> Result<Vision> {
    let f = Fields {
        map: v,
        model_type: "gemma3 vision_config",
        defaults: &[],
    };
    // SiglipVisionConfig defaults where the public config leaves a field out.
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
    Ok(Vision {
        hidden: f.optional("hidden_size")?.unwrap_or(768),
        layers,
        intermediate: f.optional("intermediate_size")?.unwrap_or(3072),
        image_size,
        patch_size,
        channels: f.optional("num_channels")?.unwrap_or(3),
        head: f.boolean("vision_use_head")?.unwrap_or(true),
    })
}

struct Fields<'a> {
    map: &'a Map<String, Value>,
    model_type: &'a str,
    /// The configuration class's defaults for fields a config may leave out.
    defaults: &'a [(&'a str, u64)],
}

impl Fields<'_> {
    /// A whole number from 1 to 2^40, required.
    fn required(&self, key: &str) -> Result<u64> {
        self.optional(key)?.ok_or_else(|| {
            Error::usage(format!(
                "config.json (model_type {}) has no \"{key}\": it is needed to plan memory",
                self.model_type
            ))
        })
    }

    /// A whole number from 1 to 2^40 when present and not null, else the family default.
    fn optional(&self, key: &str) -> Result<Option<u64>> {
        match self.map.get(key) {
            // Absent: the class default; an explicit null stays "not set".
            None => Ok(self
                .defaults
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)),
            Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if (1..=1 << 40).contains(&v) => Ok(Some(v)),
                Some(0) if key.starts_with("first_k") || key.starts_with("n_shared") => Ok(Some(0)),
                _ => Err(self.bad(key, &n.to_string())),
            },
            Some(other) => Err(self.bad(key, &other.to_string())),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Error::usage(format!(
                "config.json: \"{key}\" must be true or false, found {}",
                crate::text::excerpt(&other.to_string())
            ))),
        }
    }

    fn bad(&self, key: &str, found: &str) -> Error {
        Error::usage(format!(
            "config.json: \"{key}\" must be a whole number from 1 to 2^40, found {}",
            crate::text::excerpt(found)
        ))
    }
}
