//! The steps of appending one run: check the input, read the locked grid, choose the run id,
//! encode the row and append it.

use super::cells::{check_cell, check_outcome_and_accepted, encode_row, NUMERIC_COLUMNS};
use super::grid::{check_grid, GridState, LockedGrid};
use super::{Appended, GridRow, RunInput, MAX_GRID_BYTES, OUTCOMES};
use crate::catalog::Catalog;
use crate::document::{read as read_measurement, LoadedMeasurement};
use crate::{Error, Result};
use std::path::Path;

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
    let notes = notes_with_gpu(catalog, input, measurement.as_ref())?;
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
        notes,
    };
    // Every rule of a grid row, as `lab results` will check it when it reads the grid back.
    super::rules::check_row(&row, catalog, time::OffsetDateTime::now_utc())?;
    let mut chunk = Vec::new();
    if !file.bytes.is_empty() && !file.bytes.ends_with(b"\n") {
        chunk.extend_from_slice(if state.crlf { b"\r\n" } else { b"\n" });
    }
    chunk.extend(encode_row(&row, state.crlf)?);
    // A grid past the bound could not be read back by `lab results` (or by the next append).
    let after = file.bytes.len() as u64 + chunk.len() as u64;
    if after > MAX_GRID_BYTES {
        return Err(Error::usage(format!(
            "{}: appending this row would make the grid {after} bytes, more than the \
             {MAX_GRID_BYTES} lab reads back; start a new grid from the kit's \
             resultats-bruts.csv",
            grid.display()
        )));
    }
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
    let quote = crate::pricing::quote(catalog, input.gpu, input.days, input.lots, None)?;
    super::rules::check_amounts(
        input.gpu,
        input.days,
        input.lots,
        quote.total_cents,
        input.accepted_results,
    )?;
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
        super::rules::check_date_bounds(date, time::OffsetDateTime::now_utc())?;
    }
    if input.measured_on_other_gpu && input.measurement.is_none() {
        return Err(Error::usage(
            "--measured-on-other-gpu needs --measurement: it records that the measurement's GPU \
             is not the package's",
        ));
    }
    Ok(())
}

/// The row's notes: the user's, after the mismatch note when the measurement was taken on
/// another GPU than the package's and `--measured-on-other-gpu` says so.
///
/// # Errors
/// [`Error::Usage`] when the measurement's GPU is not the package's and the flag is absent, or
/// when the flag is given and they agree (the row would record a mismatch that is not there).
fn notes_with_gpu(
    catalog: &Catalog,
    input: &RunInput<'_>,
    measurement: Option<&LoadedMeasurement>,
) -> Result<Option<String>> {
    let user = input.notes.map(str::to_string);
    let Some(m) = measurement else {
        return Ok(user);
    };
    let device = m.document.environment.device_name.as_str();
    let model = catalog.find(input.gpu, input.days)?.model.clone();
    let agree = crate::gpu_name::device_is_model(input.gpu, &model, device);
    match (agree, input.measured_on_other_gpu) {
        (true, false) => Ok(user),
        (false, true) => {
            let note = super::rules::mismatch_note(device, input.gpu, &model);
            Ok(Some(match user {
                Some(text) if !text.is_empty() => format!("{note}; {text}"),
                _ => note,
            }))
        }
        (false, false) => Err(Error::usage(format!(
            "{} was measured on {}, not on the package's {} ({model}); record it against the \
             package of that GPU, or give --measured-on-other-gpu to record the mismatch",
            m.path.display(),
            crate::text::ascii(device),
            input.gpu
        ))),
        (true, true) => Err(Error::usage(format!(
            "--measured-on-other-gpu, but {} was measured on {}, the package's {}: leave the \
             flag out",
            m.path.display(),
            crate::text::ascii(device),
            input.gpu
        ))),
    }
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
