//! Optimisers as checkpointable, compile-friendly state: training resumed from a checkpoint
//! equals uninterrupted training bit for bit (SGD with momentum and Adam, eagerly and through a
//! `#[janus]` step), `load` is strict and `load_partial` reports what it skipped, a learning
//! rate changed every step compiles nothing new, and the schedules give PyTorch's values.
//!
//! Run with `cargo test --release --test optim`.

use janus::optim::lr_scheduler::{CosineAnnealingLr, LinearLr, LrScheduler, SequentialLr, StepLr};
use janus::optim::{Adam, Sgd};
use janus::prelude::*;

#[derive(Module, Clone)]
struct Mlp {
    l1: nn::Linear,
    l2: nn::Linear,
}

/// Everything a training run checkpoints, in one module (the derive passes `load`'s
/// preparation on to the optimiser inside).
#[derive(Module, Clone)]
struct Run<O> {
    net: Mlp,
    opt: O,
}

fn loss_of(net: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    net.l2.forward(&net.l1.forward(x).tanh()).cross_entropy(y)
}

fn data(seed: u64) -> (Tensor, Tensor) {
    janus::manual_seed(seed);
    let x = Tensor::randn([16, 5]);
    let y = Tensor::from_vec((0..16).map(|i| (i * 7 % 3) as i64).collect::<Vec<_>>(), [16]);
    (x, y)
}

fn new_net(seed: u64) -> Mlp {
    janus::manual_seed(seed);
    Mlp { l1: nn::Linear::new(5, 8), l2: nn::Linear::new(8, 3) }
}

/// Every tensor of a module as exact bits, by name, so equality is bit for bit.
fn bits<M: Module>(m: &M) -> Vec<(String, Vec<u64>)> {
    m.named_tensors()
        .into_iter()
        .map(|(name, t)| {
            let v = match t.dtype() {
                DType::F32 => t.to_vec::<f32>().iter().map(|x| x.to_bits() as u64).collect(),
                DType::F64 => t.to_vec::<f64>().iter().map(|x| x.to_bits()).collect(),
                DType::I64 => t.to_vec::<i64>().iter().map(|&x| x as u64).collect(),
                DType::Bool => t.to_vec::<bool>().iter().map(|&x| x as u64).collect(),
            };
            (name, v)
        })
        .collect()
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("janus-optim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn eager_step<O: Optimizer>(run: &mut Run<O>, x: &Tensor, y: &Tensor) -> f32 {
    let loss = loss_of(&run.net, x, y);
    let grads = loss.backward();
    run.opt.step(&mut run.net, &grads);
    loss.item()
}

/// Trains `total` steps without a break, and again with a save after `at` steps and a load
/// into a fresh network and a fresh optimiser (`fresh_opt`, built with other hyper-parameters
/// where it can be, which the checkpoint must override). The uninterrupted run takes
/// `whole_step`, the other `step`. Returns both final states and losses.
type Step<O> = fn(&mut Run<O>, &Tensor, &Tensor) -> f32;
/// A run's final state and its losses.
type Trained<O> = (Run<O>, Vec<f32>);
fn resume_vs_continue<O: Optimizer + Clone>(
    name: &str,
    (opt, fresh_opt): (O, O),
    (total, at): (usize, usize),
    (whole_step, step): (Step<O>, Step<O>),
) -> [Trained<O>; 2] {
    let (x, y) = data(11);
    let start = Run { net: new_net(5), opt };
    let mut whole = start.clone();
    let whole_losses: Vec<f32> = (0..total).map(|_| whole_step(&mut whole, &x, &y)).collect();

    let mut first = start.clone();
    let mut losses: Vec<f32> = (0..at).map(|_| step(&mut first, &x, &y)).collect();
    let path = tmp(name);
    janus::save(&path, &first).unwrap();
    drop(first);
    let mut resumed = Run { net: new_net(99), opt: fresh_opt };
    janus::load(&path, &mut resumed).unwrap();
    losses.extend((at..total).map(|_| step(&mut resumed, &x, &y)));
    [(whole, whole_losses), (resumed, losses)]
}

#[test]
fn sgd_with_momentum_resumes_bit_for_bit() {
    let [(whole, wl), (resumed, rl)] = resume_vs_continue(
        "sgd.safetensors",
        (Sgd::new(0.2).momentum(0.9).weight_decay(1e-3), Sgd::new(0.7).momentum(0.5).weight_decay(0.1)),
        (12, 5),
        (eager_step, eager_step),
    );
    assert_eq!(wl, rl);
    assert_eq!(bits(&whole), bits(&resumed));
    // The momentum buffers were restored, not recreated as zeros: without them the next step
    // differs.
    assert!(bits(&whole).iter().any(|(n, _)| n == "opt.velocity.3"));
    assert!(wl[11] < wl[0], "training made progress: {wl:?}");
}

#[test]
fn adam_resumes_bit_for_bit() {
    let [(whole, wl), (resumed, rl)] = resume_vs_continue(
        "adam.safetensors",
        (
            Adam::new(0.05).betas(0.8, 0.99).weight_decay(1e-2),
            Adam::new(0.5).betas(0.9, 0.999).weight_decay(0.3),
        ),
        (12, 4),
        (eager_step, eager_step),
    );
    assert_eq!(wl, rl);
    assert_eq!(bits(&whole), bits(&resumed));
    assert_eq!(resumed.opt.lr(), 0.05, "the learning rate comes from the checkpoint");
}

#[test]
fn resuming_without_the_optimizer_state_would_diverge() {
    // The test above can fail: losing the moments (what `load` did before) changes the result.
    let (x, y) = data(11);
    let mut run = Run { net: new_net(5), opt: Adam::new(0.05) };
    for _ in 0..4 {
        eager_step(&mut run, &x, &y);
    }
    let mut lost = Run { net: run.net.clone(), opt: Adam::new(0.05) };
    eager_step(&mut run, &x, &y);
    eager_step(&mut lost, &x, &y);
    assert_ne!(bits(&run.net), bits(&lost.net));
}

// One `#[janus]` training step per run, so both runs see the same calls: the same steps are
// profiled, recorded and replayed in each.
macro_rules! janus_train_step {
    ($name:ident, $opt:ty) => {
        #[janus]
        fn $name(run: &mut Run<$opt>, x: &Tensor, y: &Tensor) -> f32 {
            let loss = loss_of(&run.net, x, y);
            let grads = loss.backward();
            run.opt.step(&mut run.net, &grads);
            loss.item()
        }
    };
}
janus_train_step!(adam_whole, Adam);
janus_train_step!(adam_resumed, Adam);
janus_train_step!(sgd_whole, Sgd);
janus_train_step!(sgd_resumed, Sgd);

#[test]
fn a_janus_training_step_resumes_bit_for_bit() {
    // Two copies of each step, so that each run meets a cold cache and takes the same path
    // (profile, record, compile, replay) at the same steps. The sampled self-check is off, as
    // the other tests here turn it off for the whole process: switched off midway, it would
    // make one run return eager results on replays where the other returns compiled ones.
    janus::set_self_check(false);
    let [(whole, wl), (resumed, rl)] = resume_vs_continue(
        "adam-janus.safetensors",
        (Adam::new(0.05), Adam::new(0.5)),
        (10, 4),
        (adam_whole, adam_resumed),
    );
    assert_eq!(wl, rl);
    assert_eq!(bits(&whole), bits(&resumed));
    let [(whole, wl), (resumed, rl)] = resume_vs_continue(
        "sgd-janus.safetensors",
        (Sgd::new(0.2).momentum(0.9), Sgd::new(0.2).momentum(0.9)),
        (10, 4),
        (sgd_whole, sgd_resumed),
    );
    assert_eq!(wl, rl);
    assert_eq!(bits(&whole), bits(&resumed));
    for f in ["adam_resumed", "sgd_resumed"] {
        let replays: u64 = janus::stats().function(f).map(|s| s.hits).sum();
        assert!(replays > 0, "{f} replayed compiled graphs: {}", janus::explain());
    }
}

#[test]
fn load_is_strict_and_leaves_the_module_unchanged_on_error() {
    let (x, y) = data(3);
    let mut run = Run { net: new_net(1), opt: Adam::new(0.01) };
    eager_step(&mut run, &x, &y);
    let path = tmp("strict.safetensors");
    janus::save(&path, &run).unwrap();

    // The network alone does not take the optimiser's tensors: an error naming the first.
    #[derive(Module)]
    struct NetOnly {
        net: Mlp,
    }
    let mut net = NetOnly { net: new_net(2) };
    let before = bits(&net);
    let err = janus::load(&path, &mut net).unwrap_err().to_string();
    assert!(
        err.contains("strict.safetensors: tensor `opt.beta1` in the file is not taken by the module"),
        "{err}"
    );
    assert!(err.contains("(nor are 12 more)"), "lr, beta2, eps, step and 2 x 4 moments: {err}");
    assert_eq!(bits(&net), before, "a failed load changes nothing");

    // A fresh optimiser whose moments the file cannot fill (a shape differs): nothing changes,
    // not even the lazily made moments.
    let mut wider =
        Run { net: Mlp { l1: nn::Linear::new(5, 9), l2: nn::Linear::new(9, 3) }, opt: Adam::new(0.01) };
    let before = bits(&wider);
    let err = janus::load(&path, &mut wider).unwrap_err().to_string();
    assert!(err.contains("`net.l1.weight`") && err.contains("[8, 5]"), "{err}");
    assert_eq!(bits(&wider), before);

    // `load_partial` takes what matches and reports the rest, both ways.
    let mut net_and_more = (run.net.clone(), Tensor::zeros([4]));
    let path_net = tmp("net-only.safetensors");
    janus::save(&path_net, &(new_net(7), Tensor::ones([4]), Tensor::ones([3]))).unwrap();
    let report = janus::load_partial(&path_net, &mut net_and_more).unwrap();
    assert_eq!(report.unexpected, ["2"]);
    assert!(report.missing.is_empty());
    assert_eq!(bits(&net_and_more.0), bits(&new_net(7)));
    assert_eq!(net_and_more.1.to_vec::<f32>(), [1.0; 4]);
    let mut mismatched = (new_net(8), Tensor::zeros([5]));
    let before = bits(&mismatched);
    let err = janus::load_partial(&path_net, &mut mismatched).unwrap_err().to_string();
    assert!(err.contains("tensor `1` has shape [4] in the file"), "a shared tensor must still match: {err}");
    assert_eq!(bits(&mismatched), before);
    let mut extra = (new_net(8), Tensor::ones([4]), Tensor::ones([3]), Tensor::full([1], 5.0));
    let report = janus::load_partial(&path_net, &mut extra).unwrap();
    assert_eq!((report.missing, report.unexpected), (vec!["3".to_string()], vec![]));
    assert_eq!(extra.3.to_vec::<f32>(), [5.0], "a missing tensor keeps its value");
    assert_eq!(bits(&extra.0), bits(&new_net(7)));
}

#[janus(min_ops = 1)]
fn scheduled_step(run: &mut Run<Adam>, x: &Tensor, y: &Tensor) -> f32 {
    let loss = loss_of(&run.net, x, y);
    let grads = loss.backward();
    run.opt.step(&mut run.net, &grads);
    loss.item()
}

#[test]
fn a_learning_rate_schedule_compiles_no_new_variants() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let (x, y) = data(21);
    let start = Run { net: new_net(4), opt: Adam::new(0.05) };
    let steps = 14;
    let train = |mode: Mode| {
        janus::with_mode(mode, || {
            let mut run = start.clone();
            let mut sched = CosineAnnealingLr::new(&mut run.opt, steps, 1e-3);
            let mut rates = Vec::new();
            let losses: Vec<f32> = (0..steps)
                .map(|_| {
                    rates.push(run.opt.lr());
                    let loss = scheduled_step(&mut run, &x, &y);
                    sched.step(&mut run.opt);
                    loss
                })
                .collect();
            (run, losses, rates)
        })
    };
    let (eager, eager_losses, rates) = train(Mode::Eager);
    let (staged, losses, _) = train(Mode::Janus);
    let distinct: std::collections::BTreeSet<u64> = rates.iter().map(|r| r.to_bits()).collect();
    assert_eq!(distinct.len(), steps, "every step has its own rate: {rates:?}");
    for (a, b) in losses.iter().zip(&eager_losses) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "janus {losses:?}\neager {eager_losses:?}");
    }
    for ((name, a), (_, b)) in staged.net.named_tensors().iter().zip(eager.net.named_tensors()) {
        let (a, b) = (a.to_vec::<f32>(), b.to_vec::<f32>());
        assert!(
            a.iter().zip(&b).all(|(p, q)| (p - q).abs() <= 1e-5 * (1.0 + q.abs())),
            "{name}: {a:?} vs {b:?}"
        );
    }
    // The first step (moments not made yet) and the others: two keys, whatever the rate.
    let frags: Vec<_> = janus::stats().function("scheduled_step").cloned().collect();
    let hits: u64 = frags.iter().map(|f| f.hits).sum();
    assert!(hits >= (steps - 4) as u64, "replayed every step once compiled: {}", janus::explain());
    for f in &frags {
        assert!(f.variants <= 2, "{} compiled {} variants: {}", f.name, f.variants, janus::explain());
        assert!(!f.eager.keys().any(|r| r.contains("variant limit")), "{}", janus::explain());
    }
}

fn assert_rates(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1e-3), "got {got:?}\nwant {want:?}");
    }
}

/// The rates an optimiser sees: epoch 0 (set when the scheduler is made), then after each step.
fn rates<S: LrScheduler>(opt: &mut Sgd, mut sched: S, epochs: usize) -> Vec<f64> {
    let mut out = vec![opt.lr()];
    for _ in 0..epochs {
        sched.step(opt);
        out.push(opt.lr());
        assert_eq!(sched.get_last_lr(), opt.lr());
    }
    out
}

#[test]
fn step_lr_matches_pytorch() {
    // torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.1) with lr 0.1.
    let mut opt = Sgd::new(0.1);
    let s = StepLr::new(&mut opt, 3, 0.1);
    assert_rates(&rates(&mut opt, s, 7), &[0.1, 0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001]);
}

#[test]
fn cosine_annealing_matches_pytorch() {
    // CosineAnnealingLR(opt, T_max=4, eta_min=0.1) with lr 1.0: 0.1 + 0.9 (1 + cos(pi t / 4)) / 2.
    let mut opt = Sgd::new(1.0);
    let s = CosineAnnealingLr::new(&mut opt, 4, 0.1);
    let c = std::f64::consts::FRAC_1_SQRT_2; // cos(pi / 4)
    let want = [1.0, 0.1 + 0.9 * (1.0 + c) / 2.0, 0.55, 0.1 + 0.9 * (1.0 - c) / 2.0, 0.1];
    assert_rates(&rates(&mut opt, s, 4), &want);
}

#[test]
fn linear_warmup_matches_pytorch() {
    // LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=3) with lr 0.1.
    let mut opt = Sgd::new(0.1);
    let s = LinearLr::new(&mut opt, 0.25, 1.0, 3);
    assert_rates(&rates(&mut opt, s, 5), &[0.025, 0.05, 0.075, 0.1, 0.1, 0.1]);
    let mut opt = Sgd::new(0.1);
    let s = LinearLr::new(&mut opt, 1.0, 0.5, 2); // a linear decay
    assert_rates(&rates(&mut opt, s, 3), &[0.1, 0.075, 0.05, 0.05]);
}

#[test]
fn warmup_then_cosine_matches_pytorch() {
    // SequentialLR([LinearLR(start_factor=0.1, total_iters=2), CosineAnnealingLR(T_max=2)],
    // milestones=[2]) with lr 1.0. The cosine starts from the base rate, not the warm-up's.
    let mut opt = Sgd::new(1.0);
    let warmup = LinearLr::warmup(&mut opt, 0.1, 2);
    let cosine = CosineAnnealingLr::new(&mut opt, 2, 0.0);
    let s = SequentialLr::new(&mut opt, vec![Box::new(warmup), Box::new(cosine)], &[2]);
    assert_rates(&rates(&mut opt, s, 4), &[0.1, 0.55, 1.0, 0.5, 0.0]);
}

#[test]
#[should_panic(expected = "StepLr::new: step_size must be at least 1")]
fn a_zero_step_size_is_an_error() {
    StepLr::new(&mut Sgd::new(0.1), 0, 0.5);
}

// `speculate = false`: a function's `dynamic(..)` scalars key its whole-function graph like
// constants (README, Limitations); the blocks are what take the rate as an input.
#[janus(min_ops = 1, dynamic(lr), speculate = false)]
fn step_at_rate(run: &mut Run<Sgd>, x: &Tensor, y: &Tensor, lr: f64) -> f32 {
    run.opt.set_lr(lr); // `lr` is a rank-0 tensor in here: a graph input
    let loss = loss_of(&run.net, x, y);
    let grads = loss.backward();
    run.opt.step(&mut run.net, &grads);
    loss.item()
}

#[test]
fn set_lr_takes_a_dynamic_scalar_inside_a_janus_step() {
    janus::set_self_check(false); // it would hide a wrong replay behind the eager result
    let (x, y) = data(8);
    let start = Run { net: new_net(6), opt: Sgd::new(1.0) };
    let steps = 12;
    let rate = |k: usize| 0.3 / (1.0 + k as f64);
    let train = |mode: Mode| {
        janus::with_mode(mode, || {
            let mut run = start.clone();
            let losses: Vec<f32> = (0..steps).map(|k| step_at_rate(&mut run, &x, &y, rate(k))).collect();
            (run, losses)
        })
    };
    let ((eager, eager_losses), (staged, losses)) = (train(Mode::Eager), train(Mode::Janus));
    for (a, b) in losses.iter().zip(&eager_losses) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "janus {losses:?}\neager {eager_losses:?}");
    }
    assert_eq!((staged.opt.lr(), eager.opt.lr()), (rate(steps - 1), rate(steps - 1)));
    let w = |r: &Run<Sgd>| r.net.l1.weight.to_vec::<f32>();
    assert!(w(&staged).iter().zip(w(&eager)).all(|(p, q)| (p - q).abs() <= 1e-5 * (1.0 + q.abs())));
    // Every block compiles once (two recordings) and replays the other calls, whatever the rate.
    let frags: Vec<_> = janus::stats().function("step_at_rate").cloned().collect();
    assert!(!frags.is_empty());
    for f in &frags {
        let ok = f.variants == 1 && f.hits == (steps - 2) as u64;
        assert!(ok, "{}: {} variants, {} hits: {}", f.name, f.variants, f.hits, janus::explain());
    }
}
