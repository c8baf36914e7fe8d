//! `BatchNorm2d`: normalises each channel of `[N, C, H, W]` inputs with the batch's statistics
//! in train mode (and updates running statistics), with the running statistics in eval mode.

use crate::Tensor;
use crate::module::impl_module;

/// Batch normalisation over channels, like `torch.nn.BatchNorm2d(C)`: `weight` (ones) and
/// `bias` (zeros) are parameters; `running_mean` (zeros) and `running_var` (ones) are module
/// state without gradients, saved in checkpoints.
///
/// In train mode, [`forward`](BatchNorm2d::forward) normalises with the batch's mean and
/// biased variance and *reassigns* the running statistics
/// (`running = (1 - momentum) * running + momentum * batch`, the variance unbiased), which is
/// why it takes `&mut self`: inside a `#[janus]` step that reassignment is a write to the
/// model, which the compiled graph returns and the replay stores, so the statistics after 20
/// compiled steps are eager mode's. In eval mode it uses the running statistics and changes
/// nothing. `training` is a constant leaf, so the two modes have separate cache keys.
///
/// ```
/// use janus_runtime::{Module, Tensor, nn};
/// let mut bn = nn::BatchNorm2d::new(3);
/// let x = Tensor::randn([8, 3, 4, 4]) * 2.0 + 1.0;
/// let y = bn.forward(&x); // train mode: per channel mean 0, variance 1
/// assert!(y.mean_all().item().abs() < 1e-5);
/// assert!(bn.running_mean.to_vec::<f32>().iter().all(|&m| m != 0.0)); // updated
/// bn.eval();
/// let before = bn.running_mean.to_vec::<f32>();
/// let _ = bn.forward(&x);
/// assert_eq!(bn.running_mean.to_vec::<f32>(), before); // used, not updated
/// ```
#[derive(Clone, Debug)]
pub struct BatchNorm2d {
    /// Per-channel scale `[C]`.
    pub weight: Tensor,
    /// Per-channel shift `[C]`.
    pub bias: Tensor,
    /// Running mean `[C]` (state, no gradient).
    pub running_mean: Tensor,
    /// Running (unbiased) variance `[C]` (state, no gradient).
    pub running_var: Tensor,
    /// The weight of the batch's statistics in the running ones.
    pub momentum: f64,
    /// Added to the variance.
    pub eps: f64,
    /// Train mode (batch statistics, update) or eval mode (running statistics).
    pub training: bool,
}

impl_module!(BatchNorm2d { weight, bias, running_mean, running_var, momentum, eps, training }; training = training);

impl BatchNorm2d {
    /// A layer over `channels` channels, `momentum = 0.1`, `eps = 1e-5`, in train mode.
    pub fn new(channels: usize) -> Self {
        BatchNorm2d {
            weight: Tensor::ones([channels]).requires_grad(),
            bias: Tensor::zeros([channels]).requires_grad(),
            running_mean: Tensor::zeros([channels]),
            running_var: Tensor::ones([channels]),
            momentum: 0.1,
            eps: 1e-5,
            training: true,
        }
    }

    /// The normalised `x` (`[N, C, H, W]`); in train mode, also updates the running statistics.
    #[track_caller]
    pub fn forward(&mut self, x: &Tensor) -> Tensor {
        let (y, mean, var) = x.batch_norm(
            &self.running_mean,
            &self.running_var,
            Some(&self.weight),
            Some(&self.bias),
            self.training,
            self.momentum,
            self.eps,
        );
        self.running_mean = mean;
        self.running_var = var;
        y
    }
}
