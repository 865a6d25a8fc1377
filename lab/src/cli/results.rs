//! `lab results`: the results grid read back, per package and over all runs.

use lab::results::{lines, read_grid, summarize};
use lab::Result;
use std::path::PathBuf;

/// Flags of `lab results`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The results grid to read (the kit's `resultats-bruts.csv`, as `lab record` appends to it).
    #[arg(long, value_name = "resultats-bruts.csv", allow_hyphen_values = true)]
    results: PathBuf,
    #[command(flatten)]
    catalog: super::CatalogArg,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs `lab results`.
///
/// # Errors
/// Usage (exit 2) for a grid whose header is not the kit's or with a row that breaks a rule
/// of docs/PROTOCOL.md §6 (named by line), and for a package not in the catalog; Runtime
/// (exit 1) for a grid that cannot be read or a failed write to standard output. See
/// [`lab::results`].
pub fn run(args: Args) -> Result<()> {
    let catalog = args.catalog.load()?;
    let rows = read_grid(&args.results, &catalog, time::OffsetDateTime::now_utc())?;
    let results = summarize(&args.results.display().to_string(), &rows, &catalog)?;
    if args.json {
        return lab::stdout::json(&results);
    }
    lab::stdout::lines(&lines(&results))
}
