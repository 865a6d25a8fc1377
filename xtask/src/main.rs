//! `cargo xtask`: builds and checks IteraGPU Lab.
//!
//! One module per command (`dist`, `notebook`, `verify`, `worker`), plus the pieces they share:
//! [`archive`] (the kit writer), [`content`] (the content checks `dist` and `verify` both
//! make), [`notebook_check`] (the notebook gate), [`imports`] (the import graph and its floors), [`codegen`] (the generated files), and the verify steps too long for `verify.rs`
//! ([`archive_check`], [`notebook_kernel`]). What every command needs, the project root and
//! the verify steps' context, lives here, so that no module imports another command's module
//! for it.

// Diagnostics go through `lab::stderr` (a failed write is ignored): `eprintln!` panics, exit 101.
#![deny(clippy::print_stderr)]

mod archive;
mod archive_check;
mod codegen;
mod content;
mod crate_check;
mod dist;
mod imports;
mod man;
mod notebook;
mod notebook_check;
mod notebook_kernel;
mod verify;
mod worker;

use clap::{Parser, Subcommand};
use lab::kit::Finding;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use xshell::Shell;

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
    /// Writes the generated files: the measurement schema, lab/data/ (`--check`: only compare).
    Codegen(codegen::Args),
    /// Prints the import graph of lab/src and xtask/src and checks it against the floors.
    Imports,
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
        Command::Codegen(args) => codegen::run(args).map(|()| ExitCode::SUCCESS),
        Command::Imports => imports::run(&project_root()).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            lab::errln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `command` as xshell's `run` does (echoed as `$ command` on stderr, streams inherited,
/// a non-zero status an error), but echoed through [`lab::stderr`]: xshell's own echo is an
/// `eprintln!`, which panics when stderr cannot be written.
pub fn run_echoed(command: xshell::Cmd<'_>) -> xshell::Result<()> {
    lab::errln!("$ {command}");
    command.quiet().run()
}

/// The workspace root (the parent of `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// What every verify step gets: a shell in the workspace root, that root, and what earlier
/// steps of the same run produced.
pub struct Ctx {
    /// Shell for running commands, in [`Ctx::root`].
    pub sh: Shell,
    /// The workspace root.
    pub root: PathBuf,
    /// The archive the dist step of this run built; `None` until it succeeds, so that the
    /// archive steps never read an archive left by an earlier run.
    pub built: RefCell<Option<PathBuf>>,
}

impl Ctx {
    /// A context for the workspace at `root`.
    pub fn new(root: PathBuf) -> anyhow::Result<Ctx> {
        let sh = Shell::new()?;
        sh.change_dir(&root);
        Ok(Ctx {
            sh,
            root,
            built: RefCell::new(None),
        })
    }

    /// The archive built by this run's dist step.
    ///
    /// # Errors
    /// The dist step did not run or failed: the archive steps fail rather than check an older
    /// archive.
    pub fn built_archive(&self) -> anyhow::Result<PathBuf> {
        self.built.borrow().clone().ok_or_else(|| {
            anyhow::anyhow!("no archive: the dist step of this run did not build one")
        })
    }
}

/// Turns findings into a step result: one line per finding.
pub fn findings_result(findings: &[Finding]) -> anyhow::Result<()> {
    if findings.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = findings.iter().map(|f| format!("  {f}")).collect();
    anyhow::bail!("{} problem(s):\n{}", findings.len(), lines.join("\n"))
}
