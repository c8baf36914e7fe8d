//! Shape ops. `reshape` (of a contiguous input), `permute`, `narrow` and `broadcast_to` are views
//! that share storage; `pad` and `cat` copy.

use super::{Axis, BroadcastTo, Narrow, Pad, Permute, Reshape, TensorType};
use crate::error::bail;
use crate::shape::{Shape, broadcast_shapes};
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::with_any_type;

#[track_caller]
pub(crate) fn infer_permute(p: &Permute, x: &Tensor) -> TensorType {
    let r = x.rank();
    let mut seen = vec![false; r];
    let valid = p.perm.len() == r && p.perm.iter().all(|&d| d < r && !std::mem::replace(&mut seen[d], true));
    if !valid {
        bail!("permute", "{:?} is not a permutation of the {} dimensions of {:?}", p.perm, r, x.shape_ref());
    }
    let shape = Shape(p.perm.iter().map(|&d| x.sizes()[d]).collect());
    TensorType { shape, dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_narrow(p: &Narrow, x: &Tensor) -> TensorType {
    let size = x.sizes()[p.dim];
    if p.start + p.len > size {
        bail!(
            "narrow",
            "range {}..{} is out of bounds for dimension {} of {:?}",
            p.start,
            p.start + p.len,
            p.dim,
            x.shape_ref()
        );
    }
    let mut shape = x.shape_ref().clone();
    shape.0[p.dim] = p.len;
    TensorType { shape, dtype: x.dtype() }
}

pub(crate) fn infer_pad(p: &Pad, x: &Tensor) -> TensorType {
    let mut shape = x.shape_ref().clone();
    shape.0[p.dim] += p.before + p.after;
    TensorType { shape, dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_broadcast_to(p: &BroadcastTo, x: &Tensor) -> TensorType {
    match broadcast_shapes(x.sizes(), &p.shape) {
        Some(s) if s == p.shape => TensorType { shape: s, dtype: x.dtype() },
        _ => bail!("broadcast_to", "cannot broadcast {:?} to {:?}", x.shape_ref(), p.shape),
    }
}

#[track_caller]
pub(crate) fn infer_cat(p: &Axis, xs: &[&Tensor]) -> TensorType {
    let Some(first) = xs.first() else { bail!("cat", "needs at least one tensor") };
    let mut shape = first.shape_ref().clone();
    shape.0[p.dim] = 0;
    for t in xs {
        let same_rest = t.rank() == first.rank()
            && t.sizes().iter().zip(first.sizes()).enumerate().all(|(i, (a, b))| i == p.dim || a == b);
        if !same_rest || t.dtype() != first.dtype() {
            bail!(
                "cat",
                "tensors must agree in dtype and in every dimension but {}: {} {:?} vs {} {:?}",
                p.dim,
                first.dtype(),
                first.shape_ref(),
                t.dtype(),
                t.shape_ref()
            );
        }
        shape.0[p.dim] += t.sizes()[p.dim];
    }
    TensorType { shape, dtype: first.dtype() }
}

pub(crate) fn reshape(p: &Reshape, x: &Tensor) -> Data {
    if x.is_contiguous() {
        return x.data().view(p.shape.contiguous_strides(), x.data().offset);
    }
    let copy = with_any_type!(x.dtype(), T => T::wrap(x.contiguous_slice::<T>().into_owned()));
    Data::contiguous(copy, &p.shape)
}

pub(crate) fn permute(p: &Permute, x: &Tensor) -> Data {
    let strides = p.perm.iter().map(|&d| x.strides()[d]).collect();
    x.data().view(strides, x.data().offset)
}

pub(crate) fn narrow(p: &Narrow, x: &Tensor) -> Data {
    let d = x.data();
    d.view(d.strides.clone(), d.offset + p.start * d.strides[p.dim])
}

pub(crate) fn broadcast_to(p: &BroadcastTo, x: &Tensor) -> Data {
    let strides = super::elementwise::broadcast_strides(x, &p.shape);
    x.data().view(strides, x.data().offset)
}

/// Copies contiguous `[outer, n_i, inner]` blocks of each part, side by side along the middle
/// dimension of a `[outer, total, inner]` result.
fn place<T: Copy + Default>(
    parts: &[(&[T], usize, usize)],
    outer: usize,
    inner: usize,
    total: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); outer * total * inner];
    for o in 0..outer {
        for &(src, n, at) in parts {
            let s = o * n * inner;
            let t = (o * total + at) * inner;
            out[t..t + n * inner].copy_from_slice(&src[s..s + n * inner]);
        }
    }
    out
}

pub(crate) fn pad(p: &Pad, x: &Tensor, ty: &TensorType) -> Data {
    let outer = x.sizes()[..p.dim].iter().product();
    let inner = x.sizes()[p.dim + 1..].iter().product();
    let n = x.sizes()[p.dim];
    with_any_type!(x.dtype(), T => {
        let src = x.contiguous_slice::<T>();
        Data::contiguous(T::wrap(place(&[(&src, n, p.before)], outer, inner, ty.shape[p.dim])), &ty.shape)
    })
}

pub(crate) fn cat(p: &Axis, xs: &[&Tensor], ty: &TensorType) -> Data {
    let outer: usize = ty.shape[..p.dim].iter().product();
    let inner: usize = ty.shape[p.dim + 1..].iter().product();
    with_any_type!(ty.dtype, T => {
        let srcs: Vec<_> = xs.iter().map(|t| t.contiguous_slice::<T>()).collect();
        let mut at = 0;
        let parts: Vec<_> = srcs
            .iter()
            .zip(xs)
            .map(|(s, t)| {
                let n = t.sizes()[p.dim];
                at += n;
                (&s[..], n, at - n)
            })
            .collect();
        // The parts cover the result in order: appended, not placed into zeros (a weight
        // gradient's factors over every time step are concatenated so, for one GEMM).
        let mut out = Vec::with_capacity(outer * ty.shape[p.dim] * inner);
        for o in 0..outer {
            for &(src, n, _) in &parts {
                out.extend_from_slice(&src[o * n * inner..(o + 1) * n * inner]);
            }
        }
        Data::contiguous(T::wrap(out), &ty.shape)
    })
}

pub(crate) fn permute_vjp(p: &Permute, g: &Tensor) -> Tensor {
    let mut inv = vec![0usize; p.perm.len()];
    for (i, &d) in p.perm.iter().enumerate() {
        inv[d] = i;
    }
    g.permute(&inv)
}

pub(crate) fn narrow_vjp(p: &Narrow, x: &Tensor, g: &Tensor) -> Tensor {
    let after = x.sizes()[p.dim] - p.start - p.len;
    g.pad_dim(p.dim, p.start, after)
}

pub(crate) fn cat_vjp(p: &Axis, xs: &[Tensor], g: &Tensor) -> Vec<Option<Tensor>> {
    let mut at = 0;
    xs.iter()
        .map(|t| {
            let n = t.sizes()[p.dim];
            at += n;
            t.needs_grad().then(|| g.narrow(p.dim, at - n, n))
        })
        .collect()
}
