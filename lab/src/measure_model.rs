//! `lab measure --model`: one real decoder measured through the worker
//! (`docs/PROTOCOL.md §4.9`), with `lab plan`'s memory figures for the same workload beside
//! the measured ones.
//!
//! Every check that needs no GPU runs before the worker starts (exit 2, nothing written):
//! the family (only [`crate::decoder::MEASURED_FAMILIES`]), the config's forward facts, the
//! safetensors holding every tensor of the config's shapes (or `--random-weights`), the
//! token counts, the plan itself.

use crate::decoder::{self, weights, DecoderSpec};
use crate::document::model_run::{
    self, Compared, ComparedTime, ModelDocument, ModelFacts, ModelPhase, ModelWorkload, Prediction,
    TimePrediction, WeightsSource, MODEL_SCHEMA_ID,
};
use crate::document::{self, Dtype, Tool};
use crate::plan::{self, Mode, Request, WeightsFormat};
use crate::worker::{self, ModelRun, WorkerReply, WorkerRequest};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Largest context (input plus output tokens) accepted: 2^24 positions, far beyond any
/// configured `max_position_embeddings` of the four families, low enough for 64-bit sizes.
pub const MAX_CONTEXT: u64 = 1 << 24;

/// What the user asked, read from the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The model folder (or its config.json with `random_weights`).
    pub model: PathBuf,
    /// `--random-weights`.
    pub random_weights: bool,
    /// The workload (device, batch, tokens, dtype, passes, seed, graph).
    pub workload: ModelWorkload,
}

/// Everything checked before the worker starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The request for the worker.
    pub run: ModelRun,
    /// The document's `model` section.
    pub facts: ModelFacts,
    /// `lab plan`'s memory for the same workload.
    pub plan_memory: plan::Memory,
    /// Notes of the plan (header versus config, formats).
    pub plan_notes: Vec<String>,
    /// The model as given (folder or config.json), for the time model once the GPU is known.
    pub model: PathBuf,
}

fn plan_format(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::Float32 => "fp32",
        Dtype::Float16 => "fp16",
        Dtype::Bfloat16 => "bf16",
    }
}

/// Reads and checks the model and the workload; plans the same workload.
///
/// # Errors
/// [`Error::Usage`] (exit 2) for a context of 0 or over [`MAX_CONTEXT`], a folder without
/// config.json, an unsupported family or setting (named), missing safetensors without
/// `--random-weights`, a missing tensor or a shape mismatch; [`Error::Runtime`] for a file
/// that cannot be read.
pub fn prepare(ask: &Ask) -> Result<Prepared> {
    let w = &ask.workload;
    if w.context != w.input_tokens.saturating_add(w.output_tokens) || w.context > MAX_CONTEXT {
        return Err(Error::usage(format!(
            "--input-tokens {} plus --output-tokens {} must be at most {MAX_CONTEXT} positions",
            w.input_tokens, w.output_tokens
        )));
    }
    // The folder read once: the plan below and the decoder take the same reading.
    let model = plan::model::read(&ask.model)?;
    let config_shown = crate::text::one_line(&model.config_path.display().to_string());
    let spec =
        decoder::from_model(&model).map_err(|e| Error::usage(format!("{config_shown}: {e}")))?;
    let folder = model.folder.as_deref();
    let sources = match (ask.random_weights, folder) {
        (true, _) => None,
        (false, Some(folder)) => Some(weights::locate(folder, &spec)?),
        (false, None) => {
            return Err(Error::usage(
                "--model names a config.json alone: give the model folder with its safetensors, or add --random-weights",
            ))
        }
    };
    let request = Request {
        model: ask.model.clone(),
        batch: w.batch,
        context: w.context,
        weights: WeightsFormat::Named(plan_format(w.dtype).to_owned()),
        kv_dtype: Some(plan_format(w.dtype).to_owned()),
        mode: Mode::Inference,
        checkpointing: false,
        fixed: Default::default(),
    };
    let catalog = crate::catalog::Catalog::embedded()?;
    let gpu_memory = plan::gpu_memory::load(None, &catalog)?;
    let p = plan::plan_model(&model, &request, &catalog, &gpu_memory, 7, None, &[])?;
    let files = sources
        .as_ref()
        .map(|s| {
            s.files
                .iter()
                .map(|f| {
                    f.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    let facts = ModelFacts {
        family: spec.family.clone(),
        config_sha256: crate::digest::sha256_hex(model.config_text.as_bytes()),
        parameters: spec.parameters(),
        weights_source: if sources.is_some() {
            WeightsSource::Safetensors
        } else {
            WeightsSource::Random
        },
        weights_files: files,
        layers: spec.layers,
        sliding_window_layers: spec.windows.iter().filter(|w| w.is_some()).count() as u64,
    };
    let device_index = w
        .device
        .strip_prefix("cuda:")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| Error::usage("--device must be cuda:N"))?;
    Ok(Prepared {
        run: ModelRun {
            device_index,
            spec,
            sources,
            workload: w.clone(),
        },
        facts,
        plan_memory: p.memory,
        plan_notes: p.notes,
        model: ask.model.clone(),
    })
}

/// Measures `prepared` with `worker` and builds the document.
///
/// # Errors
/// As [`crate::measure::run`]: usage (exit 2) when the worker, libtorch or the GPU is
/// missing; [`Error::OutOfMemory`] (exit 1) for the worker's out-of-memory kind; runtime for
/// any other failure. Nothing is written by this function.
pub fn run(prepared: &Prepared, worker_path: &Path) -> Result<ModelDocument> {
    let created_utc = document::utc_now();
    let request = WorkerRequest::MeasureModel {
        run: Box::new(prepared.run.clone()),
    };
    let reply = worker::call(worker_path, &request).map_err(|u| Error::usage(u.message()))??;
    let measured = match reply {
        WorkerReply::ModelMeasurement(m) => m,
        WorkerReply::Error(e) => return Err(e.into_error()),
        _ => {
            return Err(Error::runtime(
                "the GPU worker answered another question; no file was written",
            ))
        }
    };
    let environment = crate::measure::environment_of(
        &measured.environment,
        crate::device::Device::new(prepared.run.device_index)
            .ok_or_else(|| Error::usage("--device index too large"))?,
        crate::environment::query_driver(),
    )?;
    let mut doc = ModelDocument {
        schema: MODEL_SCHEMA_ID.to_owned(),
        tool: Tool::rust(),
        created_utc,
        environment,
        model: prepared.facts.clone(),
        workload: prepared.run.workload.clone(),
        phases: measured.phases,
        prediction: Prediction {
            source: "lab plan (same model, batch, context and element type; inference)".into(),
            memory: Vec::new(),
            time: None,
            notes: Vec::new(),
        },
    };
    model_run::check_rows(&doc).map_err(|e| {
        Error::runtime(format!(
            "the GPU worker's rows are not a valid model measurement ({e}); no file was written"
        ))
    })?;
    doc.prediction = prediction(
        &doc,
        &prepared.plan_memory,
        &prepared.run.spec,
        &prepared.plan_notes,
    );
    match time_prediction(&doc, &prepared.model) {
        Ok(time) => doc.prediction.time = Some(time),
        Err(why) => doc.prediction.notes.insert(0, why),
    }
    if let Some(kernels) = &measured.decode_kernels {
        doc.prediction
            .notes
            .push(format!("decode steps ran {kernels}"));
    }
    Ok(doc)
}

/// `lab plan`'s memory figures beside the measured counters of `doc`.
pub fn prediction(
    doc: &ModelDocument,
    memory: &plan::Memory,
    spec: &DecoderSpec,
    plan_notes: &[String],
) -> Prediction {
    let mut compared: Vec<Compared> = Vec::new();
    let delta = |phase: ModelPhase, reserved: bool| {
        doc.first_row(phase).map(|r| {
            if reserved {
                r.end_reserved_bytes
                    .saturating_sub(r.baseline_reserved_bytes)
            } else {
                r.end_allocated_bytes
                    .saturating_sub(r.baseline_allocated_bytes)
            }
        })
    };
    if let Some(m) = delta(ModelPhase::ModelLoad, false) {
        compared.push(model_run::compare(
            "weights_allocated_bytes",
            memory.weights_allocated_bytes,
            "model_load end - baseline allocated",
            m,
        ));
    }
    if let Some(m) = delta(ModelPhase::ModelLoad, true) {
        compared.push(model_run::compare(
            "weights_reserved_bytes",
            memory.weights_reserved_bytes,
            "model_load end - baseline reserved",
            m,
        ));
    }
    if let Some(m) = delta(ModelPhase::ModelLoad, true) {
        // The worker stacks q/k/v and gate/up (`decoder::fused`): its reserved bytes are
        // compared with the same replay over that layout too.
        let (_, stacked) = crate::decoder::fused::replay(spec, doc.workload.dtype.bytes());
        compared.push(model_run::compare(
            "weights_reserved_bytes_stacked",
            u64::try_from(stacked).unwrap_or(u64::MAX),
            "model_load end - baseline reserved",
            m,
        ));
    }
    if let Some(m) = delta(ModelPhase::ModelLoad, false) {
        // Allocated bytes can differ too where a large block is handed out unsplit (a
        // remainder under 1 MiB stays with it): Qwen2.5-0.5B's stacks, measured on an H200.
        let (stacked, _) = crate::decoder::fused::replay(spec, doc.workload.dtype.bytes());
        compared.push(model_run::compare(
            "weights_allocated_bytes_stacked",
            u64::try_from(stacked).unwrap_or(u64::MAX),
            "model_load end - baseline allocated",
            m,
        ));
    }
    if let Some(m) = delta(ModelPhase::KvCache, false) {
        compared.push(model_run::compare(
            "kv_cache_bytes",
            memory.kv_cache_bytes,
            "kv_cache end - baseline allocated",
            m,
        ));
    }
    let peak = doc
        .phases
        .iter()
        .map(|r| r.peak_allocated_bytes)
        .max()
        .unwrap_or(0);
    compared.push(model_run::compare(
        "total_bytes",
        memory.total_bytes,
        "highest peak allocated over all phases",
        peak,
    ));
    let mut notes = vec![
        "the measured cache is full-length on every layer (sliding windows are applied by the mask); lab plan counts a sliding layer's cache at its window".to_owned(),
    ];
    if spec.windows.iter().all(Option::is_none) {
        notes.pop();
    }
    notes.extend(plan_notes.iter().cloned());
    Prediction {
        source: "lab plan (same model, batch, context and element type; inference)".into(),
        memory: compared,
        time: None,
        notes,
    }
}

/// The time model's seconds for `doc`'s GPU, batch, prompt and output length on one GPU
/// ([`crate::timing::one_gpu_steps`], the path `lab plan --calibration` compares with),
/// beside the median of each measured phase that has rows
/// ([`crate::timing::calibration::median`]).
///
/// # Errors
/// The note that replaces the figures: the device is not one catalog GPU (its name shown
/// with non-ASCII escaped), or the time model cannot price the workload (fp32, no rate).
pub fn time_prediction(
    doc: &ModelDocument,
    model: &Path,
) -> std::result::Result<TimePrediction, String> {
    use crate::timing::calibration;
    use rust_decimal::Decimal;
    let null = |why: String| format!("time figures: null: {why}");
    let catalog = crate::catalog::Catalog::embedded().map_err(|e| null(e.to_string()))?;
    let name = &doc.environment.device_name;
    let gpu = crate::gpu_name::catalog_gpu(&catalog, name).ok_or_else(|| {
        null(format!(
            "the device '{}' is not one catalog GPU ({}; a PCIe or NVL board is not its SXM namesake), and the time model prices catalog GPUs only",
            crate::text::ascii(name),
            catalog.gpu_ids().join(", ")
        ))
    })?;
    if doc.workload.dtype == Dtype::Float32 {
        return Err(null(format!(
            "the time model cannot price this workload on {gpu}: data/gpu-perf.csv has no fp32 or TF32 rates; measure with --dtype bfloat16 or float16 for time figures"
        )));
    }
    let priced = || -> Result<crate::timing::OneGpuSteps> {
        let memory = plan::gpu_memory::load(None, &catalog)?;
        let perf = crate::timing::gpu_perf::load(None, &catalog)?;
        let w = &doc.workload;
        crate::timing::one_gpu_steps(
            model,
            plan_format(w.dtype),
            &gpu,
            (w.batch, w.input_tokens, w.output_tokens),
            &catalog,
            &memory,
            &perf,
        )
    };
    let steps = priced().map_err(|e| {
        null(format!(
            "the time model cannot price this workload on {gpu}: {e}"
        ))
    })?;
    let round = |v: Decimal| crate::units::round(v, 9);
    let mut phases = Vec::new();
    for (phase, profile, ceiling, expected) in [
        (
            ModelPhase::WarmPrefill,
            "eager",
            steps.ceiling.0,
            steps.eager.0,
        ),
        (ModelPhase::Decode, "eager", steps.ceiling.1, steps.eager.1),
        (
            ModelPhase::GraphDecode,
            "cuda-graphs",
            steps.ceiling.1,
            steps.graphs.1,
        ),
    ] {
        let Some(measured) = calibration::median(doc, phase) else {
            continue;
        };
        let rows: Vec<_> = doc.phases.iter().filter(|r| r.phase == phase).collect();
        let source = if rows.iter().all(|r| r.gpu_seconds.is_some()) {
            "gpu_seconds"
        } else if rows.iter().all(|r| r.gpu_seconds.is_none()) {
            "wall_seconds"
        } else {
            "gpu_seconds (wall_seconds where none)"
        };
        let (expected, measured) = (round(expected), round(measured));
        let error = measured - expected;
        phases.push(ComparedTime {
            phase,
            profile: profile.to_owned(),
            ceiling_seconds: round(ceiling),
            expected_seconds: expected,
            measured_from: format!("median {source} of {} {phase} rows", rows.len()),
            measured_seconds: measured,
            error_seconds: error,
            error_percent: (expected > Decimal::ZERO)
                .then(|| crate::units::round(error * Decimal::ONE_HUNDRED / expected, 3)),
        });
    }
    let factors = match steps.factors.as_str() {
        "measured" => format!("efficiency factors measured on {gpu}"),
        "carried over" => "efficiency factors carried over from the H200's measurements".to_owned(),
        other => format!("efficiency factors {other}"),
    };
    Ok(TimePrediction {
        label: format!(
            "predictions on one {gpu}: ceiling = datasheet peaks at 100 %, an ideal engine's operators, no launch cost; expected = transformers' operators with the {factors} (docs/PLANNING.md); decode at the middle cache length"
        ),
        gpu,
        factors: steps.factors,
        phases,
    })
}

/// The readable summary printed after the file is written: the rows (decode steps
/// summarised) and the prediction beside the measurement.
pub fn summary_text(doc: &ModelDocument) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let w = &doc.workload;
    let _ = writeln!(
        out,
        "{} ({} parameters, {} weights) on {} ({}), batch {}, {} input + {} output tokens, {}",
        doc.model.family,
        doc.model.parameters,
        match doc.model.weights_source {
            WeightsSource::Safetensors => "safetensors",
            WeightsSource::Random => "random",
        },
        w.device,
        crate::text::one_line(&doc.environment.device_name),
        w.batch,
        w.input_tokens,
        w.output_tokens,
        w.dtype.name()
    );
    let _ = writeln!(
        out,
        "{:<14}{:>6}{:>12}{:>12}{:>16}{:>16}{:>16}",
        "phase", "rep", "wall ms", "gpu ms", "end alloc", "peak alloc", "end reserved"
    );
    let mut shown = 0;
    for r in &doc.phases {
        let repeated = matches!(r.phase, ModelPhase::Decode | ModelPhase::GraphDecode);
        if repeated && r.repetition.unwrap_or(0) > 3 {
            continue;
        }
        shown += 1;
        let _ = writeln!(
            out,
            "{:<14}{:>6}{:>12.4}{:>12}{:>16}{:>16}{:>16}",
            r.phase,
            r.repetition.map(|x| x.to_string()).unwrap_or_default(),
            r.wall_seconds * 1e3,
            r.gpu_seconds
                .map(|g| format!("{:.4}", g * 1e3))
                .unwrap_or_else(|| "-".into()),
            r.end_allocated_bytes,
            r.peak_allocated_bytes,
            r.end_reserved_bytes
        );
    }
    if shown < doc.phases.len() {
        let _ = writeln!(
            out,
            "… {} more decode rows in the JSON file",
            doc.phases.len() - shown
        );
    }
    for (phase, label) in [
        (ModelPhase::Decode, "eager decode"),
        (ModelPhase::GraphDecode, "graph decode"),
    ] {
        let gpu: Vec<f64> = doc
            .phases
            .iter()
            .filter(|r| r.phase == phase)
            .filter_map(|r| r.gpu_seconds)
            .collect();
        if let Some(m) = document::median(&gpu) {
            let _ = writeln!(
                out,
                "{label}: median {:.1} µs per step by GPU events over {} steps",
                m * 1e6,
                gpu.len()
            );
        }
    }
    let _ = writeln!(out, "lab plan predicted vs measured:");
    for c in &doc.prediction.memory {
        let pct = c
            .error_percent
            .map(|p| format!("{p:+}%"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {:<24} predicted {:>14} B  measured {:>14} B  error {:>+14} B ({pct})",
            c.figure, c.predicted_bytes, c.measured_bytes, c.error_bytes
        );
    }
    if let Some(t) = &doc.prediction.time {
        let _ = writeln!(out, "lab plan time predicted vs measured ({}):", t.label);
        for c in &t.phases {
            let pct = c
                .error_percent
                .map(|p| format!("{p:+}%"))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "  {:<13}{:<12} ceiling {:>12} s  expected {:>12} s  measured {:>12} s  error {:>+13} s ({pct})",
                c.phase, c.profile, c.ceiling_seconds, c.expected_seconds, c.measured_seconds, c.error_seconds
            );
        }
    }
    for n in &doc.prediction.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}

/// The document as pretty JSON with a final newline.
///
/// # Errors
/// [`Error::Runtime`] when it cannot be encoded.
pub fn encode(doc: &ModelDocument) -> Result<Vec<u8>> {
    let mut text = serde_json::to_string_pretty(doc)
        .map_err(|e| Error::runtime(format!("cannot encode the document: {e}")))?;
    text.push('\n');
    Ok(text.into_bytes())
}

/// Whether `bytes` hold a JSON object whose `schema` is [`MODEL_SCHEMA_ID`] (what
/// `lab report` uses to tell the two document kinds apart).
pub fn is_model_document(bytes: &[u8]) -> bool {
    // Only the top-level `schema` is kept; everything else is skipped without being built
    // (a synthetic document of 100,000 repetitions is 42 MB: a JSON tree of it cost more
    // than the report itself).
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        schema: Option<std::borrow::Cow<'a, str>>,
    }
    // A struct also reads from a JSON array; only an object can be a document.
    bytes.trim_ascii_start().first() == Some(&b'{')
        && serde_json::from_slice::<Probe>(bytes)
            .ok()
            .and_then(|p| p.schema)
            .is_some_and(|s| s == MODEL_SCHEMA_ID)
}

/// Reads a model-measurement document: JSON of the right shape and schema, rows checked.
///
/// # Errors
/// One line naming the problem.
pub fn parse(bytes: &[u8]) -> std::result::Result<ModelDocument, String> {
    let doc: ModelDocument = serde_json::from_slice(bytes)
        .map_err(|e| format!("not a model-measurement document: {e}"))?;
    if doc.schema != MODEL_SCHEMA_ID {
        return Err(format!(
            "schema is {:?}, expected {MODEL_SCHEMA_ID}",
            doc.schema
        ));
    }
    model_run::check_rows(&doc)?;
    Ok(doc)
}

#[cfg(test)]
mod tests;
