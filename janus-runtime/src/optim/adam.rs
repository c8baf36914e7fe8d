//! Adam (Kingma & Ba), with PyTorch's update order and bias correction.

use super::{hyper, update_params, zeros_like_all};
use crate::module::{Module, impl_module};
use crate::rt::DynamicScalar;
use crate::{DType, Grads, Tensor};

/// Adam with bias-corrected moments.
///
/// Everything that changes between steps is a tensor: the step count (`i64`), the moments, and
/// the hyper-parameters (rank-0 `f64` tensors: learning rate, betas, eps, weight decay). So a
/// compiled training step replays for every step and every learning rate a schedule sets;
/// only whether weight decay is used (non-zero) is a constant of the graph. The moments are
/// made on the first step, or by [`load`](crate::load) from a checkpoint, which restores all of
/// this state: resumed training continues bit for bit.
///
/// # Examples
///
/// ```
/// use janus_runtime::{Tensor, optim::Adam};
///
/// let mut w = Tensor::from_vec(vec![1.0f64, -2.0], [2]).requires_grad();
/// let mut opt = Adam::new(0.1);
/// let grads = (&w * 3.0).sum_all().backward();
/// opt.step(&mut w, &grads);
/// // The first bias-corrected step moves each weight by about lr * sign(g).
/// let w = w.to_vec::<f64>();
/// assert!((w[0] - 0.9).abs() < 1e-6 && (w[1] + 2.1).abs() < 1e-6);
/// ```
#[derive(Clone, Debug)]
pub struct Adam {
    lr: Tensor,
    beta1: Tensor,
    beta2: Tensor,
    eps: Tensor,
    weight_decay: Option<Tensor>,
    step: Tensor,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl_module!(Adam { lr, beta1, beta2, eps, weight_decay, step, m, v }; |this, saved| {
    let (m, v) = (saved.zeros_list("m"), saved.zeros_list("v"));
    // Both moments or neither: a file with one alone is reported as unexpected tensors.
    if this.m.is_empty() && m.len() == v.len() {
        (this.m, this.v) = (m, v);
    }
});

impl Adam {
    /// Adam with learning rate `lr`, betas (0.9, 0.999), eps 1e-8.
    #[track_caller]
    pub fn new(lr: f64) -> Self {
        Adam {
            lr: hyper("Adam::new", lr),
            beta1: hyper("Adam::new", 0.9),
            beta2: hyper("Adam::new", 0.999),
            eps: hyper("Adam::new", 1e-8),
            weight_decay: None,
            step: Tensor::scalar_dtype(0.0, DType::I64),
            m: Vec::new(),
            v: Vec::new(),
        }
    }

    /// Sets the moment decay rates.
    #[track_caller]
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        self.beta1 = hyper("Adam::betas", beta1);
        self.beta2 = hyper("Adam::betas", beta2);
        self
    }

    /// Sets the denominator epsilon.
    #[track_caller]
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = hyper("Adam::eps", eps);
        self
    }

    /// Sets L2 weight decay (added to the gradient, as `torch.optim.Adam` does; 0 turns it off).
    #[track_caller]
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = (weight_decay != 0.0).then(|| hyper("Adam::weight_decay", weight_decay));
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
        self.lr = super::hyper_tensor("Adam::set_lr", lr);
    }

    /// Updates every gradient leaf of `m` that has a gradient in `grads`.
    pub fn step<M: Module + ?Sized>(&mut self, m: &mut M, grads: &Grads) {
        if self.m.is_empty() {
            self.m = zeros_like_all(m);
            self.v = zeros_like_all(m);
        }
        self.step = crate::no_grad(|| &self.step + &Tensor::scalar_dtype(1.0, DType::I64));
        let Adam { lr, beta1, beta2, eps, weight_decay, step, m: ms, v: vs } = self;
        let use_wd = weight_decay.is_some();
        let mut scalars = super::PerDtype::default();
        update_params(m, grads, |i, w, g| {
            let [b1, one_minus_b1, b2, one_minus_b2, lr_over_bc1, sqrt_bc2, eps, wd] =
                scalars.get(w.dtype(), || {
                    let dt = w.dtype();
                    let t = step.to_dtype(dt);
                    // 1 - beta^t, with t a tensor: exp(t * ln(beta)).
                    let bc1 = 1.0 - (&t * beta1.log().to_dtype(dt)).exp();
                    let bc2 = 1.0 - (&t * beta2.log().to_dtype(dt)).exp();
                    [
                        beta1.clone(),
                        1.0 - &*beta1,
                        beta2.clone(),
                        1.0 - &*beta2,
                        lr.to_dtype(dt) / bc1,
                        bc2.sqrt(),
                        eps.clone(),
                        weight_decay.clone().unwrap_or_else(|| Tensor::scalar_dtype(0.0, DType::F64)),
                    ]
                });
            let g = if use_wd { g + w * wd } else { g.clone() };
            super::follow_device(&mut ms[i], w);
            super::follow_device(&mut vs[i], w);
            ms[i] = &ms[i] * b1 + &g * one_minus_b1;
            vs[i] = &vs[i] * b2 + g.square() * one_minus_b2;
            let denom = vs[i].sqrt() / sqrt_bc2 + eps;
            w - &ms[i] / denom * lr_over_bc1
        });
    }
}
