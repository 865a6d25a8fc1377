//! The per-operator roofline: each operator takes the larger of its FLOPs over the compute
//! rate and its bytes over the memory bandwidth; a step is the sum over its operators (not
//! the larger of the two totals: a step mixes compute-bound and bandwidth-bound operators),
//! and under tensor parallel two all-reduces per layer over the lot's link.
//!
//! Two figures, never mixed ([`Basis`]): the *ceiling* uses the datasheet peaks at 100 %,
//! the ideal engine's operators and no launch or latency cost, a bound no measurement may
//! beat; the *expected* figure runs transformers' operators at the GPU's efficiency factors
//! and the engine's measured fixed costs per kernel ([`super::engine`]), and, eager, takes
//! the host's launches when they are slower than the GPU.
//!
//! Tensor parallel over t GPUs (Megatron-LM's split, Shoeybi et al. 2019): matrix products
//! split their FLOPs and weights by t; attention splits its heads by t and its cache by
//! `min(t, K)` (a latent cache is replicated); norms and elementwise work stay whole; each
//! layer all-reduces its attention and its feed-forward output, `n·H·e` bytes each, a ring
//! all-reduce moving `2·(t − 1)/t` of them over the link per GPU (NCCL's algorithm). A link
//! without peer-to-peer goes through host memory: half its bandwidth.

use super::engine;
use super::gpu_perf::{Format, GpuPerf};
use super::operators::{Kind, Op};
use rust_decimal::Decimal;
use serde::Serialize;

/// Latency of one all-reduce (or one pipeline hop) in the expected figure, microseconds:
/// an assumed figure of the order NCCL reports for small messages inside one machine.
pub const ALLREDUCE_LATENCY_US: u64 = 10;

/// How the engine launches its kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// One launch from the host per kernel (PyTorch eager, `transformers`).
    Eager,
    /// Kernels replayed from a captured CUDA graph.
    CudaGraphs,
}

impl Profile {
    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Eager => "eager",
            Profile::CudaGraphs => "cuda-graphs",
        }
    }
}

/// Which figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Datasheet peaks at 100 %, no launch cost.
    Ceiling,
    /// Efficiency factors and the profile's launch cost.
    Expected,
}

/// Rates of one GPU for one format and basis, in base units (FLOP/s, B/s, seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    /// The basis: the ceiling has no fixed cost per kernel and every rate at its peak.
    pub basis: Basis,
    /// Dense tensor FLOP/s at the peak (the engine factors are fractions of it).
    pub peak_compute: Decimal,
    /// Memory bytes per second at the peak.
    pub peak_bandwidth: Decimal,
    /// Matrix FLOP/s (peak × `compute_efficiency` when expected).
    pub compute: Decimal,
    /// Memory bytes per second (peak × `bandwidth_efficiency` when expected).
    pub bandwidth: Decimal,
    /// Bytes per second at which decode attention reads the cache.
    pub attention_bandwidth: Decimal,
    /// Host seconds per kernel launch (eager; 0 when replayed from a graph or at the
    /// ceiling).
    pub launch: Decimal,
    /// GPU seconds of the smallest kernel (`graph_launch_us`, measured as a replayed chain of
    /// tiny kernels); 0 at the ceiling.
    pub kernel_floor: Decimal,
    /// Link bytes per second per direction (peer-to-peer effective).
    pub link: Decimal,
    /// Seconds per all-reduce (latency).
    pub latency: Decimal,
}

/// The rates of `gpu` for products in `format`; `None` when the GPU has no tensor cores for
/// it.
pub fn rates(gpu: &GpuPerf, format: Format, basis: Basis, profile: Profile) -> Option<Rates> {
    let tera = Decimal::from(1_000_000_000_000u64);
    let giga = Decimal::from(1_000_000_000u64);
    let micro = Decimal::new(1, 6);
    let peak = gpu.tflops(format)? * tera;
    let bandwidth = gpu.bandwidth_gb_s * giga;
    let link = gpu.link_gb_s * giga
        / if gpu.peer_to_peer() {
            Decimal::ONE
        } else {
            Decimal::TWO
        };
    Some(match basis {
        Basis::Ceiling => Rates {
            basis,
            peak_compute: peak,
            peak_bandwidth: bandwidth,
            compute: peak,
            bandwidth,
            attention_bandwidth: bandwidth,
            launch: Decimal::ZERO,
            kernel_floor: Decimal::ZERO,
            link,
            latency: Decimal::ZERO,
        },
        Basis::Expected => Rates {
            basis,
            peak_compute: peak,
            peak_bandwidth: bandwidth,
            compute: peak * gpu.compute_efficiency,
            bandwidth: bandwidth * gpu.bandwidth_efficiency,
            attention_bandwidth: bandwidth * gpu.decode_attention_efficiency,
            launch: match profile {
                Profile::Eager => micro * gpu.eager_launch_us,
                Profile::CudaGraphs => Decimal::ZERO,
            },
            kernel_floor: micro * gpu.graph_launch_us,
            link,
            latency: micro * Decimal::from(ALLREDUCE_LATENCY_US),
        },
    })
}

/// One operator's GPU seconds on one of `t` GPUs. Ceiling: `max(FLOPs / peak, bytes /
/// bandwidth)`. Expected, by kind ([`super::engine`]): a product adds its fixed time to its
/// roofline; a grouped product, decode attention, prefill attention (by its length) and the
/// cache copies use their own factors; every kernel takes at least the smallest kernel's time.
pub fn op_seconds(op: &Op, r: &Rates, t: u64, kv_heads: u64, latent: bool) -> Decimal {
    let t = Decimal::from(t.max(1));
    let expected = r.basis == Basis::Expected;
    let kernels = Decimal::from(op.kernels);
    let cache_split = if latent {
        Decimal::ONE
    } else {
        t.min(Decimal::from(kv_heads.max(1)))
    };
    let (flops, bytes) = match op.kind {
        Kind::Matmul | Kind::Grouped => (op.flops / t, (op.weight_bytes + op.other_bytes) / t),
        Kind::Attention
        | Kind::DecodeAttention
        | Kind::MaskedAttention
        | Kind::Repeat
        | Kind::Roll => (op.flops / t, op.other_bytes / cache_split),
        Kind::Elementwise => (op.flops, op.weight_bytes + op.other_bytes),
    };
    if !expected {
        return (flops / r.compute).max(bytes / r.bandwidth);
    }
    let (compute, bandwidth, fixed) = match op.kind {
        Kind::Matmul => (r.compute, r.bandwidth, engine::PRODUCT_FIXED_S * kernels),
        Kind::Grouped => (
            r.peak_compute * engine::GROUPED_COMPUTE,
            r.peak_bandwidth * engine::GROUPED_BANDWIDTH,
            engine::GROUPED_FIXED_S * kernels,
        ),
        Kind::Attention => (
            r.peak_compute * engine::prefill_attention_efficiency(op.tokens),
            r.bandwidth,
            Decimal::ZERO,
        ),
        Kind::DecodeAttention => (
            r.compute,
            r.attention_bandwidth,
            engine::DECODE_ATTENTION_FIXED_S,
        ),
        Kind::Repeat => (
            r.compute,
            r.peak_bandwidth * engine::REPEAT_COPY_BANDWIDTH,
            Decimal::ZERO,
        ),
        Kind::Roll => (
            r.compute,
            r.peak_bandwidth * engine::ROLL_COPY_BANDWIDTH,
            Decimal::ZERO,
        ),
        Kind::MaskedAttention => (
            r.peak_compute * engine::MASKED_PREFILL_ATTENTION,
            r.bandwidth,
            Decimal::ZERO,
        ),
        Kind::Elementwise => (
            r.compute,
            r.peak_bandwidth * engine::ELEMENTWISE_BANDWIDTH,
            Decimal::ZERO,
        ),
    };
    let roof = (flops / compute).max(bytes / bandwidth) + fixed;
    roof.max(r.kernel_floor * kernels)
}

/// Host seconds the step's launches take (eager): kernels × launch cost.
pub fn host_seconds(ops: &[Op], r: &Rates) -> Decimal {
    Decimal::from(ops.iter().map(|o| o.kernels).sum::<u64>()) * r.launch
}

/// A step's seconds on a tensor-parallel group of `t` GPUs: its operators' GPU time summed
/// (or, eager, the host's launches when slower), plus two all-reduces per layer of
/// `tokens·hidden·activation` bytes.
#[allow(clippy::too_many_arguments)]
pub fn step_seconds(
    ops: &[Op],
    r: &Rates,
    t: u64,
    kv_heads: u64,
    latent: bool,
    layers: u64,
    tokens: u64,
    hidden: u64,
    activation: Decimal,
) -> Decimal {
    let gpu: Decimal = ops
        .iter()
        .map(|o| op_seconds(o, r, t, kv_heads, latent))
        .sum();
    // Eager: the host launches ahead of the GPU, so the step is the slower of the two.
    gpu.max(host_seconds(ops, r)) + allreduce_seconds(r, t, layers, tokens, hidden, activation)
}

/// `2·layers` ring all-reduces of `tokens·hidden·activation` bytes over `t` GPUs.
pub fn allreduce_seconds(
    r: &Rates,
    t: u64,
    layers: u64,
    tokens: u64,
    hidden: u64,
    activation: Decimal,
) -> Decimal {
    if t <= 1 {
        return Decimal::ZERO;
    }
    let bytes = Decimal::from(tokens) * Decimal::from(hidden) * activation;
    let td = Decimal::from(t);
    let one = Decimal::TWO * (td - Decimal::ONE) / td * bytes / r.link + r.latency;
    Decimal::from(2 * layers) * one
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::timing::gpu_perf;

    fn gpu(id: &str) -> GpuPerf {
        let catalog = Catalog::embedded().unwrap();
        gpu_perf::load(None, &catalog)
            .unwrap()
            .into_iter()
            .find(|g| g.gpu == id)
            .unwrap()
    }

    fn op(kind: Kind, flops: u64, bytes: u64) -> Op {
        Op {
            name: "x",
            kind,
            flops: Decimal::from(flops),
            weight_bytes: Decimal::from(bytes),
            other_bytes: Decimal::ZERO,
            kernels: 1,
            tokens: 0,
        }
    }

    #[test]
    fn each_operator_takes_its_own_bound_and_the_step_sums_them() {
        let r = rates(&gpu("h200"), Format::Bf16, Basis::Ceiling, Profile::Eager).unwrap();
        // 989.4e12 FLOP/s, 4.8e12 B/s: one compute-bound and one bandwidth-bound operator.
        let a = op(Kind::Matmul, 989_400_000_000, 1);
        let b = op(Kind::Matmul, 1, 4_800_000_000);
        let step = step_seconds(
            &[a.clone(), b.clone()],
            &r,
            1,
            8,
            false,
            1,
            1,
            1,
            Decimal::TWO,
        );
        // 1 ms + 1 ms; the max of the totals would say 1 ms.
        assert_eq!(step, Decimal::new(2, 3));
        // Expected: slower by the factors (measured on the H200), plus each product's fixed
        // 3.6 us; the two eager launches (2 × 22 us) hide behind the GPU.
        let e = rates(&gpu("h200"), Format::Bf16, Basis::Expected, Profile::Eager).unwrap();
        let x = step_seconds(
            &[a.clone(), b.clone()],
            &e,
            1,
            8,
            false,
            1,
            1,
            1,
            Decimal::TWO,
        );
        let by_hand = Decimal::new(1, 3) / "0.774".parse::<Decimal>().unwrap()
            + Decimal::new(1, 3) / "0.854".parse::<Decimal>().unwrap()
            + Decimal::new(72, 7);
        assert_eq!(x, by_hand);
        // A host-bound step: 100 tiny kernels take 100 launches of 22 us eager, 100 × 1.6 us
        // replayed from a graph.
        let tiny = Op {
            kind: Kind::Elementwise,
            kernels: 100,
            ..op(Kind::Elementwise, 0, 1000)
        };
        let eager = step_seconds(
            std::slice::from_ref(&tiny),
            &e,
            1,
            8,
            false,
            1,
            1,
            1,
            Decimal::TWO,
        );
        assert_eq!(eager, Decimal::new(2200, 6));
        let g = rates(
            &gpu("h200"),
            Format::Bf16,
            Basis::Expected,
            Profile::CudaGraphs,
        )
        .unwrap();
        let graph = step_seconds(&[tiny], &g, 1, 8, false, 1, 1, 1, Decimal::TWO);
        assert_eq!(graph, Decimal::new(160, 6));
    }

    #[test]
    fn tensor_parallel_divides_and_pays_two_allreduces_per_layer() {
        let g = gpu("a100-80gb");
        let r = rates(&g, Format::Bf16, Basis::Ceiling, Profile::Eager).unwrap();
        let ops = [op(Kind::Matmul, 0, 2_039_000_000)];
        let one = step_seconds(&ops, &r, 1, 8, false, 1, 1, 1, Decimal::TWO);
        assert_eq!(one, Decimal::new(1, 3));
        // t = 2 over NVLink 3 (300 GB/s a direction): half the reads, plus 2 all-reduces of
        // 1000 tokens × 4096 × 2 B, each moving half of them.
        let two = step_seconds(&ops, &r, 2, 8, false, 1, 1000, 4096, Decimal::TWO);
        let ar = Decimal::TWO * Decimal::from(8_192_000u64) / Decimal::from(300_000_000_000u64);
        assert_eq!(two.round_dp(20), (Decimal::new(5, 4) + ar).round_dp(20));
        // GeForce cards have no peer-to-peer: the same transfer at half the link.
        let r4090 = rates(
            &gpu("rtx4090"),
            Format::Bf16,
            Basis::Ceiling,
            Profile::Eager,
        )
        .unwrap();
        assert_eq!(r4090.link, Decimal::from(16_000_000_000u64));
    }

    #[test]
    fn a_gpu_without_the_format_has_no_rate() {
        assert!(rates(&gpu("t4"), Format::Bf16, Basis::Ceiling, Profile::Eager).is_none());
        assert!(rates(
            &gpu("a100-40gb"),
            Format::Fp8,
            Basis::Ceiling,
            Profile::Eager
        )
        .is_none());
        assert!(rates(&gpu("t4"), Format::Fp16, Basis::Ceiling, Profile::Eager).is_some());
    }
}
