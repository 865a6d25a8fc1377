//! What one tensor of a model is, for its width and for the parameter count: the vocabulary
//! the family files ([`super::family`]) use to list a model's tensors in the order
//! `transformers` materialises them, and the sums taken over that list.
//!
//! `from_pretrained` and `to_empty` build the model on the meta device and then give each
//! tensor its memory module by module (`torch.nn.Module._apply`: a module's children first,
//! in the order they were assigned in `__init__`, then its own parameters, then its
//! buffers). The order matters to the caching allocator ([`super::allocator`]): tensors of
//! 1–10 MiB share 20 MiB segments. Parameters tied to the embedding are not listed again.
//! The parameter counts are sums over the same list ([`ParameterCounts::of`]): one source of
//! truth for the count and for the allocation replay.

use serde::Serialize;

/// What a tensor is, for its width: quantized formats convert the [`Role::Linear`] matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The token embedding.
    Embedding,
    /// The untied output head.
    OutputHead,
    /// A decoder weight matrix (attention, feed-forward, experts).
    Linear,
    /// Norms, biases, routers.
    Other,
    /// Vision tower and projector parameters.
    Vision,
    /// A buffer (not a parameter) of this many bytes per element: rotary frequencies (fp32),
    /// the Gemma embedding scale, position ids (int64).
    Buffer(u64),
}

/// One tensor: its role, element count and its last two dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tensor {
    /// What it is.
    pub role: Role,
    /// Elements (saturated at `u64::MAX`: such a model is refused by the 64-bit check of
    /// [`Counts128::narrow`]).
    pub elements: u64,
    /// The second-to-last and last dimensions (`[out, in]` of a matrix; 1 and the length of
    /// a vector): block-scaled formats keep one scale per tile of them, for each leading
    /// index (a stack of experts).
    pub tail: (u64, u64),
}

impl Tensor {
    /// The product of the dimensions before the last two (1 for a matrix).
    pub fn stack(&self) -> u64 {
        let tile = self.tail.0.saturating_mul(self.tail.1);
        self.elements.checked_div(tile).unwrap_or(0)
    }
}

/// Where a family writes its tensors, one call per tensor, with its shape.
pub struct Sink<'a> {
    visit: &'a mut dyn FnMut(Tensor),
}

impl<'a> Sink<'a> {
    /// A sink handing every tensor to `visit`, in order.
    pub fn new(visit: &'a mut dyn FnMut(Tensor)) -> Self {
        Sink { visit }
    }

    /// One tensor of this role and shape (elements = the product of `dims`, saturating).
    pub fn emit(&mut self, role: Role, dims: &[u64]) {
        let elements = dims.iter().fold(1u64, |acc, d| acc.saturating_mul(*d));
        let tail = match dims {
            [] => (1, 1),
            [d] => (1, *d),
            [.., r, c] => (*r, *c),
        };
        (self.visit)(Tensor {
            role,
            elements,
            tail,
        });
    }

    /// A decoder weight matrix.
    pub fn linear(&mut self, dims: &[u64]) {
        self.emit(Role::Linear, dims);
    }

    /// A norm weight, a bias or a router.
    pub fn other(&mut self, dims: &[u64]) {
        self.emit(Role::Other, dims);
    }

    /// A vision-tower parameter.
    pub fn vision(&mut self, dims: &[u64]) {
        self.emit(Role::Vision, dims);
    }

    /// A buffer of `width` bytes per element.
    pub fn buffer(&mut self, width: u64, dims: &[u64]) {
        self.emit(Role::Buffer(width), dims);
    }
}

/// Bytes of each tensor in a weights format: `parameter` bytes per element for parameters
/// other than quantized matrices; `matrix(elements)` for [`Role::Linear`]; buffers at their
/// own width.
pub fn tensor_bytes(t: Tensor, parameter: u64, matrix: &dyn Fn(u64) -> u64) -> u64 {
    match t.role {
        Role::Linear => matrix(t.elements),
        Role::Buffer(width) => t.elements.saturating_mul(width),
        _ => t.elements.saturating_mul(parameter),
    }
}

/// Parameters by role: quantizers convert `linear` (decoder matrices), and keep the rest
/// (embeddings, output head, norms, biases, routers) in 16 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ParameterCounts {
    /// Token embedding `V x H`.
    pub embedding: u64,
    /// Output head `H x V` (0 when tied to the embedding).
    pub output_head: u64,
    /// Weight matrices of the decoder layers (attention, feed-forward, experts).
    pub linear: u64,
    /// Norms, biases and routers.
    pub other: u64,
    /// Vision tower and projector of a multimodal checkpoint (0 otherwise).
    pub vision: u64,
}

impl ParameterCounts {
    /// All parameters.
    pub fn total(&self) -> u128 {
        u128::from(self.embedding)
            + u128::from(self.output_head)
            + u128::from(self.linear)
            + u128::from(self.other)
            + u128::from(self.vision)
    }

    /// The sums by role of the tensors `walk` lists (buffers are not parameters), in u128
    /// (saturating): see [`Counts128::narrow`] for the 64-bit check.
    pub fn of(walk: impl FnOnce(&mut dyn FnMut(Tensor))) -> Counts128 {
        let mut sums = Counts128::default();
        walk(&mut |t| {
            let slot = match t.role {
                Role::Embedding => &mut sums.embedding,
                Role::OutputHead => &mut sums.output_head,
                Role::Linear => &mut sums.linear,
                Role::Other => &mut sums.other,
                Role::Vision => &mut sums.vision,
                Role::Buffer(_) => return,
            };
            *slot = slot.saturating_add(u128::from(t.elements));
        });
        sums
    }
}

/// [`ParameterCounts`] before the check that each fits in 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts128 {
    /// See [`ParameterCounts::embedding`].
    pub embedding: u128,
    /// See [`ParameterCounts::output_head`].
    pub output_head: u128,
    /// See [`ParameterCounts::linear`].
    pub linear: u128,
    /// See [`ParameterCounts::other`].
    pub other: u128,
    /// See [`ParameterCounts::vision`].
    pub vision: u128,
}

impl Counts128 {
    /// The counts as `u64`, or `None` when the total does not fit (no real model comes near;
    /// a tensor whose element count saturated is never narrowed, as it plus the final norm
    /// passes `u64::MAX`).
    pub fn narrow(&self) -> Option<ParameterCounts> {
        let total = self
            .embedding
            .checked_add(self.output_head)?
            .checked_add(self.linear)?
            .checked_add(self.other)?
            .checked_add(self.vision)?;
        u64::try_from(total).ok()?;
        Some(ParameterCounts {
            embedding: u64::try_from(self.embedding).ok()?,
            output_head: u64::try_from(self.output_head).ok()?,
            linear: u64::try_from(self.linear).ok()?,
            other: u64::try_from(self.other).ok()?,
            vision: u64::try_from(self.vision).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_sums_by_role_and_buffers_are_not_parameters() {
        let counts = ParameterCounts::of(|visit| {
            let mut t = Sink::new(visit);
            t.emit(Role::Embedding, &[10, 4]);
            t.linear(&[4, 4]);
            t.linear(&[4, 8]);
            t.other(&[4]);
            t.buffer(4, &[2]);
            t.vision(&[3, 3]);
        });
        let n = counts.narrow().unwrap();
        assert_eq!(
            (n.embedding, n.output_head, n.linear, n.other, n.vision),
            (40, 0, 48, 4, 9)
        );
        assert_eq!(n.total(), 101);
    }

    #[test]
    fn a_saturated_tensor_is_never_narrowed() {
        let counts = ParameterCounts::of(|visit| {
            let mut t = Sink::new(visit);
            t.linear(&[1 << 40, 1 << 40]);
            t.other(&[1]);
        });
        assert_eq!(counts.linear, u128::from(u64::MAX));
        assert_eq!(counts.narrow(), None);
    }
}
