//! `lab plan`: which package fits a model, and what it costs; with a workload ([`time`]),
//! which package finishes it.

mod time;

use lab::plan::{self, Mode, Request, WeightsFormat};
use lab::units::gib;
use lab::values;
use lab::{Error, Result};
use rust_decimal::Decimal;
use std::path::PathBuf;

/// `--batch` and `--context`: a whole number from 1 to 2^32 (the one number grammar).
fn plan_size(text: &str) -> std::result::Result<u64, values::Refusal> {
    values::whole(text, 1, 1 << 32)
}

/// `--weights-dtype`: one of the [`plan::memory::FORMATS`] names, exactly as written there
/// (lowercase: named values are case-sensitive in every `lab` flag, as `--dtype`, `--mode`,
/// `--gpu`).
pub(super) fn weights_format(text: &str) -> std::result::Result<String, values::Refusal> {
    plan::memory::FORMATS
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(name, _)| (*name).to_string())
        .ok_or_else(|| {
            format!(
                "must be one of {}",
                plan::memory::FORMATS.map(|f| f.0).join(", ")
            )
        })
}

/// KV-cache element formats: the float and 8-bit [`plan::memory::FORMATS`].
const KV_FORMATS: [&str; 5] = ["fp32", "bf16", "fp16", "fp8", "int8"];

/// `--kv-dtype`: one of [`KV_FORMATS`], exactly (case-sensitive, as `--weights-dtype`).
fn kv_format(text: &str) -> std::result::Result<String, values::Refusal> {
    KV_FORMATS
        .contains(&text)
        .then(|| text.to_string())
        .ok_or_else(|| format!("must be one of {}", KV_FORMATS.join(", ")))
}

/// `--tensor-parallel`: a degree from 1 to [`plan::packages::MAX_DEGREE`].
fn degree(text: &str) -> std::result::Result<u64, values::Refusal> {
    values::whole(text, 1, plan::packages::MAX_DEGREE)
}

/// `--gpus`: GPUs per package, from 1 to 1024 (the most lots one answer buys).
fn gpu_count(text: &str) -> std::result::Result<u64, values::Refusal> {
    values::whole(text, 1, 1024)
}

/// Flags of `lab plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Model folder (config.json and safetensors headers are read, never the tensor data), a
    /// config.json alone, or ORG/NAME of a model in the local Hugging Face cache (never
    /// downloaded).
    #[arg(long, value_name = "PATH|ORG/NAME", allow_hyphen_values = true)]
    pub(super) model: PathBuf,
    /// With --model ORG/NAME: the cached snapshot of this branch, tag or commit hash
    /// (default main).
    #[arg(long, value_name = "REV", allow_hyphen_values = true)]
    pub(super) revision: Option<String>,
    /// Sequences processed together (default 1; with a workload: the largest that fits).
    #[arg(long, value_name = "B", value_parser = plan_size, allow_hyphen_values = true)]
    pub(super) batch: Option<u64>,
    /// Tokens per sequence: prompt plus generation (default 4096; training: the sequence
    /// length; an inference workload uses --input-tokens + --output-tokens).
    #[arg(long, value_name = "T", value_parser = plan_size, allow_hyphen_values = true)]
    pub(super) context: Option<u64>,
    /// Weights format: fp32, bf16, fp16, fp8, int8, int4 or int4-g128 (both 4 bits + a
    /// 16-bit scale per 128 weights). Default: as stored (safetensors) or configured
    /// (config.json dtype).
    #[arg(
        long,
        value_name = "FORMAT",
        conflicts_with = "bits",
        value_parser = weights_format,
        allow_hyphen_values = true
    )]
    pub(super) weights_dtype: Option<String>,
    /// Bits per decoder-matrix weight, scales included, as an exact decimal (e.g. 4.5).
    #[arg(long, value_name = "BITS", allow_hyphen_values = true)]
    pub(super) bits: Option<String>,
    /// KV-cache format: fp32, bf16, fp16, fp8, int8. Default: the activations' width.
    #[arg(long, value_name = "FORMAT", value_parser = kv_format, allow_hyphen_values = true)]
    pub(super) kv_dtype: Option<String>,
    /// inference (weights, KV cache, prefill workspace) or training (AdamW, mixed precision).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "inference",
        allow_hyphen_values = true
    )]
    pub(super) mode: String,
    /// Training: one activation checkpoint per layer (recompute in the backward pass).
    #[arg(long)]
    pub(super) checkpointing: bool,
    /// Package duration in days: 3, 7 or 30 (default 7; with a workload, repeatable, default
    /// all three).
    #[arg(long, value_name = "D", value_parser = values::days, allow_hyphen_values = true)]
    pub(super) days: Vec<u32>,
    #[command(flatten)]
    pub(super) accepted: super::AcceptedArg,
    #[command(flatten)]
    pub(super) catalog: super::CatalogArg,
    /// GPU memory file to use instead of the embedded data/gpu-memory.csv.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    pub(super) gpu_memory: Option<PathBuf>,
    /// Only this catalog GPU id (with a workload, repeatable).
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub(super) gpu: Vec<String>,
    /// Tensor-parallel degree to use instead of the smallest that fits (it must divide the
    /// attention heads, and the key/value heads divide it or it them).
    #[arg(long, value_name = "N", value_parser = degree, allow_hyphen_values = true)]
    pub(super) tensor_parallel: Option<u64>,
    /// GPUs every package buys (whole lots), instead of the fewest that fit.
    #[arg(long, value_name = "N", value_parser = gpu_count, allow_hyphen_values = true)]
    pub(super) gpus: Option<u64>,
    #[command(flatten)]
    pub(super) time: time::TimeArgs,
    /// Print one JSON object instead of the text.
    #[arg(long)]
    pub(super) json: bool,
}

/// Runs `lab plan`.
///
/// # Errors
/// Usage (exit 2) for bad flags, a model folder without config.json, an unknown architecture,
/// malformed safetensors headers or index, an invalid catalog or GPU memory file; Runtime
/// (exit 1) for unreadable files.
pub fn run(mut args: Args) -> Result<()> {
    let hub = locate(&mut args)?;
    let root = hub.as_ref().map(|h| h.root.clone());
    let shown = hub.map(|h| h.shown);
    let result = if args.time.given() {
        time::run(args, shown)
    } else {
        run_plan(args, shown)
    };
    // Nothing personal in a message: paths inside the cache are shown from its root.
    match root {
        Some(root) => result.map_err(|e| plan::hub::hide_in_error(&root, e)),
        None => result,
    }
}

/// `--model ORG/NAME` that is not a path here: the cached snapshot, put in `args.model`.
///
/// # Errors
/// As [`plan::hub::root`] and [`plan::hub::resolve`]; [`Error::Usage`] for `--revision`
/// with a model folder or file.
fn locate(args: &mut Args) -> Result<Option<plan::hub::Resolved>> {
    let here = match std::fs::symlink_metadata(&args.model) {
        Ok(_) => true,
        // A path through a file ("notes.txt/config.json") is a path here that the system
        // refuses, not a model name for the cache: an I/O failure, as for any other file.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::runtime(format!(
                "cannot read --model {}: {e}",
                lab::text::one_line(&args.model.display().to_string())
            )))
        }
        Err(_) => false,
    };
    let repo = args
        .model
        .to_str()
        .filter(|t| !here && plan::hub::is_repo_id(t))
        .map(str::to_string);
    match repo {
        Some(repo) => {
            let (root, where_) = plan::hub::root(&|name| std::env::var_os(name))?;
            let found = plan::hub::resolve(&root, &where_, &repo, args.revision.as_deref())?;
            args.model = found.path.clone();
            Ok(Some(found))
        }
        None if args.revision.is_some() => Err(Error::usage(format!(
            "--revision picks a snapshot of --model ORG/NAME in the Hugging Face cache; {} is {}: leave --revision out",
            lab::text::one_line(&args.model.display().to_string()),
            if here { "a folder or file here" } else { "not an ORG/NAME" }
        ))),
        None => Ok(None),
    }
}

/// `lab plan` without a workload; `shown` names a cached model (relative to the cache).
fn run_plan(args: Args, shown: Option<String>) -> Result<()> {
    if args.time.pictures() {
        return Err(Error::usage(
            "--svg and --html draw a workload's time and cost: add --requests N --input-tokens I --output-tokens O (or --mode training --train-tokens D)",
        ));
    }
    if args.days.len() > 1 || args.gpu.len() > 1 {
        return Err(Error::usage(
            "several --days or --gpu need a workload (--requests ... or --mode training --train-tokens D)",
        ));
    }
    let (batch, context) = (args.batch.unwrap_or(1), args.context.unwrap_or(4096));
    let days = args.days.first().copied().unwrap_or(7);
    let accepted = args.accepted.accepted_results;
    let mode = match args.mode.as_str() {
        "inference" => Mode::Inference,
        "training" => Mode::Training,
        other => {
            return Err(Error::usage(format!(
                "--mode must be inference or training, got '{}'",
                lab::text::excerpt(other)
            )))
        }
    };
    if args.checkpointing && mode != Mode::Training {
        return Err(Error::usage("--checkpointing applies to --mode training"));
    }
    let weights = match (&args.weights_dtype, &args.bits) {
        (Some(name), _) => WeightsFormat::Named(name.clone()),
        (None, Some(bits)) => WeightsFormat::Bits(parse_bits(bits)?),
        (None, None) => WeightsFormat::Stored,
    };
    let catalog = args.catalog.load()?;
    let memory = plan::gpu_memory::load(args.gpu_memory.as_deref(), &catalog)?;
    let request_model = args.model.clone();
    let fixed = fixed(&args);
    let request = Request {
        model: args.model,
        batch,
        context,
        weights,
        kv_dtype: args.kv_dtype,
        mode,
        checkpointing: args.checkpointing,
        fixed,
    };
    let mut p = plan::plan(&request, &catalog, &memory, days, accepted, &args.gpu)?;
    if let Some(shown) = shown {
        p.model = shown;
    }
    p.notes
        .extend(lab::timing::context_notes(&request_model, context)?);
    if args.json {
        return lab::stdout::json(&p);
    }
    lab::stdout::lines(&render(&p, catalog.describe()))
}

/// `--tensor-parallel` and `--gpus` as the plan takes them.
pub(super) fn fixed(args: &Args) -> plan::packages::Fixed {
    plan::packages::Fixed {
        tensor_parallel: args.tensor_parallel,
        gpus: args.gpus,
    }
}

/// `--bits`: a decimal from 1 to 64 with at most 4 decimals, e.g. `4.5`; returned normalized
/// (`01` is 1, `64.0000` is 64, `4.50` is 4.5), as the plan then shows it.
pub(super) fn parse_bits(text: &str) -> Result<Decimal> {
    let ok_shape = !text.is_empty()
        && text.len() <= 12
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|b| *b == b'.').count() <= 1
        && !text.starts_with('.')
        && !text.ends_with('.');
    let value = ok_shape
        .then(|| text.parse::<Decimal>().ok())
        .flatten()
        .filter(|v| *v >= Decimal::ONE && *v <= Decimal::from(64) && v.scale() <= 4)
        .map(|v| v.normalize());
    value.ok_or_else(|| {
        Error::usage(format!(
            "--bits must be a decimal number of bits per weight from 1 to 64 with at most 4 decimals (e.g. 4.5), got '{}'",
            lab::text::excerpt(text)
        ))
    })
}

fn both(bytes: u64) -> String {
    let gb = Decimal::from(bytes) / Decimal::from(1_000_000_000u64);
    let mut gb = gb.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointNearestEven);
    gb.rescale(2);
    format!("{bytes} B = {} GiB = {gb} GB", gib(bytes, 2))
}

/// The architecture line: what the family really has (latent attention's widths, not
/// hidden / heads; each feed-forward kind with its own width and the layers that have it).
fn architecture_line(a: &plan::ArchitectureSummary) -> String {
    let attention = match &a.latent {
        Some(l) => format!(
            "{} heads, latent attention (cached per token: latent {} + rope {}; query {}; query/key head {} + rope {}, value head {})",
            a.attention_heads,
            l.kv_lora_rank,
            l.qk_rope_head_dim,
            l.q_lora_rank
                .map_or_else(|| "not compressed".to_string(), |q| format!("compressed to {q}")),
            l.qk_nope_head_dim,
            l.qk_rope_head_dim,
            l.v_head_dim
        ),
        None => format!(
            "{} heads, {} KV heads, head {}",
            a.attention_heads, a.key_value_heads, a.head_dim
        ),
    };
    // Each feed-forward kind with its own width: the dense MLP's, and the experts' (routed
    // and shared), each on the layers that have it.
    let experts = match (a.experts, a.expert_intermediate) {
        (Some((e, k)), Some(width)) if a.expert_layers > 0 => Some(format!(
            "{e} experts ({k} per token) of intermediate {width}{}",
            match a.shared_expert_intermediate {
                Some(s) if s > 0 => format!(", shared {s}"),
                _ => String::new(),
            }
        )),
        _ => None,
    };
    let feed_forward = match experts {
        None => format!("intermediate {}", a.intermediate_size),
        Some(experts) if a.dense_layers == 0 => experts,
        Some(experts) => {
            let on = |n: u64| format!("on {n} layer{}", if n == 1 { "" } else { "s" });
            format!(
                "intermediate {} {}, {experts} {}",
                a.intermediate_size,
                on(a.dense_layers),
                on(a.expert_layers)
            )
        }
    };
    format!(
        "  hidden {}, {} layers, {attention}, {feed_forward}, vocabulary {}{}{}{}",
        a.hidden_size,
        a.layers,
        a.vocab_size,
        if a.tied_embeddings {
            ", tied embeddings"
        } else {
            ""
        },
        match a.sliding_window {
            Some(w) => format!(", window {w} on {} layers", a.sliding_window_layers),
            None => String::new(),
        },
        match a.attention_chunk {
            Some(c) => format!(", chunks of {c} on {} layers", a.chunked_attention_layers),
            None => String::new(),
        }
    )
}

pub(super) fn render(p: &plan::Plan, catalog: String) -> Vec<String> {
    let m = &p.memory;
    let mut out = vec![format!(
        "{} ({}): {} parameters{}",
        lab::text::one_line(&p.model),
        lab::text::one_line(&p.model_type),
        p.parameters,
        match (&p.headers, p.lower_bound) {
            (Some(_), true) => " (safetensors header elements)",
            (Some(_), false) => " (safetensors headers)",
            (None, _) => " (config arithmetic)",
        }
    )];
    match (&p.architecture, &p.headers) {
        (Some(a), _) => out.push(architecture_line(a)),
        (None, Some(h)) => out.push(format!(
            "  layout not known to lab plan: {} tensors in {} safetensors file{}",
            h.tensors,
            h.files.len(),
            if h.files.len() == 1 { "" } else { "s" }
        )),
        (None, None) => {}
    }
    for note in &p.notes {
        out.push(format!("  note: {note}"));
    }
    out.push(format!(
        "{} at batch {} x context {}; weights {}{}{}",
        match p.mode {
            Mode::Inference => "inference",
            Mode::Training => "training (AdamW, mixed precision)",
        },
        p.batch,
        p.context,
        p.weights_format,
        // Training keeps no KV cache: name its dtype only where one is counted.
        match p.mode {
            Mode::Inference => format!(", KV cache {}", p.kv_dtype),
            Mode::Training => String::new(),
        },
        if p.checkpointing {
            ", activation checkpointing"
        } else {
            ""
        }
    ));
    // A lower-bound plan (an unknown model_type) shows what it does not model as such.
    let bound = p.lower_bound;
    let kv_known = !bound || m.kv_cache_bytes_per_token > 0;
    let modelled = |bytes: u64| (!bound).then_some(bytes);
    let mut rows = vec![("weights", Some(m.weights_bytes))];
    if !bound {
        rows.push((
            "weights as allocated on a GPU",
            Some(m.weights_allocated_bytes),
        ));
    }
    match p.mode {
        Mode::Inference => {
            rows.push(("KV cache", kv_known.then_some(m.kv_cache_bytes)));
            if m.prefill_kv_cache_bytes > m.kv_cache_bytes {
                rows.push((
                    "KV during prefill (window not yet applied)",
                    Some(m.prefill_kv_cache_bytes),
                ));
            }
            rows.push((
                "prefill workspace (one layer)",
                modelled(m.activation_bytes),
            ));
        }
        Mode::Training => {
            rows.push(("gradients", Some(m.gradients_bytes)));
            rows.push(("fp32 master weights", Some(m.master_weights_bytes)));
            rows.push(("AdamW moments (fp32)", Some(m.optimizer_bytes)));
            rows.push(("activations", modelled(m.activation_bytes)));
        }
    }
    rows.push((
        if bound {
            "total (peak), at least"
        } else {
            "total (peak)"
        },
        Some(m.total_bytes),
    ));
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    for (name, bytes) in rows {
        let value = bytes.map_or_else(|| "not modelled".to_string(), both);
        out.push(format!("  {name:<width$}  {value}"));
    }
    if bound {
        out.push(format!("  not modelled: {}", p.not_modelled.join("; ")));
    } else {
        out.push(format!(
            "  caching allocator: +{} B of block rounding and buffers over the weights; {} of segments reserved for them",
            m.weights_allocated_bytes.saturating_sub(m.weights_bytes),
            both(m.weights_reserved_bytes)
        ));
    }
    if p.mode == Mode::Inference && kv_known {
        out.push(format!(
            "  KV cache per token: {} B (all layers, one sequence)",
            m.kv_cache_bytes_per_token
        ));
    }
    out.push(format!(
        "  plus a runtime reserve of {} per GPU (CUDA context, workspaces, fragmentation)",
        both(m.runtime_reserve_bytes_per_gpu)
    ));
    out.push(format!(
        "packages for {} days{}{}, {}:",
        p.days,
        p.fixed_gpus
            .map_or_else(String::new, |n| format!(" of exactly {n} GPUs")),
        p.fixed_tensor_parallel
            .map_or_else(String::new, |t| format!(" at tensor parallel {t}")),
        if bound {
            "the memory a lower bound: none is known to fit; cheapest not ruled out first"
        } else {
            "fitting ones cheapest first"
        }
    ));
    let header = [
        "#",
        "gpu",
        "usable GiB/GPU",
        "memory source",
        "GPUs",
        "need GiB/GPU",
        "lots",
        "total USD",
        "USD/GPU-day",
        "USD/result",
        "fits",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for k in &p.packages {
        let dash = || "-".to_string();
        table.push(vec![
            k.rank.map_or_else(dash, |r| r.to_string()),
            k.gpu.clone(),
            gib(k.usable_bytes_per_gpu, 2).to_string(),
            k.memory_source.clone(),
            k.gpus.map_or_else(dash, |g| match k.gpus_bought {
                Some(b) if b > g => format!("{g} (+{})", b - g),
                _ => g.to_string(),
            }),
            gib(k.need_bytes_per_gpu, 2).to_string(),
            k.lots.map_or_else(dash, |l| l.to_string()),
            k.total_usd.map_or_else(dash, |u| u.to_string()),
            k.usd_per_gpu_day.to_string(),
            k.unit_cost_usd.map_or_else(dash, |u| u.to_string()),
            if k.fits && k.lots.unwrap_or(1) > 1 && k.gpus.unwrap_or(1) > 1 {
                // Tensor parallel never crosses machines: over several lots it is a
                // multi-machine setup (pipeline), which a workload times (--requests).
                format!("multi-machine ({} lots)", k.lots.unwrap_or(1))
            } else if k.fits {
                "yes".into()
            } else if k.at_least {
                "at least".into()
            } else {
                format!("no ({})", k.not_fitting.as_deref().unwrap_or("-"))
            },
        ]);
    }
    out.extend(lab::table::align(&table, |i| matches!(i, 1 | 3 | 10)));
    if p.accepted_results.is_none() {
        out.push("unit cost per result: give --accepted-results K".to_string());
    }
    out.push(format!("{catalog}, sha256 {}", p.catalog.sha256));
    out
}
