//! `lab`: the IteraGPU Lab command line. The definitions and each subcommand live in the
//! library's `cli` module (`lab/src/cli/<name>.rs`).

// Diagnostics go through `lab::stderr` (a failed write is ignored): `eprintln!` panics, exit 101.
#![deny(clippy::print_stderr)]

fn main() -> std::process::ExitCode {
    lab::cli::main()
}
