//! Recording one real run in the results grid `resultats-bruts.csv`, append-only.
//!
//! The grid is a log (see the kit's `protocole-qualite.md`): rows are never edited or removed.
//! [`append_run`] checks the grid (exactly the kit's header, well-formed rows), refuses a
//! measurement file already recorded (same SHA-256) and a `run_id` already used, then appends
//! one row ([`GridRow`], in the kit's column order). Every cell of that row, whatever its
//! source (a flag, the measurement's file name, the catalog), goes through one guard,
//! [`check_cell`], on the bytes about to be appended ([`encode_row`]): one line of visible
//! text that a spreadsheet will not run as a formula.
//!
//! Why append rather than copy-to-temp + rename: a rename replaces the file, so a row another
//! program appended between our read and our rename would be lost, and the existing rows would
//! be rewritten (a crash mid-copy could even truncate them in the copy). Appending never
//! touches the existing bytes. To make it safe:
//! - the file is opened once in append mode and locked exclusively (`File::lock`, an advisory
//!   lock that concurrent `lab record` runs respect) while it is read, checked and appended
//!   to, so the duplicate checks and the append see the same content;
//! - the whole row (with a leading newline if the file lacked a final one) is written with a
//!   single `write_all` on an `O_APPEND` descriptor, then `sync_all`;
//! - if that write fails (disk full), the file is cut back to its exact previous length, which
//!   removes only the partial row: the existing rows are never rewritten.
//!
//! The files: `cells` the guard every cell goes through (dates, formulas, outcomes);
//! `append` the steps of [`append_run`]; `grid` the locked grid and its checks; [`rules`] the
//! rules of every row's fields (also what `lab results` checks when it reads a grid);
//! [`render`] the appended row as text.

mod append;
mod cells;
mod grid;
pub mod render;
pub mod rules;
#[cfg(test)]
mod tests;

pub use append::append_run;
pub use cells::{
    check_cell, check_date_utc, check_formula, check_not_in_future, check_outcome_and_accepted,
    encode_row, is_signed_number, FORMULA_PREFIXES, FUTURE_TOLERANCE,
};

use serde::Serialize;
use std::path::Path;

/// The empty results grid shipped in the kit; its first line is the only header accepted.
pub const KIT_GRID: &str = include_str!("../../data/resultats-bruts.csv");

/// Largest grid `lab record` reads (a grid holds one short line per run).
pub const MAX_GRID_BYTES: u64 = 64 * 1024 * 1024;

/// The kit's header columns, in order.
pub fn kit_header() -> Vec<&'static str> {
    KIT_GRID
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches('\u{feff}')
        .trim_end_matches('\r')
        .split(',')
        .collect()
}

/// The outcomes the protocol defines for a run.
pub const OUTCOMES: [&str; 4] = ["completed", "failed", "interrupted", "rejected"];

/// What the user gives for one run; everything optional is an empty cell when absent.
#[derive(Debug, Clone, Default)]
pub struct RunInput<'a> {
    /// `run_id`; `None` -> `run-N`, the smallest N from rows already in the grid + 1 whose
    /// `run-N` is not used yet (ids the user chose are skipped, never refused).
    pub run_id: Option<&'a str>,
    /// `date_utc` (`YYYY-MM-DDTHH:MM:SSZ`); `None` -> now.
    pub date_utc: Option<&'a str>,
    /// The measurement file of the run, if it produced one.
    pub measurement: Option<&'a Path>,
    /// GPU id of the package (must be in the catalog).
    pub gpu: &'a str,
    /// Package duration (3, 7, 30).
    pub days: u32,
    /// Lots bought (at least 1).
    pub lots: u64,
    /// Name of the quality metric.
    pub quality_metric: Option<&'a str>,
    /// Acceptance threshold fixed beforehand, e.g. `>=0.92`.
    pub threshold: Option<&'a str>,
    /// Observed value.
    pub observed: Option<&'a str>,
    /// Distinct accepted units of this run (0 allowed: a run may accept none).
    pub accepted_results: Option<u64>,
    /// One of [`OUTCOMES`].
    pub outcome: &'a str,
    /// Free text.
    pub notes: Option<&'a str>,
    /// The measurement was taken on another GPU than the package's, on purpose: recorded as
    /// such at the start of `notes` ([`rules::mismatch_note`]). Without it a mismatch is
    /// refused.
    pub measured_on_other_gpu: bool,
}

/// One row of the results grid, field by field in the kit's column order (the header line of
/// `dist/resultats-bruts.csv`, [`KIT_GRID`]): the CSV encoder and the JSON of
/// `lab record --json` both follow the field order, and a test checks it against the header,
/// so reordering the kit's columns cannot shift a value into another column silently. An
/// absent value is an empty cell (`null` in JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GridRow {
    /// Identifier of the run, unique in the grid.
    pub run_id: String,
    /// When the run ended, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date_utc: String,
    /// File name (last path component) of the run's measurement document.
    pub measurement_file: Option<String>,
    /// Lowercase-hex SHA-256 of that file's bytes.
    pub measurement_sha256: Option<String>,
    /// GPU id of the package, as in the catalog.
    pub gpu: String,
    /// Package duration in days.
    pub days: u32,
    /// Lots bought.
    pub lots: u64,
    /// Name of the quality metric fixed before the trial.
    pub quality_metric: Option<String>,
    /// Acceptance threshold fixed before the trial.
    pub threshold: Option<String>,
    /// Value the run obtained.
    pub observed: Option<String>,
    /// Distinct accepted units of the run.
    pub accepted_results: Option<u64>,
    /// One of [`OUTCOMES`].
    pub outcome: String,
    /// Free text.
    pub notes: Option<String>,
}

/// The row appended and where.
#[derive(Debug, Clone, Serialize)]
pub struct Appended {
    /// The grid file.
    pub grid: String,
    /// 1-based line number of the new row (the header is line 1).
    pub line: u64,
    /// The row, in the kit's column order.
    pub row: GridRow,
}
