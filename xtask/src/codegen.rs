//! `cargo xtask codegen`: the files the repository commits but does not write by hand, each
//! from its one source: the measurement schema (from `lab`'s document types) and the copies of
//! `data/` and `dist/` files that the `lab` crate embeds (`lab/data/`, so that the packaged
//! crate holds them).
//!
//! One helper writes or checks them, after rust-analyzer's `ensure_file_contents`
//! (`xtask/src/codegen.rs` there): `cargo xtask codegen` rewrites what differs; the verify
//! step runs it in check mode, so a forgotten regeneration fails CI with the command to run.

use crate::Ctx;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Flags of `cargo xtask codegen`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only compare: exit 1 naming every file that is not up to date.
    #[arg(long)]
    check: bool,
}

/// Each file `lab` embeds: its copy inside the crate, and the original it must equal.
pub const EMBEDDED: [(&str, &str); 3] = [
    ("lab/data/tarifs-forfaits.csv", "data/tarifs-forfaits.csv"),
    ("lab/data/gpu-memory.csv", "data/gpu-memory.csv"),
    ("lab/data/resultats-bruts.csv", "dist/resultats-bruts.csv"),
];

/// Every generated file, relative to `root`, with the bytes it must hold.
pub fn generated(root: &Path) -> Result<Vec<(&'static str, Vec<u8>)>> {
    let mut files = vec![(
        lab::document::schema::SCHEMA_FILE,
        lab::document::schema::measurement_schema_text().into_bytes(),
    )];
    for (copy, original) in EMBEDDED {
        let bytes = std::fs::read(root.join(original))
            .with_context(|| format!("{original}: cannot read"))?;
        files.push((copy, bytes));
    }
    Ok(files)
}

/// Whether `file` under `root` holds `contents`; when not, with `check` the name comes back,
/// without it the file is rewritten (atomically: a temporary file renamed over it).
///
/// # Errors
/// The file cannot be written.
pub fn ensure_file_contents(
    root: &Path,
    file: &str,
    contents: &[u8],
    check: bool,
) -> Result<Option<String>> {
    let path = root.join(file);
    if std::fs::read(&path).is_ok_and(|old| old == contents) {
        return Ok(None);
    }
    if check {
        return Ok(Some(file.to_owned()));
    }
    let folder = path.parent().unwrap_or(root);
    let mut temporary = tempfile::NamedTempFile::new_in(folder)
        .with_context(|| format!("{file}: cannot create a file beside it"))?;
    std::io::Write::write_all(&mut temporary, contents)
        .with_context(|| format!("{file}: cannot write"))?;
    temporary
        .persist(&path)
        .with_context(|| format!("{file}: cannot replace"))?;
    lab::errln!("codegen: wrote {file}");
    Ok(None)
}

/// Writes (or, with `check`, compares) every generated file.
///
/// # Errors
/// With `check`, when a file is not up to date (all of them are named).
pub fn codegen(root: &Path, check: bool) -> Result<()> {
    let mut stale = Vec::new();
    for (file, contents) in generated(root)? {
        stale.extend(ensure_file_contents(root, file, &contents, check)?);
    }
    if stale.is_empty() {
        return Ok(());
    }
    bail!(
        "not up to date: {}; run `cargo xtask codegen` and commit the result",
        stale.join(", ")
    )
}

/// Runs `cargo xtask codegen`.
///
/// # Errors
/// As [`codegen`].
pub fn run(args: Args) -> Result<()> {
    codegen(&crate::project_root(), args.check)
}

/// Verify step: every generated file is up to date (check mode: nothing is written).
pub fn step(ctx: &Ctx) -> Result<()> {
    codegen(&ctx.root, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_file_is_named_in_check_mode_and_rewritten_otherwise() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.txt"), "old").unwrap();
        let stale = ensure_file_contents(root.path(), "a.txt", b"new", true).unwrap();
        assert_eq!(stale.as_deref(), Some("a.txt"));
        assert_eq!(std::fs::read(root.path().join("a.txt")).unwrap(), b"old");
        assert_eq!(
            ensure_file_contents(root.path(), "a.txt", b"new", false).unwrap(),
            None
        );
        assert_eq!(std::fs::read(root.path().join("a.txt")).unwrap(), b"new");
        assert_eq!(
            ensure_file_contents(root.path(), "a.txt", b"new", true).unwrap(),
            None
        );
        // A missing file is stale too.
        let missing = ensure_file_contents(root.path(), "b.txt", b"x", true).unwrap();
        assert_eq!(missing.as_deref(), Some("b.txt"));
    }

    #[test]
    fn the_committed_files_are_up_to_date() {
        codegen(&crate::project_root(), true).unwrap();
    }
}
