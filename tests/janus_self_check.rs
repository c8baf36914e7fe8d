//! The sampled self-check (issue 9, item 3): a tensor helper that reads a scalar from a
//! thread-local inside it is invisible to the macro (a helper returning the scalar itself is
//! read on every call: `janus_wave3_correctness.rs`), so a replay keeps the value it was
//! recorded with. The check at replays
//! 1, 2, 4, ..., 4096 and then every 4096th finds a lasting divergence within
//! `janus::rt::SAMPLE_PERIOD` replays, invalidates the variant and returns eager results; and
//! checked calls keep the random stream exactly as eager mode does. Its own binary: the
//! self-check switch is process-wide.

use janus::prelude::*;
use std::cell::Cell;

fn frag(name: &str) -> janus::rt::FragmentStats {
    janus::stats().function(name).next().cloned().unwrap_or_else(|| panic!("no {name}"))
}

fn same(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    a.dims() == b.dims() && x.iter().zip(&y).all(|(p, q)| (p - q).abs() <= 1e-6 * (1.0 + q.abs()))
}

thread_local! {
    static TEMPERATURE: Cell<f64> = const { Cell::new(1.0) };
}

fn temperature() -> f64 {
    TEMPERATURE.with(Cell::get)
}

/// A tensor helper that reads a thread-local inside: invisible to the macro, so not in the key.
fn cooled(x: &Tensor) -> Tensor {
    x / temperature()
}

#[janus(min_ops = 1)]
fn soften(x: &Tensor) -> Tensor {
    let y = cooled(x).softmax(-1);
    y
}

#[test]
fn the_sampled_self_check_finds_a_changed_thread_local_within_its_bound() {
    janus::set_self_check(true);
    let x = Tensor::from_vec(vec![0.5f32, 1.5, -1.0], [1, 3]);
    let mut wrong_after_change = 0;
    for call in 0..40u64 {
        // Recorded at calls 0 and 1, so replay n is call n + 1; the helper's value changes at
        // replay 10 (after the check at replay 8), and the next sampled check is replay 16.
        TEMPERATURE.with(|t| t.set(if call <= 10 { 1.0 } else { 4.0 }));
        let want = janus::with_mode(Mode::Eager, || soften(&x));
        if !same(&soften(&x), &want) {
            wrong_after_change += 1;
            assert!(call > 10 && call < 17, "call {call}: a wrong result outside the window");
        }
    }
    let f = frag("soften");
    assert_eq!(wrong_after_change, 6, "replays 10..=15 replay the stale value: {}", janus::explain());
    assert_eq!(f.divergences, 1, "{}", janus::explain());
    assert_eq!(f.hits, 16, "replays stop once the variant is invalidated: {}", janus::explain());
    assert_eq!(f.checks, 5, "replays 1, 2, 4, 8, 16: {}", janus::explain());
    TEMPERATURE.with(|t| t.set(1.0));
}

#[janus(min_ops = 1)]
fn soften_later(x: &Tensor) -> Tensor {
    let y = cooled(&(x * 2.0)).tanh();
    y
}

#[test]
fn a_late_divergence_is_found_within_sample_period_replays() {
    janus::set_self_check(true);
    let x = Tensor::from_vec(vec![0.25f64, -0.5], [2]);
    let change = 5000u64; // past the dense checks: the next one is replay 8192
    let mut first_wrong = None;
    let mut last_wrong = 0;
    for call in 0..9000u64 {
        TEMPERATURE.with(|t| t.set(if call < change + 2 { 1.0 } else { 3.0 }));
        let got = soften_later(&x);
        if call >= change {
            let want = janus::with_mode(Mode::Eager, || soften_later(&x));
            if !same(&got, &want) {
                first_wrong.get_or_insert(call);
                last_wrong = call;
            }
        }
    }
    TEMPERATURE.with(|t| t.set(1.0));
    let f = frag("soften_later");
    assert_eq!(first_wrong, Some(change + 2), "{}", janus::explain());
    assert!(last_wrong - (change + 2) < janus::rt::SAMPLE_PERIOD, "{last_wrong}");
    assert_eq!((f.divergences, f.hits), (1, 8192), "found at replay 8192: {}", janus::explain());
}

#[janus(min_ops = 1)]
fn noisy(x: &Tensor) -> Tensor {
    let y = (x + Tensor::randn(x.dims()) * 0.1).tanh();
    y
}

#[test]
fn checked_and_replayed_calls_draw_the_random_stream_as_eager_mode() {
    janus::set_self_check(true);
    let run = |mode: Mode| {
        janus::manual_seed(11);
        let mut outs = Vec::new();
        for call in 0..20 {
            let x = Tensor::ones([2 + call % 2, 3]); // two keys
            outs.push(janus::with_mode(mode, || noisy(&x)));
        }
        (outs, janus::stream_position())
    };
    let (want, pos_eager) = run(Mode::Eager);
    let (got, pos_janus) = run(Mode::Janus);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.to_vec::<f32>(), w.to_vec::<f32>(), "call {k}");
    }
    assert_eq!(pos_janus, pos_eager);
    let f = frag("noisy");
    assert!(f.checks > 0 && f.hits > f.checks, "{}", janus::explain());
}
