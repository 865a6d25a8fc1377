//! New output files. `lab` never overwrites a result: a measurement, a chart or a sweep
//! summary goes to a name that must not exist yet, and is written atomically so that no reader
//! ever sees half a file.
//!
//! How, on Linux: the bytes go to a file without a name in the destination folder
//! (`open(2)` with `O_TMPFILE`), flushed to disk, then given the final name only if that name
//! is still free (`linkat(2)` of `/proc/self/fd/N` with `AT_SYMLINK_FOLLOW`, which fails with
//! `EEXIST` rather than replace anything; `open(2)`'s manual shows this use). A process killed
//! at any moment leaves either nothing or the whole file: an unnamed file is freed by the
//! kernel when its process ends.
//!
//! Where the folder's file system has no `O_TMPFILE` (or `/proc` is not mounted), and on other
//! systems: a named temporary file in the destination folder (the `tempfile` crate), flushed,
//! then moved to the final name only if that name is still free (`renameat2` with
//! `RENAME_NOREPLACE`, else a hard link; `tempfile::NamedTempFile::persist_noclobber`). The
//! temporary file is removed on every failure.
//!
//! Those temporary files are named `.lab-<pid>-<random>.tmp` ([`TEMP_PREFIX`]). A process killed
//! between creating one and moving it leaves it behind; the next [`write_new`] into the same
//! folder removes such files whose process no longer runs (known on Linux through `/proc`) or
//! that are older than [`STALE_AFTER`], and the older `.lab-<random>.tmp` names of earlier
//! releases once older than [`STALE_AFTER`]. Only regular files (never a link or a folder)
//! with exactly that name and the same owner as the file being written are removed.
//!
//! Errors name the target as given, never the temporary file: the operating system's reason
//! is reported without the path the `tempfile` crate attaches (absolute, links resolved, so
//! it could show the home folder and the user name).
//!
//! Permissions: on unix the file is created with mode `0o666` less the process umask (what
//! `open(2)`, a shell redirection or Python's `open(..., "w")` give, e.g. `0644` under the
//! usual umask `022`), not the `0600` of a bare temporary file; elsewhere the platform default.

use crate::{Error, Result};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Start of every temporary file's name; the process id and `-` follow.
pub const TEMP_PREFIX: &str = ".lab-";

/// Age after which one of our temporary files is stale whatever its process.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

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
            "cannot write {}: {}; no file was written",
            path.display(),
            reason(&e)
        ))
    };
    let appeared = || {
        Error::usage(format!(
            "{} appeared during the run: nothing was overwritten; choose a new file name",
            path.display()
        ))
    };
    #[cfg(target_os = "linux")]
    match unnamed::write(path, bytes) {
        unnamed::Outcome::Written => return Ok(()),
        unnamed::Outcome::Exists => return Err(appeared()),
        unnamed::Outcome::Failed(e) => return Err(fail(e)),
        unnamed::Outcome::Unsupported => {}
    }
    let mut builder = tempfile::Builder::new();
    let prefix = format!("{TEMP_PREFIX}{}-", std::process::id());
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        // Passed to open(2) as its mode, so the kernel applies the umask: 0o666 & !umask.
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder.tempfile_in(folder(path)).map_err(fail)?;
    remove_stale_temporaries(&folder(path), temp.as_file());
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

/// The Linux path of [`write_new`]: a file with no name until it is complete.
#[cfg(target_os = "linux")]
mod unnamed {
    use rustix::fs::{AtFlags, Mode, OFlags, CWD};
    use rustix::io::Errno;
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    use std::path::Path;

    /// What [`write`] did.
    pub(super) enum Outcome {
        /// The file is at its name, complete and flushed.
        Written,
        /// The name was taken when the file was to get it; nothing was written there.
        Exists,
        /// Writing or flushing failed; nothing was left behind.
        Failed(std::io::Error),
        /// No unnamed file here (file system without `O_TMPFILE`, no `/proc`): use the named
        /// temporary file instead. Nothing was left behind.
        Unsupported,
    }

    pub(super) fn write(path: &Path, bytes: &[u8]) -> Outcome {
        let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        // The kernel applies the umask: 0o666 & !umask, as for a shell redirection.
        let fd = match rustix::fs::openat(CWD, super::folder(path), flags, Mode::from(0o666)) {
            Ok(fd) => fd,
            Err(_) => return Outcome::Unsupported,
        };
        let mut file = std::fs::File::from(fd);
        // Leftovers of the named path (another file system's run, an earlier release).
        super::remove_stale_temporaries(&super::folder(path), &file);
        if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_all()) {
            return Outcome::Failed(e);
        }
        let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
        match rustix::fs::linkat(CWD, proc_path.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
            Ok(()) => Outcome::Written,
            Err(Errno::EXIST) => Outcome::Exists,
            // No /proc, or a file system that cannot link this inode: the named path, which
            // writes the bytes again.
            Err(Errno::NOENT | Errno::XDEV | Errno::PERM | Errno::OPNOTSUPP) => {
                Outcome::Unsupported
            }
            Err(e) => Outcome::Failed(e.into()),
        }
    }
}

/// The operating system's reason for `error`, without any path attached to it: "Permission
/// denied (os error 13)", or the kind of error when there is no OS code.
fn reason(error: &std::io::Error) -> String {
    if let Some(code) = error.raw_os_error() {
        return std::io::Error::from_raw_os_error(code).to_string();
    }
    // The crate wraps the OS error as "<reason> at path \"<path>\"" and keeps only its kind
    // reachable: keep the words before the path.
    let text = error.to_string();
    match text.split_once(" at path ") {
        Some((words, _)) if !words.is_empty() => words.to_string(),
        _ if error.get_ref().is_some() => error.kind().to_string(),
        _ => text,
    }
}

/// Whether `name` is one of our temporary names, and the process id it carries if any:
/// `.lab-<pid>-<random>.tmp` gives `Some(Some(pid))`, the earlier `.lab-<random>.tmp`
/// (six alphanumerics, no `-`) gives `Some(None)`, anything else `None`.
fn temporary_pid(name: &str) -> Option<Option<u32>> {
    let middle = name.strip_prefix(TEMP_PREFIX)?.strip_suffix(".tmp")?;
    if !middle
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return None;
    }
    match middle.split_once('-') {
        Some((pid, random))
            if !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && !random.is_empty()
                && !random.contains('-') =>
        {
            Some(Some(pid.parse().ok()?))
        }
        None if middle.len() == 6 => Some(None),
        _ => None,
    }
}

/// Removes the stale temporary files of `dir` (see the module documentation): same owner as
/// `ours` (the temporary file this process just created), a regular file, our naming, and its
/// process gone or older than [`STALE_AFTER`]. Best effort: a file that cannot be removed
/// stays and does not stop the write.
fn remove_stale_temporaries(dir: &Path, ours: &std::fs::File) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let Ok(own) = ours.metadata() else {
        return;
    };
    let proc_known = Path::new("/proc/self").exists();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temporary_pid) else {
            continue;
        };
        // Not followed: a link or a folder with our name is never ours to remove.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.file_type().is_file() || !same_owner(&meta, &own) {
            continue;
        }
        let gone = match pid {
            Some(pid) if proc_known => {
                pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
            }
            _ => false,
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AFTER);
        if gone || old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(unix)]
fn same_owner(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.uid() == b.uid()
}

#[cfg(not(unix))]
fn same_owner(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
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

    /// On Linux the file has no name until it is complete (`O_TMPFILE`; tmpfs and ext4 have
    /// it), it never replaces a name that appeared, and it gets the umask's mode.
    #[cfg(target_os = "linux")]
    #[test]
    fn on_linux_the_file_is_unnamed_until_complete() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        assert!(matches!(
            unnamed::write(&path, b"one"),
            unnamed::Outcome::Written
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        assert!(matches!(
            unnamed::write(&path, b"two"),
            unnamed::Outcome::Exists
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o600, 0o600, "{mode:o}");
        assert_eq!(mode & 0o111, 0, "{mode:o}");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.json"]);
    }

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

    #[test]
    fn our_temporary_names_are_recognised_and_nothing_else() {
        assert_eq!(temporary_pid(".lab-123-aB3xYz.tmp"), Some(Some(123)));
        assert_eq!(temporary_pid(".lab-aB3xYz.tmp"), Some(None));
        for other in [
            ".lab-.tmp",
            ".lab-123-.tmp",
            ".lab--abc.tmp",
            ".lab-123-a-b.tmp",
            ".lab-abc.tmp",
            ".lab-123-abc.tmpx",
            "x.lab-123-abc.tmp",
            ".lab-123-ab/c.tmp",
            ".lab-99999999999999999999-abc.tmp",
            "notes.tmp",
        ] {
            assert_eq!(temporary_pid(other), None, "{other}");
        }
    }

    /// Leftovers of a killed process are removed by the next write into the folder; files
    /// that are not ours (other names, links, folders, a live process's file, a recent file
    /// of the old naming) stay.
    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Process ids stop at 2^22 on Linux: this one never runs.
        let dead = ".lab-999999999-dead01.tmp";
        let live = format!(".lab-{}-live01.tmp", std::process::id());
        let old_form_old = ".lab-old001.tmp";
        let old_form_new = ".lab-new001.tmp";
        for name in [
            dead,
            live.as_str(),
            old_form_old,
            old_form_new,
            "keep.tmp",
            ".lab-1-x.tmpx",
        ] {
            std::fs::write(d.join(name), b"partial").unwrap();
        }
        let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(d.join(old_form_old))
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
        std::os::unix::fs::symlink(d.join("keep.tmp"), d.join(".lab-999999999-link01.tmp"))
            .unwrap();
        std::fs::create_dir(d.join(".lab-999999999-fold01.tmp")).unwrap();
        write_new(&d.join("chart.svg"), b"<svg/>").unwrap();
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let mut want = vec![
            ".lab-1-x.tmpx".to_string(),
            ".lab-999999999-fold01.tmp".to_string(),
            ".lab-999999999-link01.tmp".to_string(),
            old_form_new.to_string(),
            live,
            "chart.svg".to_string(),
            "keep.tmp".to_string(),
        ];
        want.sort();
        assert_eq!(names, want);
    }

    /// A folder where the file cannot be created: the error names the target as given and the
    /// operating system's reason, never the temporary file or the folder as resolved.
    #[test]
    fn errors_name_the_target_never_the_temporary_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let probe = locked.join("probe");
        if std::fs::write(&probe, b"").is_ok() {
            // Running as root: permissions do not stop writes; nothing to check here.
            let _ = std::fs::remove_file(&probe);
            return;
        }
        let error = write_new(&locked.join("chart.svg"), b"<svg/>").unwrap_err();
        let text = error.to_string();
        assert_eq!(
            text,
            format!(
                "cannot write {}: Permission denied (os error 13); no file was written",
                locked.join("chart.svg").display()
            )
        );
        assert!(!text.contains(".lab-") && !text.contains(".tmp"), "{text}");
        assert_eq!(error.exit_code(), 1);
    }

    /// The `tempfile` crate attaches the temporary file's full path to its errors; the reason
    /// shown keeps only the operating system's words. Checked on a real error of that crate
    /// (a folder that does not exist), and through [`write_new`] on a folder where no file can
    /// be created even by root (`/proc/self`, Linux).
    #[test]
    fn the_reason_drops_the_path_the_tempfile_crate_attaches() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let e = tempfile::Builder::new()
            .prefix(".lab-1-")
            .tempfile_in(&missing)
            .unwrap_err();
        assert!(
            e.to_string().contains("gone"),
            "the crate names the path: {e}"
        );
        assert_eq!(reason(&e), "No such file or directory (os error 2)");
        if Path::new("/proc/self").is_dir() {
            let text = write_new(Path::new("/proc/self/chart.svg"), b"x")
                .unwrap_err()
                .to_string();
            assert!(
                text.starts_with("cannot write /proc/self/chart.svg: "),
                "{text}"
            );
            assert!(text.ends_with("; no file was written"), "{text}");
            assert!(!text.contains(".lab-") && !text.contains(".tmp"), "{text}");
            assert!(!text.contains(" at path "), "{text}");
        }
    }
}
