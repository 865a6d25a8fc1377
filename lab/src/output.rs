//! New output files. `lab` never overwrites a result: a measurement, a chart or a sweep
//! summary goes to a name that must not exist yet, and is written atomically so that no reader
//! ever sees half a file.
//!
//! How: the bytes go to a temporary file in the destination folder (the `tempfile` crate),
//! flushed to disk, then moved to the final name only if that name is still free (`renameat2`
//! with `RENAME_NOREPLACE`, else a hard link; `tempfile::NamedTempFile::persist_noclobber`).
//! The temporary file is removed on every failure.
//!
//! Permissions: on unix the file is created with mode `0o666` less the process umask (what
//! `open(2)`, a shell redirection or Python's `open(..., "w")` give, e.g. `0644` under the
//! usual umask `022`), not the `0600` of a bare temporary file; elsewhere the platform default.

use crate::{Error, Result};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Refuses an output path that exists (even as a dangling link) or whose folder does not
/// exist. Cheap: commands call it before long work, and [`write_new`] calls it again.
///
/// # Errors
/// [`Error::Usage`] (exit 2) saying which, and what to do; the path is left untouched.
pub fn check_new(path: &Path) -> Result<()> {
    // "new.json/" can never be written as a file (and "exists.json/" hides an existing one
    // from the existence check): refused like the Python twin does.
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return Err(Error::usage(format!(
            "{} ends with '/', which names a folder: give the new file's name",
            path.display()
        )));
    }
    if path.symlink_metadata().is_ok() {
        return Err(Error::usage(format!(
            "{} already exists: choose a new file name (results are never overwritten)",
            path.display()
        )));
    }
    if !folder(path).is_dir() {
        return Err(Error::usage(format!(
            "the folder of {} does not exist: create it first or choose another path",
            path.display()
        )));
    }
    Ok(())
}

/// [`check_new`] for a folder to be created: a trailing `/` is natural there (`runs/`).
///
/// # Errors
/// As [`check_new`].
pub fn check_new_folder(path: &Path) -> Result<()> {
    // Rebuilt from its components, the path loses its trailing slashes.
    let trimmed: PathBuf = path.components().collect();
    check_new(&trimmed)
}

/// Writes `bytes` to the new file `path`, atomically (see the module documentation).
///
/// # Errors
/// [`Error::Usage`] (exit 2) when `path` exists, appears during the call, or its folder does
/// not exist; [`Error::Runtime`] (exit 1) when writing fails. In every case no file is left
/// behind and an existing file is never touched.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    check_new(path)?;
    let fail = |e: std::io::Error| {
        Error::runtime(format!(
            "cannot write {}: {e}; no file was written",
            path.display()
        ))
    };
    let appeared = || {
        Error::usage(format!(
            "{} appeared during the run: nothing was overwritten; choose a new file name",
            path.display()
        ))
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".lab-").suffix(".tmp");
    #[cfg(unix)]
    {
        // Passed to open(2) as its mode, so the kernel applies the umask: 0o666 & !umask.
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder.tempfile_in(folder(path)).map_err(fail)?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(fail)?;
    match temp.persist_noclobber(path) {
        Ok(_) => Ok(()),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Err(appeared()),
        Err(e) => {
            // Neither RENAME_NOREPLACE nor hard links (some network or FAT file systems): a
            // plain rename after a last check.
            if path.symlink_metadata().is_ok() {
                return Err(appeared());
            }
            e.file.persist(path).map(drop).map_err(|e| fail(e.error))
        }
    }
}

/// The folder a new file at `path` goes into (`.` for a bare file name).
fn folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_new_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.svg");
        write_new(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["fresh.svg"]);
    }

    #[test]
    fn existing_file_or_missing_folder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.svg");
        std::fs::write(&path, b"keep").unwrap();
        let error = write_new(&path, b"new").unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("already exists"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), b"keep");
        let error = write_new(&dir.path().join("no/such/out.svg"), b"new").unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("does not exist"), "{error}");
    }

    #[test]
    fn a_dangling_link_counts_as_existing() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert_eq!(check_new(&link).unwrap_err().exit_code(), 2);
        assert!(!dir.path().join("nowhere").exists());
    }
}
