//! `lab tariffs`: the catalog as a table, cheapest per GPU-day first.

use lab::catalog::CatalogInfo;
use lab::pricing::{cents_to_usd, compare_per_gpu_day, usd_per_gpu_day};
use lab::text::one_line;
use serde::Serialize;

/// Flags of `lab tariffs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show only packages of this duration: 3, 7 or 30 days.
    #[arg(long, value_name = "D", value_parser = lab::values::days, allow_hyphen_values = true)]
    days: Option<u32>,
    #[command(flatten)]
    catalog: super::CatalogArg,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// One row of the table (and of the `packages` list in `--json`).
#[derive(Debug, Serialize)]
struct Row<'a> {
    gpu: &'a str,
    model: &'a str,
    days: u32,
    gpus_per_lot: u32,
    lot_price_cents: i64,
    lot_price_usd: String,
    usd_per_gpu_day: String,
}

/// The `--json` object.
#[derive(Debug, Serialize)]
struct Table<'a> {
    days: Option<u32>,
    packages: Vec<Row<'a>>,
    catalog: CatalogInfo,
}

/// Runs `lab tariffs`.
///
/// # Errors
/// Usage (exit 2) for an invalid catalog; Runtime (exit 1) for an unreadable catalog file or
/// a failed write to standard output.
pub fn run(args: Args) -> lab::Result<()> {
    let days = args.days;
    let catalog = args.catalog.load()?;
    let mut entries: Vec<_> = catalog
        .entries()
        .iter()
        .filter(|e| days.is_none_or(|d| e.days == d))
        .collect();
    entries.sort_by(|a, b| compare_per_gpu_day(a, b));
    // The text table shows catalog text escaped; JSON carries it as it is.
    let shown: Vec<(String, String)> = entries
        .iter()
        .map(|e| {
            if args.json {
                (e.gpu.clone(), e.model.clone())
            } else {
                (one_line(&e.gpu), one_line(&e.model))
            }
        })
        .collect();
    let rows: Vec<Row> = entries
        .iter()
        .zip(&shown)
        .map(|(e, (gpu, model))| Row {
            gpu,
            model,
            days: e.days,
            gpus_per_lot: e.gpus_per_lot,
            lot_price_cents: e.price_cents,
            lot_price_usd: cents_to_usd(e.price_cents).to_string(),
            usd_per_gpu_day: usd_per_gpu_day(e).to_string(),
        })
        .collect();
    if args.json {
        return lab::stdout::json(&Table {
            days,
            packages: rows,
            catalog: catalog.info(),
        });
    }
    let w_gpu = rows
        .iter()
        .map(|r| r.gpu.len())
        .chain([3])
        .max()
        .unwrap_or(3);
    let w_model = rows
        .iter()
        .map(|r| r.model.len())
        .chain([5])
        .max()
        .unwrap_or(5);
    let w_price = rows
        .iter()
        .map(|r| r.lot_price_usd.len())
        .chain([13])
        .max()
        .unwrap_or(13);
    let w_day = rows
        .iter()
        .map(|r| r.usd_per_gpu_day.len())
        .chain([15])
        .max()
        .unwrap_or(15);
    let mut out: Vec<String> = Vec::new();
    out.push(format!(
        "{:<w_gpu$}  {:<w_model$}  {:>4}  {:>8}  {:>w_price$}  {:>w_day$}",
        "gpu", "model", "days", "GPUs/lot", "USD per lot", "USD per GPU-day"
    ));
    for r in &rows {
        out.push(format!(
            "{:<w_gpu$}  {:<w_model$}  {:>4}  {:>8}  {:>w_price$}  {:>w_day$}",
            r.gpu, r.model, r.days, r.gpus_per_lot, r.lot_price_usd, r.usd_per_gpu_day
        ));
    }
    out.push(format!(
        "{} packages, cheapest per GPU-day first; {}, sha256 {}",
        rows.len(),
        one_line(&catalog.describe()),
        catalog.sha256()
    ));
    lab::stdout::lines(&out)
}
