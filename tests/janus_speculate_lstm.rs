//! Speculation on the flagship workload (docs/guide/speculation.md): the LSTM
//! language-model step with Adam runs as one graph per call after profiling, with no block
//! dispatches and no eager ops, and equals eager mode over 50 steps (losses, parameters, Adam
//! state); the step with gradient clipping written as a host decision stays one graph while the
//! decision holds and falls back, committing nothing, when it flips. The step batched by hand
//! follows the per-timestep one. A function with an opaque
//! input is never speculated, and `explain()` says why.

mod common;
#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;

use janus::prelude::*;
use janus::rt::EagerKind;
use lstm_lm::{Batches, LstmLm};

/// The flagship example's training step (`examples/lstm_charlm.rs`), generic over the optimiser.
#[janus]
fn train_step<O: Optimizer>(m: &mut LstmLm, opt: &mut O, xs: &[Tensor], ys: &[Tensor]) -> f32 {
    let mut h = Tensor::zeros_on([xs[0].dims()[0], m.wh.dims()[0]], xs[0].device());
    let mut c = h.clone();
    let mut total = Tensor::scalar(0.0);
    for t in 0..xs.len() {
        (h, c) = lstm_lm::cell(m, &xs[t], &h, &c);
        total += lstm_lm::logits(m, &h).cross_entropy(&ys[t]);
    }
    let loss = total / xs.len() as f64;
    let grads = loss.backward();
    opt.step(m, &grads);
    loss.item()
}

fn max_diff<M: Module>(a: &M, b: &M) -> (String, f32) {
    let mut worst = (String::new(), 0.0f32);
    for ((n, p), (_, q)) in a.named_tensors().iter().zip(b.named_tensors()) {
        let err =
            (p.to_vec::<f32>().iter().zip(q.to_vec::<f32>())).map(|(u, v)| (u - v).abs()).fold(0.0, f32::max);
        if err > worst.1 {
            worst = (n.clone(), err);
        }
    }
    worst
}

fn fn_stats(d: &janus::Stats, name: &str) -> janus::rt::FragmentStats {
    let name = format!("{name}#fn");
    d.fragments.iter().find(|f| f.name == name).cloned().unwrap_or_else(|| panic!("{}", janus::explain()))
}

#[test]
fn the_flagship_adam_step_is_one_graph_and_equals_eager_over_50_steps() {
    janus::set_self_check(false);
    janus::manual_seed(7);
    let init = LstmLm::new(lstm_lm::V, 32);
    let data = Batches::synthetic(4);
    let (mut a, mut b) = (init.clone(), init);
    let (mut oa, mut ob) = (optim::Adam::new(0.01), optim::Adam::new(0.01));
    let mut steady = None;
    for step in 0..50 {
        if step == 5 {
            steady = Some(janus::stats());
        }
        let (xs, ys) = data.batch(step % 4);
        let la = janus::with_mode(Mode::Eager, || train_step(&mut a, &mut oa, xs, ys));
        let lb = train_step(&mut b, &mut ob, xs, ys);
        assert!((la - lb).abs() <= 1e-5 * la.abs().max(1.0), "step {step}: eager {la} vs janus {lb}");
        let (n, err) = max_diff(&a, &b);
        assert!(err <= 2e-5, "step {step}: parameter `{n}` differs by {err}");
        let (n, err) = max_diff(&oa, &ob);
        assert!(err <= 2e-5, "step {step}: Adam state `{n}` differs by {err}");
    }
    // Steps 5..50 in janus mode: every call one replay of the whole-function graph; its blocks
    // are never entered and no op runs eagerly outside the eager-mode calls, except, under
    // `JANUS_MODE=check`, the statements each replay is checked against.
    let d = janus::stats().since(&steady.unwrap());
    let whole = fn_stats(&d, "train_step");
    assert_eq!(whole.hits, 45, "{}", janus::explain());
    assert_eq!(whole.assert_failures, 0);
    let entered = common::inner_block_calls(&d, "train_step");
    assert_eq!(entered, 0, "blocks entered under the graph: {}", janus::explain());
    let eager_in_janus: u64 = (d.fragments.iter())
        .filter(|f| f.name.starts_with("train_step#"))
        .flat_map(|f| f.eager_ops.iter())
        .filter(|(k, _)| !common::on_purpose(k))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(eager_in_janus, 0, "ops ran eagerly in janus mode: {}", janus::explain());
    // The graph holds the backward pass that `backward()` recorded inside it (check mode counts
    // a replay's ops as checked, not staged: the statements' results are the ones returned).
    assert!(whole.ops_per_replay > 0);
    assert!(whole.staged_ops > 0 || janus::mode() == Mode::Check, "{}", janus::explain());
    // Its arenas, and the packed copies of the weights its 32 time steps share where CPU runs
    // pack them (`janus::pack()`), counted apart. (This test's tensors are all on the CPU.)
    assert!(whole.arena_bytes > 0, "{whole:?}");
    let packs = janus::exec_options().pack && janus_kernels::matmul::packed::available();
    assert_eq!(whole.packed_bytes > 0, packs, "packed bytes {} (packing {packs})", whole.packed_bytes);
    // Per key: one graph, no asserts (the trip count comes from the key), its path the time
    // loop's 32 trips. (The first call's key, with Adam's state not yet created, ran once.)
    let speculated: Vec<_> = whole.keys.iter().filter(|k| k.speculated).collect();
    let [key] = speculated.as_slice() else { panic!("one speculated key: {:?}", whole.keys) };
    assert!(key.speculated && key.asserts == 0 && key.hits >= 45, "{key:?}");
    assert_eq!(key.path.len(), lstm_lm::T, "{key:?}");
    assert!(key.path.iter().all(|&(line, taken)| taken && line == key.path[0].0));
    assert!(janus::explain().contains("path line"), "{}", janus::explain());
}

/// The step batched by hand (one input projection before the loop, one output layer and loss
/// after it; the bench's comparison row) is the same training step: speculated, it follows the
/// per-timestep step run eagerly over 20 SGD steps (losses and every parameter).
#[test]
fn the_step_batched_by_hand_is_one_graph_and_follows_the_per_timestep_step() {
    janus::set_self_check(false);
    janus::manual_seed(11);
    let init = LstmLm::new(lstm_lm::V, 32);
    let data = Batches::synthetic(4);
    let (mut a, mut b) = (init.clone(), init);
    let before = janus::stats();
    for step in 0..20 {
        let (xs, ys) = data.batch(step % 4);
        let la = janus::with_mode(Mode::Eager, || lstm_lm::janus_sgd_step(&mut a, xs, ys, 0.1));
        let lb = lstm_lm::janus_sgd_step_batched(&mut b, xs, ys, 0.1);
        assert!(
            (la - lb).abs() <= 1e-5 * la.abs().max(1.0),
            "step {step}: per-timestep {la} vs batched {lb}"
        );
        let (n, err) = max_diff(&a, &b);
        assert!(err <= 1e-4, "step {step}: parameter `{n}` differs by {err}");
    }
    let d = janus::stats().since(&before);
    let batched = fn_stats(&d, "janus_sgd_step_batched");
    assert!(batched.hits >= 15, "{}", janus::explain());
    assert_eq!(batched.assert_failures, 0, "{}", janus::explain());
}

#[test]
fn the_clipped_lstm_step_speculates_until_the_decision_flips_and_matches_eager() {
    janus::set_self_check(false);
    janus::manual_seed(8);
    let init = LstmLm::new(lstm_lm::V, 32);
    let data = Batches::synthetic(3);
    let (mut a, mut b) = (init.clone(), init);
    let before = janus::stats();
    // At step 15 the output weights of both copies are scaled up, so that the gradients
    // become large enough to clip (norms 25-90 against 5; 0.1 before): the decision flips, as
    // a loss spike makes it do in practice. At step 20 they are scaled back and it flips back.
    let mut flips = 0;
    let lr = 0.1;
    for step in 0..40 {
        if step == 15 || step == 20 {
            let k = if step == 15 { 400.0 } else { 1.0 / 400.0 };
            for m in [&mut a, &mut b] {
                m.wy = no_grad(|| &m.wy * k).requires_grad();
            }
        }
        let (xs, ys) = data.batch(step % 3);
        let failures = || {
            let s = janus::stats();
            s.fragments
                .iter()
                .find(|f| f.name == "janus_sgd_step_clipped#fn")
                .map_or(0, |f| f.assert_failures)
        };
        let failed_before = failures();
        let la = janus::with_mode(Mode::Eager, || lstm_lm::janus_sgd_step_clipped(&mut a, xs, ys, lr));
        let lb = lstm_lm::janus_sgd_step_clipped(&mut b, xs, ys, lr);
        assert!((la - lb).abs() <= 1e-4 * la.abs().max(1.0), "step {step}: eager {la} vs janus {lb}");
        let (n, err) = max_diff(&a, &b);
        assert!(err <= 1e-4, "step {step}: parameter `{n}` differs by {err}");
        if failures() > failed_before {
            flips += 1;
        }
    }
    let d = fn_stats(&janus::stats().since(&before), "janus_sgd_step_clipped");
    assert!(flips >= 2 && d.assert_failures >= 2, "the decision flipped: {}", janus::explain());
    assert!(d.hits >= 25, "one graph while the decision holds: {}", janus::explain());
    assert!(d.eager_runs.contains_key(&EagerKind::SpeculationFailed), "{}", janus::explain());
    // The key's graph asserts the clipping decision, at its line in `lstm_lm.rs`.
    let key = d.keys.iter().find(|k| k.speculated).expect("a speculated key");
    assert_eq!(key.asserts, 1, "{key:?}");
    assert_eq!(key.path.len(), 1, "{key:?}");
    let line = include_str!("../examples/common/lstm_lm.rs")
        .lines()
        .position(|l| l.contains("if norm.item() > 5.0"));
    assert_eq!(Some(key.path[0].0 as usize), line.map(|l| l + 1), "{key:?}");
}

/// The flagship step with Adam and clipping as a host decision on the gradients' norm: the
/// decision is an assert; a failed one commits neither the parameters nor Adam's state.
#[janus]
fn clipped_adam_step(m: &mut LstmLm, opt: &mut optim::Adam, xs: &[Tensor], ys: &[Tensor]) -> f32 {
    let loss = lstm_lm::loss(m, xs, ys);
    let mut grads = loss.backward();
    let norm = grads.total_norm();
    if norm.item() > 5.0 {
        grads = grads.scale_by(&(Tensor::scalar(5.0) / &norm));
    }
    opt.step(m, &grads);
    loss.item()
}

/// The same with `clip_norm`, which is branch-free: one graph, no assert.
#[janus]
fn clip_norm_adam_step(m: &mut LstmLm, opt: &mut optim::Adam, xs: &[Tensor], ys: &[Tensor]) -> f32 {
    let loss = lstm_lm::loss(m, xs, ys);
    let (grads, _norm) = loss.backward().clip_norm(5.0);
    opt.step(m, &grads);
    loss.item()
}

#[test]
fn adam_with_clipping_commits_nothing_on_a_failed_assert_and_matches_eager() {
    janus::set_self_check(false);
    type Step = fn(&mut LstmLm, &mut optim::Adam, &[Tensor], &[Tensor]) -> f32;
    for (name, f, flips_expected) in [
        ("clipped_adam_step", clipped_adam_step as Step, true),
        ("clip_norm_adam_step", clip_norm_adam_step, false),
    ] {
        janus::manual_seed(9);
        let init = LstmLm::new(lstm_lm::V, 32);
        let data = Batches::synthetic(3);
        let (mut a, mut b) = (init.clone(), init);
        let (mut oa, mut ob) = (optim::Adam::new(0.01), optim::Adam::new(0.01));
        let before = janus::stats();
        for step in 0..40 {
            if step == 15 || step == 20 {
                // As in the SGD test: gradients far above the bound for five steps.
                let k = if step == 15 { 400.0 } else { 1.0 / 400.0 };
                for m in [&mut a, &mut b] {
                    m.wy = no_grad(|| &m.wy * k).requires_grad();
                }
            }
            let (xs, ys) = data.batch(step % 3);
            let la = janus::with_mode(Mode::Eager, || f(&mut a, &mut oa, xs, ys));
            let lb = f(&mut b, &mut ob, xs, ys);
            assert!(
                (la - lb).abs() <= 1e-4 * la.abs().max(1.0),
                "{name} step {step}: eager {la} vs janus {lb}"
            );
            let (n, err) = max_diff(&a, &b);
            assert!(err <= 1e-4, "{name} step {step}: parameter `{n}` differs by {err}");
            let (n, err) = max_diff(&oa, &ob);
            assert!(err <= 1e-4, "{name} step {step}: Adam state `{n}` differs by {err}");
        }
        let d = fn_stats(&janus::stats().since(&before), name);
        assert!(d.hits >= 25, "{name}: {}", janus::explain());
        let key = d.keys.iter().find(|k| k.speculated).expect("a speculated key");
        if flips_expected {
            assert!(d.assert_failures >= 2 && key.asserts == 1, "{name}: {}", janus::explain());
        } else {
            assert!(d.assert_failures == 0 && key.asserts == 0, "{name}: {}", janus::explain());
        }
    }
}

/// A value the runtime cannot key or rebuild.
struct Gain {
    factor: f64,
}

#[janus]
fn with_opaque_input(g: &Gain, x: &Tensor) -> Tensor {
    let f = g.factor;
    let y = (x * 2.0).tanh() + 1.0;
    y * f
}

#[test]
fn a_function_with_an_opaque_input_is_never_speculated_and_says_why() {
    janus::set_self_check(false);
    for k in 0..10 {
        let g = Gain { factor: 1.0 + (k % 3) as f64 };
        let x = Tensor::randn([4]);
        let want = janus::with_mode(Mode::Eager, || with_opaque_input(&g, &x));
        assert_eq!(with_opaque_input(&g, &x).to_vec::<f32>(), want.to_vec::<f32>(), "call {k}");
    }
    let s = fn_stats(&janus::stats(), "with_opaque_input");
    assert_eq!(s.hits, 0, "{}", janus::explain());
    assert!(s.eager_runs.contains_key(&EagerKind::Opaque), "{}", janus::explain());
    assert!(
        s.eager.keys().any(|r| r.contains("opaque input `g`")),
        "the reason names the input: {:?}\n{}",
        s.eager,
        janus::explain()
    );
    assert!(janus::explain().contains("opaque input `g`"));
}
