//! Graph benchmarks: a fused elementwise chain against eager and against a plain copy (the
//! bandwidth ratio), the LSTM LM training step traced as one graph against eager, and the time
//! to trace, optimise and compile.
//!
//!     cargo bench --bench graphs

#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;
#[path = "util.rs"]
mod util;

use janus::prelude::*;
use std::hint::black_box;
use std::time::Instant;
use util::{Table, median_secs};

/// Eight cheap elementwise ops: memory-bound, so the compiled chain should approach a copy.
fn chain(x: &[Tensor]) -> Vec<Tensor> {
    let a = &x[0];
    vec![((((a * 1.5 + 0.5).relu() * a - 0.25).abs() * 0.5) + a).maximum(&a.scalar_like_f64(0.1))]
}

/// The same length of chain with three transcendentals: compute-bound on two cores.
fn transcendental_chain(x: &[Tensor]) -> Vec<Tensor> {
    let a = &x[0];
    vec![((a * 1.5 + 0.5).tanh() * a - 0.25).sigmoid().exp() * 0.5 + a]
}

trait ScalarLike {
    fn scalar_like_f64(&self, v: f64) -> Tensor;
}
impl ScalarLike for Tensor {
    fn scalar_like_f64(&self, v: f64) -> Tensor {
        Tensor::scalar_dtype(v, self.dtype())
    }
}

fn elementwise_table() {
    let t = Table::new(
        "Chains of 8 elementwise ops on 16M f32 (read 64 MB, write 64 MB)",
        &["variant", "ms (median)", "GB/s", "vs copy into a fresh buffer", "vs copy into an existing buffer"],
    );
    let n = 1 << 24;
    let x = Tensor::randn([n]);
    let bytes = 2.0 * 4.0 * n as f64;
    let src = x.to_vec::<f32>();
    let mut dst = vec![0.0f32; n];
    let par_copy = |s: &[f32], d: &mut [f32]| {
        use rayon::prelude::*;
        d.par_chunks_mut(1 << 16).zip(s.par_chunks(1 << 16)).for_each(|(d, s)| d.copy_from_slice(s));
    };
    let copy_existing = median_secs(9, 1, || {
        par_copy(&src, &mut dst);
        black_box(&dst);
    });
    let copy_fresh = median_secs(9, 1, || {
        let mut d = vec![0.0f32; n];
        par_copy(&src, &mut d);
        black_box(&d);
    });
    let row = |name: &str, s: f64| {
        t.row(&[
            name.into(),
            format!("{:.2}", s * 1e3),
            format!("{:.1}", bytes / s / 1e9),
            format!("{:.0}%", 100.0 * copy_fresh / s),
            format!("{:.0}%", 100.0 * copy_existing / s),
        ])
    };
    row("plain copy, existing buffer", copy_existing);
    row("plain copy, fresh buffer", copy_fresh);
    for (name, f) in [
        ("8 cheap ops", chain as fn(&[Tensor]) -> Vec<Tensor>),
        ("8 ops, 3 transcendental", transcendental_chain),
    ] {
        let traced = trace(f);
        traced.run(std::slice::from_ref(&x));
        let compiled = median_secs(9, 1, || drop(black_box(traced.run(std::slice::from_ref(&x)))));
        let eager = median_secs(5, 1, || drop(black_box(f(std::slice::from_ref(&x)))));
        row(&format!("{name}: janus compiled"), compiled);
        row(&format!("{name}: janus eager"), eager);
    }
}

fn lstm_table() {
    let t = Table::new(
        "LSTM LM training step (T=32, B=32, V=65, H=128, SGD lr 0.1)",
        &["mode", "ms/step (median)", "vs eager"],
    );
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let params =
        |m: &lstm_lm::LstmLm| vec![m.wx.clone(), m.wh.clone(), m.b.clone(), m.wy.clone(), m.by.clone()];
    let mut p = params(&init);
    let mut k = 0;
    let eager = median_secs(15, 2, || {
        let (xs, ys) = data.batch(k);
        p = lstm_lm::flat_sgd_step(&lstm_lm::flat_args(&p, xs, ys))[1..].to_vec();
        k += 1;
    });
    let traced = trace(lstm_lm::flat_sgd_step).named("lstm-step");
    let mut p = params(&init);
    let compiled = median_secs(25, 2, || {
        let (xs, ys) = data.batch(k);
        p = traced.run(&lstm_lm::flat_args(&p, xs, ys))[1..].to_vec();
        k += 1;
    });
    t.row(&["eager".into(), format!("{:.2}", eager * 1e3), "1.00x".into()]);
    t.row(&[
        "traced as one graph".into(),
        format!("{:.2}", compiled * 1e3),
        format!("{:.2}x", eager / compiled),
    ]);
    if let Some(c) = traced.compiled() {
        println!(
            "\npasses: {:?}\nmemory: {:?}\nsteps: {} ops in the optimised graph",
            c.pass_stats().counts,
            c.memory_plan(),
            c.graph().op_count()
        );
    }
}

fn compile_time_table() {
    let t = Table::new(
        "Trace + optimise + compile time (first call)",
        &["function", "first call ms", "of which optimise+compile ms", "graph nodes"],
    );
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(1);
    let m = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let (xs, ys) = data.batch(0);
    let cell = |x: &[Tensor]| {
        let g = x[0].matmul(&x[2]) + x[1].matmul(&x[3]) + &x[4];
        let [i, f, gg, o] = g.chunk::<4>(1);
        let c = f.sigmoid() * &x[5] + i.sigmoid() * gg.tanh();
        vec![o.sigmoid() * c.tanh(), c]
    };
    let h = Tensor::zeros([lstm_lm::B, lstm_lm::H]);
    let cell_args = vec![xs[0].clone(), h.clone(), m.wx.clone(), m.wh.clone(), m.b.clone(), h];
    let traced = trace(cell);
    let t0 = Instant::now();
    traced.run(&cell_args);
    let first = t0.elapsed().as_secs_f64() * 1e3;
    let c = traced.compiled().unwrap();
    t.row(&[
        "LSTM cell".into(),
        format!("{first:.2}"),
        format!("{:.2}", c.compile_ms),
        c.recorded_graph().nodes.len().to_string(),
    ]);
    let traced = trace(lstm_lm::flat_sgd_step);
    let p = vec![m.wx.clone(), m.wh.clone(), m.b.clone(), m.wy.clone(), m.by.clone()];
    let t0 = Instant::now();
    traced.run(&lstm_lm::flat_args(&p, xs, ys));
    let first = t0.elapsed().as_secs_f64() * 1e3;
    let c = traced.compiled().unwrap();
    t.row(&[
        "LSTM training step".into(),
        format!("{first:.2}"),
        format!("{:.2}", c.compile_ms),
        c.recorded_graph().nodes.len().to_string(),
    ]);
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let run = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    println!("janus graph benchmarks");
    if run("elementwise") {
        elementwise_table();
    }
    if run("lstm") {
        lstm_table();
    }
    if run("compile") {
        compile_time_table();
    }
}
