//! Whole-function speculation (see docs/design.md, "Speculation"): a `#[janus]` function whose
//! path is stable runs as one graph (forward, `backward()` and the update together), with
//! asserts on decisions taken from tensor values; a failed assert commits nothing and the call
//! runs the fragment path. Every test compares with eager mode call by call, and asserts that
//! speculative replays happened.

mod common;

use janus::prelude::*;
use janus::rt::EagerKind;

#[derive(Module, Clone)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Mlp {
    fn new(seed: u64) -> Mlp {
        janus::manual_seed(seed);
        let p = |r: usize, c: usize| no_grad(|| (Tensor::randn([r, c]) * 0.3).requires_grad());
        Mlp { w1: p(4, 16), b1: Tensor::zeros([16]).requires_grad(), w2: p(16, 3) }
    }
}

fn loss_of(m: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    ((x.matmul(&m.w1) + &m.b1).tanh()).matmul(&m.w2).cross_entropy(y)
}

/// The README's step: forward, backward, Adam, `loss.item()` at the tail.
#[janus]
fn adam_step(m: &mut Mlp, opt: &mut optim::Adam, x: &Tensor, y: &Tensor) -> f32 {
    let loss = loss_of(m, x, y);
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

/// Gradient clipping with a host decision on a tensor value (defined twice: the threads test
/// flips it often, so it allows many failed speculations).
macro_rules! clipped {
    ($name:ident, $($opt:tt)*) => {
        #[janus($($opt)*)]
        fn $name(m: &mut Mlp, x: &Tensor, y: &Tensor, max_norm: f32) -> f32 {
            let loss = loss_of(m, x, y);
            let grads = loss.backward();
            let (g1, gb, g2) =
                (grads.get(&m.w1).unwrap().clone(), grads.get(&m.b1).unwrap().clone(), grads.get(&m.w2).unwrap().clone());
            let norm = (g1.square().sum_all() + gb.square().sum_all() + g2.square().sum_all()).sqrt();
            let mut scale = Tensor::scalar(0.1);
            if norm.item() > max_norm {
                scale = Tensor::scalar(0.1 * max_norm) / &norm;
            }
            m.w1 = no_grad(|| &m.w1 - g1 * &scale).requires_grad();
            m.b1 = no_grad(|| &m.b1 - gb * &scale).requires_grad();
            m.w2 = no_grad(|| &m.w2 - g2 * &scale).requires_grad();
            loss.item()
        }
    };
}
clipped!(clipped_step,);
clipped!(clipped_step_threads, max_failures = 10000);

fn batch(k: usize, big: bool) -> (Tensor, Tensor) {
    janus::manual_seed(100 + k as u64);
    let x = Tensor::randn([8, 4]) * if big { 40.0 } else { 0.05 };
    let y = Tensor::from_vec((0..8).map(|i| ((i + k) % 3) as i64).collect::<Vec<_>>(), [8]);
    (x, y)
}

fn same_params<M: Module>(a: &M, b: &M, what: &str) {
    for ((n, p), (_, q)) in a.named_tensors().iter().zip(b.named_tensors()) {
        let (p, q) = (p.to_vec::<f32>(), q.to_vec::<f32>());
        let err = p.iter().zip(&q).map(|(u, v)| (u - v).abs()).fold(0.0, f32::max);
        assert!(err <= 2e-5, "{what}: `{n}` differs by {err}");
    }
}

fn frag(name: &str) -> janus::rt::FragmentStats {
    janus::stats()
        .fragments
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("{}", janus::explain()))
}

#[test]
fn a_training_step_runs_as_one_graph() {
    janus::set_self_check(false);
    let init = Mlp::new(1);
    let (mut a, mut b) = (init.clone(), init);
    let (mut oa, mut ob) = (optim::Adam::new(0.01), optim::Adam::new(0.01));
    let before = janus::stats();
    for step in 0..50 {
        let (x, y) = batch(step % 4, false);
        let la = janus::with_mode(Mode::Eager, || adam_step(&mut a, &mut oa, &x, &y));
        let lb = adam_step(&mut b, &mut ob, &x, &y);
        assert!((la - lb).abs() <= 1e-5 * la.abs().max(1.0), "step {step}: eager {la} vs janus {lb}");
        same_params(&a, &b, &format!("step {step}"));
        same_params(&oa, &ob, &format!("step {step}, Adam state"));
    }
    let d = janus::stats().since(&before);
    let whole = d.fragments.iter().find(|f| f.name == "adam_step#fn").expect("the whole-function fragment");
    assert!(whole.hits >= 45, "{}", janus::explain());
    // Once the function graph replays, its blocks are not even entered (except, under
    // `JANUS_MODE=check`, by the statements each replay is checked against).
    let inner_calls = common::inner_block_calls(&d, "adam_step");
    assert!(inner_calls <= 10, "inner blocks entered {inner_calls} times: {}", janus::explain());
}

#[test]
fn a_flipped_clipping_decision_commits_nothing_and_matches_eager() {
    janus::set_self_check(false);
    let init = Mlp::new(2);
    let (mut a, mut b) = (init.clone(), init);
    let before = janus::stats();
    // Small inputs (no clipping), then large ones (clipping), then small again.
    for step in 0..36 {
        let big = (12..24).contains(&step);
        let (x, y) = batch(step % 3, big);
        let la = janus::with_mode(Mode::Eager, || clipped_step(&mut a, &x, &y, 1.0));
        let lb = clipped_step(&mut b, &x, &y, 1.0);
        assert!((la - lb).abs() <= 1e-5 * la.abs().max(1.0), "step {step}: eager {la} vs janus {lb}");
        same_params(&a, &b, &format!("step {step}"));
    }
    let d = janus::stats().since(&before);
    let whole = d.fragments.iter().find(|f| f.name == "clipped_step#fn").unwrap();
    assert!(whole.hits >= 20, "{}", janus::explain());
    assert!(whole.assert_failures >= 1, "the flips failed asserts: {}", janus::explain());
    assert!(whole.eager_runs.contains_key(&EagerKind::SpeculationFailed), "{}", janus::explain());
}

/// A loop over the input sequence: its trip count is the slice's length, part of the key.
#[janus]
fn sequence_sum(xs: &[Tensor], w: &Tensor) -> Tensor {
    let mut h = Tensor::zeros_like(&xs[0]);
    for x in xs {
        h = (h + x).matmul(w).tanh();
    }
    h
}

/// A loop whose trip count depends on tensor values.
#[janus]
fn halve_until_small(x: &Tensor) -> Tensor {
    let mut y = x.clone();
    while y.abs().sum_all().item() > 1.0 {
        y = &y * 0.5;
    }
    y
}

#[test]
fn loops_by_length_speculate_and_loops_by_value_fall_back() {
    janus::set_self_check(false);
    let w = Tensor::randn([3, 3]) * 0.5;
    for call in 0..10 {
        let len = 2 + call % 2;
        let xs: Vec<Tensor> = (0..len).map(|k| Tensor::randn([2, 3]) * (k as f64 + 1.0)).collect();
        let want = janus::with_mode(Mode::Eager, || sequence_sum(&xs, &w));
        assert_eq!(sequence_sum(&xs, &w).to_vec::<f32>(), want.to_vec::<f32>(), "call {call}");
    }
    let s = frag("sequence_sum#fn");
    assert!(s.hits >= 4 && s.assert_failures == 0, "{}", janus::explain());
    for call in 0..12 {
        let x = Tensor::randn([4]) * (1.0 + 3.0 * (call % 4) as f64);
        let want = janus::with_mode(Mode::Eager, || halve_until_small(&x));
        assert_eq!(halve_until_small(&x).to_vec::<f32>(), want.to_vec::<f32>(), "call {call}");
    }
    let s = frag("halve_until_small#fn");
    assert!(s.assert_failures >= 1, "{}", janus::explain());
    assert!(
        s.eager_runs.contains_key(&EagerKind::SpeculationFailed)
            || s.eager.keys().any(|r| r.contains("path changed")),
        "the reason is shown: {}",
        janus::explain()
    );
}

#[janus]
fn noisy_step(x: &Tensor) -> Tensor {
    let y = (x * 2.0).tanh() + 1.0;
    println!("a host statement: {}", x.dims()[0]);
    y.exp()
}

#[test]
fn functions_with_host_statements_are_never_speculated() {
    janus::set_self_check(false);
    for k in 0..12 {
        let x = Tensor::ones([3 + k % 2]);
        let want = janus::with_mode(Mode::Eager, || noisy_step(&x));
        assert_eq!(noisy_step(&x).to_vec::<f32>(), want.to_vec::<f32>());
    }
    let s = frag("noisy_step#fn");
    assert_eq!(s.hits, 0);
    assert!(s.eager.keys().any(|r| r.contains("a host statement")), "{}", janus::explain());
    // Its blocks still stage.
    assert!(
        janus::stats().function("noisy_step").any(|f| f.name != "noisy_step#fn" && f.hits > 0),
        "{}",
        janus::explain()
    );
}

#[test]
fn threads_speculate_and_fail_independently_and_match_eager() {
    janus::set_self_check(false);
    let handles: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let init = Mlp::new(10 + t);
                let (mut a, mut b) = (init.clone(), init);
                for step in 0..500 {
                    let big = step % 97 == 50; // a rare flip of the clipping decision
                    let (x, y) = batch(step % 5, big);
                    let la = janus::with_mode(Mode::Eager, || clipped_step_threads(&mut a, &x, &y, 1.0));
                    let lb = clipped_step_threads(&mut b, &x, &y, 1.0);
                    assert!(
                        (la - lb).abs() <= 1e-5 * la.abs().max(1.0),
                        "thread {t}, step {step}: {la} vs {lb}"
                    );
                }
                same_params(&a, &b, &format!("thread {t}"));
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = frag("clipped_step_threads#fn");
    assert!(s.hits > 1000 && s.assert_failures >= 8, "{}", janus::explain());
}

/// A model with a large table that the function below never reads.
#[derive(Module, Clone)]
struct Head {
    table: Tensor,
    wo: Tensor,
    bo: Tensor,
}

/// Two ops on small values: as cheap eagerly as a replay, whether the body is a block or the
/// whole function (TreeRNN's `classify`).
#[janus]
fn tiny_head(p: &Head, h: &Tensor) -> Tensor {
    h.matmul(&p.wo) + &p.bo
}

#[test]
fn an_unread_large_leaf_does_not_make_a_tiny_function_worth_compiling() {
    let p = Head { table: Tensor::zeros([512, 64]), wo: Tensor::ones([64, 2]), bo: Tensor::zeros([2]) };
    let h = Tensor::ones([1, 64]);
    for _ in 0..8 {
        assert_eq!(tiny_head(&p, &h).to_vec::<f32>(), vec![64.0, 64.0]);
    }
    let whole = frag("tiny_head#fn");
    assert_eq!(whole.hits, 0, "{}", janus::explain());
    assert!(whole.eager_runs.contains_key(&EagerKind::TooSmall), "{}", janus::explain());
}
