//! Layers with PyTorch's parameter layouts and default initialisations.

mod embedding;
mod linear;
mod lstm;

pub use embedding::Embedding;
pub use linear::Linear;
pub use lstm::LstmCell;

use crate::Tensor;

/// Uniform `[-bound, bound)` samples from the thread's stream, as a gradient leaf.
pub(crate) fn uniform_param(shape: &[usize], bound: f64) -> Tensor {
    crate::no_grad(|| (Tensor::rand(shape) * (2.0 * bound) - bound).requires_grad())
}
