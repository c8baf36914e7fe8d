use janus::prelude::*;

#[janus(dynamic = lr)]
fn step(w: &Tensor, g: &Tensor, lr: f64) -> Tensor {
    w - g * lr
}

fn main() {}
