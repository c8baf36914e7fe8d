//! Issue 16 item 7 ("first-day utilities") and item 4 (printing): the elementwise functions
//! PyTorch users reach for, sorting, `randperm`, shuffled mini-batches, GRU and RNN cells,
//! `Grads` arithmetic, and how tensors print. One test binary, one module per topic.

mod batches;
mod elementwise;
mod grads;
mod print;
mod rnn;
mod sort;

#[path = "../common/mod.rs"]
mod common;

use janus::prelude::*;

/// Each element's bits as `f64` (every NaN alike), for exact comparisons.
pub fn bits(t: &Tensor) -> Vec<u64> {
    t.to_vec::<f64>().iter().map(|v| if v.is_nan() { u64::MAX } else { v.to_bits() }).collect()
}

/// Asserts two tensors have the same shape and are within `tol`, relative to `1 + |want|`.
#[track_caller]
pub fn assert_close(what: &str, got: &Tensor, want: &Tensor, tol: f64) {
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    assert_eq!(got.dims(), want.dims(), "{what}: shapes");
    let ok =
        g.iter().zip(&w).all(|(a, b)| (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * (1.0 + b.abs()));
    assert!(ok, "{what}: got {g:?}, want {w:?}");
}

/// Runs `f`, expecting a panic; returns its message.
pub fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(f).expect_err("expected a panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap()
}

/// `file:line:` of a line of a test file, as panics name their caller.
pub fn here(file: &str, line: u32) -> String {
    format!("{file}:{line}:")
}

#[test]
fn tensor_literals_are_f32_like_torch_tensor() {
    let v = janus::tensor![1.0, 2.5, -3.0];
    assert_eq!((v.dims(), v.dtype()), (&[3][..], DType::F32));
    assert_eq!(v.to_vec::<f32>(), [1.0, 2.5, -3.0]);
    // `Tensor::from_vec` keeps the literal's type: f64, the day-one surprise the macro avoids.
    assert_eq!(Tensor::from_vec(vec![1.0, 2.0], [2]).dtype(), DType::F64);
    let m = janus::tensor![[1, 2, 3], [4, 5, 6]];
    assert_eq!((m.dims(), m.to_vec::<f32>()), (&[2, 3][..], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let msg = panic_message(|| drop(janus::tensor![[1.0, 2.0], [3.0]]));
    assert!(msg.contains("tensor!") && msg.contains("row 1 has 1 values, row 0 has 2"), "{msg}");
}
