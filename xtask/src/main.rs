//! `cargo xtask`: builds and checks IteraGPU Lab. One module per command.

mod archive_check;
mod crate_check;
mod dist;
mod man;
mod notebook;
mod notebook_check;
mod verify;
mod worker;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Project automation: `cargo xtask verify` is the CI gate.
#[derive(Debug, Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs every check CI needs; exits 1 if any fails.
    Verify(verify::Args),
    /// Writes dist/mesure-memoire.ipynb from dist/mesure_memoire.py (`--check`: only compare).
    Notebook(notebook::Args),
    /// Builds the release archive target/dist/iteragpu-lab-v1.zip.
    Dist(dist::Args),
    /// Builds lab-torch-worker against PyTorch 2.11.0's libtorch into target/torch/release.
    Worker(worker::Args),
    /// Writes lab's manual pages (lab.1, lab-<command>.1) into target/man.
    Man(man::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version go through lab's one stdout path, like everything printed.
        Err(error) => {
            return lab::stdout::help_or_version("xtask", &error).unwrap_or_else(|| error.exit())
        }
    };
    let result = match cli.command {
        Command::Verify(args) => verify::run(args),
        Command::Notebook(args) => notebook::run(args).map(|()| ExitCode::SUCCESS),
        Command::Dist(args) => dist::run(args).map(|()| ExitCode::SUCCESS),
        Command::Worker(args) => worker::run(args).map(|()| ExitCode::SUCCESS),
        Command::Man(args) => man::run(args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
