use janus::prelude::*;

// `lrr` binds nothing, so `lr` would stay a constant of the graph: one variant per value.
#[janus(dynamic(lrr))]
fn step(w: &Tensor, g: &Tensor, lr: f64) -> Tensor {
    w - g * lr
}

// No close name: the error lists the parameters.
#[janus(dynamic(momentum))]
fn decay(w: &Tensor, rate: f64) -> Tensor {
    w * rate
}

fn main() {}
