//! The benchmark entry behind the README's performance table: each workload of the examples in
//! eager mode, in janus mode and in check mode, measured in interleaved repeats (so machine
//! noise hits every mode alike), as medians of per-iteration times (like `shared/refbench`)
//! and their ratios.
//!
//! ```text
//! cargo run --release --example bench              # full run (under a minute)
//! cargo run --release --example bench -- --quick   # a smoke run (CI)
//! cargo run --release --example bench -- --only cartpole
//! cargo run --release --example bench -- --only unroll  # what unrolling a loop costs to compile
//! ```
//!
//! The LSTM step is the `shared/refbench` workload (T=32, B=32, V=65, H=128, plain SGD lr 0.1);
//! CartPole and TreeRNN are the `cartpole` and `tree_rnn` examples' programs.

#[path = "common/cartpole.rs"]
mod cartpole;
#[path = "common/cli.rs"]
mod cli;
#[path = "common/lstm_lm.rs"]
mod lstm_lm;
#[path = "common/tree_rnn.rs"]
mod tree_rnn;

use std::time::Instant;

use janus::prelude::*;

const MODES: [Mode; 3] = [Mode::Eager, Mode::Janus, Mode::Check];

/// Per mode, the median over `repeats` interleaved blocks of every iteration's time, like the
/// refbench's median per-step time; `block(mode, out)` runs one block and pushes the time of
/// each iteration (in the metric's unit) to `out`.
fn interleaved(repeats: usize, mut block: impl FnMut(Mode, &mut Vec<f64>)) -> [f64; 3] {
    for m in MODES {
        janus::with_mode(m, || block(m, &mut Vec::new())); // warm-up: compiles, fills caches
    }
    let mut samples = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..repeats {
        for (k, m) in MODES.into_iter().enumerate() {
            janus::with_mode(m, || block(m, &mut samples[k]));
        }
    }
    samples.map(|mut s| cli::median(&mut s))
}

/// Runs `f` and returns its time in `unit`s per second (1e3: milliseconds).
fn timed(unit: f64, f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * unit
}

struct Row {
    workload: &'static str,
    metric: &'static str,
    /// Eager, janus and check medians; `None` where a mode does not apply.
    values: [Option<f64>; 3],
}

fn lstm(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut k = 0;
    let mut modes = |step: fn(&mut lstm_lm::LstmLm, &[Tensor], &[Tensor], f64) -> f32| {
        let mut models = [init.clone(), init.clone(), init.clone()];
        interleaved(repeats, |mode, out| {
            let m = &mut models[MODES.iter().position(|&x| x == mode).unwrap()];
            for _ in 0..steps {
                let (xs, ys) = data.batch(k);
                out.push(timed(1e3, || _ = step(m, xs, ys, 0.1)));
                k += 1;
            }
        })
    };
    let [e, j, c] = modes(lstm_lm::janus_sgd_step);
    let [he, hj, hc] = modes(lstm_lm::janus_sgd_step_host_loop);
    // The whole step (loss, backward, update) traced as one graph, for reference.
    let traced = trace(lstm_lm::flat_sgd_step);
    let mut p = init.params();
    let mut whole = Vec::new();
    for r in 0..repeats + 1 {
        for _ in 0..steps {
            let (xs, ys) = data.batch(k);
            let args = lstm_lm::flat_args(&p, xs, ys);
            let ms = timed(1e3, || p = traced.run(&args)[1..].to_vec());
            if r > 0 {
                whole.push(ms);
            }
            k += 1;
        }
    }
    vec![
        Row { workload: "LSTM LM", metric: "training step, ms", values: [Some(e), Some(j), Some(c)] },
        Row {
            workload: "LSTM LM",
            metric: "training step, time loop on the host (unroll = false), ms",
            values: [Some(he), Some(hj), Some(hc)],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step as one graph (janus::trace), ms",
            values: [Some(e), Some(cli::median(&mut whole)), None],
        },
    ]
}

fn cartpole(repeats: usize, steps: usize, updates: usize) -> Vec<Row> {
    use cartpole::{CartPole, MAX_STEPS, Policy};
    janus::manual_seed(0);
    let policy = Policy::new();
    // Batch-1 inference and sampling on every environment step, as in a rollout.
    let mut env = CartPole::new(7);
    let mut obs = env.reset();
    let [ae, aj, ac] = interleaved(repeats, |_, out| {
        for _ in 0..steps {
            out.push(timed(1e6, || {
                let a = no_grad(|| cartpole::act(&policy, &Tensor::from_vec(obs.to_vec(), [1, 4])));
                let (next, done) = env.step(a);
                obs = if done { env.reset() } else { next };
            }));
        }
    });
    // The update after a 500-step episode (termination disabled, so every episode is full).
    let mut env = CartPole::new(9);
    (env.x_threshold, env.theta_threshold) = (f64::INFINITY, f64::INFINITY);
    let mut o = env.reset();
    let (mut obs_log, mut actions) = (Vec::new(), Vec::new());
    for s in 0..MAX_STEPS {
        obs_log.push(o);
        actions.push(s % 2);
        o = env.step(s % 2).0;
    }
    let mut learners: Vec<(Policy, optim::Adam)> =
        (0..3).map(|_| (policy.clone(), optim::Adam::new(1e-2))).collect();
    let [ue, uj, uc] = interleaved(repeats, |mode, out| {
        let (p, opt) = &mut learners[MODES.iter().position(|&x| x == mode).unwrap()];
        for _ in 0..updates {
            out.push(timed(1e3, || {
                let (o, a, g) = cartpole::episode_tensors(&obs_log, &actions);
                cartpole::update(p, opt, &o, &a, &g);
            }));
        }
    });
    // Whole fixed-length episodes: rollout plus update.
    let mut envs: Vec<CartPole> = (0..3).map(|_| CartPole::new(11)).collect();
    for e in &mut envs {
        (e.x_threshold, e.theta_threshold) = (f64::INFINITY, f64::INFINITY);
    }
    let [ee, ej, ec] = interleaved(repeats, |mode, out| {
        let i = MODES.iter().position(|&x| x == mode).unwrap();
        let (p, opt) = &mut learners[i];
        for _ in 0..updates / 4 + 1 {
            out.push(timed(1e3, || _ = cartpole::run_episode(p, opt, &mut envs[i])));
        }
    });
    vec![
        Row { workload: "CartPole", metric: "act + env step, µs", values: [Some(ae), Some(aj), Some(ac)] },
        Row {
            workload: "CartPole",
            metric: "update after a 500-step episode, ms",
            values: [Some(ue), Some(uj), Some(uc)],
        },
        Row {
            workload: "CartPole",
            metric: "500-step episode (rollout + update), ms",
            values: [Some(ee), Some(ej), Some(ec)],
        },
    ]
}

fn tree(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(3);
    let mut rng = tree_rnn::Rng(3);
    let data = tree_rnn::dataset(&mut rng, 16 * 8);
    let init = tree_rnn::TreeRnn::new();
    let mut learners: Vec<(tree_rnn::TreeRnn, optim::Adam)> =
        (0..3).map(|_| (init.clone(), optim::Adam::new(3e-3))).collect();
    let mut k = 0;
    let [e, j, c] = interleaved(repeats, |mode, out| {
        let (p, opt) = &mut learners[MODES.iter().position(|&x| x == mode).unwrap()];
        for _ in 0..steps {
            let b = k % 8;
            out.push(timed(1e3, || _ = tree_rnn::train_step(p, opt, &data[b * 16..(b + 1) * 16])));
            k += 1;
        }
    });
    vec![Row {
        workload: "TreeRNN",
        metric: "training step (16 trees), ms",
        values: [Some(e), Some(j), Some(c)],
    }]
}

/// A small LSTM forward whose time loop `#[janus]` unrolls into one block.
#[allow(clippy::needless_range_loop)]
#[janus]
fn unrolled_lstm(wx: &Tensor, wh: &Tensor, b: &Tensor, xs: &[Tensor]) -> Tensor {
    let (bsz, hid) = (xs[0].dims()[0], wh.dims()[0]);
    let mut h = Tensor::zeros([bsz, hid]);
    let mut c = Tensor::zeros([bsz, hid]);
    for t in 0..xs.len() {
        let g = xs[t].matmul(wx) + h.matmul(wh) + b;
        let [i, f, gg, o] = g.chunk::<4>(1);
        c = f.sigmoid() * &c + i.sigmoid() * gg.tanh();
        h = o.sigmoid() * c.tanh();
    }
    h
}

/// What unrolling costs as the trip count grows: forward + backward of [`unrolled_lstm`]
/// (B=8, input 16, H=32) per sequence length, eager against janus, including janus's first
/// calls (two profiled runs, then the forward compile; the backward graph compiles on the
/// first replay that needs it).
fn unroll_cost(lengths: &[usize]) {
    janus::manual_seed(0);
    let wx = Tensor::randn([16, 128]).requires_grad();
    let wh = Tensor::randn([32, 128]).requires_grad();
    let b = Tensor::zeros([128]).requires_grad();
    let step = |xs: &[Tensor]| {
        let g = unrolled_lstm(&wx, &wh, &b, xs).sum_all().backward();
        _ = g.get(&wx).unwrap().to_vec::<f32>();
    };
    println!(
        "\n| time steps | eager, ms/step | janus first 3 steps, ms | janus steady, ms/step | speed-up | forward compile, ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &t in lengths {
        let xs: Vec<Tensor> = (0..t).map(|_| Tensor::randn([8, 16])).collect();
        let compiled = || janus::stats().function("unrolled_lstm").map(|f| f.compile_ms).sum::<f64>();
        let mut eager: Vec<f64> =
            (0..5).map(|_| janus::with_mode(Mode::Eager, || timed(1e3, || step(&xs)))).collect();
        let before = compiled();
        let first: f64 = (0..3).map(|_| timed(1e3, || step(&xs))).sum();
        let compile = compiled() - before;
        let mut steady: Vec<f64> = (0..5).map(|_| timed(1e3, || step(&xs))).collect();
        let (e, j) = (cli::median(&mut eager), cli::median(&mut steady));
        println!("| {t} | {e:.2} | {first:.1} | {j:.2} | {:.2}x | {compile:.1} |", e / j);
    }
}

fn main() {
    let args = cli::Args::parse(
        "bench",
        "Eager vs janus vs check mode on the examples' workloads: medians of interleaved repeats.",
        &[
            ("quick", "false", "a few iterations only (smoke test)"),
            ("only", "", "lstm | cartpole | tree | unroll"),
        ],
    );
    let quick = args.switch("quick");
    let only = args.str("only");
    let run = |name: &str| (only.is_empty() && name != "unroll") || only == name;
    let (repeats, scale) = if quick { (2, 1) } else { (9, 20) };
    let mut rows = Vec::new();
    if run("lstm") {
        eprintln!("LSTM LM ...");
        rows.extend(lstm(repeats, 2 * scale));
    }
    if run("cartpole") {
        eprintln!("CartPole ...");
        rows.extend(cartpole(repeats, 500 * scale, 4 * scale));
    }
    if run("tree") {
        eprintln!("TreeRNN ...");
        rows.extend(tree(repeats, 2 * scale));
    }
    if run("unroll") {
        unroll_cost(if quick { &[8, 32] } else { &[32, 256, 1024] });
        return;
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l[l.find(':').unwrap() + 2..].to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    println!(
        "\njanus bench: median per-iteration times over {repeats} interleaved repeats; {cpu}, {} threads\n",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| workload | metric | eager | janus | check | janus speed-up | check slowdown |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    let fmt = |v: Option<f64>| {
        v.map_or("-".into(), |v| if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.3}") })
    };
    for r in &rows {
        let [e, j, c] = r.values;
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.metric,
            fmt(e),
            fmt(j),
            fmt(c),
            ratio(e, j),
            ratio(c, e)
        );
    }
}
