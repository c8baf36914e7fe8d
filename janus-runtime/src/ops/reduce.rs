//! Reductions: `sum` over dimension sets, `max`/`min`/`argmax`/`logsumexp` along one dimension,
//! and the softmax family. Shape rules, kernels and VJPs.

use super::{Axis, Op, ReduceDim, Sum, TensorType};
use crate::DType;
use crate::error::bail;
use crate::shape::Shape;
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::reduce::{self as k, ReduceDims};
use janus_kernels::{Float, with_float_type};

fn reduced_shape(shape: &[usize], dims: &[usize], keepdim: bool) -> Shape {
    let mut out = Shape::scalar();
    for (i, &d) in shape.iter().enumerate() {
        if !dims.contains(&i) {
            out.0.push(d);
        } else if keepdim {
            out.0.push(1);
        }
    }
    out
}

#[track_caller]
pub(crate) fn infer_sum(p: &Sum, x: &Tensor) -> TensorType {
    if !x.dtype().is_float() {
        bail!(
            "sum",
            "expected a float tensor, got {} {:?} (convert with to_dtype)",
            x.dtype(),
            x.shape_ref()
        );
    }
    TensorType { shape: reduced_shape(x.sizes(), &p.dims, p.keepdim), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_reduce_dim(op: &str, p: &ReduceDim, x: &Tensor, dtype: DType) -> TensorType {
    if !x.dtype().is_float() {
        bail!(op, "expected a float tensor, got {} {:?}", x.dtype(), x.shape_ref());
    }
    if x.sizes()[p.dim] == 0 && op != "logsumexp" {
        bail!(
            op,
            "reduction over the empty dimension {} of shape {:?} has no identity",
            p.dim,
            x.shape_ref()
        );
    }
    TensorType { shape: reduced_shape(x.sizes(), &[p.dim], p.keepdim), dtype }
}

fn wrap<T: Stored>(v: Vec<T>, shape: &Shape) -> Data {
    Data::contiguous(T::wrap(v), shape)
}

pub(crate) fn sum(p: &Sum, x: &Tensor, ty: &TensorType) -> Data {
    with_float_type!(x.dtype(), T => {
        // Straight from the operand's layout, no contiguous copy first (see `sum_dims`).
        let reduce: Vec<bool> = (0..x.rank()).map(|d| p.dims.contains(&d)).collect();
        let mut out = vec![T::ZERO; ty.shape.elems()];
        janus_kernels::strided::sum_dims(x.sizes(), x.src::<T>(), &reduce, &mut out);
        wrap(out, &ty.shape)
    }, _ => unreachable!("rejected by the shape rule"))
}

fn along<T: Float, O: Stored + Clone + Default>(
    p: &ReduceDim,
    x: &Tensor,
    ty: &TensorType,
    f: fn(&[T], ReduceDims, &mut [O]),
) -> Data {
    let src = x.contiguous_slice::<T>();
    let mut out = vec![O::default(); ty.shape.elems()];
    f(&src, ReduceDims::new(x.sizes(), p.dim), &mut out);
    wrap(out, &ty.shape)
}

pub(crate) fn max(p: &ReduceDim, x: &Tensor, ty: &TensorType) -> Data {
    with_float_type!(x.dtype(), T => along::<T, T>(p, x, ty, k::max), _ => unreachable!())
}

pub(crate) fn min(p: &ReduceDim, x: &Tensor, ty: &TensorType) -> Data {
    with_float_type!(x.dtype(), T => along::<T, T>(p, x, ty, k::min), _ => unreachable!())
}

pub(crate) fn argmax(p: &ReduceDim, x: &Tensor, ty: &TensorType) -> Data {
    with_float_type!(x.dtype(), T => along::<T, i64>(p, x, ty, k::argmax), _ => unreachable!())
}

pub(crate) fn logsumexp(p: &ReduceDim, x: &Tensor, ty: &TensorType) -> Data {
    with_float_type!(x.dtype(), T => along::<T, T>(p, x, ty, k::logsumexp), _ => unreachable!())
}

pub(crate) fn softmax(p: &Axis, x: &Tensor, log: bool) -> Data {
    with_float_type!(x.dtype(), T => {
        let src = x.contiguous_slice::<T>();
        let mut out = vec![T::ZERO; x.elems()];
        let d = ReduceDims::new(x.sizes(), p.dim);
        if log { k::log_softmax(&src, d, &mut out) } else { k::softmax(&src, d, &mut out) }
        wrap(out, x.shape_ref())
    }, _ => unreachable!())
}

// ---- gradients ------------------------------------------------------------------------------

/// `g` with the reduced dimensions restored as size 1, broadcast back over `x`.
fn expand_back(g: &Tensor, x: &Tensor, dims: &[usize]) -> Tensor {
    let kept = reduced_shape(x.sizes(), dims, true);
    g.reshape(&kept).broadcast_to(x.shape_ref())
}

pub(crate) fn sum_vjp(x: &Tensor, g: &Tensor, op: &Op) -> Tensor {
    let Op::Sum(p) = op else { unreachable!() };
    expand_back(g, x, &p.dims)
}

/// Max/min send the gradient to the extreme elements, split evenly among ties (like `amax`).
pub(crate) fn extremum_vjp(p: &ReduceDim, x: &Tensor, y: &Tensor, g: &Tensor) -> Tensor {
    let hit = x.eq(&expand_back(y, x, &[p.dim])).to_dtype(x.dtype());
    let count = hit.sum_keepdim(p.dim as isize);
    &hit / count * expand_back(g, x, &[p.dim])
}

pub(crate) fn logsumexp_vjp(p: &ReduceDim, x: &Tensor, y: &Tensor, g: &Tensor) -> Tensor {
    (x - expand_back(y, x, &[p.dim])).exp() * expand_back(g, x, &[p.dim])
}

pub(crate) fn softmax_vjp(p: &Axis, y: &Tensor, g: &Tensor) -> Tensor {
    let dot = (g * y).sum_keepdim(p.dim as isize);
    y * (g - dot)
}

pub(crate) fn log_softmax_vjp(p: &Axis, y: &Tensor, g: &Tensor) -> Tensor {
    g - y.exp() * g.sum_keepdim(p.dim as isize)
}
