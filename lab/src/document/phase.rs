//! `phases` in the document: the five protocol steps ([`Phase`]) and one measured row per
//! step ([`PhaseRow`]); `docs/PROTOCOL.md §4`.

use super::AllocatorCounters;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The five phases of the protocol, in the order they run (their document names are
/// `model_load`, `inputs`, `cold_forward`, `warmup`, `warm_forward`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Build and initialise the model on the CPU, move it to the GPU.
    ModelLoad,
    /// Create the synthetic input on the GPU.
    Inputs,
    /// First forward pass.
    ColdForward,
    /// All warm-up passes together.
    Warmup,
    /// One timed forward pass after warm-up (one row per repetition).
    WarmForward,
}

impl Phase {
    /// All phases in protocol order.
    pub const ALL: [Phase; 5] = [
        Phase::ModelLoad,
        Phase::Inputs,
        Phase::ColdForward,
        Phase::Warmup,
        Phase::WarmForward,
    ];

    /// The name used in the document (`model_load`, ..., `warm_forward`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ModelLoad => "model_load",
            Phase::Inputs => "inputs",
            Phase::ColdForward => "cold_forward",
            Phase::Warmup => "warmup",
            Phase::WarmForward => "warm_forward",
        }
    }
}

/// Writes the document name (`model_load`, ...).
impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: table columns give a width (`{:<13}`).
        f.pad(self.as_str())
    }
}

/// One row of `phases`: one protocol step (`docs/PROTOCOL.md §4`).
///
/// In the schema, a `warm_forward` row has an integer repetition and every other row a null one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(extend(
    "if" = { "properties": { "phase": { "const": "warm_forward" } } },
    "then" = { "properties": { "repetition": { "type": "integer" } } },
    "else" = { "properties": { "repetition": { "type": "null" } } }
))]
pub struct PhaseRow {
    /// The step.
    pub phase: Phase,
    /// 1-based index for `warm_forward`, `None` (JSON null) for the other phases.
    #[schemars(range(min = 1))]
    pub repetition: Option<u64>,
    /// Forward passes run inside the step (0 for model_load and inputs). Not in the v1 schema
    /// (any value is valid there), so left out of the generated one.
    #[schemars(skip)]
    pub forward_passes: u64,
    /// Host clock around the whole step (synchronize, counter reads, work, synchronize), s.
    #[schemars(range(min = 0))]
    pub wall_seconds: f64,
    /// Time between two CUDA events recorded on the current stream around the work, s;
    /// `None` where not measured. Includes the GPU waiting for the host's launches.
    #[schemars(range(min = 0))]
    pub gpu_seconds: Option<f64>,
    /// The allocator's six counters around the step (flattened: six keys of the row).
    #[serde(flatten)]
    pub counters: AllocatorCounters,
}
