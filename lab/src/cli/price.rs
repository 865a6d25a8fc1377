//! `lab price`: the price of a package and, given accepted results, the cost per result.

use lab::catalog::CatalogInfo;
use lab::pricing::{quote, Quote};
use lab::text::one_line;
use serde::Serialize;

/// Flags of `lab price`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    package: super::PackageArgs,
    #[command(flatten)]
    accepted: super::AcceptedArg,
    #[command(flatten)]
    catalog: super::CatalogArg,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

/// The `--json` object: the quote's keys, then the catalog it came from.
#[derive(Debug, Serialize)]
struct Priced<'a> {
    #[serde(flatten)]
    quote: &'a Quote,
    catalog: CatalogInfo,
}

/// Runs `lab price`.
///
/// # Errors
/// Usage (exit 2) for an unknown GPU or an invalid catalog; Runtime (exit 1) for an
/// unreadable catalog file or a failed write to standard output.
pub fn run(args: Args) -> lab::Result<()> {
    let package = &args.package;
    let catalog = args.catalog.load()?;
    let q = quote(
        &catalog,
        &package.gpu,
        package.days,
        package.lots,
        args.accepted.accepted_results,
    )?;
    if args.json {
        return lab::stdout::json(&Priced {
            quote: &q,
            catalog: catalog.info(),
        });
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
        catalog.sha256()
    ));
    // Catalog text and the typed path never reach the terminal raw.
    lab::stdout::lines(&out.iter().map(|l| one_line(l)).collect::<Vec<_>>())
}
