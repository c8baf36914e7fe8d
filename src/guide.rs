//! The user guide (`docs/guide/`), compiled under `cfg(doctest)` only, so that every Rust code
//! block of its chapters runs as a doc test (`cargo test --doc -p janus`) and cannot rot.
//! Blocks that need a GPU are `no_run`: compiled, not run.

#[doc = include_str!("../docs/guide/README.md")]
pub mod contents {}

#[doc = include_str!("../docs/guide/tensors-and-autograd.md")]
pub mod tensors_and_autograd {}

#[doc = include_str!("../docs/guide/fragments-keys-fallback.md")]
pub mod fragments_keys_fallback {}

#[doc = include_str!("../docs/guide/speculation.md")]
pub mod speculation {}

#[doc = include_str!("../docs/guide/dynamic-shapes-and-loops.md")]
pub mod dynamic_shapes_and_loops {}

#[doc = include_str!("../docs/guide/models-and-layers.md")]
pub mod models_and_layers {}

#[doc = include_str!("../docs/guide/checkpoints-and-schedules.md")]
pub mod checkpoints_and_schedules {}

#[doc = include_str!("../docs/guide/cuda.md")]
pub mod cuda {}

#[doc = include_str!("../docs/guide/check-mode-and-explain.md")]
pub mod check_mode_and_explain {}

#[doc = include_str!("../docs/guide/coming-from-pytorch.md")]
pub mod coming_from_pytorch {}
