//! Adam (Kingma & Ba), with PyTorch's update order and bias correction.

use super::{update_params, zeros_like_all};
use crate::module::{Module, impl_module};
use crate::{DType, Grads, Tensor};

/// Adam with bias-corrected moments. The step count is an `i64` tensor and the moments are
/// tensors, so steps differ only in tensor values.
#[derive(Clone, Debug)]
pub struct Adam {
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    step: Tensor,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl_module!(Adam { lr, beta1, beta2, eps, weight_decay, step, m, v });

impl Adam {
    /// Adam with learning rate `lr`, betas (0.9, 0.999), eps 1e-8.
    pub fn new(lr: f64) -> Self {
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            step: Tensor::scalar_dtype(0.0, DType::I64),
            m: Vec::new(),
            v: Vec::new(),
        }
    }

    /// Sets the moment decay rates.
    pub fn betas(mut self, beta1: f64, beta2: f64) -> Self {
        self.beta1 = beta1;
        self.beta2 = beta2;
        self
    }

    /// Sets the denominator epsilon.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// Sets L2 weight decay (added to the gradient, as `torch.optim.Adam` does).
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.lr
    }

    /// Changes the learning rate.
    pub fn set_lr(&mut self, lr: f64) {
        self.lr = lr;
    }

    /// Updates every gradient leaf of `m` that has a gradient in `grads`.
    pub fn step<M: Module + ?Sized>(&mut self, m: &mut M, grads: &Grads) {
        if self.m.is_empty() {
            self.m = zeros_like_all(m);
            self.v = zeros_like_all(m);
        }
        self.step = crate::no_grad(|| &self.step + &Tensor::scalar_dtype(1.0, DType::I64));
        let Adam { lr, beta1: b1, beta2: b2, eps, weight_decay: wd, .. } = *self;
        let (step, ms, vs) = (&self.step, &mut self.m, &mut self.v);
        update_params(m, grads, |i, w, g| {
            let g = if wd != 0.0 { g + w * wd } else { g.clone() };
            ms[i] = &ms[i] * b1 + &g * (1.0 - b1);
            vs[i] = &vs[i] * b2 + g.square() * (1.0 - b2);
            // 1 - beta^t, with t a tensor: exp(t * ln(beta)).
            let t = step.to_dtype(w.dtype());
            let bc1 = 1.0 - (&t * b1.ln()).exp();
            let bc2 = 1.0 - (&t * b2.ln()).exp();
            let denom = vs[i].sqrt() / bc2.sqrt() + eps;
            w - &ms[i] / denom * (lr / bc1)
        });
    }
}
