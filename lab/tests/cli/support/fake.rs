//! Fake worker replies and measurement documents, built from `lab`'s own types (the worker
//! protocol's [`WorkerReply`] and the document's [`PhaseRow`] with its [`AllocatorCounters`]),
//! so that no test types the JSON of a reply or the six counters by hand.

use lab::document::{AllocatorCounters, LibtorchFacts, Phase, PhaseRow};
use lab::worker::{
    DeviceInfo, WorkerEnvironment, WorkerError, WorkerErrorKind, WorkerMeasurement, WorkerReply,
};

/// Memory of the fake GPU, bytes (an H200's `totalGlobalMem`, as in `data/gpu-memory.csv`).
pub const FAKE_GPU_BYTES: u64 = 150_109_880_320;

/// What the worker reports of GPU `index` of `count`, announcing `memory` bytes.
pub fn environment(index: u32, count: u64, memory: u64) -> WorkerEnvironment {
    WorkerEnvironment {
        libtorch: LibtorchFacts {
            torch_version: "2.11.0".into(),
            cuda_build_version: Some("13.0".into()),
            hip_build_version: None,
        },
        device_count: count,
        device: Some(DeviceInfo {
            index,
            name: "Fake GPU".into(),
            compute_capability: "9.0".into(),
            total_memory_bytes: memory,
            multiprocessor_count: 132,
        }),
        device_problem: None,
        tf32_matmul_allowed: Some(false),
        free_memory_bytes: None,
    }
}

/// Counters of `base`, `end` and `peak` allocated bytes whose reserved bytes stay at one
/// 2 MiB segment.
pub fn counters(base: u64, end: u64, peak: u64) -> AllocatorCounters {
    AllocatorCounters {
        baseline_allocated_bytes: base,
        baseline_reserved_bytes: 2_097_152,
        end_allocated_bytes: end,
        end_reserved_bytes: 2_097_152,
        peak_allocated_bytes: peak,
        peak_reserved_bytes: 2_097_152,
    }
}

/// The six rows of batch 1, context 16, width 64, warm-up 1, repeats 2 (float32: 132,608 B of
/// weights, 4,096 B of input and of output), each timed `wall` and `gpu` seconds.
pub fn phases(wall: f64, gpu: f64) -> Vec<PhaseRow> {
    let row = |phase, repetition, forward_passes, counters| PhaseRow {
        phase,
        repetition,
        forward_passes,
        wall_seconds: wall,
        gpu_seconds: Some(gpu),
        counters,
    };
    let forward = counters(136_704, 140_800, 169_472);
    vec![
        row(Phase::ModelLoad, None, 0, counters(0, 132_608, 132_608)),
        row(Phase::Inputs, None, 0, counters(132_608, 136_704, 136_704)),
        row(Phase::ColdForward, None, 1, forward),
        row(Phase::Warmup, None, 1, forward),
        row(Phase::WarmForward, Some(1), 1, forward),
        row(Phase::WarmForward, Some(2), 1, forward),
    ]
}

/// One phase row of a document as JSON text (a `phases` entry).
pub fn row_json(
    phase: Phase,
    repetition: Option<u64>,
    forward_passes: u64,
    timings: (f64, Option<f64>),
    counters: AllocatorCounters,
) -> String {
    serde_json::to_string(&PhaseRow {
        phase,
        repetition,
        forward_passes,
        wall_seconds: timings.0,
        gpu_seconds: timings.1,
        counters,
    })
    .unwrap()
}

/// The worker's one line of output for `reply`.
pub fn reply_line(reply: &WorkerReply) -> String {
    serde_json::to_string(reply).unwrap()
}

/// A measurement reply: `environment` and `phases`, no graph.
pub fn measurement(environment: WorkerEnvironment, phases: Vec<PhaseRow>) -> String {
    reply_line(&WorkerReply::Measurement(WorkerMeasurement {
        environment,
        phases,
        graph: None,
    }))
}

/// An environment reply.
pub fn environment_reply(environment: WorkerEnvironment) -> String {
    reply_line(&WorkerReply::Environment(environment))
}

/// An error reply of `kind` saying `message`.
pub fn error(kind: WorkerErrorKind, message: &str) -> String {
    reply_line(&WorkerReply::Error(WorkerError {
        kind,
        message: message.to_owned(),
    }))
}
