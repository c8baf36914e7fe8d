//! Optimisers and learning-rate schedules. An optimiser's state (moments, step count) and its
//! hyper-parameters (learning rate, betas, ...) live in tensors, so an optimiser step runs
//! inside a compiled graph without recompiling as they change; only whether an optional term
//! (momentum, weight decay) is used is a constant. Optimisers are modules, so they are
//! checkpointed with [`save`](crate::save) and restored exactly with [`load`](crate::load).
//!
//! # Examples
//!
//! ```
//! use janus_runtime::optim::{self, Optimizer};
//! use janus_runtime::{Tensor, nn};
//! let mut net = nn::Linear::new(3, 1);
//! let mut opt = optim::Adam::new(0.05);
//! let (x, y) = (Tensor::randn([16, 3]), Tensor::randn([16, 1]));
//! let loss = |net: &nn::Linear| (net.forward(&x) - &y).square().mean_all().item();
//! let before = loss(&net);
//! for _ in 0..50 {
//!     let grads = (net.forward(&x) - &y).square().mean_all().backward();
//!     opt.step(&mut net, &grads); // optimizer.step(); no zero_grad() needed
//! }
//! assert!(loss(&net) < before);
//! opt.set_lr(0.01); // a graph input inside #[janus] code: no recompile
//! ```

mod adam;
pub mod lr_scheduler;
mod sgd;

pub use adam::Adam;
pub use sgd::Sgd;

use crate::module::Module;
use crate::rt::DynamicScalar;
use crate::{DType, Grads, Tensor, no_grad};

/// What every optimiser does, so a training step can be generic over it (like PyTorch's
/// `torch.optim.Optimizer`). The inherent methods of [`Sgd`] and [`Adam`] are the same calls.
/// An optimiser is an [`Input`](crate::rt::Input), so a generic `O: Optimizer` can be a
/// `#[janus]` fragment's input and its update compiles like a concrete one.
pub trait Optimizer: Module + crate::rt::Input {
    /// Updates every gradient leaf of `m` that has a gradient in `grads`.
    fn step<M: Module + ?Sized>(&mut self, m: &mut M, grads: &Grads);
    /// The learning rate (a host read of its tensor).
    fn lr(&self) -> f64;
    /// Changes the learning rate: an `f64`, an `f32` or a rank-0 tensor. The rate is an input
    /// of compiled graphs, not a constant, so a schedule that changes it on every step
    /// compiles nothing new.
    fn set_lr<S: DynamicScalar>(&mut self, lr: S);
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
            #[track_caller]
            fn set_lr<S: DynamicScalar>(&mut self, lr: S) {
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

/// A hyper-parameter as the rank-0 `f64` tensor optimisers keep it in. A NaN or infinite value
/// is a user error, reported with the builder that got it.
#[track_caller]
pub(crate) fn hyper(what: &str, value: f64) -> Tensor {
    if !value.is_finite() {
        crate::error::bail!(what, "hyper-parameter must be finite, got {value}");
    }
    Tensor::scalar_dtype(value, DType::F64)
}

/// [`hyper`] for anything a `dynamic(..)` scalar can be: a host float or a rank-0 tensor
/// (whose value is not read, so this stays inside a compiled graph).
#[track_caller]
pub(crate) fn hyper_tensor<S: DynamicScalar>(what: &str, value: S) -> Tensor {
    let t = value.to_tensor();
    if t.rank() != 0 || !t.dtype().is_float() {
        crate::error::bail!(
            what,
            "expected a float scalar, got a {:?} tensor of shape {:?}",
            t.dtype(),
            t.sizes()
        );
    }
    t.to_dtype(DType::F64)
}

/// Moves optimiser state to its parameter's device: state loaded from a checkpoint is made on
/// the CPU (as PyTorch's `load_state_dict` casts state to each parameter's device).
pub(crate) fn follow_device(state: &mut Tensor, param: &Tensor) {
    if state.device() != param.device() {
        *state = state.to_device(param.device());
    }
}

/// The scalars of an update converted to the parameters' dtype, made once per dtype per step
/// (a model has one dtype, or a few), not once per parameter.
pub(crate) struct PerDtype<const N: usize>(Vec<(DType, [Tensor; N])>);

impl<const N: usize> Default for PerDtype<N> {
    fn default() -> Self {
        PerDtype(Vec::new())
    }
}

impl<const N: usize> PerDtype<N> {
    /// The scalars for `dtype`, made by `make` (in any float dtype) on first use.
    pub(crate) fn get(&mut self, dtype: DType, make: impl FnOnce() -> [Tensor; N]) -> [Tensor; N] {
        if let Some((_, s)) = self.0.iter().find(|(d, _)| *d == dtype) {
            return s.clone();
        }
        let s = make().map(|t| t.to_dtype(dtype));
        self.0.push((dtype, s.clone()));
        s
    }
}
