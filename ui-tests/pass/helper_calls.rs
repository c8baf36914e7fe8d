//! Helper calls in blocks that the macro hoists into host statements once they return host
//! scalars: free functions, associated functions, methods of `self`, with plain arguments,
//! in `let`s, operators, loop bounds, and with values that move.

use janus::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

static DEPTH: AtomicUsize = AtomicUsize::new(2);

fn depth() -> usize {
    DEPTH.load(Ordering::Relaxed)
}

fn scale(k: usize, by: &f64) -> f64 {
    k as f64 * by
}

fn consume(v: Vec<f64>) -> f64 {
    v.iter().sum()
}

struct Config;

impl Config {
    fn temperature() -> f32 {
        0.5
    }
}

#[derive(Module)]
struct Net {
    w: Tensor,
}

impl Net {
    fn gain(&self) -> f64 {
        1.5
    }

    #[janus]
    fn forward(&self, x: &Tensor, k: usize) -> Tensor {
        let by = 2.0;
        let h = x.matmul(&self.w) * self.gain();
        let mut y = h.tanh() / scale(k, &by);
        for _ in 0..depth() {
            y = y.tanh() * Config::temperature() as f64;
        }
        let v = vec![1.0, 2.0];
        y * consume(v)
    }
}

fn main() {
    let net = Net { w: Tensor::ones([3, 3]) };
    for k in 1..5 {
        let _ = net.forward(&Tensor::ones([2, 3]), k);
    }
}
