//! `LayerNorm`: normalises over the trailing dimensions, then scales and shifts per element.

use crate::Tensor;
use crate::module::impl_module;

/// Layer normalisation, like `torch.nn.LayerNorm(normalized_shape)`: each sample is normalised
/// over its last `normalized_shape.len()` dimensions (biased variance, `eps` inside the square
/// root), then multiplied by `weight` and shifted by `bias` (ones and zeros at first).
///
/// ```
/// use janus_runtime::{Tensor, nn};
/// let ln = nn::LayerNorm::new(&[4]);
/// let y = ln.forward(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [1, 4]));
/// let v = y.to_vec::<f32>(); // (x - 2.5) / sqrt(1.25 + 1e-5)
/// assert!((v[0] + 1.3416).abs() < 1e-3 && (v[3] - 1.3416).abs() < 1e-3);
/// ```
#[derive(Clone, Debug)]
pub struct LayerNorm {
    /// Elementwise scale, of shape `normalized_shape`.
    pub weight: Tensor,
    /// Elementwise shift, of shape `normalized_shape`.
    pub bias: Tensor,
    /// The normalised trailing dimensions.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance.
    pub eps: f64,
}

impl_module!(LayerNorm { weight, bias, normalized_shape, eps });

impl LayerNorm {
    /// A layer over the trailing dimensions `normalized_shape`, with `eps = 1e-5`.
    pub fn new(normalized_shape: &[usize]) -> Self {
        LayerNorm {
            weight: Tensor::ones(normalized_shape).requires_grad(),
            bias: Tensor::zeros(normalized_shape).requires_grad(),
            normalized_shape: normalized_shape.to_vec(),
            eps: 1e-5,
        }
    }

    /// The normalised, scaled and shifted `x`.
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        x.layer_norm(&self.normalized_shape, Some(&self.weight), Some(&self.bias), self.eps)
    }
}
