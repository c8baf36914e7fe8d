//! Micro-measure of the convolution ops at the `shared/refbench` CNN size: batch 64 of
//! 1x28x28, conv 1->16 3x3 pad 1, max-pool 2, conv 16->32 3x3 pad 1; forward and backward
//! (gradients of input-side activations, weights and biases), eagerly and as a compiled graph.
//!
//! ```sh
//! cargo run --release --example conv_bench            # medians of 30 runs
//! cargo run --release --example conv_bench -- 5       # 5 runs
//! ```

use janus::Conv2dOptions;
use janus::prelude::*;
use std::time::Instant;

fn forward(x: &[Tensor]) -> Vec<Tensor> {
    let pad = Conv2dOptions { padding: [1, 1], ..Default::default() };
    let h = x[0].conv2d(&x[1], Some(&x[2]), pad).relu().max_pool2d([2, 2], [2, 2], [0, 0]);
    let y = h.conv2d(&x[3], Some(&x[4]), pad);
    vec![(y.square()).mean_all()]
}

fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(30);
    janus::manual_seed(0);
    let params = [
        Tensor::randn([64, 1, 28, 28]),
        (Tensor::randn([16, 1, 3, 3]) * 0.3).requires_grad(),
        Tensor::zeros([16]).requires_grad(),
        (Tensor::randn([32, 16, 3, 3]) * 0.08).requires_grad(),
        Tensor::zeros([32]).requires_grad(),
    ];
    let step = |outs: Vec<Tensor>| {
        let g = outs[0].backward();
        for p in &params[1..] {
            std::hint::black_box(g.get(p).unwrap().to_vec::<f32>().len());
        }
    };
    let traced = trace(forward);
    for _ in 0..3 {
        step(traced.run(&params)); // record, compile, warm up
    }
    assert!(traced.compiled().is_some(), "the step compiled");
    let pad = Conv2dOptions { padding: [1, 1], ..Default::default() };
    let x2 = Tensor::randn([64, 16, 14, 14]);
    let w2 = params[3].detach();
    println!("conv2d at the refbench CNN size, medians of {runs} runs, {} threads", rayon_threads());
    let ms = median_ms(runs, || drop(params[0].conv2d(&params[1].detach(), None, pad).to_vec::<f32>()));
    println!("  conv 1->16 forward (eager)          {ms:7.2} ms");
    let ms = median_ms(runs, || drop(x2.conv2d(&w2, None, pad).to_vec::<f32>()));
    println!("  conv 16->32 forward (eager)         {ms:7.2} ms");
    let ms = median_ms(runs, || step(forward(&params)));
    println!("  both convs + pool, fwd+bwd, eager   {ms:7.2} ms");
    let ms = median_ms(runs, || step(traced.run(&params)));
    println!("  both convs + pool, fwd+bwd, traced  {ms:7.2} ms");
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
