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
    product(dims, (lhs, lhs_layout), (rhs, rhs_layout), dst, accumulate, None);
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
    product(dims, (lhs, lhs_layout), (rhs, rhs_layout), dst, false, Some(row));
}

/// Each element of a product is `(+0.0) + Σ products` (`c + ((+0.0) + Σ)` when accumulating),
/// whichever microkernel gemm picked for these strides: some start from a zero accumulator and
/// some from the first product, which differ on a sum of `-0.0`s, and an accumulating product
/// must equal the product added to `c` afterwards (the GEMM epilogue). Without this pass,
/// eager and compiled runs of one product could disagree on the sign of a zero. A bias row is
/// added in the same pass, after the `+0.0`, as a separate add would.
#[inline(always)]
fn epilogue<T: Float>(d: &mut [T], n: usize, bias: Option<&[T]>) {
    with_best_simd(
        #[inline(always)]
        || match bias {
            None => d.iter_mut().for_each(|x| *x += T::ZERO),
            Some(row) => d.chunks_exact_mut(n).for_each(|r| {
                r.iter_mut().zip(row).for_each(|(x, &b)| *x = (*x + T::ZERO) + b);
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
        epilogue(dst, n, bias);
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
            epilogue(d, n, bias);
            return;
        }
        if let Some(bias_added) = narrow((m, n, k), (l, lhs_layout), (r, rhs_layout), d, accumulate, bias) {
            // Its sums start from +0.0 already: only a bias row it did not add needs the pass.
            if !bias_added && bias.is_some() {
                epilogue(d, n, bias);
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
        epilogue(d, n, bias);
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
    let dots = n - main <= NARROW_TAIL && k >= 16 && (ll.col_stride == 1 || ll.row_stride == 1);
    let (w, c0) = if dots { (n - main, main) } else { (wide, n - wide) };
    let mut t = vec![T::ZERO; m * w];
    let rc = &r[c0 * rl.col_stride..];
    if narrow((m, w, k), (l, ll), (rc, rl), &mut t, false, None).is_none() {
        // SAFETY: `product` checked the operands' bounds for all n columns, of which these are
        // c0..n; `t` is m*w contiguous elements (rs=w).
        unsafe { gemm_cols(par, (m, w, k), (t.as_mut_ptr(), w), false, (l, ll), (rc, rl)) };
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

/// Products with a short contracted dimension (`k <= 8`) or at most four output columns
/// (`k >= 16`): a policy network's `[500, 128] @ [128, 2]`, its input layer `[500, 4] @ [4,
/// 128]`, their gradients. gemm packs and blocks them for 10-35 µs each, where the
/// multiply-adds take a few. Returns `None` for other shapes and layouts, leaving them to gemm,
/// else whether it added `bias` (the `k <= 8` kernel adds it as it stores each row).
/// The kernel depends on the layouts and on `n` and `k`, never on `m`, so a product split by
/// rows (two workers) runs the same kernel on each half as on the whole. Loops are written out
/// (no iterator adapters) so that all of it compiles inside the SIMD-enabled closure. Every
/// finished sum gets `+ 0.0` (an FMA chain from +0.0 still ends at -0.0 when every product
/// underflows below zero) and an accumulating product adds it to `d`: what [`epilogue`] makes
/// of gemm's results.
fn narrow<T: Float>(
    (m, n, k): (usize, usize, usize),
    (a, al): (&[T], MatLayout),
    (r, rl): (&[T], MatLayout),
    d: &mut [T],
    accumulate: bool,
    bias: Option<&[T]>,
) -> Option<bool> {
    if k <= 8 && n >= 16 {
        // Each output row is a sum of k rows of r, scaled, in 16-wide register blocks; r is
        // packed row-major first (at most 8 rows).
        let mut rp = vec![T::ZERO; k * n];
        for p in 0..k {
            for j in 0..n {
                rp[p * n + j] = r[p * rl.row_stride + j * rl.col_stride];
            }
        }
        let rows = (a, al, &rp[..], d, bias.unwrap_or(&[]));
        macro_rules! by_k {
            ($s:expr) => {
                with_best_simd(
                    #[inline(always)]
                    || match k {
                        1 => scaled_rows::<T, 1, $s>(m, n, rows),
                        2 => scaled_rows::<T, 2, $s>(m, n, rows),
                        3 => scaled_rows::<T, 3, $s>(m, n, rows),
                        4 => scaled_rows::<T, 4, $s>(m, n, rows),
                        5 => scaled_rows::<T, 5, $s>(m, n, rows),
                        6 => scaled_rows::<T, 6, $s>(m, n, rows),
                        7 => scaled_rows::<T, 7, $s>(m, n, rows),
                        _ => scaled_rows::<T, 8, $s>(m, n, rows),
                    },
                )
            };
        }
        match (accumulate, bias) {
            (true, _) => by_k!(ADD),
            (false, Some(_)) => by_k!(BIAS),
            (false, None) => by_k!(SET),
        }
        return Some(!accumulate);
    }
    if n > 4 || k < 16 || (al.col_stride != 1 && al.row_stride != 1) {
        return None;
    }
    // The n columns of r as contiguous rows.
    let mut rt = vec![T::ZERO; n * k];
    for j in 0..n {
        for p in 0..k {
            rt[j * k + p] = r[p * rl.row_stride + j * rl.col_stride];
        }
    }
    if al.col_stride == 1 {
        // Rows of a contiguous: one dot product per output.
        with_best_simd(
            #[inline(always)]
            || {
                for i in 0..m {
                    let row = &a[i * al.row_stride..i * al.row_stride + k];
                    for j in 0..n {
                        let s = dot(row, &rt[j * k..(j + 1) * k]);
                        let o = &mut d[i * n + j];
                        *o = if accumulate { *o + (s + T::ZERO) } else { s + T::ZERO };
                    }
                }
            },
        );
    } else {
        // a read transposed (its columns contiguous): sixteen output rows at a time, each
        // output's sum over k kept in a register lane.
        let cols = (a, al.col_stride, &rt[..], k, d, accumulate);
        with_best_simd(
            #[inline(always)]
            || match n {
                1 => column_sums::<T, 1>(m, cols),
                2 => column_sums::<T, 2>(m, cols),
                3 => column_sums::<T, 3>(m, cols),
                _ => column_sums::<T, 4>(m, cols),
            },
        );
    }
    Some(false)
}

/// How [`scaled_rows`] stores a finished sum `Σ + 0.0` (its `S`): overwrite, add to `d`, or
/// overwrite and then add the bias row's element, `(Σ + 0.0) + b`, as [`epilogue`] adds a bias.
const SET: u8 = 0;
const ADD: u8 = 1;
const BIAS: u8 = 2;

/// The rows of `a @ rp` for a packed row-major `rp` of `K` rows, in 16-wide register blocks
/// (`K` a constant, so the sum over it unrolls), stored as `S` says.
#[inline(always)]
fn scaled_rows<T: Float, const K: usize, const S: u8>(
    m: usize,
    n: usize,
    (a, al, rp, d, bias): (&[T], MatLayout, &[T], &mut [T], &[T]),
) {
    let rp = &rp[..K * n];
    let d = &mut d[..m * n];
    let bias = if S == BIAS { &bias[..n] } else { bias };
    for i in 0..m {
        let mut ai = [T::ZERO; K];
        for p in 0..K {
            ai[p] = a[i * al.row_stride + p * al.col_stride];
        }
        let row = &mut d[i * n..(i + 1) * n];
        let mut c = 0;
        while c + 16 <= n {
            let mut acc = [T::ZERO; 16];
            for p in 0..K {
                let src: &[T; 16] = rp[p * n + c..p * n + c + 16].try_into().unwrap();
                for l in 0..16 {
                    acc[l] = ai[p].mul_add(src[l], acc[l]);
                }
            }
            let out: &mut [T; 16] = (&mut row[c..c + 16]).try_into().unwrap();
            if S == ADD {
                for l in 0..16 {
                    out[l] += acc[l] + T::ZERO;
                }
            } else {
                *out = acc.map(|x| x + T::ZERO);
            }
            c += 16;
        }
        while c < n {
            let mut s = T::ZERO;
            for p in 0..K {
                s = ai[p].mul_add(rp[p * n + c], s);
            }
            row[c] = if S == ADD { row[c] + (s + T::ZERO) } else { s + T::ZERO };
            c += 1;
        }
        if S == BIAS {
            // A pass over the row while it is in L1 (adding inside the blocks above made LLVM
            // scalarise them).
            for (o, &b) in row.iter_mut().zip(bias) {
                *o += b;
            }
        }
    }
}

/// `d[i, j] (+)= Σ_p a[p·cs + i] · rt[j·k + p]` for `N` columns, a's columns contiguous. The
/// sums run down contiguous columns eight terms of `p` at a time, so each partial sum is loaded
/// and stored once per eight multiply-adds (once per one was bound by store forwarding); each
/// is still one chain of FMAs in order of `p` from +0.0, the bits of a sum per output. (Sums
/// kept in registers across the loop over `p` were scalarised by LLVM.)
#[inline(always)]
fn column_sums<T: Float, const N: usize>(
    m: usize,
    (a, cs, rt, k, d, accumulate): (&[T], usize, &[T], usize, &mut [T], bool),
) {
    let rt = &rt[..N * k];
    let mut cols = vec![T::ZERO; N * m];
    let mut p = 0;
    while p + 8 <= k {
        let x = |q: usize| &a[(p + q) * cs..(p + q) * cs + m];
        let (x0, x1, x2, x3, x4, x5, x6, x7) = (x(0), x(1), x(2), x(3), x(4), x(5), x(6), x(7));
        for j in 0..N {
            let b: &[T; 8] = rt[j * k + p..j * k + p + 8].try_into().unwrap();
            let col = &mut cols[j * m..(j + 1) * m];
            for i in 0..m {
                let mut c = col[i];
                c = b[0].mul_add(x0[i], c);
                c = b[1].mul_add(x1[i], c);
                c = b[2].mul_add(x2[i], c);
                c = b[3].mul_add(x3[i], c);
                c = b[4].mul_add(x4[i], c);
                c = b[5].mul_add(x5[i], c);
                c = b[6].mul_add(x6[i], c);
                c = b[7].mul_add(x7[i], c);
                col[i] = c;
            }
        }
        p += 8;
    }
    while p < k {
        let x0 = &a[p * cs..p * cs + m];
        for j in 0..N {
            let b0 = rt[j * k + p];
            for (c, &v0) in cols[j * m..(j + 1) * m].iter_mut().zip(x0) {
                *c = b0.mul_add(v0, *c);
            }
        }
        p += 1;
    }
    for i in 0..m {
        for j in 0..N {
            let (o, s) = (&mut d[i * N + j], cols[j * m + i]);
            *o = if accumulate { *o + (s + T::ZERO) } else { s + T::ZERO };
        }
    }
}

/// `Σ a[p]·b[p]` in sixteen interleaved partial sums (a long chain of dependent adds is
/// latency-bound), added up in order.
#[inline(always)]
fn dot<T: Float>(a: &[T], b: &[T]) -> T {
    let len = a.len().min(b.len());
    let mut acc = [T::ZERO; 16];
    let mut p = 0;
    while p + 16 <= len {
        let x: &[T; 16] = a[p..p + 16].try_into().unwrap();
        let y: &[T; 16] = b[p..p + 16].try_into().unwrap();
        for l in 0..16 {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
        p += 16;
    }
    let mut s = T::ZERO;
    while p < len {
        s = a[p].mul_add(b[p], s);
        p += 1;
    }
    for v in acc {
        s += v;
    }
    s
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
        for &(m, n, k) in &[
            (3, 4, 5),
            (1, 7, 9),
            (1, 3, 17),
            (1, 2, 128),
            (1, 40, 3),
            (6, 1, 4),
            (33, 65, 20),
            (37, 2, 130),
            (29, 4, 16),
            (23, 40, 3),
            (19, 17, 8),
            (40, 1, 300),
            // Columns past a multiple of 16: one or two by dot products, more by gemm over the
            // last 16 (and with k < 16, or beyond gemm's 512-deep blocks).
            (5, 17, 20),
            (5, 18, 33),
            (6, 21, 40),
            (3, 31, 16),
            (7, 65, 128),
            (4, 66, 9),
            (2, 33, 600),
        ] {
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

    #[test]
    fn batches_against_a_shared_rhs_stack_only_when_rows_line_up() {
        let (batch, m, n, k) = (3, 5, 7, 6);
        let a: Vec<f64> = (0..batch * m * k).map(|i| (i as f64 * 0.29).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.13).cos()).collect();
        let bl = MatLayout { batch_stride: 0, ..MatLayout::row_major(k, n) };
        // Row-major batches stack; transposed ones (rows k apart within a batch, batches m*k
        // apart) do not, and both must give the per-batch products.
        let stacked = MatLayout::row_major(m, k);
        let transposed = MatLayout::row_major(k, m).transposed();
        assert_eq!(stack_batches(MatmulDims { batch, m, n, k }, stacked, bl).m, batch * m);
        assert_eq!(stack_batches(MatmulDims { batch, m, n, k }, transposed, bl).batch, batch);
        for al in [stacked, transposed] {
            let mut got = vec![0.0; batch * m * n];
            matmul(MatmulDims { batch, m, n, k }, &a, al, &b, bl, &mut got, false);
            for bi in 0..batch {
                let al1 = MatLayout { offset: bi * al.batch_stride, ..al };
                let want = naive(m, n, k, &a, al1, &b, bl);
                for (g, w) in got[bi * m * n..(bi + 1) * m * n].iter().zip(&want) {
                    assert!((g - w).abs() < 1e-12, "batch {bi} of {al:?}");
                }
            }
        }
    }

    #[test]
    fn narrow_products_accumulate_as_a_product_then_an_add() {
        // Shapes of each narrow kernel, in every layout of the left operand.
        for (m, n, k) in [(9, 20, 3), (7, 2, 40), (6, 4, 17)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.7).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.3).cos()).collect();
            let c: Vec<f32> = (0..m * n).map(|i| (i as f32 * 1.3).sin() * 1e3).collect();
            for al in [MatLayout::row_major(m, k), MatLayout::row_major(k, m).transposed()] {
                let dims = MatmulDims { batch: 1, m, n, k };
                let bl = MatLayout::row_major(k, n);
                let mut want = vec![0.0f32; m * n];
                matmul(dims, &a, al, &b, bl, &mut want, false);
                want.iter_mut().zip(&c).for_each(|(w, &x)| *w += x);
                let mut got = c.clone();
                matmul(dims, &a, al, &b, bl, &mut got, true);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "m={m} n={n} k={k} {al:?}");
            }
        }
    }

    #[test]
    fn column_tails_give_the_bits_of_a_product_then_an_add_and_do_not_depend_on_the_rows() {
        // The columns past a multiple of 16 run apart from the rest (`product`, `tail`), by
        // dot products or by gemm over the last 16 columns: accumulating and adding a bias
        // must still equal the product followed by an add, bit for bit, and a product split
        // by rows (the CPU backend's two workers) must give the whole product's bits.
        for (m, n, k) in [(6, 17, 20), (6, 18, 33), (6, 21, 40), (4, 66, 9), (8, 65, 128)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.7).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.3).cos()).collect();
            let c: Vec<f32> = (0..m * n).map(|i| (i as f32 * 1.3).sin() * 1e3).collect();
            let row: Vec<f32> = (0..n).map(|j| [0.0, -0.0, 1.5, -2.25][j % 4]).collect();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let bl = MatLayout::row_major(k, n);
            for al in [MatLayout::row_major(m, k), MatLayout::row_major(k, m).transposed()] {
                let dims = MatmulDims { batch: 1, m, n, k };
                let mut whole = vec![0.0f32; m * n];
                matmul(dims, &a, al, &b, bl, &mut whole, false);
                let mut want = whole.clone();
                want.iter_mut().zip(&c).for_each(|(w, &x)| *w += x);
                let mut got = c.clone();
                matmul(dims, &a, al, &b, bl, &mut got, true);
                assert_eq!(bits(&got), bits(&want), "accumulating m={m} n={n} k={k} {al:?}");
                let mut want = whole.clone();
                want.chunks_exact_mut(n).for_each(|r| r.iter_mut().zip(&row).for_each(|(x, &y)| *x += y));
                let mut got = vec![7.0f32; m * n];
                matmul_bias(dims, &a, al, &b, bl, &row, &mut got);
                assert_eq!(bits(&got), bits(&want), "bias m={m} n={n} k={k} {al:?}");
                let half = m / 2;
                let mut halves = vec![0.0f32; m * n];
                let (lo, hi) = halves.split_at_mut(half * n);
                matmul(MatmulDims { m: half, ..dims }, &a, al, &b, bl, lo, false);
                let al_hi = MatLayout { offset: half * al.row_stride, ..al };
                matmul(MatmulDims { m: m - half, ..dims }, &a, al_hi, &b, bl, hi, false);
                assert_eq!(bits(&halves), bits(&whole), "row halves m={m} n={n} k={k} {al:?}");
            }
        }
    }

    #[test]
    fn products_that_underflow_below_zero_give_positive_zero_as_gemm_does() {
        // Every product is -1e-60, which rounds to -0.0 in f32: an FMA chain from +0.0 ends at
        // -0.0, gemm plus its epilogue at +0.0. Each narrow kernel, plain, accumulating into
        // -0.0, and with a bias row of -0.0.
        for (m, n, k) in [(3, 16, 3), (3, 2, 20), (20, 3, 17), (3, 17, 20), (3, 21, 5)] {
            let a = vec![-1e-30f32; m * k];
            let b = vec![1e-30f32; k * n];
            for al in [MatLayout::row_major(m, k), MatLayout::row_major(k, m).transposed()] {
                let dims = MatmulDims { batch: 1, m, n, k };
                let bl = MatLayout::row_major(k, n);
                let mut plain = vec![7.0f32; m * n];
                matmul(dims, &a, al, &b, bl, &mut plain, false);
                let mut acc = vec![-0.0f32; m * n];
                matmul(dims, &a, al, &b, bl, &mut acc, true);
                let mut biased = vec![7.0f32; m * n];
                matmul_bias(dims, &a, al, &b, bl, &vec![-0.0f32; n], &mut biased);
                for (name, v) in [("plain", &plain), ("accumulating", &acc), ("bias", &biased)] {
                    assert!(v.iter().all(|x| x.to_bits() == 0), "{name} m={m} n={n} k={k} {al:?}: {v:?}");
                }
            }
        }
    }

    #[test]
    fn a_bias_row_gives_the_bits_of_a_product_then_an_add() {
        // Zero rows of `a` make every product in them a sum of zeros; the bias row holds both
        // signed zeros, so the sign rules of the two routes are compared too.
        for (m, n, k) in [(4, 5, 3), (1, 6, 4), (3, 2, 0)] {
            let a: Vec<f32> =
                (0..m * k).map(|i| if i / k.max(1) == 1 { -0.0 } else { (i as f32 * 0.7).sin() }).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.3).cos()).collect();
            let row: Vec<f32> = (0..n).map(|j| [0.0, -0.0, 1.5, -2.25][j % 4]).collect();
            let dims = MatmulDims { batch: 1, m, n, k };
            let (al, bl) = (MatLayout::row_major(m, k), MatLayout::row_major(k, n));
            let mut want = vec![7.0f32; m * n];
            matmul(dims, &a, al, &b, bl, &mut want, false);
            want.chunks_exact_mut(n).for_each(|r| r.iter_mut().zip(&row).for_each(|(x, &c)| *x += c));
            let mut got = vec![7.0f32; m * n];
            matmul_bias(dims, &a, al, &b, bl, &row, &mut got);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "m={m} n={n} k={k}");
        }
    }
}
