//! Per catalog GPU model: how many GPUs a plan needs and what the package costs.
//!
//! - usable memory per GPU = the GPU's memory ([`super::gpu_memory`]) minus the runtime
//!   reserve [`RUNTIME_RESERVE_BYTES`];
//! - tensor-parallel degrees t tried in increasing order: t divides the attention heads, and
//!   either t divides the key/value heads or they divide t (key/value heads are then
//!   replicated), t at most [`MAX_DEGREE`];
//! - per GPU: `ceil(weights / t)` (and likewise gradients, master weights, optimizer states),
//!   KV cache `/ min(t, key/value heads)` (latent attention caches are replicated), the
//!   prefill workspace's head and intermediate parts split as engines split them
//!   ([`Workspace`]), the rest of it and training activations whole;
//! - the smallest t whose per-GPU need fits the usable memory is the GPU count; lots =
//!   `ceil(t / gpus_per_lot)`, priced by [`crate::pricing::quote`], as `lab price` does;
//! - [`Fixed`] (`--tensor-parallel N`, `--gpus N`): only that degree is tried, or only
//!   packages of exactly N GPUs (whole lots) with the degrees dividing N.

use super::family::Architecture;
use super::gpu_memory::GpuMemory;
use crate::catalog::Catalog;
use crate::compare::lots_needed;
use crate::pricing::{self, Quote};
use crate::Result;
use rust_decimal::Decimal;
use serde::Serialize;

/// Memory kept back on every GPU for the CUDA context, kernels, library workspaces and
/// allocator fragmentation: 1 GiB. The H200 measurements (`examples/h200/plan/`) show the
/// allocator's peak stays below the total minus this.
pub const RUNTIME_RESERVE_BYTES: u64 = 1 << 30;

/// Largest tensor-parallel degree tried.
pub const MAX_DEGREE: u64 = 64;

/// The head counts that decide how a model shards: from its [`Architecture`], or from the
/// standard config fields of a model whose layout is not known ([`super::unknown`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heads {
    /// Attention heads; 0 when not known (every degree is then tried: a lower bound).
    pub attention: u64,
    /// Key/value heads; 0 when not known (the cache then splits by the degree).
    pub key_value: u64,
    /// Latent attention: one cache replicated on every GPU, heads alone constrain t.
    pub latent: bool,
}

impl From<&Architecture> for Heads {
    fn from(arch: &Architecture) -> Heads {
        Heads {
            attention: arch.heads,
            key_value: arch.kv_heads,
            latent: arch.latent.is_some(),
        }
    }
}

/// What the user fixed instead of the smallest setup that fits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fixed {
    /// `--tensor-parallel N`: the only degree tried (one of [`degrees`], checked by
    /// [`check_fixed`]).
    pub tensor_parallel: Option<u64>,
    /// `--gpus N`: each package buys exactly N GPUs (whole lots), the degree dividing N.
    pub gpus: Option<u64>,
}

/// Refuses a fixed degree the engines cannot shard `arch` by, naming why: t must divide the
/// attention heads, and the key/value heads must divide t or t divide them (vLLM's
/// `tensor_parallel_size` rule, `vllm/config` `verify_with_parallel_config`: heads divisible
/// by the degree; key/value heads replicated when fewer than the degree); and a degree that
/// does not divide `--gpus`.
///
/// # Errors
/// [`crate::Error::Usage`] naming the heads (or `--gpus`) and listing the degrees allowed.
pub fn check_fixed(heads: impl Into<Heads>, fixed: &Fixed) -> Result<()> {
    let heads = heads.into();
    let allowed = degrees(heads);
    let list = || {
        allowed
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(t) = fixed.tensor_parallel {
        if !allowed.contains(&t) {
            let why = if t > MAX_DEGREE {
                format!("more than the {MAX_DEGREE} GPUs lab plan splits over")
            } else if t > heads.attention || !heads.attention.is_multiple_of(t) {
                format!("does not divide the {} attention heads", heads.attention)
            } else {
                format!(
                    "does not split the {} key/value heads (they must divide it or it them)",
                    heads.key_value
                )
            };
            return Err(crate::Error::usage(format!(
                "--tensor-parallel {t} {why}; this model allows {}",
                list()
            )));
        }
        if let Some(n) = fixed.gpus {
            if !n.is_multiple_of(t) {
                return Err(crate::Error::usage(format!(
                    "--tensor-parallel {t} does not divide --gpus {n}: a package's GPUs run whole tensor-parallel groups"
                )));
            }
        }
    }
    if let Some(n) = fixed.gpus {
        if !allowed.iter().any(|t| n.is_multiple_of(*t) && *t <= n) {
            return Err(crate::Error::usage(format!(
                "--gpus {n}: no tensor-parallel degree of this model divides it ({})",
                list()
            )));
        }
    }
    Ok(())
}

/// The degrees tried under `fixed`, increasing.
pub fn fixed_degrees(heads: impl Into<Heads>, fixed: &Fixed) -> Vec<u64> {
    degrees(heads)
        .into_iter()
        .filter(|t| fixed.tensor_parallel.is_none_or(|f| f == *t))
        .filter(|t| fixed.gpus.is_none_or(|n| n.is_multiple_of(*t)))
        .collect()
}

/// The prefill workspace's parts that tensor parallel splits, bytes (the rest is in
/// [`Need::whole`]). Engines shard attention by heads and the feed-forward by its
/// intermediate width (Megatron-LM's column- and row-parallel layers, Shoeybi et al. 2019,
/// §3; vLLM's `QKVParallelLinear` and `MergedColumnParallelLinear`), so per GPU at degree t:
/// `max(attention / t + kv / min(t, K), ffn_whole + ffn / t)`; the hidden states, the mask
/// and the logits stay whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Workspace {
    /// Query-head tensors (queries, attention output; latent attention: all of it).
    pub attention: u128,
    /// Key/value-head tensors (keys and values), split by `min(t, K)`.
    pub kv: u128,
    /// Feed-forward tensors kept whole (a mixture's per-pair hidden-state copies, router).
    pub ffn_whole: u128,
    /// Feed-forward tensors split by t (the intermediate activations).
    pub ffn: u128,
}

impl Workspace {
    /// Bytes on one GPU at degree `t`, key/value heads split over `kv_split` GPUs.
    pub fn at(&self, t: u64, kv_split: u64) -> u128 {
        let t = u128::from(t.max(1));
        let attention = self.attention.div_ceil(t) + self.kv.div_ceil(u128::from(kv_split.max(1)));
        attention.max(self.ffn_whole + self.ffn.div_ceil(t))
    }
}

/// The parts of a plan's memory, for the split over GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Split over t GPUs: weights, gradients, master weights, optimizer states.
    pub sharded: u128,
    /// KV cache, split over `min(t, kv_heads)` GPUs (or replicated, `kv_split` false).
    pub kv: u128,
    /// Whether the KV cache splits by key/value heads (false for latent attention).
    pub kv_split: bool,
    /// Kept whole on every GPU: the workspace's unsplit part, or training activations.
    pub whole: u128,
    /// The prefill workspace's split parts (zero in training).
    pub workspace: Workspace,
}

/// One catalog GPU model's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    /// 1-based rank among fitting packages, cheapest first (null when it does not fit); in a
    /// lower-bound plan, among those not ruled out (`at_least`).
    pub rank: Option<usize>,
    /// Catalog GPU id.
    pub gpu: String,
    /// Catalog model name.
    pub model: String,
    /// GPU memory the plan uses, bytes, and its source (one of [`super::gpu_memory::SOURCES`]).
    pub memory_bytes: u64,
    /// One of [`super::gpu_memory::SOURCES`].
    pub memory_source: String,
    /// `memory_bytes - RUNTIME_RESERVE_BYTES`.
    pub usable_bytes_per_gpu: u64,
    /// Whether some tensor-parallel degree up to [`MAX_DEGREE`] fits.
    pub fits: bool,
    /// GPUs needed (the tensor-parallel degree), when it fits.
    pub gpus: Option<u64>,
    /// Memory needed on each of those GPUs, bytes (at the largest degree tried when it does
    /// not fit).
    pub need_bytes_per_gpu: u64,
    /// Lots bought, when it fits.
    pub lots: Option<u64>,
    /// GPUs in the lots bought (at least `gpus`).
    pub gpus_bought: Option<u64>,
    /// Package price for the duration, cents.
    pub total_cents: Option<i64>,
    /// Package price, USD (2 decimals).
    #[serde(serialize_with = "rust_decimal::serde::str_option::serialize")]
    pub total_usd: Option<Decimal>,
    /// Price of one GPU for one day, USD (6 decimals).
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub usd_per_gpu_day: Decimal,
    /// Cost per accepted result, USD (6 decimals), when accepted results are given.
    #[serde(serialize_with = "rust_decimal::serde::str_option::serialize")]
    pub unit_cost_usd: Option<Decimal>,
    /// A lower-bound plan ([`super::unknown`]) whose bound fits: at least `gpus` GPUs are
    /// needed, and `fits` stays false (nothing says that many suffice).
    pub at_least: bool,
    /// Why it does not fit, in words, when it does not (`more than 64 GPUs`, `at tensor
    /// parallel 2`, `lots of 2 GPUs cannot make 3`).
    pub not_fitting: Option<String>,
}

/// Tensor-parallel degrees for these heads, increasing (every degree up to [`MAX_DEGREE`]
/// when the heads are not known).
pub fn degrees(heads: impl Into<Heads>) -> Vec<u64> {
    let h = heads.into();
    if h.attention == 0 {
        return (1..=MAX_DEGREE).collect();
    }
    (1..=MAX_DEGREE.min(h.attention))
        .filter(|t| {
            h.attention.is_multiple_of(*t)
                && (h.latent
                    || h.key_value == 0
                    || h.key_value.is_multiple_of(*t)
                    || t.is_multiple_of(h.key_value))
        })
        .collect()
}

/// Bytes needed on each GPU at degree `t`.
pub fn per_gpu(need: &Need, heads: impl Into<Heads>, t: u64) -> u128 {
    let h = heads.into();
    let t128 = u128::from(t);
    let kv_split = if h.key_value == 0 {
        t
    } else {
        t.min(h.key_value)
    };
    let kv = if need.kv_split {
        need.kv.div_ceil(u128::from(kv_split))
    } else {
        need.kv
    };
    need.sharded.div_ceil(t128) + kv + need.whole + need.workspace.at(t, kv_split)
}

/// Every catalog GPU model (or only those of `only`, when not empty), fitting ones cheapest
/// first, then the others in catalog order; the degrees as `fixed` allows.
///
/// # Errors
/// [`crate::Error::Usage`] for an unknown `only` id, a duration not sold, or a total that
/// overflows.
#[allow(clippy::too_many_arguments)]
pub fn packages(
    catalog: &Catalog,
    memory: &[GpuMemory],
    heads: Heads,
    need: &Need,
    days: u32,
    accepted_results: Option<u64>,
    only: &[String],
    fixed: &Fixed,
) -> Result<Vec<Package>> {
    for gpu in only {
        catalog.find(gpu, days)?;
    }
    let degrees = fixed_degrees(heads, fixed);
    let mut out: Vec<(Package, Option<Quote>)> = Vec::new();
    for entry in catalog.entries().iter().filter(|e| e.days == days) {
        if !only.is_empty() && !only.contains(&entry.gpu) {
            continue;
        }
        // `--gpus N` buys whole lots: a lot size that does not divide N cannot make it.
        let whole_lots = fixed
            .gpus
            .is_none_or(|n| n.is_multiple_of(u64::from(entry.gpus_per_lot.max(1))));
        let Some(mem) = memory.iter().find(|m| m.gpu == entry.gpu) else {
            continue;
        };
        let usable = mem.memory_bytes.saturating_sub(RUNTIME_RESERVE_BYTES);
        let mut chosen = None;
        let mut last_need = 0u128;
        if !whole_lots {
            // Shown at the smallest degree: what one GPU would need.
            last_need = degrees.first().map_or(0, |t| per_gpu(need, heads, *t));
        }
        for &t in degrees.iter().filter(|_| whole_lots) {
            let n = per_gpu(need, heads, t);
            last_need = n;
            if n <= u128::from(usable) {
                chosen = Some(t);
                last_need = n;
                break;
            }
        }
        let quote = match chosen {
            Some(t) => Some(pricing::quote(
                catalog,
                &entry.gpu,
                days,
                lots_needed(fixed.gpus.unwrap_or(t), entry.gpus_per_lot),
                accepted_results,
            )?),
            None => None,
        };
        let not_fitting = chosen.is_none().then(|| {
            if !whole_lots {
                format!(
                    "lots of {} GPUs cannot make {}",
                    entry.gpus_per_lot,
                    fixed.gpus.unwrap_or(0)
                )
            } else if let Some(t) = fixed.tensor_parallel {
                format!("at tensor parallel {t}")
            } else if let Some(n) = fixed.gpus {
                format!("on {n} GPUs")
            } else {
                format!(">{} GPUs", degrees.last().copied().unwrap_or(1))
            }
        });
        out.push((
            Package {
                rank: None,
                gpu: entry.gpu.clone(),
                model: entry.model.clone(),
                memory_bytes: mem.memory_bytes,
                memory_source: mem.source.clone(),
                usable_bytes_per_gpu: usable,
                fits: chosen.is_some(),
                gpus: chosen,
                need_bytes_per_gpu: u64::try_from(last_need).unwrap_or(u64::MAX),
                lots: quote.as_ref().map(|q| q.lots),
                gpus_bought: quote.as_ref().map(|q| q.gpus),
                total_cents: quote.as_ref().map(|q| q.total_cents),
                total_usd: quote.as_ref().map(|q| q.total_usd),
                usd_per_gpu_day: pricing::usd_per_gpu_day(entry),
                unit_cost_usd: quote.as_ref().and_then(|q| q.unit_cost_usd),
                at_least: false,
                not_fitting,
            },
            quote,
        ));
    }
    // Fitting first, cheapest total first (ties: cheaper per GPU-day, then id); the others
    // keep catalog order.
    out.sort_by(|(a, _), (b, _)| match (a.total_cents, b.total_cents) {
        (Some(x), Some(y)) => x.cmp(&y).then_with(|| {
            let ea = catalog.find(&a.gpu, days).ok();
            let eb = catalog.find(&b.gpu, days).ok();
            match (ea, eb) {
                (Some(ea), Some(eb)) => pricing::compare_per_gpu_day(ea, eb),
                _ => a.gpu.cmp(&b.gpu),
            }
        }),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    let mut rank = 0;
    Ok(out
        .into_iter()
        .map(|(mut p, _)| {
            if p.fits || p.at_least {
                rank += 1;
                p.rank = Some(rank);
            }
            p
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::memory;

    fn llama_8b() -> Architecture {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/models/llama-3.1-8b/config.json");
        let text = std::fs::read_to_string(path).unwrap();
        crate::plan::family::read(&serde_json::from_str(&text).unwrap()).unwrap()
    }

    /// Llama-3.1-8B at 4096 tokens: per token the hidden states 2He + 4H = 32768 B stay
    /// whole, the feed-forward's 3Ie = 86016 B (larger than attention's 3Ade + 4Kde =
    /// 24576 + 8192 B) is split by t; plus 4V logits bytes.
    #[test]
    fn the_prefill_workspace_splits_heads_and_intermediate_by_the_degree() {
        let arch = llama_8b();
        let (whole, parts) = memory::workspace_parts(&arch, 2, 1, 4096);
        assert_eq!(whole, 32768 * 4096 + 4 * 128256);
        assert_eq!(
            (parts.attention, parts.kv, parts.ffn_whole, parts.ffn),
            (24576 * 4096, 8192 * 4096, 0, 86016 * 4096)
        );
        assert_eq!(
            whole + parts.at(1, 1),
            memory::activation_workspace(&arch, 2, 1, 4096)
        );
        assert_eq!(whole + parts.at(1, 1), 487_052_288);
        for t in [2u64, 4, 8, 16, 32] {
            assert_eq!(parts.at(t, t.min(8)), 86016 * 4096 / u128::from(t), "t={t}");
        }
        // Attention dominates when the feed-forward is narrow; key/value heads stop splitting
        // past K (replicated), query heads do not.
        let w = Workspace {
            attention: 3000,
            kv: 800,
            ffn_whole: 10,
            ffn: 100,
        };
        assert_eq!(w.at(1, 1), 3800);
        assert_eq!(w.at(4, 2), 750 + 400);
        assert_eq!(w.at(3, 3), 1000 + 267);
        // The per-GPU need adds it to the sharded weights and cache.
        let need = Need {
            sharded: 1000,
            kv: 80,
            kv_split: true,
            whole: 7,
            workspace: w,
        };
        assert_eq!(per_gpu(&need, &arch, 2), 500 + 40 + 7 + (1500 + 400));
        assert_eq!(per_gpu(&need, &arch, 16), 63 + 10 + 7 + (188 + 100));
    }

    #[test]
    fn unknown_heads_allow_every_degree_and_known_ones_the_engines_rule() {
        let unknown = Heads {
            attention: 0,
            key_value: 0,
            latent: false,
        };
        assert_eq!(degrees(unknown), (1..=MAX_DEGREE).collect::<Vec<_>>());
        assert_eq!(degrees(&llama_8b()), [1, 2, 4, 8, 16, 32]);
        let odd = Heads {
            attention: 14,
            key_value: 2,
            latent: false,
        };
        assert_eq!(degrees(odd), [1, 2, 14]);
        assert_eq!(
            degrees(Heads {
                latent: true,
                ..odd
            }),
            [1, 2, 7, 14]
        );
        let fixed = Fixed {
            tensor_parallel: None,
            gpus: Some(28),
        };
        assert_eq!(fixed_degrees(odd, &fixed), [1, 2, 14]);
        assert!(check_fixed(
            odd,
            &Fixed {
                tensor_parallel: Some(7),
                gpus: None
            }
        )
        .is_err());
    }
}
