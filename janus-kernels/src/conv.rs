//! Sliding windows over `[N, C, H, W]` images, for convolution and pooling: `unfold` (im2col)
//! lays every window out as a column, `fold` (col2im) is its adjoint and sums columns back into
//! an image; `max_pool` and `max_pool_backward` work on the image directly.
//!
//! The column buffer is `[C, kh, kw, N, OH, OW]`: a row per `(channel, kernel offset)` and a
//! column per output position of every sample, so a convolution is one GEMM
//! `[O, C*kh*kw] @ [C*kh*kw, N*OH*OW]` over the whole batch, not one small product per sample.

use crate::dtype::Float;
use crate::simd_math::with_best_simd;
use rayon::prelude::*;

/// The geometry of a 2-D sliding window over `[n, c, h, w]` images.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    /// Batch size.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Image height and width.
    pub size: [usize; 2],
    /// Window height and width.
    pub kernel: [usize; 2],
    /// Step between windows.
    pub stride: [usize; 2],
    /// Implicit padding on each side.
    pub padding: [usize; 2],
    /// Spacing between window taps.
    pub dilation: [usize; 2],
}

impl Window {
    /// Output height and width, or `None` when the window does not fit in the padded image
    /// (or a stride or dilation is zero).
    pub fn out_size(&self) -> Option<[usize; 2]> {
        let one = |d: usize| {
            let span = self.dilation[d].checked_mul(self.kernel[d].checked_sub(1)?)? + 1;
            let padded = self.size[d] + 2 * self.padding[d];
            (self.stride[d] > 0 && self.dilation[d] > 0 && padded >= span)
                .then(|| (padded - span) / self.stride[d] + 1)
        };
        Some([one(0)?, one(1)?])
    }

    /// Number of elements of the column buffer.
    pub fn col_len(&self) -> usize {
        let [oh, ow] = self.out_size().unwrap_or([0, 0]);
        self.c * self.kernel[0] * self.kernel[1] * self.n * oh * ow
    }
}

/// Below this many elements, the kernels run on one thread.
const PARALLEL_MIN: usize = 1 << 15;

/// The output positions `lo..hi` of one axis whose input index `o * stride + off` lies in
/// `0..len`.
fn valid_range(off: isize, stride: usize, len: usize, outs: usize) -> (usize, usize) {
    let s = stride as isize;
    let lo = if off >= 0 { 0 } else { ((-off + s - 1) / s) as usize };
    let end = len as isize - off; // o * s < end
    let hi = if end <= 0 { 0 } else { ((end + s - 1) / s) as usize };
    let hi = hi.min(outs);
    (lo.min(hi), hi)
}

/// `col[c, i, j, n, oh, ow] = x[n, c, oh*sh + i*dh - ph, ow*sw + j*dw - pw]`, or `pad` where
/// that lies outside the image. `x` is contiguous `[n, c, h, w]`.
///
/// Panics when the buffers do not match the geometry.
pub fn unfold<T: Float>(g: &Window, x: &[T], pad: T, col: &mut [T]) {
    assert_eq!(col.len(), g.col_len(), "unfold: column length");
    unfold_part(g, x, pad, col, 0);
}

/// [`unfold`]'s rows `first..` (a row is one `(c, i, j, b)` of `[C, kh, kw, N]`), as many as
/// `col` holds: a part of the columns, which two workers can make side by side.
pub fn unfold_part<T: Float>(g: &Window, x: &[T], pad: T, col: &mut [T], first: usize) {
    let [h, w] = g.size;
    let [oh_n, ow_n] = g.out_size().expect("unfold: the window does not fit the image");
    assert_eq!(x.len(), g.n * g.c * h * w, "unfold: input length");
    let plane = oh_n * ow_n;
    assert!(
        plane == 0 || (col.len().is_multiple_of(plane) && first * plane + col.len() <= g.col_len()),
        "unfold: rows {first}.. of {} do not fit the columns",
        col.len() / plane.max(1)
    );
    if plane == 0 || col.is_empty() {
        return;
    }
    let (kh, kw, n) = (g.kernel[0], g.kernel[1], g.n);
    let row = |r: usize, dst: &mut [T]| {
        // r indexes (c, i, j, b).
        let b = r % n;
        let j = (r / n) % kw;
        let i = (r / n / kw) % kh;
        let c = r / n / kw / kh;
        let src = &x[(b * g.c + c) * h * w..][..h * w];
        let off_h = (i * g.dilation[0]) as isize - g.padding[0] as isize;
        let off_w = (j * g.dilation[1]) as isize - g.padding[1] as isize;
        let (lo_w, hi_w) = valid_range(off_w, g.stride[1], w, ow_n);
        for (oh, out) in dst.chunks_mut(ow_n).enumerate() {
            let ih = (oh * g.stride[0]) as isize + off_h;
            if ih < 0 || ih >= h as isize {
                out.fill(pad);
                continue;
            }
            let line = &src[ih as usize * w..][..w];
            out[..lo_w].fill(pad);
            out[hi_w..].fill(pad);
            if g.stride[1] == 1 {
                // (An empty range may start left of the image: nothing to copy then.)
                if lo_w < hi_w {
                    let start = (lo_w as isize + off_w) as usize;
                    out[lo_w..hi_w].copy_from_slice(&line[start..start + hi_w - lo_w]);
                }
            } else {
                for (ow, o) in out.iter_mut().enumerate().take(hi_w).skip(lo_w) {
                    *o = line[((ow * g.stride[1]) as isize + off_w) as usize];
                }
            }
        }
    };
    if col.len() >= PARALLEL_MIN && crate::parallel::allowed() {
        col.par_chunks_mut(plane).enumerate().for_each(|(r, d)| row(first + r, d));
    } else {
        col.chunks_mut(plane).enumerate().for_each(|(r, d)| row(first + r, d));
    }
}

/// The adjoint of [`unfold`]: `x[n, c, y, z] = Σ col[c, i, j, n, oh, ow]` over the window taps
/// that read `(y, z)`; taps in the padding are dropped. `x` is contiguous `[n, c, h, w]` and is
/// overwritten.
///
/// Panics when the buffers do not match the geometry.
pub fn fold<T: Float>(g: &Window, col: &[T], x: &mut [T]) {
    assert_eq!(x.len(), g.n * g.c * g.size[0] * g.size[1], "fold: output length");
    fold_part(g, col, x, 0);
}

/// [`fold`]'s image planes `first..` (a plane is one `(b, c)` of `[N, C]`), as many as `x`
/// holds: a part of the images, which two workers can make side by side.
pub fn fold_part<T: Float>(g: &Window, col: &[T], x: &mut [T], first: usize) {
    let [h, w] = g.size;
    let [oh_n, ow_n] = g.out_size().expect("fold: the window does not fit the image");
    assert_eq!(col.len(), g.col_len(), "fold: column length");
    assert!(
        h * w == 0 || (x.len().is_multiple_of(h * w) && first * h * w + x.len() <= g.n * g.c * h * w),
        "fold: planes {first}.. of {} do not fit the images",
        x.len() / (h * w).max(1)
    );
    x.fill(T::ZERO);
    if h * w == 0 || col.is_empty() {
        return;
    }
    let (kh, kw, n) = (g.kernel[0], g.kernel[1], g.n);
    let plane = |p: usize, dst: &mut [T]| {
        // p indexes (b, c); every tap of this image plane is summed here, in a fixed order.
        let (b, c) = (p / g.c, p % g.c);
        for i in 0..kh {
            let off_h = (i * g.dilation[0]) as isize - g.padding[0] as isize;
            let (lo_h, hi_h) = valid_range(off_h, g.stride[0], h, oh_n);
            for j in 0..kw {
                let off_w = (j * g.dilation[1]) as isize - g.padding[1] as isize;
                let (lo_w, hi_w) = valid_range(off_w, g.stride[1], w, ow_n);
                let src = &col[((((c * kh + i) * kw + j) * n) + b) * oh_n * ow_n..][..oh_n * ow_n];
                for oh in lo_h..hi_h {
                    let ih = ((oh * g.stride[0]) as isize + off_h) as usize;
                    let line = &mut dst[ih * w..][..w];
                    let taps = &src[oh * ow_n..][..ow_n];
                    for ow in lo_w..hi_w {
                        line[((ow * g.stride[1]) as isize + off_w) as usize] += taps[ow];
                    }
                }
            }
        }
    };
    if col.len() >= PARALLEL_MIN && crate::parallel::allowed() {
        x.par_chunks_mut(h * w).enumerate().for_each(|(p, d)| plane(first + p, d));
    } else {
        x.chunks_mut(h * w).enumerate().for_each(|(p, d)| plane(first + p, d));
    }
}

/// Calls `f(out_pos, winner)` for every output position of one `[h, w]` plane: `winner` is the
/// flat index of the window's first maximal tap in row-major tap order (a NaN beats any
/// number), or `None` when that tap is padding (padding reads as `-inf`). This is the
/// `argmax` of the window's column, so pooling agrees with `unfold` + `argmax` + `gather`.
#[inline]
fn pool_winners<T: Float>(g: &Window, plane: &[T], mut f: impl FnMut(usize, Option<usize>, T)) {
    let [h, w] = g.size;
    let [oh_n, ow_n] = g.out_size().expect("max_pool: the window does not fit the image");
    if g.padding == [0, 0] {
        // Every tap is inside the image: no bounds to check. One output row at a time, tap by
        // tap, so the comparisons of a row are independent (a per-window chain of dependent
        // selects is latency-bound), and branch-free (random data mispredicts half of them).
        let mut best: smallvec::SmallVec<[T; 64]> = smallvec::smallvec![T::ZERO; ow_n];
        let mut at: smallvec::SmallVec<[usize; 64]> = smallvec::smallvec![0; ow_n];
        for oh in 0..oh_n {
            let base = oh * g.stride[0] * w;
            for ow in 0..ow_n {
                let k = base + ow * g.stride[1];
                (best[ow], at[ow]) = (plane[k], k);
            }
            for i in 0..g.kernel[0] {
                for j in 0..g.kernel[1] {
                    if i + j == 0 {
                        continue;
                    }
                    let off = base + i * g.dilation[0] * w + j * g.dilation[1];
                    for (ow, (b, a)) in best.iter_mut().zip(at.iter_mut()).enumerate() {
                        let k = off + ow * g.stride[1];
                        let x = plane[k];
                        let take = (x > *b) | (x.is_nan() & !b.is_nan());
                        *b = if take { x } else { *b };
                        *a = if take { k } else { *a };
                    }
                }
            }
            for ow in 0..ow_n {
                f(oh * ow_n + ow, Some(at[ow]), best[ow]);
            }
        }
        return;
    }
    for oh in 0..oh_n {
        for ow in 0..ow_n {
            let mut best = T::NEG_INFINITY;
            let mut at: Option<usize> = None;
            let mut first = true;
            for i in 0..g.kernel[0] {
                let ih = (oh * g.stride[0] + i * g.dilation[0]) as isize - g.padding[0] as isize;
                for j in 0..g.kernel[1] {
                    let iw = (ow * g.stride[1] + j * g.dilation[1]) as isize - g.padding[1] as isize;
                    let inside = ih >= 0 && iw >= 0 && (ih as usize) < h && (iw as usize) < w;
                    let (x, idx) = if inside {
                        let k = ih as usize * w + iw as usize;
                        (plane[k], Some(k))
                    } else {
                        (T::NEG_INFINITY, None)
                    };
                    if first || x > best || (x.is_nan() && !best.is_nan()) {
                        (best, at, first) = (x, idx, false);
                    }
                }
            }
            f(oh * ow_n + ow, at, best);
        }
    }
}

/// Runs `f(x_plane, out_plane)` over the `n * c` image planes, in parallel when
/// large.
fn per_plane<T: Float>(
    g: &Window,
    x: &[T],
    out: &mut [T],
    out_plane: usize,
    f: impl Fn(&[T], &mut [T]) + Sync,
) {
    let in_plane = g.size[0] * g.size[1];
    if in_plane == 0 || out_plane == 0 {
        return;
    }
    if x.len() >= PARALLEL_MIN && crate::parallel::allowed() {
        out.par_chunks_mut(out_plane).enumerate().for_each(|(p, o)| f(&x[p * in_plane..][..in_plane], o));
    } else {
        out.chunks_mut(out_plane).enumerate().for_each(|(p, o)| f(&x[p * in_plane..][..in_plane], o));
    }
}

/// Max pooling: `out[n, c, oh, ow]` is the maximum of the window at `(oh, ow)` over contiguous
/// `x[n, c, h, w]` (see `pool_winners` for ties, NaN and padding).
///
/// Panics when the buffers do not match the geometry.
pub fn max_pool<T: Float>(g: &Window, x: &[T], out: &mut [T]) {
    let [oh_n, ow_n] = g.out_size().expect("max_pool: the window does not fit the image");
    assert_eq!(x.len(), g.n * g.c * g.size[0] * g.size[1], "max_pool: input length");
    assert_eq!(out.len(), g.n * g.c * oh_n * ow_n, "max_pool: output length");
    if g.size[0] * g.size[1] == 0 {
        // An empty image with padding: every window holds only padding, which reads as -inf.
        out.fill(T::NEG_INFINITY);
        return;
    }
    if is_2x2_halving(g) {
        let w = g.size[1];
        per_plane(g, x, out, oh_n * ow_n, |xp, o| {
            for (oh, orow) in o.chunks_exact_mut(ow_n).enumerate() {
                let (r0, r1) = (&xp[2 * oh * w..][..2 * ow_n], &xp[(2 * oh + 1) * w..][..2 * ow_n]);
                for ((y, a), b) in orow.iter_mut().zip(r0.chunks_exact(2)).zip(r1.chunks_exact(2)) {
                    *y = winner4([a[0], a[1], b[0], b[1]]).1;
                }
            }
        });
        return;
    }
    per_plane(g, x, out, oh_n * ow_n, |xp, o| pool_winners(g, xp, |k, _, v| o[k] = v));
}

/// The usual pooling window: 2x2, stride 2, no padding or dilation.
fn is_2x2_halving(g: &Window) -> bool {
    g.kernel == [2, 2] && g.stride == [2, 2] && g.padding == [0, 0] && g.dilation == [1, 1]
}

/// The first maximum of four taps in row-major order (a NaN beats any number), branch-free:
/// its tap index and value.
#[inline(always)]
fn winner4<T: Float>(t: [T; 4]) -> (usize, T) {
    let (mut at, mut best) = (0, t[0]);
    for (k, &x) in t.iter().enumerate().skip(1) {
        let take = (x > best) | (x.is_nan() & !best.is_nan());
        best = if take { x } else { best };
        at = if take { k } else { at };
    }
    (at, best)
}

/// [`winner4`]'s tap index, as a value of `T`.
#[inline(always)]
fn winner4_at<T: Float>(t: [T; 4]) -> T {
    let (mut at, mut best) = (T::ZERO, t[0]);
    for (k, &x) in t.iter().enumerate().skip(1) {
        let take = (x > best) | (x.is_nan() & !best.is_nan());
        best = if take { x } else { best };
        at = if take { T::from_f64(k as f64) } else { at };
    }
    at
}

/// The gradient of [`max_pool`]: each output's cotangent `gy[n, c, oh, ow]` goes to its
/// window's winning input position (none when padding won); `dx` (`[n, c, h, w]`) is
/// overwritten. Each plane is summed in a fixed order, so the result is deterministic.
///
/// Panics when the buffers do not match the geometry.
pub fn max_pool_backward<T: Float>(g: &Window, x: &[T], gy: &[T], dx: &mut [T]) {
    let [oh_n, ow_n] = g.out_size().expect("max_pool: the window does not fit the image");
    let plane = oh_n * ow_n;
    assert_eq!(x.len(), g.n * g.c * g.size[0] * g.size[1], "max_pool_backward: input length");
    assert_eq!(dx.len(), x.len(), "max_pool_backward: gradient length");
    assert_eq!(gy.len(), g.n * g.c * plane, "max_pool_backward: cotangent length");
    let in_plane = g.size[0] * g.size[1];
    // `per_plane` splits the output; here the output is `dx`, so walk the planes of `x` and
    // `dx` together.
    let halving = is_2x2_halving(g);
    let tiles = halving && g.size[0].is_multiple_of(2) && g.size[1].is_multiple_of(2);
    let run = |p: usize, d: &mut [T]| {
        if !tiles {
            d.fill(T::ZERO);
        }
        let gp = &gy[p * plane..][..plane];
        if halving {
            // Windows tile the image (a last odd row or column stays zero): every position is
            // written once, in order, as the cotangent or zero; no scatter into a cleared plane.
            let (xp, w) = (&x[p * in_plane..][..in_plane], g.size[1]);
            for (oh, grow) in gp.chunks_exact(ow_n).enumerate() {
                let (r0, r1) = (&xp[2 * oh * w..][..2 * ow_n], &xp[(2 * oh + 1) * w..][..2 * ow_n]);
                let (d0, d1) = d[2 * oh * w..][..2 * w].split_at_mut(w);
                // The winner's tap index is carried as a float, in the lanes of the values, so
                // the row vectorises (with a `usize` index it ran 1.7x slower on 28x28 images).
                with_best_simd(
                    #[inline(always)]
                    || {
                        let taps = r0.chunks_exact(2).zip(r1.chunks_exact(2));
                        let outs = d0.chunks_exact_mut(2).zip(d1.chunks_exact_mut(2));
                        for ((&gv, (a, b)), (o0, o1)) in grow.iter().zip(taps).zip(outs) {
                            let at = winner4_at([a[0], a[1], b[0], b[1]]);
                            // `ZERO + gv`, as the scatter into a cleared plane below sums it
                            // (a -0 cotangent lands as +0 either way).
                            let pick = |i: f64| if at == T::from_f64(i) { T::ZERO + gv } else { T::ZERO };
                            (o0[0], o0[1], o1[0], o1[1]) = (pick(0.0), pick(1.0), pick(2.0), pick(3.0));
                        }
                    },
                );
            }
            return;
        }
        pool_winners(g, &x[p * in_plane..][..in_plane], |k, at, _| {
            if let Some(i) = at {
                d[i] += gp[k];
            }
        });
    };
    if in_plane == 0 {
        return;
    }
    if x.len() >= PARALLEL_MIN && crate::parallel::allowed() {
        dx.par_chunks_mut(in_plane).enumerate().for_each(|(p, d)| run(p, d));
    } else {
        dx.chunks_mut(in_plane).enumerate().for_each(|(p, d)| run(p, d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(size: [usize; 2], k: usize, s: usize, p: usize, d: usize) -> Window {
        Window { n: 2, c: 3, size, kernel: [k, k], stride: [s, s], padding: [p, p], dilation: [d, d] }
    }

    /// `<unfold(x), y> == <x, fold(y)>`: fold is unfold's adjoint.
    #[test]
    fn fold_is_the_adjoint_of_unfold() {
        for (size, k, s, p, d) in
            [([5, 4], 3, 1, 1, 1), ([7, 6], 2, 2, 0, 1), ([6, 7], 3, 2, 2, 2), ([3, 3], 1, 3, 0, 1)]
        {
            let g = geom(size, k, s, p, d);
            let xn = g.n * g.c * size[0] * size[1];
            let x: Vec<f64> = (0..xn).map(|i| ((i * 37 % 11) as f64) - 5.0).collect();
            let y: Vec<f64> = (0..g.col_len()).map(|i| ((i * 17 % 7) as f64) - 3.0).collect();
            let mut col = vec![0.0; g.col_len()];
            unfold(&g, &x, 0.0, &mut col);
            let mut back = vec![0.0; xn];
            fold(&g, &y, &mut back);
            let lhs: f64 = col.iter().zip(&y).map(|(a, b)| a * b).sum();
            let rhs: f64 = x.iter().zip(&back).map(|(a, b)| a * b).sum();
            assert_eq!(lhs, rhs, "{g:?}");
            // Parts (as two workers make them) equal the whole.
            let (rows, planes) = (g.col_len() / (col.len() / (g.c * k * k * g.n)), g.n * g.c);
            let (r, q) = (rows / 2, planes / 2);
            let mut halves = vec![0.0; g.col_len()];
            let (lo, hi) = halves.split_at_mut(r * (g.col_len() / rows));
            unfold_part(&g, &x, 0.0, lo, 0);
            unfold_part(&g, &x, 0.0, hi, r);
            assert_eq!(halves, col, "{g:?}");
            let mut halves = vec![0.0; xn];
            let (lo, hi) = halves.split_at_mut(q * size[0] * size[1]);
            fold_part(&g, &y, lo, 0);
            fold_part(&g, &y, hi, q);
            assert_eq!(halves, back, "{g:?}");
        }
    }

    /// Pooling equals the column route it replaces: `unfold` with `-inf` padding, the first
    /// maximum of each column, and `fold` of the cotangent placed at that maximum.
    #[test]
    fn max_pool_matches_unfold_argmax() {
        for (size, k, s, p, d) in [
            ([6, 5], 2, 2, 0, 1),
            ([7, 7], 2, 2, 0, 2),
            ([6, 7], 2, 2, 0, 1),
            ([5, 5], 3, 2, 1, 1),
            ([7, 6], 3, 1, 1, 2),
            ([4, 4], 2, 1, 1, 1),
        ] {
            let g = geom(size, k, s, p, d);
            let xn = g.n * g.c * size[0] * size[1];
            // Repeated values exercise the first-maximum tie rule.
            let x: Vec<f64> = (0..xn).map(|i| ((i * 37 % 5) as f64) - 2.0).collect();
            let [oh, ow] = g.out_size().unwrap();
            let (plane, taps) = (g.n * oh * ow, k * k);
            let mut col = vec![0.0; g.col_len()];
            unfold(&g, &x, f64::NEG_INFINITY, &mut col);
            // Some -0 cotangents: every path lands them as +0, as a sum into zeros does.
            let gy: Vec<f64> =
                (0..g.n * g.c * oh * ow).map(|i| if i % 3 == 0 { -0.0 } else { 1.0 + i as f64 }).collect();
            let (mut want, mut back_col) = (vec![0.0; gy.len()], vec![0.0; g.col_len()]);
            for c in 0..g.c {
                for q in 0..plane {
                    let at = (0..taps).fold(0, |a, t| {
                        if col[(c * taps + t) * plane + q] > col[(c * taps + a) * plane + q] { t } else { a }
                    });
                    let (b, r) = (q / (oh * ow), q % (oh * ow));
                    let o = (b * g.c + c) * oh * ow + r;
                    want[o] = col[(c * taps + at) * plane + q];
                    back_col[(c * taps + at) * plane + q] = gy[o];
                }
            }
            let mut got = vec![0.0; gy.len()];
            max_pool(&g, &x, &mut got);
            assert_eq!(got, want, "{g:?}");
            let (mut dx, mut want_dx) = (vec![1.0; xn], vec![0.0; xn]);
            max_pool_backward(&g, &x, &gy, &mut dx);
            fold(&g, &back_col, &mut want_dx);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&dx), bits(&want_dx), "{g:?}");
        }
    }

    #[test]
    fn out_size_follows_pytorch() {
        assert_eq!(geom([28, 28], 3, 1, 1, 1).out_size(), Some([28, 28]));
        assert_eq!(geom([28, 28], 2, 2, 0, 1).out_size(), Some([14, 14]));
        assert_eq!(geom([7, 7], 3, 2, 1, 2).out_size(), Some([3, 3]));
        assert_eq!(geom([2, 2], 3, 1, 0, 1).out_size(), None);
    }
}
