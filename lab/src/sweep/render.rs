//! A sweep's result as `lab sweep` shows it: the progress line of each point, the final text
//! summary and the `--json` object.

use super::{Dimension, PointOutcome, SweepPoint, SweepResult};
use crate::document::Configuration;
use crate::units::{gib, mib};
use rust_decimal::{Decimal, RoundingStrategy};
use std::path::Path;

/// A share (0.5 = half) as a percentage with 2 decimals, half-to-even.
pub fn percent(share: Decimal) -> Decimal {
    let mut value = (share * Decimal::ONE_HUNDRED)
        .round_dp_with_strategy(2, RoundingStrategy::MidpointNearestEven);
    value.rescale(2);
    value
}

/// The progress line of one finished point: `width=4096 fitted, peak reserved 1.50 GiB (3.75 %
/// of the device)` or `width=8192 out of memory`.
pub fn point_line(dimension: Dimension, point: &SweepPoint) -> String {
    match &point.outcome {
        PointOutcome::Fitted(f) => format!(
            "{dimension}={} fitted, peak reserved {} GiB ({} % of the device)",
            point.value,
            gib(f.peak_reserved_bytes, 2),
            percent(f.peak_reserved_share())
        ),
        PointOutcome::OutOfMemory { .. } => {
            format!("{dimension}={} out of memory", point.value)
        }
    }
}

/// The text `lab sweep` prints at the end: the sweep's flags, one table row per point (sorted by
/// value; memory in MiB, the warm forward in ms), whether the search STOPPED EARLY, the largest
/// value that fitted, the smallest that ran out of memory, and where `summary` was written.
/// `devices` names every GPU the points ran on (`cuda:0,cuda:1`, [`crate::device::list_text`]).
pub fn text_summary(
    result: &SweepResult,
    flags: &Configuration,
    devices: &str,
    summary: &Path,
) -> String {
    use std::fmt::Write as _;
    let d = result.dimension;
    let mut out = String::new();
    let fixed: Vec<String> = [
        (Dimension::Batch, "batch", flags.batch),
        (Dimension::Context, "context", flags.context),
        (Dimension::Width, "width", flags.width),
    ]
    .iter()
    .filter(|(dim, _, _)| *dim != d)
    .map(|(_, name, value)| format!("{name} {value}"))
    .collect();
    let _ = writeln!(
        out,
        "sweep of {d} from {} to {} on {} ({}, {}, warmup {}, repeats {})",
        result.bounds.from,
        result.bounds.to,
        devices,
        fixed.join(", "),
        flags.dtype.name(),
        flags.warmup,
        flags.repeats
    );
    let header = [
        "step",
        d.as_str(),
        "status",
        "peak alloc MiB",
        "peak res MiB",
        "res % of device",
        "warm fwd ms",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    rows.extend(
        result
            .points_by_value()
            .into_iter()
            .map(|p| match &p.outcome {
                PointOutcome::Fitted(f) => vec![
                    p.step.to_string(),
                    p.value.to_string(),
                    "fitted".to_string(),
                    mib(f.peak_allocated_bytes, 2).to_string(),
                    mib(f.peak_reserved_bytes, 2).to_string(),
                    percent(f.peak_reserved_share()).to_string(),
                    f.warm_forward_median_wall_seconds
                        .map_or_else(|| "-".to_string(), |s| format!("{:.3}", s * 1e3)),
                ],
                PointOutcome::OutOfMemory { .. } => vec![
                    p.step.to_string(),
                    p.value.to_string(),
                    "out of memory".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                    "-".to_string(),
                ],
            }),
    );
    for line in crate::table::align(&rows, |i| i == 2) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(reason) = result.end.stop_reason() {
        let _ = writeln!(
            out,
            "sweep STOPPED EARLY ({reason}): the search did not finish, the {d} limit was NOT found"
        );
    }
    let limit_found = result.limit_found();
    match result.largest_fitted() {
        Some((point, f)) => {
            let what = if limit_found {
                format!("largest {d} that fitted")
            } else {
                format!("largest {d} that fitted before the stop (NOT the limit)")
            };
            let _ = writeln!(
                out,
                "{what}: {} (peak reserved {} GiB = {} % of the device's {} GiB)",
                point.value,
                gib(f.peak_reserved_bytes, 2),
                percent(f.peak_reserved_share()),
                gib(f.total_memory_bytes, 2)
            );
        }
        None if limit_found => {
            let _ = writeln!(
                out,
                "no {d} fitted (not even --from {})",
                result.bounds.from
            );
        }
        None => {
            let _ = writeln!(out, "no {d} fitted before the stop");
        }
    }
    match (result.smallest_out_of_memory(), limit_found) {
        (Some(v), true) => {
            let _ = writeln!(out, "smallest {d} that ran out of memory: {v}");
        }
        (Some(v), false) => {
            let _ = writeln!(
                out,
                "smallest {d} that ran out of memory before the stop: {v}"
            );
        }
        (None, true) => {
            let _ = writeln!(
                out,
                "no point ran out of memory up to --to {}",
                result.bounds.to
            );
        }
        (None, false) => {
            let _ = writeln!(
                out,
                "no point ran out of memory before the stop (the sweep did not reach --to {})",
                result.bounds.to
            );
        }
    }
    let _ = writeln!(
        out,
        "summary: {}",
        crate::text::one_line(&summary.display().to_string())
    );
    out
}

/// The JSON object of `lab sweep --json`: how the sweep ended and whether the limit was found,
/// its fixed flags (the varied one `null`, its range in `bounds`), the points sorted by value,
/// the largest fitted and the smallest out-of-memory value, and the paths of `dir` and
/// `summary`.
pub fn json_summary(
    result: &SweepResult,
    flags: &Configuration,
    dir: &Path,
    summary: &Path,
) -> serde_json::Value {
    let largest = result.largest_fitted().map(|(point, f)| {
        serde_json::json!({
            "value": point.value,
            "file": f.file,
            "peak_allocated_bytes": f.peak_allocated_bytes,
            "peak_reserved_bytes": f.peak_reserved_bytes,
            "total_memory_bytes": f.total_memory_bytes,
            "peak_reserved_share": f.peak_reserved_share().to_string(),
        })
    });
    let points: Vec<_> = result.points_by_value().into_iter().collect();
    // The fixed flags; the varied one is null (its range is `bounds`).
    let mut fixed = serde_json::to_value(flags).unwrap_or(serde_json::Value::Null);
    if let Some(object) = fixed.as_object_mut() {
        object.insert(
            result.dimension.as_str().to_owned(),
            serde_json::Value::Null,
        );
    }
    serde_json::json!({
        "dimension": result.dimension,
        "bounds": result.bounds,
        "flags": fixed,
        "end": result.end.as_str(),
        "limit_found": result.limit_found(),
        "stopped_at": result.end.stopped_at(),
        "stop_reason": result.end.stop_reason(),
        "output_dir": dir,
        "summary_csv": summary,
        "points": points,
        "largest_fitted": largest,
        "smallest_out_of_memory": result.smallest_out_of_memory(),
    })
}
