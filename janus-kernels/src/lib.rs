//! janus-kernels: compute on CPU buffers and CUDA device memory. Knows shapes, strides and dtypes; knows nothing of
//! tensors, graphs, tapes or macros (those live in `janus-runtime`).
//!
//! - [`strided`]: elementwise maps over broadcast/strided operands (rayon above a size threshold).
//! - [`simd_math`]: vectorised `exp`, `log`, `tanh`, `sigmoid` with runtime CPU-feature dispatch.
//! - [`reduce`]: sums, max/min/argmax and the numerically stable softmax family.
//! - [`matmul`]: GEMM through the `gemm` crate with transposes folded into strides.
//! - [`conv`]: im2col and col2im windows for convolution and pooling.
//! - [`index`]: `index_select`, `gather`, their adjoints, `one_hot`.
//! - [`philox`]: the counter-based Philox 4x32-10 random stream.
//! - [`cuda`]: the same kernels on CUDA devices (generated from the same programs where
//!   they are elementwise), loaded at run time.
#![warn(missing_docs)]

pub mod buffer;
pub mod conv;
pub mod cuda;
pub mod dtype;
pub mod elementwise;
pub mod fused;
pub mod index;
pub mod matmul;
pub mod parallel;
pub mod philox;
pub mod reduce;
pub mod simd_math;
pub mod strided;

pub use buffer::CpuBuffer;
pub use dtype::{DType, Element, Float};
pub use elementwise::{BinaryOp, CmpOp, UnaryOp};
