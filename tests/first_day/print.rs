//! `{}` prints tensors as PyTorch does (issue 16 item 4): the expected strings are what
//! `print(torch.tensor(...))` shows for the same values, with janus's dtype names.

use janus::prelude::*;

fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

#[test]
fn small_float_tensors() {
    assert_eq!(
        f32s(&[1.0, -0.5, 2.25, 3.0], &[2, 2]).to_string(),
        "tensor([[ 1.0000, -0.5000],\n        [ 2.2500,  3.0000]])"
    );
    // Integral floats print as `3.`; values far apart switch to scientific notation.
    assert_eq!(f32s(&[1.0, 2.0, 3.0], &[3]).to_string(), "tensor([1., 2., 3.])");
    assert_eq!(f32s(&[1.0, 1e4], &[2]).to_string(), "tensor([1.0000e+00, 1.0000e+04])");
    assert_eq!(f32s(&[1e-5, 1.0], &[2]).to_string(), "tensor([1.0000e-05, 1.0000e+00])");
    assert_eq!(f32s(&[123.456, -0.001], &[2]).to_string(), "tensor([ 1.2346e+02, -1.0000e-03])");
    // Special values are padded to the width of the non-zero finite ones (zeros do not count).
    let special = f32s(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1.5], &[5]);
    assert_eq!(special.to_string(), "tensor([   nan,    inf,   -inf, -0.0000, 1.5000])");
    assert_eq!(f32s(&[0.0, f32::NAN], &[2]).to_string(), "tensor([0., nan])");
    // `{:.N}` asks for another precision.
    assert_eq!(format!("{:.2}", f32s(&[0.125, 10.0], &[2])), "tensor([ 0.12, 10.00])");
}

#[test]
fn f64_int_and_bool_tensors() {
    let d = Tensor::from_vec(vec![0.1f64, 2.0], [2]);
    assert_eq!(d.to_string(), "tensor([0.1000, 2.0000], dtype=f64)");
    let i = Tensor::from_vec(vec![1i64, -20, 300], [3]);
    assert_eq!(i.to_string(), "tensor([  1, -20, 300])");
    let b = Tensor::from_vec(vec![true, false], [2]);
    assert_eq!(b.to_string(), "tensor([ True, False])");
    let cube = Tensor::from_vec((0..8i64).collect::<Vec<_>>(), [2, 2, 2]);
    assert_eq!(
        cube.to_string(),
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])"
    );
    let empty = Tensor::zeros_dtype([0, 3], DType::I64);
    assert_eq!(empty.to_string(), "tensor([], size=(0, 3), dtype=i64)");
    assert_eq!(Tensor::zeros([0]).to_string(), "tensor([])");
}

#[test]
fn rank_zero_tensors() {
    assert_eq!(Tensor::scalar(1.5).to_string(), "tensor(1.5000)");
    assert_eq!(Tensor::scalar(3.0).to_string(), "tensor(3.)");
    assert_eq!(Tensor::scalar_dtype(-2.0, DType::F64).to_string(), "tensor(-2., dtype=f64)");
    assert_eq!(Tensor::from_vec(vec![7i64], []).to_string(), "tensor(7)");
}

#[test]
fn requires_grad_and_grad_fn() {
    let w = f32s(&[1.0, 2.0], &[2]).requires_grad();
    assert_eq!(w.to_string(), "tensor([1., 2.], requires_grad=True)");
    let y = (&w * 0.5).tanh();
    assert_eq!(y.to_string(), "tensor([0.4621, 0.7616], grad_fn=<TanhBackward>)");
    let z = w.to_dtype(DType::F64).log_softmax(0);
    assert_eq!(z.to_string(), "tensor([-1.3133, -0.3133], dtype=f64, grad_fn=<LogSoftmaxBackward>)");
    // The README's sample.
    let w = f32s(&[1.0, -0.5, 2.25, 3.0], &[2, 2]).requires_grad();
    let readme = format!("{w}\n{}", (&w * 0.5).tanh().to_dtype(DType::F64));
    assert_eq!(
        readme,
        "tensor([[ 1.0000, -0.5000],\n        [ 2.2500,  3.0000]], requires_grad=True)\n\
         tensor([[ 0.4621, -0.2449],\n        [ 0.8093,  0.9051]], dtype=f64, grad_fn=<ToDtypeBackward>)"
    );
    // `{:?}` keeps the handle's identity.
    assert!(format!("{w:?}").starts_with(&format!("Tensor(id={}, ", w.id())));
}

#[test]
fn long_rows_wrap_at_80_columns() {
    let v: Vec<f32> = (0..20).map(|i| i as f32 * 0.25).collect();
    let expected = "tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000, 1.2500, 1.5000, 1.7500, 2.0000,\n        \
                    2.2500, 2.5000, 2.7500, 3.0000, 3.2500, 3.5000, 3.7500, 4.0000, 4.2500,\n        \
                    4.5000, 4.7500])";
    assert_eq!(f32s(&v, &[20]).to_string(), expected);
}

#[test]
fn large_tensors_are_summarised() {
    let t = Tensor::from_vec((0..10_000).map(|i| i as f32).collect::<Vec<_>>(), [100, 100]);
    let expected = "\
tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.7000e+01, 9.8000e+01,
         9.9000e+01],
        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.9700e+02, 1.9800e+02,
         1.9900e+02],
        [2.0000e+02, 2.0100e+02, 2.0200e+02,  ..., 2.9700e+02, 2.9800e+02,
         2.9900e+02],
        ...,
        [9.7000e+03, 9.7010e+03, 9.7020e+03,  ..., 9.7970e+03, 9.7980e+03,
         9.7990e+03],
        [9.8000e+03, 9.8010e+03, 9.8020e+03,  ..., 9.8970e+03, 9.8980e+03,
         9.8990e+03],
        [9.9000e+03, 9.9010e+03, 9.9020e+03,  ..., 9.9970e+03, 9.9980e+03,
         9.9990e+03]])";
    assert_eq!(t.to_string(), expected);
    // A suffix that would pass column 80 goes on its own line.
    let halves = (Tensor::ones([100, 100]) * 0.5).requires_grad();
    let expected = "\
tensor([[0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000],
        [0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000],
        [0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000],
        ...,
        [0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000],
        [0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000],
        [0.5000, 0.5000, 0.5000,  ..., 0.5000, 0.5000, 0.5000]],
       requires_grad=True)";
    assert_eq!(halves.to_string(), expected);
    // 1000 elements print whole; 1001 are summarised.
    assert!(!Tensor::zeros([1000]).to_string().contains("..."));
    let long = Tensor::from_vec((0..1001i64).collect::<Vec<_>>(), [1001]);
    assert_eq!(long.to_string(), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
}
