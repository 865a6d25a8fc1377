//! The engine the expected figures describe: PyTorch with `transformers` (SDPA attention, a
//! static cache, grouped experts), and the factors of its kernels, each named with where it
//! was measured. The ceiling describes no engine ([`Engine::Ideal`]).
//!
//! What the measured engine does, read in transformers' source (the rows in
//! `examples/h200/time/` were measured with transformers 5.17, PyTorch 2.11):
//! - Llama, Mistral, Qwen2/3 and Mixtral project queries, keys and values with three products
//!   and gate and up with two (`q_proj`, `k_proj`, `v_proj`, `gate_proj`, `up_proj` in
//!   `src/transformers/models/llama/modeling_llama.py`); Phi-3 fuses them (`qkv_proj`,
//!   `gate_up_proj`). A decoder layer launches, besides its products and attention, 8 kernels
//!   per RMSNorm (to fp32, pow, mean, add, rsqrt, mul, to bf16, weight mul), 10 for the rotary
//!   embedding of queries and keys (mul, neg, cat, mul, add each), 2 cache writes, 1 copy of the
//!   attention output, SiLU and mul, and 2 residual adds ([`kernels_per_layer`]).
//! - With grouped-query attention, `repeat_kv` copies the cached keys and values to every
//!   query head before SDPA (`expand` then `reshape`): a copy of the whole cache per step.
//! - A static cache is attended over its whole `max_cache_len`, not the filled part: the step
//!   reads the cache's full length ([`super::operators::Step::cache`]).
//! - A full sliding-window cache layer rolls its whole window each step (`roll`, then
//!   `copy_` back: the window read and written twice).
//! - DeepSeek-V2 attention caches the latent (`c + r` per token and layer: the `cache_bytes`
//!   of `examples/h200/time/measured-moe.csv`) and, every decode step, runs `kv_b_proj` over
//!   the whole cache and copies the decompressed keys and values, `A·(d_qk + d_v)` per token,
//!   which SDPA then reads; an engine with absorbed projections (vLLM, SGLang) reads the
//!   latent only ([`Engine::Ideal`]). `torch.profiler` on the H200
//!   (`examples/h200/time/gaps-profile-mla.csv`: DeepSeek-V2-Lite, batch 64, static cache of
//!   4096, eager, 135.7 ms of kernel time) shows `kv_b_proj` over all 64 × 4096 cached
//!   latents (27 products, 42.8 ms), two strided copies of the decompressed keys and values
//!   (54 kernels, 57.6 ms: 145 GB read and written at 0.52 of the bandwidth, as
//!   [`ELEMENTWISE_BANDWIDTH`]) and SDPA over them (cuDNN, 18.8 ms; with the widths 192 and
//!   128 it runs at 0.80–0.84 of the bandwidth, `gaps-sdpa-mla.csv`, near equal widths' 0.94).
//! - Mixture-of-experts layers run `grouped_mm_experts_forward`
//!   (`src/transformers/integrations/moe.py`, commit 8b584a6): two grouped products and
//!   [`EXPERT_ROUTING_KERNELS`] kernels of routing, sorting and gathering.
//!
//! Factors are fractions of the datasheet peaks or fixed seconds per kernel. Measured on the
//! H200 (`examples/h200/time/calibration-*.csv`, `scripts/time_calibrate_h200.py`); other
//! GPUs get the same fractions of their own peaks (transferred from the H200, labelled so in
//! `data/gpu-perf.csv`).

use rust_decimal::Decimal;
use serde::Serialize;

const fn dec(mantissa: u32, scale: u32) -> Decimal {
    Decimal::from_parts(mantissa, 0, 0, false, scale)
}

/// Which engine a step's operators describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The least work any engine does: fused projections, grouped-query attention without
    /// copies, the latent read with absorbed projections, the filled cache only (the ceiling).
    Ideal,
    /// PyTorch with `transformers` as measured (the expected figures).
    Transformers,
}

/// Fixed GPU time of one dense product in a transformers step, seconds: 3.6 µs. With it, one
/// product takes `3.6 µs + max(bytes / (bandwidth_efficiency · bandwidth), FLOPs /
/// (compute_efficiency · peak))`. Timed alone (`examples/h200/time/calibration-matmul.csv`,
/// 1,124 bf16 rows on the H200, fit over the 63 shapes of ≥ 30 MB) a product costs 6.5 µs +
/// its bytes at 0.854 (median error 4.0 %, p90 9.5 %); in a step, back to back with the
/// layer's other kernels, `torch.profiler` on the H200 (`examples/h200/time/gaps-profile.csv`)
/// gives Llama-3.1-8B's 225 products at batch 1 4.48 ms of kernel time (their split-K
/// reductions included) for 15.0 GB: 3.6 µs each besides the bytes at 0.854.
pub const PRODUCT_FIXED_S: Decimal = dec(36, 7);

/// Fixed GPU time of one grouped expert product (`F.grouped_mm`), seconds: 18 µs; fitted on
/// `examples/h200/time/calibration-grouped.csv` (measured on H200; the three shipped expert
/// shapes, 1 to 16,384 tokens) with [`GROUPED_BANDWIDTH`] and [`GROUPED_COMPUTE`]: median
/// error 8 %, 90th percentile 18 %.
pub const GROUPED_FIXED_S: Decimal = dec(18, 6);

/// Fraction of the bandwidth at which a grouped product reads the experts it touches: 0.646
/// (3.1 TB/s of 4.8; measured on H200, `calibration-grouped.csv`).
pub const GROUPED_BANDWIDTH: Decimal = dec(646, 3);

/// Fraction of the dense peak a grouped product reaches when compute-bound: 0.657 (650 of
/// 989.4 TFLOP/s; measured on H200, `calibration-grouped.csv`).
pub const GROUPED_COMPUTE: Decimal = dec(657, 3);

/// Fixed GPU time of one SDPA decode call, seconds: 17.9 µs, the intercept of
/// `examples/h200/time/calibration-attention.csv` (measured on H200; decode, keys repeated
/// and a boolean mask, as transformers calls it under a capture; 1K to 32K keys), whose slope
/// is the `decode_attention_efficiency` of `data/gpu-perf.csv`.
pub const DECODE_ATTENTION_FIXED_S: Decimal = dec(179, 7);

/// Fraction of the bandwidth at which `repeat_kv`'s copy of the cache runs (bytes read plus
/// written): 0.229 (1.1 TB/s). Not in the component calibration (its SDPA rows repeat the
/// keys outside the timed region): fitted on the CUDA-graph decode rows of
/// `examples/h200/time/measured-dense.csv` (Llama-3.1-8B, Qwen2.5-32B), where each cached
/// byte costs about 5 ps per step. A strided copy (`expand` then `reshape`).
pub const REPEAT_COPY_BANDWIDTH: Decimal = dec(229, 3);

/// Fraction of the bandwidth at which a full sliding-window layer rolls its window (bytes
/// read plus written, `roll` then `copy_`): 0.292 (1.4 TB/s). Not in the component
/// calibration: fitted on the sliding-window decode rows of
/// `examples/h200/time/measured-sliding.csv` (Mistral-7B past 4096 tokens, Phi-3-mini past
/// 2047).
pub const ROLL_COPY_BANDWIDTH: Decimal = dec(292, 3);

/// Causal SDPA prefill (`is_causal`, grouped-query heads, cuDNN): fraction of the dense bf16
/// peak by prompt length, measured on H200 (`examples/h200/time/calibration-attention.csv`,
/// `prefill_causal`, `gqa`, Llama-3.1-8B heads); interpolated linearly between lengths, held
/// beyond the ends.
pub const PREFILL_ATTENTION: [(u64, Decimal); 7] = [
    (512, dec(1467, 4)),
    (1024, dec(2599, 4)),
    (2048, dec(4097, 4)),
    (4096, dec(5396, 4)),
    (8192, dec(6221, 4)),
    (16384, dec(6682, 4)),
    (32768, dec(6016, 4)),
];

/// Kernels of transformers' grouped-experts forward besides its two products, per layer:
/// 34. Read in the source (`grouped_mm_experts_forward`, `src/transformers/integrations/moe.py`,
/// commit 8b584a6): token index (arange, expand copy), the gather of the routed rows, two
/// argsorts, three gathers by permutation, histc, cumsum, the gate (SiLU, mul), the weighting,
/// the inverse gather, the sum over the k experts, the cast; and the router's softmax, top-k,
/// normalising sum and division and cast: 21; counted by `torch.profiler` on the H200
/// (`examples/h200/time/gaps-eager-host.csv`: an eager decode step of Mixtral-8x7B cut to 2 and
/// 8 layers launches 87 kernels per layer, 34 more than a dense layer's 53 less its three
/// feed-forward products; with the router and the two grouped products, Qwen3-30B-A3B's 99
/// and DeepSeek-V2-Lite's 94 are within 6 % of the count this gives).
pub const EXPERT_ROUTING_KERNELS: u64 = 34;

/// Kernels of one transformers step outside its decoder layers: 27 (the embedding, the final
/// RMSNorm's 8, the head, and the rotary table, position and cache bookkeeping of the model's
/// forward). Counted by `torch.profiler` on the H200 (`examples/h200/time/gaps-profile.csv`,
/// `gaps-eager-host.csv`): Llama-3.1-8B's eager decode step launches 1723 kernels, 53 per
/// layer, 27 besides; Qwen2.5-32B's 3291 = 64 × 51 + 27.
pub const STEP_KERNELS: u64 = 27;

/// Fraction of the bandwidth at which transformers' elementwise kernels (norms, rotary
/// embedding, cache writes, activation, residual adds) move the bytes
/// [`elementwise_bytes_per_token`] counts: 0.51. Measured on H200 with `torch.profiler`
/// (`examples/h200/time/gaps-profile.csv`): the kernels that are neither products nor
/// attention in Llama-3.1-8B's and Qwen2.5-32B's prefills of 4096 and 16384 tokens take
/// 34.5 / 132.4 ms and 92.8 / 359.4 ms for 82 / 330 GB and 228 / 913 GB counted: 0.50–0.53
/// of 4.8 TB/s. The products of the same prefills ran at 0.82 of the peak, as calibrated.
pub const ELEMENTWISE_BANDWIDTH: Decimal = dec(51, 2);

/// SDPA with an explicit boolean mask (what transformers passes once a prompt reaches a
/// sliding window: `_ignore_causal_mask_sdpa` keeps `is_causal` only while the keys are fewer
/// than the window) attends the full square of queries × keys, masked or not, at a cost per
/// (query, key, head) independent of the head width: 1.66 ps on the H200, i.e. the FLOPs of a
/// 128-wide head (`4 · 128` per pair) at 0.31 of the dense peak. Measured on H200
/// (`examples/h200/time/gaps-sdpa-window.csv`, cuDNN, 2048–16384 tokens: Mistral's 32 heads of
/// 128 with window 4096, 14.2 ms per layer at 16384; Phi-3's 32 of 96 with window 2047,
/// 14.3 ms; an explicit full causal mask costs the same); the real prefills agree
/// (`gaps-profile.csv`: Mistral-7B's attention 470.7 ms at 16384 tokens = 32 × 14.7 ms).
pub const MASKED_PREFILL_ATTENTION: Decimal = dec(31, 2);

/// The head width whose FLOPs [`MASKED_PREFILL_ATTENTION`] is the fraction of: 128.
pub const MASKED_PAIR_WIDTH: u64 = 128;

/// Bytes per routed (token, expert) pair that the grouped-experts forward moves besides its
/// products and the gate's SiLU and mul (10 per intermediate element, in
/// [`elementwise_bytes_per_token`]), at 2-byte activations: `30·H + 20·I_e`, so 30 per unit of
/// `H + I_e` in all. Reading the source (`grouped_mm_experts_forward`, as above) gives 18·H
/// (the gather of the routed rows, their permutation, the weighting and the inverse permutation
/// each read and write 2·H, the sum over the k experts reads 2·H); `torch.profiler` on the H200
/// (`examples/h200/time/gaps-profile.csv`, `gaps-profile-mixtral.csv`: prefills of 16384 tokens)
/// shows more: the kernels that are neither products nor attention, less the dense layer's
/// counted bytes, move 29.0 (DeepSeek-V2-Lite), 29.2 (Qwen3-30B-A3B) and 30.4 (Mixtral-8x7B)
/// bytes per assignment and unit of `H + I_e` at [`ELEMENTWISE_BANDWIDTH`].
pub fn routing_bytes_per_assignment(h: u64, intermediate: u64) -> u64 {
    30 * h + 20 * intermediate
}

/// The fraction of the dense peak causal prefill attention reaches over `tokens` keys
/// ([`PREFILL_ATTENTION`]).
pub fn prefill_attention_efficiency(tokens: u64) -> Decimal {
    let t = &PREFILL_ATTENTION;
    if tokens <= t[0].0 {
        return t[0].1;
    }
    for pair in t.windows(2) {
        let ((a, ea), (b, eb)) = (pair[0], pair[1]);
        if tokens <= b {
            return ea + (eb - ea) * Decimal::from(tokens - a) / Decimal::from(b - a);
        }
    }
    t[t.len() - 1].1
}

/// Kernels of one transformers decoder layer besides its products and attention: 8 per
/// RMSNorm of the residual (`norms`) and of queries and keys (`qk_norm`: 2 more), 10 for the
/// rotary embedding, 2 cache writes, 1 attention-output copy, SiLU and mul, 2 residual adds
/// (`modeling_llama.py`; see the module text): 33 for Llama by reading the source; 35 as
/// `torch.profiler` counts them on the H200 in a prefill (`examples/h200/time/gaps-profile.csv`:
/// Llama-3.1-8B's prefill of 1024 tokens launches 1398 kernels, 27 outside the layers
/// ([`STEP_KERNELS`]) and 43 per layer, 7 products and 1 SDPA among them). A decode step adds
/// [`DECODE_EXTRA_KERNELS`]. Llama: 8·2 + 19 = 35.
pub fn kernels_per_layer(norms: u64, qk_norm: bool) -> u64 {
    8 * (norms + if qk_norm { 2 } else { 0 }) + 19
}

/// Kernels a decode step launches per layer besides those of a prefill: 8, of which 5 are
/// cuBLASLt's split-K reductions after the small-batch products (their GPU time is in
/// [`PRODUCT_FIXED_S`]; the host launches them). Counted by `torch.profiler` on the H200
/// (`examples/h200/time/gaps-profile.csv`, `gaps-eager-host.csv`): Llama-3.1-8B's eager decode
/// step at batch 1 launches 1723 kernels, 27 + 32 × 53, 53 = 7 products + 1 SDPA + 2
/// `repeat_kv` copies + 35 + 8; Phi-3-mini's 1567 = 31 + 32 × 48 (fused, no copies).
pub const DECODE_EXTRA_KERNELS: u64 = 8;

/// Elementwise bytes of one transformers decoder layer per token, at `e` = 2 bytes per
/// activation: each RMSNorm reads 2H and writes 4H (to fp32), squares (4H + 4H), reduces
/// (4H), scales (4H + 4H), casts back (4H + 2H), weights (2H + 2H): 36·H; rotary reads and
/// writes the queries and keys five times (22 bytes per element); the cache writes read and
/// write the new keys and values (8 per element); the output copy 4 per element; SiLU and
/// mul 10 per intermediate element; two residual adds 12·H. `norms` norms of width H,
/// `q` query and `k` key elements, `i` active intermediate width.
/// With `qk_norm` (Qwen3, Gemma 3) the queries and keys pass an RMSNorm of their own too:
/// 36 bytes per element more.
pub fn elementwise_bytes_per_token(
    h: u64,
    norms: u64,
    qk_norm: bool,
    q: u64,
    k: u64,
    i: u64,
) -> u64 {
    let qk = if qk_norm { 36 * (q + k) } else { 0 };
    36 * norms * h + 22 * (q + k) + 8 * k + 4 * q + 10 * i + 12 * h + qk
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every factor the expected figure divides a peak by is a fraction of it, in (0, 1], and
    /// every fixed cost is non-negative: per operator the expected figure's rates never pass
    /// the ceiling's (the step-level bound is `timing::ceiling_bound`'s grid).
    #[test]
    fn every_engine_factor_is_a_fraction_of_the_peak_and_every_fixed_cost_positive() {
        let fraction = |x: Decimal| x > Decimal::ZERO && x <= Decimal::ONE;
        for f in [
            GROUPED_BANDWIDTH,
            GROUPED_COMPUTE,
            REPEAT_COPY_BANDWIDTH,
            ROLL_COPY_BANDWIDTH,
            ELEMENTWISE_BANDWIDTH,
            MASKED_PREFILL_ATTENTION,
        ] {
            assert!(fraction(f), "{f}");
        }
        for (_, f) in PREFILL_ATTENTION {
            assert!(fraction(f), "{f}");
        }
        for tokens in [1, 512, 3000, 16384, 1 << 20] {
            assert!(fraction(prefill_attention_efficiency(tokens)), "{tokens}");
        }
        let mfu: Decimal = crate::timing::decision::TRAINING_MFU.parse().unwrap();
        assert!(fraction(mfu));
        for c in [PRODUCT_FIXED_S, GROUPED_FIXED_S, DECODE_ATTENTION_FIXED_S] {
            assert!(c >= Decimal::ZERO);
        }
    }

    #[test]
    fn prefill_attention_efficiency_interpolates_the_calibration() {
        assert_eq!(prefill_attention_efficiency(128), dec(1467, 4));
        assert_eq!(prefill_attention_efficiency(4096), dec(5396, 4));
        // Halfway between 4096 (0.5396) and 8192 (0.6221).
        assert_eq!(
            prefill_attention_efficiency(6144),
            "0.58085".parse().unwrap()
        );
        assert_eq!(prefill_attention_efficiency(100_000), dec(6016, 4));
    }

    #[test]
    fn a_llama_layer_launches_35_kernels_besides_its_products() {
        assert_eq!(kernels_per_layer(2, false), 35);
        // Qwen3: query and key norms.
        assert_eq!(kernels_per_layer(2, true), 51);
        // Llama-3.1-8B per token: 72·4096 + 22·(4096 + 1024) + 8·1024 + 4·4096 + 10·14336
        // + 12·4096 bytes.
        assert_eq!(
            elementwise_bytes_per_token(4096, 2, false, 4096, 1024, 14336),
            72 * 4096 + 22 * 5120 + 8 * 1024 + 4 * 4096 + 143_360 + 12 * 4096
        );
        // Query and key norms add 36 bytes per query and key element.
        assert_eq!(
            elementwise_bytes_per_token(4096, 2, true, 4096, 1024, 14336)
                - elementwise_bytes_per_token(4096, 2, false, 4096, 1024, 14336),
            36 * 5120
        );
    }
}
