//! The guard every cell of a new row goes through: one line of visible text that a
//! spreadsheet will not run as a formula, a real UTC date, a known outcome; and the row's
//! encoding, checked cell by cell.

use super::{kit_header, GridRow};
use crate::{Error, Result};

/// Columns whose cells may hold a signed number (`-0.5`, `+3`, `-1e5`) although it starts like
/// a formula (see [`check_formula`]).
pub(super) const NUMERIC_COLUMNS: [&str; 2] = ["threshold", "observed"];

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
            "--date-utc must be a real UTC time written like 2026-10-02T14:05:00Z, got '{text}' ({why})"
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
        .map_err(|e| Error::usage(format!("--date-utc '{text}' is not a date: {e}")))?;
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
