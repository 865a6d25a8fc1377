//! The six caching-allocator counters the protocol reads around every measured step: a phase
//! row and each stage of the graph measurement hold one [`AllocatorCounters`] (flattened: the
//! JSON keeps the six keys side by side, `docs/PROTOCOL.md §4.3`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// PyTorch caching-allocator counters around one step, bytes, for this process and the chosen
/// GPU only (`torch.cuda.memory_allocated`, `memory_reserved`, `max_memory_allocated`,
/// `max_memory_reserved`; peaks reset at the step's start with `reset_peak_memory_stats`).
/// Allocated bytes are held by live tensors; reserved bytes are what the allocator holds from
/// the driver, allocated included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AllocatorCounters {
    /// Allocated bytes after the first synchronize, before the work.
    pub baseline_allocated_bytes: u64,
    /// Reserved bytes after the first synchronize, before the work.
    pub baseline_reserved_bytes: u64,
    /// Allocated bytes after the final synchronize (the step's result still alive).
    pub end_allocated_bytes: u64,
    /// Reserved bytes after the final synchronize.
    pub end_reserved_bytes: u64,
    /// Highest allocated bytes during the step (peak reset at its start).
    pub peak_allocated_bytes: u64,
    /// Highest reserved bytes during the step (peak reset at its start).
    pub peak_reserved_bytes: u64,
}

impl AllocatorCounters {
    /// The six values in document order (baseline, end, peak; allocated before reserved).
    pub fn all(&self) -> [u64; 6] {
        [
            self.baseline_allocated_bytes,
            self.baseline_reserved_bytes,
            self.end_allocated_bytes,
            self.end_reserved_bytes,
            self.peak_allocated_bytes,
            self.peak_reserved_bytes,
        ]
    }

    /// Every counter set to `bytes` (test documents, the longest document's bound).
    pub fn every(bytes: u64) -> AllocatorCounters {
        AllocatorCounters {
            baseline_allocated_bytes: bytes,
            baseline_reserved_bytes: bytes,
            end_allocated_bytes: bytes,
            end_reserved_bytes: bytes,
            peak_allocated_bytes: bytes,
            peak_reserved_bytes: bytes,
        }
    }
}
