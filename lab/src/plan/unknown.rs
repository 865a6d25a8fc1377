//! A model whose `model_type` the family tables do not know, planned from what is certain:
//! its safetensors headers (the weights' exact bytes, as the known families count them) and,
//! when every standard field is there with its type, the KV cache of full attention. The
//! rest (the prefill workspace, training activations, the allocator's rounding) is not
//! modelled, so the memory is a lower bound: packages are "at least", never "fits".
//!
//! Standard fields (the names `transformers`' `PretrainedConfig` subclasses share):
//! `num_hidden_layers` L, `num_key_value_heads` K (absent or null: `num_attention_heads`, as
//! `LlamaConfig` defaults it), `head_dim` d (absent or null: `hidden_size /
//! num_attention_heads`), read at the top level or, when the top level has no
//! `num_hidden_layers`, under `text_config`. KV cache per token `L·2·K·d` elements. A config
//! naming anything that changes what a layer caches (a window, layer types, a latent, shared
//! KV layers, chunked attention) leaves the KV cache not modelled: full attention would then
//! overstate it, and the figure would no longer be a lower bound.

use super::memory::{normalize_dtype, training_state};
use super::packages::{self, Heads, Need};
use super::{gpu_memory, safetensors, Headers, Memory, Mode, Plan, Request, WeightsFormat};
use crate::catalog::Catalog;
use crate::{Error, Result};
use serde_json::{Map, Value};

/// Fields whose presence (not null, not false) means some layer caches less than full
/// attention would.
const CACHE_CHANGERS: [&str; 7] = [
    "sliding_window",
    "layer_types",
    "kv_lora_rank",
    "attention_chunk_size",
    "num_kv_shared_layers",
    "sliding_window_pattern",
    "cross_attention_layers",
];

/// An unknown `model_type` with safetensors headers, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The config's `model_type`, one line.
    pub model_type: String,
    /// The headers' summary.
    pub headers: safetensors::Summary,
    /// The standard attention fields, or why the KV cache is not modelled.
    pub attention: std::result::Result<Standard, String>,
    /// `quantization_config.quant_method`, when the checkpoint is pre-quantized.
    pub quantization: Option<String>,
    /// The refusal (exit 2) a reader that needs the layout gives ([`super::model::read`]).
    pub refusal: String,
}

/// The standard attention fields of a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standard {
    /// `num_hidden_layers`.
    pub layers: u64,
    /// `num_attention_heads`.
    pub heads: u64,
    /// `num_key_value_heads`, or the attention heads.
    pub kv_heads: u64,
    /// `head_dim`, or `hidden_size / num_attention_heads`.
    pub head_dim: u64,
}

impl Unknown {
    /// Reads the unknown model's facts from its parsed config and headers.
    pub fn new(config: &Value, headers: safetensors::Summary, refusal: String) -> Unknown {
        let top = config.as_object();
        let model_type = top
            .and_then(|t| t.get("model_type"))
            .and_then(Value::as_str)
            .map(|t| crate::text::one_line(&t.chars().take(64).collect::<String>()))
            .unwrap_or_default();
        let quantization = top
            .and_then(|t| t.get("quantization_config"))
            .filter(|q| !q.is_null())
            .map(|q| {
                q.get("quant_method")
                    .and_then(Value::as_str)
                    .map_or("unnamed".to_string(), |m| {
                        crate::text::one_line(&m.chars().take(40).collect::<String>())
                    })
            });
        Unknown {
            model_type,
            headers,
            attention: top.map_or(Err("config.json is not an object".into()), standard),
            quantization,
            refusal,
        }
    }

    /// How the plan shards: the standard heads, or unknown (every degree tried).
    pub fn heads(&self) -> Heads {
        match &self.attention {
            Ok(s) => Heads {
                attention: s.heads,
                key_value: s.kv_heads,
                latent: false,
            },
            Err(_) => Heads {
                attention: 0,
                key_value: 0,
                latent: false,
            },
        }
    }
}

/// The standard fields of `top` (or its `text_config`), or why they do not give the cache.
fn standard(top: &Map<String, Value>) -> std::result::Result<Standard, String> {
    let scope = match top.get("text_config") {
        Some(Value::Object(text)) if !top.contains_key("num_hidden_layers") => text,
        _ => top,
    };
    for key in CACHE_CHANGERS {
        match scope.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            Some(_) => {
                return Err(format!(
                    "config.json states \"{key}\", which changes what its layers cache"
                ))
            }
        }
    }
    let whole = |key: &str| -> std::result::Result<Option<u64>, String> {
        match scope.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=1 << 40).contains(n))
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "\"{key}\" is {}, not a whole number from 1 to 2^40",
                        crate::text::excerpt(&v.to_string())
                    )
                }),
        }
    };
    let needed = |key: &str| whole(key)?.ok_or_else(|| format!("config.json has no \"{key}\""));
    let layers = needed("num_hidden_layers")?;
    let heads = needed("num_attention_heads")?;
    let kv_heads = whole("num_key_value_heads")?.unwrap_or(heads);
    let head_dim = match whole("head_dim")? {
        Some(d) => d,
        None => {
            let hidden = needed("hidden_size")?;
            if !hidden.is_multiple_of(heads) {
                return Err(format!(
                    "hidden_size {hidden} is not a multiple of num_attention_heads {heads} and no head_dim is given"
                ));
            }
            hidden / heads
        }
    };
    if kv_heads > heads || !heads.is_multiple_of(kv_heads) {
        return Err(format!(
            "num_key_value_heads {kv_heads} does not divide num_attention_heads {heads}"
        ));
    }
    Ok(Standard {
        layers,
        heads,
        kv_heads,
        head_dim,
    })
}

/// What a plan of an unknown model leaves out, in words (the `not_modelled` list).
fn not_modelled(u: &Unknown, mode: Mode) -> Vec<String> {
    let mut out = Vec::new();
    if let (Mode::Inference, Err(why)) = (mode, &u.attention) {
        out.push(format!("KV cache ({why})"));
    }
    out.push(match mode {
        Mode::Inference => "prefill workspace (the layers' working tensors and logits)".into(),
        Mode::Training => "training activations (the layers' saved tensors and the loss)".into(),
    });
    out.push(
        "the caching allocator's rounding (the weights are counted at their stored bytes)".into(),
    );
    out
}

/// The lower-bound plan of an unknown model.
///
/// # Errors
/// [`Error::Usage`] for `--weights-dtype` or `--bits` (converting needs the layout), training
/// a pre-quantized or non-float checkpoint, a fixed degree the standard heads cannot take, a
/// size past 64 bits, and as [`packages::packages`].
#[allow(clippy::too_many_arguments)]
pub fn plan(
    u: &Unknown,
    request: &Request,
    catalog: &Catalog,
    gpu_memory: &[gpu_memory::GpuMemory],
    days: u32,
    accepted_results: Option<u64>,
    only_gpus: &[String],
) -> Result<Plan> {
    let kind = crate::text::excerpt(&u.model_type);
    if request.weights != WeightsFormat::Stored {
        return Err(Error::usage(format!(
            "model_type \"{kind}\" is not one lab plan knows: it is planned from its safetensors headers as stored, and --weights-dtype or --bits would need its layout (which tensors are matrices); leave them out"
        )));
    }
    let too_big = || {
        Error::usage("this plan's sizes overflow 64-bit byte counts: lower --batch or --context")
    };
    let h = &u.headers;
    let stored = h.main_dtype().and_then(normalize_dtype);
    let element = match stored {
        Some("fp32") => 4,
        Some("bf16" | "fp16") => 2,
        _ => 1,
    };
    if request.mode == Mode::Training && (u.quantization.is_some() || element == 1) {
        return Err(Error::usage(format!(
            "model_type \"{kind}\" is not one lab plan knows and its headers hold {} weights: training state is counted only for float checkpoints (bf16, fp16, fp32)",
            u.quantization.as_deref().map_or_else(
                || h.main_dtype().map_or("no".to_string(), crate::text::excerpt),
                crate::text::excerpt
            )
        )));
    }
    packages::check_fixed(u.heads(), &request.fixed)?;
    let (kv_element, kv_dtype): (u64, String) = match &request.kv_dtype {
        None if element == 4 => (4, "fp32".to_string()),
        None => (
            2,
            stored
                .filter(|s| matches!(*s, "bf16" | "fp16"))
                .unwrap_or("bf16")
                .to_string(),
        ),
        Some(name) => {
            let n = normalize_dtype(name)
                .filter(|n| *n != "int4")
                .ok_or_else(|| {
                    Error::usage(format!(
                        "unknown --kv-dtype '{}': use fp32, bf16, fp16, fp8 or int8",
                        crate::text::excerpt(name)
                    ))
                })?;
            (
                if n == "fp32" {
                    4
                } else if matches!(n, "bf16" | "fp16") {
                    2
                } else {
                    1
                },
                n.to_string(),
            )
        }
    };
    let per_token: u128 = match (&u.attention, request.mode) {
        (Ok(s), Mode::Inference) => {
            u128::from(s.layers)
                * 2
                * u128::from(s.kv_heads)
                * u128::from(s.head_dim)
                * u128::from(kv_element)
        }
        _ => 0,
    };
    let kv = per_token * u128::from(request.batch) * u128::from(request.context);
    let parameters = h.elements;
    let (gradients, master, optimizer) = match request.mode {
        Mode::Inference => (0u128, 0u128, 0u128),
        Mode::Training => {
            let s = training_state(element);
            let p = u128::from(parameters);
            (
                p * u128::from(s.gradients),
                p * u128::from(s.master_weights),
                p * u128::from(s.optimizer),
            )
        }
    };
    let weights = u128::from(h.data_bytes);
    let total = weights + kv + gradients + master + optimizer;
    let narrow = |v: u128| u64::try_from(v).map_err(|_| too_big());
    let memory = Memory {
        weights_bytes: h.data_bytes,
        weights_allocated_bytes: h.data_bytes,
        weights_reserved_bytes: h.data_bytes,
        kv_cache_bytes: narrow(kv)?,
        kv_cache_bytes_per_token: narrow(per_token)?,
        prefill_kv_cache_bytes: narrow(kv)?,
        activation_bytes: 0,
        gradients_bytes: narrow(gradients)?,
        master_weights_bytes: narrow(master)?,
        optimizer_bytes: narrow(optimizer)?,
        total_bytes: narrow(total)?,
        runtime_reserve_bytes_per_gpu: packages::RUNTIME_RESERVE_BYTES,
    };
    let need = Need {
        sharded: weights + gradients + master + optimizer,
        kv,
        kv_split: true,
        whole: 0,
        workspace: packages::Workspace::default(),
    };
    let mut rows = packages::packages(
        catalog,
        gpu_memory,
        u.heads(),
        &need,
        days,
        accepted_results,
        only_gpus,
        &request.fixed,
    )?;
    // A lower bound that fits is not a fit: those rows say "at least" (and keep their rank:
    // the cheapest package not ruled out first); one that does not fit is a sure "no".
    for p in &mut rows {
        if p.fits {
            p.fits = false;
            p.at_least = true;
        }
    }
    let mut notes = vec![format!(
        "model_type \"{kind}\" is not a family lab plan knows: the weights are the safetensors headers' bytes, {}; the memory below is a lower bound",
        match (&u.attention, request.mode) {
            (Ok(s), Mode::Inference) => format!(
                "the KV cache full attention on {} layers x {} KV heads x head {} (the standard fields)",
                s.layers, s.kv_heads, s.head_dim
            ),
            (Err(_), Mode::Inference) => "the KV cache not modelled".to_string(),
            (_, Mode::Training) => "the training state 16 bytes per header element (AdamW, mixed precision)".to_string(),
        }
    )];
    if let Some(q) = &u.quantization {
        notes.push(format!(
            "pre-quantized checkpoint ({}): the headers hold {} packed elements, counted as stored",
            crate::text::excerpt(q),
            h.elements
        ));
    }
    Ok(Plan {
        model: request.model.display().to_string(),
        model_type: u.model_type.clone(),
        parameters,
        parameters_from_config: None,
        parameter_breakdown: None,
        headers: Some(Headers {
            files: h.files.clone(),
            tensors: h.tensors,
            elements: h.elements,
            data_bytes: h.data_bytes,
            elements_by_dtype: h.elements_by_dtype.clone(),
        }),
        notes,
        architecture: None,
        lower_bound: true,
        not_modelled: not_modelled(u, request.mode),
        workspace_split: packages::Workspace::default(),
        mode: request.mode,
        batch: request.batch,
        context: request.context,
        weights_format: match stored {
            Some(name) => format!("{name} (as stored)"),
            None => "as stored".to_string(),
        },
        kv_dtype,
        checkpointing: request.checkpointing,
        fixed_tensor_parallel: request.fixed.tensor_parallel,
        fixed_gpus: request.fixed.gpus,
        memory,
        days,
        accepted_results,
        packages: rows,
        catalog: catalog.info(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> std::result::Result<Standard, String> {
        standard(
            serde_json::from_str::<Value>(text)
                .unwrap()
                .as_object()
                .unwrap(),
        )
    }

    #[test]
    fn the_standard_fields_give_the_cache_only_when_all_are_there_and_typed() {
        let s = read(r#"{"num_hidden_layers":4,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":64}"#).unwrap();
        assert_eq!((s.layers, s.heads, s.kv_heads, s.head_dim), (4, 8, 2, 64));
        // Defaults: key/value heads from the heads, head width from the hidden size.
        let s = read(r#"{"num_hidden_layers":4,"num_attention_heads":8,"num_key_value_heads":null,"hidden_size":512}"#).unwrap();
        assert_eq!((s.kv_heads, s.head_dim), (8, 64));
        // Under text_config when the top level has no layers.
        let s = read(
            r#"{"text_config":{"num_hidden_layers":2,"num_attention_heads":4,"hidden_size":64}}"#,
        )
        .unwrap();
        assert_eq!((s.layers, s.head_dim), (2, 16));
        for (text, why) in [
            (
                r#"{"num_attention_heads":8,"hidden_size":512}"#,
                "no \"num_hidden_layers\"",
            ),
            (
                r#"{"num_hidden_layers":4,"hidden_size":512}"#,
                "no \"num_attention_heads\"",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8}"#,
                "no \"hidden_size\"",
            ),
            (
                r#"{"num_hidden_layers":"4","num_attention_heads":8,"hidden_size":512}"#,
                "\"num_hidden_layers\" is \"4\"",
            ),
            (
                r#"{"num_hidden_layers":4.0,"num_attention_heads":8,"hidden_size":512}"#,
                "not a whole number",
            ),
            (
                r#"{"num_hidden_layers":0,"num_attention_heads":8,"hidden_size":512}"#,
                "not a whole number",
            ),
            (
                r#"{"num_hidden_layers":-1,"num_attention_heads":8,"hidden_size":512}"#,
                "not a whole number",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8,"hidden_size":500}"#,
                "not a multiple",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8,"num_key_value_heads":3,"head_dim":8}"#,
                "does not divide",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8,"head_dim":true}"#,
                "\"head_dim\" is true",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8,"hidden_size":512,"sliding_window":4096}"#,
                "\"sliding_window\"",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8,"hidden_size":512,"kv_lora_rank":512}"#,
                "\"kv_lora_rank\"",
            ),
            (
                r#"{"num_hidden_layers":4,"num_attention_heads":8,"hidden_size":512,"layer_types":[]}"#,
                "\"layer_types\"",
            ),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        // A window stated as null or false changes nothing.
        assert!(read(r#"{"num_hidden_layers":4,"num_attention_heads":8,"hidden_size":512,"sliding_window":null,"layer_types":null}"#).is_ok());
    }
}
