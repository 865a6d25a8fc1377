//! `lab`: the IteraGPU Lab command line. Each subcommand lives in `cli/<name>.rs`.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lab: error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
