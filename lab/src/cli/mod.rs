//! Command-line surface of `lab`: the clap definitions, the flag groups several commands
//! share, and each command's printing; the work is in the library.
//!
//! It lives in the library (hidden from the documentation) so that `cargo xtask man`, the
//! shell completions and the tests read the very definitions the binary parses with.
//!
//! Flag text becomes typed values through [`lab::values`] (clap value parsers): every command
//! accepts and refuses the same spellings, and clap names the flag in the message. Everything
//! printed on standard output goes through [`lab::stdout`].

mod compare;
mod completions;
mod environment;
mod estimate;
mod measure;
mod plan;
mod price;
mod record;
mod report;
mod results;
mod sweep;
mod tariffs;
mod verify_kit;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use lab::text::one_line;
use lab::values;
use lab::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `--tariffs FILE`, shared by every command that reads the catalog.
#[derive(Debug, clap::Args)]
pub struct CatalogArg {
    /// Catalog CSV to use instead of the embedded one (checked by the same validator); `-`
    /// reads it from standard input.
    #[arg(long, value_name = "FILE", allow_hyphen_values = true)]
    tariffs: Option<PathBuf>,
}

impl CatalogArg {
    /// The file given with `--tariffs` (standard input for `-`), through the validator, else
    /// the embedded catalog.
    ///
    /// # Errors
    /// As [`lab::catalog::Catalog::load`]: usage (exit 2) for an invalid catalog, runtime
    /// (exit 1) for an unreadable file.
    pub fn load(&self) -> Result<lab::catalog::Catalog> {
        match self.tariffs.as_deref() {
            Some(path) if is_stdin(path) => {
                let bytes = lab::input::stdin(lab::catalog::MAX_CATALOG_BYTES, "catalog")?;
                lab::catalog::Catalog::parse(&bytes)
                    .map_err(|e| Error::usage(format!("catalog (standard input): {e}")))
            }
            path => lab::catalog::Catalog::load(path),
        }
    }
}

/// `--gpu`, `--days`, `--lots`: the package a command prices or records.
#[derive(Debug, clap::Args)]
pub struct PackageArgs {
    /// GPU identifier from the catalog, e.g. b200 (`lab tariffs` lists them).
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub gpu: String,
    /// Package duration in days: 3, 7 or 30.
    #[arg(long, value_name = "D", value_parser = values::days, allow_hyphen_values = true)]
    pub days: u32,
    /// Number of lots (whole number, at least 1). A lot holds the model's GPUs per lot.
    #[arg(long, value_name = "N", value_parser = values::positive, allow_hyphen_values = true)]
    pub lots: u64,
}

/// `--accepted-results K`: the distinct useful results a cost per result is computed for.
#[derive(Debug, clap::Args)]
pub struct AcceptedArg {
    /// Distinct useful results actually accepted (whole number, at least 1; no default).
    /// Given, the unit cost = package total / results is shown.
    #[arg(long, value_name = "K", value_parser = values::positive, allow_hyphen_values = true)]
    pub accepted_results: Option<u64>,
}

/// `--worker PATH`: the torch worker that does the GPU work.
#[derive(Debug, clap::Args)]
pub struct WorkerArg {
    /// The torch worker executable (default: `lab-torch-worker` next to `lab`, or
    /// $LAB_TORCH_WORKER).
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    pub worker: Option<PathBuf>,
}

/// Whether a file argument names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// IteraGPU Lab: estimate weight memory, measure a synthetic MLP on a GPU, price packages.
#[derive(Debug, Parser)]
#[command(name = "lab", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Shown at the end of `lab --help` and in the man page.
const EXIT_CODES: &str = "Exit codes:
  0  success (also when the reader of standard output stops early, e.g. `| head`)
  1  the work failed: unreadable file, a GPU run that failed (out of memory), a failed
     write (a full disk); nothing is left half-written
  2  bad input or a missing prerequisite: a bad flag value, an unknown GPU, an existing
     output file, no torch worker, no libtorch, no such GPU; nothing is written";

/// The commands, by task, as `lab --help` lists them. A command missing here is listed under
/// "Other" (a test checks there is none).
pub const TASKS: [(&str, &[&str]); 4] = [
    ("Pricing", &["price", "tariffs", "compare", "plan"]),
    (
        "Memory and measurement",
        &["estimate", "environment", "measure", "sweep"],
    ),
    ("Results", &["report", "record", "results", "verify-kit"]),
    ("Shell", &["completions"]),
];

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
    /// The results grid read back: runs, spending and cost per accepted result, per package.
    Results(results::Args),
    /// Packages giving at least N GPUs for D days, cheapest first.
    Compare(compare::Args),
    /// Which package holds a model (folder or config.json) and what it costs; with a workload, which package finishes it, how long it takes and what that costs.
    // Boxed: its flags make it by far the largest variant (clippy::large_enum_variant).
    Plan(Box<plan::Args>),
    /// Check a kit archive against its own manifest (as `cargo xtask verify --archive`).
    VerifyKit(verify_kit::Args),
    /// Shell completion script for bash, zsh, fish, elvish or PowerShell.
    Completions(completions::Args),
}

/// The full clap definition of `lab`, with the commands listed by task in `--help`. The man
/// page and the completion scripts are generated from it.
pub fn command() -> clap::Command {
    let command = Cli::command();
    let mut listed: Vec<String> = Vec::new();
    let mut text = String::new();
    let visible: Vec<&clap::Command> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .collect();
    let width = visible
        .iter()
        .map(|c| c.get_name().len())
        .max()
        .unwrap_or(0);
    let mut group = |title: &str, names: &mut dyn Iterator<Item = &str>| {
        let lines: Vec<String> = names
            .filter_map(|name| visible.iter().find(|c| c.get_name() == name))
            .map(|c| {
                listed.push(c.get_name().to_owned());
                let about = c.get_about().map(ToString::to_string).unwrap_or_default();
                format!("  {:<width$}  {about}", c.get_name())
            })
            .collect();
        if !lines.is_empty() {
            text.push_str(&format!("{title}:\n{}\n\n", lines.join("\n")));
        }
    };
    for (title, names) in TASKS {
        group(title, &mut names.iter().copied());
    }
    let others: Vec<String> = visible
        .iter()
        .map(|c| c.get_name().to_owned())
        .filter(|name| {
            !TASKS
                .iter()
                .any(|(_, names)| names.contains(&name.as_str()))
        })
        .collect();
    group("Other", &mut others.iter().map(String::as_str));
    command
        .help_template(
            "{about-with-newline}\n{usage-heading} {usage}\n\n{before-help}Options:\n{options}\
             {after-help}",
        )
        .before_help(text.trim_end().to_owned())
}

/// `lab`'s `main`: parses the command line, runs the command and turns the outcome into the
/// exit code (0, 1 or 2; see `lab --help`), with one line on standard error for a failure.
pub fn main() -> ExitCode {
    let parsed = command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => return usage_error(error),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            crate::errln!("lab: error: {}", one_line(&error.to_string()));
            ExitCode::from(error.exit_code())
        }
    }
}

/// Help and version go to standard output through [`lab::stdout`]; a real usage error becomes
/// one line on stderr (clap's message on one line plus a pointer to `--help`), exit 2.
fn usage_error(error: clap::Error) -> ExitCode {
    if let Some(code) = lab::stdout::help_or_version("lab", &error) {
        return code;
    }
    if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // `lab` alone: a usage error, one line like every other (PROTOCOL §8).
        let names: Vec<String> = command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_string())
            .collect();
        lab::stderr::line(&format!(
            "lab: error: a command is required: {} (see `lab --help`)",
            names.join(", ")
        ));
        return ExitCode::from(2);
    }
    // clap quotes arguments as typed. Parse once more with every argument's control
    // characters escaped, so that an argument holding a newline or a blank line cannot cut the
    // message short or split it; keep the first error if that parse does not fail the same way.
    let escaped: Vec<String> = std::env::args_os()
        .map(|arg| one_line(&arg.to_string_lossy()))
        .collect();
    let error = match command().try_get_matches_from(&escaped) {
        Err(again) if again.kind() == error.kind() => again,
        _ => error,
    };
    // clap's message runs until the first blank line (then come tips and usage).
    let rendered = error.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .skip_while(|line| line.is_empty())
        .take_while(|line| !line.is_empty())
        .collect();
    let first = message.join(" ");
    let first = first.trim_start_matches("error: ");
    // clap's own words are ASCII: what is not is a quoted argument, whose non-ASCII letters
    // are shown as escapes so that a look-alike reads as what it is (`lab::text::ascii`).
    crate::errln!("lab: error: {} (see `lab --help`)", lab::text::ascii(first));
    ExitCode::from(2)
}

/// Runs the parsed command.
///
/// # Errors
/// The command's own error: usage (exit 2) or runtime (exit 1).
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Estimate(args) => estimate::run(args),
        Command::Environment(args) => environment::run(args),
        Command::Measure(args) => measure::run(args),
        Command::Price(args) => price::run(args),
        Command::Tariffs(args) => tariffs::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Report(args) => report::run(args),
        Command::Record(args) => record::run(args),
        Command::Results(args) => results::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Plan(args) => plan::run(*args),
        Command::VerifyKit(args) => verify_kit::run(args),
        Command::Completions(args) => completions::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_are_consistent() {
        command().debug_assert();
    }

    #[test]
    fn every_command_is_listed_under_a_task() {
        let command = command();
        for sub in command.get_subcommands() {
            let name = sub.get_name();
            assert!(
                TASKS.iter().any(|(_, names)| names.contains(&name)),
                "`lab {name}` is in no group of cli::TASKS"
            );
        }
        let help = command.clone().render_help().to_string();
        assert!(!help.contains("Other:"), "{help}");
        assert!(help.contains("Pricing:\n  price"), "{help}");
        assert!(help.contains("Exit codes:"), "{help}");
    }
}
