//! `janus::set_prefetch(true)` (`JANUS_PREFETCH=1`): the products of the compiled LSTM step ask
//! the caches for the operands of the cells after them (`exec/cpu/prefetch.rs`). A prefetch is
//! a hint: the step gives the same bits with it and without, on one worker and on two.

#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;

use janus::prelude::*;

/// Replays of the step's whole-function graph so far.
fn replays() -> u64 {
    let stats = janus::stats();
    stats.fragments.iter().filter(|f| f.name == "janus_sgd_step#fn").map(|f| f.hits).sum()
}

/// Losses and parameters after six SGD steps of the flagship's size (H=128, so that its
/// products are long enough to prefetch before), compiled afresh under `prefetch`.
fn six_steps(prefetch: bool, serial: bool) -> (Vec<f32>, Vec<Vec<f32>>) {
    janus::set_prefetch(prefetch);
    janus::set_serial(serial);
    janus::reset_caches();
    janus::manual_seed(3);
    let mut m = lstm_lm::LstmLm::new(lstm_lm::V, lstm_lm::H);
    let data = lstm_lm::Batches::synthetic(3);
    let before = replays();
    let losses = (0..6)
        .map(|i| {
            let (xs, ys) = data.batch(i % 3);
            lstm_lm::janus_sgd_step(&mut m, xs, ys, 0.1)
        })
        .collect();
    // Else both sides could have run eagerly, and the prefetch never at all.
    assert!(replays() >= before + 3, "the step replayed its graph only {} times of 6", replays() - before);
    (losses, m.named_tensors().iter().map(|(_, t)| t.to_vec::<f32>()).collect())
}

#[test]
fn prefetching_changes_no_bit_of_the_lstm_step() {
    janus::set_self_check(false);
    for serial in [true, false] {
        let with = six_steps(true, serial);
        let without = six_steps(false, serial);
        assert_eq!(with.0, without.0, "losses (serial: {serial})");
        assert!(with.1 == without.1, "parameters differ (serial: {serial})");
    }
    janus::set_prefetch(false);
}
