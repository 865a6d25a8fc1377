//! `lab report --json`: the [`Report`] in the layout of [`crate::stdout::json`], with the rows
//! written by hand.
//!
//! A report of 100,000 repetitions has 1.7 million row fields; through serde each field is a
//! dozen formatter calls and small writes, which made the output the larger half of the
//! command's time. Here each row is formatted into one reused buffer from fixed pieces (the
//! keys with their indentation) and the numbers, then written at once. Everything else of the
//! report (`files`, `prediction_note`) still goes through serde at its depth
//! ([`crate::stdout::json_at`]). The bytes are those of serde's output of [`Report`] (its
//! `Serialize` impls stay the definition of the shape): `report::tests` compares the two over
//! reports of every row class.

use super::{Report, ReportFile, ReportRow};
use crate::document::{LoadedMeasurement, Phase};
use std::io::Write;

/// Writes `report` as [`crate::stdout::json`] writes it (pretty, two-space indent, floats as
/// decimal strings), without the final newline.
///
/// # Errors
/// A failed write.
pub fn write_json<W: Write>(out: &mut W, report: &Report) -> std::io::Result<()> {
    let tables = report
        .phases
        .iter()
        .map(|table| (table.phase, table.rows.iter().cloned()));
    write_parts(out, &report.files, tables, report.prediction_note)
}

/// Writes the report of `measurements` as [`write_json`] writes [`build_report`]'s, each row
/// computed as it is written (the tables are never held: 100,000 rows are 17 MB).
///
/// # Errors
/// A failed write.
pub fn write_json_of<W: Write>(
    out: &mut W,
    measurements: &[LoadedMeasurement],
) -> std::io::Result<()> {
    let tables = Phase::ALL
        .iter()
        .map(|&phase| (phase, super::report_rows(measurements, phase)));
    write_parts(
        out,
        &super::report_files(measurements),
        tables,
        super::PREDICTION_NOTE,
    )
}

/// The report's object from its parts: `files`, then each phase's table, then the note.
fn write_parts<W, T, R>(
    out: &mut W,
    files: &[ReportFile],
    tables: T,
    prediction_note: &str,
) -> std::io::Result<()>
where
    W: Write,
    T: Iterator<Item = (Phase, R)>,
    R: Iterator<Item = ReportRow>,
{
    out.write_all(b"{\n  \"files\": ")?;
    crate::stdout::json_at(out, files, 1)?;
    out.write_all(b",\n  \"phases\": [")?;
    let mut row_text = Vec::with_capacity(1024);
    let mut any_table = false;
    for (phase, rows) in tables {
        out.write_all(if any_table { b",\n    {" } else { b"\n    {" })?;
        any_table = true;
        out.write_all(b"\n      \"phase\": \"")?;
        out.write_all(phase.as_str().as_bytes())?;
        out.write_all(b"\",\n      \"rows\": [")?;
        let mut any_row = false;
        for row in rows {
            row_text.clear();
            if any_row {
                row_text.push(b',');
            }
            any_row = true;
            push_row(&mut row_text, &row);
            out.write_all(&row_text)?;
        }
        out.write_all(if any_row { b"\n      ]" } else { b"]" })?;
        out.write_all(b"\n    }")?;
    }
    out.write_all(if any_table { b"\n  ]" } else { b"]" })?;
    out.write_all(b",\n  \"prediction_note\": ")?;
    crate::stdout::json_at(out, prediction_note, 1)?;
    out.write_all(b"\n}")
}

/// The indentation of a row's keys (depth 5: the report, `phases`, a table, `rows`, the row).
macro_rules! key {
    ($name:literal) => {
        concat!("\n          \"", $name, "\": ").as_bytes()
    };
}

/// Appends one row object at depth 4, keys in the order of `ReportRow`'s `Serialize`.
fn push_row(out: &mut Vec<u8>, row: &ReportRow) {
    let m = &row.measured;
    let c = &m.counters;
    out.extend_from_slice(b"\n        {");
    // The first key has no comma before it; every later one does.
    out.extend_from_slice(key!("file_index"));
    push_u128(out, row.file_index as u128);
    out.push(b',');
    out.extend_from_slice(key!("phase"));
    out.push(b'"');
    out.extend_from_slice(m.phase.as_str().as_bytes());
    out.push(b'"');
    out.push(b',');
    out.extend_from_slice(key!("repetition"));
    match m.repetition {
        Some(r) => push_u128(out, u128::from(r)),
        None => out.extend_from_slice(b"null"),
    }
    out.push(b',');
    out.extend_from_slice(key!("forward_passes"));
    push_u128(out, u128::from(m.forward_passes));
    out.push(b',');
    out.extend_from_slice(key!("wall_seconds"));
    crate::stdout::push_json_f64(out, m.wall_seconds);
    out.push(b',');
    out.extend_from_slice(key!("gpu_seconds"));
    match m.gpu_seconds {
        Some(g) => crate::stdout::push_json_f64(out, g),
        None => out.extend_from_slice(b"null"),
    }
    for (name, value) in [
        (key!("baseline_allocated_bytes"), c.baseline_allocated_bytes),
        (key!("baseline_reserved_bytes"), c.baseline_reserved_bytes),
        (key!("end_allocated_bytes"), c.end_allocated_bytes),
        (key!("end_reserved_bytes"), c.end_reserved_bytes),
        (key!("peak_allocated_bytes"), c.peak_allocated_bytes),
        (key!("peak_reserved_bytes"), c.peak_reserved_bytes),
        (
            key!("predicted_end_allocated_bytes"),
            row.predicted_end_allocated_bytes,
        ),
        (
            key!("predicted_peak_allocated_bytes"),
            row.predicted_peak_allocated_bytes,
        ),
    ] {
        out.push(b',');
        out.extend_from_slice(name);
        push_u128(out, u128::from(value));
    }
    out.push(b',');
    out.extend_from_slice(key!("peak_allocated_minus_predicted_bytes"));
    let difference = row.peak_allocated_minus_predicted_bytes;
    if difference < 0 {
        out.push(b'-');
    }
    push_u128(out, difference.unsigned_abs());
    out.push(b',');
    out.extend_from_slice(key!("achieved_flops_per_second"));
    match row.achieved_flops_per_second {
        Some(flops) => {
            out.push(b'"');
            // A decimal's digits, a sign and a point: nothing JSON escapes.
            let _ = write!(out, "{flops}");
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b"\n        }");
}

/// Appends the decimal digits of `value`.
fn push_u128(out: &mut Vec<u8>, mut value: u128) {
    let mut digits = [0u8; 39];
    let mut at = digits.len();
    // Below 2^64 (every value but an extreme difference) in u64 arithmetic, which is faster.
    if let Ok(mut small) = u64::try_from(value) {
        loop {
            at -= 1;
            digits[at] = b'0' + (small % 10) as u8;
            small /= 10;
            if small == 0 {
                break;
            }
        }
    } else {
        loop {
            at -= 1;
            digits[at] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
    }
    out.extend_from_slice(&digits[at..]);
}
