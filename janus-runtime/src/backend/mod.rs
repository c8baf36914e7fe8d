//! The device seam of eager execution: every op's kernel runs on the device of its operands.
//! CPU kernels live beside each op in `ops/`; CUDA kernels in [`cuda`].
//!
//! Operands must share one device, with one exception that PyTorch users rely on: a rank-0
//! CPU tensor (a scalar such as `Tensor::scalar(0.5)`) joins an op on any device, and is
//! copied there. Source ops (fills, `arange`, literals, random fills) name their device in
//! their parameters; random ops read their stream position from a CPU state tensor.

pub(crate) mod cuda;

use crate::Device;
use crate::error::bail;
use crate::ops::{Op, TensorType};
use crate::tensor::{Data, Tensor};

/// Operand positions that are stream states (CPU `i64[2]`), not values.
fn is_state_operand(op: &Op, k: usize) -> bool {
    matches!((op, k), (Op::RandUniform(_) | Op::RandNormal(_), 0) | (Op::Multinomial, 1))
}

/// The device an op runs on: its source parameter's, or its operands' (a rank-0 CPU operand
/// goes along). Panics, naming the op and both devices, when operands disagree.
#[track_caller]
pub(crate) fn device_of(op: &Op, x: &[&Tensor]) -> Device {
    match op {
        Op::Full(p) => return p.device,
        Op::Arange(p) => return p.device,
        Op::Constant(p) => return p.device,
        Op::RandUniform(p) | Op::RandNormal(p) => return p.device,
        Op::ToDevice(_) => return x[0].device(),
        _ => {}
    }
    let mut found: Option<&Tensor> = None;
    for (k, t) in x.iter().enumerate() {
        if is_state_operand(op, k) || (t.rank() == 0 && t.device() == Device::Cpu) {
            continue;
        }
        match found {
            None => found = Some(t),
            Some(f) if f.device() != t.device() => bail!(
                op.name(),
                "operands are on different devices: {} {:?} and {} {:?} (move one with to_device)",
                f.device(),
                f.shape_ref(),
                t.device(),
                t.shape_ref()
            ),
            Some(_) => {}
        }
    }
    found.map_or(Device::Cpu, Tensor::device)
}

/// Computes `op` on its operands' device.
#[track_caller]
pub(crate) fn compute(op: &Op, x: &[&Tensor], ty: &TensorType) -> Data {
    if let Op::ToDevice(p) = op {
        return transfer(x[0], p.device);
    }
    match device_of(op, x) {
        Device::Cpu if crate::profile::on() => crate::profile::eager(
            || {
                let ins: Vec<String> = x.iter().map(|t| format!("{:?}", t.sizes())).collect();
                format!("{} {} -> {:?}", op.name(), ins.join(" "), ty.shape.sizes())
            },
            || op.compute_cpu(x, ty),
        ),
        Device::Cpu => op.compute_cpu(x, ty),
        Device::Cuda(n) => cuda::compute(op, x, ty, n),
    }
}

/// A copy of `x` on `device` (the `to_device` op's kernel).
#[track_caller]
pub(crate) fn transfer(x: &Tensor, device: Device) -> Data {
    if x.device() == device {
        return x.data().clone();
    }
    match device {
        Device::Cpu => cuda::download(x).data().clone(),
        Device::Cuda(n) => cuda::upload(&x.on_host(), n).data().clone(),
    }
}
