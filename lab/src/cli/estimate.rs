//! TODO

/// Flags of this subcommand.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs this subcommand.
pub fn run(_args: Args) -> lab::Result<()> {
    Err(lab::Error::runtime("not implemented yet"))
}
