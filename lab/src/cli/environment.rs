//! `lab environment`: what libtorch and the GPU report, through the torch worker. A
//! diagnostic: it exits 0 and says "not available" (and why) when something is missing.

use lab::device::{Device, Devices};
use lab::environment::{query_driver, EnvironmentReport};
use lab::fleet;
use lab::worker::{self, Unavailable, WorkerReply, WorkerRequest};
use std::fmt::Write as _;
use std::path::Path;

/// Flags of `lab environment`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPU to describe, `cuda:N` (no default: the device is always named explicitly); `all`
    /// or a list `cuda:0,cuda:1` asks one worker per GPU at once and compares them.
    #[arg(long, value_name = "cuda:N|all|LIST", allow_hyphen_values = true)]
    device: String,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    worker: super::WorkerArg,
}

/// Runs `lab environment`; always succeeds (what is missing is part of the report).
pub fn run(args: Args) -> lab::Result<()> {
    if let Ok(devices) = Devices::parse(&args.device) {
        if devices.is_several() {
            return run_several(&devices, &args);
        }
    }
    let report = report(&args.device, args.worker.worker.as_deref());
    if args.json {
        lab::stdout::json(&report)
    } else {
        lab::stdout::print(&report.text())
    }
}

/// `--device all|LIST`: one report per GPU, asked at once, then a comparison of what the GPUs
/// announce (name, memory, compute capability, multiprocessors). When the GPU count cannot be
/// learnt, or a listed GPU does not exist, the report of cuda:0 says why.
fn run_several(devices: &Devices, args: &Args) -> lab::Result<()> {
    let mut first = report(&Device::FIRST.to_string(), args.worker.worker.as_deref());
    let indices = match first.device_count.map(|count| devices.resolve(count)) {
        Some(Ok(indices)) => indices,
        Some(Err(e)) => {
            first.problems.push(e.to_string());
            return print_several(&[first], args.json);
        }
        None => return print_several(&[first], args.json),
    };
    let reports: Vec<EnvironmentReport> = fleet::run_each(&indices, |device| {
        Ok(report(&device.to_string(), args.worker.worker.as_deref()))
    })
    .into_iter()
    .filter_map(|(_, r)| r.ok())
    .collect();
    print_several(&reports, args.json)
}

/// Prints the reports (text: one after the other, then the comparison; JSON: one object with
/// `devices` and `flags`).
fn print_several(reports: &[EnvironmentReport], json: bool) -> lab::Result<()> {
    let (table, flags) = compare_reports(reports);
    if json {
        return lab::stdout::json(&serde_json::json!({ "devices": reports, "flags": flags }));
    }
    let mut out = String::new();
    for report in reports {
        let _ = writeln!(out, "== {} ==", report.device);
        out.push_str(&report.text());
    }
    if reports.len() > 1 {
        out.push_str(&table);
        for flag in &flags {
            let _ = writeln!(out, "FLAGGED {flag}");
        }
        if flags.is_empty() {
            out.push_str("every GPU answered with the same name, memory and compute capability\n");
        }
    }
    lab::stdout::print(&out)
}

/// The comparison table of several reports and the flags: a GPU that did not answer, one that
/// announces less memory than the largest, one with another name or compute capability.
fn compare_reports(reports: &[EnvironmentReport]) -> (String, Vec<String>) {
    let mut table = String::new();
    let _ = writeln!(
        table,
        "{:<8} {:<24} {:>17} {:>8} {:>6}",
        "device", "name", "memory bytes", "compute", "SMs"
    );
    let largest = reports
        .iter()
        .filter_map(|r| r.device_info.as_ref().map(|d| d.total_memory_bytes))
        .max();
    let first = reports.iter().find_map(|r| r.device_info.as_ref());
    let mut flags = Vec::new();
    for report in reports {
        let Some(info) = &report.device_info else {
            let _ = writeln!(table, "{:<8} not available", report.device);
            flags.push(format!(
                "{}: did not answer ({})",
                report.device,
                report.problems.join("; ")
            ));
            continue;
        };
        let _ = writeln!(
            table,
            "{:<8} {:<24} {:>17} {:>8} {:>6}",
            report.device,
            info.name,
            info.total_memory_bytes,
            info.compute_capability,
            info.multiprocessor_count
        );
        if let Some(largest) = largest.filter(|l| *l > info.total_memory_bytes) {
            flags.push(format!(
                "{}: announces {} B, {} B less than the largest GPU",
                report.device,
                info.total_memory_bytes,
                largest - info.total_memory_bytes
            ));
        }
        if let Some(first) = first {
            if first.name != info.name || first.compute_capability != info.compute_capability {
                flags.push(format!(
                    "{}: {} (compute {}) differs from {} (compute {})",
                    report.device,
                    info.name,
                    info.compute_capability,
                    first.name,
                    first.compute_capability
                ));
            }
        }
    }
    (table, flags)
}

/// What the worker (and the driver tool) say about `device`; what is missing is in `problems`.
fn report(device: &str, worker_path: Option<&Path>) -> EnvironmentReport {
    let mut report = EnvironmentReport::new(device);
    report.driver = query_driver();
    // A device that is not `cuda:N` is reported as such, but libtorch's own facts (version,
    // build, GPU count) are still worth showing, as `mesure_memoire.py environment` does: the
    // worker is asked about cuda:0 and only those facts are kept.
    let index = match Device::parse_usage(device) {
        Ok(device) => Some(device),
        Err(e) => {
            report.problems.push(e.to_string());
            None
        }
    };
    match worker::locate(worker_path) {
        Err(u) => report.problems.push(u.message()),
        Ok(path) => {
            // A path lab found itself is shown without the home folder.
            report.worker = Some(worker::shown(&path, worker_path));
            let request = WorkerRequest::Environment {
                device_index: index.unwrap_or(Device::FIRST),
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
    report
}
