//! `cargo xtask dist`: builds the release archive `target/dist/iteragpu-lab-v1.zip`.
//!
//! Reads the eight sources ([`crate::archive::Kit::read`]), refuses a kit that fails any content
//! check `cargo xtask verify` makes ([`crate::content::findings`]: notebook valid, clean and up
//! to date with the script, results grid empty, catalog complete), resolves
//! `SOURCE_DATE_EPOCH`, and writes the archive through a temporary file renamed into place.
//!
//! Temporary files are named `.iteragpu-lab-v1.zip.dist-tmp.<pid>.<random>` beside the archive.
//! A run killed before its rename (kill -9) leaves one behind; the next run removes those of
//! this pattern whose process is gone (on Linux) or that are over an hour old. The archive gets
//! mode 0666 less the umask (0644 under the usual umask 022), like `lab`'s own outputs.

use crate::archive::{self, Kit};
use anyhow::{bail, Context, Result};
use lab::kit::{self, Manifest};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    pub manifest: Manifest,
}

/// Start of the name of every temporary file `dist` writes.
pub const TEMP_PREFIX: &str = ".iteragpu-lab-v1.zip.dist-tmp.";

/// Age after which a temporary file of [`TEMP_PREFIX`] is stale whatever its process.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// Runs `cargo xtask dist`: builds the archive and prints its path, SHA-256 and members.
pub fn run(args: Args) -> Result<()> {
    let root = crate::project_root();
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

/// The archive bytes for the sources under `source_root`, after the content checks.
///
/// # Errors
/// A source is missing or unreadable, a content check fails (every finding is listed), or
/// `SOURCE_DATE_EPOCH` is malformed.
pub fn archive_bytes(source_root: &Path) -> Result<(Kit, Vec<u8>)> {
    let kit = Kit::read(source_root).with_context(|| {
        format!(
            "cannot read the kit sources under {}",
            source_root.display()
        )
    })?;
    let findings = crate::content::findings(&kit);
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
    let time = archive::entry_time(epoch.as_deref())?;
    let bytes = kit.archive(time)?;
    Ok((kit, bytes))
}

/// Reads and checks the sources under `source_root`, and writes `out_dir/iteragpu-lab-v1.zip`
/// (dated from `SOURCE_DATE_EPOCH` when set). Nothing is written when a check fails.
pub fn build(source_root: &Path, out_dir: &Path) -> Result<Built> {
    let (kit, bytes) = archive_bytes(source_root)?;
    let path = out_dir.join(kit::ARCHIVE_NAME);
    write_atomically(&path, &bytes)?;
    Ok(Built {
        path,
        sha256: lab::digest::sha256_hex(&bytes),
        manifest: kit.manifest(),
    })
}

/// Writes `bytes` to a temporary file next to `path` (removed on any failure), flushes it,
/// then renames it over `path`: a reader sees the old archive or the new one, never half of
/// one. Stale temporary files of earlier runs are removed first.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .context("the archive path has no parent folder")?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    remove_stale_temporaries(dir);
    let mut builder = tempfile::Builder::new();
    let prefix = format!("{TEMP_PREFIX}{}.", std::process::id());
    builder.prefix(&prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Passed to open(2) as its mode, so the kernel applies the umask: 0o666 & !umask.
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    temp.persist(path)
        .with_context(|| format!("cannot rename the temporary file to {}", path.display()))?;
    Ok(())
}

/// Removes files of `dir` named [`TEMP_PREFIX`]`<pid>.*` whose process no longer runs (known
/// on Linux through `/proc`) or older than [`STALE_AFTER`]. Best effort: a file that cannot be
/// removed stays, and does not stop the build.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let proc_known = Path::new("/proc/self").exists();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)) else {
            continue;
        };
        let pid = rest.split('.').next().and_then(|p| p.parse::<u32>().ok());
        let gone = match pid {
            Some(pid) if proc_known => {
                pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
            }
            _ => false,
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if gone || old {
            let _ = fs::remove_file(entry.path());
        }
    }
}
