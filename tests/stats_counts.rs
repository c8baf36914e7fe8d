//! `janus::stats()` counts every call of a block once, however it ran: eagerly, recorded,
//! replayed, checked, from several threads, and across a speculative key's failed asserts and
//! its retirement to the fragment path. A replay is counted by its variant and every other
//! call by the fragment (so a replay touches one shared counter), and a snapshot adds them up.

use janus::prelude::*;

fn stats_of(name: &str) -> janus::rt::FragmentStats {
    janus::stats().fragments.into_iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no {name}"))
}

#[janus(min_ops = 1)]
fn scaled(x: &Tensor) -> Tensor {
    let y = (x * 2.0).tanh() + 1.0;
    y
}

#[test]
fn every_call_is_counted_once_in_every_mode_and_thread() {
    janus::set_self_check(false);
    let x = Tensor::ones([3]);
    let before = janus::stats().fragments.into_iter().find(|f| f.name == "scaled#fn");
    let (calls0, hits0) = before.map_or((0, 0), |s| (s.calls, s.hits));
    for _ in 0..7 {
        janus::with_mode(Mode::Eager, || scaled(&x));
    }
    for _ in 0..20 {
        scaled(&x); // recorded, compiled, then replayed
    }
    for _ in 0..5 {
        janus::with_mode(Mode::Check, || scaled(&x));
    }
    let threads: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(|| {
                let x = Tensor::ones([3]);
                for _ in 0..500 {
                    scaled(&x);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let s = stats_of("scaled#fn");
    assert_eq!(s.calls - calls0, 7 + 20 + 5 + 1000, "{}", janus::explain());
    assert!(s.hits - hits0 >= 1000, "the threads replayed: {}", janus::explain());
    every_call_replayed_recorded_or_ran(&s);
}

/// Every call replayed (a check is a replay too), was recorded, or ran its statements for a
/// reason (a replay whose assert failed runs them too, and is not a hit).
fn every_call_replayed_recorded_or_ran(s: &janus::rt::FragmentStats) {
    let ran: u64 = s.eager_runs.values().sum();
    assert_eq!(s.hits + s.traces + ran, s.calls, "{}", janus::explain());
}

/// Halves `x` until it is small: the number of trips is a host decision on a tensor value, so
/// a speculated path fails its asserts whenever the input's size class changes.
#[janus]
fn halve(x: &Tensor) -> Tensor {
    let mut y = x * 1.0;
    while y.abs().sum_all().item() > 1.0 {
        y = &y * 0.5;
    }
    y
}

#[test]
fn a_key_retired_after_failed_speculations_is_counted_once() {
    janus::set_self_check(false);
    let mut calls = 0;
    // Runs of one size class speculate; each switch fails an assert, until the key is kept on
    // the fragment path.
    for round in 0..40u32 {
        let x = Tensor::ones([4]) * if round % 2 == 0 { 0.1 } else { 3.0 };
        for _ in 0..6 {
            let want = janus::with_mode(Mode::Eager, || halve(&x));
            assert_eq!(halve(&x).to_vec::<f32>(), want.to_vec::<f32>());
            calls += 2;
        }
    }
    let s = stats_of("halve#fn");
    assert!(s.assert_failures >= 2, "the switches failed asserts: {}", janus::explain());
    assert!(s.hits > 0, "{}", janus::explain());
    assert_eq!(s.calls, calls, "{}", janus::explain());
    every_call_replayed_recorded_or_ran(&s);
}
