//! `configuration` in the document: what the user asked to measure.

use crate::device::Device;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Element type of weights and input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE 754 single precision, 4 bytes.
    Float32,
    /// IEEE 754 half precision, 2 bytes.
    Float16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa), 2 bytes.
    Bfloat16,
}

impl Dtype {
    /// The name used on the command line and in the document (`float32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Float32 => "float32",
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Float32 => 4,
            Dtype::Float16 | Dtype::Bfloat16 => 2,
        }
    }
}

/// What the user asked to measure (`configuration` in the document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Configuration {
    /// The GPU (`cuda:N` in the JSON).
    pub device: Device,
    /// Batch size (sequences), >= 1.
    #[schemars(range(min = 1))]
    pub batch: u64,
    /// Positions per sequence, >= 1 (no attention, no KV cache).
    #[schemars(range(min = 1))]
    pub context: u64,
    /// Model width; hidden = 4 × width.
    #[schemars(range(min = 1))]
    pub width: u64,
    /// Element type of weights and input.
    pub dtype: Dtype,
    /// Warm-up passes, measured together as one row; may be 0.
    pub warmup: u64,
    /// Measured warm passes, one row each, >= 1.
    #[schemars(range(min = 1))]
    pub repeats: u64,
    /// Seed of the weights (CPU generator) and the input (GPU generator).
    pub seed: u64,
}
