//! The opt-in memory switches change where and when memory is touched, never a result: the
//! compiled LSTM step gives the same bits with each and without, on one worker and on two.
//! - `janus::set_prefetch(true)` (`JANUS_PREFETCH=1`): the products ask the caches for the
//!   operands of the cells after them (`exec/cpu/prefetch.rs`);
//! - `janus::set_hugepages(true)` (`JANUS_HUGEPAGES=1`): the step's 6.8 MB arena lives in a
//!   2 MiB-aligned mapping marked for transparent huge pages (`exec/cpu/pages.rs`).

#[path = "../examples/common/lstm_lm.rs"]
mod lstm_lm;

use janus::prelude::*;

/// Replays of the step's whole-function graph so far.
fn replays() -> u64 {
    let stats = janus::stats();
    stats.fragments.iter().filter(|f| f.name == "janus_sgd_step#fn").map(|f| f.hits).sum()
}

/// Losses and parameters after six SGD steps of the flagship's size (H=128, so that its
/// products are long enough to prefetch before, and its arena above 2 MiB), compiled afresh
/// under `switch(on)`.
fn six_steps(switch: fn(bool), on: bool, serial: bool) -> (Vec<f32>, Vec<Vec<f32>>) {
    switch(on);
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

/// The step under `switch` on and off, serial and on two workers: the same bits.
fn same_bits(switch: fn(bool), name: &str) {
    janus::set_self_check(false);
    for serial in [true, false] {
        let with = six_steps(switch, true, serial);
        let without = six_steps(switch, false, serial);
        assert_eq!(with.0, without.0, "{name}: losses (serial: {serial})");
        assert!(with.1 == without.1, "{name}: parameters differ (serial: {serial})");
    }
    switch(false);
}

#[test]
fn prefetching_changes_no_bit_of_the_lstm_step() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    same_bits(janus::set_prefetch, "prefetch");
}

// Both switches in one test binary: they are process-wide, so the two tests take turns.
static TURNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn huge_page_arenas_change_no_bit_of_the_lstm_step() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    same_bits(janus::set_hugepages, "hugepages");
}
