//! Sweeping one dimension of the measurement up to the memory limit.
//!
//! The search runs one fresh measurement per point, in rounds of one point per GPU; which
//! values it measures is [`crate::search`]'s: doubling then bisection (or a k-ary split), or,
//! with the memory model, a prediction of the limit checked by the points around it, until the
//! largest value that fitted and the smallest that ran out of memory are at most `resolution`
//! apart. The measurement itself is behind [`MeasurementRunner`]: [`WorkerRunner`] calls
//! [`crate::measure::run_measured`] (the one measurement path, which `lab measure` uses too) once per
//! point, so every point runs in a fresh worker process; tests use a fake runner, or a fake
//! worker through the binary. Out of memory is the worker's typed error
//! ([`Error::OutOfMemory`]), never a message matched as text.
//!
//! A point that runs out of memory is a result, not a failure. Any other failure, or a stop
//! request (Ctrl-C), ends the sweep and keeps the points already finished.

use crate::device::Device;
use crate::digest::sha256_hex;
use crate::document::{self, Configuration, Document};
use crate::search::{Observation, Search};
use crate::{Error, Result};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use std::path::PathBuf;
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

    /// `base` with this dimension set to `value`.
    pub fn apply(self, base: &Configuration, value: u64) -> Configuration {
        let mut configuration = base.clone();
        match self {
            Dimension::Width => configuration.width = value,
            Dimension::Batch => configuration.batch = value,
            Dimension::Context => configuration.context = value,
        }
        configuration
    }
}

impl std::fmt::Display for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use crate::search::Bounds;

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
    /// Free GPU memory when the point's worker started (after CUDA initialisation), bytes;
    /// what the search's memory model takes as the capacity ([`crate::search`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_memory_bytes_at_start: Option<u64>,
}

impl FittedPoint {
    /// The point's figures from its document, written to `file` with SHA-256 `sha256`.
    pub fn new(file: PathBuf, sha256: String, document: &Document) -> Self {
        FittedPoint {
            file,
            sha256,
            peak_allocated_bytes: document.peak_allocated_bytes(),
            peak_reserved_bytes: document.peak_reserved_bytes(),
            total_memory_bytes: document.environment.total_memory_bytes,
            warm_forward_median_wall_seconds: document.warm_forward_median_wall_seconds(),
            free_memory_bytes_at_start: None,
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

    /// How many points it measures at once (one per GPU); 1 by default.
    fn parallelism(&self) -> usize {
        1
    }

    /// Measures several points, one result per value in order; by default one after the other.
    fn measure_many(&mut self, values: &[u64]) -> Vec<Result<PointOutcome>> {
        values.iter().map(|v| self.measure(*v)).collect()
    }

    /// The analytic bytes (weights, input, forward peak: [`crate::document::SyntheticModel`])
    /// of the point at `value`, for the search's memory model ([`crate::search`]); `None` (the
    /// default) leaves the search to doubling and bisection.
    fn model_bytes(&self, value: u64) -> Option<u64> {
        let _ = value;
        None
    }
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

/// Runs a sweep: rounds of points chosen by [`crate::search::Search`] (one point per GPU of
/// `runner` in each round) until the search is over, `stop` is set,
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
    let mut search = Search::new(bounds);
    let k = runner.parallelism().max(1);
    'rounds: loop {
        let model = |value: u64| runner.model_bytes(value);
        let values = search.next(k, Some(&model));
        if values.is_empty() {
            break;
        }
        if stop.load(Ordering::SeqCst) {
            result.end = SweepEnd::Interrupted { at: None };
            break;
        }
        let first_step = result.points.len() + 1;
        for (i, value) in values.iter().enumerate() {
            on_event(Event::Starting {
                step: first_step + i,
                value: *value,
            });
        }
        let outcomes = runner.measure_many(&values);
        let interrupted = stop.load(Ordering::SeqCst);
        let mut observed = Vec::new();
        let mut ended = None;
        for (value, outcome) in values.iter().copied().zip(outcomes) {
            let outcome = match outcome {
                Ok(outcome @ PointOutcome::Fitted(_)) => outcome,
                _ if interrupted => {
                    ended.get_or_insert(SweepEnd::Interrupted { at: Some(value) });
                    continue;
                }
                Ok(outcome) => outcome,
                Err(error) => {
                    ended.get_or_insert(SweepEnd::Failed {
                        value,
                        exit_code: error.exit_code(),
                        message: error.to_string(),
                    });
                    continue;
                }
            };
            observed.push((
                value,
                match &outcome {
                    PointOutcome::Fitted(point) => Observation::Fitted {
                        peak_reserved_bytes: point.peak_reserved_bytes,
                        free_memory_bytes: point.free_memory_bytes_at_start,
                    },
                    PointOutcome::OutOfMemory { .. } => Observation::OutOfMemory,
                },
            ));
            result.points.push(SweepPoint {
                step: result.points.len() + 1,
                value,
                outcome,
            });
            if let Some(point) = result.points.last() {
                on_event(Event::Finished(point));
            }
        }
        search.record(&observed);
        if let Some(end) = ended {
            result.end = end;
            break 'rounds;
        }
        if interrupted {
            result.end = SweepEnd::Interrupted { at: None };
            break;
        }
    }
    result
}

/// Name of a point's measurement file inside the sweep folder: `width-4096.json`.
pub fn point_file_name(dimension: Dimension, value: u64) -> String {
    format!("{dimension}-{value}.json")
}

/// Runs each point through [`crate::measure::run_measured`] (a fresh worker process per point)
/// and writes its document to `DIR/<dimension>-<value>.json`. With several `devices`, a round
/// measures one point per GPU at the same time (each point's document names its GPU).
///
/// The worker's `out_of_memory` error ([`Error::OutOfMemory`]) ->
/// [`PointOutcome::OutOfMemory`]; a usage error (missing worker, libtorch or GPU) is returned
/// as it is; any other failure as a runtime error naming the point.
#[derive(Debug, Clone)]
pub struct WorkerRunner {
    /// The `lab-torch-worker` executable ([`crate::worker::locate`]).
    pub worker: PathBuf,
    /// The configuration of every point, the varied dimension aside.
    pub base: Configuration,
    /// The varied dimension.
    pub dimension: Dimension,
    /// The (new) sweep folder.
    pub output_dir: PathBuf,
    /// The GPUs to measure on, at least one (`base.device` is replaced by each in turn).
    pub devices: Vec<Device>,
    /// `--graph-replays` of every point.
    pub graph_replays: Option<u64>,
}

impl WorkerRunner {
    /// Measures `value` on GPU `device` and writes its document.
    fn measure_on(&self, value: u64, device: Device) -> Result<PointOutcome> {
        let mut configuration = self.dimension.apply(&self.base, value);
        configuration.device = device;
        let point = format!("{}={value}", self.dimension);
        let measured =
            match crate::measure::run_measured(&configuration, self.graph_replays, &self.worker) {
                Ok(measured) => measured,
                Err(Error::OutOfMemory(message)) => {
                    return Ok(PointOutcome::OutOfMemory { message })
                }
                Err(Error::Runtime(message)) => {
                    return Err(Error::runtime(format!("{point}: {message}")))
                }
                Err(error) => return Err(error),
            };
        let file = self.output_dir.join(point_file_name(self.dimension, value));
        let bytes = document::write_new(&file, &measured.document)?;
        let mut fitted = FittedPoint::new(file, sha256_hex(&bytes), &measured.document);
        fitted.free_memory_bytes_at_start = measured.free_memory_bytes_at_start;
        Ok(PointOutcome::Fitted(fitted))
    }
}

impl MeasurementRunner for WorkerRunner {
    fn measure(&mut self, value: u64) -> Result<PointOutcome> {
        self.measure_on(
            value,
            self.devices.first().copied().unwrap_or(Device::FIRST),
        )
    }

    fn parallelism(&self) -> usize {
        self.devices.len().max(1)
    }

    fn measure_many(&mut self, values: &[u64]) -> Vec<Result<PointOutcome>> {
        if values.len() <= 1 {
            return values.iter().map(|v| self.measure(*v)).collect();
        }
        let this = &*self;
        std::thread::scope(|scope| {
            let handles: Vec<_> = values
                .iter()
                .zip(this.devices.iter().cycle())
                .map(|(&value, &device)| scope.spawn(move || this.measure_on(value, device)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::runtime("a sweep point's thread panicked")))
                })
                .collect()
        })
    }

    fn model_bytes(&self, value: u64) -> Option<u64> {
        let model = self.dimension.apply(&self.base, value).sizes().ok()?;
        model
            .predicted_weight_allocation()
            .checked_add(model.predicted_input_allocation())?
            .checked_add(model.predicted_forward_peak_extra())
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
            free_memory_bytes_at_start: None,
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
                        Error::OutOfMemory(m) => Error::out_of_memory(m.clone()),
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

    fn flags() -> Configuration {
        Configuration {
            device: Device::FIRST,
            batch: 1,
            context: 16,
            width: 64,
            dtype: crate::document::Dtype::Float32,
            warmup: 1,
            repeats: 2,
            seed: 0,
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
    fn a_dimension_sets_only_its_own_value() {
        let base = flags();
        let point = Dimension::Context.apply(&base, 512);
        assert_eq!(point.context, 512);
        assert_eq!(
            (point.batch, point.width, point.seed),
            (base.batch, base.width, base.seed)
        );
        assert_eq!(Dimension::Batch.apply(&base, 8).batch, 8);
        assert_eq!(Dimension::Width.apply(&base, 9).width, 9);
        assert_eq!(point_file_name(Dimension::Batch, 8), "batch-8.json");
    }

    /// A runner of `gpus` GPUs with a memory model: need(v) = 1000·v + 50_000 analytic bytes,
    /// 4096 more in reality; 1_000_000 bytes free; each round's values are logged.
    struct Fleet {
        gpus: usize,
        rounds: Vec<Vec<u64>>,
    }

    impl MeasurementRunner for Fleet {
        fn measure(&mut self, value: u64) -> Result<PointOutcome> {
            self.measure_many(&[value]).remove(0)
        }

        fn parallelism(&self) -> usize {
            self.gpus
        }

        fn measure_many(&mut self, values: &[u64]) -> Vec<Result<PointOutcome>> {
            assert!(values.len() <= self.gpus);
            self.rounds.push(values.to_vec());
            values
                .iter()
                .map(|&v| {
                    let need = 1000 * v + 50_000 + 4096;
                    Ok(if need <= 1_000_000 {
                        let mut point = match fitted(v) {
                            PointOutcome::Fitted(p) => p,
                            PointOutcome::OutOfMemory { .. } => unreachable!(),
                        };
                        point.peak_reserved_bytes = need;
                        point.free_memory_bytes_at_start = Some(1_000_000);
                        PointOutcome::Fitted(point)
                    } else {
                        PointOutcome::OutOfMemory {
                            message: "CUDA out of memory".into(),
                        }
                    })
                })
                .collect()
        }

        fn model_bytes(&self, value: u64) -> Option<u64> {
            Some(1000 * value + 50_000)
        }
    }

    #[test]
    fn rounds_of_several_gpus_find_the_limit_in_fewer_rounds() {
        // (1_000_000 - 54_096) / 1000 = 945.9: the limit is 945.
        let stop = AtomicBool::new(false);
        let bounds = Bounds::new(1, 4096, 1).unwrap();
        let mut counts = Vec::new();
        for gpus in [1, 2, 3] {
            let mut fleet = Fleet {
                gpus,
                rounds: Vec::new(),
            };
            let mut started = Vec::new();
            let result = run_sweep(Dimension::Batch, bounds, &mut fleet, &stop, &mut |e| {
                if let Event::Starting { step, value } = e {
                    started.push((step, value));
                }
            });
            assert_eq!(result.end, SweepEnd::Completed);
            assert_eq!(result.largest_fitted().unwrap().0.value, 945, "{gpus}");
            assert_eq!(result.smallest_out_of_memory(), Some(946), "{gpus}");
            // Steps are numbered in the order the points were started, one per point.
            let steps: Vec<usize> = result.points.iter().map(|p| p.step).collect();
            assert_eq!(steps, (1..=result.points.len()).collect::<Vec<_>>());
            assert_eq!(started.len(), result.points.len());
            counts.push(fleet.rounds.len());
        }
        // The model aims at the limit: a handful of rounds, fewer with more GPUs.
        assert!(counts[0] <= 4, "{counts:?}");
        assert!(
            counts[1] < counts[0] && counts[2] <= counts[1],
            "{counts:?}"
        );
    }
}
