//! `JANUS_MODE=check` (here `Mode::Check`) runs compiled graphs and the original statements side
//! by side and panics on a mismatch, naming the fragment; the sampled self-check of janus mode
//! compares the same way, and invalidates the variant instead. A test-only fault hook breaks the
//! fused kernels. Its own binary: the hook is process-wide.
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;

#[janus(speculate = false)]
fn gate(x: &Tensor, w: &Tensor) -> Tensor {
    let y = (x.matmul(w) * 2.0).sigmoid();
    y
}

#[test]
fn check_mode_catches_a_broken_kernel_and_names_the_fragment() {
    let _one_at_a_time = FAULT.lock().unwrap_or_else(|p| p.into_inner());
    let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.3, 0.4], [2, 2]);
    let w = Tensor::from_vec(vec![1.0f32, -1.0, 0.5, 0.25], [2, 2]);
    // Healthy kernels: check mode agrees on every call.
    janus::with_mode(Mode::Check, || {
        for _ in 0..4 {
            gate(&x, &w);
        }
    });
    assert!(janus::stats().function("gate").next().unwrap().checks >= 2, "{}", janus::explain());
    // The mode is part of the key (see docs/design.md, "Keys"): let janus mode compile its own
    // variant.
    for _ in 0..3 {
        gate(&x, &w);
    }
    janus::rt::testing::break_fused_kernels(true);
    // Without checks, the broken kernel goes unnoticed in janus mode (replay 2 is unchecked
    // only because the sampled self-check is off)...
    janus::set_self_check(false);
    let wrong = gate(&x, &w);
    let right = janus::with_mode(Mode::Eager, || gate(&x, &w));
    assert_ne!(wrong.to_vec::<f32>(), right.to_vec::<f32>());
    // ...check mode reports it...
    let err = std::panic::catch_unwind(|| janus::with_mode(Mode::Check, || gate(&x, &w))).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("janus check: fragment `gate#0` at tests/janus_check.rs:12")
            && msg.contains("output `y`"),
        "{msg}"
    );
    // ...and in janus mode the sampled self-check finds it at replay 4: the same comparison,
    // but it returns the eager result and invalidates the variant instead of panicking.
    janus::set_self_check(true);
    let before = janus::stats().function("gate").next().unwrap().clone();
    let third = gate(&x, &w); // replay 3: not sampled
    assert_ne!(third.to_vec::<f32>(), right.to_vec::<f32>());
    let fourth = gate(&x, &w); // replay 4: checked
    assert_eq!(fourth.to_vec::<f32>(), right.to_vec::<f32>());
    let after = janus::stats().function("gate").next().unwrap().clone();
    assert_eq!(
        (after.hits - before.hits, after.divergences - before.divergences),
        (2, 1),
        "{}",
        janus::explain()
    );
    // From now on this key runs its statements: correct, and no longer a hit.
    for _ in 0..3 {
        assert_eq!(gate(&x, &w).to_vec::<f32>(), right.to_vec::<f32>());
    }
    let last = janus::stats().function("gate").next().unwrap().clone();
    assert_eq!(last.hits, after.hits, "{}", janus::explain());
    assert!(last.eager.keys().any(|r| r.starts_with("diverged from eager execution")), "{last:?}");
    janus::rt::testing::break_fused_kernels(false);
}

/// The same step, speculated as a whole function.
#[janus]
fn gate_whole(x: &Tensor, w: &Tensor) -> Tensor {
    let y = (x.matmul(w) * 2.0).sigmoid();
    y
}

#[test]
fn check_mode_checks_a_speculated_function_too() {
    let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.3, 0.4], [2, 2]);
    let w = Tensor::from_vec(vec![1.0f32, -1.0, 0.5, 0.25], [2, 2]);
    // The fault hook is process-wide: the other test of this binary breaks kernels under the
    // same lock, so this one holds it throughout (its healthy phase must see healthy kernels).
    let _one_at_a_time = FAULT.lock().unwrap_or_else(|p| p.into_inner());
    janus::set_self_check(false);
    for _ in 0..3 {
        janus::with_mode(Mode::Check, || gate_whole(&x, &w)); // healthy: agrees
    }
    janus::rt::testing::break_fused_kernels(true);
    let err = std::panic::catch_unwind(|| janus::with_mode(Mode::Check, || gate_whole(&x, &w))).unwrap_err();
    janus::rt::testing::break_fused_kernels(false);
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("janus check: fragment `gate_whole#fn`") && msg.contains("return value"), "{msg}");
}

static FAULT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A block whose gradient flows to both inputs.
#[janus(speculate = false)]
fn blend(x: &Tensor, w: &Tensor) -> Tensor {
    let y = (x.matmul(w) * 2.0).tanh() + x.square().sum(1).unsqueeze(1);
    y
}

#[test]
fn check_mode_catches_a_broken_compiled_backward_that_forward_checks_cannot_see() {
    let _one_at_a_time = FAULT.lock().unwrap_or_else(|p| p.into_inner());
    janus::set_self_check(false);
    let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6], [2, 3]).requires_grad();
    let w = Tensor::from_vec(vec![1.0f32, -1.0, 0.5, 0.25, -0.5, 2.0], [3, 2]).requires_grad();
    for _ in 0..3 {
        janus::with_mode(Mode::Check, || blend(&x, &w)); // healthy: values and gradients agree
    }
    janus::rt::testing::break_compiled_backward(true);
    let caught = std::panic::catch_unwind(|| janus::with_mode(Mode::Check, || blend(&x, &w)));
    // Without gradients flowing, the broken backward is never run, and nothing is reported.
    let no_grad_call = std::panic::catch_unwind(|| {
        let (xd, wd) = (x.detach(), w.detach());
        janus::with_mode(Mode::Check, || blend(&xd, &wd))
    });
    janus::rt::testing::break_compiled_backward(false);
    let msg = caught.expect_err("check mode caught the broken backward");
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("janus check: fragment `blend#0`"), "{msg}");
    assert!(msg.contains("the gradient of input `x`") || msg.contains("the gradient of input `w`"), "{msg}");
    assert!(no_grad_call.is_ok());
}

#[test]
fn the_sampled_self_check_catches_a_broken_backward_before_a_wrong_gradient_goes_out() {
    let _one_at_a_time = FAULT.lock().unwrap_or_else(|p| p.into_inner());
    janus::set_self_check(true);
    let x = Tensor::from_vec(vec![0.3f32, -0.2, 0.1, 0.7, 0.5, -0.6], [2, 3]).requires_grad();
    let w = Tensor::from_vec(vec![0.5f32, -1.5, 0.5, 0.75, -0.25, 1.0], [3, 2]).requires_grad();
    let loss = |y: Tensor| (y * 1.5).sum_all();
    let want = loss(janus::with_mode(Mode::Eager, || blend2(&x, &w))).backward();
    janus::rt::testing::break_compiled_backward(true);
    for call in 0..6 {
        let got = loss(blend2(&x, &w)).backward();
        for (name, t) in [("x", &x), ("w", &w)] {
            assert_eq!(
                got.get(t).unwrap().to_vec::<f32>(),
                want.get(t).unwrap().to_vec::<f32>(),
                "call {call}: d/d{name}"
            );
        }
    }
    janus::rt::testing::break_compiled_backward(false);
    let f = janus::stats().fragments.into_iter().find(|f| f.name == "blend2#0").unwrap();
    assert_eq!(f.divergences, 1, "{}", janus::explain());
    assert!(f.eager.keys().any(|r| r.contains("the gradient of input")), "{}", janus::explain());
}

/// `blend` again, for the self-check test's own statistics.
#[janus(speculate = false)]
fn blend2(x: &Tensor, w: &Tensor) -> Tensor {
    let y = (x.matmul(w) * 2.0).tanh() + x.square().sum(1).unsqueeze(1);
    y
}
