//! Source ops: constant fills, `arange`, random fills and `multinomial`. Random ops read the
//! stream state (key, counter) from their input tensor, so a compiled graph that receives the
//! same state draws the same numbers as eager code.

use super::{Arange, Full, RandFill, TensorType};
use crate::DType;
use crate::error::bail;
use crate::shape::Shape;
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::philox;
use janus_kernels::{CpuBuffer, with_float_type};

pub(crate) fn full(p: &Full) -> Data {
    Data::contiguous(CpuBuffer::filled(p.dtype, p.shape.elems(), p.value.get()), &p.shape)
}

pub(crate) fn arange(p: &Arange) -> Data {
    Data::contiguous(CpuBuffer::I64((0..p.n as i64).collect()), &[p.n].into())
}

/// The (key, counter) pair carried by a stream-state tensor.
pub(crate) fn stream_state(state: &Tensor) -> (u64, u64) {
    let s = state.contiguous_slice::<i64>();
    (s[0] as u64, s[1] as u64)
}

pub(crate) fn rand(p: &RandFill, state: &Tensor, normal: bool) -> Data {
    let (key, counter) = stream_state(state);
    with_float_type!(p.dtype, T => {
        let mut out = vec![0 as T; p.shape.elems()];
        if normal {
            philox::fill_normal(key, counter, &mut out);
        } else {
            philox::fill_uniform(key, counter, &mut out);
        }
        Data::contiguous(T::wrap(out), &p.shape)
    }, _ => unreachable!("random fills are created with a float dtype"))
}

#[track_caller]
pub(crate) fn infer_multinomial(probs: &Tensor) -> TensorType {
    if !probs.dtype().is_float() || !(1..=2).contains(&probs.rank()) || probs.sizes()[probs.rank() - 1] == 0 {
        bail!(
            "multinomial",
            "expected a non-empty 1-D or 2-D float tensor of weights, got {} {:?}",
            probs.dtype(),
            probs.shape_ref()
        );
    }
    let shape: Shape = if probs.rank() == 2 { [probs.sizes()[0]].into() } else { Shape::scalar() };
    TensorType { shape, dtype: DType::I64 }
}

#[track_caller]
pub(crate) fn multinomial(probs: &Tensor, state: &Tensor) -> Data {
    let (key, counter) = stream_state(state);
    let cols = probs.sizes()[probs.rank() - 1];
    let rows = probs.elems() / cols;
    let mut out = vec![0i64; rows];
    let res = with_float_type!(probs.dtype(), T => {
        philox::multinomial(&probs.contiguous_slice::<T>(), cols, key, counter, &mut out)
    }, _ => unreachable!());
    if let Err(row) = res {
        bail!(
            "multinomial",
            "row {row} of {:?} has negative, non-finite or all-zero weights",
            probs.shape_ref()
        );
    }
    let shape: Shape = if probs.rank() == 2 { [rows].into() } else { Shape::scalar() };
    Data::contiguous(CpuBuffer::I64(out), &shape)
}

/// Counter values a random op with this result type consumes.
pub(crate) fn blocks_used(dtype: DType, numel: usize) -> u64 {
    with_float_type!(dtype, T => philox::blocks_for::<T>(numel), _ => unreachable!())
}
