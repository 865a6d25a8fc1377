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

use crate::catalog::Catalog;
use crate::document::{read as read_measurement, LoadedMeasurement};
use crate::{Error, Result};
use serde::Serialize;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The empty results grid shipped in the kit; its first line is the only header accepted.
pub const KIT_GRID: &str = include_str!("../data/resultats-bruts.csv");

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

/// Columns whose cells may hold a signed number (`-0.5`, `+3`, `-1e5`) although it starts like
/// a formula (see [`check_formula`]).
const NUMERIC_COLUMNS: [&str; 2] = ["threshold", "observed"];

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

/// Where a column's value comes from, as the user can act on it: the flag that sets it, or the
/// measurement file.
fn source_of(column: &str) -> String {
    match column {
        "measurement_file" => "the measurement file name".to_string(),
        "measurement_sha256" => "the measurement's SHA-256".to_string(),
        other => format!("--{}", other.replace('_', "-")),
    }
}

/// What to do about a bad cell, by source.
fn fix_for(column: &str) -> &'static str {
    if column == "measurement_file" {
        "rename the file"
    } else {
        "reword it"
    }
}

/// Characters that change how text is shown without being visible: bidirectional controls
/// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), zero-width and invisible characters
/// (U+180E, U+200B, U+2060-U+2064, U+FEFF), line and paragraph separators (U+2028, U+2029),
/// interlinear annotations (U+FFF9-U+FFFB). The joiners U+200C and U+200D are kept: scripts
/// and emoji need them.
fn is_hidden_format(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{180E}' | '\u{200B}' | '\u{200E}' | '\u{200F}'
        | '\u{202A}'..='\u{202E}' | '\u{2028}' | '\u{2029}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `value` for a message: control characters escaped as everywhere in `lab`
/// ([`crate::text::one_line`]), hidden format characters too (`\u{202e}`).
fn shown(value: &str) -> String {
    crate::text::one_line(value)
        .chars()
        .map(|c| {
            if is_hidden_format(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The one guard every cell of the grid goes through, whatever its source (a flag, the
/// measurement's file name, the catalog): one line of visible text (no control character, no
/// hidden format character) that a spreadsheet will not run as a formula ([`check_formula`];
/// `numeric` cells also take a signed number).
///
/// # Errors
/// [`Error::Usage`] naming the source (the flag, or "the measurement file name") and how to fix it.
pub fn check_cell(column: &str, value: &str, numeric: bool) -> Result<()> {
    let source = source_of(column);
    if let Some(c) = value
        .chars()
        .find(|c| c.is_control() || is_hidden_format(*c))
    {
        return Err(Error::usage(format!(
            "{source} '{}' holds the character {}, which a grid cell must not; {} so that it is \
             one line of visible text",
            shown(value),
            c.escape_unicode(),
            fix_for(column)
        )));
    }
    check_formula(&source, value, numeric).map_err(|e| match column {
        "measurement_file" => Error::usage(format!(
            "{source} '{value}' starts with '{}', which a spreadsheet would run as a formula; \
             rename the file so that its name starts with a letter or a digit",
            value.chars().next().unwrap_or_default()
        )),
        _ => e,
    })
}

/// Checks that `date` is a real UTC instant written `YYYY-MM-DDTHH:MM:SSZ` (the protocol's
/// form): the shape first, then the calendar through the `time` crate's RFC 3339 parser, so
/// `2026-02-30T00:00:00Z` or `2026-04-31T10:00:00Z` are refused. Only the `Z` suffix is
/// accepted (no offset, no fraction): the grid's dates are compared as text.
///
/// Second 60 is refused whatever the date: the RFC 3339 parser accepts `23:59:60` at the end
/// of any month, and whether a leap second really happened then needs a table of them (none
/// is scheduled after 2016). Refusing every leap second is exact for every date since 2017;
/// a run ending in one is written `...:59Z`.
pub fn check_date_utc(text: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::usage(format!(
            "--date-utc must be a real UTC time written like 2026-10-02T14:05:00Z, got '{}' ({why})",
            crate::text::excerpt(text)
        )))
    };
    let b = text.as_bytes();
    let digit_at = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let shape = b.len() == 20
        && [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
            .iter()
            .all(|&i| digit_at(i))
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z';
    if !shape {
        return bad("expected YYYY-MM-DDTHH:MM:SSZ");
    }
    if &b[17..19] == b"60" {
        return bad(
            "second 60: leap seconds are refused, lab cannot tell which ones happened; write :59",
        );
    }
    match time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339) {
        Ok(_) => Ok(()),
        Err(e) => bad(&format!("not a date on the calendar: {e}")),
    }
}

/// How far after this machine's clock a run's `--date-utc` may lie: a run cannot end in the
/// future, but two clocks may disagree by some minutes.
pub const FUTURE_TOLERANCE: time::Duration = time::Duration::hours(1);

/// Refuses a run date (already checked by [`check_date_utc`]) more than [`FUTURE_TOLERANCE`]
/// after `now`: the grid is append-only, so a mistyped year would stay in it for good.
pub fn check_not_in_future(text: &str, now: time::OffsetDateTime) -> Result<()> {
    let date = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map_err(|e| {
            Error::usage(format!(
                "--date-utc '{}' is not a date: {e}",
                crate::text::excerpt(text)
            ))
        })?;
    if date > now + FUTURE_TOLERANCE {
        return Err(Error::usage(format!(
            "--date-utc '{text}' is in the future (this machine's clock says {}); give the time \
             the run ended, or leave --date-utc out for now",
            now.replace_nanosecond(0)
                .unwrap_or(now)
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| "now".to_owned())
        )));
    }
    Ok(())
}

/// Characters that make a spreadsheet (Excel, LibreOffice, Google Sheets) read a cell as a
/// formula, or that such programs strip before doing so: `=`, `+`, `-`, `@`, tab, CR.
pub const FORMULA_PREFIXES: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Refuses text that a spreadsheet opening the grid would run as a formula (CSV injection).
///
/// Refusing rather than prefixing a quote (`'=...`): the grid is an append-only log read by
/// people, by the kit's Python scripts and by `lab` itself, and a row can never be corrected
/// in place. A silently altered value would be recorded for ever as something the user did
/// not type, and readers other than spreadsheets would see the quote as part of the value. A
/// refusal costs one retyped flag and leaves the log exactly as typed.
///
/// `numeric` fields (`--threshold`, `--observed`) also accept a signed number, decimal or in
/// scientific notation, such as `-0.5`, `+3` or `-1e5` (see [`is_signed_number`]), which
/// spreadsheets read as a number, not a formula; any other text starting with `=`, `+`, `-`
/// or `@` is refused there too.
pub fn check_formula(flag: &str, value: &str, numeric: bool) -> Result<()> {
    let Some(first) = value.chars().next() else {
        return Ok(());
    };
    if !FORMULA_PREFIXES.contains(&first) || (numeric && is_signed_number(value)) {
        return Ok(());
    }
    let numbers = if numeric {
        "; a signed number on its own, such as -0.5, +3 or -1e5, is accepted as it is"
    } else {
        ""
    };
    Err(Error::usage(format!(
        "{flag} starts with '{}', which a spreadsheet would run as a formula; reword it so it \
         starts with a letter, a digit or a comparison sign (e.g. >=0.92){numbers}",
        first.escape_default()
    )))
}

/// Whether `value` is one finite number, optionally signed, in decimal or scientific notation
/// (`-0.5`, `+3`, `7.`, `-.5`, `-1e5`, `+2.5E-3`): ASCII digits, at most one point, an
/// optional exponent, and nothing else (no spaces, no `inf` or `NaN`, no `1e999`, which
/// overflows).
pub fn is_signed_number(value: &str) -> bool {
    // Rust's float syntax is exactly the shape above plus `inf`/`infinity`/`nan` in any case,
    // which only letters can spell: refuse letters other than the exponent's e.
    value
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'))
        && value.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Refuses accepted results on a run that accepted none by definition: only a `completed` run
/// can have units meeting the threshold (`rejected` means completed but below it; `failed`
/// and `interrupted` produced nothing to accept). 0 is allowed for every outcome.
pub fn check_outcome_and_accepted(outcome: &str, accepted_results: Option<u64>) -> Result<()> {
    match accepted_results {
        Some(k) if k > 0 && outcome != "completed" => Err(Error::usage(format!(
            "--accepted-results {k} contradicts --outcome {outcome}: a {outcome} run has no \
             accepted result; give --accepted-results 0 (or leave it out), or --outcome completed"
        ))),
        _ => Ok(()),
    }
}

/// Validates `input` (catalog, measurement, texts), then appends one row to the grid at
/// `grid` as described in the module documentation.
///
/// # Errors
/// [`Error::Usage`] (exit 2, nothing written) for: a GPU not in the catalog, a bad duration or
/// lot count, an unknown outcome, accepted results on a run that is not `completed`, a date
/// that is not a real UTC time, any cell (a flag's text, the measurement's file name) holding
/// a control or hidden format character or starting like a spreadsheet formula, a measurement
/// path that is not a file or not a measurement document, a grid path that is not a file, a
/// grid that is not UTF-8, whose header is not the kit's or whose rows are malformed, a
/// measurement already recorded, a `run_id` already used.
/// [`Error::Runtime`] (exit 1, nothing written) when the measurement or the grid is missing or
/// cannot be read, and when the append itself fails (the grid is then left exactly as it was).
pub fn append_run(grid: &Path, catalog: &Catalog, input: &RunInput<'_>) -> Result<Appended> {
    check_input(catalog, input)?;
    let measurement = input.measurement.map(read_measurement).transpose()?;
    let measurement_file = measurement
        .as_ref()
        .map(measurement_file_name)
        .transpose()?;
    if let Some(name) = &measurement_file {
        check_cell("measurement_file", name, false)?;
    }
    let mut file = LockedGrid::open(grid)?;
    let state = check_grid(grid, &file.bytes)?;
    let run_id = choose_run_id(grid, &state, input.run_id, measurement.as_ref())?;
    let row = GridRow {
        run_id,
        date_utc: input
            .date_utc
            .map_or_else(crate::document::utc_now, str::to_string),
        measurement_file,
        measurement_sha256: measurement.as_ref().map(|m| m.sha256.clone()),
        gpu: input.gpu.to_string(),
        days: input.days,
        lots: input.lots,
        quality_metric: input.quality_metric.map(str::to_string),
        threshold: input.threshold.map(str::to_string),
        observed: input.observed.map(str::to_string),
        accepted_results: input.accepted_results,
        outcome: input.outcome.to_string(),
        notes: input.notes.map(str::to_string),
    };
    let mut chunk = Vec::new();
    if !file.bytes.is_empty() && !file.bytes.ends_with(b"\n") {
        chunk.extend_from_slice(if state.crlf { b"\r\n" } else { b"\n" });
    }
    chunk.extend(encode_row(&row, state.crlf)?);
    file.append(grid, &chunk)?;
    Ok(Appended {
        grid: grid.display().to_string(),
        line: state.lines + 1,
        row,
    })
}

/// Step 1 of [`append_run`]: the checks that need neither the measurement nor the grid (the
/// package against the catalog, the outcome, every text flag through [`check_cell`], the
/// date), so that bad flags are refused before any file is read.
fn check_input(catalog: &Catalog, input: &RunInput<'_>) -> Result<()> {
    crate::pricing::quote(catalog, input.gpu, input.days, input.lots, None)?;
    if !OUTCOMES.contains(&input.outcome) {
        return Err(Error::usage(format!(
            "--outcome must be one of {}, got '{}'",
            OUTCOMES.join(", "),
            crate::text::excerpt(input.outcome)
        )));
    }
    for (column, value) in [
        ("run_id", input.run_id),
        ("quality_metric", input.quality_metric),
        ("threshold", input.threshold),
        ("observed", input.observed),
        ("notes", input.notes),
    ] {
        if let Some(value) = value {
            check_cell(column, value, NUMERIC_COLUMNS.contains(&column))?;
        }
    }
    check_outcome_and_accepted(input.outcome, input.accepted_results)?;
    // A flag given with an empty value says nothing: leave the flag out instead (notes may
    // be empty; an absent quality field is an empty cell by design).
    for (flag, value) in [
        ("--run-id", input.run_id),
        ("--quality-metric", input.quality_metric),
        ("--threshold", input.threshold),
        ("--observed", input.observed),
    ] {
        if value.is_some_and(|v| v.trim().is_empty()) {
            return Err(Error::usage(format!(
                "{flag} must not be empty (leave the flag out when there is nothing to record)"
            )));
        }
    }
    if let Some(date) = input.date_utc {
        check_date_utc(date)?;
        check_not_in_future(date, time::OffsetDateTime::now_utc())?;
    }
    Ok(())
}

/// The measurement's file name as it will stand in the grid; a name that is not UTF-8 is
/// refused (a lossy copy would name a file that does not exist).
fn measurement_file_name(m: &LoadedMeasurement) -> Result<String> {
    let name = m.path.file_name().ok_or_else(|| {
        Error::usage(format!(
            "{} has no file name; give the measurement file itself",
            m.path.display()
        ))
    })?;
    name.to_str().map(str::to_string).ok_or_else(|| {
        Error::usage(format!(
            "the measurement file name {} is not valid UTF-8; rename the file",
            crate::text::one_line(&name.to_string_lossy())
        ))
    })
}

/// Step 3: refuses a measurement already recorded and a `run_id` already used; returns the
/// run id to record (the given one, or the first free `run-N`).
fn choose_run_id(
    grid: &Path,
    state: &GridState,
    given: Option<&str>,
    measurement: Option<&LoadedMeasurement>,
) -> Result<String> {
    if let Some(m) = measurement {
        if let Some(line) = state.line_of_sha256(&m.sha256) {
            return Err(Error::usage(format!(
                "{} (sha256 {}) is already recorded on line {line} of {}; a run is recorded once",
                m.path.display(),
                m.sha256,
                grid.display()
            )));
        }
    }
    let run_id = given.map_or_else(|| state.free_run_id(), str::to_string);
    if let Some(line) = state.line_of_run_id(&run_id) {
        return Err(Error::usage(format!(
            "run_id '{}' is already used on line {line} of {}; give another --run-id",
            crate::text::excerpt(&run_id),
            grid.display()
        )));
    }
    Ok(run_id)
}

/// Step 4: the row as CSV bytes, ending with the grid's line ending. The row is encoded with
/// its header, read back, and every cell of what will be written goes through [`check_cell`]:
/// the guard sees exactly the bytes appended, whatever the source of each cell.
///
/// # Errors
/// [`Error::Usage`] for a cell the guard refuses; [`Error::Runtime`] if the encoding fails or
/// the row's columns are not the kit's header (a defect, guarded by a test).
pub fn encode_row(row: &GridRow, crlf: bool) -> Result<Vec<u8>> {
    let encode = |headers: bool| -> Result<Vec<u8>> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(headers)
            .terminator(if crlf {
                csv::Terminator::CRLF
            } else {
                csv::Terminator::Any(b'\n')
            })
            .from_writer(Vec::new());
        writer
            .serialize(row)
            .map_err(|e| Error::runtime(format!("cannot encode the row: {e}")))?;
        writer
            .into_inner()
            .map_err(|e| Error::runtime(format!("cannot encode the row: {e}")))
    };
    let with_header = encode(true)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(with_header.as_slice());
    let header = reader
        .headers()
        .map_err(|e| Error::runtime(format!("cannot read the encoded row back: {e}")))?
        .clone();
    if header.iter().ne(kit_header()) {
        return Err(Error::runtime(format!(
            "the row's columns {:?} are not the kit's header {:?}",
            header.iter().collect::<Vec<_>>(),
            kit_header()
        )));
    }
    let cells = reader
        .records()
        .next()
        .and_then(std::result::Result::ok)
        .ok_or_else(|| Error::runtime("cannot read the encoded row back"))?;
    for (column, value) in header.iter().zip(cells.iter()) {
        check_cell(column, value, NUMERIC_COLUMNS.contains(&column))?;
    }
    encode(false)
}

/// The grid file, open for appending and locked (step 2 of [`append_run`]).
struct LockedGrid {
    file: std::fs::File,
    /// The grid's bytes when it was locked.
    bytes: Vec<u8>,
}

impl LockedGrid {
    /// Opens `grid` (read + append), locks it exclusively and reads it.
    ///
    /// # Errors
    /// [`Error::Usage`] for a path that is not a regular file or a file over
    /// [`MAX_GRID_BYTES`]; [`Error::Runtime`] when it cannot be opened, locked or read.
    fn open(grid: &Path) -> Result<LockedGrid> {
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
        let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| Error::runtime(format!("cannot read {}: {e}", grid.display())))?;
        Ok(LockedGrid { file, bytes })
    }

    /// Step 5: appends `chunk` with one `write_all` on the `O_APPEND` descriptor, then
    /// `sync_all`; on failure cuts the file back to its length when locked, so the existing
    /// rows stay byte-identical.
    fn append(&mut self, grid: &Path, chunk: &[u8]) -> Result<()> {
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
struct GridState {
    /// Data rows, each with its 1-based line number.
    rows: Vec<(u64, csv::StringRecord)>,
    /// Lines in the file (header included).
    lines: u64,
    /// Whether the header line ends with CRLF (the new row follows suit).
    crlf: bool,
}

impl GridState {
    fn column(name: &str) -> usize {
        kit_header().iter().position(|h| *h == name).unwrap_or(0)
    }

    fn line_of_sha256(&self, sha256: &str) -> Option<u64> {
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
    fn free_run_id(&self) -> String {
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

    fn line_of_run_id(&self, run_id: &str) -> Option<u64> {
        let column = Self::column("run_id");
        self.rows
            .iter()
            .find(|(_, r)| r.get(column) == Some(run_id))
            .map(|(line, _)| *line)
    }
}

/// Checks that `bytes` are a results grid with exactly the kit's header and rows of the same
/// width.
fn check_grid(grid: &Path, bytes: &[u8]) -> Result<GridState> {
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
    let lines = text.lines().count() as u64;
    Ok(GridState { rows, lines, crlf })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_date_in_the_future_is_refused() {
        let now = time::macros::datetime!(2026-11-29 15:00:00 UTC);
        assert!(check_not_in_future("2026-11-29T15:00:00Z", now).is_ok());
        assert!(check_not_in_future("2026-11-29T16:00:00Z", now).is_ok()); // clock skew
        let e = check_not_in_future("2026-11-29T16:00:01Z", now).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("is in the future"), "{e}");
        assert!(check_not_in_future("2062-11-29T15:00:00Z", now).is_err());
    }

    fn row() -> GridRow {
        GridRow {
            run_id: "run-1".into(),
            date_utc: "2026-10-02T14:05:00Z".into(),
            measurement_file: Some("m.json".into()),
            measurement_sha256: Some("ab".repeat(32)),
            gpu: "b200".into(),
            days: 7,
            lots: 2,
            quality_metric: Some("accuracy".into()),
            threshold: Some(">=0.92".into()),
            observed: Some("-0.5".into()),
            accepted_results: Some(3),
            outcome: "completed".into(),
            notes: None,
        }
    }

    #[test]
    fn grid_row_fields_are_the_kit_header_in_order() {
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.serialize(row()).unwrap();
        let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
        let header = text.lines().next().unwrap();
        assert_eq!(header, KIT_GRID.lines().next().unwrap());
        assert_eq!(header.split(',').collect::<Vec<_>>(), kit_header());
        // The JSON of `lab record --json` follows the same order, values typed.
        let json = serde_json::to_string(&row()).unwrap();
        let keys: Vec<usize> = kit_header()
            .iter()
            .map(|k| json.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{json}");
        assert!(json.contains("\"days\":7,\"lots\":2"), "{json}");
        assert!(json.ends_with("\"notes\":null}"), "{json}");
    }

    #[test]
    fn encoded_row_is_one_line_with_empty_cells_for_absent_values() {
        let encoded = encode_row(&row(), false).unwrap();
        assert_eq!(
            String::from_utf8(encoded).unwrap(),
            format!(
                "run-1,2026-10-02T14:05:00Z,m.json,{},b200,7,2,accuracy,>=0.92,-0.5,3,completed,\n",
                "ab".repeat(32)
            )
        );
        assert!(encode_row(&row(), true).unwrap().ends_with(b",\r\n"));
    }

    /// Every column, whatever fills it, goes through the same guard on the encoded row.
    #[test]
    fn every_cell_goes_through_the_guard() {
        type Edit = fn(&mut GridRow, String);
        let columns: [(&str, Edit); 10] = [
            ("--run-id", |r, v| r.run_id = v),
            ("--date-utc", |r, v| r.date_utc = v),
            ("the measurement file name", |r, v| {
                r.measurement_file = Some(v)
            }),
            ("the measurement's SHA-256", |r, v| {
                r.measurement_sha256 = Some(v)
            }),
            ("--gpu", |r, v| r.gpu = v),
            ("--quality-metric", |r, v| r.quality_metric = Some(v)),
            ("--threshold", |r, v| r.threshold = Some(v)),
            ("--observed", |r, v| r.observed = Some(v)),
            ("--outcome", |r, v| r.outcome = v),
            ("--notes", |r, v| r.notes = Some(v)),
        ];
        let formulas = ["=HYPERLINK(1)", "@SUM(1)", "+cmd", "-x", "\tx", "\rx"];
        let hidden = [
            "a\nb",
            "a\r",
            "x\u{1b}[2J",
            "x\u{202e}y",
            "x\u{200b}",
            "x\u{2028}y",
            "\u{feff}x",
        ];
        for (source, edit) in columns {
            for bad in formulas.iter().chain(&hidden) {
                let mut r = row();
                edit(&mut r, bad.to_string());
                let e = encode_row(&r, false).expect_err(&format!("{source}: {bad:?} accepted"));
                assert_eq!(e.exit_code(), 2);
                assert!(e.to_string().starts_with(source), "{source} {bad:?}: {e}");
            }
            // Only the first character makes a formula; hidden characters count anywhere.
            for text in formulas {
                let mut r = row();
                edit(&mut r, format!("ok{text}"));
                assert_eq!(
                    encode_row(&r, false).is_ok(),
                    !text.starts_with(['\t', '\r']),
                    "{source} ok{text:?}"
                );
            }
        }
        let mut file = row();
        file.measurement_file = Some("=HYPERLINK(1).json".into());
        assert_eq!(
            encode_row(&file, false).unwrap_err().to_string(),
            "the measurement file name '=HYPERLINK(1).json' starts with '=', which a spreadsheet \
             would run as a formula; rename the file so that its name starts with a letter or a \
             digit"
        );
        file.measurement_file = Some("a\nb.json".into());
        assert_eq!(
            encode_row(&file, false).unwrap_err().to_string(),
            r"the measurement file name 'a\nb.json' holds the character \u{a}, which a grid cell must not; rename the file so that it is one line of visible text"
        );
        // Signed numbers only in the numeric columns; joiners are text.
        let mut ok = row();
        ok.threshold = Some("+3".into());
        ok.notes = Some("👩\u{200d}💻 run".into());
        assert!(encode_row(&ok, false).is_ok());
        ok.notes = Some("-0.5".into());
        assert!(encode_row(&ok, false).is_err());
    }

    #[test]
    fn kit_header_is_the_grid_header() {
        let header = kit_header();
        assert_eq!(header.first(), Some(&"run_id"));
        assert!(header.contains(&"measurement_sha256"));
        assert!(header.contains(&"accepted_results"));
        assert_eq!(header.len(), 13);
    }

    #[test]
    fn dates() {
        assert!(check_date_utc("2026-10-02T14:05:00Z").is_ok());
        for bad in [
            "2026-10-02 14:05:00Z",
            "2026-13-02T14:05:00Z",
            "2026-10-02T24:05:00Z",
            "2026-10-02T14:05:00",
            "2026-10-02T14:05:00+00:00",
            "",
            "２026-10-02T14:05:00Z",
            "2026-02-30T00:00:00Z",
            "2026-04-31T10:00:00Z",
            "2025-02-29T10:00:00Z",
            "2026-10-02T14:05:00z",
            "2026-10-02t14:05:00Z",
        ] {
            assert!(check_date_utc(bad).is_err(), "{bad}");
        }
        assert!(check_date_utc("2028-02-29T23:59:59Z").is_ok());
        // Leap seconds: all refused, the real one of 2016 too, and said so.
        for leap in [
            "2026-12-31T23:59:60Z",
            "2016-12-31T23:59:60Z",
            "2026-06-30T23:59:60Z",
            "2026-10-02T14:05:60Z",
        ] {
            let e = check_date_utc(leap).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{leap}");
            assert_eq!(
                e.to_string(),
                format!(
                    "--date-utc must be a real UTC time written like 2026-10-02T14:05:00Z, got \
                     '{leap}' (second 60: leap seconds are refused, lab cannot tell which ones \
                     happened; write :59)"
                )
            );
        }
        assert!(check_date_utc("2026-12-31T23:59:59Z").is_ok());
        assert!(check_date_utc("2026-12-31T23:59:61Z").is_err());
        let e = check_date_utc("2026-02-30T00:00:00Z").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("not a date on the calendar"), "{e}");
    }

    #[test]
    fn formulas_are_refused_numbers_are_not() {
        for (value, numeric) in [
            ("=1+1", false),
            ("+33", false),
            ("-x", false),
            ("@SUM(A1)", false),
            ("\tx", false),
            ("\rx", false),
            ("=0.9", true),
            ("-1+2", true),
            ("+", true),
            ("-.", true),
            ("--1", true),
            ("-1e5", false),
            ("-inf", true),
            ("-infinity", true),
            ("+NaN", true),
            ("-1e999", true),
            ("-1e", true),
            ("-e5", true),
            ("-1e5x", true),
            ("- 1", true),
            ("-1 ", true),
            ("-0x10", true),
            ("-1,5", true),
            ("+1e5+1", true),
        ] {
            let e = check_formula("--notes", value, numeric).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{value}");
            assert!(e.to_string().contains("formula"), "{value}: {e}");
        }
        for (value, numeric) in [
            ("", false),
            ("accuracy", false),
            ("run 2 = run 1 again", false),
            (">=0.92", true),
            ("<= -0.1", true),
            ("-0.5", true),
            ("+3", true),
            ("-.5", true),
            ("7.", true),
            ("-1e5", true),
            ("+1E5", true),
            ("-2.5e-3", true),
            ("+2.5E+3", true),
            ("-0", true),
            ("1e5", false),
        ] {
            assert!(check_formula("--x", value, numeric).is_ok(), "{value}");
        }
        let e = check_formula("--observed", "-x", true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--observed starts with '-', which a spreadsheet would run as a formula; reword it so \
             it starts with a letter, a digit or a comparison sign (e.g. >=0.92); a signed number on \
             its own, such as -0.5, +3 or -1e5, is accepted as it is"
        );
        let e = check_formula("--notes", "-1e5", false).unwrap_err();
        assert!(!e.to_string().contains("signed number"), "{e}");
    }

    #[test]
    fn only_completed_runs_accept_results() {
        for outcome in OUTCOMES {
            assert!(check_outcome_and_accepted(outcome, None).is_ok());
            assert!(check_outcome_and_accepted(outcome, Some(0)).is_ok());
        }
        assert!(check_outcome_and_accepted("completed", Some(50)).is_ok());
        for outcome in ["failed", "interrupted", "rejected"] {
            let e = check_outcome_and_accepted(outcome, Some(50)).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(outcome), "{e}");
        }
    }

    #[test]
    fn grid_checks() {
        let p = Path::new("g.csv");
        let ok = check_grid(p, KIT_GRID.as_bytes()).unwrap();
        assert!(ok.rows.is_empty());
        assert_eq!(ok.lines, 1);
        assert!(!ok.crlf);
        let crlf = KIT_GRID.replace('\n', "\r\n");
        assert!(check_grid(p, crlf.as_bytes()).unwrap().crlf);
        let bom = format!("\u{feff}{KIT_GRID}");
        assert!(check_grid(p, bom.as_bytes()).is_ok());
        let renamed = KIT_GRID.replace("observed", "obs");
        assert!(check_grid(p, renamed.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("header"));
        let short = format!("{KIT_GRID}a,b\n");
        assert!(check_grid(p, short.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("line 2 has 2 fields"));
        assert!(check_grid(p, b"").is_err());
        assert!(check_grid(p, b"\xff\xfe").is_err());
    }
}
