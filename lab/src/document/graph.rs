//! The CUDA-graph floor (docs/PROTOCOL.md §4.6): the optional `graph` object of the measurement
//! document, how its statistics are computed from the raw timings, and its lines of the summary.
//!
//! After the five phases, when `--graph-replays N` is given, the worker (and
//! `mesure_memoire.py`) captures one forward into a CUDA graph and replays it. Procedure, the
//! same in both implementations: synchronize, read the counters, reset the peaks; on a side
//! stream from libtorch's pool run [`CAPTURE_WARMUP_FORWARDS`] forwards (each previous output
//! freed before the next pass, the last freed before capture), synchronize, capture one
//! forward (`capture_begin`, forward, `capture_end`, PyTorch's default private pool and global
//! capture mode), leave the side stream, synchronize and read the counters (`capture`). Then
//! reset the peaks and replay on the default stream: [`REPLAY_BATCHES`] batches of N replays
//! back to back, each batch between two CUDA events; then N single replays, each followed by a
//! synchronize, on the host clock; synchronize and read the counters (`replay`).
//!
//! PyTorch's documentation ("CUDA semantics → CUDA Graphs", `torch.cuda.graph`) asks for the
//! warm-up on a side stream before capture; unlike `torch.cuda.graph`, neither side calls
//! `empty_cache` before capture (the protocol keeps the allocator cache), and both order the
//! streams with a full synchronize instead of `wait_stream`.
//!
//! A graph keeps its own private memory pool: the intermediates of the captured forward live
//! in blocks that stay reserved for the graph as long as it exists, which is why `capture`
//! shows reserved bytes grow. Replays allocate nothing (`replay` end equals its baseline).

use super::AllocatorCounters;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// Forwards run on the side stream before capture (PyTorch's documented example uses three).
pub const CAPTURE_WARMUP_FORWARDS: u64 = 3;

/// Back-to-back batches of replays; median, min and max per forward are over these batches.
pub const REPLAY_BATCHES: u64 = 5;

/// Largest `--graph-replays` accepted: 10⁶ replays × 6 rounds of a 250 ms forward would
/// already take days; the bound only keeps the arithmetic far from overflow.
pub const MAX_REPLAYS: u64 = 1_000_000;

/// The `memory_pool` value: the captured forward's intermediates live in the graph's own pool.
pub const MEMORY_POOL: &str = "private";

/// The `graph` object of a measurement document (absent when `--graph-replays` was not given).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GraphSection {
    /// Always [`MEMORY_POOL`]: the graph keeps its own memory pool.
    #[schemars(extend("const" = MEMORY_POOL))]
    pub memory_pool: String,
    /// Forwards run on the side stream before capture ([`CAPTURE_WARMUP_FORWARDS`]).
    pub capture_warmup_forwards: u64,
    /// N: replays per back-to-back batch, and number of synchronised single replays.
    #[schemars(range(min = 1, max = MAX_REPLAYS))]
    pub replays: u64,
    /// Back-to-back batches ([`REPLAY_BATCHES`]).
    #[schemars(range(min = 1))]
    pub batches: u64,
    /// Per batch: CUDA-event time between the batch's two events / N, seconds per forward.
    #[schemars(length(min = 1), inner(range(min = 0)))]
    pub batch_gpu_seconds_per_forward: Vec<f64>,
    /// Median of `batch_gpu_seconds_per_forward`: the launch-free time of one forward.
    #[schemars(range(min = 0))]
    pub median_gpu_seconds_per_forward: f64,
    /// Smallest of `batch_gpu_seconds_per_forward`.
    #[schemars(range(min = 0))]
    pub min_gpu_seconds_per_forward: f64,
    /// Largest of `batch_gpu_seconds_per_forward`.
    #[schemars(range(min = 0))]
    pub max_gpu_seconds_per_forward: f64,
    /// Median host-clock time of one replay followed by a synchronize, seconds.
    #[schemars(range(min = 0))]
    pub synchronised_wall_seconds_median: f64,
    /// Smallest synchronised single replay, seconds.
    #[schemars(range(min = 0))]
    pub synchronised_wall_seconds_min: f64,
    /// Largest synchronised single replay, seconds.
    #[schemars(range(min = 0))]
    pub synchronised_wall_seconds_max: f64,
    /// Host clock around the side-stream warm-up and the capture, seconds.
    #[schemars(range(min = 0))]
    pub capture_wall_seconds: f64,
    /// Counters around warm-up and capture (the private pool appears here).
    pub capture: AllocatorCounters,
    /// Counters around all replays (replays allocate nothing).
    pub replay: AllocatorCounters,
}

/// Raw timings of a graph measurement, as the worker takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphTimings {
    /// N.
    pub replays: u64,
    /// CUDA-event seconds of each back-to-back batch of N replays.
    pub batch_seconds: Vec<f64>,
    /// Host seconds of each synchronised single replay.
    pub single_wall_seconds: Vec<f64>,
    /// Host seconds of warm-up and capture.
    pub capture_wall_seconds: f64,
}

use super::median;

fn min_max(values: &[f64]) -> Option<(f64, f64)> {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    finite.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

impl GraphSection {
    /// The section from raw timings and the two counter sets. `None` when N is 0 or a list is
    /// empty or has no finite value.
    pub fn from_timings(
        timings: &GraphTimings,
        capture: AllocatorCounters,
        replay: AllocatorCounters,
    ) -> Option<Self> {
        if timings.replays == 0 {
            return None;
        }
        let n = timings.replays as f64;
        let per_forward: Vec<f64> = timings.batch_seconds.iter().map(|s| s / n).collect();
        let (min, max) = min_max(&per_forward)?;
        let (wall_min, wall_max) = min_max(&timings.single_wall_seconds)?;
        Some(GraphSection {
            memory_pool: MEMORY_POOL.to_owned(),
            capture_warmup_forwards: CAPTURE_WARMUP_FORWARDS,
            replays: timings.replays,
            batches: per_forward.len() as u64,
            median_gpu_seconds_per_forward: median(&per_forward)?,
            batch_gpu_seconds_per_forward: per_forward,
            min_gpu_seconds_per_forward: min,
            max_gpu_seconds_per_forward: max,
            synchronised_wall_seconds_median: median(&timings.single_wall_seconds)?,
            synchronised_wall_seconds_min: wall_min,
            synchronised_wall_seconds_max: wall_max,
            capture_wall_seconds: timings.capture_wall_seconds,
            capture,
            replay,
        })
    }

    /// Problems of a section read from a file, one line each (empty when it is consistent):
    /// min ≤ median ≤ max, one per-forward time per batch, allocated never above reserved.
    pub fn problems(&self) -> Vec<String> {
        let mut found = Vec::new();
        let check = super::phase::check_seconds;
        for (j, v) in self.batch_gpu_seconds_per_forward.iter().enumerate() {
            found.extend(
                check(
                    &format!("graph.batch_gpu_seconds_per_forward[{j}]"),
                    *v,
                    true,
                )
                .err(),
            );
        }
        for (field, value, zero) in [
            (
                "median_gpu_seconds_per_forward",
                self.median_gpu_seconds_per_forward,
                true,
            ),
            (
                "min_gpu_seconds_per_forward",
                self.min_gpu_seconds_per_forward,
                true,
            ),
            (
                "max_gpu_seconds_per_forward",
                self.max_gpu_seconds_per_forward,
                true,
            ),
            (
                "synchronised_wall_seconds_median",
                self.synchronised_wall_seconds_median,
                false,
            ),
            (
                "synchronised_wall_seconds_min",
                self.synchronised_wall_seconds_min,
                false,
            ),
            (
                "synchronised_wall_seconds_max",
                self.synchronised_wall_seconds_max,
                false,
            ),
            ("capture_wall_seconds", self.capture_wall_seconds, false),
        ] {
            found.extend(check(&format!("graph.{field}"), value, zero).err());
        }
        if self.replays == 0 || self.replays > MAX_REPLAYS {
            found.push(format!(
                "graph.replays is {}, expected 1 to {MAX_REPLAYS}",
                self.replays
            ));
        }
        if self.batch_gpu_seconds_per_forward.len() as u64 != self.batches {
            found.push(format!(
                "graph.batches is {} but graph.batch_gpu_seconds_per_forward has {} values",
                self.batches,
                self.batch_gpu_seconds_per_forward.len()
            ));
        }
        let ordered = |lo: f64, mid: f64, hi: f64| lo <= mid && mid <= hi && lo >= 0.0;
        if !ordered(
            self.min_gpu_seconds_per_forward,
            self.median_gpu_seconds_per_forward,
            self.max_gpu_seconds_per_forward,
        ) {
            found.push("graph: min ≤ median ≤ max GPU seconds per forward does not hold".into());
        }
        if !ordered(
            self.synchronised_wall_seconds_min,
            self.synchronised_wall_seconds_median,
            self.synchronised_wall_seconds_max,
        ) {
            found.push("graph: min ≤ median ≤ max synchronised wall seconds does not hold".into());
        }
        for (name, c) in [("capture", &self.capture), ("replay", &self.replay)] {
            let pairs = [
                (
                    c.baseline_allocated_bytes,
                    c.baseline_reserved_bytes,
                    "baseline",
                ),
                (c.end_allocated_bytes, c.end_reserved_bytes, "end"),
                (c.peak_allocated_bytes, c.peak_reserved_bytes, "peak"),
            ];
            for (allocated, reserved, which) in pairs {
                if allocated > reserved {
                    found.push(format!(
                        "graph.{name}: {which} allocated {allocated} B exceeds {which} reserved {reserved} B"
                    ));
                }
            }
        }
        found
    }
}

/// The summary lines about the graph floor: graph time per forward, eager vs graph and the
/// launch overhead between them (when the eager median GPU time `eager_gpu_seconds` is known),
/// achieved FLOP/s from the graph time, and what the capture reserved.
pub fn summary_text(graph: &GraphSection, eager_gpu_seconds: Option<f64>, flops: u64) -> String {
    let mut out = String::new();
    let us = |s: f64| s * 1e6;
    let _ = writeln!(
        out,
        "graph floor: {} batches of {} CUDA-graph replays, median {:.2} µs per forward (min {:.2}, max {:.2}); \
         one replay + synchronize: median wall {:.2} µs",
        graph.batches,
        graph.replays,
        us(graph.median_gpu_seconds_per_forward),
        us(graph.min_gpu_seconds_per_forward),
        us(graph.max_gpu_seconds_per_forward),
        us(graph.synchronised_wall_seconds_median),
    );
    if let Some(eager) = eager_gpu_seconds {
        let overhead = eager - graph.median_gpu_seconds_per_forward;
        let ratio = if graph.median_gpu_seconds_per_forward > 0.0 {
            format!("{:.1}×", eager / graph.median_gpu_seconds_per_forward)
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            out,
            "eager vs graph: {:.2} µs vs {:.2} µs per forward (GPU events, medians); launch overhead {:.2} µs per forward (eager = {ratio} graph)",
            us(eager),
            us(graph.median_gpu_seconds_per_forward),
            us(overhead),
        );
    }
    if graph.median_gpu_seconds_per_forward > 0.0 {
        let _ = writeln!(
            out,
            "achieved by graph time: {:.3} TFLOP/s (the launch-free figure to compare across GPUs)",
            flops as f64 / graph.median_gpu_seconds_per_forward / 1e12
        );
    }
    let grown = i128::from(graph.capture.end_reserved_bytes)
        - i128::from(graph.capture.baseline_reserved_bytes);
    let held = i128::from(graph.capture.end_allocated_bytes)
        - i128::from(graph.capture.baseline_allocated_bytes);
    let _ = writeln!(
        out,
        "graph memory: warm-up and capture left {held} B more allocated and {grown} B more reserved \
         (the graph keeps its own private memory pool while it exists); replays: end allocated {} B = baseline {} B",
        graph.replay.end_allocated_bytes, graph.replay.baseline_allocated_bytes
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(base: u64, end: u64) -> AllocatorCounters {
        AllocatorCounters {
            baseline_allocated_bytes: base,
            baseline_reserved_bytes: base * 2,
            end_allocated_bytes: end,
            end_reserved_bytes: end * 2,
            peak_allocated_bytes: end,
            peak_reserved_bytes: end * 2,
        }
    }

    fn timings() -> GraphTimings {
        GraphTimings {
            replays: 1000,
            batch_seconds: vec![0.0076, 0.0071, 0.0080, 0.0075, 0.0090],
            single_wall_seconds: vec![14e-6, 13e-6, 20e-6, 15e-6],
            capture_wall_seconds: 0.05,
        }
    }

    #[test]
    fn statistics_are_per_forward_over_batches() {
        let g = GraphSection::from_timings(&timings(), counters(10, 20), counters(20, 20)).unwrap();
        assert_eq!(g.batches, 5);
        assert_eq!(g.replays, 1000);
        assert!((g.median_gpu_seconds_per_forward - 7.6e-6).abs() < 1e-15);
        assert!((g.min_gpu_seconds_per_forward - 7.1e-6).abs() < 1e-15);
        assert!((g.max_gpu_seconds_per_forward - 9.0e-6).abs() < 1e-15);
        // Even count: mean of the two middle values, as statistics.median.
        assert!((g.synchronised_wall_seconds_median - 14.5e-6).abs() < 1e-15);
        assert_eq!(g.synchronised_wall_seconds_min, 13e-6);
        assert_eq!(g.synchronised_wall_seconds_max, 20e-6);
        assert_eq!(g.memory_pool, "private");
        assert!(g.problems().is_empty(), "{:?}", g.problems());
    }

    #[test]
    fn empty_or_zero_inputs_give_no_section() {
        let mut t = timings();
        t.replays = 0;
        assert!(GraphSection::from_timings(&t, counters(1, 1), counters(1, 1)).is_none());
        let mut t = timings();
        t.batch_seconds.clear();
        assert!(GraphSection::from_timings(&t, counters(1, 1), counters(1, 1)).is_none());
        let mut t = timings();
        t.single_wall_seconds = vec![f64::NAN];
        assert!(GraphSection::from_timings(&t, counters(1, 1), counters(1, 1)).is_none());
    }

    #[test]
    fn problems_name_each_inconsistency() {
        let mut g =
            GraphSection::from_timings(&timings(), counters(10, 20), counters(20, 20)).unwrap();
        g.min_gpu_seconds_per_forward = 1.0;
        g.batches = 4;
        g.replay.end_allocated_bytes = u64::MAX;
        let found = g.problems().join("\n");
        assert!(found.contains("min ≤ median ≤ max GPU"), "{found}");
        assert!(found.contains("graph.batches is 4 but"), "{found}");
        assert!(found.contains("graph.replay: end allocated"), "{found}");
        g.replays = 0;
        assert!(g.problems().join("\n").contains("graph.replays is 0"));
    }

    #[test]
    fn summary_shows_overhead_and_flops() {
        let g =
            GraphSection::from_timings(&timings(), counters(100, 612), counters(612, 612)).unwrap();
        let text = summary_text(&g, Some(36.6e-6), 1_048_576);
        assert!(
            text.contains("median 7.60 µs per forward (min 7.10, max 9.00)"),
            "{text}"
        );
        assert!(
            text.contains("launch overhead 29.00 µs per forward (eager = 4.8× graph)"),
            "{text}"
        );
        // 1,048,576 FLOP / 7.6 µs = 0.138 TFLOP/s
        assert!(
            text.contains("achieved by graph time: 0.138 TFLOP/s"),
            "{text}"
        );
        assert!(
            text.contains("left 512 B more allocated and 1024 B more reserved"),
            "{text}"
        );
        assert!(!summary_text(&g, None, 1).contains("eager vs graph"));
    }

    #[test]
    fn json_names_are_fixed() {
        let g = GraphSection::from_timings(&timings(), counters(1, 2), counters(2, 2)).unwrap();
        let value = serde_json::to_value(&g).unwrap();
        for key in [
            "replays",
            "median_gpu_seconds_per_forward",
            "min_gpu_seconds_per_forward",
            "max_gpu_seconds_per_forward",
            "synchronised_wall_seconds_median",
            "memory_pool",
            "capture",
            "replay",
        ] {
            assert!(value.get(key).is_some(), "{key}");
        }
        let back: GraphSection = serde_json::from_value(value).unwrap();
        assert_eq!(back, g);
    }
}
