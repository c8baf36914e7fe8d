//! `Linear`: `y = x @ W^T + b`.

use super::uniform_param;
use crate::Tensor;
use crate::module::impl_module;

/// A fully connected layer. `weight` is `[out, in]` and `bias` `[out]`, as in PyTorch, so
/// checkpoints line up; the transpose in `forward` is a stride swap, not a copy.
#[derive(Clone, Debug)]
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Tensor,
    /// `[out_features]`, or `None` for a layer without bias.
    pub bias: Option<Tensor>,
}

impl_module!(Linear { weight, bias });

impl Linear {
    /// A layer initialised like PyTorch: weight and bias uniform in `±1/sqrt(in_features)`.
    pub fn new(in_features: usize, out_features: usize) -> Self {
        let bound = 1.0 / (in_features as f64).sqrt();
        Linear {
            weight: uniform_param(&[out_features, in_features], bound),
            bias: Some(uniform_param(&[out_features], bound)),
        }
    }

    /// A layer without bias.
    pub fn no_bias(in_features: usize, out_features: usize) -> Self {
        Linear { bias: None, ..Linear::new(in_features, out_features) }
    }

    /// `x @ weight^T + bias` for `x` of shape `[batch, in]` (or `[b, n, in]`).
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let y = x.matmul(&self.weight.t());
        match &self.bias {
            Some(b) => y + b,
            None => y,
        }
    }
}
