//! The CNN workload of `shared/refbench/models_torch.py` (C): conv 1->16 3x3 pad 1, BatchNorm,
//! ReLU, max-pool 2; conv 16->32 3x3 pad 1, BatchNorm, ReLU, max-pool 2; flatten, linear to
//! 10; cross-entropy; Adam 1e-3. Built as an `nn::Sequential`, shared by the `cnn` example,
//! the bench and the tests.
//!
//! One deviation from the refbench model: the convolutions have no bias (`no_bias()`), as is
//! usual before a batch norm. A bias there has a gradient of exactly zero in exact arithmetic
//! (batch norm subtracts each channel's mean), so what `backward()` returns for it is rounding
//! noise, and Adam, which divides by the gradient's own magnitude, turns that noise into
//! updates of size `lr`. Two summation orders (eager and compiled, or any two frameworks)
//! then move those biases differently, and janus's self-check reports the divergence (the
//! step falls back to its per-block graphs). The bias costs one broadcast add per conv.
#![allow(dead_code)]

use janus::nn::{self, Layer};
use janus::prelude::*;

/// The refbench batch size.
pub const BATCH: usize = 64;

/// The network, in train mode, with PyTorch's default initialisation.
pub fn model() -> nn::Sequential {
    nn::Sequential::new(vec![
        nn::Conv2d::new(1, 16, 3).padding(1).no_bias().into(),
        nn::BatchNorm2d::new(16).into(),
        Layer::Relu,
        nn::MaxPool2d::new(2).into(),
        nn::Conv2d::new(16, 32, 3).padding(1).no_bias().into(),
        nn::BatchNorm2d::new(32).into(),
        Layer::Relu,
        nn::MaxPool2d::new(2).into(),
        Layer::Flatten,
        nn::Linear::new(32 * 7 * 7, 10).into(),
    ])
}

/// One training step: forward (the batch norms update their running statistics), loss,
/// backward, Adam. Returns the loss.
#[janus]
pub fn train_step(m: &mut nn::Sequential, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let loss = m.forward(x).cross_entropy(y);
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

/// The predicted classes of `x` (call it in eval mode, under `no_grad`).
#[janus]
pub fn predict(m: &mut nn::Sequential, x: &Tensor) -> Tensor {
    m.forward(x).argmax(1)
}
