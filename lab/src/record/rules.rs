//! The rules every row of the results grid obeys, one per column and a few across columns
//! (docs/PROTOCOL.md §6): the same check before `lab record` appends a row and when
//! `lab results` reads the grid back, so that what one writes the other reads.
//!
//! Bounds (each refusal says the bound it broke):
//! - `run_id`: 1 to [`MAX_RUN_ID_CHARS`] characters;
//! - `date_utc`: `YYYY-MM-DDTHH:MM:SSZ`, from [`EARLIEST_RUN_DATE`] to one hour after this
//!   machine's clock ([`super::FUTURE_TOLERANCE`]);
//! - `measurement_file` and `measurement_sha256`: both or neither; a file name (no `/`) and 64
//!   lowercase hexadecimal digits;
//! - `gpu`, `days`, `lots`: a package of the catalog (1 lot at least) whose price is at most
//!   [`MAX_PACKAGE_CENTS`] (10,000,000,000.00 USD);
//! - `accepted_results`: at most [`MAX_ACCEPTED_RESULTS`] (10^12);
//! - `quality_metric`, `notes`: at most [`MAX_TEXT_CHARS`] characters;
//! - `threshold`: a direction and a number, `>=0.92` (`>=`, `>`, `<=`, `<`, `≥` or `≤`, spaces
//!   allowed around the number), at most [`MAX_NUMBER_CHARS`] characters;
//! - `observed`: a number (`0.95`, `-1e5`), at most [`MAX_NUMBER_CHARS`] characters;
//! - `outcome`: one of [`super::OUTCOMES`];
//! - the measurement's GPU (the document's `device_name`) is the package's
//!   ([`crate::gpu_name::device_is_model`]),
//!   checked by `lab record`, which has the document; a mismatch is recorded only with
//!   `--measured-on-other-gpu`, as [`mismatch_note`] at the start of `notes`;
//! - across rows: no `run_id` and no `measurement_sha256` twice ([`check_unique`]);
//! - across columns: accepted results only on a `completed` run; a run whose observed value
//!   does not meet its own threshold has no accepted result and is not `completed` (the
//!   protocol's `rejected` is exactly "completed but below the threshold"), and a run that
//!   meets it is not `rejected`.
//!
//! Every cell also goes through [`super::check_cell`] (one line of visible text that a
//! spreadsheet will not run as a formula).
//!
//! **Why the totals of any grid fit.** A row holds at least [`MIN_ROW_BYTES`] bytes (its
//! `date_utc` is exactly 20, its 13 cells are separated by 12 commas) and a grid at most
//! [`super::MAX_GRID_BYTES`] (64 MiB, the most `lab record` and `lab results` read), so a grid
//! has at most [`MAX_GRID_ROWS`] = 2^21 rows. Each row adds at most [`MAX_ACCEPTED_RESULTS`]
//! accepted results and, per purchase, at most [`MAX_PACKAGE_CENTS`] cents; 2^21 x 10^12 is
//! about 2.1 x 10^18, below both `u64::MAX` (1.8 x 10^19, the accepted total) and `i64::MAX`
//! (9.2 x 10^18, the cents spent). The compiler checks both products (`const` asserts below),
//! so `lab results` can total every grid whose rows pass [`check_row`].

use super::{check_cell, check_date_utc, GridRow, OUTCOMES};
use crate::catalog::Catalog;
use crate::{Error, Result};
use rust_decimal::Decimal;
use std::str::FromStr;

/// Longest `run_id`, in characters (a UUID takes 36; a date and a letter 12).
pub const MAX_RUN_ID_CHARS: usize = 128;
/// Longest `quality_metric` or `notes`, in characters.
pub const MAX_TEXT_CHARS: usize = 2000;
/// Longest `threshold` or `observed`, in characters.
pub const MAX_NUMBER_CHARS: usize = 64;
/// Earliest `date_utc` accepted: the start of 2026, the year of the kit's first release (its
/// catalog snapshot is of 2026-09-24). The grid records the runs of a trial made with the kit,
/// whose protocol is fixed before the first run, so no run ends earlier; year 1 or 1969 (the
/// Unix epoch's eve) is a typing or clock error.
pub const EARLIEST_RUN_DATE: &str = "2026-01-01T00:00:00Z";
/// Most accepted results one row may record: 10^12, a million a second for eleven and a half days, far
/// beyond what one package can accept of distinct useful units, and small enough that the
/// sum over the most rows a grid can hold fits 64 bits (module documentation).
pub const MAX_ACCEPTED_RESULTS: u64 = 1_000_000_000_000;
/// Most one row's package (lot price x lots, from the catalog) may cost, in cents: 10^12 cents,
/// 10,000,000,000.00 USD; bounds the lots of a row by its catalog price.
pub const MAX_PACKAGE_CENTS: i64 = 1_000_000_000_000;
/// Fewest bytes a data row of the grid takes: `date_utc` (20) and 12 commas.
pub const MIN_ROW_BYTES: u64 = 32;
/// Most data rows a grid of [`super::MAX_GRID_BYTES`] can hold: 2^21.
pub const MAX_GRID_ROWS: u64 = super::MAX_GRID_BYTES / MIN_ROW_BYTES;
const _: () = assert!(
    (MAX_GRID_ROWS as u128) * (MAX_ACCEPTED_RESULTS as u128) <= u64::MAX as u128,
    "the accepted total of a full grid must fit u64"
);
const _: () = assert!(
    (MAX_GRID_ROWS as u128) * (MAX_PACKAGE_CENTS as u128) <= i64::MAX as u128,
    "the cents spent on a full grid must fit i64"
);

/// The bounds of a row's amounts: its package's price (`total_cents`, from the catalog) at
/// most [`MAX_PACKAGE_CENTS`] and its accepted results at most [`MAX_ACCEPTED_RESULTS`]. Both
/// `lab record` (before it reads any file) and [`check_row`] apply them.
///
/// # Errors
/// [`Error::Usage`] naming the field and the bound.
pub fn check_amounts(
    gpu: &str,
    days: u32,
    lots: u64,
    total_cents: i64,
    accepted_results: Option<u64>,
) -> Result<()> {
    if total_cents > MAX_PACKAGE_CENTS {
        return Err(Error::usage(format!(
            "lots (--lots) is {lots}: the package {gpu} x {lots} lot(s), {days} days costs {} \
             USD, more than the {} USD one row's package may cost (the bound keeps the totals \
             of every grid exact in 64-bit integers); give the lots the package really had",
            crate::pricing::cents_to_usd(total_cents),
            crate::pricing::cents_to_usd(MAX_PACKAGE_CENTS)
        )));
    }
    if let Some(k) = accepted_results.filter(|k| *k > MAX_ACCEPTED_RESULTS) {
        return Err(Error::usage(format!(
            "accepted_results (--accepted-results) is {k}, more than {MAX_ACCEPTED_RESULTS}, \
             the most one run may record (the bound keeps the totals of every grid exact in \
             64-bit integers); give the run's count of distinct accepted units"
        )));
    }
    Ok(())
}

/// A threshold's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `>=` or `≥`.
    AtLeast,
    /// `>`.
    Above,
    /// `<=` or `≤`.
    AtMost,
    /// `<`.
    Below,
}

/// A parsed threshold: direction and exact value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    /// Which side passes.
    pub direction: Direction,
    /// The bound, exact.
    pub value: Decimal,
}

impl Threshold {
    /// Whether `observed` meets the threshold, compared exactly.
    pub fn is_met_by(&self, observed: Decimal) -> bool {
        match self.direction {
            Direction::AtLeast => observed >= self.value,
            Direction::Above => observed > self.value,
            Direction::AtMost => observed <= self.value,
            Direction::Below => observed < self.value,
        }
    }
}

/// An exact number: plain decimal (`0.95`, `-3`, `.5`) or scientific (`-1e5`, `2.5E-3`),
/// optionally signed, no spaces; `None` when it is not one or does not fit a 96-bit decimal.
pub fn parse_number(text: &str) -> Option<Decimal> {
    let shape = !text.is_empty()
        && text
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E'))
        && text.bytes().any(|c| c.is_ascii_digit());
    if !shape {
        return None;
    }
    let unsigned = text.strip_prefix('+').unwrap_or(text);
    if unsigned.contains(['e', 'E']) {
        Decimal::from_scientific(unsigned).ok()
    } else {
        Decimal::from_str(unsigned).ok()
    }
}

/// A whole-number cell (`lots`, `days`, `accepted_results`) as `lab record` writes it: ASCII
/// digits only, at least one, up to `u64::MAX` (leading zeros carry no value); `None` for
/// anything else. The grammar of [`crate::values::count`] for command-line values, repeated
/// here because the grid's reader sits on a lower floor than the flag grammar
/// (`docs/ARCHITECTURE.md`).
pub fn parse_count(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Parses a threshold such as `>=0.92`, `> 0`, `≤ 1e-3`.
pub fn parse_threshold(text: &str) -> Option<Threshold> {
    let text = text.trim();
    let (direction, rest) = [
        (">=", Direction::AtLeast),
        ("≥", Direction::AtLeast),
        ("<=", Direction::AtMost),
        ("≤", Direction::AtMost),
        (">", Direction::Above),
        ("<", Direction::Below),
    ]
    .iter()
    .find_map(|(op, d)| text.strip_prefix(op).map(|rest| (*d, rest)))?;
    Some(Threshold {
        direction,
        value: parse_number(rest.trim())?,
    })
}

/// The rule across rows: a run is recorded once, so no two rows share a `run_id` (compared
/// as written) or a `measurement_sha256` (compared without case). `rows` are each row's line,
/// run id and digest, in file order.
///
/// # Errors
/// [`Error::Usage`] naming the later line, the value and the earlier line.
pub fn check_unique<'a>(
    rows: impl IntoIterator<Item = (u64, &'a str, Option<&'a str>)>,
) -> Result<()> {
    let mut ids: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    let mut digests: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for (line, run_id, sha256) in rows {
        if let Some(first) = ids.insert(run_id, line) {
            return Err(Error::usage(format!(
                "line {line}: run_id '{}' is already used on line {first}; a run is recorded once",
                crate::text::excerpt(run_id)
            )));
        }
        if let Some(d) = sha256.map(str::trim).filter(|d| !d.is_empty()) {
            if let Some(first) = digests.insert(d.to_ascii_lowercase(), line) {
                return Err(Error::usage(format!(
                    "line {line}: measurement_sha256 {} is already recorded on line {first}; a run is recorded once",
                    crate::text::excerpt(d)
                )));
            }
        }
    }
    Ok(())
}

/// Checks one row against every rule of the module documentation. `now` is the clock the
/// future bound is measured from.
///
/// # Errors
/// [`Error::Usage`] naming the column (as the flag of `lab record` that sets it), the value
/// and the rule or bound it breaks.
pub fn check_row(row: &GridRow, catalog: &Catalog, now: time::OffsetDateTime) -> Result<()> {
    let chars = |flag: &str, value: &str, max: usize| -> Result<()> {
        let n = value.chars().count();
        if n > max {
            return Err(Error::usage(format!(
                "{flag} holds {n} characters, more than the {max} a grid cell may hold"
            )));
        }
        Ok(())
    };
    // Every cell: one line of visible text, no formula.
    for (column, value, numeric) in [
        ("run_id", Some(row.run_id.as_str()), false),
        ("date_utc", Some(row.date_utc.as_str()), false),
        ("measurement_file", row.measurement_file.as_deref(), false),
        (
            "measurement_sha256",
            row.measurement_sha256.as_deref(),
            false,
        ),
        ("gpu", Some(row.gpu.as_str()), false),
        ("quality_metric", row.quality_metric.as_deref(), false),
        ("threshold", row.threshold.as_deref(), true),
        ("observed", row.observed.as_deref(), true),
        ("outcome", Some(row.outcome.as_str()), false),
        ("notes", row.notes.as_deref(), false),
    ] {
        if let Some(value) = value {
            check_cell(column, value, numeric)?;
        }
    }
    if row.run_id.trim().is_empty() {
        return Err(Error::usage("--run-id must not be empty"));
    }
    chars("--run-id", &row.run_id, MAX_RUN_ID_CHARS)?;
    check_date_bounds(&row.date_utc, now)?;
    match (&row.measurement_file, &row.measurement_sha256) {
        (None, None) => {}
        (Some(name), Some(hash)) => {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(Error::usage(format!(
                    "measurement_file '{}' is not a file name (the last component of a path)",
                    crate::text::one_line(name)
                )));
            }
            if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(Error::usage(format!(
                    "measurement_sha256 '{}' is not 64 lowercase hexadecimal digits",
                    crate::text::excerpt(hash)
                )));
            }
        }
        _ => {
            return Err(Error::usage(
                "measurement_file and measurement_sha256 go together: give both or neither",
            ))
        }
    }
    let quote = crate::pricing::quote(catalog, &row.gpu, row.days, row.lots, None)?;
    check_amounts(
        &row.gpu,
        row.days,
        row.lots,
        quote.total_cents,
        row.accepted_results,
    )?;
    for (flag, value) in [
        ("--quality-metric", &row.quality_metric),
        ("--notes", &row.notes),
    ] {
        if let Some(value) = value {
            chars(flag, value, MAX_TEXT_CHARS)?;
        }
    }
    let threshold = match &row.threshold {
        None => None,
        Some(text) => {
            chars("--threshold", text, MAX_NUMBER_CHARS)?;
            Some(parse_threshold(text).ok_or_else(|| {
                Error::usage(format!(
                    "--threshold '{}' is not a direction and a number; write it like >=0.92 \
                     (>=, >, <=, <, ≥ or ≤, then the value)",
                    crate::text::excerpt(text)
                ))
            })?)
        }
    };
    let observed = match &row.observed {
        None => None,
        Some(text) => {
            chars("--observed", text, MAX_NUMBER_CHARS)?;
            Some(parse_number(text.trim()).ok_or_else(|| {
                Error::usage(format!(
                    "--observed '{}' is not a number; give the value the run obtained, like 0.95",
                    crate::text::excerpt(text)
                ))
            })?)
        }
    };
    if !OUTCOMES.contains(&row.outcome.as_str()) {
        return Err(Error::usage(format!(
            "--outcome must be one of {}, got '{}'",
            OUTCOMES.join(", "),
            crate::text::excerpt(&row.outcome)
        )));
    }
    super::check_outcome_and_accepted(&row.outcome, row.accepted_results)?;
    if let (Some(t), Some(o), Some(t_text), Some(o_text)) =
        (threshold, observed, &row.threshold, &row.observed)
    {
        let met = t.is_met_by(o);
        let accepted = row.accepted_results.unwrap_or(0);
        if !met && (accepted > 0 || row.outcome == "completed") {
            return Err(Error::usage(format!(
                "--observed {o_text} does not meet --threshold {t_text}: a run below its own \
                 threshold has no accepted result; record it with --outcome rejected and \
                 --accepted-results 0"
            )));
        }
        if met && row.outcome == "rejected" {
            return Err(Error::usage(format!(
                "--observed {o_text} meets --threshold {t_text}, but --outcome rejected means \
                 below the threshold; give --outcome completed (or failed, interrupted)"
            )));
        }
    }
    Ok(())
}

/// Checks that `date` is a real UTC time (`check_date_utc`) from [`EARLIEST_RUN_DATE`] to
/// one hour after `now`.
///
/// # Errors
/// [`Error::Usage`] saying the bound.
pub fn check_date_bounds(date: &str, now: time::OffsetDateTime) -> Result<()> {
    check_date_utc(date)?;
    // Both are `YYYY-MM-DDTHH:MM:SSZ`, so text order is time order.
    if date < EARLIEST_RUN_DATE {
        return Err(Error::usage(format!(
            "--date-utc '{date}' is before {EARLIEST_RUN_DATE}, the earliest date a run of the \
             kit can have ended (its first release is of 2026); check the year"
        )));
    }
    super::check_not_in_future(date, now)
}

/// The note that starts a row's `notes` when its measurement was taken on another GPU than
/// its package's (`lab record --measured-on-other-gpu`), e.g. `measured on NVIDIA H200, not
/// on the package's GPU b200 (NVIDIA B200 180 GB)`.
pub fn mismatch_note(device_name: &str, gpu: &str, model: &str) -> String {
    format!("measured on {device_name}, not on the package's GPU {gpu} ({model})")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole-number cells take what `lab record` writes and the flag grammar accepts: digits
    /// only, leading zeros, up to u64::MAX; no sign, space, point, exponent or separator.
    #[test]
    fn count_cells_are_digits_only() {
        for (text, value) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("007", Some(7)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("", None),
            ("+1", None),
            ("-1", None),
            (" 1", None),
            ("1.0", None),
            ("1e3", None),
            ("1_000", None),
            ("1,000", None),
            ("\u{0661}", None),
        ] {
            assert_eq!(parse_count(text), value, "{text:?}");
            // The same verdict as the command-line grammar.
            assert_eq!(crate::values::count(text).ok(), value, "{text:?}");
        }
    }

    fn good() -> GridRow {
        GridRow {
            run_id: "2026-11-29-a".into(),
            date_utc: "2026-11-29T15:41:00Z".into(),
            measurement_file: Some("m.json".into()),
            measurement_sha256: Some("ab".repeat(32)),
            gpu: "h200".into(),
            days: 7,
            lots: 1,
            quality_metric: Some("exact match".into()),
            threshold: Some(">=0.92".into()),
            observed: Some("0.95".into()),
            accepted_results: Some(120),
            outcome: "completed".into(),
            notes: None,
        }
    }

    fn now() -> time::OffsetDateTime {
        time::macros::datetime!(2026-12-01 20:00 UTC)
    }

    fn refusal(row: &GridRow) -> String {
        let catalog = Catalog::embedded().unwrap();
        check_row(row, &catalog, now()).unwrap_err().to_string()
    }

    #[test]
    fn a_good_row_passes() {
        let catalog = Catalog::embedded().unwrap();
        check_row(&good(), &catalog, now()).unwrap();
    }

    /// One bad value per column, each refused naming its column; a class per column, not one
    /// example: wrong shape, out of bounds, hidden characters, formulas.
    #[test]
    fn every_column_has_its_rule() {
        type Edit = fn(&mut GridRow);
        let cases: Vec<(Edit, &str)> = vec![
            (|r| r.run_id = String::new(), "--run-id"),
            (
                |r| r.run_id = "x".repeat(100_000),
                "--run-id holds 100000 characters, more than the 128",
            ),
            (|r| r.run_id = "=1+1".into(), "--run-id"),
            (|r| r.run_id = "a\u{202e}b".into(), "--run-id"),
            (
                |r| r.date_utc = "0001-01-01T00:00:00Z".into(),
                "before 2026-01-01T00:00:00Z",
            ),
            (
                |r| r.date_utc = "1969-12-31T23:59:59Z".into(),
                "before 2026-01-01T00:00:00Z",
            ),
            (
                |r| r.date_utc = "2025-12-31T23:59:59Z".into(),
                "before 2026-01-01T00:00:00Z",
            ),
            (
                |r| r.date_utc = "2027-01-01T00:00:00Z".into(),
                "in the future",
            ),
            (
                |r| r.date_utc = "2026-02-30T00:00:00Z".into(),
                "not a date on the calendar",
            ),
            (|r| r.measurement_sha256 = None, "go together"),
            (|r| r.measurement_file = None, "go together"),
            (
                |r| r.measurement_sha256 = Some("AB".repeat(32)),
                "lowercase hexadecimal",
            ),
            (
                |r| r.measurement_sha256 = Some("ab".repeat(31)),
                "lowercase hexadecimal",
            ),
            (
                |r| r.measurement_file = Some("a/b.json".into()),
                "not a file name",
            ),
            (|r| r.gpu = "x100".into(), "unknown GPU"),
            (|r| r.days = 5, "5"),
            (|r| r.lots = 0, "at least 1"),
            (
                |r| r.quality_metric = Some("m".repeat(2001)),
                "--quality-metric holds 2001",
            ),
            (|r| r.notes = Some("n".repeat(2001)), "--notes holds 2001"),
            (|r| r.notes = Some("a\nb".into()), "--notes"),
            (
                |r| r.threshold = Some("0.92".into()),
                "not a direction and a number",
            ),
            (
                |r| r.threshold = Some("about 0.9".into()),
                "not a direction and a number",
            ),
            (
                |r| r.threshold = Some(">=".into()),
                "not a direction and a number",
            ),
            (
                |r| r.threshold = Some(">=1e999".into()),
                "not a direction and a number",
            ),
            (
                |r| r.threshold = Some(format!(">={}", "9".repeat(70))),
                "--threshold holds 72",
            ),
            (|r| r.observed = Some("high".into()), "not a number"),
            (|r| r.observed = Some("nan".into()), "not a number"),
            (|r| r.observed = Some("0.9.5".into()), "not a number"),
            (|r| r.outcome = "done".into(), "--outcome must be one of"),
            (
                |r| {
                    r.outcome = "failed".into();
                },
                "contradicts --outcome failed",
            ),
        ];
        for (edit, needle) in cases {
            let mut row = good();
            edit(&mut row);
            let e = refusal(&row);
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    /// Below its own threshold, in every direction, a run has no accepted result and is not
    /// completed; meeting it, it is not rejected. Values compare exactly (0.92 meets >=0.92).
    #[test]
    fn a_run_below_its_threshold_accepts_nothing() {
        let catalog = Catalog::embedded().unwrap();
        let with = |threshold: &str, observed: &str, outcome: &str, accepted: u64| {
            let mut row = good();
            row.threshold = Some(threshold.into());
            row.observed = Some(observed.into());
            row.outcome = outcome.into();
            row.accepted_results = Some(accepted);
            check_row(&row, &catalog, now())
        };
        for (threshold, below, meets) in [
            (">=0.92", "0.10", "0.92"),
            ("≥ 0.92", "0.9199999999", "1"),
            (">0", "0", "1e-9"),
            ("<=1e-3", "0.0011", "0.001"),
            ("≤ 5", "5.0000001", "-5"),
            ("<-2.5", "-2.5", "-2.6"),
        ] {
            let e = with(threshold, below, "completed", 500)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("a run below its own threshold has no accepted result"),
                "{e}"
            );
            assert!(
                with(threshold, below, "completed", 0).is_err(),
                "{threshold} {below}"
            );
            with(threshold, below, "rejected", 0).unwrap();
            with(threshold, meets, "completed", 500).unwrap();
            assert!(
                with(threshold, meets, "rejected", 0).is_err(),
                "{threshold} {meets}"
            );
        }
    }
}
