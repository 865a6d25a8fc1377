//! Sweeping one dimension of the measurement up to the memory limit.
//!
//! The search runs one fresh measurement per point: it doubles the value from `--from` until a
//! point runs out of memory or `--to` is reached, then bisects between the largest value that
//! fitted and the smallest that ran out of memory until they are at most `resolution` apart.
//! The measurement itself is behind [`MeasurementRunner`]: [`ProcessRunner`] spawns
//! `lab measure` (the one measurement path, through the torch worker) once per point; tests use
//! a fake runner.
//!
//! A point that runs out of memory is a result, not a failure. Any other failure, or a stop
//! request (Ctrl-C), ends the sweep and keeps the points already finished.

use crate::measure::{Configuration, Document, Dtype, SyntheticModel};
use crate::report::{self, LoadedMeasurement};
use crate::{Error, Result};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

/// The measurement flag a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// `--width`: model width (hidden = 4 x width).
    Width,
    /// `--batch`: batch size.
    Batch,
    /// `--context`: number of positions.
    Context,
}

impl Dimension {
    /// The flag name without dashes: `width`, `batch` or `context`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Width => "width",
            Dimension::Batch => "batch",
            Dimension::Context => "context",
        }
    }
}

impl std::fmt::Display for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The range a sweep explores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// First (smallest) value measured; at least 1.
    pub from: u64,
    /// Largest value measured; at least `from`.
    pub to: u64,
    /// Bisection stops when the largest fitted and smallest out-of-memory values are at most
    /// this far apart; at least 1.
    pub resolution: u64,
}

impl Bounds {
    /// Checks and builds bounds: `1 <= from <= to`, `resolution >= 1`.
    pub fn new(from: u64, to: u64, resolution: u64) -> Result<Self> {
        if from == 0 {
            return Err(Error::usage("--from must be a positive integer"));
        }
        if to < from {
            return Err(Error::usage(format!(
                "--to ({to}) must be at least --from ({from})"
            )));
        }
        if resolution == 0 {
            return Err(Error::usage("--resolution must be a positive integer"));
        }
        Ok(Bounds {
            from,
            to,
            resolution,
        })
    }
}

/// What one fitted point measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedPoint {
    /// The measurement file written for this point.
    pub file: PathBuf,
    /// Its SHA-256 (lowercase hex).
    pub sha256: String,
    /// Largest peak allocated over all phases, bytes.
    pub peak_allocated_bytes: u64,
    /// Largest peak reserved over all phases, bytes.
    pub peak_reserved_bytes: u64,
    /// Total device memory announced by the runtime, bytes.
    pub total_memory_bytes: u64,
    /// Median warm-forward wall time, seconds.
    pub warm_forward_median_wall_seconds: Option<f64>,
}

impl FittedPoint {
    /// Builds the point's figures from its measurement document.
    pub fn from_loaded(loaded: &LoadedMeasurement) -> Self {
        FittedPoint {
            file: loaded.path.clone(),
            sha256: loaded.sha256.clone(),
            peak_allocated_bytes: report::peak_allocated_bytes(&loaded.document),
            peak_reserved_bytes: report::peak_reserved_bytes(&loaded.document),
            total_memory_bytes: loaded.document.environment.total_memory_bytes,
            warm_forward_median_wall_seconds: report::warm_forward_median_wall_seconds(
                &loaded.document,
            ),
        }
    }

    /// Peak reserved as a share of the device's total memory, exact, rounded half-to-even to
    /// 6 decimal places (0.5 = half the device).
    pub fn peak_reserved_share(&self) -> Decimal {
        share(self.peak_reserved_bytes, self.total_memory_bytes)
    }
}

/// `part / whole` rounded half-to-even to 6 decimal places (0 when `whole` is 0).
pub fn share(part: u64, whole: u64) -> Decimal {
    if whole == 0 {
        return Decimal::ZERO;
    }
    (Decimal::from(part) / Decimal::from(whole))
        .round_dp_with_strategy(6, RoundingStrategy::MidpointNearestEven)
}

/// The result of one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PointOutcome {
    /// The measurement completed and wrote its file.
    Fitted(FittedPoint),
    /// The measurement ran out of GPU memory (no file was written).
    OutOfMemory {
        /// The message the measurement printed.
        message: String,
    },
}

/// One measured point of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    /// 1-based position in the order the points ran.
    pub step: usize,
    /// Value of the varied dimension.
    pub value: u64,
    /// What happened.
    #[serde(flatten)]
    pub outcome: PointOutcome,
}

/// Runs one measurement with the varied dimension set to a value.
pub trait MeasurementRunner {
    /// Measures one point. Out of memory is `Ok(PointOutcome::OutOfMemory)`; any other failure
    /// is an `Err` (a missing prerequisite as [`Error::Usage`]) and ends the sweep.
    fn measure(&mut self, value: u64) -> Result<PointOutcome>;
}

/// How a sweep ended.
///
/// Only [`SweepEnd::Completed`] means the search finished: the largest value that fitted is
/// then the limit (to `--resolution`). After an interruption or a failure the finished points
/// are kept, but the limit was not found.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepEnd {
    /// The search converged, reached `--to`, or `--from` itself ran out of memory.
    Completed,
    /// A stop was requested (Ctrl-C); finished points are kept.
    Interrupted {
        /// The value whose measurement the stop cut short (and that was dropped); `None` when
        /// the stop came between points or the running point still fitted.
        at: Option<u64>,
    },
    /// A point failed for a reason other than out of memory.
    Failed {
        /// The value of the failed point.
        value: u64,
        /// The failure.
        message: String,
        /// Its exit code (2: prerequisite or bad input, 1: runtime).
        exit_code: u8,
    },
}

impl SweepEnd {
    /// `completed`, `interrupted` or `failed` (as in the JSON summary and `summary.csv`).
    pub fn as_str(&self) -> &'static str {
        match self {
            SweepEnd::Completed => "completed",
            SweepEnd::Interrupted { .. } => "interrupted",
            SweepEnd::Failed { .. } => "failed",
        }
    }

    /// Whether the search finished, so that its result is the limit.
    pub fn is_completed(&self) -> bool {
        matches!(self, SweepEnd::Completed)
    }

    /// The value of the point that was running when the sweep stopped and did not finish.
    pub fn stopped_at(&self) -> Option<u64> {
        match self {
            SweepEnd::Completed => None,
            SweepEnd::Interrupted { at } => *at,
            SweepEnd::Failed { value, .. } => Some(*value),
        }
    }

    /// Why the sweep stopped early, in words; `None` when it completed.
    pub fn stop_reason(&self) -> Option<String> {
        match self {
            SweepEnd::Completed => None,
            SweepEnd::Interrupted { .. } => Some("interrupted by Ctrl-C".to_owned()),
            SweepEnd::Failed { message, .. } => Some(message.clone()),
        }
    }
}

/// Serialized as its name alone (`"completed"`); the details have their own fields.
impl Serialize for SweepEnd {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A finished (or stopped) sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepResult {
    /// The varied dimension.
    pub dimension: Dimension,
    /// The explored range.
    pub bounds: Bounds,
    /// Points in the order they ran.
    pub points: Vec<SweepPoint>,
    /// How the sweep ended.
    pub end: SweepEnd,
}

impl SweepResult {
    /// The fitted point with the largest value.
    pub fn largest_fitted(&self) -> Option<(&SweepPoint, &FittedPoint)> {
        self.points
            .iter()
            .filter_map(|p| match &p.outcome {
                PointOutcome::Fitted(f) => Some((p, f)),
                PointOutcome::OutOfMemory { .. } => None,
            })
            .max_by_key(|(p, _)| p.value)
    }

    /// The smallest value that ran out of memory.
    pub fn smallest_out_of_memory(&self) -> Option<u64> {
        self.points
            .iter()
            .filter(|p| matches!(p.outcome, PointOutcome::OutOfMemory { .. }))
            .map(|p| p.value)
            .min()
    }

    /// Whether the search finished: only then is [`SweepResult::largest_fitted`] the limit.
    pub fn limit_found(&self) -> bool {
        self.end.is_completed()
    }

    /// Points sorted by value (the order of the summary table).
    pub fn points_by_value(&self) -> Vec<&SweepPoint> {
        let mut points: Vec<&SweepPoint> = self.points.iter().collect();
        points.sort_by_key(|p| p.value);
        points
    }
}

/// Progress notifications for a display.
#[derive(Debug)]
pub enum Event<'a> {
    /// A point is about to run.
    Starting {
        /// 1-based step.
        step: usize,
        /// Its value.
        value: u64,
    },
    /// A point finished.
    Finished(&'a SweepPoint),
}

/// The next value to measure, given the largest value that fitted and the smallest that ran
/// out of memory so far; `None` when the search is over.
///
/// Doubling from `bounds.from` (capped at `bounds.to`) while nothing ran out of memory; then
/// bisection (midpoint rounded down) until the gap is at most `bounds.resolution`. Nothing is
/// tried below `from`: when `from` itself runs out of memory the sweep ends.
pub fn next_value(bounds: &Bounds, fitted: Option<u64>, out_of_memory: Option<u64>) -> Option<u64> {
    match (fitted, out_of_memory) {
        (None, None) => Some(bounds.from),
        (None, Some(_)) => None,
        (Some(lo), None) => {
            if lo >= bounds.to {
                None
            } else {
                Some(lo.saturating_mul(2).min(bounds.to))
            }
        }
        (Some(lo), Some(hi)) => {
            if hi <= lo || hi - lo <= bounds.resolution {
                None
            } else {
                Some(lo + (hi - lo) / 2)
            }
        }
    }
}

/// Runs a sweep: one call of `runner` per point until [`next_value`] says stop, `stop` is set,
/// or a point fails. `on_event` sees each point start and finish.
///
/// A point whose measurement returned after `stop` was set is kept only if it fitted (its file
/// is complete); an out-of-memory or failed result at that moment is treated as the
/// interruption's doing and dropped.
pub fn run_sweep(
    dimension: Dimension,
    bounds: Bounds,
    runner: &mut dyn MeasurementRunner,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> SweepResult {
    let mut result = SweepResult {
        dimension,
        bounds,
        points: Vec::new(),
        end: SweepEnd::Completed,
    };
    let mut fitted: Option<u64> = None;
    let mut out_of_memory: Option<u64> = None;
    while let Some(value) = next_value(&bounds, fitted, out_of_memory) {
        if stop.load(Ordering::SeqCst) {
            result.end = SweepEnd::Interrupted { at: None };
            break;
        }
        let step = result.points.len() + 1;
        on_event(Event::Starting { step, value });
        let outcome = runner.measure(value);
        let interrupted = stop.load(Ordering::SeqCst);
        let outcome = match outcome {
            Ok(outcome @ PointOutcome::Fitted(_)) => outcome,
            _ if interrupted => {
                result.end = SweepEnd::Interrupted { at: Some(value) };
                break;
            }
            Ok(outcome) => outcome,
            Err(error) => {
                result.end = SweepEnd::Failed {
                    value,
                    exit_code: error.exit_code(),
                    message: error.to_string(),
                };
                break;
            }
        };
        match outcome {
            PointOutcome::Fitted(_) => fitted = Some(fitted.map_or(value, |f| f.max(value))),
            PointOutcome::OutOfMemory { .. } => {
                out_of_memory = Some(out_of_memory.map_or(value, |o| o.min(value)))
            }
        }
        result.points.push(SweepPoint {
            step,
            value,
            outcome,
        });
        if let Some(point) = result.points.last() {
            on_event(Event::Finished(point));
        }
        if interrupted {
            result.end = SweepEnd::Interrupted { at: None };
            break;
        }
    }
    result
}

/// The fixed measurement flags of a sweep (the varied one is overridden per point).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MeasureFlags {
    /// `--device`, e.g. `cuda:0`.
    pub device: String,
    /// `--batch`.
    pub batch: u64,
    /// `--context`.
    pub context: u64,
    /// `--width`.
    pub width: u64,
    /// `--dtype`.
    pub dtype: String,
    /// `--warmup`.
    pub warmup: u64,
    /// `--repeats`.
    pub repeats: u64,
    /// `--seed`, passed only when given.
    pub seed: Option<u64>,
    /// `--worker`, passed only when given.
    pub worker: Option<PathBuf>,
}

impl MeasureFlags {
    /// The flags with `dimension` set to `value`.
    pub fn with(&self, dimension: Dimension, value: u64) -> MeasureFlags {
        let mut flags = self.clone();
        match dimension {
            Dimension::Width => flags.width = value,
            Dimension::Batch => flags.batch = value,
            Dimension::Context => flags.context = value,
        }
        flags
    }

    /// `lab measure` arguments for these flags, writing to `output`.
    pub fn measure_args(&self, output: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["measure".into()];
        let mut push = |flag: &str, value: OsString| {
            args.push(flag.into());
            args.push(value);
        };
        push("--device", self.device.clone().into());
        push("--batch", self.batch.to_string().into());
        push("--context", self.context.to_string().into());
        push("--width", self.width.to_string().into());
        push("--dtype", self.dtype.clone().into());
        push("--warmup", self.warmup.to_string().into());
        push("--repeats", self.repeats.to_string().into());
        if let Some(seed) = self.seed {
            push("--seed", seed.to_string().into());
        }
        if let Some(worker) = &self.worker {
            push("--worker", worker.clone().into_os_string());
        }
        push("--output", output.as_os_str().to_owned());
        args
    }
}

/// Name of a point's measurement file inside the sweep folder: `width-4096.json`.
pub fn point_file_name(dimension: Dimension, value: u64) -> String {
    format!("{dimension}-{value}.json")
}

/// Runs each point as a fresh `lab measure` process (the program is normally the running `lab`
/// binary itself), writing `DIR/<dimension>-<value>.json`.
///
/// Exit 0 -> the file is read back and checked; exit 1 with "out of memory" in its message ->
/// [`PointOutcome::OutOfMemory`]; exit 2 -> a usage error (missing worker, libtorch or GPU);
/// anything else -> a runtime error.
#[derive(Debug, Clone)]
pub struct ProcessRunner {
    /// The `lab` executable to run `measure` with.
    pub program: PathBuf,
    /// The fixed flags.
    pub flags: MeasureFlags,
    /// The varied dimension.
    pub dimension: Dimension,
    /// The (new) sweep folder.
    pub output_dir: PathBuf,
}

/// Whether a failure message reports an out-of-memory condition.
pub fn is_out_of_memory(message: &str) -> bool {
    message.to_ascii_lowercase().contains("out of memory")
}

fn last_line(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    line.strip_prefix("lab: error: ")
        .unwrap_or(line)
        .to_string()
}

impl MeasurementRunner for ProcessRunner {
    fn measure(&mut self, value: u64) -> Result<PointOutcome> {
        let output = self.output_dir.join(point_file_name(self.dimension, value));
        let flags = self.flags.with(self.dimension, value);
        let finished = Command::new(&self.program)
            .args(flags.measure_args(&output))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| {
                Error::usage(format!(
                    "cannot start {} measure: {e}",
                    self.program.display()
                ))
            })?;
        let point = format!("{}={value}", self.dimension);
        match finished.status.code() {
            Some(0) => {
                let loaded = report::read_measurement(&output)
                    .map_err(|e| Error::runtime(format!("{point}: measure succeeded but {e}")))?;
                if let Err(mismatch) = check_point_document(&loaded.document, &flags) {
                    return Err(Error::runtime(format!(
                        "{point}: {} does not describe the requested point: {mismatch}",
                        output.display()
                    )));
                }
                Ok(PointOutcome::Fitted(FittedPoint::from_loaded(&loaded)))
            }
            Some(code) => {
                let message = last_line(&finished.stderr);
                if code == 1 && is_out_of_memory(&message) {
                    Ok(PointOutcome::OutOfMemory { message })
                } else if code == 2 {
                    Err(Error::usage(message))
                } else {
                    Err(Error::runtime(format!(
                        "{point}: lab measure exited with {code}: {message}"
                    )))
                }
            }
            None => Err(Error::runtime(format!(
                "{point}: lab measure was stopped by a signal"
            ))),
        }
    }
}

/// Checks that a point's measurement document describes exactly the requested point: every
/// field of `configuration` (device, batch, context, width, dtype, warmup, repeats and, when
/// given, seed) and the sizes of `synthetic_model` (those [`SyntheticModel::new`] computes for
/// the requested batch, context, width and dtype; the architecture text is not compared).
///
/// # Errors
/// The differences, as `field = found (requested expected)`, joined with `; `.
pub fn check_point_document(
    document: &Document,
    expected: &MeasureFlags,
) -> std::result::Result<(), String> {
    let c = &document.configuration;
    let mut wrong: Vec<String> = Vec::new();
    // The flags were validated before the sweep started; an unknown name is still reported.
    let dtype = Dtype::parse(&expected.dtype).unwrap_or_else(|_| {
        wrong.push(format!(
            "configuration.dtype = {} (requested {})",
            c.dtype.name(),
            expected.dtype
        ));
        c.dtype
    });
    let wanted = Configuration {
        device: expected.device.clone(),
        batch: expected.batch,
        context: expected.context,
        width: expected.width,
        dtype,
        warmup: expected.warmup,
        repeats: expected.repeats,
        seed: expected.seed.unwrap_or(c.seed),
    };
    differences("configuration", c, &wanted, &[], &mut wrong);
    match SyntheticModel::new(expected.batch, expected.context, expected.width, dtype) {
        Some(model) => differences(
            "synthetic_model",
            &document.synthetic_model,
            &model,
            &["architecture", "autograd"],
            &mut wrong,
        ),
        None => wrong.push("the requested sizes overflow 64 bits".to_owned()),
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// Appends `prefix.field = found (requested wanted)` for every field (in name order) that
/// differs between two records of one type, skipping the `ignored` fields.
fn differences<T: Serialize>(
    prefix: &str,
    found: &T,
    wanted: &T,
    ignored: &[&str],
    wrong: &mut Vec<String>,
) {
    let (Ok(serde_json::Value::Object(found)), Ok(serde_json::Value::Object(wanted))) =
        (serde_json::to_value(found), serde_json::to_value(wanted))
    else {
        wrong.push(format!("{prefix} cannot be compared"));
        return;
    };
    let text = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    for (field, want) in &wanted {
        let got = found.get(field).unwrap_or(&serde_json::Value::Null);
        if got != want && !ignored.contains(&field.as_str()) {
            wrong.push(format!(
                "{prefix}.{field} = {} (requested {})",
                text(got),
                text(want)
            ));
        }
    }
}

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
pub fn summary_csv(result: &SweepResult, flags: &MeasureFlags) -> Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let csv_error = |e: csv::Error| Error::runtime(format!("cannot write the summary: {e}"));
    writer.write_record(SUMMARY_HEADER).map_err(csv_error)?;
    for point in result.points_by_value() {
        let config = flags.with(result.dimension, point.value);
        let mut record = vec![
            point.step.to_string(),
            result.dimension.to_string(),
            point.value.to_string(),
            config.batch.to_string(),
            config.context.to_string(),
            config.width.to_string(),
            config.dtype.clone(),
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
        let config = flags.with(result.dimension, value);
        let mut record = vec![
            (result.points.len() + 1).to_string(),
            result.dimension.to_string(),
            value.to_string(),
            config.batch.to_string(),
            config.context.to_string(),
            config.width.to_string(),
            config.dtype.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Fits up to `limit`, out of memory above; records every value asked.
    struct Fake {
        limit: u64,
        asked: Vec<u64>,
        fail_at: Option<(u64, Error)>,
        stop_at: Option<(u64, &'static AtomicBool)>,
    }

    impl Fake {
        fn new(limit: u64) -> Self {
            Fake {
                limit,
                asked: Vec::new(),
                fail_at: None,
                stop_at: None,
            }
        }
    }

    fn fitted(value: u64) -> PointOutcome {
        PointOutcome::Fitted(FittedPoint {
            file: PathBuf::from(format!("width-{value}.json")),
            sha256: "ab".repeat(32),
            peak_allocated_bytes: value.saturating_mul(1000),
            peak_reserved_bytes: value.saturating_mul(1024),
            total_memory_bytes: 1 << 30,
            warm_forward_median_wall_seconds: Some(0.001),
        })
    }

    impl MeasurementRunner for Fake {
        fn measure(&mut self, value: u64) -> Result<PointOutcome> {
            self.asked.push(value);
            if let Some((at, stop)) = self.stop_at {
                if value == at {
                    stop.store(true, Ordering::SeqCst);
                    return Err(Error::runtime("killed by SIGINT"));
                }
            }
            if let Some((at, error)) = &self.fail_at {
                if *at == value {
                    return Err(match error {
                        Error::Usage(m) => Error::usage(m.clone()),
                        Error::Runtime(m) => Error::runtime(m.clone()),
                    });
                }
            }
            if value <= self.limit {
                Ok(fitted(value))
            } else {
                Ok(PointOutcome::OutOfMemory {
                    message: "CUDA out of memory".into(),
                })
            }
        }
    }

    fn sweep(fake: &mut Fake, from: u64, to: u64, resolution: u64) -> SweepResult {
        let stop = AtomicBool::new(false);
        let bounds = Bounds::new(from, to, resolution).unwrap();
        run_sweep(Dimension::Width, bounds, fake, &stop, &mut |_| {})
    }

    #[test]
    fn doubles_then_bisects_to_the_exact_limit() {
        let mut fake = Fake::new(1000);
        let result = sweep(&mut fake, 64, 1 << 20, 1);
        assert_eq!(result.end, SweepEnd::Completed);
        assert_eq!(&fake.asked[..6], &[64, 128, 256, 512, 1024, 768]);
        let (point, _) = result.largest_fitted().unwrap();
        assert_eq!(point.value, 1000);
        assert_eq!(result.smallest_out_of_memory(), Some(1001));
        // doubling: 5 points; bisection of (512, 1024]: 9 points
        assert_eq!(fake.asked.len(), 5 + 9);
        // never the same value twice
        let mut seen = HashMap::new();
        for v in &fake.asked {
            assert!(seen.insert(*v, ()).is_none(), "{v} measured twice");
        }
    }

    #[test]
    fn every_limit_is_found_exactly() {
        for limit in 1..300 {
            let mut fake = Fake::new(limit);
            let result = sweep(&mut fake, 1, 256, 1);
            let largest = result.largest_fitted().map(|(p, _)| p.value);
            assert_eq!(largest, Some(limit.min(256)), "limit {limit}");
            if limit < 256 {
                assert_eq!(result.smallest_out_of_memory(), Some(limit + 1));
            } else {
                assert_eq!(result.smallest_out_of_memory(), None);
            }
            assert!(fake.asked.len() <= 9 + 8, "limit {limit}: {:?}", fake.asked);
        }
    }

    #[test]
    fn stops_at_to_when_everything_fits() {
        let mut fake = Fake::new(u64::MAX);
        let result = sweep(&mut fake, 3, 40, 1);
        assert_eq!(fake.asked, vec![3, 6, 12, 24, 40]);
        assert_eq!(result.largest_fitted().unwrap().0.value, 40);
        assert_eq!(result.end, SweepEnd::Completed);
    }

    #[test]
    fn from_out_of_memory_ends_with_nothing_fitted() {
        let mut fake = Fake::new(10);
        let result = sweep(&mut fake, 64, 1024, 1);
        assert_eq!(fake.asked, vec![64]);
        assert!(result.largest_fitted().is_none());
        assert_eq!(result.smallest_out_of_memory(), Some(64));
        assert_eq!(result.points.len(), 1);
    }

    #[test]
    fn resolution_stops_bisection_early() {
        let mut fake = Fake::new(70_000);
        let result = sweep(&mut fake, 1024, 1 << 20, 1024);
        let lo = result.largest_fitted().unwrap().0.value;
        let hi = result.smallest_out_of_memory().unwrap();
        assert!(lo <= 70_000 && hi > 70_000 && hi - lo <= 1024, "{lo} {hi}");
        assert_eq!(fake.asked.len(), 8 + 6);
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let mut fake = Fake::new(u64::MAX - 1);
        let result = sweep(&mut fake, u64::MAX / 2, u64::MAX, 1);
        assert_eq!(result.largest_fitted().unwrap().0.value, u64::MAX - 1);
        assert_eq!(result.smallest_out_of_memory(), Some(u64::MAX));
    }

    #[test]
    fn a_failure_keeps_finished_points() {
        let mut fake = Fake::new(1000);
        fake.fail_at = Some((256, Error::runtime("worker crashed")));
        let result = sweep(&mut fake, 64, 4096, 1);
        assert_eq!(result.points.len(), 2);
        assert_eq!(
            result.end,
            SweepEnd::Failed {
                value: 256,
                message: "worker crashed".into(),
                exit_code: 1
            }
        );
        assert!(!result.limit_found());
        let csv = String::from_utf8(summary_csv(&result, &flags()).unwrap()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4, "{csv}");
        assert!(lines[1].ends_with(",failed"), "{csv}");
        assert_eq!(
            lines[3],
            "3,width,256,1,16,256,float32,failed,,,,,,,,worker crashed,failed"
        );
    }

    #[test]
    fn a_missing_prerequisite_is_exit_2() {
        let mut fake = Fake::new(1000);
        fake.fail_at = Some((64, Error::usage("no torch worker")));
        let result = sweep(&mut fake, 64, 4096, 1);
        assert!(result.points.is_empty());
        assert!(matches!(result.end, SweepEnd::Failed { exit_code: 2, .. }));
    }

    #[test]
    fn interruption_keeps_finished_points_and_drops_the_killed_one() {
        static STOP: AtomicBool = AtomicBool::new(false);
        let mut fake = Fake::new(1000);
        fake.stop_at = Some((512, &STOP));
        let bounds = Bounds::new(64, 4096, 1).unwrap();
        let mut events = Vec::new();
        let result = run_sweep(Dimension::Width, bounds, &mut fake, &STOP, &mut |e| {
            events.push(match e {
                Event::Starting { value, .. } => format!("start {value}"),
                Event::Finished(p) => format!("done {}", p.value),
            })
        });
        assert_eq!(result.end, SweepEnd::Interrupted { at: Some(512) });
        assert!(!result.limit_found());
        assert_eq!(result.end.stopped_at(), Some(512));
        let values: Vec<u64> = result.points.iter().map(|p| p.value).collect();
        assert_eq!(values, vec![64, 128, 256]);
        let csv = String::from_utf8(summary_csv(&result, &flags()).unwrap()).unwrap();
        assert!(
            csv.ends_with(
                "4,width,512,1,16,512,float32,interrupted,,,,,,,,interrupted by Ctrl-C,interrupted\n"
            ),
            "{csv}"
        );
        assert_eq!(events.last().map(String::as_str), Some("start 512"));
    }

    #[test]
    fn stop_before_start_measures_nothing() {
        let stop = AtomicBool::new(true);
        let mut fake = Fake::new(1000);
        let bounds = Bounds::new(64, 4096, 1).unwrap();
        let result = run_sweep(Dimension::Batch, bounds, &mut fake, &stop, &mut |_| {});
        assert!(fake.asked.is_empty());
        assert_eq!(result.end, SweepEnd::Interrupted { at: None });
        assert_eq!(result.end.stopped_at(), None);
    }

    #[test]
    fn bounds_are_checked() {
        assert!(Bounds::new(0, 4, 1).is_err());
        assert!(Bounds::new(8, 4, 1).is_err());
        assert!(Bounds::new(1, 4, 0).is_err());
        assert!(Bounds::new(4, 4, 1).is_ok());
    }

    fn flags() -> MeasureFlags {
        MeasureFlags {
            device: "cuda:0".into(),
            batch: 1,
            context: 16,
            width: 64,
            dtype: "float32".into(),
            warmup: 1,
            repeats: 2,
            seed: None,
            worker: None,
        }
    }

    #[test]
    fn summary_is_sorted_by_value_with_shares() {
        let mut fake = Fake::new(100);
        let result = sweep(&mut fake, 64, 256, 16);
        assert!(result.limit_found());
        let csv = String::from_utf8(summary_csv(&result, &flags()).unwrap()).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], SUMMARY_HEADER.join(","));
        assert!(lines[1]
            .starts_with("1,width,64,1,16,64,float32,fitted,64000,65536,1073741824,0.000061,"));
        assert!(lines
            .iter()
            .any(|l| l.contains(",128,1,16,128,float32,out_of_memory,")));
        assert!(
            lines[1..].iter().all(|l| l.ends_with(",completed")),
            "{csv}"
        );
        let values: Vec<u64> = lines[1..]
            .iter()
            .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
            .collect();
        let mut sorted = values.clone();
        sorted.sort();
        assert_eq!(values, sorted);
    }

    #[test]
    fn a_point_document_must_match_the_requested_point_entirely() {
        let json = crate::report::tests::sample_json(64, 4);
        let document = crate::report::parse_document(json.as_bytes()).unwrap();
        let mut expected = flags();
        expected.seed = Some(0);
        assert_eq!(check_point_document(&document, &expected), Ok(()));
        // the varied dimension matches, another one does not
        let mut other = expected.clone();
        other.batch = 2;
        assert_eq!(
            check_point_document(&document, &other).unwrap_err(),
            "configuration.batch = 1 (requested 2); synthetic_model.input_bytes = 4096 \
             (requested 8192); synthetic_model.output_bytes = 4096 (requested 8192); \
             synthetic_model.flops_per_forward = 1048576 (requested 2097152)"
        );
        for (change, field) in [
            (
                (|f: &mut MeasureFlags| f.device = "cuda:1".into()) as fn(&mut MeasureFlags),
                "configuration.device = cuda:0 (requested cuda:1)",
            ),
            (
                |f| f.dtype = "bfloat16".into(),
                "configuration.dtype = float32 (requested bfloat16)",
            ),
            (|f| f.warmup = 3, "configuration.warmup = 1 (requested 3)"),
            (|f| f.repeats = 5, "configuration.repeats = 2 (requested 5)"),
            (|f| f.seed = Some(7), "configuration.seed = 0 (requested 7)"),
            (
                |f| f.context = 32,
                "configuration.context = 16 (requested 32)",
            ),
        ] {
            let mut wanted = expected.clone();
            change(&mut wanted);
            let error = check_point_document(&document, &wanted).unwrap_err();
            assert!(error.starts_with(field), "{error}");
        }
        // configuration right, synthetic_model of another size
        let mut lying = document.clone();
        lying.synthetic_model.width = 128;
        lying.synthetic_model.hidden = 512;
        let error = check_point_document(&lying, &expected).unwrap_err();
        assert_eq!(
            error,
            "synthetic_model.width = 128 (requested 64); synthetic_model.hidden = 512 (requested 256)"
        );
    }

    #[test]
    fn share_is_half_even() {
        // 1/16 = 0.0625 exactly; 1/3 -> 0.333333
        assert_eq!(share(1, 16).to_string(), "0.0625");
        assert_eq!(share(1, 3).to_string(), "0.333333");
        // 0.0000005 exactly -> half-even rounds to 0.000000
        assert_eq!(share(1, 2_000_000).to_string(), "0.000000");
        assert_eq!(share(3, 2_000_000).to_string(), "0.000002");
        assert_eq!(share(5, 0), Decimal::ZERO);
    }

    #[test]
    fn measure_args_and_oom_detection() {
        let flags = MeasureFlags {
            device: "cuda:0".into(),
            batch: 1,
            context: 16,
            width: 64,
            dtype: "bfloat16".into(),
            warmup: 1,
            repeats: 2,
            seed: Some(7),
            worker: None,
        };
        let args: Vec<String> = flags
            .with(Dimension::Context, 512)
            .measure_args(Path::new("d/context-512.json"))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args.join(" "),
            "measure --device cuda:0 --batch 1 --context 512 --width 64 --dtype bfloat16 \
             --warmup 1 --repeats 2 --seed 7 --output d/context-512.json"
        );
        assert!(is_out_of_memory("lab: error: CUDA Out Of Memory while ..."));
        assert!(!is_out_of_memory("no CUDA device"));
        assert_eq!(
            last_line(b"noise\nlab: error: CUDA out of memory\n\n"),
            "CUDA out of memory"
        );
        assert_eq!(point_file_name(Dimension::Batch, 8), "batch-8.json");
    }
}
