//! `cargo xtask dist`: builds the release archive `target/dist/iteragpu-lab-v1.zip`.
//!
//! The archive format lives in [`lab::kit`]; this module reads the sources, refuses a kit that
//! fails the content checks (notebook, results grid, catalog), resolves `SOURCE_DATE_EPOCH`,
//! and writes the archive to a temporary file that is then renamed into place.

use crate::notebook_check;
use anyhow::{bail, Context, Result};
use lab::kit::{self, Finding, Kit};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Flags of `cargo xtask dist`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Source tree holding `dist/`, `data/tarifs-forfaits.csv` and `LICENSE.txt`
    /// (default: the workspace root).
    #[arg(long, value_name = "DIR")]
    pub source: Option<PathBuf>,
    /// Folder the archive is written to (default: `target/dist` in the workspace).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// What [`build`] produced.
#[derive(Debug)]
pub struct Built {
    /// Path of the archive written.
    pub path: PathBuf,
    /// Lowercase-hex SHA-256 of the archive.
    pub sha256: String,
    /// The manifest written into it (member sizes and hashes).
    pub manifest: kit::Manifest,
}

/// Runs `cargo xtask dist`: builds the archive and prints its path, SHA-256 and members.
pub fn run(args: Args) -> Result<()> {
    let root = crate::verify::project_root();
    let source = args.source.unwrap_or_else(|| root.clone());
    let out_dir = args.out_dir.unwrap_or_else(|| default_out_dir(&root));
    let built = build(&source, &out_dir)?;
    print_summary(&built)?;
    Ok(())
}

/// `target/dist` under the workspace root.
pub fn default_out_dir(root: &Path) -> PathBuf {
    root.join("target").join("dist")
}

/// Prints the archive path (relative to the current folder when under it), its SHA-256 and
/// one line per member, through [`lab::stdout`].
pub fn print_summary(built: &Built) -> lab::Result<()> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let shown = built.path.strip_prefix(&cwd).unwrap_or(&built.path);
    let mut out = vec![
        shown.display().to_string(),
        format!("sha256 {}", built.sha256),
        format!("{:>8}  {:<64}  member", "bytes", "sha256"),
    ];
    for entry in &built.manifest.members {
        let size = entry
            .size
            .map_or_else(|| "-".to_string(), |s| s.to_string());
        let hash = entry
            .sha256
            .as_deref()
            .unwrap_or("(not hashed: the manifest itself)");
        out.push(format!("{size:>8}  {hash:<64}  {}", entry.path));
    }
    lab::stdout::lines(&out)
}

/// Reads the eight content files under `source_root`, checks them, and writes
/// `out_dir/iteragpu-lab-v1.zip` (dated from `SOURCE_DATE_EPOCH` when set).
pub fn build(source_root: &Path, out_dir: &Path) -> Result<Built> {
    let kit = Kit::read(source_root).with_context(|| {
        format!(
            "cannot read the kit sources under {}",
            source_root.display()
        )
    })?;
    let findings = content_findings(&kit);
    if !findings.is_empty() {
        let list: Vec<String> = findings.iter().map(|f| format!("  {f}")).collect();
        bail!(
            "refusing to package a kit that fails the content checks:\n{}",
            list.join("\n")
        );
    }
    let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) => Some(value),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(raw)) => {
            bail!("SOURCE_DATE_EPOCH={raw:?} is not an integer number of seconds")
        }
    };
    let time = kit::entry_time(epoch.as_deref())?;
    let bytes = kit.archive(time)?;
    let path = out_dir.join(kit::ARCHIVE_NAME);
    write_atomically(&path, &bytes)?;
    Ok(Built {
        path,
        sha256: lab::digest::sha256_hex(&bytes),
        manifest: kit.manifest(),
    })
}

/// The content checks `dist` and `verify` share: notebook, results grid, catalog. Findings
/// name the source file (`dist/mesure-memoire.ipynb`, ...).
pub fn content_findings(kit: &Kit) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (member, bytes) in kit.files() {
        let file = member.source.unwrap_or(member.name);
        match member.name {
            "mesure-memoire.ipynb" => findings.extend(notebook_check::check(file, bytes)),
            "resultats-bruts.csv" => findings.extend(kit::check_results_grid(file, bytes)),
            "tarifs-forfaits.csv" => findings.extend(kit::check_catalog(file, bytes)),
            _ => {}
        }
    }
    findings
}

/// Writes `bytes` to a temporary file next to `path` (the `tempfile` crate, removed on any
/// failure), flushes it, then renames it over `path`: a reader sees the old archive or the new
/// one, never half of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .context("the archive path has no parent folder")?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{}.", kit::ARCHIVE_NAME))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    temp.persist(path)
        .with_context(|| format!("cannot rename the temporary file to {}", path.display()))?;
    Ok(())
}
