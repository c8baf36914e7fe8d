//! Foundation benchmarks (eager CPU): GEMM throughput against a raw `gemm` call, eager per-op
//! overhead, vectorised transcendentals against scalar libm, the host side of a CUDA elementwise
//! launch (no GPU needed), and the eager LSTM LM step.
//!
//!     cargo bench --bench foundation

#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;
#[path = "util.rs"]
mod util;

use janus::prelude::*;
use janus_kernels::matmul::{MatLayout, MatmulDims};
use std::hint::black_box;
use util::{Table, median_secs};

fn gemm_table() {
    let t = Table::new(
        "GEMM, f32, single call (GFLOP/s, median)",
        &["shape", "janus matmul", "janus kernel", "raw gemm crate"],
    );
    for (m, k, n) in [(32, 65, 512), (32, 128, 512), (128, 128, 128), (1024, 1024, 1024)] {
        let flops = 2.0 * (m * n * k) as f64;
        let reps = if m == 1024 { 7 } else { 51 };
        let inner = if m == 1024 { 1 } else { 200 };
        let a = Tensor::randn([m, k]);
        let b = Tensor::randn([k, n]);
        let janus = median_secs(reps, inner, || drop(black_box(a.matmul(&b))));
        let (av, bv) = (a.to_vec::<f32>(), b.to_vec::<f32>());
        let mut out = vec![0.0f32; m * n];
        let dims = MatmulDims { batch: 1, m, n, k };
        let kernel = median_secs(reps, inner, || {
            janus_kernels::matmul::matmul(
                dims,
                &av,
                MatLayout::row_major(m, k),
                &bv,
                MatLayout::row_major(k, n),
                &mut out,
                false,
            )
        });
        let par = if m * n * k >= janus_kernels::matmul::PARALLEL_MIN_FLOPS {
            gemm::Parallelism::Rayon(0)
        } else {
            gemm::Parallelism::None
        };
        let raw = median_secs(reps, inner, || {
            // SAFETY: all three buffers are row-major with exactly the sizes gemm reads/writes.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    out.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    av.as_ptr(),
                    1,
                    k as isize,
                    bv.as_ptr(),
                    1,
                    n as isize,
                    1.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                )
            }
        });
        let g = |s: f64| format!("{:.1}", flops / s / 1e9);
        t.row(&[format!("[{m}x{k}]@[{k}x{n}]"), g(janus), g(kernel), g(raw)]);
    }
}

fn overhead_table() {
    let t = Table::new(
        "Eager per-op time on [32x128] f32 (ns per op, median)",
        &["op", "janus eager", "of which kernel"],
    );
    let a = Tensor::randn([32, 128]);
    let b = Tensor::randn([32, 128]);
    let add = median_secs(51, 2000, || drop(black_box(&a + &b)));
    let (av, bv) = (a.to_vec::<f32>(), b.to_vec::<f32>());
    let mut out = vec![0.0f32; av.len()];
    let add_k = median_secs(51, 2000, || {
        for ((o, x), y) in out.iter_mut().zip(&av).zip(&bv) {
            *o = x + y;
        }
        black_box(&out);
    });
    t.row(&["add".into(), format!("{:.0}", add * 1e9), format!("{:.0}", add_k * 1e9)]);
    let tanh = median_secs(51, 2000, || drop(black_box(a.tanh())));
    let tanh_k = median_secs(51, 2000, || janus_kernels::simd_math::tanh(black_box(&av), &mut out));
    t.row(&["tanh".into(), format!("{:.0}", tanh * 1e9), format!("{:.0}", tanh_k * 1e9)]);
}

/// The host's share of an eager CUDA elementwise launch that runs without a GPU: building the
/// kernel's spec, and finding its compiled function by that spec (a hash and a comparison), as
/// `CudaDevice::ew_function` does, against formatting the spec's name, as each launch did
/// before (`kernel_name`, now only used to name a kernel being compiled).
fn cuda_host_table() {
    use janus_kernels::cuda::ops::elementwise_spec;
    use janus_kernels::fused::{FBinary, Program};
    use std::collections::HashMap;
    let t = Table::new(
        "CUDA elementwise launch, host side without the driver ([32x128] f32 add, ns per launch, median)",
        &["spec", "spec + lookup by spec", "spec + name formatted and looked up"],
    );
    let prog = Program::binary(FBinary::Op(janus_kernels::BinaryOp::Add));
    let st: &[usize] = &[128, 1];
    let ins = [(DType::F32, st), (DType::F32, st)];
    let spec = || elementwise_spec(&prog, DType::F32, &[32, 128], &ins, &[DType::F32], false).0;
    let by_spec: HashMap<_, usize> = [(spec(), 1)].into();
    let by_name: HashMap<String, usize> = [(spec().kernel_name(), 1)].into();
    let alone = median_secs(51, 2000, || drop(black_box(spec())));
    let hashed = median_secs(51, 2000, || _ = black_box(by_spec[&spec()]));
    let named = median_secs(51, 2000, || _ = black_box(by_name[&spec().kernel_name()]));
    t.row(&[alone, hashed, named].map(|v| format!("{:.0}", v * 1e9)));
}

fn transcendental_table() {
    let t = Table::new(
        "Transcendentals on 1M f32, one thread (ns per element, median)",
        &["function", "janus SIMD", "scalar libm", "speed-up"],
    );
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| ((i % 2001) as f32 - 1000.0) / 150.0).collect();
    let mut out = vec![0.0f32; n];
    type Row = (&'static str, fn(&[f32], &mut [f32]), fn(f32) -> f32);
    let rows: [Row; 3] = [
        ("exp", janus_kernels::simd_math::exp, f32::exp),
        ("tanh", janus_kernels::simd_math::tanh, f32::tanh),
        ("sigmoid", janus_kernels::simd_math::sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
    ];
    for (name, simd, scalar) in rows {
        let s = median_secs(21, 3, || simd(black_box(&x), &mut out)) / n as f64;
        let l = median_secs(21, 3, || {
            for (o, &v) in out.iter_mut().zip(&x) {
                *o = scalar(black_box(v));
            }
        }) / n as f64;
        t.row(&[name.into(), format!("{:.3}", s * 1e9), format!("{:.3}", l * 1e9), format!("{:.1}x", l / s)]);
    }
}

fn lstm_table() {
    let t = Table::new(
        "LSTM LM training step, eager (T=32, B=32, V=65, H=128, SGD lr 0.1)",
        &["mode", "ms/step (median)", "loss after"],
    );
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let mut model = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut k = 0;
    let mut last = 0.0;
    let secs = median_secs(15, 2, || {
        let (xs, ys) = data.batch(k);
        last = lstm_lm::sgd_step(&mut model, xs, ys, 0.1);
        k += 1;
    });
    t.row(&["eager".into(), format!("{:.2}", secs * 1e3), format!("{last:.4}")]);
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    println!("janus foundation benchmarks ({} rayon threads)", rayon_threads());
    let run = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    if run("gemm") {
        gemm_table();
    }
    if run("overhead") {
        overhead_table();
    }
    if run("transcendental") {
        transcendental_table();
    }
    if run("cuda_host") {
        cuda_host_table();
    }
    if run("lstm") {
        lstm_table();
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
