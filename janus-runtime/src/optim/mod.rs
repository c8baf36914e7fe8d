//! Optimisers. Their state (moments, step count) lives in tensors, so an optimiser step can run
//! inside a compiled graph without recompiling as the state changes; hyperparameters are
//! constant leaves. Optimisers are modules, so they can be checkpointed.

mod adam;
mod sgd;

pub use adam::Adam;
pub use sgd::Sgd;

use crate::module::Module;
use crate::{Grads, Tensor, no_grad};

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
