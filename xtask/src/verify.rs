//! `cargo xtask verify`: the CI gate. Runs every step of [`STEPS`] by name, in order, and ends
//! with `N passed, N failed`; exits 1 if any failed.
//!
//! Adding a check is one line in [`STEPS`]: a name and a `fn(&Ctx) -> Result<()>` (put the
//! function in its own module when it is more than a command line). Steps marked
//! [`Step::slow`] (e.g. the ones that need a real torch worker) are skipped by `--fast`, which
//! is for developers only: CI runs `cargo xtask verify` without flags, so every step.
//!
//! `cargo xtask verify --archive FILE` runs none of the steps: it checks one zip (e.g. a
//! downloaded kit) with [`lab::kit::verify_archive`] and prints the same report as
//! `lab verify-kit`. Exit codes as `lab verify-kit`: 1 for a problem or a missing file, 2 for a
//! path that is not a file.

use crate::{
    archive, archive_check, content, crate_check, notebook_kernel, picture, prefetch, progress,
    worker, Ctx,
};
use anyhow::{Context, Result};
use lab::kit;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use xshell::cmd;

/// Flags of `cargo xtask verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Check only this zip against the kit layout and its own MANIFEST.json (safely, without
    /// extracting) and report every problem by member name.
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Skip the slow steps (developers only; CI runs every step).
    #[arg(long)]
    pub fast: bool,
    /// Run only the steps whose name contains this text (developers only), e.g.
    /// `--step jupyter`; the archive steps fail unless the dist step is selected too.
    #[arg(long, value_name = "TEXT")]
    pub step: Option<String>,
}

/// One named check. `Err` means it failed; the error says why.
pub struct Step {
    /// Name printed when the step starts and in its result line.
    pub name: &'static str,
    /// Whether `--fast` skips it.
    pub slow: bool,
    /// The check itself.
    pub run: fn(&Ctx) -> Result<()>,
}

impl Step {
    /// A step CI and `--fast` both run.
    const fn new(name: &'static str, run: fn(&Ctx) -> Result<()>) -> Step {
        Step {
            name,
            slow: false,
            run,
        }
    }

    /// A step that `--fast` skips (CI still runs it).
    const fn slow(name: &'static str, run: fn(&Ctx) -> Result<()>) -> Step {
        Step {
            name,
            slow: true,
            run,
        }
    }
}

/// Every check CI runs, in order. The archive steps read the archive the dist step of the same
/// run built, and fail when it did not build one.
pub const STEPS: &[Step] = &[
    Step::new("fmt", fmt),
    Step::new("clippy", clippy),
    Step::new("rust tests", rust_tests),
    Step::new(
        "import graph: no circle, no use upwards",
        crate::imports::step,
    ),
    Step::new("catalog", catalog),
    Step::new("results grid", results_grid),
    Step::new(
        "generated files up to date: schema, lab/data copies",
        crate::codegen::step,
    ),
    Step::new("notebook: nbformat schema and kit rules", notebook),
    Step::new("notebook up to date", notebook_up_to_date),
    Step::new("python tests", python_tests),
    Step::new(
        "guide picture up to date (docs/plan-frontier.svg)",
        picture::up_to_date,
    ),
    Step::new("plan page in headless Chromium", picture::browser),
    Step::slow(
        "notebook in a Jupyter kernel without PyTorch",
        notebook_kernel::step,
    ),
    Step::new("dist twice: same SHA-256", archive_check::reproducible),
    Step::new("archive vs manifest: lab::kit", archive_check::read_back),
    Step::new(
        "archive vs manifest: python zipfile",
        archive_check::python_zipfile,
    ),
    Step::new("archive: unzip -t", archive_check::unzip_test),
    Step::slow("cargo package -p lab", crate_check::package),
    Step::slow(
        "torch worker: build (no-deps torch 2.11.0)",
        worker::step_build,
    ),
    Step::slow(
        "torch worker: libtorch not loadable -> exit 2",
        worker::step_guard_no_libtorch,
    ),
    Step::slow(
        "torch worker: no GPU (full torch) -> exit 2",
        worker::step_guard_no_gpu,
    ),
    Step::slow(
        "torch worker: decode kernels compile with NVRTC (no GPU)",
        worker::step_kernels_compile,
    ),
    Step::slow(
        "torch worker: decoder logits = transformers' on the CPU",
        worker::step_numerics,
    ),
    Step::slow(
        "lab plan: config fields = transformers' (every family, every field)",
        worker::step_config_defaults,
    ),
];

/// Runs `cargo xtask verify`; returns exit code 1 when any step (or the archive) failed.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(path) = args.archive {
        return Ok(verify_one_archive(&path));
    }
    if let Some(only) = &args.step {
        if !STEPS.iter().any(|s| s.name.contains(only.as_str())) {
            let names: Vec<&str> = STEPS.iter().map(|s| s.name).collect();
            anyhow::bail!(
                "no step name contains {only:?}; the steps are: {}",
                names.join("; ")
            );
        }
    }
    let ctx = Ctx::new(crate::project_root())?;
    let started = Instant::now();
    let selected = |name: &str| {
        args.step.as_deref().is_none_or(|only| name.contains(only))
            && !(args.fast && STEPS.iter().any(|s| s.name == name && s.slow))
    };
    // The slow steps' downloads start now, in the background, so that they overlap the
    // Rust builds and tests in front of them (crate::prefetch).
    let mut background: Vec<(prefetch::Item, prefetch::Install)> = Vec::new();
    if STEPS
        .iter()
        .any(|s| s.slow && s.name.starts_with("notebook") && selected(s.name))
    {
        let root = ctx.root.clone();
        background.push((
            prefetch::Item::Notebook,
            Box::new(move || notebook_kernel::prepare(&root, prefetch::PREFIX).map(|_| ())),
        ));
    }
    // Only what the selected steps use: the build needs the wheel and the headers, the
    // no-GPU guard the 4.6 GB of runtime dependencies too; the libtorch guard nothing new.
    let torch_step = |part: &str| {
        STEPS.iter().any(|s| {
            s.slow
                && s.name.starts_with("torch worker")
                && s.name.contains(part)
                && selected(s.name)
        })
    };
    if torch_step(": build") || torch_step("no GPU") {
        let root = ctx.root.clone();
        background.push((
            prefetch::Item::Torch,
            Box::new(move || worker::prepare(&root, false, prefetch::PREFIX).map(|_| ())),
        ));
    }
    if torch_step("no GPU") {
        let root = ctx.root.clone();
        background.push((
            prefetch::Item::TorchFull,
            Box::new(move || worker::prepare(&root, true, prefetch::PREFIX).map(|_| ())),
        ));
    }
    prefetch::start(background);
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for step in STEPS {
        if let Some(only) = &args.step {
            if !step.name.contains(only.as_str()) {
                continue;
            }
        }
        if args.fast && step.slow {
            lab::errln!("==> {} (skipped: --fast)", step.name);
            skipped += 1;
            continue;
        }
        lab::errln!("==> {}", step.name);
        let step_started = Instant::now();
        let heartbeat = progress::start(step.name);
        let outcome = (step.run)(&ctx);
        drop(heartbeat);
        match outcome {
            Ok(()) => {
                passed += 1;
                lab::errln!("ok: {} ({:.1?})", step.name, step_started.elapsed());
            }
            Err(error) => {
                failed += 1;
                lab::errln!("FAILED: {}: {error:#}", step.name);
            }
        }
    }
    lab::errln!("verify took {:.1?}", started.elapsed());
    // CI's closing line is exactly `N passed, N failed`; only `--fast` adds the skipped count.
    if skipped == 0 {
        lab::outln!("{passed} passed, {failed} failed")?;
    } else {
        lab::outln!("{passed} passed, {failed} failed, {skipped} skipped (--fast)")?;
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--archive FILE`: prints the report `lab verify-kit` prints ([`kit::Report::lines`]); exit
/// 1 on any finding. The path is checked first as `lab verify-kit` checks it
/// ([`kit::check_archive_path`]): a folder or other non-file is bad input (one line on
/// stderr, exit 2), a missing or unreadable file exit 1.
fn verify_one_archive(path: &Path) -> ExitCode {
    if let Err(error) = kit::check_archive_path(path) {
        lab::errln!("xtask: error: {}", lab::text::one_line(&error.to_string()));
        return ExitCode::from(error.exit_code());
    }
    let report = kit::verify_archive(path);
    // Printed through lab's one stdout path: a closed pipe is a quiet end, a full disk exit 1.
    if let Err(error) = lab::stdout::lines(&report.lines()) {
        lab::errln!("xtask: error: {error}");
        return ExitCode::FAILURE;
    }
    if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn fmt(ctx: &Ctx) -> Result<()> {
    Ok(crate::run_echoed(cmd!(
        ctx.sh,
        "cargo fmt --all -- --check"
    ))?)
}

fn clippy(ctx: &Ctx) -> Result<()> {
    Ok(crate::run_echoed(cmd!(
        ctx.sh,
        "cargo clippy --workspace --all-targets -- -D warnings"
    ))?)
}

fn rust_tests(ctx: &Ctx) -> Result<()> {
    Ok(crate::run_echoed(cmd!(ctx.sh, "cargo test --workspace"))?)
}

/// Reads the source of kit member `name` (`README.md`, ...) from the workspace.
fn member_source(ctx: &Ctx, name: &str) -> Result<(String, Vec<u8>)> {
    let source = archive::source_of(name)
        .with_context(|| format!("{name} is not a content file of the kit"))?;
    let bytes =
        std::fs::read(ctx.root.join(source)).with_context(|| format!("{source}: cannot read"))?;
    Ok((source.to_string(), bytes))
}

fn catalog(ctx: &Ctx) -> Result<()> {
    let (file, bytes) = member_source(ctx, "tarifs-forfaits.csv")?;
    crate::findings_result(&content::catalog(&file, &bytes))
}

fn results_grid(ctx: &Ctx) -> Result<()> {
    let (file, bytes) = member_source(ctx, "resultats-bruts.csv")?;
    crate::findings_result(&content::results_grid(&file, &bytes))
}

fn notebook(ctx: &Ctx) -> Result<()> {
    let (file, bytes) = member_source(ctx, "mesure-memoire.ipynb")?;
    crate::findings_result(&crate::notebook_check::check(&file, &bytes))
}

/// `cargo xtask notebook --check`: the notebook's code cells are the script's regions.
fn notebook_up_to_date(ctx: &Ctx) -> Result<()> {
    crate::notebook::check(&ctx.root)
}

/// The Python suites of the kit's scripts, with the machine's python3 and nothing installed.
fn python_tests(ctx: &Ctx) -> Result<()> {
    Ok(crate::run_echoed(cmd!(
        ctx.sh,
        "python3 -m unittest discover -s tests/python"
    ))?)
}
