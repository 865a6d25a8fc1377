//! `synthetic_model` in the document: the analytic sizes of the MLP and the allocations they
//! predict. Nothing here is measured.

use super::Dtype;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Granularity of the caching allocator's blocks, in bytes: every tensor's storage is rounded
/// up to a multiple of 512 (PyTorch `c10/cuda/CUDACachingAllocator.cpp`, `kMinBlockSize`).
pub const ALLOCATOR_BLOCK_BYTES: u64 = 512;

/// The autograd mode of every forward, recorded as `synthetic_model.autograd`. Inference mode
/// is PyTorch's recommended mode for code that never needs gradients ("Inference Mode",
/// https://docs.pytorch.org/docs/stable/notes/autograd.html#inference-mode).
pub const AUTOGRAD_MODE: &str = "inference_mode";

/// Analytic sizes of the synthetic MLP `Linear(width → 4·width) → GELU(erf) → Linear(4·width →
/// width)`, both with bias (`synthetic_model` in the document). Nothing here is measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SyntheticModel {
    /// Human-readable layer list.
    pub architecture: String,
    /// Autograd mode the forwards run under: `"inference_mode"` (`c10::InferenceMode` in Rust,
    /// `torch.inference_mode()` in Python: no gradients, no autograd bookkeeping). `None` in
    /// documents written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["inference_mode", "no_grad"]))]
    pub autograd: Option<String>,
    /// Model width.
    #[schemars(range(min = 1))]
    pub width: u64,
    /// Hidden width = 4 × width.
    #[schemars(range(min = 1))]
    pub hidden: u64,
    /// Weights and biases: width·hidden + hidden + hidden·width + width.
    #[schemars(range(min = 1))]
    pub parameters: u64,
    /// Bytes per element of the chosen dtype (4 or 2).
    #[schemars(extend("enum" = [2, 4]))]
    pub dtype_bytes: u64,
    /// parameters × dtype_bytes.
    #[schemars(range(min = 1))]
    pub parameter_bytes: u64,
    /// batch × context × width × dtype_bytes.
    #[schemars(range(min = 1))]
    pub input_bytes: u64,
    /// Output of one forward, same shape as the input, in bytes.
    #[schemars(range(min = 1))]
    pub output_bytes: u64,
    /// Floating-point operations of one forward: 2 × tokens × (width·hidden + hidden·width),
    /// the two matrix products only (a multiply-add counts 2; biases and GELU left out).
    #[schemars(range(min = 1))]
    pub flops_per_forward: u64,
}

impl SyntheticModel {
    /// The analytic numbers for a configuration; `None` on 64-bit overflow.
    pub fn new(batch: u64, context: u64, width: u64, dtype: Dtype) -> Option<Self> {
        let hidden = width.checked_mul(4)?;
        let matrix = width.checked_mul(hidden)?;
        let parameters = matrix
            .checked_mul(2)?
            .checked_add(hidden)?
            .checked_add(width)?;
        let dtype_bytes = dtype.bytes();
        let tokens = batch.checked_mul(context)?;
        let io_bytes = tokens.checked_mul(width)?.checked_mul(dtype_bytes)?;
        Some(SyntheticModel {
            architecture: format!(
                "Linear({width}->{hidden}, bias) -> GELU(erf) -> Linear({hidden}->{width}, bias)"
            ),
            autograd: Some(AUTOGRAD_MODE.to_owned()),
            width,
            hidden,
            parameters,
            dtype_bytes,
            parameter_bytes: parameters.checked_mul(dtype_bytes)?,
            input_bytes: io_bytes,
            output_bytes: io_bytes,
            flops_per_forward: tokens.checked_mul(matrix.checked_mul(2)?)?.checked_mul(2)?,
        })
    }

    /// Tokens (batch × context) implied by `input_bytes`.
    fn tokens(&self) -> u64 {
        self.input_bytes / self.width.saturating_mul(self.dtype_bytes).max(1)
    }

    /// Bytes the allocator is predicted to hand out for the weights: each of the four tensors
    /// (weight 1, bias 1, weight 2, bias 2) rounded up to [`ALLOCATOR_BLOCK_BYTES`].
    ///
    /// The `predicted_*` methods saturate at `u64::MAX`: `lab report` calls them on sizes read
    /// from a document, which may be absurd, and must not panic or wrap.
    pub fn predicted_weight_allocation(&self) -> u64 {
        let b = self.dtype_bytes;
        let matrix = self.width.saturating_mul(self.hidden).saturating_mul(b);
        [
            matrix,
            self.hidden.saturating_mul(b),
            matrix,
            self.width.saturating_mul(b),
        ]
        .into_iter()
        .map(round_to_block)
        .fold(0, u64::saturating_add)
    }

    /// Bytes predicted for the input (one tensor, rounded up to a block).
    pub fn predicted_input_allocation(&self) -> u64 {
        round_to_block(self.input_bytes)
    }

    /// Bytes predicted for one output (one tensor, rounded up to a block).
    pub fn predicted_output_allocation(&self) -> u64 {
        round_to_block(self.output_bytes)
    }

    /// Predicted peak extra bytes of one forward over its baseline, cuBLAS workspace left out:
    /// the hidden activation and its GELU coexist (2 × tokens × hidden), then the GELU output
    /// and the output coexist; the larger of the two.
    pub fn predicted_forward_peak_extra(&self) -> u64 {
        let hidden_act = round_to_block(
            self.tokens()
                .saturating_mul(self.hidden)
                .saturating_mul(self.dtype_bytes),
        );
        hidden_act
            .saturating_mul(2)
            .max(hidden_act.saturating_add(self.predicted_output_allocation()))
    }
}

/// `bytes` rounded up to the allocator's 512-byte block size (`u64::MAX` when that overflows).
pub fn round_to_block(bytes: u64) -> u64 {
    bytes
        .div_ceil(ALLOCATOR_BLOCK_BYTES)
        .saturating_mul(ALLOCATOR_BLOCK_BYTES)
}
