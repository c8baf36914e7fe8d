//! Sorting: `argsort` is the primitive (stable, NaN sorted as the largest value as in PyTorch);
//! `sort`, `topk` and `randperm` are built on it with `gather`, so their values' gradient flows
//! to the selected inputs through `gather`'s VJP. No gradient flows through the indices.

use super::TensorType;
use crate::DType;
use crate::error::bail;
use crate::tensor::{Data, Tensor};
use janus_kernels::buffer::Stored;
use janus_kernels::reduce::ReduceDims;
use janus_kernels::{Element, with_any_type};
use rayon::prelude::*;
use std::cmp::Ordering;

/// The permutation that sorts each lane along `dim`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArgSort {
    /// The dimension sorted along.
    pub dim: usize,
    /// Largest first.
    pub descending: bool,
}

#[track_caller]
pub(crate) fn infer_argsort(p: &ArgSort, x: &Tensor) -> TensorType {
    if p.dim >= x.rank().max(1) {
        bail!("argsort", "dim {} is out of range for a tensor of shape {:?}", p.dim, x.shape_ref());
    }
    TensorType { shape: x.shape_ref().clone(), dtype: DType::I64 }
}

/// PyTorch's order: NaN above everything, equal values (and `-0.0 == 0.0`) keep their order.
fn ascending<T: Element>(a: &T, b: &T) -> Ordering {
    match a.partial_cmp(b) {
        Some(o) => o,
        // Only NaN is unordered (a float compared with itself is ordered otherwise).
        None => match (a.partial_cmp(a).is_none(), b.partial_cmp(b).is_none()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            _ => Ordering::Less,
        },
    }
}

/// Below this many elements the lanes are sorted on the calling thread.
const PARALLEL_MIN: usize = 1 << 14;

fn argsort_typed<T: Element>(p: &ArgSort, x: &Tensor) -> Vec<i64> {
    let v = x.contiguous_slice::<T>();
    let dims = if x.rank() == 0 { vec![1] } else { x.sizes().to_vec() };
    let d = ReduceDims::new(&dims, p.dim.min(dims.len() - 1));
    let mut out = vec![0i64; x.elems()];
    let block = (d.n * d.inner).max(1);
    let sort_block = |(o, dst): (usize, &mut [i64])| {
        let mut order: Vec<usize> = (0..d.n).collect();
        for j in 0..d.inner {
            let at = |k: usize| &v[o * block + k * d.inner + j];
            order.iter_mut().enumerate().for_each(|(k, slot)| *slot = k);
            if p.descending {
                order.sort_by(|&a, &b| ascending(at(b), at(a)));
            } else {
                order.sort_by(|&a, &b| ascending(at(a), at(b)));
            }
            for (k, &src) in order.iter().enumerate() {
                dst[k * d.inner + j] = src as i64;
            }
        }
    };
    if x.elems() >= PARALLEL_MIN && janus_kernels::parallel::allowed() {
        out.par_chunks_mut(block).enumerate().for_each(sort_block);
    } else {
        out.chunks_mut(block).enumerate().for_each(sort_block);
    }
    out
}

/// The CPU kernel: each lane's sorting permutation.
pub(crate) fn argsort(p: &ArgSort, x: &Tensor) -> Data {
    let idx = with_any_type!(x.dtype(), T => argsort_typed::<T>(p, x));
    Data::contiguous(i64::wrap(idx), x.shape_ref())
}
