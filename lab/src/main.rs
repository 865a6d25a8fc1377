//! `lab`: the IteraGPU Lab command line. Each subcommand lives in `cli/<name>.rs`.

mod cli;

use clap::error::ErrorKind;
use clap::Parser;
use lab::text::one_line;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(error) => return usage_error(error),
    };
    match cli::run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lab: error: {}", one_line(&error.to_string()));
            ExitCode::from(error.exit_code())
        }
    }
}

/// Help and version go to stdout as clap prints them; a real usage error becomes one line
/// on stderr (clap's message on one line plus a pointer to `--help`), exit 2.
fn usage_error(error: clap::Error) -> ExitCode {
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // Printing help can only fail on a closed pipe, where nothing more can be said.
        let _ = error.print();
        return if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    // clap quotes arguments as typed. Parse once more with every argument's control
    // characters escaped, so that an argument holding a newline or a blank line cannot cut the
    // message short or split it; keep the first error if that parse does not fail the same way.
    let escaped: Vec<String> = std::env::args_os()
        .map(|arg| one_line(&arg.to_string_lossy()))
        .collect();
    let error = match cli::Cli::try_parse_from(&escaped) {
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
    eprintln!("lab: error: {} (see `lab --help`)", one_line(first));
    ExitCode::from(2)
}
