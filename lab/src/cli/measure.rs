//! `lab measure`: the bounded GPU measurement (`docs/PROTOCOL.md §4`), through the torch worker.

use lab::device::{Device, Devices};
use lab::document::{self, Configuration, Document, Dtype};
use lab::fleet;
use lab::worker::{self, WorkerReply, WorkerRequest};
use lab::{measure, values, Error};
use std::path::{Path, PathBuf};

/// Flags of `lab measure`. Numbers are taken as typed and checked by `lab` (exit 2 on bad
/// values) before the worker starts.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPU to measure, `cuda:N` (no default; `cpu`, `mps` and a bare `cuda` are refused);
    /// `all` or a list `cuda:0,cuda:1` measures those GPUs at once, one worker each (needs
    /// --output-dir).
    #[arg(long, value_name = "cuda:N|all|LIST", value_parser = values::devices, allow_hyphen_values = true)]
    device: Devices,
    /// Batch size, >= 1.
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true)]
    batch: u64,
    /// Positions per sample, >= 1 (no attention, no KV cache). With --model: the cache
    /// length, input plus output tokens (give --output-tokens or --context).
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true)]
    context: Option<u64>,
    /// Model width; hidden = 4 × width (the synthetic MLP; not with --model).
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true,
          required_unless_present = "model", conflicts_with = "model")]
    width: Option<u64>,
    /// Measure a real decoder instead of the synthetic MLP: a model folder (config.json and
    /// safetensors) or, with --random-weights, a folder or config.json alone. Llama, Mistral,
    /// Qwen2 and Qwen3; other families are refused by name.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    model: Option<PathBuf>,
    /// With --model: seeded random weights of the config's shapes instead of the
    /// safetensors (nothing to download).
    #[arg(long, requires = "model")]
    random_weights: bool,
    /// With --model: prompt tokens per sequence (seeded random ids), >= 1.
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true,
          requires = "model")]
    input_tokens: Option<u64>,
    /// With --model: decode steps after the prompt, >= 1 (or give --context).
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true,
          requires = "model", conflicts_with = "context")]
    output_tokens: Option<u64>,
    /// With --model: also capture one decode step in a CUDA graph and replay it once per
    /// output token (rows `graph_capture` and `graph_decode`).
    #[arg(long = "graph", requires = "model", conflicts_with = "graph_replays")]
    decode_graph: bool,
    #[command(flatten)]
    passes: PassFlags,
    #[command(flatten)]
    graph: GraphFlag,
    /// New JSON file to write (never overwritten; written atomically). One GPU only.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "output_dir",
        allow_hyphen_values = true
    )]
    output: Option<PathBuf>,
    /// New folder for several GPUs: one document per GPU (`cuda-N.json`) and
    /// `comparison.json`. Only with --device all or a list.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "output",
        allow_hyphen_values = true
    )]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    worker: super::WorkerArg,
}

/// The flags of one measurement that `lab sweep` passes on unchanged to every point: element
/// type, warm-up, repetitions, seed (their defaults are defined here only).
#[derive(Debug, clap::Args)]
pub struct PassFlags {
    /// float32, float16 or bfloat16.
    #[arg(long, default_value = "float32", value_parser = values::dtype, allow_hyphen_values = true)]
    pub dtype: Dtype,
    /// Warm-up passes, measured together as one row, >= 0.
    #[arg(long, default_value = "1", value_parser = values::passes, allow_hyphen_values = true)]
    pub warmup: u64,
    /// Measured warm passes, one row each, >= 1.
    #[arg(long, default_value = "2", value_parser = values::repetitions, allow_hyphen_values = true)]
    pub repeats: u64,
    /// Seed of the weights and the input.
    #[arg(long, default_value = "0", value_parser = values::seed, allow_hyphen_values = true)]
    pub seed: u64,
}

/// `--graph-replays`, shared by `lab measure` and `lab sweep`.
#[derive(Debug, clap::Args)]
pub struct GraphFlag {
    /// After the phases, capture one forward into a CUDA graph and replay it: 5 batches of N
    /// back-to-back replays and N synchronised single replays (the launch-free floor; adds a
    /// `graph` object to the document). 1 to 1000000.
    #[arg(long, value_name = "N", value_parser = values::graph_replays, allow_hyphen_values = true)]
    pub graph_replays: Option<u64>,
}

impl PassFlags {
    /// The configuration of one measurement on `device` with these passes; its sizes are
    /// checked (a usage error when a tensor would be too large to describe).
    pub fn configuration(
        &self,
        device: Device,
        batch: u64,
        context: u64,
        width: u64,
    ) -> lab::Result<Configuration> {
        let configuration = Configuration {
            device,
            batch,
            context,
            width,
            dtype: self.dtype,
            warmup: self.warmup,
            repeats: self.repeats,
            seed: self.seed,
        };
        configuration.sizes()?;
        Ok(configuration)
    }
}

/// Runs `lab measure`.
///
/// # Errors
/// Usage (exit 2): bad flag values, a device that is not `cuda:N`, an existing output file,
/// no worker, no loadable libtorch, no such GPU; nothing is written. Runtime (exit 1): a
/// failure during the run (the message contains "out of memory" for an out-of-memory
/// failure); nothing is written.
pub fn run(args: Args) -> lab::Result<()> {
    if args.model.is_some() {
        return run_model(args);
    }
    let model_only = [
        (args.random_weights, "--random-weights"),
        (args.decode_graph, "--graph"),
        (args.input_tokens.is_some(), "--input-tokens"),
        (args.output_tokens.is_some(), "--output-tokens"),
    ];
    if let Some((_, flag)) = model_only.iter().find(|(given, _)| *given) {
        return Err(Error::usage(format!(
            "{flag} applies to lab measure --model DIR (a real decoder), not to the synthetic MLP"
        )));
    }
    let devices = &args.device;
    // Several GPUs: the flags are checked once, as for cuda:0, then given to each GPU.
    let (Some(context), Some(width)) = (args.context, args.width) else {
        return Err(Error::usage(
            "lab measure needs --context N and --width N (the synthetic MLP), or --model DIR",
        ));
    };
    let configuration =
        args.passes
            .configuration(devices.checked_as(), args.batch, context, width)?;
    let graph_replays = args.graph.graph_replays;
    if devices.is_several() {
        let Some(folder) = args.output_dir.as_deref() else {
            return Err(Error::usage(
                "several GPUs write one document each: give --output-dir DIR (a new folder) instead of --output",
            ));
        };
        return measure_several(
            devices,
            &configuration,
            graph_replays,
            folder,
            args.worker.worker.as_deref(),
        );
    }
    let Some(output) = args.output.as_deref() else {
        return Err(Error::usage(
            "--output-dir is for several GPUs (--device all or cuda:0,cuda:1): give --output FILE for one GPU",
        ));
    };
    lab::output::check_new(output)?;
    let path =
        worker::locate(args.worker.worker.as_deref()).map_err(|u| Error::usage(u.message()))?;
    let document = measure::run_with_graph(&configuration, graph_replays, &path)?;
    document::write_new(output, &document)?;
    lab::stdout::print(&measure::summary_text(&document))?;
    lab::outln!(
        "wrote {}",
        lab::text::one_line(&output.display().to_string())
    )
}

/// `lab measure --model`: every check before the worker, then one run, then the document
/// (never overwritten, written atomically) and its summary.
fn run_model(args: Args) -> lab::Result<()> {
    let devices = args.device.clone();
    let several = devices.is_several();
    let index = devices.checked_as();
    let target = if several {
        match (args.output_dir.as_deref(), args.output.is_some()) {
            (Some(folder), false) => folder.to_path_buf(),
            _ => {
                return Err(Error::usage(
                    "several GPUs write one document each: give --output-dir DIR (a new folder) instead of --output",
                ))
            }
        }
    } else {
        match (args.output.as_deref(), args.output_dir.is_some()) {
            (Some(file), false) => file.to_path_buf(),
            _ => {
                return Err(Error::usage(
                    "lab measure --model on one GPU writes one file: give --output FILE",
                ))
            }
        }
    };
    let Some(input) = args.input_tokens else {
        return Err(Error::usage(
            "lab measure --model needs --input-tokens N (the prompt length)",
        ));
    };
    let output_tokens = match (args.output_tokens, args.context) {
        (Some(n), _) => n,
        (None, Some(context)) if context > input => context - input,
        (None, Some(context)) => {
            return Err(Error::usage(format!(
                "--context {context} leaves no decode step after --input-tokens {input}: give a larger --context or --output-tokens N"
            )))
        }
        (None, None) => {
            return Err(Error::usage(
                "lab measure --model needs --output-tokens N or --context N (input plus output tokens)",
            ))
        }
    };
    if several {
        lab::output::check_new_folder(&target)?;
    } else {
        lab::output::check_new(&target)?;
    }
    let ask = lab::measure_model::Ask {
        model: args.model.clone().unwrap_or_default(),
        random_weights: args.random_weights,
        workload: lab::document::model_run::ModelWorkload {
            device: index.to_string(),
            batch: args.batch,
            input_tokens: input,
            output_tokens,
            context: input.saturating_add(output_tokens),
            dtype: args.passes.dtype,
            warmup: args.passes.warmup,
            repeats: args.passes.repeats,
            seed: args.passes.seed,
            graph: args.decode_graph,
        },
    };
    let prepared = lab::measure_model::prepare(&ask)?;
    let path =
        worker::locate(args.worker.worker.as_deref()).map_err(|u| Error::usage(u.message()))?;
    if several {
        return measure_model_several(&devices, &prepared, &target, &path);
    }
    let document = lab::measure_model::run(&prepared, &path)?;
    lab::output::write_new(&target, &lab::measure_model::encode(&document)?)?;
    lab::stdout::print(&lab::measure_model::summary_text(&document))?;
    lab::outln!(
        "wrote {}",
        lab::text::one_line(&target.display().to_string())
    )
}

/// `lab measure --model --device all` (or a list): the same prepared run on every GPU at
/// once, one worker each (`fleet::run_each`), one document per GPU (`cuda-N.json`) in a new
/// folder, each followed by its summary. Nothing written when no GPU answered; exit 1 after
/// writing the others when some failed.
fn measure_model_several(
    devices: &Devices,
    prepared: &lab::measure_model::Prepared,
    folder: &Path,
    worker_path: &Path,
) -> lab::Result<()> {
    let indices = devices.resolve(device_count(worker_path)?)?;
    let results = fleet::run_each(&indices, |device| {
        let mut one = prepared.clone();
        one.run.device_index = device.index();
        one.run.workload.device = device.to_string();
        lab::measure_model::run(&one, worker_path)
    });
    if results.iter().all(|(_, r)| r.is_err()) {
        if let Some((_, Err(e))) = results.into_iter().next() {
            return Err(e);
        }
        return Err(Error::runtime("no GPU was measured"));
    }
    std::fs::create_dir(folder).map_err(|e| {
        Error::runtime(format!(
            "cannot create the folder {}: {e}",
            folder.display()
        ))
    })?;
    let mut failed = Vec::new();
    for (device, result) in &results {
        match result {
            Ok(document) => {
                let file = folder.join(fleet::document_file_name(*device));
                lab::output::write_new(&file, &lab::measure_model::encode(document)?)?;
                lab::stdout::print(&lab::measure_model::summary_text(document))?;
                lab::outln!(
                    "{device}: wrote {}",
                    lab::text::one_line(&file.display().to_string())
                )?;
            }
            Err(e) => {
                lab::outln!("{device}: FAILED: {e}")?;
                failed.push(device.to_string());
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "{} could not be measured (see above); the other GPUs' documents were written",
            failed.join(", ")
        )))
    }
}

/// How many GPUs the worker's libtorch sees (asked once, about cuda:0).
///
/// # Errors
/// Usage (exit 2) when the worker or libtorch is missing; runtime when it gives no answer.
pub fn device_count(worker_path: &Path) -> lab::Result<u64> {
    let request = WorkerRequest::Environment {
        device_index: Device::FIRST,
    };
    match worker::call(worker_path, &request).map_err(|u| Error::usage(u.message()))?? {
        WorkerReply::Environment(env) => Ok(env.device_count),
        WorkerReply::Error(e) => Err(e.into_error()),
        WorkerReply::Measurement(_) | WorkerReply::ModelMeasurement(_) | WorkerReply::Logits(_) => {
            Err(Error::runtime("the GPU worker answered another question"))
        }
    }
}

/// `lab measure --device all|LIST`: one worker per GPU at once, one document per GPU in the
/// new `folder`, then the comparison (printed and written as `comparison.json`). A GPU that
/// fails does not stop the others: their documents are written and the command exits 1.
fn measure_several(
    devices: &Devices,
    configuration: &Configuration,
    graph_replays: Option<u64>,
    folder: &Path,
    worker_path: Option<&Path>,
) -> lab::Result<()> {
    lab::output::check_new_folder(folder)?;
    let path = worker::locate(worker_path).map_err(|u| Error::usage(u.message()))?;
    let indices = devices.resolve(device_count(&path)?)?;
    let results = fleet::run_each(&indices, |device| {
        let mut config = configuration.clone();
        config.device = device;
        measure::run_with_graph(&config, graph_replays, &path)
    });
    // Nothing measured at all (no GPU, no libtorch): the first error, and no folder.
    if results.iter().all(|(_, r)| r.is_err()) {
        if let Some((_, Err(e))) = results.into_iter().next() {
            return Err(e);
        }
        return Err(Error::runtime("no GPU was measured"));
    }
    std::fs::create_dir(folder).map_err(|e| {
        Error::runtime(format!(
            "cannot create the folder {}: {e}",
            folder.display()
        ))
    })?;
    let mut failed = Vec::new();
    for (device, result) in &results {
        match result {
            Ok(document) => {
                let file = folder.join(fleet::document_file_name(*device));
                document::write_new(&file, document)?;
                lab::outln!(
                    "{device}: wrote {}",
                    lab::text::one_line(&file.display().to_string())
                )?;
            }
            Err(e) => {
                lab::outln!("{device}: FAILED: {e}")?;
                failed.push(device.to_string());
            }
        }
    }
    let compared: Vec<(Device, Result<&Document, String>)> = results
        .iter()
        .map(|(i, r)| (*i, r.as_ref().map_err(|e| e.to_string())))
        .collect();
    let comparison = fleet::compare(&compared);
    let mut json = serde_json::to_string_pretty(&comparison)
        .map_err(|e| Error::runtime(format!("cannot encode the comparison: {e}")))?;
    json.push('\n');
    lab::output::write_new(&folder.join(fleet::COMPARISON_FILE), json.as_bytes())?;
    lab::stdout::print(&fleet::comparison_text(&comparison))?;
    lab::outln!(
        "wrote {}",
        lab::text::one_line(&folder.display().to_string())
    )?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "{} could not be measured (see above); the other GPUs' documents were written",
            failed.join(", ")
        )))
    }
}
