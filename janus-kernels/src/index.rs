//! Indexing kernels: `index_select`/`index_add` along one axis, `gather`/`scatter_add` along one
//! axis of same-rank operands, and `one_hot`. Every index is bounds-checked.

use crate::dtype::{Element, Float};
use crate::reduce::ReduceDims;
use crate::strided::contiguous_strides;
use std::fmt;

/// An index outside `0..bound`, reported by the caller as a user error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexOutOfRange {
    /// The offending index value.
    pub index: i64,
    /// The exclusive upper bound it had to respect.
    pub bound: usize,
}

impl fmt::Display for IndexOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "index {} is out of range for a dimension of size {}", self.index, self.bound)
    }
}

impl std::error::Error for IndexOutOfRange {}

fn check(idx: &[i64], bound: usize) -> Result<(), IndexOutOfRange> {
    match idx.iter().find(|&&i| i < 0 || i as usize >= bound) {
        Some(&index) => Err(IndexOutOfRange { index, bound }),
        None => Ok(()),
    }
}

/// `out[o, j, i] = src[o, idx[j], i]`; `src` is contiguous `[outer, n, inner]`, `out` is
/// `[outer, idx.len(), inner]`.
pub fn index_select<T: Element>(
    src: &[T],
    d: ReduceDims,
    idx: &[i64],
    out: &mut [T],
) -> Result<(), IndexOutOfRange> {
    check(idx, d.n)?;
    let m = idx.len();
    for o in 0..d.outer {
        for (j, &r) in idx.iter().enumerate() {
            let s = (o * d.n + r as usize) * d.inner;
            let t = (o * m + j) * d.inner;
            out[t..t + d.inner].copy_from_slice(&src[s..s + d.inner]);
        }
    }
    Ok(())
}

/// The adjoint of [`index_select`]: `out[o, idx[j], i] += src[o, j, i]`; `out` is
/// `[outer, n, inner]` with `d.n` its axis length.
pub fn index_add<T: Float>(
    src: &[T],
    d: ReduceDims,
    idx: &[i64],
    out: &mut [T],
) -> Result<(), IndexOutOfRange> {
    check(idx, d.n)?;
    let m = idx.len();
    for o in 0..d.outer {
        for (j, &r) in idx.iter().enumerate() {
            let s = (o * m + j) * d.inner;
            let t = (o * d.n + r as usize) * d.inner;
            for (a, &b) in out[t..t + d.inner].iter_mut().zip(&src[s..s + d.inner]) {
                *a += b;
            }
        }
    }
    Ok(())
}

/// Visits every position of `idx_shape` with the flat offset it has in a contiguous tensor of
/// `base_shape` (same rank), with the axis coordinate removed (to be replaced by the index).
fn for_each_gather_pos(
    idx_shape: &[usize],
    base_shape: &[usize],
    axis: usize,
    mut f: impl FnMut(usize, usize),
) {
    let numel: usize = idx_shape.iter().product();
    let rank = idx_shape.len();
    if rank > 0 && axis == rank - 1 && idx_shape[..axis] == base_shape[..axis] {
        // Along the last axis with the same leading dims (a gather of one class per row):
        // rows of both follow each other.
        let (cols, base_cols) = (idx_shape[axis], base_shape[axis]);
        for r in 0..numel / cols.max(1) {
            for c in 0..cols {
                f(r * cols + c, r * base_cols);
            }
        }
        return;
    }
    let strides = contiguous_strides(base_shape);
    let mut pos = vec![0usize; rank];
    for p in 0..numel {
        let mut off = 0;
        for d in 0..rank {
            if d != axis {
                off += pos[d] * strides[d];
            }
        }
        f(p, off);
        for d in (0..rank).rev() {
            pos[d] += 1;
            if pos[d] < idx_shape[d] {
                break;
            }
            pos[d] = 0;
        }
    }
}

/// `out[p] = src[p with axis coordinate idx[p]]`; `src` contiguous of `src_shape`, `idx` and
/// `out` contiguous of `idx_shape` (same rank; every other dimension at most `src_shape`'s).
pub fn gather<T: Element>(
    src: &[T],
    src_shape: &[usize],
    axis: usize,
    idx: &[i64],
    idx_shape: &[usize],
    out: &mut [T],
) -> Result<(), IndexOutOfRange> {
    check(idx, src_shape[axis])?;
    let stride: usize = src_shape[axis + 1..].iter().product();
    for_each_gather_pos(idx_shape, src_shape, axis, |p, off| {
        out[p] = src[off + idx[p] as usize * stride];
    });
    Ok(())
}

/// The adjoint of [`gather`]: `out[p with axis coordinate idx[p]] += src[p]`; `out` contiguous
/// of `out_shape`, `src` and `idx` contiguous of `idx_shape`.
pub fn scatter_add<T: Float>(
    src: &[T],
    idx: &[i64],
    idx_shape: &[usize],
    axis: usize,
    out: &mut [T],
    out_shape: &[usize],
) -> Result<(), IndexOutOfRange> {
    check(idx, out_shape[axis])?;
    let stride: usize = out_shape[axis + 1..].iter().product();
    for_each_gather_pos(idx_shape, out_shape, axis, |p, off| {
        out[off + idx[p] as usize * stride] += src[p];
    });
    Ok(())
}

/// `out[p, c] = (idx[p] == c)` as 0/1 in `T`; `out` has `idx.len() * classes` elements.
pub fn one_hot<T: Element>(idx: &[i64], classes: usize, out: &mut [T]) -> Result<(), IndexOutOfRange> {
    check(idx, classes)?;
    out.fill(T::from_f64(0.0));
    for (p, &c) in idx.iter().enumerate() {
        out[p * classes + c as usize] = T::from_f64(1.0);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_and_add_are_adjoint() {
        let src: Vec<f64> = (0..12).map(|i| i as f64).collect(); // [2, 3, 2]
        let d = ReduceDims::new(&[2, 3, 2], 1);
        let idx = [2, 0, 2];
        let mut out = vec![0.0; 12];
        index_select(&src, d, &idx, &mut out).unwrap();
        assert_eq!(out[..6], [4.0, 5.0, 0.0, 1.0, 4.0, 5.0]);
        let mut back = vec![0.0; 12];
        index_add(&out, d, &idx, &mut back).unwrap();
        assert_eq!(back[..6], [0.0, 1.0, 0.0, 0.0, 8.0, 10.0]);
        assert_eq!(index_select(&src, d, &[3], &mut out), Err(IndexOutOfRange { index: 3, bound: 3 }));
    }

    #[test]
    fn gather_rows_and_scatter_back() {
        let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // [2, 3]
        let idx = [2, 0]; // [2, 1]
        let mut out = [0.0f32; 2];
        gather(&src, &[2, 3], 1, &idx, &[2, 1], &mut out).unwrap();
        assert_eq!(out, [3.0, 4.0]);
        let mut back = [0.0f32; 6];
        scatter_add(&[1.0, 1.0], &idx, &[2, 1], 1, &mut back, &[2, 3]).unwrap();
        assert_eq!(back, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        assert!(gather(&src, &[2, 3], 1, &[-1, 0], &[2, 1], &mut out).is_err());
    }

    #[test]
    fn one_hot_marks_one_class_per_row() {
        let mut out = [0i64; 6];
        one_hot(&[1, 2], 3, &mut out).unwrap();
        assert_eq!(out, [0, 1, 0, 0, 0, 1]);
    }
}
