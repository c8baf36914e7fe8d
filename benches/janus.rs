//! `#[janus]` benchmarks: the overhead of a fragment hit (4 inputs, trivial body), and the
//! LSTM LM step written imperatively with `#[janus]` (the time loop unrolled into one block, and
//! on the host with `unroll = false`) against the same code eager and against the whole step
//! traced as one graph.
//!
//!     cargo bench --bench janus

#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;
#[path = "util.rs"]
mod util;

use janus::prelude::*;
use std::hint::black_box;
use util::{Table, median_secs};

#[janus]
fn trivial(a: &Tensor, b: &Tensor, c: &Tensor, d: &Tensor) -> Tensor {
    let y = a + b + c + d;
    y
}

fn overhead_table() {
    let t = Table::new(
        "Fragment hit, 4 inputs, trivial body on [1] f32 (ns per call, median)",
        &["variant", "ns/call"],
    );
    let xs: Vec<Tensor> = (0..4).map(|k| Tensor::full([1], k as f64)).collect();
    let call = || drop(black_box(trivial(&xs[0], &xs[1], &xs[2], &xs[3])));
    for _ in 0..5 {
        call();
    }
    let staged = median_secs(51, 2000, call);
    let eager = janus::with_mode(Mode::Eager, || median_secs(51, 2000, call));
    let f = |x: &[Tensor]| vec![&x[0] + &x[1] + &x[2] + &x[3]];
    let traced = trace(f);
    traced.run(&xs);
    let compiled = traced.compiled().unwrap();
    let graph_only = median_secs(51, 2000, || drop(black_box(compiled.replay(&xs))));
    t.row(&["#[janus] replay (whole call)".into(), format!("{:.0}", staged * 1e9)]);
    t.row(&["of which the compiled graph".into(), format!("{:.0}", graph_only * 1e9)]);
    t.row(&[
        "dispatch overhead (probe, key, lookup, rebuild)".into(),
        format!("{:.0}", (staged - graph_only) * 1e9),
    ]);
    t.row(&["same body, eager".into(), format!("{:.0}", eager * 1e9)]);
}

fn lstm_table() {
    let t = Table::new(
        "LSTM LM training step (T=32, B=32, V=65, H=128, SGD lr 0.1)",
        &["mode", "ms/step (median)", "vs eager"],
    );
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut k = 0;
    let mut m = init.clone();
    let eager = janus::with_mode(Mode::Eager, || {
        median_secs(15, 2, || {
            let (xs, ys) = data.batch(k);
            lstm_lm::janus_sgd_step(&mut m, xs, ys, 0.1);
            k += 1;
        })
    });
    let mut run = |step: fn(&mut lstm_lm::LstmLm, &[Tensor], &[Tensor], f64) -> f32| {
        let mut m = init.clone();
        median_secs(25, 2, || {
            let (xs, ys) = data.batch(k);
            step(&mut m, xs, ys, 0.1);
            k += 1;
        })
    };
    let staged = run(lstm_lm::janus_sgd_step);
    let host_loop = run(lstm_lm::janus_sgd_step_host_loop);
    let traced = trace(lstm_lm::flat_sgd_step);
    let mut p = vec![init.wx.clone(), init.wh.clone(), init.b.clone(), init.wy.clone(), init.by.clone()];
    let whole = median_secs(25, 2, || {
        let (xs, ys) = data.batch(k);
        let args: Vec<Tensor> = p.iter().chain(xs).chain(ys).cloned().collect();
        p = traced.run(&args)[1..].to_vec();
        k += 1;
    });
    t.row(&["eager (same source, Mode::Eager)".into(), format!("{:.2}", eager * 1e3), "1.00x".into()]);
    t.row(&[
        "#[janus], time loop unrolled into the block".into(),
        format!("{:.2}", staged * 1e3),
        format!("{:.2}x", eager / staged),
    ]);
    t.row(&[
        "#[janus(unroll = false)], time loop on the host".into(),
        format!("{:.2}", host_loop * 1e3),
        format!("{:.2}x", eager / host_loop),
    ]);
    t.row(&[
        "whole step as one graph (janus::trace)".into(),
        format!("{:.2}", whole * 1e3),
        format!("{:.2}x", eager / whole),
    ]);
    println!("\n{}", janus::explain());
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let run = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    println!("janus #[janus] benchmarks");
    if run("overhead") {
        overhead_table();
    }
    if run("lstm") {
        lstm_table();
    }
}
