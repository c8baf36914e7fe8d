//! Replays one block in a loop, for instruction counts and A/B timings of the hit path (docs/perf/
//! 2026-12-01.md):
//! `cargo run --release --example replay_loop -- CALLS [no_kernel|tiny|act] [janus|eager]`.
//! Under callgrind, `scripts/count_atomics.py` counts the instructions and the atomic
//! operations (lock-prefixed instructions) each call executes.

use janus::prelude::*;
#[path = "common/cartpole.rs"]
mod cartpole;

/// A block whose graph runs no kernel (as `bench --only hit`'s).
#[janus(min_ops = 1)]
fn no_kernel(x: &Tensor) -> Tensor {
    let y = x.reshape([1, 1]);
    y
}
/// One fused kernel on one element.
#[janus(min_ops = 1)]
fn tiny(x: &Tensor) -> Tensor {
    let y = x * 2.0 + 1.0;
    y
}
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: usize = a.get(1).map(|s| s.parse().unwrap()).unwrap_or(20_000_000);
    let which = a.get(2).map(String::as_str).unwrap_or("no_kernel");
    let mode = if a.get(3).map(String::as_str) == Some("eager") { Mode::Eager } else { Mode::Janus };
    let x = Tensor::ones([1]);
    let policy = cartpole::Policy::new();
    let obs = Tensor::from_vec(vec![0.01f32, -0.02, 0.03, 0.01], [1, 4]);
    let mut f: Box<dyn FnMut()> = match which {
        "tiny" => Box::new(|| _ = std::hint::black_box(tiny(&x))),
        "act" => Box::new(|| _ = std::hint::black_box(no_grad(|| cartpole::act(&policy, &obs)))),
        _ => Box::new(|| _ = std::hint::black_box(no_kernel(std::hint::black_box(&x)))),
    };
    janus::with_mode(mode, || {
        for _ in 0..8 {
            f();
        }
        let t = std::time::Instant::now();
        for _ in 0..n {
            f();
        }
        println!("{:.1} ns/call", t.elapsed().as_nanos() as f64 / n as f64);
    });
}
