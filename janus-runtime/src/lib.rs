//! janus-runtime: `Tensor`, its ops and their gradients, eager execution with tape autograd,
//! tracing, graphs, passes, compiled executors (CPU and CUDA), the runtime behind `#[janus]`,
//! modules, layers, optimisers and checkpoints.
//!
//! Users depend on the `janus` facade crate, which re-exports this crate and the macros.
//!
//! The modules follow the pipeline, and imports point down it only (`tests/layering.rs`
//! checks this):
//!
//! | layer | modules |
//! |---|---|
//! | leaves | `config` (with [`Mode`]), `error`, `device`, `shape`, `layout`, `panics` |
//! | the value core | `tensor`, `storage`, `recorder`, `ops`, `api`, `autograd`, `backend`, `random`, `module`, `nn`, `data`, `checkpoint`, `cuda` |
//! | graph IR | `graph` (nodes, fused programs, verify, dumps) |
//! | recording and passes | `trace`, `passes` |
//! | symbolic derivation | `grad_graph` (backward graphs from the VJP rules) |
//! | execution | `exec` (lowering, memory plan, CPU and CUDA backends) |
//! | compilation | `compile` (optimise + lower + lazy backward; `trace()`) |
//! | the `#[janus]` runtime | `rt` |
//! | library above `rt` | `optim` (optimisers are `#[janus]` inputs) |
#![warn(missing_docs)]

// Leaves.
pub mod config;
mod device;
pub mod error;
mod layout;
mod panics;
mod profile;
mod shape;
// The value core (tensor <-> autograd <-> ops is the one cycle allowed).
mod api;
mod autograd;
mod backend;
pub mod checkpoint;
pub mod cuda;
pub mod data;
mod eager;
pub mod module;
pub mod nn;
pub mod ops;
mod random;
mod recorder;
mod storage;
mod tensor;
// Graph IR, recording, passes, derivation.
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod grad_graph;
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod graph;
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod passes;
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod trace;
// Execution and compilation.
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod compile;
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod exec;
// What `#[janus]` code calls, and the library above it.
pub mod optim;
#[doc(hidden)] // internal: the facade's front page shows what users call
pub mod rt;

pub use api::{Conv2dOptions, Scalar};
pub use autograd::{Grads, is_grad_enabled, no_grad};
pub use checkpoint::{LoadReport, load, load_partial, save};
pub use compile::{Compiled, OutKind, Traced, trace};
pub use config::{ExecOptions, Mode, exec_options, set_exec_options};
pub use device::Device;
pub use error::{CheckpointError, DeviceError};
pub use exec::{cached_arena_bytes, release_cached_arenas};
pub use janus_kernels::{DType, Element};
pub use module::Module;
pub use profile::{report as profile_report, reset as profile_reset};
pub use random::{manual_seed, set_stream_position, stream_position};
pub use rt::{
    EagerKind, FragmentStats, KeyStats, OpCounts, SAMPLE_PERIOD, Stats, cost_guard, explain, mode,
    reset_caches, reset_stats, self_check, set_cost_guard, set_mode, set_self_check, stats, with_mode,
};
pub use shape::{Dim, ReshapeSpec, Shape, broadcast_shapes};
pub use tensor::Tensor;
