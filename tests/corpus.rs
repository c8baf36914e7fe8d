//! The corpus of real programs (`examples/corpus/`, issue 52): each trains for a few steps in
//! eager mode and in janus mode from the same seed, and the per-step losses agree (the first
//! steps closely; later ones drift by rounding, as two summation orders do); then a few steps
//! run in check mode, which compares every replay with the statements. The sampled self-check
//! is off, so that it cannot hide a wrong replay.

#[path = "../examples/corpus/char_transformer.rs"]
mod char_transformer;
#[path = "../examples/corpus/dqn.rs"]
mod dqn;
#[path = "../examples/corpus/reinforce.rs"]
mod reinforce;
#[path = "../examples/corpus/resnet.rs"]
mod resnet;
#[path = "../examples/corpus/seq2seq.rs"]
mod seq2seq;
#[path = "../examples/corpus/vae.rs"]
mod vae;

use janus::prelude::*;

/// Trains `steps` eagerly and in janus mode, and `check` steps in check mode.
fn agrees(name: &str, train: fn(usize, u64) -> Vec<f64>, steps: usize, check: usize) {
    janus::set_self_check(false);
    let eager = janus::with_mode(Mode::Eager, || train(steps, 7));
    let staged = janus::with_mode(Mode::Janus, || train(steps, 7));
    assert_eq!(eager.len(), staged.len(), "{name}: steps");
    for (k, (e, j)) in eager.iter().zip(&staged).enumerate() {
        // Early steps agree to rounding; later ones may drift apart as training amplifies
        // the last bits (Adam divides by tiny moments), but stay of the same size.
        let tol = if k < 5 { 1e-3 } else { 0.5 };
        assert!(
            (e - j).abs() <= tol * e.abs().max(1e-2),
            "{name}, step {k}: janus {j} vs eager {e}\n{}",
            janus::explain()
        );
    }
    let hits: u64 = janus::stats().fragments.iter().map(|f| f.hits).sum();
    assert!(hits > 0, "{name}: nothing replayed\n{}", janus::explain());
    janus::with_mode(Mode::Check, || train(check, 8));
}

#[test]
fn seq2seq_trains_alike() {
    agrees("seq2seq", seq2seq::train, 16, 4);
}

#[test]
fn vae_trains_alike() {
    agrees("vae", vae::train, 24, 4);
}

#[test]
fn dqn_trains_alike() {
    agrees("dqn", dqn::train, 300, 40);
}

#[test]
fn resnet_trains_alike() {
    agrees("resnet", resnet::train, 12, 4);
}

#[test]
fn char_transformer_trains_alike() {
    agrees("char_transformer", char_transformer::train, 10, 3);
}

#[test]
fn reinforce_trains_alike() {
    agrees("reinforce", reinforce::train, 40, 8);
}
