//! The results grid on disk: opened for appending and locked, read back and checked (the
//! kit's header, well-formed rows), and cut back if an append fails.

use super::{kit_header, MAX_GRID_BYTES};
use crate::{Error, Result};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// The grid file, open for appending and locked (step 2 of [`append_run`](super::append_run)).
pub(super) struct LockedGrid {
    file: std::fs::File,
    /// The grid's bytes when it was locked.
    pub(super) bytes: Vec<u8>,
}

impl LockedGrid {
    /// Opens `grid` (read + append), locks it exclusively and reads it.
    ///
    /// # Errors
    /// [`Error::Usage`] for a path that is not a regular file or a file over
    /// [`MAX_GRID_BYTES`]; [`Error::Runtime`] when it cannot be opened, locked or read.
    pub(super) fn open(grid: &Path) -> Result<LockedGrid> {
        // A path that is not a regular file is bad input (2); a grid that cannot be opened is
        // a runtime failure (1), as for every file `lab` reads.
        if let Ok(metadata) = std::fs::metadata(grid) {
            if !metadata.is_file() {
                return Err(Error::usage(format!(
                    "{} is not a file; give the kit's resultats-bruts.csv with --results",
                    grid.display()
                )));
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(grid)
            .map_err(|e| {
                Error::runtime(format!(
                    "cannot open the grid {}: {e}; give the kit's resultats-bruts.csv with --results",
                    grid.display()
                ))
            })?;
        file.lock()
            .map_err(|e| Error::runtime(format!("cannot lock {}: {e}", grid.display())))?;
        let length = file
            .metadata()
            .map_err(|e| Error::runtime(format!("cannot read {}: {e}", grid.display())))?
            .len();
        if length > MAX_GRID_BYTES {
            return Err(Error::usage(format!(
                "{} is larger than {MAX_GRID_BYTES} bytes; not a results grid",
                grid.display()
            )));
        }
        let cannot =
            |e: std::io::Error| Error::runtime(format!("cannot read {}: {e}", grid.display()));
        file.seek(SeekFrom::Start(0)).map_err(cannot)?;
        // Capped as well: a grid that grew past the bound since its length was read.
        let bytes =
            crate::input::capped(&mut file, MAX_GRID_BYTES).map_err(|failure| match failure {
                crate::input::ReadFailure::Io(e) => cannot(e),
                _ => Error::usage(format!(
                    "{} is larger than {MAX_GRID_BYTES} bytes; not a results grid",
                    grid.display()
                )),
            })?;
        Ok(LockedGrid { file, bytes })
    }

    /// Step 5: appends `chunk` with one `write_all` on the `O_APPEND` descriptor, then
    /// `sync_all`; on failure cuts the file back to its length when locked, so the existing
    /// rows stay byte-identical.
    pub(super) fn append(&mut self, grid: &Path, chunk: &[u8]) -> Result<()> {
        let original_len = self.bytes.len() as u64;
        if let Err(e) = self
            .file
            .write_all(chunk)
            .and_then(|()| self.file.sync_all())
        {
            let _ = self.file.set_len(original_len);
            let _ = self.file.sync_all();
            return Err(Error::runtime(format!(
                "cannot append to {}: {e}; the grid was left as it was",
                grid.display()
            )));
        }
        let _ = self.file.unlock();
        Ok(())
    }
}

/// What [`check_grid`] learnt about a grid.
#[derive(Debug)]
pub(super) struct GridState {
    /// Data rows, each with its 1-based line number.
    pub(super) rows: Vec<(u64, csv::StringRecord)>,
    /// Lines in the file (header included).
    pub(super) lines: u64,
    /// Whether the header line ends with CRLF (the new row follows suit).
    pub(super) crlf: bool,
}

impl GridState {
    fn column(name: &str) -> usize {
        kit_header().iter().position(|h| *h == name).unwrap_or(0)
    }

    pub(super) fn line_of_sha256(&self, sha256: &str) -> Option<u64> {
        let column = Self::column("measurement_sha256");
        self.rows
            .iter()
            .find(|(_, r)| {
                r.get(column)
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case(sha256))
            })
            .map(|(line, _)| *line)
    }

    /// The default run id: `run-N` with the smallest N from rows + 1 that no row uses (a
    /// grid of two rows, one of them `run-3`, gets `run-4`).
    pub(super) fn free_run_id(&self) -> String {
        let used: std::collections::HashSet<&str> = self
            .rows
            .iter()
            .filter_map(|(_, r)| r.get(Self::column("run_id")))
            .collect();
        (self.rows.len() + 1..)
            .map(|n| format!("run-{n}"))
            .find(|id| !used.contains(id.as_str()))
            .unwrap_or_default()
    }

    pub(super) fn line_of_run_id(&self, run_id: &str) -> Option<u64> {
        let column = Self::column("run_id");
        self.rows
            .iter()
            .find(|(_, r)| r.get(column) == Some(run_id))
            .map(|(line, _)| *line)
    }
}

/// Checks that `bytes` are a results grid with exactly the kit's header and rows of the same
/// width.
pub(super) fn check_grid(grid: &Path, bytes: &[u8]) -> Result<GridState> {
    let name = grid.display();
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::usage(format!("{name} is not UTF-8 text: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let expected = kit_header();
    let header_line = text.lines().next().unwrap_or_default();
    let crlf = text
        .split_once('\n')
        .is_some_and(|(first, _)| first.ends_with('\r'));
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    let header = match records.next() {
        Some(Ok(header)) => header,
        _ => {
            return Err(Error::usage(format!(
                "{name} has no header; expected the kit's: {}",
                expected.join(",")
            )))
        }
    };
    if header.iter().ne(expected.iter().copied()) {
        return Err(Error::usage(format!(
            "{name}: header is not the kit's results grid header (got '{}', expected '{}')",
            header_line.trim_end_matches('\r'),
            expected.join(",")
        )));
    }
    let mut rows = Vec::new();
    for record in records {
        let record = record.map_err(|e| Error::usage(format!("{name}: not valid CSV: {e}")))?;
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != expected.len() {
            return Err(Error::usage(format!(
                "{name}: line {line} has {} fields, the header {}; fix the grid by hand first",
                record.len(),
                expected.len()
            )));
        }
        rows.push((line, record));
    }
    let column = |n: &str| GridState::column(n);
    let (id, sha) = (column("run_id"), column("measurement_sha256"));
    super::rules::check_unique(
        rows.iter()
            .map(|(line, r)| (*line, r.get(id).unwrap_or_default(), r.get(sha))),
    )
    .map_err(|e| Error::usage(format!("{name}: {e}; fix the grid by hand first")))?;
    let lines = text.lines().count() as u64;
    Ok(GridState { rows, lines, crlf })
}
