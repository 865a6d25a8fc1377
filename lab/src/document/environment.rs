//! `environment` in the document: the software and the GPU the numbers come from
//! (`docs/PROTOCOL.md §3`). Collects no environment variable, host name, user name or path.

use crate::device::Device;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Rust compiler that built `lab` (`rustc --version`, recorded by `build.rs`).
pub const RUSTC_VERSION: &str = env!("LAB_RUSTC_VERSION");

/// `runtime` in the document: the language the measuring tool runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Runtime {
    /// `Rust` (or `Python` for the kit's script).
    #[schemars(extend("enum" = ["Rust", "Python"]))]
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

/// What libtorch says about itself: the same three facts in the document, in the worker's
/// answer and in `lab environment` (each flattens this struct, so the JSON keys stay
/// `torch_version`, `cuda_build_version`, `hip_build_version`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LibtorchFacts {
    /// libtorch's version as loaded (e.g. `2.11.0+cu130`, as `torch.__version__` prints it),
    /// else its headers' `TORCH_VERSION` (`2.11.0`).
    pub torch_version: String,
    /// CUDA runtime version libtorch was built with, `major.minor` (`13.0`); `None` for a HIP
    /// or CPU build.
    pub cuda_build_version: Option<String>,
    /// HIP version libtorch was built with; `None` for a CUDA or CPU build.
    pub hip_build_version: Option<String>,
}

/// `environment` in the measurement document (all fields required by the schema, plus the
/// optional `driver`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasurementEnvironment {
    /// Language and version of the measuring tool.
    pub runtime: Runtime,
    /// libtorch's version and build.
    #[serde(flatten)]
    pub libtorch: LibtorchFacts,
    /// The measured GPU (`cuda:N` in the JSON).
    pub device: Device,
    /// Its name as the runtime reports it (`cudaDeviceProp::name`). Not empty: the v1 schema
    /// allows an empty one, the reader does not ([`Self::check`]).
    pub device_name: String,
    /// Compute capability `major.minor`.
    #[schemars(regex(pattern = r"^[0-9]+\.[0-9]+$"))]
    pub compute_capability: String,
    /// Total memory announced by the runtime (`cudaDeviceProp::totalGlobalMem`), bytes.
    #[schemars(range(min = 1))]
    pub total_memory_bytes: u64,
    /// Streaming multiprocessors.
    #[schemars(range(min = 1))]
    pub multiprocessor_count: u64,
    /// GPUs visible to libtorch.
    #[schemars(range(min = 1))]
    pub device_count: u64,
    /// Whether float32 matrix products may use TF32 (libtorch default: false; never changed).
    pub tf32_matmul_allowed: bool,
    /// Driver version from the vendor tool, when present. Not in the v1 schema (any value is
    /// valid there), so left out of the generated one.
    #[schemars(skip)]
    pub driver: Option<Driver>,
}

impl MeasurementEnvironment {
    /// The rules of the schema that serde's types do not hold (a compute capability
    /// `major.minor`, counts and memory of at least 1), and one the v1 schema cannot add
    /// without a new id: a device name that is not empty (a measurement must name its GPU to
    /// be tied to a package or a calibration).
    ///
    /// # Errors
    /// One line naming the field and quoting the value (escaped).
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.device_name.trim().is_empty() {
            return Err("environment.device_name is empty".into());
        }
        let capability = self
            .compute_capability
            .split_once('.')
            .is_some_and(|(a, b)| {
                [a, b]
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
            });
        if !capability {
            return Err(format!(
                "environment.compute_capability {} is not major.minor such as \"9.0\"",
                crate::text::ascii(&format!("{:?}", self.compute_capability))
            ));
        }
        for (name, value) in [
            ("total_memory_bytes", self.total_memory_bytes),
            ("multiprocessor_count", self.multiprocessor_count),
            ("device_count", self.device_count),
        ] {
            if value == 0 {
                return Err(format!("environment.{name} is 0, at least 1 expected"));
            }
        }
        Ok(())
    }
}
