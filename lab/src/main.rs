//! `lab`: the IteraGPU Lab command line. The definitions and each subcommand live in the
//! library's `cli` module (`lab/src/cli/<name>.rs`).

fn main() -> std::process::ExitCode {
    lab::cli::main()
}
