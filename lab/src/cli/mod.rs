//! Command-line surface of `lab`: argument parsing and printing only; the work is in the library.

mod compare;
mod environment;
mod estimate;
mod measure;
mod numbers;
mod plan;
mod price;
mod record;
mod report;
mod sweep;
mod tariffs;
mod verify_kit;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// `--tariffs FILE`, shared by every command that reads the catalog.
#[derive(Debug, clap::Args)]
pub struct CatalogArg {
    /// Catalog CSV to use instead of the embedded one (checked by the same validator).
    #[arg(long, value_name = "FILE")]
    tariffs: Option<PathBuf>,
}

impl CatalogArg {
    /// The file given with `--tariffs`, through the validator, else the embedded catalog.
    ///
    /// # Errors
    /// As [`lab::catalog::Catalog::load`]: usage (exit 2) for an invalid catalog, runtime
    /// (exit 1) for an unreadable file.
    pub fn load(&self) -> lab::Result<lab::catalog::Catalog> {
        lab::catalog::Catalog::load(self.tariffs.as_deref())
    }
}

/// IteraGPU Lab: estimate weight memory, measure a synthetic MLP on a GPU, price packages.
#[derive(Debug, Parser)]
#[command(name = "lab", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Weight memory of a model from its parameter count and storage width (no GPU).
    Estimate(estimate::Args),
    /// What libtorch and the GPU report (exits 0; says "not available" and why).
    Environment(environment::Args),
    /// Bounded measurement of the synthetic MLP on a GPU; writes one new JSON file.
    Measure(measure::Args),
    /// Price of an IteraGPU package and, given accepted results, the cost per result.
    Price(price::Args),
    /// The package catalog as a table, cheapest per GPU-day first.
    Tariffs(tariffs::Args),
    /// Grow one measurement dimension until the GPU runs out of memory (one process per point).
    Sweep(sweep::Args),
    /// Tables per phase (and an SVG chart) for one or several measurement files.
    Report(report::Args),
    /// Append one real run to the results grid (append-only, linked by SHA-256).
    Record(record::Args),
    /// Packages giving at least N GPUs for D days, cheapest first.
    Compare(compare::Args),
    /// Which package fits a model (folder or config.json), and what it costs.
    Plan(plan::Args),
    /// Check a kit archive against its own manifest (as `cargo xtask verify --archive`).
    VerifyKit(verify_kit::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> lab::Result<()> {
    match cli.command {
        Command::Estimate(args) => estimate::run(args),
        Command::Environment(args) => environment::run(args),
        Command::Measure(args) => measure::run(args),
        Command::Price(args) => price::run(args),
        Command::Tariffs(args) => tariffs::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Report(args) => report::run(args),
        Command::Record(args) => record::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Plan(args) => plan::run(args),
        Command::VerifyKit(args) => verify_kit::run(args),
    }
}
