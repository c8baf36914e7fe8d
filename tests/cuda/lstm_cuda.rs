//! The LSTM LM step (the flagship's workload) trained 20 SGD steps under `#[janus]` on CUDA
//! equals the CPU: the loss at every step within 1e-4 relative, the parameters within 1e-4 in
//! ‖θ_cuda − θ_cpu‖ / ‖θ_cpu‖ (TF32 off).

#[path = "../../examples/common/lstm_lm.rs"]
mod lstm_lm;

use super::cuda;
use janus::prelude::*;
use lstm_lm::{Batches, LstmLm, janus_sgd_step};

#[test]
fn lstm_lm_on_cuda_matches_the_cpu_for_20_steps() {
    let Some(dev) = cuda() else { return };
    janus::set_self_check(false);
    janus::manual_seed(0);
    let mut cpu = LstmLm::new(lstm_lm::V, lstm_lm::H);
    let mut gpu = cpu.to_device(dev);
    let data = Batches::synthetic(4);
    let gdata = data.to_device(dev);
    for step in 0..20 {
        let (xs, ys) = data.batch(step);
        let lc = janus::with_mode(Mode::Eager, || janus_sgd_step(&mut cpu, xs, ys, 0.1));
        let (gx, gy) = gdata.batch(step);
        let lg = janus_sgd_step(&mut gpu, gx, gy, 0.1);
        assert!(((lc - lg) / lc).abs() < 1e-4, "step {step}: cpu {lc} cuda {lg}");
    }
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (a, b) in cpu.params().iter().zip(gpu.params()) {
        assert_eq!(b.device(), dev);
        for (x, y) in a.to_vec::<f64>().iter().zip(b.to_vec::<f64>()) {
            diff += (x - y) * (x - y);
            norm += x * x;
        }
    }
    let rel = (diff / norm).sqrt();
    assert!(rel < 1e-4, "‖θ_cuda − θ_cpu‖ / ‖θ_cpu‖ = {rel:e}");
    let hits: u64 = janus::stats().fragments.iter().map(|f| f.hits).sum();
    assert!(hits >= 15, "the step replayed on CUDA: {}", janus::explain());
}
