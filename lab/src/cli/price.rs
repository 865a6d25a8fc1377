//! `lab price`: the price of a package and, given accepted results, the cost per result.

use super::numbers::{duration, emit, positive_integer, print_json};
use lab::pricing::quote;
use lab::text::one_line;

/// Flags of `lab price`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPU identifier from the catalog, e.g. b200 (`lab tariffs` lists them).
    #[arg(long, value_name = "ID")]
    gpu: String,
    /// Package duration in days: 3, 7 or 30.
    #[arg(long, value_name = "D", allow_hyphen_values = true)]
    days: String,
    /// Number of lots (whole number, at least 1). A lot holds the model's GPUs per lot.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    lots: String,
    /// Distinct useful results actually accepted (whole number, at least 1; no default).
    /// Given, the unit cost = package total / results is shown.
    #[arg(long, value_name = "K", allow_hyphen_values = true)]
    accepted_results: Option<String>,
    #[command(flatten)]
    catalog: super::CatalogArg,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

/// Runs `lab price`.
///
/// # Errors
/// Usage (exit 2) for any bad flag value, unknown GPU or invalid catalog; Runtime (exit 1)
/// for an unreadable catalog file.
pub fn run(args: Args) -> lab::Result<()> {
    let days = duration(&args.days)?;
    let lots = positive_integer("--lots", &args.lots, u64::MAX)?;
    let accepted = args
        .accepted_results
        .as_deref()
        .map(|text| positive_integer("--accepted-results", text, u64::MAX))
        .transpose()?;
    let catalog = args.catalog.load()?;
    let q = quote(&catalog, &args.gpu, days, lots, accepted)?;
    if args.json {
        return print_json(&q);
    }
    let lot_word = if q.lots == 1 { "lot" } else { "lots" };
    let per_lot_word = if q.gpus_per_lot == 1 { "GPU" } else { "GPUs" };
    let gpu_word = if q.gpus == 1 { "GPU" } else { "GPUs" };
    let mut out: Vec<String> = Vec::new();
    out.push(format!("{} ({}), {} days", q.gpu, q.model, q.days));
    out.push(format!(
        "  GPUs:       {} {lot_word} x {} {per_lot_word} per lot = {} {gpu_word}",
        q.lots, q.gpus_per_lot, q.gpus
    ));
    out.push(format!(
        "  lot price:  {} USD",
        lab::pricing::cents_to_usd(q.lot_price_cents)
    ));
    out.push(format!(
        "  total:      {} USD ({} cents)",
        q.total_usd, q.total_cents
    ));
    match (q.accepted_results, q.unit_cost_usd) {
        (Some(results), Some(cost)) => out.push(format!(
            "  unit cost:  {cost} USD per accepted result ({results} accepted)"
        )),
        _ => out.push("  unit cost:  not computed (give --accepted-results K)".to_string()),
    }
    out.push(format!(
        "  catalog:    {}, sha256 {}",
        catalog.describe(),
        q.catalog.sha256
    ));
    // Catalog text and the typed path never reach the terminal raw.
    emit(&out.iter().map(|l| one_line(l)).collect::<Vec<_>>())
}
