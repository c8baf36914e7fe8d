//! janus-runtime: `Tensor`, its ops and their gradients, eager execution with tape autograd,
//! modules, layers, optimisers and checkpoints.
//!
//! Users depend on the `janus` facade crate, which re-exports this crate and the macros.
#![warn(missing_docs)]

mod api;
pub use api::Scalar;
pub mod autodiff;
mod autograd;
pub mod checkpoint;
pub mod config;
mod device;
mod dump;
pub mod error;
pub mod exec;
mod fusion;
mod grad_sum;
pub mod graph;
pub mod module;
pub mod nn;
pub mod ops;
pub mod optim;
pub mod passes;
mod random;
pub mod rt;
mod shape;
mod tensor;
pub mod trace;
mod traced;

pub use autograd::{Grads, is_grad_enabled, no_grad};
pub use checkpoint::{load, save};
pub use device::Device;
pub use error::{CheckpointError, DeviceError};
pub use janus_kernels::DType;
pub use module::Module;
pub use random::{manual_seed, set_stream_position, stream_position};
pub use rt::{Mode, Stats, explain, mode, reset_caches, set_mode, stats, with_mode};
pub use shape::{Dim, ReshapeSpec, Shape, broadcast_shapes};
pub use tensor::Tensor;
pub use traced::{Compiled, Traced, trace};
