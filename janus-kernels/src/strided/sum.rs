//! Sums of strided operands over some of their dimensions, in a fixed order: eager
//! [`sum_dims`], and [`SumPlan`], the same order for a sum fed tile by tile by a fused program,
//! so that compiled and eager sums have the same bits.

use super::{Dims, Plan, Src, coalesce, walk};
use crate::simd_math::with_best_simd;
use rayon::prelude::*;
use smallvec::SmallVec;
use std::ops::Range;

/// Sums a strided operand over the dimensions where `reduce` is true; `out` is contiguous over
/// the kept dimensions (in order) and is overwritten. No copy of the operand is made: the
/// walk follows the operand's own layout, so a batch norm's per-channel sum over a permuted
/// view reads each contiguous image plane once.
///
/// Large sums split into a fixed number of partial sums whatever the thread count, added in
/// order, so the result is the same bits on every run and for every number of workers.
pub fn sum_dims<T: crate::dtype::Float>(shape: &[usize], src: Src<T>, reduce: &[bool], out: &mut [T]) {
    assert_eq!(reduce.len(), shape.len(), "sum_dims: one flag per dimension");
    let mut out_strides: Dims = SmallVec::from_elem(0, shape.len());
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        if !reduce[d] {
            out_strides[d] = acc;
            acc *= shape[d];
        }
    }
    assert_eq!(out.len(), acc, "sum_dims: output length");
    let total: usize = shape.iter().product();
    out.fill(T::ZERO);
    if total == 0 {
        return;
    }
    let plan = coalesce(shape, [src.strides, &out_strides]);
    let (ss, so) = (*plan.strides[0].last().unwrap(), *plan.strides[1].last().unwrap());
    // A sum down the columns of a matrix with contiguous rows (a bias gradient over a batch).
    let columns = (plan.shape.len() == 2 && ss == 1 && plan.strides[1][..] == [0, 1])
        .then(|| (plan.shape[1], plan.strides[0][0]));
    // One SIMD dispatch per part, not per run: a sum over many short rows (a `[500, 2]` bias
    // gradient's 500 runs of 2) paid the dispatch for every run.
    let part = |range: Range<usize>, acc: &mut [T]| {
        with_best_simd(
            #[inline(always)]
            || {
                if let Some((width, rs)) = columns
                    && range.start.is_multiple_of(width)
                    && range.end.is_multiple_of(width)
                {
                    let rows = range.start / width..range.end / width;
                    return column_sums(&src.data[src.offset..], rs, rows, acc);
                }
                walk(&plan, [src.offset, 0], range, |_, len, [ps, po]| {
                    let x = &src.data[ps..];
                    match (ss, so) {
                        (1, 0) => acc[po] += crate::reduce::row_sum(&x[..len]),
                        (_, 0) => acc[po] += (0..len).fold(T::ZERO, |a, i| a + x[i * ss]),
                        (1, 1) => acc[po..po + len].iter_mut().zip(&x[..len]).for_each(|(a, &v)| *a += v),
                        _ => (0..len).for_each(|i| acc[po + i * so] += x[i * ss]),
                    }
                })
            },
        )
    };
    let (parts, chunk) = SumPlan::parts(total, reduce.first().is_some_and(|r| !r).then(|| shape[0]));
    if parts == 1 {
        part(0..total, out);
        return;
    }
    let mut partials: Vec<Vec<T>> = vec![vec![T::ZERO; out.len()]; parts];
    let run = |(k, p): (usize, &mut Vec<T>)| part(k * chunk..((k + 1) * chunk).min(total), p);
    if crate::parallel::allowed() {
        partials.par_iter_mut().enumerate().for_each(run);
    } else {
        partials.iter_mut().enumerate().for_each(run);
    }
    let refs: SmallVec<[&[T]; SUM_PARTS]> = partials.iter().map(|p| &p[..]).collect();
    combine_parts(&refs, out);
}

/// `acc[j] += x[i * rs + j]` for each row `i` of `rows` in order, `acc` as wide as a row: the
/// order of a row-by-row walk, so the same bits, with the running sums of 64 columns at a time
/// kept in registers across the rows instead of loaded and stored once per row (a `[500, 128]`
/// bias gradient: 500 runs through the walk, each bound by forwarding the last row's stores).
/// Call it compiled for the CPU's SIMD level (inside [`with_best_simd`]).
#[inline(always)]
pub fn column_sums<T: crate::dtype::Float>(x: &[T], rs: usize, rows: Range<usize>, acc: &mut [T]) {
    const W: usize = 64;
    let width = acc.len();
    let mut c = 0;
    while c + W <= width {
        let mut a: [T; W] = acc[c..c + W].try_into().unwrap();
        for i in rows.clone() {
            let row: &[T; W] = x[i * rs + c..i * rs + c + W].try_into().unwrap();
            a = std::array::from_fn(|l| a[l] + row[l]);
        }
        acc[c..c + W].copy_from_slice(&a);
        c += W;
    }
    if c < width {
        for i in rows {
            let row = &x[i * rs + c..i * rs + width];
            acc[c..].iter_mut().zip(row).for_each(|(a, &v)| *a += v);
        }
    }
}

/// `out` = the partial sums of consecutive parts added as a balanced tree: `p0 + p1`, or
/// `(p0 + p1) + (p2 + p3)`. The pairs let a split step's two halves each add their own two
/// parts, with a third step adding the halves, and give the bits of the whole.
pub fn combine_parts<T: crate::dtype::Float>(parts: &[&[T]], out: &mut [T]) {
    fn tree<T: crate::dtype::Float>(parts: &[&[T]], i: usize) -> T {
        match parts {
            [] => T::ZERO,
            [p] => p[i],
            _ => {
                let (a, b) = parts.split_at(parts.len().div_ceil(2));
                tree(a, i) + tree(b, i)
            }
        }
    }
    out.iter_mut().enumerate().for_each(|(i, o)| *o = tree(parts, i));
}

/// The order of a sum fed by a fused elementwise program, equal to [`sum_dims`]'s on a dense
/// operand, so that a compiled sum gives the bits of the eager one: the positions split into
/// the same fixed parts ([`SumPlan::parts`]), each with its own accumulator, added in order; in
/// a part, each run along a summed innermost dimension is one [`crate::reduce::row_sum`]
/// (fed here in pieces, tile by tile, with the same lanes), other elements add one by one.
pub struct SumPlan {
    plan: Plan<1>,
    /// The result's stride along the innermost (coalesced) dimension.
    inner: usize,
    /// That dimension's length.
    row: usize,
    /// Whether the sum is over the leading dimension of a dense `[rows, row]` into `[row]`:
    /// position `o` adds into result `o % row`.
    columns: bool,
}

/// A [`crate::reduce::row_sum`] in progress, fed in pieces.
#[derive(Clone, Copy)]
pub struct RowSum<T> {
    lanes: [T; 16],
    tail: T,
}

impl<T: crate::dtype::Float> Default for RowSum<T> {
    fn default() -> Self {
        RowSum { lanes: [T::ZERO; 16], tail: T::ZERO }
    }
}

impl<T: crate::dtype::Float> RowSum<T> {
    /// Adds `v`, the elements at positions `at..` of a run of `len`: the first `len / 16 * 16`
    /// into lane `position % 16`, the rest into the tail, each in order.
    #[inline(always)]
    fn feed(&mut self, at: usize, len: usize, v: &[T]) {
        let full = len / 16 * 16;
        let (mut q, mut j) = (at, 0);
        while j < v.len() && q < full && q % 16 != 0 {
            self.lanes[q % 16] += v[j];
            (q, j) = (q + 1, j + 1);
        }
        if q < full {
            let chunks = (full.min(at + v.len()) - q) / 16;
            // The lanes in a local array, added as whole arrays: summed in place through
            // `self`, they compiled to sixteen scalar adds per chunk, not one vector add.
            let mut lanes = self.lanes;
            for c in v[j..j + 16 * chunks].chunks_exact(16) {
                let c: &[T; 16] = c.try_into().unwrap();
                lanes = std::array::from_fn(|i| lanes[i] + c[i]);
            }
            self.lanes = lanes;
            (q, j) = (q + 16 * chunks, j + 16 * chunks);
        }
        while j < v.len() && q < full {
            self.lanes[q % 16] += v[j];
            (q, j) = (q + 1, j + 1);
        }
        for &x in &v[j..] {
            self.tail += x;
        }
    }

    /// The run's sum, as `row_sum` closes it.
    #[inline(always)]
    fn finish(&mut self) -> T {
        let mut acc = self.lanes;
        for w in [8, 4, 2, 1] {
            for i in 0..w {
                acc[i] += acc[i + w];
            }
        }
        let s = acc[0] + self.tail;
        *self = RowSum::default();
        s
    }
}

/// Sums of this many elements or more split into [`SUM_PARTS`] partial sums. Fixed, not tied to
/// the threads' threshold: where a sum splits decides its bits.
const SUM_SPLIT_MIN: usize = 1 << 16;
/// Partial sums of a large sum (a power of two: see [`combine_parts`]).
pub const SUM_PARTS: usize = 4;

impl SumPlan {
    /// The plan for a sum over `shape` (dense, row-major positions) into a result with
    /// `strides` per dimension (0 where summed).
    pub fn new(shape: &[usize], strides: &[usize]) -> Self {
        let plan = coalesce(shape, [strides]);
        let (inner, row) = (*plan.strides[0].last().unwrap(), *plan.shape.last().unwrap());
        let columns = plan.shape.len() == 2 && plan.strides[0][..] == [0, 1];
        SumPlan { plan, inner, row, columns }
    }

    /// The fixed partition of `total` positions: the number of parts and the length of each
    /// (the last may be shorter). A sum that keeps the first dimension (`rows`: its length)
    /// splits between whole rows of it, where no result has terms in two parts, so its bits
    /// are those of any split between rows (the CPU workers' halves); others split into
    /// [`SUM_PARTS`] equal parts.
    pub fn parts(total: usize, rows: Option<usize>) -> (usize, usize) {
        match rows {
            _ if total < SUM_SPLIT_MIN => (1, total.max(1)),
            Some(rows) => {
                let per = rows.div_ceil(SUM_PARTS).max(1);
                (rows.div_ceil(per), per * (total / rows))
            }
            None => (SUM_PARTS, total.div_ceil(SUM_PARTS)),
        }
    }

    /// Adds `vals`, the elements at positions `start..start + vals.len()` inside `part` (fed
    /// in order, part by part), into `acc`; `state` carries a row sum across pieces.
    #[inline]
    pub fn add<T: crate::dtype::Float>(
        &self,
        part: Range<usize>,
        start: usize,
        vals: &[T],
        acc: &mut [T],
        state: &mut RowSum<T>,
    ) {
        let (s, row) = (self.inner, self.row);
        if s == 1 && row < 16 && self.columns {
            // Sums down short columns (a `[500, 2]` bias gradient): one pass over the tile,
            // not a run per row of two; each sum still takes its terms in row order.
            let mut c = start % row;
            for &x in vals {
                acc[c] += x;
                c = if c + 1 == row { 0 } else { c + 1 };
            }
            return;
        }
        // One SIMD dispatch per tile, not per run (see `sum_dims`).
        with_best_simd(
            #[inline(always)]
            || {
                walk(&self.plan, [0], start..start + vals.len(), |o, len, [p]| {
                    let v = &vals[o - start..o - start + len];
                    match s {
                        0 => {
                            // The run `sum_dims` sums at once: this row, clipped to the part.
                            let begin = (o - o % row).max(part.start);
                            let end = (o - o % row + row).min(part.end);
                            if end - begin < 16 {
                                // No whole lanes: the sum is its tail, after the lanes' +0.0
                                // (`finish` without adding sixteen zeros per row).
                                v.iter().for_each(|&x| state.tail += x);
                                if o + len == end {
                                    acc[p] += T::ZERO + std::mem::replace(&mut state.tail, T::ZERO);
                                }
                                return;
                            }
                            state.feed(o - begin, end - begin, v);
                            if o + len == end {
                                acc[p] += state.finish();
                            }
                        }
                        1 => acc[p..p + len].iter_mut().zip(v).for_each(|(a, &x)| *a += x),
                        _ => v.iter().enumerate().for_each(|(i, &x)| acc[p + i * s] += x),
                    }
                })
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_sums_add_row_by_row_in_order() {
        // Terms of very different sizes, so any other order of the adds changes the bits; widths
        // of whole 64-column blocks, with a tail, and a tail only; a padded row stride; and a
        // sum large enough to split into parts.
        for (rows, width, rs) in [(500, 128, 128), (37, 130, 131), (9, 5, 5), (1100, 64, 64)] {
            let x: Vec<f32> = (0..rows * rs)
                .map(|i| [1e8, 1.0, -1e8, 0.5, 3.0e-3][i % 5] * (1.0 + (i % 7) as f32))
                .collect();
            let mut want = vec![0.0f32; width];
            for i in 0..rows {
                for j in 0..width {
                    want[j] += x[i * rs + j];
                }
            }
            let mut got = vec![f32::NAN; width];
            let strides = [rs, 1];
            sum_dims(&[rows, width], Src::new(&x, &strides, 0), &[true, false], &mut got);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            if rs == width {
                // The compiled reduction of a dense operand adds in the same order.
                let mut reduced = vec![f32::NAN; width];
                let dims = crate::reduce::ReduceDims { outer: 1, n: rows, inner: width };
                crate::reduce::sum(&x, dims, &mut reduced);
                assert_eq!(bits(&reduced), bits(&want), "reduce::sum rows={rows} width={width}");
            }
            if rows * width < SUM_SPLIT_MIN {
                assert_eq!(bits(&got), bits(&want), "rows={rows} width={width} rs={rs}");
            } else {
                // Split into parts, added pairwise: close to the row-by-row sums.
                got.iter().zip(&want).for_each(|(g, w)| assert!((g - w).abs() <= 1e-3 * w.abs().max(1e9)));
            }
        }
    }

    #[test]
    fn sum_dims_follows_the_operand_layout() {
        // x[n, c, p] = data at n * 5 + c * 15 + p (a permuted [4, 3, 5] buffer, p contiguous).
        let (n, c, p) = (3, 4, 5);
        let data: Vec<f64> = (0..n * c * p).map(|i| (i * 7 % 13) as f64).collect();
        let at = |i: usize, j: usize, k: usize| data[i * 5 + j * 15 + k];
        let src = Src::new(&data, &[5, 15, 1], 0);
        let mut per_channel = vec![9.0; c];
        sum_dims(&[n, c, p], src, &[true, false, true], &mut per_channel);
        for (j, &s) in per_channel.iter().enumerate() {
            assert_eq!(
                s,
                (0..n).flat_map(|i| (0..p).map(move |k| (i, k))).map(|(i, k)| at(i, j, k)).sum::<f64>()
            );
        }
        let mut per_pos = vec![0.0; n * p];
        sum_dims(&[n, c, p], src, &[false, true, false], &mut per_pos);
        assert_eq!(per_pos[p + 2], (0..c).map(|j| at(1, j, 2)).sum::<f64>());
        // Large enough for partial sums: the same bits serial and parallel.
        let big: Vec<f32> = (0..64 * 16 * 100).map(|i| ((i * 7919) % 1000) as f32 / 7.0).collect();
        let src = Src::new(&big, &[100, 6400, 1], 0);
        let (mut a, mut b) = (vec![0f32; 16], vec![0f32; 16]);
        sum_dims(&[64, 16, 100], src, &[true, false, true], &mut a);
        crate::parallel::serial(|| sum_dims(&[64, 16, 100], src, &[true, false, true], &mut b));
        assert_eq!(a, b);
    }
}
