use janus::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

static CALLS: AtomicUsize = AtomicUsize::new(0);

#[janus(profile = 3, max_variants = 2, speculate = false, dynamic(lr))]
fn everything(w: &Tensor, g: &Tensor, lr: f64) -> Tensor {
    const SCALE: f64 = 2.0;
    fn helper(t: &Tensor) -> Tensor {
        t.abs()
    }
    CALLS.fetch_add(1, Ordering::Relaxed);
    let w2 = w - g * lr;
    println!("step {}", CALLS.load(Ordering::Relaxed));
    let n = unsafe { std::ptr::read(&3usize) };
    let out = helper(&w2) * SCALE + n as f64;
    out
}

fn main() {
    let (w, g) = (Tensor::ones([2]), Tensor::ones([2]));
    for k in 0..4 {
        let _ = everything(&w, &g, 0.1 * k as f64);
    }
}
