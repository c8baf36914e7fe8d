//! Products against a right factor packed once and reused: `f32` panels of [`PANEL`] columns,
//! each `k` rows of contiguous values, read by an AVX2/FMA microkernel of 6 result rows by 16
//! columns.
//!
//! Why: a recurrent step multiplies by the same weights at every time step. gemm gets each
//! factor as strided memory and, for a few rows (`[16, 128] @ [128, 512]`), reads the right
//! factor's rows 2 KiB apart, which all fall into two of the L1 cache's sets. Packed once per
//! run, the 32 or 64 products of an unrolled LSTM step read 16 contiguous columns per row of
//! `k`: 74 against 47 GFLOP/s for gemm on that shape (AVX2 EPYC, one thread, `bench --only
//! lstm`'s "packed" line).
//!
//! Bits: every result element is `(+0.0) + Σ_p a[i, p] * b[p, j]`, fused multiply-adds in
//! order of `p` from `+0.0`, then `dst +` it when accumulating, then `+ 0.0` and the bias as in
//! [`super::product`]'s closing pass. Nothing depends on `m` or on which rows a call covers,
//! so a product split by rows between workers keeps its bits.

use super::MatLayout;
use rayon::prelude::*;

/// Columns per packed panel (two AVX registers of `f32`).
pub const PANEL: usize = 16;

/// Rows per microkernel call.
const MR: usize = 6;

/// Result rows per block: the block's rows of the left factor stay in L2 while every panel
/// passes over them.
const MC: usize = 48;

/// The longest contraction packed: a panel of `k` rows is `64 k` bytes, which stays in L2.
pub const MAX_K: usize = 1024;

/// Whether this CPU runs the packed kernel (x86-64 with AVX2 and FMA).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether a `[k, n]` right factor may be packed: at least one panel wide, at most
/// [`MAX_K`] deep, at most 16 MiB packed.
pub fn packable(k: usize, n: usize) -> bool {
    (1..=MAX_K).contains(&k) && n >= PANEL && packed_len(k, n) <= 1 << 22
}

/// Elements of the packed form of a `[k, n]` factor (its last panel padded with zeros).
pub fn packed_len(k: usize, n: usize) -> usize {
    n.div_ceil(PANEL) * PANEL * k
}

/// Packs the `[k, n]` matrix `rhs` (read through `layout`; its batch fields are ignored) into
/// `out`: panel `q` holds columns `16 q..16 q + 16` row by row, zeros past column `n`.
///
/// Panics if the layout reaches outside `rhs`.
pub fn pack(k: usize, n: usize, rhs: &[f32], layout: MatLayout, out: &mut Vec<f32>) {
    assert!(k > 0 && n > 0, "matmul_packed: pack of an empty [{k}, {n}] factor");
    let last = layout.offset + (k - 1) * layout.row_stride + (n - 1) * layout.col_stride;
    assert!(last < rhs.len(), "matmul_packed: the right factor's layout reaches outside it");
    // A run packs the same factor into the same buffer: resized (zeroed) only when its length
    // changes; the last panel's padding is written below.
    if out.len() != packed_len(k, n) {
        out.clear();
        out.resize(packed_len(k, n), 0.0);
    }
    let (rs, cs) = (layout.row_stride, layout.col_stride);
    for (q, panel) in out.chunks_exact_mut(PANEL * k).enumerate() {
        let j0 = q * PANEL;
        let w = PANEL.min(n - j0);
        if cs == 1 {
            // Rows of the factor are contiguous: copy 16 values per row.
            for (p, row) in panel.chunks_exact_mut(PANEL).enumerate() {
                let at = layout.offset + p * rs + j0;
                row[..w].copy_from_slice(&rhs[at..at + w]);
                row[w..].fill(0.0);
            }
        } else {
            // A transposed factor: walk each column down its contiguous run.
            for c in 0..PANEL {
                let base = layout.offset + (j0 + c) * cs;
                for (p, row) in panel.chunks_exact_mut(PANEL).enumerate() {
                    row[c] = if c < w { rhs[base + p * rs] } else { 0.0 };
                }
            }
        }
    }
}

/// `dst (+)= lhs @ rhs (+ bias row)` for `[m, k] @ [k, n]`, with `rhs` packed by [`pack`];
/// `dst` is contiguous `[m, n]`. Rows are shared out with rayon when the product is large
/// (which changes no bits).
///
/// Panics if the CPU lacks AVX2/FMA ([`available`]), or if a length or layout is wrong.
#[allow(clippy::too_many_arguments)]
pub fn matmul_packed(
    (m, n, k): (usize, usize, usize),
    lhs: &[f32],
    ll: MatLayout,
    packed: &[f32],
    dst: &mut [f32],
    accumulate: bool,
    bias: Option<&[f32]>,
) {
    assert!(available(), "matmul_packed: this CPU lacks AVX2/FMA");
    assert_eq!(packed.len(), packed_len(k, n), "matmul_packed: packed factor of the wrong size");
    assert_eq!(dst.len(), m * n, "matmul_packed: destination has the wrong length");
    assert!(bias.is_none_or(|b| b.len() == n), "matmul_packed: the bias row has the wrong length");
    if m == 0 {
        return;
    }
    assert!(k > 0, "matmul_packed: empty contraction");
    let last = ll.offset + (m - 1) * ll.row_stride + (k - 1) * ll.col_stride;
    assert!(last < lhs.len(), "matmul_packed: lhs layout out of bounds");
    let block = |(b, d): (usize, &mut [f32])| {
        let rows = d.len() / n;
        let a = &lhs[ll.offset + b * MC * ll.row_stride..];
        // SAFETY: the AVX2/FMA check above; `a` holds rows `b*MC..b*MC+rows` of the left factor
        // under `ll` (bounds asserted), `packed` holds the panels of k rows, `d` is rows x n.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            block_avx2(rows, n, k, a, (ll.row_stride, ll.col_stride), packed, d, accumulate, bias)
        };
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (rows, a);
            unreachable!("matmul_packed: `available` is false off x86-64")
        }
    };
    let parallel = m > MC
        && m * n * k >= super::PARALLEL_MIN_FLOPS
        && crate::parallel::allowed()
        && rayon::current_num_threads() > 1;
    if parallel {
        dst.par_chunks_mut(MC * n).enumerate().for_each(block);
    } else {
        dst.chunks_mut(MC * n).enumerate().for_each(block);
    }
}

/// Up to [`MC`] rows of the product.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn block_avx2(
    rows: usize,
    n: usize,
    k: usize,
    a: &[f32],
    (ars, acs): (usize, usize),
    packed: &[f32],
    d: &mut [f32],
    accumulate: bool,
    bias: Option<&[f32]>,
) {
    for (q, panel) in packed.chunks_exact(PANEL * k).enumerate() {
        let j0 = q * PANEL;
        let mut i = 0;
        while i < rows {
            let r = MR.min(rows - i);
            let t = Tile { a: &a[i * ars..], ars, acs, panel, k };
            let out = (&mut d[i * n..], n, j0, PANEL.min(n - j0));
            let bias = bias.map(|b| &b[j0..]);
            match r {
                6 => t.run::<6>(out, accumulate, bias),
                5 => t.run::<5>(out, accumulate, bias),
                4 => t.run::<4>(out, accumulate, bias),
                3 => t.run::<3>(out, accumulate, bias),
                2 => t.run::<2>(out, accumulate, bias),
                _ => t.run::<1>(out, accumulate, bias),
            }
            i += r;
        }
    }
}

/// One microkernel's operands: `R` rows of the left factor from `a` and one packed panel.
#[cfg(target_arch = "x86_64")]
struct Tile<'a> {
    a: &'a [f32],
    ars: usize,
    acs: usize,
    panel: &'a [f32],
    k: usize,
}

#[cfg(target_arch = "x86_64")]
impl Tile<'_> {
    /// `R` rows by 16 columns: 2R accumulators, two panel loads and R broadcasts per row of
    /// the contraction. Writes the first `w` columns at `d[r * n + j0..]`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn run<const R: usize>(
        &self,
        (d, n, j0, w): (&mut [f32], usize, usize, usize),
        accumulate: bool,
        bias: Option<&[f32]>,
    ) {
        use std::arch::x86_64::*;
        assert!(R >= 1 && (R - 1) * self.ars + (self.k - 1) * self.acs < self.a.len());
        assert!(self.panel.len() == PANEL * self.k && (R - 1) * n + j0 + w <= d.len());
        let mut lo = [_mm256_setzero_ps(); R];
        let mut hi = [_mm256_setzero_ps(); R];
        let (a, b) = (self.a.as_ptr(), self.panel.as_ptr());
        for p in 0..self.k {
            // SAFETY: p < k and r < R keep both reads inside the bounds asserted above.
            unsafe {
                let b0 = _mm256_loadu_ps(b.add(p * PANEL));
                let b1 = _mm256_loadu_ps(b.add(p * PANEL + 8));
                for r in 0..R {
                    let x = _mm256_broadcast_ss(&*a.add(r * self.ars + p * self.acs));
                    lo[r] = _mm256_fmadd_ps(x, b0, lo[r]);
                    hi[r] = _mm256_fmadd_ps(x, b1, hi[r]);
                }
            }
        }
        if w == PANEL {
            // A full panel: the destination rows and the bias are read and written in place,
            // by the same adds as the staged path below (so the same bits), without its copies.
            let bias = bias.map(|b| &b[..PANEL]);
            for r in 0..R {
                let out = &mut d[r * n + j0..r * n + j0 + PANEL];
                // SAFETY: `out` and `bias` hold 16 elements each.
                unsafe {
                    let o = out.as_mut_ptr();
                    let dst = accumulate.then_some(o.cast_const());
                    let (s0, s1) = epilogue(lo[r], hi[r], dst, bias.map(<[f32]>::as_ptr));
                    _mm256_storeu_ps(o, s0);
                    _mm256_storeu_ps(o.add(8), s1);
                }
            }
            return;
        }
        // A partial panel: the `w` columns staged through 16-element rows.
        let mut bias_row = [0.0f32; PANEL];
        if let Some(b) = bias {
            bias_row[..w].copy_from_slice(&b[..w]);
        }
        for r in 0..R {
            let out = &mut d[r * n + j0..r * n + j0 + w];
            let mut row = [0.0f32; PANEL];
            if accumulate {
                row[..w].copy_from_slice(out);
            }
            // SAFETY: `row` and `bias_row` have 16 elements.
            unsafe {
                let dst = accumulate.then_some(row.as_ptr());
                let (s0, s1) = epilogue(lo[r], hi[r], dst, bias.map(|_| bias_row.as_ptr()));
                _mm256_storeu_ps(row.as_mut_ptr(), s0);
                _mm256_storeu_ps(row.as_mut_ptr().add(8), s1);
            }
            out.copy_from_slice(&row[..w]);
        }
    }
}

/// The epilogue of a 16-column row of sums `(lo, hi)`, in the order that defines the bits
/// (module docs): `dst +` the sums when accumulating, then `+ 0.0`, then the bias. Both paths
/// of [`Tile::run`] (a full panel in place, a partial one staged) go through it.
///
/// # Safety
/// `dst` and `bias`, where given, must each be valid for reading 16 `f32`s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn epilogue(
    lo: std::arch::x86_64::__m256,
    hi: std::arch::x86_64::__m256,
    dst: Option<*const f32>,
    bias: Option<*const f32>,
) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
    use std::arch::x86_64::*;
    let (mut s0, mut s1) = (lo, hi);
    // SAFETY: the caller guarantees 16 readable elements behind each pointer.
    unsafe {
        if let Some(o) = dst {
            s0 = _mm256_add_ps(_mm256_loadu_ps(o), s0);
            s1 = _mm256_add_ps(_mm256_loadu_ps(o.add(8)), s1);
        }
        let zero = _mm256_setzero_ps();
        s0 = _mm256_add_ps(s0, zero);
        s1 = _mm256_add_ps(s1, zero);
        if let Some(b) = bias {
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(b));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(b.add(8)));
        }
    }
    (s0, s1)
}
