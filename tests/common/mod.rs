//! Helpers shared by the integration tests.
#![allow(dead_code)]

use janus::prelude::*;

/// Deterministic pseudo-random values in `[lo, hi)` (a test-local LCG; independent of janus's
/// own RNG so gradient checks do not depend on it).
pub fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// An `f64` tensor of `shape` with values in `[lo, hi)`.
pub fn rand64(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    Tensor::from_vec(values(shape.iter().product(), seed, lo, hi), shape)
}

/// Max relative error between analytic and central-difference gradients of
/// `sum(f(inputs) * w)` (with fixed random weights `w`), over every input element.
///
/// The error of each input is `max |analytic - numeric| / max(max |numeric|, 1e-3)`.
pub fn grad_check(inputs: &[Tensor], f: &dyn Fn(&[Tensor]) -> Tensor) -> f64 {
    let leaves: Vec<Tensor> = inputs.iter().map(|t| t.clone().requires_grad()).collect();
    let out = f(&leaves);
    assert_eq!(out.dtype(), DType::F64, "grad_check needs f64 outputs");
    let w = Tensor::from_vec(values(out.numel(), 99, 0.5, 1.5), out.dims());
    let loss = |o: &Tensor| (o * &w).sum_all();
    let grads = loss(&out).backward();
    let h = 1e-6;
    let mut worst: f64 = 0.0;
    for (i, x) in inputs.iter().enumerate() {
        let base = x.to_vec::<f64>();
        let analytic =
            grads.get(&leaves[i]).map(|g| g.to_vec::<f64>()).unwrap_or_else(|| vec![0.0; base.len()]);
        assert_eq!(analytic.len(), base.len(), "gradient shape of input {i}");
        let mut numeric = vec![0.0; base.len()];
        for j in 0..base.len() {
            let eval = |delta: f64| {
                let mut v = base.clone();
                v[j] += delta;
                let mut xs: Vec<Tensor> = inputs.to_vec();
                xs[i] = Tensor::from_vec(v, x.dims());
                loss(&f(&xs)).item_f64()
            };
            numeric[j] = (eval(h) - eval(-h)) / (2.0 * h);
        }
        let scale = numeric.iter().fold(1e-3f64, |m, v| m.max(v.abs()));
        let err = analytic.iter().zip(&numeric).map(|(a, n)| (a - n).abs()).fold(0.0, f64::max) / scale;
        worst = worst.max(err);
    }
    worst
}

/// Asserts `grad_check` stays within 1e-6, naming the case.
#[track_caller]
pub fn assert_grads(name: &str, inputs: &[Tensor], f: &dyn Fn(&[Tensor]) -> Tensor) {
    let err = grad_check(inputs, f);
    assert!(err <= 1e-6, "{name}: gradient relative error {err:e} > 1e-6");
}

/// Whether a block's eager run was asked for (eager mode, or the statements a checked replay is
/// compared with) rather than a fallback of janus mode.
pub fn on_purpose(k: &janus::rt::EagerKind) -> bool {
    matches!(k, janus::rt::EagerKind::ModeEager | janus::rt::EagerKind::Checked)
}

/// How many times `func`'s blocks other than its whole-function fragment (`func#fn`) were
/// entered in `d`, not counting the eager runs asked for ([`on_purpose`]).
pub fn inner_block_calls(d: &janus::rt::Stats, func: &str) -> u64 {
    let prefix = format!("{func}#");
    (d.fragments.iter())
        .filter(|f| f.name.starts_with(&prefix) && f.name != format!("{func}#fn"))
        .map(|f| f.calls - f.eager_runs.iter().filter(|(k, _)| on_purpose(k)).map(|(_, n)| n).sum::<u64>())
        .sum()
}
