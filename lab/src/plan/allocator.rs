//! A replay of PyTorch's CUDA caching allocator, to predict the bytes a model's tensors take
//! once they are on a GPU (`torch.cuda.memory_allocated()` and `memory_reserved()`).
//!
//! The allocator hands out *blocks* carved from *segments* it gets from `cudaMalloc`; what
//! `memory_allocated()` counts is the sum of the live blocks' sizes, which can exceed the
//! tensors' bytes. Rules (source: `c10/cuda/CUDACachingAllocator.cpp` in PyTorch 2.x,
//! `round_size`, `get_pool`, `get_allocation_size`, `get_free_block`, `should_split`; with the
//! default configuration: no `PYTORCH_CUDA_ALLOC_CONF`, expandable segments off):
//! - a request is rounded up to a multiple of 512 bytes (at least 512);
//! - requests of at most 1 MiB use the small pool, larger ones the large pool;
//! - a request is served by the smallest free block of its pool that holds it (best fit);
//!   when none does, a new segment is reserved: 2 MiB for the small pool, 20 MiB for requests
//!   under 10 MiB, else the request rounded up to a multiple of 2 MiB;
//! - the block is split and the rest returned to the pool only when the rest is at least
//!   512 bytes (small pool) or more than 1 MiB (large pool); otherwise the whole block is
//!   handed out and counted as allocated.
//!
//! So a 15,925,248-byte matrix of Gemma-3-1B sits in a 16 MiB block (851,968 bytes more), and
//! 1–10 MiB tensors share 20 MiB segments in an order-dependent way. Replayed over the
//! tensors in the order a model materialises them ([`super::layout`]), this predicts the
//! allocated bytes of the nine models measured on the H200 to the byte
//! (`examples/h200/plan/`).
//!
//! Only allocations are replayed (a model's weights are never freed while it is loaded); the
//! order among blocks of equal size does not change any total, so free blocks are kept as a
//! multiset of sizes per pool.

use std::collections::BTreeMap;

/// Requests are rounded up to a multiple of this many bytes (`kMinBlockSize`).
pub const MIN_BLOCK_BYTES: u64 = 512;
/// Largest request served by the small pool, bytes (`kSmallSize`, 1 MiB).
pub const SMALL_REQUEST_BYTES: u64 = 1 << 20;
/// Segment size of the small pool, bytes (`kSmallBuffer`, 2 MiB).
pub const SMALL_SEGMENT_BYTES: u64 = 2 << 20;
/// Segment size for large-pool requests under [`MIN_LARGE_ALLOC_BYTES`] (`kLargeBuffer`, 20 MiB).
pub const LARGE_SEGMENT_BYTES: u64 = 20 << 20;
/// Requests from this size up get a segment of their own size (`kMinLargeAlloc`, 10 MiB).
pub const MIN_LARGE_ALLOC_BYTES: u64 = 10 << 20;
/// Those segments are rounded up to a multiple of this (`kRoundLarge`, 2 MiB).
pub const ROUND_LARGE_BYTES: u64 = 2 << 20;

/// The allocator's state: free blocks per pool and the running totals, bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CachingAllocator {
    /// Free blocks of the small pool: size -> count.
    small: BTreeMap<u64, u64>,
    /// Free blocks of the large pool: size -> count.
    large: BTreeMap<u64, u64>,
    allocated: u128,
    reserved: u128,
}

impl CachingAllocator {
    /// A fresh allocator: nothing reserved.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allocates one tensor of `bytes` bytes (0 is allowed and, like PyTorch, takes nothing).
    pub fn allocate(&mut self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let size = round_size(bytes);
        let small = size <= SMALL_REQUEST_BYTES;
        let pool = if small {
            &mut self.small
        } else {
            &mut self.large
        };
        let block = match pool.range(size..).next().map(|(s, _)| *s) {
            Some(found) => {
                take(pool, found);
                found
            }
            None => {
                let segment = segment_size(size);
                self.reserved += u128::from(segment);
                segment
            }
        };
        let rest = block - size;
        let split = if small {
            rest >= MIN_BLOCK_BYTES
        } else {
            rest > SMALL_REQUEST_BYTES
        };
        if split {
            *pool.entry(rest).or_insert(0) += 1;
            self.allocated += u128::from(size);
        } else {
            self.allocated += u128::from(block);
        }
    }

    /// Sum of the live blocks' sizes, bytes: what `torch.cuda.memory_allocated()` reports.
    pub fn allocated_bytes(&self) -> u128 {
        self.allocated
    }

    /// Sum of the segments, bytes: what `torch.cuda.memory_reserved()` reports.
    pub fn reserved_bytes(&self) -> u128 {
        self.reserved
    }
}

/// A request's size after rounding (`round_size`): a multiple of 512, at least 512.
pub fn round_size(bytes: u64) -> u64 {
    bytes
        .div_ceil(MIN_BLOCK_BYTES)
        .max(1)
        .saturating_mul(MIN_BLOCK_BYTES)
}

/// Bytes reserved from the driver for a request of `size` bytes (`get_allocation_size`).
pub fn segment_size(size: u64) -> u64 {
    if size <= SMALL_REQUEST_BYTES {
        SMALL_SEGMENT_BYTES
    } else if size < MIN_LARGE_ALLOC_BYTES {
        LARGE_SEGMENT_BYTES
    } else {
        size.div_ceil(ROUND_LARGE_BYTES)
            .saturating_mul(ROUND_LARGE_BYTES)
    }
}

fn take(pool: &mut BTreeMap<u64, u64>, size: u64) {
    if let Some(count) = pool.get_mut(&size) {
        *count -= 1;
        if *count == 0 {
            pool.remove(&size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(sizes: &[u64]) -> (u128, u128) {
        let mut a = CachingAllocator::new();
        for s in sizes {
            a.allocate(*s);
        }
        (a.allocated_bytes(), a.reserved_bytes())
    }

    #[test]
    fn rounding_and_segments() {
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(512), 512);
        assert_eq!(round_size(513), 1024);
        // No tensor comes near; the arithmetic saturates rather than wrapping.
        assert_eq!(round_size(u64::MAX), u64::MAX);
        assert_eq!(segment_size(512), 2 << 20);
        assert_eq!(segment_size(1 << 20), 2 << 20);
        assert_eq!(segment_size((1 << 20) + 512), 20 << 20);
        assert_eq!(segment_size((10 << 20) - 512), 20 << 20);
        assert_eq!(segment_size(10 << 20), 10 << 20);
        assert_eq!(segment_size((10 << 20) + 512), 12 << 20);
    }

    #[test]
    fn small_tensors_cost_their_rounded_size() {
        // 1152 bf16 elements (a Gemma-3-1B norm) take 2560 bytes; 4 fp32 take 512.
        assert_eq!(replay(&[2304, 16]), (2560 + 512, 2 << 20));
        assert_eq!(replay(&[0]), (0, 0));
    }

    #[test]
    fn a_rest_of_at_most_one_mib_stays_in_the_block() {
        // Gemma-3-1B's MLP matrix, 1152 x 6912 bf16: a 16 MiB segment, rest 851,968 B kept.
        assert_eq!(replay(&[15_925_248]), (16 << 20, 16 << 20));
        // Llama-3.2-1B's embedding, 128256 x 2048 bf16: rest of exactly 1 MiB is not split.
        assert_eq!(replay(&[525_336_576]), (526_385_152, 526_385_152));
        // A rest just over 1 MiB is split off.
        assert_eq!(
            replay(&[(12 << 20) - (1 << 20) - 512]),
            ((11 << 20) - 512, 12 << 20)
        );
    }

    #[test]
    fn medium_tensors_share_twenty_mib_segments_best_fit() {
        // Gemma-3-1B layer: q 2.25 MiB and o 2.25 MiB from one 20 MiB segment leave
        // 16,252,928 B free; the gate matrix (15,925,248 B) takes that whole block (rest
        // 327,680 B); up and down get 16 MiB segments of their own.
        let q = 2_359_296;
        let mlp = 15_925_248;
        let (allocated, reserved) = replay(&[q, q, mlp, mlp, mlp]);
        assert_eq!(allocated, 2 * q as u128 + 16_252_928 + 2 * (16 << 20));
        assert_eq!(reserved, (20 << 20) + 2 * (16 << 20));
        // Order matters: the three matrices first leave no room for reuse.
        let (allocated, _) = replay(&[mlp, mlp, mlp, q, q]);
        assert_eq!(allocated, 3 * (16 << 20) + 2 * q as u128);
    }

    #[test]
    fn best_fit_takes_the_smallest_block_that_holds_the_request() {
        // Two 20 MiB segments with rests of 18 MiB and 12 MiB; a 5 MiB request goes to the
        // 12 MiB rest, leaving 7 MiB; a 7 MiB request then takes that 7 MiB block exactly.
        let mut a = CachingAllocator::new();
        a.allocate(2 << 20);
        a.allocate(8 << 20); // served by the 18 MiB rest of the first segment: rest 10 MiB
        a.allocate(9 << 20); // takes the 10 MiB rest, rest 1 MiB not split: 10 MiB counted
        assert_eq!(a.allocated_bytes(), (2 + 8 + 10) << 20);
        assert_eq!(a.reserved_bytes(), 20 << 20);
        a.allocate(3 << 20); // a new 20 MiB segment, rest 17 MiB
        a.allocate(5 << 20); // from the 17 MiB rest, rest 12 MiB
        a.allocate(12 << 20); // exactly the 12 MiB rest
        assert_eq!(a.allocated_bytes(), (20 + 3 + 5 + 12) << 20);
        assert_eq!(a.reserved_bytes(), 40 << 20);
    }
}
