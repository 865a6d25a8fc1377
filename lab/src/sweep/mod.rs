//! Sweeping one dimension of the measurement up to the memory limit.
//!
//! The search runs one fresh measurement per point, in rounds of one point per GPU; which
//! values it measures is [`search`]'s: doubling then bisection (or a k-ary split), or,
//! with the memory model, a prediction of the limit checked by the points around it, until the
//! largest value that fitted and the smallest that ran out of memory are at most `resolution`
//! apart. The measurement itself is behind [`MeasurementRunner`]: [`WorkerRunner`] calls
//! [`crate::measure::run_measured`] (the one measurement path, which `lab measure` uses too) once per
//! point, so every point runs in a fresh worker process; tests use a fake runner, or a fake
//! worker through the binary. Out of memory is the worker's typed error
//! ([`Error::OutOfMemory`](crate::Error::OutOfMemory)), never a message matched as text.
//!
//! A point that runs out of memory is a result, not a failure. Any other failure, or a stop
//! request (Ctrl-C), ends the sweep and keeps the points already finished.
//!
//! The files: [`search`] which values to measure; `point` what one point measured;
//! `runner` the measurement of a point through the worker; `summary` the `summary.csv`
//! of a sweep; [`render`] the result as text and JSON for `lab sweep`.

mod point;
pub mod render;
mod runner;
pub mod search;
mod summary;
#[cfg(test)]
mod tests;

pub use point::{share, FittedPoint, PointOutcome, SweepPoint};
pub use runner::WorkerRunner;
pub use search::Bounds;
pub use summary::{summary_csv, SUMMARY_HEADER};

use crate::document::Configuration;
use crate::Result;
use search::{Observation, Search};
use serde::Serialize;
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

/// Runs one measurement with the varied dimension set to a value.
pub trait MeasurementRunner {
    /// Measures one point. Out of memory is `Ok(PointOutcome::OutOfMemory)`; any other failure
    /// is an `Err` (a missing prerequisite as [`Error::Usage`](crate::Error::Usage)) and ends the sweep.
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
    /// of the point at `value`, for the search's memory model ([`crate::sweep::search`]); `None` (the
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

/// Runs a sweep: rounds of points chosen by [`crate::sweep::search::Search`] (one point per GPU of
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
