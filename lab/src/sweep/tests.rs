//! Unit tests of the sweep with fake runners: the search, stops and failures, the summary.

use super::*;
use crate::Error;
use rust_decimal::Decimal;
use std::collections::HashMap;
use std::path::PathBuf;

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
        device: crate::device::Device::FIRST,
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
    assert!(
        lines[1].starts_with("1,width,64,1,16,64,float32,fitted,64000,65536,1073741824,0.000061,")
    );
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
