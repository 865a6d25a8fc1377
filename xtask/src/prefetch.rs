//! Background installs: the full verify starts the slow steps' Python environments (the
//! notebook's nbclient and ipykernel, then PyTorch 2.11.0, then its runtime dependencies)
//! in a thread of their own as soon as it starts, so that the downloads (network-bound, about
//! 5 GB on a cold pip cache) overlap the Rust builds and tests (CPU-bound) instead of
//! following them. Each step that needs an environment waits for it with [`wait`]; without a
//! background install (`--fast`, `--step`, `cargo xtask worker`) the step installs it itself,
//! as before (the installs are idempotent).
//!
//! Their output is shown as it comes, each line after `  [background] `.
//!
//! The caller hands over each install as a closure ([`Install`]), so that this module uses
//! none of the modules that wait on it (`notebook_kernel`, `worker`): no import circle
//! (`cargo xtask imports`).

use anyhow::{bail, Result};
use std::sync::{Condvar, Mutex};

/// What the background installs prepare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// `target/notebook-venv` ([`crate::notebook_kernel::prepare`]).
    Notebook,
    /// `target/torch-venv` with what the worker build needs: torch without its dependencies
    /// and the CUDA headers ([`crate::worker::prepare`]).
    Torch,
    /// Then torch's runtime dependencies (~4.6 GB), which only the no-GPU guard needs: their
    /// download overlaps the worker's build.
    TorchFull,
}

/// Marker before every line of a background install.
pub const PREFIX: &str = "  [background] ";

/// One install run in the background, e.g. `notebook_kernel::prepare(&root, PREFIX)`: it
/// should print each line after [`PREFIX`].
pub type Install = Box<dyn FnOnce() -> Result<()> + Send>;

/// Per item: `None` not started here, `Some(None)` running, `Some(Some(outcome))` done.
type Slots = [Option<Option<Result<(), String>>>; 3];

static STATE: Mutex<Slots> = Mutex::new([None, None, None]);
static DONE: Condvar = Condvar::new();

fn slot(item: Item) -> usize {
    match item {
        Item::Notebook => 0,
        Item::Torch => 1,
        Item::TorchFull => 2,
    }
}

/// Starts the background installs `items`, each preparing its [`Item`] (in that order, one
/// after the other: two pip runs at once would compete for the same link).
pub fn start(items: Vec<(Item, Install)>) {
    if items.is_empty() {
        return;
    }
    if let Ok(mut state) = STATE.lock() {
        for (item, _) in &items {
            state[slot(*item)] = Some(None);
        }
    }
    std::thread::spawn(move || {
        for (item, install) in items {
            let outcome = install().map_err(|e| format!("{e:#}"));
            if let Ok(mut state) = STATE.lock() {
                state[slot(item)] = Some(Some(outcome));
            }
            DONE.notify_all();
        }
        crate::progress::background(None);
        lab::errln!("{PREFIX}done");
    });
}

/// Waits until the background install of `item` is done; at once when none was started.
///
/// # Errors
/// The background install failed (its error).
pub fn wait(item: Item) -> Result<()> {
    let Ok(mut state) = STATE.lock() else {
        return Ok(());
    };
    if matches!(state[slot(item)], Some(None)) {
        crate::progress::doing("waiting for the background install");
    }
    loop {
        match &state[slot(item)] {
            None => return Ok(()),
            Some(Some(Ok(()))) => return Ok(()),
            Some(Some(Err(e))) => bail!("the background install failed: {e}"),
            Some(None) => match DONE.wait(state) {
                Ok(guard) => state = guard,
                Err(_) => return Ok(()),
            },
        }
    }
}
