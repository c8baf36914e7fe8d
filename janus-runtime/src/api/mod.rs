//! The public `Tensor` methods, by family. Each builds an [`Op`](crate::ops::Op) and runs it
//! through [`apply`](crate::ops::apply), or composes other methods (`mean`, `cross_entropy`).

mod conv;
mod create;
mod elementwise;
mod host;
mod loss;
mod norm;
mod operators;
pub(crate) mod print;

pub use conv::Conv2dOptions;
pub use operators::Scalar;
mod reduce;
mod shape;
mod sort;

use crate::error::bail;
use crate::shape::Dim;
use crate::tensor::Tensor;

impl Tensor {
    /// Resolves a possibly negative dimension for an op over this tensor's `rank + extra`
    /// dimensions (`extra = 1` for `unsqueeze`).
    #[track_caller]
    pub(crate) fn resolve_dim(&self, op: &str, d: impl Dim, extra: usize) -> usize {
        let r = (self.rank() + extra) as isize;
        let v = d.to_isize();
        let i = if v < 0 { v + r } else { v };
        if i < 0 || i >= r {
            bail!(
                op,
                "dim {v} is out of range for a tensor of shape {:?} (rank {})",
                self.shape_ref(),
                self.rank()
            );
        }
        i as usize
    }
}
