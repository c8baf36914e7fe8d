//! Devices a tensor can live on.

use std::fmt;

/// Where a tensor's storage lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Device {
    /// Host memory; kernels from `janus-kernels` (rayon, SIMD, `gemm`).
    #[default]
    Cpu,
    /// A CUDA GPU by ordinal.
    Cuda(usize),
}

impl Device {
    /// The fastest device available: `Cuda(0)` when a CUDA driver and device are present and
    /// the device initialises, otherwise the CPU. Never panics.
    pub fn best() -> Device {
        if Device::Cuda(0).is_available() { Device::Cuda(0) } else { Device::Cpu }
    }

    /// Whether tensors can be created on this device on this machine (for CUDA: a driver, the
    /// device, and a context that initialises). Never panics.
    pub fn is_available(self) -> bool {
        match self {
            Device::Cpu => true,
            Device::Cuda(n) => janus_kernels::cuda::device(n).is_ok(),
        }
    }

    /// Number of CUDA devices on this machine (0 without a driver). Never panics.
    pub fn cuda_count() -> usize {
        janus_kernels::cuda::device_count()
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            "best" => Ok(Device::best()),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|i| i.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| format!("unknown device `{s}` (expected cpu, cuda, cuda:N or best)")),
        }
    }
}
