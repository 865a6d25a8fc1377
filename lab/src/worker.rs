//! The `lab-torch-worker` child process: how `lab` finds and starts it, and the JSON it
//! exchanges with it.
//!
//! `lab` never links libtorch: a binary linked to libtorch does not start at all where
//! libtorch is missing (the dynamic loader fails before `main`, exit 127), so the torch part
//! runs in a child. `lab` writes one [`WorkerRequest`] as JSON on the child's stdin; the child
//! prints one [`WorkerReply`] as JSON on its stdout and exits. Each measurement thus runs in a
//! fresh process, as the protocol recommends.

use crate::device::Device;
use crate::document::graph::GraphSection;
use crate::document::{Configuration, LibtorchFacts, PhaseRow};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// File name of the worker binary (built with `cargo build --release --features torch`).
pub const WORKER_NAME: &str = "lab-torch-worker";

/// Environment variable naming the worker binary, for unusual layouts.
pub const WORKER_ENV: &str = "LAB_TORCH_WORKER";

/// How to get a worker, appended to every "worker missing" message.
pub const BUILD_HINT: &str = "build it with `cargo xtask worker` (cargo build --release \
     --features torch against PyTorch 2.11.0's libtorch; see docs/GUIDE.md, \"The torch worker\") and \
     keep it next to `lab`, or pass --worker PATH / set LAB_TORCH_WORKER";

/// How to make libtorch loadable, appended to every "libtorch missing" message.
pub const LIBTORCH_HINT: &str = "install PyTorch 2.11.0 (pip install torch==2.11.0) and put \
     its torch/lib folder on LD_LIBRARY_PATH, or set LIBTORCH=<site-packages>/torch";

/// What `lab` asks the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum WorkerRequest {
    /// Describe libtorch and GPU `device_index`.
    Environment {
        /// The GPU, sent as its index N (`"device_index": N`).
        #[serde(with = "crate::device::as_index")]
        device_index: Device,
    },
    /// Run the measurement protocol (`docs/PROTOCOL.md §4`) for this configuration.
    Measure {
        /// What to measure (validated by `lab`).
        configuration: Configuration,
        /// N of `--graph-replays`: after the phases, measure the CUDA-graph floor
        /// ([`crate::document::graph`]); absent when not asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        graph_replays: Option<u64>,
    },
    /// Run a real decoder by the model-measurement phases (`docs/PROTOCOL.md §4.9`).
    MeasureModel {
        /// What to run (validated by `lab`); boxed, the request enum stays small.
        run: Box<ModelRun>,
    },
    /// Test only, never sent by `lab`: run the decoder of a model folder **on the CPU** and
    /// return its logits, for the numerics test against `transformers`
    /// (`lab/tests/numerics/decoder_numerics.py`). The product's measurement never reaches the
    /// CPU: `lab measure` has no flag that sends this request.
    CpuLogits {
        /// The probe.
        probe: Box<LogitsProbe>,
    },
}

/// The most bytes of request `lab-torch-worker` reads from its stdin (64 MiB); more is refused
/// as a bad request (exit 3) without parsing. The largest request `lab` sends, a decoder's
/// tensor list with its safetensors byte ranges, is some hundred bytes per tensor: a model of
/// 100,000 tensors stays under a tenth of this.
pub const REQUEST_CAP_BYTES: u64 = 64 * 1024 * 1024;

/// A decoder measurement as `lab measure --model` asks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRun {
    /// N of `cuda:N`.
    pub device_index: u32,
    /// The architecture.
    pub spec: crate::decoder::DecoderSpec,
    /// Safetensors byte ranges, one per spec tensor; `None` for random weights.
    pub sources: Option<crate::decoder::weights::Sources>,
    /// The workload (batch, tokens, dtype, passes, seed, graph).
    pub workload: crate::document::model_run::ModelWorkload,
}

/// What the CPU logits probe runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogitsProbe {
    /// A model folder with config.json and safetensors.
    pub model: PathBuf,
    /// Element type of the run.
    pub dtype: crate::document::Dtype,
    /// Prompt token ids, one list per sequence (equal lengths).
    pub prompt: Vec<Vec<i64>>,
    /// Decode steps after the prompt: per step, one token id per sequence.
    pub steps: Vec<Vec<i64>>,
    /// Then this many greedy tokens per sequence, chosen by the worker's own decode step (the
    /// one `lab measure --model` times and captures), from the last step's logits on.
    #[serde(default)]
    pub greedy: u64,
    /// Test only: run on `cuda:N` instead of the CPU (the GPU proof's logits against
    /// `transformers`' on the same GPU, `examples/h200/measure-model/run3/`); absent: the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_index: Option<u32>,
}

/// The probe's answer: logits as float32, sequence-major.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logits {
    /// Vocabulary (the last dimension).
    pub vocab: u64,
    /// `[batch, prompt, vocab]`, flattened.
    pub prefill: Vec<f32>,
    /// Per decode step `[batch, vocab]`, flattened.
    pub steps: Vec<Vec<f32>>,
    /// `[batch][greedy]`: the greedy tokens.
    #[serde(default)]
    pub greedy_tokens: Vec<Vec<i64>>,
}

/// The measured rows of a decoder run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerModelMeasurement {
    /// libtorch and the GPU, read before the first phase.
    pub environment: WorkerEnvironment,
    /// One row per step.
    pub phases: Vec<crate::document::model_run::ModelPhaseRow>,
    /// What ran the decode steps' small operations: the fused kernels (and which build) or
    /// libtorch's, with the reason (`docs/PROTOCOL.md §4.9`); `None` from an older worker.
    #[serde(default)]
    pub decode_kernels: Option<String>,
}

/// One GPU as libtorch describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// N of `cuda:N`.
    pub index: u32,
    /// `cudaDeviceProp::name`.
    pub name: String,
    /// `major.minor`.
    pub compute_capability: String,
    /// `cudaDeviceProp::totalGlobalMem`, bytes.
    pub total_memory_bytes: u64,
    /// `cudaDeviceProp::multiProcessorCount`.
    pub multiprocessor_count: u64,
}

/// What the worker found about libtorch and the asked GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerEnvironment {
    /// libtorch's version (as loaded, [`loaded_torch_version`], else its headers'
    /// `TORCH_VERSION`) and build; flattened, so the JSON keys are the document's.
    #[serde(flatten)]
    pub libtorch: LibtorchFacts,
    /// GPUs visible to libtorch.
    pub device_count: u64,
    /// The asked GPU, when it exists.
    pub device: Option<DeviceInfo>,
    /// Why the asked GPU is not available, when it is not.
    pub device_problem: Option<String>,
    /// Whether float32 matmuls may use TF32, once CUDA is initialised.
    pub tf32_matmul_allowed: Option<bool>,
    /// Free bytes of the asked GPU right after CUDA initialisation, before any tensor
    /// (`cudaMemGetInfo`): what `lab sweep`'s memory model takes as the capacity. Not part of
    /// the measurement document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_memory_bytes: Option<u64>,
}

/// The measured rows and the environment they were measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerMeasurement {
    /// libtorch and the GPU, read before the first phase.
    pub environment: WorkerEnvironment,
    /// One row per protocol step.
    pub phases: Vec<PhaseRow>,
    /// The CUDA-graph floor, when the request asked for it (boxed: the reply enum stays small).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<Box<GraphSection>>,
}

/// The kinds of failure the worker reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerErrorKind {
    /// libtorch loaded but sees no CUDA device (no driver, no GPU, CUDA_VISIBLE_DEVICES empty).
    NoCudaDevice,
    /// The index is not among the visible devices.
    BadDeviceIndex,
    /// The caching allocator could not get memory during the run.
    OutOfMemory,
    /// Any other libtorch failure during the run.
    Runtime,
    /// The request could not be read.
    BadRequest,
}

/// A failure reported by the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerError {
    /// What kind of failure.
    pub kind: WorkerErrorKind,
    /// One line for the user.
    pub message: String,
}

/// The worker's one line of output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerReply {
    /// Answer to [`WorkerRequest::Environment`].
    Environment(WorkerEnvironment),
    /// Answer to [`WorkerRequest::Measure`].
    Measurement(WorkerMeasurement),
    /// Answer to [`WorkerRequest::MeasureModel`].
    ModelMeasurement(WorkerModelMeasurement),
    /// Answer to [`WorkerRequest::CpuLogits`] (test only).
    Logits(Logits),
    /// Anything that went wrong.
    Error(WorkerError),
}

impl WorkerError {
    /// The `lab` error for this failure: a missing GPU is a usage error (exit 2, nothing was
    /// measured), out of memory is [`Error::OutOfMemory`] and any other failure during the run
    /// a runtime error (both exit 1). The message of an out-of-memory failure starts with
    /// "out of memory" unless the worker's own message says so.
    pub fn into_error(self) -> Error {
        match self.kind {
            WorkerErrorKind::NoCudaDevice | WorkerErrorKind::BadDeviceIndex => {
                Error::usage(format!("{}; nothing was measured", self.message))
            }
            WorkerErrorKind::OutOfMemory => {
                // Wording only: the kind, not this text, is what callers test.
                let message = if self.message.to_lowercase().contains("out of memory") {
                    self.message
                } else {
                    format!("out of memory: {}", self.message)
                };
                Error::out_of_memory(format!("{message}; no file was written"))
            }
            WorkerErrorKind::Runtime | WorkerErrorKind::BadRequest => {
                Error::runtime(format!("{}; no file was written", self.message))
            }
        }
    }
}

/// Why no worker could answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// No worker binary at the expected place, or it cannot be started at all.
    NoWorker(String),
    /// The worker started, but the dynamic loader could not load libtorch (exit 127).
    NoLibtorch(String),
}

impl Unavailable {
    /// One line: what is missing and how to fix it.
    pub fn message(&self) -> String {
        match self {
            Unavailable::NoWorker(m) | Unavailable::NoLibtorch(m) => m.clone(),
        }
    }
}

/// Finds the worker: `explicit` (`--worker PATH`), else `$LAB_TORCH_WORKER`, else
/// `lab-torch-worker` in the folder of the running `lab` executable. The path must be an
/// executable regular file; the message says whether it is missing, a folder or not
/// executable.
pub fn locate(explicit: Option<&Path>) -> std::result::Result<PathBuf, Unavailable> {
    let (candidate, how) = if let Some(path) = explicit {
        (path.to_path_buf(), "--worker")
    } else if let Some(path) = std::env::var_os(WORKER_ENV).filter(|p| !p.is_empty()) {
        (PathBuf::from(path), WORKER_ENV)
    } else {
        let exe = std::env::current_exe().map_err(|e| {
            Unavailable::NoWorker(format!(
                "cannot locate lab's own folder ({e}) to find {WORKER_NAME}: {BUILD_HINT}"
            ))
        })?;
        let folder = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        (folder.join(WORKER_NAME), "next to lab")
    };
    match std::fs::metadata(&candidate) {
        Ok(metadata) if metadata.is_file() => {
            if is_executable(&metadata) {
                Ok(candidate)
            } else {
                Err(Unavailable::NoWorker(format!(
                    "{} ({how}) is a file but not executable; make it executable \
                     (chmod +x) or {BUILD_HINT}",
                    shown(&candidate, explicit)
                )))
            }
        }
        Ok(metadata) => Err(Unavailable::NoWorker(format!(
            "{} ({how}) is {}, not the {WORKER_NAME} executable: {BUILD_HINT}",
            shown(&candidate, explicit),
            if metadata.is_dir() {
                "a folder"
            } else {
                "not a regular file"
            }
        ))),
        Err(_) => Err(Unavailable::NoWorker(format!(
            "the GPU worker {WORKER_NAME} is not installed ({} not found, {how}): {BUILD_HINT}",
            shown(&candidate, explicit)
        ))),
    }
}

/// How a worker path is printed: as typed when the user gave it with `--worker`; a path `lab`
/// found itself (`$LAB_TORCH_WORKER`, next to `lab`) as `~/…` under the home folder, else by
/// its file name only, so that no home folder or user name reaches the output.
pub fn shown(path: &Path, explicit: Option<&Path>) -> String {
    if explicit.is_some() {
        return path.display().to_string();
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        if let Ok(rest) = path.strip_prefix(home) {
            return format!("~/{}", rest.display());
        }
    }
    path.file_name().map_or_else(
        || WORKER_NAME.to_owned(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Whether anyone may execute the file (always true off Unix, where the start will tell).
fn is_executable(metadata: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        true
    }
}

/// The child's `LD_LIBRARY_PATH`: `$LIBTORCH/lib` prepended when `LIBTORCH` is set, the
/// inherited value kept (on GPU machines it already names the driver's folder).
fn library_path() -> Option<OsString> {
    let libtorch = std::env::var_os("LIBTORCH").filter(|p| !p.is_empty())?;
    let mut value = PathBuf::from(libtorch).join("lib").into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        value.push(":");
        value.push(old);
    }
    Some(value)
}

/// Starts `worker`, sends `request`, and returns its reply. `Err(Unavailable)` when it cannot
/// start or cannot load libtorch; `Ok(Err(Error))` (a runtime error) when it ended without an
/// answer (crashed, killed, printed nothing: the message says "ended without an answer") or
/// printed one that is not a [`WorkerReply`] ("gave an unreadable answer").
pub fn call(
    worker: &Path,
    request: &WorkerRequest,
) -> std::result::Result<Result<WorkerReply>, Unavailable> {
    let mut command = Command::new(worker);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = library_path() {
        command.env("LD_LIBRARY_PATH", path);
    }
    die_with_parent(&mut command);
    let mut child = command.spawn().map_err(|e| {
        Unavailable::NoWorker(format!(
            "cannot start the GPU worker {} ({e}): {BUILD_HINT}",
            shown(worker, None)
        ))
    })?;
    let body = match serde_json::to_vec(request) {
        Ok(body) => body,
        Err(e) => {
            return Ok(Err(Error::runtime(format!(
                "cannot encode the worker request: {e}"
            ))))
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A child that died at load time closes its stdin: the exit status tells why.
        let _ = stdin.write_all(&body);
    }
    let output = match child.wait_with_output() {
        Ok(output) => output,
        Err(e) => return Ok(Err(Error::runtime(format!("the GPU worker failed: {e}")))),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let loader = stderr.lines().find(|l| {
        l.contains("error while loading shared libraries")
            || l.contains("cannot open shared object")
    });
    if output.status.code() == Some(127) || (loader.is_some() && output.stdout.is_empty()) {
        let why = loader.or_else(|| stderr.lines().find(|l| !l.trim().is_empty()));
        let why = why.map(str::trim).unwrap_or("the loader gave no reason");
        return Err(Unavailable::NoLibtorch(format!(
            "libtorch could not be loaded by the GPU worker ({why}): {LIBTORCH_HINT}"
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'));
    let what = match line.map(serde_json::from_str::<WorkerReply>) {
        Some(Ok(reply)) => return Ok(Ok(reply)),
        Some(Err(e)) => format!("gave an unreadable answer ({e})"),
        // Printed something, but nothing that looks like a JSON reply.
        None if !stdout.trim().is_empty() => "gave an unreadable answer (no JSON object)".into(),
        None => "ended without an answer".into(),
    };
    // A worker that died without its typed answer is a runtime failure, whatever its last
    // words: only the worker's `out_of_memory` kind counts as out of memory.
    let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = tail.last().copied().unwrap_or("no message");
    Ok(Err(Error::runtime(format!(
        "the GPU worker {what} ({}; {last}); no file was written",
        output.status
    ))))
}

/// Makes the child die with `lab` (Linux: `prctl(PR_SET_PDEATHSIG, SIGKILL)` in the child,
/// between fork and exec). Without it, a `lab` killed with SIGKILL leaves its worker computing
/// on and holding GPU memory. The signal comes when the thread that started the child ends:
/// `lab` starts workers from its main thread only. Elsewhere a no-op.
fn die_with_parent(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, getppid); it allocates nothing on success.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                // `lab` may have died between the fork and the prctl: no signal would come.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}

/// The full version of the libtorch this process has loaded, local build tag included (e.g.
/// `2.11.0+cu130`, as `torch.__version__` prints it), so the Rust and the Python documents
/// name the same thing. `maps` is the text of `/proc/self/maps`; the folder of the mapped
/// `libtorch_cpu.so` leads to `../version.py` (a PyPI wheel: `__version__ = '…'`) or
/// `../build-version` (a libtorch archive). `read` reads a file. `None` when neither is found;
/// the worker then reports the version its headers declared (`TORCH_VERSION`).
pub fn loaded_torch_version(maps: &str, read: impl Fn(&Path) -> Option<String>) -> Option<String> {
    let library = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.ends_with("/libtorch_cpu.so"))?;
    let root = Path::new(library).parent()?.parent()?;
    if let Some(text) = read(&root.join("version.py")) {
        let version = text.lines().find_map(|line| {
            let value = line
                .strip_prefix("__version__")?
                .trim_start()
                .strip_prefix('=')?;
            let value = value.trim().trim_matches(|c| c == '\'' || c == '"');
            (!value.is_empty()).then(|| value.to_owned())
        });
        if version.is_some() {
            return version;
        }
    }
    read(&root.join("build-version"))
        .map(|text| text.trim().to_owned())
        .filter(|version| !version.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_torch_version_reads_the_wheel_or_the_archive() {
        let maps = "7f00-7f01 r-xp 00000000 fd:01 42 /venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so\n\
                    7f02-7f03 r-xp 00000000 fd:01 43 /usr/lib/libc.so.6\n";
        let wheel = |p: &Path| {
            (p == Path::new("/venv/lib/python3.12/site-packages/torch/version.py")).then(|| {
                "from typing import Optional\n__version__ = '2.11.0+cu130'\ndebug = False\n"
                    .to_owned()
            })
        };
        assert_eq!(
            loaded_torch_version(maps, wheel).as_deref(),
            Some("2.11.0+cu130")
        );
        let archive = |p: &Path| {
            (p == Path::new("/venv/lib/python3.12/site-packages/torch/build-version"))
                .then(|| "2.11.0+cpu\n".to_owned())
        };
        assert_eq!(
            loaded_torch_version(maps, archive).as_deref(),
            Some("2.11.0+cpu")
        );
        assert_eq!(loaded_torch_version(maps, |_| None), None);
        assert_eq!(
            loaded_torch_version("7f02-7f03 r-xp 0 fd:01 43 /usr/lib/libc.so.6\n", wheel),
            None
        );
    }
    use crate::document::Dtype;

    #[test]
    fn request_json_shape() {
        let request = WorkerRequest::Measure {
            configuration: Configuration {
                device: Device::FIRST,
                batch: 1,
                context: 16,
                width: 64,
                dtype: Dtype::Float32,
                warmup: 1,
                repeats: 2,
                seed: 0,
            },
            graph_replays: None,
        };
        let text = serde_json::to_string(&request).unwrap();
        assert!(!text.contains("graph_replays"), "{text}");
        assert!(text.starts_with("{\"command\":\"measure\""), "{text}");
        assert!(text.contains("\"dtype\":\"float32\""));
        let back: WorkerRequest = serde_json::from_str(&text).unwrap();
        assert_eq!(back, request);
    }

    #[test]
    fn errors_map_to_exit_codes() {
        let oom = WorkerError {
            kind: WorkerErrorKind::OutOfMemory,
            message: "CUDA error".into(),
        };
        let e = oom.into_error();
        assert_eq!(e.exit_code(), 1);
        assert!(matches!(e, Error::OutOfMemory(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "out of memory: CUDA error; no file was written"
        );
        let none = WorkerError {
            kind: WorkerErrorKind::NoCudaDevice,
            message: "no CUDA device".into(),
        };
        assert_eq!(none.into_error().exit_code(), 2);
        let bad = WorkerError {
            kind: WorkerErrorKind::BadDeviceIndex,
            message: "cuda:3".into(),
        };
        assert_eq!(bad.into_error().exit_code(), 2);
        let reply = WorkerReply::Error(WorkerError {
            kind: WorkerErrorKind::Runtime,
            message: "x".into(),
        });
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(text, r#"{"error":{"kind":"runtime","message":"x"}}"#);
    }

    #[test]
    fn found_paths_are_shown_without_the_home_folder() {
        let typed = Path::new("/data/someone/bin/lab-torch-worker");
        assert_eq!(shown(typed, Some(typed)), typed.display().to_string());
        assert_eq!(shown(typed, None), "lab-torch-worker");
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            let found = PathBuf::from(home).join(".cargo/bin/lab-torch-worker");
            assert_eq!(shown(&found, None), "~/.cargo/bin/lab-torch-worker");
        }
    }

    #[test]
    fn missing_worker_is_reported() {
        let err = locate(Some(Path::new("/nonexistent/lab-torch-worker"))).unwrap_err();
        assert!(matches!(err, Unavailable::NoWorker(_)));
        assert!(err.message().contains("cargo xtask worker"));
    }
}
