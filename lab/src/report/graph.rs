//! The CUDA-graph floor's lines of a report (docs/PROTOCOL.md §4.6), one set per file.

use super::Report;
use crate::document::graph;
use crate::document::{median, Phase};
use crate::text::one_line;

/// Median GPU time of the `warm_forward` rows of file `index`, seconds: the eager time that
/// `lab measure`'s summary holds against the graph floor.
fn eager_gpu_seconds(report: &Report, index: usize) -> Option<f64> {
    let gpu: Vec<f64> = report
        .phases
        .iter()
        .filter(|t| t.phase == Phase::WarmForward)
        .flat_map(|t| t.rows.iter())
        .filter(|r| r.file_index == index)
        .filter_map(|r| r.measured.gpu_seconds)
        .collect();
    median(&gpu)
}

/// Title of the graph-floor section, in text and Markdown.
pub(super) const GRAPH_TITLE: &str = "CUDA graph (docs/PROTOCOL.md §4.6)";

/// The graph-floor lines of the report: for each file, the lines of
/// [`graph::summary_text`] (the one formatting of the graph floor, shared with `lab
/// measure`) prefixed by the file's index and passed through [`one_line`]; a file without a
/// `graph` object gets one line saying so. Empty when no file has one, so that such reports
/// stay exactly as they were.
pub(super) fn graph_lines(report: &Report) -> Vec<String> {
    if report.files.iter().all(|f| f.graph.is_none()) {
        return Vec::new();
    }
    let mut lines = Vec::new();
    for f in &report.files {
        match &f.graph {
            Some(g) => {
                let summary = graph::summary_text(
                    g,
                    eager_gpu_seconds(report, f.index),
                    f.synthetic_model.flops_per_forward,
                );
                lines.extend(
                    summary
                        .lines()
                        .map(|line| format!("[{}] {}", f.index, one_line(line))),
                );
            }
            None => lines.push(format!(
                "[{}] no graph object (measured without --graph-replays)",
                f.index
            )),
        }
    }
    lines
}
