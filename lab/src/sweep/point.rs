//! What one point of a sweep measured: fitted (with its peaks and share of the device) or out
//! of memory.

use crate::document::Document;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;
use std::path::PathBuf;

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
    /// what the search's memory model takes as the capacity ([`crate::sweep::search`]).
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
