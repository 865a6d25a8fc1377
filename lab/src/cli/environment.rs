//! `lab environment`: what libtorch and the GPU report, through the torch worker. A
//! diagnostic: it exits 0 and says "not available" (and why) when something is missing.

use lab::environment::{query_driver, EnvironmentReport};
use lab::measure::parse_device;
use lab::worker::{self, Unavailable, WorkerReply, WorkerRequest};
use std::path::PathBuf;

/// Flags of `lab environment`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPU to describe, `cuda:N` (no default: the device is always named explicitly).
    #[arg(long, value_name = "cuda:N")]
    device: String,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
    /// The torch worker executable (default: `lab-torch-worker` next to `lab`, or
    /// $LAB_TORCH_WORKER).
    #[arg(long, value_name = "PATH")]
    worker: Option<PathBuf>,
}

/// Runs `lab environment`; always succeeds (what is missing is part of the report).
pub fn run(args: Args) -> lab::Result<()> {
    let mut report = EnvironmentReport::new(&args.device);
    report.driver = query_driver();
    // A device that is not `cuda:N` is reported as such, but libtorch's own facts (version,
    // build, GPU count) are still worth showing, as `mesure_memoire.py environment` does: the
    // worker is asked about cuda:0 and only those facts are kept.
    let index = match parse_device(&args.device) {
        Ok(index) => Some(index),
        Err(e) => {
            report.problems.push(e.to_string());
            None
        }
    };
    match worker::locate(args.worker.as_deref()) {
        Err(u) => report.problems.push(u.message()),
        Ok(path) => {
            // A path lab found itself is shown without the home folder.
            report.worker = Some(worker::shown(&path, args.worker.as_deref()));
            let request = WorkerRequest::Environment {
                device_index: index.unwrap_or(0),
            };
            match worker::call(&path, &request) {
                Err(u) => {
                    match u {
                        Unavailable::NoLibtorch(_) => report.libtorch_available = Some(false),
                        // Found but could not be started: no worker to speak of.
                        Unavailable::NoWorker(_) => report.worker = None,
                    }
                    report.problems.push(u.message());
                }
                // No readable answer: libtorch's state stays unknown. (The message is
                // shared with `lab measure`; this command never writes a file.)
                Ok(Err(e)) => report.problems.push(
                    e.to_string()
                        .trim_end_matches("; no file was written")
                        .to_owned(),
                ),
                Ok(Ok(WorkerReply::Environment(env))) => {
                    report.absorb(&env);
                    if index.is_none() {
                        report.device_info = None;
                        report.device_available = false;
                        report.tf32_matmul_allowed = None;
                    }
                }
                // A worker that answers at all was started by the loader with libtorch.
                Ok(Ok(WorkerReply::Error(e))) => {
                    report.libtorch_available = Some(true);
                    report.problems.push(e.message);
                }
                Ok(Ok(WorkerReply::Measurement(_))) => {
                    report.libtorch_available = Some(true);
                    report
                        .problems
                        .push("the GPU worker answered another question".into());
                }
            }
        }
    }
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| lab::Error::runtime(format!("cannot encode the report: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", report.text());
    }
    Ok(())
}
