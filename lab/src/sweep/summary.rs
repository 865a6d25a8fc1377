//! The `summary.csv` of a sweep: one row per point, sorted by value.

use super::{PointOutcome, SweepResult};
use crate::document::Configuration;
use crate::{Error, Result};

/// Header of `summary.csv`. `status` is `fitted` or `out_of_memory` for a finished point, and
/// `interrupted` or `failed` for the point a stopped sweep did not finish (last row, with the
/// reason in `message`). `sweep_end` repeats on every row how the sweep ended (`completed`,
/// `interrupted` or `failed`): only `completed` means the largest fitted value is the limit.
pub const SUMMARY_HEADER: [&str; 17] = [
    "step",
    "dimension",
    "value",
    "batch",
    "context",
    "width",
    "dtype",
    "status",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "total_memory_bytes",
    "peak_reserved_share",
    "warm_forward_median_wall_seconds",
    "file",
    "sha256",
    "message",
    "sweep_end",
];

/// The summary CSV: one row per finished point, sorted by value, then one row for the point a
/// stopped sweep did not finish (if any); see [`SUMMARY_HEADER`].
pub fn summary_csv(result: &SweepResult, base: &Configuration) -> Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let csv_error = |e: csv::Error| Error::runtime(format!("cannot write the summary: {e}"));
    writer.write_record(SUMMARY_HEADER).map_err(csv_error)?;
    for point in result.points_by_value() {
        let config = result.dimension.apply(base, point.value);
        let mut record = vec![
            point.step.to_string(),
            result.dimension.to_string(),
            point.value.to_string(),
            config.batch.to_string(),
            config.context.to_string(),
            config.width.to_string(),
            config.dtype.name().to_string(),
        ];
        match &point.outcome {
            PointOutcome::Fitted(f) => record.extend([
                "fitted".to_string(),
                f.peak_allocated_bytes.to_string(),
                f.peak_reserved_bytes.to_string(),
                f.total_memory_bytes.to_string(),
                f.peak_reserved_share().to_string(),
                f.warm_forward_median_wall_seconds
                    .map_or_else(String::new, |s| format!("{s:.9}")),
                f.file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                f.sha256.clone(),
                String::new(),
            ]),
            PointOutcome::OutOfMemory { message } => record.extend([
                "out_of_memory".to_string(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                message.clone(),
            ]),
        }
        record.push(result.end.as_str().to_string());
        writer.write_record(&record).map_err(csv_error)?;
    }
    if let Some(value) = result.end.stopped_at() {
        let config = result.dimension.apply(base, value);
        let mut record = vec![
            (result.points.len() + 1).to_string(),
            result.dimension.to_string(),
            value.to_string(),
            config.batch.to_string(),
            config.context.to_string(),
            config.width.to_string(),
            config.dtype.name().to_string(),
            result.end.as_str().to_string(),
        ];
        record.extend(std::iter::repeat_n(String::new(), 7));
        record.push(result.end.stop_reason().unwrap_or_default());
        record.push(result.end.as_str().to_string());
        writer.write_record(&record).map_err(csv_error)?;
    }
    writer
        .into_inner()
        .map_err(|e| Error::runtime(format!("cannot write the summary: {e}")))
}
