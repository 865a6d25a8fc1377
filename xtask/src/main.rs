//! `cargo xtask`: builds and checks IteraGPU Lab. One module per command.

mod verify;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Verify(args) => verify::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
