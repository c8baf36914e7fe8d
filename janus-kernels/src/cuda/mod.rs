//! The CUDA backend's kernels, through cudarc with dynamic loading: the build needs no CUDA
//! toolkit, and the same binary runs on machines with and without a GPU.
//!
//! - [`libs`]: finds `libnvrtc` and `libcublas` (also inside Python's `nvidia-*` wheels).
//! - [`device`](mod@device): context, stream, caching allocator ([`alloc`]), kernel loading, faults.
//! - [`codegen`]: CUDA C for elementwise register programs, the same ones the CPU runs.
//! - [`library`]: the fixed kernels (reductions, softmax, index ops, Philox, copies).
//! - [`nvrtc`]: compilation to PTX, cached in memory and on disk.
//! - [`blas`]: GEMM through cuBLAS.
//! - [`ops`]: launching all of these on strided device views.
//! - [`graph`]: CUDA graph capture and replay.
//!
//! Nothing here panics because a library or a GPU is missing: every entry point returns a
//! [`CudaError`] that says what is missing and how to install it.

pub mod alloc;
pub mod blas;
pub mod codegen;
pub mod device;
pub mod graph;
pub mod launch;
pub mod library;
pub mod libs;
pub mod nvrtc;
pub mod ops;

pub use alloc::MemoryStats;
pub use device::{CudaDevice, DeviceBuffer, device, device_count};

/// Why a CUDA operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CudaError {
    /// No usable driver on this machine.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The ordinal is past the devices present.
    #[error("CUDA device {ordinal} does not exist ({count} present)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// A driver call failed.
    #[error("{call} failed: {code}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The driver's error code.
        code: String,
    },
    /// The device has no memory left for a request, even after the cache was released.
    #[error("out of memory: {requested} bytes requested")]
    OutOfMemory {
        /// Bytes requested.
        requested: usize,
    },
    /// NVRTC is missing or failed outside compilation.
    #[error("NVRTC: {0}")]
    Nvrtc(String),
    /// Generated source failed to compile (an internal error, reported with the source).
    #[error("NVRTC failed to compile {kernel}: {log}")]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// The compiler's log and the source's head.
        log: String,
    },
    /// cuBLAS is missing or failed.
    #[error("cuBLAS: {0}")]
    Blas(String),
    /// Work that a CUDA graph cannot hold was asked for while this thread captures one: a
    /// copy from host memory (the graph would keep the host address, which is gone by the
    /// replay) or a read to the host (nothing has run yet during a capture).
    #[error("{0} cannot be captured in a CUDA graph")]
    NotCapturable(String),
    /// A kernel flagged bad input (found at the next synchronisation).
    #[error("{op}: {what} (detected on the device, reported at this synchronisation)")]
    Fault {
        /// The op whose kernel flagged it.
        op: &'static str,
        /// What was wrong.
        what: &'static str,
    },
}

/// Turns a driver result into a [`CudaError`] naming the call.
pub(crate) fn check(call: &'static str, r: cudarc::driver::sys::CUresult) -> Result<(), CudaError> {
    match r {
        cudarc::driver::sys::CUresult::CUDA_SUCCESS => Ok(()),
        cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
            Err(CudaError::OutOfMemory { requested: 0 })
        }
        e => Err(CudaError::Driver { call, code: format!("{e:?}") }),
    }
}

/// Whether a CUDA device with this ordinal can be used. Never panics.
pub fn is_available(ordinal: usize) -> bool {
    ordinal < device_count()
}
