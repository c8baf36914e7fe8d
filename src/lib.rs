//! # janus
//!
//! Imperative deep learning in Rust that runs as cached, compiled graphs. Write a model step the
//! ordinary way, one tensor op after another with host `if`s and `for`s; it runs eagerly with
//! tape autograd, like PyTorch eager.
//!
//! This facade re-exports [`janus_runtime`] (tensors, ops, autograd, layers, optimisers,
//! checkpoints) and the macros of `janus-macros`. Start with `use janus::prelude::*;`.
#![warn(missing_docs)]

pub use janus_macros::{Module, janus};
pub use janus_runtime::*;

/// What the macros' expansions call (hidden; not for users).
#[doc(hidden)]
pub use janus_runtime::rt::__private;

/// The names most programs need: `use janus::prelude::*;`.
pub mod prelude {
    pub use janus_macros::{Module, janus};
    pub use janus_runtime::optim::Optimizer;
    pub use janus_runtime::{DType, Device, Grads, Mode, Module, Shape, Tensor, nn, no_grad, optim, trace};
}
