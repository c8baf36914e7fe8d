//! Misuse panics with a message naming the op, both shapes and the caller's file:line.

use janus::prelude::*;

/// Runs `f`, expecting a panic; returns its message.
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let err = std::panic::catch_unwind(f).expect_err("expected a panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap()
}

#[track_caller]
fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} should mention {p:?}");
    }
}

fn here(line: u32) -> String {
    format!("{}:{line}:", file!())
}

#[test]
fn shape_mismatch_names_op_shapes_and_caller() {
    let (a, b) = (Tensor::zeros([2, 3]), Tensor::zeros([4]));
    let (msg, line) = (panic_message(|| drop(&a + &b)), line!());
    assert_mentions(&msg, &["janus::add", "[2, 3]", "[4]", "broadcast", &here(line)]);
    let (m1, m2) = (Tensor::zeros([2, 3]), Tensor::zeros([4, 5]));
    let (msg, line) = (panic_message(|| drop(m1.matmul(&m2))), line!());
    assert_mentions(&msg, &["janus::matmul", "[2, 3]", "[4, 5]", &here(line)]);
}

#[test]
fn dtype_mismatch_names_both_dtypes() {
    let (a, b) = (Tensor::zeros([2]), Tensor::zeros_dtype([2], DType::F64));
    let (msg, line) = (panic_message(|| drop(a.mul(&b))), line!());
    assert_mentions(&msg, &["janus::mul", "dtype mismatch", "f32 [2]", "f64 [2]", &here(line)]);
}

#[test]
fn bad_dim_names_the_dim_and_shape() {
    let a = Tensor::zeros([2, 3]);
    let (msg, line) = (panic_message(|| drop(a.sum(2))), line!());
    assert_mentions(&msg, &["janus::sum", "dim 2", "[2, 3]", &here(line)]);
    let (msg, line) = (panic_message(|| drop(a.softmax(-3))), line!());
    assert_mentions(&msg, &["janus::softmax", "dim -3", &here(line)]);
}

#[test]
fn index_out_of_range_names_index_and_shapes() {
    let a = Tensor::zeros([4, 3]);
    let idx = Tensor::from_vec(vec![0i64, 7], [2]);
    let (msg, line) = (panic_message(|| drop(a.index_select(0, &idx))), line!());
    assert_mentions(&msg, &["janus::index_select", "index 7", "size 4", "[4, 3]", "[2]", &here(line)]);
}

#[test]
fn wrong_target_dtype_for_cross_entropy() {
    let logits = Tensor::zeros([2, 5]);
    let targets = Tensor::zeros([2]);
    let (msg, line) = (panic_message(|| drop(logits.cross_entropy(&targets))), line!());
    assert_mentions(&msg, &["janus::cross_entropy", "i64", "f32 [2]", "[2, 5]", &here(line)]);
    // A target out of range is reported as part of cross_entropy, at the user's line.
    let bad = Tensor::from_vec(vec![1i64, 9], [2]);
    let (msg, line) = (panic_message(|| drop(logits.cross_entropy(&bad))), line!());
    assert_mentions(&msg, &["janus::cross_entropy: gather", "index 9", &here(line)]);
}

#[test]
fn reshape_and_from_vec_errors() {
    let a = Tensor::zeros([2, 3]);
    let (msg, line) = (panic_message(|| drop(a.reshape([4, -1]))), line!());
    assert_mentions(&msg, &["janus::reshape", "[2, 3]", "[4, -1]", &here(line)]);
    let (msg, line) = (panic_message(|| drop(Tensor::from_vec(vec![1.0f32; 5], [2, 3]))), line!());
    assert_mentions(&msg, &["janus::from_vec", "5 values", "[2, 3]", &here(line)]);
}
