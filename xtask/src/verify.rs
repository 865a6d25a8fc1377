//! `cargo xtask verify`: runs each check by name and ends with `N passed, N failed`.

use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use xshell::{cmd, Shell};

/// One named check: runs in the workspace root, `Err` means it failed.
type Step = Box<dyn Fn(&Shell) -> Result<()>>;

/// Flags of `cargo xtask verify`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// The workspace root (the parent of `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Runs every check; returns exit code 1 when any failed.
pub fn run(_args: Args) -> Result<ExitCode> {
    let sh = Shell::new()?;
    sh.change_dir(project_root());
    let steps: Vec<(&str, Step)> = vec![
        (
            "fmt",
            Box::new(|sh| Ok(cmd!(sh, "cargo fmt --all -- --check").run()?)),
        ),
        (
            "clippy",
            Box::new(|sh| {
                Ok(cmd!(sh, "cargo clippy --workspace --all-targets -- -D warnings").run()?)
            }),
        ),
        (
            "rust tests",
            Box::new(|sh| Ok(cmd!(sh, "cargo test --workspace").run()?)),
        ),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, step) in &steps {
        eprintln!("==> {name}");
        match step(&sh) {
            Ok(()) => {
                passed += 1;
                eprintln!("ok: {name}");
            }
            Err(error) => {
                failed += 1;
                eprintln!("FAILED: {name}: {error:#}");
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
