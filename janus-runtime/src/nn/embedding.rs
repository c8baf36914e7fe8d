//! `Embedding`: a lookup table of learned vectors.

use crate::Tensor;
use crate::module::impl_module;

/// `weight[idx]` for `i64` indices of any shape; the result gains a last dimension `dim`.
#[derive(Clone, Debug)]
pub struct Embedding {
    /// `[vocab, dim]`.
    pub weight: Tensor,
}

impl_module!(Embedding { weight });

impl Embedding {
    /// A table initialised like PyTorch: standard normal entries.
    pub fn new(vocab: usize, dim: usize) -> Self {
        Embedding { weight: crate::no_grad(|| Tensor::randn([vocab, dim]).requires_grad()) }
    }

    /// Looks up `idx` (`i64`, any shape): result `idx.dims() + [dim]`.
    #[track_caller]
    pub fn forward(&self, idx: &Tensor) -> Tensor {
        let mut dims = idx.sizes().to_vec();
        dims.push(self.weight.sizes()[1]);
        self.weight.index_select(0, &idx.flatten()).reshape(dims)
    }
}
