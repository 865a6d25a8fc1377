//! `cargo xtask worker`: builds `lab-torch-worker` (and a `lab` beside it) against PyTorch
//! 2.11.0's libtorch, and the verify steps that run the `lab measure` guards against that real
//! worker on a machine without a GPU.
//!
//! Recipe (tested, see CONTRIBUTING.md "Building the worker"): a virtual environment `target/torch-venv`;
//! `pip install --no-deps torch==2.11.0` (libtorch's headers and shared libraries, ~530 MB)
//! plus the `nvidia-cuda-runtime` and `nvidia-cuda-crt` 13.0 wheels (CUDA runtime headers for
//! the shim, ~2.4 MB); then `cargo build --release -p lab --features torch` with
//! `LIBTORCH=<site-packages>/torch` into its own target folder `target/torch` (so the default
//! builds are not invalidated); verify builds the same in the dev profile ([`Profile::Dev`]). `--full` also installs torch's runtime dependencies (~4.6 GB),
//! which the worker needs to *start*; only the no-GPU guard needs that. pip's own cache
//! serves repeated runs; nothing is committed.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// PyTorch version `tch` 0.24 requires.
pub const TORCH_VERSION: &str = "2.11.0";
/// CUDA runtime header wheels matching torch 2.11.0's CUDA 13.0 build.
pub const HEADER_WHEELS: [&str; 2] = ["nvidia-cuda-runtime==13.0.96", "nvidia-cuda-crt==13.0.88"];

/// Flags of `cargo xtask worker`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also install torch's runtime dependencies (~4.6 GB) so the worker can start here.
    #[arg(long)]
    pub full: bool,
}

/// Runs `cargo xtask worker`.
pub fn run(args: Args) -> Result<()> {
    let root = crate::project_root();
    let built = build(&root, args.full, Profile::Release)?;
    lab::stdout::lines(&[
        format!("worker: {}", built.worker().display()),
        format!("lab:    {}", built.lab().display()),
        format!(
            "run with LIBTORCH={} (lab puts its lib folder on the worker's LD_LIBRARY_PATH)",
            built.libtorch.display()
        ),
    ])?;
    Ok(())
}

/// Where a build put things.
pub struct Built {
    /// `target/torch/release` or `target/torch/debug` ([`Profile`]).
    pub bin: PathBuf,
    /// `<site-packages>/torch` of the build's virtual environment.
    pub libtorch: PathBuf,
}

impl Built {
    /// The worker binary.
    pub fn worker(&self) -> PathBuf {
        self.bin.join("lab-torch-worker")
    }

    /// The `lab` binary next to it.
    pub fn lab(&self) -> PathBuf {
        self.bin.join("lab")
    }
}

fn venv(root: &Path) -> PathBuf {
    root.join("target/torch-venv")
}

fn site_packages(venv: &Path) -> Result<PathBuf> {
    let lib = venv.join("lib");
    let entries =
        std::fs::read_dir(&lib).with_context(|| format!("{}: cannot list", lib.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("python3") {
            return Ok(entry.path().join("site-packages"));
        }
    }
    bail!("no python3.* folder under {}", lib.display())
}

/// Runs `command`, its output shown after `prefix` ([`crate::progress::run_prefixed`]).
fn checked(command: Command, what: &str, prefix: &str) -> Result<()> {
    if prefix.is_empty() {
        crate::progress::doing(what);
    } else {
        crate::progress::background(Some(what));
    }
    let status = crate::progress::run_prefixed(command, prefix)
        .with_context(|| format!("{what}: cannot start"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// pip's flags: no progress bar (it is one line redrawn, unreadable in a log), but its
/// `Downloading NAME (SIZE)` line for every wheel it fetches, so that the log says what is
/// being downloaded and how large it is.
const PIP_FLAGS: [&str; 3] = ["--progress-bar", "off", "--disable-pip-version-check"];

/// The cargo profile of a worker build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `--release`, into `target/torch/release`: what `cargo xtask worker` gives users.
    Release,
    /// The dev profile, into `target/torch/debug`: what verify's guard steps run, which test
    /// exit codes and messages, not speed; its dependencies and torch-sys's C++ compile
    /// unoptimized, much faster than the release build.
    Dev,
}

/// Ensures the virtual environment and its wheels (idempotent): `torch` without its
/// dependencies and the CUDA header wheels, then with `full` torch's runtime dependencies.
/// Output lines go after `prefix` (a background install's marker, or nothing). Returns
/// libtorch's folder (`<site-packages>/torch`).
///
/// # Errors
/// `python3 -m venv` or a pip install fails.
pub fn prepare(root: &Path, full: bool, prefix: &str) -> Result<PathBuf> {
    let venv = venv(root);
    let pip = venv.join("bin/pip");
    if !pip.exists() {
        let mut command = Command::new("python3");
        command.args(["-m", "venv"]).arg(&venv);
        checked(command, "python3 -m venv target/torch-venv", prefix)?;
    }
    let sp = site_packages(&venv)?;
    let torch_ok = sp.join(format!("torch-{TORCH_VERSION}.dist-info")).is_dir();
    if !torch_ok {
        let mut command = Command::new(&pip);
        command
            .args(["install", "--no-deps"])
            .args(PIP_FLAGS)
            .arg(format!("torch=={TORCH_VERSION}"));
        checked(command, "pip install --no-deps torch (~530 MB)", prefix)?;
    }
    if !sp.join("nvidia/cu13/include/cuda_runtime_api.h").exists()
        || !sp.join("nvidia/cu13/include/crt/host_defines.h").exists()
    {
        let mut command = Command::new(&pip);
        command
            .args(["install", "--no-deps"])
            .args(PIP_FLAGS)
            .args(HEADER_WHEELS);
        checked(
            command,
            "pip install the CUDA header wheels (~2.4 MB)",
            prefix,
        )?;
    }
    let full_marker = venv.join(".lab-full-torch");
    if full && !full_marker.exists() {
        let mut command = Command::new(&pip);
        command
            .arg("install")
            .args(PIP_FLAGS)
            .arg(format!("torch=={TORCH_VERSION}"));
        checked(
            command,
            "pip install torch's runtime dependencies (~4.6 GB)",
            prefix,
        )?;
        std::fs::write(&full_marker, "torch runtime dependencies installed\n")?;
    }
    Ok(sp.join("torch"))
}

/// Ensures the virtual environment ([`prepare`]), then builds the worker and `lab` with
/// `profile` into `target/torch`.
///
/// # Errors
/// [`prepare`] or the build fails.
pub fn build(root: &Path, full: bool, profile: Profile) -> Result<Built> {
    let libtorch = prepare(root, full, "")?;
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root).arg("build");
    if profile == Profile::Release {
        command.arg("--release");
    }
    command
        .args(["-p", "lab", "--features", "torch"])
        .env("LIBTORCH", &libtorch)
        .env("CARGO_TARGET_DIR", root.join("target/torch"))
        .env_remove("LIBTORCH_USE_PYTORCH");
    checked(command, "cargo build -p lab --features torch", "")?;
    let folder = match profile {
        Profile::Release => "target/torch/release",
        Profile::Dev => "target/torch/debug",
    };
    Ok(Built {
        bin: root.join(folder),
        libtorch,
    })
}

const SMALL: [&str; 10] = [
    "--device",
    "cuda:0",
    "--batch",
    "1",
    "--context",
    "16",
    "--width",
    "64",
    "--repeats",
    "2",
];

/// Runs `lab measure` (small configuration, output in a fresh temporary folder, removed
/// afterwards) with `setup`'s changes; returns its output and whether a file (any file)
/// appeared.
fn guarded_measure(lab: &Path, setup: impl FnOnce(&mut Command)) -> Result<(Output, bool)> {
    let dir = tempfile::Builder::new()
        .prefix("lab-guard-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let out = dir.path().join("m.json");
    let mut command = Command::new(lab);
    command
        .args(["measure"])
        .args(SMALL)
        .arg("--output")
        .arg(&out);
    setup(&mut command);
    let output = command
        .output()
        .with_context(|| format!("{}: cannot start", lab.display()))?;
    let wrote = std::fs::read_dir(dir.path())?.next().is_some();
    Ok((output, wrote))
}

fn expect_exit2(output: &Output, wrote: bool, needle: &str) -> Result<()> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() != Some(2) || wrote || !stderr.to_lowercase().contains(needle) {
        bail!(
            "expected exit 2, no file and a message naming '{needle}'; got {} (file written: {wrote}): {}",
            output.status,
            stderr.trim()
        );
    }
    if stderr.trim().lines().count() != 1 {
        bail!("expected one line on stderr, got: {}", stderr.trim());
    }
    lab::errln!("  {}", stderr.trim());
    Ok(())
}

/// Verify step: build the worker (dev profile, [`Profile::Dev`]), so it never rots, and lint
/// it (clippy with `-D warnings` on the `torch` feature, same target folder and profile, so
/// torch-sys's build script and its C++ are built once for both).
pub fn step_build(ctx: &crate::Ctx) -> Result<()> {
    crate::prefetch::wait(crate::prefetch::Item::Torch)?;
    let built = build(&ctx.root, false, Profile::Dev)?;
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command
        .current_dir(&ctx.root)
        .args([
            "clippy",
            "-p",
            "lab",
            "--features",
            "torch",
            "--all-targets",
        ])
        .args(["--", "-D", "warnings"])
        .env("LIBTORCH", &built.libtorch)
        .env("CARGO_TARGET_DIR", ctx.root.join("target/torch"))
        .env_remove("LIBTORCH_USE_PYTORCH");
    checked(command, "cargo clippy -p lab --features torch", "")
}

/// Verify step: the real worker with libtorch not loadable -> `lab measure` exits 2 naming
/// libtorch, writes nothing.
pub fn step_guard_no_libtorch(ctx: &crate::Ctx) -> Result<()> {
    let lab = ctx.root.join("target/torch/debug/lab");
    let (output, wrote) = guarded_measure(&lab, |c| {
        c.env_remove("LIBTORCH").env_remove("LD_LIBRARY_PATH");
    })?;
    expect_exit2(&output, wrote, "libtorch")
}

/// Verify step: the real worker with libtorch loaded (full torch install) and no GPU
/// (`CUDA_VISIBLE_DEVICES=` hides any) -> `lab measure` exits 2 saying "no CUDA device", and
/// `lab environment` exits 0 saying "not available".
pub fn step_guard_no_gpu(ctx: &crate::Ctx) -> Result<()> {
    crate::prefetch::wait(crate::prefetch::Item::TorchFull)?;
    let built = build(&ctx.root, true, Profile::Dev)?;
    let (output, wrote) = guarded_measure(&built.lab(), |c| {
        c.env("LIBTORCH", &built.libtorch)
            .env("CUDA_VISIBLE_DEVICES", "");
    })?;
    expect_exit2(&output, wrote, "no cuda device")?;
    let env = Command::new(built.lab())
        .args(["environment", "--device", "cuda:0"])
        .env("LIBTORCH", &built.libtorch)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()?;
    let text = String::from_utf8_lossy(&env.stdout);
    if !env.status.success() || !text.contains("not available") || !text.contains(TORCH_VERSION) {
        bail!("lab environment without a GPU: {} {}", env.status, text);
    }
    Ok(())
}

/// Verify step: the worker's decode kernels (`kernels.cu`) compile through NVRTC, which needs
/// no GPU (`lab/tests/numerics/kernels_compile.py`: the libnvrtc of the full torch install,
/// the worker's compile options over element types, head widths, prefetch depths and compute
/// capabilities 8.0 and 9.0; every kernel the worker looks up defined; programmatic dependent
/// launch only on 9.0). Without it a compile error would show only on a GPU machine.
pub fn step_kernels_compile(ctx: &crate::Ctx) -> Result<()> {
    crate::prefetch::wait(crate::prefetch::Item::TorchFull)?;
    let venv = venv(&ctx.root);
    prepare(&ctx.root, true, "")?;
    let sp = site_packages(&venv)?;
    let mut command = Command::new(venv.join("bin/python"));
    command
        .arg(ctx.root.join("lab/tests/numerics/kernels_compile.py"))
        .arg(&sp);
    checked(command, "decode kernels through NVRTC", "")
}

/// Pinned Python packages the numerics step adds to the torch venv.
pub const NUMERICS_REQUIREMENTS: &str = "xtask/torch-venv-requirements.txt";

/// The torch venv with the pinned [`NUMERICS_REQUIREMENTS`] installed (once per pin: a marker
/// file holds the requirements last installed). The venv itself comes from [`build`].
fn numerics_venv(root: &Path) -> Result<PathBuf> {
    let venv = venv(root);
    let marker = venv.join(".lab-numerics-requirements");
    let requirements = root.join(NUMERICS_REQUIREMENTS);
    let wanted = std::fs::read_to_string(&requirements)
        .with_context(|| format!("{}: cannot read", requirements.display()))?;
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(wanted.as_str()) {
        let mut command = Command::new(venv.join("bin/pip"));
        command.args(["install", "-q", "-r"]).arg(&requirements);
        checked(command, "pip install the numerics requirements", "")?;
        std::fs::write(&marker, &wanted)?;
    }
    Ok(venv)
}

/// Verify step: `lab plan`'s reading of every config field it uses against transformers'
/// (`scripts/config_defaults_check.py`, CPU, the pinned transformers of the numerics step):
/// each family's small config with one field present, absent, null, zero, negative, huge, of
/// the wrong type or spelled another way; the plan's parameters, key/value heads, head width,
/// tying and windowed layers must be what transformers builds on the meta device, or lab
/// must refuse (naming the field where transformers builds it). About two minutes.
pub fn step_config_defaults(ctx: &crate::Ctx) -> Result<()> {
    let built = build(&ctx.root, true, Profile::Dev)?;
    let venv = numerics_venv(&ctx.root)?;
    let mut command = Command::new(venv.join("bin/python"));
    command
        .arg(ctx.root.join("scripts/config_defaults_check.py"))
        .arg(built.lab())
        .env("CUDA_VISIBLE_DEVICES", "");
    checked(command, "config defaults against transformers", "")
}

/// Verify step: the worker's decoder forward (Llama, Mistral, Qwen2, Qwen3, Phi-3, Mixtral,
/// Gemma 2) against `transformers`' on the CPU, float32 and bfloat16, through the worker's test-only
/// `cpu_logits` request (`lab/tests/numerics/decoder_numerics.py`: tiny random configs, the
/// same weights written to safetensors, logits compared within the tolerance per dtype).
/// Needs the full torch install (as the no-GPU guard) plus `transformers` (pinned). Then
/// `lab measure --model` against that worker without a GPU: exit 2, "no CUDA device", no file.
pub fn step_numerics(ctx: &crate::Ctx) -> Result<()> {
    let built = build(&ctx.root, true, Profile::Dev)?;
    let venv = numerics_venv(&ctx.root)?;
    let mut command = Command::new(venv.join("bin/python"));
    command
        .arg(ctx.root.join("lab/tests/numerics/decoder_numerics.py"))
        .arg(built.worker())
        .env("LD_LIBRARY_PATH", built.libtorch.join("lib"))
        .env("CUDA_VISIBLE_DEVICES", "");
    checked(command, "decoder numerics against transformers", "")?;
    // The real worker, libtorch loaded, no GPU: `lab measure --model` exits 2, writes nothing.
    let dir = tempfile::Builder::new()
        .prefix("lab-guard-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let output = Command::new(built.lab())
        .args(["measure", "--device", "cuda:0", "--model"])
        .arg(ctx.root.join("examples/models/qwen3-0.6b"))
        .args(["--random-weights", "--batch", "1", "--input-tokens", "8"])
        .args(["--output-tokens", "4", "--graph", "--output"])
        .arg(dir.path().join("m.json"))
        .env("LIBTORCH", &built.libtorch)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()?;
    let wrote = std::fs::read_dir(dir.path())?.next().is_some();
    expect_exit2(&output, wrote, "no cuda device")
}
