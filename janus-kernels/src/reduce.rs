//! Reductions along one axis of a contiguous buffer viewed as `[outer, n, inner]`: sum, max,
//! min, argmax, and the numerically stable softmax family (max-shifted before `exp`).

use crate::dtype::Float;
use crate::simd_math::with_best_simd;
use rayon::prelude::*;

/// A contiguous buffer seen as `[outer, n, inner]`, reduced along `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReduceDims {
    /// Product of the dimensions before the reduced one.
    pub outer: usize,
    /// Length of the reduced dimension.
    pub n: usize,
    /// Product of the dimensions after the reduced one.
    pub inner: usize,
}

impl ReduceDims {
    /// Splits `shape` around `axis`.
    pub fn new(shape: &[usize], axis: usize) -> Self {
        ReduceDims {
            outer: shape[..axis].iter().product(),
            n: shape[axis],
            inner: shape[axis + 1..].iter().product(),
        }
    }
}

const PAR_MIN: usize = 1 << 16;

/// Runs `f(outer_index, src_block, out_block)` for every outer block, in parallel when large.
fn per_outer<T: Float, O: Send>(
    src: &[T],
    d: ReduceDims,
    out: &mut [O],
    out_block: usize,
    f: impl Fn(&[T], &mut [O]) + Sync,
) {
    let in_block = d.n * d.inner;
    if out_block == 0 || d.outer == 0 {
        return;
    }
    if src.len() >= PAR_MIN && d.outer > 1 && crate::parallel::allowed() {
        out.par_chunks_mut(out_block).zip(src.par_chunks(in_block.max(1))).for_each(|(o, s)| f(s, o));
    } else if in_block == 0 {
        out.chunks_mut(out_block).for_each(|o| f(&[], o));
    } else {
        for (o, s) in out.chunks_mut(out_block).zip(src.chunks(in_block)) {
            f(s, o);
        }
    }
}

/// Runs `block(src_rows, out_rows)` over blocks of whole rows of `d.n` (`d.inner == 1`), about
/// 4096 elements each, `per_row` outputs per row; blocks in parallel when large. Short rows
/// then share one SIMD dispatch per block (`block` dispatches once).
fn row_blocks<T: Float, O: Send>(
    src: &[T],
    d: ReduceDims,
    out: &mut [O],
    per_row: usize,
    block: impl Fn(&[T], &mut [O]) + Sync,
) {
    let rows = (4096 / d.n).max(1);
    if src.len() >= PAR_MIN && d.outer > rows && crate::parallel::allowed() {
        out.par_chunks_mut(rows * per_row).zip(src.par_chunks(rows * d.n)).for_each(|(o, s)| block(s, o));
    } else {
        out.chunks_mut(rows * per_row).zip(src.chunks(rows * d.n)).for_each(|(o, s)| block(s, o));
    }
}

/// Sum of a contiguous row with 16 independent accumulators (vectorisable, and more accurate
/// than one running sum).
#[inline(always)]
pub(crate) fn row_sum<T: Float>(row: &[T]) -> T {
    if row.len() < 16 {
        // What the lanes below give a short row (they stay +0.0), without their 15 adds.
        let mut s = T::ZERO;
        for &x in row {
            s += x;
        }
        return T::ZERO + s;
    }
    let mut acc = [T::ZERO; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..16 {
            acc[i] += c[i];
        }
    }
    let mut s = T::ZERO;
    for &x in tail {
        s += x;
    }
    for w in [8, 4, 2, 1] {
        for i in 0..w {
            acc[i] += acc[i + w];
        }
    }
    acc[0] + s
}

/// `out[o, i] = sum_j src[o, j, i]`.
pub fn sum<T: Float>(src: &[T], d: ReduceDims, out: &mut [T]) {
    if d.inner == 1 && d.n > 0 {
        // One SIMD dispatch per block of rows (one per row cost more than a short row's sum:
        // `[500, 2] -> [500, 1]` took 6.5 µs).
        row_blocks(src, d, out, 1, |s, o| {
            with_best_simd(
                #[inline(always)]
                || {
                    let mut r = 0;
                    while r < o.len() {
                        o[r] = row_sum(&s[r * d.n..(r + 1) * d.n]);
                        r += 1;
                    }
                },
            )
        });
        return;
    }
    per_outer(src, d, out, d.inner, |s, o| {
        with_best_simd(
            #[inline(always)]
            || {
                if d.inner == 1 {
                    o[0] = row_sum(s);
                } else if d.inner >= 64 {
                    // Rows added in order with 64 running sums in registers (`[500, 128] ->
                    // [128]`: 3.1 µs against 4.3 for the passes below, a throwaway timing loop;
                    // docs/perf/2026-12-06.md).
                    o.fill(T::ZERO);
                    crate::strided::column_sums(s, d.inner, 0..d.n, o);
                } else {
                    // Rows added in order, eight per pass over `o` (a pass per row was bound
                    // by storing and reloading `o`); each sum is still one chain of adds.
                    o.fill(T::ZERO);
                    let w = d.inner;
                    let mut rows = s.chunks_exact(8 * w);
                    for r in &mut rows {
                        let x = |k: usize| &r[k * w..(k + 1) * w];
                        let (x0, x1, x2, x3, x4, x5, x6, x7) =
                            (x(0), x(1), x(2), x(3), x(4), x(5), x(6), x(7));
                        for i in 0..w {
                            o[i] = o[i] + x0[i] + x1[i] + x2[i] + x3[i] + x4[i] + x5[i] + x6[i] + x7[i];
                        }
                    }
                    for row in rows.remainder().chunks_exact(w) {
                        for (a, &x) in o.iter_mut().zip(row) {
                            *a += x;
                        }
                    }
                }
            },
        )
    });
}

fn fold<T: Float>(src: &[T], d: ReduceDims, out: &mut [T], init: T, op: impl Fn(T, T) -> T + Sync) {
    per_outer(src, d, out, d.inner, |s, o| {
        with_best_simd(
            #[inline(always)]
            || {
                o.fill(init);
                for row in s.chunks_exact(d.inner.max(1)) {
                    for (a, &x) in o.iter_mut().zip(row) {
                        *a = op(*a, x);
                    }
                }
            },
        )
    });
}

/// `out[o, i] = max_j src[o, j, i]` (NaN propagates; `-inf` for an empty axis).
pub fn max<T: Float>(src: &[T], d: ReduceDims, out: &mut [T]) {
    fold(src, d, out, T::NEG_INFINITY, T::max_nan);
}

/// `out[o, i] = min_j src[o, j, i]` (NaN propagates; `+inf` for an empty axis).
pub fn min<T: Float>(src: &[T], d: ReduceDims, out: &mut [T]) {
    fold(src, d, out, T::INFINITY, T::min_nan);
}

/// Index of the first maximum along the axis (NaN counts as the maximum, as in PyTorch).
pub fn argmax<T: Float>(src: &[T], d: ReduceDims, out: &mut [i64]) {
    per_outer(src, d, out, d.inner, |s, o| {
        for (i, slot) in o.iter_mut().enumerate() {
            let mut best = T::NEG_INFINITY;
            let mut at = 0usize;
            for j in 0..d.n {
                let x = s[j * d.inner + i];
                if j == 0 || x > best || (x.is_nan() && !best.is_nan()) {
                    best = x;
                    at = j;
                }
            }
            *slot = at as i64;
        }
    });
}

/// Row maximum used as the softmax shift; a row of all `-inf` shifts by 0 so it stays `-inf`
/// instead of turning into NaN.
#[inline(always)]
fn shift<T: Float>(m: T) -> T {
    if m == T::NEG_INFINITY || m == T::INFINITY { T::ZERO } else { m }
}

/// Applies `g(row, out_row)` to each softmax row, inside the best SIMD dispatch (`g` should be
/// `#[inline(always)]`); for `inner > 1` the row is gathered into a scratch buffer first and
/// scattered back after.
///
/// Rows shorter than 16 go sixteen at a time through `g16(n, x, y)`, with `x[j][r]` element `j`
/// of row `r` (one row per SIMD lane), which must give the bits `g` gives each row: a row of
/// two (a policy's log-softmax) is too short to vectorise along.
fn per_row<T: Float>(
    src: &[T],
    d: ReduceDims,
    out: &mut [T],
    g: impl Fn(&[T], &mut [T]) + Sync,
    g16: impl Fn(usize, &Lanes<T>, &mut Lanes<T>) + Sync,
) {
    if d.inner == 1 && d.n > 0 {
        // Rows in blocks of about 4096 elements, one SIMD dispatch per block: a dispatch per
        // row cost more than a short row's work (CartPole's `[500, 2]` log-softmax took 42 µs).
        row_blocks(src, d, out, d.n, |s, o| {
            with_best_simd(
                #[inline(always)]
                || {
                    // A plain loop: iterator adapters here were not inlined into the
                    // feature-enabled copy, and `g`'s `exp` then called `fmaf` per element.
                    // Rows of 2-4 (a policy's actions) with the length a constant: the
                    // transposes become shuffles instead of gathers and scatters.
                    let mut at = match d.n {
                        2 => short_rows::<T, 2>(s, o, &g16),
                        3 => short_rows::<T, 3>(s, o, &g16),
                        4 => short_rows::<T, 4>(s, o, &g16),
                        _ => 0,
                    };
                    if d.n < 16 {
                        let (mut x, mut y) = ([[T::ZERO; 16]; 16], [[T::ZERO; 16]; 16]);
                        while at + 16 * d.n <= s.len() {
                            for r in 0..16 {
                                for j in 0..d.n {
                                    x[j][r] = s[at + r * d.n + j];
                                }
                            }
                            g16(d.n, &x, &mut y);
                            for r in 0..16 {
                                for j in 0..d.n {
                                    o[at + r * d.n + j] = y[j][r];
                                }
                            }
                            at += 16 * d.n;
                        }
                    }
                    while at < s.len() {
                        g(&s[at..at + d.n], &mut o[at..at + d.n]);
                        at += d.n;
                    }
                },
            )
        });
        return;
    }
    per_outer(src, d, out, d.n * d.inner, |s, o| {
        if d.inner == 1 {
            // Only an empty row (`n == 0`) reaches here.
            g(s, o);
        } else {
            let mut row = vec![T::ZERO; d.n];
            let mut res = vec![T::ZERO; d.n];
            for i in 0..d.inner {
                for j in 0..d.n {
                    row[j] = s[j * d.inner + i];
                }
                with_best_simd(
                    #[inline(always)]
                    || g(&row, &mut res),
                );
                for j in 0..d.n {
                    o[j * d.inner + i] = res[j];
                }
            }
        }
    });
}

/// Whole groups of sixteen rows of `N` through `g16` (see [`per_row`]); returns where they end.
#[inline(always)]
fn short_rows<T: Float, const N: usize>(
    s: &[T],
    o: &mut [T],
    g16: &impl Fn(usize, &Lanes<T>, &mut Lanes<T>),
) -> usize {
    let (mut x, mut y) = ([[T::ZERO; 16]; 16], [[T::ZERO; 16]; 16]);
    let mut at = 0;
    while at + 16 * N <= s.len() {
        let rows = &s[at..at + 16 * N];
        for r in 0..16 {
            for j in 0..N {
                x[j][r] = rows[r * N + j];
            }
        }
        g16(N, &x, &mut y);
        let out = &mut o[at..at + 16 * N];
        for r in 0..16 {
            for j in 0..N {
                out[r * N + j] = y[j][r];
            }
        }
        at += 16 * N;
    }
    at
}

/// The row's maximum (NaN if any element is NaN), in 16 lanes so the loop vectorises: a
/// single running maximum is a chain of dependent compares, and a branch per element that
/// mispredicts on masked (`-inf`) rows. Every path (eager, compiled, split) uses this order.
#[inline(always)]
fn row_max<T: Float>(row: &[T]) -> T {
    if row.len() < 16 {
        // The same value as below, whose lanes would all stay `-inf`.
        return row.iter().fold(T::NEG_INFINITY, |a, &x| a.max_nan(x));
    }
    let mut acc = [T::NEG_INFINITY; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..16 {
            acc[i] = acc[i].max_nan(c[i]);
        }
    }
    let mut m = tail.iter().fold(T::NEG_INFINITY, |a, &x| a.max_nan(x));
    for a in acc {
        m = m.max_nan(a);
    }
    m
}

/// Fills `y` with `exp(x - m)`, `m` the row's maximum (0 if that is infinite), and returns `m`.
#[inline(always)]
fn exp_shifted<T: Float>(x: &[T], y: &mut [T]) -> T {
    let m = shift(row_max(x));
    for (o, &v) in y.iter_mut().zip(x) {
        *o = (v - m).fast_exp();
    }
    m
}

/// Sixteen short rows, one per lane: `[j][r]` is element `j` of row `r`.
type Lanes<T> = [[T; 16]; 16];

/// For sixteen rows of `n < 16` (see [`per_row`]): `y[j][r] = exp(x[j][r] - m[r])` and the
/// rows' shifts `m` and sums, in [`exp_shifted`]'s and [`row_sum`]'s order for short rows.
#[inline(always)]
fn exp_shifted16<T: Float>(n: usize, x: &Lanes<T>, y: &mut Lanes<T>) -> ([T; 16], [T; 16]) {
    let mut m = [T::NEG_INFINITY; 16];
    for xj in &x[..n] {
        for r in 0..16 {
            m[r] = m[r].max_nan(xj[r]);
        }
    }
    for v in &mut m {
        *v = shift(*v);
    }
    let mut sum = [T::ZERO; 16];
    for j in 0..n {
        for r in 0..16 {
            y[j][r] = (x[j][r] - m[r]).fast_exp();
            sum[r] += y[j][r];
        }
    }
    // `row_sum` of a short row: its (zero) lanes' total, plus the running sum.
    for v in &mut sum {
        *v = T::ZERO + *v;
    }
    (m, sum)
}

/// `out = exp(x - m) / sum(exp(x - m))` along the axis, with `m` the row maximum.
pub fn softmax<T: Float>(src: &[T], d: ReduceDims, out: &mut [T]) {
    per_row(
        src,
        d,
        out,
        #[inline(always)]
        |x, y| {
            exp_shifted(x, y);
            let inv = T::ONE / row_sum(y);
            for o in y.iter_mut() {
                *o = *o * inv;
            }
        },
        #[inline(always)]
        |n, x, y| {
            let (_, sum) = exp_shifted16(n, x, y);
            let inv = sum.map(|s| T::ONE / s);
            for yj in &mut y[..n] {
                for r in 0..16 {
                    yj[r] = yj[r] * inv[r];
                }
            }
        },
    );
}

/// `out = (x - m) - log(sum(exp(x - m)))` along the axis.
pub fn log_softmax<T: Float>(src: &[T], d: ReduceDims, out: &mut [T]) {
    per_row(
        src,
        d,
        out,
        #[inline(always)]
        |x, y| {
            let m = exp_shifted(x, y);
            // (x - m) - log(s), not x - (m + log(s)): the shift is exact, the sum is not.
            let ls = row_sum(y).fast_ln();
            for (o, &v) in y.iter_mut().zip(x) {
                *o = (v - m) - ls;
            }
        },
        #[inline(always)]
        |n, x, y| {
            let (m, sum) = exp_shifted16(n, x, y);
            let mut ls = [T::ZERO; 16];
            for r in 0..16 {
                ls[r] = sum[r].fast_ln();
            }
            for j in 0..n {
                for r in 0..16 {
                    y[j][r] = (x[j][r] - m[r]) - ls[r];
                }
            }
        },
    );
}

/// `out = m + log(sum(exp(x - m)))` along the axis (the reduced dimension is removed).
pub fn logsumexp<T: Float>(src: &[T], d: ReduceDims, out: &mut [T]) {
    per_outer(src, d, out, d.inner, |s, o| {
        let mut row = vec![T::ZERO; d.n];
        for (i, slot) in o.iter_mut().enumerate() {
            for (j, r) in row.iter_mut().enumerate() {
                *r = s[j * d.inner + i];
            }
            *slot = with_best_simd(
                #[inline(always)]
                || {
                    let m = row_max(&row);
                    let sh = shift(m);
                    let mut acc = T::ZERO;
                    for &v in &row {
                        acc += (v - sh).fast_exp();
                    }
                    sh + acc.fast_ln()
                },
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_along_each_axis() {
        // shape [2, 3, 2]
        let x: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let mut o = vec![0.0; 4];
        sum(&x, ReduceDims::new(&[2, 3, 2], 1), &mut o);
        assert_eq!(o, [6.0, 9.0, 24.0, 27.0]);
        let mut o = vec![0.0; 6];
        sum(&x, ReduceDims::new(&[2, 3, 2], 0), &mut o);
        assert_eq!(o, [6.0, 8.0, 10.0, 12.0, 14.0, 16.0]);
        let mut o = vec![0.0; 6];
        sum(&x, ReduceDims::new(&[2, 3, 2], 2), &mut o);
        assert_eq!(o, [1.0, 5.0, 9.0, 13.0, 17.0, 21.0]);
    }

    #[test]
    fn long_row_sum_matches_f64() {
        let x: Vec<f32> = (0..100_003).map(|i| ((i * 37) % 101) as f32 * 0.01).collect();
        let exact: f64 = x.iter().map(|&v| v as f64).sum();
        let mut o = [0.0f32];
        sum(&x, ReduceDims { outer: 1, n: x.len(), inner: 1 }, &mut o);
        assert!(((o[0] as f64 - exact) / exact).abs() < 1e-6);
    }

    #[test]
    fn short_rows_sixteen_at_a_time_give_the_bits_of_one_at_a_time() {
        for n in 1..16 {
            let rows = 37;
            let mut x: Vec<f32> = (0..rows * n).map(|i| ((i * 7919) % 101) as f32 * 0.37 - 18.0).collect();
            x[3] = f32::NEG_INFINITY;
            x[rows * n / 2] = f32::NAN;
            let d = ReduceDims { outer: rows, n, inner: 1 };
            for (name, f) in
                [("softmax", softmax::<f32> as fn(&[f32], ReduceDims, &mut [f32])), ("log", log_softmax)]
            {
                let mut all = vec![0.0f32; rows * n];
                f(&x, d, &mut all);
                for r in 0..rows {
                    let mut one = vec![0.0f32; n];
                    f(&x[r * n..(r + 1) * n], ReduceDims { outer: 1, n, inner: 1 }, &mut one);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&all[r * n..(r + 1) * n]), bits(&one), "{name} n={n} row {r}");
                }
            }
        }
    }

    #[test]
    fn softmax_is_stable_for_large_inputs() {
        let x = [1000.0f32, 1001.0, f32::NEG_INFINITY];
        let mut y = [0.0f32; 3];
        softmax(&x, ReduceDims { outer: 1, n: 3, inner: 1 }, &mut y);
        let e = 1.0f64.exp();
        assert!((y[1] as f64 - e / (1.0 + e)).abs() < 1e-6);
        assert_eq!(y[2], 0.0);
        let mut l = [0.0f32; 3];
        log_softmax(&x, ReduceDims { outer: 1, n: 3, inner: 1 }, &mut l);
        assert!((l[0] as f64 + (1.0 + e).ln()).abs() < 1e-5);
        let mut s = [0.0f32];
        logsumexp(&[f32::NEG_INFINITY; 2], ReduceDims { outer: 1, n: 2, inner: 1 }, &mut s);
        assert_eq!(s[0], f32::NEG_INFINITY);
    }

    #[test]
    fn argmax_takes_first_maximum_along_middle_axis() {
        let x = [1.0f32, 5.0, 5.0, 2.0, 0.0, 7.0]; // [1, 3, 2]
        let mut o = [0i64; 2];
        argmax(&x, ReduceDims::new(&[1, 3, 2], 1), &mut o);
        assert_eq!(o, [1, 2]);
    }
}
