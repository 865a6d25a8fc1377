//! `lab compare`: the packages that give at least N GPUs for D days, cheapest first.

use lab::compare::compare;
use lab::pricing::cents_to_usd;
use lab::text::one_line;

/// Flags of `lab compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPUs needed (whole number, at least 1); lots are bought whole, so some packages give more.
    #[arg(long, value_name = "N", value_parser = lab::values::positive, allow_hyphen_values = true)]
    gpus: u64,
    /// Package duration in days: 3, 7 or 30.
    #[arg(long, value_name = "D", value_parser = lab::values::days, allow_hyphen_values = true)]
    days: u32,
    #[command(flatten)]
    accepted: super::AcceptedArg,
    #[command(flatten)]
    catalog: super::CatalogArg,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `lab compare`.
///
/// # Errors
/// Usage (exit 2) for an invalid catalog or an overflowing total; Runtime (exit 1) for an
/// unreadable catalog file or a failed write to standard output.
pub fn run(args: Args) -> lab::Result<()> {
    let (gpus, days, accepted) = (args.gpus, args.days, args.accepted.accepted_results);
    let catalog = args.catalog.load()?;
    let comparison = compare(&catalog, gpus, days, accepted)?;
    if args.json {
        return lab::stdout::json(&comparison);
    }
    let header = [
        "#",
        "gpu",
        "model",
        "lots",
        "GPUs",
        "lot USD",
        "total USD",
        "USD/GPU-day",
        "USD/result",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    rows.extend(comparison.packages.iter().map(|p| {
        let q = &p.quote;
        vec![
            p.rank.to_string(),
            one_line(&q.gpu),
            one_line(&q.model),
            q.lots.to_string(),
            if p.extra_gpus > 0 {
                format!("{} (+{})", q.gpus, p.extra_gpus)
            } else {
                q.gpus.to_string()
            },
            cents_to_usd(q.lot_price_cents).to_string(),
            q.total_usd.to_string(),
            p.usd_per_gpu_day.to_string(),
            q.unit_cost_usd
                .map_or_else(|| "-".to_string(), |c| c.to_string()),
        ]
    }));
    let mut out = vec![format!(
        "packages giving at least {gpus} GPU{} for {days} days, cheapest first:",
        if gpus == 1 { "" } else { "s" }
    )];
    out.extend(lab::table::align(&rows, |i| (1..=2).contains(&i)));
    if accepted.is_none() {
        out.push("unit cost per result: give --accepted-results K".to_string());
    }
    out.push(format!(
        "catalog: {}, sha256 {}",
        one_line(&catalog.describe()),
        comparison.catalog.sha256
    ));
    lab::stdout::lines(&out)
}
