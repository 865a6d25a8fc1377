//! The decision: per catalog GPU and package, how the workload runs, how long it takes, and
//! what finishing it costs; sorted by that cost across every duration asked.
//!
//! Per GPU, the setups tried inside one lot (a lot is one machine; tensor parallel never
//! crosses lots): tensor-parallel degree t for every t of the model's degrees up to the lot's
//! GPUs, with `gpus_per_lot / t` replicas (a two-GPU lot: two replicas, or tensor parallel 2).
//! The batch of each replica is the largest the exact memory model fits (or `--batch`),
//! capped by the work one replica gets; the setup chosen is the fastest by expected hours. When no t fits in one lot, the layers are split over
//! p lots (pipeline parallel, each lot tensor parallel over its GPUs) with the activations
//! sent over the stated network between lots, one hop per lot boundary, without microbatch
//! overlap (`device_map`-style: the ceiling of that setup, not of an interleaved schedule).
//!
//! Inference time of one batch: prefill of the prompts (TTFT, which yields the first output
//! token), then `O − 1` decode steps; a decode step's time is affine in the cached length
//! (attention grows linearly, the rest is constant), so the steps are `O − 1` times the step
//! at the middle length `I + (O − 2)/2` (rounded down). Replicas work in parallel.
//! Expected: each runs its requests in static batches one after the other, the last one timed
//! at its own size. Ceiling: each keeps `ceiling_batch` sequences in flight all the time
//! (continuous batching), `ceiling_batch` being what an engine with a paged cache and chunked
//! prefill could hold (the cache at its average occupancy `I + O/2`, no prefill workspace),
//! so that no engine's measurement can beat it.
//!
//! Training step of b sequences of T tokens: `FLOPs / (peak·MFU·t)` with FLOPs `6·N·b·T`
//! (full; LoRA and QLoRA `4·N·b·T + 6·N_adapter·b·T`: no weight gradients for the frozen base)
//! plus the causal attention term `3·Σ_layers 2·A·(d_qk + d_v)·pairs(T)` (pairs: keys each
//! position attends to, windows applied), plus the AdamW step reading and writing 28 bytes
//! per trained parameter (fp32 master, moments, 16-bit gradient and weight copy) over the
//! bandwidth, plus, under tensor parallel, four all-reduces per layer (two forward, two
//! backward) and, with several replicas, a ring all-reduce of the 16-bit gradients over the
//! lot's link (or the network across lots). N counts the matrices a token multiplies (the
//! experts a token is routed to, not all of them); the ceiling's MFU is 1.
//!
//! Cost: a package is a reservation; the idle rest of it is paid. The cheapest way to finish
//! within a duration is the fewer of: more lots bought at once (replicas), or the same lots
//! bought again for consecutive packages. Costs are predictions labelled with their profile;
//! they never fill the cost per accepted result (`docs/PROTOCOL.md §5`).

use super::engine::Engine;
use super::gpu_perf::{Format, GpuPerf};
use super::operators::{self, Shape, Step, Widths};
use super::roofline::{self, Basis, Profile, Rates};
use super::workload::{Method, Workload};
use crate::catalog::Catalog;
use crate::plan::packages::{self, Need};
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;

/// Expected model-FLOPs utilisation of a training step: assumed 0.40 (band 0.30–0.55), the
/// range published for dense bf16 training with PyTorch FSDP (`docs/PLANNING.md`).
pub const TRAINING_MFU: &str = "0.40";

/// Most lots one answer may buy.
pub const MAX_LOTS: u64 = 1024;

/// Seconds in an hour.
const HOUR: u64 = 3600;

/// Rounds half-to-even to `dp` places and keeps exactly `dp` digits ([`crate::units::round`]).
pub use crate::units::round;

/// A duration for text, with its unit and a precision that keeps it meaningful, rounded
/// half-to-even: under a minute in seconds to 3 significant digits (`0.0421 s`, `12.3 s`),
/// under an hour in minutes to 1 decimal (`12.5 min`), else in hours to 2 decimals
/// (`4.77 h`). Zero is `0 s`.
pub fn duration(seconds: Decimal) -> String {
    let minute = Decimal::from(60);
    let hour = Decimal::from(HOUR);
    if seconds >= hour {
        return format!("{} h", round(seconds / hour, 2));
    }
    if seconds >= minute {
        return format!("{} min", round(seconds / minute, 1));
    }
    if seconds <= Decimal::ZERO {
        return "0 s".to_string();
    }
    // Places so that three significant digits remain: 12.3 → 1, 0.0421 → 4.
    let mut places = 2u32;
    let mut bound = Decimal::ONE;
    while seconds < bound && places < 20 {
        bound /= Decimal::TEN;
        places += 1;
    }
    if seconds >= Decimal::TEN {
        places = 1;
    }
    format!("{} s", round(seconds, places))
}

/// Memory needs at batch 1 and 2 (every part is affine in the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// At batch 1.
    pub one: Need,
    /// At batch 2.
    pub two: Need,
}

impl Needs {
    /// The need at batch `b`: `one + (b − 1)·(two − one)` for every part.
    pub fn at(&self, b: u64) -> Need {
        let f = |x: u128, y: u128| x + u128::from(b - 1) * (y - x);
        Need {
            sharded: f(self.one.sharded, self.two.sharded),
            kv: f(self.one.kv, self.two.kv),
            kv_split: self.one.kv_split,
            whole: f(self.one.whole, self.two.whole),
            workspace: packages::Workspace {
                attention: f(self.one.workspace.attention, self.two.workspace.attention),
                kv: f(self.one.workspace.kv, self.two.workspace.kv),
                ffn_whole: f(self.one.workspace.ffn_whole, self.two.workspace.ffn_whole),
                ffn: f(self.one.workspace.ffn, self.two.workspace.ffn),
            },
        }
    }
}

/// What the model and workload give the decision.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// The architecture, for the tensor-parallel degrees and the memory split.
    pub arch: &'a super::Architecture,
    /// The operators' shape.
    pub shape: Shape,
    /// Byte widths.
    pub widths: Widths,
    /// The products' format (before the GPU's own check).
    pub format: Format,
    /// Memory needs at batches 1 and 2.
    pub needs: Needs,
    /// The workload.
    pub workload: Workload,
    /// Trained parameters (all, or the adapters).
    pub trained_parameters: u128,
    /// `--batch`, when given.
    pub batch: Option<u64>,
    /// Network between lots, GB/s.
    pub network_gb_s: Decimal,
    /// Engine profile of the expected figures.
    pub profile: Profile,
    /// Durations asked.
    pub days: Vec<u32>,
    /// GPUs asked (empty: all).
    pub gpus: Vec<String>,
    /// `--tensor-parallel N` and `--gpus N`: the only degree tried, and the GPUs every
    /// finish buys at once (whole lots; more time is bought as consecutive packages).
    pub fixed: packages::Fixed,
    /// `--calibration`: measured over expected ratios per GPU model (empty: none).
    pub calibration: Vec<super::calibration::Calibrated>,
}

/// Speeds and times of one setup on one basis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Speed {
    /// `ceiling` or `expected`.
    pub basis: Basis,
    /// Engine profile (`eager`, `cuda-graphs`); the ceiling has no launch cost either way.
    pub profile: Profile,
    /// Prefill tokens per second of one replica (training: tokens per second of one replica),
    /// 1 decimal.
    #[serde(with = "rust_decimal::serde::str")]
    pub prefill_tokens_per_s: Decimal,
    /// Decode tokens per second of one replica at the batch, 1 decimal (training: 0).
    #[serde(with = "rust_decimal::serde::str")]
    pub decode_tokens_per_s: Decimal,
    /// Time to first token at the batch (the batch's prefill), seconds, 6 decimals (training:
    /// one step).
    #[serde(with = "rust_decimal::serde::str")]
    pub ttft_s: Decimal,
    /// Time per output token at the batch, seconds, 6 decimals (training: 0).
    #[serde(with = "rust_decimal::serde::str")]
    pub tpot_s: Decimal,
    /// Output tokens per second of the whole workload on one package's lots (training:
    /// training tokens per second), 1 decimal.
    #[serde(with = "rust_decimal::serde::str")]
    pub workload_tokens_per_s: Decimal,
    /// Hours the whole workload takes on one package's lots, 2 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub hours: Decimal,
    /// The same duration in seconds, 6 decimals (what the text shows with [`duration`]).
    #[serde(with = "rust_decimal::serde::str")]
    pub seconds: Decimal,
    /// The phases (`prefill`, `decode`) of this figure held at the ceiling of the same setup
    /// and batch: scaled by a `--calibration` ratio (or, never seen so far, by the
    /// efficiency factors) they would have beaten the datasheet bound. Empty for the ceiling
    /// and whenever nothing was held; the row's notes say it in words.
    pub held_at_ceiling: Vec<Phase>,
}

pub use super::calibration::Phase;

/// One way to use a lot (or a few lots for a pipeline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setup {
    /// In words: `1 replica`, `2 replicas`, `tensor parallel 2`, `pipeline over 2 lots x
    /// tensor parallel 8`.
    pub using: String,
    /// Tensor-parallel degree inside a lot.
    pub tensor_parallel: u64,
    /// Replicas per lot (0 for a pipeline).
    pub replicas_per_lot: u64,
    /// Lots one pipelined replica spans (1 without a pipeline).
    pub lots_per_replica: u64,
    /// Sequences per replica (the exact memory model's largest, or `--batch`): the expected
    /// figures' batch.
    pub batch: u64,
    /// The ceiling's batch: an engine's largest (paged cache at average occupancy, no prefill
    /// workspace), at least `batch`.
    pub ceiling_batch: u64,
    /// Memory each GPU needs, bytes.
    pub need_bytes_per_gpu: u64,
    /// Ceiling figures.
    pub ceiling: Speed,
    /// Expected figures.
    pub expected: Speed,
    /// The cheapest way to finish within the row's duration with this setup (the row's
    /// `finish` for the chosen one); `None` when no number of lots finishes.
    pub finish: Option<Finish>,
}

/// The cheapest way to finish within one duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finish {
    /// Always `expected`: the decision is made on the expected figures.
    pub basis: Basis,
    /// Their engine profile.
    pub profile: Profile,
    /// Lots bought at once.
    pub lots: u64,
    /// Consecutive packages of those lots.
    pub packages: u64,
    /// Hours it takes (expected), 2 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub hours: Decimal,
    /// Hours the same lots take at the ceiling (datasheet peaks, the ceiling's batch), 2
    /// decimals: the low end of the finish's range.
    #[serde(with = "rust_decimal::serde::str")]
    pub ceiling_hours: Decimal,
    /// The expected duration in seconds, 6 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub seconds: Decimal,
    /// The phases held at the ceiling in the batches this finish runs ([`Speed`]).
    pub held_at_ceiling: Vec<Phase>,
    /// Cost, cents.
    pub cost_cents: i64,
    /// Cost, USD, 2 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub cost_usd: Decimal,
    /// In words.
    pub how: String,
}

/// One row: a GPU and a duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// 1-based rank by finishing cost (null when the model cannot run).
    pub rank: Option<usize>,
    /// Catalog GPU id.
    pub gpu: String,
    /// Package duration, days.
    pub days: u32,
    /// GPUs per lot.
    pub gpus_per_lot: u32,
    /// One lot's price for the duration, USD.
    #[serde(with = "rust_decimal::serde::str")]
    pub lot_usd: Decimal,
    /// The setup chosen (the fastest per lot), when one runs.
    pub setup: Option<Setup>,
    /// The other setups tried in one lot (a two-GPU lot: replicas and tensor parallel 2).
    pub alternatives: Vec<Setup>,
    /// Whether one package of the base lots finishes the workload (expected figure).
    pub package_covers: Option<bool>,
    /// The cheapest way to finish in this duration.
    pub finish: Option<Finish>,
    /// Output tokens (training: training tokens) one package of the base lots produces when
    /// kept busy, expected.
    pub package_tokens: Option<u64>,
    /// Predicted USD per million output tokens of this workload (idle time paid), 4 decimals.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub predicted_usd_per_million_tokens: Option<Decimal>,
    /// Predicted USD per request (inference) or per training run, 6 decimals.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub predicted_usd_per_unit: Option<Decimal>,
    /// Why the GPU cannot run the workload, or how its format is run.
    pub notes: Vec<String>,
    /// Where the GPU's efficiency factors come from: `measured`, `carried over` or `assumed`
    /// ([`super::gpu_perf::LABELS`]).
    pub factors: String,
    /// `--calibration`: the ratios that scaled this GPU's expected decode and prefill times;
    /// null when none was given for it.
    pub calibration: Option<super::calibration::Calibrated>,
}

/// Builds the rows for every asked GPU and duration, sorted by finishing cost.
///
/// # Errors
/// [`Error::Usage`] for an unknown GPU or duration, or a workload no GPU can run.
pub fn decide(
    inputs: &Inputs,
    catalog: &Catalog,
    perf: &[GpuPerf],
    memory: &[crate::plan::gpu_memory::GpuMemory],
) -> Result<Vec<Row>> {
    for g in &inputs.gpus {
        if !catalog.gpu_ids().contains(&g.as_str()) {
            return Err(Error::usage(format!(
                "unknown --gpu '{}': the catalog's ids are {}",
                crate::text::excerpt(g),
                catalog.gpu_ids().join(", ")
            )));
        }
    }
    let mut rows = Vec::new();
    for entry in catalog.entries() {
        if !inputs.days.contains(&entry.days)
            || !(inputs.gpus.is_empty() || inputs.gpus.contains(&entry.gpu))
        {
            continue;
        }
        let (Some(gpu), Some(mem)) = (
            perf.iter().find(|p| p.gpu == entry.gpu),
            memory.iter().find(|m| m.gpu == entry.gpu),
        ) else {
            continue;
        };
        let usable = u128::from(
            mem.memory_bytes
                .saturating_sub(packages::RUNTIME_RESERVE_BYTES),
        );
        let lot_cents = entry.price_cents;
        let mut row = Row {
            rank: None,
            gpu: entry.gpu.clone(),
            days: entry.days,
            gpus_per_lot: entry.gpus_per_lot,
            lot_usd: Decimal::new(lot_cents, 2),
            setup: None,
            alternatives: Vec::new(),
            package_covers: None,
            finish: None,
            package_tokens: None,
            predicted_usd_per_million_tokens: None,
            predicted_usd_per_unit: None,
            notes: Vec::new(),
            factors: gpu.efficiency_label.clone(),
            calibration: inputs
                .calibration
                .iter()
                .find(|c| c.gpu == entry.gpu)
                .cloned(),
        };
        if let Some(c) = &row.calibration {
            row.notes.push(format!("expected times {}", c.label));
        }
        let Some(format) = native_format(gpu, inputs.format, &mut row.notes) else {
            rows.push(row);
            continue;
        };
        let lot = u64::from(entry.gpus_per_lot.max(1));
        // `--gpus N` buys whole lots.
        let fixed_lots = match inputs.fixed.gpus {
            Some(n) if !n.is_multiple_of(lot) => {
                row.notes
                    .push(format!("lots of {lot} GPUs cannot make --gpus {n}"));
                rows.push(row);
                continue;
            }
            Some(n) => Some(n / lot),
            None => None,
        };
        let mut setups = setups(
            inputs,
            gpu,
            format,
            usable,
            u64::from(entry.gpus_per_lot),
            &mut row.notes,
        );
        if setups.is_empty() {
            rows.push(row);
            continue;
        }
        setups.sort_by_key(|s| s.expected.hours);
        let mut chosen = setups.remove(0);
        let seconds = Decimal::from(u64::from(entry.days) * 24 * HOUR);
        let base_hours = chosen.expected.hours;
        row.package_covers = Some(base_hours * Decimal::from(HOUR) <= seconds);
        for s in &mut setups {
            s.finish = finish(inputs, s, gpu, format, seconds, lot_cents, fixed_lots);
        }
        chosen.finish = finish(inputs, &chosen, gpu, format, seconds, lot_cents, fixed_lots);
        row.finish = chosen.finish.clone();
        if let (
            Some(c),
            Workload::Inference {
                input_tokens,
                output_tokens,
                ..
            },
        ) = (&mut row.calibration, inputs.workload)
        {
            let gpus = chosen.tensor_parallel * chosen.lots_per_replica;
            c.extrapolated = c.extrapolates(
                chosen.tensor_parallel,
                chosen.lots_per_replica,
                chosen.batch,
                input_tokens,
                output_tokens,
            );
            if c.extrapolated {
                row.notes.push(format!(
                    "calibration extrapolated: measured at {}, applied at batch {} x ({input_tokens} + {output_tokens}) tokens{}",
                    c.measured(),
                    chosen.batch,
                    if gpus > 1 {
                        format!(" on {gpus} GPUs per replica")
                    } else {
                        String::new()
                    }
                ));
            }
        }
        for s in std::iter::once(&chosen).chain(&setups) {
            if let Some(note) = held_note(row.calibration.as_ref(), s) {
                row.notes.push(note);
            }
        }
        let (units, tokens) = match inputs.workload {
            Workload::Inference {
                requests,
                output_tokens,
                ..
            } => (requests, requests * output_tokens),
            Workload::Training { tokens, .. } => (1, tokens),
        };
        if base_hours > Decimal::ZERO {
            let produced = Decimal::from(tokens) * seconds / (base_hours * Decimal::from(HOUR));
            row.package_tokens = u64::try_from(produced.floor()).ok();
        }
        if let Some(f) = &row.finish {
            row.predicted_usd_per_million_tokens = Some(round(
                f.cost_usd * Decimal::from(1_000_000u64) / Decimal::from(tokens),
                4,
            ));
            row.predicted_usd_per_unit = Some(round(f.cost_usd / Decimal::from(units), 6));
        }
        row.setup = Some(chosen);
        row.alternatives = setups;
        rows.push(row);
    }
    if !rows.is_empty() && rows.iter().all(|r| r.finish.is_none()) {
        let fixed: Vec<String> = [
            inputs.fixed.gpus.map(|n| format!("--gpus {n}")),
            inputs
                .fixed
                .tensor_parallel
                .map(|t| format!("--tensor-parallel {t}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if fixed.is_empty() {
            return Err(Error::usage(
                "no GPU of the catalog can run this workload (memory or format): lower --batch, --context or the weights' width, or pick another model",
            ));
        }
        // A fixed flag is often what stopped every GPU: name it, and the one GPU's reason.
        let first = &rows[0];
        let reason = if rows.iter().all(|r| r.gpu == first.gpu) && !first.notes.is_empty() {
            format!(" ({}: {})", first.gpu, first.notes.join("; "))
        } else {
            String::new()
        };
        return Err(Error::usage(format!(
            "no GPU of the catalog can run this workload with {}{reason}: whole lots, one machine's GPUs per tensor-parallel group and the memory must all fit; change or drop {}, or run lab plan without the workload to see each GPU",
            fixed.join(" "),
            fixed.join(" / ")
        )));
    }
    rows.sort_by(|a, b| match (&a.finish, &b.finish) {
        (Some(x), Some(y)) => x
            .cost_cents
            .cmp(&y.cost_cents)
            .then(x.hours.cmp(&y.hours))
            .then(a.gpu.cmp(&b.gpu))
            .then(a.days.cmp(&b.days)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.gpu.cmp(&b.gpu).then(a.days.cmp(&b.days)),
    });
    let mut rank = 0;
    for r in &mut rows {
        if r.finish.is_some() {
            rank += 1;
            r.rank = Some(rank);
        }
    }
    Ok(rows)
}

/// The row's note when a setup's expected figure was held at the ceiling somewhere (its
/// batch, its last smaller batch, a finish on more lots): the phases, and why.
fn held_note(c: Option<&super::calibration::Calibrated>, s: &Setup) -> Option<String> {
    let mut held: Vec<Phase> = s.expected.held_at_ceiling.clone();
    if let Some(f) = &s.finish {
        held.extend(f.held_at_ceiling.iter().copied());
    }
    held.sort_unstable();
    held.dedup();
    if held.is_empty() {
        return None;
    }
    let phases = held
        .iter()
        .map(Phase::to_string)
        .collect::<Vec<_>>()
        .join(" and ");
    let why = match c {
        Some(c) => format!(
            "the calibration's ratio ({} decode, {} prefill), measured at {}, would put the expected time below the datasheet bound",
            c.decode_ratio,
            c.prefill_ratio.map_or_else(|| "no".to_string(), |p| p.to_string()),
            c.measured()
        ),
        None => "the efficiency factors would put the expected time below the datasheet bound (a gap in the time model: please report it)".to_string(),
    };
    Some(format!(
        "expected {phases} held at the ceiling ({}, batch {}): {why}",
        s.using, s.batch
    ))
}

/// The format the GPU runs the products in; a note when it is not the model's own.
fn native_format(gpu: &GpuPerf, wanted: Format, notes: &mut Vec<String>) -> Option<Format> {
    if gpu.tflops(wanted).is_some() {
        return Some(wanted);
    }
    let fallback = match wanted {
        Format::Bf16 => Format::Fp16,
        Format::Fp8 | Format::Int8 => Format::Bf16,
        Format::Fp16 => Format::Bf16,
    };
    let fallback = if gpu.tflops(fallback).is_some() {
        fallback
    } else if gpu.tflops(Format::Fp16).is_some() {
        Format::Fp16
    } else {
        notes.push(format!(
            "{} has no tensor format to run these products",
            gpu.gpu
        ));
        return None;
    };
    notes.push(format!(
        "{} has no {} tensor cores: timed with {} products (not native: {})",
        gpu.gpu,
        name(wanted),
        name(fallback),
        match wanted {
            Format::Bf16 => "the weights served as fp16, which can overflow where bf16 does not",
            _ => "weights dequantized to 16 bits before each product",
        }
    ));
    Some(fallback)
}

/// The format's name.
pub fn name(f: Format) -> &'static str {
    match f {
        Format::Bf16 => "bf16",
        Format::Fp16 => "fp16",
        Format::Fp8 => "fp8",
        Format::Int8 => "int8",
    }
}

/// Per-GPU bytes at degree t with the layers split over p lots.
fn per_gpu(need: &Need, arch: &super::Architecture, t: u64, p: u64) -> u128 {
    if p == 1 {
        return packages::per_gpu(need, arch, t);
    }
    let kv = if need.kv_split {
        need.kv.div_ceil(u128::from(t.min(arch.kv_heads) * p))
    } else {
        need.kv.div_ceil(u128::from(p))
    };
    // The workspace is one layer's: each lot of a pipeline runs whole layers, split by t.
    need.sharded.div_ceil(u128::from(t * p))
        + kv
        + need.whole
        + need.workspace.at(t, t.min(arch.kv_heads))
}

/// The largest batch up to `cap` fitting `usable` at degree t over p lots.
fn largest_batch(inputs: &Inputs, t: u64, p: u64, usable: u128, cap: u64) -> Option<u64> {
    largest(inputs, usable, cap, &|b| {
        per_gpu(&inputs.needs.at(b), inputs.arch, t, p)
    })
}

/// The ceiling's batch: what an engine with a paged cache and chunked prefill could hold —
/// the weights (and training state) and, for inference, only the cache at its average
/// occupancy `I + O/2` per sequence (sequences at staggered stages, continuous batching); no
/// prefill workspace. An upper bound on any engine's concurrency, so the ceiling stays a
/// bound for in-flight batching too.
fn ceiling_batch(inputs: &Inputs, t: u64, p: u64, usable: u128, cap: u64) -> Option<u64> {
    let Workload::Inference {
        input_tokens,
        output_tokens,
        ..
    } = inputs.workload
    else {
        return largest_batch(inputs, t, p, usable, cap);
    };
    let slope = inputs.needs.two.kv - inputs.needs.one.kv;
    let (i, o) = (u128::from(input_tokens), u128::from(output_tokens));
    let need = |b: u64| Need {
        sharded: inputs.needs.one.sharded,
        kv: (slope * u128::from(b) * (2 * i + o)).div_ceil(2 * (i + o)),
        kv_split: inputs.needs.one.kv_split,
        whole: 0,
        workspace: packages::Workspace::default(),
    };
    largest(inputs, usable, cap, &|b| {
        per_gpu(&need(b), inputs.arch, t, p)
    })
}

fn largest(inputs: &Inputs, usable: u128, cap: u64, need: &dyn Fn(u64) -> u128) -> Option<u64> {
    let fits = |b: u64| need(b) <= usable;
    if !fits(1) {
        return None;
    }
    if let Some(b) = inputs.batch {
        return fits(b).then_some(b);
    }
    let (mut lo, mut hi) = (1u64, cap.max(1));
    if fits(hi) {
        return Some(hi);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(lo)
}

fn setups(
    inputs: &Inputs,
    gpu: &GpuPerf,
    format: Format,
    usable: u128,
    lot: u64,
    notes: &mut Vec<String>,
) -> Vec<Setup> {
    let degrees = packages::fixed_degrees(inputs.arch, &inputs.fixed);
    if let Some(t) = inputs.fixed.tensor_parallel.filter(|t| *t > lot) {
        notes.push(format!(
            "tensor parallel {t} needs {t} GPUs in one machine; its lots hold {lot}"
        ));
        return Vec::new();
    }
    let lots_allowed = |p: u64| {
        inputs
            .fixed
            .gpus
            .is_none_or(|n| (n / lot).is_multiple_of(p))
    };
    let work = match inputs.workload {
        Workload::Inference { requests, .. } => requests,
        Workload::Training {
            tokens, sequence, ..
        } => tokens.div_ceil(sequence),
    };
    let mut out = Vec::new();
    for &t in degrees.iter().filter(|t| **t <= lot && lots_allowed(1)) {
        let replicas = lot / t;
        let cap = work.div_ceil(replicas).min(1 << 20);
        if let Some(b) = largest_batch(inputs, t, 1, usable, cap) {
            out.extend(setup(inputs, gpu, format, t, replicas, 1, b, usable, cap));
        }
    }
    if out.is_empty() {
        let inside = degrees
            .iter()
            .copied()
            .filter(|t| *t <= lot)
            .max()
            .unwrap_or(1);
        if matches!(inputs.workload, Workload::Training { .. }) {
            notes.push(format!(
                "needs more GPUs than one {}-GPU lot holds: training across machines (pipeline or sharded data parallel over the network) is not modelled",
                lot
            ));
            return out;
        }
        for p in 2..=(packages::MAX_DEGREE / inside.max(1)).max(2) {
            if !lots_allowed(p) {
                continue;
            }
            let cap = work.min(1 << 20);
            if let Some(b) = largest_batch(inputs, inside, p, usable, cap) {
                notes.push(format!(
                    "needs {} GPUs: more than one lot holds; pipeline parallel over {p} lots (a multi-machine setup) with {} GB/s between them",
                    inside * p,
                    inputs.network_gb_s
                ));
                out.extend(setup(inputs, gpu, format, inside, 0, p, b, usable, cap));
                break;
            }
        }
        if out.is_empty() {
            notes.push(format!(
                "does not fit even split over {} GPUs",
                packages::MAX_DEGREE
            ));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn setup(
    inputs: &Inputs,
    gpu: &GpuPerf,
    format: Format,
    t: u64,
    replicas: u64,
    p: u64,
    batch: u64,
    usable: u128,
    cap: u64,
) -> Option<Setup> {
    let need = per_gpu(&inputs.needs.at(batch), inputs.arch, t, p);
    let top = ceiling_batch(inputs, t, p, usable, cap)?.max(batch);
    let speed = |basis, b| speed(inputs, gpu, format, basis, t, replicas.max(1), p, b, 1);
    let using = match (p, t, replicas) {
        (1, 1, 1) => "1 replica".to_string(),
        (1, 1, r) => format!("{r} replicas"),
        (1, t, 1) => format!("tensor parallel {t}"),
        (1, t, r) => format!("{r} replicas x tensor parallel {t}"),
        (p, t, _) => format!("pipeline over {p} lots x tensor parallel {t}"),
    };
    Some(Setup {
        using,
        tensor_parallel: t,
        replicas_per_lot: if p == 1 { replicas } else { 0 },
        lots_per_replica: p,
        batch,
        ceiling_batch: top,
        need_bytes_per_gpu: u64::try_from(need).unwrap_or(u64::MAX),
        ceiling: speed(Basis::Ceiling, top)?,
        expected: speed(Basis::Expected, batch)?,
        finish: None,
    })
}

/// Seconds of one inference batch's prefill and of one decode step at the middle length, on
/// one replica.
fn inference_steps(
    inputs: &Inputs,
    r: &Rates,
    t: u64,
    p: u64,
    batch: u64,
    input: u64,
    output: u64,
) -> (Decimal, Decimal) {
    let latent = inputs.arch.latent.is_some();
    let layers = inputs.shape.layers.len() as u64;
    let hop = |tokens: u64| {
        let bytes =
            Decimal::from(tokens) * Decimal::from(inputs.shape.hidden) * inputs.widths.activation;
        Decimal::from(p - 1)
            * (bytes / (inputs.network_gb_s * Decimal::from(1_000_000_000u64)) + r.latency)
    };
    // The ceiling runs the ideal engine's operators; the expected figure transformers'.
    let engine = match r.basis {
        Basis::Ceiling => Engine::Ideal,
        Basis::Expected => Engine::Transformers,
    };
    let run = |step: Step| {
        let ops = operators::step_ops(&inputs.shape, step, &inputs.widths, engine);
        let tokens = step.batch * step.new;
        roofline::step_seconds(
            &ops,
            r,
            t,
            inputs.shape.kv_heads,
            latent,
            layers,
            tokens,
            inputs.shape.hidden,
            inputs.widths.activation,
        ) + hop(tokens)
    };
    // A static cache of `max_cache_len` = I + O tokens.
    let cache = input + output;
    let prefill = run(Step {
        batch,
        new: input,
        past: 0,
        cache,
    });
    // The prefill yields the first output token; the O − 1 others are decode steps after
    // I .. I + O − 2 cached tokens, timed at the middle one.
    let decode = run(Step {
        batch,
        new: 1,
        past: input + output.saturating_sub(2) / 2,
        cache,
    });
    (prefill, decode)
}

/// The expected prefill and decode seconds of one batch on one replica (t GPUs, p lots),
/// scaled by the GPU's `--calibration` ratios, each phase held at the ceiling of the same
/// setup and batch when the scaled figure would beat it (a ratio measured at one workload
/// applied at another; `docs/PLANNING.md`, "Your measurements"), and the phases held. The
/// ceiling itself, and the expected figures without a calibration, pass through the same
/// bound: no expected figure is below the datasheet peaks at 100 %.
#[allow(clippy::too_many_arguments)]
fn bounded_steps(
    inputs: &Inputs,
    gpu: &GpuPerf,
    format: Format,
    r: &Rates,
    t: u64,
    p: u64,
    batch: u64,
    input: u64,
    output: u64,
) -> ((Decimal, Decimal), Vec<Phase>) {
    let (prefill, decode) = inference_steps(inputs, r, t, p, batch, input, output);
    if r.basis == Basis::Ceiling {
        return ((prefill, decode), Vec::new());
    }
    let (prefill, decode) = match inputs.calibration.iter().find(|c| c.gpu == gpu.gpu) {
        Some(c) => (
            prefill * c.prefill_ratio.unwrap_or(Decimal::ONE),
            decode * c.decode_ratio,
        ),
        None => (prefill, decode),
    };
    let Some(top) = roofline::rates(gpu, format, Basis::Ceiling, inputs.profile) else {
        return ((prefill, decode), Vec::new());
    };
    let (floor_prefill, floor_decode) = inference_steps(inputs, &top, t, p, batch, input, output);
    let mut held = Vec::new();
    if prefill < floor_prefill {
        held.push(Phase::Prefill);
    }
    if decode < floor_decode {
        held.push(Phase::Decode);
    }
    ((prefill.max(floor_prefill), decode.max(floor_decode)), held)
}

/// The uncalibrated expected seconds of one prefill of `batch` sequences of `input` tokens
/// and of one decode step at the middle length, on one GPU (no tensor parallel, no
/// pipeline): what a `lab measure --model` document's step times are compared with.
/// `None` when the GPU has no rate for the format.
pub fn expected_steps(
    inputs: &Inputs,
    gpu: &GpuPerf,
    batch: u64,
    input: u64,
    output: u64,
) -> Option<(Decimal, Decimal)> {
    one_gpu_steps(inputs, gpu, Basis::Expected, batch, input, output)
}

/// As [`expected_steps`] on either basis: the ceiling runs the ideal engine's operators at
/// the datasheet peaks (no launch cost), the expected figure transformers' under
/// `inputs.profile`. `None` when the GPU has no rate for the format.
pub fn one_gpu_steps(
    inputs: &Inputs,
    gpu: &GpuPerf,
    basis: Basis,
    batch: u64,
    input: u64,
    output: u64,
) -> Option<(Decimal, Decimal)> {
    let format = native_format(gpu, inputs.format, &mut Vec::new())?;
    let r = roofline::rates(gpu, format, basis, inputs.profile)?;
    Some(inference_steps(inputs, &r, 1, 1, batch, input, output))
}

/// Seconds of one training step of `batch` sequences on one replica of t GPUs, with
/// `replicas` replicas exchanging gradients over `link` bytes per second.
fn training_step(
    inputs: &Inputs,
    r: &Rates,
    basis: Basis,
    t: u64,
    batch: u64,
    replicas: u64,
    link: Decimal,
) -> Decimal {
    let Workload::Training {
        sequence, method, ..
    } = inputs.workload
    else {
        return Decimal::ZERO;
    };
    let tokens = Decimal::from(batch) * Decimal::from(sequence);
    let active = active_parameters(&inputs.shape);
    let trained = Decimal::from(u64::try_from(inputs.trained_parameters).unwrap_or(u64::MAX));
    let matmul = match method {
        Method::Full => Decimal::from(6) * active,
        Method::Lora | Method::Qlora => Decimal::from(4) * active + Decimal::from(6) * trained,
    };
    let attention: Decimal = inputs
        .shape
        .layers
        .iter()
        .map(|l| {
            let a = &l.attention;
            Decimal::from(3)
                * Decimal::TWO
                * Decimal::from(a.heads)
                * Decimal::from(a.qk_dim + a.v_dim)
                * operators::pairs(0, sequence, a.window)
        })
        .sum();
    let flops = matmul * tokens + attention * Decimal::from(batch);
    let mfu = match basis {
        Basis::Ceiling => Decimal::ONE,
        Basis::Expected => TRAINING_MFU.parse().unwrap_or(Decimal::ONE),
    };
    let td = Decimal::from(t);
    let compute = flops / (r.compute * mfu * td);
    let optimizer = Decimal::from(28) * trained / (r.bandwidth * td);
    let layers = inputs.shape.layers.len() as u64;
    let tp = Decimal::TWO
        * roofline::allreduce_seconds(
            r,
            t,
            layers,
            batch * sequence,
            inputs.shape.hidden,
            inputs.widths.activation,
        );
    let dp = if replicas > 1 {
        let rd = Decimal::from(replicas);
        Decimal::TWO * (rd - Decimal::ONE) / rd * Decimal::TWO * trained / td / link + r.latency
    } else {
        Decimal::ZERO
    };
    compute + optimizer + tp + dp
}

/// Parameters a token multiplies: the layers' matrices (routed experts: the k a token uses),
/// and the output head.
pub fn active_parameters(shape: &Shape) -> Decimal {
    let h = Decimal::from(shape.hidden);
    let layers: Decimal = shape
        .layers
        .iter()
        .map(|l| {
            let attention: Decimal = l
                .attention_linears
                .iter()
                .map(|m| Decimal::from(m.k) * Decimal::from(m.n))
                .sum();
            let ffn = match l.feed_forward {
                operators::FeedForward::Dense(i) => Decimal::from(3) * h * Decimal::from(i),
                operators::FeedForward::Experts {
                    routed,
                    per_token,
                    intermediate,
                    shared,
                } => {
                    Decimal::from(3) * h * Decimal::from(intermediate * per_token + shared)
                        + h * Decimal::from(routed)
                }
            };
            attention + ffn
        })
        .sum();
    layers + h * Decimal::from(shape.vocab)
}

#[allow(clippy::too_many_arguments)]
fn speed(
    inputs: &Inputs,
    gpu: &GpuPerf,
    format: Format,
    basis: Basis,
    t: u64,
    replicas: u64,
    p: u64,
    batch: u64,
    lots: u64,
) -> Option<Speed> {
    let mut r = roofline::rates(gpu, format, basis, inputs.profile)?;
    if basis == Basis::Expected && matches!(inputs.workload, Workload::Training { .. }) {
        // Training's expected figure is the stated MFU on the peak, not the product factor.
        r.compute = roofline::rates(gpu, format, Basis::Ceiling, inputs.profile)?.compute;
    }
    let zero = Decimal::ZERO;
    match inputs.workload {
        Workload::Inference {
            requests,
            input_tokens,
            output_tokens,
        } => {
            let ((prefill, decode), mut held) = bounded_steps(
                inputs,
                gpu,
                format,
                &r,
                t,
                p,
                batch,
                input_tokens,
                output_tokens,
            );
            let batch_s = prefill + Decimal::from(output_tokens - 1) * decode;
            let replicas_total = if p == 1 {
                replicas * lots
            } else {
                (lots / p).max(1)
            };
            let per_replica = requests.div_ceil(replicas_total);
            let seconds = match basis {
                // Ceiling: an engine keeping `batch` sequences in flight all the time
                // (continuous batching): per_replica / batch batches, fractions included.
                Basis::Ceiling => Decimal::from(per_replica) * batch_s / Decimal::from(batch),
                // Expected: static batches, the last one timed at its own size.
                Basis::Expected => {
                    let full = per_replica / batch;
                    let rest = per_replica % batch;
                    let tail = if rest == 0 {
                        zero
                    } else {
                        let ((p2, d2), tail_held) = bounded_steps(
                            inputs,
                            gpu,
                            format,
                            &r,
                            t,
                            p,
                            rest,
                            input_tokens,
                            output_tokens,
                        );
                        held.extend(tail_held);
                        p2 + Decimal::from(output_tokens - 1) * d2
                    };
                    Decimal::from(full) * batch_s + tail
                }
            };
            held.sort_unstable();
            held.dedup();
            let rate = Decimal::from(requests) * Decimal::from(output_tokens) / seconds;
            Some(Speed {
                basis,
                profile: inputs.profile,
                prefill_tokens_per_s: round(Decimal::from(batch * input_tokens) / prefill, 1),
                decode_tokens_per_s: round(Decimal::from(batch) / decode, 1),
                ttft_s: round(prefill, 6),
                tpot_s: round(decode, 6),
                workload_tokens_per_s: round(rate, 1),
                hours: round(seconds / Decimal::from(HOUR), 2),
                seconds: round(seconds, 6),
                held_at_ceiling: held,
            })
        }
        Workload::Training {
            tokens, sequence, ..
        } => {
            let replicas_total = replicas * lots;
            let link = if replicas_total > 1 && lots > 1 {
                inputs.network_gb_s * Decimal::from(1_000_000_000u64)
            } else {
                r.link
            };
            let step = training_step(inputs, &r, basis, t, batch, replicas_total, link);
            let steps = tokens.div_ceil(batch * sequence * replicas_total);
            let seconds = Decimal::from(steps) * step;
            let rate = Decimal::from(tokens) / seconds;
            Some(Speed {
                basis,
                profile: inputs.profile,
                prefill_tokens_per_s: round(Decimal::from(batch * sequence) / step, 1),
                decode_tokens_per_s: round(zero, 1),
                ttft_s: round(step, 6),
                tpot_s: round(zero, 6),
                workload_tokens_per_s: round(rate, 1),
                hours: round(seconds / Decimal::from(HOUR), 2),
                seconds: round(seconds, 6),
                // Training is never calibrated; its expected step is the ceiling's FLOPs at
                // the stated MFU (at most 1) and its bytes at the efficiency factors (at most
                // 1), plus latencies the ceiling leaves out: never below it.
                held_at_ceiling: Vec::new(),
            })
        }
    }
}

/// The cheapest way to finish within `seconds`: more lots at once, or consecutive packages;
/// with `fixed_lots` (`--gpus N`), exactly those lots, for as many packages as it takes.
#[allow(clippy::too_many_arguments)]
fn finish(
    inputs: &Inputs,
    s: &Setup,
    gpu: &GpuPerf,
    format: Format,
    seconds: Decimal,
    lot_cents: i64,
    fixed_lots: Option<u64>,
) -> Option<Finish> {
    let base = fixed_lots.unwrap_or(s.lots_per_replica);
    let hours_with = |lots: u64| {
        speed(
            inputs,
            gpu,
            format,
            Basis::Expected,
            s.tensor_parallel,
            s.replicas_per_lot.max(1),
            s.lots_per_replica,
            s.batch,
            lots,
        )
        .map(|x| x.hours)
    };
    let limit = seconds / Decimal::from(HOUR);
    // More lots: the fewest (in steps of the base) that finish within one package.
    let mut more = None;
    let mut lots = base;
    let mut last = hours_with(lots)?;
    while fixed_lots.is_none() && lots <= MAX_LOTS {
        if last <= limit {
            more = Some((lots, last));
            break;
        }
        // Jump by the ratio, then walk: the time falls about as 1/lots.
        let guess = (Decimal::from(lots) * last / limit).ceil();
        let next = u64::try_from(guess)
            .unwrap_or(MAX_LOTS + 1)
            .max(lots + base);
        lots = next.div_ceil(base) * base;
        if lots > MAX_LOTS {
            break;
        }
        let now = hours_with(lots)?;
        if now >= last {
            break;
        }
        last = now;
    }
    let base_hours = hours_with(base)?;
    let repeats = u64::try_from((base_hours / limit).ceil()).ok()?.max(1);
    let by_repeat = (base, repeats, base_hours);
    let cost = |l: u64, k: u64| {
        i64::try_from(
            u64::try_from(lot_cents)
                .ok()?
                .checked_mul(l)?
                .checked_mul(k)?,
        )
        .ok()
    };
    let repeat_cost = cost(by_repeat.0, by_repeat.1);
    let more_cost = more.and_then(|(l, _)| cost(l, 1));
    let (l, k, hours, cents) = match (more, more_cost, repeat_cost) {
        (Some((l, h)), Some(c), Some(rc)) if c <= rc => (l, 1, h, c),
        (_, _, Some(rc)) => (by_repeat.0, by_repeat.1, by_repeat.2, rc),
        (Some((l, h)), Some(c), None) => (l, 1, h, c),
        _ => return None,
    };
    let how = match (l == base, k) {
        (true, 1) => format!("{l} lot{} for one package", if l == 1 { "" } else { "s" }),
        (true, k) => format!(
            "{l} lot{} for {k} consecutive packages",
            if l == 1 { "" } else { "s" }
        ),
        (false, _) => format!("{l} lots at once for one package"),
    };
    // The same lots at the ceiling's batch and rates (the work is split the same way).
    let ceiling_hours = speed(
        inputs,
        gpu,
        format,
        Basis::Ceiling,
        s.tensor_parallel,
        s.replicas_per_lot.max(1),
        s.lots_per_replica,
        s.ceiling_batch,
        l,
    )?
    .hours;
    let expected = speed(
        inputs,
        gpu,
        format,
        Basis::Expected,
        s.tensor_parallel,
        s.replicas_per_lot.max(1),
        s.lots_per_replica,
        s.batch,
        l,
    )?;
    let seconds = expected.seconds;
    Some(Finish {
        basis: Basis::Expected,
        profile: inputs.profile,
        lots: l,
        packages: k,
        hours,
        ceiling_hours,
        seconds,
        held_at_ceiling: expected.held_at_ceiling,
        cost_cents: cents,
        cost_usd: Decimal::new(cents, 2),
        how,
    })
}

#[cfg(test)]
mod duration_tests {
    use super::duration;
    use rust_decimal::Decimal;

    #[test]
    fn durations_keep_three_significant_digits_below_a_minute_and_a_unit_always() {
        let d = |s: &str| duration(s.parse::<Decimal>().unwrap());
        assert_eq!(d("0"), "0 s");
        assert_eq!(d("0.004215"), "0.00422 s");
        assert_eq!(d("0.0421"), "0.0421 s");
        assert_eq!(d("0.5"), "0.500 s");
        assert_eq!(d("1.2345"), "1.23 s");
        // Half-to-even at the kept digit.
        assert_eq!(d("1.125"), "1.12 s");
        assert_eq!(d("12.34"), "12.3 s");
        assert_eq!(d("59.96"), "60.0 s");
        assert_eq!(d("60"), "1.0 min");
        assert_eq!(d("750"), "12.5 min");
        assert_eq!(d("3600"), "1.00 h");
        assert_eq!(d("17172"), "4.77 h");
    }
}
