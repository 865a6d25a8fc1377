//! `cargo xtask man`: `lab`'s manual pages, generated with `clap_mangen` from the very clap
//! definitions `lab` parses with (`lab::cli::command`), so they cannot drift from `--help`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Flags of `cargo xtask man`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder to write the pages into (created if needed) [default: target/man].
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Runs `cargo xtask man`: writes `lab.1` and one `lab-<command>.1` per command, then prints
/// their paths.
pub fn run(args: Args) -> Result<()> {
    let root = crate::project_root();
    let out_dir = args
        .out_dir
        .unwrap_or_else(|| root.join("target").join("man"));
    let pages = write_pages(&out_dir)?;
    lab::stdout::lines(
        &pages
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>(),
    )?;
    Ok(())
}

/// Writes the pages into `out_dir` (created if needed); returns their paths, sorted.
pub fn write_pages(out_dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    clap_mangen::generate_to(lab::cli::command(), out_dir)
        .with_context(|| format!("cannot write the manual pages into {}", out_dir.display()))?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(out_dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|e| e == "1")
                && path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("lab"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_page_per_command_with_the_exit_codes() {
        let dir = tempfile::tempdir().unwrap();
        let pages = write_pages(dir.path()).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for expected in ["lab.1", "lab-price.1", "lab-measure.1", "lab-completions.1"] {
            assert!(names.iter().any(|n| n == expected), "{names:?}");
        }
        let main = std::fs::read_to_string(dir.path().join("lab.1")).unwrap();
        assert!(main.starts_with(".ie \\n(.g .ds Aq"), "{main}");
        assert!(main.contains("Exit codes"), "{main}");
        let price = std::fs::read_to_string(dir.path().join("lab-price.1")).unwrap();
        assert!(price.contains("accepted\\-results"), "{price}");
    }
}
