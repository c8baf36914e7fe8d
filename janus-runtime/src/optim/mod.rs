//! Optimisers. Their state (moments, step count) lives in tensors, so an optimiser step can run
//! inside a compiled graph without recompiling as the state changes; hyperparameters are
//! constant leaves. Optimisers are modules, so they can be checkpointed.

mod adam;
mod sgd;

pub use adam::Adam;
pub use sgd::Sgd;

use crate::module::Module;
use crate::{Grads, Tensor, no_grad};

/// What every optimiser does, so a training step can be generic over it (like PyTorch's
/// `torch.optim.Optimizer`). The inherent methods of [`Sgd`] and [`Adam`] are the same calls.
/// An optimiser is an [`Input`](crate::rt::Input), so a generic `O: Optimizer` can be a
/// `#[janus]` fragment's input and its update compiles like a concrete one.
pub trait Optimizer: Module + crate::rt::Input {
    /// Updates every gradient leaf of `m` that has a gradient in `grads`.
    fn step<M: Module + ?Sized>(&mut self, m: &mut M, grads: &Grads);
    /// The learning rate.
    fn lr(&self) -> f64;
    /// Changes the learning rate. Under `#[janus]` the rate is a constant of the compiled
    /// graph, so a schedule that changes it on every step compiles a variant per value.
    fn set_lr(&mut self, lr: f64);
}

macro_rules! impl_optimizer {
    ($($t:ty),*) => {$(
        impl Optimizer for $t {
            fn step<M: Module + ?Sized>(&mut self, m: &mut M, grads: &Grads) {
                <$t>::step(self, m, grads)
            }
            fn lr(&self) -> f64 {
                <$t>::lr(self)
            }
            fn set_lr(&mut self, lr: f64) {
                <$t>::set_lr(self, lr)
            }
        }
    )*};
}
impl_optimizer!(Sgd, Adam);

/// Replaces every gradient leaf `w` of `m` that has a gradient `g` by `update(i, w, g)` (a fresh
/// leaf), where `i` is the leaf's position among all tensor leaves of `m`.
pub(crate) fn update_params<M: Module + ?Sized>(
    m: &mut M,
    grads: &Grads,
    mut update: impl FnMut(usize, &Tensor, &Tensor) -> Tensor,
) {
    let mut i = 0;
    no_grad(|| {
        m.visit_mut(&mut |w: &mut Tensor| {
            if let Some(g) = grads.get(w) {
                *w = update(i, w, g).requires_grad();
            }
            i += 1;
        })
    });
}

/// Zeros shaped like every tensor leaf of `m`, the initial state of a moment buffer.
pub(crate) fn zeros_like_all<M: Module + ?Sized>(m: &M) -> Vec<Tensor> {
    m.tensors().iter().map(Tensor::zeros_like).collect()
}
