//! The analytic prediction of allocated bytes per phase row (`lab measure`'s own model) and the
//! note that says what it leaves out.

use crate::document::{Phase, SyntheticModel};
use serde::Serialize;

/// The analytic prediction of allocated bytes for one phase row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Prediction {
    /// Predicted allocated bytes at the end of the step.
    pub end_allocated_bytes: u64,
    /// Predicted peak allocated bytes during the step.
    pub peak_allocated_bytes: u64,
}

/// Predicts allocated bytes for a row of `phase` that started at `baseline_allocated` bytes,
/// from `lab measure`'s analytic model (see the module documentation). Saturates rather than
/// overflows on absurd inputs.
pub fn predict(model: &SyntheticModel, phase: Phase, baseline_allocated: u64) -> Prediction {
    let (end_extra, peak_extra) = match phase {
        Phase::ModelLoad => {
            let w = model.predicted_weight_allocation();
            (w, w)
        }
        Phase::Inputs => {
            let i = model.predicted_input_allocation();
            (i, i)
        }
        Phase::ColdForward | Phase::Warmup | Phase::WarmForward => (
            model.predicted_output_allocation(),
            model.predicted_forward_peak_extra(),
        ),
    };
    Prediction {
        end_allocated_bytes: baseline_allocated.saturating_add(end_extra),
        peak_allocated_bytes: baseline_allocated.saturating_add(peak_extra),
    }
}

/// How [`predict`] works and what it leaves out, as shown under the tables.
pub const PREDICTION_NOTE: &str = "pred = the row's measured baseline + the tensors the step \
creates, from synthetic_model (weights; input; one output at the end of a forward, two hidden \
activations at its peak), each rounded to the allocator's 512-byte blocks; the cuBLAS \
workspace is left out, so the cold forward ends above it by that workspace";
