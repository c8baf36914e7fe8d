//! What shape-polymorphic variants cost and save: an MLP training step over changing batch
//! sizes, with one graph per size (`dynamic_dims = false`) against instances of one generic
//! graph, and eager mode; per new size, what a compile costs against what an instance costs.

use super::{lstm_lm, median::median, timed};
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
    // Without the sampled self-check: its checks fall on other passes of one graph per size
    // than of instances (which are sampled as one variant), which would skew the comparison.
    janus::set_self_check(false);
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
        "\nMLP step (64-256-256-10, Adam) over batch sizes {sizes:?}: medians of {repeats} interleaved passes, sampled self-check off\n"
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

/// One random batch of `t` steps of `b` sequences: one-hot inputs and targets.
fn lstm_batch(t: usize, b: usize, seed: u64) -> (Vec<Tensor>, Vec<Tensor>) {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut tok = || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 33) % lstm_lm::V as u64) as i64
    };
    let ids: Vec<Vec<i64>> = (0..=t).map(|_| (0..b).map(|_| tok()).collect()).collect();
    let xs = (0..t).map(|k| Tensor::from_vec(ids[k].clone(), [b]).one_hot(lstm_lm::V)).collect();
    let ys = (1..=t).map(|k| Tensor::from_vec(ids[k].clone(), [b])).collect();
    (xs, ys)
}

/// The stream: an LSTM LM (V=65, H=128, SGD 0.1) trained for `steps` steps with T
/// uniform in 8..=256 and B in 1..=64, in janus mode and eagerly in lockstep (the losses must
/// agree at every step); the compiles and instances of each fragment; then, on `shapes` of
/// those shapes, the steady state against one specialised graph per shape.
pub fn stream_cost(steps: usize, shapes: usize, repeats: usize) {
    use lstm_lm::{LstmLm, janus_sgd_step_per_shape, janus_sgd_step_stream};
    janus::manual_seed(1);
    let model = LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut s: u64 = 12345;
    let mut next = |lo: usize, hi: usize| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        lo + ((s >> 33) % (hi - lo + 1) as u64) as usize
    };
    let stream: Vec<(usize, usize)> = (0..steps).map(|_| (next(8, 256), next(1, 64))).collect();
    let (mut mj, mut me) = (model.clone(), model.clone());
    let (mut tj, mut te, mut worst) = (0.0, 0.0, 0.0f64);
    for (k, &(t, b)) in stream.iter().enumerate() {
        let (xs, ys) = lstm_batch(t, b, k as u64);
        let t0 = std::time::Instant::now();
        let lj = janus_sgd_step_stream(&mut mj, &xs, &ys, 0.1);
        tj += t0.elapsed().as_secs_f64();
        let t0 = std::time::Instant::now();
        let le = janus::with_mode(Mode::Eager, || janus_sgd_step_stream(&mut me, &xs, &ys, 0.1));
        te += t0.elapsed().as_secs_f64();
        let rel = ((lj - le) as f64).abs() / (le as f64).abs().max(1e-3);
        worst = worst.max(rel);
        assert!(rel < 1e-3, "step {k} (T={t}, B={b}): janus loss {lj} vs eager {le}");
    }
    println!("\nLSTM LM stream: {steps} steps, T uniform in 8..=256, B in 1..=64 (V=65, H=128, SGD 0.1)\n");
    println!("largest relative difference of janus's loss from eager's: {worst:.1e}");
    println!("whole stream: eager {te:.2} s, janus {tj:.2} s ({:.2}x), compiles included\n", te / tj);
    fragments("janus_sgd_step_stream");
    // Steady state on a few of the stream's shapes: one compiled graph per shape against the
    // stream's generic graphs (warmed on the same shapes), interleaved.
    // Without the sampled self-check, as in `dims_cost`.
    janus::set_self_check(false);
    // Shapes whose lengths are not among the stream's first ten: lengths every fragment's trip
    // class rolls (each compiles its first three lengths unrolled), so this times the rolled
    // loop and the generic body, not graphs compiled for early lengths.
    let mut early: Vec<usize> = Vec::new();
    for &(t, _) in &stream {
        if early.len() < 10 && !early.contains(&t) {
            early.push(t);
        }
    }
    let picked: Vec<(usize, usize)> =
        stream.iter().copied().filter(|&(t, b)| b >= 2 && !early.contains(&t)).take(shapes).collect();
    let batches: Vec<(Vec<Tensor>, Vec<Tensor>)> =
        picked.iter().enumerate().map(|(k, &(t, b))| lstm_batch(t, b, 1000 + k as u64)).collect();
    let mut ms = [model.clone(), model.clone(), model];
    type LstmStep = fn(&mut LstmLm, &[Tensor], &[Tensor], f64) -> f32;
    let runs: [(Mode, LstmStep); 3] = [
        (Mode::Eager, janus_sgd_step_stream),
        (Mode::Janus, janus_sgd_step_per_shape),
        (Mode::Janus, janus_sgd_step_stream),
    ];
    let mut pass = |k: usize| {
        let (mode, step) = runs[k];
        janus::with_mode(mode, || {
            timed(1e3, || {
                for (xs, ys) in &batches {
                    step(&mut ms[k], xs, ys, 0.1);
                }
            })
        })
    };
    for _ in 0..3 {
        (0..3).for_each(|k| _ = pass(k));
    }
    let mut times: [Vec<f64>; 3] = Default::default();
    for _ in 0..repeats {
        for (k, t) in times.iter_mut().enumerate() {
            t.push(pass(k));
        }
    }
    let [e, spec, generic_ms] = times.map(|mut t| median(&mut t));
    println!(
        "\nsteady state over {} of its shapes {picked:?}, ms per pass (medians of {repeats}, sampled self-check off):\n",
        picked.len()
    );
    println!("| variant | ms per pass | vs eager |\n|---|---:|---:|");
    println!("| eager | {e:.1} | 1.00x |");
    println!("| one graph per shape (unrolled, `dynamic_dims = false`) | {spec:.1} | {:.2}x |", e / spec);
    println!(
        "| the stream's step (whatever its fragments chose, see below) | {generic_ms:.1} | {:.2}x |",
        e / generic_ms
    );
    println!("\nthe stream's step vs per-shape graphs: {:.2}x the time\n", generic_ms / spec);
    println!("the stream's fragments after these passes (a trip class's first three lengths compile");
    println!("unrolled, later ones roll the loop on the host):\n");
    fragments("janus_sgd_step_stream");
    println!("\nthe per-shape step's fragments:\n");
    fragments("janus_sgd_step_per_shape");
}

/// The fragments of `function`: calls, compiles, instances, hits and why they ran eagerly.
fn fragments(function: &str) {
    println!("| fragment | calls | forward compiles | instances | hits | eager runs by reason |");
    println!("|---|---:|---:|---:|---:|---|");
    for f in janus::stats().function(function) {
        let reasons: Vec<String> = f.eager.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            f.name,
            f.calls,
            f.compiles,
            f.instances,
            f.hits,
            reasons.join("; ")
        );
    }
}
