//! Command-line surface of `lab`: argument parsing and printing only; the work is in the library.

mod estimate;
mod numbers;
mod price;
mod tariffs;

use clap::{Parser, Subcommand};

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
    /// Price of an IteraGPU package and, given accepted results, the cost per result.
    Price(price::Args),
    /// The package catalog as a table, cheapest per GPU-day first.
    Tariffs(tariffs::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> lab::Result<()> {
    match cli.command {
        Command::Estimate(args) => estimate::run(args),
        Command::Price(args) => price::run(args),
        Command::Tariffs(args) => tariffs::run(args),
    }
}
