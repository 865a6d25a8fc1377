//! Every bounded read of a file or standard input, beside [`crate::output`] (which writes):
//! the catalog, the model's config, index and safetensors headers, the GPU memory table,
//! measurement documents (and the comparison `lab report` looks through), the results grid, a
//! kit archive and its members.
//!
//! Each read has a cap chosen by its reader (a constant beside the format it reads) and fails
//! rather than truncates: at most `cap + 1` bytes are read, so a file that grew since its size
//! was looked at is still refused. The functions here say *what* went wrong ([`ReadFailure`]);
//! each reader words it for its own file, so the messages stay the ones its tests pin.

use crate::{Error, Result};
use std::io::Read;
use std::path::Path;

/// Why a bounded read failed.
#[derive(Debug)]
pub enum ReadFailure {
    /// The path is not a regular file (a folder, a device, a pipe).
    NotAFile,
    /// More than the cap: `bytes` is the size seen (the file's, or `cap + 1` read).
    TooLarge {
        /// The size found, bytes.
        bytes: u64,
    },
    /// The operating system refused (missing file, permissions, a failed read).
    Io(std::io::Error),
}

/// Reads all of `reader`, at most `cap` bytes; more is [`ReadFailure::TooLarge`], never a
/// truncation.
///
/// # Errors
/// [`ReadFailure::TooLarge`] past `cap`, [`ReadFailure::Io`] on a failed read.
pub fn capped(reader: impl Read, cap: u64) -> std::result::Result<Vec<u8>, ReadFailure> {
    capped_into(reader, cap, Vec::new())
}

/// [`capped`] into `bytes` (a buffer the caller sized, e.g. from a file's metadata).
fn capped_into(
    reader: impl Read,
    cap: u64,
    mut bytes: Vec<u8>,
) -> std::result::Result<Vec<u8>, ReadFailure> {
    reader
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadFailure::Io)?;
    if bytes.len() as u64 > cap {
        return Err(ReadFailure::TooLarge {
            bytes: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Reads the next `length` bytes of `reader` (e.g. a header whose length a prefix gave), or
/// fewer when it ends first: the caller compares the length to tell a truncated file.
///
/// # Errors
/// The failed read.
pub fn prefix(reader: impl Read, length: u64) -> std::io::Result<Vec<u8>> {
    // Sized once for what the caller expects (a header length already checked against the
    // file's size), capped so that a wrong length cannot reserve more than it could read.
    let expected = usize::try_from(length.min(1 << 27)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(expected);
    reader.take(length).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads the regular file at `path`, at most `cap` bytes: its size is checked before the
/// read, and the read stops one byte past the cap. The buffer is sized from the metadata
/// (one allocation, no copy as it grows, for a file that did not grow).
///
/// # Errors
/// [`ReadFailure::Io`] when it cannot be looked at or read, [`ReadFailure::NotAFile`] for a
/// folder, device or pipe (never opened), [`ReadFailure::TooLarge`] past `cap`.
pub fn file(path: &Path, cap: u64) -> std::result::Result<Vec<u8>, ReadFailure> {
    let metadata = std::fs::metadata(path).map_err(ReadFailure::Io)?;
    if !metadata.is_file() {
        return Err(ReadFailure::NotAFile);
    }
    if metadata.len() > cap {
        return Err(ReadFailure::TooLarge {
            bytes: metadata.len(),
        });
    }
    let file = std::fs::File::open(path).map_err(ReadFailure::Io)?;
    // One byte past the size, so the read that finds the end needs no second allocation.
    let capacity = usize::try_from(metadata.len()).map_or(0, |n| n.saturating_add(1));
    capped_into(file, cap, Vec::with_capacity(capacity))
}

/// Reads standard input whole, at most `cap` bytes (`what` names it in messages).
///
/// # Errors
/// Runtime (exit 1) when it cannot be read; usage (exit 2) when it holds more than `cap`.
pub fn stdin(cap: u64, what: &str) -> Result<Vec<u8>> {
    match capped(std::io::stdin().lock(), cap) {
        Ok(bytes) => Ok(bytes),
        Err(ReadFailure::TooLarge { .. }) => Err(Error::usage(format!(
            "the {what} on standard input is larger than {cap} bytes"
        ))),
        Err(ReadFailure::Io(e)) => Err(Error::runtime(format!(
            "cannot read the {what} from standard input: {e}"
        ))),
        Err(ReadFailure::NotAFile) => Err(Error::runtime(format!(
            "cannot read the {what} from standard input"
        ))),
    }
}

/// A model file of the plan (`config.json`, the safetensors index, the GPU memory table): a
/// regular file of at most `cap` bytes. `what` names it when too large ("model config"...).
///
/// # Errors
/// Runtime (exit 1) when it cannot be read (a dangling symbolic link says so); usage (exit 2)
/// when it is not a regular file or is over `cap`.
pub fn model_file(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>> {
    let shown = crate::text::one_line(&path.display().to_string());
    file(path, cap).map_err(|failure| match failure {
        ReadFailure::Io(e) => {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            if link && std::fs::metadata(path).is_err() {
                Error::runtime(format!(
                    "cannot read {shown}: a symbolic link whose target cannot be read: {e}"
                ))
            } else {
                Error::runtime(format!("cannot read {shown}: {e}"))
            }
        }
        ReadFailure::NotAFile => Error::usage(format!(
            "{shown} is not a regular file: point to the model's files themselves"
        )),
        ReadFailure::TooLarge { .. } => Error::usage(format!(
            "{shown}: larger than {cap} bytes; too large for a {what}"
        )),
    })
}

/// [`model_file`] as UTF-8 text.
///
/// # Errors
/// As [`model_file`]; usage (exit 2) for bytes that are not UTF-8.
pub fn model_text(path: &Path, cap: u64, what: &str) -> Result<String> {
    let bytes = model_file(path, cap, what)?;
    String::from_utf8(bytes).map_err(|_| {
        Error::usage(format!(
            "{}: not UTF-8 text",
            crate::text::one_line(&path.display().to_string())
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_past_the_cap_fails_instead_of_truncating() {
        assert_eq!(capped(&b"abc"[..], 3).unwrap(), b"abc");
        assert!(matches!(
            capped(&b"abcd"[..], 3),
            Err(ReadFailure::TooLarge { bytes: 4 })
        ));
        assert_eq!(capped(&b""[..], 0).unwrap(), b"");
        assert_eq!(prefix(&b"abcdef"[..], 4).unwrap(), b"abcd");
        assert_eq!(prefix(&b"ab"[..], 4).unwrap(), b"ab");
    }

    #[test]
    fn files_are_regular_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "12345").unwrap();
        assert_eq!(file(&path, 5).unwrap(), b"12345");
        assert!(matches!(
            file(&path, 4),
            Err(ReadFailure::TooLarge { bytes: 5 })
        ));
        assert!(matches!(file(dir.path(), 5), Err(ReadFailure::NotAFile)));
        assert!(matches!(
            file(&dir.path().join("missing"), 5),
            Err(ReadFailure::Io(_))
        ));
        let e = model_text(&path, 4, "model config").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e
            .to_string()
            .ends_with("larger than 4 bytes; too large for a model config"));
        let e = model_text(dir.path(), 4, "model config").unwrap_err();
        assert!(e.to_string().contains("is not a regular file"), "{e}");
        std::fs::write(&path, b"\xff").unwrap();
        assert!(model_text(&path, 4, "x")
            .unwrap_err()
            .to_string()
            .ends_with("not UTF-8 text"));
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
            let e = model_text(&link, 4, "x").unwrap_err();
            assert_eq!(e.exit_code(), 1);
            assert!(
                e.to_string().contains("a symbolic link whose target"),
                "{e}"
            );
        }
    }
}
