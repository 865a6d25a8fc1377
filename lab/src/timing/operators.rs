//! The model as the time model sees it: per decoder layer, its matrix products, its attention
//! and its feed-forward, then the output head; and, for one forward step, the list of
//! operators with their FLOPs and bytes.
//!
//! [`from_architecture`] is the one place that reads the plan's architecture struct; every
//! other part of [`super`] works on the [`Shape`] it returns.
//!
//! Per step (b sequences, q new tokens each after p cached ones; n = b·q tokens):
//! - a matrix product (m = n, k in, n out): `2·m·k·n` FLOPs; bytes `k·n·w` weights plus
//!   `m·k + m·n` activations at `e` bytes;
//! - attention: query-key pairs `Σ_{i=1..q} min(p + i, window)` per sequence; FLOPs per pair
//!   `2·A·(d_qk + d_v)` (scores and weighted values); latent attention in decode reads the
//!   compressed cache with the absorbed projections, `2·A·(2c + r)` per pair; bytes: the kept
//!   keys and values read once, the new ones written, queries and outputs;
//! - experts: the expected distinct experts a step touches under uniform routing,
//!   `E·(1 − (1 − k/E)^n)`, are read; FLOPs `2·n·k·3·H·I_e`;
//! - norms, rotary embedding, residual adds and the gated activation as bytes only:
//!   `(10·H + 2·(A + K)·d + 3·I)·e` per token and layer (two norms read and write H, two
//!   residual adds read 2H and write H, rotary reads and writes queries and keys, SiLU·mul
//!   reads 2I and writes I);
//! - the output head on the last position of each sequence (`m = b`), `k = H`, `n = V`.
//!
//! That list is the ideal engine's ([`Engine::Ideal`], the ceiling's). [`Engine::Transformers`]
//! (the expected figures) lists what transformers runs instead ([`super::engine`]): one
//! product per projection matrix, decode attention over the whole static cache with the keys
//! and values repeated to every query head, the window's roll, the decompressed latent cache,
//! two grouped expert products and the counted elementwise kernels and bytes.

use super::engine::{self, Engine};
use super::Architecture;
use crate::plan::family::{Attention as LayerAttention, FeedForward as LayerFeedForward};
use rust_decimal::Decimal;

/// Kernels of one decoder layer besides its matrix products and attention in the ideal
/// engine's list: 26 (two norms of 6, rotary 10, two residual adds, SiLU and multiply, two
/// cache writes). The ceiling has no launch cost, so it only labels the operators; the
/// expected figures count transformers' kernels ([`engine::kernels_per_layer`]).
pub const ELEMENTWISE_KERNELS_PER_LAYER: u64 = 26;

/// A weight matrix: `k` inputs, `n` outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Linear {
    /// Role, for reports.
    pub name: &'static str,
    /// Input width.
    pub k: u64,
    /// Output width.
    pub n: u64,
}

/// One layer's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attention {
    /// Query heads.
    pub heads: u64,
    /// Key/value heads (1 for latent attention: one shared latent).
    pub kv_heads: u64,
    /// Query/key width per head.
    pub qk_dim: u64,
    /// Value width per head.
    pub v_dim: u64,
    /// Tokens kept, when the layer slides.
    pub window: Option<u64>,
    /// Latent attention: (compressed rank c, rotary width r).
    pub latent: Option<(u64, u64)>,
}

/// One layer's feed-forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedForward {
    /// Gated dense MLP of this intermediate size.
    Dense(u64),
    /// Mixture of experts.
    Experts {
        /// Routed experts.
        routed: u64,
        /// Experts per token.
        per_token: u64,
        /// One expert's intermediate size.
        intermediate: u64,
        /// Shared experts' combined intermediate size (0 when none).
        shared: u64,
    },
}

/// One decoder layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Attention-side matrices (query, key/value, output; latent paths).
    pub attention_linears: Vec<Linear>,
    /// The attention itself.
    pub attention: Attention,
    /// The feed-forward.
    pub feed_forward: FeedForward,
}

/// The model's shape for the time model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Residual width H.
    pub hidden: u64,
    /// Vocabulary V.
    pub vocab: u64,
    /// Decoder layers in order.
    pub layers: Vec<Layer>,
    /// Key/value heads of the model (tensor parallel splits the cache by `min(t, K)`).
    pub kv_heads: u64,
    /// Query heads.
    pub heads: u64,
    /// Whether the engine runs queries/keys/values and gate/up as one product each (Phi-3's
    /// `qkv_proj` and `gate_up_proj`), rather than one product per matrix.
    pub fused_projections: bool,
    /// RMSNorms of width H per decoder layer.
    pub norms: u64,
    /// Whether queries and keys have their own RMSNorm (Qwen3, Gemma 3).
    pub qk_norm: bool,
}

/// The adapter: the plan's [`Architecture`] as per-layer operators.
pub fn from_architecture(arch: &Architecture) -> Shape {
    let h = arch.hidden;
    let layers = arch
        .layer_kinds
        .iter()
        .map(|kind| {
            let window = match kind.attention {
                // A chunk bounds the keys a query attends to as a window does.
                LayerAttention::Sliding(w) | LayerAttention::Chunked(w) => Some(w),
                LayerAttention::Full | LayerAttention::Latent => None,
            };
            let latent = match kind.attention {
                LayerAttention::Latent => arch.latent,
                _ => None,
            };
            let (attention_linears, attention) = match &latent {
                Some(l) => {
                    let qk = l.qk_nope_head_dim + l.qk_rope_head_dim;
                    let mut m = match l.q_lora_rank {
                        Some(q) => vec![
                            Linear {
                                name: "q_a",
                                k: h,
                                n: q,
                            },
                            Linear {
                                name: "q_b",
                                k: q,
                                n: arch.heads * qk,
                            },
                        ],
                        None => vec![Linear {
                            name: "q",
                            k: h,
                            n: arch.heads * qk,
                        }],
                    };
                    m.push(Linear {
                        name: "kv_a",
                        k: h,
                        n: l.kv_lora_rank + l.qk_rope_head_dim,
                    });
                    m.push(Linear {
                        name: "kv_b",
                        k: l.kv_lora_rank,
                        n: arch.heads * (l.qk_nope_head_dim + l.v_head_dim),
                    });
                    m.push(Linear {
                        name: "o",
                        k: arch.heads * l.v_head_dim,
                        n: h,
                    });
                    (
                        m,
                        Attention {
                            heads: arch.heads,
                            kv_heads: 1,
                            qk_dim: qk,
                            v_dim: l.v_head_dim,
                            window,
                            latent: Some((l.kv_lora_rank, l.qk_rope_head_dim)),
                        },
                    )
                }
                None => (
                    vec![
                        Linear {
                            name: "qkv",
                            k: h,
                            n: (arch.heads + 2 * arch.kv_heads) * arch.head_dim,
                        },
                        Linear {
                            name: "o",
                            k: arch.heads * arch.head_dim,
                            n: h,
                        },
                    ],
                    Attention {
                        heads: arch.heads,
                        kv_heads: arch.kv_heads,
                        qk_dim: arch.head_dim,
                        v_dim: arch.head_dim,
                        window,
                        latent: None,
                    },
                ),
            };
            let feed_forward = match (kind.feed_forward, &arch.experts) {
                (LayerFeedForward::Experts, Some(x)) => FeedForward::Experts {
                    routed: x.routed,
                    per_token: x.per_token,
                    intermediate: x.intermediate,
                    shared: x.shared_intermediate,
                },
                _ => FeedForward::Dense(arch.intermediate),
            };
            Layer {
                attention_linears,
                attention,
                feed_forward,
            }
        })
        .collect();
    Shape {
        hidden: h,
        vocab: arch.vocab,
        layers,
        kv_heads: arch.kv_heads,
        heads: arch.heads,
        fused_projections: arch.fused_gate_up,
        norms: arch.norms_per_layer,
        qk_norm: arch.qk_norm,
    }
}

/// What an operator is, for tensor parallel and the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A matrix product (weights split over the tensor-parallel GPUs).
    Matmul,
    /// Attention over the cache (heads split; the cache by `min(t, K)`).
    Attention,
    /// Attention of one new token per sequence over a grouped-query cache (decode): read at
    /// the engine's decode-attention efficiency in the expected figure.
    DecodeAttention,
    /// Norms and elementwise work (kept whole on every GPU).
    Elementwise,
    /// Grouped expert products (`F.grouped_mm`): the experts a step touches, at the grouped
    /// factors of [`super::engine`].
    Grouped,
    /// `repeat_kv`'s copy of the cached keys and values to every query head (heads split
    /// like attention).
    Repeat,
    /// A full sliding-window layer's roll of its window (split like attention).
    Roll,
    /// Prefill attention against an explicit boolean mask (a sliding window the prompt has
    /// reached): the full square of queries × keys at [`engine::MASKED_PREFILL_ATTENTION`];
    /// its `flops` are those of that square at [`engine::MASKED_PAIR_WIDTH`] (split like
    /// attention).
    MaskedAttention,
}

/// One operator of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Role (`qkv`, `attention`, `experts`, `head`...).
    pub name: &'static str,
    /// Kind.
    pub kind: Kind,
    /// Floating-point operations.
    pub flops: Decimal,
    /// Weight bytes read.
    pub weight_bytes: Decimal,
    /// Other bytes read and written (activations, cache).
    pub other_bytes: Decimal,
    /// Kernels launched.
    pub kernels: u64,
    /// Prefill attention: the keys per query at the longest (`min(p + q, window)`), which
    /// picks its efficiency; 0 otherwise.
    pub tokens: u64,
}

/// Byte widths of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Widths {
    /// Bytes per decoder-matrix weight (0.515625 for int4 with scales...).
    pub matrix: Decimal,
    /// Bytes per output-head weight (16-bit even when the decoder is quantized).
    pub head: Decimal,
    /// Bytes per activation element.
    pub activation: Decimal,
    /// Bytes per cached key/value element.
    pub kv: Decimal,
}

/// One forward step: `batch` sequences, `new` tokens each after `past` cached ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Sequences.
    pub batch: u64,
    /// New tokens per sequence (the prompt in prefill, 1 in decode).
    pub new: u64,
    /// Tokens already cached per sequence.
    pub past: u64,
    /// Length of the static cache the engine attends over (`max_cache_len`, at least
    /// `past + new`): transformers' decode reads all of it; the ideal engine reads
    /// `past + new`.
    pub cache: u64,
}

/// `Σ_{i=1..q} min(p + i, w)`: the keys each new query attends to, summed.
pub fn pairs(past: u64, new: u64, window: Option<u64>) -> Decimal {
    let tri = |a: u64, b: u64| {
        // Σ_{x=a..b} x
        if b < a {
            Decimal::ZERO
        } else {
            (Decimal::from(a) + Decimal::from(b)) * Decimal::from(b - a + 1) / Decimal::TWO
        }
    };
    match window {
        None => tri(past + 1, past + new),
        Some(w) => {
            let last_below = w.min(past + new);
            let under = if past < last_below {
                tri(past + 1, last_below)
            } else {
                Decimal::ZERO
            };
            let capped = (past + new).saturating_sub(last_below.max(past));
            under + Decimal::from(capped) * Decimal::from(w)
        }
    }
}

/// `x^n` for a decimal `0 <= x <= 1` by squaring (results under 10^-28 round to 0).
pub fn power(x: Decimal, mut n: u64) -> Decimal {
    let mut base = x;
    let mut out = Decimal::ONE;
    while n > 0 {
        if n & 1 == 1 {
            out *= base;
        }
        base *= base;
        n >>= 1;
    }
    out
}

/// Expected distinct experts `E·(1 − (1 − k/E)^n)` that n tokens touch under uniform routing.
pub fn distinct_experts(routed: u64, per_token: u64, tokens: u64) -> Decimal {
    let e = Decimal::from(routed);
    e * (Decimal::ONE - power(Decimal::ONE - Decimal::from(per_token) / e, tokens))
}

fn matmul(name: &'static str, m: u64, k: u64, n: u64, w: &Widths) -> Op {
    let (m, k, n) = (Decimal::from(m), Decimal::from(k), Decimal::from(n));
    Op {
        name,
        kind: Kind::Matmul,
        flops: Decimal::TWO * m * k * n,
        weight_bytes: k * n * w.matrix,
        other_bytes: (m * k + m * n) * w.activation,
        kernels: 1,
        tokens: 0,
    }
}

/// The operators of one step, in order, for the whole model, as `engine` runs them.
pub fn step_ops(shape: &Shape, step: Step, w: &Widths, engine: Engine) -> Vec<Op> {
    match engine {
        Engine::Ideal => ideal_ops(shape, step, w),
        Engine::Transformers => transformers_ops(shape, step, w),
    }
}

fn ideal_ops(shape: &Shape, step: Step, w: &Widths) -> Vec<Op> {
    let n = step.batch * step.new;
    let b = Decimal::from(step.batch);
    let h = shape.hidden;
    let mut ops = Vec::new();
    ops.push(Op {
        name: "embedding",
        kind: Kind::Elementwise,
        flops: Decimal::ZERO,
        weight_bytes: Decimal::ZERO,
        other_bytes: Decimal::TWO * Decimal::from(n) * Decimal::from(h) * w.activation,
        kernels: 1,
        tokens: 0,
    });
    for layer in &shape.layers {
        for l in &layer.attention_linears {
            ops.push(matmul(l.name, n, l.k, l.n, w));
        }
        let a = &layer.attention;
        let heads = Decimal::from(a.heads);
        let p = pairs(step.past, step.new, a.window);
        let kept = Decimal::from(match a.window {
            Some(win) => (step.past + step.new).min(win),
            None => step.past + step.new,
        });
        let decode = step.new == 1;
        let (per_pair, cache_width, read_width) = match a.latent {
            // Decode: absorbed projections over the compressed cache; prefill: keys and
            // values decompressed by kv_b, read at activation width.
            Some((c, r)) if decode => (
                Decimal::TWO * heads * Decimal::from(2 * c + r),
                Decimal::from(c + r) * w.kv,
                Decimal::from(c + r) * w.kv,
            ),
            Some((c, r)) => (
                Decimal::TWO * heads * Decimal::from(a.qk_dim + a.v_dim),
                Decimal::from(c + r) * w.kv,
                heads * Decimal::from(a.qk_dim + a.v_dim) * w.activation,
            ),
            None => {
                let kv = Decimal::from(a.kv_heads * (a.qk_dim + a.v_dim));
                (
                    Decimal::TWO * heads * Decimal::from(a.qk_dim + a.v_dim),
                    kv * w.kv,
                    kv * w.kv,
                )
            }
        };
        let q_and_out = Decimal::from(n) * heads * Decimal::from(a.qk_dim + a.v_dim) * w.activation;
        ops.push(Op {
            name: "attention",
            // transformers repeats grouped keys and values to every query head before SDPA
            // in decode; attention with as many key/value heads as query heads does not.
            kind: if decode && a.latent.is_none() && a.kv_heads < a.heads {
                Kind::DecodeAttention
            } else {
                Kind::Attention
            },
            flops: b * p * per_pair,
            weight_bytes: Decimal::ZERO,
            other_bytes: b * kept * read_width + Decimal::from(n) * cache_width + q_and_out,
            kernels: 1,
            tokens: 0,
        });
        let intermediate = match layer.feed_forward {
            FeedForward::Dense(i) => {
                ops.push(matmul("gate_up", n, h, 2 * i, w));
                ops.push(matmul("down", n, i, h, w));
                i
            }
            FeedForward::Experts {
                routed,
                per_token,
                intermediate,
                shared,
            } => {
                ops.push(matmul("router", n, h, routed, w));
                let touched = distinct_experts(routed, per_token, n);
                let assignments = Decimal::from(n) * Decimal::from(per_token);
                let (hd, id) = (Decimal::from(h), Decimal::from(intermediate));
                ops.push(Op {
                    name: "experts",
                    kind: Kind::Matmul,
                    flops: Decimal::TWO * assignments * Decimal::from(3) * hd * id,
                    weight_bytes: touched * Decimal::from(3) * hd * id * w.matrix,
                    other_bytes: assignments
                        * (Decimal::TWO * hd + Decimal::from(3) * id)
                        * w.activation,
                    kernels: 3,
                    tokens: 0,
                });
                if shared > 0 {
                    ops.push(matmul("shared_gate_up", n, h, 2 * shared, w));
                    ops.push(matmul("shared_down", n, shared, h, w));
                }
                intermediate * per_token + shared
            }
        };
        let per_token = 10 * h + 2 * (a.heads + a.kv_heads) * a.qk_dim + 3 * intermediate;
        ops.push(Op {
            name: "elementwise",
            kind: Kind::Elementwise,
            flops: Decimal::ZERO,
            weight_bytes: Decimal::ZERO,
            other_bytes: Decimal::from(n) * Decimal::from(per_token) * w.activation,
            kernels: ELEMENTWISE_KERNELS_PER_LAYER,
            tokens: 0,
        });
    }
    let mut head = matmul("head", step.batch, h, shape.vocab, w);
    head.weight_bytes = Decimal::from(h) * Decimal::from(shape.vocab) * w.head;
    ops.push(head);
    ops
}

/// The operators of one step as transformers runs them ([`super::engine`]): one product per
/// projection matrix (fused only where the family fuses them), decode attention over the
/// whole static cache with keys and values repeated to every query head, the window rolled
/// once full, the decompressed keys and values of latent attention, grouped expert products,
/// and the layer's elementwise kernels at their counted bytes.
fn transformers_ops(shape: &Shape, step: Step, w: &Widths) -> Vec<Op> {
    let n = step.batch * step.new;
    let nd = Decimal::from(n);
    let b = Decimal::from(step.batch);
    let h = shape.hidden;
    let elementwise = |name: &'static str, bytes: Decimal, kernels: u64| Op {
        name,
        kind: Kind::Elementwise,
        flops: Decimal::ZERO,
        weight_bytes: Decimal::ZERO,
        other_bytes: bytes,
        kernels,
        tokens: 0,
    };
    // The embedding, and the step's kernels outside its layers but the final norm and the
    // head ([`engine::STEP_KERNELS`]).
    let mut ops = vec![elementwise(
        "embedding",
        Decimal::TWO * nd * Decimal::from(h) * w.activation,
        engine::STEP_KERNELS - 9,
    )];
    for layer in &shape.layers {
        let a = &layer.attention;
        let fused = shape.fused_projections && a.latent.is_none();
        if fused || a.latent.is_some() {
            for l in &layer.attention_linears {
                // Decode with latent attention: `kv_b` runs over the whole cache (below).
                if l.name == "kv_b" && step.new == 1 {
                    continue;
                }
                ops.push(matmul(l.name, n, l.k, l.n, w));
            }
        } else {
            let d = a.qk_dim;
            ops.push(matmul("q", n, h, a.heads * d, w));
            ops.push(matmul("k", n, h, a.kv_heads * d, w));
            ops.push(matmul("v", n, h, a.kv_heads * a.v_dim, w));
            ops.push(matmul("o", n, a.heads * a.v_dim, h, w));
        }
        // Latent attention: transformers caches the latent and decompresses the keys and
        // values of the whole cache every step, one per query head, which SDPA reads;
        // otherwise the grouped cache.
        let (kv_heads, width) = match a.latent {
            Some(_) => (a.heads, a.qk_dim + a.v_dim),
            None => (a.kv_heads, a.qk_dim + a.v_dim),
        };
        let heads = Decimal::from(a.heads);
        let per_head = Decimal::from(width) * w.kv;
        let q_and_out = nd * heads * Decimal::from(a.qk_dim + a.v_dim) * w.activation;
        let written = match a.latent {
            Some((c, r)) => nd * Decimal::from(c + r) * w.kv,
            None => nd * Decimal::from(kv_heads) * per_head,
        };
        if step.new == 1 {
            let cache = step.cache.max(step.past + 1);
            let kept = Decimal::from(a.window.map_or(cache, |win| cache.min(win)));
            if let Some((c, r)) = a.latent {
                // `kv_b_proj` over every cached latent, then the split keys and values copied
                // into the keys (`cat` with the rotary part) and a contiguous value tensor:
                // read and written once each (`super::engine`'s module text).
                let rows = step.batch * cache;
                let out = a.heads * (a.qk_dim - r + a.v_dim);
                ops.push(matmul("kv_b", rows, c, out, w));
                ops.push(elementwise(
                    "decompress_copies",
                    Decimal::TWO
                        * Decimal::from(rows)
                        * heads
                        * Decimal::from(a.qk_dim + a.v_dim)
                        * w.activation,
                    2,
                ));
            }
            ops.push(Op {
                name: "attention",
                kind: Kind::DecodeAttention,
                flops: b * kept * Decimal::TWO * heads * Decimal::from(width),
                weight_bytes: Decimal::ZERO,
                other_bytes: b * kept * heads * per_head + written + q_and_out,
                kernels: 1,
                tokens: 0,
            });
            if kv_heads < a.heads {
                ops.push(Op {
                    name: "repeat_kv",
                    kind: Kind::Repeat,
                    flops: Decimal::ZERO,
                    weight_bytes: Decimal::ZERO,
                    other_bytes: b * kept * Decimal::from(kv_heads + a.heads) * per_head,
                    kernels: 2,
                    tokens: 0,
                });
            }
            if let Some(win) = a.window.filter(|win| step.past + 1 > *win) {
                ops.push(Op {
                    name: "roll",
                    kind: Kind::Roll,
                    flops: Decimal::ZERO,
                    weight_bytes: Decimal::ZERO,
                    other_bytes: Decimal::from(4)
                        * b
                        * Decimal::from(win)
                        * Decimal::from(kv_heads)
                        * per_head,
                    kernels: 4,
                    tokens: 0,
                });
            }
        } else if let Some(win) = a.window.filter(|win| step.past + step.new >= *win) {
            // The prompt reached the window: transformers passes an explicit mask, and SDPA
            // attends every query to every key of the prompt and the cache.
            let total = step.past + step.new;
            ops.push(Op {
                name: "attention",
                kind: Kind::MaskedAttention,
                flops: b
                    * Decimal::from(step.new)
                    * Decimal::from(total)
                    * heads
                    * Decimal::from(4 * engine::MASKED_PAIR_WIDTH),
                weight_bytes: Decimal::ZERO,
                other_bytes: b * Decimal::from(total.min(win)) * Decimal::from(kv_heads) * per_head
                    + written
                    + q_and_out,
                kernels: 1,
                tokens: total,
            });
        } else {
            let total = step.past + step.new;
            let kept = a.window.map_or(total, |win| total.min(win));
            ops.push(Op {
                name: "attention",
                kind: Kind::Attention,
                flops: b
                    * pairs(step.past, step.new, a.window)
                    * Decimal::TWO
                    * heads
                    * Decimal::from(a.qk_dim + a.v_dim),
                weight_bytes: Decimal::ZERO,
                other_bytes: b * Decimal::from(kept) * Decimal::from(kv_heads) * per_head
                    + written
                    + q_and_out,
                kernels: 1,
                tokens: kept,
            });
        }
        let (intermediate, routing, routed_bytes) = match layer.feed_forward {
            FeedForward::Dense(i) => {
                if fused {
                    ops.push(matmul("gate_up", n, h, 2 * i, w));
                } else {
                    ops.push(matmul("gate", n, h, i, w));
                    ops.push(matmul("up", n, h, i, w));
                }
                ops.push(matmul("down", n, i, h, w));
                (i, 0, Decimal::ZERO)
            }
            FeedForward::Experts {
                routed,
                per_token,
                intermediate,
                shared,
            } => {
                ops.push(matmul("router", n, h, routed, w));
                let touched = distinct_experts(routed, per_token, n);
                let assignments = nd * Decimal::from(per_token);
                let (hd, id) = (Decimal::from(h), Decimal::from(intermediate));
                let grouped = |name, out: Decimal, inp: Decimal| Op {
                    name,
                    kind: Kind::Grouped,
                    flops: Decimal::TWO * assignments * inp * out,
                    weight_bytes: touched * inp * out * w.matrix,
                    other_bytes: assignments * (inp + out) * w.activation,
                    kernels: 1,
                    tokens: 0,
                };
                ops.push(grouped("experts_gate_up", Decimal::TWO * id, hd));
                ops.push(grouped("experts_down", hd, id));
                if shared > 0 {
                    ops.push(matmul("shared_gate", n, h, shared, w));
                    ops.push(matmul("shared_up", n, h, shared, w));
                    ops.push(matmul("shared_down", n, shared, h, w));
                }
                (
                    intermediate * per_token + shared,
                    engine::EXPERT_ROUTING_KERNELS,
                    assignments
                        * Decimal::from(engine::routing_bytes_per_assignment(h, intermediate)),
                )
            }
        };
        let per_token = engine::elementwise_bytes_per_token(
            h,
            shape.norms,
            shape.qk_norm,
            a.heads * a.qk_dim,
            kv_heads * a.qk_dim,
            intermediate,
        );
        // The counted bytes are for 2-byte activations.
        ops.push(elementwise(
            "elementwise",
            (nd * Decimal::from(per_token) + routed_bytes) * w.activation / Decimal::TWO,
            engine::kernels_per_layer(shape.norms, shape.qk_norm)
                + routing
                + if step.new == 1 {
                    engine::DECODE_EXTRA_KERNELS
                } else {
                    0
                },
        ));
    }
    // The final RMSNorm, then the head on the last position of each sequence.
    ops.push(elementwise(
        "final_norm",
        nd * Decimal::from(36 * h) * w.activation / Decimal::TWO,
        8,
    ));
    let mut head = matmul("head", step.batch, h, shape.vocab, w);
    head.weight_bytes = Decimal::from(h) * Decimal::from(shape.vocab) * w.head;
    ops.push(head);
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama8b() -> Architecture {
        crate::timing::parse_config(include_str!(
            "../../../examples/models/llama-3.1-8b/config.json"
        ))
    }

    #[test]
    fn pairs_count_causal_and_windowed_attention() {
        // Prefill of 4 tokens, full: 1 + 2 + 3 + 4.
        assert_eq!(pairs(0, 4, None), Decimal::from(10));
        // Window 2: 1 + 2 + 2 + 2.
        assert_eq!(pairs(0, 4, Some(2)), Decimal::from(7));
        // Decode after 9 cached: 10 keys, or the window.
        assert_eq!(pairs(9, 1, None), Decimal::from(10));
        assert_eq!(pairs(9, 1, Some(4)), Decimal::from(4));
        // Brute force over small cases.
        for past in 0..6u64 {
            for new in 1..6u64 {
                for w in [None, Some(1), Some(3), Some(7)] {
                    let brute: u64 = (1..=new)
                        .map(|i| w.map_or(past + i, |w| (past + i).min(w)))
                        .sum();
                    assert_eq!(
                        pairs(past, new, w),
                        Decimal::from(brute),
                        "{past} {new} {w:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn distinct_experts_follow_uniform_routing() {
        // One token touches exactly k experts; many tokens touch nearly all.
        assert_eq!(distinct_experts(8, 2, 1), Decimal::from(2));
        // Two tokens: 8·(1 − (3/4)^2) = 3.5.
        assert_eq!(distinct_experts(8, 2, 2), "3.5".parse().unwrap());
        assert!(distinct_experts(64, 6, 10_000) > "63.9999".parse().unwrap());
        assert_eq!(distinct_experts(64, 64, 3), Decimal::from(64));
    }

    #[test]
    fn llama_decode_step_reads_every_weight_once_and_its_cache() {
        let shape = from_architecture(&llama8b());
        let w = Widths {
            matrix: Decimal::TWO,
            head: Decimal::TWO,
            activation: Decimal::TWO,
            kv: Decimal::TWO,
        };
        let ops = step_ops(
            &shape,
            Step {
                batch: 1,
                new: 1,
                past: 1023,
                cache: 1024,
            },
            &w,
            Engine::Ideal,
        );
        let weights: Decimal = ops.iter().map(|o| o.weight_bytes).sum();
        // Parameters without the embedding (a gather, not a read of the table): 8030261248 −
        // 128256·4096 = 7504924672, minus the norms (65 × 4096 = 266240) that stay with
        // the elementwise bytes.
        assert_eq!(weights, Decimal::from(2u64 * (7_504_924_672 - 266_240)));
        // 2·params FLOPs for the matrices; attention 4·A·d per pair, 1024 keys.
        let attention: Decimal = ops
            .iter()
            .filter(|o| o.kind == Kind::DecodeAttention)
            .map(|o| o.flops)
            .sum();
        assert_eq!(attention, Decimal::from(32u64 * 4 * 32 * 128 * 1024));
        let cache: Decimal = ops
            .iter()
            .filter(|o| o.kind == Kind::DecodeAttention)
            .map(|o| o.other_bytes)
            .sum();
        // 1024 tokens × 131072 B/token read, one new token written, queries and outputs.
        assert_eq!(
            cache,
            Decimal::from(1024u64 * 131_072 + 131_072 + 32 * 32 * 256 * 2)
        );
    }

    fn widths() -> Widths {
        Widths {
            matrix: Decimal::TWO,
            head: Decimal::TWO,
            activation: Decimal::TWO,
            kv: Decimal::TWO,
        }
    }

    #[test]
    fn a_mixture_of_experts_reads_the_experts_a_step_touches() {
        let arch = crate::timing::parse_config(include_str!(
            "../../../examples/models/mixtral-8x7b/config.json"
        ));
        let shape = from_architecture(&arch);
        let read = |batch: u64| -> Decimal {
            step_ops(
                &shape,
                Step {
                    batch,
                    new: 1,
                    past: 100,
                    cache: 101,
                },
                &widths(),
                Engine::Ideal,
            )
            .iter()
            .filter(|o| o.name == "experts")
            .map(|o| o.weight_bytes)
            .sum()
        };
        let one_expert = Decimal::from(3u64 * 4096 * 14336 * 2);
        // One token: 2 of 8 experts per layer, 32 layers.
        assert_eq!(read(1), Decimal::from(2 * 32) * one_expert);
        // Two tokens: 3.5 expected per layer.
        assert_eq!(
            read(2),
            Decimal::new(35, 1) * Decimal::from(32) * one_expert
        );
    }

    #[test]
    fn latent_attention_decode_reads_the_compressed_cache() {
        let arch = crate::timing::parse_config(include_str!(
            "../../../examples/models/deepseek-v2-lite/config.json"
        ));
        let l = arch.latent.unwrap();
        let shape = from_architecture(&arch);
        let ops = step_ops(
            &shape,
            Step {
                batch: 1,
                new: 1,
                past: 999,
                cache: 1000,
            },
            &widths(),
            Engine::Ideal,
        );
        let att: Vec<&Op> = ops.iter().filter(|o| o.name == "attention").collect();
        assert_eq!(att.len() as u64, arch.layers);
        // Per layer: 1000 tokens of (c + r) 16-bit values read, one written, queries and
        // outputs; FLOPs 2·A·(2c + r) per key.
        let width = l.kv_lora_rank + l.qk_rope_head_dim;
        let qk = l.qk_nope_head_dim + l.qk_rope_head_dim;
        let q_and_out = arch.heads * (qk + l.v_head_dim) * 2;
        assert_eq!(
            att[0].other_bytes,
            Decimal::from(1000 * width * 2 + width * 2 + q_and_out)
        );
        assert_eq!(
            att[0].flops,
            Decimal::from(1000 * 2 * arch.heads * (2 * l.kv_lora_rank + l.qk_rope_head_dim))
        );
        assert_eq!(att[0].kind, Kind::Attention);
    }

    #[test]
    fn a_prompt_that_reaches_the_window_attends_the_full_square_in_transformers() {
        let shape = from_architecture(&crate::timing::parse_config(include_str!(
            "../../../examples/models/mistral-7b-v0.1/config.json"
        )));
        let prefill = |t: u64| {
            let step = Step {
                batch: 2,
                new: t,
                past: 0,
                cache: t + 1,
            };
            step_ops(&shape, step, &widths(), Engine::Transformers)
                .into_iter()
                .filter(|o| o.name == "attention")
                .collect::<Vec<Op>>()
        };
        // Window 4096: below it the causal kernel over the triangle; from it on, every query
        // against every key at a 128-wide head's FLOPs (4·128 per pair and head).
        for t in [100u64, 4095] {
            let ops = prefill(t);
            assert_eq!(ops.len(), 32);
            assert!(ops.iter().all(|o| o.kind == Kind::Attention), "{t}");
            assert_eq!(
                ops[0].flops,
                Decimal::TWO * pairs(0, t, Some(4096)) * Decimal::from(2 * 32 * 256u64)
            );
        }
        for t in [4096u64, 10_000] {
            let ops = prefill(t);
            assert!(ops.iter().all(|o| o.kind == Kind::MaskedAttention), "{t}");
            assert_eq!(ops[0].flops, Decimal::from(2 * t * t * 32 * 512));
            assert_eq!(ops[0].tokens, t);
        }
        // Decode never takes the masked path.
        let step = Step {
            batch: 1,
            new: 1,
            past: 9000,
            cache: 9001,
        };
        assert!(step_ops(&shape, step, &widths(), Engine::Transformers)
            .iter()
            .all(|o| o.kind != Kind::MaskedAttention));
    }

    #[test]
    fn transformers_decompresses_the_whole_latent_cache_every_decode_step() {
        let arch = crate::timing::parse_config(include_str!(
            "../../../examples/models/deepseek-v2-lite/config.json"
        ));
        let shape = from_architecture(&arch);
        for (batch, cache) in [(1u64, 512u64), (64, 4096)] {
            let step = Step {
                batch,
                new: 1,
                past: cache - 1,
                cache,
            };
            let ops = step_ops(&shape, step, &widths(), Engine::Transformers);
            let kv_b: Vec<&Op> = ops.iter().filter(|o| o.name == "kv_b").collect();
            assert_eq!(kv_b.len() as u64, arch.layers);
            // kv_b_proj (512 → 16 × (128 + 128)) over every cached latent of every sequence.
            let rows = Decimal::from(batch * cache);
            assert_eq!(
                kv_b[0].flops,
                Decimal::TWO * rows * Decimal::from(512u64 * 4096)
            );
            // The decompressed keys (192 wide) and values (128) written and read once.
            let copies: Vec<&Op> = ops
                .iter()
                .filter(|o| o.name == "decompress_copies")
                .collect();
            assert_eq!(
                copies[0].other_bytes,
                rows * Decimal::from(2 * 16 * 320 * 2u64)
            );
            // The cache write is the latent: 576 values per token.
            let att = ops.iter().find(|o| o.name == "attention").unwrap();
            let read = rows * Decimal::from(16 * 320 * 2u64);
            let q_and_out = Decimal::from(batch * 16 * 320 * 2);
            assert_eq!(
                att.other_bytes,
                read + Decimal::from(batch * 576 * 2) + q_and_out
            );
        }
        // A prefill runs kv_b on the prompt's tokens only, as a product per layer.
        let step = Step {
            batch: 1,
            new: 1000,
            past: 0,
            cache: 1001,
        };
        let ops = step_ops(&shape, step, &widths(), Engine::Transformers);
        assert!(ops.iter().all(|o| o.name != "decompress_copies"));
        let kv_b = ops.iter().find(|o| o.name == "kv_b").unwrap();
        assert_eq!(kv_b.flops, Decimal::from(2 * 1000 * 512 * 4096u64));
    }

    #[test]
    fn sliding_layers_stop_reading_past_their_window() {
        let arch = crate::timing::parse_config(include_str!(
            "../../../examples/models/gemma-2-2b/config.json"
        ));
        let shape = from_architecture(&arch);
        let ops = step_ops(
            &shape,
            Step {
                batch: 1,
                new: 1,
                past: 20_000,
                cache: 20_001,
            },
            &widths(),
            Engine::Ideal,
        );
        let kept: Vec<Decimal> = ops
            .iter()
            .filter(|o| matches!(o.kind, Kind::Attention | Kind::DecodeAttention))
            .map(|o| o.flops)
            .collect();
        // Gemma 2 alternates sliding (4096) and full layers: the sliding ones attend 4096 keys.
        let per_key = Decimal::from(2 * arch.heads * 2 * arch.head_dim);
        assert_eq!(kept[0], per_key * Decimal::from(4096));
        assert_eq!(kept[1], per_key * Decimal::from(20_001));
    }
}
