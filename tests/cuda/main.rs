//! GPU tests: CPU/CUDA parity of every op (values and gradients), the Philox stream, compiled
//! graphs and `#[janus]` fragments on CUDA tensors (with CUDA-graph replays), the fuzz with
//! CUDA against the CPU, and the LSTM LM trained on both devices.
//!
//! Without a GPU each test prints "skipped: no CUDA driver" and passes; with
//! `JANUS_REQUIRE_CUDA=1` they fail instead. Run on a GPU machine by `scripts/gpu_suite.sh`.

mod fuzz_cuda;
mod lstm_cuda;
mod ops_cuda;
mod staged_cuda;

use janus::prelude::*;

/// `cuda:0`, or `None` (after printing why) when no usable GPU is present.
pub fn cuda() -> Option<Device> {
    if Device::Cuda(0).is_available() {
        return Some(Device::Cuda(0));
    }
    if std::env::var("JANUS_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
        panic!("JANUS_REQUIRE_CUDA=1 but CUDA is unusable: {}", janus::cuda::info());
    }
    eprintln!("skipped: no CUDA driver ({})", janus::cuda::info());
    None
}

/// Max error of `got` (any device) against `want`, relative to `want`'s largest magnitude (at
/// least 1e-3); NaN must match NaN and infinities must match exactly.
pub fn rel_error(got: &Tensor, want: &Tensor) -> Result<f64, String> {
    if got.dims() != want.dims() || got.dtype() != want.dtype() {
        return Err(format!("type {:?} {} vs {:?} {}", got.dims(), got.dtype(), want.dims(), want.dtype()));
    }
    let (g, w) = (got.to_vec::<f64>(), want.to_vec::<f64>());
    let scale = w.iter().filter(|v| v.is_finite()).fold(1e-3f64, |m, v| m.max(v.abs()));
    let mut worst: f64 = 0.0;
    for (a, b) in g.iter().zip(&w) {
        if a.is_nan() != b.is_nan() || ((a.is_infinite() || b.is_infinite()) && a != b) {
            return Err(format!("{a} vs {b}"));
        }
        if a.is_finite() {
            worst = worst.max((a - b).abs() / scale);
        }
    }
    Ok(worst)
}

/// Tolerance of CUDA against the CPU: summation order and transcendental implementations
/// differ, so f32 agrees to ~1e-5 relative, f64 to ~1e-12.
pub fn tol(d: DType) -> f64 {
    if d == DType::F64 { 1e-9 } else { 2e-5 }
}

#[test]
fn device_best_is_cuda_and_memory_is_counted() {
    let Some(dev) = cuda() else { return };
    assert_eq!(Device::best(), dev);
    let before = janus::cuda::memory_stats();
    let t = Tensor::ones([1024, 1024]).to_device(dev);
    let during = janus::cuda::memory_stats();
    assert!(during.allocated >= before.allocated + (4 << 20), "{before:?} -> {during:?}");
    assert!(during.peak_allocated >= during.allocated && during.reserved >= during.allocated);
    assert_eq!(t.device(), dev);
    assert_eq!(t.sum_all().item(), (1024 * 1024) as f32);
    drop(t);
    assert!(janus::cuda::memory_stats().allocated < during.allocated);
}

#[test]
fn bad_indices_are_reported_at_the_next_host_read() {
    let Some(dev) = cuda() else { return };
    let x = Tensor::ones([4, 3]).to_device(dev);
    let idx = Tensor::from_vec(vec![0i64, 7], [2]).to_device(dev);
    let y = x.index_select(0, &idx); // enqueued: the kernel flags index 7
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| y.sum_all().item())).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("index_select") && msg.contains("out of range"), "{msg}");
    // The error word is reset: later work reads fine.
    assert_eq!(x.sum_all().item(), 12.0);
}

#[test]
fn mixing_devices_is_an_error_naming_both() {
    let Some(dev) = cuda() else { return };
    let a = Tensor::ones([2, 2]).to_device(dev);
    let b = Tensor::ones([2, 2]);
    let err = std::panic::catch_unwind(|| &a + &b).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("cuda:0") && msg.contains("cpu") && msg.contains("add"), "{msg}");
    // A rank-0 CPU scalar joins any device.
    let c = &a * &Tensor::scalar(3.0);
    assert_eq!(c.device(), dev);
    assert_eq!(c.to_vec::<f32>(), vec![3.0; 4]);
}
