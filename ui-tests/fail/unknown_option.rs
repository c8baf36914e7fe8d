use janus::prelude::*;

#[janus(fast = true)]
fn step(x: &Tensor) -> Tensor {
    x.exp()
}

fn main() {}
