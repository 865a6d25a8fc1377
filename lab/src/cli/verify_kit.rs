//! `lab verify-kit FILE.zip`: checks a downloaded kit against the layout rule and its own
//! manifest, with the same implementation and the same report as
//! `cargo xtask verify --archive` ([`lab::kit::verify_archive`], [`lab::kit::Report::lines`]).

use lab::kit;
use lab::stdout::{json as print_json, lines as emit};
use lab::{Error, Result};
use std::path::PathBuf;

/// Flags of `lab verify-kit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The kit archive, e.g. iteragpu-lab-v1.zip (read only, never extracted); `-` reads it
    /// from standard input.
    #[arg(value_name = "FILE.zip")]
    archive: PathBuf,
    /// Print one JSON object instead of the lines.
    #[arg(long)]
    json: bool,
}

/// Runs `lab verify-kit`.
///
/// # Errors
/// Usage (exit 2) when the path is not a regular file (e.g. a folder); Runtime (exit 1) when
/// the file is missing or unreadable, and when the archive is not a kit as `cargo xtask dist`
/// writes it or does not match its manifest (every finding is printed first, by member). The
/// path check is [`kit::check_archive_path`], shared with `cargo xtask verify --archive`, so
/// both exit the same way.
pub fn run(args: Args) -> Result<()> {
    let report = if super::is_stdin(&args.archive) {
        let bytes = lab::input::stdin(kit::MAX_ARCHIVE_BYTES, "kit archive")?;
        kit::verify_archive_bytes("(standard input)", &bytes)
    } else {
        kit::check_archive_path(&args.archive)?;
        kit::verify_archive(&args.archive)
    };
    if args.json {
        print_json(&report)?;
    } else {
        emit(&report.lines())?;
    }
    if report.is_ok() {
        Ok(())
    } else {
        Err(Error::runtime(format!(
            "{} failed the kit check: {} problem(s), listed above by member; a kit is the \
             iteragpu-lab-v1.zip built by `cargo xtask dist`",
            report.archive,
            report.findings.len()
        )))
    }
}
