//! What shape-polymorphic variants cost and save: an MLP training step over changing batch
//! sizes, with one graph per size (`dynamic_dims = false`) against instances of one generic
//! graph, and eager mode; per new size, what a compile costs against what an instance costs.

use super::{median::median, timed};
use janus::prelude::*;

#[derive(Module, Clone)]
struct Net {
    l1: nn::Linear,
    l2: nn::Linear,
    l3: nn::Linear,
}

macro_rules! step_fn {
    ($name:ident, $($opt:tt)*) => {
        #[janus($($opt)*)]
        fn $name(net: &mut Net, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
            let h = net.l2.forward(&net.l1.forward(x).relu()).relu();
            let loss = net.l3.forward(&h).cross_entropy(y);
            let grads = loss.backward();
            opt.step(net, &grads);
            loss.item()
        }
    };
}
step_fn!(specialised, dynamic_dims = false, max_variants = 64);
step_fn!(generic, max_variants = 64);

type Step = fn(&mut Net, &mut optim::Adam, &Tensor, &Tensor) -> f32;

/// Medians over `repeats` of one pass over `sizes`, in ms per step, and the stats of `name`.
pub fn dims_cost(repeats: usize) {
    janus::manual_seed(0);
    let net =
        Net { l1: nn::Linear::new(64, 256), l2: nn::Linear::new(256, 256), l3: nn::Linear::new(256, 10) };
    let sizes = [24usize, 40, 72, 120, 200, 33, 57, 96];
    let data: Vec<(Tensor, Tensor)> = sizes
        .iter()
        .map(|&b| {
            let x = Tensor::randn([b, 64]);
            let y = x.narrow(1, 0, 10).argmax(1);
            (x, y)
        })
        .collect();
    // Eager, one graph per size, one generic graph: each with its own copy of the model,
    // warmed up on every size (the specialised step compiles each; the generic one compiles at
    // most three and makes instances of the rest), then timed in interleaved passes.
    let variants: [(Mode, Step); 3] =
        [(Mode::Eager, generic), (Mode::Janus, specialised), (Mode::Janus, generic)];
    let mut state: Vec<(Net, optim::Adam)> = (0..3).map(|_| (net.clone(), optim::Adam::new(1e-3))).collect();
    let pass = |k: usize, state: &mut Vec<(Net, optim::Adam)>| {
        let (mode, step) = variants[k];
        let (n, opt) = &mut state[k];
        janus::with_mode(mode, || {
            timed(1e3, || {
                for (x, y) in &data {
                    step(n, opt, x, y);
                }
            }) / data.len() as f64
        })
    };
    for _ in 0..3 {
        for k in 0..3 {
            pass(k, &mut state);
        }
    }
    let mut times: [Vec<f64>; 3] = Default::default();
    for _ in 0..repeats {
        for (k, t) in times.iter_mut().enumerate() {
            t.push(pass(k, &mut state));
        }
    }
    let [eager, spec, generic_ms] = times.map(|mut t| median(&mut t));
    let stats = |name: &str| janus::stats().function(name).next().cloned().expect("ran");
    let (s, g) = (stats("specialised"), stats("generic"));
    println!(
        "\nMLP step (64-256-256-10, Adam) over batch sizes {sizes:?}: medians of {repeats} interleaved passes\n"
    );
    println!("| variant | ms per step | vs eager | compiles | instances | ms per new size |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!("| eager | {eager:.3} | 1.00x | | | |");
    println!(
        "| one graph per size (`dynamic_dims = false`) | {spec:.3} | {:.2}x | {} | 0 | {:.2} (compile) |",
        eager / spec,
        s.compiles,
        s.compile_ms / s.compiles.max(1) as f64
    );
    println!(
        "| one generic graph, instances per size | {generic_ms:.3} | {:.2}x | {} | {} | {:.2} (instance) |",
        eager / generic_ms,
        g.compiles,
        g.instances,
        g.instance_ms / g.instances.max(1) as f64
    );
    println!("\ngeneric vs per-size graphs, steady state: {:.2}x the time", generic_ms / spec);
}
