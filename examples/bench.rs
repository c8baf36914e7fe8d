//! The benchmark entry behind the README's results and docs/perf/: each workload of the examples in
//! eager mode, in janus mode (with and without the sampled self-check) and in check mode,
//! measured in interleaved repeats (so machine noise hits every mode alike), as medians of
//! per-iteration times (like `shared/refbench`) and their ratios (the LSTM step also as one
//! loop of steps per mode, the refbench's own method). Then the self-check's overhead
//! from counters (checks × mean cost ÷ janus time), and the staging coverage of each workload;
//! the LSTM rows' GEMM throughput as a share of this machine's f32 GEMM peak, measured in the
//! same run; and (full runs) the dispatch cost of one replay of a tiny block.
//!
//! ```text
//! cargo run --release --example bench              # full run (under a minute)
//! cargo run --release --example bench -- --quick   # a smoke run (CI)
//! cargo run --release --example bench -- --only cartpole
//! cargo run --release --example bench -- --only cnn      # also: transformer, gan
//! cargo run --release --example bench -- --only mlp     # the README's MLP step, speculated vs not
//! cargo run --release --example bench -- --only unroll  # what unrolling a loop costs to compile
//! cargo run --release --example bench -- --only hit     # the cost of one replay of a tiny block
//! cargo run --release --example bench -- --only cuda-plan  # the LSTM step's CUDA kernels (no GPU)
//! cargo run --release --example bench -- --only dims    # one generic graph vs one per batch size
//! cargo run --release --example bench -- --only stream  # an LSTM LM over varying T and B
//! cargo run --release --example bench -- --only replan  # split programs' memory plans, A/B
//! cargo run --release --example bench -- --only pack    # shared right factors packed or not, A/B
//! cargo run --release --example bench -- --only joins  # small steps joining split chains split or not, A/B
//! ```
//!
//! The LSTM step is the `shared/refbench` workload (T=32, B=32, V=65, H=128, plain SGD lr 0.1);
//! CartPole and TreeRNN are the `cartpole` and `tree_rnn` examples' programs. The CNN and
//! Transformer steps are `shared/refbench/models_torch.py`'s workloads C and D (the `cnn` and
//! `transformer_lm` examples' models at the refbench sizes); GAN is the `gan` example's step.

#[path = "common/bench_ab.rs"]
mod bench_ab;
#[path = "common/bench_costs.rs"]
mod bench_costs;
#[path = "common/bench_cuda.rs"]
mod bench_cuda;
#[path = "common/bench_dims.rs"]
mod bench_dims;
#[path = "common/bench_fused.rs"]
mod bench_fused;
#[path = "common/bench_models.rs"]
mod bench_models;
#[path = "common/cartpole.rs"]
mod cartpole;
#[path = "common/cli.rs"]
mod cli;
#[path = "common/cnn.rs"]
mod cnn;
#[path = "common/gan.rs"]
mod gan;
#[path = "common/lstm_lm.rs"]
mod lstm_lm;
#[path = "common/median.rs"]
mod median;
#[path = "common/peak.rs"]
mod peak;
#[path = "common/transformer_lm.rs"]
mod transformer_lm;
#[path = "common/tree_rnn.rs"]
mod tree_rnn;

use std::time::Instant;

use clap::Parser;
use janus::prelude::*;
use median::median;

/// The configurations measured: eager, janus, janus without the sampled self-check, check.
const MODES: [(Mode, bool); 4] =
    [(Mode::Eager, true), (Mode::Janus, true), (Mode::Janus, false), (Mode::Check, true)];

/// What the janus configuration (self-check on) did, over every block of every workload.
#[derive(Default)]
struct Checked {
    /// Seconds in janus-mode blocks.
    janus_s: f64,
    /// Per fragment: replays, checks, and milliseconds spent in checks, during those blocks.
    fragments: std::collections::BTreeMap<String, (u64, u64, f64)>,
    /// Ops staged, and run eagerly in stageable blocks, in janus-mode blocks after warm-up
    /// (both janus configurations).
    staged: u64,
    eager: u64,
}

thread_local! {
    static CHECKED: std::cell::RefCell<std::collections::BTreeMap<&'static str, Checked>> = Default::default();
    static WORKLOAD: std::cell::Cell<&'static str> = const { std::cell::Cell::new("") };
}

/// When the process started, for `JANUS_BENCH_BLOCKS=1`: each block's median, min and max
/// printed to stderr with its start time, to tell drifting machine speed from a slow compile.
static START: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// Per configuration, the median over `repeats` interleaved blocks of every iteration's time,
/// like the refbench's median per-step time; `block(k, out)` runs one block for configuration
/// `MODES[k]` and pushes the time of each iteration (in the metric's unit) to `out`.
fn interleaved(repeats: usize, mut block: impl FnMut(usize, &mut Vec<f64>)) -> [f64; 4] {
    let mut run = |k: usize, out: &mut Vec<f64>, warm: bool| {
        let (mode, self_check) = MODES[k];
        janus::set_self_check(self_check);
        let (before, t, from, cpu) = (janus::stats(), Instant::now(), out.len(), cpu_ticks());
        janus::with_mode(mode, || block(k, out));
        let (secs, d) = (t.elapsed().as_secs_f64(), janus::stats().since(&before));
        if std::env::var_os("JANUS_BENCH_BLOCKS").is_some() && out.len() > from {
            let mut b = out[from..].to_vec();
            let m = median(&mut b);
            let [busy, idle, steal] = std::array::from_fn(|i| cpu_ticks()[i] - cpu[i]);
            eprintln!(
                "block {:>8.3}s {:<12} {mode:?}{} n={} median {m:.3} min {:.3} max {:.3}; \
                 machine ticks: busy {busy} idle {idle} stolen {steal}",
                START.elapsed().as_secs_f64(),
                WORKLOAD.with(|w| w.get()),
                if self_check { "" } else { " (no self-check)" },
                b.len(),
                b[0],
                b[b.len() - 1]
            );
        }
        janus::set_self_check(true);
        CHECKED.with(|c| {
            let mut c = c.borrow_mut();
            let e = c.entry(WORKLOAD.with(|w| w.get())).or_default();
            if k == 1 {
                e.janus_s += secs;
                for f in &d.fragments {
                    let x = e.fragments.entry(f.name.clone()).or_default();
                    (x.0, x.1, x.2) = (x.0 + f.hits, x.1 + f.checks, x.2 + f.check_ms);
                }
            }
            if mode == Mode::Janus && warm {
                let ops = d.ops();
                e.staged += ops.staged();
                e.eager += ops.eager_stageable();
            }
        });
    };
    for k in 0..MODES.len() {
        run(k, &mut Vec::new(), false); // warm-up: compiles, fills caches
    }
    let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..repeats {
        for (k, s) in samples.iter_mut().enumerate() {
            run(k, s, true);
        }
    }
    samples.map(|mut s| median(&mut s))
}

/// The machine's CPU time so far from `/proc/stat`, in clock ticks: busy (user, nice, system,
/// irq, softirq), idle (idle, iowait) and stolen by the hypervisor (zeros where unreadable).
/// Stolen time during a block means another guest ran on this machine's cores.
fn cpu_ticks() -> [u64; 3] {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    [at(0) + at(1) + at(2) + at(5) + at(6), at(3) + at(4), at(7)]
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
    /// Eager, janus, janus without the self-check and check medians; `None` where a mode does
    /// not apply.
    values: [Option<f64>; 4],
}

fn lstm(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let init = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut next = 0;
    let mut modes = |step: fn(&mut lstm_lm::LstmLm, &[Tensor], &[Tensor], f64) -> f32| {
        let mut models = [init.clone(), init.clone(), init.clone(), init.clone()];
        interleaved(repeats, |k, out| {
            let m = &mut models[k];
            for _ in 0..steps {
                let (xs, ys) = data.batch(next);
                out.push(timed(1e3, || _ = step(m, xs, ys, 0.1)));
                next += 1;
            }
        })
    };
    let [e, j, jn, c] = modes(lstm_lm::janus_sgd_step);
    let [fe, fj, fjn, fc] = modes(lstm_lm::janus_sgd_step_fragments);
    let [he, hj, hjn, hc] = modes(lstm_lm::janus_sgd_step_host_loop);
    let [ce, cj, cjn, cc] = modes(lstm_lm::janus_sgd_step_clipped);
    let [be, bj, bjn, bc] = modes(lstm_lm::janus_sgd_step_batched);
    // The speculated step measured as `shared/refbench` measures its peers: each mode's steps
    // in a row after a warm-up (one loop per mode, no other mode's iterations in between),
    // two loops per mode, alternating; the median over both loops' steps.
    let (mut steady, mut model) = ([Vec::new(), Vec::new()], [init.clone(), init.clone()]);
    for _ in 0..2 {
        for (k, mode) in [Mode::Eager, Mode::Janus].into_iter().enumerate() {
            janus::with_mode(mode, || {
                let n = if mode == Mode::Eager { steps * 3 } else { steps * 8 };
                for i in 0..n + 20 {
                    let (xs, ys) = data.batch(next);
                    let ms = timed(1e3, || _ = lstm_lm::janus_sgd_step(&mut model[k], xs, ys, 0.1));
                    if i >= 20 {
                        steady[k].push(ms);
                    }
                    next += 1;
                }
            });
        }
    }
    let [steady_e, steady_j] = steady.map(|mut s| median(&mut s));
    // The whole step (loss, backward, update) traced as one graph, for reference.
    let traced = trace(lstm_lm::flat_sgd_step);
    let mut p = init.params();
    let mut whole = Vec::new();
    for r in 0..repeats + 1 {
        for _ in 0..steps {
            let (xs, ys) = data.batch(next);
            let args = lstm_lm::flat_args(&p, xs, ys);
            let ms = timed(1e3, || p = traced.run(&args)[1..].to_vec());
            if r > 0 {
                whole.push(ms);
            }
            next += 1;
        }
    }
    vec![
        Row {
            workload: "LSTM LM",
            metric: "training step, speculated (one graph), ms",
            values: [Some(e), Some(j), Some(jn), Some(c)],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step, speculated, steady loops (each mode's steps in a row, as the refbench times its peers), ms",
            values: [Some(steady_e), Some(steady_j), None, None],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step with clipping, speculated (assert), ms",
            values: [Some(ce), Some(cj), Some(cjn), Some(cc)],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step batched by hand (input projection, output layer), speculated, ms",
            values: [Some(be), Some(bj), Some(bjn), Some(bc)],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step, fragments (speculate = false), ms",
            values: [Some(fe), Some(fj), Some(fjn), Some(fc)],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step, fragments, time loop on the host (unroll = false), ms",
            values: [Some(he), Some(hj), Some(hjn), Some(hc)],
        },
        Row {
            workload: "LSTM LM",
            metric: "training step as one graph (janus::trace), ms",
            values: [Some(e), Some(median(&mut whole)), None, None],
        },
    ]
}

/// The README's first program: an MLP classifier step with Adam.
#[derive(Module, Clone)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

/// The README's MLP step, defined twice: speculated (the whole step one graph) and with
/// `speculate = false` (its blocks as graphs, dispatched from the host).
macro_rules! mlp_step {
    ($name:ident, $($opt:tt)*) => {
        #[janus($($opt)*)]
        fn $name(net: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
            let logits = net.l2.forward(&net.l1.forward(x).relu());
            let loss = logits.cross_entropy(y);
            let grads = loss.backward();
            opt.step(net, &grads);
            loss.item()
        }
    };
}
mlp_step!(mlp_step,);
mlp_step!(mlp_step_fragments, speculate = false);

fn mlp(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(0);
    let x = Tensor::randn([64, 4]);
    let y = x.sum(1).gt_scalar(0.0).to_dtype(DType::I64);
    let init = Mlp { l1: nn::Linear::new(4, 32), l2: nn::Linear::new(32, 2) };
    let modes = |step: fn(&mut Mlp, &mut optim::Adam, &Tensor, &Tensor) -> f32| {
        let mut state: Vec<(Mlp, optim::Adam)> =
            (0..4).map(|_| (init.clone(), optim::Adam::new(0.01))).collect();
        interleaved(repeats, |k, out| {
            let (m, o) = &mut state[k];
            for _ in 0..steps {
                out.push(timed(1e6, || _ = step(m, o, &x, &y)));
            }
        })
    };
    let [e, j, jn, c] = modes(mlp_step);
    let [fe, fj, fjn, fc] = modes(mlp_step_fragments);
    vec![
        Row {
            workload: "MLP (README)",
            metric: "Adam step, speculated (one graph), µs",
            values: [Some(e), Some(j), Some(jn), Some(c)],
        },
        Row {
            workload: "MLP (README)",
            metric: "Adam step, fragments (speculate = false), µs",
            values: [Some(fe), Some(fj), Some(fjn), Some(fc)],
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
    let [ae, aj, ajn, ac] = interleaved(repeats, |_, out| {
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
        (0..4).map(|_| (policy.clone(), optim::Adam::new(1e-2))).collect();
    let [ue, uj, ujn, uc] = interleaved(repeats, |k, out| {
        let (p, opt) = &mut learners[k];
        for _ in 0..updates {
            out.push(timed(1e3, || {
                let (o, a, g) = cartpole::episode_tensors(&obs_log, &actions);
                cartpole::update(p, opt, &o, &a, &g);
            }));
        }
    });
    // Whole fixed-length episodes: rollout plus update.
    let mut envs: Vec<CartPole> = (0..4).map(|_| CartPole::new(11)).collect();
    for e in &mut envs {
        (e.x_threshold, e.theta_threshold) = (f64::INFINITY, f64::INFINITY);
    }
    let [ee, ej, ejn, ec] = interleaved(repeats, |k, out| {
        let i = k;
        let (p, opt) = &mut learners[i];
        for _ in 0..updates / 4 + 1 {
            out.push(timed(1e3, || _ = cartpole::run_episode(p, opt, &mut envs[i])));
        }
    });
    vec![
        Row {
            workload: "CartPole",
            metric: "act + env step, µs",
            values: [Some(ae), Some(aj), Some(ajn), Some(ac)],
        },
        Row {
            workload: "CartPole",
            metric: "update after a 500-step episode, ms",
            values: [Some(ue), Some(uj), Some(ujn), Some(uc)],
        },
        Row {
            workload: "CartPole",
            metric: "500-step episode (rollout + update), ms",
            values: [Some(ee), Some(ej), Some(ejn), Some(ec)],
        },
    ]
}

fn tree(repeats: usize, steps: usize) -> Vec<Row> {
    janus::manual_seed(3);
    let mut rng = tree_rnn::Rng(3);
    let data = tree_rnn::dataset(&mut rng, 16 * 8);
    let init = tree_rnn::TreeRnn::new();
    let mut learners: Vec<(tree_rnn::TreeRnn, optim::Adam)> =
        (0..4).map(|_| (init.clone(), optim::Adam::new(3e-3))).collect();
    let mut next = 0;
    let [e, j, jn, c] = interleaved(repeats, |k, out| {
        let (p, opt) = &mut learners[k];
        for _ in 0..steps {
            let b = next % 8;
            out.push(timed(1e3, || _ = tree_rnn::train_step(p, opt, &data[b * 16..(b + 1) * 16])));
            next += 1;
        }
    });
    vec![Row {
        workload: "TreeRNN",
        metric: "training step (16 trees), ms",
        values: [Some(e), Some(j), Some(jn), Some(c)],
    }]
}

/// Eager vs janus vs check mode on the examples' workloads: medians of interleaved repeats.
#[derive(Parser)]
#[command(name = "bench", override_usage = "cargo run --release --example bench -- [OPTIONS]")]
struct Cli {
    /// A few iterations only (a smoke test).
    #[arg(long)]
    quick: bool,
    /// One measurement only; without it, the LSTM, MLP, CartPole, TreeRNN, CNN, Transformer and
    /// GAN workloads.
    #[arg(long, value_enum)]
    only: Option<Workload>,
    #[command(flatten)]
    device: cli::DeviceArg,
}

/// What `--only` picks.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    /// The LSTM LM training step.
    Lstm,
    /// The README's MLP step, speculated and on the fragment path.
    Mlp,
    /// CartPole inference, sampling and updates.
    Cartpole,
    /// The TreeRNN training step.
    Tree,
    /// The refbench CNN training step (the `cnn` example's model).
    Cnn,
    /// The refbench Transformer training step (the `transformer_lm` example's model).
    Transformer,
    /// The `gan` example's discriminator and generator steps.
    Gan,
    /// What unrolling a loop costs to compile.
    Unroll,
    /// Shape-polymorphic variants against one graph per batch size.
    Dims,
    /// An LSTM LM stream of varying sequence lengths and batch sizes.
    Stream,
    /// The cost of one replay of a tiny block.
    Hit,
    /// Split programs' memory planned by pieces of values against the whole program's plan.
    Replan,
    /// Shared right factors packed once per run against gemm for every product.
    Pack,
    /// Small steps between split steps split too, keeping the workers' chains apart, or left
    /// whole.
    Joins,
    /// Long steps taken by the first free worker, or kept on the worker their split chose.
    Long,
    /// The fused-program interpreter against one compiled loop over the same functions.
    Fused,
    /// The steps of a CUDA run of the traced LSTM LM step, by kind (no GPU needed).
    CudaPlan,
}

fn main() {
    std::sync::LazyLock::force(&START);
    let args = Cli::parse();
    let quick = args.quick;
    if let d @ Device::Cuda(_) = args.device.device() {
        bench_cuda::run(d, quick);
        return;
    }
    // Without `--only`: every workload (not the unrolling or replay costs).
    let run = |w: Workload| match args.only {
        Some(only) => only == w,
        None => !matches!(
            w,
            Workload::Unroll
                | Workload::Hit
                | Workload::Dims
                | Workload::Stream
                | Workload::Replan
                | Workload::Pack
                | Workload::Joins
                | Workload::Long
                | Workload::Fused
                | Workload::CudaPlan
        ),
    };
    if run(Workload::CudaPlan) {
        bench_cuda::print_plan();
        return;
    }
    if run(Workload::Fused) {
        bench_fused::fused_cost(quick);
        return;
    }
    if run(Workload::Replan) {
        bench_ab::ab(bench_ab::REPLAN, quick);
        return;
    }
    if run(Workload::Pack) {
        bench_ab::ab(bench_ab::PACK, quick);
        return;
    }
    if run(Workload::Joins) {
        bench_ab::ab(bench_ab::SPLIT_JOINS, quick);
        return;
    }
    if run(Workload::Long) {
        bench_ab::ab(bench_ab::SHARE_LONG, quick);
        return;
    }
    if run(Workload::Stream) {
        let (steps, shapes, repeats) = if quick { (12, 2, 2) } else { (300, 6, 5) };
        bench_dims::stream_cost(steps, shapes, repeats);
        return;
    }
    if run(Workload::Dims) {
        bench_dims::dims_cost(if quick { 2 } else { 15 });
        return;
    }
    if run(Workload::Hit) {
        bench_costs::hit_cost();
        return;
    }
    let (repeats, scale) = if quick { (2, 1) } else { (9, 20) };
    let mut rows = Vec::new();
    let workload = |name: &'static str| {
        eprintln!("{name} ...");
        WORKLOAD.with(|w| w.set(name));
    };
    if run(Workload::Lstm) {
        workload("LSTM LM");
        rows.extend(lstm(repeats, 2 * scale));
    }
    if run(Workload::Mlp) {
        workload("MLP (README)");
        rows.extend(mlp(repeats, 50 * scale));
    }
    if run(Workload::Cartpole) {
        workload("CartPole");
        rows.extend(cartpole(repeats, 500 * scale, 4 * scale));
        let cells: Vec<String> = peak::narrow_product_us(9)
            .iter()
            .map(|(m, k, n, b, us)| format!("[{m},{k}]@[{k},{n}]{} {us:.2}", if *b { "+b" } else { "" }))
            .collect();
        println!("CartPole's narrow products (one thread, median of 9, µs): {}", cells.join(", "));
    }
    if run(Workload::Tree) {
        workload("TreeRNN");
        rows.extend(tree(repeats, 2 * scale));
    }
    if run(Workload::Cnn) {
        workload("CNN");
        rows.extend(bench_models::cnn_step(repeats, 2 * scale));
    }
    if run(Workload::Transformer) {
        workload("Transformer");
        rows.extend(bench_models::transformer_step(repeats, scale));
    }
    if run(Workload::Gan) {
        workload("GAN");
        rows.extend(bench_models::gan_step(repeats, 10 * scale));
    }
    if run(Workload::Unroll) {
        bench_costs::unroll_cost(if quick { &[8, 32] } else { &[32, 256, 1024, 4096] });
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
    println!(
        "| workload | metric | eager | janus | janus, no self-check | check | janus speed-up | self-check cost | check slowdown |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let fmt = |v: Option<f64>| {
        v.map_or("-".into(), |v| if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.3}") })
    };
    for r in &rows {
        let [e, j, jn, c] = r.values;
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.metric,
            fmt(e),
            fmt(j),
            fmt(jn),
            fmt(c),
            ratio(e, j),
            ratio(j, jn),
            ratio(c, e)
        );
    }
    // The self-check's cost from counters, not from timing differences (below this machine's
    // noise): the time checked calls took over the time of all janus-mode blocks.
    println!(
        "\nsampled self-check, janus-mode blocks (warm-up block included): checks × mean cost ÷ janus time"
    );
    println!(
        "| workload | replays | checks | mean check, ms | janus time, s | overhead | after replay 4096 | coverage after warm-up |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    CHECKED.with(|c| {
        for (name, x) in c.borrow().iter() {
            let (hits, checks, check_ms) =
                x.fragments.values().fold((0, 0, 0.0), |a, f| (a.0 + f.0, a.1 + f.1, a.2 + f.2));
            let mean = if checks > 0 { check_ms / checks as f64 } else { 0.0 };
            // From replay 4096 on, one check per SAMPLE_PERIOD replays of each variant: per
            // fragment, its replays times its mean check cost, over SAMPLE_PERIOD.
            let steady_ms: f64 = (x.fragments.values())
                .filter(|f| f.1 > 0)
                .map(|f| f.0 as f64 * f.2 / f.1 as f64 / janus::rt::SAMPLE_PERIOD as f64)
                .sum();
            println!(
                "| {name} | {hits} | {checks} | {mean:.3} | {:.2} | {:.2}% | {:.4}% | {:.2}% |",
                x.janus_s,
                100.0 * check_ms / (1e3 * x.janus_s),
                100.0 * steady_ms / (1e3 * x.janus_s),
                100.0 * x.staged as f64 / (x.staged + x.eager).max(1) as f64
            );
        }
    });
    println!(
        "(coverage: ops staged over ops in stageable blocks, janus-mode blocks after the warm-up block; \
         the eager ones are the self-check's)"
    );
    if rows.iter().any(|r| r.workload == "LSTM LM") {
        let peak = peak_table(&rows);
        workers_table(repeats, 2 * scale, peak);
    }
    if args.only.is_none() && !quick {
        bench_costs::hit_cost();
    }
}

/// The LSTM step in janus mode on two workers against the calling thread only
/// (`ExecOptions::serial`, as `JANUS_SERIAL=1`), interleaved in one run, with each one's share
/// of the machine's GEMM peak `peak` (GFLOP/s, as [`peak_table`] measured it).
fn workers_table(repeats: usize, steps: usize, peak: f64) {
    let (t, b, v, h) = (lstm_lm::T, lstm_lm::B, lstm_lm::V, lstm_lm::H);
    let flops = peak::lstm_step_gemm_flops(t, b, v, h);
    janus::manual_seed(0);
    let data = lstm_lm::Batches::synthetic(16);
    let init = lstm_lm::LstmLm::new(v, h);
    println!(
        "
LSTM step in janus mode, two workers against one (JANUS_SERIAL=1), interleaved;          GEMM peak {peak:.1} GFLOP/s"
    );
    println!("| metric | two workers, ms | % of peak | one worker, ms | % of peak | two workers' speed-up |");
    println!("|---|---:|---:|---:|---:|---:|");
    type Step = fn(&mut lstm_lm::LstmLm, &[Tensor], &[Tensor], f64) -> f32;
    let steps_of: [(&str, Step); 2] = [
        ("training step, speculated (one graph)", lstm_lm::janus_sgd_step),
        ("training step, fragments (speculate = false)", lstm_lm::janus_sgd_step_fragments),
    ];
    let mut next = 0;
    let before = janus::exec_options();
    for (metric, step) in steps_of {
        let mut models = [init.clone(), init.clone()];
        let mut times = [Vec::new(), Vec::new()];
        for r in 0..repeats + 1 {
            for (k, serial) in [false, true].into_iter().enumerate() {
                let mut o = before;
                o.serial = serial;
                janus::set_exec_options(o);
                for _ in 0..steps {
                    let (xs, ys) = data.batch(next);
                    let ms = timed(1e3, || _ = step(&mut models[k], xs, ys, 0.1));
                    if r > 0 {
                        times[k].push(ms);
                    }
                    next += 1;
                }
            }
        }
        janus::set_exec_options(before);
        let [two, one] = times.map(|mut v| median(&mut v));
        let pct = |ms: f64| 100.0 * flops / (ms * 1e-3) / 1e9 / peak;
        println!(
            "| {metric} | {two:.3} | {:.1}% | {one:.3} | {:.1}% | {:.2}x |",
            pct(two),
            pct(one),
            one / two
        );
    }
}

/// Each LSTM row's GEMM throughput against the machine's f32 GEMM peak, measured now; returns
/// the peak in GFLOP/s.
fn peak_table(rows: &[Row]) -> f64 {
    let (t, b, v, h) = (lstm_lm::T, lstm_lm::B, lstm_lm::V, lstm_lm::H);
    let flops = peak::lstm_step_gemm_flops(t, b, v, h);
    let threads = rayon::current_num_threads();
    let peak = peak::gemm_peak_gflops(1024, 10);
    println!(
        "\nGEMM throughput of the LSTM step (T={t}, B={b}, V={v}, H={h}: {:.3} GFLOP of products per step, \
         forward and backward) against this machine's f32 GEMM peak, measured now \
         (1024x1024x1024, {threads} threads, best of 10): {peak:.1} GFLOP/s",
        flops / 1e9
    );
    println!("| metric | eager, GFLOP/s | eager, % of peak | janus, GFLOP/s | janus, % of peak |");
    println!("|---|---:|---:|---:|---:|");
    let rate = |ms: Option<f64>| ms.map(|ms| flops / (ms * 1e-3) / 1e9);
    let cells = |g: Option<f64>| {
        g.map_or(["-".to_string(), "-".to_string()], |g| {
            [format!("{g:.1}"), format!("{:.1}%", 100.0 * g / peak)]
        })
    };
    for r in rows.iter().filter(|r| r.workload == "LSTM LM") {
        let ([ge, pe], [gj, pj]) = (cells(rate(r.values[0])), cells(rate(r.values[1])));
        println!("| {} | {ge} | {pe} | {gj} | {pj} |", r.metric.trim_end_matches(", ms"));
    }
    let floor = peak::lstm_step_gemm_floor_ms(t, b, v, h, 9);
    let step = rows.iter().find(|r| r.workload == "LSTM LM").and_then(|r| r.values[1]);
    println!(
        "The step's products alone (each timed by itself on one thread, row-major, hot in cache; \
         the sum halved for two workers): {floor:.3} ms{}",
        step.map_or(String::new(), |ms| format!(
            ", {:.0}% of the speculated step's {ms:.3} ms; the rest is elementwise work and \
             products running slower among it",
            100.0 * floor / ms
        ))
    );
    let tails = peak::column_tail_us(9);
    let cells: Vec<String> =
        tails.iter().map(|(m, k, n, us)| format!("[{m},{k}]@[{k},{n}] {us:.2}")).collect();
    println!("Column tails (one thread, median of 9, µs): {}", cells.join(", "));
    peak
}
