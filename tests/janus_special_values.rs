//! Compiled graphs give eager mode's answers bit for bit on signed zeros, infinities and NaN
//! (issue 9, item 5): the simplifier no longer rewrites `x + 0.0` to `x` (`-0.0 + 0.0` is
//! `+0.0`), a chunk gradient's padded sum rebuilt as a `cat` keeps eager mode's `+0.0`, and
//! products agree on the sign of a zero. Several keys, 8+ calls each, unchecked replays.

use janus::prelude::*;

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>().iter().map(|v| if v.is_nan() { u64::MAX } else { v.to_bits() }).collect()
}

#[track_caller]
fn assert_bits(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(
        bits(got),
        bits(want),
        "{what}: janus {:?} vs eager {:?}",
        got.to_vec::<f64>(),
        want.to_vec::<f64>()
    );
}

fn special(n: usize, call: usize) -> Vec<f32> {
    let pool = [-0.0f32, 0.0, 1.5, -2.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -0.25];
    (0..n).map(|i| pool[(i + call) % pool.len()]).collect()
}

/// `eps` is a host scalar: part of the key, so `0.0` is a constant of the graph.
#[janus(min_ops = 1)]
fn guarded_recip(x: &Tensor, eps: f64) -> Tensor {
    let y = (x + eps).recip() * 2.0;
    y
}

#[test]
fn adding_zero_keeps_eager_signed_zeros() {
    janus::set_self_check(false);
    for call in 0..48 {
        let n = [3, 5, 8][call % 3];
        let eps = if call % 2 == 0 { 0.0 } else { -0.0 }; // six keys
        let x = Tensor::from_vec(special(n, call), [n]);
        let want = janus::with_mode(Mode::Eager, || guarded_recip(&x, eps));
        assert_bits(&format!("call {call} (eps {eps:?})"), &guarded_recip(&x, eps), &want);
    }
    let f = janus::stats().function("guarded_recip").next().cloned().unwrap();
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
}

/// The gradient of `chunk` is a sum of padded pieces, which the simplifier turns into a `cat`.
#[janus(min_ops = 1)]
fn chunked(x: &Tensor, w: &Tensor) -> Tensor {
    let [a, b] = x.chunk::<2>(1);
    let loss = (a * w + b.matmul(&w.t()).tanh()).sum_all();
    loss
}

#[test]
fn chunk_and_matmul_gradients_keep_eager_signed_zeros() {
    janus::set_self_check(false);
    for call in 0..32 {
        let rows = [2, 3][call % 2];
        // Zero weights make every gradient term a signed zero.
        let w = Tensor::from_vec(vec![-0.0f32, 0.0, -0.0], [1, 3]);
        let x0 = Tensor::from_vec(special(rows * 6, call), [rows, 6]);
        let (xe, xj) = (x0.clone().requires_grad(), x0.requires_grad());
        let le = janus::with_mode(Mode::Eager, || chunked(&xe, &w));
        let lj = chunked(&xj, &w);
        assert_bits(&format!("call {call}: loss"), &lj, &le);
        let (ge, gj) = (le.backward(), lj.backward());
        assert_bits(&format!("call {call}: d/dx"), gj.get(&xj).unwrap(), ge.get(&xe).unwrap());
    }
    let f = janus::stats().function("chunked").next().cloned().unwrap();
    assert!(f.hits - f.checks > 0 && f.staged_backward_ops > 0, "{}", janus::explain());
}
