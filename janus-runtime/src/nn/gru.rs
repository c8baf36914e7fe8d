//! `GruCell`: one GRU step, PyTorch's equations and parameter layout.

use super::uniform_param;
use crate::Tensor;
use crate::module::impl_module;

/// A GRU cell with PyTorch's gate order (reset, update, new) and equations:
///
/// ```text
/// r  = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)
/// z  = sigmoid(x W_iz^T + b_iz + h W_hz^T + b_hz)
/// n  = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))
/// h' = (1 - z) * n + z * h
/// ```
///
/// The three gates' projections are one matmul each (`weight_ih` is `[3H, input]`, rows in
/// gate order). Both biases are kept, as `b_hn` sits inside the reset product.
///
/// # Examples
/// ```
/// use janus_runtime::{Tensor, nn::GruCell};
/// let cell = GruCell::new(3, 5);
/// let h = cell.forward(&Tensor::zeros([2, 3]), &Tensor::zeros([2, 5]));
/// assert_eq!(h.dims(), &[2, 5]);
/// ```
#[derive(Clone, Debug)]
pub struct GruCell {
    /// `[3 * hidden, input]`.
    pub weight_ih: Tensor,
    /// `[3 * hidden, hidden]`.
    pub weight_hh: Tensor,
    /// `[3 * hidden]`.
    pub bias_ih: Tensor,
    /// `[3 * hidden]`.
    pub bias_hh: Tensor,
}

impl_module!(GruCell { weight_ih, weight_hh, bias_ih, bias_hh });

impl GruCell {
    /// A cell initialised like PyTorch: every parameter uniform in `±1/sqrt(hidden)`.
    pub fn new(input: usize, hidden: usize) -> Self {
        let bound = 1.0 / (hidden as f64).sqrt();
        GruCell {
            weight_ih: uniform_param(&[3 * hidden, input], bound),
            weight_hh: uniform_param(&[3 * hidden, hidden], bound),
            bias_ih: uniform_param(&[3 * hidden], bound),
            bias_hh: uniform_param(&[3 * hidden], bound),
        }
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
        let gi = x.matmul(&self.weight_ih.t()) + &self.bias_ih;
        let gh = h.matmul(&self.weight_hh.t()) + &self.bias_hh;
        let [ir, iz, i_n] = gi.chunk::<3>(1);
        let [hr, hz, h_n] = gh.chunk::<3>(1);
        let r = (ir + hr).sigmoid();
        let z = (iz + hz).sigmoid();
        let n = (i_n + r * h_n).tanh();
        (1.0 - &z) * n + z * h
    }
}
