//! Layers with PyTorch's parameter layouts and default initialisations.

mod embedding;
mod gru;
mod linear;
mod lstm;
mod rnn;

pub use embedding::Embedding;
pub use gru::GruCell;
pub use linear::Linear;
pub use lstm::LstmCell;
pub use rnn::RnnCell;

use crate::Tensor;

/// Uniform `[-bound, bound)` samples from the thread's stream, as a gradient leaf.
pub(crate) fn uniform_param(shape: &[usize], bound: f64) -> Tensor {
    crate::no_grad(|| (Tensor::rand(shape) * (2.0 * bound) - bound).requires_grad())
}
