//! Model families: each family file reads its `config.json` (its configuration class's
//! fields and defaults, `transformers` 5.x) into an [`Architecture`] and lists one decoder
//! layer's tensors in the order `transformers` materialises them; this file holds the
//! [`Family`] list, the architecture types, the reading every family shares and the tensor
//! blocks the families compose.
//!
//! An architecture is a list of layers, each with its own attention ([`Attention`]: full,
//! sliding window, latent) and feed-forward ([`FeedForward`]: dense or experts), so any
//! per-layer pattern a config states can be expressed. Sources: the `configuration_*.py`
//! and `modeling_*.py` files of each family in `transformers` 5.17; the tensor lists are
//! checked tensor by tensor against `scripts/module_order.py`'s dumps
//! (`lab/tests/data/module-order/`), the totals against the public parameter counts of the
//! shipped configs (`examples/models/`).

mod cohere;
mod deepseek;
mod gemma;
mod gemma2;
mod gemma3;
mod glm4_moe;
mod gpt_oss;
mod granite;
mod llama;
mod llama4;
mod mistral;
mod mistral3;
mod mixtral;
mod olmo2;
mod phi3;
mod phimoe;
mod qwen2;
mod qwen2_moe;
mod qwen3;
mod qwen3_moe;

use super::config::{Fields, MAX_LAYERS};
use super::layout::{Counts128, ParameterCounts, Role, Sink, Tensor};
use crate::{Error, Result};
use serde_json::{Map, Value};

/// Declares [`Family`]: one line per `model_type`, naming the file that knows it.
macro_rules! families {
    ($($variant:ident => $file:ident, $model_type:literal;)*) => {
        /// The model families `lab plan` knows, one per `model_type`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Family {
            $(
                #[doc = concat!("`model_type` \"", $model_type, "\".")]
                $variant,
            )*
        }

        impl Family {
            /// Every family, in the order the supported list is shown.
            pub const ALL: &'static [Family] = &[$(Family::$variant),*];

            /// The `model_type` of this family's `config.json`.
            pub fn model_type(self) -> &'static str {
                match self {
                    $(Family::$variant => $model_type,)*
                }
            }

            fn architecture(self, top: &Map<String, Value>) -> Result<Architecture> {
                match self {
                    $(Family::$variant => $file::architecture(self, top),)*
                }
            }

            fn layer(self, arch: &Architecture, layer: &Layer, t: &mut Sink) {
                match self {
                    $(Family::$variant => $file::layer(arch, layer, t),)*
                }
            }
        }
    };
}

families! {
    Llama => llama, "llama";
    Mistral => mistral, "mistral";
    Qwen2 => qwen2, "qwen2";
    Qwen3 => qwen3, "qwen3";
    Gemma => gemma, "gemma";
    Gemma2 => gemma2, "gemma2";
    Gemma3Text => gemma3, "gemma3_text";
    Gemma3 => gemma3, "gemma3";
    Phi3 => phi3, "phi3";
    Mixtral => mixtral, "mixtral";
    DeepseekV2 => deepseek, "deepseek_v2";
    DeepseekV3 => deepseek, "deepseek_v3";
    Qwen3Moe => qwen3_moe, "qwen3_moe";
    Qwen2Moe => qwen2_moe, "qwen2_moe";
    Granite => granite, "granite";
    Olmo2 => olmo2, "olmo2";
    GptOss => gpt_oss, "gpt_oss";
    Llama4Text => llama4, "llama4_text";
    Llama4 => llama4, "llama4";
    Cohere => cohere, "cohere";
    Cohere2 => cohere, "cohere2";
    Phimoe => phimoe, "phimoe";
    Glm4Moe => glm4_moe, "glm4_moe";
    Mistral3 => mistral3, "mistral3";
}

impl Family {
    /// The family of a `model_type`, when `lab plan` knows it.
    pub fn from_model_type(model_type: &str) -> Option<Family> {
        Family::ALL
            .iter()
            .copied()
            .find(|f| f.model_type() == model_type)
    }

    /// The supported `model_type`s, comma-separated, for messages and documentation.
    pub fn supported() -> String {
        Family::ALL
            .iter()
            .map(|f| f.model_type())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The attention of one decoder layer, as the KV cache sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// Every token of the context is kept, `2 K d` elements per token.
    Full,
    /// At most this many tokens are kept (sliding-window attention).
    Sliding(u64),
    /// Chunked attention (Llama 4's `attention_chunk_size`): each token attends within its
    /// chunk, and transformers caches such a layer as a sliding window of the chunk's size
    /// (`DynamicSlidingWindowLayer` for `chunked_attention`, `cache_utils.py`), so at most this
    /// many tokens are kept.
    Chunked(u64),
    /// Multi-head latent attention: every token kept as one compressed latent plus its
    /// rotary key, `kv_lora_rank + qk_rope_head_dim` elements ([`Latent`]).
    Latent,
}

/// The feed-forward of one decoder layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedForward {
    /// The gated MLP of width [`Architecture::intermediate`].
    Dense,
    /// The mixture of experts of [`Architecture::experts`].
    Experts,
}

/// One decoder layer's kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layer {
    /// Its attention.
    pub attention: Attention,
    /// Its feed-forward.
    pub feed_forward: FeedForward,
}

/// Mixture-of-experts feed-forward facts (layers whose [`FeedForward`] is `Experts`).
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

/// Llama 4's vision tower (`Llama4VisionConfig`, `Llama4VisionModel`) and its projector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Llama4Vision {
    /// Width of the vision encoder.
    pub hidden: u64,
    /// Vision encoder layers.
    pub layers: u64,
    /// Attention heads of the encoder (they size the 2-D rotary table `freqs_ci`).
    pub heads: u64,
    /// Encoder feed-forward intermediate size (also the pixel-shuffle adapter's input).
    pub intermediate: u64,
    /// Input image side in pixels.
    pub image_size: u64,
    /// Patch side in pixels.
    pub patch_size: u64,
    /// Colour channels.
    pub channels: u64,
    /// The adapter's output width (`projector_input_dim`).
    pub projector_input: u64,
    /// The adapter's second projection width (`projector_output_dim`).
    pub projector_output: u64,
    /// The projector's input width (`vision_output_dim`).
    pub output: u64,
}

/// The vision tower of a multimodal checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tower {
    /// SigLIP and the Gemma 3 projector.
    Siglip(Vision),
    /// Llama 4's tower and projector.
    Llama4(Llama4Vision),
    /// Pixtral and the Mistral 3 projector ([`Pixtral`]).
    Pixtral(Pixtral),
}

/// Pixtral vision tower facts (Mistral 3 multimodal checkpoints: Mistral-Small-3.x,
/// Ministral 3), with the Mistral 3 projector's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pixtral {
    /// Width of the vision encoder.
    pub hidden: u64,
    /// Vision encoder layers.
    pub layers: u64,
    /// Vision feed-forward intermediate size.
    pub intermediate: u64,
    /// Width of one vision attention head (its rotary frequencies are half of it).
    pub head_dim: u64,
    /// Patch side in pixels.
    pub patch_size: u64,
    /// Colour channels.
    pub channels: u64,
    /// `spatial_merge_size`: the projector merges `m x m` patches into one token.
    pub merge: u64,
    /// Encoder layers whose features the projector concatenates (`vision_feature_layer`).
    pub feature_layers: u64,
    /// `multimodal_projector_bias`: biases on the projector's two linears.
    pub projector_bias: bool,
}

/// The architecture facts of one model (its text decoder, and a vision tower if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Architecture {
    /// The family (its `model_type`).
    pub family: Family,
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
    /// Biases on the attention projections, as the family's modeling file builds them
    /// (`attention_bias` where it reads that field).
    pub attention_bias: bool,
    /// Biases on the feed-forward projections (`mlp_bias` where the modeling file reads it).
    pub mlp_bias: bool,
    /// Each decoder layer's attention and feed-forward, `layers` of them.
    pub layer_kinds: Vec<Layer>,
    /// Mixture of experts, when some layer's feed-forward is one.
    pub experts: Option<Experts>,
    /// Multi-head latent attention, when the layers use it.
    pub latent: Option<Latent>,
    /// RMSNorms of width `hidden` per decoder layer (2; 4 in Gemma 2 and 3).
    pub norms_per_layer: u64,
    /// Whether queries and keys have their own `head_dim`-wide RMSNorm (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// Whether gate and up are one fused matrix whose output stays alive (Phi-3).
    pub fused_gate_up: bool,
    /// Whether the model keeps the embedding scale as a buffer (Gemma).
    pub embedding_scale: bool,
    /// Whether the rotary frequencies are kept once per attention kind the layers use
    /// (Gemma 3: full and sliding) rather than once.
    pub rotary_per_attention_kind: bool,
    /// Multi-token-prediction layers the checkpoint stores after the decoder layers
    /// (DeepSeek-V3's `num_nextn_predict_layers`), which transformers does not build.
    pub mtp_layers: u64,
    /// The configured storage dtype (`dtype` or `torch_dtype`), when stated.
    pub dtype: Option<String>,
    /// Vision tower of a multimodal checkpoint (Gemma 3's SigLIP, Llama 4's, Mistral 3's
    /// Pixtral).
    pub vision: Option<Tower>,
    /// Rotated width of each head when only part of it is rotary (GLM-4.5's
    /// `partial_rotary_factor`); `None`: the whole head (or latent attention's rope width).
    pub rotary_width: Option<u64>,
    /// Whether the `hidden`-wide norms (each layer's and the final one) are LayerNorms with
    /// a bias beside their weight (Phi-3.5-MoE) rather than weight-only norms.
    pub norm_bias: bool,
    /// Whether the output head has a bias of `vocab` elements (Phi-3.5-MoE's `lm_head_bias`).
    pub head_bias: bool,
    /// `quantization_config.quant_method` of a pre-quantized checkpoint (GPTQ, AWQ...), whose
    /// safetensors hold packed storage rather than one element per parameter.
    pub quantization: Option<String>,
}

impl Architecture {
    /// The `model_type` of the config.
    pub fn model_type(&self) -> &'static str {
        self.family.model_type()
    }

    /// Calls `visit` for every tensor of the model in materialisation order: the vision tower
    /// (if any), the embedding, each layer (its family's list), the final norm, the rotary
    /// buffers, the untied output head.
    pub fn tensors(&self, visit: &mut dyn FnMut(Tensor)) {
        let mut t = Sink::new(visit);
        match &self.vision {
            Some(Tower::Siglip(vision)) => gemma3::vision_tower(vision, self.hidden, &mut t),
            Some(Tower::Llama4(vision)) => llama4::vision_tower(vision, self.hidden, &mut t),
            Some(Tower::Pixtral(vision)) => mistral3::vision_tower(vision, self.hidden, &mut t),
            None => {}
        }
        t.emit(Role::Embedding, &[self.vocab, self.hidden]);
        if self.embedding_scale {
            // One element in the model's width; its 512-byte block is the same at any
            // width, so it is counted at 16 bits.
            t.buffer(2, &[1]);
        }
        for layer in &self.layer_kinds {
            self.family.layer(self, layer, &mut t);
        }
        t.other(&[self.hidden]);
        if self.norm_bias {
            t.other(&[self.hidden]);
        }
        // Rotary frequencies, fp32: `inv_freq` and `original_inv_freq`, once, or once per
        // attention kind the layers use.
        let rotated = self
            .rotary_width
            .unwrap_or(self.latent.map_or(self.head_dim, |l| l.qk_rope_head_dim));
        let rotary = rotated / 2;
        let pairs = if self.rotary_per_attention_kind {
            let sliding = self.sliding_layers();
            usize::from(sliding > 0) + usize::from(sliding < self.layer_kinds.len())
        } else {
            1
        };
        for _ in 0..2 * pairs {
            t.buffer(4, &[rotary]);
        }
        if !self.tied_embeddings {
            t.emit(Role::OutputHead, &[self.hidden, self.vocab]);
        }
        if self.head_bias {
            t.other(&[self.vocab]);
        }
    }

    /// Elements of the multi-token-prediction layers ([`Architecture::mtp_layers`]) a
    /// DeepSeek-V3 checkpoint stores as `model.layers.{num_hidden_layers}.*`: each a decoder
    /// layer with experts plus its own `embed_tokens` and `shared_head.head` (`V x H`),
    /// `eh_proj` (`H x 2H`), `enorm`, `hnorm` and `shared_head.norm` (`H` each). transformers
    /// 5.17 builds none of them: they are unexpected keys, dropped on load
    /// (`DeepseekV3PreTrainedModel._keys_to_ignore_on_load_unexpected`).
    pub fn mtp_elements(&self) -> u128 {
        if self.mtp_layers == 0 {
            return 0;
        }
        let one = ParameterCounts::of(|visit| {
            let mut t = Sink::new(visit);
            let layer = Layer {
                attention: Attention::Latent,
                feed_forward: FeedForward::Experts,
            };
            self.family.layer(self, &layer, &mut t);
        });
        let (v, h) = (u128::from(self.vocab), u128::from(self.hidden));
        let layer = one.embedding + one.output_head + one.linear + one.other + one.vision;
        u128::from(self.mtp_layers) * (layer + 2 * v * h + 2 * h * h + 3 * h)
    }

    /// The parameters by role: the sums over [`Architecture::tensors`].
    pub fn parameter_counts(&self) -> Counts128 {
        ParameterCounts::of(|visit| self.tensors(visit))
    }

    /// Layers with a sliding window.
    pub fn sliding_layers(&self) -> usize {
        self.layer_kinds
            .iter()
            .filter(|l| matches!(l.attention, Attention::Sliding(_)))
            .count()
    }

    /// The window, when some layer has one.
    pub fn sliding_window(&self) -> Option<u64> {
        self.layer_kinds.iter().find_map(|l| match l.attention {
            Attention::Sliding(w) => Some(w),
            Attention::Full | Attention::Chunked(_) | Attention::Latent => None,
        })
    }

    /// Layers with chunked attention.
    /// Layers whose feed-forward is the dense MLP of width [`Architecture::intermediate`].
    pub fn dense_layers(&self) -> usize {
        self.layer_kinds
            .iter()
            .filter(|l| l.feed_forward == FeedForward::Dense)
            .count()
    }

    pub fn chunked_layers(&self) -> usize {
        self.layer_kinds
            .iter()
            .filter(|l| matches!(l.attention, Attention::Chunked(_)))
            .count()
    }

    /// The attention chunk, when some layer has one.
    pub fn attention_chunk(&self) -> Option<u64> {
        self.layer_kinds.iter().find_map(|l| match l.attention {
            Attention::Chunked(w) => Some(w),
            _ => None,
        })
    }
}

/// Reads the architecture from a parsed `config.json`.
///
/// # Errors
/// [`Error::Usage`] for a value that is not a JSON object, an unknown or missing
/// `model_type` (the message lists the supported ones), a missing or non-integer required
/// field (named), or inconsistent values (heads not dividing the width, zero layers...).
pub fn read(config: &Value) -> Result<Architecture> {
    let Value::Object(top) = config else {
        return Err(Error::usage("config.json must hold one JSON object"));
    };
    let model_type = match top.get("model_type") {
        Some(Value::String(s)) => s,
        Some(other) if !other.is_null() => {
            return Err(Error::usage(format!(
                "config.json: \"model_type\" must be a string such as \"llama\", found {}",
                crate::text::excerpt(&other.to_string())
            )))
        }
        _ => {
            return Err(Error::usage(format!(
                "config.json has no \"model_type\": cannot tell the architecture (supported: {})",
                Family::supported()
            )))
        }
    };
    let family = Family::from_model_type(model_type).ok_or_else(|| {
        Error::usage(format!(
            "unknown model_type \"{}\": lab plan knows {} (it does not guess the layout of other architectures)",
            crate::text::excerpt(model_type),
            Family::supported()
        ))
    })?;
    consistent_architectures(family, top)?;
    family.architecture(top)
}

/// Refuses a config whose `architectures` names only classes of another family than its
/// `model_type` (`LlamaForCausalLM` under `qwen2`, say). transformers builds by `model_type`
/// and ignores the list, so such a file says two things and a plan would answer one of them
/// silently. A class is matched by its name before `For` or `Model`, letters and digits only,
/// against the `model_type` without `_` and without a `_text` suffix
/// (`PhiMoEForCausalLM` is `phimoe`, `DeepseekV3ForCausalLM` `deepseek_v3`); an absent,
/// null or empty list says nothing.
///
/// # Errors
/// [`Error::Usage`] naming both fields when no class listed is of the family, or when the
/// list is not a list of names.
fn consistent_architectures(family: Family, top: &Map<String, Value>) -> Result<()> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let want = squash(family.model_type().trim_end_matches("_text"));
    let list = match top.get("architectures") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(Error::usage(format!(
                "config.json: \"architectures\" must be a list of class names, found {}",
                crate::text::excerpt(&other.to_string())
            )))
        }
    };
    let mut names = Vec::new();
    for item in list {
        let Value::String(name) = item else {
            return Err(Error::usage(format!(
                "config.json: \"architectures\" must be a list of class names, found {}",
                crate::text::excerpt(&item.to_string())
            )));
        };
        let stem = ["For", "Model"]
            .iter()
            .filter_map(|cut| name.find(cut))
            .min()
            .map_or(name.as_str(), |at| &name[..at]);
        if squash(stem) == want {
            return Ok(());
        }
        names.push(name.as_str());
    }
    if names.is_empty() {
        return Ok(());
    }
    Err(Error::usage(format!(
        "config.json: \"architectures\" lists {} but \"model_type\" is {}: the file describes two models; fix one of them (transformers would build the {} one)",
        crate::text::excerpt(&names.join(", ")),
        family.model_type(),
        family.model_type()
    )))
}

/// What a family's configuration class defaults for the fields every decoder reads.
struct ClassDefaults {
    /// `head_dim` when absent (`None`: `hidden_size / num_attention_heads`).
    head_dim: Option<u64>,
    /// `tie_word_embeddings` when absent.
    tied: bool,
    /// Whether `num_key_value_heads` may be null (the class's type is `int | None`, and
    /// null means the attention heads); when not, the class refuses null, and so does lab.
    kv_nullable: bool,
    /// Whether `head_dim` may be null (then `hidden_size / num_attention_heads`): true where
    /// the class and its attention accept it (Llama, Mistral, Mixtral, DeepSeek);
    /// elsewhere transformers refuses a null width, and so does lab.
    head_dim_nullable: bool,
    /// Whether the modeling file builds its attention biases from `attention_bias` (else it
    /// never reads the field, so lab does not either: Mistral, Mixtral, Phi-3 build none,
    /// Qwen2 always three).
    attention_bias: bool,
    /// Whether the modeling file builds MLP biases from `mlp_bias` (Llama, Granite,
    /// DeepSeek-V2); every other family's MLP is bias-free whatever the config says.
    mlp_bias: bool,
}

/// The fields every decoder family reads, with its class defaults; `top` is the config's
/// top level (where a multimodal config states tying, dtype and quantization). Every layer
/// starts full attention and dense; the family then sets its own pattern and flags.
fn decoder(
    family: Family,
    f: &Fields,
    top: &Map<String, Value>,
    defaults: ClassDefaults,
) -> Result<Architecture> {
    let hidden = f.required("hidden_size")?;
    let layers = f.required("num_hidden_layers")?;
    let heads = f.required("num_attention_heads")?;
    if !defaults.kv_nullable && f.get("num_key_value_heads") == Some(&Value::Null) {
        return Err(Error::usage(format!(
            "config.json (model_type {}): \"num_key_value_heads\" is null, which its configuration class refuses; give the number, or leave it out for the class default",
            family.model_type()
        )));
    }
    let kv_heads = f.optional("num_key_value_heads")?.unwrap_or(heads);
    if !defaults.head_dim_nullable && f.get("head_dim") == Some(&Value::Null) {
        return Err(Error::usage(format!(
            "config.json (model_type {}): \"head_dim\" is null, which its configuration class cannot build; give the width, or leave it out for the class default",
            family.model_type()
        )));
    }
    listed_layer_types(f, layers)?;
    let head_dim = match f.optional("head_dim")?.or(defaults.head_dim) {
        Some(d) => d,
        None => {
            if hidden % heads != 0 {
                return Err(Error::usage(format!(
                    "config.json: hidden_size {hidden} is not a multiple of num_attention_heads {heads} and no head_dim is given"
                )));
            }
            hidden / heads
        }
    };
    let intermediate = f.required("intermediate_size")?;
    let vocab = f.required("vocab_size")?;
    if kv_heads > heads || heads % kv_heads != 0 {
        return Err(Error::usage(format!(
            "config.json: num_key_value_heads {kv_heads} must divide num_attention_heads {heads}"
        )));
    }
    // A multimodal Gemma 3 states tying, the dtype and quantization at the top level or in
    // text_config: both are read with the same types.
    let outer = Fields::new(top, f.label());
    let tied_embeddings = match f.boolean("tie_word_embeddings")? {
        Some(b) => b,
        None => outer
            .boolean("tie_word_embeddings")?
            .unwrap_or(defaults.tied),
    };
    let mut dtype = None;
    for key in ["dtype", "torch_dtype"] {
        let stated = match f.string(key)? {
            Some(s) => Some(s),
            None => outer.string(key)?,
        };
        dtype = dtype.or(stated);
    }
    let read_bias =
        |key, read: bool| -> Result<bool> { Ok(read && f.boolean(key)?.unwrap_or(false)) };
    let attention_bias = read_bias("attention_bias", defaults.attention_bias)?;
    let mlp_bias = read_bias("mlp_bias", defaults.mlp_bias)?;
    let quantization = quantization(top)?;
    Ok(Architecture {
        family,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        tied_embeddings,
        attention_bias,
        mlp_bias,
        layer_kinds: Vec::new(),
        experts: None,
        latent: None,
        norms_per_layer: 2,
        qk_norm: false,
        fused_gate_up: false,
        embedding_scale: false,
        rotary_per_attention_kind: false,
        mtp_layers: 0,
        dtype,
        vision: None,
        quantization,
        rotary_width: None,
        norm_bias: false,
        head_bias: false,
    })
}

/// `quantization_config.quant_method` of a pre-quantized checkpoint ("unnamed" when the
/// object names none); `None` without a `quantization_config`.
///
/// # Errors
/// [`Error::Usage`] when `quantization_config` is not an object or its `quant_method` not
/// a string (transformers reads both so).
fn quantization(top: &Map<String, Value>) -> Result<Option<String>> {
    mlx_packing(top)?;
    match top.get("quantization_config") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(q)) => match q.get("quant_method") {
            None | Some(Value::Null) => Ok(Some("unnamed".to_string())),
            Some(Value::String(m)) => Ok(Some(crate::text::one_line(
                &m.chars().take(40).collect::<String>(),
            ))),
            Some(other) => Err(Error::usage(format!(
                "config.json: \"quant_method\" in quantization_config must be a name such as \"gptq\", found {}",
                crate::text::excerpt(&other.to_string())
            ))),
        },
        Some(other) => Err(Error::usage(format!(
            "config.json: \"quantization_config\" must be an object naming its quant_method, found {}",
            crate::text::excerpt(&other.to_string())
        ))),
    }
}

/// Refuses an MLX checkpoint (mlx-lm): a top-level `quantization` object with `bits` and
/// `group_size`, which mlx-lm writes (also copied into a `quantization_config` with no
/// `quant_method`). Its matrices are packed 32 / bits to a uint32 with a 16-bit scale and
/// bias per group (`mlx.core.quantize`), a layout transformers does not load: its
/// `quantization_config` needs a `quant_method` (`AutoQuantizationConfig.from_dict`) and
/// without one the packed tensors do not match the model's shapes.
///
/// # Errors
/// [`Error::Usage`] naming the format and the width to plan it with (`bits + 32/group`).
fn mlx_packing(top: &Map<String, Value>) -> Result<()> {
    let stated = top
        .get("quantization_config")
        .and_then(|c| c.get("quant_method"))
        .is_some();
    let q = match top.get("quantization") {
        None | Some(Value::Null) => return Ok(()),
        Some(_) if stated => return Ok(()),
        Some(q) => q,
    };
    let mlx_shaped = ["bits", "group_size"]
        .iter()
        .any(|k| q.get(*k).is_some_and(|v| !v.is_null()));
    if !mlx_shaped {
        // Not a packing: transformers ignores a key it does not know.
        return Ok(());
    }
    let named = |k: &str| q.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
    let (Some(bits), Some(group)) = (named("bits"), named("group_size")) else {
        // A packing mlx-lm cannot write (a zero, a text, one of the two missing): refused by
        // name rather than planned as if the weights were not quantized.
        return Err(Error::usage(format!(
            "config.json: \"quantization\" (mlx-lm's packing) must be an object with whole numbers \"bits\" and \"group_size\" from 1 up, found {}; plan the original (unquantized) checkpoint's config",
            crate::text::excerpt(&q.to_string())
        )));
    };
    let width = rust_decimal::Decimal::from(bits)
        + rust_decimal::Decimal::from(32) / rust_decimal::Decimal::from(group);
    Err(Error::usage(format!(
        "config.json describes an MLX checkpoint (mlx-lm \"quantization\": {bits} bits, groups of {group}; no quant_method), packed as uint32 words with a 16-bit scale and bias per group, which transformers does not load; plan the original (unquantized) checkpoint's config, with --bits {} for this packing's matrix width",
        width.normalize()
    )))
}

/// The number of layers as a length, refusing an implausible count ([`MAX_LAYERS`]).
fn layer_count(layers: u64) -> Result<usize> {
    usize::try_from(layers)
        .ok()
        .filter(|n| *n as u64 <= MAX_LAYERS)
        .ok_or_else(|| {
            Error::usage(format!(
                "config.json: num_hidden_layers {layers} is not a plausible layer count"
            ))
        })
}

/// Each layer's attention as `transformers` builds its cache: `layer_types` when the config
/// lists them, else the family's `rule(window, layers)` when a `sliding_window` is set, else
/// full attention everywhere.
fn attention_pattern(
    f: &Fields,
    layers: u64,
    rule: impl FnOnce(u64, usize) -> Result<Vec<Attention>>,
) -> Result<Vec<Attention>> {
    let window = f.optional("sliding_window")?;
    let count = layer_count(layers)?;
    let listed = match f.get("layer_types") {
        None | Some(Value::Null) => None,
        Some(Value::Array(types)) => Some(types),
        Some(other) => {
            return Err(Error::usage(format!(
                "config.json: \"layer_types\" must be a list with one of full_attention, sliding_attention per layer, found {}",
                crate::text::excerpt(&other.to_string())
            )))
        }
    };
    if let Some(types) = listed {
        if types.len() != count {
            return Err(Error::usage(format!(
                "config.json: layer_types lists {} layers but num_hidden_layers is {layers}",
                types.len()
            )));
        }
        return types
            .iter()
            .map(|t| match (t.as_str(), window) {
                (Some("full_attention"), _) => Ok(Attention::Full),
                (Some("sliding_attention"), Some(w)) => Ok(Attention::Sliding(w)),
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
    match window {
        Some(w) => rule(w, count),
        None => Ok(vec![Attention::Full; count]),
    }
}

/// `layer_types`, when listed, as every configuration class validates it (transformers 5.17
/// `PreTrainedConfig`: one known type per layer), for the families that then ignore it too.
/// `chunked_attention` passes here (Llama 4 lists it); a family whose own reading of the
/// list does not know it refuses it by name there.
fn listed_layer_types(f: &Fields, layers: u64) -> Result<()> {
    let bad = |found: &Value| {
        Error::usage(format!(
            "config.json: \"layer_types\" must list one of full_attention, sliding_attention, chunked_attention for each of the {layers} layers, found {}",
            crate::text::excerpt(&found.to_string())
        ))
    };
    match f.get("layer_types") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(types)) => {
            let known = types.iter().all(|t| {
                matches!(
                    t.as_str(),
                    Some("full_attention" | "sliding_attention" | "chunked_attention")
                )
            });
            if types.len() as u64 == layers && known {
                Ok(())
            } else {
                Err(bad(&Value::Array(types.clone())))
            }
        }
        Some(other) => Err(bad(other)),
    }
}

/// Sliding on the layers where `sliding(i)` holds, full elsewhere.
fn slide_where(w: u64, count: usize, sliding: impl Fn(usize) -> bool) -> Vec<Attention> {
    (0..count)
        .map(|i| {
            if sliding(i) {
                Attention::Sliding(w)
            } else {
                Attention::Full
            }
        })
        .collect()
}

/// Dense layers with these attentions.
fn dense(attention: Vec<Attention>) -> Vec<Layer> {
    attention
        .into_iter()
        .map(|attention| Layer {
            attention,
            feed_forward: FeedForward::Dense,
        })
        .collect()
}

/// The attention of Qwen2 and Qwen3 (`Qwen2Config` / `Qwen3Config.__post_init__`,
/// transformers 5.17): sliding from `max_window_layers` on (or where `layer_types` says),
/// and only with `use_sliding_window`; without it the class clears the window, so every layer
/// attends in full even where `layer_types` says sliding_attention.
fn qwen_attention(f: &Fields, layers: u64) -> Result<Vec<Attention>> {
    let on = f.boolean("use_sliding_window")?.unwrap_or(false);
    let pattern = attention_pattern(f, layers, |w, count| {
        let from = f.required("max_window_layers")?;
        Ok(slide_where(w, count, |i| i as u64 >= from))
    })?;
    Ok(if on {
        pattern
    } else {
        vec![Attention::Full; pattern.len()]
    })
}

/// Layers of the Qwen mixtures of experts (`decoder_sparse_step`, `mlp_only_layers`, as
/// `Qwen2MoeDecoderLayer` / `Qwen3MoeDecoderLayer` choose): experts on layer `i` when it is
/// not listed in `mlp_only_layers` and `(i + 1)` is a multiple of the step, dense otherwise.
fn sparse_step_layers(f: &Fields, attention: Vec<Attention>, layers: u64) -> Result<Vec<Layer>> {
    let step = f.required("decoder_sparse_step")?;
    let dense_only = f
        .layer_indices("mlp_only_layers", layers)?
        .unwrap_or_default();
    Ok(attention
        .into_iter()
        .enumerate()
        .map(|(i, attention)| {
            let i = i as u64;
            let moe = !dense_only.contains(&i) && (i + 1).is_multiple_of(step);
            Layer {
                attention,
                feed_forward: if moe {
                    FeedForward::Experts
                } else {
                    FeedForward::Dense
                },
            }
        })
        .collect())
}

/// Refuses experts per token outside 1..=routed.
fn check_experts(e: &Experts) -> Result<()> {
    if e.per_token == 0 || e.per_token > e.routed {
        return Err(Error::usage(format!(
            "config.json: num_experts_per_tok {} must be from 1 to the {} experts",
            e.per_token, e.routed
        )));
    }
    Ok(())
}

// Shared tensor blocks, in the order their modules assign them.

/// Separate query, key and value projections, then the output projection: `H x A d`,
/// `H x K d` twice, `A d x H`; a bias after each of q, k, v when `qkv_bias`, after the output
/// when `o_bias`.
fn attention(arch: &Architecture, qkv_bias: bool, o_bias: bool, t: &mut Sink) {
    let (h, d) = (arch.hidden, arch.head_dim);
    for heads in [arch.heads, arch.kv_heads, arch.kv_heads] {
        t.linear(&[heads.saturating_mul(d), h]);
        if qkv_bias {
            t.other(&[heads.saturating_mul(d)]);
        }
    }
    t.linear(&[h, arch.heads.saturating_mul(d)]);
    if o_bias {
        t.other(&[h]);
    }
}

/// The `head_dim`-wide RMSNorms on queries and on keys (Qwen3, Gemma 3).
fn qk_norms(arch: &Architecture, t: &mut Sink) {
    t.other(&[arch.head_dim]);
    t.other(&[arch.head_dim]);
}

/// The gated MLP of width `i`: gate `I x H`, up `I x H`, down `H x I`, each with its bias
/// when `bias`.
fn gated_mlp(arch: &Architecture, i: u64, bias: bool, t: &mut Sink) {
    let h = arch.hidden;
    for (rows, cols) in [(i, h), (i, h), (h, i)] {
        t.linear(&[rows, cols]);
        if bias {
            t.other(&[rows]);
        }
    }
}

/// Experts stored as two stacked tensors: gate and up `E x 2I x H`, down `E x H x I`.
fn stacked_experts(arch: &Architecture, e: &Experts, t: &mut Sink) {
    t.linear(&[e.routed, e.intermediate.saturating_mul(2), arch.hidden]);
    t.linear(&[e.routed, arch.hidden, e.intermediate]);
}

/// The layer's norms ([`Architecture::norms_per_layer`]), each a weight and, with
/// [`Architecture::norm_bias`], its bias.
fn layer_norms(arch: &Architecture, t: &mut Sink) {
    for _ in 0..arch.norms_per_layer {
        t.other(&[arch.hidden]);
        if arch.norm_bias {
            t.other(&[arch.hidden]);
        }
    }
}

#[cfg(test)]
mod tests;
