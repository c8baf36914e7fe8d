//! Kernels for products too small or too narrow for gemm to pay its packing and blocking:
//! a single left row (`gemv`), a short contraction or at most four result columns (`narrow`),
//! and the dot products they share.

use super::MatLayout;
use crate::dtype::Float;
use crate::simd_math::with_best_simd;

/// `d[0, :] (+)= a[0, :] @ r` for a single left row. Returns false for layouts it does not
/// cover (neither operand dimension of `r` contiguous), leaving the work to gemm.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemv<T: Float>(
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
/// else whether it finished the epilogue `(bias, relu)`: the `k <= 8` kernel adds the bias and
/// applies the relu as it stores each row (when not accumulating).
/// The kernel depends on the layouts and on `n` and `k`, never on `m`, so a product split by
/// rows (two workers) runs the same kernel on each half as on the whole. Loops are written out
/// (no iterator adapters) so that all of it compiles inside the SIMD-enabled closure. Every
/// finished sum gets `+ 0.0` (an FMA chain from +0.0 still ends at -0.0 when every product
/// underflows below zero) and an accumulating product adds it to `d`: what [`epilogue`](super::epilogue) makes
/// of gemm's results.
pub(super) fn narrow<T: Float>(
    (m, n, k): (usize, usize, usize),
    (a, al): (&[T], MatLayout),
    (r, rl): (&[T], MatLayout),
    d: &mut [T],
    accumulate: bool,
    (bias, act): (Option<&[T]>, bool),
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
        match (accumulate, bias, act) {
            (true, None, true) => by_k!(ADD_RELU),
            // An addend and a bias row both (no public entry asks for it): the closing pass
            // adds the bias, then applies the relu.
            (true, ..) => by_k!(ADD),
            (false, Some(_), false) => by_k!(BIAS),
            (false, Some(_), true) => by_k!(BIAS_RELU),
            (false, None, false) => by_k!(SET),
            (false, None, true) => by_k!(SET_RELU),
        }
        return Some(!accumulate || bias.is_none());
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
        // Rows of a contiguous: one dot product per output, four rows at a time so that four
        // chains of FMAs overlap (one at a time, `[250, 128] @ [128, 2]` was latency-bound).
        let store = |o: &mut T, s: T| *o = if accumulate { *o + (s + T::ZERO) } else { s + T::ZERO };
        with_best_simd(
            #[inline(always)]
            || {
                let row = |i: usize| &a[i * al.row_stride..i * al.row_stride + k];
                let mut i = 0;
                while i + 4 <= m {
                    for j in 0..n {
                        let s = dots([row(i), row(i + 1), row(i + 2), row(i + 3)], &rt[j * k..(j + 1) * k]);
                        for (r, s) in s.into_iter().enumerate() {
                            store(&mut d[(i + r) * n + j], s);
                        }
                    }
                    i += 4;
                }
                for i in i..m {
                    for j in 0..n {
                        store(&mut d[i * n + j], dot(row(i), &rt[j * k..(j + 1) * k]));
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
/// overwrite and then add the bias row's element, `(Σ + 0.0) + b`, as [`epilogue`](super::epilogue) adds a bias;
/// each also with the relu applied to the stored value (`RELU` set).
const SET: u8 = 0;
const ADD: u8 = 1;
const BIAS: u8 = 2;
const RELU: u8 = 4;
const SET_RELU: u8 = SET | RELU;
const ADD_RELU: u8 = ADD | RELU;
const BIAS_RELU: u8 = BIAS | RELU;

/// The rows of `a @ rp` for a packed row-major `rp` of `K` rows, in 64- then 16-wide blocks
/// (`K` a constant, so the sum over it unrolls), stored as `S` says.
#[inline(always)]
fn scaled_rows<T: Float, const K: usize, const S: u8>(
    m: usize,
    n: usize,
    (a, al, rp, d, bias): (&[T], MatLayout, &[T], &mut [T], &[T]),
) {
    let rp = &rp[..K * n];
    let d = &mut d[..m * n];
    let bias = if S & !RELU == BIAS { &bias[..n] } else { bias };
    for i in 0..m {
        let mut ai = [T::ZERO; K];
        for p in 0..K {
            ai[p] = a[i * al.row_stride + p * al.col_stride];
        }
        let row = &mut d[i * n..(i + 1) * n];
        let mut c = 0;
        // Four registers' worth of columns at a time, so four chains of K dependent FMAs
        // overlap (one 16-wide chain at a time was latency-bound: `[250, 8] @ [8, 128]` took
        // 11.7 µs, ~3 cycles per FMA), then one register's worth.
        while c + 64 <= n {
            row_block::<T, K, S, 64>(&ai, rp, n, c, row, bias);
            c += 64;
        }
        while c + 16 <= n {
            row_block::<T, K, S, 16>(&ai, rp, n, c, row, bias);
            c += 16;
        }
        while c < n {
            let mut s = T::ZERO;
            for p in 0..K {
                s = ai[p].mul_add(rp[p * n + c], s);
            }
            let v = match S & !RELU {
                ADD => row[c] + (s + T::ZERO),
                BIAS => (s + T::ZERO) + bias[c],
                _ => s + T::ZERO,
            };
            row[c] = if S & RELU != 0 { super::relu(v) } else { v };
            c += 1;
        }
    }
}

/// Columns `c..c + W` of one output row of [`scaled_rows`]: each a chain of `K` FMAs in order
/// of `p` from +0.0, stored as `S` says.
#[inline(always)]
fn row_block<T: Float, const K: usize, const S: u8, const W: usize>(
    ai: &[T; K],
    rp: &[T],
    n: usize,
    c: usize,
    row: &mut [T],
    bias: &[T],
) {
    let mut acc = [T::ZERO; W];
    for p in 0..K {
        let src: &[T; W] = rp[p * n + c..p * n + c + W].try_into().unwrap();
        for l in 0..W {
            acc[l] = ai[p].mul_add(src[l], acc[l]);
        }
    }
    let out: &mut [T; W] = (&mut row[c..c + W]).try_into().unwrap();
    let mut v = acc.map(|x| x + T::ZERO);
    match S & !RELU {
        ADD => (0..W).for_each(|l| v[l] = out[l] + v[l]),
        BIAS => {
            let b: [T; W] = bias[c..c + W].try_into().unwrap();
            for l in 0..W {
                v[l] += b[l];
            }
        }
        _ => {}
    }
    if S & RELU != 0 {
        v = v.map(super::relu);
    }
    *out = v;
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

/// [`dot`] of four rows with one column, the rows' chains interleaved (four accumulators in
/// locals: an array of them was spilled and scalarised by LLVM): each result has the bits of
/// its own `dot`.
#[inline(always)]
fn dots<T: Float>(rows: [&[T]; 4], b: &[T]) -> [T; 4] {
    let len = rows.iter().fold(b.len(), |l, r| l.min(r.len()));
    let [r0, r1, r2, r3] = rows.map(|r| &r[..len]);
    let b = &b[..len];
    let (mut a0, mut a1, mut a2, mut a3) = ([T::ZERO; 16], [T::ZERO; 16], [T::ZERO; 16], [T::ZERO; 16]);
    let mut p = 0;
    while p + 16 <= len {
        let y: &[T; 16] = b[p..p + 16].try_into().unwrap();
        let x0: &[T; 16] = r0[p..p + 16].try_into().unwrap();
        let x1: &[T; 16] = r1[p..p + 16].try_into().unwrap();
        let x2: &[T; 16] = r2[p..p + 16].try_into().unwrap();
        let x3: &[T; 16] = r3[p..p + 16].try_into().unwrap();
        a0 = std::array::from_fn(|l| x0[l].mul_add(y[l], a0[l]));
        a1 = std::array::from_fn(|l| x1[l].mul_add(y[l], a1[l]));
        a2 = std::array::from_fn(|l| x2[l].mul_add(y[l], a2[l]));
        a3 = std::array::from_fn(|l| x3[l].mul_add(y[l], a3[l]));
        p += 16;
    }
    [close_dot(r0, b, p, a0), close_dot(r1, b, p, a1), close_dot(r2, b, p, a2), close_dot(r3, b, p, a3)]
}

/// A [`dot`]'s end: the chain over the tail `p..` from +0.0, then the sixteen partial sums
/// added to it in order.
#[inline(always)]
fn close_dot<T: Float>(a: &[T], b: &[T], p: usize, acc: [T; 16]) -> T {
    let mut s = T::ZERO;
    for q in p..a.len().min(b.len()) {
        s = a[q].mul_add(b[q], s);
    }
    for v in acc {
        s += v;
    }
    s
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
    close_dot(&a[..len], &b[..len], p, acc)
}
