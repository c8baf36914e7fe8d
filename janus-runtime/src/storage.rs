//! Where a tensor's elements live: [`Storage`] (host memory or a device buffer) and [`Data`],
//! a strided view of it. Everything above matches on the device through this enum only.

use crate::Device;
use crate::shape::{Shape, Strides};
use janus_kernels::CpuBuffer;
use std::sync::Arc;

/// A shared host buffer: a `triomphe::Arc`, which has no weak count, so freeing the last
/// handle takes one atomic operation instead of std's two (every op's output is freed so).
pub type SharedBuffer = triomphe::Arc<CpuBuffer>;

/// Concrete storage plus the strided view of it this tensor presents.
#[derive(Clone)]
pub(crate) struct Data {
    pub(crate) storage: Storage,
    pub(crate) strides: Strides,
    pub(crate) offset: usize,
}

/// Where the elements live; everything above matches on the device through this enum only.
#[derive(Clone)]
pub(crate) enum Storage {
    /// Host memory.
    Cpu(SharedBuffer),
    /// Device memory of the tensor's dtype (see `backend::cuda`).
    Cuda(Arc<janus_kernels::cuda::DeviceBuffer>),
}

impl Storage {
    /// The device holding the elements.
    pub(crate) fn device(&self) -> Device {
        match self {
            Storage::Cpu(_) => Device::Cpu,
            Storage::Cuda(b) => Device::Cuda(b.device().ordinal),
        }
    }
}

impl Data {
    /// A fresh contiguous buffer viewed whole.
    pub(crate) fn contiguous(buf: CpuBuffer, shape: &Shape) -> Data {
        Data { storage: Storage::Cpu(SharedBuffer::new(buf)), strides: shape.contiguous_strides(), offset: 0 }
    }

    /// A whole shared buffer viewed contiguously (no copy).
    pub(crate) fn shared(buf: SharedBuffer, shape: &Shape) -> Data {
        Data { storage: Storage::Cpu(buf), strides: shape.contiguous_strides(), offset: 0 }
    }

    pub(crate) fn cpu(&self) -> &CpuBuffer {
        match &self.storage {
            Storage::Cpu(b) => b,
            Storage::Cuda(_) => panic!("janus internal error: a CPU kernel was given a CUDA tensor"),
        }
    }

    /// A view of the same storage with other strides and offset.
    pub(crate) fn view(&self, strides: Strides, offset: usize) -> Data {
        Data { storage: self.storage.clone(), strides, offset }
    }
}
