//! Whether the safetensors headers of a pre-quantized checkpoint (`quantization_config` in
//! config.json) can hold the model its config describes: the least number of bytes the
//! format's packing needs for that many parameters, which headers holding fewer bytes cannot
//! be (a missing shard, an interrupted download, a header of one tensor).
//!
//! The bound per matrix weight comes from how each library lays out a quantized `Linear` of
//! `K` inputs and `N` outputs with `b` bits and groups of `g` inputs (its smallest stored
//! tensors only; anything else a checkpoint stores adds bytes):
//!
//! - `gptq` (AutoGPTQ/GPTQModel `QuantLinear`, which transformers loads): `qweight` int32
//!   `[K·b/32, N]`, `scales` fp16 `[⌈K/g⌉, N]`, `qzeros` int32 `[⌈K/g⌉, N·b/32]`, so
//!   `b + (16 + b)/g` bits per weight; without a stated `group_size` only `b`. `bits` not a
//!   whole number from 2 to 8: 2, the smallest GPTQ packs.
//! - `awq` (AutoAWQ `WQLinear_GEMM`): `qweight` int32 `[K, N·b/32]`, `qzeros` int32
//!   `[K/g, N·b/32]`, `scales` fp16 `[K/g, N]`: the same `b + (16 + b)/g` (`bits` or `w_bit`,
//!   `group_size` or `q_group_size`; AWQ packs 4 bits when none is stated).
//! - `bitsandbytes` (`Params4bit`, `quantize_4bit`, blocks of 64): `load_in_4bit` packs two
//!   weights a byte plus one absmax a block, an 8-bit code with double quantization or a
//!   float32 without: 4 + 8/64 or 4 + 32/64 bits; `load_in_8bit` one int8 per weight, 8.
//! - `fp8` (transformers `FineGrainedFP8Config`, blocks of 128 × 128), `fbgemm_fp8`: one
//!   float8 per weight plus float32 scales, 8.
//! - `mxfp4` (OCP Microscaling: 4-bit elements, one 8-bit scale per 32), 4 + 8/32.
//! - `compressed-tensors`: the smallest `num_bits` of its `config_groups` weights.
//! - any other method: 1 bit per weight, below every format transformers loads.
//!
//! Embeddings stay in 16 bits (every method above replaces `nn.Linear` only); norms and
//! biases too; the output head and a vision tower at the matrix width (some quantize them).

use super::family::{Architecture, FeedForward};
use super::layout::{ParameterCounts, Role, Tensor};
use super::safetensors::Summary;
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde_json::Value;

/// What the bound assumes of a `quantization_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheme {
    /// `quant_method` as written (escaped when shown).
    pub method: String,
    /// Least bits a matrix weight takes in this format, scales included.
    pub matrix_bits: Decimal,
    /// How the width was found, for the refusal (`4 bits, groups of 128`).
    pub reading: String,
}

/// A whole number field of `q` within `range`, or `None`.
fn whole(
    q: &serde_json::Map<String, Value>,
    keys: &[&str],
    range: std::ops::RangeInclusive<u64>,
) -> Option<u64> {
    keys.iter()
        .find_map(|k| q.get(*k).and_then(Value::as_u64))
        .filter(|n| range.contains(n))
}

/// The scheme of the top-level `quantization_config` of `config`, or `None` when the config
/// has none (or it is not an object: its type is checked where the config is read).
pub fn scheme(config: &Value) -> Option<Scheme> {
    let q = config.get("quantization_config")?.as_object()?;
    let method = q
        .get("quant_method")
        .and_then(Value::as_str)
        .unwrap_or("unnamed")
        .to_string();
    let grouped = |bits: u64, group: Option<u64>| match group {
        Some(g) => (
            Decimal::from(bits) + Decimal::from(16 + bits) / Decimal::from(g),
            format!("{bits} bits, groups of {g}"),
        ),
        None => (Decimal::from(bits), format!("{bits} bits")),
    };
    let (matrix_bits, reading) = match method.as_str() {
        "gptq" => grouped(
            whole(q, &["bits"], 2..=8).unwrap_or(2),
            whole(q, &["group_size"], 1..=u64::from(u32::MAX)),
        ),
        "awq" => grouped(
            whole(q, &["bits", "w_bit"], 2..=8).unwrap_or(4),
            whole(q, &["group_size", "q_group_size"], 1..=u64::from(u32::MAX)),
        ),
        "bitsandbytes" => {
            let flag = |k: &str| q.get(k).and_then(Value::as_bool) == Some(true);
            if flag("load_in_8bit") && !flag("load_in_4bit") {
                (Decimal::from(8), "8-bit".to_string())
            } else if flag("bnb_4bit_use_double_quant") {
                (
                    Decimal::new(4125, 3),
                    "4-bit, double quantization".to_string(),
                )
            } else if q.contains_key("bnb_4bit_use_double_quant") {
                (Decimal::new(45, 1), "4-bit".to_string())
            } else {
                (Decimal::new(4125, 3), "4-bit".to_string())
            }
        }
        "fp8" | "fbgemm_fp8" => (Decimal::from(8), "float8".to_string()),
        "mxfp4" => (Decimal::new(425, 2), "MXFP4".to_string()),
        "compressed-tensors" => {
            let bits = q
                .get("config_groups")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|groups| groups.values())
                .filter_map(|g| g.get("weights")?.get("num_bits")?.as_u64())
                .filter(|b| (1..=32).contains(b))
                .min();
            match bits {
                Some(b) => (Decimal::from(b), format!("{b} bits")),
                None => (Decimal::ONE, "no weights num_bits read".to_string()),
            }
        }
        _ => (Decimal::ONE, "a method lab plan does not know".to_string()),
    };
    Some(Scheme {
        method,
        matrix_bits,
        reading,
    })
}

/// The least bytes the headers of a checkpoint of `counts` stored in `scheme` hold, rounded
/// down: matrices, output head and vision tower at `matrix_bits`, embeddings, norms and
/// biases at 16 bits.
pub fn minimum_bytes(scheme: &Scheme, counts: &ParameterCounts) -> u128 {
    let packed =
        u128::from(counts.linear) + u128::from(counts.output_head) + u128::from(counts.vision);
    let bits = scheme.matrix_bits.normalize();
    // bits = mantissa / 10^scale, exact (at most three decimals above).
    let mantissa = u128::try_from(bits.mantissa()).unwrap_or(0);
    let scale = 10u128.pow(bits.scale());
    let matrices = packed.saturating_mul(mantissa) / scale / 8;
    let rest = (u128::from(counts.embedding) + u128::from(counts.other)).saturating_mul(2);
    matrices.saturating_add(rest)
}

/// Refuses headers holding fewer bytes than [`minimum_bytes`].
///
/// # Errors
/// [`Error::Usage`] naming the method, the width assumed, what the config's model needs
/// and what the headers hold.
pub fn check_complete(scheme: &Scheme, counts: &ParameterCounts, headers: &Summary) -> Result<()> {
    let need = minimum_bytes(scheme, counts);
    if u128::from(headers.data_bytes) >= need {
        return Ok(());
    }
    Err(Error::usage(format!(
        "the safetensors headers hold {} bytes in {} tensors, but the model config.json describes takes at least {need} bytes as a \"{}\" checkpoint ({}: {} bits per matrix weight, embeddings in 16 bits); {} bytes are missing (an incomplete download, a missing shard?): complete the folder, or give the config.json alone to plan from the config",
        headers.data_bytes,
        headers.tensors,
        crate::text::excerpt(&scheme.method),
        scheme.reading,
        scheme.matrix_bits.normalize(),
        need - u128::from(headers.data_bytes),
    )))
}

/// How transformers 5.17 loads an MXFP4 checkpoint (gpt-oss: `quant_method` "mxfp4", the
/// experts stored as `*_blocks` U8 `[E, N, K/32, 16]`, two 4-bit elements a byte, and
/// `*_scales` U8 `[E, N, K/32]`, one 8-bit exponent per 32; everything else bf16), which is
/// what `lab plan` counts for one when the weights are left as stored.
///
/// `Mxfp4HfQuantizer.validate_environment` (`quantizers/quantizer_mxfp4.py`) keeps MXFP4 only
/// with triton >= 3.4 and the `kernels` package on a GPU of compute capability 7.5 or more;
/// otherwise, and on the CPU without `use_kernels`, it sets `dequantize` and
/// `Mxfp4Dequantize` (`integrations/mxfp4.py`, `convert_moe_packed_tensors`, bfloat16)
/// writes each expert matrix as a bf16 tensor of the unquantized layout. The kit installs
/// no `kernels` package, so lab plan counts that: every parameter in bf16, the layout
/// transformers builds without quantization ([`mxfp4_kept_bytes`] gives the other case for
/// the note).
pub const MXFP4: &str = "mxfp4";

/// Bytes of an MXFP4 checkpoint as `Mxfp4GptOssExperts` keeps it with the kernels: the
/// expert matrices as 4-bit blocks plus one byte of scale per 32 elements (`K/2 + K/32`
/// bytes per `K` elements), the expert biases in float32, every other parameter in bf16. A
/// lower bound of that case: the triton kernels then swizzle blocks and scales into their
/// own layout (`swizzle_mxfp4_convertops`), which is not modelled.
pub fn mxfp4_kept_bytes(arch: &Architecture, counts: &ParameterCounts) -> u128 {
    let (mut matrices, mut biases) = (0u128, 0u128);
    if let Some(e) = &arch.experts {
        let moe = arch
            .layer_kinds
            .iter()
            .filter(|l| l.feed_forward == FeedForward::Experts)
            .count() as u128;
        let (h, i, n) = (
            u128::from(arch.hidden),
            u128::from(e.intermediate),
            u128::from(e.routed),
        );
        matrices = moe * n * 3 * h * i;
        biases = moe * n * (2 * i + h);
    }
    let bf16 = counts.total().saturating_mul(2);
    bf16.saturating_sub(matrices * 2) + matrices / 2 + matrices / 32 + biases * 2
}

/// A block-scaled FP8 checkpoint (`quant_method` "fp8", transformers' `FineGrainedFP8Config`:
/// DeepSeek-V3, Qwen3-FP8...) as transformers 5.17 keeps it on a GPU of compute capability
/// 8.9 or more (`FP8Linear` and `FP8Experts`, `integrations/finegrained_fp8.py`): each
/// converted matrix `[out, in]` as one float8 byte per weight plus `weight_scale_inv`
/// `[⌈out/b0⌉, ⌈in/b1⌉]` (float32, or one byte with `scale_fmt` "ue8m0"; one scalar without
/// `weight_block_size`), per expert for stacked experts, and a float32 activation scale each
/// with `activation_scheme` "static". Under 8.9, or without a GPU, its quantizer dequantizes
/// to bf16 instead (`quantizer_finegrained_fp8.py`, `validate_environment`). Not modelled: the
/// floor of two scale rows a fused gate-up stack keeps when `2I` is under one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp8 {
    /// `weight_block_size` (`[b0, b1]`), `None` for one scale per matrix.
    pub block: Option<(u64, u64)>,
    /// Bytes of one scale: 4 (float32), 1 (`scale_fmt` "ue8m0").
    pub scale_bytes: u64,
    /// `activation_scheme` "static": one float32 activation scale per matrix.
    pub static_activation: bool,
}

/// The FP8 block scheme of a config's `quantization_config`, when its method is "fp8".
///
/// # Errors
/// [`Error::Usage`] naming `weight_block_size` when it is not two whole numbers from 1 to
/// 2^20 (or null), `scale_fmt` or `activation_scheme` when not a string.
pub fn fp8(config: &Value) -> Result<Option<Fp8>> {
    let Some(q) = config.get("quantization_config").and_then(Value::as_object) else {
        return Ok(None);
    };
    if q.get("quant_method").and_then(Value::as_str) != Some("fp8") {
        return Ok(None);
    }
    let block = match q.get("weight_block_size") {
        None | Some(Value::Null) => None,
        Some(Value::Array(b)) if b.len() == 2 => {
            let dim = |v: &Value| v.as_u64().filter(|n| (1..=1 << 20).contains(n));
            match (dim(&b[0]), dim(&b[1])) {
                (Some(r), Some(c)) => Some((r, c)),
                _ => None,
            }
            .ok_or_else(|| bad_block(&Value::Array(b.clone())))
            .map(Some)?
        }
        Some(other) => return Err(bad_block(other)),
    };
    let text = |key: &str| match q.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(Error::usage(format!(
            "config.json: \"{key}\" in quantization_config must be a string, found {}",
            crate::text::excerpt(&other.to_string())
        ))),
    };
    Ok(Some(Fp8 {
        block,
        scale_bytes: if text("scale_fmt")? == Some("ue8m0") {
            1
        } else {
            4
        },
        static_activation: text("activation_scheme")? == Some("static"),
    }))
}

/// The refusal of a `weight_block_size` that is not two whole numbers; `found` is the value
/// as the config holds it.
fn bad_block(found: &Value) -> Error {
    Error::usage(format!(
        "config.json: \"weight_block_size\" in quantization_config must be two whole numbers such as [128, 128], found {}",
        crate::text::excerpt(&found.to_string())
    ))
}

impl Fp8 {
    /// Bytes of the scales that go with one converted matrix `t` (its [`Tensor::tail`]
    /// tiled by the block, per stacked expert), activation scales included; 0 for a
    /// tensor that is not a decoder matrix.
    pub fn scale_bytes_of(&self, t: &Tensor) -> u64 {
        if t.role != Role::Linear {
            return 0;
        }
        let tiles = match self.block {
            Some((b0, b1)) => t.tail.0.div_ceil(b0).saturating_mul(t.tail.1.div_ceil(b1)),
            None => 1,
        };
        let activation = if self.static_activation { 4 } else { 0 };
        t.stack().saturating_mul(
            tiles
                .saturating_mul(self.scale_bytes)
                .saturating_add(activation),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(config: &str) -> Scheme {
        scheme(&serde_json::from_str(config).unwrap()).unwrap()
    }

    /// Every method's width, with and without its optional fields.
    #[test]
    fn widths_per_format() {
        let cases = [
            (
                r#"{"quant_method":"gptq","bits":4,"group_size":128}"#,
                "4.15625",
            ),
            (
                r#"{"quant_method":"gptq","bits":8,"group_size":32}"#,
                "8.75",
            ),
            (r#"{"quant_method":"gptq","bits":3}"#, "3"),
            (r#"{"quant_method":"gptq","bits":4,"group_size":-1}"#, "4"),
            (r#"{"quant_method":"gptq","bits":"4"}"#, "2"),
            (r#"{"quant_method":"gptq"}"#, "2"),
            (
                r#"{"quant_method":"awq","bits":4,"group_size":128}"#,
                "4.15625",
            ),
            (
                r#"{"quant_method":"awq","w_bit":4,"q_group_size":64}"#,
                "4.3125",
            ),
            (r#"{"quant_method":"awq"}"#, "4"),
            (
                r#"{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_use_double_quant":true}"#,
                "4.125",
            ),
            (
                r#"{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_use_double_quant":false}"#,
                "4.5",
            ),
            (
                r#"{"quant_method":"bitsandbytes","load_in_4bit":true}"#,
                "4.125",
            ),
            (
                r#"{"quant_method":"bitsandbytes","load_in_8bit":true}"#,
                "8",
            ),
            (
                r#"{"quant_method":"fp8","weight_block_size":[128,128]}"#,
                "8",
            ),
            (r#"{"quant_method":"fbgemm_fp8"}"#, "8"),
            (r#"{"quant_method":"mxfp4"}"#, "4.25"),
            (
                r#"{"quant_method":"compressed-tensors","config_groups":{"g0":{"weights":{"num_bits":8}},"g1":{"weights":{"num_bits":4}}}}"#,
                "4",
            ),
            (r#"{"quant_method":"compressed-tensors"}"#, "1"),
            (r#"{"quant_method":"hqq"}"#, "1"),
            (r#"{}"#, "1"),
        ];
        for (q, bits) in cases {
            let s = of(&format!(r#"{{"quantization_config":{q}}}"#));
            assert_eq!(s.matrix_bits.normalize().to_string(), bits, "{q}");
        }
        for none in [
            r#"{}"#,
            r#"{"quantization_config":"gptq"}"#,
            r#"{"quantization_config":null}"#,
        ] {
            assert_eq!(scheme(&serde_json::from_str(none).unwrap()), None, "{none}");
        }
    }

    /// The bound is exact arithmetic: matrices at their width rounded down once, the rest at
    /// two bytes; headers at the bound pass, one byte under it is refused.
    #[test]
    fn the_bound_is_exact_and_refuses_one_byte_less() {
        let counts = ParameterCounts {
            embedding: 1000,
            output_head: 1000,
            linear: 8000,
            other: 10,
            vision: 0,
        };
        let gptq =
            of(r#"{"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128}}"#);
        // 9000 x 4.15625 / 8 = 4675.78..., rounded down; 1010 x 2.
        assert_eq!(minimum_bytes(&gptq, &counts), 4675 + 2020);
        let mut headers = Summary {
            data_bytes: 6695,
            tensors: 3,
            ..Summary::default()
        };
        assert!(check_complete(&gptq, &counts, &headers).is_ok());
        headers.data_bytes -= 1;
        let e = check_complete(&gptq, &counts, &headers)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "at least 6695 bytes as a \"gptq\" checkpoint (4 bits, groups of 128: 4.15625 bits"
            ),
            "{e}"
        );
        assert!(e.contains("; 1 bytes are missing"), "{e}");
    }

    /// FP8 scales per matrix: whole tiles of the last two dimensions, per stacked expert, one
    /// byte each with ue8m0, plus a float32 activation scale each when static; nothing for a
    /// tensor that is not a decoder matrix.
    #[test]
    fn fp8_scales_tile_each_matrix() {
        use crate::plan::layout::Sink;
        let q = |extra: &str| {
            fp8(&serde_json::from_str(&format!(
                r#"{{"quantization_config":{{"quant_method":"fp8","weight_block_size":[128,128]{extra}}}}}"#
            ))
            .unwrap())
            .unwrap()
            .unwrap()
        };
        let mut tensors = Vec::new();
        {
            let mut visit = |t: Tensor| tensors.push(t);
            let mut t = Sink::new(&mut visit);
            t.linear(&[576, 7168]); // DeepSeek-V3's kv_a_proj_with_mqa: 5 x 56 tiles
            t.linear(&[8, 256, 256]); // 8 experts of 2 x 2 tiles
            t.other(&[7168]);
        }
        let f = q("");
        let bytes: Vec<u64> = tensors.iter().map(|t| f.scale_bytes_of(t)).collect();
        assert_eq!(bytes, [5 * 56 * 4, 8 * 4 * 4, 0]);
        let f = q(r#","scale_fmt":"ue8m0","activation_scheme":"static""#);
        let bytes: Vec<u64> = tensors.iter().map(|t| f.scale_bytes_of(t)).collect();
        assert_eq!(bytes, [5 * 56 + 4, 8 * (4 + 4), 0]);
        let per_tensor = fp8(&serde_json::from_str(
            r#"{"quantization_config":{"quant_method":"fp8","weight_block_size":null}}"#,
        )
        .unwrap())
        .unwrap()
        .unwrap();
        assert_eq!(per_tensor.scale_bytes_of(&tensors[1]), 8 * 4);
        assert_eq!(
            fp8(
                &serde_json::from_str(r#"{"quantization_config":{"quant_method":"gptq"}}"#)
                    .unwrap()
            )
            .unwrap(),
            None
        );
    }
}
