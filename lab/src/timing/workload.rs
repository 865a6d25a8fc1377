//! What the renter wants done: inference requests, or a training run, and how it is trained.

use super::operators::{FeedForward, Shape};
use crate::{Error, Result};
use serde::Serialize;

/// How a training run updates the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every weight trained (AdamW, mixed precision).
    Full,
    /// Low-rank adapters on a frozen 16-bit base (Hu et al. 2021).
    Lora,
    /// Low-rank adapters on a frozen 4-bit base (Dettmers et al. 2023).
    Qlora,
}

/// Which matrices get adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Targets {
    /// Query, key, value and output projections.
    Attention,
    /// Those and the dense feed-forward matrices (experts excluded).
    All,
}

/// The workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Workload {
    /// `requests` requests of `input` prompt tokens and `output` generated tokens.
    Inference {
        /// Requests.
        requests: u64,
        /// Prompt tokens per request.
        input_tokens: u64,
        /// Generated tokens per request.
        output_tokens: u64,
    },
    /// `tokens` training tokens in sequences of `sequence` tokens.
    Training {
        /// Training tokens.
        tokens: u64,
        /// Sequence length (`--context`).
        sequence: u64,
        /// Method.
        method: Method,
        /// LoRA rank (LoRA and QLoRA).
        rank: u64,
        /// LoRA targets.
        targets: Targets,
    },
}

impl Workload {
    /// Checks the counts.
    ///
    /// # Errors
    /// [`Error::Usage`] for a zero count.
    pub fn check(&self) -> Result<()> {
        match *self {
            Workload::Inference {
                requests,
                input_tokens,
                output_tokens,
            } => {
                if requests == 0 || input_tokens == 0 || output_tokens == 0 {
                    return Err(Error::usage(
                        "--requests, --input-tokens and --output-tokens must each be at least 1",
                    ));
                }
            }
            Workload::Training {
                tokens,
                sequence,
                rank,
                ..
            } => {
                if tokens == 0 || sequence == 0 || rank == 0 {
                    return Err(Error::usage(
                        "--train-tokens, --context and --lora-rank must each be at least 1",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Trainable adapter parameters: `r·(k + n)` per adapted `k x n` matrix (fused
/// query-key-value counts its three matrices, fused gate-up its two).
pub fn lora_parameters(shape: &Shape, rank: u64, targets: Targets) -> u128 {
    let r = u128::from(rank);
    let h = u128::from(shape.hidden);
    shape
        .layers
        .iter()
        .map(|layer| {
            let attention: u128 = layer
                .attention_linears
                .iter()
                .map(|l| match l.name {
                    "qkv" => r * (3 * u128::from(l.k) + u128::from(l.n)),
                    _ => r * (u128::from(l.k) + u128::from(l.n)),
                })
                .sum();
            let ffn = match (targets, layer.feed_forward) {
                (Targets::Attention, _) => 0,
                (Targets::All, FeedForward::Dense(i)) => {
                    let i = u128::from(i);
                    r * (2 * (h + i)) + r * (i + h)
                }
                (Targets::All, FeedForward::Experts { shared, .. }) if shared > 0 => {
                    let s = u128::from(shared);
                    r * (2 * (h + s)) + r * (s + h)
                }
                (Targets::All, FeedForward::Experts { .. }) => 0,
            };
            attention + ffn
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::operators::from_architecture;

    #[test]
    fn lora_parameters_match_peft_counts() {
        let arch = crate::timing::parse_config(include_str!(
            "../../../examples/models/llama-3.1-8b/config.json"
        ));
        let shape = from_architecture(&arch);
        // Rank 16 on q, k, v, o of Llama-3.1-8B: per layer 16·(4096+4096) + 2·16·(4096+1024)
        // + 16·(4096+4096) = 425984; 32 layers = 13631488 (PEFT prints 13,631,488).
        assert_eq!(lora_parameters(&shape, 16, Targets::Attention), 13_631_488);
        // All linear layers: + 16·(4096+14336)·3 per layer = 884736 → 41943040 in all.
        assert_eq!(lora_parameters(&shape, 16, Targets::All), 41_943_040);
    }

    #[test]
    fn zero_counts_are_refused() {
        let bad = Workload::Inference {
            requests: 0,
            input_tokens: 1,
            output_tokens: 1,
        };
        assert!(bad.check().is_err());
        let ok = Workload::Inference {
            requests: 1,
            input_tokens: 1,
            output_tokens: 1,
        };
        assert!(ok.check().is_ok());
    }
}
