//! `lab plan` with a workload: time and cost per GPU and package (`lab::timing`).

use super::{fixed, parse_bits, render, Args};
use lab::plan::{self, Mode, Request, WeightsFormat};
use lab::timing::decision::{duration, Row};
use lab::timing::roofline::Profile;
use lab::timing::workload::{Method, Targets, Workload};
use lab::timing::{self, Ask, TimePlan};
use lab::values;
use lab::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;
use std::path::PathBuf;

fn count(text: &str) -> std::result::Result<u64, values::Refusal> {
    values::whole(text, 1, 1 << 50)
}

fn tokens(text: &str) -> std::result::Result<u64, values::Refusal> {
    values::whole(text, 1, 1 << 32)
}

/// The workload flags of `lab plan`.
#[derive(Debug, clap::Args)]
pub struct TimeArgs {
    /// Inference workload: requests to serve.
    #[arg(long, value_name = "N", value_parser = count, allow_hyphen_values = true)]
    requests: Option<u64>,
    /// Prompt tokens per request.
    #[arg(long, value_name = "I", value_parser = tokens, allow_hyphen_values = true)]
    input_tokens: Option<u64>,
    /// Generated tokens per request.
    #[arg(long, value_name = "O", value_parser = tokens, allow_hyphen_values = true)]
    output_tokens: Option<u64>,
    /// Training workload (with --mode training): training tokens; sequences of --context.
    #[arg(long, value_name = "D", value_parser = count, allow_hyphen_values = true)]
    train_tokens: Option<u64>,
    /// Training method: full, lora or qlora (4-bit base).
    #[arg(long, value_name = "METHOD", allow_hyphen_values = true)]
    method: Option<String>,
    /// LoRA rank (default 16).
    #[arg(long, value_name = "R", value_parser = tokens, allow_hyphen_values = true)]
    lora_rank: Option<u64>,
    /// LoRA targets: attention (q, k, v, o) or all (and the dense feed-forward); default all.
    #[arg(long, value_name = "WHICH", allow_hyphen_values = true)]
    lora_targets: Option<String>,
    /// Engine profile of the expected figures: eager (default) or cuda-graphs.
    #[arg(long, value_name = "PROFILE", allow_hyphen_values = true)]
    profile: Option<String>,
    /// Network bandwidth between lots, GB/s, for pipelines and data parallel across lots
    /// (default 12.5: 100 Gb/s, an assumption).
    #[arg(long, value_name = "GB/S", allow_hyphen_values = true)]
    network_gb_s: Option<String>,
    /// GPU performance file instead of the embedded data/gpu-perf.csv.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    gpu_perf: Option<PathBuf>,
    /// `lab measure --model` documents of this model: their measured step times over the
    /// expected ones scale the expected decode and prefill times of the GPU model measured.
    /// The documents run up to the next flag (a name starting with `-`: give it as `./-NAME`).
    #[arg(long, value_name = "DOC", num_args = 1..)]
    calibration: Vec<PathBuf>,
    /// Also draw the decision (hours against cost to finish) to this new SVG file.
    #[arg(long, value_name = "OUT.svg", allow_hyphen_values = true)]
    svg: Option<PathBuf>,
    /// Also write one self-contained HTML page (the drawing, the answer, the table).
    #[arg(long, value_name = "OUT.html", allow_hyphen_values = true)]
    html: Option<PathBuf>,
}

impl TimeArgs {
    /// Whether any workload flag was given.
    pub fn given(&self) -> bool {
        self.requests.is_some()
            || self.input_tokens.is_some()
            || self.output_tokens.is_some()
            || self.train_tokens.is_some()
            || self.method.is_some()
            || self.lora_rank.is_some()
            || self.lora_targets.is_some()
            || self.profile.is_some()
            || self.network_gb_s.is_some()
            || self.gpu_perf.is_some()
            || !self.calibration.is_empty()
    }

    /// Whether `--svg` or `--html` was given.
    pub fn pictures(&self) -> bool {
        self.svg.is_some() || self.html.is_some()
    }
}

/// Refuses `--svg` / `--html` paths before any work: existing, in a missing folder, or the
/// same path twice.
fn check_pictures(t: &TimeArgs) -> Result<()> {
    for path in t.svg.iter().chain(&t.html) {
        lab::output::check_new(path)?;
    }
    if let (Some(a), Some(b)) = (&t.svg, &t.html) {
        // The same file under two spellings (`x.svg`, `./x.svg`) is the same path once
        // normalised; neither exists yet (check_new above), so compare the parts.
        fn same(p: &std::path::Path) -> Vec<std::path::Component<'_>> {
            p.components()
                .filter(|c| !matches!(c, std::path::Component::CurDir))
                .collect()
        }
        if same(a) == same(b) {
            return Err(Error::usage(format!(
                "--svg and --html both name {}: give each its own new file",
                a.display()
            )));
        }
    }
    Ok(())
}

/// Writes the drawing and the page of the same plan; when the page fails, the drawing just
/// written is removed again, so a failed run leaves no file.
fn write_pictures(t: &TimeArgs, model: &str, time: &TimePlan, answer: &str) -> Result<()> {
    use lab::timing::picture::{html, svg};
    let drawing = svg::render(model, time, answer);
    if let Some(path) = &t.svg {
        lab::output::write_new(path, drawing.svg.as_bytes())?;
    }
    if let Some(path) = &t.html {
        let page = html::render(model, time, answer, &drawing);
        if let Err(e) = lab::output::write_new(path, page.as_bytes()) {
            if let Some(svg) = &t.svg {
                let _ = std::fs::remove_file(svg);
            }
            return Err(e);
        }
    }
    Ok(())
}

fn workload(args: &Args) -> Result<Workload> {
    let t = &args.time;
    let inference = t.requests.is_some() || t.input_tokens.is_some() || t.output_tokens.is_some();
    let training = t.train_tokens.is_some()
        || t.method.is_some()
        || t.lora_rank.is_some()
        || t.lora_targets.is_some();
    match args.mode.as_str() {
        "inference" | "training" => {}
        other => {
            return Err(Error::usage(format!(
                "--mode must be inference or training, got '{}'",
                lab::text::excerpt(other)
            )))
        }
    }
    if inference && training {
        return Err(Error::usage(
            "give an inference workload (--requests, --input-tokens, --output-tokens) or a training one (--mode training --train-tokens ...), not both",
        ));
    }
    if inference || args.mode == "inference" && !training {
        if args.mode != "inference" {
            return Err(Error::usage(
                "--requests, --input-tokens and --output-tokens are for --mode inference",
            ));
        }
        if args.checkpointing {
            return Err(Error::usage("--checkpointing applies to --mode training"));
        }
        let (Some(requests), Some(input_tokens), Some(output_tokens)) =
            (t.requests, t.input_tokens, t.output_tokens)
        else {
            return Err(Error::usage(
                "an inference workload needs --requests, --input-tokens and --output-tokens",
            ));
        };
        if args
            .context
            .is_some_and(|c| Some(c) != input_tokens.checked_add(output_tokens))
        {
            return Err(Error::usage(
                "with an inference workload the context is --input-tokens + --output-tokens: leave --context out",
            ));
        }
        return Ok(Workload::Inference {
            requests,
            input_tokens,
            output_tokens,
        });
    }
    if args.mode != "training" {
        return Err(Error::usage(
            "--train-tokens, --method and --lora-* need --mode training",
        ));
    }
    let Some(tokens) = t.train_tokens else {
        return Err(Error::usage("a training workload needs --train-tokens D"));
    };
    let method = match t.method.as_deref().unwrap_or("full") {
        "full" => Method::Full,
        "lora" => Method::Lora,
        "qlora" => Method::Qlora,
        other => {
            return Err(Error::usage(format!(
                "--method must be full, lora or qlora, got '{}'",
                lab::text::excerpt(other)
            )))
        }
    };
    if method == Method::Full && (t.lora_rank.is_some() || t.lora_targets.is_some()) {
        return Err(Error::usage(
            "--lora-rank and --lora-targets need --method lora or qlora",
        ));
    }
    if method == Method::Qlora && (args.weights_dtype.is_some() || args.bits.is_some()) {
        return Err(Error::usage(
            "--method qlora sets a 4-bit base: leave --weights-dtype and --bits out",
        ));
    }
    let targets = match t.lora_targets.as_deref().unwrap_or("all") {
        "all" => Targets::All,
        "attention" => Targets::Attention,
        other => {
            return Err(Error::usage(format!(
                "--lora-targets must be attention or all, got '{}'",
                lab::text::excerpt(other)
            )))
        }
    };
    Ok(Workload::Training {
        tokens,
        sequence: args.context.unwrap_or(4096),
        method,
        rank: t.lora_rank.unwrap_or(16),
        targets,
    })
}

fn network(text: Option<&str>) -> Result<Decimal> {
    let Some(text) = text else {
        return Ok(Decimal::new(125, 1));
    };
    let ok = !text.is_empty()
        && text.len() <= 12
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|b| *b == b'.').count() <= 1
        && !text.starts_with('.')
        && !text.ends_with('.');
    ok.then(|| text.parse::<Decimal>().ok())
        .flatten()
        .filter(|v| *v > Decimal::ZERO)
        .ok_or_else(|| {
            Error::usage(format!(
                "--network-gb-s must be a positive decimal number of GB/s (e.g. 12.5 for 100 Gb/s), got '{}'",
                lab::text::excerpt(text)
            ))
        })
}

#[derive(Serialize)]
struct Both<'a> {
    #[serde(flatten)]
    plan: &'a plan::Plan,
    time: &'a TimePlan,
}

/// Runs `lab plan` with a workload.
///
/// # Errors
/// Usage (exit 2) for bad or conflicting flags, a workload no GPU can run, and as `lab plan`.
pub fn run(args: Args, shown: Option<String>) -> Result<()> {
    let workload = workload(&args)?;
    if args.accepted.accepted_results.is_some() {
        return Err(Error::usage(
            "--accepted-results gives a cost per accepted result from real counts; a workload's costs are predictions: give one or the other",
        ));
    }
    let profile = match args.time.profile.as_deref().unwrap_or("eager") {
        "eager" => Profile::Eager,
        "cuda-graphs" => Profile::CudaGraphs,
        other => {
            return Err(Error::usage(format!(
                "--profile must be eager or cuda-graphs, got '{}'",
                lab::text::excerpt(other)
            )))
        }
    };
    let network_gb_s = network(args.time.network_gb_s.as_deref())?;
    check_pictures(&args.time)?;
    let weights = match (&args.weights_dtype, &args.bits) {
        (Some(name), _) => WeightsFormat::Named(name.clone()),
        (None, Some(bits)) => WeightsFormat::Bits(parse_bits(bits)?),
        (None, None) => WeightsFormat::Stored,
    };
    let catalog = args.catalog.load()?;
    let memory = plan::gpu_memory::load(args.gpu_memory.as_deref(), &catalog)?;
    let perf = timing::gpu_perf::load(args.time.gpu_perf.as_deref(), &catalog)?;
    let mut days = args.days.clone();
    if days.is_empty() {
        days = vec![3, 7, 30];
    }
    days.sort_unstable();
    days.dedup();
    let ask = Ask {
        request: Request {
            model: args.model.clone(),
            batch: 1,
            context: 1,
            weights,
            kv_dtype: args.kv_dtype.clone(),
            mode: Mode::Inference,
            checkpointing: args.checkpointing,
            fixed: fixed(&args),
        },
        workload,
        batch: args.batch,
        days,
        gpus: args.gpu.clone(),
        profile,
        network_gb_s,
    };
    let (mut p, t) =
        timing::estimate_calibrated(&ask, &catalog, &memory, &perf, &args.time.calibration)?;
    if let Some(shown) = shown {
        p.model = shown;
    }
    if args.time.pictures() {
        let line = answer(&t).concat();
        write_pictures(&args.time, &p.model, &t, &line)?;
    }
    if args.json {
        return lab::stdout::json(&Both { plan: &p, time: &t });
    }
    let mut out = answer(&t);
    out.extend(render(&p, catalog.describe()));
    out.extend(table(&t));
    lab::stdout::lines(&out)?;
    for path in args.time.svg.iter().chain(&args.time.html) {
        // A file name may hold a newline or an escape: the line stays one line.
        lab::errln!(
            "written to {}",
            lab::text::one_line(&path.display().to_string())
        );
    }
    Ok(())
}

fn answer(t: &TimePlan) -> Vec<String> {
    let first = t.rows.iter().find(|r| r.finish.is_some());
    let Some(r) = first else {
        return vec!["answer: no package can run this workload".into()];
    };
    let (Some(f), Some(s)) = (&r.finish, &r.setup) else {
        return Vec::new();
    };
    vec![format!(
        "answer: {} for {} days, {}: about {} ({} expected, {}), {} USD; predicted {} USD per {}",
        r.gpu,
        r.days,
        f.how,
        duration(f.seconds),
        t.profile.name(),
        s.using,
        f.cost_usd,
        r.predicted_usd_per_million_tokens.unwrap_or_default(),
        match t.workload {
            Workload::Inference { .. } => "million output tokens",
            Workload::Training { .. } => "million training tokens",
        }
    )]
}

fn table(t: &TimePlan) -> Vec<String> {
    let mut out = vec![match t.workload {
        Workload::Inference { requests, input_tokens, output_tokens } => format!(
            "workload: {requests} requests x ({input_tokens} input + {output_tokens} output tokens); per replica: prefill and decode tokens/s, TTFT and TPOT at its batch"
        ),
        Workload::Training { tokens, sequence, method, rank, .. } => format!(
            "workload: training on {tokens} tokens in sequences of {sequence}, {}; per replica: training tokens/s and step seconds; expected MFU {} (assumed)",
            match method {
                Method::Full => "full fine-tuning (AdamW)".to_string(),
                Method::Lora => format!("LoRA rank {rank}"),
                Method::Qlora => format!("QLoRA rank {rank} (4-bit base)"),
            },
            t.training_mfu.unwrap_or_default()
        ),
    }];
    for n in &t.notes {
        out.push(format!("  note: {n}"));
    }
    out.push(format!(
        "time and cost, cheapest finish first (expected = {} profile; ceiling = datasheet peaks; all costs are predictions):",
        t.profile.name()
    ));
    let training = matches!(t.workload, Workload::Training { .. });
    let header: Vec<&str> = if training {
        vec![
            "#",
            "gpu",
            "days",
            "use",
            "batch",
            "tok/s exp",
            "step s exp",
            "time exp",
            "time ceil",
            "covers",
            "finish",
            "cost USD",
            "USD/M tok",
            "USD/run",
        ]
    } else {
        vec![
            "#",
            "gpu",
            "days",
            "use",
            "batch",
            "prefill tok/s exp",
            "decode tok/s exp",
            "TTFT s exp",
            "TPOT s exp",
            "time exp",
            "time ceil",
            "covers",
            "finish",
            "cost USD",
            "USD/M out",
            "USD/request",
        ]
    };
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    let dash = || "-".to_string();
    let mut notes = Vec::new();
    for r in &t.rows {
        rows.push(row(r, training, &dash));
        for n in &r.notes {
            let line = format!("  {}: {n}", r.gpu);
            if !notes.contains(&line) {
                notes.push(line);
            }
        }
        for a in &r.alternatives {
            let line = format!(
                "  {} also tried: {} at batch {}: {} expected",
                r.gpu,
                a.using,
                a.batch,
                duration(a.expected.seconds)
            );
            if !notes.contains(&line) {
                notes.push(line);
            }
        }
    }
    out.extend(lab::table::align(&rows, |i| {
        matches!(i, 1 | 3) || i == header.len() - 5
    }));
    out.extend(notes);
    out.push(t.label.clone());
    out
}

fn row(r: &Row, training: bool, dash: &dyn Fn() -> String) -> Vec<String> {
    let rank = r.rank.map_or_else(dash, |x| x.to_string());
    let Some(s) = &r.setup else {
        let mut v = vec![rank, r.gpu.clone(), r.days.to_string(), "cannot run".into()];
        v.resize(if training { 14 } else { 16 }, dash());
        return v;
    };
    let e = &s.expected;
    let mut v = vec![
        rank,
        r.gpu.clone(),
        r.days.to_string(),
        s.using.clone(),
        s.batch.to_string(),
    ];
    if training {
        v.push(e.prefill_tokens_per_s.to_string());
        v.push(e.ttft_s.to_string());
    } else {
        v.push(e.prefill_tokens_per_s.to_string());
        v.push(e.decode_tokens_per_s.to_string());
        v.push(e.ttft_s.to_string());
        v.push(e.tpot_s.to_string());
    }
    v.push(duration(e.seconds));
    v.push(duration(s.ceiling.seconds));
    v.push(match r.package_covers {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => dash(),
    });
    match &r.finish {
        Some(f) => {
            v.push(f.how.clone());
            v.push(f.cost_usd.to_string());
        }
        None => {
            v.push(dash());
            v.push(dash());
        }
    }
    v.push(
        r.predicted_usd_per_million_tokens
            .map_or_else(dash, |x| x.to_string()),
    );
    v.push(
        r.predicted_usd_per_unit
            .map_or_else(dash, |x| x.to_string()),
    );
    v
}
