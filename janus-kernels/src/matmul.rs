//! Matrix multiplication through the `gemm` crate, with operand transposes expressed as strides
//! (never copied), an M=1 GEMV path, and threads only for products large enough to pay for them.

use crate::dtype::Float;
use crate::simd_math::with_best_simd;
use gemm::Parallelism;
use rayon::prelude::*;

/// Sizes of a (batched) product `[batch, m, k] @ [batch, k, n] -> [batch, m, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulDims {
    /// Number of independent products.
    pub batch: usize,
    /// Rows of the left operand and of the result.
    pub m: usize,
    /// Columns of the right operand and of the result.
    pub n: usize,
    /// The contracted dimension.
    pub k: usize,
}

/// Where a matrix operand lives in its buffer. A transposed operand simply swaps its strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatLayout {
    /// Index of element `[0, 0, 0]`.
    pub offset: usize,
    /// Distance between consecutive batch matrices (0 broadcasts one matrix over the batch).
    pub batch_stride: usize,
    /// Distance between consecutive rows.
    pub row_stride: usize,
    /// Distance between consecutive columns.
    pub col_stride: usize,
}

impl MatLayout {
    /// A row-major `[rows, cols]` matrix per batch entry, packed back to back.
    pub fn row_major(rows: usize, cols: usize) -> Self {
        MatLayout { offset: 0, batch_stride: rows * cols, row_stride: cols, col_stride: 1 }
    }

    /// The same matrix read as its transpose.
    pub fn transposed(self) -> Self {
        MatLayout { row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }

    fn last_index(&self, batch: usize, rows: usize, cols: usize) -> usize {
        self.offset
            + (batch - 1) * self.batch_stride
            + (rows - 1) * self.row_stride
            + (cols - 1) * self.col_stride
    }
}

/// Products with fewer multiply-adds than this run on one thread: measured on the LSTM's
/// per-step shapes (32x128x512), two threads were slower than one.
pub const PARALLEL_MIN_FLOPS: usize = 1 << 23;

/// `dst[b] (+)= lhs[b] @ rhs[b]`; `dst` is contiguous `[batch, m, n]`. With `accumulate` the
/// product is added to `dst`, otherwise `dst` is overwritten.
///
/// Panics if an operand's layout reaches outside its buffer.
pub fn matmul<T: Float>(
    dims: MatmulDims,
    lhs: &[T],
    lhs_layout: MatLayout,
    rhs: &[T],
    rhs_layout: MatLayout,
    dst: &mut [T],
    accumulate: bool,
) {
    let MatmulDims { batch, m, n, k } = dims;
    assert_eq!(dst.len(), batch * m * n, "matmul: destination has the wrong length");
    if batch == 0 || m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst.fill(T::ZERO);
        }
        dst.iter_mut().for_each(|x| *x += T::ZERO); // `c + 0`, as below
        return;
    }
    // The raw-pointer GEMM below trusts these bounds.
    assert!(lhs_layout.last_index(batch, m, k) < lhs.len(), "matmul: lhs layout out of bounds");
    assert!(rhs_layout.last_index(batch, k, n) < rhs.len(), "matmul: rhs layout out of bounds");
    let flops = m * n * k;
    let one = |b: usize, d: &mut [T], par: Parallelism| {
        let l = &lhs[lhs_layout.offset + b * lhs_layout.batch_stride..];
        let r = &rhs[rhs_layout.offset + b * rhs_layout.batch_stride..];
        if m == 1 && gemv(n, k, l, lhs_layout.col_stride, r, rhs_layout, d, accumulate) {
            d.iter_mut().for_each(|x| *x += T::ZERO); // see below
            return;
        }
        // SAFETY: the asserts above bound every element gemm reads through (ptr, strides) for
        // these m, n, k; `d` is exactly m*n contiguous elements, written with rs=n, cs=1.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                d.as_mut_ptr(),
                1,
                n as isize,
                accumulate,
                l.as_ptr(),
                lhs_layout.col_stride as isize,
                lhs_layout.row_stride as isize,
                r.as_ptr(),
                rhs_layout.col_stride as isize,
                rhs_layout.row_stride as isize,
                T::ONE,
                T::ONE,
                false,
                false,
                false,
                par,
            )
        }
        // Each element is `(+0.0) + Σ products` (`c + ((+0.0) + Σ)` when accumulating),
        // whichever microkernel gemm picked for these strides: some start from a zero
        // accumulator and some from the first product, which differ on a sum of `-0.0`s, and an
        // accumulating product must equal the product added to `c` afterwards (the GEMM
        // epilogue). Without this, eager and compiled runs of one product could disagree on the
        // sign of a zero.
        d.iter_mut().for_each(|x| *x += T::ZERO);
    };
    let threads = if crate::parallel::allowed() { rayon::current_num_threads() } else { 1 };
    if batch > 1 && flops * batch >= PARALLEL_MIN_FLOPS && threads > 1 {
        dst.par_chunks_mut(m * n).enumerate().for_each(|(b, d)| one(b, d, Parallelism::None));
    } else {
        let par = if flops >= PARALLEL_MIN_FLOPS && threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        for (b, d) in dst.chunks_mut(m * n).enumerate() {
            one(b, d, par);
        }
    }
}

/// `d[0, :] (+)= a[0, :] @ r` for a single left row. Returns false for layouts it does not
/// cover (neither operand dimension of `r` contiguous), leaving the work to gemm.
#[allow(clippy::too_many_arguments)]
fn gemv<T: Float>(
    n: usize,
    k: usize,
    a: &[T],
    a_stride: usize,
    r: &[T],
    rl: MatLayout,
    d: &mut [T],
    accumulate: bool,
) -> bool {
    if rl.col_stride == 1 && (n >= 16 || k < 16) {
        // Rows of r are contiguous and long enough to vectorise: accumulate a[p] * r[p, :].
        with_best_simd(
            #[inline(always)]
            || {
                if !accumulate {
                    d.fill(T::ZERO);
                }
                for p in 0..k {
                    let ap = a[p * a_stride];
                    let row = &r[p * rl.row_stride..p * rl.row_stride + n];
                    for (o, &x) in d.iter_mut().zip(row) {
                        *o += ap * x;
                    }
                }
            },
        );
        true
    } else if rl.row_stride == 1 || n < 16 {
        // Columns of r are contiguous, or there are few of them: one dot product per output,
        // with eight independent accumulators (a long chain of dependent adds is latency-bound).
        let rs = rl.row_stride;
        with_best_simd(
            #[inline(always)]
            || {
                for (j, o) in d.iter_mut().enumerate() {
                    let col = &r[j * rl.col_stride..j * rl.col_stride + (k - 1) * rs + 1];
                    let mut acc = [T::ZERO; 8];
                    let mut p = 0;
                    while p + 8 <= k {
                        for l in 0..8 {
                            acc[l] += a[(p + l) * a_stride] * col[(p + l) * rs];
                        }
                        p += 8;
                    }
                    let mut s = T::ZERO;
                    while p < k {
                        s += a[p * a_stride] * col[p * rs];
                        p += 1;
                    }
                    for v in acc {
                        s += v;
                    }
                    *o = if accumulate { *o + s } else { s };
                }
            },
        );
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f64], al: MatLayout, b: &[f64], bl: MatLayout) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    out[i * n + j] += a[al.offset + i * al.row_stride + p * al.col_stride]
                        * b[bl.offset + p * bl.row_stride + j * bl.col_stride];
                }
            }
        }
        out
    }

    #[test]
    fn all_transpose_combinations_and_gemv() {
        for &(m, n, k) in
            &[(3, 4, 5), (1, 7, 9), (1, 3, 17), (1, 2, 128), (1, 40, 3), (6, 1, 4), (33, 65, 20)]
        {
            let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
            let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
            for ta in [false, true] {
                for tb in [false, true] {
                    let al =
                        if ta { MatLayout::row_major(k, m).transposed() } else { MatLayout::row_major(m, k) };
                    let bl =
                        if tb { MatLayout::row_major(n, k).transposed() } else { MatLayout::row_major(k, n) };
                    let want = naive(m, n, k, &a, al, &b, bl);
                    let mut got = vec![1.0; m * n];
                    matmul(MatmulDims { batch: 1, m, n, k }, &a, al, &b, bl, &mut got, false);
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - w).abs() < 1e-12, "m={m} n={n} k={k} ta={ta} tb={tb}");
                    }
                    matmul(MatmulDims { batch: 1, m, n, k }, &a, al, &b, bl, &mut got, true);
                    for (g, w) in got.iter().zip(&want) {
                        assert!((g - 2.0 * w).abs() < 1e-12);
                    }
                }
            }
        }
    }

    #[test]
    fn batched_with_broadcast_rhs() {
        let (m, n, k) = (2, 3, 4);
        let a: Vec<f32> = (0..2 * m * k).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32).collect();
        let bl = MatLayout { batch_stride: 0, ..MatLayout::row_major(k, n) };
        let mut got = vec![0.0f32; 2 * m * n];
        matmul(MatmulDims { batch: 2, m, n, k }, &a, MatLayout::row_major(m, k), &b, bl, &mut got, false);
        for bi in 0..2 {
            for i in 0..m {
                for j in 0..n {
                    let w: f32 = (0..k).map(|p| a[bi * m * k + i * k + p] * b[p * n + j]).sum();
                    assert_eq!(got[bi * m * n + i * n + j], w);
                }
            }
        }
    }
}
