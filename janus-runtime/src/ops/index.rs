//! Indexing ops: `index_select`/`index_add`, `gather`/`scatter_add`, `one_hot`. Indices are
//! `i64` and bounds-checked; an out-of-range index panics with the op, shapes and caller.

use super::{Axis, IndexAdd, OneHot, ScatterAdd, TensorType};
use crate::DType;
use crate::error::bail;
use crate::shape::Shape;
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::index::{self as k, IndexOutOfRange};
use janus_kernels::reduce::ReduceDims;
use janus_kernels::{with_any_type, with_float_type};

#[track_caller]
fn check_index_dtype(op: &str, src: &Tensor, idx: &Tensor) {
    if idx.dtype() != DType::I64 {
        bail!(
            op,
            "indices must be i64, got {} {:?} (indexing {:?})",
            idx.dtype(),
            idx.shape_ref(),
            src.shape_ref()
        );
    }
}

#[track_caller]
fn raise(op: &str, e: IndexOutOfRange, src: &Tensor, idx: &Tensor) -> ! {
    bail!(op, "{e} (source {:?}, indices {:?})", src.shape_ref(), idx.shape_ref())
}

#[track_caller]
pub(crate) fn infer_index_select(p: &Axis, x: &Tensor, idx: &Tensor) -> TensorType {
    check_index_dtype("index_select", x, idx);
    if idx.rank() != 1 {
        bail!(
            "index_select",
            "indices must be 1-D, got {:?} (indexing {:?})",
            idx.shape_ref(),
            x.shape_ref()
        );
    }
    let mut shape = x.shape_ref().clone();
    shape.0[p.dim] = idx.elems();
    TensorType { shape, dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_index_add(p: &IndexAdd, src: &Tensor, idx: &Tensor) -> TensorType {
    check_index_dtype("index_add", src, idx);
    let mut shape = src.shape_ref().clone();
    shape.0[p.dim] = p.size;
    TensorType { shape, dtype: src.dtype() }
}

#[track_caller]
pub(crate) fn infer_gather(p: &Axis, x: &Tensor, idx: &Tensor) -> TensorType {
    check_index_dtype("gather", x, idx);
    let fits = idx.rank() == x.rank()
        && idx.sizes().iter().zip(x.sizes()).enumerate().all(|(i, (a, b))| i == p.dim || a <= b);
    if !fits {
        bail!(
            "gather",
            "indices {:?} must have the rank of the source {:?} and fit inside it off dimension {}",
            idx.shape_ref(),
            x.shape_ref(),
            p.dim
        );
    }
    TensorType { shape: idx.shape_ref().clone(), dtype: x.dtype() }
}

#[track_caller]
pub(crate) fn infer_scatter_add(p: &ScatterAdd, src: &Tensor, idx: &Tensor) -> TensorType {
    check_index_dtype("scatter_add", src, idx);
    if src.shape_ref() != idx.shape_ref() || p.shape.rank() != idx.rank() {
        bail!(
            "scatter_add",
            "source {:?} and indices {:?} must match, with the rank of {:?}",
            src.shape_ref(),
            idx.shape_ref(),
            p.shape
        );
    }
    TensorType { shape: p.shape.clone(), dtype: src.dtype() }
}

#[track_caller]
pub(crate) fn infer_one_hot(p: &OneHot, idx: &Tensor) -> TensorType {
    check_index_dtype("one_hot", idx, idx);
    let mut shape = idx.shape_ref().clone();
    shape.0.push(p.classes);
    TensorType { shape, dtype: p.dtype }
}

#[track_caller]
pub(crate) fn index_select(p: &Axis, x: &Tensor, idx: &Tensor, ty: &TensorType) -> Data {
    let ids = idx.contiguous_slice::<i64>();
    with_any_type!(x.dtype(), T => {
        let src = x.contiguous_slice::<T>();
        let mut out = vec![T::default(); ty.shape.elems()];
        if let Err(e) = k::index_select(&src, ReduceDims::new(x.sizes(), p.dim), &ids, &mut out) {
            raise("index_select", e, x, idx);
        }
        Data::contiguous(T::wrap(out), &ty.shape)
    })
}

#[track_caller]
pub(crate) fn index_add(p: &IndexAdd, src: &Tensor, idx: &Tensor, ty: &TensorType) -> Data {
    let ids = idx.contiguous_slice::<i64>();
    with_float_type!(src.dtype(), T => {
        let s = src.contiguous_slice::<T>();
        let mut out = vec![0 as T; ty.shape.elems()];
        if let Err(e) = k::index_add(&s, ReduceDims::new(&ty.shape, p.dim), &ids, &mut out) {
            raise("index_add", e, src, idx);
        }
        Data::contiguous(T::wrap(out), &ty.shape)
    }, _ => bail!("index_add", "expected a float source, got {}", src.dtype()))
}

#[track_caller]
pub(crate) fn gather(p: &Axis, x: &Tensor, idx: &Tensor, ty: &TensorType) -> Data {
    let ids = idx.contiguous_slice::<i64>();
    with_any_type!(x.dtype(), T => {
        let src = x.contiguous_slice::<T>();
        let mut out = vec![T::default(); ty.shape.elems()];
        if let Err(e) = k::gather(&src, x.sizes(), p.dim, &ids, idx.sizes(), &mut out) {
            raise("gather", e, x, idx);
        }
        Data::contiguous(T::wrap(out), &ty.shape)
    })
}

#[track_caller]
pub(crate) fn scatter_add(p: &ScatterAdd, src: &Tensor, idx: &Tensor, ty: &TensorType) -> Data {
    let ids = idx.contiguous_slice::<i64>();
    with_float_type!(src.dtype(), T => {
        let s = src.contiguous_slice::<T>();
        let mut out = vec![0 as T; ty.shape.elems()];
        if let Err(e) = k::scatter_add(&s, &ids, idx.sizes(), p.dim, &mut out, &p.shape) {
            raise("scatter_add", e, src, idx);
        }
        Data::contiguous(T::wrap(out), &ty.shape)
    }, _ => bail!("scatter_add", "expected a float source, got {}", src.dtype()))
}

#[track_caller]
pub(crate) fn one_hot(p: &OneHot, idx: &Tensor, ty: &TensorType) -> Data {
    let ids = idx.contiguous_slice::<i64>();
    with_any_type!(p.dtype, T => {
        let mut out = vec![T::default(); ty.shape.elems()];
        if let Err(e) = k::one_hot(&ids, p.classes, &mut out) {
            raise("one_hot", e, idx, idx);
        }
        Data::contiguous(T::wrap(out), &ty.shape)
    })
}

pub(crate) fn index_select_vjp(p: &Axis, x: &Tensor, idx: &Tensor, g: &Tensor) -> Tensor {
    g.index_add_into(p.dim, idx, x.sizes()[p.dim])
}

pub(crate) fn gather_vjp(p: &Axis, x: &Tensor, idx: &Tensor, g: &Tensor) -> Tensor {
    g.scatter_add_into(p.dim, idx, Shape::from(x.sizes()))
}
