//! `Dropout`: zeroes elements with probability `p` in train mode and scales the rest by
//! `1 / (1 - p)`; the identity in eval mode.

use crate::Tensor;
use crate::module::impl_module;

/// Dropout, like `torch.nn.Dropout(p)`. The mask is drawn from janus's counter-based random
/// stream, so eager and compiled runs drop the same elements. `training` is a constant leaf:
/// a `#[janus]` step keys its graphs on it, and the eval-mode graph has no random draw at all.
///
/// ```
/// use janus_runtime::{Module, Tensor, nn};
/// let mut drop = nn::Dropout::new(0.5);
/// let x = Tensor::ones([4, 8]);
/// let y = drop.forward(&x); // train mode: about half are 0, the rest 2
/// assert!(y.to_vec::<f32>().iter().all(|&v| v == 0.0 || v == 2.0));
/// drop.eval();
/// assert_eq!(drop.forward(&x).to_vec::<f32>(), x.to_vec::<f32>());
/// ```
#[derive(Clone, Debug)]
pub struct Dropout {
    /// The probability of zeroing an element.
    pub p: f64,
    /// Train mode (drop) or eval mode (identity); see [`Module::train`](crate::Module::train).
    pub training: bool,
}

impl_module!(Dropout { p, training }; training = training);

impl Dropout {
    /// Dropout with probability `p` (in `[0, 1)`), in train mode.
    #[track_caller]
    pub fn new(p: f64) -> Self {
        assert!((0.0..1.0).contains(&p), "janus::nn::Dropout: p must be in [0, 1), got {p}");
        Dropout { p, training: true }
    }

    /// `x` with dropout applied in train mode, `x` itself in eval mode.
    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Tensor {
        if self.p == 0.0 {
            return x.clone(); // no draw: `p` is a constant leaf, so this is decided per key
        }
        x.dropout(self.p, self.training)
    }
}
