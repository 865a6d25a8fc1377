//! `lab completions SHELL`: the shell completion script, generated from `lab`'s own clap
//! definitions (`clap_complete`), so it always knows every command and flag.

use clap_complete::Shell;

/// Flags of `lab completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Install, e.g. for bash: lab completions bash > \
                        ~/.local/share/bash-completion/completions/lab")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    shell: Shell,
}

/// Runs `lab completions`: prints the script on standard output.
///
/// # Errors
/// Runtime (exit 1) when standard output cannot be written (see [`lab::stdout`]).
pub fn run(args: Args) -> lab::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut super::command(), "lab", &mut script);
    lab::stdout::print(&String::from_utf8_lossy(&script))
}
