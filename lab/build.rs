//! Build script of the `lab` crate.
//!
//! Always: records the compiler's version (`rustc --version`) as `LAB_RUSTC_VERSION`, which
//! `lab environment` and the measurement document report as the Rust runtime version.
//!
//! With the `torch` feature only: compiles the C++ shim `src/shim/lab_shim.cpp` (allocator
//! counters, device properties, CUDA events; what `tch` lacks) against libtorch's headers and
//! the CUDA runtime headers, for the `lab-torch-worker` binary alone, and forces that binary
//! to keep `libtorch_cuda.so` as a dependency (rustc links with `--as-needed`, which would
//! otherwise drop it, and CUDA would then look absent on a GPU machine).

use std::env;
#[cfg(feature = "torch")]
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    record_rustc_version();
    #[cfg(feature = "torch")]
    build_shim();
}

fn record_rustc_version() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LAB_RUSTC_VERSION={version}");
}

#[cfg(feature = "torch")]
fn build_shim() {
    const WORKER: &str = "lab-torch-worker";
    println!("cargo:rerun-if-changed=src/shim/lab_shim.cpp");
    println!("cargo:rerun-if-env-changed=LAB_CUDA_INCLUDE");
    // Set by torch-sys (`links = "tch"`, `cargo:libtorch_lib=...`): libtorch's lib folder.
    let lib = PathBuf::from(
        env::var("DEP_TCH_LIBTORCH_LIB")
            .expect("torch-sys did not report libtorch's lib folder (DEP_TCH_LIBTORCH_LIB)"),
    );
    let root = lib
        .parent()
        .expect("libtorch's lib folder has a parent")
        .to_path_buf();
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .cargo_metadata(false);
    let cuda = cuda_include(&root);
    build.include(&cuda);
    build.file("src/shim/lab_shim.cpp").compile("lab_shim");
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    // Only the worker links the shim and libtorch_cuda; `lab` itself stays free of libtorch.
    println!("cargo:rustc-link-search=native={out}");
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!(
        "cargo:rustc-link-arg-bin={WORKER}=-Wl,--no-as-needed,-ltorch_cuda,-lc10_cuda,--as-needed,-ldl"
    );
}

/// The CUDA runtime headers: `LAB_CUDA_INCLUDE` if set, else the `nvidia-cuda-runtime` wheel's
/// folder next to torch in the same site-packages (`nvidia/cu13/include`), else `/usr/local/cuda`.
#[cfg(feature = "torch")]
fn cuda_include(torch_root: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("LAB_CUDA_INCLUDE") {
        return PathBuf::from(dir);
    }
    let candidates = [
        torch_root.join("../nvidia/cu13/include"),
        torch_root.join("../nvidia/cuda_runtime/include"),
        PathBuf::from("/usr/local/cuda/include"),
    ];
    for candidate in candidates {
        if candidate.join("cuda_runtime_api.h").exists() {
            return candidate;
        }
    }
    panic!(
        "CUDA runtime headers not found next to libtorch; install the nvidia-cuda-runtime and \
         nvidia-cuda-crt 13.0 wheels beside torch, or set LAB_CUDA_INCLUDE"
    );
}
