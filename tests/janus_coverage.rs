//! Staging coverage (issue 9, "Staging coverage, measured"): `janus::stats()` counts the tensor
//! ops executed eagerly and inside replayed graphs, forward and backward, per fragment; the
//! counts are exact, windows are measured with `Stats::since` or `reset_stats()`, and blocks that
//! stay eager by design (below `min_ops`, opaque inputs) and host code are reported apart.
//! Its own binary: `reset_stats()` is process-wide.
//! (The functions here pin the fragment path, `speculate = false`: whole-function speculation
//! is tested in `janus_speculate.rs` and by the macro fuzz.)

use janus::prelude::*;
use janus::rt::EagerKind;

/// Five op calls per call: two scalar constants, mul, add, tanh. (Its two shapes stay two keys,
/// each profiled twice: `dynamic_dims = false`; generalising is tested in
/// `janus_dynamic_dims.rs`.)
#[janus(min_ops = 1, speculate = false, dynamic_dims = false)]
fn three_ops(x: &Tensor) -> Tensor {
    let y = (x * 2.0 + 1.0).tanh();
    y
}

/// One op: below the default `min_ops` of 3, so it stays eager by design.
#[janus(speculate = false, dynamic_dims = false)]
fn one_op(x: &Tensor) -> Tensor {
    let y = x.exp();
    y
}

/// An input the probe cannot key.
#[janus(min_ops = 1, speculate = false)]
fn opaque(x: &Tensor, tag: &std::cell::Cell<u8>) -> Tensor {
    let y = x.sqrt() * tag.get() as f64;
    y
}

fn frag(s: &janus::Stats, name: &str) -> janus::rt::FragmentStats {
    s.function(name).next().cloned().unwrap_or_else(|| panic!("no fragment of {name}"))
}

#[test]
fn ops_are_counted_exactly_and_eager_by_design_is_apart() {
    janus::set_self_check(false);
    // What one eager call runs, counted the same way.
    let before = janus::stats();
    janus::with_mode(Mode::Eager, || three_ops(&Tensor::ones([2, 3])));
    let per_call = frag(&janus::stats().since(&before), "three_ops").eager_ops[&EagerKind::ModeEager];
    assert_eq!(per_call, 5);
    let start = janus::stats();
    let shapes = [[2, 3], [4, 5]]; // two keys
    for call in 0..20 {
        let x = Tensor::ones(shapes[call % 2]).requires_grad();
        let y = three_ops(&x);
        let g = (y.sum_all() + one_op(&x).sum_all()).backward();
        assert!(g.get(&x).is_some());
        opaque(&x, &std::cell::Cell::new(3));
    }
    let s = janus::stats().since(&start);
    let f = frag(&s, "three_ops");
    // Two keys, each recorded twice, then replayed: 4 calls ran the statements (recorded),
    // 16 replayed; every replay stands for the op calls of the recording.
    assert_eq!((f.traces, f.hits), (4, 16), "{}", janus::explain());
    assert_eq!(f.staged_ops, per_call * 16);
    assert_eq!(f.eager_ops.get(&EagerKind::Recorded), Some(&(per_call * 4)));
    // The backward of each replay ran compiled (tanh's, add's and mul's VJP ops).
    assert!(f.staged_backward_ops >= 16, "{f:?}");
    // one_op is recorded until one key's second recording (calls 0, 1, 2: the keys alternate)
    // finds it too small; it stays eager from then on.
    let o = frag(&s, "one_op");
    assert_eq!(
        (o.eager_ops.get(&EagerKind::Recorded), o.eager_ops.get(&EagerKind::TooSmall)),
        (Some(&3), Some(&17))
    );
    let ops = s.ops();
    assert_eq!(ops.on_purpose.get(&EagerKind::TooSmall), Some(&17), "{ops:?}");
    assert_eq!(
        ops.on_purpose.get(&EagerKind::Opaque),
        Some(&(3 * 20)),
        "sqrt, a scalar, mul; 20 calls: {ops:?}"
    );
    assert!(ops.outside > 0, "sum_all, add and the eager backward ran outside blocks: {ops:?}");
    // Coverage counts stageable blocks only: their eager ops are the recordings.
    let (staged, recorded) = (ops.staged(), per_call * 4 + 3);
    assert_eq!(ops.eager_stageable(), recorded, "{ops:?}");
    assert!((s.coverage() - staged as f64 / (staged + recorded) as f64).abs() < 1e-12);
    assert!(janus::explain().contains("coverage "), "{}", janus::explain());

    // A window after warm-up: every call replays, coverage is 100%.
    janus::reset_stats();
    for call in 0..8 {
        let x = Tensor::ones(shapes[call % 2]).requires_grad(); // the keys of the warm-up
        three_ops(&x);
    }
    let w = janus::stats();
    let f = frag(&w, "three_ops");
    assert_eq!((f.calls, f.hits, f.staged_ops, f.traces), (8, 8, 8 * per_call, 0), "{}", janus::explain());
    assert!(f.variants >= 2, "reset_stats keeps the compiled graphs");
    assert_eq!(w.coverage(), 1.0);
}
