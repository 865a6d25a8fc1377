//! Where a sweep measures next (docs/PROTOCOL.md §4.8): the search for the largest value of one
//! dimension that fits in GPU memory, given the points measured so far.
//!
//! Without a memory model the search is the plain one: double from `from` until a point runs
//! out of memory (or `to` is reached), then split the bracket between the largest fitted and
//! the smallest out-of-memory value. With k GPUs, k values are measured per round: k doublings,
//! or k points spread evenly inside the bracket (k-ary instead of binary search).
//!
//! With a memory model (the analytic bytes of [`crate::document::SyntheticModel`] for any value,
//! and the GPU's free memory when the worker started) the search predicts the limit instead
//! of bisecting toward it. The model is calibrated on the largest fitted point: measured peak
//! reserved − analytic bytes there is the part the analysis leaves out (cuBLAS workspaces,
//! allocator rounding), assumed constant. The capacity is the free memory at the worker's
//! start, lowered below the predicted need of every value that ran out of memory. The
//! predicted limit L is the largest value whose predicted need fits the capacity. The search
//! then measures L + resolution (expected out of memory: such a point fails early and costs
//! little) and L (expected to fit: the one expensive point). A point that contradicts the
//! prediction narrows the bracket like any other; after three rounds in a row that all ran out
//! of memory the search gallops down from the out-of-memory side (1, 2, 4, ... resolutions
//! below it), after two that all fitted it doubles or splits the bracket, so a
//! wrong model costs a few more points, never a wrong answer: the limit is always the largest
//! value measured to fit next to one measured not to.

use crate::{Error, Result};
use serde::Serialize;

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

/// What one measured point tells the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// The point fitted.
    Fitted {
        /// Largest peak reserved over its phases, bytes.
        peak_reserved_bytes: u64,
        /// Free GPU memory when its worker started (after CUDA initialisation), bytes.
        free_memory_bytes: Option<u64>,
    },
    /// The point ran out of memory.
    OutOfMemory,
}

/// The state of a search: what was measured, and what follows from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    bounds: Bounds,
    /// Largest value that fitted, with its peak reserved bytes.
    fitted: Option<(u64, u64)>,
    /// Smallest value that ran out of memory.
    out_of_memory: Option<u64>,
    /// Every out-of-memory value (each bounds the capacity from above).
    failures: Vec<u64>,
    /// Smallest free memory reported by a worker, bytes.
    free_memory: Option<u64>,
    /// Consecutive rounds in which every point fitted (positive) or every point ran out of
    /// memory (negative); 0 after a round with both.
    streak: i32,
}

/// The analytic bytes of a configuration with the varied dimension at `value` (`None` when the
/// sizes overflow): what [`Search`] calibrates and extrapolates.
pub type Model<'a> = &'a dyn Fn(u64) -> Option<u64>;

impl Search {
    /// A search over `bounds` with nothing measured yet.
    pub fn new(bounds: Bounds) -> Self {
        Search {
            bounds,
            fitted: None,
            out_of_memory: None,
            failures: Vec::new(),
            free_memory: None,
            streak: 0,
        }
    }

    /// The largest value that fitted so far.
    pub fn largest_fitted(&self) -> Option<u64> {
        self.fitted.map(|(v, _)| v)
    }

    /// The smallest value that ran out of memory so far.
    pub fn smallest_out_of_memory(&self) -> Option<u64> {
        self.out_of_memory
    }

    /// Records one round of results.
    pub fn record(&mut self, results: &[(u64, Observation)]) {
        let fits = results
            .iter()
            .filter(|(_, o)| matches!(o, Observation::Fitted { .. }))
            .count();
        self.streak = match (fits, results.len() - fits) {
            (0, 0) => self.streak,
            (_, 0) => self.streak.max(0) + 1,
            (0, _) => self.streak.min(0) - 1,
            _ => 0,
        };
        for &(value, observation) in results {
            match observation {
                Observation::Fitted {
                    peak_reserved_bytes,
                    free_memory_bytes,
                } => {
                    if self.fitted.is_none_or(|(v, _)| value > v) {
                        self.fitted = Some((value, peak_reserved_bytes));
                    }
                    if let Some(free) = free_memory_bytes {
                        self.free_memory = Some(self.free_memory.map_or(free, |f| f.min(free)));
                    }
                }
                Observation::OutOfMemory => {
                    self.out_of_memory = Some(self.out_of_memory.map_or(value, |o| o.min(value)));
                    self.failures.push(value);
                }
            }
        }
    }

    /// Whether the search is over: nothing fitted while something ran out of memory, `to`
    /// fitted, or the bracket is within the resolution.
    pub fn finished(&self) -> bool {
        match (self.largest_fitted(), self.out_of_memory) {
            (None, None) => false,
            (None, Some(_)) => true,
            (Some(lo), None) => lo >= self.bounds.to,
            (Some(lo), Some(hi)) => hi <= lo || hi - lo <= self.bounds.resolution,
        }
    }

    /// The predicted limit: the largest value in [largest fitted, upper) whose calibrated need
    /// fits the capacity. `None` without a fitted point, a free-memory figure or a model.
    pub fn predicted_limit(&self, model: Option<Model<'_>>) -> Option<u64> {
        let model = model?;
        let (lo, peak) = self.fitted?;
        let free = self.free_memory?;
        let offset = i128::from(peak) - i128::from(model(lo)?);
        let need = |v: u64| model(v).map(|bytes| i128::from(bytes) + offset);
        let mut capacity = i128::from(free);
        for &failed in &self.failures {
            if let Some(n) = need(failed) {
                capacity = capacity.min(n - 1);
            }
        }
        let upper = self
            .out_of_memory
            .unwrap_or_else(|| self.bounds.to.saturating_add(1));
        // Largest v in [lo, upper) with need(v) <= capacity; need is monotone in v.
        let (mut good, mut bad) = (lo, upper);
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            match need(mid) {
                Some(n) if n <= capacity => good = mid,
                _ => bad = mid,
            }
        }
        Some(good)
    }

    /// The next values to measure, at most `k` (one per GPU), in increasing order, each
    /// strictly between the largest fitted and the smallest out-of-memory value and within
    /// `from..=to`; empty when the search is over. The prediction is set aside after three
    /// rounds in a row that all ran out of memory (cheap points; then it gallops down from the
    /// out-of-memory side) or two that all fitted (then it doubles or splits the bracket).
    pub fn next(&self, k: usize, model: Option<Model<'_>>) -> Vec<u64> {
        let k = k.max(1);
        if self.finished() {
            return Vec::new();
        }
        let Bounds {
            from,
            to,
            resolution,
        } = self.bounds;
        let Some(lo) = self.largest_fitted() else {
            // Nothing measured yet: from, then doublings.
            return doublings(from, to, k);
        };
        let hi = self.out_of_memory;
        let upper = hi.unwrap_or_else(|| to.saturating_add(1));
        let inside = |v: u64| v > lo && v < upper && v <= to;
        let limit = self.predicted_limit(model);
        let predicted = limit.filter(|_| self.streak > -3 && self.streak < 2);
        let mut values: Vec<u64> = Vec::new();
        let push = |v: u64, values: &mut Vec<u64>| {
            if inside(v) && !values.contains(&v) && values.len() < k {
                values.push(v);
            }
        };
        if let Some(limit) = predicted {
            let above = limit.saturating_add(resolution);
            if hi.is_none() && limit >= to {
                push(to, &mut values);
            }
            // The cheap confirmation above L first, unless an out-of-memory point already
            // sits within the resolution above it.
            if upper > above {
                push(above.min(to), &mut values);
            }
            push(limit, &mut values);
            let mut step = resolution;
            while values.len() < k && step < upper {
                push(limit.saturating_sub(step), &mut values);
                step = step.saturating_mul(2);
                if limit.saturating_sub(step) <= lo {
                    break;
                }
            }
        } else if limit.is_some() && self.streak <= -3 {
            // Only a model that kept overshooting gallops; without one the search bisects.
            if let Some(hi) = hi {
                // Gallop down from the out-of-memory side: 1, 2, 4, ... resolutions below it.
                let mut step = resolution.saturating_mul(1 << (-self.streak - 3).min(40));
                while values.len() < k {
                    let v = hi.saturating_sub(step).max(lo + 1);
                    push(v, &mut values);
                    if v == lo + 1 {
                        break;
                    }
                    step = step.saturating_mul(2);
                }
            }
        }
        if values.is_empty() {
            values = match hi {
                None => doublings(lo.saturating_mul(2).min(to), to, k),
                Some(hi) => spread(lo, hi, k),
            };
        }
        values.sort_unstable();
        values.dedup();
        values
    }
}

/// `first`, 2·`first`, 4·`first`, ... at most `k` values, capped at `to`.
fn doublings(first: u64, to: u64, k: usize) -> Vec<u64> {
    let mut values = Vec::new();
    let mut v = first.min(to);
    while values.len() < k {
        if values.last() == Some(&v) {
            break;
        }
        values.push(v);
        v = v.saturating_mul(2).min(to);
    }
    values
}

/// `k` points spread evenly strictly inside (lo, hi): lo + j·(hi − lo)/(k + 1), j = 1..=k
/// (the midpoint for k = 1), duplicates dropped.
fn spread(lo: u64, hi: u64, k: usize) -> Vec<u64> {
    let gap = u128::from(hi - lo);
    let parts = k as u128 + 1;
    let mut values: Vec<u64> = (1..parts)
        .map(|j| lo + (gap * j / parts) as u64)
        .filter(|v| *v > lo && *v < hi)
        .collect();
    values.dedup();
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake GPU: `bytes(v)` analytic need, plus a constant the analysis leaves out; a value
    /// fits when its real need is within `capacity`. Runs the search and returns the rounds.
    struct Gpu {
        capacity: u64,
        free: u64,
        extra: u64,
        per_value: u64,
    }

    impl Gpu {
        fn bytes(&self, v: u64) -> Option<u64> {
            v.checked_mul(self.per_value)?.checked_add(1_000_000)
        }
        fn real(&self, v: u64) -> u64 {
            self.bytes(v).unwrap() + self.extra
        }
        fn limit(&self) -> u64 {
            (self.capacity - 1_000_000 - self.extra) / self.per_value
        }
    }

    fn run(gpu: &Gpu, bounds: Bounds, k: usize, with_model: bool) -> (u64, Vec<Vec<u64>>) {
        let mut search = Search::new(bounds);
        let model = |v: u64| gpu.bytes(v);
        let mut rounds: Vec<Vec<u64>> = Vec::new();
        loop {
            let values = search.next(k, with_model.then_some(&model as Model<'_>));
            if values.is_empty() {
                break;
            }
            assert!(values.len() <= k);
            let results: Vec<(u64, Observation)> = values
                .iter()
                .map(|&v| {
                    let o = if gpu.real(v) <= gpu.capacity {
                        Observation::Fitted {
                            peak_reserved_bytes: gpu.real(v),
                            free_memory_bytes: Some(gpu.free),
                        }
                    } else {
                        Observation::OutOfMemory
                    };
                    (v, o)
                })
                .collect();
            search.record(&results);
            for v in &values {
                assert!(
                    !rounds.concat().contains(v),
                    "{v} measured twice: {rounds:?}"
                );
            }
            rounds.push(values);
            assert!(rounds.len() < 200, "no end: {rounds:?}");
        }
        (search.largest_fitted().unwrap_or(0), rounds)
    }

    fn h200() -> Gpu {
        // The batch sweep at width 4096, context 2048, float32: about 302 MB per batch, the
        // limit near 492 on 150 GB (numbers of the same order as BENCHMARKS.md's sweep).
        Gpu {
            capacity: 149_150_000_000,
            free: 149_600_000_000,
            extra: 35_000_000,
            per_value: 302_000_000,
        }
    }

    #[test]
    fn without_a_model_it_doubles_then_bisects() {
        let gpu = h200();
        let bounds = Bounds {
            from: 1,
            to: 1024,
            resolution: 1,
        };
        let (limit, rounds) = run(&gpu, bounds, 1, false);
        assert_eq!(limit, gpu.limit());
        let flat: Vec<u64> = rounds.concat();
        assert_eq!(&flat[..11], &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 384]);
        assert_eq!(flat.len(), 18);
    }

    #[test]
    fn the_model_finds_the_same_limit_in_few_points() {
        let gpu = h200();
        let bounds = Bounds {
            from: 1,
            to: 1024,
            resolution: 1,
        };
        let (limit, rounds) = run(&gpu, bounds, 1, true);
        assert_eq!(limit, gpu.limit());
        let flat: Vec<u64> = rounds.concat();
        assert!(flat.len() <= 5, "{flat:?}");
        // Only one point at or below the limit costs a full measurement near the limit.
        let near: Vec<&u64> = flat.iter().filter(|v| **v > 400 && **v <= limit).collect();
        assert_eq!(near, [&limit], "{flat:?}");
    }

    #[test]
    fn two_gpus_take_fewer_rounds() {
        let gpu = h200();
        let bounds = Bounds {
            from: 1,
            to: 1024,
            resolution: 1,
        };
        let (one, rounds_one) = run(&gpu, bounds, 1, true);
        let (two, rounds_two) = run(&gpu, bounds, 2, true);
        assert_eq!(one, two);
        assert!(
            rounds_two.len() < rounds_one.len(),
            "{rounds_one:?} {rounds_two:?}"
        );
        let (plain_one, plain_rounds_one) = run(&gpu, bounds, 1, false);
        let (plain_two, plain_rounds_two) = run(&gpu, bounds, 2, false);
        assert_eq!((plain_one, plain_two), (one, one));
        assert!(plain_rounds_two.len() < plain_rounds_one.len());
        assert!(rounds_two.iter().all(|r| r.len() <= 2));
    }

    #[test]
    fn every_limit_is_found_with_any_model_error_and_any_k() {
        // The model may be wrong in either direction (the real extra bytes differ from what the
        // first point suggests, free memory misreported): the answer must not change.
        for per_value in [1_000u64, 7_919, 65_536] {
            for capacity in [2_000_000u64, 3_333_333, 9_999_999] {
                for (free, extra) in [
                    (capacity, 0u64),
                    (capacity * 2, 10_000),
                    (capacity / 2, 500),
                ] {
                    for k in 1..=4 {
                        for resolution in [1u64, 3] {
                            let gpu = Gpu {
                                capacity,
                                free,
                                extra,
                                per_value,
                            };
                            let bounds = Bounds {
                                from: 1,
                                to: 5_000,
                                resolution,
                            };
                            let expected = gpu.limit().min(5_000);
                            let (got, rounds) = run(&gpu, bounds, k, true);
                            // Within the resolution of the true limit, and never above it.
                            assert!(got <= expected && expected - got < resolution, "{per_value} {capacity} {free} {extra} {k}: {got} vs {expected} {rounds:?}");
                            let (plain, _) = run(&gpu, bounds, k, false);
                            assert!(plain <= expected && expected - plain < resolution);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn to_and_from_edges() {
        let gpu = h200();
        // Everything fits up to `to`: the search ends at `to`.
        let (limit, rounds) = run(
            &gpu,
            Bounds {
                from: 1,
                to: 100,
                resolution: 1,
            },
            1,
            true,
        );
        assert_eq!(limit, 100);
        assert!(rounds.concat().len() <= 3, "{rounds:?}");
        // Nothing fits: one point.
        let (limit, rounds) = run(
            &gpu,
            Bounds {
                from: 600,
                to: 1000,
                resolution: 1,
            },
            2,
            true,
        );
        assert_eq!(limit, 0);
        assert_eq!(rounds, vec![vec![600, 1000]]);
        // Huge values do not overflow.
        let big = Gpu {
            capacity: u64::MAX / 2,
            free: u64::MAX / 2,
            extra: 0,
            per_value: 1 << 20,
        };
        let (limit, _) = run(
            &big,
            Bounds {
                from: 1,
                to: u64::MAX / 4,
                resolution: 1 << 30,
            },
            3,
            true,
        );
        assert!(limit > 0);
    }

    #[test]
    fn spread_and_doublings() {
        assert_eq!(spread(0, 10, 1), vec![5]);
        assert_eq!(spread(0, 10, 2), vec![3, 6]);
        assert_eq!(spread(4, 6, 3), vec![5]);
        assert_eq!(doublings(3, 20, 4), vec![3, 6, 12, 20]);
        assert_eq!(doublings(5, 5, 3), vec![5]);
        assert_eq!(
            doublings(u64::MAX - 1, u64::MAX, 3),
            vec![u64::MAX - 1, u64::MAX]
        );
    }
}
