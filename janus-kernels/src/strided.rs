//! Strided iteration: elementwise maps from broadcast, strided operands into a contiguous output.
//!
//! Every operand is described by strides (in elements, 0 for a broadcast dimension) over the
//! *output* shape. Adjacent dimensions that are contiguous for every operand are merged first, so
//! the common cases (all contiguous, a scalar operand, a row broadcast) become one or two flat
//! loops. The innermost loops are specialised for unit and zero strides and run under
//! [`with_best_simd`] so the compiler vectorises them for the CPU at hand.

use crate::simd_math::with_best_simd;
use rayon::prelude::*;
use smallvec::SmallVec;
use std::ops::Range;

mod sum;
pub use sum::{RowSum, SUM_PARTS, SumPlan, column_sums, combine_parts, sum_dims};

/// Dimension lists are short; keep them on the stack.
pub type Dims = SmallVec<[usize; 6]>;

/// Below this many output elements a map runs on the calling thread. rayon's fork/join costs a
/// few microseconds with its threads awake, but waking them after a pause costs far more: in
/// CartPole's update (`[512, 128]` maps between 500 batch-1 steps that never fork) an eager add
/// took 360 µs and the whole update 0.55 ms eagerly, against 0.27 ms with 2^18 here instead of
/// 2^16 (`cargo run --release --example bench -- --only cartpole`); larger maps still split.
pub const PARALLEL_MIN_ELEMS: usize = 1 << 18;

/// A read-only operand: its buffer, and strides mapping each output dimension into it.
#[derive(Clone, Copy, Debug)]
pub struct Src<'a, T> {
    /// The whole underlying buffer.
    pub data: &'a [T],
    /// One stride per output dimension (0 where the operand is broadcast).
    pub strides: &'a [usize],
    /// Offset of the element at output index 0.
    pub offset: usize,
}

impl<'a, T> Src<'a, T> {
    /// An operand with the given buffer, strides and offset.
    pub fn new(data: &'a [T], strides: &'a [usize], offset: usize) -> Self {
        Src { data, strides, offset }
    }
}

/// Row-major contiguous strides for `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Dims {
    let mut strides: Dims = SmallVec::from_elem(0, shape.len());
    let mut acc = 1;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= d;
    }
    strides
}

/// The output shape and per-operand strides after merging mergeable dimensions.
struct Plan<const N: usize> {
    shape: Dims,
    strides: [Dims; N],
}

fn coalesce<const N: usize>(shape: &[usize], strides: [&[usize]; N]) -> Plan<N> {
    let mut out_shape = Dims::new();
    let mut out_strides: [Dims; N] = std::array::from_fn(|_| Dims::new());
    for (d, &len) in shape.iter().enumerate() {
        if len == 1 {
            continue;
        }
        let mergeable =
            !out_shape.is_empty() && (0..N).all(|o| *out_strides[o].last().unwrap() == strides[o][d] * len);
        if mergeable {
            *out_shape.last_mut().unwrap() *= len;
            for o in 0..N {
                *out_strides[o].last_mut().unwrap() = strides[o][d];
            }
        } else {
            out_shape.push(len);
            for o in 0..N {
                out_strides[o].push(strides[o][d]);
            }
        }
    }
    if out_shape.is_empty() {
        out_shape.push(1);
        for s in &mut out_strides {
            s.push(0);
        }
    }
    Plan { shape: out_shape, strides: out_strides }
}

/// Calls `seg(out_start, len, src_starts)` for each run of output elements in `range` that lies
/// within one innermost row; along a run operand `o` advances by its innermost stride.
/// Always inlined, so that a caller's SIMD trampoline around the walk compiles `seg` with its
/// target features (a call would compile it without them).
#[inline(always)]
fn walk<const N: usize>(
    plan: &Plan<N>,
    offsets: [usize; N],
    range: Range<usize>,
    seg: impl FnMut(usize, usize, [usize; N]),
) {
    if range.is_empty() {
        // (Also where a dimension is 0, which the walks would divide by.)
    } else if plan.shape.len() <= 2 {
        walk_rows(plan, offsets, range, seg)
    } else {
        walk_nd(plan, offsets, range, seg)
    }
}

/// [`walk`] over at most two dimensions (most coalesced operands), with no multi-index to
/// carry and no division per run: a sum over `[500, 2]` walks 500 runs of 2. `range` is not
/// empty.
#[inline(always)]
fn walk_rows<const N: usize>(
    plan: &Plan<N>,
    offsets: [usize; N],
    range: Range<usize>,
    mut seg: impl FnMut(usize, usize, [usize; N]),
) {
    let rank = plan.shape.len();
    let inner = plan.shape[rank - 1];
    let at = |o: usize, row: usize, col: usize| {
        let outer = if rank == 2 { row * plan.strides[o][0] } else { 0 };
        offsets[o] + outer + col * plan.strides[o][rank - 1]
    };
    let (mut pos, mut row, mut col) = (range.start, range.start / inner, range.start % inner);
    while pos < range.end {
        let len = (inner - col).min(range.end - pos);
        seg(pos, len, std::array::from_fn(|o| at(o, row, col)));
        (pos, row, col) = (pos + len, row + 1, 0);
    }
}

/// [`walk`] over any number of dimensions, carrying the multi-index of the current row.
/// `range` is not empty.
#[inline(always)]
fn walk_nd<const N: usize>(
    plan: &Plan<N>,
    offsets: [usize; N],
    range: Range<usize>,
    mut seg: impl FnMut(usize, usize, [usize; N]),
) {
    let rank = plan.shape.len();
    let inner = plan.shape[rank - 1];
    // Multi-index of the row containing range.start over the outer dimensions.
    let mut idx: Dims = SmallVec::from_elem(0, rank - 1);
    let mut row = range.start / inner;
    for d in (0..rank - 1).rev() {
        idx[d] = row % plan.shape[d];
        row /= plan.shape[d];
    }
    let mut pos = range.start;
    let mut col = range.start % inner;
    while pos < range.end {
        let mut starts = offsets;
        for (o, start) in starts.iter_mut().enumerate() {
            for d in 0..rank - 1 {
                *start += idx[d] * plan.strides[o][d];
            }
            *start += col * plan.strides[o][rank - 1];
        }
        let len = (inner - col).min(range.end - pos);
        seg(pos, len, starts);
        pos += len;
        col = 0;
        for d in (0..rank - 1).rev() {
            idx[d] += 1;
            if idx[d] < plan.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Runs `work(range, out_chunk)` over `out`, split across rayon tasks when it is large.
fn drive<O: Send>(out: &mut [O], min_par: usize, work: impl Fn(Range<usize>, &mut [O]) + Sync) {
    let n = out.len();
    if n < min_par || !crate::parallel::allowed() {
        work(0..n, out);
        return;
    }
    let tasks = (n / (min_par / 2).max(1)).clamp(2, 4 * rayon::current_num_threads());
    let chunk = n.div_ceil(tasks);
    out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| {
        let start = i * chunk;
        work(start..start + c.len(), c);
    });
}

/// `out[i] = f(a[i])` over the output shape; `out` is contiguous. `min_par` is the size above
/// which the map is split across threads (pass [`PARALLEL_MIN_ELEMS`], or less for costly `f`).
pub fn map1<A: Copy + Sync, O: Copy + Send>(
    shape: &[usize],
    a: Src<A>,
    out: &mut [O],
    min_par: usize,
    f: impl Fn(A) -> O + Sync,
) {
    let plan = coalesce(shape, [a.strides]);
    let sa = *plan.strides[0].last().unwrap();
    drive(out, min_par, |range, chunk| {
        let base = range.start;
        walk(&plan, [a.offset], range, |o, len, [pa]| {
            let o = &mut chunk[o - base..o - base + len];
            with_best_simd(
                #[inline(always)]
                || match sa {
                    1 => {
                        for (y, &x) in o.iter_mut().zip(&a.data[pa..pa + len]) {
                            *y = f(x);
                        }
                    }
                    0 => o.fill(f(a.data[pa])),
                    _ => {
                        for (i, y) in o.iter_mut().enumerate() {
                            *y = f(a.data[pa + i * sa]);
                        }
                    }
                },
            )
        });
    });
}

/// `out[i] = f(a[i], b[i])` over the output shape, with broadcasting through zero strides.
pub fn map2<A: Copy + Sync, B: Copy + Sync, O: Copy + Send>(
    shape: &[usize],
    a: Src<A>,
    b: Src<B>,
    out: &mut [O],
    min_par: usize,
    f: impl Fn(A, B) -> O + Sync,
) {
    let plan = coalesce(shape, [a.strides, b.strides]);
    let (sa, sb) = (*plan.strides[0].last().unwrap(), *plan.strides[1].last().unwrap());
    drive(out, min_par, |range, chunk| {
        let base = range.start;
        walk(&plan, [a.offset, b.offset], range, |o, len, [pa, pb]| {
            let o = &mut chunk[o - base..o - base + len];
            with_best_simd(
                #[inline(always)]
                || match (sa, sb) {
                    (1, 1) => {
                        let (xa, xb) = (&a.data[pa..pa + len], &b.data[pb..pb + len]);
                        for ((y, &x), &z) in o.iter_mut().zip(xa).zip(xb) {
                            *y = f(x, z);
                        }
                    }
                    (1, 0) => {
                        let z = b.data[pb];
                        for (y, &x) in o.iter_mut().zip(&a.data[pa..pa + len]) {
                            *y = f(x, z);
                        }
                    }
                    (0, 1) => {
                        let x = a.data[pa];
                        for (y, &z) in o.iter_mut().zip(&b.data[pb..pb + len]) {
                            *y = f(x, z);
                        }
                    }
                    _ => {
                        for (i, y) in o.iter_mut().enumerate() {
                            *y = f(a.data[pa + i * sa], b.data[pb + i * sb]);
                        }
                    }
                },
            )
        });
    });
}

/// `out[i] = f(a[i], b[i], c[i])` over the output shape, with broadcasting.
pub fn map3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, O: Copy + Send>(
    shape: &[usize],
    a: Src<A>,
    b: Src<B>,
    c: Src<C>,
    out: &mut [O],
    min_par: usize,
    f: impl Fn(A, B, C) -> O + Sync,
) {
    let plan = coalesce(shape, [a.strides, b.strides, c.strides]);
    let s = plan.strides.each_ref().map(|s| *s.last().unwrap());
    drive(out, min_par, |range, chunk| {
        let base = range.start;
        walk(&plan, [a.offset, b.offset, c.offset], range, |o, len, [pa, pb, pc]| {
            let o = &mut chunk[o - base..o - base + len];
            with_best_simd(
                #[inline(always)]
                || {
                    if s == [1, 1, 1] {
                        let (xa, xb, xc) =
                            (&a.data[pa..pa + len], &b.data[pb..pb + len], &c.data[pc..pc + len]);
                        for (i, y) in o.iter_mut().enumerate() {
                            *y = f(xa[i], xb[i], xc[i]);
                        }
                    } else {
                        for (i, y) in o.iter_mut().enumerate() {
                            *y = f(a.data[pa + i * s[0]], b.data[pb + i * s[1]], c.data[pc + i * s[2]]);
                        }
                    }
                },
            )
        });
    });
}

/// Reads arbitrary ranges of a strided operand in output order (the loads of a fused program).
pub struct StridedReader<'a, T> {
    src: Src<'a, T>,
    plan: Plan<1>,
    inner_stride: usize,
}

impl<'a, T: Copy> StridedReader<'a, T> {
    /// A reader of `src` over the output shape `shape`.
    pub fn new(shape: &[usize], src: Src<'a, T>) -> Self {
        let plan = coalesce(shape, [src.strides]);
        let inner_stride = *plan.strides[0].last().unwrap();
        StridedReader { src, plan, inner_stride }
    }

    /// The elements at output positions `range` as a slice of the operand's buffer, when the
    /// operand is dense over the whole output (one contiguous run): no copy needed.
    #[inline]
    pub fn dense(&self, range: Range<usize>) -> Option<&'a [T]> {
        let o = self.src.offset;
        (self.plan.shape.len() == 1 && self.inner_stride == 1)
            .then(|| &self.src.data[o + range.start..o + range.end])
    }

    /// The operand's one value, when it is broadcast over the whole output.
    pub fn constant(&self) -> Option<T> {
        (self.plan.shape.len() == 1 && self.inner_stride == 0).then(|| self.src.data[self.src.offset])
    }

    /// Fills `out` with the elements at output positions `start..start + out.len()`, converted
    /// by `f`.
    #[inline]
    pub fn read<O: Copy>(&self, start: usize, out: &mut [O], f: impl Fn(T) -> O) {
        let data = self.src.data;
        let s = self.inner_stride;
        walk(&self.plan, [self.src.offset], start..start + out.len(), |o, len, [p]| {
            let o = &mut out[o - start..o - start + len];
            match s {
                1 => {
                    for (y, &x) in o.iter_mut().zip(&data[p..p + len]) {
                        *y = f(x);
                    }
                }
                0 => o.fill(f(data[p])),
                _ => {
                    for (i, y) in o.iter_mut().enumerate() {
                        *y = f(data[p + i * s]);
                    }
                }
            }
        });
    }
}

/// Copies a strided operand into a contiguous buffer.
pub fn copy<T: Copy + Sync + Send>(shape: &[usize], src: Src<T>, out: &mut [T]) {
    // Small copies (most eager ones) skip the checks.
    if out.len() >= TRANSPOSE_MIN && shape.len() >= 2 {
        let plan = coalesce(shape, [src.strides]);
        match (&plan.shape[..], &plan.strides[0][..]) {
            ([rows, cols], [1, stride]) if *stride != 1 && *cols > 1 => {
                return transpose(*rows, *cols, src.data, src.offset, *stride, out);
            }
            // A batch of transposes (attention's `k^T` made dense for its product).
            ([batch, rows, cols], [sb, 1, stride]) if *stride != 1 && *cols > 1 && rows * cols >= 256 => {
                let (rows, cols, stride) = (*rows, *cols, *stride);
                for (b, o) in out.chunks_mut(rows * cols).enumerate().take(*batch) {
                    transpose(rows, cols, src.data, src.offset + b * sb, stride, o);
                }
                return;
            }
            // Runs of contiguous elements (attention's heads split from or merged into rows):
            // one memcpy per run, without `map1`'s per-run trip through the SIMD dispatch,
            // which cost more than a 32-element run's copy.
            (_, strides)
                if strides.last() == Some(&1)
                    && (out.len() < PARALLEL_MIN_ELEMS || !crate::parallel::allowed()) =>
            {
                let data = src.data;
                walk(&plan, [src.offset], 0..out.len(), |o, len, [p]| {
                    out[o..o + len].copy_from_slice(&data[p..p + len]);
                });
                return;
            }
            _ => {}
        }
    }
    map1(shape, src, out, PARALLEL_MIN_ELEMS, |x| x);
}

/// Copies of at least this many elements check for a transpose.
const TRANSPOSE_MIN: usize = 1024;

/// Rows of a transpose band: bands of 32 output rows are the parallel tasks.
const BLOCK: usize = 32;

/// Side of a transpose tile, read and written through a local buffer.
const TILE: usize = 16;

/// `out[i, j] = data[offset + i + j * stride]` over `[rows, cols]` (a transpose: the output's
/// rows are the source's columns), in 16 x 16 tiles through a local buffer, so that every
/// read and write is a run of 16 (a cache line of `f32`): `map1`, one run per output row, took
/// 450 µs to copy a `[50176, 9]` transpose (im2col rows for a weight gradient) by walking
/// 50,176 runs of 9; writing single elements down 32-row blocks took 134 µs for `[128, 512]`
/// (rows 2 KiB apart share two L1 sets and evicted each other), the tiles 23 µs.
fn transpose<T: Copy + Send + Sync>(
    rows: usize,
    cols: usize,
    data: &[T],
    offset: usize,
    stride: usize,
    out: &mut [T],
) {
    let band = |r0: usize, band: &mut [T]| {
        let r1 = (r0 + BLOCK).min(rows);
        for t0 in (r0..r1).step_by(TILE) {
            let h = (r1 - t0).min(TILE);
            for c0 in (0..cols).step_by(TILE) {
                let w = (cols - c0).min(TILE);
                let mut tile = [[data[offset]; TILE]; TILE];
                for (c, row) in tile.iter_mut().enumerate().take(w) {
                    let at = offset + (c0 + c) * stride + t0;
                    row[..h].copy_from_slice(&data[at..at + h]);
                }
                for i in 0..h {
                    let o = &mut band[(t0 - r0 + i) * cols + c0..][..w];
                    for (c, x) in o.iter_mut().enumerate() {
                        *x = tile[c][i];
                    }
                }
            }
        }
    };
    if rows * cols < PARALLEL_MIN_ELEMS || !crate::parallel::allowed() {
        out.chunks_mut(BLOCK * cols).enumerate().for_each(|(k, b)| band(k * BLOCK, b));
    } else {
        out.par_chunks_mut(BLOCK * cols).enumerate().for_each(|(k, b)| band(k * BLOCK, b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Transposes whose sides are not multiples of the tile, at an offset, with a stride past
    /// the rows: every element lands where the view says (the 16 x 16 tiles' edges).
    #[test]
    fn transposes_ragged_tiles() {
        for (rows, cols, stride) in [(37, 45, 50), (128, 512, 128), (16, 1000, 17), (1000, 3, 1003)] {
            let data: Vec<u32> = (0..3 + cols * stride).map(|i| i as u32).collect();
            let mut out = vec![0u32; rows * cols];
            copy(&[rows, cols], Src::new(&data, &[1, stride], 3), &mut out);
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(out[i * cols + j], data[3 + i + j * stride], "[{rows}, {cols}] at ({i}, {j})");
                }
            }
        }
    }

    /// Batched transposes and runs of contiguous elements (a `[B, T, H, D]` view read as
    /// `[B, H, T, D]`), at an offset: every element lands where the view says.
    #[test]
    fn copies_batched_transposes_and_permuted_runs() {
        let (b, h, t, d) = (3, 4, 17, 32);
        let data: Vec<u32> = (0..b * t * h * d + 5).map(|i| i as u32).collect();
        // [b, h, t, d] over a [b, t, h, d] buffer.
        let strides = [t * h * d, d, h * d, 1];
        let mut out = vec![0u32; b * h * t * d];
        copy(&[b, h, t, d], Src::new(&data, &strides, 5), &mut out);
        let mut k = 0;
        for i in 0..b {
            for j in 0..h {
                for l in 0..t {
                    for m in 0..d {
                        assert_eq!(out[k], data[5 + i * strides[0] + j * strides[1] + l * strides[2] + m]);
                        k += 1;
                    }
                }
            }
        }
        // [b, d, t]: each batch entry's last two dimensions transposed.
        let strides = [t * d + 3, 1, d];
        let data: Vec<u32> = (0..b * (t * d + 3) + 5).map(|i| i as u32).collect();
        let mut out = vec![0u32; b * d * t];
        copy(&[b, d, t], Src::new(&data, &strides, 5), &mut out);
        for (k, &x) in out.iter().enumerate() {
            let (i, j, l) = (k / (d * t), k / t % d, k % t);
            assert_eq!(x, data[5 + i * strides[0] + j + l * strides[2]], "batched transpose at {k}");
        }
    }

    #[test]
    fn copies_transposes_in_blocks() {
        for (rows, cols) in [(1, 1030), (40, 30), (129, 9), (70, 65), (1000, 300)] {
            // A column-major [rows, cols] view into a padded buffer, at an offset.
            let stride = rows + 3;
            let data: Vec<u32> = (0..stride * cols + 7).map(|i| i as u32).collect();
            let mut out = vec![0u32; rows * cols];
            copy(&[rows, cols], Src::new(&data, &[1, stride], 7), &mut out);
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(out[i * cols + j], data[7 + i + j * stride], "[{rows}, {cols}] at ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn row_walks_visit_the_runs_of_the_general_walk() {
        // Every plan of one or two dimensions (after coalescing), with two operands of their
        // own strides and offsets, over ranges that start and end inside rows.
        type Seg<'a> = &'a mut dyn FnMut(usize, usize, [usize; 2]);
        let runs = |f: &dyn Fn(Seg)| {
            let mut v = Vec::new();
            f(&mut |p, l, s| v.push((p, l, s)));
            v
        };
        for (shape, a, b) in [
            (vec![7], vec![3], vec![1]),
            (vec![5, 3], vec![3, 1], vec![0, 1]),
            (vec![4, 6], vec![1, 4], vec![6, 0]),
            (vec![3, 1, 5], vec![5, 5, 1], vec![10, 0, 2]),
        ] {
            let plan = coalesce(&shape, [&a, &b]);
            assert!(plan.shape.len() <= 2, "{shape:?} coalesced to {:?}", plan.shape);
            let total: usize = shape.iter().product();
            for start in 0..total {
                for end in start + 1..=total {
                    let fast = runs(&|seg| walk_rows(&plan, [2, 9], start..end, seg));
                    let general = runs(&|seg| walk_nd(&plan, [2, 9], start..end, seg));
                    assert_eq!(fast, general, "{shape:?} {start}..{end}");
                }
            }
        }
    }

    #[test]
    fn coalesces_contiguous_and_drops_unit_dims() {
        let p = coalesce(&[2, 1, 3, 4], [&[12, 12, 4, 1], &[0, 0, 0, 1]]);
        assert_eq!(&p.shape[..], &[6, 4]);
        assert_eq!(&p.strides[0][..], &[4, 1]);
        assert_eq!(&p.strides[1][..], &[0, 1]);
    }

    #[test]
    fn map2_broadcasts_rows_and_columns() {
        let a = [1.0f32, 2.0, 3.0];
        let b = [10.0f32, 20.0];
        let mut out = [0.0f32; 6];
        // a is a row [1,3] broadcast over 2 rows; b is a column [2,1] broadcast over 3 columns.
        map2(&[2, 3], Src::new(&a, &[0, 1], 0), Src::new(&b, &[1, 0], 0), &mut out, 4, |x, y| x + y);
        assert_eq!(out, [11.0, 12.0, 13.0, 21.0, 22.0, 23.0]);
    }

    #[test]
    fn a_parallel_threshold_of_one_still_splits() {
        let data: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let mut out = vec![0.0f32; 64];
        map1(&[64], Src::new(&data, &[1], 0), &mut out, 1, |x| x * 2.0);
        assert!(out.iter().zip(&data).all(|(o, d)| *o == 2.0 * d));
    }

    #[test]
    fn map1_transposed_source_in_parallel_chunks() {
        let n = 300;
        let data: Vec<f64> = (0..n * n).map(|i| i as f64).collect();
        let mut out = vec![0.0; n * n];
        // Transpose: output (i, j) reads data[j * n + i]; small min_par forces many chunks.
        map1(&[n, n], Src::new(&data, &[1, n], 0), &mut out, 1000, |x| x);
        for i in 0..n {
            for j in 0..n {
                assert_eq!(out[i * n + j], data[j * n + i]);
            }
        }
    }

    #[test]
    fn map3_handles_offsets_and_scalars() {
        let c = [true, false, true, false];
        let a = [0.0f32, 5.0, 6.0, 7.0, 8.0];
        let b = [-1.0f32];
        let mut out = [0.0f32; 4];
        map3(
            &[4],
            Src::new(&c, &[1], 0),
            Src::new(&a, &[1], 1),
            Src::new(&b, &[0], 0),
            &mut out,
            PARALLEL_MIN_ELEMS,
            |c, a, b| if c { a } else { b },
        );
        assert_eq!(out, [5.0, -1.0, 7.0, -1.0]);
    }

    #[test]
    fn zero_sized_outputs_do_nothing() {
        let a: [f32; 0] = [];
        let mut out: [f32; 0] = [];
        map1(&[3, 0], Src::new(&a, &[0, 1], 0), &mut out, 4, |x| x);
    }
}
