//! The report as text: one aligned table per phase, plain or Markdown.

use super::graph::{graph_lines, GRAPH_TITLE};
use super::{Report, ReportRow};
use crate::text::one_line;
use crate::units::{gib, mib};
use std::fmt::Write as _;

fn seconds_ms(seconds: f64) -> String {
    format!("{:.3}", seconds * 1e3)
}

fn optional_ms(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "-".to_string(), seconds_ms)
}

fn tflops(value: Option<rust_decimal::Decimal>) -> String {
    value.map_or_else(
        || "-".to_string(),
        |v| {
            let tera = v / rust_decimal::Decimal::from(1_000_000_000_000u64);
            let rounded =
                tera.round_dp_with_strategy(3, rust_decimal::RoundingStrategy::MidpointNearestEven);
            format!("{rounded:.3}")
        },
    )
}

const COLUMNS: [&str; 13] = [
    "file",
    "rep",
    "wall ms",
    "GPU ms",
    "base alloc",
    "base res",
    "end alloc",
    "end res",
    "peak alloc",
    "peak res",
    "pred end alloc",
    "pred peak alloc",
    "TFLOP/s",
];

fn row_cells(row: &ReportRow) -> Vec<String> {
    let m = &row.measured;
    let b = |v: u64| mib(v, 3).to_string();
    vec![
        format!("[{}]", row.file_index),
        m.repetition
            .map_or_else(|| "-".to_string(), |r| r.to_string()),
        seconds_ms(m.wall_seconds),
        optional_ms(m.gpu_seconds),
        b(m.counters.baseline_allocated_bytes),
        b(m.counters.baseline_reserved_bytes),
        b(m.counters.end_allocated_bytes),
        b(m.counters.end_reserved_bytes),
        b(m.counters.peak_allocated_bytes),
        b(m.counters.peak_reserved_bytes),
        b(row.predicted_end_allocated_bytes),
        b(row.predicted_peak_allocated_bytes),
        tflops(row.achieved_flops_per_second),
    ]
}

/// One line per file. The file name and the document's texts are printed through
/// [`one_line`]: a control or format character in them (an ESC sequence in `device_name`)
/// is shown escaped, never sent to the terminal.
fn file_lines(report: &Report) -> Vec<String> {
    report
        .files
        .iter()
        .map(|f| {
            format!(
                "[{}] {} — {} on {} ({} GiB), sha256 {}",
                f.index,
                one_line(&f.file),
                one_line(&f.label),
                one_line(&f.device_name),
                gib(f.total_memory_bytes, 2),
                f.sha256
            )
        })
        .collect()
}

/// The report as aligned plain-text tables (memory in MiB, times in milliseconds), then the
/// graph floor of the files that have one.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for line in file_lines(report) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "memory in MiB (2^20 bytes), times in ms; TFLOP/s from the GPU time"
    );
    for table in &report.phases {
        let _ = writeln!(out, "\n{}", table.phase.as_str());
        let mut rows: Vec<Vec<String>> = vec![COLUMNS.iter().map(|c| c.to_string()).collect()];
        rows.extend(table.rows.iter().map(row_cells));
        for line in crate::table::align(&rows, |i| i < 2) {
            let _ = writeln!(out, "  {line}");
        }
    }
    let _ = writeln!(out, "\n{}", report.prediction_note);
    let graph = graph_lines(report);
    if !graph.is_empty() {
        let _ = writeln!(out, "\n{GRAPH_TITLE}");
        for line in graph {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

/// The report as Markdown: a file list, one pipe table per phase, then the graph floor of the
/// files that have one as a list.
pub fn render_markdown(report: &Report) -> String {
    let mut out = String::from("## Measurement report\n\n");
    for line in file_lines(report) {
        let _ = writeln!(out, "- {line}");
    }
    let _ = writeln!(
        out,
        "\nMemory in MiB (2^20 bytes), times in milliseconds, TFLOP/s from the GPU time."
    );
    for table in &report.phases {
        let _ = writeln!(out, "\n### `{}`\n", table.phase.as_str());
        let _ = writeln!(out, "| {} |", COLUMNS.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            COLUMNS
                .iter()
                .enumerate()
                .map(|(i, _)| if i < 2 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for row in &table.rows {
            let _ = writeln!(out, "| {} |", row_cells(row).join(" | "));
        }
    }
    let _ = writeln!(out, "\n{}.", capitalise(report.prediction_note));
    let graph = graph_lines(report);
    if !graph.is_empty() {
        let _ = writeln!(out, "\n### {}\n", capitalise(GRAPH_TITLE));
        for line in graph {
            let _ = writeln!(out, "- {line}");
        }
    }
    out
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
