//! Host values that are not in a key must never be baked into a replay (issue 9, item 3):
//! `grads.len()`, values read by formatting, a panic caught during a recording, a replay that
//! panics (and the effects before the panic). Each case compares eager and janus mode over
//! several keys and asserts that unchecked replays happened. The sampled self-check is off in
//! this binary, so that it cannot hide a wrong replay (`janus_self_check.rs` tests it).
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};

fn frag(name: &str, block: u32) -> janus::rt::FragmentStats {
    let full = format!("{name}#{block}");
    janus::stats().fragments.into_iter().find(|f| f.name == full).unwrap_or_else(|| panic!("no {full}"))
}

fn same(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    a.dims() == b.dims() && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-6 * (1.0 + q.abs()))
}

#[track_caller]
fn assert_same(what: &str, got: &Tensor, want: &Tensor) {
    assert!(same(got, want), "{what}: janus {:?} vs eager {:?}", got.to_vec::<f64>(), want.to_vec::<f64>());
}

/// Unchecked replays of block `block` of `name`.
fn replays(name: &str, block: u32) -> u64 {
    let f = frag(name, block);
    f.hits - f.checks
}

#[janus(min_ops = 1, speculate = false)]
fn scale_by_count(x: &Tensor, grads: &Grads) -> Tensor {
    let y = x * grads.len() as f64 + 1.0;
    y
}

#[test]
fn grads_are_keyed_by_their_length() {
    janus::set_self_check(false);
    let leaves: Vec<Tensor> = (0..3).map(|k| Tensor::ones([2]).requires_grad() * 1.0 + k as f64).collect();
    let leaves: Vec<Tensor> = leaves.iter().map(|t| t.detach().requires_grad()).collect();
    for call in 0..30 {
        let n = 1 + call % 3; // three keys: one, two or three gradients
        let loss = leaves[..n].iter().fold(Tensor::scalar(0.0), |acc, l| acc + l.sum_all());
        let grads = loss.backward();
        let x = Tensor::from_vec(vec![0.5f32, -1.5, 2.0], [3]);
        let want = janus::with_mode(Mode::Eager, || scale_by_count(&x, &grads));
        assert_same(&format!("call {call} ({n} gradients)"), &scale_by_count(&x, &grads), &want);
    }
    assert!(replays("scale_by_count", 0) > 0, "{}", janus::explain());
}

/// A helper deciding on a value through formatting: a host read.
fn zero_if_nan(t: &Tensor) -> Tensor {
    if format!("{t:?}").contains("NaN") { Tensor::zeros_like(t) } else { t * 2.0 }
}

#[janus(min_ops = 1, speculate = false)]
fn formatted(x: &Tensor) -> Tensor {
    let a = (x * 3.0).sqrt();
    assert!(a.numel() > 0); // a host statement: `a` is the next block's input
    let y = zero_if_nan(&a) + 1.0;
    y
}

#[test]
fn formatting_tensor_values_is_a_host_read() {
    janus::set_self_check(false);
    for call in 0..24 {
        // Same key (shape and dtype) every call; every third input has a negative entry.
        let v = if call % 3 == 2 { -1.0f32 } else { 1.0 + call as f32 };
        let x = Tensor::from_vec(vec![v, 4.0], [2]);
        let want = janus::with_mode(Mode::Eager, || formatted(&x));
        assert_same(&format!("call {call}"), &formatted(&x), &want);
    }
    assert!(replays("formatted", 0) > 0, "{}", janus::explain());
    let reasons = frag("formatted", 1).eager;
    assert!(reasons.keys().any(|r| r.contains("host read `format()`")), "{reasons:?}");
}

/// A helper that falls back when an op panics.
fn select_or_zeros(x: &Tensor, idx: &Tensor) -> Tensor {
    catch_unwind(AssertUnwindSafe(|| x.index_select(0, idx))).unwrap_or_else(|_| Tensor::zeros([idx.numel()]))
}

#[janus(min_ops = 1, speculate = false)]
fn caught(x: &Tensor, idx: &Tensor) -> Tensor {
    let a = x.exp() * 0.5;
    assert!(a.numel() > 0);
    let y = select_or_zeros(&a, idx) + 1.0;
    y
}

#[test]
fn a_panic_caught_during_a_recording_makes_it_unusable() {
    janus::set_self_check(false);
    let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.3], [3]);
    for call in 0..24 {
        // The first calls of the key (the recordings) have an index out of range.
        let i = if call < 2 || call % 5 == 0 { 7 } else { (call % 3) as i64 };
        let idx = Tensor::from_vec(vec![i, 0], [2]);
        let want = janus::with_mode(Mode::Eager, || caught(&x, &idx));
        assert_same(&format!("call {call}"), &caught(&x, &idx), &want);
    }
    assert!(replays("caught", 0) > 0, "{}", janus::explain());
    let reasons = frag("caught", 1).eager;
    assert!(reasons.keys().any(|r| r.contains("a panic happened during the recording")), "{reasons:?}");
}

#[janus(min_ops = 1, speculate = false)]
fn pick(x: &Tensor, idx: &Tensor) -> Tensor {
    let y = (x * 2.0).index_select(0, idx) + 1.0;
    y
}

fn message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>().cloned().unwrap_or_default()
}

/// Thirty calls of `f` on `inputs(n, bad)` over two sizes `n` (two keys), six of them (from
/// call 8, every fourth) with an index out of range: each returns what eager mode returns, or
/// panics with its message.
fn same_as_eager_with_bad_indices(
    f: fn(&Tensor, &Tensor) -> Tensor,
    inputs: impl Fn(usize, bool) -> (Tensor, Tensor),
) {
    janus::set_self_check(false);
    for call in 0..30 {
        let (x, idx) = inputs(3 + call % 2, call > 4 && call % 4 == 0);
        let want = catch_unwind(|| janus::with_mode(Mode::Eager, || f(&x, &idx)));
        let got = catch_unwind(|| f(&x, &idx));
        match (got, want) {
            (Ok(g), Ok(w)) => assert_same(&format!("call {call}"), &g, &w),
            (Err(g), Err(w)) => assert_eq!(message(g), message(w), "call {call}: the same panic"),
            (g, w) => panic!("call {call}: janus {} but eager {}", g.is_ok(), w.is_ok()),
        }
    }
}

#[test]
fn a_replay_that_panics_runs_the_statements_and_panics_as_eager_mode() {
    same_as_eager_with_bad_indices(pick, |n, bad| {
        let x = Tensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<_>>(), [n]);
        (x, Tensor::from_vec(vec![if bad { 9 } else { 1 }, 0], [2]))
    });
    let f = frag("pick", 0);
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
    assert_eq!(f.eager_runs.get(&janus::rt::EagerKind::ReplayPanicked), Some(&6), "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false)]
fn pick_per_row(x: &Tensor, idx: &Tensor) -> Tensor {
    let y = (x * 2.0).gather(1, idx) + 1.0;
    y
}

/// As above for `gather`, which the CPU executor runs straight from the plan's buffers: an
/// index out of range still panics with eager mode's message.
#[test]
fn a_replayed_gather_out_of_range_panics_as_eager_mode() {
    same_as_eager_with_bad_indices(pick_per_row, |n, bad| {
        let x = Tensor::from_vec((0..2 * n).map(|i| i as f32).collect::<Vec<_>>(), [2, n]);
        (x, Tensor::from_vec(vec![1, if bad { 9 } else { 2 }], [2, 1]))
    });
    let f = frag("pick_per_row", 0);
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
    assert_eq!(f.eager_runs.get(&janus::rt::EagerKind::ReplayPanicked), Some(&6), "{}", janus::explain());
}

#[janus(min_ops = 1, speculate = false)]
fn bump_then_pick(state: &mut Tensor, x: &Tensor, idx: &Tensor) -> Tensor {
    *state = &*state + 1.0;
    let y = x.index_select(0, idx) * 2.0;
    y
}

#[test]
fn effects_before_a_panic_happen_as_in_eager_mode() {
    janus::set_self_check(false);
    let (mut se, mut sj) = (Tensor::zeros([2]), Tensor::zeros([2]));
    for call in 0..30 {
        let n = 3 + call % 2;
        let x = Tensor::from_vec((0..n).map(|i| i as f32).collect::<Vec<_>>(), [n]);
        let idx = Tensor::from_vec(vec![if call > 4 && call % 3 == 0 { -1 } else { 2 }], [1]);
        let want = catch_unwind(AssertUnwindSafe(|| {
            janus::with_mode(Mode::Eager, || bump_then_pick(&mut se, &x, &idx))
        }));
        let got = catch_unwind(AssertUnwindSafe(|| bump_then_pick(&mut sj, &x, &idx)));
        assert_eq!(got.is_ok(), want.is_ok(), "call {call}");
        if let (Ok(g), Ok(w)) = (&got, &want) {
            assert_same(&format!("call {call}"), g, w);
        }
        assert_same(&format!("call {call}: state"), &sj, &se);
    }
    assert_eq!(se.to_vec::<f32>(), vec![30.0, 30.0]);
    assert!(replays("bump_then_pick", 0) > 0, "{}", janus::explain());
}
