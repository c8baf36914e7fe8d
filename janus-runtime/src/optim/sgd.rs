//! Stochastic gradient descent with optional momentum and weight decay (PyTorch semantics).

use super::{hyper, update_params, zeros_like_all};
use crate::module::{Module, impl_module};
use crate::rt::DynamicScalar;
use crate::{DType, Grads, Tensor};

/// `w <- w - lr * v`, `v <- momentum * v + (g + weight_decay * w)`.
///
/// The learning rate, momentum and weight decay are rank-0 `f64` tensors, so changing them
/// ([`set_lr`](Sgd::set_lr), a [scheduler](super::lr_scheduler)) changes a compiled graph's
/// inputs, not its key; whether momentum and weight decay are used at all (non-zero) is a
/// constant of the graph. The momentum buffers are made on the first step, or by
/// [`load`](crate::load) from a checkpoint.
///
/// # Examples
///
/// ```
/// use janus_runtime::{Tensor, optim::Sgd};
///
/// let mut w = Tensor::from_vec(vec![1.0f32, 2.0], [2]).requires_grad();
/// let mut opt = Sgd::new(0.1).momentum(0.9);
/// for _ in 0..2 {
///     let grads = w.square().sum_all().backward(); // d/dw = 2w
///     opt.step(&mut w, &grads);
/// }
/// // Step 1: v = 2w = [2, 4], w = [0.8, 1.6]. Step 2: v = 0.9 v + 2w = [3.4, 6.8].
/// let want = [0.8f32 - 0.1 * 3.4, 1.6 - 0.1 * 6.8];
/// assert!(w.to_vec::<f32>().iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
/// ```
#[derive(Clone, Debug)]
pub struct Sgd {
    lr: Tensor,
    momentum: Option<Tensor>,
    weight_decay: Option<Tensor>,
    velocity: Vec<Tensor>,
}

impl_module!(Sgd { lr, momentum, weight_decay, velocity }; |this, saved| {
    if this.momentum.is_some() && this.velocity.is_empty() {
        this.velocity = saved.zeros_list("velocity");
    }
});

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    #[track_caller]
    pub fn new(lr: f64) -> Self {
        Sgd { lr: hyper("Sgd::new", lr), momentum: None, weight_decay: None, velocity: Vec::new() }
    }

    /// Sets the momentum factor (0 turns momentum off).
    #[track_caller]
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = (momentum != 0.0).then(|| hyper("Sgd::momentum", momentum));
        self
    }

    /// Sets L2 weight decay (0 turns it off).
    #[track_caller]
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = (weight_decay != 0.0).then(|| hyper("Sgd::weight_decay", weight_decay));
        self
    }

    /// The learning rate. This reads a tensor's value: inside a `#[janus]` block it is a host
    /// read, which keeps the block eager.
    pub fn lr(&self) -> f64 {
        self.lr.item_f64()
    }

    /// Changes the learning rate: an `f64`, an `f32`, or a rank-0 tensor (a `dynamic(..)` scalar
    /// inside a `#[janus]` block). Compiled graphs take the rate as an input, so a schedule that
    /// changes it on every step compiles nothing new.
    #[track_caller]
    pub fn set_lr<S: DynamicScalar>(&mut self, lr: S) {
        self.lr = super::hyper_tensor("Sgd::set_lr", lr);
    }

    /// Updates every gradient leaf of `m` that has a gradient in `grads`.
    pub fn step<M: Module + ?Sized>(&mut self, m: &mut M, grads: &Grads) {
        if self.momentum.is_some() && self.velocity.is_empty() {
            self.velocity = zeros_like_all(m);
        }
        let Sgd { lr, momentum, weight_decay, velocity } = self;
        let (use_mu, use_wd) = (momentum.is_some(), weight_decay.is_some());
        let mut scalars = super::PerDtype::default();
        update_params(m, grads, |i, w, g| {
            let [lr, mu, wd] = scalars.get(w.dtype(), || {
                let off = || Tensor::scalar_dtype(0.0, DType::F64);
                [lr.clone(), momentum.clone().unwrap_or_else(off), weight_decay.clone().unwrap_or_else(off)]
            });
            let g = if use_wd { g + w * wd } else { g.clone() };
            let step = if use_mu {
                super::follow_device(&mut velocity[i], w);
                velocity[i] = &velocity[i] * mu + g;
                velocity[i].clone()
            } else {
                g
            };
            w - step * lr
        });
    }
}
