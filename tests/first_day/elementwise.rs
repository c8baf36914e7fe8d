//! `sin` .. `rsqrt` and `atan2`: values against `f64` references, PyTorch's conventions
//! (`round` ties to even, `softplus`'s threshold), and `#[janus]` replays equal to eager mode on
//! special values and in their gradients. Finite-difference checks are in `tests/gradients.rs`.

use super::{assert_close, bits, here, panic_message};
use janus::prelude::*;

type Op = (&'static str, fn(&Tensor) -> Tensor, fn(f64) -> f64);

/// erf by its Maclaurin series, independent of janus (within ~1e-13 for |x| <= 3; beyond 6,
/// erf rounds to +-1 in f64).
fn erf_ref(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum();
    }
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        n += 1.0;
        term *= -x * x / n;
        sum += term / (2.0 * n + 1.0);
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Each new unary op, with its definition in plain `f64`.
fn ops() -> [Op; 15] {
    [
        ("sin", Tensor::sin, f64::sin),
        ("cos", Tensor::cos, f64::cos),
        ("tan", Tensor::tan, f64::tan),
        ("exp2", Tensor::exp2, f64::exp2),
        ("log2", |t| t.abs().log2(), |x| x.abs().log2()),
        ("log1p", |t| t.abs().log1p(), |x| x.abs().ln_1p()),
        ("expm1", Tensor::expm1, f64::exp_m1),
        ("erf", Tensor::erf, erf_ref),
        ("gelu", Tensor::gelu, |x| 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt()))),
        ("silu", Tensor::silu, |x| x * sigmoid(x)),
        ("softplus", Tensor::softplus, |x| if x > 20.0 { x } else { x.exp().ln_1p() }),
        ("floor", Tensor::floor, f64::floor),
        ("ceil", Tensor::ceil, f64::ceil),
        ("round", Tensor::round, f64::round_ties_even),
        ("rsqrt", |t| t.abs().rsqrt(), |x| 1.0 / x.abs().sqrt()),
    ]
}

fn grid() -> Vec<f64> {
    (0..61).map(|i| -3.0 + 0.1 * i as f64 + 0.013).chain([25.0, -30.0, 1e-9]).collect()
}

#[test]
fn values_match_f64_references_in_both_float_dtypes() {
    let xs = grid();
    for (name, op, reference) in ops() {
        let want = Tensor::from_vec(xs.iter().map(|&x| reference(x)).collect::<Vec<_>>(), [xs.len()]);
        let x64 = Tensor::from_vec(xs.clone(), [xs.len()]);
        assert_close(&format!("{name} f64"), &op(&x64), &want, 1e-12);
        let x32 = x64.to_dtype(DType::F32);
        let want32 = Tensor::from_vec(
            x32.to_vec::<f32>().iter().map(|&x| reference(x as f64)).collect::<Vec<_>>(),
            [xs.len()],
        );
        assert_close(&format!("{name} f32"), &op(&x32).to_dtype(DType::F64), &want32, 2e-6);
    }
}

#[test]
fn atan2_covers_every_quadrant() {
    let ys = [1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, 3.0];
    let xs = [1.0, -1.0, -1.0, 1.0, -1.0, -1.0, 0.0, 0.0];
    let want: Vec<f64> = ys.iter().zip(&xs).map(|(y, x): (&f64, &f64)| y.atan2(*x)).collect();
    let got = Tensor::from_vec(ys.to_vec(), [8]).atan2(&Tensor::from_vec(xs.to_vec(), [8]));
    assert_eq!(bits(&got), bits(&Tensor::from_vec(want, [8])));
    // Broadcasting, and the sign of zero picking the branch (as in C and PyTorch).
    let row =
        Tensor::from_vec(vec![-0.0f32, 0.0], [1, 2]).atan2(&Tensor::from_vec(vec![-1.0f32, 1.0], [2, 1]));
    assert_eq!(row.to_vec::<f32>(), vec![-std::f32::consts::PI, std::f32::consts::PI, -0.0, 0.0]);
}

#[test]
fn pytorch_conventions() {
    let x = Tensor::from_vec(vec![0.5f32, 1.5, 2.5, -0.5, -1.5, 2.4999, -2.6], [7]);
    assert_eq!(x.round().to_vec::<f32>(), vec![0.0, 2.0, 2.0, -0.0, -2.0, 2.0, -3.0]);
    assert_eq!(x.floor().to_vec::<f32>(), vec![0.0, 1.0, 2.0, -1.0, -2.0, 2.0, -3.0]);
    assert_eq!(x.ceil().to_vec::<f32>(), vec![1.0, 2.0, 3.0, -0.0, -1.0, 3.0, -2.0]);
    // softplus is the identity above 20, and its gradient there is exactly 1.
    let big = Tensor::from_vec(vec![20.5f64, 100.0], [2]).requires_grad();
    assert_eq!(big.softplus().to_vec::<f64>(), vec![20.5, 100.0]);
    let g = big.softplus().sum_all().backward();
    assert_eq!(g.get(&big).unwrap().to_vec::<f64>(), vec![1.0, 1.0]);
    // Rounding ops pass no gradient.
    let r = Tensor::from_vec(vec![0.3f64, 1.7], [2]).requires_grad();
    let g = (r.floor() + r.ceil() + r.round()).sum_all().backward();
    assert_eq!(g.get(&r).unwrap().to_vec::<f64>(), vec![0.0, 0.0]);
}

#[test]
fn integer_and_bool_operands_are_rejected_with_the_op_name() {
    let i = Tensor::from_vec(vec![1i64, 2], [2]);
    let (msg, line) = (panic_message(|| drop(i.gelu())), line!());
    assert!(
        msg.contains("janus::gelu") && msg.contains("i64 [2]") && msg.contains(&here(file!(), line)),
        "{msg}"
    );
    let (msg, line) = (panic_message(|| drop(i.atan2(&i))), line!());
    assert!(
        msg.contains("janus::atan2") && msg.contains("i64") && msg.contains(&here(file!(), line)),
        "{msg}"
    );
}

/// Every new op on one input, as one staged block.
#[janus(min_ops = 1)]
fn all_ops(x: &Tensor, y: &Tensor) -> [Tensor; 17] {
    let outs = [
        x.sin(),
        x.cos(),
        x.tan(),
        x.exp2(),
        x.log2(),
        x.log1p(),
        x.expm1(),
        x.erf(),
        x.gelu(),
        x.silu(),
        x.softplus(),
        x.floor(),
        x.ceil(),
        x.round(),
        x.rsqrt(),
        x.atan2(y),
        (x * 0.5).gelu().silu() * x.atan2(y).sin(),
    ];
    outs
}

fn special(n: usize, call: usize) -> Vec<f64> {
    let pool = [-0.0, 0.0, 1.5, -2.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.25, 0.5, 30.0, -1e-30];
    (0..n).map(|i| pool[(i * 7 + call) % pool.len()]).collect()
}

#[test]
fn janus_replays_equal_eager_bit_for_bit_on_special_values() {
    janus::set_self_check(false);
    for call in 0..36 {
        let n = [4, 11, 13][call % 3];
        let dtype = if call % 2 == 0 { DType::F32 } else { DType::F64 };
        let x = Tensor::from_vec(special(n, call), [n]).to_dtype(dtype);
        let y = Tensor::from_vec(special(n, call + 3), [n]).to_dtype(dtype);
        let want = janus::with_mode(Mode::Eager, || all_ops(&x, &y));
        let got = all_ops(&x, &y);
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                bits(g),
                bits(w),
                "call {call} output {k}: {:?} vs eager {:?}",
                g.to_vec::<f64>(),
                w.to_vec::<f64>()
            );
        }
    }
    let f = janus::stats().function("all_ops").next().cloned().unwrap();
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
}

/// A loss over every differentiable new op, and its gradients, as one staged function.
#[janus(min_ops = 1)]
fn loss_and_grads(x: &Tensor, y: &Tensor) -> (Tensor, Tensor, Tensor) {
    let pos = x.abs() + 0.5;
    let loss = (x.sin()
        + x.cos() * 2.0
        + (x * 0.5).tan()
        + x.exp2()
        + pos.log2()
        + pos.log1p()
        + x.expm1()
        + x.erf()
        + x.gelu()
        + x.silu()
        + x.softplus()
        + pos.rsqrt()
        + x.atan2(y)
        + x.floor()
        + x.ceil()
        + x.round())
    .sum_all();
    let grads = loss.backward();
    let (gx, gy) = (grads.get(x).unwrap().clone(), grads.get(y).unwrap().clone());
    (loss, gx, gy)
}

#[test]
fn janus_replays_equal_eager_in_values_and_gradients() {
    janus::set_self_check(false);
    for call in 0..24 {
        let n = [3, 6][call % 2];
        let dtype = if call % 3 == 0 { DType::F32 } else { DType::F64 };
        let v: Vec<f64> = (0..n).map(|i| -1.3 + 0.45 * i as f64 + 0.01 * call as f64).collect();
        let w: Vec<f64> = (0..n).map(|i| 0.7 - 0.3 * i as f64).collect();
        let x = Tensor::from_vec(v, [n]).to_dtype(dtype).requires_grad();
        let y = Tensor::from_vec(w, [n]).to_dtype(dtype).requires_grad();
        let want = janus::with_mode(Mode::Eager, || loss_and_grads(&x, &y));
        let got = loss_and_grads(&x, &y);
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-12 };
        assert_close(&format!("call {call} loss"), &got.0, &want.0, tol);
        assert_close(&format!("call {call} d/dx"), &got.1, &want.1, tol);
        assert_close(&format!("call {call} d/dy"), &got.2, &want.2, tol);
    }
    let f = janus::stats().function("loss_and_grads").next().cloned().unwrap();
    assert!(f.hits - f.checks > 0, "{}", janus::explain());
}
