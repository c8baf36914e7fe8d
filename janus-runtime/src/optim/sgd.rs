//! Stochastic gradient descent with optional momentum and weight decay (PyTorch semantics).

use super::{update_params, zeros_like_all};
use crate::module::{Module, impl_module};
use crate::{Grads, Tensor};

/// `w <- w - lr * v`, `v <- momentum * v + (g + weight_decay * w)`.
#[derive(Clone, Debug)]
pub struct Sgd {
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    velocity: Vec<Tensor>,
}

impl_module!(Sgd { lr, momentum, weight_decay, velocity });

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: f64) -> Self {
        Sgd { lr, momentum: 0.0, weight_decay: 0.0, velocity: Vec::new() }
    }

    /// Sets the momentum factor.
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }

    /// Sets L2 weight decay.
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
        if self.momentum != 0.0 && self.velocity.is_empty() {
            self.velocity = zeros_like_all(m);
        }
        let (lr, mu, wd) = (self.lr, self.momentum, self.weight_decay);
        let velocity = &mut self.velocity;
        update_params(m, grads, |i, w, g| {
            let g = if wd != 0.0 { g + w * wd } else { g.clone() };
            let step = if mu != 0.0 {
                velocity[i] = &velocity[i] * mu + g;
                velocity[i].clone()
            } else {
                g
            };
            w - step * lr
        });
    }
}
