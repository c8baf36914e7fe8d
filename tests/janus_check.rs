//! `JANUS_MODE=check` (here `Mode::Check`) runs compiled graphs and the original statements side
//! by side and panics on a mismatch, naming the fragment. A test-only fault hook breaks the
//! fused kernels. Its own binary: the hook is process-wide.

use janus::prelude::*;

#[janus]
fn gate(x: &Tensor, w: &Tensor) -> Tensor {
    let y = (x.matmul(w) * 2.0).sigmoid();
    y
}

#[test]
fn check_mode_catches_a_broken_kernel_and_names_the_fragment() {
    let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.3, 0.4], [2, 2]);
    let w = Tensor::from_vec(vec![1.0f32, -1.0, 0.5, 0.25], [2, 2]);
    // Healthy kernels: check mode agrees on every call.
    janus::with_mode(Mode::Check, || {
        for _ in 0..4 {
            gate(&x, &w);
        }
    });
    assert!(janus::stats().function("gate").next().unwrap().checks >= 2, "{}", janus::explain());
    // The mode is part of the key (DESIGN §13 rule 10): let janus mode compile its own variant.
    for _ in 0..3 {
        gate(&x, &w);
    }
    janus::rt::testing::break_fused_kernels(true);
    // In janus mode the broken kernel goes unnoticed...
    let wrong = gate(&x, &w);
    let right = janus::with_mode(Mode::Eager, || gate(&x, &w));
    assert_ne!(wrong.to_vec::<f32>(), right.to_vec::<f32>());
    // ...and check mode reports it.
    let err = std::panic::catch_unwind(|| janus::with_mode(Mode::Check, || gate(&x, &w))).unwrap_err();
    janus::rt::testing::break_fused_kernels(false);
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("janus check: fragment `gate#0` at tests/janus_check.rs:9")
            && msg.contains("output `y`"),
        "{msg}"
    );
}
