//! Reading, checking and writing measurement documents.

use super::{Document, Phase, SCHEMA_ID};
use crate::digest::sha256_hex;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// Largest measurement file `lab` reads: room for [`crate::values::MAX_REPETITIONS`] rows at
/// their longest (a usual document is a few kilobytes); it guards against being pointed at a
/// huge unrelated file.
pub const MAX_DOCUMENT_BYTES: u64 = 64 * 1024 * 1024;

/// Checks what the types alone cannot: the schema id, the tool, every phase present, repetitions
/// numbered only on `warm_forward` rows, every time within [`super::phase::check_seconds`]'s
/// bounds.
///
/// # Errors
/// The first problem, in words (`phases[3] (warmup): bad repetition Some(1)`).
pub fn check(document: &Document) -> std::result::Result<(), String> {
    if document.schema != SCHEMA_ID {
        return Err(format!(
            "schema is {:?}, expected {SCHEMA_ID:?}",
            document.schema
        ));
    }
    // The schema's enums (lab/schema/measurement.schema.json): the tool is one of the twins.
    if document.tool.name != super::TOOL_NAME {
        return Err(format!(
            "tool.name is {:?}, expected {:?}",
            document.tool.name,
            super::TOOL_NAME
        ));
    }
    if document.tool.version.is_empty() {
        return Err("tool.version is empty".to_string());
    }
    if !matches!(document.tool.implementation.as_str(), "rust" | "python") {
        return Err(format!(
            "tool.implementation is {:?}, expected \"rust\" or \"python\"",
            document.tool.implementation
        ));
    }
    super::check_created_utc(&document.created_utc)?;
    document.environment.check()?;
    for (index, row) in document.phases.iter().enumerate() {
        let repetition_ok = match row.phase {
            Phase::WarmForward => matches!(row.repetition, Some(r) if r >= 1),
            _ => row.repetition.is_none(),
        };
        if !repetition_ok {
            return Err(format!(
                "phases[{index}] ({}): bad repetition {:?}",
                row.phase, row.repetition
            ));
        }
        let at = |e: String| format!("phases[{index}] ({}): {e}", row.phase);
        super::phase::check_seconds("wall_seconds", row.wall_seconds, false).map_err(at)?;
        if let Some(g) = row.gpu_seconds {
            super::phase::check_seconds("gpu_seconds", g, true).map_err(at)?;
        }
    }
    for phase in Phase::ALL {
        if document.first_row(phase).is_none() {
            return Err(format!("no `{phase}` phase row"));
        }
    }
    if let Some(problem) = document
        .graph
        .as_ref()
        .and_then(|g| g.problems().into_iter().next())
    {
        return Err(problem);
    }
    Ok(())
}

/// Parses and checks a document from its bytes (a UTF-8 BOM is tolerated).
///
/// # Errors
/// What is wrong, in words (not JSON, a missing field, an unknown phase, a failed [`check`]).
pub fn parse(bytes: &[u8]) -> std::result::Result<Document, String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Checked as UTF-8 once, in one pass, rather than string by string as serde does for
    // bytes (a million keys in a long document); text that is not UTF-8 goes to serde's
    // byte reader, whose error says where.
    let read = match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str::<Document>(text),
        Err(_) => serde_json::from_slice::<Document>(bytes),
    };
    let document: Document = read.map_err(|e| {
        format!(
            "not a measurement document ({}); give a file written by `lab measure` or \
             `mesure_memoire.py measure`",
            // serde quotes the value it refuses (a phase, a field name) as read.
            crate::text::ascii(&e.to_string())
        )
    })?;
    check(&document)?;
    Ok(document)
}

/// A measurement document read from a file, with the file's name and SHA-256.
#[derive(Debug, Clone)]
pub struct LoadedMeasurement {
    /// The path as given.
    pub path: PathBuf,
    /// Lowercase hex SHA-256 of the file's exact bytes.
    pub sha256: String,
    /// The parsed document.
    pub document: Document,
}

impl LoadedMeasurement {
    /// The file name (last path component), lossily as UTF-8.
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.display().to_string())
    }
}

/// Reads, hashes and checks one measurement file (at most [`MAX_DOCUMENT_BYTES`]):
/// [`read_bytes`], then [`from_bytes`].
///
/// # Errors
/// As those two.
pub fn read(path: &Path) -> Result<LoadedMeasurement> {
    from_bytes(path, &read_bytes(path)?)
}

/// The bytes of the measurement file at `path` (at most [`MAX_DOCUMENT_BYTES`]), not yet
/// checked: read once, so that a caller telling document kinds apart ([`from_bytes`] or
/// another reader) does not read the file again.
///
/// # Errors
/// [`Error::Runtime`] (exit 1) naming the file when it is missing or cannot be read;
/// [`Error::Usage`] (exit 2) when the path is not a regular file or is too large.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    use crate::input::ReadFailure;
    crate::input::file(path, MAX_DOCUMENT_BYTES).map_err(|failure| match failure {
        ReadFailure::Io(e) => Error::runtime(format!("cannot read {}: {e}", path.display())),
        ReadFailure::NotAFile => Error::usage(format!(
            "{} is not a file: give a measurement JSON file (written by lab measure)",
            path.display()
        )),
        // The size seen: the file's, or one byte past the cap when it grew while read.
        ReadFailure::TooLarge { bytes } => Error::usage(format!(
            "{}: {bytes} bytes is too large for a measurement document (at most \
             {MAX_DOCUMENT_BYTES})",
            path.display()
        )),
    })
}

/// Hashes and checks the bytes read from `path` ([`read_bytes`]; `path` only names the file).
///
/// # Errors
/// [`Error::Usage`] (exit 2) naming the file when the bytes are not a measurement document
/// matching the schema ([`parse`]); [`Error::Runtime`] if the hash cannot be computed.
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedMeasurement> {
    // The hash and the parse each read the whole file (tens of MB for 100,000 repetitions):
    // done side by side, the hash costs no wall time on a machine of two cores or more.
    let (document, sha256) = std::thread::scope(|scope| {
        let hashing = scope.spawn(|| sha256_hex(bytes));
        (parse(bytes), hashing.join())
    });
    let document = document.map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
    let sha256 = sha256.map_err(|_| {
        Error::runtime(format!(
            "cannot hash {}: the hashing thread failed",
            path.display()
        ))
    })?;
    Ok(LoadedMeasurement {
        path: path.to_path_buf(),
        sha256,
        document,
    })
}

/// The bytes of `document` as written to a file: pretty JSON with a final newline.
///
/// # Errors
/// [`Error::Runtime`] if the document cannot be encoded (a non-finite time).
pub fn encode(document: &Document) -> Result<Vec<u8>> {
    let mut text = serde_json::to_string_pretty(document)
        .map_err(|e| Error::runtime(format!("cannot encode the measurement: {e}")))?;
    text.push('\n');
    Ok(text.into_bytes())
}

/// Writes `document` ([`encode`]) to the new file `path`, atomically and never over an
/// existing file ([`crate::output::write_new`]); returns the bytes written.
///
/// # Errors
/// As [`crate::output::write_new`]: usage (exit 2) when `path` exists or its folder does not,
/// runtime (exit 1) when writing fails; no file is left behind.
pub fn write_new(path: &Path, document: &Document) -> Result<Vec<u8>> {
    let bytes = encode(document)?;
    crate::output::write_new(path, &bytes)?;
    Ok(bytes)
}
