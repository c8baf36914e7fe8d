//! The products against naive sums, and the bit-level rules: accumulating and adding a bias
//! equal a product followed by an add, signed zeros as gemm gives them, and column tails.

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

/// The narrow kernels (a contraction of at most 8, or at most 4 result columns) on right
/// factors whose rows or columns are padded or offset, each way round.
#[test]
fn narrow_products_read_padded_right_factors() {
    for &(m, n, k) in &[(9, 20, 3), (9, 40, 8), (11, 1, 40), (11, 3, 33), (5, 4, 16)] {
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.29).sin()).collect();
        let b: Vec<f64> = (0..(k + 3) * (n + 5)).map(|i| (i as f64 * 0.13).cos()).collect();
        let layouts = [
            MatLayout { offset: 0, batch_stride: 0, row_stride: n + 5, col_stride: 1 },
            MatLayout { offset: 0, batch_stride: 0, row_stride: 1, col_stride: k + 3 },
            MatLayout { offset: 2, batch_stride: 0, row_stride: n, col_stride: 1 },
            MatLayout { offset: 2, batch_stride: 0, row_stride: 1, col_stride: k },
        ];
        for bl in layouts {
            let want = naive(m, n, k, &a, MatLayout::row_major(m, k), &b, bl);
            let mut got = vec![0.0; m * n];
            matmul(MatmulDims { batch: 1, m, n, k }, &a, MatLayout::row_major(m, k), &b, bl, &mut got, false);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "m={m} n={n} k={k} {bl:?}: {g} against {w}");
            }
        }
    }
}

/// The short-contraction kernel (`k <= 8`, 64- and 16-wide blocks, then single columns): each
/// element is the FMAs in order of `p` from +0.0, then `+ 0.0`, then the bias or `dst +`, bit
/// for bit, for column counts that reach every kind of block.
#[test]
fn short_contractions_are_ordered_fma_sums_in_every_block() {
    for (m, k) in [(3, 1), (5, 4), (2, 8)] {
        for n in [16, 17, 64, 80, 97, 145] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos() * 3.0).collect();
            let bias: Vec<f32> = (0..n).map(|j| (j as f32 * 0.5).sin()).collect();
            let c: Vec<f32> = (0..m * n).map(|i| (i as f32 * 1.3).cos() * 10.0).collect();
            let sum =
                |i: usize, j: usize| (0..k).fold(0.0f32, |s, p| a[i * k + p].mul_add(b[p * n + j], s)) + 0.0;
            let dims = MatmulDims { batch: 1, m, n, k };
            let (al, bl) = (MatLayout::row_major(m, k), MatLayout::row_major(k, n));
            let mut plain = vec![7.0f32; m * n];
            matmul(dims, &a, al, &b, bl, &mut plain, false);
            let mut biased = vec![7.0f32; m * n];
            matmul_bias(dims, &a, al, &b, bl, &bias, &mut biased);
            let mut acc = c.clone();
            matmul(dims, &a, al, &b, bl, &mut acc, true);
            for i in 0..m {
                for j in 0..n {
                    let (s, at) = (sum(i, j), format!("m={m} n={n} k={k} at ({i}, {j})"));
                    assert_eq!(plain[i * n + j].to_bits(), s.to_bits(), "plain, {at}");
                    assert_eq!(biased[i * n + j].to_bits(), (s + bias[j]).to_bits(), "bias, {at}");
                    assert_eq!(acc[i * n + j].to_bits(), (c[i * n + j] + s).to_bits(), "accumulating, {at}");
                }
            }
        }
    }
}

/// The few-columns kernel (`n <= 4`, `k >= 16`, rows of `a` contiguous, four rows at a time
/// and then one): each element is its own dot product, sixteen FMA chains over `p` from +0.0
/// and the tail's chain, added in order, then `+ 0.0` and the bias, bit for bit.
#[test]
fn few_column_products_are_dot_products_whatever_the_row_grouping() {
    for (m, k) in [(9, 16), (4, 40), (3, 128), (11, 131)] {
        for n in 1..=4 {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos() * 3.0).collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32 - 1.5).collect();
            let dot = |i: usize, j: usize| {
                let (x, y) = (|p: usize| a[i * k + p], |p: usize| b[p * n + j]);
                let mut acc = [0.0f32; 16];
                let full = k / 16 * 16;
                for p in 0..full {
                    acc[p % 16] = x(p).mul_add(y(p), acc[p % 16]);
                }
                let s = (full..k).fold(0.0f32, |s, p| x(p).mul_add(y(p), s));
                acc.iter().fold(s, |s, &v| s + v) + 0.0
            };
            let dims = MatmulDims { batch: 1, m, n, k };
            let (al, bl) = (MatLayout::row_major(m, k), MatLayout::row_major(k, n));
            let mut got = vec![7.0f32; m * n];
            matmul_bias(dims, &a, al, &b, bl, &bias, &mut got);
            for i in 0..m {
                for j in 0..n {
                    let want = dot(i, j) + bias[j];
                    assert_eq!(got[i * n + j].to_bits(), want.to_bits(), "m={m} n={n} k={k} at ({i}, {j})");
                }
            }
        }
    }
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

/// The packed kernel: each element is the fused multiply-adds in order of `p` from `+0.0`
/// (then `dst +`, `+ 0.0` and the bias), checked bit for bit against that scalar sum, for
/// either layout of each factor, column tails, short and long contractions, and any split of
/// the rows.
#[test]
fn packed_products_are_ordered_fma_sums_whatever_the_rows() {
    use packed::{available, matmul_packed, pack, packed_len};
    if !available() {
        eprintln!("skipped: the packed kernel needs AVX2 and FMA, which this CPU lacks");
        return;
    }
    for &(m, n, k) in &[(1, 16, 1), (7, 17, 5), (16, 512, 128), (13, 57, 57), (50, 130, 33), (100, 48, 300)] {
        let a: Vec<f32> = (0..m * k + 7).map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0).collect();
        let b: Vec<f32> = (0..k * n + 5).map(|i| ((i * 53 % 97) as f32 - 48.0) / 23.0).collect();
        let c: Vec<f32> = (0..m * n).map(|i| ((i * 29 % 89) as f32 - 44.0) / 7.0).collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.25 - 3.0).collect();
        for (al, bl) in [
            (MatLayout::row_major(m, k), MatLayout::row_major(k, n)),
            (
                MatLayout { offset: 3, ..MatLayout::row_major(k, m).transposed() },
                MatLayout { offset: 2, ..MatLayout::row_major(n, k).transposed() },
            ),
        ] {
            // A reused buffer of the right length (as a run's): padding must be written anew.
            let mut packed = vec![f32::NAN; packed_len(k, n)];
            pack(k, n, &b, bl, &mut packed);
            assert_eq!(packed.len(), packed_len(k, n));
            for (accumulate, with_bias) in [(false, false), (true, false), (false, true), (true, true)] {
                let want: Vec<f32> = (0..m * n)
                    .map(|e| {
                        let (i, j) = (e / n, e % n);
                        let mut s = 0.0f32;
                        for p in 0..k {
                            let x = a[al.offset + i * al.row_stride + p * al.col_stride];
                            s = x.mul_add(b[bl.offset + p * bl.row_stride + j * bl.col_stride], s);
                        }
                        let s = if accumulate { c[e] + s } else { s } + 0.0;
                        if with_bias { s + bias[j] } else { s }
                    })
                    .collect();
                let b_row = with_bias.then_some(&bias[..]);
                let mut whole = c.clone();
                matmul_packed((m, n, k), &a, al, &packed, &mut whole, accumulate, b_row);
                let same = |x: &[f32], y: &[f32]| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same(&whole, &want), "m={m} n={n} k={k} {al:?} acc={accumulate} bias={with_bias}");
                // The rows in two calls (as two workers run a split product): the same bits.
                let cut = m / 2;
                let mut parts = c.clone();
                let (top, bottom) = parts.split_at_mut(cut * n);
                matmul_packed((cut, n, k), &a, al, &packed, top, accumulate, b_row);
                let lower = MatLayout { offset: al.offset + cut * al.row_stride, ..al };
                matmul_packed((m - cut, n, k), &a, lower, &packed, bottom, accumulate, b_row);
                assert!(same(&parts, &want), "rows split at {cut}: m={m} n={n} k={k}");
                // And within a small tolerance of the ordinary product.
                let mut plain = c.clone();
                let dims = MatmulDims { batch: 1, m, n, k };
                match b_row {
                    Some(row) => {
                        matmul_bias(dims, &a, al, &b, bl, row, &mut plain);
                        if accumulate {
                            plain.iter_mut().zip(&c).for_each(|(p, c)| *p += c);
                        }
                    }
                    None => matmul(dims, &a, al, &b, bl, &mut plain, accumulate),
                }
                for (g, w) in whole.iter().zip(&plain) {
                    assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "m={m} n={n} k={k}: {g} against {w}");
                }
            }
        }
    }
}

#[test]
fn a_relu_epilogue_gives_the_bits_of_a_product_then_a_relu() {
    // Every route: one row (gemv), a short contraction (`k <= 8`, 64- and 16-wide blocks and a
    // scalar tail), at most four columns (both layouts of `a`), gemm with column tails, and
    // an empty contraction. Plain, with a bias row (signed zeros and a NaN in it), and
    // accumulating into an addend; the bias route is also split by rows, as two workers run it.
    let relu = |x: f32| if x < 0.0 { 0.0 } else { x };
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (m, n, k) in [(1, 40, 7), (9, 83, 3), (9, 20, 8), (7, 2, 40), (6, 4, 17), (8, 65, 128), (5, 33, 0)] {
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.7).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.3).cos()).collect();
        let c: Vec<f32> = (0..m * n).map(|i| (i as f32 * 1.3).sin()).collect();
        let row: Vec<f32> = (0..n).map(|j| [0.0, -0.0, 0.5, -0.25, f32::NAN][j % 5]).collect();
        let bl = MatLayout::row_major(k, n);
        for al in [MatLayout::row_major(m, k), MatLayout::row_major(k, m).transposed()] {
            let dims = MatmulDims { batch: 1, m, n, k };
            let mut want = vec![0.0f32; m * n];
            matmul(dims, &a, al, &b, bl, &mut want, false);
            want.iter_mut().for_each(|x| *x = relu(*x));
            let mut got = vec![7.0f32; m * n];
            matmul_relu(dims, &a, al, &b, bl, None, &mut got, false);
            assert_eq!(bits(&got), bits(&want), "plain m={m} n={n} k={k} {al:?}");
            assert!(k == 0 || (got.contains(&0.0) && got.iter().any(|&x| x > 0.0)), "{got:?}");

            let mut want = vec![0.0f32; m * n];
            matmul_bias(dims, &a, al, &b, bl, &row, &mut want);
            want.iter_mut().for_each(|x| *x = relu(*x));
            let mut got = vec![7.0f32; m * n];
            matmul_relu(dims, &a, al, &b, bl, Some(&row), &mut got, false);
            assert_eq!(bits(&got), bits(&want), "bias m={m} n={n} k={k} {al:?}");
            let half = m / 2;
            let mut halves = vec![7.0f32; m * n];
            let (lo, hi) = halves.split_at_mut(half * n);
            matmul_relu(MatmulDims { m: half, ..dims }, &a, al, &b, bl, Some(&row), lo, false);
            let al_hi = MatLayout { offset: half * al.row_stride, ..al };
            matmul_relu(MatmulDims { m: m - half, ..dims }, &a, al_hi, &b, bl, Some(&row), hi, false);
            assert_eq!(bits(&halves), bits(&want), "bias in row halves m={m} n={n} k={k} {al:?}");

            let mut want = c.clone();
            matmul(dims, &a, al, &b, bl, &mut want, true);
            want.iter_mut().for_each(|x| *x = relu(*x));
            let mut got = c.clone();
            matmul_relu(dims, &a, al, &b, bl, None, &mut got, true);
            assert_eq!(bits(&got), bits(&want), "accumulating m={m} n={n} k={k} {al:?}");
        }
    }
}
