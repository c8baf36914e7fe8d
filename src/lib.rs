//! # janus
//!
//! Imperative deep learning in Rust that runs as cached, compiled graphs. Write a model step the
//! ordinary way, one tensor op after another with host `if`s and `for`s; it runs eagerly with
//! tape autograd, like PyTorch eager.
//!
//! Put [`#[janus]`](macro@janus) on the function and the same code runs as cached compiled
//! graphs: static blocks become graphs keyed by shape, dtype and device, control flow stays
//! host code, and a stable path through the whole function becomes one graph with asserts on
//! the decisions it assumed. Whatever cannot be staged runs the original statements, so the
//! attribute never changes an answer.
//!
//! # Examples
//!
//! The README's first program: an MLP classifier trained with Adam.
//!
//! ```
//! use janus::prelude::*;
//!
//! #[derive(Module)]
//! struct Mlp {
//!     l1: nn::Linear,
//!     l2: nn::Linear,
//! }
//!
//! #[janus] // the body runs as cached compiled graphs; without the attribute, eagerly
//! fn train_step(net: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
//!     let logits = net.l2.forward(&net.l1.forward(x).relu());
//!     let loss = logits.cross_entropy(y);
//!     let grads = loss.backward(); // autograd through the compiled forward graph
//!     opt.step(net, &grads); // rebinds every parameter, also inside a graph
//!     loss.item()
//! }
//!
//! janus::manual_seed(0);
//! let x = Tensor::randn([64, 4]);
//! let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64); // a separable toy label
//! let mut net = Mlp { l1: nn::Linear::new(4, 32), l2: nn::Linear::new(32, 2) };
//! let mut opt = optim::Adam::new(0.01);
//! let first = train_step(&mut net, &mut opt, &x, &y);
//! for _ in 0..30 {
//!     train_step(&mut net, &mut opt, &x, &y);
//! }
//! assert!(train_step(&mut net, &mut opt, &x, &y) < first);
//! println!("{}", janus::explain()); // what ran compiled, what ran eagerly, and why
//! let path = std::env::temp_dir().join(format!("janus-doc-{}.safetensors", std::process::id()));
//! janus::save(&path, &net).unwrap(); // torch.save(net.state_dict(), path)
//! janus::load(&path, &mut net).unwrap();
//! # std::fs::remove_file(&path).unwrap();
//! ```
//!
//! Where to look: [`Tensor`] (ops, autograd), [`nn`] (layers), [`optim`] (optimisers and
//! learning-rate schedules), [`save`]/[`load`] (checkpoints), [`explain`]/[`stats`] (what was
//! staged), [`trace()`] (a function of tensors as one graph), [`cuda`] (the GPU backend).
//! This facade re-exports the `janus_runtime` crate and the macros of `janus_macros`. Start
//! with `use janus::prelude::*;`.
#![warn(missing_docs)]

pub use janus_macros::{Module, janus};
pub use janus_runtime::*;

/// The user guide (docs/guide/), compiled so that its code blocks run as doc tests.
#[cfg(doctest)]
mod guide;

/// What the macros' expansions call (hidden; not for users).
#[doc(hidden)]
pub use janus_runtime::rt::__private;

/// The names most programs need: `use janus::prelude::*;`.
pub mod prelude {
    pub use janus_macros::{Module, janus};
    pub use janus_runtime::optim::Optimizer;
    pub use janus_runtime::{
        DType, Device, Grads, Mode, Module, Shape, Tensor, nn, no_grad, optim, tensor, trace,
    };
}
