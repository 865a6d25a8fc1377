//! The worker's device allocations for the weights: q/k/v and gate/up stacked.
//!
//! A decode step at batch 1 reads every weight once, and one matrix-vector product over a
//! stacked `[q; k; v]` (or `[gate; up]`) matrix runs closer to the memory bandwidth than three
//! (two) smaller ones (measured on an H200, `examples/h200/measure-model/run3/`). So the worker
//! allocates one tensor per stack, at the position of the stack's first member in
//! `transformers`' materialisation order, and loads each member into its rows.
//!
//! The allocator then sees one block where `transformers` sees two or three. The allocated
//! bytes are the same whenever every member's bytes are a multiple of the caching allocator's
//! 512-byte rounding (true of every shipped config: widths are multiples of 256); the reserved
//! bytes can differ (a stack is a larger block, served from other segments), so `lab measure
//! --model` also replays the caching allocator over [`allocations`] and compares the measured
//! reserved bytes with that replay, beside `lab plan`'s figure for `transformers`' layout.

use super::{DecoderSpec, TensorSpec};
use std::collections::HashMap;

/// One device allocation: a spec tensor alone, or a stack of several along dimension 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The state-dict name of a lone tensor; for a stack, the layer prefix plus
    /// `self_attn.qkv_proj.weight` / `.bias` or `mlp.gate_up_proj.weight` / `.bias`.
    pub name: String,
    /// Shape: the members' rows summed, then the members' common trailing dimensions.
    pub shape: Vec<u64>,
    /// `(index into spec.tensors, first row)` of each member, in spec order.
    pub members: Vec<(usize, u64)>,
}

impl Allocation {
    /// Elements, saturating.
    pub fn elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |a, d| a.saturating_mul(*d))
    }
}

/// The stack a tensor belongs to: (stack name, member rank), or `None` for a lone tensor.
fn stack_of(name: &str) -> Option<(String, usize)> {
    const STACKS: [(&str, &str, &[&str]); 2] = [
        (".self_attn.", "qkv_proj", &["q_proj", "k_proj", "v_proj"]),
        (".mlp.", "gate_up_proj", &["gate_proj", "up_proj"]),
    ];
    for (module, stacked, members) in STACKS {
        let Some(at) = name.find(module) else {
            continue;
        };
        let (prefix, rest) = name.split_at(at + module.len());
        let Some((member, suffix)) = rest.split_once('.') else {
            continue;
        };
        if let Some(rank) = members.iter().position(|m| *m == member) {
            return Some((format!("{prefix}{stacked}.{suffix}"), rank));
        }
    }
    None
}

/// The allocations of `spec`'s weights in load order: every tensor of `spec.tensors` is a
/// member of exactly one, at its rows; a stack is allocated where its first member is
/// materialised. Members of a stack must share their trailing dimensions (they do in every
/// family the worker runs); a tensor that does not is left alone.
pub fn allocations(spec: &DecoderSpec) -> Vec<Allocation> {
    let mut out: Vec<Allocation> = Vec::new();
    let mut open: HashMap<String, usize> = HashMap::new();
    for (i, t) in spec.tensors.iter().enumerate() {
        let lone = |t: &TensorSpec| Allocation {
            name: t.name.clone(),
            shape: t.shape.clone(),
            members: vec![(i, 0)],
        };
        let Some((stack, _)) = stack_of(&t.name) else {
            out.push(lone(t));
            continue;
        };
        match open.get(&stack) {
            Some(&a) if out[a].shape.get(1..) == t.shape.get(1..) => {
                let rows = out[a].shape[0];
                out[a].members.push((i, rows));
                out[a].shape[0] = rows.saturating_add(t.shape.first().copied().unwrap_or(0));
            }
            Some(_) => out.push(lone(t)),
            None => {
                open.insert(stack.clone(), out.len());
                out.push(Allocation {
                    name: stack,
                    shape: t.shape.clone(),
                    members: vec![(i, 0)],
                });
            }
        }
    }
    out
}

/// The caching allocator replayed over the worker's load ([`allocations`] at
/// `element_bytes` each, Gemma's one-element `embed_scale` after the embedding, the two
/// float32 rotary buffers of `head_dim / 2` elements where
/// the worker makes them: after the final norm when the head is tied, else just before the
/// head): `(allocated, reserved)` bytes at the end of the load, what `model_load`'s end
/// counters show over its baseline on a fresh allocator. The same replay as `lab plan`'s
/// ([`crate::plan::allocator::CachingAllocator`]), over the stacked layout.
pub fn replay(spec: &DecoderSpec, element_bytes: u64) -> (u128, u128) {
    let mut a = crate::plan::allocator::CachingAllocator::new();
    let buffer = (spec.head_dim / 2).saturating_mul(4);
    let mut buffers_done = false;
    for alloc in allocations(spec) {
        let first = &spec.tensors[alloc.members[0].0].name;
        if first == "lm_head.weight" && !buffers_done {
            a.allocate(buffer);
            a.allocate(buffer);
            buffers_done = true;
        }
        a.allocate(alloc.elements().saturating_mul(element_bytes));
        if first == "model.embed_tokens.weight" && spec.gemma.is_some() {
            // Gemma's `embed_scale` buffer: one element in the model's dtype.
            a.allocate(element_bytes);
        }
        if first == "model.norm.weight" && spec.tied_embeddings {
            a.allocate(buffer);
            a.allocate(buffer);
            buffers_done = true;
        }
    }
    if !buffers_done {
        a.allocate(buffer);
        a.allocate(buffer);
    }
    (a.allocated_bytes(), a.reserved_bytes())
}
