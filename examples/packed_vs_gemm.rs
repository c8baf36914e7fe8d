//! The gemm crate against janus's packed AVX2 kernel (`janus_kernels::matmul::packed`) on the
//! LSTM step's product shapes and on larger ones, one thread each, hot in cache: why only right
//! factors that several products share are packed (issue 13).
//!
//! ```text
//! cargo run --release --example packed_vs_gemm
//! ```
//!
//! Each line gives the best of five timed loops: gemm, packing the right factor alone, the
//! packed product alone, and pack plus product (what a product that packs its own factor
//! would cost). On a CPU without AVX2 and FMA it prints that and exits.
use janus_kernels::matmul::{self, MatLayout, MatmulDims, packed};
use std::time::Instant;

/// Best seconds per call over five loops of `reps` calls, after one warm-up call.
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

fn main() {
    if !packed::available() {
        println!("this CPU lacks AVX2/FMA: the packed kernel does not run here");
        return;
    }
    let shapes: &[(&str, usize, usize, usize, bool)] = &[
        ("W_h grad half [128,512]^T-layout @ [512,512]", 128, 512, 512, true),
        ("W_x grad half [65,512]^T-layout @ [512,512]", 65, 512, 512, true),
        ("h @ W_h [16,128]@[128,512]", 16, 512, 128, false),
        ("dG @ W_h^T [16,512]@[512,128]", 16, 128, 512, false),
        ("square 512", 512, 512, 512, false),
        ("square 1024 (k=1024)", 1024, 1024, 1024, false),
        ("[256,128]@[128,512]", 256, 512, 128, false),
        ("x @ W_x [16,65]@[65,512]", 16, 512, 65, false),
    ];
    for &(name, m, n, k, lhs_t) in shapes {
        let lhs: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let rhs: Vec<f32> = (0..k * n).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let ll = if lhs_t { MatLayout::row_major(k, m).transposed() } else { MatLayout::row_major(m, k) };
        let rl = MatLayout::row_major(k, n);
        let mut d = vec![0f32; m * n];
        let reps = (2e8 / (m * n * k) as f64).ceil() as usize;
        let dims = MatmulDims { batch: 1, m, n, k };
        let g = time(reps, || {
            janus_kernels::parallel::serial(|| matmul::matmul(dims, &lhs, ll, &rhs, rl, &mut d, false))
        });
        let mut p = Vec::new();
        let pk = time(reps, || packed::pack(k, n, &rhs, rl, &mut p));
        let mut d2 = vec![0f32; m * n];
        let mp = time(reps, || {
            janus_kernels::parallel::serial(|| {
                packed::matmul_packed((m, n, k), &lhs, ll, &p, &mut d2, false, None)
            })
        });
        let bias: Vec<f32> = (0..n).map(|j| j as f32 * 1e-3).collect();
        let mpe = time(reps, || {
            janus_kernels::parallel::serial(|| {
                packed::matmul_packed((m, n, k), &lhs, ll, &p, &mut d2, true, Some(&bias))
            })
        });
        let gf = |t: f64| 2.0 * (m * n * k) as f64 / t / 1e9;
        println!(
            "{name:48} gemm {:7.1} us {:5.1} GF | pack {:6.1} us | packed mm {:7.1} us {:5.1} GF | pack+mm {:5.1} GF | +acc+bias {:7.1} us",
            g * 1e6,
            gf(g),
            pk * 1e6,
            mp * 1e6,
            gf(mp),
            gf(pk + mp),
            mpe * 1e6
        );
    }
}
