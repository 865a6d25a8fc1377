//! `lab-torch-worker`: the libtorch half of `lab environment` and `lab measure`.
//!
//! Built only with the `torch` cargo feature. `lab` starts it as a child process, writes one
//! JSON request (`lab::worker::WorkerRequest`) on its stdin and reads one JSON reply
//! (`lab::worker::WorkerReply`) from its stdout. Exit status 0 when a reply was printed
//! (errors included), 3 when the request could not be read.
//!
//! The measurement follows `docs/PROTOCOL.md §4` step by step, with the same tensor lifetimes as
//! `mesure_memoire.py measure`, so that the caching-allocator counters are byte-identical:
//! weights built on the CPU in the requested dtype and moved one tensor at a time (weight 1,
//! bias 1, weight 2, bias 2) like `nn.Module.to`; inside a forward the hidden activation is
//! freed as soon as GELU has produced its output, like `nn.Sequential`; the output of a pass
//! is alive at its step's end reading and freed before the next step. Never falls back to
//! the CPU: a GPU that is asked for and absent is an error.
//!
//! With `graph_replays` in the request, the CUDA-graph floor follows the phases
//! (`measure_graph`, the same steps as `measure_graph` in `mesure_memoire.py`; what it records is
//! described in `lab::document::graph`).

// Diagnostics go through `lab::stderr` (a failed write is ignored): `eprintln!` panics, exit 101.
#![deny(clippy::print_stderr)]

#[path = "worker_decoder/mod.rs"]
mod worker_decoder;

use lab::device::Device as Gpu;
use lab::document::graph::{GraphSection, GraphTimings, CAPTURE_WARMUP_FORWARDS, REPLAY_BATCHES};
use lab::document::{AllocatorCounters, Configuration, Dtype, LibtorchFacts, Phase, PhaseRow};
use lab::worker::{
    DeviceInfo, ModelRun, WorkerEnvironment, WorkerError, WorkerErrorKind, WorkerMeasurement,
    WorkerModelMeasurement, WorkerReply, WorkerRequest,
};
use std::ffi::{c_char, c_void, CStr};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

const ERR_LEN: usize = 2048;

#[link(name = "lab_shim", kind = "static")]
extern "C" {
    fn lab_torch_version() -> *const c_char;
    fn lab_cuda_build_version() -> i64;
    fn lab_hip_build_version() -> i64;
    fn lab_device_count() -> i64;
    fn lab_cuda_init(device: i64, err: *mut c_char, len: usize) -> i32;
    #[allow(clippy::too_many_arguments)]
    fn lab_device_properties(
        device: i64,
        name: *mut c_char,
        name_len: usize,
        total_bytes: *mut i64,
        major: *mut i64,
        minor: *mut i64,
        multiprocessors: *mut i64,
        err: *mut c_char,
        len: usize,
    ) -> i32;
    fn lab_memory_stats(device: i64, out: *mut i64, err: *mut c_char, len: usize) -> i32;
    fn lab_reset_peak_stats(device: i64, err: *mut c_char, len: usize) -> i32;
    fn lab_memory_info(
        device: i64,
        free_bytes: *mut i64,
        total_bytes: *mut i64,
        err: *mut c_char,
        len: usize,
    ) -> i32;
    fn lab_synchronize(err: *mut c_char, len: usize) -> i32;
    fn lab_tf32_matmul_allowed() -> i32;
    fn lab_inference_mode_enter() -> *mut c_void;
    fn lab_inference_mode_exit(guard: *mut c_void);
    fn lab_event_new(err: *mut c_char, len: usize) -> *mut c_void;
    fn lab_event_record(event: *mut c_void, device: i64, err: *mut c_char, len: usize) -> i32;
    fn lab_event_elapsed_ms(
        start: *mut c_void,
        end: *mut c_void,
        ms: *mut f64,
        err: *mut c_char,
        len: usize,
    ) -> i32;
    fn lab_event_free(event: *mut c_void);
    fn lab_side_stream_enter(device: i64, err: *mut c_char, len: usize) -> *mut c_void;
    fn lab_side_stream_exit(guard: *mut c_void);
    fn lab_graph_new(err: *mut c_char, len: usize) -> *mut c_void;
    fn lab_graph_capture_begin(graph: *mut c_void, err: *mut c_char, len: usize) -> i32;
    fn lab_graph_capture_end(graph: *mut c_void, err: *mut c_char, len: usize) -> i32;
    fn lab_graph_replay(graph: *mut c_void, err: *mut c_char, len: usize) -> i32;
    fn lab_graph_free(graph: *mut c_void);
}

/// Calls a shim function that reports failure through an error buffer.
fn shim(call: impl FnOnce(*mut c_char, usize) -> i32) -> Result<(), String> {
    let mut buffer = vec![0 as c_char; ERR_LEN];
    if call(buffer.as_mut_ptr(), ERR_LEN) == 0 {
        return Ok(());
    }
    // SAFETY: the shim always NUL-terminates inside the buffer.
    let text = unsafe { CStr::from_ptr(buffer.as_ptr()) };
    Err(text.to_string_lossy().trim().to_owned())
}

fn synchronize() -> Result<(), String> {
    // SAFETY: the buffer pointer and length come from `shim`.
    shim(|e, l| unsafe { lab_synchronize(e, l) })
}

/// (allocated current, reserved current, allocated peak, reserved peak), bytes.
fn memory_stats(device: i64) -> Result<[u64; 4], String> {
    let mut out = [0i64; 4];
    // SAFETY: `out` has the four slots the shim writes.
    shim(|e, l| unsafe { lab_memory_stats(device, out.as_mut_ptr(), e, l) })?;
    Ok(out.map(|v| u64::try_from(v).unwrap_or(0)))
}

fn reset_peak(device: i64) -> Result<(), String> {
    // SAFETY: plain call with an error buffer.
    shim(|e, l| unsafe { lab_reset_peak_stats(device, e, l) })
}

/// A CUDA timing event, freed on drop.
struct Event(*mut c_void);

impl Event {
    fn new() -> Result<Self, String> {
        let mut event = std::ptr::null_mut();
        // SAFETY: the shim returns a heap event or null with a message.
        shim(|e, l| {
            event = unsafe { lab_event_new(e, l) };
            i32::from(event.is_null())
        })?;
        Ok(Event(event))
    }

    fn record(&self, device: i64) -> Result<(), String> {
        // SAFETY: self.0 is a live event from lab_event_new.
        shim(|e, l| unsafe { lab_event_record(self.0, device, e, l) })
    }

    fn seconds_to(&self, end: &Event) -> Result<f64, String> {
        let mut ms = 0.0f64;
        // SAFETY: both events are live; `ms` is a valid out pointer.
        shim(|e, l| unsafe { lab_event_elapsed_ms(self.0, end.0, &mut ms, e, l) })?;
        Ok(ms / 1000.0)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by lab_event_new, freed once.
        unsafe { lab_event_free(self.0) }
    }
}

/// `c10::InferenceMode` for the lifetime of the value (no autograd bookkeeping at all, a
/// stronger no-grad: the dispatcher skips the autograd layers).
struct InferenceMode(*mut c_void);

impl InferenceMode {
    fn enter() -> Self {
        // SAFETY: returns a heap guard (or null, which exit ignores).
        InferenceMode(unsafe { lab_inference_mode_enter() })
    }
}

impl Drop for InferenceMode {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: created by lab_inference_mode_enter on this thread, freed once.
            unsafe { lab_inference_mode_exit(self.0) }
        }
    }
}

/// A stream from libtorch's pool made current on this thread (`with torch.cuda.stream(s)`);
/// the previous stream is current again on drop.
struct SideStream(*mut c_void);

impl SideStream {
    fn enter(device: i64) -> Step<Self> {
        let mut guard = std::ptr::null_mut();
        // SAFETY: the shim returns a heap guard or null with a message.
        shim(|e, l| {
            guard = unsafe { lab_side_stream_enter(device, e, l) };
            i32::from(guard.is_null())
        })?;
        Ok(SideStream(guard))
    }
}

impl Drop for SideStream {
    fn drop(&mut self) {
        // SAFETY: created by lab_side_stream_enter on this thread, freed once.
        unsafe { lab_side_stream_exit(self.0) }
    }
}

/// An `at::cuda::CUDAGraph` (`torch.cuda.CUDAGraph()`), freed on drop.
struct Graph(*mut c_void);

impl Graph {
    fn new() -> Step<Self> {
        let mut graph = std::ptr::null_mut();
        // SAFETY: the shim returns a heap graph or null with a message.
        shim(|e, l| {
            graph = unsafe { lab_graph_new(e, l) };
            i32::from(graph.is_null())
        })?;
        Ok(Graph(graph))
    }

    fn capture_begin(&self) -> Step<()> {
        // SAFETY: self.0 is a live graph.
        shim(|e, l| unsafe { lab_graph_capture_begin(self.0, e, l) })
    }

    fn capture_end(&self) -> Step<()> {
        // SAFETY: self.0 is a live graph.
        shim(|e, l| unsafe { lab_graph_capture_end(self.0, e, l) })
    }

    fn replay(&self) -> Step<()> {
        // SAFETY: self.0 is a live, captured graph.
        shim(|e, l| unsafe { lab_graph_replay(self.0, e, l) })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: created by lab_graph_new, freed once.
        unsafe { lab_graph_free(self.0) }
    }
}

/// Compute capability `(major, minor)` of `cuda:device` (`cudaDeviceProp::major/minor`).
fn compute_capability(device: i64) -> Step<(i64, i64)> {
    let mut name = vec![0 as c_char; 256];
    let (mut total, mut major, mut minor, mut sms) = (0i64, 0i64, 0i64, 0i64);
    // SAFETY: every out pointer is valid; `name` has 256 bytes.
    shim(|e, l| unsafe {
        lab_device_properties(
            device,
            name.as_mut_ptr(),
            name.len(),
            &mut total,
            &mut major,
            &mut minor,
            &mut sms,
            e,
            l,
        )
    })?;
    Ok((major, minor))
}

/// Counters before a stage: synchronize, read, reset the peaks.
fn stage_start(device: i64) -> Step<[u64; 2]> {
    synchronize()?;
    let [allocated, reserved, _, _] = memory_stats(device)?;
    reset_peak(device)?;
    Ok([allocated, reserved])
}

/// Counters after a stage: synchronize, read end and peaks.
fn stage_end(device: i64, baseline: [u64; 2]) -> Step<AllocatorCounters> {
    synchronize()?;
    let [end_alloc, end_res, peak_alloc, peak_res] = memory_stats(device)?;
    Ok(AllocatorCounters {
        baseline_allocated_bytes: baseline[0],
        baseline_reserved_bytes: baseline[1],
        end_allocated_bytes: end_alloc,
        end_reserved_bytes: end_res,
        peak_allocated_bytes: peak_alloc,
        peak_reserved_bytes: peak_res,
    })
}

/// The CUDA-graph floor (`lab::graph` describes the procedure; `measure_graph` in
/// `mesure_memoire.py` is its twin, step for step, so the counters agree).
fn measure_graph(model: &Mlp, x: &Tensor, device: i64, replays: u64) -> Step<GraphSection> {
    let began = Instant::now();
    let baseline = stage_start(device)?;
    let graph = Graph::new()?;
    let static_output = {
        let _side = SideStream::enter(device)?;
        let mut out: Option<Tensor> = None;
        for _ in 0..CAPTURE_WARMUP_FORWARDS {
            drop(out.take());
            out = Some(model.forward(x)?);
        }
        drop(out);
        synchronize()?;
        graph.capture_begin()?;
        let captured = model.forward(x);
        // End the capture even when the forward failed, so the stream is usable again.
        let ended = graph.capture_end();
        let captured = captured?;
        ended?;
        captured
    };
    let capture = stage_end(device, baseline)?;
    let capture_wall_seconds = began.elapsed().as_secs_f64();

    let baseline = stage_start(device)?;
    let mut batch_seconds = Vec::with_capacity(REPLAY_BATCHES as usize);
    for _ in 0..REPLAY_BATCHES {
        let start = Event::new()?;
        let end = Event::new()?;
        start.record(device)?;
        for _ in 0..replays {
            graph.replay()?;
        }
        end.record(device)?;
        synchronize()?;
        batch_seconds.push(start.seconds_to(&end)?);
    }
    let mut single_wall_seconds = Vec::with_capacity(replays as usize);
    for _ in 0..replays {
        let t = Instant::now();
        graph.replay()?;
        synchronize()?;
        single_wall_seconds.push(t.elapsed().as_secs_f64());
    }
    let replay = stage_end(device, baseline)?;
    drop(static_output);
    drop(graph);
    let timings = GraphTimings {
        replays,
        batch_seconds,
        single_wall_seconds,
        capture_wall_seconds,
    };
    GraphSection::from_timings(&timings, capture, replay)
        .ok_or_else(|| "the graph replays gave no finite time".to_owned())
}

fn version_text(v: i64, per_major: i64, per_minor: i64) -> Option<String> {
    (v > 0).then(|| format!("{}.{}", v / per_major, (v % per_major) / per_minor))
}

/// libtorch, CUDA and `gpu` as libtorch sees them. Initialises CUDA when the GPU exists.
fn describe(gpu: Gpu) -> WorkerEnvironment {
    let index = gpu.index();
    // The loaded library's own version file names the build (`2.11.0+cu130`); the headers'
    // TORCH_VERSION (`2.11.0`) is the fallback.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let torch_version =
        lab::worker::loaded_torch_version(&maps, |p| std::fs::read_to_string(p).ok())
            .unwrap_or_else(|| {
                // SAFETY: static NUL-terminated string.
                unsafe { CStr::from_ptr(lab_torch_version()) }
                    .to_string_lossy()
                    .into_owned()
            });
    // SAFETY: plain calls, no arguments.
    let (cuda, hip, count) = unsafe {
        (
            lab_cuda_build_version(),
            lab_hip_build_version(),
            lab_device_count(),
        )
    };
    let mut env = WorkerEnvironment {
        libtorch: LibtorchFacts {
            torch_version,
            cuda_build_version: version_text(cuda, 1000, 10),
            hip_build_version: version_text(hip, 100, 1),
        },
        device_count: u64::try_from(count).unwrap_or(0),
        device: None,
        device_problem: None,
        tf32_matmul_allowed: None,
        free_memory_bytes: None,
    };
    let built = env
        .libtorch
        .cuda_build_version
        .as_deref()
        .map(|v| format!("CUDA {v}"));
    let built = built.or_else(|| {
        env.libtorch
            .hip_build_version
            .as_deref()
            .map(|v| format!("HIP {v}"))
    });
    let built = built.unwrap_or_else(|| "no GPU support".to_owned());
    if env.device_count == 0 {
        env.device_problem = Some(format!(
            "no CUDA device: libtorch {} (built with {built}) sees no GPU; check the driver with \
             nvidia-smi and that CUDA_VISIBLE_DEVICES does not hide it",
            env.libtorch.torch_version
        ));
        return env;
    }
    if u64::from(index) >= env.device_count {
        env.device_problem = Some(format!(
            "{gpu} does not exist: libtorch sees {} GPU(s), {}",
            env.device_count,
            lab::device::visible_range(env.device_count)
        ));
        return env;
    }
    let device = i64::from(index);
    let mut name = vec![0 as c_char; 256];
    let (mut total, mut major, mut minor, mut sms) = (0i64, 0i64, 0i64, 0i64);
    let described = shim(|e, l| unsafe { lab_cuda_init(device, e, l) }).and_then(|()| {
        // SAFETY: every out pointer is valid; `name` has 256 bytes.
        shim(|e, l| unsafe {
            lab_device_properties(
                device,
                name.as_mut_ptr(),
                name.len(),
                &mut total,
                &mut major,
                &mut minor,
                &mut sms,
                e,
                l,
            )
        })
    });
    match described {
        Ok(()) => {
            // SAFETY: the shim NUL-terminates `name`.
            let name = unsafe { CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            env.device = Some(DeviceInfo {
                index,
                name,
                compute_capability: format!("{major}.{minor}"),
                total_memory_bytes: u64::try_from(total).unwrap_or(0),
                multiprocessor_count: u64::try_from(sms).unwrap_or(0),
            });
            // SAFETY: plain call.
            let tf32 = unsafe { lab_tf32_matmul_allowed() };
            env.tf32_matmul_allowed = (tf32 >= 0).then_some(tf32 == 1);
            let (mut free, mut total) = (0i64, 0i64);
            // SAFETY: both out pointers are valid.
            if shim(|e, l| unsafe { lab_memory_info(device, &mut free, &mut total, e, l) }).is_ok()
            {
                env.free_memory_bytes = u64::try_from(free).ok();
            }
        }
        Err(message) => {
            env.device_problem = Some(format!("{gpu} could not be initialised: {message}"))
        }
    }
    env
}

/// A failure during the measurement, with the phase it happened in.
struct Failure {
    /// A phase name, or `graph` for the CUDA-graph floor.
    phase: &'static str,
    message: String,
}

type Step<T> = Result<T, String>;

/// What one synchronised step measured: wall seconds (host clock), GPU seconds by CUDA
/// events (`None` when the events cannot be read), the six allocator counters.
struct Timed {
    wall_seconds: f64,
    gpu_seconds: Option<f64>,
    counters: AllocatorCounters,
}

/// One protocol step (`docs/PROTOCOL.md §4`): synchronize; baseline counters; reset peaks; start event;
/// `work`; end event; synchronize; wall time; end and peak counters. The step's result is
/// returned alive: the caller decides when to free it. Shared by the synthetic measurement and
/// `lab measure --model` (`worker_decoder::run`), so both time a phase the same way.
fn timed<T>(device: i64, work: impl FnOnce() -> Step<T>) -> Step<(Timed, T)> {
    let start = Event::new()?;
    let end = Event::new()?;
    let began = Instant::now();
    synchronize()?;
    let [base_alloc, base_res, _, _] = memory_stats(device)?;
    reset_peak(device)?;
    start.record(device)?;
    let result = work()?;
    end.record(device)?;
    synchronize()?;
    let wall_seconds = began.elapsed().as_secs_f64();
    let [end_alloc, end_res, peak_alloc, peak_res] = memory_stats(device)?;
    let timed = Timed {
        wall_seconds,
        gpu_seconds: start.seconds_to(&end).ok(),
        counters: AllocatorCounters {
            baseline_allocated_bytes: base_alloc,
            baseline_reserved_bytes: base_res,
            end_allocated_bytes: end_alloc,
            end_reserved_bytes: end_res,
            peak_allocated_bytes: peak_alloc,
            peak_reserved_bytes: peak_res,
        },
    };
    Ok((timed, result))
}

/// [`timed`] as a row of the synthetic measurement.
fn phase<T>(
    device: i64,
    name: Phase,
    repetition: Option<u64>,
    forward_passes: u64,
    work: impl FnOnce() -> Step<T>,
) -> Result<(PhaseRow, T), Failure> {
    let (t, result) = timed(device, work).map_err(|message| Failure {
        phase: name.as_str(),
        message,
    })?;
    let row = PhaseRow {
        phase: name,
        repetition,
        forward_passes,
        wall_seconds: t.wall_seconds,
        gpu_seconds: t.gpu_seconds,
        counters: t.counters,
    };
    Ok((row, result))
}

/// The model's four tensors on the GPU.
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

impl Mlp {
    /// Builds on the CPU in `kind` from the seeded CPU generator, initialised like
    /// `torch.nn.Linear.reset_parameters` (weight and bias uniform in ±1/√fan_in), then moves
    /// the tensors to `device` one at a time in module order.
    fn build(width: i64, seed: u64, kind: Kind, device: Device) -> Step<Mlp> {
        tch::manual_seed(i64::try_from(seed).map_err(|e| e.to_string())?);
        let hidden = 4 * width;
        let layer = |fan_in: i64, fan_out: i64| -> Step<(Tensor, Tensor)> {
            let bound = 1.0 / (fan_in as f64).sqrt();
            let mut w = Tensor::f_empty([fan_out, fan_in], (kind, Device::Cpu)).map_err(err)?;
            let _ = w.f_uniform_(-bound, bound).map_err(err)?;
            let mut b = Tensor::f_empty([fan_out], (kind, Device::Cpu)).map_err(err)?;
            let _ = b.f_uniform_(-bound, bound).map_err(err)?;
            Ok((w, b))
        };
        let (w1, b1) = layer(width, hidden)?;
        let (w2, b2) = layer(hidden, width)?;
        Ok(Mlp {
            w1: w1.f_to(device).map_err(err)?,
            b1: b1.f_to(device).map_err(err)?,
            w2: w2.f_to(device).map_err(err)?,
            b2: b2.f_to(device).map_err(err)?,
        })
    }

    /// `Linear → GELU(erf) → Linear`; the hidden activation is freed once GELU has run.
    fn forward(&self, x: &Tensor) -> Step<Tensor> {
        let h = x.f_linear(&self.w1, Some(&self.b1)).map_err(err)?;
        let g = h.f_gelu("none").map_err(err)?;
        drop(h);
        g.f_linear(&self.w2, Some(&self.b2)).map_err(err)
    }
}

fn err(e: tch::TchError) -> String {
    // libtorch appends C++ frames after the first line; keep the message.
    let text = e.to_string();
    text.lines()
        .next()
        .unwrap_or("libtorch error")
        .trim()
        .to_owned()
}

fn kind_of(dtype: Dtype) -> Kind {
    match dtype {
        Dtype::Float32 => Kind::Float,
        Dtype::Float16 => Kind::Half,
        Dtype::Bfloat16 => Kind::BFloat16,
    }
}

fn measure(
    config: &Configuration,
    graph_replays: Option<u64>,
) -> Result<WorkerMeasurement, WorkerError> {
    // The request's device was checked when it was read (`Device` accepts only `cuda:N`).
    let gpu = config.device;
    let index = gpu.index();
    let environment = describe(gpu);
    if environment.device.is_none() {
        let kind = if environment.device_count == 0 {
            WorkerErrorKind::NoCudaDevice
        } else {
            WorkerErrorKind::BadDeviceIndex
        };
        let message = environment.device_problem.clone().unwrap_or_default();
        return Err(WorkerError { kind, message });
    }
    let (phases, graph) = run_protocol(config, index, graph_replays).map_err(|f| {
        let what = format!(
            "{gpu} during {} (batch {}, context {}, width {}, {})",
            f.phase,
            config.batch,
            config.context,
            config.width,
            config.dtype.name()
        );
        if f.message.to_lowercase().contains("out of memory") {
            WorkerError {
                kind: WorkerErrorKind::OutOfMemory,
                message: format!(
                    "out of memory on {what}: reduce one dimension and retry in a new process ({})",
                    f.message
                ),
            }
        } else {
            WorkerError {
                kind: WorkerErrorKind::Runtime,
                message: format!("the measurement failed on {what}: {}", f.message),
            }
        }
    })?;
    // TF32 is read again after the run: libtorch's default (off) is never changed.
    let mut environment = environment;
    // SAFETY: plain call.
    let tf32 = unsafe { lab_tf32_matmul_allowed() };
    environment.tf32_matmul_allowed = (tf32 >= 0).then_some(tf32 == 1);
    Ok(WorkerMeasurement {
        environment,
        phases,
        graph,
    })
}

/// `lab measure --model`: the GPU checked as for the synthetic measurement, then the decoder's
/// phases (`worker_decoder::run`); out of memory is its own kind.
fn measure_model(run: &ModelRun) -> Result<WorkerModelMeasurement, WorkerError> {
    let index = run.device_index;
    let gpu = Gpu::new(index).ok_or_else(|| WorkerError {
        kind: WorkerErrorKind::BadRequest,
        message: format!("cuda:{index} is not a device index"),
    })?;
    let environment = describe(gpu);
    if environment.device.is_none() {
        let kind = if environment.device_count == 0 {
            WorkerErrorKind::NoCudaDevice
        } else {
            WorkerErrorKind::BadDeviceIndex
        };
        let message = environment.device_problem.clone().unwrap_or_default();
        return Err(WorkerError { kind, message });
    }
    let (phases, decode_kernels) = worker_decoder::run::measure(run).map_err(|f| {
        let w = &run.workload;
        let what = format!(
            "cuda:{index} during {} ({} {}, batch {}, {} input + {} output tokens, {})",
            f.phase,
            run.spec.family,
            if run.sources.is_some() { "safetensors" } else { "random weights" },
            w.batch,
            w.input_tokens,
            w.output_tokens,
            w.dtype.name()
        );
        if f.message.to_lowercase().contains("out of memory") {
            WorkerError {
                kind: WorkerErrorKind::OutOfMemory,
                message: format!(
                    "out of memory on {what}: lower --batch or the tokens and retry in a new process ({})",
                    f.message
                ),
            }
        } else {
            WorkerError {
                kind: WorkerErrorKind::Runtime,
                message: format!("the measurement failed on {what}: {}", f.message),
            }
        }
    })?;
    let mut environment = environment;
    // SAFETY: plain call.
    let tf32 = unsafe { lab_tf32_matmul_allowed() };
    environment.tf32_matmul_allowed = (tf32 >= 0).then_some(tf32 == 1);
    Ok(WorkerModelMeasurement {
        environment,
        phases,
        decode_kernels: Some(decode_kernels),
    })
}

/// The five phases, then the graph floor when `graph_replays` is given.
fn run_protocol(
    config: &Configuration,
    index: u32,
    graph_replays: Option<u64>,
) -> Result<(Vec<PhaseRow>, Option<Box<GraphSection>>), Failure> {
    let _inference = InferenceMode::enter();
    let device = Device::Cuda(index as usize);
    let dev = i64::from(index);
    let kind = kind_of(config.dtype);
    let too_big = |phase: Phase| Failure {
        phase: phase.as_str(),
        message: "size too large".to_owned(),
    };
    let width = i64::try_from(config.width).map_err(|_| too_big(Phase::ModelLoad))?;
    let shape = [
        i64::try_from(config.batch).map_err(|_| too_big(Phase::Inputs))?,
        i64::try_from(config.context).map_err(|_| too_big(Phase::Inputs))?,
        width,
    ];
    let seed = config.seed;
    let mut rows = Vec::with_capacity(4 + config.repeats as usize);

    let (row, model) = phase(dev, Phase::ModelLoad, None, 0, || {
        Mlp::build(width, seed, kind, device)
    })?;
    rows.push(row);
    let (row, x) = phase(dev, Phase::Inputs, None, 0, || {
        tch::Cuda::manual_seed(seed);
        Tensor::f_randn(shape, (kind, device)).map_err(err)
    })?;
    rows.push(row);
    let (row, output) = phase(dev, Phase::ColdForward, None, 1, || model.forward(&x))?;
    rows.push(row);
    drop(output);
    let (row, output) = phase(dev, Phase::Warmup, None, config.warmup, || {
        let mut last: Option<Tensor> = None;
        for _ in 0..config.warmup {
            drop(last.take());
            last = Some(model.forward(&x)?);
        }
        Ok(last)
    })?;
    rows.push(row);
    drop(output);
    for repetition in 1..=config.repeats {
        let (row, output) = phase(dev, Phase::WarmForward, Some(repetition), 1, || {
            model.forward(&x)
        })?;
        rows.push(row);
        drop(output);
    }
    let graph = match graph_replays {
        Some(replays) => Some(
            measure_graph(&model, &x, dev, replays)
                .map(Box::new)
                .map_err(|message| Failure {
                    phase: "graph",
                    message,
                })?,
        ),
        None => None,
    };
    drop(x);
    drop(model);
    Ok((rows, graph))
}

fn reply(reply: &WorkerReply) {
    let text = match serde_json::to_string(reply) {
        Ok(text) => text,
        Err(e) => format!(
            r#"{{"error":{{"kind":"runtime","message":"cannot encode the reply: {}"}}}}"#,
            e.to_string().replace('"', "'")
        ),
    };
    // Through lab's one stdout path; if `lab` cannot read the answer, stderr is all that is left.
    if let Err(e) = lab::stdout::print(&format!("{text}\n")) {
        lab::errln!("lab-torch-worker: {e}");
    }
}

fn main() -> std::process::ExitCode {
    let request = lab::input::capped(std::io::stdin().lock(), lab::worker::REQUEST_CAP_BYTES)
        .map_err(|e| match e {
            lab::input::ReadFailure::TooLarge { .. } => format!(
                "the request is over {} bytes (lab::worker::REQUEST_CAP_BYTES)",
                lab::worker::REQUEST_CAP_BYTES
            ),
            lab::input::ReadFailure::Io(e) => e.to_string(),
            lab::input::ReadFailure::NotAFile => "standard input is not readable".to_owned(),
        })
        .and_then(|bytes| {
            serde_json::from_slice::<WorkerRequest>(&bytes).map_err(|e| e.to_string())
        });
    let request = match request {
        Ok(request) => request,
        Err(message) => {
            reply(&WorkerReply::Error(WorkerError {
                kind: WorkerErrorKind::BadRequest,
                message: format!(
                    "lab-torch-worker reads one JSON request on stdin (it is started by `lab`): {message}"
                ),
            }));
            return std::process::ExitCode::from(3);
        }
    };
    let answer = std::panic::catch_unwind(|| match &request {
        WorkerRequest::Environment { device_index } => {
            WorkerReply::Environment(describe(*device_index))
        }
        WorkerRequest::Measure {
            configuration,
            graph_replays,
        } => match measure(configuration, *graph_replays) {
            Ok(m) => WorkerReply::Measurement(m),
            Err(e) => WorkerReply::Error(e),
        },
        WorkerRequest::MeasureModel { run } => match measure_model(run) {
            Ok(m) => WorkerReply::ModelMeasurement(m),
            Err(e) => WorkerReply::Error(e),
        },
        WorkerRequest::CpuLogits { probe } => match worker_decoder::run::cpu_logits(probe) {
            Ok(logits) => WorkerReply::Logits(logits),
            Err(message) => WorkerReply::Error(WorkerError {
                kind: WorkerErrorKind::Runtime,
                message,
            }),
        },
    });
    let answer = answer.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "unknown panic".to_owned());
        let kind = if message.to_lowercase().contains("out of memory") {
            WorkerErrorKind::OutOfMemory
        } else {
            WorkerErrorKind::Runtime
        };
        WorkerReply::Error(WorkerError {
            kind,
            message: format!("the GPU worker failed: {message}"),
        })
    });
    reply(&answer);
    std::process::ExitCode::SUCCESS
}
