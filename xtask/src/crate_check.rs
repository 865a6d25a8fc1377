//! Checks that `lab` works as a packaged crate: `cargo package -p lab` succeeds (the files it
//! embeds are inside the crate, `lab/data/`, kept equal to their originals by
//! [`crate::codegen`]).

use crate::Ctx;
use anyhow::Result;
use xshell::cmd;

/// Verify step: `cargo package -p lab` builds the crate from its packaged files alone.
pub fn package(ctx: &Ctx) -> Result<()> {
    Ok(crate::run_echoed(cmd!(
        ctx.sh,
        "cargo package -p lab --allow-dirty --quiet"
    ))?)
}
