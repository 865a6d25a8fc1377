//! Checks that `lab` works as a packaged crate: the files it embeds are inside the crate
//! (`lab/data/`) and byte-equal to their originals, and `cargo package -p lab` succeeds.

use crate::Ctx;
use anyhow::{bail, Context, Result};
use xshell::cmd;

/// Each file `lab` embeds: its copy inside the crate, and the original it must equal.
pub const EMBEDDED: [(&str, &str); 4] = [
    ("lab/data/tarifs-forfaits.csv", "data/tarifs-forfaits.csv"),
    ("lab/data/gpu-memory.csv", "data/gpu-memory.csv"),
    ("lab/data/gpu-perf.csv", "data/gpu-perf.csv"),
    ("lab/data/resultats-bruts.csv", "dist/resultats-bruts.csv"),
];

/// Verify step: every embedded copy is byte-equal to its original.
pub fn embedded_copies(ctx: &Ctx) -> Result<()> {
    let mut differ = Vec::new();
    for (copy, original) in EMBEDDED {
        let read = |path: &str| {
            std::fs::read(ctx.root.join(path)).with_context(|| format!("{path}: cannot read"))
        };
        if read(copy)? != read(original)? {
            differ.push(format!(
                "  {copy} differs from {original}: cp {original} {copy}"
            ));
        }
    }
    if differ.is_empty() {
        Ok(())
    } else {
        bail!(
            "{} embedded cop(ies) out of date:\n{}",
            differ.len(),
            differ.join("\n")
        )
    }
}

/// Verify step: `cargo package -p lab` builds the crate from its packaged files alone.
pub fn package(ctx: &Ctx) -> Result<()> {
    Ok(crate::run_echoed(cmd!(
        ctx.sh,
        "cargo package -p lab --allow-dirty --quiet"
    ))?)
}
