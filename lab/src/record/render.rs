//! The appended row as the text lines `lab record` prints (`--json` prints [`Appended`] itself).

use super::Appended;

/// The three lines that say which row was appended where: the run and its line in the grid,
/// the measurement it links (`-` when none), and the package and outcome.
pub fn text_lines(appended: &Appended) -> Vec<String> {
    let row = &appended.row;
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_string());
    vec![
        format!(
            "recorded run {} on line {} of {}",
            row.run_id, appended.line, appended.grid
        ),
        format!(
            "  measurement {} (sha256 {})",
            or_dash(row.measurement_file.clone()),
            or_dash(row.measurement_sha256.clone())
        ),
        format!(
            "  package {} x {} lot(s), {} days; outcome {}, accepted results {}",
            row.gpu,
            row.lots,
            row.days,
            row.outcome,
            or_dash(row.accepted_results.map(|k| k.to_string()))
        ),
    ]
}
