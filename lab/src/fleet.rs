//! Every GPU of a package (docs/PROTOCOL.md §4.7): `--device all` or a list `cuda:0,cuda:1`,
//! one worker process per GPU started at the same time, one document per GPU in a new folder,
//! and the comparison a renter reads before spending the days: do all GPUs answer, announce
//! the same memory, hand out the same allocator counters, and run the forward equally fast?
//!
//! Nothing here starts a process: [`run_each`] runs a closure per GPU on its own thread (the
//! CLI passes one that calls the worker), so the comparison is tested with plain documents.

use crate::device::Device;
use crate::document::{median, Document, Phase};
use crate::{Error, Result};
use serde::Serialize;
use std::fmt::Write as _;

/// A GPU whose time per forward is more than this fraction above the median of all GPUs is
/// flagged (10 %).
pub const SLOWER_THAN_MEDIAN: f64 = 0.10;

/// Runs `work` for every GPU at the same time, one thread each; the results come back in the
/// order of `devices`. A panicking closure becomes an `Err` for its GPU only.
pub fn run_each<T: Send>(
    devices: &[Device],
    work: impl Fn(Device) -> Result<T> + Sync,
) -> Vec<(Device, Result<T>)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = devices
            .iter()
            .map(|&device| {
                let work = &work;
                (device, scope.spawn(move || work(device)))
            })
            .collect();
        handles
            .into_iter()
            .map(|(device, handle)| {
                let result = handle.join().unwrap_or_else(|_| {
                    Err(Error::runtime(format!("the run for {device} panicked")))
                });
                (device, result)
            })
            .collect()
    })
}

/// File name of a GPU's document in the folder: `cuda-0.json` for cuda:0.
pub fn document_file_name(device: Device) -> String {
    format!("cuda-{}.json", device.index())
}

/// File name of the comparison written beside the documents.
pub const COMPARISON_FILE: &str = "comparison.json";

/// Which time per forward the comparison uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeBasis {
    /// The CUDA-graph median per forward (launch-free): every document has a graph.
    GraphGpu,
    /// The median CUDA-event time of the warm forwards.
    WarmForwardGpu,
    /// The median wall time of the warm forwards.
    WarmForwardWall,
}

impl TimeBasis {
    fn label(self) -> &'static str {
        match self {
            TimeBasis::GraphGpu => "CUDA-graph GPU time per forward",
            TimeBasis::WarmForwardGpu => "warm-forward GPU event time",
            TimeBasis::WarmForwardWall => "warm-forward wall time",
        }
    }
}

/// One GPU's line of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuLine {
    /// The GPU (`cuda:N` in the JSON).
    pub device: Device,
    /// The document's file name, when it was written.
    pub file: Option<String>,
    /// GPU name as the runtime reports it.
    pub name: Option<String>,
    /// Memory the runtime announces, bytes.
    pub total_memory_bytes: Option<u64>,
    /// Median warm-forward wall seconds.
    pub warm_wall_seconds: Option<f64>,
    /// Median warm-forward GPU event seconds.
    pub warm_gpu_seconds: Option<f64>,
    /// CUDA-graph median seconds per forward, when measured.
    pub graph_gpu_seconds: Option<f64>,
    /// The compared time (see [`Comparison::basis`]), seconds.
    pub seconds: Option<f64>,
    /// (seconds − median) / median × 100.
    pub deviation_percent: Option<f64>,
    /// Whether every byte counter equals the first answering GPU's.
    pub counters_match: Option<bool>,
    /// Why this GPU deserves a look (empty when none).
    pub flags: Vec<String>,
}

/// The comparison of several GPUs' documents.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The compared time per forward.
    pub basis: TimeBasis,
    /// Median of the GPUs' compared times, seconds.
    pub median_seconds: Option<f64>,
    /// One line per GPU, in the order asked.
    pub gpus: Vec<GpuLine>,
    /// Whether any GPU is flagged.
    pub flagged: bool,
}

/// Every byte counter of a document, in order: phase rows, then the graph's two stages.
fn counters(document: &Document) -> Vec<u64> {
    let graph = document.graph.iter().flat_map(|g| [g.capture, g.replay]);
    document
        .phases
        .iter()
        .map(|r| r.counters)
        .chain(graph)
        .flat_map(|c| c.all())
        .collect()
}

fn warm(document: &Document, gpu: bool) -> Option<f64> {
    let values: Vec<f64> = document
        .phases
        .iter()
        .filter(|r| r.phase == Phase::WarmForward)
        .filter_map(|r| {
            if gpu {
                r.gpu_seconds
            } else {
                Some(r.wall_seconds)
            }
        })
        .collect();
    median(&values)
}

/// Compares the GPUs' results (documents, or the error that stopped a GPU). Flags: a GPU that
/// failed, one that announces less memory than the largest, one whose counters differ from
/// the first answering GPU's, one more than [`SLOWER_THAN_MEDIAN`] slower than the median.
pub fn compare(results: &[(Device, std::result::Result<&Document, String>)]) -> Comparison {
    let documents: Vec<&Document> = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().copied())
        .collect();
    let basis = if !documents.is_empty() && documents.iter().all(|d| d.graph.is_some()) {
        TimeBasis::GraphGpu
    } else if !documents.is_empty() && documents.iter().all(|d| warm(d, true).is_some()) {
        TimeBasis::WarmForwardGpu
    } else {
        TimeBasis::WarmForwardWall
    };
    let time_of = |d: &Document| match basis {
        TimeBasis::GraphGpu => d.graph.as_ref().map(|g| g.median_gpu_seconds_per_forward),
        TimeBasis::WarmForwardGpu => warm(d, true),
        TimeBasis::WarmForwardWall => warm(d, false),
    };
    let times: Vec<f64> = documents.iter().filter_map(|d| time_of(d)).collect();
    let median_seconds = median(&times);
    let largest_memory = documents
        .iter()
        .map(|d| d.environment.total_memory_bytes)
        .max();
    let reference = results
        .iter()
        .find_map(|(i, r)| r.as_ref().ok().map(|d| (*i, counters(d))));
    let mut gpus = Vec::new();
    for (device, result) in results {
        let device = *device;
        let document = match result {
            Ok(document) => *document,
            Err(message) => {
                gpus.push(GpuLine {
                    device,
                    file: None,
                    name: None,
                    total_memory_bytes: None,
                    warm_wall_seconds: None,
                    warm_gpu_seconds: None,
                    graph_gpu_seconds: None,
                    seconds: None,
                    deviation_percent: None,
                    counters_match: None,
                    flags: vec![format!("no measurement: {message}")],
                });
                continue;
            }
        };
        let mut flags = Vec::new();
        let memory = document.environment.total_memory_bytes;
        if let Some(largest) = largest_memory.filter(|l| *l > memory) {
            flags.push(format!(
                "announces {memory} B, {} B less than the largest GPU ({largest} B)",
                largest - memory
            ));
        }
        let counters_match = reference
            .as_ref()
            .map(|(first, reference)| (*first, counters(document) == *reference));
        if let Some((first, false)) = counters_match {
            flags.push(format!(
                "allocator counters differ from {first}'s (same configuration, same software: expected identical)"
            ));
        }
        let seconds = time_of(document);
        let deviation_percent = match (seconds, median_seconds) {
            (Some(s), Some(m)) if m > 0.0 => Some((s - m) / m * 100.0),
            _ => None,
        };
        if let Some(d) = deviation_percent.filter(|d| *d > SLOWER_THAN_MEDIAN * 100.0) {
            flags.push(format!(
                "{d:.1} % slower than the median ({})",
                basis.label()
            ));
        }
        gpus.push(GpuLine {
            device,
            file: Some(document_file_name(device)),
            name: Some(document.environment.device_name.clone()),
            total_memory_bytes: Some(memory),
            warm_wall_seconds: warm(document, false),
            warm_gpu_seconds: warm(document, true),
            graph_gpu_seconds: document
                .graph
                .as_ref()
                .map(|g| g.median_gpu_seconds_per_forward),
            seconds,
            deviation_percent,
            counters_match: counters_match.map(|(_, same)| same),
            flags,
        });
    }
    let flagged = gpus.iter().any(|g| !g.flags.is_empty());
    Comparison {
        basis,
        median_seconds,
        gpus,
        flagged,
    }
}

/// The comparison as a table plus one line per flag.
pub fn comparison_text(comparison: &Comparison) -> String {
    let mut out = String::new();
    let us = |s: Option<f64>| {
        s.map(|v| format!("{:.2}", v * 1e6))
            .unwrap_or_else(|| "-".to_owned())
    };
    let _ = writeln!(
        out,
        "{:<8} {:<22} {:>17} {:>12} {:>12} {:>12} {:>10} {:>9}",
        "device",
        "name",
        "memory bytes",
        "wall µs",
        "events µs",
        "graph µs",
        "vs median",
        "counters"
    );
    for g in &comparison.gpus {
        let _ = writeln!(
            out,
            "{:<8} {:<22} {:>17} {:>12} {:>12} {:>12} {:>10} {:>9}",
            g.device,
            g.name.as_deref().unwrap_or("-"),
            g.total_memory_bytes
                .map(|b| b.to_string())
                .unwrap_or_else(|| "-".into()),
            us(g.warm_wall_seconds),
            us(g.warm_gpu_seconds),
            us(g.graph_gpu_seconds),
            g.deviation_percent
                .map(|d| format!("{d:+.1} %"))
                .unwrap_or_else(|| "-".into()),
            match g.counters_match {
                Some(true) => "same",
                Some(false) => "DIFFER",
                None => "-",
            }
        );
    }
    let _ = writeln!(
        out,
        "compared: {} (median {} µs); wall and events are medians of the warm forwards",
        comparison.basis.label(),
        us(comparison.median_seconds)
    );
    for g in &comparison.gpus {
        for flag in &g.flags {
            let _ = writeln!(out, "FLAGGED {}: {flag}", g.device);
        }
    }
    if !comparison.flagged {
        let _ = writeln!(
            out,
            "every GPU answered, announces the same memory, gave the same counters and is within {:.0} % of the median",
            SLOWER_THAN_MEDIAN * 100.0
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda(index: u32) -> Device {
        Device::new(index).unwrap()
    }

    fn document() -> Document {
        let json = crate::document::tests::sample_json(64, 4);
        crate::document::parse(json.as_bytes()).unwrap()
    }

    /// A document whose warm forwards take `gpu` seconds of GPU events.
    fn with_time(gpu: f64) -> Document {
        let mut d = document();
        for row in d
            .phases
            .iter_mut()
            .filter(|r| r.phase == Phase::WarmForward)
        {
            row.gpu_seconds = Some(gpu);
        }
        d
    }

    #[test]
    fn run_each_keeps_order_and_isolates_failures() {
        let results = run_each(&[cuda(3), cuda(1), cuda(2)], |d| {
            if d.index() == 1 {
                Err(Error::runtime("boom"))
            } else if d.index() == 2 {
                panic!("worker thread died")
            } else {
                Ok(d.index() * 10)
            }
        });
        assert_eq!(results.len(), 3);
        assert_eq!(results[0].0, cuda(3));
        assert_eq!(*results[0].1.as_ref().unwrap(), 30);
        assert_eq!(results[1].1.as_ref().unwrap_err().to_string(), "boom");
        assert!(results[2]
            .1
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("cuda:2 panicked"));
        // All GPUs run at once: every thread is alive at the same time.
        let barrier = std::sync::Barrier::new(4);
        let results = run_each(&[cuda(0), cuda(1), cuda(2), cuda(3)], |d| {
            barrier.wait();
            Ok(d)
        });
        assert!(results.iter().all(|(_, r)| r.is_ok()));
        assert_eq!(document_file_name(cuda(7)), "cuda-7.json");
    }

    #[test]
    fn identical_gpus_are_not_flagged() {
        let (a, b) = (with_time(40e-6), with_time(40e-6));
        let c = compare(&[(cuda(0), Ok(&a)), (cuda(1), Ok(&b))]);
        assert_eq!(c.basis, TimeBasis::WarmForwardGpu);
        assert!(!c.flagged, "{c:?}");
        assert_eq!(c.gpus[1].deviation_percent, Some(0.0));
        assert_eq!(c.gpus[1].counters_match, Some(true));
        assert_eq!(c.gpus[0].file.as_deref(), Some("cuda-0.json"));
        let text = comparison_text(&c);
        assert!(text.contains("every GPU answered"), "{text}");
        assert!(!text.contains("FLAGGED"), "{text}");
    }

    #[test]
    fn a_slow_gpu_a_smaller_gpu_and_different_counters_are_flagged() {
        // Median of 40, 40, 45 µs is 40: the third is 12.5 % slower (flagged); 44 would be 10 %
        // (not flagged: the bound is strict).
        let (a, b, mut slow) = (with_time(40e-6), with_time(40e-6), with_time(45e-6));
        slow.environment.total_memory_bytes -= 1024;
        slow.phases[2].counters.end_allocated_bytes += 512;
        let c = compare(&[(cuda(0), Ok(&a)), (cuda(1), Ok(&b)), (cuda(2), Ok(&slow))]);
        assert!(c.flagged);
        let flags = c.gpus[2].flags.join("\n");
        assert!(flags.contains("12.5 % slower than the median"), "{flags}");
        assert!(
            flags.contains("1024 B less than the largest GPU"),
            "{flags}"
        );
        assert!(flags.contains("counters differ from cuda:0"), "{flags}");
        assert!(c.gpus[0].flags.is_empty() && c.gpus[1].flags.is_empty());
        let edge = with_time(44e-6);
        let c = compare(&[(cuda(0), Ok(&a)), (cuda(1), Ok(&b)), (cuda(2), Ok(&edge))]);
        assert!(!c.flagged, "{c:?}");
        let text = comparison_text(&compare(&[
            (cuda(0), Ok(&a)),
            (cuda(1), Ok(&b)),
            (cuda(2), Ok(&slow)),
        ]));
        assert!(text.contains("FLAGGED cuda:2: 12.5 % slower"), "{text}");
        assert!(text.contains("DIFFER"), "{text}");
    }

    #[test]
    fn a_missing_gpu_is_flagged_and_the_others_still_compared() {
        let a = with_time(40e-6);
        let c = compare(&[(cuda(0), Ok(&a)), (cuda(1), Err("out of memory".into()))]);
        assert!(c.flagged);
        assert_eq!(c.gpus[1].flags, vec!["no measurement: out of memory"]);
        assert_eq!(c.gpus[0].deviation_percent, Some(0.0));
        assert!(comparison_text(&c).contains("FLAGGED cuda:1: no measurement"));
    }

    #[test]
    fn graph_time_is_the_basis_when_every_gpu_has_one() {
        use crate::document::graph::{GraphSection, GraphTimings};
        use crate::document::AllocatorCounters;
        let counters = AllocatorCounters {
            baseline_allocated_bytes: 1,
            baseline_reserved_bytes: 2,
            end_allocated_bytes: 1,
            end_reserved_bytes: 2,
            peak_allocated_bytes: 1,
            peak_reserved_bytes: 2,
        };
        let graph = |per_batch: f64| {
            GraphSection::from_timings(
                &GraphTimings {
                    replays: 10,
                    batch_seconds: vec![per_batch; 5],
                    single_wall_seconds: vec![1e-5],
                    capture_wall_seconds: 0.1,
                },
                counters,
                counters,
            )
        };
        let (mut a, mut b) = (with_time(40e-6), with_time(40e-6));
        a.graph = graph(76e-6);
        b.graph = graph(100e-6);
        let c = compare(&[(cuda(0), Ok(&a)), (cuda(1), Ok(&b))]);
        assert_eq!(c.basis, TimeBasis::GraphGpu);
        // median of 7.6 and 10 µs is 8.8: cuda:1 is 13.6 % above it
        assert!(c.gpus[1].flags[0].starts_with("13.6 % slower"), "{c:?}");
        b.graph = None;
        assert_eq!(
            compare(&[(cuda(0), Ok(&a)), (cuda(1), Ok(&b))]).basis,
            TimeBasis::WarmForwardGpu
        );
    }
}
