//! `LstmCell`: one LSTM step with the four gate matmuls fused into one pair.

use super::uniform_param;
use crate::Tensor;
use crate::module::impl_module;

/// An LSTM cell with PyTorch's gate order (input, forget, cell, output). The input and hidden
/// projections of all four gates are one matmul each (`[in, 4H]` and `[H, 4H]`). PyTorch keeps
/// two biases (`bias_ih + bias_hh`); their sum is one bias here.
#[derive(Clone, Debug)]
pub struct LstmCell {
    /// `[4 * hidden, input]`.
    pub weight_ih: Tensor,
    /// `[4 * hidden, hidden]`.
    pub weight_hh: Tensor,
    /// `[4 * hidden]`.
    pub bias: Tensor,
}

impl_module!(LstmCell { weight_ih, weight_hh, bias });

impl LstmCell {
    /// A cell initialised like PyTorch: every parameter uniform in `±1/sqrt(hidden)`.
    pub fn new(input: usize, hidden: usize) -> Self {
        let bound = 1.0 / (hidden as f64).sqrt();
        LstmCell {
            weight_ih: uniform_param(&[4 * hidden, input], bound),
            weight_hh: uniform_param(&[4 * hidden, hidden], bound),
            bias: uniform_param(&[4 * hidden], bound),
        }
    }

    /// Hidden size. A size read like [`Tensor::dims`]: inside a `#[janus]` block, a new hidden
    /// size is checked against a fresh recording before a graph fitted to other sizes serves it.
    #[track_caller]
    pub fn hidden_size(&self) -> usize {
        self.weight_hh.dims()[1]
    }

    /// One step: `(h', c')` from input `x [batch, input]` and state `(h, c)`, each
    /// `[batch, hidden]`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor, (h, c): (&Tensor, &Tensor)) -> (Tensor, Tensor) {
        let gates = x.matmul(&self.weight_ih.t()) + h.matmul(&self.weight_hh.t()) + &self.bias;
        let [i, f, g, o] = gates.chunk::<4>(1);
        let c = f.sigmoid() * c + i.sigmoid() * g.tanh();
        let h = o.sigmoid() * c.tanh();
        (h, c)
    }
}
