//! `lab sweep`: grow one measurement dimension until the GPU runs out of memory.
//!
//! Each point goes through `lab measure`'s own library function (`lab::measure::run`) with a
//! fresh worker process, so the sweep measures exactly what `lab measure` measures. Ctrl-C stops after (or during) the current point; the finished
//! points and the summary are kept. Only a search that finished prints "largest ... that
//! fitted" as the limit: after Ctrl-C or a failed point, stdout says the sweep STOPPED EARLY and
//! the limit was NOT found, and `summary.csv` and `--json` say how it ended (`sweep_end`,
//! `end`, `limit_found`).

use indicatif::{ProgressBar, ProgressStyle};
use lab::device::Devices;
use lab::output::write_new;
use lab::stdout::{json as print_json, lines as emit};
use lab::sweep::{render, run_sweep, Bounds, Dimension, Event, SweepEnd, WorkerRunner};
use lab::values;
use lab::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by the Ctrl-C handler; checked between points.
static STOP: AtomicBool = AtomicBool::new(false);

/// The dimension to vary.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Vary {
    /// Model width (`--width`).
    Width,
    /// Batch size (`--batch`).
    Batch,
    /// Number of positions (`--context`).
    Context,
}

/// Flags of `lab sweep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPU to measure on, e.g. `cuda:0` (no default, as for `lab measure`); `all` or a list
    /// `cuda:0,cuda:1` measures one point per GPU at once (fewer rounds).
    #[arg(long, value_name = "cuda:N|all|LIST", value_parser = values::devices, allow_hyphen_values = true)]
    device: Devices,
    /// The dimension to grow.
    #[arg(long, value_enum, allow_hyphen_values = true)]
    vary: Vary,
    /// First value of the varied dimension.
    #[arg(long, value_name = "A", value_parser = values::sweep_value, allow_hyphen_values = true)]
    from: u64,
    /// Largest value of the varied dimension.
    #[arg(long, value_name = "B", value_parser = values::sweep_value, allow_hyphen_values = true)]
    to: u64,
    /// Stop bisecting when the largest fitted and smallest out-of-memory values are this close.
    #[arg(
        long,
        value_name = "R",
        default_value = "1",
        value_parser = values::sweep_value,
        allow_hyphen_values = true
    )]
    resolution: u64,
    /// Batch size when not varied [default: 1].
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true)]
    batch: Option<u64>,
    /// Number of positions when not varied [default: 16].
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true)]
    context: Option<u64>,
    /// Model width when not varied [default: 64].
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true)]
    width: Option<u64>,
    /// Element type, warm-up, repetitions and seed of every point, as for `lab measure`.
    #[command(flatten)]
    passes: super::measure::PassFlags,
    /// `--graph-replays` of every point, as for `lab measure`.
    #[command(flatten)]
    graph: super::measure::GraphFlag,
    #[command(flatten)]
    worker: super::WorkerArg,
    /// New folder for the points' JSON files and summary.csv (must not exist).
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    output_dir: PathBuf,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

/// The value of a fixed flag (its default when absent); an error when it is the varied one.
fn fixed(flag: &str, given: Option<u64>, default: u64, varied: bool) -> Result<u64> {
    match (given, varied) {
        (Some(_), true) => Err(Error::usage(format!(
            "{flag} is the varied dimension: give its range with --from/--to instead"
        ))),
        (Some(text), false) => Ok(text),
        (None, _) => Ok(default),
    }
}

/// Runs `lab sweep`.
///
/// # Errors
/// Usage (exit 2) for bad flags, an existing `--output-dir`, or a missing prerequisite (no
/// worker, libtorch or GPU); Runtime (exit 1) when a point fails otherwise or Ctrl-C stops the
/// sweep; the points already finished are kept, with `summary.csv`.
pub fn run(args: Args) -> Result<()> {
    let dimension = match args.vary {
        Vary::Width => Dimension::Width,
        Vary::Batch => Dimension::Batch,
        Vary::Context => Dimension::Context,
    };
    let bounds = Bounds::new(args.from, args.to, args.resolution)?;
    let varied = |d: Dimension| dimension == d;
    let batch = fixed("--batch", args.batch, 1, varied(Dimension::Batch))?;
    let context = fixed("--context", args.context, 16, varied(Dimension::Context))?;
    let width = fixed("--width", args.width, 64, varied(Dimension::Width))?;
    // Checked as `lab measure` checks its sizes, with the varied dimension at its largest
    // value, so that every point's flags are valid before anything runs.
    let pick = |d: Dimension, value: u64| if varied(d) { bounds.to } else { value };
    let devices = args.device;
    let checked = args.passes.configuration(
        devices.checked_as(),
        pick(Dimension::Batch, batch),
        pick(Dimension::Context, context),
        pick(Dimension::Width, width),
    )?;
    // The varied dimension of `flags` is replaced at every point.
    let flags = checked;
    let graph_replays = args.graph.graph_replays;
    // The user's own arguments before the environment, in `lab measure`'s order: the flags,
    // then the output path, then the worker (and its GPUs).
    lab::output::check_new_folder(&args.output_dir)?;
    let worker = lab::worker::locate(args.worker.worker.as_deref())
        .map_err(|u| Error::usage(u.message()))?;
    let devices = match devices {
        Devices::One(device) => vec![device],
        several => several.resolve(super::measure::device_count(&worker)?)?,
    };
    // The summary names every GPU the points ran on.
    let shown = lab::device::list_text(&devices);
    create_new_dir(&args.output_dir)?;

    // One handler per process; a failure to install it only loses the clean stop.
    if let Err(e) = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst)) {
        crate::errln!("lab: warning: Ctrl-C will not stop the sweep cleanly: {e}");
    }

    let mut runner = WorkerRunner {
        worker,
        base: flags.clone(),
        dimension,
        output_dir: args.output_dir.clone(),
        devices,
        graph_replays,
    };
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    progress.enable_steady_tick(Duration::from_millis(200));
    let mut last = String::from("no point finished yet");
    let result = run_sweep(
        dimension,
        bounds,
        &mut runner,
        &STOP,
        &mut |event| match event {
            Event::Starting { step, value } => {
                progress.set_message(format!("point {step}: {dimension}={value} | {last}"));
            }
            Event::Finished(point) => {
                last = render::point_line(dimension, point);
                let line = format!("  step {}: {last}", point.step);
                // Without a terminal the bar is hidden (and so are its printed lines): log plainly.
                if progress.is_hidden() {
                    crate::errln!("{line}");
                } else {
                    progress.println(line);
                }
            }
        },
    );
    progress.finish_and_clear();

    if result.points.is_empty() {
        // Nothing was measured: leave no empty folder behind (remove_dir only removes an
        // empty one).
        let _ = std::fs::remove_dir(&args.output_dir);
        return match result.end {
            SweepEnd::Failed {
                message, exit_code, ..
            } => Err(if exit_code == 2 {
                Error::usage(message)
            } else {
                Error::runtime(message)
            }),
            SweepEnd::Interrupted { .. } => {
                Err(Error::runtime("sweep interrupted before any point"))
            }
            SweepEnd::Completed => Err(Error::runtime("sweep measured no point")),
        };
    }

    let summary_path = args.output_dir.join("summary.csv");
    let summary = lab::sweep::summary_csv(&result, &flags)?;
    write_new(&summary_path, &summary)?;

    if args.json {
        print_json(&render::json_summary(
            &result,
            &flags,
            &args.output_dir,
            &summary_path,
        ))?;
    } else {
        emit(
            &[render::text_summary(&result, &flags, &shown, &summary_path)
                .trim_end()
                .to_owned()],
        )?;
    }

    match result.end {
        SweepEnd::Completed => Ok(()),
        SweepEnd::Interrupted { .. } => Err(Error::runtime(format!(
            "sweep interrupted by Ctrl-C before the limit was found; the {} finished points are kept in {}",
            result.points.len(),
            args.output_dir.display()
        ))),
        SweepEnd::Failed {
            message, exit_code, ..
        } => {
            let message = format!(
                "sweep stopped before the limit was found: {message} (the {} finished points are kept in {})",
                result.points.len(),
                args.output_dir.display()
            );
            Err(if exit_code == 2 {
                Error::usage(message)
            } else {
                Error::runtime(message)
            })
        }
    }
}

fn create_new_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::usage(format!(
                "{} already exists; --output-dir must be a new folder (lab never overwrites)",
                dir.display()
            ))
        } else {
            Error::usage(format!("cannot create {}: {e}", dir.display()))
        }
    })
}
