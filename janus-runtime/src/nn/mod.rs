//! Layers with PyTorch's parameter layouts and default initialisations.
//!
//! Layers that behave differently in training and evaluation ([`Dropout`], [`BatchNorm2d`],
//! and [`MultiheadAttention`] and [`TransformerEncoderLayer`], which hold dropouts) keep a
//! `training: bool` field, a constant leaf of the cache key; [`Module::train`](crate::Module::train) and
//! [`Module::eval`](crate::Module::eval) set it on every layer of a model.
//!
//! # Examples
//!
//! ```
//! use janus_runtime::{Module, Tensor, nn};
//! let (embed, cell, head) = (nn::Embedding::new(10, 8), nn::LstmCell::new(8, 16), nn::Linear::new(16, 10));
//! let tokens = Tensor::from_vec(vec![1i64, 4, 7], [3]);
//! let (h, c) = (Tensor::zeros([3, 16]), Tensor::zeros([3, 16]));
//! let (h, _c) = cell.forward(&embed.forward(&tokens), (&h, &c));
//! let logits = head.forward(&h);
//! assert_eq!(logits.dims(), [3, 10]);
//! assert_eq!(head.named_tensors().len(), 2); // weight and bias: state_dict()'s names
//! ```

mod attention;
mod batch_norm;
mod conv;
mod dropout;
mod embedding;
mod gru;
mod layer_norm;
mod linear;
mod lstm;
mod rnn;
mod sequential;
mod transformer;

pub use attention::MultiheadAttention;
pub use batch_norm::BatchNorm2d;
pub use conv::Conv2d;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use gru::GruCell;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub use lstm::LstmCell;
pub use rnn::RnnCell;
pub use sequential::{AvgPool2d, Layer, MaxPool2d, Sequential};
pub use transformer::TransformerEncoderLayer;

use crate::Tensor;

/// Uniform `[-bound, bound)` samples from the thread's stream, as a gradient leaf.
pub(crate) fn uniform_param(shape: &[usize], bound: f64) -> Tensor {
    crate::no_grad(|| (Tensor::rand(shape) * (2.0 * bound) - bound).requires_grad())
}
