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
    /// The fastest device available: CUDA when a driver and a CUDA-enabled build are present,
    /// otherwise the CPU. Never panics.
    ///
    /// This build has no CUDA backend yet, so it always returns [`Device::Cpu`].
    pub fn best() -> Device {
        Device::Cpu
    }

    /// Whether tensors can be created on this device in this build and on this machine.
    pub fn is_available(self) -> bool {
        matches!(self, Device::Cpu)
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
