//! Mixtral's sparse mixture-of-experts feed-forward (`MixtralSparseMoeBlock`, transformers
//! 5.17 `modeling_mixtral.py`) in libtorch.
//!
//! `transformers` routes (`MixtralTopKRouter`): router logits `x · gateᵀ` in the activations'
//! dtype, softmax in float32, the `k` largest probabilities (`topk`), renormalised to sum to
//! one; then (`MixtralExperts.forward`, eager) for each expert hit, in expert order, the
//! tokens routed to it: `down(silu(gate(x)) · up(x))` from the expert's slice of the stacked
//! `gate_up_proj` (`chunk(2)`: gate rows first) and `down_proj`, times the token's float32
//! routing weight, cast back to the activations' dtype and added into a zero accumulator
//! (`index_add_`).
//!
//! Here every expert runs on every token, and a token's weight for an expert it was not
//! routed to is zero: the same sums in the same order (adding an exact zero changes nothing),
//! with fixed shapes and no host-side value, so a decode step stays capturable in a CUDA
//! graph (`transformers`' `nonzero` and per-expert token lists are host synchronisations).
//! The cost: a step reads and multiplies all `E` experts where `k` would do (`E / k` = 4× the
//! expert bytes of Mixtral 8x7B at batch 1); the temporaries are one expert's at a time
//! (`[tokens, 2I]`, `[tokens, I]`, `[tokens, H]` and the float32 product), against the plan's
//! `k` grouped copies (`plan::memory::activation_workspace`).

use super::{dim, err, Step};
use lab::decoder::Routing;
use tch::{Kind, Tensor};

/// One layer's router and experts on the device.
pub struct SparseMoe {
    /// `[E, H]`.
    router: Tensor,
    /// `[E, 2I, H]`: per expert the gate rows, then the up rows.
    gate_up: Tensor,
    /// `[E, H, I]`.
    down: Tensor,
    experts: i64,
    per_token: i64,
    intermediate: i64,
}

impl SparseMoe {
    /// The layer's tensors as loaded (`mlp.gate.weight`, `mlp.experts.gate_up_proj`,
    /// `mlp.experts.down_proj`; shapes as `lab::decoder` lists them).
    pub fn new(
        routing: Routing,
        intermediate: u64,
        router: Tensor,
        gate_up: Tensor,
        down: Tensor,
    ) -> Step<Self> {
        Ok(SparseMoe {
            router,
            gate_up,
            down,
            experts: dim(routing.experts)?,
            per_token: dim(routing.per_token)?,
            intermediate: dim(intermediate)?,
        })
    }

    /// The block's output for `x` (`[batch, tokens, hidden]`), same shape and dtype.
    pub fn forward(&self, x: &Tensor) -> Step<Tensor> {
        let size = x.size();
        let width = size.last().copied().unwrap_or(0);
        let flat = x.f_reshape([-1, width]).map_err(err)?;
        let logits = flat.f_linear(&self.router, None::<Tensor>).map_err(err)?;
        let probs = logits
            .f_to_dtype(Kind::Float, false, false)
            .map_err(err)?
            .f_softmax(-1, Kind::Float)
            .map_err(err)?;
        drop(logits);
        let (top, index) = probs.f_topk(self.per_token, -1, true, true).map_err(err)?;
        let top = top
            .f_div(
                &top.f_sum_dim_intlist(&[-1i64][..], true, Kind::Float)
                    .map_err(err)?,
            )
            .map_err(err)?;
        // [tokens, E] float32: the renormalised weight of each chosen expert, zero elsewhere.
        let weights = probs
            .f_zeros_like()
            .map_err(err)?
            .f_scatter(1, &index, &top)
            .map_err(err)?;
        drop((probs, top, index));
        let kind = flat.kind();
        let i = self.intermediate;
        let mut out = flat.f_zeros_like().map_err(err)?;
        for e in 0..self.experts {
            let gate_up = flat
                .f_linear(&self.gate_up.f_select(0, e).map_err(err)?, None::<Tensor>)
                .map_err(err)?;
            let act = gate_up
                .f_narrow(-1, 0, i)
                .map_err(err)?
                .f_silu()
                .map_err(err)?
                .f_mul(&gate_up.f_narrow(-1, i, i).map_err(err)?)
                .map_err(err)?;
            drop(gate_up);
            let y = act
                .f_linear(&self.down.f_select(0, e).map_err(err)?, None::<Tensor>)
                .map_err(err)?;
            drop(act);
            // The float32 weight promotes the product; cast back, as `index_add_` is fed.
            let term = y
                .f_mul(&weights.f_narrow(1, e, 1).map_err(err)?)
                .map_err(err)?
                .f_to_dtype(kind, false, false)
                .map_err(err)?;
            drop(y);
            let _ = out.f_add_(&term).map_err(err)?;
        }
        out.f_view(size.as_slice()).map_err(err)
    }
}
