//! The environment diagnostic of docs/PROTOCOL.md §3 (`lab environment`) and the `environment` object of
//! the measurement document, without libtorch: what libtorch, CUDA and the GPU report comes
//! from the `lab-torch-worker` child process ([`crate::worker`]); this module assembles and
//! prints it. Collects no environment variable, host name or user name.

use crate::text::one_line;
use crate::worker::{DeviceInfo, WorkerEnvironment};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

/// The Rust compiler that built `lab` (`rustc --version`, recorded by `build.rs`).
pub const RUSTC_VERSION: &str = env!("LAB_RUSTC_VERSION");

/// `runtime` in the document: the language the measuring tool runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runtime {
    /// `Rust` (or `Python` for the kit's script).
    pub language: String,
    /// For Rust, the compiler version `lab` was built with.
    pub version: String,
}

impl Runtime {
    /// The runtime entry of `lab`.
    pub fn rust() -> Self {
        Runtime {
            language: "Rust".to_owned(),
            version: RUSTC_VERSION.to_owned(),
        }
    }
}

/// The GPU driver version as a vendor tool reports it, labelled with its source. Not the CUDA
/// version libtorch was built with: a different thing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Driver {
    /// The version string, e.g. `580.159.04`.
    pub version: String,
    /// The command that answered, e.g. `nvidia-smi --query-gpu=driver_version`.
    pub source: String,
}

/// Asks `nvidia-smi` (then `rocm-smi`) for the driver version only; `None` when neither is on
/// the PATH or answers. Gives up after 20 seconds.
pub fn query_driver() -> Option<Driver> {
    let nvidia = ["--query-gpu=driver_version", "--format=csv,noheader"];
    if let Some(text) = run_with_timeout("nvidia-smi", &nvidia) {
        if let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) {
            return Some(Driver {
                version: line.to_owned(),
                source: "nvidia-smi --query-gpu=driver_version".to_owned(),
            });
        }
    }
    let text = run_with_timeout("rocm-smi", &["--showdriverversion"])?;
    let line = text
        .lines()
        .find(|l| l.to_lowercase().contains("driver version"))?;
    Some(Driver {
        version: line.rsplit(':').next().unwrap_or(line).trim().to_owned(),
        source: "rocm-smi --showdriverversion".to_owned(),
    })
}

fn run_with_timeout(program: &str, args: &[&str]) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) => return None,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let output = child.wait_with_output().ok()?;
    String::from_utf8(output.stdout).ok()
}

/// `environment` in the measurement document (all fields required by the schema, plus the
/// optional `driver`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasurementEnvironment {
    /// Language and version of the measuring tool.
    pub runtime: Runtime,
    /// libtorch's version (`TORCH_VERSION`, e.g. `2.11.0`); Python writes `torch.__version__`.
    pub torch_version: String,
    /// CUDA version libtorch was built with (`13.0`), `None` for a HIP or CPU build.
    pub cuda_build_version: Option<String>,
    /// HIP version libtorch was built with, `None` for a CUDA build.
    pub hip_build_version: Option<String>,
    /// The measured GPU, `cuda:N`.
    pub device: String,
    /// Its name as the runtime reports it (`cudaDeviceProp::name`).
    pub device_name: String,
    /// Compute capability `major.minor`.
    pub compute_capability: String,
    /// Total memory announced by the runtime (`cudaDeviceProp::totalGlobalMem`), bytes.
    pub total_memory_bytes: u64,
    /// Streaming multiprocessors.
    pub multiprocessor_count: u64,
    /// GPUs visible to libtorch.
    pub device_count: u64,
    /// Whether float32 matrix products may use TF32 (libtorch default: false; never changed).
    pub tf32_matmul_allowed: bool,
    /// Driver version from the vendor tool, when present.
    pub driver: Option<Driver>,
}

impl MeasurementEnvironment {
    /// Builds the document's environment from the worker's report of device `device`;
    /// `None` when the worker saw no such device.
    pub fn from_worker(worker: &WorkerEnvironment, driver: Option<Driver>) -> Option<Self> {
        let d: &DeviceInfo = worker.device.as_ref()?;
        Some(MeasurementEnvironment {
            runtime: Runtime::rust(),
            torch_version: worker.torch_version.clone(),
            cuda_build_version: worker.cuda_build_version.clone(),
            hip_build_version: worker.hip_build_version.clone(),
            device: format!("cuda:{}", d.index),
            device_name: d.name.clone(),
            compute_capability: d.compute_capability.clone(),
            total_memory_bytes: d.total_memory_bytes,
            multiprocessor_count: d.multiprocessor_count,
            device_count: worker.device_count,
            tf32_matmul_allowed: worker.tf32_matmul_allowed.unwrap_or(false),
            driver,
        })
    }
}

/// What `lab environment` reports (its `--json` output). Fields that could not be known are
/// `None`; `problems` says why, one line each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentReport {
    /// `iteragpu-lab`, `lab`'s version, `rust`.
    pub tool: crate::measure::Tool,
    /// Rust compiler `lab` was built with.
    pub runtime: Runtime,
    /// The device asked about, as typed.
    pub device: String,
    /// Path of the worker that answered, if one was found.
    pub worker: Option<String>,
    /// Whether the worker could load libtorch: `Some(false)` when the loader failed,
    /// `Some(true)` once the worker answered, `None` (unknown) when no worker started or it
    /// gave no readable answer.
    pub libtorch_available: Option<bool>,
    /// libtorch's version.
    pub torch_version: Option<String>,
    /// CUDA version libtorch was built with.
    pub cuda_build_version: Option<String>,
    /// HIP version libtorch was built with.
    pub hip_build_version: Option<String>,
    /// GPUs visible to libtorch (`Some(0)` when it sees none), `None` when unknown (no worker,
    /// no libtorch, no readable answer).
    pub device_count: Option<u64>,
    /// Whether the asked device exists and answered.
    pub device_available: bool,
    /// Name, compute capability, memory and multiprocessors of that device.
    pub device_info: Option<DeviceInfo>,
    /// Whether float32 matrix products may use TF32.
    pub tf32_matmul_allowed: Option<bool>,
    /// Driver version from the vendor tool, labelled with its source.
    pub driver: Option<Driver>,
    /// Why something is "not available", one line each.
    pub problems: Vec<String>,
}

impl EnvironmentReport {
    /// A report with only `lab`'s own facts filled in.
    pub fn new(device: &str) -> Self {
        EnvironmentReport {
            tool: crate::measure::Tool::rust(),
            runtime: Runtime::rust(),
            device: device.to_owned(),
            worker: None,
            libtorch_available: None,
            torch_version: None,
            cuda_build_version: None,
            hip_build_version: None,
            device_count: None,
            device_available: false,
            device_info: None,
            tf32_matmul_allowed: None,
            driver: None,
            problems: Vec::new(),
        }
    }

    /// Fills in what the worker reported.
    pub fn absorb(&mut self, worker: &WorkerEnvironment) {
        self.libtorch_available = Some(true);
        self.torch_version = Some(worker.torch_version.clone());
        self.cuda_build_version = worker.cuda_build_version.clone();
        self.hip_build_version = worker.hip_build_version.clone();
        self.device_count = Some(worker.device_count);
        self.device_info = worker.device.clone();
        self.device_available = worker.device.is_some();
        self.tf32_matmul_allowed = worker.tf32_matmul_allowed;
        if let Some(problem) = &worker.device_problem {
            self.problems.push(problem.clone());
        }
    }

    /// The human-readable report: one `label: value` line each, "not available (why)" for
    /// what is missing. Control characters in any value or note (e.g. a `--device` typed with
    /// an ESC sequence) are escaped with [`one_line`].
    pub fn text(&self) -> String {
        let na = |why: &str| format!("not available ({why})");
        let why = match (&self.worker, self.libtorch_available) {
            (None, _) => "no torch worker, see note",
            (Some(_), Some(false)) => "libtorch not loaded, see note",
            // The worker started but its answer (if any) could not be read: nothing is known
            // about libtorch, so do not blame it.
            (Some(_), None) => "the torch worker gave no readable answer, see note",
            (Some(_), Some(true)) => "see note",
        };
        let loaded = self.libtorch_available == Some(true);
        let mut out = String::new();
        // The device is printed as typed and the notes may quote it (or a --worker path):
        // every label, value and note has its control characters escaped, so that no input
        // can send escape sequences to the terminal or add lines to the report.
        let mut line = |label: &str, value: String| {
            // Column 31, and always at least one space (a long typed device cannot run
            // into its value).
            let _ = writeln!(out, "{:<29} {}", one_line(label), one_line(&value));
        };
        line(
            "tool",
            format!("{} {} (rust)", self.tool.name, self.tool.version),
        );
        line("Rust (build)", self.runtime.version.clone());
        line(
            "torch worker",
            self.worker.clone().unwrap_or_else(|| na(why)),
        );
        line(
            "libtorch",
            self.torch_version.clone().unwrap_or_else(|| na(why)),
        );
        let built = |v: &Option<String>| {
            v.clone()
                .unwrap_or_else(|| if loaded { "none".to_owned() } else { na(why) })
        };
        line("CUDA version (built with)", built(&self.cuda_build_version));
        line("HIP version (built with)", built(&self.hip_build_version));
        line(
            "device count",
            match self.device_count {
                Some(count) => count.to_string(),
                None => na(why),
            },
        );
        match &self.device_info {
            Some(d) => {
                line(&format!("device {}", self.device), d.name.clone());
                line("  compute capability", d.compute_capability.clone());
                line(
                    "  total memory (runtime)",
                    format!(
                        "{} bytes ({} GiB)",
                        d.total_memory_bytes,
                        crate::units::gib(d.total_memory_bytes, 2)
                    ),
                );
                line("  multiprocessors", d.multiprocessor_count.to_string());
            }
            None => line(&format!("device {}", self.device), na(why)),
        }
        if let Some(tf32) = self.tf32_matmul_allowed {
            line(
                "TF32 for float32 matmul",
                if tf32 { "allowed" } else { "off" }.to_owned(),
            );
        }
        line(
            "driver",
            match &self.driver {
                Some(d) => format!("{} (source: {})", d.version, d.source),
                None => "not available (no nvidia-smi or rocm-smi answered)".to_owned(),
            },
        );
        for problem in &self.problems {
            let _ = writeln!(out, "note: {}", one_line(problem));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_without_worker_says_not_available() {
        let mut report = EnvironmentReport::new("cuda:0");
        report.problems.push("no worker".to_owned());
        let text = report.text();
        assert!(text.contains("libtorch"));
        assert!(text.contains("not available (no torch worker, see note)"));
        assert!(text.contains("note: no worker"));
        assert!(text.contains("Rust (build)"));
        assert!(text.contains("device count                  not available (no torch worker"));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["device_count"], serde_json::Value::Null);
        assert_eq!(json["libtorch_available"], serde_json::Value::Null);
    }

    #[test]
    fn control_characters_in_input_are_escaped() {
        let mut report = EnvironmentReport::new("cuda:\u{1b}[31mRED");
        report
            .problems
            .push("--device must be cuda:N, got 'cuda:\u{1b}[31mRED\nx'".to_owned());
        let text = report.text();
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(
            text.contains("\ndevice cuda:\\u{1b}[31mRED     not available (no torch worker"),
            "{text:?}"
        );
        assert!(
            text.ends_with("note: --device must be cuda:N, got 'cuda:\\u{1b}[31mRED\\nx'\n"),
            "{text:?}"
        );
        // The JSON keeps the value as typed; serde_json escapes it (\u001b).
        let json = serde_json::to_string(&report).unwrap();
        assert!(!json.contains('\u{1b}'));
        assert!(json.contains(r#""device":"cuda:\u001b[31mRED""#), "{json}");
    }

    #[test]
    fn worker_without_readable_answer_does_not_blame_libtorch() {
        let mut report = EnvironmentReport::new("cuda:0");
        report.worker = Some("/bin/true".to_owned());
        let text = report.text();
        assert!(
            text.contains("libtorch                      not available (the torch worker gave no readable answer, see note)"),
            "{text}"
        );
        assert!(!text.contains("libtorch not loaded"), "{text}");
        report.libtorch_available = Some(false);
        assert!(report.text().contains(
            "libtorch                      not available (libtorch not loaded, see note)"
        ));
    }

    #[test]
    fn document_environment_from_worker() {
        let worker = WorkerEnvironment {
            torch_version: "2.11.0".into(),
            cuda_build_version: Some("13.0".into()),
            hip_build_version: None,
            device_count: 1,
            device: Some(DeviceInfo {
                index: 0,
                name: "NVIDIA H200".into(),
                compute_capability: "9.0".into(),
                total_memory_bytes: 150_109_880_320,
                multiprocessor_count: 132,
            }),
            device_problem: None,
            tf32_matmul_allowed: Some(false),
        };
        let mut report = EnvironmentReport::new("cuda:0");
        report.absorb(&worker);
        assert_eq!(report.device_count, Some(1));
        assert_eq!(report.libtorch_available, Some(true));
        assert!(report.text().contains("device count                  1\n"));
        assert!(
            report.text().contains("150109880320 bytes (139.80 GiB)"),
            "{}",
            report.text()
        );
        let env = MeasurementEnvironment::from_worker(&worker, None).unwrap();
        assert_eq!(env.device, "cuda:0");
        assert_eq!(env.runtime.language, "Rust");
        let mut missing = worker.clone();
        missing.device = None;
        assert!(MeasurementEnvironment::from_worker(&missing, None).is_none());
    }
}
