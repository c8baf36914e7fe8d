//! Checking replays against eager execution: one mechanism for `JANUS_MODE=check`,
//! `JANUS_CHECK_EVERY=N` and the sampled self-check, with one comparison and a policy per mode.
//!
//! A checked call replays the compiled graph, rewinds the random stream, runs the block's
//! statements (so helpers' side effects happen, and the statements draw the numbers the replay
//! drew), returns the statements' results and compares them with the replay's.
//!
//! **The sampled self-check** (on by default) catches what a key cannot see: a scalar that a
//! helper reads from a global or a thread-local (`x / temperature()`), baked into the graph
//! when it was recorded. Each compiled variant is checked at its replays 1, 2, 4, ..., 4096 and
//! then at every 4096th replay, so a divergence that lasts is found within 4096 replays of the
//! variant (within `n` more replays when it starts at replay `n <= 4096`). On a mismatch in
//! janus mode the variant is invalidated (its key runs the statements from then on), a warning
//! naming the fragment is logged, and the call returns the eager result; check mode panics.

use super::Mode;
use crate::module::ConstLeaf;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicU8, Ordering};

/// Replays between sampled checks once the first ones (at powers of two) are done.
pub const SAMPLE_PERIOD: u64 = 4096;

/// What a detected divergence does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Panic, naming the fragment and the output (check mode).
    Panic,
    /// Log a warning, invalidate the variant and return the eager result (janus mode).
    Invalidate,
}

/// 0: as configured (`JANUS_SELF_CHECK`), 1: on, 2: off.
static SELF_CHECK: AtomicU8 = AtomicU8::new(0);

/// Turns the sampled self-check on or off for the whole process (it is on unless
/// `JANUS_SELF_CHECK=0`). Turning it off removes the bound on how long a replay that diverges
/// from eager execution (a helper reading a changed global) can go unnoticed.
pub fn set_self_check(on: bool) {
    SELF_CHECK.store(if on { 1 } else { 2 }, Ordering::Relaxed);
}

/// Whether the sampled self-check is on.
pub fn self_check() -> bool {
    match SELF_CHECK.load(Ordering::Relaxed) {
        0 => crate::config::config().self_check,
        v => v == 1,
    }
}

/// Whether replay `n` (counted from 1) of a variant is sampled.
pub(crate) fn sampled(n: u64) -> bool {
    if n <= SAMPLE_PERIOD { n.is_power_of_two() } else { n.is_multiple_of(SAMPLE_PERIOD) }
}

/// The policy for replay `n` of a variant, if it is checked.
#[inline]
pub(crate) fn due(mode: Mode, n: u64) -> Option<Policy> {
    if mode == Mode::Check {
        return Some(Policy::Panic);
    }
    // The common case (neither sampled nor every N-th) reads one configuration value.
    let every = crate::config::config().check_every;
    if (sampled(n) && self_check()) || (every > 0 && n.is_multiple_of(every)) {
        return Some(Policy::Invalidate);
    }
    None
}

/// Max error of `got` against `want`, relative to `want`'s largest finite magnitude (at least
/// 1e-3); NaN must match NaN and infinities exactly.
pub(crate) fn mismatch(got: &Tensor, want: &Tensor) -> Option<f64> {
    if got.sizes() != want.sizes() || got.dtype() != want.dtype() {
        return Some(f64::INFINITY);
    }
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    let scale = w.iter().filter(|v| v.is_finite()).fold(1e-3f64, |m, v| m.max(v.abs()));
    let tol = if want.dtype() == crate::DType::F64 { 1e-10 } else { 1e-5 };
    let mut worst: f64 = 0.0;
    for (a, b) in g.iter().zip(&w) {
        if a.is_nan() != b.is_nan() || ((a.is_infinite() || b.is_infinite()) && a != b) {
            return Some(f64::INFINITY);
        }
        if a.is_finite() {
            worst = worst.max((a - b).abs() / scale);
        }
    }
    (worst > tol).then_some(worst)
}

/// Like [`mismatch`], for gradients: a compiled backward sums in another order than eager's,
/// so the tolerance is 1e-4 relative (1e-9 in `f64`).
pub(crate) fn grad_mismatch(got: &Tensor, want: &Tensor) -> Option<f64> {
    let tol = if want.dtype() == crate::DType::F64 { 1e-9 } else { 1e-4 };
    match mismatch(got, want) {
        Some(err) if err > tol => Some(err),
        _ => None,
    }
}

/// A fixed pseudo-random cotangent in `[-1, 1)` for output `k` (its shape, dtype and device),
/// drawn without touching the random stream: a checked call leaves the stream as a replay does.
pub(crate) fn cotangent(like: &Tensor, k: usize) -> Tensor {
    let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (k as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let values: Vec<f64> = (0..like.elems())
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect();
    Tensor::from_vec(values, like.sizes().to_vec()).to_dtype(like.dtype()).to_device(like.device())
}

/// The name of each distinct input leaf of a call, as the check reports it: `x`, `m[2]` for a
/// module's third tensor, `grads[k]` for a `Grads` entry.
pub(crate) fn leaf_names(inputs: &[super::probe::Probed], firsts: &[u32]) -> Vec<String> {
    let mut names = Vec::with_capacity(firsts.len());
    for p in inputs.iter().filter(|p| p.grads.is_none()) {
        for k in 0..p.leaves.len() {
            names.push(if p.leaves.len() == 1 { p.name.to_string() } else { format!("{}[{k}]", p.name) });
        }
    }
    let grads = inputs.iter().find(|p| p.grads.is_some()).map_or("grads", |p| p.name);
    let plain = names.len();
    names.extend((plain..firsts.len()).map(|k| format!("{grads}[{}]", k - plain)));
    super::key::first_only(names, firsts).collect()
}

/// The first difference between a replay's outputs and the statements' outputs, described:
/// tensors (`(name, tensor)` per leaf, in order) within tolerance, constant leaves exactly.
pub(crate) fn compare(
    replayed: &[Tensor],
    replayed_consts: &[ConstLeaf],
    eager: &[(&'static str, &Tensor)],
    eager_consts: &[ConstLeaf],
) -> Option<String> {
    for (k, ((name, want), got)) in eager.iter().zip(replayed).enumerate() {
        if let Some(err) = mismatch(got, want) {
            return Some(format!(
                "output `{name}` (leaf {k}, {:?} {}) has max relative error {err:e}",
                want.shape_ref(),
                want.dtype()
            ));
        }
    }
    if replayed_consts != eager_consts {
        return Some(format!(
            "constant outputs differ: replayed {replayed_consts:?}, eager {eager_consts:?}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_dense_early_then_periodic() {
        let checked: Vec<u64> = (1..=20_000).filter(|&n| sampled(n)).collect();
        assert_eq!(&checked[..13], &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]);
        assert_eq!(&checked[13..], &[8192, 12288, 16384]);
        // The bound: from any replay on, the next check is at most SAMPLE_PERIOD replays away.
        for n in 1..=20_000u64 {
            let next = (n..).find(|&m| sampled(m)).unwrap();
            assert!(next - n < SAMPLE_PERIOD, "replay {n}: next check at {next}");
        }
    }
}
