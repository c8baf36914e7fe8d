//! How close to the hardware the bench runs: the machine's practical f32 GEMM peak, measured in
//! the same run, and the GEMM work of the LSTM step, so each LSTM row can report its achieved
//! GFLOP/s and its share of that peak.

use janus_kernels::matmul::{MatLayout, MatmulDims, matmul, matmul_bias};
use std::time::Instant;

/// The best of `runs` f32 products `[n, n] @ [n, n]` through the kernel crate's GEMM (the
/// `gemm` crate, on every rayon thread), in GFLOP/s. The best, not the median: a peak is what
/// the machine can do, and noise only ever slows a run.
pub fn gemm_peak_gflops(n: usize, runs: usize) -> f64 {
    let ms = product_times(n, n, n, false, runs).into_iter().fold(f64::INFINITY, f64::min);
    2.0 * (n * n * n) as f64 / (ms * 1e-3) / 1e9
}

/// The GEMM FLOPs (2·M·N·K per product) of one LSTM LM training step with `t` steps, batch `b`,
/// vocabulary `v` and hidden size `h`, forward and backward: per time step the products
/// `x @ wx` (`[b, v] @ [v, 4h]`), `h @ wh` (`[b, h] @ [h, 4h]`) and `h @ wy` (`[b, h] @ [h, v]`);
/// backward, each product's two adjoints, except the input gradient of `x @ wx` (the data need
/// none).
pub fn lstm_step_gemm_flops(t: usize, b: usize, v: usize, h: usize) -> f64 {
    let mm = |m: usize, k: usize, n: usize| 2.0 * (m * k * n) as f64;
    let (xw, hw, hy) = (mm(b, v, 4 * h), mm(b, h, 4 * h), mm(b, h, v));
    let forward = xw + hw + hy;
    let backward = xw + 2.0 * hw + 2.0 * hy;
    t as f64 * (forward + backward)
}

/// The LSTM step's products (those [`lstm_step_gemm_flops`] counts, the weight gradients as one
/// product each over all `t * b` rows) each timed alone, row-major, on one thread, and their
/// sum halved: the step's GEMM time if the two workers ran only its products, at the speed each
/// reaches with its operands hot in cache and nothing else running. In ms; the median of `runs`
/// timings per shape. Set against the step's time it shows what the rest costs: the
/// elementwise work, and products that run slower among the step's other work.
pub fn lstm_step_gemm_floor_ms(t: usize, b: usize, v: usize, h: usize, runs: usize) -> f64 {
    // (m, k, n, count per step)
    let products = [
        (b, v, 4 * h, t),     // x @ wx
        (b, h, 4 * h, t),     // h @ wh
        (b, h, v, t),         // h @ wy
        (b, 4 * h, h, t - 1), // dz @ whᵀ (the first step's h is no input)
        (b, v, h, t),         // dy @ wyᵀ
        (v, t * b, 4 * h, 1), // xᵀ @ dz
        (h, t * b, 4 * h, 1), // hᵀ @ dz
        (h, t * b, v, 1),     // hᵀ @ dy
    ];
    let ms = janus_kernels::parallel::serial(|| {
        products.iter().map(|&(m, k, n, count)| count as f64 * product_ms(m, k, n, false, runs)).sum::<f64>()
    });
    ms / 2.0
}

/// Products whose result has a column count past a multiple of 16 (the LSTM's output layer
/// `[16, 128] @ [128, 65]` and its weight gradient's half `[128, 512] @ [512, 65]`) next to
/// the multiple of 16 below, on one thread: `(m, k, n, µs)` per product, the median of `runs`.
/// `janus_kernels::matmul` runs the extra columns apart (its `tail`), so the gap stays small.
pub fn column_tail_us(runs: usize) -> Vec<(usize, usize, usize, f64)> {
    let shapes = [
        (16, 128, 64),
        (16, 128, 65),
        (16, 128, 80),
        (16, 128, 81),
        (16, 128, 128),
        (16, 128, 129),
        (128, 512, 64),
        (128, 512, 65),
    ];
    janus_kernels::parallel::serial(|| {
        shapes.iter().map(|&(m, k, n)| (m, k, n, 1e3 * product_ms(m, k, n, false, runs))).collect()
    })
}

/// CartPole's narrow products on one thread, a half of each as two workers run them: the input
/// layer `[250, 4] @ [4, 128] + b`, the gradient product `[250, 2] @ [2, 128]` and the longest
/// contraction of that kernel (`k = 8`), then the output layer `[250, 128] @ [128, 2] + b`
/// (the few-columns kernel). `(m, k, n, bias, µs)` per product, the median of `runs`.
pub fn narrow_product_us(runs: usize) -> Vec<(usize, usize, usize, bool, f64)> {
    let shapes = [
        (250, 4, 128, true),
        (250, 2, 128, false),
        (250, 8, 128, false),
        (250, 8, 128, true),
        (250, 128, 2, true),
    ];
    janus_kernels::parallel::serial(|| {
        shapes.iter().map(|&(m, k, n, b)| (m, k, n, b, 1e3 * product_ms(m, k, n, b, runs))).collect()
    })
}

/// The median time of one `[m, k] @ [k, n]` product (plus a bias row when `bias`), in ms.
fn product_ms(m: usize, k: usize, n: usize, bias: bool, runs: usize) -> f64 {
    let mut times = product_times(m, k, n, bias, runs);
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// `runs` timings of one `[m, k] @ [k, n]` f32 product (plus a bias row when `bias`), in ms
/// each, after a warm-up run that pays for page faults and packing buffers. Short products
/// repeat within one timing, so the clock's resolution does not matter.
fn product_times(m: usize, k: usize, n: usize, bias: bool, runs: usize) -> Vec<f64> {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut c = vec![0f32; m * n];
    let row: Vec<f32> = (0..n).map(|j| (j % 3) as f32 * 0.1).collect();
    let dims = MatmulDims { batch: 1, m, n, k };
    let (la, lb) = (MatLayout::row_major(m, k), MatLayout::row_major(k, n));
    let reps = (1usize << 24).div_ceil(m * n * k).max(1);
    (0..runs + 1)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                if bias {
                    matmul_bias(dims, &a, la, &b, lb, &row, &mut c);
                } else {
                    matmul(dims, &a, la, &b, lb, &mut c, false);
                }
            }
            t.elapsed().as_secs_f64() * 1e3 / reps as f64
        })
        .skip(1)
        .collect()
}
