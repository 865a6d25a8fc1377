//! `lab measure`: the bounded GPU measurement of docs/PROTOCOL.md §4, through the torch worker.

use lab::measure::{self, Configuration, Document, Tool};
use lab::worker::{self, WorkerReply, WorkerRequest};
use lab::{environment, Error};
use std::path::PathBuf;

/// Flags of `lab measure`. Numbers are taken as typed and checked by `lab` (exit 2 on bad
/// values) before the worker starts.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPU to measure, `cuda:N` (no default; `cpu`, `mps` and a bare `cuda` are refused).
    #[arg(long, value_name = "cuda:N")]
    device: String,
    /// Batch size, >= 1.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    batch: String,
    /// Positions per sample, >= 1 (no attention, no KV cache).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    context: String,
    /// Model width; hidden = 4 × width.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    width: String,
    #[command(flatten)]
    passes: PassFlags,
    /// New JSON file to write (never overwritten; written atomically).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// The torch worker executable (default: `lab-torch-worker` next to `lab`, or
    /// $LAB_TORCH_WORKER).
    #[arg(long, value_name = "PATH")]
    worker: Option<PathBuf>,
}

/// The flags of one measurement that `lab sweep` passes on unchanged to every point: element
/// type, warm-up, repetitions, seed (their defaults are defined here only).
#[derive(Debug, clap::Args)]
pub struct PassFlags {
    /// float32, float16 or bfloat16.
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// Warm-up passes, measured together as one row, >= 0.
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub warmup: String,
    /// Measured warm passes, one row each, >= 1.
    #[arg(long, default_value = "2", allow_hyphen_values = true)]
    pub repeats: String,
    /// Seed of the weights and the input.
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub seed: String,
}

/// Runs `lab measure`.
///
/// # Errors
/// Usage (exit 2): bad flag values, a device that is not `cuda:N`, an existing output file,
/// no worker, no loadable libtorch, no such GPU; nothing is written. Runtime (exit 1): a
/// failure during the run (the message contains "out of memory" for an out-of-memory
/// failure); nothing is written.
pub fn run(args: Args) -> lab::Result<()> {
    let configuration = Configuration::from_flags(
        &args.device,
        &args.batch,
        &args.context,
        &args.width,
        &args.passes.dtype,
        &args.passes.warmup,
        &args.passes.repeats,
        &args.passes.seed,
    )?;
    let synthetic_model = configuration.sizes()?;
    lab::output::check_new(&args.output)?;
    let path = worker::locate(args.worker.as_deref()).map_err(|u| Error::usage(u.message()))?;
    let created_utc = measure::utc_now();
    let request = WorkerRequest::Measure {
        configuration: configuration.clone(),
    };
    let reply = worker::call(&path, &request).map_err(|u| Error::usage(u.message()))??;
    let measured = match reply {
        WorkerReply::Measurement(m) => m,
        WorkerReply::Error(e) => return Err(e.into_error()),
        WorkerReply::Environment(_) => {
            return Err(Error::runtime(
                "the GPU worker answered another question; no file was written",
            ))
        }
    };
    let environment = environment::MeasurementEnvironment::from_worker(
        &measured.environment,
        environment::query_driver(),
    )
    .ok_or_else(|| Error::runtime("the GPU worker reported no device; no file was written"))?;
    let document = Document {
        schema: measure::SCHEMA_ID.to_owned(),
        tool: Tool::rust(),
        created_utc,
        environment,
        configuration,
        synthetic_model,
        phases: measured.phases,
    };
    measure::write_new_document(&args.output, &document)?;
    print!("{}", measure::summary_text(&document));
    println!("wrote {}", args.output.display());
    Ok(())
}
