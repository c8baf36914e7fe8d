//! `RnnCell`: one Elman RNN step, PyTorch's equations and parameter layout.

use super::uniform_param;
use crate::Tensor;
use crate::module::impl_module;

/// An Elman RNN cell, `h' = tanh(x W_ih^T + h W_hh^T + b)` (or `relu` in place of `tanh`, as
/// PyTorch's `nonlinearity='relu'`). PyTorch keeps two biases (`bias_ih + bias_hh`); their
/// sum is one bias here, as in [`LstmCell`](super::LstmCell).
///
/// # Examples
/// ```
/// use janus_runtime::{Tensor, nn::RnnCell};
/// let cell = RnnCell::new(3, 4);
/// let h = cell.forward(&Tensor::ones([2, 3]), &Tensor::zeros([2, 4]));
/// assert_eq!(h.dims(), &[2, 4]);
/// assert!(h.abs().to_vec::<f32>().iter().all(|v| *v < 1.0)); // tanh
/// ```
#[derive(Clone, Debug)]
pub struct RnnCell {
    /// `[hidden, input]`.
    pub weight_ih: Tensor,
    /// `[hidden, hidden]`.
    pub weight_hh: Tensor,
    /// `[hidden]`.
    pub bias: Tensor,
    /// `relu` instead of `tanh` (a constant of the module, so part of a compiled graph's key).
    pub relu: bool,
}

impl_module!(RnnCell { weight_ih, weight_hh, bias, relu });

impl RnnCell {
    /// A `tanh` cell initialised like PyTorch: every parameter uniform in `±1/sqrt(hidden)`.
    pub fn new(input: usize, hidden: usize) -> Self {
        let bound = 1.0 / (hidden as f64).sqrt();
        RnnCell {
            weight_ih: uniform_param(&[hidden, input], bound),
            weight_hh: uniform_param(&[hidden, hidden], bound),
            bias: uniform_param(&[hidden], bound),
            relu: false,
        }
    }

    /// A `relu` cell (`nonlinearity='relu'`), initialised like [`new`](RnnCell::new).
    pub fn new_relu(input: usize, hidden: usize) -> Self {
        RnnCell { relu: true, ..RnnCell::new(input, hidden) }
    }

    /// Hidden size. A size read like [`Tensor::dims`]: inside a `#[janus]` block, a new hidden
    /// size is checked against a fresh recording before a graph fitted to other sizes serves it.
    #[track_caller]
    pub fn hidden_size(&self) -> usize {
        self.weight_hh.dims()[1]
    }

    /// One step: `h'` from input `x [batch, input]` and state `h [batch, hidden]`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor, h: &Tensor) -> Tensor {
        let pre = x.matmul(&self.weight_ih.t()) + h.matmul(&self.weight_hh.t()) + &self.bias;
        if self.relu { pre.relu() } else { pre.tanh() }
    }
}
