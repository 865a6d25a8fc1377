//! `lab record`: append one real run to the results grid `resultats-bruts.csv`.

use lab::record::{append_run, RunInput};
use lab::stdout::{json as print_json, lines as emit};
use lab::Result;
use std::path::PathBuf;

/// Flags of `lab record`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run's measurement JSON (written by `lab measure`, `mesure_memoire.py` or the
    /// notebook); linked by file name and SHA-256. Leave out for a run that produced none.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    measurement: Option<PathBuf>,
    /// The results grid to append to (the kit's `resultats-bruts.csv`; never rewritten).
    #[arg(long, value_name = "resultats-bruts.csv", allow_hyphen_values = true)]
    results: PathBuf,
    #[command(flatten)]
    package: super::PackageArgs,
    /// Identifier of the run, unique in the grid [default: run-N, the smallest N from
    /// rows + 1 not used yet].
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    run_id: Option<String>,
    /// When the run ended, UTC, e.g. 2026-10-02T14:05:00Z (a real date, `Z` only; second 60,
    /// a leap second, is refused) [default: now].
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    date_utc: Option<String>,
    /// Name of the quality metric fixed before the trial.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    quality_metric: Option<String>,
    /// The acceptance threshold fixed before the trial, with its direction (e.g. >=0.92); a
    /// signed number such as -0.5 or -1e5 is accepted.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    threshold: Option<String>,
    /// The value the run obtained on that metric; a signed number such as -0.5 or -1e5 is
    /// accepted.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    observed: Option<String>,
    /// Distinct units of this run that meet the threshold (0 when none do; only a
    /// `completed` run can have more than 0); at most 10^12, so that `lab results` can
    /// total any grid.
    #[arg(long, value_name = "K", value_parser = lab::values::count, allow_hyphen_values = true)]
    accepted_results: Option<u64>,
    /// completed, failed, interrupted or rejected (completed but below the threshold).
    #[arg(
        long,
        value_name = "OUTCOME",
        default_value = "completed",
        allow_hyphen_values = true
    )]
    outcome: String,
    /// Free text (e.g. which earlier run_id this row corrects). Text flags may not start with
    /// `=`, `+`, `-` or `@`, which spreadsheets run as formulas (except a signed number in
    /// --threshold and --observed).
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    notes: Option<String>,
    /// The measurement was taken on another GPU than the package's (its document names the
    /// GPU): record the run anyway, with that mismatch written at the start of the notes.
    /// Without it such a measurement is refused.
    #[arg(long)]
    measured_on_other_gpu: bool,
    #[command(flatten)]
    catalog: super::CatalogArg,
    /// Print the appended row as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `lab record`.
///
/// # Errors
/// Usage (exit 2, nothing written) for bad flags (a date that is not a real UTC time,
/// accepted results on a run that is not `completed`, text starting like a spreadsheet
/// formula), a GPU not in the catalog, an invalid measurement, a grid whose header is not the
/// kit's, a measurement or run id already recorded; Runtime (exit 1, nothing written) for a
/// missing or unreadable measurement or grid, and when the append fails (the grid is left as
/// it was). See [`lab::record::append_run`].
pub fn run(args: Args) -> Result<()> {
    let catalog = args.catalog.load()?;
    let input = RunInput {
        run_id: args.run_id.as_deref(),
        date_utc: args.date_utc.as_deref(),
        measurement: args.measurement.as_deref(),
        gpu: &args.package.gpu,
        days: args.package.days,
        lots: args.package.lots,
        quality_metric: args.quality_metric.as_deref(),
        threshold: args.threshold.as_deref(),
        observed: args.observed.as_deref(),
        accepted_results: args.accepted_results,
        outcome: &args.outcome,
        notes: args.notes.as_deref(),
        measured_on_other_gpu: args.measured_on_other_gpu,
    };
    let appended = append_run(&args.results, &catalog, &input)?;
    if args.json {
        return print_json(&appended);
    }
    emit(&lab::record::render::text_lines(&appended))
}
