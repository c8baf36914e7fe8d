//! How close to the hardware the bench runs: the machine's practical f32 GEMM peak, measured in
//! the same run, and the GEMM work of the LSTM step, so each LSTM row can report its achieved
//! GFLOP/s and its share of that peak.

use janus_kernels::matmul::{MatLayout, MatmulDims, matmul};
use std::time::Instant;

/// The best of `runs` f32 products `[n, n] @ [n, n]` through the kernel crate's GEMM (the
/// `gemm` crate, on every rayon thread), in GFLOP/s. The best, not the median: a peak is what
/// the machine can do, and noise only ever slows a run.
pub fn gemm_peak_gflops(n: usize, runs: usize) -> f64 {
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.1).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut c = vec![0f32; n * n];
    let dims = MatmulDims { batch: 1, m: n, n, k: n };
    let layout = MatLayout::row_major(n, n);
    let flops = 2.0 * (n * n * n) as f64;
    (0..runs + 1)
        .map(|_| {
            let t = Instant::now();
            matmul(dims, &a, layout, &b, layout, &mut c, false);
            flops / t.elapsed().as_secs_f64() / 1e9
        })
        .skip(1) // the first run pays for page faults and packing buffers
        .fold(0.0, f64::max)
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
