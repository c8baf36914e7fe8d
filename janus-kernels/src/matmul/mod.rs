//! Matrix multiplication through the `gemm` crate, with operand transposes expressed as strides
//! (never copied), an M=1 GEMV path, and threads only for products large enough to pay for them.

use crate::dtype::Float;
use crate::simd_math::with_best_simd;
use gemm::Parallelism;
use rayon::prelude::*;
use small::{gemv, narrow};

pub mod packed;
mod small;
#[cfg(test)]
mod tests;

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

/// At most this many columns past a multiple of 64 bytes' worth are dot products ([`tail`]);
/// more are a gemm over the last 64 bytes' worth. Measured on `[16, 128] @ [128, n]`: for n =
/// 65, 2.8 µs against 3.6 by gemm (4.2 before either); for n = 68, 3.5 against 3.2.
const NARROW_TAIL: usize = 2;

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
    product(dims, (lhs, lhs_layout), (rhs, rhs_layout), dst, accumulate, None, false);
}

/// `dst[b] = lhs[b] @ rhs[b] + row`, with `row` (length `n`) added to every output row: a
/// linear layer's bias. The same bits as [`matmul`] followed by a broadcast add of `row`, in
/// one pass over `dst` after the product instead of a fill before it and a pass after.
///
/// Panics if an operand's layout reaches outside its buffer or `row` is not `n` long.
pub fn matmul_bias<T: Float>(
    dims: MatmulDims,
    lhs: &[T],
    lhs_layout: MatLayout,
    rhs: &[T],
    rhs_layout: MatLayout,
    row: &[T],
    dst: &mut [T],
) {
    assert_eq!(row.len(), dims.n, "matmul_bias: the bias row has the wrong length");
    product(dims, (lhs, lhs_layout), (rhs, rhs_layout), dst, false, Some(row), false);
}

/// `dst[b] = relu(lhs[b] @ rhs[b] + addend)`: [`matmul`] (accumulating into `dst` when
/// `accumulate`) or [`matmul_bias`] (with `row`), then `relu` as the elementwise op computes it
/// ([`crate::fused::unary`]), in the product's own closing pass: a linear layer with its
/// activation, writing the activation only. The same bits as the product followed by `relu`.
///
/// Panics if an operand's layout reaches outside its buffer or `row` is not `n` long.
#[allow(clippy::too_many_arguments)]
pub fn matmul_relu<T: Float>(
    dims: MatmulDims,
    lhs: &[T],
    lhs_layout: MatLayout,
    rhs: &[T],
    rhs_layout: MatLayout,
    row: Option<&[T]>,
    dst: &mut [T],
    accumulate: bool,
) {
    assert!(row.is_none_or(|r| r.len() == dims.n), "matmul_relu: the bias row has the wrong length");
    assert!(!(accumulate && row.is_some()), "matmul_relu: a bias row or an accumulation, not both");
    product(dims, (lhs, lhs_layout), (rhs, rhs_layout), dst, accumulate, row, true);
}

/// `relu` of one element, as the op table defines it.
#[inline(always)]
fn relu<T: Float>(x: T) -> T {
    crate::fused::unary(crate::fused::FUnary::Op(crate::elementwise::UnaryOp::Relu), x)
}

/// Each element of a product is `(+0.0) + Σ products` (`c + ((+0.0) + Σ)` when accumulating),
/// whichever microkernel gemm picked for these strides: some start from a zero accumulator and
/// some from the first product, which differ on a sum of `-0.0`s, and an accumulating product
/// must equal the product added to `c` afterwards (the GEMM epilogue). Without this pass,
/// eager and compiled runs of one product could disagree on the sign of a zero. A bias row is
/// added in the same pass, after the `+0.0`, as a separate add would, and `relu` (when
/// asked) last.
#[inline(always)]
fn epilogue<T: Float>(d: &mut [T], n: usize, bias: Option<&[T]>, act: bool) {
    with_best_simd(
        #[inline(always)]
        || match (bias, act) {
            (None, false) => d.iter_mut().for_each(|x| *x += T::ZERO),
            (None, true) => d.iter_mut().for_each(|x| *x = relu(*x + T::ZERO)),
            (Some(row), false) => d.chunks_exact_mut(n).for_each(|r| {
                r.iter_mut().zip(row).for_each(|(x, &b)| *x = (*x + T::ZERO) + b);
            }),
            (Some(row), true) => d.chunks_exact_mut(n).for_each(|r| {
                r.iter_mut().zip(row).for_each(|(x, &b)| *x = relu((*x + T::ZERO) + b));
            }),
        },
    );
}

type Operand<'a, T> = (&'a [T], MatLayout);

fn product<T: Float>(
    dims: MatmulDims,
    (lhs, lhs_layout): Operand<T>,
    (rhs, rhs_layout): Operand<T>,
    dst: &mut [T],
    accumulate: bool,
    bias: Option<&[T]>,
    act: bool,
) {
    assert_eq!(dst.len(), dims.batch * dims.m * dims.n, "matmul: destination has the wrong length");
    let MatmulDims { batch, m, n, k } = stack_batches(dims, lhs_layout, rhs_layout);
    if batch == 0 || m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst.fill(T::ZERO);
        }
        epilogue(dst, n, bias, act);
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
            epilogue(d, n, bias, act);
            return;
        }
        if let Some(finished) =
            narrow((m, n, k), (l, lhs_layout), (r, rhs_layout), d, accumulate, (bias, act))
        {
            // Its sums start from +0.0 already: only a bias row or a relu it did not apply
            // needs the pass.
            if !finished && (bias.is_some() || act) {
                epilogue(d, n, bias, act);
            }
            return;
        }
        // gemm runs a row-major product transposed, the result's columns as its rows, and
        // copies its whole left factor (our right one) on every call when their count is not
        // a multiple of its SIMD width (gemm-common's `do_prepack_lhs`): the LSTM's `[16, 128]
        // @ [128, 65]` took 4.2 µs against 2.4 for 64 columns. So the columns up to a multiple
        // of 64 bytes' worth run as one call and the rest apart (`tail`). The split depends on
        // `n` and `k` only, never on `m`: a product split by rows keeps its bits.
        let wide = 64 / std::mem::size_of::<T>();
        let main = if n > wide { n - n % wide } else { n };
        // SAFETY: the asserts above bound every element gemm reads for these m, k and columns
        // 0..main <= n of the right factor; `d` is m*n contiguous elements (rs=n, cs=1).
        unsafe {
            gemm_cols(par, (m, main, k), (d.as_mut_ptr(), n), accumulate, (l, lhs_layout), (r, rhs_layout))
        };
        if main < n {
            tail((m, n, k), main, wide, (l, lhs_layout), (r, rhs_layout), d, accumulate, par);
        }
        epilogue(d, n, bias, act);
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

/// `dst[i, j] (+)= Σ_p lhs[i, p] * rhs[p, j]` for `i < m`, `j < n` by gemm, `dst` holding rows
/// of `dst_rs` elements (columns contiguous).
///
/// # Safety
/// `lhs` and `rhs` must hold every element their layouts reach for these `m`, `n`, `k`, and
/// `dst` must be valid for writes at `i * dst_rs + j` for all `i < m`, `j < n`.
unsafe fn gemm_cols<T: Float>(
    par: Parallelism,
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs): (*mut T, usize),
    accumulate: bool,
    (lhs, ll): Operand<T>,
    (rhs, rl): Operand<T>,
) {
    // SAFETY: the caller's contract is gemm's for these pointers, strides and sizes.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            accumulate,
            lhs.as_ptr(),
            ll.col_stride as isize,
            ll.row_stride as isize,
            rhs.as_ptr(),
            rl.col_stride as isize,
            rl.row_stride as isize,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// Columns `main..n` of a product (fewer than `wide`, the rest of [`product`]'s split) into
/// `d`: by dot products ([`narrow`]) when at most [`NARROW_TAIL`], else by gemm over the last
/// `wide` columns (a whole register row: it copies nothing), keeping those past `main`. Both
/// write a scratch result first; each element is `Σ + 0.0`, added to `d` when accumulating, as
/// gemm's own `c + Σ` and the closing pass make it.
#[allow(clippy::too_many_arguments)]
fn tail<T: Float>(
    (m, n, k): (usize, usize, usize),
    main: usize,
    wide: usize,
    (l, ll): Operand<T>,
    (r, rl): Operand<T>,
    d: &mut [T],
    accumulate: bool,
    par: Parallelism,
) {
    // On the stack for the usual few rows (the LSTM's halves: 16 x 1 or 16 x 16).
    let mut t: smallvec::SmallVec<[T; 512]> = smallvec::smallvec![T::ZERO; m * (n - main)];
    let cols = |c0: usize| &r[c0 * rl.col_stride..];
    // `narrow` declines shapes and layouts it has no dot-product kernel for.
    let dots = n - main <= NARROW_TAIL
        && narrow((m, n - main, k), (l, ll), (cols(main), rl), &mut t, false, (None, false)).is_some();
    let (w, c0) = if dots { (n - main, main) } else { (wide, n - wide) };
    if !dots {
        t.resize(m * w, T::ZERO);
        if narrow((m, w, k), (l, ll), (cols(c0), rl), &mut t, false, (None, false)).is_none() {
            // SAFETY: `product` checked the operands' bounds for all n columns, of which these
            // are c0..n; `t` is m*w contiguous elements (rs=w).
            unsafe { gemm_cols(par, (m, w, k), (t.as_mut_ptr(), w), false, (l, ll), (cols(c0), rl)) };
        }
    }
    for (row, tr) in d.chunks_exact_mut(n).zip(t.chunks_exact(w)) {
        for (o, &x) in row[main..].iter_mut().zip(&tr[main - c0..]) {
            *o = if accumulate { *o + x } else { x };
        }
    }
}

/// A batch of left operands against one shared right operand (`[B, m, k] @ [k, n]`, a
/// linear layer over a batch of sequences) is one tall product `[B*m, k] @ [k, n]` when the
/// left operand's rows follow each other at one stride across the batch: gemm then packs the
/// right operand once instead of once per batch entry, and blocks over all the rows. The
/// destination is contiguous either way, and the left layout reads the stacked rows as is.
fn stack_batches(dims: MatmulDims, lhs: MatLayout, rhs: MatLayout) -> MatmulDims {
    let MatmulDims { batch, m, n, k } = dims;
    if batch > 1 && rhs.batch_stride == 0 && lhs.batch_stride == m * lhs.row_stride {
        MatmulDims { batch: 1, m: batch * m, n, k }
    } else {
        dims
    }
}
