//! Losses.

use crate::DType;
use crate::error::{Composite, bail};
use crate::tensor::Tensor;

impl Tensor {
    /// Softmax cross-entropy of `[batch, classes]` logits against `i64` class targets
    /// `[batch]`, averaged over the batch (PyTorch's `F.cross_entropy`).
    #[track_caller]
    pub fn cross_entropy(&self, targets: &Tensor) -> Tensor {
        if self.rank() != 2 || !self.dtype().is_float() {
            bail!(
                "cross_entropy",
                "expected float logits [batch, classes], got {} {:?}",
                self.dtype(),
                self.shape_ref()
            );
        }
        if targets.dtype() != DType::I64 {
            bail!(
                "cross_entropy",
                "targets must be i64 class indices, got {} {:?} (logits {:?})",
                targets.dtype(),
                targets.shape_ref(),
                self.shape_ref()
            );
        }
        if targets.sizes() != [self.sizes()[0]] {
            bail!(
                "cross_entropy",
                "targets {:?} must be [batch] for logits {:?}",
                targets.shape_ref(),
                self.shape_ref()
            );
        }
        let _ctx = Composite::enter("cross_entropy");
        let picked = self.log_softmax(1).gather(1, &targets.unsqueeze(1));
        -picked.mean_all()
    }

    /// Mean squared error against a target of the same shape.
    #[track_caller]
    pub fn mse(&self, target: &Tensor) -> Tensor {
        if self.shape_ref() != target.shape_ref() {
            bail!(
                "mse",
                "prediction {:?} and target {:?} must have the same shape",
                self.shape_ref(),
                target.shape_ref()
            );
        }
        let _ctx = Composite::enter("mse");
        (self - target).square().mean_all()
    }
}
